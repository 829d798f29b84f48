"""The results.json schema, its validator, and the helpers that build result rows.

A run's ``results.json`` looks like (DESIGN.md, "results.json")::

    {"experiment": "parameter", "protocol": "paper", "profile": "quick", "seeds": [0, 1, 2],
     "rows": [{"group": "quadratic", "method": "rte", "metric": "mse", "value": 12.3,
               "ci95": 1.1, "n": 1200, "paper_value": 733.0, "paper_ci95": 11.9,
               "seed_sd": 0.4}],
     "timing": {"wall_s": 41.2},
     "environment": {"taskextrap": "0.1.0", "torch": "2.13.0", "device": "cpu", "git": "abc1234"},
     "config": {}}

Confidence intervals (DESIGN.md, "Protocols"): ``ci95 = 1.96 * sd / sqrt(n)`` over the
per-(test task, training seed) errors, plus ``seed_sd``, the standard deviation across seeds of
the per-seed means. For accuracies over few tasks, :func:`bootstrap_ci95` resamples test tasks.
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.report.paper_values import paper_value

__all__ = [
    "RESULTS_SCHEMA",
    "ROW_SCHEMA",
    "METRICS",
    "validate_results",
    "summarize_errors",
    "bootstrap_ci95",
    "make_row",
    "environment_info",
]

METRICS = ("mse", "accuracy")

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
        "note": {"type": "string"},
    },
    # rows may carry further keys (e.g. per-row notes or sub-metrics)
    "additionalProperties": True,
    # accuracies are fractions in [0, 1]
    "if": {"properties": {"metric": {"const": "accuracy"}}, "required": ["metric"]},
    "then": {"properties": {"value": {"minimum": 0, "maximum": 1}}},
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
            },
        },
        "config": {"type": "object"},
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
    ``paper_ci95`` must be finite, and accuracies must lie in [0, 1].
    Raises :class:`TaskextrapError` with a one-line message naming the first problem found.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    validator = Draft202012Validator(RESULTS_SCHEMA)
    error = best_match(validator.iter_errors(obj))
    if error is not None:
        raise TaskextrapError(
            _one_line(f"invalid results at {_where(error.absolute_path)}: {error.message}")
        )
    for i, row in enumerate(obj["rows"]):
        for key in ("value", "ci95", "seed_sd", "paper_value", "paper_ci95"):
            v = row.get(key)
            if v is not None and not math.isfinite(v):
                raise TaskextrapError(f"invalid results at rows/{i}/{key}: {v} is not finite")
    wall = obj["timing"]["wall_s"]
    if not math.isfinite(wall):
        raise TaskextrapError(f"invalid results at timing/wall_s: {wall} is not finite")


def _as_errors(errors: Any) -> np.ndarray:
    arr = np.asarray(errors, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise TaskextrapError(
            f"errors must have shape (n_tasks, n_seeds), got an array of shape {arr.shape}"
        )
    if arr.size == 0:
        raise TaskextrapError("errors is empty: need at least one (test task, seed) error")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise TaskextrapError(f"errors contains {bad} NaN/inf value(s)")
    return arr


def summarize_errors(errors: Any) -> dict[str, Any]:
    """Summarise per-(test task, seed) errors into the numbers of a result row.

    ``errors`` has shape ``(n_tasks, n_seeds)`` (a 1-D array is read as one seed). Returns a
    dict with ``value`` (the mean over all entries), ``ci95`` (``1.96 * sd / sqrt(n)`` with the
    ``ddof=1`` standard deviation over all ``n = n_tasks * n_seeds`` entries; 0.0 when
    ``n == 1``), ``n``, and ``seed_sd`` (the ``ddof=1`` standard deviation across seeds of the
    per-seed means; ``None`` for a single seed). All numbers are plain Python types.
    """
    arr = _as_errors(errors)
    n = int(arr.size)
    value = float(arr.mean())
    ci95 = 0.0 if n == 1 else float(1.96 * arr.std(ddof=1) / math.sqrt(n))
    seed_sd = None if arr.shape[1] == 1 else float(arr.mean(axis=0).std(ddof=1))
    return {"value": value, "ci95": ci95, "n": n, "seed_sd": seed_sd}


def bootstrap_ci95(errors: Any, n_boot: int = 2000, seed: int = 0) -> float:
    """Half-width of a 95% percentile-bootstrap interval for the mean, resampling test tasks.

    ``errors`` has shape ``(n_tasks, n_seeds)``; whole rows (test tasks, with all their seeds)
    are resampled with replacement. Intended for accuracies over few tasks (DESIGN.md);
    returns 0.0 for a single task. Pass the result as ``ci95=`` to :func:`make_row`.
    """
    arr = _as_errors(errors)
    n_tasks = arr.shape[0]
    if n_tasks == 1:
        return 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_tasks, size=(int(n_boot), n_tasks))
    task_means = arr.mean(axis=1)
    boot = task_means[idx].mean(axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return float((hi - lo) / 2.0)


_FIXED_ROW_KEYS = frozenset({"group", "method", "metric", "value", "n", "paper_value", "paper_ci95"})


def make_row(
    experiment: str, group: str, method: str, metric: str, errors: Any, **extra: Any
) -> dict[str, Any]:
    """Build one results.json row from per-(test task, seed) errors.

    ``value``, ``ci95``, ``n`` and ``seed_sd`` come from :func:`summarize_errors`;
    ``paper_value`` and ``paper_ci95`` from :func:`taskextrap.report.paper_values.paper_value`
    (``None`` where the paper prints no number). ``extra`` keys are added to the row (e.g.
    ``note="..."``); they may override ``ci95`` or ``seed_sd`` (e.g. with
    :func:`bootstrap_ci95`) but not the other computed fields.
    """
    if metric not in METRICS:
        raise TaskextrapError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    clash = _FIXED_ROW_KEYS.intersection(extra)
    if clash:
        raise TaskextrapError(f"make_row: cannot override {', '.join(sorted(clash))}")
    stats = summarize_errors(errors)
    if metric == "accuracy" and not 0.0 <= stats["value"] <= 1.0:
        raise TaskextrapError(
            f"accuracy for {group}/{method} is {stats['value']:.4g}; accuracies are fractions in [0, 1]"
        )
    pv, pci = paper_value(experiment, group, method)
    row: dict[str, Any] = {
        "group": group,
        "method": method,
        "metric": metric,
        "value": stats["value"],
        "ci95": stats["ci95"],
        "n": stats["n"],
        "paper_value": pv,
        "paper_ci95": pci,
        "seed_sd": stats["seed_sd"],
    }
    row.update(extra)
    return row


def _git_hash(directory: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except Exception:
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out else None


def environment_info(device: str = "cpu") -> dict[str, Any]:
    """Describe the software environment for ``results.json``; never raises.

    Returns ``{"taskextrap": version, "torch": version, "device": device, "git": short hash}``
    where ``git`` is the short commit hash of the package source tree (``None`` when git or
    the repository is unavailable) and ``torch`` is ``"unavailable"`` if torch cannot be
    imported.
    """
    try:
        import taskextrap

        version = str(taskextrap.__version__)
        src_dir = Path(taskextrap.__file__).resolve().parent
    except Exception:
        version, src_dir = "unknown", Path(__file__).resolve().parent
    try:
        import torch

        torch_version = str(torch.__version__)
    except Exception:
        torch_version = "unavailable"
    return {
        "taskextrap": version,
        "torch": torch_version,
        "device": str(device),
        "git": _git_hash(src_dir),
    }
