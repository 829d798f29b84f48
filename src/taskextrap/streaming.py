"""A library streamed from Parquet row groups through an engine (issue 65): every task of a long
table (``task``, ``x``, ``y`` columns, each task's rows inside one row group) embedded by a fitted
RTE's Γ and given its near anchors, one row group at a time, in this process (``serial``) or on
Ray workers (``ray``: a local instance of ``workers`` CPUs, or the cluster at ``RAY_ADDRESS``), so
that no process holds more than one row group of the library and a small reference set.

Two passes over the row groups (:func:`stream_index`):

1. **embed**: a worker reads its row group, reads each task's points as a target's context is read
   (``RTE.embed``: Γ of those points and nothing else) and writes the group's proxies.
2. **near anchors**: the driver gathers the proxies of a seeded sample of ``reference`` tasks
   (:data:`~taskextrap.operators.pairs.NEAR_POOL` by default: the bound a fit draws Ψ's near
   anchors from) and sends them to every worker once; each worker writes its tasks' ``n_near``
   nearest reference tasks (never the task itself): the near half of Ψ's pair pool.

The output folder holds one Parquet part per non-empty row group (``task``, ``position`` in the file,
``z_0``..``z_{d-1}``, ``near_0``.., ``distance_0``..) and ``index.json`` (the plan, the reference,
the seconds of each pass). Each row group's work depends on that row group and the reference only,
and every worker computes on one thread (torch's and the BLAS's), so a file gives the same index, to the bit, on either
engine and any number of workers of one machine; a run that stops resumes from the parts already
written (each written atomically). Γ and Ψ themselves are
fitted on a bounded sample (``RTE.fit`` reads at most ``PRETRAIN_POINTS`` points a step and
``PCA_ROWS`` contexts): what grows with the library is this pass, linear and spread over workers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.engines import connect_ray, last_line
from taskextrap.lanes import threads_limited
from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.files import atomic_path, read_json, write_json_atomic
from taskextrap.operators.pairs import NEAR_POOL
from taskextrap.search.index import nearest
from taskextrap.seeding import rng
from taskextrap.tasks.observed import TRAIN_LABEL, ObservedTasks
from taskextrap.validation import check_instance, check_int

__all__ = [
    "ENGINES",
    "Engine",
    "NearAnchors",
    "RowGroups",
    "contiguous_tasks",
    "read_index",
    "row_groups",
    "stream_index",
    "write_library",
]

ENGINES = ("serial", "ray")
FORMAT = 1  # index.json's layout; another value is refused
INDEX_FILE = "index.json"
EMBED_PART, PART = "embed-{:05d}.parquet", "part-{:05d}.parquet"


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskextrapError("streaming a library reads Parquet: pip install pyarrow") from None
    return pa, pq


def write_library(tasks: ObservedTasks, path, tasks_per_group: int = 4096) -> Path:
    """Write observed tasks as a long Parquet table (``task``, ``x``, ``y``) whose row groups each
    hold ``tasks_per_group`` whole tasks (the layout :func:`stream_index` reads). Atomic; returns
    the path."""
    pa, pq = _pyarrow()
    check_int("tasks_per_group", tasks_per_group, 1)
    if not len(tasks):
        raise TaskextrapError("no tasks to write: a library needs at least one")
    path = Path(path)
    counts = tasks.counts()
    with atomic_path(path) as tmp:
        writer = None
        for first in range(0, len(tasks), tasks_per_group):
            last = min(first + tasks_per_group, len(tasks))
            rows = slice(tasks.offsets[first], tasks.offsets[last])
            ids = np.repeat(tasks.ids[first:last].astype(str), counts[first:last])
            table = pa.table({"task": ids, "x": tasks.x[rows], "y": tasks.y[rows]})
            writer = writer or pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table, row_group_size=len(ids))
        if writer is not None:
            writer.close()
    return path


@dataclass(frozen=True)
class RowGroups:
    """The row groups of a library file: the tasks in each, and each group's task with the fewest
    points (its id and count; None for an empty group). Tasks are numbered in file order."""

    path: str
    counts: tuple[int, ...]
    fewest: tuple[tuple[str, int] | None, ...] = ()

    @property
    def firsts(self) -> tuple[int, ...]:
        """The file position of each group's first task."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.counts)[:-1]])) if self.counts else ()

    @property
    def n_tasks(self) -> int:
        return int(sum(self.counts))


def row_groups(path, columns: tuple[str, str, str] = ("task", "x", "y")) -> RowGroups:
    """Read only the task column (``columns[0]``) of a Parquet library, a row group at a time, and
    check that the three columns exist and that each task's rows are contiguous and inside one
    row group (a one-line error names the first task that is not; the driver keeps one dict entry
    per task id while it reads). Returns the tasks per row group."""
    _, pq = _pyarrow()
    path = Path(path)
    if not path.is_file():
        raise TaskextrapError(f"{path}: no such Parquet file")
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors for a file that is not Parquet
        raise TaskextrapError(f"{path}: not a Parquet file ({last_line(exc)})") from None
    names = pf.schema_arrow.names
    for c in columns:
        if c not in names:
            raise TaskextrapError(f"{path}: no column {c!r} (columns: {names})" + did_you_mean(c, names))
    counts: list[int] = []
    fewest: list[tuple[str, int] | None] = []
    group_of: dict[str, int] = {}  # each task's row group: a task in two of them is refused
    for g in range(pf.num_row_groups):
        ids = pf.read_row_group(g, columns=[columns[0]]).column(0).to_numpy(zero_copy_only=False).astype(str)
        starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]])) if len(ids) else np.zeros(0, int)
        runs, points = ids[starts], np.diff(np.append(starts, len(ids)))
        for t in runs.tolist():
            if t in group_of:
                where = f"row group {g}" if group_of[t] == g else f"row groups {group_of[t]} and {g}"
                raise TaskextrapError(
                    f"{path}: task {t!r} has rows apart in {where}; write each task's rows together inside one "
                    "row group (taskextrap.streaming.write_library)"
                )
            group_of[t] = g
        counts.append(len(runs))
        fewest.append((str(runs[np.argmin(points)]), int(points.min())) if len(runs) else None)
    return RowGroups(str(path), tuple(counts), tuple(fewest))


class Worker:
    """One engine worker: the fitted RTE loaded from its folder once, then row groups embedded
    (:meth:`embed`) and given near anchors (:meth:`near`), each part written atomically.
    On Ray it is an actor; the serial engine holds one in this process."""

    def __init__(self, model: str, data: str, out: str, columns: tuple[str, str, str], trust_code: bool = False):
        from taskextrap.estimators.parameter import RTE

        self.rte = RTE.from_pretrained(model, trust_code=trust_code)
        self.data, self.out, self.columns = data, Path(out), columns

    def embed(self, group: int, first: int) -> dict:
        """Embed row group ``group`` (its first task is number ``first`` in the file) into its
        embed part; returns the seconds and this process's peak memory."""
        pa, pq = _pyarrow()
        t = time.perf_counter()
        table = pq.ParquetFile(self.data).read_row_group(group, columns=list(self.columns))
        cols = [table.column(c).to_numpy(zero_copy_only=False) for c in self.columns]
        try:
            tasks = contiguous_tasks(*cols)
            z = self._embed(tasks)
        except TaskextrapError as exc:
            raise TaskextrapError(f"{self.data}: row group {group}: {exc}") from None
        part = {"task": tasks.ids.astype(str), "position": np.arange(first, first + len(tasks))}
        part |= {f"z_{j}": z[:, j] for j in range(z.shape[1])}
        _write_part(pa, pq, self.out / EMBED_PART.format(group), part)
        return _report(t)

    def _embed(self, tasks: ObservedTasks) -> np.ndarray:
        """Γ of each task's points, tasks of one point count at a time (in file order)."""
        counts = tasks.counts()
        z = np.zeros((len(tasks), self.rte.z_library_.shape[1]))
        for m in np.unique(counts):
            idx = np.flatnonzero(counts == m)
            rows = tasks.offsets[idx][:, None] + np.arange(m)
            z[idx] = self.rte.embed(tasks.x[rows], tasks.y[rows])
        return z

    def near(self, group: int, reference_z: np.ndarray, reference: np.ndarray, n_near: int) -> dict:
        """Write row group ``group``'s part: its embed part with each task's ``n_near`` nearest
        reference tasks (file positions, never the task itself) and their distances."""
        pa, pq = _pyarrow()
        t = time.perf_counter()
        src = self.out / EMBED_PART.format(group)
        part = _read_part(pq, src)
        z = _stacked(part, "z_")
        keep = min(n_near, len(reference) - 1)
        idx, dist = nearest(z, reference_z, keep + 1)
        own = reference[idx] == part["position"][:, None]
        order = np.argsort(own, axis=1, kind="stable")[:, :keep]  # the task itself (if there) last: dropped
        idx, dist = np.take_along_axis(idx, order, 1), np.take_along_axis(dist, order, 1)
        part |= {f"near_{j}": reference[idx[:, j]] for j in range(idx.shape[1])}
        part |= {f"distance_{j}": dist[:, j] for j in range(idx.shape[1])}
        _write_part(pa, pq, self.out / PART.format(group), part)
        src.unlink()  # the part holds the proxies too (the reference is read from either)
        return _report(t)


def contiguous_tasks(task: np.ndarray, x: np.ndarray, y: np.ndarray) -> ObservedTasks:
    """Observed tasks from long columns whose tasks' rows are contiguous (:func:`row_groups` checks
    it), each task's points sorted by x: what ``read_tasks(..., min_points=1)`` builds from such
    columns, without its loop over tasks (a row group of 10,000 tasks read in a tenth of the time).
    A row below is numbered from 1 within the columns given."""
    ids = np.asarray(task).astype(str)
    if not len(ids):
        raise TaskextrapError("no rows: a table of tasks needs at least one")
    columns = []
    for name, v in (("x", x), ("y", y)):
        try:
            v = np.asarray(v, dtype=float)
        except (TypeError, ValueError):
            raise TaskextrapError(f"the {name} column holds values that are not numbers") from None
        bad = np.flatnonzero(~np.isfinite(v))
        if len(bad):
            raise TaskextrapError(f"{name} value {float(v[bad[0]])!r} at row {bad[0] + 1} is not finite")
        columns.append(v)
    x, y = columns
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    offsets = np.append(starts, len(ids))
    seg = np.repeat(np.arange(len(starts)), np.diff(offsets))
    order = np.lexsort((x, seg))  # by task, then by x; stable, as read_tasks's sort
    x, y = x[order], y[order]
    dup = np.flatnonzero((np.diff(x) == 0) & (seg[1:] == seg[:-1]))
    if len(dup):
        raise TaskextrapError(
            f"task {str(ids[starts[seg[dup[0]]]])!r} has x={x[dup[0]]:g} twice (average repeated measurements first)"
        )
    return ObservedTasks(
        ids[starts].astype(object),
        x,
        y,
        offsets,
        np.full(len(starts), TRAIN_LABEL, dtype=object),
        np.zeros((len(starts), 0)),
    )


def _read_part(pq, path: Path) -> dict[str, np.ndarray]:
    """A part file's columns as arrays."""
    t = pq.read_table(path)
    return {c: t.column(c).to_numpy(zero_copy_only=False) for c in t.column_names}


def _stacked(columns: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    """The columns ``prefix0``, ``prefix1``, ... side by side, (rows, count)."""
    names = sorted((c for c in columns if c.startswith(prefix)), key=lambda c: int(c[len(prefix) :]))
    return np.stack([columns[c] for c in names], axis=1)


def _write_part(pa, pq, path: Path, columns: dict) -> None:
    """Write a part atomically and durably (a resumed run trusts every part it finds)."""
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(columns), tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())


def _report(t0: float) -> dict:
    """A worker call's seconds and its process's peak resident memory (MiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return {"seconds": time.perf_counter() - t0, "peak_mib": peak}


def _fingerprint(path: Path) -> dict:
    """What identifies a file for resuming: its size, modification time and first bytes' hash."""
    st = path.stat()
    with open(path, "rb") as fh:
        head = hashlib.blake2b(fh.read(1 << 20), digest_size=8).hexdigest()
    return {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "head": head}


@dataclass(frozen=True)
class Engine:
    """Where the row groups are computed: ``name`` ``serial`` (one worker in this process) or
    ``ray`` (``workers`` actors: a local instance of that many CPUs, or the cluster at
    ``RAY_ADDRESS``)."""

    name: str = "serial"
    workers: int = 2

    def __post_init__(self):
        if self.name not in ENGINES:
            raise TaskextrapError(f"engine must be one of {list(ENGINES)}, got {self.name!r}")
        check_int("workers", self.workers, 1)


@dataclass(frozen=True)
class NearAnchors:
    """What the second pass keeps: each task's ``k`` nearest among a ``reference`` sample of the
    library's tasks (the stream ``seed``)."""

    k: int = 8
    reference: int = NEAR_POOL
    seed: int = 0

    def __post_init__(self):
        check_int("k", self.k, 1)
        check_int("reference", self.reference, 2)
        check_int("seed", self.seed, 0)


def stream_index(
    model,
    data,
    out,
    engine: Engine = Engine(),
    near: NearAnchors = NearAnchors(),
    columns: tuple[str, str, str] = ("task", "x", "y"),
    progress: bool = True,
    trust_code: bool = False,
) -> dict:
    """Embed every task of the Parquet library ``data`` with the fitted RTE saved in ``model`` and
    give each its ``near.k`` nearest tasks among a seeded sample of ``near.reference`` tasks of the
    library, through ``engine`` (:class:`Engine`: serial, or Ray's actors); write the parts
    and ``index.json`` into ``out`` (module docstring). A folder holding this same plan's parts
    resumes; one holding another index is refused. Returns the ``index.json`` record (the plan,
    the reference's file positions, seconds per pass, the workers' peak memory). ``trust_code``:
    as in ``from_pretrained``, needed for a model whose library is a user module (a folder is
    data: without it such a folder is refused in one line before any worker starts)."""
    check_instance("engine", engine, Engine, "a streaming.Engine")
    check_instance("near", near, NearAnchors, "a streaming.NearAnchors")
    model, data, out = (
        Path(model).resolve(),
        Path(data).resolve(),
        Path(out).resolve(),
    )  # as a cluster's nodes read them
    groups = row_groups(data, columns)
    if groups.n_tasks < 2:
        raise TaskextrapError(f"{data}: {groups.n_tasks} task(s); an index needs at least 2")
    _check_points(_model(model, trust_code), groups)
    ref = rng(near.seed, "stream-reference").choice(groups.n_tasks, min(near.reference, groups.n_tasks), replace=False)
    ref = np.sort(ref)
    plan = {
        "format": FORMAT,
        "data": str(data),
        "source": _fingerprint(data),
        "model": str(model),
        "model_files": [_fingerprint(model / f) for f in ("config.json", "model.safetensors")],
        "columns": list(columns),
        "row_groups": list(groups.counts),
        "n_near": near.k,
        "seed": near.seed,
        "reference": ref.tolist(),
    }
    previous = _check_resumable(out, plan)
    todo = [g for g, n in enumerate(groups.counts) if n and not (out / PART.format(g)).is_file()]
    if previous.get("complete") and not todo:
        return previous  # nothing to do: the finished index stays as it is
    write_json_atomic(out / INDEX_FILE, plan | {"complete": False})
    for stale in out.glob(".*.parquet.*.tmp"):  # a killed writer's temporary file
        stale.unlink()
    t0 = time.perf_counter()
    with _Pool(engine, (str(model), str(data), str(out), columns, trust_code)) as run:
        embed_todo = [g for g in todo if not (out / EMBED_PART.format(g)).is_file()]
        embed = run("embed", [(g, groups.firsts[g]) for g in embed_todo], progress)
        t1 = time.perf_counter()
        reference_z = _gather(out, groups, ref)
        near_reports = run("near", [(g, reference_z, ref, near.k) for g in todo], progress)
        start_s = run.start_s
    for g, n in enumerate(groups.counts):  # a run stopped after a part was written left its embed part
        if n and (out / PART.format(g)).is_file():
            (out / EMBED_PART.format(g)).unlink(missing_ok=True)
    reports = embed + near_reports
    record = plan | {
        "complete": True,
        "engine": engine.name,
        "workers": engine.workers if engine.name == "ray" else 1,
        "tasks": groups.n_tasks,
        "dim": int(reference_z.shape[1]),
        "seconds": {
            "start": start_s,
            "embed": t1 - t0 - start_s,
            "near": time.perf_counter() - t1,
            "total": time.perf_counter() - t0,
        },
        "groups_done": len(todo),
        "worker_peak_mib": max((r["peak_mib"] for r in reports), default=None),
    }
    write_json_atomic(out / INDEX_FILE, record)
    return record


def _model(folder: Path, trust_code: bool = False) -> Any:
    """The fitted RTE saved in ``folder`` (read in the driver first: a bad folder is one line
    before any worker starts)."""
    from taskextrap.estimators.parameter import RTE

    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise TaskextrapError(
            f"{folder}: not a saved model folder (config.json and model.safetensors; fit writes them)"
        )
    return RTE.from_pretrained(folder, trust_code=trust_code)


def _check_points(rte: Any, groups: RowGroups) -> None:
    """Every task has the fewest points the model reads (its ``min_context_``), or a one-line
    error names the first task with fewer, before any work starts."""
    low = int(rte.min_context_)
    for g, few in enumerate(groups.fewest):
        if few is not None and few[1] < low:
            raise TaskextrapError(
                f"{groups.path}: row group {g}: task {few[0]!r} has {few[1]} point(s); this model reads at least "
                f"{low} (fit it with --min-context {few[1]}, or leave such tasks out)"
            )


def _check_resumable(out: Path, plan: dict) -> dict:
    """The record of the same plan already in ``out`` ({} when there is none); a folder that holds
    parts of another plan is refused (nothing of it is overwritten)."""
    old = out / INDEX_FILE
    if not old.is_file():
        if out.is_dir() and any(out.glob("*.parquet")):
            raise TaskextrapError(f"{out} holds Parquet files but no {INDEX_FILE}: choose an empty folder")
        return {}
    record = read_json(old)
    if not isinstance(record, dict) or {k: record.get(k) for k in plan} != plan:
        raise TaskextrapError(
            f"{out} holds the index of another library, model or setting: choose another folder, or delete it"
        )
    return record


def _gather(out: Path, groups: RowGroups, ref: np.ndarray) -> np.ndarray:
    """The proxies of the reference tasks (file positions ``ref``), read from the parts of the
    row groups that hold them, a group at a time."""
    _, pq = _pyarrow()
    where = np.searchsorted(np.asarray(groups.firsts), ref, side="right") - 1
    rows = []
    for g in np.unique(where):
        path = out / EMBED_PART.format(g)
        path = path if path.is_file() else out / PART.format(g)
        z = _stacked(_read_part(pq, path), "z_")
        rows.append(z[ref[where == g] - groups.firsts[g]])
    return np.concatenate(rows)


class OneThreadWorker(Worker):
    """A :class:`Worker` in a process of its own (a Ray actor) that computes on one thread for its
    life: in torch and in every native pool (BLAS, OpenMP), as the serial engine's run does, so
    both compute the same bits whatever the pools' defaults in each process."""

    def __init__(self, *args):
        self._threads = threads_limited(1)
        self._threads.__enter__()  # left for the actor's life: the process is this worker's alone
        super().__init__(*args)


class _Pool:
    """``run(method, calls, progress)`` on the chosen engine, started at the first call that has
    work (``start_s``: its seconds): each call a row group's ``Worker.embed`` or ``Worker.near``;
    returns the workers' reports. The serial engine runs one worker here, on one thread in torch
    and in every native pool (the caller's counts are restored on exit); Ray's actors (and a local Ray instance this
    started) live as long as the ``with`` block."""

    def __init__(self, engine: Engine, args: tuple):
        self.engine, self.workers, self.args = engine.name, engine.workers, args  # args: each Worker's
        self.ray: Any = None
        self.started = False
        self.worker: Worker | None = None
        self.actors: list = []
        self.threads = contextlib.ExitStack()  # the serial engine's one-thread block
        self.start_s = 0.0

    def __enter__(self) -> _Pool:
        return self

    def _start(self) -> None:
        t = time.perf_counter()
        if self.engine == "serial":
            self.threads.enter_context(threads_limited(1))
            self.worker = Worker(*self.args)
        else:
            self.ray, self.started = connect_ray("the ray engine", num_cpus=self.workers)
            actor = self.ray.remote(num_cpus=1)(OneThreadWorker)
            self.actors = [actor.remote(*self.args) for _ in range(self.workers)]
        self.start_s = time.perf_counter() - t

    def __call__(self, method: str, calls: list, progress: bool) -> list[dict]:
        if not calls:
            return []
        if self.worker is None and not self.actors:
            self._start()
        if self.worker is not None:
            return [getattr(self.worker, method)(*c) for c in _bar(calls, method, progress)]
        return self._run_ray(method, calls, progress)

    def _run_ray(self, method: str, calls: list, progress: bool) -> list[dict]:
        """Each actor takes the next call when it finishes one; an array of more than 64 KB is put
        in the object store once for every call that passes it (the reference)."""
        ray = self.ray
        put: dict[int, Any] = {}

        def stored(a):
            if not (isinstance(a, np.ndarray) and a.nbytes > 1 << 16):
                return a
            if id(a) not in put:
                put[id(a)] = ray.put(a)
            return put[id(a)]

        queue, pending, reports = [tuple(stored(a) for a in c) for c in reversed(calls)], {}, []
        bar = _bar(None, method, progress, total=len(calls))
        try:
            for actor in self.actors:
                if queue:
                    pending[getattr(actor, method).remote(*queue.pop())] = actor
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                actor = pending.pop(done[0])
                reports.append(ray.get(done[0]))
                if bar is not None:
                    bar.update()
                if queue:
                    pending[getattr(actor, method).remote(*queue.pop())] = actor
        except ray.exceptions.RayError as exc:  # a task's error, an actor that died, a lost node
            cause = getattr(exc, "cause", None)
            why = str(cause) if isinstance(cause, TaskextrapError) else last_line(exc)
            raise TaskextrapError(f"a worker failed: {why} (the parts written are kept; rerun to resume)") from None
        finally:
            if bar is not None:
                bar.close()
        return reports

    def __exit__(self, *exc) -> None:
        self.threads.close()
        if self.ray is not None:
            for actor in self.actors:
                self.ray.kill(actor)
            if self.started:
                self.ray.shutdown()


def _bar(calls, method: str, progress: bool, total: int | None = None):
    """A tqdm bar over row groups on stderr (``calls`` wrapped; or a bar of ``total`` to update)."""
    if not progress:
        return calls
    from tqdm.auto import tqdm

    desc = {"embed": "embedding row groups", "near": "near anchors"}[method]
    if calls is None:
        return tqdm(total=total, desc=desc, unit="group", file=sys.stderr, delay=2.0)
    return tqdm(calls, desc=desc, unit="group", file=sys.stderr, delay=2.0)


def read_index(out) -> dict[str, np.ndarray]:
    """A complete index folder's parts as whole arrays: ``task`` ids, ``position``, ``z`` (n, dim),
    ``near`` (n, n_near) file positions and their ``distance`` (for a library that fits in memory;
    a larger one is read part by part with pyarrow)."""
    _, pq = _pyarrow()
    out = Path(out)
    record = read_json(out / INDEX_FILE) if (out / INDEX_FILE).is_file() else None
    if not isinstance(record, dict) or record.get("format") != FORMAT or not record.get("complete"):
        raise TaskextrapError(f"{out}: not a complete streamed index (no finished {INDEX_FILE})")
    parts = [_read_part(pq, out / PART.format(g)) for g, n in enumerate(record["row_groups"]) if n]
    table = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    return {
        "task": table["task"].astype(str),
        "position": table["position"],
        "z": _stacked(table, "z_"),
        "near": _stacked(table, "near_"),
        "distance": _stacked(table, "distance_"),
    }
