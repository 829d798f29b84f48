"""Paired comparisons: is method A clearly better than method B on the same test targets?

Every method of a run is scored on the same targets under the same seeds, so the per-target
difference of two methods removes the spread between targets that both share. DESIGN.md
("Protocols: honest evaluation") allows the claim "A beats B" only when

1. the 95% interval of the mean difference excludes zero: the difference is averaged over seeds
   per target, and the interval runs over targets (Student's t for ``mse``, a BCa bootstrap over
   targets from ``scipy.stats.bootstrap`` for ``accuracy``, percentile where BCa is undefined;
   over seeds with t when there is one target), the rule of :mod:`taskextrap.report.schema`; and
2. every seed's mean difference has the sign of the overall difference.

:func:`paired_difference` computes this for two ``(n_targets, n_seeds)`` arrays;
:func:`compare_rows` applies it to the rows of a results table (rows built by
:func:`taskextrap.report.schema.make_row` keep their arrays), giving the ``comparisons`` list of
``results.json``; :func:`clear_claims` turns that list into sentences. Two results files of the
same experiment (a GPU's beside a CPU's, one machine's beside another's) are set side by side by
:func:`differences` (every number that differs) and :func:`claim_changes` (which clear claims
hold in both).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.report.schema import DIAGNOSTIC_METRICS, METRICS, _as_errors, mean_interval

__all__ = [
    "paired_difference",
    "compare_rows",
    "clear_claims",
    "keyed",
    "differences",
    "claim_changes",
    "REFERENCE_METHOD",
]

REFERENCE_METHOD = "rte"
ALSO_COMPARED = ("rte-gp",)  # estimators judged beside rte: each against every method but rte too


def paired_difference(
    errors_a: Any, errors_b: Any, metric: str = "mse", n_boot: int = 10000, seed: int = 0
) -> dict[str, Any]:
    """The paired difference ``A - B`` of two methods' per-(target, seed) errors on the same targets.

    ``errors_a`` and ``errors_b`` have the same shape ``(n_targets, n_seeds)`` (a 1-D array is one
    seed), entry ``[i, s]`` being target ``i`` under training seed ``s`` for both. Returns
    ``{"diff", "lo", "hi", "ci95", "n", "ci_method", "seed_diffs", "clear"}``: the mean
    difference; its 95% interval ``[lo, hi]`` over targets of the seed-averaged differences
    (None for a single value); ``ci95``, half the interval's width; ``n``, the number of targets
    (of seeds when there is one target); the per-seed mean differences; and ``clear``, True only
    when the interval excludes zero and every seed's mean difference is nonzero with the sign of
    ``diff``. ``metric`` picks the interval (``accuracy``: bootstrap over targets, ``n_boot``
    resamples seeded by ``seed``; ``ci_method`` says BCa or percentile).
    """
    if metric not in METRICS:
        raise TaskextrapError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    a, b = _as_errors(errors_a), _as_errors(errors_b)
    if a.shape != b.shape:
        raise TaskextrapError(
            f"paired_difference needs errors of the same (n_targets, n_seeds) shape, got {a.shape} and {b.shape}"
        )
    d = a - b
    iv = mean_interval(d, metric, n_boot=n_boot, seed=seed)
    seed_diffs = [float(v) for v in d.mean(axis=0)]
    diff = iv["mean"]
    excludes_zero = iv["lo"] is not None and (iv["lo"] > 0 or iv["hi"] < 0)
    same_sign = diff != 0 and all(np.sign(v) == np.sign(diff) for v in seed_diffs)
    ci95 = None if iv["lo"] is None else float((iv["hi"] - iv["lo"]) / 2.0)
    return {
        "diff": diff,
        "lo": iv["lo"],
        "hi": iv["hi"],
        "ci95": ci95,
        "n": iv["n"],
        "ci_method": iv["ci_method"],
        "seed_diffs": seed_diffs,
        "clear": bool(excludes_zero and same_sign),
    }


def _comparison(group: str, metric: str, a: dict, a_errors, b: dict, b_errors) -> dict[str, Any]:
    """One entry of :func:`compare_rows`: ``a`` against ``b`` over their paired errors."""
    p = paired_difference(a_errors, b_errors, metric)
    winner = _better(metric, p["diff"], a["method"], b["method"]) if p["clear"] else None
    return {
        "group": group,
        "metric": metric,
        "a": a["method"],
        "b": b["method"],
        "diff": p["diff"],
        "lo": p["lo"],
        "hi": p["hi"],
        "seed_diffs": p["seed_diffs"],
        "n": p["n"],
        "ci_method": p["ci_method"],
        "clear": p["clear"],
        "winner": winner,
    }


def _better(metric: str, diff: float, a: str, b: str) -> str:
    """The better of ``a`` and ``b`` given ``diff = A - B`` (lower mse, higher accuracy)."""
    a_better = diff < 0 if metric == "mse" else diff > 0
    return a if a_better else b


def compare_rows(rows: Iterable[dict], reference: str = REFERENCE_METHOD) -> list[dict[str, Any]]:
    """Paired comparisons of a results table: in each (group, metric) but the diagnostics
    (``coverage``, ``entropy``), ``reference`` (``rte``; the group's first method where it has no
    ``rte`` row) against every other method, and each method of :data:`ALSO_COMPARED` that the
    group has (``rte-gp``: the estimator judged beside ``rte``) against every other method but
    ``reference``.

    Every row must carry its per-(target, seed) array (``row.errors``, set by
    :func:`~taskextrap.report.schema.make_row`; ``ResultRow.replace`` keeps it, a ``{**row}``
    copy does not): a row without one raises, so no comparison is silently left out. Rows whose
    arrays differ in shape from the reference's (other targets) are not compared. Each entry is
    ``{"group", "metric", "a", "b", "diff", "lo", "hi", "seed_diffs", "n", "ci_method", "clear",
    "winner"}`` with ``diff = a - b`` from :func:`paired_difference`
    and ``winner`` the better method when the comparison is ``clear`` (else None).
    """
    by_key: dict[tuple[str, str], list[tuple[dict, np.ndarray]]] = {}  # (row, its errors)
    for r in rows:
        errors = getattr(r, "errors", None)
        if errors is None:
            raise TaskextrapError(
                f"row {r['group']}/{r['method']} has no per-target errors to compare "
                "(build rows with make_row; copy them with ResultRow.replace)"
            )
        by_key.setdefault((r["group"], r["metric"]), []).append((r, errors))
    out = []
    for (group, metric), sel in by_key.items():
        if metric in DIAGNOSTIC_METRICS:  # calibration and spread, not scores where lower is better
            continue
        ref = next((pair for pair in sel if pair[0]["method"] == reference), sel[0])
        refs = [ref] + [pair for pair in sel if pair[0]["method"] in ALSO_COMPARED and pair is not ref]
        for a, a_errors in refs:
            for other, other_errors in sel:
                if other["method"] in (a["method"], ref[0]["method"]) or other_errors.shape != a_errors.shape:
                    continue
                out.append(_comparison(group, metric, a, a_errors, other, other_errors))
    return out


def clear_claims(comparisons: Iterable[dict]) -> list[str]:
    """The clear claims of a ``comparisons`` list as sentences, e.g. ``"quadratic: rte beats
    ctx-polyfit (mse)"``; comparisons that are not clear give none."""
    out = []
    for c in comparisons:
        if c["clear"] and c.get("winner"):
            loser = c["b"] if c["winner"] == c["a"] else c["a"]
            out.append(f"{c['group']}: {c['winner']} beats {loser} ({c['metric']})")
    return out


# what identifies a row or a comparison in a results file, and the fields that are its numbers
KEYS = {"rows": ("group", "method", "metric"), "comparisons": ("group", "metric", "a", "b")}
NUMBER_FIELDS = {
    "rows": ("value", "ci95", "n", "seed_sd", "paper_value", "errors"),
    "comparisons": ("diff", "lo", "hi", "n", "clear", "winner"),
}


def keyed(results: dict, kind: str = "rows") -> dict[tuple, dict]:
    """A parsed results file's ``rows`` by (group, method, metric), or its ``comparisons`` by
    (group, metric, a, b)."""
    return {tuple(r[k] for k in KEYS[kind]): r for r in results.get(kind) or []}


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN (a diverged baseline stays diverged)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def differences(old: dict, new: dict) -> list[tuple[str, tuple, str | None, Any, Any]]:
    """Every number that differs between two parsed results files, as ``(kind, key, field, old,
    new)``: ``kind`` is ``"rows"`` or ``"comparisons"``, ``key`` as in :func:`keyed`; a row or
    comparison in one file only has ``field`` None and its missing side None. Provenance, timing
    and paths are not numbers of the result and are not compared."""
    out: list[tuple[str, tuple, str | None, Any, Any]] = []
    for kind in KEYS:
        a, b = keyed(old, kind), keyed(new, kind)
        out += [(kind, k, None, a[k], None) for k in sorted(a.keys() - b.keys(), key=str)]
        out += [(kind, k, None, None, b[k]) for k in sorted(b.keys() - a.keys(), key=str)]
        for k in sorted(a.keys() & b.keys(), key=str):
            out += [
                (kind, k, f, a[k].get(f), b[k].get(f))
                for f in NUMBER_FIELDS[kind]
                if not _same(a[k].get(f), b[k].get(f))
            ]
    return out


def claim_changes(old: dict, new: dict) -> dict[tuple, str]:
    """Every paired claim clear in either of two parsed results files, by (group, metric, a, b),
    with what became of it: ``"held"`` (clear in both, same winner), ``"vanished"`` (clear only in
    ``old``), ``"appeared"`` (clear only in ``new``) or ``"reversed"`` (clear in both, the other
    winner)."""
    a, b = keyed(old, "comparisons"), keyed(new, "comparisons")
    out = {}
    for k in sorted(a.keys() | b.keys()):
        x, y = (a.get(k) or {}).get("clear"), (b.get(k) or {}).get("clear")
        if x and y:
            out[k] = "held" if a[k]["winner"] == b[k]["winner"] else "reversed"
        elif x or y:
            out[k] = "vanished" if x else "appeared"
    return out
