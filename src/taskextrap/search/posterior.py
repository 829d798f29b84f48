"""The posterior over decompositions, and the predictive distribution it implies.

When several candidates explain the context about equally well, the prediction that minimises
expected squared error is their weighted mean, not the single best one (which is what the
paper's arg-min does); the spread of the candidates' predictions, plus the operator's own error,
is the predictive uncertainty.

Two weightings of candidates by their context losses:

- ``relative`` (:func:`posterior_weights`): a heuristic that keeps every candidate whose loss is
  within a factor (1 + temperature) of the best;
- ``likelihood`` (:func:`likelihood_weights`): the Gaussian likelihood of the context under each
  candidate, exp(-m L / (2 s)), where L is the candidate's mean squared context loss over m
  points and s the per-point residual variance of a *correct* decomposition (observation noise
  plus the operator's own error, measured at fit time on validation tasks of the library whose
  decomposition is known). With a flat prior over the candidates this is their posterior.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from taskextrap.errors import TaskextrapError
from taskextrap.validation import check_int, check_real

WEIGHTINGS = ("relative", "likelihood")
INTERVAL_LEVEL = 0.9  # the predictive interval whose coverage the experiments report


def posterior_weights(loss: np.ndarray, temperature: float | None) -> np.ndarray:
    """Weights (n, k) over candidates ranked best first, from their context losses (n, k).

    w_j ∝ exp(-(L_j - L_min) / (temperature * L_min)): candidates whose context loss is within a
    factor (1 + temperature) of the best keep a large share. ``temperature=None`` puts all weight
    on the best candidate (the paper's arg-min).
    """
    loss = np.asarray(loss, dtype=float)  # inf is a legitimate loss (a pair refinement discarded): weight 0
    if temperature is not None:
        check_real("temperature", temperature, 0.0, min_open=True)
    if temperature is None:
        w = np.zeros_like(loss)
        w[:, 0] = 1.0
        return w
    best = loss.min(axis=1, keepdims=True)
    w = np.exp(-(loss - best) / (temperature * best + 1e-12))
    return w / w.sum(axis=1, keepdims=True)


def likelihood_weights(loss: np.ndarray, n_points: int, scale: float, temperature: float | None = 1.0) -> np.ndarray:
    """Posterior weights (n, k) of candidates with mean squared context losses ``loss`` (n, k)
    over ``n_points`` context points: w_j ∝ exp(-n_points * L_j / (2 * scale * temperature)).

    ``scale`` is the per-point residual variance expected of a correct candidate (noise plus the
    operator's error); ``temperature`` > 1 flattens the posterior, None keeps only the best
    candidate (the arg-min). Infinite losses get weight 0.
    """
    loss = np.asarray(loss, dtype=float)
    check_int("n_points", n_points, 1)
    check_real("scale", scale, 0.0, min_open=True)
    if temperature is None:  # the arg-min
        w = np.zeros_like(loss)
        np.put_along_axis(w, np.argmin(loss, axis=1)[:, None], 1.0, axis=1)
        return w
    check_real("temperature", temperature, 0.0, min_open=True)
    log_w = -n_points * (loss - loss.min(axis=1, keepdims=True)) / (2.0 * scale * temperature)
    w = np.exp(np.where(np.isfinite(log_w), log_w, -np.inf))
    return w / w.sum(axis=1, keepdims=True)


def candidate_weights(
    loss: np.ndarray, weighting: str, temperature: float | None, n_points: int, scale: float | None
) -> np.ndarray:
    """The posterior (n, k) of ``weighting`` (one of :data:`WEIGHTINGS`) over candidates with
    context losses ``loss`` (n, k) sorted best first; ``scale`` is needed for ``likelihood``."""
    if weighting not in WEIGHTINGS:
        raise TaskextrapError(f"unknown weighting {weighting!r}; use one of {', '.join(WEIGHTINGS)}")
    if weighting == "relative":
        return posterior_weights(loss, temperature)
    if scale is None:
        raise TaskextrapError("likelihood weighting needs the residual variance of a correct decomposition")
    return likelihood_weights(loss, n_points, scale, temperature)


def mixture(preds: np.ndarray, weights: np.ndarray, model_var=0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (n, q) of the posterior predictive: candidate predictions
    ``preds`` (k, n, q) mixed with ``weights`` (n, k), each candidate with its own error variance
    ``model_var`` (a scalar or (n, q)) around its prediction."""
    preds = np.asarray(preds, dtype=float)
    w = np.asarray(weights, dtype=float).T[..., None]  # (k, n, 1)
    mean = (w * preds).sum(axis=0)
    var = (w * (preds - mean) ** 2).sum(axis=0) + model_var
    return mean, np.sqrt(np.maximum(var, 0.0))


def covered(mean: np.ndarray, std: np.ndarray, truth: np.ndarray, level: float = INTERVAL_LEVEL) -> np.ndarray:
    """Whether each ``truth`` lies inside the central ``level`` interval mean ± z·std of a
    Gaussian predictive (a boolean array of the inputs' shape)."""
    check_real("level", level, 0.0, 1.0, min_open=True, max_open=True)
    z = float(norm.ppf(0.5 + level / 2.0))
    return np.abs(np.asarray(truth) - mean) <= z * np.asarray(std)


def entropy(weights: np.ndarray) -> np.ndarray:
    """The entropy in nats (n,) of each target's posterior ``weights`` (n, k) over candidate
    decompositions: 0 when one candidate holds all the weight, log k when k share it equally
    (exp(entropy) is the effective number of candidates)."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise TaskextrapError(f"posterior weights must have shape (targets, candidates), got {w.shape}")
    return np.where(w > 0, -w * np.log(np.where(w > 0, w, 1.0)), 0.0).sum(axis=1)
