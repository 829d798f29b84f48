"""What a run folder records about the run that wrote it, and what is done with it.

Every run writes its record as the ``run`` section of its ``config.yaml``: the experiment, every
:class:`~taskextrap.experiments.options.RunOptions` field that decides the run (:data:`RUN_FIELDS`,
as given: ``family`` is the ``--family`` spec exactly, e.g. ``myfam:bump``), the hash of the
package's code (``code_hash``, :func:`taskextrap.provenance.source_hash`), for a user's
``module:attr`` family the hash of its code (``family_code_hash``,
:func:`taskextrap.provenance.callable_hash`) and the ``taskextrap`` version::

    run:
      experiment: parameter
      profile: tiny
      protocol: paper
      family: myfam:bump
      seeds: null
      ...
      code_hash: 0123456789abcdef
      family_code_hash: fedcba9876543210
      taskextrap: 0.1.0

The record is written when the run is planned, before any unit runs (:func:`claim_run`), and
again with the results. From it ``taskextrap reproduce --from DIR`` runs the same experiment
with the same options again (:func:`read_saved_run`, :func:`options_from_record`), and a run
into a folder whose record names another configuration (or a user family whose code changed),
finished or not, is refused before any work (:func:`check_same_run`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NoReturn

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.experiments.registry import OPTION_FLAGS, RunOptions
from taskextrap.experiments.settings import Settings

# Fields that may change between two runs into one folder: a later run with more seeds grows the
# same run (each seed is a cached unit; fewer seeds are refused: check_same_run), and the
# executor, how many of its units share a GPU and the plots do not change a number.
SAME_RUN_ANYWAY = frozenset({"seeds", "executor", "units_per_gpu", "plots"})

# The RunOptions fields that decide a run, recorded and read back, and the YAML kinds a saved
# value may have. Not recorded: ``out`` (where it goes), ``run_dir`` (set by the runner),
# ``progress`` (display only) and ``shard`` (how one run is split over processes, which comes from
# the launcher again).
_KINDS = {
    "profile": str,
    "protocol": str,
    "family": (str, type(None)),
    "seeds": (int, type(None)),
    "seed": (int, type(None)),
    "split": str,
    "test_seed": (int, type(None)),
    "split_seed": (int, type(None)),
    "embedding": (str, type(None)),
    "anchors": int,
    "device": str,
    "extra": dict,
    "executor": str,
    "unit_cpus": int,
    "units_per_gpu": int,
    "plots": bool,
    "interval_scales": (dict, type(None)),
}
RUN_FIELDS = tuple(_KINDS)
_EXTRA_KEYS = {"model": str, "dtype": str, "load_in_4bit": bool}
_PROVENANCE = ("code_hash", "family_code_hash", "taskextrap")
_DEFAULTS = RunOptions()


def run_record(name: str, settings: Settings) -> dict:
    """The ``run`` section of experiment ``name``'s config.yaml under ``settings`` (its options,
    and for a user's ``module:attr`` family the hash of the code of the family the run resolved,
    ``Settings.family_code_hash``; a built-in one's code is in ``code_hash``)."""
    from taskextrap import __version__
    from taskextrap.provenance import source_hash

    options = settings.options
    record = {"experiment": name, **{f: plain(getattr(options, f)) for f in RUN_FIELDS}}
    record["device"] = _recorded_device(options)
    record["code_hash"] = source_hash()
    if settings.family_code_hash is not None:
        record["family_code_hash"] = settings.family_code_hash
    record["taskextrap"] = str(__version__)
    return record


def _recorded_device(options: RunOptions) -> str:
    """The device as the user gave it: a run over several processes maps ``cuda`` to each
    process's own GPU (``cuda:<local rank>``), so ``cuda`` is what runs it again."""
    if options.shard.count > 1 and options.device.startswith("cuda:"):
        return "cuda"
    return options.device


def plain(obj):
    """``obj`` as plain YAML-safe types, as config.yaml writes it and reads it back: dicts with
    text keys, lists for tuples, and text for anything that is not a number, text, bool or None
    (a path)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def read_saved_run(path: str | Path) -> tuple[dict, Path]:
    """The record of the run saved at ``path`` (a run folder, or its config.yaml) and its folder;
    a one-line :class:`TaskextrapError` when there is no config.yaml, it cannot be read, or it
    has no ``run`` section (a run written before runs were recorded) or a malformed one."""
    path = Path(path)
    file = path / "config.yaml" if path.is_dir() else path
    if not file.is_file():
        raise TaskextrapError(f"--from {path}: no such run folder or config.yaml")
    try:
        record = _run_section(file)
    except _Unreadable as exc:
        raise TaskextrapError(f"--from {file}: not a readable config.yaml ({exc})") from None
    if record is None:
        raise TaskextrapError(
            f"--from {file}: it has no 'run' section (written before taskextrap recorded its "
            "runs); run its experiment again with the options it lists"
        )
    _check_record(record, file)
    return record, file.parent


def _check_record(record, file: Path) -> None:
    """A one-line error for a ``run`` section that is not one this package writes."""
    if not isinstance(record, dict) or not isinstance(record.get("experiment"), str):
        raise TaskextrapError(f"--from {file}: its 'run' section does not name an experiment")
    unknown = sorted(set(record) - {"experiment", *RUN_FIELDS, *_PROVENANCE})
    if unknown:
        raise TaskextrapError(f"--from {file}: its 'run' section has unknown field(s) {', '.join(unknown)}")
    for field, kinds in _KINDS.items():
        value = record.get(field, getattr(_DEFAULTS, field))
        if not _is(value, kinds):
            raise TaskextrapError(f"--from {file}: run.{field} is {value!r}, not a value of that option")
    for key, value in record.get("extra", {}).items():
        if key not in _EXTRA_KEYS or not _is(value, _EXTRA_KEYS[key]):
            raise TaskextrapError(
                f"--from {file}: run.extra.{key} is {value!r}, not a --model/--dtype/--load-in-4bit value"
            )


def _is(value, kinds) -> bool:
    """``isinstance`` where a bool is not a number (YAML reads ``true`` as one)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def options_from_record(record: dict, **given) -> tuple[str, RunOptions]:
    """The experiment and the options of a saved run's record (:func:`read_saved_run`); ``given``
    sets the fields that are not the record's (``out``, ``progress``, ``shard``, or another
    ``executor``)."""
    fields = {f: record[f] for f in RUN_FIELDS if f in record}
    return record["experiment"], RunOptions(**{**fields, **given})


def warn_if_code_changed(record: dict, current: dict) -> None:
    """One :class:`TaskextrapWarning` when the saved run's code (the package's, or a user
    family's) is not the code about to run it again: its numbers may differ."""
    changed = [
        f"{what} {record.get(key)} -> {current.get(key)}"
        for key, what in (("code_hash", "taskextrap code"), ("family_code_hash", "family code"))
        if record.get(key) != current.get(key)
    ]
    if changed:
        warnings.warn(
            f"the saved run was made by other code ({'; '.join(changed)}): its numbers may differ from this run's",
            TaskextrapWarning,
            stacklevel=2,
        )


class _Unreadable(Exception):
    """A config.yaml that cannot be read as YAML (its message: the reason's type)."""


def _run_section(file: Path):
    """The ``run`` section of the config.yaml ``file`` (None when it has none); :class:`_Unreadable`
    when the file cannot be read or parsed."""
    import yaml

    try:
        config = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise _Unreadable(type(exc).__name__) from None
    return config.get("run") if isinstance(config, dict) else None


def saved_record(run_dir: Path) -> dict | None:
    """The record in ``run_dir/config.yaml``, or None when there is none (no file, a file
    that cannot be read, a run written before runs were recorded)."""
    try:
        record = _run_section(Path(run_dir) / "config.yaml")
    except _Unreadable:
        return None
    return record if isinstance(record, dict) else None


def check_same_run(run_dir: Path, record: dict) -> dict | None:
    """A one-line error, before any work, when ``run_dir`` holds a run (finished, in progress or
    killed: :func:`claim_run`) of another configuration than ``record``'s (another experiment,
    family spec, profile, embedding, ...), of a user family whose code has changed since (the
    same ``module:attr``, its formula or regions edited: ``family_code_hash``) or of seeds that
    ``record``'s do not include: a run never silently replaces another's. More seeds grow the
    same run, and the same configuration under changed package code is the same run: it is
    written again with fresh numbers. Returns the saved record (None when the folder holds no run)."""
    saved = saved_record(run_dir)
    if saved is None:
        return None
    for field in ("experiment", *RUN_FIELDS):
        if field in SAME_RUN_ANYWAY:
            continue
        default = None if field == "experiment" else plain(getattr(_DEFAULTS, field))
        before, now = saved.get(field, default), record.get(field, default)
        if before != now:
            _refuse(run_dir, _setting(field, before), _setting(field, now))
    changed = family_code_changed(saved, record)
    if changed:
        family = record.get("family")
        _refuse(
            run_dir,
            f"--family {family!r} of code {changed[0]}",
            f"its code changed to {changed[1]} (the module was edited)",
        )
    before_seeds, now_seeds = _seeds(record, saved), _seeds(record, record)
    if not now_seeds >= before_seeds:
        _refuse(
            run_dir,
            f"seeds {_listed(before_seeds)}",
            f"seeds {_listed(now_seeds)}, which would drop some (give --seeds {max(before_seeds) + 1} or more)",
        )
    return saved


def family_code_changed(saved: dict, record: dict) -> tuple[str, str] | None:
    """(the saved run's, this run's) ``family_code_hash`` when a user family's code changed
    between them, else None (no user family, or the same code)."""
    before, now = saved.get("family_code_hash"), record.get("family_code_hash")
    return (before, now) if before is not None and now is not None and before != now else None


def _refuse(run_dir: Path, before: str, now: str) -> NoReturn:
    raise TaskextrapError(
        f"{run_dir} holds a run with {before}; this run has {now}: run into another --out, or remove that folder"
    )


def _seeds(record: dict, seeds_of: dict) -> set[int]:
    """The training seeds of ``seeds_of``'s ``--seeds``/``--seed`` under ``record``'s experiment
    and profile (its profile's own seeds when neither is given)."""
    from taskextrap.experiments.catalogue import get_experiment

    profile = get_experiment(record["experiment"]).profiles[record.get("profile", _DEFAULTS.profile)]
    return set(profile.with_seeds(seeds_of.get("seeds"), seeds_of.get("seed")).seeds)


def _listed(seeds: set[int]) -> str:
    return ", ".join(map(str, sorted(seeds)))


def claim_run(run_dir: Path, record: dict) -> None:
    """Check ``run_dir`` (:func:`check_same_run`) and, when it holds no run yet, write ``record``
    as its config.yaml (atomically) before any unit runs, so a run of another configuration
    started while this one runs, or after it was killed, is refused too. A folder holding the
    same run keeps its config.yaml until the run's results replace it. A lock on the folder
    (``.run.lock``) makes the check and the write one step for processes started together."""
    import yaml

    from taskextrap.experiments.locks import Lock
    from taskextrap.files import write_text_atomic

    with Lock(Path(run_dir) / ".run.lock"):
        if check_same_run(run_dir, record) is None:
            write_text_atomic(Path(run_dir) / "config.yaml", yaml.safe_dump({"run": record}, sort_keys=False))


def _setting(field: str, value) -> str:
    """``field`` set to ``value`` as a user writes it: ``--family 'myfam:bump'``, ``no --embedding``."""
    flag = "experiment" if field == "experiment" else OPTION_FLAGS.get(field) or f"--{field.replace('_', '-')}"
    return f"no {flag}" if value is None or value == {} else f"{flag} {value!r}"
