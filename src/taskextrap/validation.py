"""Input checks at the API boundary; each failure is a one-line TaskextrapError."""

from __future__ import annotations

import numpy as np

from taskextrap.errors import TaskextrapError


def as_2d_float(name: str, a, width: int | None = None) -> np.ndarray:
    """``a`` as a finite float array of shape (n, m); a 1-D array is one row."""
    try:
        arr = np.asarray(a, dtype=float)
    except (TypeError, ValueError):
        raise TaskextrapError(f"{name} must be numeric") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise TaskextrapError(f"{name} must have shape (n_tasks, n_points), got {arr.shape}")
    if arr.shape[1] == 0:
        raise TaskextrapError(f"{name} is empty: at least one point is needed")
    if width is not None and arr.shape[1] != width:
        raise TaskextrapError(f"{name} must have {width} points per task, got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise TaskextrapError(f"{name} contains NaN or inf")
    return arr


def check_context(ctx_x, ctx_y, n_context: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Validate a context set: matching (n, k) shapes, finite values, k == n_context if given."""
    x = as_2d_float("context x", ctx_x, n_context)
    y = as_2d_float("context y", ctx_y, n_context)
    if x.shape != y.shape:
        raise TaskextrapError(f"context x and y must have the same shape, got {x.shape} and {y.shape}")
    return x, y


def check_query(qry_x, n_tasks: int) -> np.ndarray:
    """Validate query inputs: (n_tasks, q) or one row shared by every task."""
    q = as_2d_float("query x", qry_x)
    if q.shape[0] == 1 and n_tasks > 1:
        q = np.repeat(q, n_tasks, axis=0)
    if q.shape[0] != n_tasks:
        raise TaskextrapError(f"query x has {q.shape[0]} rows for {n_tasks} tasks")
    return q
