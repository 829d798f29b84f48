"""Finished units of work (one family or ladder, one training seed) cached as JSON, so that an
interrupted run resumes and sibling experiments (``length`` and ``length-ablations``) share fits.

A unit file is named by a fingerprint of everything that determines its numbers, the package's
source hash included (:func:`taskextrap.provenance.source_hash`), so a file whose fingerprint
does not match (other settings, or any change to the code or shipped model files) is ignored
and recomputed. A unit is one seed: the list of seeds a run asks for is not in its key, so
``--seeds 0 1`` after ``--seeds 0`` reuses seed 0.

A unit file also carries a checksum of its numbers. One that cannot be read, has the wrong
structure or a checksum that does not match is a miss: a one-line warning, then it is
recomputed and replaced, never used.

Each unit has a lock file beside it (``name-<fingerprint>.lock``, :func:`unit_lock`), held from
the cache look-up to the save: two processes started on the same ``--out`` never compute a unit
twice; the second waits, with one line naming the lock file, then reads the first one's result.
The lock is the operating system's (:mod:`taskextrap.experiments.locks`), which the kernel
releases when its process dies, so a killed run leaves no lock that blocks the next.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterator

import numpy as np

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.experiments.locks import Lock
from taskextrap.operators.checkpoints import checkpointing
from taskextrap.provenance import cpu_info, library_versions, source_hash
from taskextrap.files import json_default, read_json, write_json_atomic


@dataclass
class UnitResult:
    """Per-target errors (n_targets,) of every method for one unit, its timing and extra numbers."""

    errors: dict[str, np.ndarray]
    timing: dict[str, float]
    extras: dict = field(default_factory=dict)


def per_target(values: np.ndarray, n_targets: int) -> np.ndarray:
    """Average per-draw values (n_targets * n_draws,) or (..., q) over query points and each target's draws
    -> (n_targets,). Draws are task-major (draw j of target i at i * n_draws + j)."""
    v = values.mean(axis=1) if values.ndim == 2 else values
    return v.reshape(n_targets, -1).mean(axis=1)


def fingerprint(**config) -> str:
    """A short stable hash of a JSON-able configuration and of the package's source
    (:func:`taskextrap.provenance.source_hash`, computed once per process): the same settings
    under changed code give another fingerprint, so no stale unit or checkpoint is reused. A
    ``profile``'s list of ``seeds`` is left out: a unit or checkpoint is one seed's."""
    profile = config.get("profile")
    if isinstance(profile, dict) and "seeds" in profile:
        config = {**config, "profile": {k: v for k, v in profile.items() if k != "seeds"}}
    payload = {"config": config, "source_hash": source_hash()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unit_path(cache_dir: Path | None, name: str, key: str) -> Path | None:
    """Where unit ``name`` with fingerprint ``key`` is cached (None without a cache)."""
    return None if cache_dir is None else Path(cache_dir) / f"{name}-{key}.json"


def checksum(errors: dict, timing: dict, extras: dict) -> str:
    """The sha256 of a unit's contents (errors, timing, extras) in canonical JSON."""
    body = json.dumps({"errors": errors, "timing": timing, "extras": extras}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _damage(saved, key: str) -> str | None:
    """Why a parsed unit file cannot be used (None when it can)."""
    if not isinstance(saved, dict) or saved.get("fingerprint") != key:
        return "not a unit of these settings"
    errors, timing, extras = saved.get("errors"), saved.get("timing"), saved.get("extras", {})
    if not isinstance(errors, dict) or not errors or not isinstance(timing, dict) or not isinstance(extras, dict):
        return "missing or malformed errors/timing/extras"
    for m, e in errors.items():
        if not isinstance(e, list) or not e or not all(_is_number(v) for v in e):
            return f"errors of {m!r} are not a non-empty list of finite numbers"
    if saved.get("checksum") != checksum(errors, timing, extras):
        return "checksum mismatch (edited or damaged)"
    return None


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _saved_unit(path: Path | None, key: str, report: bool = True) -> dict | None:
    """The saved unit at ``path`` when it exists, is intact and its fingerprint is ``key``; a
    damaged one is treated as missing (it is then recomputed) and, with ``report``, named in one
    warning."""
    if path is None or not path.exists():
        return None
    try:
        saved = read_json(path)
    except TaskextrapError as exc:
        if report:
            warnings.warn(f"unit {path.name} is unreadable ({exc}); recomputing it", TaskextrapWarning, stacklevel=3)
        return None
    why = _damage(saved, key)
    if why is not None:
        if report:
            warnings.warn(f"unit {path.name} is damaged ({why}); recomputing it", TaskextrapWarning, stacklevel=3)
        return None
    return saved


def unit_done(cache_dir: Path | None, name: str, config: dict) -> bool:
    """Whether ``cache_dir`` holds the finished unit ``name`` of ``config``."""
    key = fingerprint(**config)
    return _saved_unit(_unit_path(cache_dir, name, key), key) is not None


def check_unit_path(cache_dir: Path | None, name: str, key: str) -> None:
    """A one-line error when a folder sits where unit ``name`` goes: not ours to delete, and
    refused before the work, not after it."""
    path = _unit_path(cache_dir, name, key)
    if path is not None and path.is_dir():
        raise TaskextrapError(f"cannot write unit {path}: a directory of that name is in the way; remove it")


def load_unit(cache_dir: Path | None, name: str, key: str, report: bool = True) -> UnitResult | None:
    """The cached result of unit ``name`` with fingerprint ``key``, or None (no cache, not
    computed yet, or damaged: then a one-line warning, unless ``report`` is False: a first look
    without the unit's lock, which the look under it repeats)."""
    saved = _saved_unit(_unit_path(cache_dir, name, key), key, report)
    if saved is None:
        return None
    return UnitResult(
        {m: np.asarray(v) for m, v in saved["errors"].items()},
        saved["timing"],
        {**saved.get("extras", {}), "resumed": True},
    )


def unit_record(config: dict, unit: UnitResult) -> dict:
    """What a unit file holds: the result as plain JSON data (errors as lists), its
    configuration, fingerprint, the package's source hash, the CPU and numeric libraries that
    computed it and a checksum of the numbers."""
    errors = {m: np.asarray(e).tolist() for m, e in unit.errors.items()}
    plain = json.loads(json.dumps(config, sort_keys=True, default=str))  # for readers such as benchmarks/paired.py
    saved = json.loads(
        json.dumps({"errors": errors, "timing": unit.timing, "extras": unit.extras}, default=json_default)
    )  # the checksum is of what a reader parses back
    return {
        "fingerprint": fingerprint(**config),
        "source_hash": source_hash(),
        # provenance only, not in the key: a cache stays usable on another node of a cluster
        "cpu": cpu_info(),
        "libraries": library_versions(),
        "config": plain,
        **saved,
        "checksum": checksum(saved["errors"], saved["timing"], saved["extras"]),
    }


def save_unit(cache_dir: Path | None, name: str, record: dict) -> None:
    """Write a :func:`unit_record` as unit ``name`` (atomically; nothing without a cache)."""
    path = _unit_path(cache_dir, name, record["fingerprint"])
    if path is not None:
        write_json_atomic(path, record)


def lock_path(cache_dir: Path, name: str, key: str) -> Path:
    """The lock file of unit ``name`` with fingerprint ``key``: beside its unit file."""
    return Path(cache_dir) / f"{name}-{key}.lock"


def new_unit_lock(cache_dir: Path | None, name: str, key: str) -> Lock:
    """The lock of unit ``name`` with fingerprint ``key`` (:func:`lock_path`), not taken yet; no
    lock at all without a cache."""
    return Lock(None if cache_dir is None else lock_path(cache_dir, name, key))


@contextmanager
def unit_lock(cache_dir: Path | None, name: str, key: str) -> Iterator[None]:
    """Hold unit ``name``'s lock (:func:`lock_path`) for the block (nothing without a cache).
    When another process holds it, one line on stderr says so (:func:`say_waiting`), then this
    one waits for it."""
    lock = new_unit_lock(cache_dir, name, key)
    if not lock.acquire(wait=False):
        say_waiting(name, lock)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def say_waiting(name: str, lock: Lock) -> None:
    """The line that says unit ``name`` is being computed by another process, and which lock
    file it holds (``fuser`` or ``lsof`` on it names that process, if it hung)."""
    _say(f"waiting for unit {name}, computed by another process (it holds {lock.path})")


def _say(line: str) -> None:
    """One line on stderr, written past any progress bar."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def cached_unit(
    cache_dir: Path | None,
    name: str,
    config: dict,
    compute: Callable[[], UnitResult],
    force: bool | Callable[[], bool] = False,
) -> UnitResult:
    """``compute()`` unless ``cache_dir/name-<fingerprint>.json`` holds its result; then save it.

    A saved unit is read without its lock (saves are atomic). Otherwise the unit's lock
    (:func:`unit_lock`) is held from a second look-up to the save, so a unit another process is
    computing is waited for and read back, not computed again. Its networks checkpoint as they
    train (:func:`training_path`), so a unit stopped part-way resumes inside its training.
    ``force`` recomputes it even when cached; given as a function, it is asked again once the
    lock is held (the other process may have drawn the plots that were missing).
    """
    key = fingerprint(**config)
    check_unit_path(cache_dir, name, key)

    def saved(report: bool) -> UnitResult | None:
        return None if (force() if callable(force) else force) else load_unit(cache_dir, name, key, report)

    done = saved(report=False)  # damage is reported once, by the look under the lock
    if done is None:
        with unit_lock(cache_dir, name, key):
            done = saved(report=True)
            if done is None:
                return _computed(cache_dir, name, key, config, compute)
    if cache_dir is not None:  # a finished unit's checkpoints are stale (a copy brought them back)
        shutil.rmtree(training_path(cache_dir, name, key), ignore_errors=True)
    return done


def _computed(cache_dir: Path | None, name: str, key: str, config: dict, compute) -> UnitResult:
    """``compute()`` with its networks checkpointing beside the unit file, then saved (under
    the unit's lock: the caller holds it)."""
    with checkpointing(None if cache_dir is None else training_path(cache_dir, name, key)):
        unit = compute()
    if cache_dir is not None:
        save_unit(cache_dir, name, unit_record(config, unit))
        shutil.rmtree(training_path(cache_dir, name, key), ignore_errors=True)
    return unit


def training_path(cache_dir: Path, name: str, key: str) -> Path:
    """The folder of unit ``name``'s mid-training checkpoints (``operators.checkpoints``), beside
    its unit file and named by the same fingerprint: a stopped unit's networks train on from
    there when it runs again; removed once the unit is saved."""
    return Path(cache_dir) / f"{name}-{key}.training"


@dataclass
class Unit:
    """One unit of work: one family or ladder (or the experiment's one task set) and one training
    seed, under one protocol and split. Units are listed up front by an experiment's plan and run
    by an executor (:mod:`taskextrap.experiments.executors`), serially or on a Ray cluster.

    ``name`` and ``config`` key its cache file (:func:`cached_unit`); ``compute(plots)`` runs it,
    drawing its figures into the folder ``plots`` when that is not None. A unit that draws (the
    first seed of a run with plots) has the run's ``plot_dir`` and the ``plot_file`` it writes
    there: when a figure it drew is missing the unit is recomputed even if cached, so a rerun
    into a fresh directory gets its plots. ``origin`` (the experiment and options that planned
    it) lets another process rebuild the unit from plain data instead of receiving its code.
    """

    name: str
    config: dict
    compute: Callable[[Path | None], UnitResult]
    plot_dir: Path | None = None
    plot_file: str | None = None
    origin: tuple | None = None

    @property
    def needs_plots(self) -> bool:
        """Whether it draws and its figures are not all in the run's plot folder, as drawn by
        this very unit (``experiments.plotfiles``): then it is recomputed."""
        from taskextrap.experiments.plotfiles import has_plots

        return self.plot_dir is not None and not has_plots(self.plot_dir, self.draw_id, self.plot_file)

    @property
    def key(self) -> str:
        """The fingerprint of its configuration (:func:`fingerprint`)."""
        return fingerprint(**self.config)

    @property
    def draw_id(self) -> str:
        """Its name and fingerprint: what the plot folder's manifest lists its figures under."""
        return f"{self.name}-{self.key}"


@dataclass
class Plan:
    """An experiment run as data: every unit it needs, and ``assemble(results)`` that turns their
    results (unit name -> :class:`UnitResult`) into ``(rows, config, seeds, timing)``. The run's
    paired comparisons set ``reference`` (a method name) against every other method of a group."""

    units: list[Unit]
    assemble: Callable[[dict[str, UnitResult]], tuple]
    reference: str = "rte"


def bind(units: list[Unit], experiment: str, options) -> list[Unit]:
    """``units`` as run under ``options``: each knows the experiment and options that planned it
    (``origin``, so another process can rebuild it) and its key holds the torch threads it runs
    with (``options.unit_cpus``): the thread count moves the last digits of a float, so a unit
    computed with other threads is never mixed in, and a unit's numbers do not depend on the
    executor or on how many cores the machine has."""
    for unit in units:
        unit.origin = (experiment, options)
        unit.config = {**unit.config, "threads": options.unit_cpus}
    return units


def seed_units(
    seeds,
    name: Callable[[int], str],
    config: Callable[[int], dict],
    compute: Callable[[int, Path | None], UnitResult],
    plot_dir: Path | None = None,
    plot_file: str | None = None,
) -> list[Unit]:
    """One :class:`Unit` per training seed; the first seed draws ``plot_file`` into ``plot_dir``
    when the run makes plots (``plot_dir`` not None)."""
    seeds = list(seeds)
    draws = plot_dir is not None and plot_file is not None
    return [
        Unit(
            name(s),
            config(s),
            functools.partial(compute, s),
            *((plot_dir, plot_file) if draws and s == seeds[0] else (None, None)),
        )
        for s in seeds
    ]


def gather(results: dict[str, UnitResult], units: list[Unit]) -> tuple[dict[str, list], dict[str, float]]:
    """The per-target errors of ``units`` by method, in the units' order (one array per seed),
    and their timings summed."""
    errors: dict[str, list] = {}
    timing: dict[str, float] = {}
    for unit in units:
        result = results[unit.name]
        for m, e in result.errors.items():
            errors.setdefault(m, []).append(e)
        for k, v in result.timing.items():
            timing[k] = timing.get(k, 0.0) + float(v)
    return errors, timing
