"""Where units of work run: ``serial`` (one after another in this process, the default) or
``ray`` (each unit a task on a Ray cluster, as many at once as it has CPUs or GPUs for).

Either way the driver, this process, owns the unit cache: it reads the finished units, hands
out the missing ones, writes each result as it arrives and returns them by unit, so the rows an
experiment assembles from them come out in the plan's order and results.json is the same as a
serial run's. It holds each unit's lock (``units.unit_lock``) from its cache look-up to its save,
and only then, so two runs sharing ``--out``, under either executor, never compute a unit twice
nor wait for each other longer than a unit takes. A Ray task gets plain data only (the
experiment's name, its options and the unit's name) and rebuilds the unit from the
experiment's plan, so no user code or closure is shipped;
it returns the unit's record (plain JSON data) and its figures as bytes, so the workers need no
disk shared with the driver, except for the language-model experiments' fine-tuning
checkpoints, which go under ``--out`` like a serial run's.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from taskextrap import lanes
from taskextrap.engines import connect_ray, last_line
from taskextrap.experiments.options import EXECUTORS
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import plotfiles
from taskextrap.experiments.units import (
    Unit,
    UnitResult,
    cached_unit,
    check_unit_path,
    load_unit,
    new_unit_lock,
    save_unit,
    say_waiting,
)


def run_units(
    units: list[Unit],
    cache_dir: Path | None,
    executor: str = "serial",
    progress: bool = True,
    unit_cpus: int = 1,
    device: str = "cpu",
    units_per_gpu: int = 1,
) -> dict[tuple[str, str], UnitResult]:
    """Run (or read back from ``cache_dir``) every unit of ``units``; returns the results by
    ``(unit name, fingerprint)``. A unit listed twice (``parameter`` and ``parameter-ablations``
    share their fits) runs once.

    ``executor`` is ``serial`` or ``ray``. Every unit runs with ``unit_cpus`` torch threads (the
    thread count moves a float's last digits, so the numbers are the same under either executor
    and on any machine); under Ray each unit is a task declaring ``unit_cpus`` CPUs and, when
    ``device`` is a CUDA device, ``1 / units_per_gpu`` of a GPU: that many units share each GPU
    at once (a small unit leaves most of a large GPU idle).
    """
    if executor not in EXECUTORS:
        raise TaskextrapError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    distinct: dict[tuple[str, str], Unit] = {}
    for unit in units:
        distinct.setdefault((unit.name, unit.key), unit)
    for name, key in distinct:  # a folder in a unit's place fails now, before any work
        check_unit_path(cache_dir, name, key)
    if executor == "ray":
        return _run_ray(distinct, cache_dir, progress, unit_cpus, device, units_per_gpu)
    return _run_serial(distinct, cache_dir, progress, unit_cpus)


def _progress(total: int, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="units", disable=not progress, unit="unit")


def _run_serial(units: dict, cache_dir: Path | None, progress: bool, threads: int) -> dict:
    results = {}
    with lanes.threads_limited(threads), _progress(len(units), progress) as bar:
        for k, unit in units.items():
            bar.set_postfix_str(unit.name, refresh=False)
            results[k] = _cached(unit, cache_dir)
            bar.update()
    return results


def _cached(unit: Unit, cache_dir: Path | None) -> UnitResult:
    """The unit's saved result, or computed and saved (again when its figures are missing)."""
    return cached_unit(cache_dir, unit.name, unit.config, lambda: _compute(unit), force=lambda: unit.needs_plots)


def _compute(unit: Unit) -> UnitResult:
    """Run ``unit`` here; the figures it draws go into its plot folder, listed as its own
    (:func:`taskextrap.experiments.plotfiles.drawing`)."""
    if unit.plot_dir is None:
        return timed_compute(unit, None)
    with plotfiles.drawing(unit.plot_dir, unit.draw_id) as folder:
        return timed_compute(unit, folder)


def timed_compute(unit: Unit, plot_dir: Path | None) -> UnitResult:
    """``unit.compute(plot_dir)`` with the seconds it took in its timing as ``unit_s``: saved with
    the unit, so a run that reads it from the cache still reports what computing it cost."""
    t = time.perf_counter()
    result = unit.compute(plot_dir)
    result.timing["unit_s"] = time.perf_counter() - t
    return result


# --- Ray ----------------------------------------------------------------------------------------


def _run_ray(
    units: dict, cache_dir: Path | None, progress: bool, unit_cpus: int, device: str, units_per_gpu: int = 1
) -> dict:
    # a first look without the locks (the driver looks again under each unit's lock, and reports damage)
    results = {k: saved for k, unit in units.items() if (saved := _saved(unit, cache_dir, report=False)) is not None}
    todo = [k for k in units if k not in results]
    if not todo:
        return results
    ray, started = _connect()
    try:
        gpus = 1 / units_per_gpu if device.startswith("cuda") else 0  # Ray packs 1/N-GPU tasks N to a GPU
        remote = ray.remote(compute_unit).options(num_cpus=unit_cpus, num_gpus=gpus, max_retries=0)
        with _progress(len(units), progress) as bar:
            bar.update(len(results))
            failed = _Driver(ray, remote, units, cache_dir, unit_cpus, results, bar).run(todo)
    finally:
        if started:
            ray.shutdown()
    if failed:
        raise failed[0]
    return results


def _saved(unit: Unit, cache_dir: Path | None, report: bool = True) -> UnitResult | None:
    """``unit``'s saved result, or None when it is not saved or must be drawn again (``report``:
    :func:`~taskextrap.experiments.units.load_unit`'s)."""
    return None if unit.needs_plots else load_unit(cache_dir, unit.name, unit.key, report)


_POLL_S = 0.5  # how often a unit another process holds is looked at again


class _Driver:
    """Runs a list of units as Ray tasks, saving and storing each result as it arrives.

    A unit's lock is taken without waiting and held only from its cache look-up to its save, as
    on the serial path. A unit another process holds is looked at again every :data:`_POLL_S`
    seconds, never waited for with a lock held, so two drivers that split the units between them
    never wait for each other; once free, it is read back when that process saved it, else
    computed here.
    """

    def __init__(self, ray, remote, units: dict, cache_dir: Path | None, unit_cpus: int, results: dict, bar):
        self.ray, self.remote, self.units, self.cache_dir, self.unit_cpus = ray, remote, units, cache_dir, unit_cpus
        self.results, self.bar = results, bar
        self.pending: dict = {}  # Ray task -> its unit's key
        self.failed: list[TaskextrapError] = []
        self.told: set = set()  # the units said to be waited for
        self.locks: dict = {}  # unit key -> its lock
        self.waiting: list = []  # not started: not tried yet, or another process holds it

    def run(self, todo: list) -> list[TaskextrapError]:
        """Run the units ``todo`` (keys of ``units``); returns the failures (the other units
        still finish and are saved)."""
        self.locks = {k: new_unit_lock(self.cache_dir, self.units[k].name, k[1]) for k in todo}
        self.waiting = list(todo)
        try:
            while self.waiting or self.pending:
                self._start_free_units()
                self._collect()
        finally:  # an error, or an interrupt, leaves no unit locked
            for lock in self.locks.values():
                lock.release()
        return self.failed

    def _start_free_units(self) -> None:
        """Lock every waiting unit that is free; read it back if it was saved meanwhile (by
        another process, since the look-up before Ray started), else hand it to Ray."""
        for k in list(self.waiting):
            unit, lock = self.units[k], self.locks[k]
            if not lock.acquire(wait=False):
                if k not in self.told:  # once per unit, as the serial path says it
                    say_waiting(unit.name, lock)
                    self.told.add(k)
                continue
            self.waiting.remove(k)
            saved = _saved(unit, self.cache_dir)
            if saved is None:
                self.pending[self.remote.remote(_spec(unit, self.unit_cpus))] = k
                continue
            lock.release()
            self.results[k] = saved
            self.bar.update()

    def _collect(self) -> None:
        """Receive a finished task (waiting at most :data:`_POLL_S` while units are waited for),
        save it and release its lock."""
        if not self.pending:
            time.sleep(_POLL_S)
            return
        done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=_POLL_S if self.waiting else None)
        for ref in done:
            k = self.pending.pop(ref)
            try:
                self.results[k] = _receive(self.ray, ref, self.units[k], k[1], self.cache_dir)
            except TaskextrapError as exc:
                self.failed.append(exc)
            finally:
                self.locks[k].release()
            self.bar.set_postfix_str(self.units[k].name, refresh=False)
            self.bar.update()


def _connect():
    """The ``ray`` module connected for ``--executor ray`` (``engines.connect_ray``), and whether
    this call started it."""
    return connect_ray("--executor ray")


def _spec(unit: Unit, unit_cpus: int) -> dict:
    """The plain data a Ray task rebuilds ``unit`` from."""
    if unit.origin is None:
        raise TaskextrapError(
            f"unit {unit.name} has no origin (experiments.units.bind): a Ray task rebuilds a unit "
            "from the experiment and options that planned it"
        )
    name, options = unit.origin
    return {
        "experiment": name,
        "options": options_to_dict(options),
        "unit": unit.name,
        "key": unit.key,
        "plots": unit.plot_dir is not None,
        "threads": unit_cpus,
        "sys_path": list(sys.path),
    }


def _receive(ray, ref, unit: Unit, key: str, cache_dir: Path | None) -> UnitResult:
    """A finished task's result: its figures written, its record checked and saved as the unit
    file (the driver is the only writer of the unit cache)."""
    try:
        record = ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - RayTaskError and friends: one line, the units done are kept
        raise TaskextrapError(
            f"unit {unit.name} failed on Ray: {last_line(exc)} (the other units are saved; rerun to resume)"
        ) from None
    if record["fingerprint"] != key:
        raise TaskextrapError(
            f"unit {unit.name} came back with another fingerprint: the Ray workers run other "
            "taskextrap code or settings than this process; install the same version on them"
        )
    drawn = record.pop("plots")
    if unit.plot_dir is not None:
        plotfiles.record(unit.plot_dir, unit.draw_id, drawn)
    save_unit(cache_dir, unit.name, record)
    return UnitResult({m: np.asarray(v) for m, v in record["errors"].items()}, record["timing"], record["extras"])


def compute_unit(spec: dict) -> dict:
    """Run one unit in this process from plain data (:func:`_spec`): rebuild the experiment's
    plan from its options, compute the unit named ``spec["unit"]`` with ``spec["threads"]``
    torch threads, and return its unit record (:func:`~taskextrap.experiments.units.unit_record`)
    with the figures it drew as ``{"plots": {file name: bytes}}``. What a Ray task runs."""
    from taskextrap.experiments.units import unit_record

    for p in reversed(spec["sys_path"]):  # the driver's import path: a user's --family module imports here too
        if p not in sys.path:
            sys.path.insert(0, p)
    options = options_from_dict(spec["options"])
    # Ray runs as many tasks at once as the machine has CPUs for: a task's lanes would take other units' cores
    with (
        lanes.threads_limited(int(spec["threads"])),
        lanes.limited(1),
        tempfile.TemporaryDirectory(prefix="taskextrap-plots-") as tmp,
    ):
        plots = Path(tmp) if spec["plots"] else None
        unit = find_unit(spec["experiment"], options, spec["unit"], plots)
        record = unit_record(unit.config, timed_compute(unit, plots))
        record["plots"] = {} if plots is None else {f.name: f.read_bytes() for f in sorted(plots.iterdir())}
    return record


def find_unit(experiment: str, options, name: str, plot_dir: Path | None) -> Unit:
    """Unit ``name`` of ``experiment``'s plan under ``options`` (plots, when it draws any, into
    ``plot_dir``)."""
    from taskextrap.experiments.catalogue import get_experiment

    from taskextrap.experiments.units import bind

    cache_dir = Path(options.out) / "units"
    registered = get_experiment(experiment)
    plan = registered.run(registered.check(options), cache_dir, plot_dir)
    for unit in bind(plan.units, experiment, options):
        if unit.name == name:
            return unit
    raise TaskextrapError(f"{experiment} has no unit {name!r} under these options")


def options_to_dict(options) -> dict:
    """``RunOptions`` as plain data (paths as strings)."""
    d = dataclasses.asdict(options)
    d["out"] = str(options.out)
    d["run_dir"] = None if options.run_dir is None else str(options.run_dir)
    return d


def options_from_dict(d: dict):
    """The ``RunOptions`` of :func:`options_to_dict`."""
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.sharding import Shard

    d = dict(d)
    d["out"] = Path(d["out"])
    d["run_dir"] = None if d["run_dir"] is None else Path(d["run_dir"])
    d["shard"] = Shard(**d["shard"])
    return RunOptions(**d)
