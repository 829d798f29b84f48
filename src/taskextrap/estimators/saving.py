"""Fitted estimators saved to a folder and loaded back, as PEFT and transformers do it.

``est.save_pretrained(folder)`` writes two files:

- ``config.json``: the estimator's class, its constructor arguments as given (``get_params``,
  in a JSON form that keeps their types: a tuple stays a tuple, a ``TrainConfig`` a
  ``TrainConfig``), how to find its library again (a built-in family's name or a user family's
  ``module:attr``, with the hash of its code), the file format, the taskextrap version and the
  hash of the package source that fitted it;
- ``model.safetensors``: every array the fit learned (weights, embeddings, calibration) and the
  library's own arrays (a ``TaskSet``'s parameters and regions, an observed library's points,
  a ``LadderSet``'s coefficients, levels and parents, a ``PrimitiveSet``'s families, parameters
  and curves), never a pickle.

``Class.from_pretrained(folder)`` rebuilds the estimator from these files alone: the library is
not drawn again (its tasks are read back), nothing is fitted, and the predictions and intervals
are those of the estimator that was saved, to the bit, under the same taskextrap source. A
folder of another format, a damaged or missing file, a missing array or a library whose family
cannot be found is a one-line error; another taskextrap source or a user family whose code
changed is one warning line (its numbers may differ).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.tasks.regimes import REGIMES
from taskextrap.tasks.specs import Stateful
from taskextrap.files import read_json, read_state, write_json_atomic, write_state_atomic

FORMAT = 1  # the folder layout and the meaning of its fields; another value is refused
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
LIBRARY_PREFIX = "library."  # the library's arrays in model.safetensors (an observed one's points: library.observed.)

# Settings added after models were saved, with the value that gives a folder saved without them
# the predictions it was saved with: ``reference_library`` (issue 65) scales the objective's
# candidates with the library; a model saved before scored ``retrieve`` + ``screen`` at every size.
SAVED_BEFORE = {"reference_library": None}


# ----------------------------------------------------------------------------- arguments


def _value_types() -> dict[str, type]:
    """The argument types a config may hold, by name: an allow-list, so that loading a config
    only ever builds these (never an arbitrary class named in a file)."""
    from taskextrap.operators.train import TrainConfig
    from taskextrap.tasks.chains import RecipeSplit
    from taskextrap.tasks.observe import ObservationProtocol
    from taskextrap.tasks.primitives import PairSplit

    return {t.__name__: t for t in (TrainConfig, ObservationProtocol, PairSplit, RecipeSplit)}


def encode(value: Any, where: str = "argument") -> Any:
    """``value`` as JSON that :func:`decode` turns back into an equal value of the same type:
    numbers, strings, None, lists, dicts of strings, tuples (``{"tuple": [...]}``) and the
    dataclasses of :func:`_value_types` (``{"type": name, "fields": {...}}``)."""
    types = _value_types()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, tuple):
        return {"tuple": [encode(v, where) for v in value]}
    if isinstance(value, list):
        return [encode(v, where) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode(v, where) for k, v in value.items()}}
    if type(value).__name__ in types and type(value) is types[type(value).__name__]:
        fields = {f.name: encode(getattr(value, f.name), where) for f in dataclasses.fields(value) if f.init}  # type: ignore[arg-type]
        return {"type": type(value).__name__, "fields": fields}
    raise TaskextrapError(
        f"{where} is a {type(value).__name__}, which a saved config cannot hold "
        f"(numbers, strings, tuples, lists and {', '.join(types)} can)"
    )


def decode(value: Any) -> Any:
    """The value :func:`encode` wrote."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"tuple"}:
        return tuple(decode(v) for v in value["tuple"])
    if set(value) == {"dict"}:
        return {k: decode(v) for k, v in value["dict"].items()}
    types = _value_types()
    if set(value) == {"type", "fields"} and value["type"] in types:
        return types[value["type"]](**{k: decode(v) for k, v in value["fields"].items()})
    raise TaskextrapError(f"a saved argument {json.dumps(value)[:60]} is not one this taskextrap writes")


# ----------------------------------------------------------------------------- libraries


def library_state(library) -> tuple[dict[str, np.ndarray], dict]:
    """A library as arrays and a description: its own ``state()`` (``TaskSet``, ``LadderSet``,
    ``PrimitiveSet``: every regime's library type, ``tasks.regimes``)."""
    if type(library) not in _library_types().values():
        raise TaskextrapError(
            f"saving a library of {type(library).__name__} is not supported yet "
            f"(a {', '.join(sorted(_library_types()))} is)"
        )
    return library.state(LIBRARY_PREFIX)


def library_fingerprint(library) -> str:
    """A hash of a library's tasks (their arrays, its kind and its families' names): two libraries
    with the same fingerprint hold the same tasks."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    family = getattr(library, "family", None)
    names = [f.name for f in getattr(library, "families", ())] or [getattr(family, "name", "")]
    h.update(f"{type(library).__name__}|{'|'.join(names)}".encode())
    arrays = {k: getattr(library, k, None) for k in ("params", "region", "level", "parent", "family", "grid", "curves")}
    tasks = getattr(family, "tasks", None)  # an observed library's points
    if tasks is not None:
        arrays |= {"x": tasks.x, "y": tasks.y, "offsets": tasks.offsets}
    for k, v in sorted(arrays.items()):
        if isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v.astype(str) if v.dtype == object else v)
            h.update(f"{k}{a.shape}{a.dtype}".encode())
            h.update(a.data)
    return h.hexdigest()


def library_from_state(arrays: dict[str, np.ndarray], desc: dict):
    """The library :func:`library_state` saved: the same tasks of the same family or ladder."""
    kind = _library_types().get(str(desc.get("kind")))
    if kind is None:
        raise TaskextrapError(f"the saved library is of kind {desc.get('kind')!r}, which this taskextrap cannot load")
    return kind.from_state(arrays, desc, LIBRARY_PREFIX)


def _library_types() -> dict[str, type[Stateful]]:
    """Every regime's library type by class name (``tasks.regimes``)."""
    return {regime.library.__name__: regime.library for regime in REGIMES.values()}


# ----------------------------------------------------------------------------- folders


def save_pretrained(estimator, folder: str | Path, library: bool = True) -> Path:
    """Write fitted ``estimator`` into ``folder`` (created; its two files replaced atomically):
    see the module's description. ``library=False`` writes the library's fingerprint instead of
    the library (for fits whose loader has the library at hand: the experiments' shared fits;
    ``load_pretrained`` then needs it). Returns the folder."""
    from taskextrap import __version__
    from taskextrap.provenance import source_hash

    if not getattr(estimator, "saveable", False):
        raise TaskextrapError(
            f"saving a {type(estimator).__name__} is not supported yet; these can be saved: "
            f"{', '.join(sorted(_saveable(type(estimator))))}"
        )
    estimator.check_is_fitted()
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise TaskextrapError(f"cannot save into {folder}: it is a file, not a folder")
    state, meta = estimator.fitted_state()
    lib = estimator.library_ if hasattr(estimator, "library_") else estimator.primitives_  # composition's
    if library:
        lib_arrays, desc = library_state(lib)
    else:
        lib_arrays, desc = {}, {"kind": "supplied", "fingerprint": library_fingerprint(lib)}
    params = {k: encode(v, f"{type(estimator).__name__}({k}=...)") for k, v in estimator.get_params().items()}
    config = {
        "format": FORMAT,
        "class": type(estimator).__name__,
        "params": params,
        "library": desc,
        "state": meta,
        "taskextrap": __version__,
        "source_hash": source_hash(),
    }
    write_state_atomic(folder / WEIGHTS, {**state, **lib_arrays}, {"format": FORMAT, "class": config["class"]})
    write_json_atomic(folder / CONFIG, config)
    return folder


def load_pretrained(folder: str | Path, expected: type, library=None, trust_code: bool = False):
    """The fitted estimator :func:`save_pretrained` wrote into ``folder`` (of class ``expected``
    or a subclass). ``library``: the library it was fitted on, used instead of the saved copy
    (the same tasks, or a one-line error); needed when it was saved without one.

    A library whose family is a user's ``module:attr`` is found again by importing that module,
    which runs its code: a folder is data, so that happens only with ``trust_code=True`` (a
    one-line refusal naming the module otherwise, before anything is imported). Built-in
    families and observed data need no trust."""
    from taskextrap.provenance import source_hash

    folder = Path(folder)
    if not getattr(expected, "saveable", False):  # before any file is read
        raise TaskextrapError(
            f"{expected.__name__} cannot be loaded yet; these can: {', '.join(sorted(_saveable(expected)))}"
        )
    if not (folder / CONFIG).is_file():
        raise TaskextrapError(f"{folder} holds no saved model: {CONFIG} is missing (save one with save_pretrained)")
    config = read_json(folder / CONFIG)
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        got = config.get("format") if isinstance(config, dict) else None
        raise TaskextrapError(f"{folder / CONFIG} is of format {got!r}; this taskextrap reads format {FORMAT}")
    named = user_code(config.get("library"))
    if named and not trust_code:
        raise TaskextrapError(
            f"{folder}'s library is user code ({', '.join(named)}): loading it imports and runs that code; "
            "pass trust_code=True (--trust-code) if you trust the folder"
        )
    cls: Any = _estimator_class(config.get("class"), expected)
    if not issubclass(cls, expected):
        raise TaskextrapError(f"{folder} holds a {cls.__name__}, not a {expected.__name__}")
    if config.get("source_hash") != source_hash():
        warnings.warn(
            f"{folder} was saved by other taskextrap code ({config.get('taskextrap')}, source "
            f"{config.get('source_hash')}; this is {source_hash()}): its predictions may differ",
            TaskextrapWarning,
            stacklevel=3,
        )
    arrays, header = read_state(folder / WEIGHTS)
    if header.get("class") != cls.__name__:
        raise TaskextrapError(f"{folder / WEIGHTS} is not the weights of {folder / CONFIG} (another model's?)")
    try:
        params = {k: decode(v) for k, v in config["params"].items()}
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        params |= {k: v for k, v in SAVED_BEFORE.items() if k in fields and k not in params}  # as saved
        estimator = cls(**params)
        return estimator.restore(_library(folder, arrays, config["library"], library), arrays, config["state"])
    except KeyError as exc:
        raise TaskextrapError(f"{folder} is incomplete: {exc.args[0]!r} is missing") from None
    except RuntimeError as exc:  # torch's load_state_dict: a weight missing or of another shape
        reason = " ".join(str(exc).split())
        raise TaskextrapError(f"{folder} is incomplete or damaged: {reason[:200]}") from None
    except TypeError as exc:
        raise TaskextrapError(f"{folder / CONFIG} does not fit {cls.__name__}: {exc}") from None


def _library(folder: Path, arrays: dict, desc: dict, given):
    """The library a saved estimator is restored on: the saved one, or ``given`` once it is
    checked to hold the same tasks."""
    supplied = desc.get("kind") == "supplied"
    if given is None:
        if supplied:
            raise TaskextrapError(f"{folder} was saved without its library: pass from_pretrained(folder, library=...)")
        return library_from_state(arrays, desc)
    saved = desc["fingerprint"] if supplied else library_fingerprint(library_from_state(arrays, desc))
    if library_fingerprint(given) != saved:
        raise TaskextrapError(f"the library given is not the one {folder} was fitted on (its tasks differ)")
    return given


def user_code(desc: Any) -> list[str]:
    """Every user ``module:attr`` a saved library description names (``tasks.specs.task_spec``'s
    ``module_attr``), found without importing anything."""
    if isinstance(desc, dict):
        own = [desc["module_attr"]] if isinstance(desc.get("module_attr"), str) else []
        return own + [m for v in desc.values() for m in user_code(v)]
    if isinstance(desc, list):
        return [m for v in desc for m in user_code(v)]
    return []


def estimator_modules() -> tuple[str, ...]:
    """The modules of every regime's saveable estimators (``tasks.regimes``), imported by name
    when a saved config is read so that every built-in class can be found from any of them. By
    name, not by import statement: this module is imported by the estimator base (save_pretrained
    / from_pretrained) and imports no estimator back, so the estimators package has no import
    circle (tests/test_layers.py)."""
    return tuple(dict.fromkeys(m for regime in REGIMES.values() for m in regime.estimators))


def _root(kind: type) -> type:
    """The estimator base ``kind`` descends from: the first class of its MRO to declare
    ``saveable`` (``estimators.base.Fittable``)."""
    return next(c for c in reversed(kind.__mro__) if "saveable" in c.__dict__)


def _saveable(kind: type) -> dict[str, type]:
    """The estimator classes that save and load, by name: the loaded subclasses of ``kind``'s
    estimator base whose ``saveable`` is True (``RTE``, ``ChainedRTE``, the transductive
    oracles, ``LengthRTE``, ``CompositionRTE``, ...); a config can name nothing else."""
    for module in estimator_modules():
        importlib.import_module(module)
    found: dict[str, type] = {}
    todo: list[type] = [_root(kind)]
    while todo:
        cls = todo.pop()
        if getattr(cls, "saveable", False) and not getattr(cls, "__abstractmethods__", None):
            found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def _estimator_class(name, kind: type) -> type:
    """The saveable estimator class a config names (among those of ``kind``'s base)."""
    classes = _saveable(kind)
    if name not in classes:
        raise TaskextrapError(
            f"a saved model of class {name!r} cannot be loaded (saveable: {', '.join(sorted(classes))}; "
            "import the module that defines it first)"
        )
    return classes[name]
