"""Tasks observed as data, not written as a formula: a library from a long table of observations.

A table has one row per observation: a task id, an input x and an output y, optionally a split
label per task (which tasks are the library and which are held out) and known task parameters.
It is read from CSV, Parquet or NPZ files, a pandas DataFrame or a dict of arrays
(:func:`read_tasks`). Tasks may be observed at different numbers of points and different x.

:meth:`ObservedTasks.library` turns the library's tasks into a :class:`TaskSet` of an
:class:`ObservedFamily`: each task is a callable read through an interpolant of its own points
(``pchip`` by default, chosen on dev: ``benchmarks/results/observed-interpolants.json``), so every part
of RTE (the protocol's draws, the scaler, Gamma, Psi, the leak audit, saving) reads it as it reads
a formula. The task's parameter is its index. The library's domain is the range every library
task was observed on; a read outside a task's own observed range is an error (``outside="error"``,
the default) or, when asked for, the task's end value (``outside="hold"``): an anchor is never
extrapolated silently.

Example:
    >>> import numpy as np
    >>> from taskextrap.tasks.observed import ObservedTasks
    >>> x = np.tile(np.linspace(0, 1, 6), 3); task = np.repeat(["a", "b", "c"], 6)
    >>> data = ObservedTasks.from_columns({"task": task, "x": x, "y": np.sin(x) * np.repeat([1, 2, 3], 6)})
    >>> library = data.library()
    >>> library.values(np.array([[0.25]]), [1]).round(4)  # task "b" between its points
    array([[0.4946]])
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.specs import register_data_family
from taskextrap.tasks.taskset import TaskSet
from taskextrap.validation import check_int

INTERPOLANTS = ("pchip", "linear", "cubic")  # the first is the default (chosen on dev)
OUTSIDE = ("error", "hold")
MIN_POINTS = 3  # a task's fewest observations: two points make a line, not a curve
TRAIN_LABEL = "train"  # the split label of library tasks when the table has a split column
TASK_PARAMETER = "task"  # the observed family's one parameter: a task's index in the library


# ----------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Table:
    """Columns of a long table, with where each row came from (for one-line errors)."""

    columns: dict[str, np.ndarray]
    source: np.ndarray  # (rows,) file name of each row
    line: np.ndarray  # (rows,) row number in its file (CSV: the line; others: 1-based row)

    def where(self, i: int) -> str:
        """Where row ``i`` came from, for an error message: ``<file> row <n>``."""
        return f"{self.source[i]} row {self.line[i]}"

    def column(self, name: str, role: str) -> np.ndarray:
        """Column ``name`` (its ``role`` in the message when it is missing, with a close name)."""
        if name not in self.columns:
            raise TaskextrapError(
                f"{self.source[0]}: no {role} column {name!r}; its columns are {sorted(self.columns)}"
                + did_you_mean(name, self.columns)
            )
        return self.columns[name]

    def text(self, name: str, role: str) -> np.ndarray:
        """Column ``name`` as strings (task ids, labels)."""
        return np.array([str(v) for v in self.column(name, role)], dtype=object)

    def numbers(self, name: str, role: str) -> np.ndarray:
        """Column ``name`` as finite floats: one line naming the file and row of the first bad value."""
        raw = self.column(name, role)
        out = np.empty(len(raw))
        for i, v in enumerate(raw):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                raise TaskextrapError(f"{self.where(i)}: {role} column {name!r} holds {v!r}, not a number") from None
        bad = np.flatnonzero(~np.isfinite(out))
        if len(bad):
            raise TaskextrapError(f"{self.where(bad[0])}: {role} column {name!r} is {out[bad[0]]} (NaN or inf)")
        return out


def _read_csv(path: Path) -> Table:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise TaskextrapError(f"{path}: the file is empty (a header row and one row per observation are needed)")
        header = [h.strip() for h in header]
        rows, lines = [], []
        for row in reader:
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise TaskextrapError(
                    f"{path} row {reader.line_num}: {len(row)} fields where the header has {len(header)}"
                )
            rows.append(row)
            lines.append(reader.line_num)
    if not rows:
        raise TaskextrapError(f"{path}: the file has a header but no observations")
    cols = {h: np.array([r[i].strip() for r in rows], dtype=object) for i, h in enumerate(header)}
    return Table(cols, np.full(len(rows), str(path), dtype=object), np.array(lines))


def _read_npz(path: Path) -> Table:
    with np.load(path, allow_pickle=False) as z:  # never unpickle
        cols = {k: np.asarray(z[k]) for k in z.files}
    return _table(cols, str(path))


def _read_parquet(path: Path) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskextrapError(
            f"{path}: reading Parquet needs pyarrow (pip install pyarrow), or save it as CSV"
        ) from None
    t = pq.read_table(path)
    return _table({name: t.column(name).to_numpy() for name in t.column_names}, str(path))


def _table(cols: Mapping, source: str) -> Table:
    """A table of in-memory columns (equal lengths, at least one row)."""
    cols = {str(k): np.asarray(v) for k, v in cols.items()}
    lengths = {k: len(v) if v.ndim == 1 else -1 for k, v in cols.items()}
    if any(n < 0 for n in lengths.values()) or len(set(lengths.values())) > 1:
        raise TaskextrapError(f"{source}: every column must be 1-D and of one length, got {lengths}")
    n = next(iter(lengths.values()), 0)
    if n == 0:
        raise TaskextrapError(f"{source}: the table is empty (one row per observation is needed)")
    return Table(cols, np.full(n, source, dtype=object), np.arange(1, n + 1))


def _read_one(item) -> Table:
    if isinstance(item, (str, Path)):
        path = Path(item)
        if not path.is_file():
            raise TaskextrapError(f"{path}: no such file")
        if path.stat().st_size == 0:
            raise TaskextrapError(f"{path}: the file is empty")
        readers = {".csv": _read_csv, ".npz": _read_npz, ".parquet": _read_parquet, ".pq": _read_parquet}
        if path.suffix.lower() not in readers:
            raise TaskextrapError(
                f"{path}: unknown file type {path.suffix!r}; taskextrap reads .csv, .parquet and .npz"
            )
        return readers[path.suffix.lower()](path)
    if hasattr(item, "to_dict") and hasattr(item, "columns"):  # a pandas DataFrame
        return _table({c: item[c].to_numpy() for c in item.columns}, "the DataFrame")
    if isinstance(item, Mapping):
        return _table(item, "the arrays")
    raise TaskextrapError(
        f"cannot read tasks from a {type(item).__name__}: give a file path, a DataFrame or a dict of arrays"
    )


def read_table(data) -> Table:
    """A long table from a path (``.csv``, ``.parquet``, ``.npz``), a DataFrame, a dict of 1-D
    arrays or a list of these (their columns must agree), with where each row came from."""
    items = list(data) if isinstance(data, (list, tuple)) else [data]
    if not items:
        raise TaskextrapError("no table given: give at least one file, DataFrame or dict of arrays")
    return _concat([_read_one(item) for item in items])


def _concat(tables: list[Table]) -> Table:
    first = tables[0]
    for t in tables[1:]:
        if set(t.columns) != set(first.columns):
            raise TaskextrapError(
                f"the files' columns differ: {first.source[0]} has {sorted(first.columns)}, "
                f"{t.source[0]} has {sorted(t.columns)}"
            )
    cols = {k: np.concatenate([t.columns[k].astype(object) for t in tables]) for k in first.columns}
    return Table(cols, np.concatenate([t.source for t in tables]), np.concatenate([t.line for t in tables]))


def read_tasks(
    data,
    task: str = "task",
    x: str | Sequence[str] = "x",
    y: str = "y",
    split: str | None = None,
    params: Sequence[str] = (),
    min_points: int = MIN_POINTS,
    group: str | None = None,
) -> ObservedTasks:
    """Observed tasks from a long table: ``data`` is a path (``.csv``, ``.parquet``, ``.npz``), a
    pandas DataFrame, a dict of 1-D arrays, or a list of these (their columns must agree).

    Args:
        task: the column naming each row's task.
        x: the input column (the parameter regime reads one).
        y: the output column.
        split: an optional column labelling each task (the library's tasks are labelled
            ``"train"``; anything else is held out), constant within a task.
        params: optional columns of known task parameters, constant within a task.
        min_points: the fewest observations a task may have.
        group: an optional column naming each task's group, constant within a task: a primitive's
            family for a composition library (:meth:`ObservedTasks.primitives`).

    Bad data is one line naming the file and row: a value that is not a finite number, a task
    with fewer than ``min_points`` points, one x twice within a task, a label or parameter that
    changes within a task, files whose columns differ, an empty file.
    """
    xs = [x] if isinstance(x, str) else list(x)
    if len(xs) != 1:
        raise TaskextrapError(f"the parameter regime reads one x column, got {len(xs)}: {xs}")
    table = read_table(data)
    return ObservedTasks._from_table(table, task, xs[0], y, split, tuple(params), min_points, group)


# ----------------------------------------------------------------------------- observed tasks


@dataclass(frozen=True, eq=False)
class ObservedTasks:
    """Tasks observed as points: task ``i`` holds ``x[offsets[i]:offsets[i+1]]`` (increasing) and
    the matching ``y``, its ``split`` label and its known ``params`` (a row of ``param_names``).

    Examples:
        Tasks read from a table (a file name, a DataFrame or columns), each task at its own inputs:

        >>> import numpy as np
        >>> from taskextrap import read_tasks
        >>> x = np.tile(np.linspace(0, 1, 5), 3)
        >>> table = {"task": np.repeat(["a", "b", "c"], 5), "x": x, "y": np.sin(x) + np.repeat([0.0, 1.0, 2.0], 5)}
        >>> observed = read_tasks(table)
        >>> observed.ids.tolist(), observed.counts().tolist()
        (['a', 'b', 'c'], [5, 5, 5])
        >>> library = observed.library()  # each task read through a pchip interpolant
        >>> library.values(np.full((3, 1), 0.5)).round(3).ravel().tolist()
        [0.479, 1.479, 2.479]
    """

    ids: np.ndarray  # (n,) task ids as strings
    x: np.ndarray
    y: np.ndarray
    offsets: np.ndarray  # (n + 1,)
    split: np.ndarray  # (n,) labels
    params: np.ndarray  # (n, len(param_names)) known task parameters (may have 0 columns)
    param_names: tuple[str, ...] = ()
    names: tuple[str, str] = ("x", "y")  # the x and y columns' names
    group: np.ndarray | None = None  # (n,) each task's group (a primitive's family), when read

    def __repr__(self) -> str:
        """A summary (tasks, labels, points per task, the x range, known parameters), not the arrays."""
        counts = self.counts()
        labels = ", ".join(
            f"{n} {label!r}" for label, n in zip(*np.unique(self.split, return_counts=True), strict=True)
        )
        points = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}-{counts.max()}"
        lo, hi = (float(self.x.min()), float(self.x.max())) if len(self.x) else (np.nan, np.nan)
        known = f", params {list(self.param_names)}" if self.param_names else ""
        where = f"{self.names[0]} in [{lo:g}, {hi:g}]"
        return f"ObservedTasks({len(self)} tasks: {labels}; {points} points each, {where}{known})"

    @classmethod
    def from_columns(cls, columns: Mapping, **kwargs) -> ObservedTasks:
        """Tasks from a dict of 1-D arrays (``read_tasks``'s keyword arguments)."""
        return read_tasks(dict(columns), **kwargs)

    @classmethod
    def _from_table(cls, table, task, x, y, split, params, min_points, group=None) -> ObservedTasks:
        ids = table.text(task, "task")
        xv, yv = table.numbers(x, "x"), table.numbers(y, "y")
        labels = None if split is None else table.text(split, "split")
        groups = None if group is None else table.text(group, "group")
        known = np.stack([table.numbers(p, "parameter") for p in params], axis=1) if params else np.zeros((len(xv), 0))
        uniq, first = np.unique(ids, return_index=True)
        order_ids = uniq[np.argsort(first)]  # tasks in the order they first appear
        rows_of: dict[str, list[int]] = {t: [] for t in order_ids}
        for i, t in enumerate(ids):
            rows_of[t].append(i)
        xs, ys, offsets, split_out, params_out, group_out = [], [], [0], [], [], []
        for t in order_ids:
            rows = np.array(rows_of[t])
            if len(rows) < min_points:
                raise TaskextrapError(
                    f"{table.where(rows[0])}: task {t!r} has {len(rows)} point(s); a task needs at least {min_points}"
                )
            order = np.argsort(xv[rows], kind="stable")
            rows = rows[order]
            dup = np.flatnonzero(np.diff(xv[rows]) == 0)
            if len(dup):
                a, b = sorted((rows[dup[0]], rows[dup[0] + 1]))
                raise TaskextrapError(
                    f"{table.where(a)} and row {table.line[b]}: task {t!r} has x={xv[a]:g} twice "
                    "(average repeated measurements first)"
                )
            for name, col in (("split", labels), ("group", groups), *((p, known[:, j]) for j, p in enumerate(params))):
                if col is not None and len(set(col[rows].tolist())) > 1:
                    changed = rows[np.flatnonzero(col[rows] != col[rows[0]])[0]]
                    raise TaskextrapError(
                        f"{table.where(changed)}: task {t!r} changes its {name} "
                        f"({col[rows[0]]!r} -> {col[changed]!r}); it must be constant within a task"
                    )
            xs.append(xv[rows])
            ys.append(yv[rows])
            offsets.append(offsets[-1] + len(rows))
            split_out.append(TRAIN_LABEL if labels is None else labels[rows[0]])
            params_out.append(known[rows[0]])
            group_out.append(None if groups is None else groups[rows[0]])
        return cls(
            np.array(order_ids, dtype=object),
            np.concatenate(xs),
            np.concatenate(ys),
            np.array(offsets),
            np.array(split_out, dtype=object),
            np.array(params_out).reshape(len(order_ids), len(params)),
            tuple(params),
            (x, y),
            None if groups is None else np.array(group_out, dtype=object),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def points(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Task ``i``'s observed (x, y), x increasing."""
        sl = slice(self.offsets[i], self.offsets[i + 1])
        return self.x[sl], self.y[sl]

    def counts(self) -> np.ndarray:
        """Observations per task (n,)."""
        return np.diff(self.offsets)

    def subset(self, index) -> ObservedTasks:
        """The tasks at ``index`` (indices or a boolean mask), in that order."""
        index = np.arange(len(self))[index]
        parts = [self.points(i) for i in index]
        offsets = np.concatenate([[0], np.cumsum([len(p[0]) for p in parts])]).astype(int)
        cat = lambda k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0)  # noqa: E731
        return dataclasses.replace(
            self, ids=self.ids[index], x=cat(0), y=cat(1), offsets=offsets, split=self.split[index],
            params=self.params[index], group=None if self.group is None else self.group[index],
        )  # fmt: skip

    def with_split(self, label: str) -> ObservedTasks:
        """The tasks labelled ``label`` (a one-line error naming the labels there are when none is)."""
        mask = self.split == label
        if not mask.any():
            labels = sorted(set(self.split.tolist()))
            raise TaskextrapError(
                f"no task is labelled {label!r}; the labels are {labels}" + did_you_mean(label, labels)
            )
        return self.subset(mask)

    def library(
        self,
        name: str = "observed",
        interpolant: str = INTERPOLANTS[0],
        outside: str = "error",
        label: str = TRAIN_LABEL,
    ) -> TaskSet:
        """The tasks labelled ``label`` (all tasks of a table without a split column) as a library:
        a TaskSet of an :class:`ObservedFamily` (each task read through ``interpolant``; a read
        outside a task's observed range handled by ``outside``).

        Returns:
            A :class:`~taskextrap.tasks.taskset.TaskSet` of an :class:`ObservedFamily`:
                every task, read through the interpolant.
        """
        tasks = self.with_split(label)
        family = ObservedFamily.of(tasks, name, interpolant, outside)
        return TaskSet(
            family, np.arange(len(tasks), dtype=float)[:, None], np.full(len(tasks), TRAIN_LABEL, dtype=object)
        )

    def primitives(
        self, points: int = 200, interpolant: str = INTERPOLANTS[0], name: str = "observed", label: str = TRAIN_LABEL
    ):
        """The tasks labelled ``label`` as a composition library (``PrimitiveSet.from_curves``):
        each task a primitive of its group's family (``read_tasks(..., group=...)``), its curve
        read through ``interpolant`` at ``points`` inputs over the range every task was observed
        on. An outer primitive is read at its inner's values; where they leave that range its end
        value is held (the ``PrimitiveSet`` convention), which a one-line warning says."""
        import warnings

        from taskextrap.errors import TaskextrapWarning
        from taskextrap.tasks.primitives import PrimitiveSet

        if self.group is None:
            raise TaskextrapError("a composition library needs each task's family: read_tasks(..., group='family')")
        tasks = self.with_split(label)
        groups = self.group[self.split == label]
        family = ObservedFamily.of(tasks, name, interpolant, "error")
        assert family.interpolants is not None
        lo, hi = family.domain
        grid = np.linspace(lo, hi, check_int("points", points, 2))
        curves = family.interpolants(np.arange(len(tasks)), np.broadcast_to(grid, (len(tasks), len(grid))))
        names = list(dict.fromkeys(groups.tolist()))
        if curves.min() < lo or curves.max() > hi:
            warnings.warn(
                f"the primitives' values span [{curves.min():g}, {curves.max():g}], beyond their common observed "
                f"x range [{lo:g}, {hi:g}]: a composition reads an outer primitive there at its end value",
                TaskextrapWarning,
                stacklevel=2,
            )
        index = np.array([names.index(g) for g in groups])
        return PrimitiveSet.from_curves(names, index, grid, curves, (lo, hi))

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The tasks as named arrays for a safetensors file (ids and labels go in the JSON)."""
        return {
            f"{prefix}x": self.x,
            f"{prefix}y": self.y,
            f"{prefix}offsets": self.offsets,
            f"{prefix}params": self.params,
        }

    def description(self) -> dict:
        """The tasks' ids, labels and column names as plain JSON (:meth:`from_arrays` reads them)."""
        return {"ids": self.ids.tolist(), "split": self.split.tolist(), "param_names": list(self.param_names),
                "names": list(self.names), "group": None if self.group is None else self.group.tolist()}  # fmt: skip

    @classmethod
    def from_arrays(cls, arrays: Mapping, desc: dict, prefix: str) -> ObservedTasks:
        """The tasks :meth:`arrays` and :meth:`description` saved."""
        return cls(
            np.array(desc["ids"], dtype=object),
            arrays[f"{prefix}x"],
            arrays[f"{prefix}y"],
            arrays[f"{prefix}offsets"].astype(int),
            np.array(desc["split"], dtype=object),
            arrays[f"{prefix}params"],
            tuple(desc["param_names"]),
            tuple(desc["names"]),
            None if desc.get("group") is None else np.array(desc["group"], dtype=object),
        )


# ----------------------------------------------------------------------------- interpolants


def _slopes(x: np.ndarray, y: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Each segment's slopes at its left and right knot: the interpolant as piecewise cubic Hermite
    (linear: both the secant, which makes the cubic a line; pchip: monotone, no overshoot; cubic:
    a natural cubic spline)."""
    if kind == "linear":
        s = np.diff(y) / np.diff(x)
        return s, s
    from scipy.interpolate import CubicSpline, PchipInterpolator

    f = PchipInterpolator(x, y) if kind == "pchip" else CubicSpline(x, y, bc_type="natural")
    d = f.derivative()(x)
    return d[:-1], d[1:]


@dataclass(frozen=True, eq=False)
class Interpolants:
    """Every task's interpolant, evaluated for many (task, x) at once (one sorted search)."""

    tasks: ObservedTasks
    kind: str
    outside: str
    d0: np.ndarray = field(repr=False)  # (total knots,) left slope of the segment starting at each knot
    d1: np.ndarray = field(repr=False)
    keys: np.ndarray = field(repr=False)  # task index * 2 + x mapped to [0, 1]: one increasing array
    lo: float = 0.0
    span: float = 1.0

    @classmethod
    def of(cls, tasks: ObservedTasks, kind: str, outside: str) -> Interpolants:
        """Every task's interpolant of ``kind`` (:data:`INTERPOLANTS`), reads outside a task's
        range handled by ``outside`` (:data:`OUTSIDE`): one-line errors for other values."""
        if kind not in INTERPOLANTS:
            raise TaskextrapError(
                f"unknown interpolant {kind!r}; choose from {list(INTERPOLANTS)}" + did_you_mean(kind, INTERPOLANTS)
            )
        if outside not in OUTSIDE:
            raise TaskextrapError(f"outside must be one of {list(OUTSIDE)}, got {outside!r}")
        d0, d1 = np.zeros(len(tasks.x)), np.zeros(len(tasks.x))
        for i in range(len(tasks)):
            a, b = tasks.offsets[i], tasks.offsets[i + 1]
            d0[a : b - 1], d1[a : b - 1] = _slopes(*tasks.points(i), kind)
        lo, hi = float(tasks.x.min()), float(tasks.x.max())
        span = max(hi - lo, 1e-300)
        keys = 2.0 * np.repeat(np.arange(len(tasks)), tasks.counts()) + (tasks.x - lo) / span
        return cls(tasks, kind, outside, d0, d1, keys, lo, span)

    def __call__(self, task: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Task ``task[i]`` at ``x[i]`` for every row (x (n, m), task (n,) or (n, 1)) -> (n, m)."""
        t = np.broadcast_to(np.asarray(task).reshape(len(x), -1), x.shape).astype(int)
        first, last = self.tasks.offsets[t], self.tasks.offsets[t + 1] - 1
        xl, xr = self.tasks.x[first], self.tasks.x[last]
        out = (x < xl) | (x > xr)
        if out.any():
            if self.outside == "error":
                i = np.flatnonzero(out.reshape(-1))[0]
                ti, xi = t.reshape(-1)[i], x.reshape(-1)[i]
                raise TaskextrapError(
                    f"task {self.tasks.ids[ti]!r} was observed on x in [{xl.reshape(-1)[i]:g}, {xr.reshape(-1)[i]:g}] "
                    f"and was read at x={xi:g}: an observed task is never extrapolated (keep x inside the library's "
                    "domain, or build the library with outside='hold')"
                )
            x = np.clip(x, xl, xr)  # "hold": the end value
        j = np.searchsorted(self.keys, 2.0 * t + (x - self.lo) / self.span, side="right") - 1
        j = np.clip(j, first, last - 1)
        x0, x1 = self.tasks.x[j], self.tasks.x[j + 1]
        y0, y1 = self.tasks.y[j], self.tasks.y[j + 1]
        h = x1 - x0
        s = (x - x0) / h
        s2, s3 = s * s, s * s * s
        return (
            (2 * s3 - 3 * s2 + 1) * y0
            + (s3 - 2 * s2 + s) * h * self.d0[j]
            + (-2 * s3 + 3 * s2) * y1
            + (s3 - s2) * h * self.d1[j]
        )


# ----------------------------------------------------------------------------- the family


@dataclass(frozen=True, eq=False)
class ObservedFamily(ParametricFamily):
    """The family of observed tasks: parameter ``task`` (a task's index) selects its interpolant.

    Its domain is the range every one of its tasks was observed on, its regions the split labels
    (each a range of task indices), its output range the spread of the tasks' observed values.
    Build one with :meth:`ObservedTasks.library`."""

    interpolants: Interpolants | None = field(default=None, repr=False)

    @classmethod
    def of(cls, tasks: ObservedTasks, name: str, interpolant: str, outside: str) -> ObservedFamily:
        """The family of ``tasks`` (at least 2, sharing an x range: one-line errors otherwise),
        named ``name``, each read through ``interpolant`` with ``outside``'s rule."""
        if len(tasks) < 2:
            raise TaskextrapError(f"a library needs at least 2 observed tasks, got {len(tasks)}")
        lows = np.array([tasks.points(i)[0][0] for i in range(len(tasks))])
        highs = np.array([tasks.points(i)[0][-1] for i in range(len(tasks))])
        lo, hi = lows.max(), highs.min()
        if not lo < hi:
            a, b = int(lows.argmax()), int(highs.argmin())
            raise TaskextrapError(
                f"the library's tasks share no x range: task {tasks.ids[a]!r} starts at x={lo:g} and task "
                f"{tasks.ids[b]!r} ends at x={hi:g}; drop one or observe them on a common range"
            )
        interp = Interpolants.of(tasks, interpolant, outside)
        return cls(
            name=name,
            fn=interp,
            domain=(float(lo), float(hi)),
            fixed={},
            shift=TASK_PARAMETER,
            regions={TRAIN_LABEL: (0.0, float(len(tasks) - 1))},
            train_regions=(TRAIN_LABEL,),
            description=f"{len(tasks)} observed tasks ({interpolant} interpolant, outside={outside})",
            interpolants=interp,
        )

    def _check_signature(self):
        pass  # fn is the interpolants, called by __call__ below

    def check(self, label: str | None = None) -> None:
        pass  # the data were checked when read (read_tasks): there is no formula to try

    @property
    def tasks(self) -> ObservedTasks:
        """The observed tasks the family reads."""
        assert self.interpolants is not None
        return self.interpolants.tasks

    def __call__(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Tasks ``params`` (n, 1): task indices, at inputs ``x`` (n, m) -> (n, m), each through its
        interpolant (a one-line error for an index that is not a task's)."""
        params = self._params(params)
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[0] != params.shape[0]:
            raise TaskextrapError(f"family {self.name!r}: x must have shape ({params.shape[0]}, m), got {x.shape}")
        idx = np.rint(params[:, 0]).astype(int)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self.tasks) or np.any(np.abs(params[:, 0] - idx) > 1e-9)):
            raise TaskextrapError(f"family {self.name!r}: a task index must be an integer in [0, {len(self.tasks)})")
        assert self.interpolants is not None
        return self.interpolants(idx, x)

    def sample_params(self, region: str, n: int, rng: np.random.Generator) -> np.ndarray:
        """Refused in one line: observed tasks have no formula to draw new ones from."""
        raise TaskextrapError(
            f"family {self.name!r} is observed data: it has no formula to draw new tasks from (its tasks are the "
            "observed ones; ObservedTasks.library gives them)"
        )

    def output_range(self, rng: np.random.Generator, n: int = 256, m: int = 200) -> float:
        """The spread (max - min) of the tasks' observed values (the rng is not used: no draw)."""
        return float(self.tasks.y.max() - self.tasks.y.min())

    def state(self, prefix: str) -> tuple[dict, dict]:
        """The family as arrays and a description (:meth:`from_state`): its tasks' points, the
        interpolant and the outside rule."""
        assert self.interpolants is not None
        desc = {"observed": self.tasks.description(), "name": self.name, "interpolant": self.interpolants.kind,
                "outside": self.interpolants.outside}  # fmt: skip
        return self.tasks.arrays(prefix), desc

    @classmethod
    def from_state(cls, arrays: Mapping, desc: dict, prefix: str) -> ObservedFamily:
        """The family :meth:`state` saved: the same points, so the same values to the bit."""
        tasks = ObservedTasks.from_arrays(arrays, desc["observed"], prefix)
        return cls.of(tasks, desc["name"], desc["interpolant"], desc["outside"])


register_data_family("observed", ObservedFamily)  # a saved library holds its points (tasks.specs)
