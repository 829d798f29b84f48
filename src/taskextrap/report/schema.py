"""The results.json schema, its validator, and the helpers that build result rows.

A run's ``results.json`` looks like (DESIGN.md, "results.json")::

    {"experiment": "parameter", "protocol": "paper", "profile": "quick", "seeds": [0, 1, 2],
     "rows": [{"group": "quadratic", "method": "rte", "metric": "mse", "value": 12.3,
               "ci95": 1.1, "n": 400, "paper_value": 733.0, "paper_ci95": 11.9,
               "seed_sd": 0.4, "ci_method": "t-targets", "seed_independent": false}],
     "comparisons": [{"group": "quadratic", "metric": "mse", "a": "rte", "b": "ctx-polyfit",
                      "diff": -3.1, "lo": -4.0, "hi": -2.2, "seed_diffs": [-3.0, -3.3, -2.9],
                      "n": 400, "ci_method": "t-targets", "clear": true, "winner": "rte"}],
     "timing": {"wall_s": 41.2},
     "environment": {"taskextrap": "0.1.0", "torch": "2.13.0", "device": "cpu", "git": "abc1234",
                     "dirty": false, "source_hash": "0123456789abcdef"},
     "config": {}}

Intervals (DESIGN.md, "Protocols: honest evaluation"). Every seed of a run scores the same test
targets, and seed-independent methods (context-only fits, library curves) give the same number
under every seed, so the (target, seed) entries are not independent draws. The rule, applied by
:func:`summarize_errors` to errors of shape ``(n_targets, n_seeds)``:

- the unit of the interval is the **target**: each target's error is first averaged over seeds,
  and ``n`` is the number of targets (never targets x seeds);
- ``mse`` rows: ``ci95 = t(0.975, n - 1) * sd / sqrt(n)`` over those seed-averaged errors
  (``ci_method = "t-targets"``; Student's t, which is 1.96 to within 1% from n = 200);
- ``accuracy`` rows: half the width of a 95% bootstrap interval of their mean, resampling targets
  (tasks) with replacement, as the language-model experiments have few tasks: BCa from
  ``scipy.stats.bootstrap`` (``"bootstrap-bca-targets"``), or the percentile interval where BCa is
  undefined, e.g. every task correct (``"bootstrap-percentile-targets"``; :func:`bootstrap_mean`).
  Files written before this rule say ``"bootstrap-targets"``: a percentile bootstrap by hand;
- one target and several seeds (the projectile): the t interval over the seeds, ``n`` = seeds
  (``"t-seeds"``); a single value has no interval (``ci95`` None, ``ci_method`` None);
- ``seed_sd`` is the ``ddof=1`` standard deviation across seeds of the per-seed means (None for
  one seed); a method whose seed columns are all equal (to 1e-9 relative) is
  ``seed_independent``: it is counted once (its seed-averaged column is that one column) and its
  ``seed_sd`` is 0.

The interval therefore describes the spread over test targets for these training seeds; the
training-seed spread is reported beside it as ``seed_sd`` rather than folded into it. Paired
comparisons of two methods on the same targets (``comparisons``) follow the same rule on the
per-target differences (:mod:`taskextrap.report.compare`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.report.paper_values import paper_value
from taskextrap.validation import check_int

__all__ = [
    "RESULTS_SCHEMA",
    "ROW_SCHEMA",
    "METRICS",
    "DIAGNOSTIC_METRICS",
    "CI_METHODS",
    "COMPARISON_SCHEMA",
    "validate_results",
    "summarize_errors",
    "mean_interval",
    "interval_units",
    "is_seed_independent",
    "t_halfwidth",
    "bootstrap_mean",
    "bootstrap_interval",
    "bootstrap_ci95",
    "ResultRow",
    "make_row",
    "environment_info",
]

# ``coverage``: the share of query points inside a method's 90% predictive interval
# (``search.posterior.covered``), per target; a calibration check, never a paired comparison.
METRICS = (
    "mse",
    "accuracy",
    "coverage",
    "interval-width",
    "entropy",
    "trustworthiness",
    "spearman",
    "silhouette",
    "fraction",
    "relative-distance",
)
# diagnostics, not scores: no paper value, no paired comparison (coverage: the share of query
# points inside a 90% predictive interval; interval-width: its mean width, in the target's units;
# entropy: of the posterior over decompositions, nats;
# the others describe a 2-D map of the proxy space, ``experiments.manifolds``: trustworthiness
# of the map, Spearman correlation of a read-out with the true parameter, silhouette of the
# task classes, a fraction of held-out tasks, a distance relative to a training step)
DIAGNOSTIC_METRICS = tuple(m for m in METRICS if m not in ("mse", "accuracy"))
# the range each bounded metric must lie in
METRIC_RANGES = {
    "accuracy": (0.0, 1.0),
    "coverage": (0.0, 1.0),
    "trustworthiness": (0.0, 1.0),
    "fraction": (0.0, 1.0),
    "spearman": (-1.0, 1.0),
    "silhouette": (-1.0, 1.0),
    "entropy": (0.0, math.inf),
    "relative-distance": (0.0, math.inf),
    "interval-width": (0.0, math.inf),
}
# How a row's interval was computed (the module docstring); "bootstrap-targets" is the hand-written
# percentile bootstrap of files written before scipy.stats.bootstrap, still accepted when read.
CI_METHODS = (
    "t-targets",
    "bootstrap-bca-targets",
    "bootstrap-percentile-targets",
    "bootstrap-targets",
    "t-seeds",
    "given",
)

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}

ROW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "group",
        "method",
        "metric",
        "value",
        "ci95",
        "n",
        "paper_value",
        "paper_ci95",
    ],
    "properties": {
        "group": {"type": "string", "minLength": 1},
        "method": {"type": "string", "minLength": 1},
        "metric": {"enum": list(METRICS)},
        "value": _NUM,
        "ci95": {"type": ["number", "null"], "minimum": 0},
        "n": {"type": "integer", "minimum": 1},
        "paper_value": _NUM_OR_NULL,
        "paper_ci95": _NUM_OR_NULL,
        # optional, documented extras
        "seed_sd": {"type": ["number", "null"], "minimum": 0},
        "ci_method": {"enum": [None, *CI_METHODS]},
        "seed_independent": {"type": "boolean"},
        "note": {"type": "string"},
    },
    # rows may carry further keys (e.g. per-row notes or sub-metrics)
    "additionalProperties": True,
    # accuracies and coverages are fractions in [0, 1]
    "if": {"properties": {"metric": {"enum": ["accuracy", "coverage"]}}, "required": ["metric"]},
    "then": {"properties": {"value": {"minimum": 0, "maximum": 1}}},
}

COMPARISON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["group", "metric", "a", "b", "diff", "lo", "hi", "seed_diffs", "n", "clear", "winner"],
    "properties": {
        "group": {"type": "string", "minLength": 1},
        "metric": {"enum": list(METRICS)},
        "a": {"type": "string", "minLength": 1},
        "b": {"type": "string", "minLength": 1},
        "diff": _NUM,
        "lo": _NUM_OR_NULL,
        "hi": _NUM_OR_NULL,
        "seed_diffs": {"type": "array", "items": _NUM, "minItems": 1},
        "n": {"type": "integer", "minimum": 1},
        "ci_method": {"enum": [None, *(m for m in CI_METHODS if m != "given")]},
        "clear": {"type": "boolean"},
        "winner": {"type": ["string", "null"]},
    },
}

RESULTS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "taskextrap results.json",
    "type": "object",
    "required": [
        "experiment",
        "protocol",
        "profile",
        "seeds",
        "rows",
        "timing",
        "environment",
        "config",
    ],
    "properties": {
        "experiment": {"type": "string", "minLength": 1},
        "protocol": {"type": "string", "minLength": 1},
        "profile": {"type": "string", "minLength": 1},
        "seeds": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        "rows": {"type": "array", "items": ROW_SCHEMA},
        # optional: paired "a beats b" comparisons (taskextrap.report.compare.compare_rows)
        "comparisons": {"type": "array", "items": COMPARISON_SCHEMA},
        "timing": {
            "type": "object",
            "required": ["wall_s"],
            "properties": {"wall_s": {"type": "number", "minimum": 0}},
            "additionalProperties": {"type": "number"},
        },
        "environment": {
            "type": "object",
            "required": ["taskextrap", "torch", "device", "git"],
            "properties": {
                "taskextrap": {"type": "string"},
                "torch": {"type": "string"},
                "device": {"type": "string"},
                "git": {"type": ["string", "null"]},
                # written by every run since provenance was added; optional for older files
                "dirty": {"type": ["boolean", "null"]},
                "source_hash": {"type": ["string", "null"]},
                # the CPU of the process that wrote the file (each unit file records its own); since 2026-11-28
                "cpu": {"type": ["string", "null"]},
                "libraries": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
            },
        },
        "config": {
            "type": "object",
            # the --family spec exactly as given (a built-in name or module:attr; null: the experiment's
            # own families) and, for a module:attr, the hash of its code (provenance.callable_hash);
            # written by every run since runs were recorded, optional for older files
            "properties": {"family": {"type": ["string", "null"]}, "family_code_hash": {"type": ["string", "null"]}},
        },
    },
}


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(path) -> str:
    parts = [str(p) for p in path]
    return "/".join(parts) if parts else "<top level>"


def validate_results(obj: Any) -> None:
    """Check a results object against :data:`RESULTS_SCHEMA` and the value rules.

    Beyond the JSON schema, every row's ``value``, ``ci95``, ``seed_sd``, ``paper_value`` and
    ``paper_ci95`` and every comparison's numbers must be finite, and accuracies must lie in
    [0, 1].
    Raises :class:`TaskextrapError` with a one-line message naming the first problem found.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    validator = Draft202012Validator(RESULTS_SCHEMA)
    error = best_match(validator.iter_errors(obj))
    if error is not None:
        raise TaskextrapError(_one_line(f"invalid results at {_where(error.absolute_path)}: {error.message}"))
    for i, row in enumerate(obj["rows"]):
        for key in ("value", "ci95", "seed_sd", "paper_value", "paper_ci95"):
            v = row.get(key)
            if v is not None and not math.isfinite(v):
                raise TaskextrapError(f"invalid results at rows/{i}/{key}: {v} is not finite")
    for i, comp in enumerate(obj.get("comparisons", [])):
        for key in ("diff", "lo", "hi"):
            v = comp.get(key)
            if v is not None and not math.isfinite(v):
                raise TaskextrapError(f"invalid results at comparisons/{i}/{key}: {v} is not finite")
        if not all(math.isfinite(v) for v in comp["seed_diffs"]):
            raise TaskextrapError(f"invalid results at comparisons/{i}/seed_diffs: not finite")
    wall = obj["timing"]["wall_s"]
    if not math.isfinite(wall):
        raise TaskextrapError(f"invalid results at timing/wall_s: {wall} is not finite")


SEED_TOL = 1e-9  # relative tolerance under which all seed columns count as one (seed-independent)


def _as_errors(errors: Any) -> np.ndarray:
    arr = np.asarray(errors, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise TaskextrapError(f"errors must have shape (n_tasks, n_seeds), got an array of shape {arr.shape}")
    if arr.size == 0:
        raise TaskextrapError("errors is empty: need at least one (test task, seed) error")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise TaskextrapError(f"errors contains {bad} NaN/inf value(s)")
    return arr


def is_seed_independent(errors: Any) -> bool:
    """Whether every seed column of ``errors`` (shape ``(n_targets, n_seeds)``) equals the first,
    entry by entry, to a relative tolerance of :data:`SEED_TOL` (float noise from summing in
    another order; no absolute tolerance, so one huge entry cannot hide differences elsewhere).
    False for a single seed: nothing to compare. A miss costs little: the interval runs over
    seed-averaged targets either way, only ``seed_sd`` is then a tiny number instead of 0."""
    arr = _as_errors(errors)
    if arr.shape[1] < 2:
        return False
    return bool(np.allclose(arr, arr[:, :1], rtol=SEED_TOL, atol=0.0))


def t_halfwidth(values: Any) -> float | None:
    """Half-width of the Student-t 95% interval for the mean of ``values`` (1-D):
    ``t(0.975, n - 1) * sd / sqrt(n)`` with the ``ddof=1`` sd; None for fewer than two values."""
    from scipy import stats

    v = np.asarray(values, dtype=float).ravel()
    if v.size < 2:
        return None
    return float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


BOOTSTRAP_BATCH = 1 << 21  # values resampled at a time by scipy.stats.bootstrap: bounded memory


def bootstrap_mean(values: Any, n_boot: int = 10000, seed: int = 0) -> dict[str, Any] | None:
    """The 95% bootstrap interval for the mean of ``values`` (1-D), from ``scipy.stats.bootstrap``:
    ``{"lo", "hi", "method"}``, or None for fewer than two values.

    ``n_boot`` resamples drawn by ``np.random.default_rng(seed)`` (deterministic), vectorised in
    batches of bounded memory. ``method`` is ``"bca"`` (bias-corrected and accelerated) when scipy
    computes it without a warning and with finite ends; where BCa is undefined (all values equal,
    as an all-correct task set; scipy's ``DegenerateDataWarning`` or a NaN end) it is the
    ``"percentile"`` interval from the same seed, clipped to the values' range (so all-equal
    values give the zero-width interval at their value, not NaN). Raises
    :class:`TaskextrapError` for NaN/inf values or ``n_boot`` < 1.
    """
    import warnings

    from scipy import stats

    v = np.asarray(values, dtype=float).ravel()
    if v.size < 2:
        return None
    if not np.all(np.isfinite(v)):
        raise TaskextrapError(f"bootstrap: values contain {int(np.sum(~np.isfinite(v)))} NaN/inf value(s)")
    n_boot = check_int("n_boot", n_boot, 1)
    batch = max(1, BOOTSTRAP_BATCH // v.size)
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = stats.bootstrap(
                (v,),
                np.mean,
                n_resamples=n_boot,
                batch=batch,
                vectorized=True,
                confidence_level=0.95,
                method=method,
                rng=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        degenerate = any(issubclass(w.category, (stats.DegenerateDataWarning, RuntimeWarning)) for w in caught)
        if method == "percentile" or (math.isfinite(lo) and math.isfinite(hi) and not degenerate):
            break
    # the mean of a resample lies in [min, max]; clipping removes float noise (all-equal values)
    lo, hi = float(np.clip(lo, v.min(), v.max())), float(np.clip(hi, v.min(), v.max()))
    return {"lo": lo, "hi": hi, "method": method.lower()}


def bootstrap_interval(values: Any, n_boot: int = 10000, seed: int = 0) -> tuple[float, float] | None:
    """The 95% bootstrap interval ``(lo, hi)`` for the mean of ``values`` (1-D) of
    :func:`bootstrap_mean` (BCa from ``scipy.stats.bootstrap``, percentile where BCa is undefined),
    with ``n_boot`` resamples seeded by ``seed`` (deterministic); None for fewer than two values."""
    iv = bootstrap_mean(values, n_boot=n_boot, seed=seed)
    return None if iv is None else (iv["lo"], iv["hi"])


def interval_units(errors: Any) -> tuple[np.ndarray, str]:
    """The values an interval is computed over, and their kind: the per-target errors averaged
    over seeds (``"targets"``) when there are two or more targets, else the one target's
    per-seed values (``"seeds"``)."""
    arr = _as_errors(errors)
    if arr.shape[0] >= 2:
        return arr.mean(axis=1), "targets"
    return arr[0], "seeds"


def mean_interval(errors: Any, metric: str = "mse", n_boot: int = 10000, seed: int = 0) -> dict[str, Any]:
    """The mean of ``errors`` (shape ``(n_targets, n_seeds)``) and its 95% interval under the
    module's rule: ``{"mean", "lo", "hi", "n", "ci_method"}`` (``lo``/``hi``/``ci_method`` None
    when only one value is available). ``accuracy`` over targets uses the bootstrap of
    :func:`bootstrap_mean` (``ci_method`` ``"bootstrap-bca-targets"`` or
    ``"bootstrap-percentile-targets"``, ``n_boot`` resamples seeded by ``seed``), everything else
    the Student-t interval."""
    arr = _as_errors(errors)
    units, kind = interval_units(arr)
    mean = float(arr.mean())
    out: dict[str, Any] = {"mean": mean, "lo": None, "hi": None, "n": int(units.size), "ci_method": None}
    if units.size < 2:
        return out
    if metric == "accuracy" and kind == "targets":
        iv = bootstrap_mean(units, n_boot=n_boot, seed=seed)
        assert iv is not None  # two or more values
        out.update(lo=iv["lo"], hi=iv["hi"], ci_method=f"bootstrap-{iv['method']}-targets")
    else:
        h = t_halfwidth(units)
        assert h is not None  # two or more values
        out.update(lo=mean - h, hi=mean + h, ci_method=f"t-{kind}")
    return out


def summarize_errors(errors: Any, metric: str = "mse") -> dict[str, Any]:
    """Summarise per-(test target, seed) errors into the numbers of a result row.

    ``errors`` has shape ``(n_targets, n_seeds)`` (a 1-D array is read as one seed). Returns a
    dict with ``value`` (the mean over all entries), ``ci95`` (half-width of the 95% interval of
    the module docstring's rule: over targets of the seed-averaged errors, t for ``mse`` and a
    bootstrap for ``accuracy``; over seeds with t when there is one target; None for one value),
    ``n`` (the number of targets, or of seeds when there is one target), ``seed_sd`` (the
    ``ddof=1`` standard deviation across seeds of the per-seed means; None for a single seed; 0
    for a seed-independent method), ``ci_method`` and ``seed_independent``. Plain Python types.
    """
    arr = _as_errors(errors)
    iv = mean_interval(arr, metric)
    independent = is_seed_independent(arr)
    if arr.shape[1] == 1:
        seed_sd = None
    elif independent:
        seed_sd = 0.0
    else:
        seed_sd = float(arr.mean(axis=0).std(ddof=1))
    ci95 = None if iv["lo"] is None else float((iv["hi"] - iv["lo"]) / 2.0)
    return {
        "value": iv["mean"],
        "ci95": ci95,
        "n": iv["n"],
        "seed_sd": seed_sd,
        "ci_method": iv["ci_method"],
        "seed_independent": independent,
    }


def bootstrap_ci95(errors: Any, n_boot: int = 10000, seed: int = 0) -> float | None:
    """Half-width of a 95% bootstrap interval for the mean, resampling test tasks.

    ``errors`` has shape ``(n_tasks, n_seeds)``; each task's values are averaged over seeds and
    the tasks are resampled with replacement (:func:`bootstrap_mean`: BCa, percentile where BCa
    is undefined). This is what
    :func:`make_row` computes for ``accuracy`` rows anyway; None for a single task.
    """
    arr = _as_errors(errors)
    iv = bootstrap_interval(arr.mean(axis=1), n_boot=n_boot, seed=seed)
    return None if iv is None else float((iv[1] - iv[0]) / 2.0)


class ResultRow(dict):
    """A results.json row (a plain ``dict`` to JSON and to ``==``) that also keeps, as the
    attribute ``errors``, the per-(target, seed) array it was computed from, so that paired
    comparisons (:func:`taskextrap.report.compare.compare_rows`) can be made where rows are
    collected. The array is never written: JSON sees only the dict's keys."""

    errors: np.ndarray | None = None

    def replace(self, **changes: Any) -> ResultRow:
        """A copy with ``changes`` applied that keeps ``errors`` (``{**row}`` would drop it)."""
        out = ResultRow({**self, **changes})
        out.errors = self.errors
        return out


_FIXED_ROW_KEYS = frozenset({"group", "method", "metric", "value", "n", "paper_value", "paper_ci95"})


def make_row(experiment: str, group: str, method: str, metric: str, errors: Any, **extra: Any) -> ResultRow:
    """Build one results.json row from per-(test target, seed) errors.

    ``value``, ``ci95``, ``n``, ``seed_sd``, ``ci_method`` and ``seed_independent`` come from
    :func:`summarize_errors` (see the module docstring for the interval rule);
    ``paper_value`` and ``paper_ci95`` from :func:`taskextrap.report.paper_values.paper_value`
    (``None`` where the paper prints no number). ``extra`` keys are added to the row (e.g.
    ``note="..."``); they may override ``ci95`` or ``seed_sd`` but not the other computed
    fields; an overriding ``ci95`` that differs from the computed one sets ``ci_method`` to
    ``"given"`` unless ``ci_method`` is passed too. The returned :class:`ResultRow` keeps the
    errors array as ``row.errors`` for paired comparisons.
    """
    if metric not in METRICS:
        raise TaskextrapError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    clash = _FIXED_ROW_KEYS.intersection(extra)
    if clash:
        raise TaskextrapError(f"make_row: cannot override {', '.join(sorted(clash))}")
    arr = _as_errors(errors)
    stats = summarize_errors(arr, metric)
    lo, hi = METRIC_RANGES.get(metric, (-math.inf, math.inf))
    if not lo - 1e-12 <= stats["value"] <= hi + 1e-12:
        span = (
            "a fraction in [0, 1]" if (lo, hi) == (0.0, 1.0) else (">= 0" if hi == math.inf else f"in [{lo:g}, {hi:g}]")
        )
        raise TaskextrapError(f"{metric} for {group}/{method} is {stats['value']:.4g}; it must be {span}")
    # the paper prints errors and accuracies, never a diagnostic: its value is not this row's
    pv, pci = (None, None) if metric in DIAGNOSTIC_METRICS else paper_value(experiment, group, method)
    row = ResultRow(
        group=group,
        method=method,
        metric=metric,
        value=stats["value"],
        ci95=stats["ci95"],
        n=stats["n"],
        paper_value=pv,
        paper_ci95=pci,
        seed_sd=stats["seed_sd"],
        ci_method=stats["ci_method"],
        seed_independent=stats["seed_independent"],
    )
    if "ci95" in extra and "ci_method" not in extra and not _same(extra["ci95"], stats["ci95"]):
        row["ci_method"] = "given"
    row.update(extra)
    row.errors = arr
    return row


def accuracy_row(experiment: str, per_seed: Any, group: str, method: str, keep: Any = None) -> ResultRow:
    """An ``accuracy`` row of the language-model experiments from one array of per-task values
    per seed (stacked to (tasks, seeds)), restricted to the tasks ``keep`` (a mask; None: all);
    its interval is a bootstrap over the tasks (:func:`bootstrap_ci95`)."""
    e = np.stack(per_seed, axis=1)
    e = e if keep is None else e[keep]
    return make_row(experiment, group, method, "accuracy", e, ci95=bootstrap_ci95(e))


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-15)


def environment_info(device: str = "cpu") -> dict[str, Any]:
    """Describe the software environment and the code's provenance for ``results.json``; never raises.

    Returns ``{"taskextrap": version, "torch": version, "device": device, "git": short hash,
    "dirty": bool, "source_hash": hex, "cpu": str, "libraries": {name: version}}``: ``git`` is
    the short commit hash of the repository holding the package source and ``dirty`` whether its
    working tree had uncommitted changes (both ``None`` when git or the repository is
    unavailable, e.g. an installed wheel);
    ``source_hash`` is :func:`taskextrap.provenance.source_hash` (sha256 of the package's ``.py``
    files and shipped model files; ``None`` if they cannot be read); ``torch`` is
    ``"unavailable"`` if torch cannot be imported; ``cpu`` is
    :func:`taskextrap.provenance.cpu_info` (the processor and its instruction set: the same code
    and seeds give other numbers on another one) and ``libraries`` the versions of numpy, scipy
    and scikit-learn (:func:`taskextrap.provenance.library_versions`).
    """
    from taskextrap import provenance

    try:
        import taskextrap

        version = str(taskextrap.__version__)
    except Exception:  # noqa: BLE001 - the environment record is best effort, never a failed run
        version = "unknown"
    try:
        import torch

        torch_version = str(torch.__version__)
    except Exception:  # noqa: BLE001 - as above
        torch_version = "unavailable"
    try:
        src_hash = provenance.source_hash()
    except Exception:  # noqa: BLE001 - as above
        src_hash = None
    return {
        "taskextrap": version,
        "torch": torch_version,
        "device": str(device),
        "git": provenance.git_commit(),
        "dirty": provenance.git_dirty(),
        "source_hash": src_hash,
        "cpu": provenance.cpu_info(),
        "libraries": provenance.library_versions(),
    }
