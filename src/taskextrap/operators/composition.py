"""The composition operator Psi_comp of the compositional regime (paper Section 2.4, Appendix E).

Psi_comp predicts h = f o g at a query from the constituents' curves and the target's context,
one row per query point: the query x, f(x_q) and g(x_q), f on a grid spanning the values an
inner function takes, g on a grid of the domain, and the sorted context. It is never handed
f(g(x)) itself: it has to learn to compose.
"""

from __future__ import annotations

import numpy as np

from taskextrap.operators.mlp import POINTWISE_BLOCKS
from taskextrap.operators.pointwise import PointwiseNet
from taskextrap.operators.rows import RowBlocks
from taskextrap.operators.train import Job, TrainConfig
from taskextrap.scaling import FamilyScaler
from taskextrap.tasks.primitives import PrimitiveSet


class CompositionOperator(PointwiseNet):
    """Psi_comp(x_q, f(x_q), g(x_q), f on range grid, g on domain grid, context) -> h(x_q)."""

    def __init__(
        self,
        scaler: FamilyScaler,
        primitives: PrimitiveSet,
        n_context: int,
        seed: int,
        cfg: TrainConfig,
        range_points: int = 33,
        domain_points: int = 17,
        blocks=POINTWISE_BLOCKS,
    ):
        lo, hi = primitives.grid[0], primitives.grid[-1]
        half = min(8.0, -lo, hi)  # inner values stay within about +-7 for the built-in primitives
        self.range_grid = np.linspace(-half, half, range_points)
        self.domain_grid = np.linspace(*primitives.domain, domain_points)
        super().__init__(3 + range_points + domain_points + 2 * n_context, seed, cfg, blocks)
        self.scaler, self.primitives = scaler, primitives

    def features(self, qry_x, outer, inner, ctx_x, ctx_y) -> np.ndarray:
        """Rows (n*q, d) for queries (n, q), constituents (n,) and sorted context (n, k)."""
        return self.feature_blocks(qry_x, outer, inner, ctx_x, ctx_y).numpy()

    def feature_blocks(self, qry_x, outer, inner, ctx_x, ctx_y) -> RowBlocks:
        """:meth:`features` as the blocks the rows broadcast from (``operators.rows``)."""
        s, p = self.scaler, self.primitives
        n, q = qry_x.shape
        f_q, g_q = p.interp(qry_x, outer), p.interp(qry_x, inner)
        f_curve = p.interp(np.broadcast_to(self.range_grid, (n, len(self.range_grid))), outer)
        g_curve = p.interp(np.broadcast_to(self.domain_grid, (n, len(self.domain_grid))), inner)
        per_query = [s.x(qry_x)[..., None], s.y(f_q)[..., None], s.y(g_q)[..., None]]
        per_task = [s.y(f_curve), s.y(g_curve), s.x(ctx_x), s.y(ctx_y)]
        return RowBlocks.of([*per_query, *(b[:, None] for b in per_task)], n, q)

    def fit_job(self, make_arrays, val_arrays, rng, progress=None) -> Job:
        """Training on arrays (qry_x, outer, inner, ctx_x, ctx_y, qry_y) from ``make_arrays(rng)``."""

        def to_rows(a):
            qry_x, outer, inner, ctx_x, ctx_y, qry_y = a
            return (
                self.feature_blocks(qry_x, outer, inner, ctx_x, ctx_y),
                self.scaler.y(qry_y).reshape(-1).astype(np.float32),
            )

        return self._batch_job(make_arrays, val_arrays, to_rows, rng, progress)

    def predict(self, qry_x, outer, inner, ctx_x, ctx_y) -> np.ndarray:
        """Predicted h at ``qry_x`` (n, q)."""
        rows = self.features(qry_x, outer, inner, ctx_x, ctx_y)
        return self.scaler.y_inv(self._predict_rows(rows, len(qry_x)))
