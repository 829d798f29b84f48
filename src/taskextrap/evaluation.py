"""Evaluate a saved RTE on one's own held-out targets (the CLI's ``evaluate``; the same from
Python): :func:`evaluate_observed` fits the method table's rows for a user's library beside the
model (``baselines.table``, regime ``observed``) at the settings and interval scales ``fit`` chose
on its dev split (``fit.json``), scores each on the same contexts and queries of the held-out
targets (:func:`held_out_targets`), with paired differences over targets, each method's price and
a picture (:func:`plot_evaluation`); :func:`evaluation_table` prints it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.search.posterior import INTERVAL_LEVEL
from taskextrap.tasks.observed import ObservedTasks
from taskextrap.workflow import (
    FIT_RECORD,
    Columns,
    Contexts,
    TargetSplit,
    context_note,
    context_of,
    dev_record,
    fit_record,
    peer_unit,
    peers_again,
    target_coverage,
    target_mse,
)

__all__ = [
    "check_skip",
    "evaluate_observed",
    "evaluation_table",
    "held_out_targets",
    "plot_evaluation",
    "uncalibrated_note",
    "verdict",
]


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


def evaluate_observed(
    model: str | Path,
    data,
    contexts: Contexts | int,
    columns: Columns = Columns(),
    trust_code: bool = False,
    plot_dir: str | Path | None = None,
    skip: Sequence[str] = (),
) -> dict:
    """rte beside the method table's rows for a user's library (``baselines.table``, regime
    ``observed``) on the held-out targets of ``data`` (:func:`held_out_targets`: library tasks
    are left out, and counted): every target's points inside the library's domain split into
    context points and queries as ``contexts`` says (``workflow.Contexts``: its size, random or
    first, its seed; a number: that many random points, seed 0); per method the mean
    squared error over targets, the interval coverage of rte and of every method with its own
    interval (raw, and at the scale ``fit`` chose for it on the dev split where it did: every
    interval calibrated the same way), and paired differences rte - baseline over targets (one
    fitted model: the interval is over targets, ``report.compare.paired_difference``). The peers
    are built with the model's seed (not the seed of the context draw), as ``fit``'s dev split
    built them when it chose their scales (``workflow.peer_unit``). ``trust_code``: as
    ``RTE.from_pretrained``'s; ``plot_dir``: also draw ``evaluation.png`` there
    (:func:`plot_evaluation`). A model ``fit`` saved without its peers' choices has them made
    here on its dev split, once (``workflow.peers_again``: ``peers.json`` in the folder), saying
    on stderr which peer it is choosing. ``skip``: peers left out (e.g. ``("cnp",)``, the dearest
    row), neither chosen nor scored (:func:`check_skip`); ``rte-gp`` may be skipped too."""
    from taskextrap.baselines.table import get_method, method_rows
    from taskextrap.estimators.parameter import RTE
    from taskextrap.baselines.classics import classic_variants
    from taskextrap.report.compare import paired_difference

    t0 = time.perf_counter()
    skipped = check_skip(skip)  # before any work: a typo costs nothing
    contexts = contexts if isinstance(contexts, Contexts) else Contexts(contexts)
    rte = RTE.from_pretrained(model, trust_code=trust_code)
    lib = rte.library_
    library_ids = lib.family.tasks.ids if hasattr(lib.family, "tasks") else np.array([])
    targets, left_out = held_out_targets(columns.read(data, min_points=1), library_ids, columns.split is not None)
    split = contexts.split(targets, lib.family.domain)
    t = time.perf_counter()
    mean, std = rte.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
    # each method's price beside its error: rte's fit is fit's (fit.json), the others' are fitted here
    record = fit_record(model)
    seconds = {"rte": {"fit_s": record.get("fit_s"), "predict_s": round(time.perf_counter() - t, 3)}}
    preds, coverage = {"rte": mean}, {"rte": target_coverage(mean, std, split)}
    raw = {"rte": target_coverage(mean, std / rte.calibrated_scale(), split)}
    # each peer's settings and scale, chosen on fit's dev split (here the first time, then kept)
    baselines = [b for b in method_rows("observed") if b not in skipped]
    with_gp = "rte-gp" in dev_record(record) and "rte-gp" not in skipped
    # rte-gp's library GP is meta-gp's (when its posterior gives it a share): fitted for it even
    # where meta-gp's own row is skipped
    gp_only = with_gp and "meta-gp" not in baselines and dev_record(record)["rte-gp"]["posterior"]["share"] < 1.0
    needs = baselines + (["meta-gp"] if gp_only else [])
    chosen = peers_again(model, rte, record, verbose=True, names=needs)
    scales = {"rte": rte.calibrated_scale()} | {
        m: s["interval_scale"] for m, s in chosen.items() if "interval_scale" in s and m in baselines
    }
    fitted = {}
    if gp_only:
        params = chosen.get("meta-gp", {}).get("params", {})
        fitted["meta-gp"] = get_method("meta-gp").build(**peer_unit(rte), **params).fit(lib)
    for b in baselines:  # the method table's rows for a user's library (baselines.table)
        t = time.perf_counter()
        params = chosen.get(b, {}).get("params", {})
        # built as fit's dev split built them when it chose their scales (the model's seed, not
        # the seed of the context draw)
        method = fitted[b] = get_method(b).build(**peer_unit(rte), **params).fit(lib)
        t_fit = time.perf_counter()
        out = method.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=method.interval)
        seconds[b] = {"fit_s": round(t_fit - t, 3), "predict_s": round(time.perf_counter() - t_fit, 3)}
        preds[b] = out[0] if method.interval else out
        if method.interval:
            raw[b] = target_coverage(out[0], out[1], split)
            coverage[b] = target_coverage(out[0], out[1] * scales[b], split) if b in scales else raw[b]
    if with_gp:  # fit chose rte-gp's context posterior on its dev split
        t = time.perf_counter()
        model_gp = rte_gp(rte, dev_record(record)["rte-gp"], fitted.get("meta-gp"))
        m, sd = model_gp.predict(split.ctx_x, split.ctx_y, split.qry_x, return_std=True)
        seconds["rte-gp"] = {"fit_s": None, "predict_s": round(time.perf_counter() - t, 3)}
        preds["rte-gp"], scales["rte-gp"] = m, model_gp.posterior_.scale
        coverage["rte-gp"], raw["rte-gp"] = (
            target_coverage(m, sd, split),
            target_coverage(m, sd / scales["rte-gp"], split),
        )
    errors = {k: target_mse(v, split) for k, v in preds.items()}
    comparisons = []
    pairs = [("rte", b) for b in baselines]
    if "rte-gp" in errors:  # rte-gp judged beside rte: against rte, then against every baseline
        pairs += [("rte", "rte-gp")] + [("rte-gp", b) for b in baselines]
    for a, b in pairs:
        p = paired_difference(errors[a], errors[b], "mse")
        winner = None if not p["clear"] else (a if p["diff"] < 0 else b)
        comparisons.append({"a": a, "b": b, "diff": p["diff"], "lo": p["lo"], "hi": p["hi"], "clear": p["clear"],
                            "winner": winner})  # fmt: skip
    mse = {k: float(v.mean()) for k, v in errors.items()}
    shown = {m: f for m, f in fitted.items() if m in baselines}  # a skipped row is not drawn
    plot = None if plot_dir is None else plot_evaluation(Path(plot_dir) / "evaluation.png", rte, shown, split, mse)
    return {
        "model": str(model),
        "targets": len(split.ids),
        "context_size": contexts.size,
        "context": contexts.how,
        "seed": contexts.seed,
        "dropped_outside_domain": split.dropped,
        "left_out": left_out,
        "skipped": sorted(skipped),
        "interval_note": context_note(context_of(dev_record(record)), contexts.size, contexts.how),
        "calibration_note": None if dev_record(record) else uncalibrated_note(model, record),
        "mse": mse,
        "per_target_mse": {k: v.tolist() for k, v in errors.items()},
        "seconds_by_method": seconds,
        "settings_by_method": {b: chosen.get(b, {}).get("params", {}) for b in baselines},  # {}: the defaults
        "classic_variants": classic_variants("observed"),  # the step scales and fits behind meta-gp, cnp, ctx-gp
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


def check_skip(skip: Sequence[str]) -> set[str]:
    """The peers ``skip`` names, checked: each an ``observed`` row of the method table or
    ``rte-gp`` (a one-line error otherwise; ``rte`` is what is evaluated, never skipped)."""
    from taskextrap.baselines.table import method_rows

    known = [*method_rows("observed"), "rte-gp"]
    unknown = [s for s in skip if s not in known]
    if unknown:
        raise TaskextrapError(f"cannot skip {', '.join(map(repr, unknown))}: the peers are {', '.join(known)}")
    return set(skip)


def rte_gp(rte, chosen: dict, library_gp):
    """``rte-gp`` of a saved model: its RTE, the context posterior ``fit`` chose on its dev split
    (``fit.json``) and, when the posterior gives it a share, the library GP fitted here
    (``meta-gp``'s row)."""
    from taskextrap.posterior.context import ContextPosterior
    from taskextrap.posterior.estimator import RTEGP

    posterior = ContextPosterior.from_dict(chosen["posterior"])
    return RTEGP.from_parts(rte, posterior, library_gp if posterior.share < 1.0 else None)


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
    comparisons = [c for c in comparisons if c.get("a", "rte") == "rte"]  # rte's verdict
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


def uncalibrated_note(model, record: dict) -> str:
    """One line for a model whose fit record has no dev split: its peers' intervals stay raw and
    ``rte-gp`` is not scored, whether the record is missing (a folder ``save_pretrained`` wrote
    alone) or the fit skipped the dev split."""
    why = "was fitted without a dev split" if record else f"has no fit record ({FIT_RECORD})"
    return (f"{model} {why}: the peers' intervals are raw and rte-gp is left out "
            "(fit with `taskextrap fit`, or save with taskextrap.save_fitted)")  # fmt: skip


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
    if result.get("skipped"):
        lines.append(f"skipped (not chosen, not scored): {', '.join(result['skipped'])}")
    for note in ("interval_note", "calibration_note"):
        if result.get(note):
            lines.append(f"note: {result[note]}")
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
    chosen = {m: p for m, p in result.get("settings_by_method", {}).items() if p}
    if chosen:
        lines.append("chosen on fit's dev split: " + "; ".join(
            f"{m} {', '.join(f'{k}={v:g}' for k, v in p.items())}" for m, p in chosen.items()))  # fmt: skip
    lines.append("")
    lines.append(f"{'method - baseline':28s} {'diff':>11s} {'95% interval over targets':>28s} clear")
    for c in result["comparisons"]:
        iv = "-" if c["lo"] is None else f"[{c['lo']:.4g}, {c['hi']:.4g}]"
        pair = f"{c.get('a', 'rte')} - {c['b']}"
        lines.append(f"{pair:28s} {c['diff']:11.4g} {iv:>28s} {'yes' if c['clear'] else 'no'}")
    return "\n".join(lines)
