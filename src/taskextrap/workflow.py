"""RTE on one's own observed tasks: fit, predict and evaluate (the CLI's ``fit``, ``predict``,
``evaluate``; the same functions from Python).

- :func:`fit_observed`: a library from data files (``tasks.observed``), RTE fitted on it and
  saved as a folder (``save_pretrained``) with ``fit.json`` beside it: the data read, the
  settings, the times, and the interval scale chosen on the data's own **dev split** (library
  tasks held out of a first fit; the real targets are never read).
- :func:`predict_observed`: a saved model, targets' contexts (any number of points each) and
  query inputs -> per query the mean, the interval's bounds and level, and the candidate used
  (anchor task and shift).
- :func:`evaluate_observed`: a saved model and held-out targets' observations -> each target's
  context (``context_size`` points) and queries (the rest), rte beside the method table's rows
  for a user's library (``baselines.table``, regime ``observed``: ``ctx-interp``, ``ctx-polyfit``,
  ``library-best-fit``, ``ctx-gp``) with paired differences over targets.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.files import write_json_atomic, write_text_atomic
from taskextrap.search.posterior import INTERVAL_LEVEL
from taskextrap.tasks.observed import ObservedTasks, read_table, read_tasks
from taskextrap.validation import check_int

FIT_RECORD = "fit.json"
CONTEXT_CHOICES = ("random", "first")  # which of a target's points are its context
DEV_FRACTION = 0.2  # library tasks held out for the dev split


@dataclass(frozen=True)
class Columns:
    """Which columns of a table hold what (``read_tasks``'s arguments)."""

    task: str = "task"
    x: str = "x"
    y: str = "y"
    split: str | None = None
    params: tuple[str, ...] = ()

    def read(self, data, min_points: int = 3) -> ObservedTasks:
        return read_tasks(data, self.task, self.x, self.y, self.split, self.params, min_points)


@dataclass(frozen=True)
class Reading:
    """How observed tasks become a library (``ObservedTasks.library``): read between a task's
    points by ``interpolant``, outside its observed range as ``outside`` says ("error" or
    "hold"), and named ``name``."""

    interpolant: str = "pchip"
    outside: str = "error"
    name: str = "observed"

    def library(self, tasks: ObservedTasks):
        """``tasks`` as a library read this way."""
        return tasks.library(self.name, self.interpolant, self.outside)


@dataclass(frozen=True)
class DevCalibration:
    """How ``fit`` chooses the interval scale on a dev split of the library's own tasks
    (:func:`dev_split`): the known parameter whose largest tasks are held out (``order``; None: a
    random share), and the dev targets' contexts, ``context_size`` points (None: the protocol's)
    chosen as ``context`` says ("random" or "first"), as you will evaluate."""

    order: str | None = None
    context_size: int | None = None
    context: str = "random"


# ----------------------------------------------------------------------------- contexts and queries


@dataclass(frozen=True)
class TargetSplit:
    """Targets' contexts (n, c) and queries padded to one width (n, q) with a mask of the real ones."""

    ids: np.ndarray
    ctx_x: np.ndarray
    ctx_y: np.ndarray
    qry_x: np.ndarray
    qry_y: np.ndarray
    mask: np.ndarray  # (n, q) True where a query is real (a target's padding repeats its own points)
    dropped: int  # observations outside the library's domain, not used

    def __repr__(self) -> str:
        q = self.mask.sum(axis=1)
        queries = f"{q.min()}" if q.min() == q.max() else f"{q.min()}-{q.max()}"
        return (f"TargetSplit({len(self.ids)} targets: {self.ctx_x.shape[1]} context points and {queries} queries "
                f"each; {self.dropped} observations outside the domain left out)")  # fmt: skip


def split_targets(
    tasks: ObservedTasks, size: int, how: str = "random", domain: tuple[float, float] | None = None, seed: int = 0
) -> TargetSplit:
    """Targets read from a file (``read_tasks``) as contexts and queries, in one call: each
    target's observations inside ``domain`` (None: all; a model's is ``rte.library_.family.domain``)
    split into ``size`` context points (``how``: "random", drawn with ``seed``; "first", the
    smallest x) and the rest as queries. A target with fewer than ``size + 1`` points inside the
    domain is one line naming it.

        >>> s = split_targets(read_tasks("targets.csv"), 8, "first")  # doctest: +SKIP
        >>> mean, sd = rte.predict(s.ctx_x, s.ctx_y, s.qry_x, return_std=True)  # doctest: +SKIP
    """
    check_int("context size", size, 1)
    if how not in CONTEXT_CHOICES:
        raise TaskextrapError(f"context must be one of {list(CONTEXT_CHOICES)}, got {how!r}")
    g = np.random.default_rng(seed)
    lo, hi = domain if domain is not None else (-np.inf, np.inf)
    parts, dropped = [], 0
    for i in range(len(tasks)):
        x, y = tasks.points(i)
        inside = (x >= lo) & (x <= hi)
        dropped += int((~inside).sum())
        x, y = x[inside], y[inside]
        if len(x) < size + 1:
            raise TaskextrapError(
                f"target {tasks.ids[i]!r} has {len(x)} point(s) inside the library's domain [{lo:g}, {hi:g}]; "
                f"a context of {size} and one query need {size + 1}"
            )
        pick = np.arange(size) if how == "first" else np.sort(g.choice(len(x), size, replace=False))
        rest = np.setdiff1d(np.arange(len(x)), pick)
        parts.append((x[pick], y[pick], x[rest], y[rest]))
    q = max(len(p[2]) for p in parts)
    pad = lambda a: np.concatenate([a, np.resize(a, q - len(a))])  # noqa: E731 - repeats the target's own points
    return TargetSplit(
        tasks.ids,
        np.stack([p[0] for p in parts]),
        np.stack([p[1] for p in parts]),
        np.stack([pad(p[2]) for p in parts]),
        np.stack([pad(p[3]) for p in parts]),
        np.stack([np.arange(q) < len(p[2]) for p in parts]),
        dropped,
    )


def _target_mse(pred: np.ndarray, split: TargetSplit) -> np.ndarray:
    return (((pred - split.qry_y) ** 2) * split.mask).sum(axis=1) / split.mask.sum(axis=1)


def _target_coverage(mean, std, split: TargetSplit) -> np.ndarray:
    from taskextrap.search.posterior import covered

    return (covered(mean, std, split.qry_y) * split.mask).sum(axis=1) / split.mask.sum(axis=1)


# ----------------------------------------------------------------------------- fit


def dev_split(
    tasks: ObservedTasks, order_by: str | None, fraction: float, seed: int
) -> tuple[ObservedTasks, ObservedTasks, str]:
    """The dev split of a library's tasks: (dev library, dev targets, how it was made). With
    ``order_by`` (a known parameter) the top ``fraction`` of the tasks by it are held out, a
    pseudo-extrapolation as the built-in dev splits; otherwise a random ``fraction`` (which is
    an interpolation split: it says so)."""
    n = len(tasks)
    k = max(1, round(fraction * n))
    if n - k < 2:
        raise TaskextrapError(f"a dev split needs at least 3 library tasks, got {n}")
    if order_by is not None:
        if order_by not in tasks.param_names:
            raise TaskextrapError(f"--dev-order {order_by!r} is not a known parameter; have {list(tasks.param_names)}")
        order = np.argsort(tasks.params[:, tasks.param_names.index(order_by)], kind="stable")
        how = f"the {k} library tasks of largest {order_by} held out (a pseudo-extrapolation)"
    else:
        order = np.random.default_rng(seed).permutation(n)
        how = f"{k} random library tasks held out (an interpolation split: give --dev-order for an extrapolation one)"
    return tasks.subset(np.sort(order[: n - k])), tasks.subset(np.sort(order[n - k :])), how


def fit_observed(
    data,
    columns: Columns = Columns(),
    out: str | Path | None = None,
    settings: dict | None = None,
    dev: DevCalibration | None = DevCalibration(),
    reading: Reading = Reading(),
    verbose: bool = True,
):
    """Read ``data`` by ``columns``, fit RTE on its library tasks with :func:`fit_calibrated` and
    save it into ``out`` (when given) with ``fit.json``: what ``taskextrap fit`` runs. Returns
    (the fitted RTE, the fit record)."""
    t0 = time.perf_counter()
    record: dict[str, Any] = {
        "data": [str(d) for d in (data if isinstance(data, (list, tuple)) else [data])],
        "columns": vars(columns) | {"params": list(columns.params)},
    }
    rte, fitted = fit_calibrated(columns.read(data), settings, dev, reading, verbose)
    record |= fitted | {"total_s": round(time.perf_counter() - t0, 2)}
    if out is not None:
        rte.save_pretrained(out)
        write_json_atomic(Path(out) / FIT_RECORD, record)
    return rte, record


def fit_calibrated(
    tasks: ObservedTasks,
    settings: dict | None = None,
    dev: DevCalibration | None = DevCalibration(),
    reading: Reading = Reading(),
    verbose: bool = True,
):
    """RTE fitted on the library tasks of ``tasks`` (every task, or those labelled ``train`` when
    they were read with a split column), read as ``reading`` says, with its interval scale chosen
    on their own dev split: the Python route of ``taskextrap fit`` in one call.

    ``settings`` are RTE's constructor arguments (``protocol``, ``min_context``, sizes, seed,
    device). With ``dev`` (None: no calibration; an ``interval_scale`` in ``settings`` is kept as
    given) the scale is chosen first on the dev split (:func:`dev_split`): an RTE of the same
    settings fitted on the dev library, its raw 90% interval's coverage of the dev targets'
    queries (contexts as ``dev`` says) at every grid scale, and the smallest scale reaching 90%
    (``search.calibration.choose_scale``). Returns (the fitted RTE, the fit record: tasks, the dev
    split and its in-sample coverage, settings as JSON, times).

        >>> rte, record = fit_calibrated(read_tasks("library.csv"), {"min_context": 4})  # doctest: +SKIP
    """
    from taskextrap.estimators.parameter import RTE
    from taskextrap.estimators.saving import encode

    t0 = time.perf_counter()
    library_tasks = tasks.with_split("train")
    settings = dict(settings or {})
    settings.setdefault("verbose", verbose)
    record: dict[str, Any] = {
        "tasks": {"library": len(library_tasks), "held_out": len(tasks) - len(library_tasks)},
        "interpolant": reading.interpolant,
        "outside": reading.outside,
    }
    if dev is not None and "interval_scale" not in settings:
        record["dev"] = _dev_scale(library_tasks, settings, dev, reading, verbose)
        settings["interval_scale"] = record["dev"]["interval_scale"]
    library = reading.library(library_tasks)
    _say(verbose, f"fit {2 if 'dev' in record else 1} of {2 if 'dev' in record else 1}: RTE on all "
                  f"{len(library_tasks)} library tasks")  # fmt: skip
    t1 = time.perf_counter()
    rte = RTE(**settings).fit(library)
    record["fit_s"] = round(time.perf_counter() - t1, 2)
    record["total_s"] = round(time.perf_counter() - t0, 2)
    record["domain"] = list(library.family.domain)
    record["settings"] = {k: encode(v, f"RTE({k}=...)") for k, v in rte.get_params().items()}  # plain JSON
    record["interval_scale_source"] = (
        "chosen on this data's dev split" if "dev" in record else "given" if "interval_scale" in settings else
        "borrowed: the parameter regime's scale, chosen on the built-in families' dev splits"
    )  # fmt: skip
    return rte, record


def _dev_scale(library_tasks: ObservedTasks, settings: dict, dev: DevCalibration, reading: Reading, verbose) -> dict:
    """The interval scale chosen on the dev split of ``library_tasks`` (:func:`fit_calibrated`),
    with what the record keeps of it."""
    from taskextrap.baselines.table import get_method, method_rows
    from taskextrap.estimators.parameter import RTE
    from taskextrap.search.calibration import SCALE_GRID, choose_scale

    dev_lib, dev_tgt, how = dev_split(library_tasks, dev.order, DEV_FRACTION, settings.get("seed", 0))
    _say(verbose, f"fit 1 of 2: the dev split's RTE on {len(dev_lib)} library tasks, for the interval scale")
    dev_library = reading.library(dev_lib)  # built once: the dev RTE and every interval method read it
    dev_rte = RTE(**settings).fit(dev_library)
    size = dev.context_size or dev_rte.protocol_.n_context
    split = split_targets(dev_tgt, size, dev.context, dev_rte.library_.family.domain, seed=1)
    mean, std = dev_rte.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
    curve = _masked_curve(mean, std / dev_rte.calibrated_scale(), split)  # the raw interval's
    scale = choose_scale(curve)
    reached = float(curve[SCALE_GRID.index(scale)])
    methods = {}  # every method with its own interval, its scale chosen the same way on the same targets
    for name in method_rows("observed"):
        entry = get_method(name)
        if entry.cls.interval:
            m, sd = (
                entry.build(seed=settings.get("seed", 0))
                .fit(dev_library)
                .predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
            )
            own = _masked_curve(m, sd, split)
            chosen = choose_scale(own)
            methods[name] = {"interval_scale": chosen, "coverage_raw": float(own[SCALE_GRID.index(1.0)]),
                             "coverage": float(own[SCALE_GRID.index(chosen)])}  # fmt: skip
    return {
        "split": how,
        "targets": len(dev_tgt),
        "context_size": size,
        "context": dev.context,
        "coverage_raw": float(curve[SCALE_GRID.index(1.0)]) if 1.0 in SCALE_GRID else None,
        "interval_scale": scale,
        "coverage": reached,
        "within_0.85_0.95": bool(0.85 <= reached <= 0.95),
        "coverage_in_sample": True,  # measured on the dev targets that chose the scale
        "coverage_note": "in-sample: the dev targets that chose the scale; evaluate measures it on held-out ones",
        "mse": float(_target_mse(mean, split).mean()),
        "methods": methods,
    }


def _say(verbose: bool, line: str) -> None:
    """``line`` on stderr above any progress bar, when ``verbose``."""
    if verbose:
        import sys

        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)


def _masked_curve(mean, raw, split: TargetSplit) -> np.ndarray:
    """The raw interval's coverage at every grid scale over the real queries of every target."""
    from taskextrap.search.calibration import coverage_curve

    per_query = coverage_curve(mean.reshape(-1, 1), raw.reshape(-1, 1), split.qry_y.reshape(-1, 1))  # (n*q, S)
    return per_query[split.mask.reshape(-1)].mean(axis=0)


# ----------------------------------------------------------------------------- predict


def predict_observed(
    model: str | Path, context, query=None, columns: Columns = Columns(), grid: int = 50, trust_code: bool = False
) -> dict:
    """Predictions of a saved model for the targets of ``context`` (a table of task, x, y; any
    number of points per target) at the inputs of ``query`` (a table of task, x; default
    ``grid`` points over the library's domain for each target). Returns columns (task, x, mean,
    lower, upper, level, anchor, anchor_weight, phi_scale) as arrays. A context of another size
    than the interval scale was chosen for is one warning line (:func:`context_note`);
    ``trust_code``: as ``RTE.from_pretrained``'s."""
    import warnings

    from scipy.stats import norm

    from taskextrap.errors import TaskextrapWarning
    from taskextrap.estimators.parameter import RTE

    rte = RTE.from_pretrained(model, trust_code=trust_code)
    lib = rte.library_
    lo, hi = lib.family.domain
    ctx = columns.read(context, min_points=1)
    queries = _queries(query, columns, ctx, (lo, hi), grid)
    z = float(norm.ppf(0.5 + INTERVAL_LEVEL / 2))
    out: dict[str, list] = {
        k: [] for k in ("task", "x", "mean", "lower", "upper", "level", "anchor", "anchor_weight", "phi_scale")
    }
    sizes = ctx.counts()
    for size in np.unique(sizes):  # contexts of one size are predicted together
        idx = np.flatnonzero(sizes == size)
        cx = np.stack([ctx.points(int(i))[0] for i in idx])
        cy = np.stack([ctx.points(int(i))[1] for i in idx])
        _check_inside(cx, (lo, hi), ctx.ids[idx], "context")
        qs = [queries[ctx.ids[i]] for i in idx]
        q = max(len(v) for v in qs)
        qx = np.stack([np.resize(v, q) for v in qs])
        d = rte.decompose(cx, cy)
        mean, std = rte.predict(cx, cy, qx, decomposition=d, return_std=True)
        best = np.argmax(d.weights, axis=1) if d.weights is not None else np.zeros(len(idx), dtype=int)
        for r, i in enumerate(idx):
            m = len(qs[r])
            anchor = lib.family.tasks.ids[int(lib.params[d.anchors[r, best[r]], 0])]
            w = 1.0 if d.weights is None else float(d.weights[r, best[r]])
            scale = d.extras.get("phi_scale")
            out["task"] += [ctx.ids[i]] * m
            out["x"] += qs[r].tolist()
            out["mean"] += mean[r, :m].tolist()
            out["lower"] += (mean[r, :m] - z * std[r, :m]).tolist()
            out["upper"] += (mean[r, :m] + z * std[r, :m]).tolist()
            out["level"] += [INTERVAL_LEVEL] * m
            out["anchor"] += [anchor] * m
            out["anchor_weight"] += [w] * m
            out["phi_scale"] += [float(scale[r, best[r]]) if scale is not None else 1.0] * m
    chosen = scale_context(model)  # said once the predictions stand: a bad input is its error line alone
    for size in np.unique(sizes):
        note = context_note(chosen, int(size), None)
        if note is not None:
            warnings.warn(note, TaskextrapWarning, stacklevel=2)
    return {k: np.array(v, dtype=object if k in ("task", "anchor") else float) for k, v in out.items()}


def _queries(query, columns: Columns, ctx: ObservedTasks, domain, grid: int) -> dict[str, np.ndarray]:
    """Each target's query inputs: from the query table (task and x columns), or a grid."""
    if query is None:
        lo, hi = domain
        return {t: np.linspace(lo, hi, grid) for t in ctx.ids}
    table = read_table(query)
    ids, xs = table.text(columns.task, "task"), table.numbers(columns.x, "x")
    out = {}
    for t in ctx.ids:
        sel = ids == t
        if not sel.any():
            raise TaskextrapError(f"the query table has no row for target {t!r} (it has a context)")
        out[t] = xs[sel]
    extra = sorted(set(ids.tolist()) - set(ctx.ids.tolist()))
    if extra:
        raise TaskextrapError(f"the query table names target {extra[0]!r}, which has no context")
    _check_inside(np.concatenate(list(out.values()))[None], domain, ["a query"], "query")
    return out


def _check_inside(x: np.ndarray, domain, ids, what: str) -> None:
    lo, hi = domain
    bad = np.argwhere((x < lo) | (x > hi))
    if len(bad):
        r, c = bad[0]
        raise TaskextrapError(
            f"{what} x={x[r, c]:g} of target {ids[r]!r} is outside the library's domain [{lo:g}, {hi:g}]: "
            "the model reads its anchors there and never extrapolates them"
        )


def write_predictions(columns: dict, path: str | Path) -> Path:
    """The predictions as a CSV file, written atomically."""
    names = list(columns)
    lines = [",".join(names)]
    for i in range(len(columns["task"])):
        lines.append(",".join(_cell(columns[k][i]) for k in names))
    return write_text_atomic(path, "\n".join(lines) + "\n")


def _cell(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n') else v
    return repr(float(v))


# ----------------------------------------------------------------------------- evaluate


def held_out_targets(tasks: ObservedTasks, library_ids: np.ndarray, has_split: bool) -> tuple[ObservedTasks, dict]:
    """The tasks of ``tasks`` an evaluation may score: with a split column (``has_split``) those
    not labelled ``train``, and of those the ones whose id is no library task's. Returns (the
    targets, how many were left out and why); none left is a one-line error."""
    from taskextrap.tasks.observed import TRAIN_LABEL

    keep = np.ones(len(tasks), dtype=bool)
    left_out = {"labelled_train": 0, "library_ids": 0}
    if has_split:
        keep &= tasks.split != TRAIN_LABEL
        left_out["labelled_train"] = int(len(tasks) - keep.sum())
    in_library = keep & np.isin(tasks.ids.astype(str), np.asarray(library_ids).astype(str))
    left_out["library_ids"] = int(in_library.sum())
    keep &= ~in_library
    if not keep.any():
        raise TaskextrapError(
            f"no held-out target: all {len(tasks)} task(s) are library tasks "
            f"({left_out['labelled_train']} labelled {TRAIN_LABEL!r}, {left_out['library_ids']} by id)"
        )
    return tasks.subset(np.flatnonzero(keep)), left_out


def _fit_record(model: str | Path) -> dict:
    """A saved model folder's ``fit.json`` (read once per call of predict or evaluate), or {}."""
    from taskextrap.files import read_json

    path = Path(model) / FIT_RECORD
    record = read_json(path) if path.is_file() else {}
    return record if isinstance(record, dict) else {}


def _dev_of(record: dict) -> dict:
    """The dev split part of a fit record ({} when the scale was not chosen on dev)."""
    dev = record.get("dev")
    return dev if isinstance(dev, dict) else {}


def scale_context(model: str | Path) -> dict | None:
    """The contexts a saved model's interval scale was chosen for (``fit.json``'s dev split:
    ``context_size`` and ``context``), or None (no record, or a scale not chosen on dev)."""
    return _context_of(_dev_of(_fit_record(model)))


def _context_of(dev: dict) -> dict | None:
    return {"context_size": dev["context_size"], "context": dev["context"]} if dev else None


def context_note(chosen: dict | None, context_size: int, how: str | None) -> str | None:
    """One line when contexts differ from those the interval scale was chosen for (its coverage
    may then be far from 90%), else None."""
    if chosen is None or (chosen["context_size"] == context_size and how in (None, chosen["context"])):
        return None
    given = f"{context_size} {how} points" if how else f"{context_size} points"
    return (
        f"the interval scale was chosen for contexts of {chosen['context_size']} {chosen['context']} points, "
        f"these are {given}: its coverage may differ from {INTERVAL_LEVEL:.0%} "
        f"(fit again with --context {how or chosen['context']} --context-size {context_size})"
    )


def evaluate_observed(
    model: str | Path,
    data,
    context_size: int,
    columns: Columns = Columns(),
    how: str = "random",
    seed: int = 0,
    trust_code: bool = False,
    plot_dir: str | Path | None = None,
) -> dict:
    """rte beside the method table's rows for a user's library (``baselines.table``, regime
    ``observed``) on the held-out targets of ``data`` (:func:`held_out_targets`: library tasks
    are left out, and counted): every target's points inside the library's domain split into
    ``context_size`` context points and queries (:func:`split_targets`); per method the mean
    squared error over targets, the interval coverage of rte and of every method with its own
    interval (raw, and at the scale ``fit`` chose for it on the dev split where it did: every
    interval calibrated the same way), and paired differences rte - baseline over targets (one
    fitted model: the interval is over targets, ``report.compare.paired_difference``). ``trust_code``: as
    ``RTE.from_pretrained``'s; ``plot_dir``: also draw ``evaluation.png`` there
    (:func:`plot_evaluation`)."""
    from taskextrap.baselines.table import get_method, method_rows
    from taskextrap.estimators.parameter import RTE
    from taskextrap.report.compare import paired_difference

    t0 = time.perf_counter()
    rte = RTE.from_pretrained(model, trust_code=trust_code)
    lib = rte.library_
    library_ids = lib.family.tasks.ids if hasattr(lib.family, "tasks") else np.array([])
    targets, left_out = held_out_targets(columns.read(data, min_points=1), library_ids, columns.split is not None)
    split = split_targets(targets, context_size, how, lib.family.domain, seed)
    t = time.perf_counter()
    mean, std = rte.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
    # each method's price beside its error: rte's fit is fit's (fit.json), the others' are fitted here
    record = _fit_record(model)
    seconds = {"rte": {"fit_s": record.get("fit_s"), "predict_s": round(time.perf_counter() - t, 3)}}
    preds, coverage = {"rte": mean}, {"rte": _target_coverage(mean, std, split)}
    raw = {"rte": _target_coverage(mean, std / rte.calibrated_scale(), split)}
    scales = {"rte": rte.calibrated_scale()} | {
        m: s["interval_scale"] for m, s in (_dev_of(record).get("methods") or {}).items()
    }
    baselines = method_rows("observed")
    fitted = {}
    for b in baselines:  # the method table's rows for a user's library (baselines.table)
        t = time.perf_counter()
        method = fitted[b] = get_method(b).build(seed=seed, device=rte.device).fit(lib)
        t_fit = time.perf_counter()
        out = method.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=method.interval)
        seconds[b] = {"fit_s": round(t_fit - t, 3), "predict_s": round(time.perf_counter() - t_fit, 3)}
        preds[b] = out[0] if method.interval else out
        if method.interval:
            raw[b] = _target_coverage(out[0], out[1], split)
            coverage[b] = _target_coverage(out[0], out[1] * scales[b], split) if b in scales else raw[b]
    errors = {k: _target_mse(v, split) for k, v in preds.items()}
    comparisons = []
    for b in baselines:
        p = paired_difference(errors["rte"], errors[b], "mse")
        winner = None if not p["clear"] else ("rte" if p["diff"] < 0 else b)
        comparisons.append({"a": "rte", "b": b, "diff": p["diff"], "lo": p["lo"], "hi": p["hi"], "clear": p["clear"],
                            "winner": winner})  # fmt: skip
    mse = {k: float(v.mean()) for k, v in errors.items()}
    plot = None if plot_dir is None else plot_evaluation(Path(plot_dir) / "evaluation.png", rte, fitted, split, mse)
    return {
        "model": str(model),
        "targets": len(split.ids),
        "context_size": context_size,
        "context": how,
        "seed": seed,
        "dropped_outside_domain": split.dropped,
        "left_out": left_out,
        "interval_note": context_note(_context_of(_dev_of(record)), context_size, how),
        "mse": mse,
        "per_target_mse": {k: v.tolist() for k, v in errors.items()},
        "seconds_by_method": seconds,
        "coverage": float(coverage["rte"].mean()),
        "coverage_by_method": {k: float(v.mean()) for k, v in coverage.items()},
        "coverage_raw_by_method": {k: float(v.mean()) for k, v in raw.items()},
        "interval_scales": {k: scales.get(k) for k in coverage},  # None: raw (no scale chosen on dev)
        "per_target_coverage": {k: v.tolist() for k, v in coverage.items()},
        "per_target_coverage_raw": {k: v.tolist() for k, v in raw.items()},
        "level": INTERVAL_LEVEL,
        "interval_scale": rte.calibrated_scale(),
        "comparisons": comparisons,
        "verdict": verdict(comparisons, errors),
        "plot": None if plot is None else str(plot),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def plot_evaluation(path: Path, rte, methods: dict, split: TargetSplit, mse: dict, n: int = 4) -> Path:
    """The first ``n`` targets of ``split``: their context and held-out points, rte's prediction
    and 90% band and every fitted method's prediction over the library's domain, beside each
    method's MSE (``report.plots.plot_evaluation``)."""
    from scipy.stats import norm

    from taskextrap.report.plots import plot_evaluation as draw

    shown = np.arange(min(n, len(split.ids)))
    lo, hi = rte.library_.family.domain
    grid = np.linspace(lo, hi, 200)
    at = np.broadcast_to(grid, (len(shown), len(grid)))
    ctx_x, ctx_y = split.ctx_x[shown], split.ctx_y[shown]
    mean, std = rte.predict(ctx_x, ctx_y, at, return_std=True)
    z = float(norm.ppf(0.5 + INTERVAL_LEVEL / 2))
    curves = {"rte": mean} | {m: f.predict(ctx_x, ctx_y, at) for m, f in methods.items()}
    panels = [
        dict(
            ctx_x=ctx_x[i],
            ctx_y=ctx_y[i],
            qry_x=split.qry_x[i][split.mask[i]],
            qry_y=split.qry_y[i][split.mask[i]],
            grid=grid,
            curves={k: v[i] for k, v in curves.items()},
            band=(mean[i] - z * std[i], mean[i] + z * std[i]),
            title=str(split.ids[i]),
        )
        for i in shown
    ]
    return draw(path, panels, mse, f"{len(split.ids)} targets, contexts of {split.ctx_x.shape[1]} points")


def verdict(comparisons: Sequence[dict], errors: dict) -> str:
    """One line: the baselines rte clearly beats and those that clearly beat it, with the MSEs."""
    beats = [c["b"] for c in comparisons if c["winner"] == "rte"]
    loses = [c["b"] for c in comparisons if c["winner"] not in (None, "rte")]
    m = lambda k: f"{k} {float(np.mean(errors[k])):.4g}"  # noqa: E731
    parts = [f"{m('rte')} clearly beats {', '.join(m(b) for b in beats) if beats else 'none'}"]
    if loses:
        parts.append(f"clearly loses to {', '.join(m(b) for b in loses)}")
    ties = [c["b"] for c in comparisons if c["winner"] is None]
    if ties:
        parts.append(f"no clear difference from {', '.join(ties)}")
    return "; ".join(parts)


def evaluation_table(result: dict) -> str:
    """The evaluation as text: the verdict, then one row per method and per comparison."""
    lines = [f"verdict: {result['verdict']}", ""]
    lines.append(f"{result['targets']} targets, contexts of {result['context_size']} points ({result['context']}); "
                 f"rte's {result['level']:.0%} interval covers {result['coverage']:.3f} of the queries "
                 f"(scale {result['interval_scale']:.4g})")  # fmt: skip
    left = result.get("left_out", {})
    if any(left.values()):
        lines.append(f"left out {left['labelled_train']} task(s) labelled train and {left['library_ids']} with a "
                     "library task's id: library tasks are not held-out targets")  # fmt: skip
    if result.get("interval_note"):
        lines.append(f"note: {result['interval_note']}")
    lines.append(f"{'method':18s} {'mse':>12s} {'coverage':>9s} {'raw':>7s} {'scale':>7s} {'fit s':>8s} {'pred s':>7s}")
    covers, raws = result.get("coverage_by_method", {}), result.get("coverage_raw_by_method", {})
    scales, seconds = result.get("interval_scales", {}), result.get("seconds_by_method", {})
    for k, v in result["mse"].items():
        if k in covers:
            scale = "-" if scales.get(k) is None else f"{scales[k]:.3g}"
            cells = f"{covers[k]:9.3f} {raws.get(k, float('nan')):7.3f} {scale:>7s}"
        else:
            cells = f"{'-':>9s} {'-':>7s} {'-':>7s}"
        fit_s, pred_s = (seconds.get(k) or {}).get("fit_s"), (seconds.get(k) or {}).get("predict_s")
        price = f"{'-' if fit_s is None else f'{fit_s:.2f}':>8s} {'-' if pred_s is None else f'{pred_s:.2f}':>7s}"
        lines.append(f"{k:18s} {v:12.5g} {cells} {price}")
    lines.append("")
    lines.append(f"{'rte - baseline':24s} {'diff':>11s} {'95% interval over targets':>28s} clear")
    for c in result["comparisons"]:
        iv = "-" if c["lo"] is None else f"[{c['lo']:.4g}, {c['hi']:.4g}]"
        lines.append(f"{'rte - ' + c['b']:24s} {c['diff']:11.4g} {iv:>28s} {'yes' if c['clear'] else 'no'}")
    return "\n".join(lines)
