"""What the checks a user's family, ladder or primitive set passes before any work share: a
formula evaluated once on a small sample, with one-line errors naming what is wrong, and the
memo that runs each check once per object. The checks themselves sit beside what they check
(``tasks.family.check_family``, ``tasks.primitives.check_primitives``, :func:`check_ladder`
here); this module imports none of them, so no check has an import circle.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.validation import check_output

# The sample a user's family is checked on: a few tasks of every region at a few inputs.
CHECK_TASKS, CHECK_POINTS = 8, 16


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception raised by a user's code."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def check_ladder(ladder, label: str | None = None) -> None:
    """Evaluate ``ladder``'s basis once for every term p = 0..test_level at :data:`CHECK_POINTS`
    inputs over its domain; a one-line TaskextrapError naming the ladder and the term (the
    level it first appears in) for an exception, a wrong shape (exactly x's: a broadcastable
    (n, 1) or scalar is refused), a non-real value or NaN/inf, and for a term p >= 1 that does
    not depend on x (term 0 is the constant term, ``x ** 0`` in the polynomial ladder)."""
    label = label or f"ladder {ladder.name!r}"
    x = sample_inputs(np.random.default_rng(0), ladder.domain, label)
    for p in range(ladder.n_coefs):
        what = f"{label}: basis term {p} (level {p})"
        y = checked_values(functools.partial(ladder.basis, x, p), x.shape, what)
        if p >= 1 and not np.ptp(y, axis=1).any():  # a constant term p >= 1 repeats term 0: no new level
            raise TaskextrapError(f"{what} does not depend on x; only term 0 (the constant term) may be constant")


# Objects whose check passed, by id (a weak reference tells a live object from a new one at a
# reused id). Kept beside the objects, not in them: an attribute would change the code hash of
# any user formula that reads the object (``provenance.callable_hash`` hashes an instance's
# attributes), so a unit's key would depend on whether the object had been checked yet.
_PASSED: dict[int, weakref.ref] = {}


def check_once(obj, check: Callable[[], None]) -> None:
    """Run ``check()`` (which raises if ``obj`` is unfit) unless it passed for this very object
    before; memoised by identity, so equal copies are checked on their own."""
    key = id(obj)
    ref = _PASSED.get(key)
    if ref is not None and ref() is obj:
        return
    check()

    def forget(_ref: weakref.ref) -> None:  # the object is gone: its id may name another one next
        _PASSED.pop(key, None)

    _PASSED[key] = weakref.ref(obj, forget)


def sample_inputs(rng: np.random.Generator, domain: tuple[float, float], label: str) -> np.ndarray:
    """:data:`CHECK_TASKS` rows of :data:`CHECK_POINTS` sorted inputs drawn uniformly over
    ``domain``; a one-line TaskextrapError if the domain is too wide to draw from (its width
    overflows a float)."""
    lo, hi = domain
    if not math.isfinite(float(hi) - float(lo)):
        raise TaskextrapError(f"{label}: its domain {tuple(domain)} is too wide to draw inputs from")
    return np.sort(rng.uniform(lo, hi, size=(CHECK_TASKS, CHECK_POINTS)), axis=1)


def checked_values(evaluate, shape: tuple, what: str) -> np.ndarray:
    """Run ``evaluate()`` (a user's formula), check its output against input shape ``shape`` and
    return it."""
    try:
        with np.errstate(all="ignore"):  # a NaN or inf is reported below, once, by name
            raw = evaluate()
    except Exception as exc:  # noqa: BLE001 - whatever the user's formula raises, one line naming it
        raise TaskextrapError(f"{what} raised {one_line(exc)}") from None
    out = check_output(raw, shape, what, x_word="inputs x")
    if not np.all(np.isfinite(out)):
        raise TaskextrapError(f"{what} returned NaN or inf on its own domain")
    return out
