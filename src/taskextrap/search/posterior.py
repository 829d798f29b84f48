"""Averaging over verified decompositions: when several candidates explain the context about
equally well, the prediction that minimises expected squared error is their weighted mean, not
the single best one (which is what the paper's arg-min does)."""

from __future__ import annotations

import numpy as np

from taskextrap.validation import check_real


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
