"""Calibrated predictive intervals: the posterior's standard deviation times a scale chosen on dev.

The posterior predictive (``search.posterior.mixture``) has the spread of the candidates plus
Psi's own error, measured at fit time on training-relation tasks. Away from the training
relations the error is larger, so the raw 90% interval covers too little under extrapolation
(and can cover too much where the candidates disagree). A scale per regime and protocol fixes
the width: it is the smallest multiplier of the raw standard deviation whose interval covers
:data:`~taskextrap.search.posterior.INTERVAL_LEVEL` of the query points of the regime's **dev**
split (the pseudo-extrapolation built from training relations only), a split-conformal choice on
the grid :data:`SCALE_GRID`. No test task is involved.

``scripts/calibrate_intervals.py`` reads the coverage-by-scale curves that every experiment
records for its dev runs (``config["coverage_by_scale"]``) and writes the chosen scales to
``interval_scales.json`` beside this module; :func:`interval_scale` looks them up. An estimator
takes ``interval_scale=`` (a number, or None for the looked-up one; 1.0 where none was chosen)
and applies it in ``predict(..., return_std=True)`` (``calibrated_scale()`` says which).
The parameter regime's built-in families have a scale each (their dev splits differ), looked up by
the family's name; any other name gets the regime's pooled one. One scales file serves every
profile: it records the profile its dev runs used (``quick`` today), and a run of another profile
applies those scales.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.stats import norm

from taskextrap.errors import TaskextrapError
from taskextrap.search.posterior import INTERVAL_LEVEL, covered
from taskextrap.tasks.regimes import REGIMES
from taskextrap.validation import check_real

SCALE_GRID = tuple(float(s) for s in np.round(np.geomspace(0.25, 64.0, 81), 4))  # ~7% steps
SCALES_FILE = Path(__file__).with_name("interval_scales.json")


@lru_cache(maxsize=1)
def _scales() -> dict:
    if not SCALES_FILE.exists():
        return {}
    return json.loads(SCALES_FILE.read_text())["scales"]


def scale_key(regime: str, protocol, group: str | None = None) -> str:
    """``"regime/protocol[/group]"``: a built-in protocol by name; another one as strict's when
    its context is noisy, else as paper's (the dev-chosen settings' rule)."""
    name = protocol.name if protocol.name in ("paper", "strict") else ("strict" if protocol.noise > 0 else "paper")
    return f"{regime}/{name}" + ("" if group is None else f"/{group}")


def interval_scale(regime: str, protocol, group: str | None = None) -> float:
    """The dev-chosen multiplier of the posterior sd for ``regime`` and ``protocol``: the
    ``group``'s own (a built-in family of the parameter regime, by name, chosen on its dev split)
    when there is one, else the regime's (pooled over its dev groups), else 1.0 (the raw interval).
    ``regime`` is one of a registered regime's ``scale_keys`` (``tasks.regimes``), or a classic's
    key ``"<regime or key>:<method>"`` (:func:`method_key`; a method no scale was chosen for reads
    1.0, as a regime does); a one-line error otherwise."""
    known = [k for r in REGIMES.values() for k in r.scale_keys]
    split = split_method_key(regime)
    if regime not in known and (split is None or split[0] not in (*known, *REGIMES)):
        raise TaskextrapError(
            f"no regime has the interval-scale key {regime!r}; the keys: {', '.join(known)}, "
            "or a classic's 'regime:method'"
        )
    scales = _scales()
    for key in ((scale_key(regime, protocol, group),) if group is not None else ()) + (scale_key(regime, protocol),):
        if key in scales:
            return float(scales[key]["scale"])
    return 1.0


def method_key(regime: str, method: str) -> str:
    """The interval-scale key of a method of the method table with its own interval (a classic,
    ``baselines.table``) in ``regime`` (a regime's name, or the name of a discrete regime's
    experiment: ``composition-depth3``): ``"regime:method"``. Its
    scale is chosen on the same dev split as rte's, by the same rule (``scripts/calibrate_intervals.py``)."""
    return f"{regime}:{method}"


def split_method_key(key: str) -> tuple[str, str] | None:
    """``(regime, method)`` of a classic's key (:func:`method_key`); None for a regime's own key.
    ``method`` is the name the scale was chosen under: a learned classic's variant
    (``baselines.classics.scale_name``), not its row's name."""
    regime, sep, method = key.partition(":")
    return (regime, method) if sep else None


def method_scale(regime: str, method: str, protocol, group: str | None = None, builtin: bool = True):
    """``(scale, source)`` of a classic's interval in ``regime``: the dev-chosen multiplier of its
    own sd (:func:`method_key`; 1.0 where none was chosen) and why (:func:`scale_source`)."""
    return scale_and_source(method_key(regime, method), protocol, group, builtin)


def scale_and_source(key: str, protocol, group: str | None = None, builtin: bool = True) -> tuple[float, str]:
    """``(scale, source)`` under an interval-scale key, a regime's or a classic's: the
    dev-chosen multiplier (:func:`interval_scale`) and why (:func:`scale_source`)."""
    return interval_scale(key, protocol, group), scale_source(key, protocol, group, builtin)


def check_scale(value) -> float | None:
    """An estimator's ``interval_scale`` setting: None (look it up) or a finite number > 0."""
    return None if value is None else check_real("interval_scale", value, 0.0, min_open=True)


def resolved_scale(value, regime: str, protocol, group: str | None = None) -> float:
    """An estimator's ``interval_scale``: ``value`` when given, else the looked-up one."""
    scale = check_scale(value)
    return interval_scale(regime, protocol, group) if scale is None else scale


def scale_source(
    regime: str, protocol, group: str | None = None, builtin: bool = True, tasks: str | None = None
) -> str:
    """Why :func:`interval_scale` gives the scale it gives, in one line, for a run's record: chosen
    on ``group``'s own dev split, on the regime's dev split (of the built-in tasks), **borrowed**
    (``builtin=False``: a user's family, ladder or primitive set gets the scale chosen on the
    built-in tasks' dev splits; nothing says it covers 90% of the user's tasks), or none (1.0,
    the raw interval). ``tasks`` names the tasks in the message (default: ``group``)."""
    scales = _scales()
    tasks = tasks or group or "these tasks"
    own = scale_key(regime, protocol, group) if group is not None else None
    if own is not None and own in scales:
        return f"chosen on {group}'s own dev split ({own})"
    key = scale_key(regime, protocol)
    if key not in scales:
        return f"none chosen for {key}: 1.0, the raw interval"
    groups = ", ".join(scales[key].get("dev_groups", {})) or "the regime's"
    if builtin:
        return f"chosen on the dev splits of {groups} ({key})"
    return (
        f"borrowed: chosen on the built-in dev splits of {groups} ({key}), not on {tasks}; "
        "its coverage on them is not known"
    )


def coverage_curve(mean: np.ndarray, std: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per-target coverage (n, len(SCALE_GRID)) of the interval mean ± z·s·std at every grid
    scale s: the query points of each target (row) inside it."""
    z = float(norm.ppf(0.5 + INTERVAL_LEVEL / 2.0))
    gap = np.abs(np.asarray(truth, dtype=float) - mean)[..., None]  # (n, q, 1)
    half = z * np.asarray(std, dtype=float)[..., None] * np.asarray(SCALE_GRID)  # (n, q, scales)
    return (gap <= half).mean(axis=1)  # every scale in one comparison, as covered() at each


def choose_scale(coverage: np.ndarray, level: float = INTERVAL_LEVEL) -> float:
    """The smallest grid scale whose coverage (len(SCALE_GRID),) reaches ``level``; the largest
    grid scale when none does."""
    coverage = np.asarray(coverage, dtype=float)
    if coverage.shape != (len(SCALE_GRID),):
        raise TaskextrapError(f"coverage must have one value per grid scale ({len(SCALE_GRID)}), got {coverage.shape}")
    ok = np.flatnonzero(coverage >= level)
    return SCALE_GRID[int(ok[0])] if len(ok) else SCALE_GRID[-1]


def recalibrated(errors: dict, prefix: str, scale: float, used: float) -> dict:
    """A run's gathered ``errors`` (key -> per-seed arrays) with ``prefix``'s calibrated coverage
    and interval width as they are at grid scale ``scale`` instead of the ``used`` one: the
    coverage is the raw curve's at ``scale`` (recorded per target for every grid scale), the width
    scales linearly. Nothing is computed again."""
    if scale not in SCALE_GRID:
        raise TaskextrapError(f"interval scale {scale} is not on the calibration grid (search.calibration.SCALE_GRID)")
    out = dict(errors)
    out[f"{prefix}_coverage"] = errors[curve_key(prefix, SCALE_GRID.index(scale))]
    out[f"{prefix}_width"] = [np.asarray(w) * scale / used for w in errors[f"{prefix}_width"]]
    return out


def own_dev_scales(coverage_by_scale: dict, level: float = INTERVAL_LEVEL) -> dict[str, float]:
    """{method: scale} from a dev run's ``config["coverage_by_scale"]`` ({group: {method: curve}}):
    per method, the smallest grid scale whose coverage, averaged over the groups, reaches ``level``."""
    curves: dict[str, list] = {}
    for per_method in coverage_by_scale.values():
        for method, curve in per_method.items():
            curves.setdefault(method, []).append(curve)
    return {m: choose_scale(np.mean(c, axis=0), level) for m, c in curves.items()}


def curve_key(prefix: str, i: int) -> str:
    """The key of a method's per-target coverage at grid scale ``SCALE_GRID[i]`` among a unit's errors."""
    return f"{prefix}_coverage@{i}"


def interval_keys(prefix: str) -> list[str]:
    """The keys :func:`interval_diagnostics` writes for ``prefix``."""
    return [
        f"{prefix}_coverage",
        f"{prefix}_coverage_raw",
        f"{prefix}_width",
        *(curve_key(prefix, i) for i in range(len(SCALE_GRID))),
    ]


def interval_diagnostics(
    prefix: str, mean: np.ndarray, std: np.ndarray, truth: np.ndarray, scale: float
) -> dict[str, np.ndarray]:
    """Per-draw interval diagnostics of a method whose calibrated sd is ``std`` (raw sd times
    ``scale``): ``{prefix}_coverage`` (calibrated), ``{prefix}_coverage_raw``, ``{prefix}_width``
    (mean width of the 90% interval) and the raw interval's coverage at every grid scale."""
    z = float(norm.ppf(0.5 + INTERVAL_LEVEL / 2.0))
    raw = np.asarray(std, dtype=float) / scale
    curve = coverage_curve(mean, raw, truth)
    return {
        f"{prefix}_coverage": covered(mean, std, truth).mean(axis=1),
        f"{prefix}_coverage_raw": covered(mean, raw, truth).mean(axis=1),
        f"{prefix}_width": 2.0 * z * np.asarray(std, dtype=float).mean(axis=1),
        **{curve_key(prefix, i): curve[:, i] for i in range(len(SCALE_GRID))},
    }


def pooled_curve(errors: dict, prefix: str, rows: np.ndarray | None = None) -> list[float]:
    """The raw interval's coverage at every grid scale, pooled over seeds and targets (``rows``:
    a mask of the targets, default all) from a run's gathered errors (key -> per-seed arrays)."""
    out = []
    for i in range(len(SCALE_GRID)):
        per_seed = np.stack(errors[curve_key(prefix, i)], axis=1)  # (targets, seeds)
        out.append(float(per_seed[rows if rows is not None else slice(None)].mean()))
    return out
