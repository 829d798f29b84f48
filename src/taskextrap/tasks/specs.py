"""How a family, ladder or primitive family is named in a file and found again: a built-in's
table and name, a user's ``module:attr`` (with the hash of its code), or, for a family that is
data (an observed library), its own arrays.

A library type writes its state with these (``TaskSet.state``, ``LadderSet.state``,
``PrimitiveSet.state``) and reads it back with them, so saving a fitted estimator needs no entry
per library type (``estimators.saving``). The built-in tables are registered by the modules
that define them (:func:`register_builtins`); this module names those modules, and imports them
by name only when a table is read, so that it imports none of them and they can all import it.

    >>> task_spec(builtin_tables()["ladder"]["polynomial"])
    {'builtin': 'polynomial', 'table': 'ladder'}
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Mapping
from typing import Any, Protocol

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.tasks.checks import one_line

# The tables a saved spec may name, in the order a family is looked up in them (a family in two
# tables is named by the first), and the modules that register them.
BUILTIN_TABLES = ("parameter", "multistep", "ladder", "primitive", "primitive-depth3", "primitive-depth3-raw")
DEFINED_IN = (
    "taskextrap.tasks.builtin",
    "taskextrap.tasks.ladder",
    "taskextrap.tasks.primitives",
    "taskextrap.tasks.chains",
    "taskextrap.tasks.observed",
)


class Stateful(Protocol):
    """What saves itself: a library type, or a family that is data (an observed library's)."""

    def state(self, prefix: str) -> tuple[dict, dict]: ...

    @classmethod
    def from_state(cls, arrays: Mapping, desc: dict, prefix: str) -> Any: ...


_TABLES: dict[str, Mapping[str, Any]] = {}
_DATA_FAMILIES: dict[str, type[Stateful]] = {}  # the key a family's state description holds -> its class


def register_builtins(table: str, objects: Mapping[str, Any]) -> None:
    """Register the built-in families (or ladders) ``objects`` (name -> object) as ``table``, one
    of :data:`BUILTIN_TABLES`; called once by the module that defines them."""
    if table not in BUILTIN_TABLES:
        raise TaskextrapError(f"unknown built-in table {table!r}; choose from {list(BUILTIN_TABLES)}")
    _TABLES[table] = objects


def register_data_family(key: str, cls: type[Stateful]) -> None:
    """Register ``cls``, a family that is data (its ``state(prefix)`` writes its tasks' arrays and a
    description holding ``key``; ``cls.from_state(arrays, desc, prefix)`` reads them back)."""
    _DATA_FAMILIES[key] = cls


def builtin_tables() -> dict[str, Mapping[str, Any]]:
    """Every built-in table by name, in :data:`BUILTIN_TABLES`' order (the defining modules are
    imported first, by name)."""
    for module in DEFINED_IN:
        importlib.import_module(module)
    return {table: _TABLES[table] for table in BUILTIN_TABLES}


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
            f"cannot load {what} {spec!r}: importing {module_name!r} failed: {one_line(exc)}"
        ) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module raised while it was imported
        raise TaskextrapError(
            f"cannot load {what} {spec!r}: importing {module_name!r} failed: {one_line(exc)}"
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


def _code(obj) -> Any:
    """The user code a family or ladder computes with (its formula, or its basis)."""
    return getattr(obj, "fn", None) or obj.basis


def task_spec(obj: Any) -> dict[str, str]:
    """How to find a family or ladder ``obj`` again: a built-in's name, or ``module:attr`` of one
    defined at the top level of an importable module (with its code's hash); a one-line error
    otherwise."""
    from taskextrap.provenance import callable_hash

    name = obj.name
    for table, builtins in builtin_tables().items():
        if builtins.get(name) is obj:
            return {"builtin": name, "table": table}
    module = getattr(_code(obj), "__module__", None)
    attrs = [a for a, v in vars(sys.modules.get(module) or object()).items() if v is obj] if module else []
    if not attrs or module == "__main__":
        raise TaskextrapError(
            f"{type(obj).__name__} {name!r} cannot be found again when the model is loaded: define it at the "
            "top level of an importable module (not __main__), so that it is module:attr"
        )
    return {"module_attr": f"{module}:{attrs[0]}", "code_hash": callable_hash(_code(obj))}


def task_object(spec: dict, kind: type):
    """The family or ladder :func:`task_spec` described, of type ``kind`` (a warning when a user's
    code changed since)."""
    from taskextrap.provenance import callable_hash

    if "builtin" in spec:
        return builtin_tables()[spec["table"]][spec["builtin"]]
    obj = load_object(spec["module_attr"], kind.__name__)
    if not isinstance(obj, kind):
        raise TaskextrapError(f"{spec['module_attr']} is a {type(obj).__name__}, not the saved {kind.__name__}")
    if callable_hash(_code(obj)) != spec["code_hash"]:
        warnings.warn(
            f"{spec['module_attr']} changed since the model was saved (code {spec['code_hash']} -> "
            f"{callable_hash(_code(obj))}): its predictions may differ",
            TaskextrapWarning,
            stacklevel=5,
        )
    return obj


def family_state(family: Any, prefix: str) -> tuple[dict, dict]:
    """A family as (arrays, description): its own arrays under ``prefix`` for a family that is data
    (one with ``state``), none and :func:`task_spec` for one that is a formula."""
    if hasattr(family, "state"):
        return family.state(prefix)
    return {}, task_spec(family)


def family_from_state(arrays: Mapping, desc: dict, kind: type, prefix: str):
    """The family :func:`family_state` described."""
    builtin_tables()  # the data families register where they are defined
    for key, cls in _DATA_FAMILIES.items():
        if key in desc:
            return cls.from_state(arrays, desc, prefix)
    return task_object(desc, kind)
