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

from collections.abc import Mapping
from typing import TypeVar


from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.tasks.builtin import PARAMETER_FAMILIES, PRIMITIVE_SETS
from taskextrap.tasks.family import ParametricFamily, check_family  # noqa: F401 - check_family re-exported
from taskextrap.tasks.primitives import CompositionFamily, check_primitives
from taskextrap.tasks.specs import load_object
from taskextrap.tasks.checks import (  # noqa: F401 - the checks, re-exported where they were
    CHECK_POINTS,
    CHECK_TASKS,
    check_ladder,
    check_once,
    one_line,
)

T = TypeVar("T")


def is_user_spec(spec) -> bool:
    """Whether ``spec`` names a user's object as ``module:attr`` (not a built-in name or an object)."""
    return isinstance(spec, str) and ":" in spec


def resolve(spec, kind: type[T], builtins: Mapping[str, T], what: str) -> T:
    """The ``kind`` object ``spec`` names: an instance of ``kind`` as it is, a built-in name (a key
    of ``builtins``), or a user's ``module:attr`` naming an instance of ``kind`` (never called,
    even when it is callable). Anything else is a one-line TaskextrapError that says what was
    expected."""
    if isinstance(spec, kind):
        return spec
    if not isinstance(spec, str):
        raise TaskextrapError(f"a {what} is a name or module:attr, got {type(spec).__name__}")
    if is_user_spec(spec):
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


def _label(spec, name: str) -> str:
    return f"family {spec!r}" if isinstance(spec, str) else f"family {name!r}"


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
