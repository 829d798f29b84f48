"""RTE on one's own observed tasks: fit and predict (the CLI's ``fit`` and ``predict``; the same
functions from Python); ``taskextrap.evaluation`` evaluates a saved model.

- :func:`fit_observed`: a library from data files (``tasks.observed``), RTE fitted on it and
  saved as a folder (``save_pretrained``) with ``fit.json`` beside it: the data read, the
  settings, the times, and the interval scale chosen on the data's own **dev split** (library
  tasks held out of a first fit; the real targets are never read).
- :func:`predict_observed`: a saved model, targets' contexts (any number of points each) and
  query inputs -> per query the mean, the interval's bounds and level, and the candidate used
  (anchor task and shift).
- :func:`split_targets`: held-out targets' observations -> each target's context
  (``context_size`` points) and queries (the rest), as ``evaluate`` scores them
  (``taskextrap.evaluation``).
"""

from __future__ import annotations

import contextlib
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
# The most dev targets scored (a seeded subset of a larger held-out share, which stays out of the
# dev library): the scale's coverage curve is read on their queries, and every dev prediction
# (rte, each peer, rte-gp's choice) then costs the same beyond 2,500 library tasks (issue 65).
DEV_TARGETS = 500
PEERS_FILE = "peers.json"  # the peers' dev choices, when evaluate made them (fit without --peers)


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
    chosen as ``context`` says ("random" or "first"), as you will evaluate. ``peers``: also choose
    every peer's settings and interval scale there (what ``evaluate`` compares against; without
    it, ``evaluate`` chooses them on the same split the first time, :func:`choose_peers`)."""

    order: str | None = None
    context_size: int | None = None
    context: str = "random"
    peers: bool = False


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


@dataclass(frozen=True)
class Contexts:
    """How held-out targets' contexts are drawn (:func:`split_targets`): ``size`` points of each
    target, chosen as ``how`` says ("random", drawn with ``seed``; "first", the smallest x); the
    rest of its points are its queries."""

    size: int
    how: str = "random"
    seed: int = 0

    def split(self, tasks: ObservedTasks, domain: tuple[float, float] | None = None) -> TargetSplit:
        """``tasks`` as contexts and queries (:func:`split_targets`)."""
        return split_targets(tasks, self.size, self.how, domain, self.seed)


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


def target_mse(pred: np.ndarray, split: TargetSplit) -> np.ndarray:
    return (((pred - split.qry_y) ** 2) * split.mask).sum(axis=1) / split.mask.sum(axis=1)


def target_coverage(mean, std, split: TargetSplit) -> np.ndarray:
    from taskextrap.search.posterior import covered

    return (covered(mean, std, split.qry_y) * split.mask).sum(axis=1) / split.mask.sum(axis=1)


# ----------------------------------------------------------------------------- fit


def dev_split(
    tasks: ObservedTasks, order_by: str | None, fraction: float, seed: int
) -> tuple[ObservedTasks, ObservedTasks, str]:
    """The dev split of a library's tasks: (dev library, dev targets, how it was made). With
    ``order_by`` (a known parameter) the top ``fraction`` of the tasks by it are held out, a
    pseudo-extrapolation as the built-in dev splits; otherwise a random ``fraction`` (which is
    an interpolation split: it says so). Of more than :data:`DEV_TARGETS` held-out tasks a seeded
    subset of that many are the dev targets (the rest stay out of the dev library too)."""
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
    held = np.sort(order[n - k :])
    if k > DEV_TARGETS:  # the same coverage curve from fewer targets: a seeded subset scores
        held = np.sort(np.random.default_rng([seed, DEV_TARGETS]).choice(held, DEV_TARGETS, replace=False))
        how += f"; {DEV_TARGETS} of them, chosen at random, are scored"
    return tasks.subset(np.sort(order[: n - k])), tasks.subset(held), how


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
        save_fitted(rte, record, out)
    return rte, record


def save_fitted(rte, record: dict, folder: str | Path) -> Path:
    """Save a fitted RTE into ``folder`` with its fit record (``fit.json``), as ``taskextrap fit``
    saves it: the record is what lets ``predict`` and ``evaluate`` say when contexts differ from
    those its interval scale was chosen for, and lets ``evaluate`` calibrate every peer on the same
    dev split (a folder saved by ``save_pretrained`` alone has neither). Returns the folder.

        >>> rte, record = fit_calibrated(read_tasks("library.csv"))  # doctest: +SKIP
        >>> save_fitted(rte, record, "model/")  # doctest: +SKIP
    """
    rte.save_pretrained(folder)
    write_json_atomic(Path(folder) / FIT_RECORD, record)
    return Path(folder)


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
    from taskextrap.estimators.progress import labelled
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
        record["dev_seconds"] = record["dev"].pop("seconds")  # where the dev step's time went (not its result)
        settings["interval_scale"] = record["dev"]["interval_scale"]
    library = reading.library(library_tasks)
    n = 2 if "dev" in record else 1
    _say(verbose, f"fit {n} of {n}: RTE on all {len(library_tasks)} library tasks")
    t1 = time.perf_counter()
    with labelled(f"final fit {n}/{n}"):  # its bar says which of the two fits runs
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
    from taskextrap.estimators.parameter import RTE
    from taskextrap.estimators.progress import labelled
    from taskextrap.search.calibration import SCALE_GRID, choose_scale

    dev_lib, dev_tgt, how = dev_split(library_tasks, dev.order, DEV_FRACTION, settings.get("seed", 0))
    _say(verbose, f"fit 1 of 2: the dev split's RTE on {len(dev_lib)} library tasks, for the interval scale")
    dev_library = reading.library(dev_lib)  # built once: the dev RTE and every interval method read it
    t = time.perf_counter()
    with labelled("dev fit 1/2"):
        dev_rte = RTE(**settings).fit(dev_library)
    seconds = {"rte": round(time.perf_counter() - t, 2)}  # where the dev step's time goes
    size = dev.context_size or dev_rte.protocol_.n_context
    split = dev_targets_split(dev_tgt, size, dev.context, dev_library)
    mean, std = dev_rte.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
    curve = masked_curve(mean, std / dev_rte.calibrated_scale(), split)  # the raw interval's
    scale = choose_scale(curve)
    reached = float(curve[SCALE_GRID.index(scale)])
    methods: dict = {}
    fitted_peers: dict = {}
    if dev.peers:  # every peer chosen on the same dev targets (else evaluate chooses them there)
        methods, fitted_peers, peer_seconds = choose_peers(dev_library, split, peer_unit(dev_rte), verbose)
        seconds |= peer_seconds
    # rte-gp's context posterior, chosen on the same dev targets (posterior.estimator.RTEGP)
    from taskextrap.posterior.estimator import RTEGP

    # meta-gp's dev fit (with --peers) is rte-gp's library GP when their arguments agree (by default)
    _say(verbose, "fit 1 of 2: rte-gp's context posterior, on the dev split's targets")
    t = time.perf_counter()
    posterior, choice = RTEGP().choose_with(dev_rte, dev_library, split, fitted_peers.get("meta-gp"))
    seconds["rte-gp"] = round(time.perf_counter() - t, 2)
    return {
        "split": how,
        "order": dev.order,
        "targets": len(dev_tgt),
        "context_size": size,
        "context": dev.context,
        "coverage_raw": float(curve[SCALE_GRID.index(1.0)]) if 1.0 in SCALE_GRID else None,
        "interval_scale": scale,
        "coverage": reached,
        "within_0.85_0.95": bool(0.85 <= reached <= 0.95),
        "coverage_in_sample": True,  # measured on the dev targets that chose the scale
        "coverage_note": "in-sample: the dev targets that chose the scale; evaluate measures it on held-out ones",
        "mse": float(target_mse(mean, split).mean()),
        **({"methods": methods} if dev.peers else {}),
        "rte-gp": {"posterior": posterior.to_dict(), **choice},
        "seconds": seconds,
    }


def dev_targets_split(dev_tgt: ObservedTasks, size: int, context: str, dev_library) -> TargetSplit:
    """The dev targets' contexts and queries, as ``fit`` draws them (one seed, the dev library's
    domain), so that ``evaluate`` rebuilding the split (:func:`peers_again`) gets the same one."""
    return split_targets(dev_tgt, size, context, dev_library.family.domain, seed=1)


def choose_peers(
    dev_library, split: TargetSplit, unit: dict, verbose: bool = False, names: Sequence[str] | None = None
) -> tuple[dict, dict, dict]:
    """Every peer of a user's library (the method table's ``observed`` rows; ``names``: only
    these) chosen on a dev split: its settings on the dev targets ``split``
    (:func:`_dev_settings`) and, where it has its own interval, the scale reaching 90% there,
    each fitted on ``dev_library`` with ``unit`` (:func:`peer_unit`), with its mean MSE over the
    dev targets at the chosen settings (``dev_mse``: beside rte's, on the same contexts and
    queries). Returns (each peer's choice, the fitted peers with an interval, seconds per peer)."""
    from taskextrap.baselines.table import get_method, method_rows
    from taskextrap.search.calibration import SCALE_GRID, choose_scale

    methods, fitted_peers, seconds = {}, {}, {}
    names = method_rows("observed") if names is None else list(names)
    for i, name in enumerate(names):
        _say(verbose, f"dev split: choosing peer {i + 1} of {len(names)}, {name}")
        t = time.perf_counter()
        entry = get_method(name)
        chosen = _dev_settings(entry, dev_library, split, unit)
        if entry.cls.interval:
            fitted = fitted_peers[name] = entry.build(**unit, **chosen.get("params", {})).fit(dev_library)
            m, sd = fitted.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
            own = masked_curve(m, sd, split)
            scale_m = choose_scale(own)
            chosen |= {"interval_scale": scale_m, "coverage_raw": float(own[SCALE_GRID.index(1.0)]),
                       "coverage": float(own[SCALE_GRID.index(scale_m)]),
                       "dev_mse": float(target_mse(m, split).mean())}  # fmt: skip
        elif not chosen:  # no grid (whose choice carries its dev_mse), no interval: one cheap fit
            m = entry.build(**unit).fit(dev_library).predict(split.ctx_x, split.ctx_y, split.qry_x)
            chosen["dev_mse"] = float(target_mse(m, split).mean())
        methods[name] = chosen
        seconds[name] = round(time.perf_counter() - t, 2)
    return methods, fitted_peers, seconds


def peers_again(
    model: str | Path, rte, record: dict, verbose: bool = False, names: Sequence[str] | None = None
) -> dict:
    """The peers' choices of a model ``fit`` saved without them (:func:`choose_peers` on the dev
    split ``fit`` used, rebuilt from ``fit.json`` and the model's library: the same tasks, targets,
    contexts and unit), kept in the folder's ``peers.json`` so each peer is chosen once; {} for a
    model fitted without a dev split. ``names``: only these peers (default every ``observed``
    row); one chosen before is read back, the others are chosen now and added to the file.
    Returns {peer: its choice}."""
    from taskextrap.baselines.table import method_rows
    from taskextrap.files import read_json

    dev = record.get("dev") or {}
    if "methods" in dev:  # chosen at fit (fit --peers, or a model saved before peers moved here)
        return dev["methods"]
    if not dev:
        return {}
    names = method_rows("observed") if names is None else list(names)
    cached = Path(model) / PEERS_FILE
    kept = read_json(cached) if cached.exists() else {"methods": {}, "seconds": {}}
    # a file written before peers could be skipped chose every row; "chosen" lists those made
    done = set(kept.get("chosen", method_rows("observed") if cached.exists() else []))
    todo = [n for n in names if n not in done]
    if todo:
        tasks = rte.library_.family.tasks
        reading = Reading(record["interpolant"], record["outside"], rte.library_.family.name)
        dev_lib, dev_tgt, _ = dev_split(tasks, dev.get("order"), DEV_FRACTION, rte.seed)
        dev_library = reading.library(dev_lib)
        split = dev_targets_split(dev_tgt, dev["context_size"], dev["context"], dev_library)
        methods, _, seconds = choose_peers(dev_library, split, peer_unit(rte), verbose, todo)
        kept = {
            "methods": kept["methods"] | methods,
            "seconds": kept.get("seconds", {}) | seconds,
            "chosen": sorted(done | set(todo)),
        }
        with contextlib.suppress(OSError):  # a cache: a folder one cannot write to is read as it is
            write_json_atomic(cached, kept)
    return {n: c for n, c in kept["methods"].items() if n in names}


def peer_unit(rte) -> dict:
    """What every peer of a user's model is built with (``MethodEntry.build`` passes each class
    the arguments it takes): the model's seed and device, and for the classics that learn from
    the library (``meta-gp``, ``cnp``) its protocol and optimiser settings, so that they see the
    library's tasks as the model does and train for their dev-chosen multiple of its steps."""
    return {"seed": rte.seed, "device": str(rte.device), "protocol": rte.protocol, "train": rte.train}


def _dev_settings(entry, dev_library, split: TargetSplit, unit: dict) -> dict:
    """A peer's settings chosen on the dev targets: every combination of its class's
    ``dev_grid`` (``baselines.method.Method``) built with ``unit`` (:func:`peer_unit`) and fitted
    on the dev library, the lowest mean MSE over the dev targets kept (the first listed on a
    tie), with its ``dev_mse`` and every setting's (``dev_mse_by_setting``); {} for a method
    without a grid."""
    import itertools

    grid = entry.cls.dev_grid
    if not grid:
        return {}
    settings = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    build = lambda **params: entry.build(**unit, **params)  # noqa: E731
    preds = entry.cls.grid_predictions(build, settings, dev_library, split.ctx_x, split.ctx_y, split.qry_x)
    scored: list[dict[str, Any]] = [
        {"params": p, "dev_mse": float(target_mse(pred, split).mean())} for p, pred in zip(settings, preds, strict=True)
    ]
    best = min(scored, key=lambda r: r["dev_mse"])  # min keeps the first of equal scores
    return {"params": best["params"], "dev_mse": best["dev_mse"], "dev_mse_by_setting": scored}


def _say(verbose: bool, line: str) -> None:
    """``line`` on stderr above any progress bar, when ``verbose``."""
    if verbose:
        import sys

        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)


def masked_curve(mean, raw, split: TargetSplit) -> np.ndarray:
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


def fit_record(model: str | Path) -> dict:
    """A saved model folder's ``fit.json`` (read once per call of predict or evaluate), or {}."""
    from taskextrap.files import read_json

    path = Path(model) / FIT_RECORD
    record = read_json(path) if path.is_file() else {}
    return record if isinstance(record, dict) else {}


def dev_record(record: dict) -> dict:
    """The dev split part of a fit record ({} when the scale was not chosen on dev)."""
    dev = record.get("dev")
    return dev if isinstance(dev, dict) else {}


def scale_context(model: str | Path) -> dict | None:
    """The contexts a saved model's interval scale was chosen for (``fit.json``'s dev split:
    ``context_size`` and ``context``), or None (no record, or a scale not chosen on dev)."""
    return context_of(dev_record(fit_record(model)))


def context_of(dev: dict) -> dict | None:
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
