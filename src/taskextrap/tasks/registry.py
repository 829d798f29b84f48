"""Look up a family by built-in name or by ``module:attr`` (a user's own ParametricFamily)."""

from __future__ import annotations

import importlib

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.builtin import PARAMETER_FAMILIES
from taskextrap.tasks.family import ParametricFamily


def load_object(spec: str, what: str):
    """The object ``attr`` of a user's ``module:attr`` spec; a one-line TaskextrapError if it cannot be loaded."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TaskextrapError(f"cannot load {what} {spec!r}: cannot import module {module_name!r}: {exc}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise TaskextrapError(f"cannot load {what} {spec!r}: module {module_name!r} has no attribute {attr!r}")
    return obj


def resolve(spec, kind: type, builtins: dict, what: str):
    """The ``kind`` object ``spec`` names: an instance of ``kind`` as it is, a built-in name (a key
    of ``builtins``), or a user's ``module:attr`` (an instance, or a callable that returns one).
    Anything else is a one-line TaskextrapError that says what was expected."""
    if isinstance(spec, kind):
        return spec
    if not isinstance(spec, str):
        raise TaskextrapError(f"a {what} is a name or module:attr, got {type(spec).__name__}")
    if ":" in spec:
        obj = load_object(spec, what)
        if callable(obj) and not isinstance(obj, kind):
            obj = obj()
        if not isinstance(obj, kind):
            raise TaskextrapError(f"{spec!r} is not a {kind.__module__}.{kind.__name__}")
        return obj
    if spec not in builtins:
        raise TaskextrapError(f"unknown {what} {spec!r}; choose from {sorted(builtins)} or module:attr")
    return builtins[spec]


def get_family(spec: "str | ParametricFamily") -> ParametricFamily:
    """Return the family named ``spec``: a built-in name, ``module:attr``, or a family itself
    (:func:`resolve`); a user's family must have the parameter experiment's regions."""
    family = resolve(spec, ParametricFamily, PARAMETER_FAMILIES, "family")
    if isinstance(spec, str) and ":" in spec and (
            "F2" not in family.regions or set(family.train_regions) != {"F1_1", "F1_2"}):
        raise TaskextrapError(f"{spec!r}: the parameter experiment needs regions F1_1, F1_2 (train) and F2")
    return family
