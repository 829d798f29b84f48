"""Context-only sanity baselines: what interpolating the sparse context alone achieves.

These baselines see only a target task's context points (``ctx_x``, ``ctx_y``, shape
(n, k): n tasks, k points each, possibly noisy and in any order) and, for
:func:`library_best_fit`, the library of training functions. They are reported beside the
paper's methods so that a reader sees what the learned relational machinery (Γ, Ψ,
decomposition, verification) adds over plain curve fitting. Every function is vectorised
over tasks; none loops over tasks in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import legendre

from taskextrap.baselines.method import Method
from taskextrap.errors import TaskextrapError
from taskextrap.validation import check_context, check_finite_result, check_int, check_query, describe

__all__ = [
    "CtxInterp",
    "CtxPolyfit",
    "LibraryBestFit",
    "checked_inputs",
    "ctx_interp",
    "ctx_polyfit",
    "library_best_fit",
    "library_values",
]


def checked_inputs(ctx_x, ctx_y, qry_x, min_points: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated float arrays (n, k), (n, k), (n, q); k >= ``min_points``."""
    x, y = check_context(ctx_x, ctx_y)
    if x.shape[1] < min_points:
        raise TaskextrapError(f"context has {x.shape[1]} point(s) per task; this baseline needs at least {min_points}")
    q = check_query(qry_x, x.shape[0], "qry_x")
    return x, y, q


def _sort_context(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row sorted by x, ties broken by y, so the result does not depend on input order."""
    order = np.lexsort((y, x), axis=-1)
    return np.take_along_axis(x, order, axis=1), np.take_along_axis(y, order, axis=1)


def _count_le(xs: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise ``searchsorted(xs[i], q[i], side='right')`` for sorted rows ``xs`` (n, k), ``q`` (n, q)."""
    _n, k = xs.shape
    both = np.concatenate([xs, q], axis=1)
    # A stable sort keeps each context value before an equal query value, so the number of
    # context points preceding a query in the merged order is the count of context x <= query.
    order = np.argsort(both, axis=1, kind="stable")
    is_ctx = order < k
    n_ctx_before = np.cumsum(is_ctx, axis=1)
    counts = np.empty_like(order)
    np.put_along_axis(counts, order, n_ctx_before, axis=1)
    return counts[:, k:]


def ctx_interp(ctx_x, ctx_y, qry_x) -> np.ndarray:
    """Piecewise-linear interpolation of each task's context, evaluated at its queries.

    Each row of the context is sorted by x and joined by straight segments; outside the
    context's x-range the prediction is the nearest end value (constant extrapolation, as
    ``np.interp``). This is the simplest "interpolation alone" sanity baseline: a method that
    does no better than it has learned nothing about the task beyond its context points.
    Duplicate context x values are handled deterministically (ties ordered by y), so the
    result does not depend on the order of the context points.

    Returns predictions of shape (n, q).
    """
    x, y, q = checked_inputs(ctx_x, ctx_y, qry_x, min_points=1)
    xs, ys = _sort_context(x, y)
    k = xs.shape[1]
    j = _count_le(xs, q)  # xs[j-1] <= q < xs[j]
    lo = np.clip(j - 1, 0, k - 1)
    hi = np.clip(j, 0, k - 1)
    x0 = np.take_along_axis(xs, lo, axis=1)
    x1 = np.take_along_axis(xs, hi, axis=1)
    y0 = np.take_along_axis(ys, lo, axis=1)
    y1 = np.take_along_axis(ys, hi, axis=1)
    # Inside the range x0 <= q < x1 with x1 > x0; outside it lo == hi (an end point), t = 0.
    inside = (j > 0) & (j < k)
    dx = np.where(inside, x1 - x0, 1.0)
    t = np.where(inside, (q - x0) / dx, 0.0)
    return y0 + t * (y1 - y0)


def _rescale(x: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map each task's context range to [-1, 1] (queries by the same affine map)."""
    lo = x.min(axis=1, keepdims=True)
    hi = x.max(axis=1, keepdims=True)
    half = (hi - lo) / 2.0
    mid = (hi + lo) / 2.0
    half = np.where(half > 0, half, 1.0)  # all context x equal: centre only
    return (x - mid) / half, (q - mid) / half


def _fit_degree(u: np.ndarray, y: np.ndarray, uq: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares Legendre fit of one degree for every task: (LOO mean squared error (n,), query predictions (n, q)).

    Uses a batched thin SVD of the design matrix V = U S Wᵀ: the hat matrix is U_r U_rᵀ over
    the numerically non-zero singular values (so rank-deficient designs, e.g. duplicate x, get
    the minimum-norm least-squares fit), and the closed-form leave-one-out residual is
    e_i / (1 - h_ii). Points with h_ii ≈ 1 have no defined LOO residual; a degree with such a
    point gets an infinite CV error and is not selected.
    """
    V = legendre.legvander(u, degree)  # (n, k, d+1)
    Vq = legendre.legvander(uq, degree)  # (n, q, d+1)
    U, s, Wt = np.linalg.svd(V, full_matrices=False)
    tol = s[:, :1] * max(V.shape[1:]) * np.finfo(float).eps
    keep = s > tol  # (n, d+1)
    s_inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    Uk = U * keep[:, None, :]
    uty = np.einsum("nkr,nk->nr", Uk, y)
    fitted = np.einsum("nkr,nr->nk", Uk, uty)
    coef = np.einsum("nrc,nr->nc", Wt, uty * s_inv)
    pred = np.einsum("nqc,nc->nq", Vq, coef)
    h = np.einsum("nkr,nkr->nk", Uk, Uk)
    one_minus_h = 1.0 - h
    bad = one_minus_h < 1e-8
    loo = (y - fitted) / np.where(bad, 1.0, one_minus_h)
    cv = np.mean(loo**2, axis=1)
    cv = np.where(bad.any(axis=1), np.inf, cv)
    return cv, pred


def ctx_polyfit(ctx_x, ctx_y, qry_x, max_degree: int = 5, return_degree: bool = False):
    """Least-squares polynomial fit of each task's context, degree chosen per task by LOO CV.

    For every task, polynomials of degree 0..min(max_degree, k-2) are fitted by least squares
    in a Legendre basis on x rescaled to [-1, 1] by the context's min/max (queries use the
    same map, so extrapolation is in the same basis). Each task keeps the degree with the
    smallest leave-one-out error, computed in closed form from the hat matrix
    (residual e_i / (1 - h_ii)); near-ties (within float round-off) go to the lower degree.
    This is the "low-degree least squares" sanity baseline: it shows how far smooth curve
    fitting of the context alone extrapolates, without any library or learned relations.

    Needs k >= 2 context points per task. Returns predictions (n, q), and with
    ``return_degree=True`` also the chosen degree per task, shape (n,), as a tuple.
    """
    if isinstance(max_degree, bool) or not isinstance(max_degree, (int, np.integer)) or max_degree < 0:
        raise TaskextrapError(f"max_degree must be a non-negative integer, got {describe(max_degree)}")
    x, y, q = checked_inputs(ctx_x, ctx_y, qry_x, min_points=2)
    n, k = x.shape
    top = min(int(max_degree), k - 2)
    u, uq = _rescale(x, q)
    cvs = np.empty((top + 1, n))
    preds = np.empty((top + 1, n, q.shape[1]))
    # Queries far outside the context's x-range can overflow a polynomial: the result is checked below.
    with np.errstate(over="ignore", invalid="ignore"):
        for d in range(top + 1):
            cvs[d], preds[d] = _fit_degree(u, y, uq, d)
    best = np.min(cvs, axis=0)
    scale = np.mean((y - y.mean(axis=1, keepdims=True)) ** 2, axis=1)
    ok = cvs <= best * (1.0 + 1e-8) + 1e-20 * (1.0 + scale)
    degree = np.argmax(ok, axis=0)  # lowest degree within round-off of the best
    pred = np.take_along_axis(preds, degree[None, :, None], axis=0)[0]
    check_finite_result("ctx_polyfit's prediction", pred, "qry_x", "is too far outside the context's x-range")
    if return_degree:
        return pred, degree
    return pred


def library_best_fit(
    ctx_x,
    ctx_y,
    qry_x,
    library_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_library: int,
    chunk: int = 256,
    library_grid: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Predict each target by the library function that best fits its context, up to a constant.

    For every target and every library function ℓ, the offset c = mean(ctx_y - f_ℓ(ctx_x))
    and the residual SSE = Σ (ctx_y - f_ℓ(ctx_x) - c)² are computed; the target takes the
    ℓ with the smallest SSE (first on ties) and predicts f_ℓ(qry_x) + c. This is the
    "best-fitting library curve" sanity baseline: retrieval by context fit alone, with no
    proxy embedding and no relational operator, so it shows what the library by itself buys.

    ``library_fn(index, x)`` evaluates library functions ``index`` (shape (m,)) at ``x`` of
    shape (m, p) and returns (m, p). Targets are processed ``chunk`` at a time, so at most
    chunk * n_library * k library values are held at once. ``library_grid(x)``, when given,
    evaluates every library function at every row of ``x`` (c, k) at once -> (c, n_library, k);
    it must agree with ``library_fn`` and is used for the context fit only (a basis-expansion
    library does this as one matrix product, e.g. ``LadderSet.values_at``).

    Returns (predictions (n, q), chosen library index (n,)).
    """
    if isinstance(n_library, bool) or not isinstance(n_library, (int, np.integer)) or n_library < 1:
        raise TaskextrapError(f"n_library must be a positive integer, got {describe(n_library)}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise TaskextrapError(f"chunk must be a positive integer, got {describe(chunk)}")
    if not callable(library_fn):
        raise TaskextrapError("library_fn must be callable as library_fn(index, x)")
    x, y, q = checked_inputs(ctx_x, ctx_y, qry_x, min_points=1)
    n, _k = x.shape
    L = int(n_library)
    lib = np.arange(L)
    pred = np.empty_like(q)
    index = np.empty(n, dtype=np.int64)
    for start in range(0, n, int(chunk)):
        xc, yc = x[start : start + chunk], y[start : start + chunk]
        c = xc.shape[0]
        f = library_values(library_fn, library_grid, lib, xc)
        r = yc[:, None, :] - f
        off = r.mean(axis=2)
        sse = np.sum((r - off[..., None]) ** 2, axis=2)
        sse = np.where(np.isfinite(sse), sse, np.inf)
        best = np.argmin(sse, axis=1)
        if not np.all(np.isfinite(sse[np.arange(c), best])):
            raise TaskextrapError("library_fn returned NaN or inf for every library function on some target's context")
        index[start : start + c] = best
        fq = _call_library(library_fn, best, q[start : start + c])
        pred[start : start + c] = fq + off[np.arange(c), best][:, None]
    return check_finite_result("library_best_fit's prediction", pred, "library_fn", "overflows at qry_x"), index


def library_values(library_fn, library_grid, lib: np.ndarray, xc: np.ndarray) -> np.ndarray:
    """Every library function at every row of ``xc`` (c, k) -> (c, L, k)."""
    c, k = xc.shape
    if library_grid is not None:
        out = np.asarray(library_grid(xc), dtype=float)
        if out.shape != (c, len(lib), k):
            raise TaskextrapError(f"library_grid must return shape {(c, len(lib), k)}, got {out.shape}")
        return out
    idx = np.tile(lib, c)  # (c*L,)
    xr = np.repeat(xc, len(lib), axis=0)  # (c*L, k)
    return _call_library(library_fn, idx, xr).reshape(c, len(lib), k)


def _call_library(library_fn, idx: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``library_fn(idx, x)`` as a float array, checked to have x's shape."""
    out = np.asarray(library_fn(idx, x), dtype=float)
    if out.shape != x.shape:
        raise TaskextrapError(f"library_fn must return shape {x.shape} for x of that shape, got {out.shape}")
    return out


# ----------------------------------------------------------------------------- as methods


@dataclass(eq=False)
class CtxInterp(Method):
    """``ctx-interp``: each target's context joined by straight segments (:func:`ctx_interp`).
    Nothing is learned from the library."""

    def _predict(self, ctx_x, ctx_y, x_query):
        return ctx_interp(ctx_x, ctx_y, x_query), None


@dataclass(eq=False)
class CtxPolyfit(Method):
    """``ctx-polyfit``: a least-squares polynomial of each target's context, its degree (up to
    ``max_degree``) chosen per target by leave-one-out error (:func:`ctx_polyfit`). Nothing is
    learned from the library."""

    max_degree: int = 5

    def _settings(self) -> dict:
        check_int("max_degree", self.max_degree, 0)
        return {}

    def _predict(self, ctx_x, ctx_y, x_query):
        return ctx_polyfit(ctx_x, ctx_y, x_query, self.max_degree), None


@dataclass(eq=False)
class LibraryBestFit(Method):
    """``library-best-fit``: the library task that best fits each target's context up to a
    constant, shifted by that constant (:func:`library_best_fit`). The library is any task set
    with ``values(x, index)`` and a length (and ``values_at(x)``, every task at every row at once,
    where it has one)."""

    chunk: int = 256

    def _settings(self) -> dict:
        check_int("chunk", self.chunk, 1)
        return {}

    def _predict(self, ctx_x, ctx_y, x_query):
        lib = self.library_
        grid = getattr(lib, "values_at", None)
        pred = library_best_fit(ctx_x, ctx_y, x_query, lambda i, x: lib.values(x, i), len(lib), self.chunk, grid)[0]
        return pred, None
