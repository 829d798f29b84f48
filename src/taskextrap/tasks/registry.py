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


def get_family(spec: "str | ParametricFamily") -> ParametricFamily:
    """Return the family named ``spec``: a built-in name, ``module:attr``, or a family itself."""
    if isinstance(spec, ParametricFamily):
        return spec
    if ":" in spec:
        family = load_object(spec, "family")
        if callable(family) and not isinstance(family, ParametricFamily):
            family = family()
        if not isinstance(family, ParametricFamily):
            raise TaskextrapError(f"{spec!r} is not a taskextrap.tasks.ParametricFamily")
        if "F2" not in family.regions or set(family.train_regions) != {"F1_1", "F1_2"}:
            raise TaskextrapError(f"{spec!r}: the parameter experiment needs regions F1_1, F1_2 (train) and F2")
        return family
    if spec not in PARAMETER_FAMILIES:
        raise TaskextrapError(f"unknown family {spec!r}; choose from {sorted(PARAMETER_FAMILIES)} or module:attr")
    return PARAMETER_FAMILIES[spec]
