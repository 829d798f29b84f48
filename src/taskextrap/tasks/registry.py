"""Look up a family by built-in name or by ``module:attr`` (a user's own ParametricFamily, Ladder or
CompositionFamily), and check a user's family before anything is fitted.

A ``module:attr`` spec is imported with every exception caught (a module that fails to import
is one line, not a traceback), must name an object of the type the experiment takes (a callable
found there is never called: ``builtins:input`` would wait on standard input), and the family is
evaluated once on a small sample of every region (its output must have the input's shape and be
finite), so a broken formula is reported in one line naming the family and the region instead of
failing deep in a fit minutes later. A ladder's basis is checked term by term, and a primitive
set's primitive families one by one, the same way.
"""

from __future__ import annotations

import functools
import importlib
import math
import weakref
from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.tasks.builtin import PARAMETER_FAMILIES, PRIMITIVE_SETS
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.primitives import CompositionFamily
from taskextrap.validation import check_output

T = TypeVar("T")

# The sample a user's family is checked on: a few tasks of every region at a few inputs.
CHECK_TASKS, CHECK_POINTS = 8, 16


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception raised by a user's code."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def load_object(spec: str, what: str):
    """The object ``attr`` of a user's ``module:attr`` spec (``attr`` may be dotted); a one-line
    TaskextrapError if it cannot be loaded, whatever the module raises while it is imported."""
    module_name, _, attr = spec.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not module_name or not attr:
        raise TaskextrapError(f"cannot load {what} {spec!r}: give it as module:attr, both parts non-empty")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise TaskextrapError(
                f"cannot load {what} {spec!r}: cannot import module {module_name!r} (is its folder on PYTHONPATH?)"
            ) from None
        raise TaskextrapError(
            f"cannot load {what} {spec!r}: importing {module_name!r} failed: {_one_line(exc)}"
        ) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module raised while it was imported
        raise TaskextrapError(
            f"cannot load {what} {spec!r}: importing {module_name!r} failed: {_one_line(exc)}"
        ) from None
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - AttributeError, or a module __getattr__ that raises
            raise TaskextrapError(
                f"cannot load {what} {spec!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    return obj


def resolve(spec, kind: type[T], builtins: Mapping[str, T], what: str) -> T:
    """The ``kind`` object ``spec`` names: an instance of ``kind`` as it is, a built-in name (a key
    of ``builtins``), or a user's ``module:attr`` naming an instance of ``kind`` (never called,
    even when it is callable). Anything else is a one-line TaskextrapError that says what was
    expected."""
    if isinstance(spec, kind):
        return spec
    if not isinstance(spec, str):
        raise TaskextrapError(f"a {what} is a name or module:attr, got {type(spec).__name__}")
    if ":" in spec:
        obj = load_object(spec, what)
        if not isinstance(obj, kind):
            raise TaskextrapError(
                f"{spec!r} is a {type(obj).__name__}, not a {kind.__module__}.{kind.__name__}: "
                f"point module:attr at a {kind.__name__} object"
            )
        return obj
    if spec not in builtins:
        raise TaskextrapError(
            f"unknown {what} {spec!r}; choose from {sorted(builtins)} or module:attr" + did_you_mean(spec, builtins)
        )
    return builtins[spec]


def get_family(
    spec: str | ParametricFamily,
    builtins: Mapping[str, ParametricFamily] | None = None,
    held_out: tuple[str, ...] = ("F2",),
    experiment: str = "parameter",
) -> ParametricFamily:
    """Return the family named ``spec``: a name among ``builtins`` (default: the Table-1 families),
    ``module:attr``, or a family itself (:func:`resolve`); a user's family must have the training
    regions F1_1, F1_2 and the ``held_out`` regions ``experiment`` scores, and pass
    :func:`check_family`."""
    builtins = PARAMETER_FAMILIES if builtins is None else builtins
    family = resolve(spec, ParametricFamily, builtins, "family")
    if builtins.get(family.name) is family:
        return family
    if set(family.train_regions) != {"F1_1", "F1_2"} or any(r not in family.regions for r in held_out):
        raise TaskextrapError(
            f"{_label(spec, family.name)}: the {experiment} experiment needs regions named exactly "
            f"F1_1, F1_2 (train_regions) and {', '.join(held_out)} (held out), got regions "
            f"{sorted(family.regions)} with train_regions {sorted(family.train_regions)}"
        )
    family.check(_label(spec, family.name))
    return family


def _label(spec, name: str) -> str:
    return f"family {spec!r}" if isinstance(spec, str) else f"family {name!r}"


def check_family(family: ParametricFamily, label: str | None = None) -> None:
    """Evaluate ``family``'s formula once on :data:`CHECK_TASKS` tasks of every region at
    :data:`CHECK_POINTS` inputs spread over its domain; a one-line TaskextrapError naming the
    family and the region if the formula raises, returns something of another shape than its
    input ``x`` (n, m) (a broadcastable (n, 1) included), a non-real value, or NaN/inf, that does
    not depend on x in some region, or whose outputs do not vary at all over the training regions
    (a constant: every scale is relative to that spread)."""
    label = label or f"family {family.name!r}"
    rng = np.random.default_rng(0)
    training = []
    for region in family.regions:
        params = family.sample_params(region, CHECK_TASKS, rng)
        x = _inputs(rng, family.domain, label)
        kwargs = {name: params[:, i : i + 1] for i, name in enumerate(family.param_names)}
        what = f"{label}, region {region!r}: its formula"
        y = _check_values(functools.partial(family.fn, x, **kwargs), x.shape, what)
        if not np.ptp(y, axis=1).any():  # every task constant in x: the formula ignores its input
            raise TaskextrapError(f"{what} does not depend on x (each task's outputs are constant over the domain)")
        if region in family.train_regions:
            training.append(y)
    if np.ptp(np.concatenate(training)) == 0:  # every scale and noise level is relative to this spread
        raise TaskextrapError(
            f"{label}: its outputs do not vary over the training regions "
            f"({', '.join(family.train_regions)}): there is nothing to learn"
        )


def check_ladder(ladder, label: str | None = None) -> None:
    """Evaluate ``ladder``'s basis once for every term p = 0..test_level at :data:`CHECK_POINTS`
    inputs over its domain; a one-line TaskextrapError naming the ladder and the term (the
    level it first appears in) for an exception, a wrong shape (exactly x's: a broadcastable
    (n, 1) or scalar is refused), a non-real value or NaN/inf, and for a term p >= 1 that does
    not depend on x (term 0 is the constant term, ``x ** 0`` in the polynomial ladder)."""
    label = label or f"ladder {ladder.name!r}"
    x = _inputs(np.random.default_rng(0), ladder.domain, label)
    for p in range(ladder.n_coefs):
        what = f"{label}: basis term {p} (level {p})"
        y = _check_values(functools.partial(ladder.basis, x, p), x.shape, what)
        if p >= 1 and not np.ptp(y, axis=1).any():  # a constant term p >= 1 repeats term 0: no new level
            raise TaskextrapError(f"{what} does not depend on x; only term 0 (the constant term) may be constant")


def get_primitive_set(
    spec: str | CompositionFamily, builtins: Mapping[str, CompositionFamily] | None = None, depth3: bool = False
) -> CompositionFamily:
    """Return the primitive set named ``spec``: a name among ``builtins`` (default: the built-in
    sets, :data:`taskextrap.tasks.builtin.PRIMITIVE_SETS`), ``module:attr`` of a user's
    :class:`~taskextrap.tasks.primitives.CompositionFamily`, or a set itself (:func:`resolve`).
    A set that is not a built-in one must pass :func:`check_primitives`; with ``depth3`` (the
    ``composition-depth3`` experiment) it must carry a depth-3 ``recipe_split``."""
    builtins = PRIMITIVE_SETS if builtins is None else builtins
    primitive_set = resolve(spec, CompositionFamily, builtins, "primitive set")
    label = f"primitive set {spec!r}" if isinstance(spec, str) else f"primitive set {primitive_set.name!r}"
    if depth3 and primitive_set.recipe_split is None:
        raise TaskextrapError(
            f"{label}: composition-depth3 needs its recipe_split (a depth-3 "
            "taskextrap.tasks.chains.RecipeSplit over its families), it has none"
        )
    if builtins.get(primitive_set.name) is not primitive_set:  # checked once per object, as families are
        check_once(primitive_set, lambda: check_primitives(primitive_set, label))
    return primitive_set


def check_primitives(primitive_set: CompositionFamily, label: str | None = None) -> None:
    """Evaluate every primitive family of ``primitive_set`` once on :data:`CHECK_TASKS` functions
    at :data:`CHECK_POINTS` inputs spread over its curve grid (an outer function is read at its
    inner function's outputs, anywhere on the grid); a one-line TaskextrapError naming the set
    and the primitive family if ``fn`` raises, returns something of another shape than its input
    ``x`` (n, m) (a broadcastable (n, 1) or scalar included), a non-real value or NaN/inf, or
    does not depend on x (every sampled function constant), or if the family has no parameter
    or the grid is too wide to draw inputs from."""
    label = label or f"primitive set {primitive_set.name!r}"
    rng = np.random.default_rng(0)
    lo, hi, _ = primitive_set.grid
    for family in primitive_set.families:
        what = f"{label}, primitive family {family.name!r}"
        if not family.params:
            raise TaskextrapError(f"{what}: params is empty; a family needs at least one parameter to sample")
        params = family.sample(CHECK_TASKS, rng)
        x = _inputs(rng, (lo, hi), label)
        kwargs = {name: params[:, i : i + 1] for i, name in enumerate(family.params)}
        y = _check_values(functools.partial(family.fn, x, **kwargs), x.shape, f"{what}: its fn")
        if not np.ptp(y, axis=1).any():
            raise TaskextrapError(f"{what}: its fn does not depend on x (each function is constant over the grid)")


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


def _inputs(rng: np.random.Generator, domain: tuple[float, float], label: str) -> np.ndarray:
    """:data:`CHECK_TASKS` rows of :data:`CHECK_POINTS` sorted inputs drawn uniformly over
    ``domain``; a one-line TaskextrapError if the domain is too wide to draw from (its width
    overflows a float)."""
    lo, hi = domain
    if not math.isfinite(float(hi) - float(lo)):
        raise TaskextrapError(f"{label}: its domain {tuple(domain)} is too wide to draw inputs from")
    return np.sort(rng.uniform(lo, hi, size=(CHECK_TASKS, CHECK_POINTS)), axis=1)


def _check_values(evaluate, shape: tuple, what: str) -> np.ndarray:
    """Run ``evaluate()`` (a user's formula), check its output against input shape ``shape`` and
    return it."""
    try:
        with np.errstate(all="ignore"):  # a NaN or inf is reported below, once, by name
            raw = evaluate()
    except Exception as exc:  # noqa: BLE001 - whatever the user's formula raises, one line naming it
        raise TaskextrapError(f"{what} raised {_one_line(exc)}") from None
    out = check_output(raw, shape, what, x_word="inputs x")
    if not np.all(np.isfinite(out)):
        raise TaskextrapError(f"{what} returned NaN or inf on its own domain")
    return out
