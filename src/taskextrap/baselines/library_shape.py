"""Library-shape peers: what a practitioner with a library of curves tries before anything
learned. Each reads the library's curves and fits a target's context by a few numbers, with no
embedding, no relational operator and no training:

- ``library-mean``: the library's mean curve plus an offset fitted on the context;
- ``library-knn``: the ``k`` library curves that best fit the context up to an offset, each
  shifted by its offset, averaged (``library-best-fit`` is ``k = 1``);
- ``library-fpca``: a functional-PCA regression: the library's mean curve plus its first
  ``n_components`` principal curves (on a grid over the library's domain), with an offset,
  fitted to the context by ridge least squares.

A user's ``fit`` chooses ``k`` and (``n_components``, ``ridge``) on its dev split, from each
class's ``dev_grid`` (the rows of an ``evaluate`` are then the dev-best of each peer).

The library is any task set with ``values(x, index)`` and a length (``TaskSet`` of a formula or
of observed curves, ``LadderSet``); ``values_at(x)`` is used where it has one. Targets are
processed ``chunk`` at a time, so at most ``chunk * len(library) * points`` values are held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from taskextrap.baselines.context import checked_inputs, library_values
from taskextrap.baselines.method import Method
from taskextrap.estimators.base import PendingFit
from taskextrap.validation import check_context, check_finite_result, check_int, check_query, check_real

__all__ = ["LibraryFPCA", "LibraryMean", "LibraryNearest"]


def _curves(library, x: np.ndarray) -> np.ndarray:
    """Every library task at every row of ``x`` (c, p) -> (c, L, p)."""
    every = np.arange(len(library))
    return library_values(lambda i, z: library.values(z, i), getattr(library, "values_at", None), every, x)


def _chunks(n: int, chunk: int):
    return (slice(s, min(s + chunk, n)) for s in range(0, n, chunk))


@dataclass(eq=False)
class LibraryMean(Method):
    """``library-mean``: the library's mean curve, shifted to each target's context by the mean
    residual."""

    chunk: int = 64

    def _settings(self) -> dict:
        check_int("chunk", self.chunk, 1)
        return {}

    def _predict(self, ctx_x, ctx_y, x_query):
        x, y, q = checked_inputs(ctx_x, ctx_y, x_query)
        pred = np.empty_like(q)
        for s in _chunks(len(x), self.chunk):
            mean = _curves(self.library_, np.concatenate([x[s], q[s]], axis=1)).mean(axis=1)
            offset = (y[s] - mean[:, : x.shape[1]]).mean(axis=1, keepdims=True)
            pred[s] = mean[:, x.shape[1] :] + offset
        return check_finite_result("library-mean's prediction", pred, "x_query", "overflows the library"), None


@dataclass(eq=False)
class LibraryNearest(Method):
    """``library-knn``: the ``k`` library curves nearest each target's context up to an offset
    (the residual sum of squares after the best constant shift), each shifted by its own offset
    and averaged with equal weights. Ties go to the lower library index."""

    dev_grid: ClassVar[dict[str, tuple]] = {"k": (1, 2, 3, 5, 10, 20)}
    k: int = 5
    chunk: int = 64

    def _settings(self) -> dict:
        check_int("k", self.k, 1)
        check_int("chunk", self.chunk, 1)
        return {}

    def _predict(self, ctx_x, ctx_y, x_query):
        x, y, q = checked_inputs(ctx_x, ctx_y, x_query)
        pred = self._each_k(x, y, q, (self.k,))[0]
        return check_finite_result("library-knn's prediction", pred, "x_query", "overflows the library"), None

    def _each_k(self, x, y, q, ks) -> list[np.ndarray]:
        """The prediction (n, q) for each neighbour count of ``ks``, from one ordering of the
        library by each context's fit (a smaller k averages a prefix of a larger one's curves)."""
        top = min(max(ks), len(self.library_))
        preds = [np.empty_like(q) for _ in ks]
        for s in _chunks(len(x), self.chunk):
            residual = y[s][:, None, :] - _curves(self.library_, x[s])  # (c, L, m)
            offset = residual.mean(axis=2)
            sse = ((residual - offset[..., None]) ** 2).sum(axis=2)
            sse = np.where(np.isfinite(sse), sse, np.inf)
            near = np.argsort(sse, axis=1, kind="stable")[:, :top]  # (c, top)
            rows = np.arange(len(near))[:, None]
            at_query = self.library_.values(np.repeat(q[s], top, axis=0), near.reshape(-1)).reshape(len(near), top, -1)
            shifted = at_query + offset[rows, near][..., None]
            for pred, k in zip(preds, ks, strict=True):
                pred[s] = shifted[:, : min(k, top)].mean(axis=1)
        return preds

    @classmethod
    def grid_predictions(cls, build, settings: list[dict], library, ctx_x, ctx_y, x_query):
        """Every ``k`` of ``settings`` from one fit and one ordering of the library (the numbers
        of a fit per setting, to the bit; other settings: one fit each)."""
        if any(set(p) - {"k"} for p in settings):
            return super().grid_predictions(build, settings, library, ctx_x, ctx_y, x_query)
        model = build(**settings[0]).fit(library)
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        x, y, q = checked_inputs(ctx_x, ctx_y, check_query(x_query, len(ctx_x), "x_query"))
        ks = [check_int("k", p.get("k", cls.k), 1) for p in settings]
        preds = model._each_k(x, y, q, ks)
        return [check_finite_result("library-knn's prediction", p, "x_query", "overflows the library") for p in preds]


@dataclass(eq=False)
class LibraryFPCA(Method):
    """``library-fpca``: each target's context regressed on the library's principal curves. The
    library's curves on ``grid`` points over its domain give a mean curve and principal curves
    (an SVD of the centred curves); a target's prediction is the mean curve plus an offset plus
    the first ``n_components`` principal curves (at most the context's points less two), their
    weights fitted to the context by least squares with a ridge penalty ``ridge`` (relative to
    the principal curves' variance; the offset is not penalised). Curves are read between grid
    points linearly."""

    dev_grid: ClassVar[dict[str, tuple]] = {"n_components": (1, 2, 3, 5, 8), "ridge": (1e-4, 1e-3, 1e-2, 1e-1)}
    n_components: int = 3
    ridge: float = 1e-3
    grid: int = 200

    def _settings(self) -> dict:
        check_int("n_components", self.n_components, 1)
        check_real("ridge", self.ridge, 0.0)
        check_int("grid", self.grid, 3)
        return {}

    def _begin(self, library, shared):
        lo, hi = library.family.domain
        self.grid_ = np.linspace(lo, hi, self.grid)
        curves = library.values(np.broadcast_to(self.grid_, (len(library), self.grid)).copy())
        self.mean_ = curves.mean(axis=0)
        _, s, vt = np.linalg.svd(curves - self.mean_, full_matrices=False)
        self.components_ = vt[: self.n_components]  # (r, G), unit norm
        self.variance_ = s[: self.n_components] ** 2 / len(library)  # the variance of each curve's weight
        return PendingFit([], lambda: None)

    def _basis(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mean curve (n, p) and the principal curves scaled to unit variance (n, p, r) at ``x``."""
        read = lambda curve: np.interp(x, self.grid_, curve)  # noqa: E731
        # a library curve is the mean plus sum_j w_j v_j, w_j of variance s_j^2 / L over the
        # library: v_j * sqrt(that) weighs each principal curve as the library does
        scale = np.sqrt(self.variance_)
        basis = np.stack([read(c) * sd for c, sd in zip(self.components_, scale, strict=True)], axis=-1)
        return read(self.mean_), basis

    def _predict(self, ctx_x, ctx_y, x_query):
        x, y, q = checked_inputs(ctx_x, ctx_y, x_query)
        r = max(0, min(len(self.components_), x.shape[1] - 2))
        mean_c, basis_c = self._basis(x)
        mean_q, basis_q = self._basis(q)
        design = np.concatenate([np.ones((*x.shape, 1)), basis_c[..., :r]], axis=-1)  # (n, m, 1 + r)
        penalty = np.diag([0.0] + [self.ridge * x.shape[1]] * r)
        gram = np.einsum("nmi,nmj->nij", design, design) + penalty
        weights = np.linalg.solve(gram, np.einsum("nmi,nm->ni", design, y - mean_c)[..., None])[..., 0]
        pred = mean_q + weights[:, :1] + np.einsum("nqr,nr->nq", basis_q[..., :r], weights[:, 1:])
        return check_finite_result("library-fpca's prediction", pred, "x_query", "overflows the library"), None
