"""The extension operator Psi_ext of the length regime (paper Section 2.3, Appendix E).

Psi_ext(x_q, predecessor, phi, context) predicts the target minus its predecessor at x_q, one
row per query point, from: the predecessor's values at x_q and at the context inputs, the
context's residual to the predecessor, and the normalised new coefficient phi. It is never told
the level of either task.

Leave-one-out mask: the context residual enters multiplied by a 0/1 mask, and the mask is an
input too. Training includes rows that predict a context point with that point masked, so
Psi_ext can score a candidate (predecessor, phi) on the context without copying the point it
is scored on: this is what verification uses (Algorithm 1, Strategy B).
"""

from __future__ import annotations

import numpy as np

from taskextrap.operators.mlp import POINTWISE_BLOCKS
from taskextrap.operators.param import _PointwiseNet, loo_masks
from taskextrap.operators.train import Job, TrainConfig
from taskextrap.scaling import FamilyScaler


class ExtensionOperator(_PointwiseNet):
    """Psi_ext(x_q, pred(x_q), ctx_x, pred(ctx_x), mask * (ctx_y - pred(ctx_x)), mask, phi) -> target - pred."""

    def __init__(
        self,
        scaler: FamilyScaler,
        n_context: int,
        coef_half: float,
        seed: int,
        cfg: TrainConfig,
        blocks=POINTWISE_BLOCKS,
    ):
        super().__init__(3 + 4 * n_context, seed, cfg, blocks)
        self.scaler, self.n_context, self.coef_half = scaler, n_context, coef_half

    def features(self, qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi) -> np.ndarray:
        """Rows (n*q, d). Per task: qry_x, pred_q (n, q); context arrays and ``mask`` (n, k); ``phi`` (n,).

        ``mask`` may also be (n, q, k): one mask per query row (leave-one-out scoring).
        """
        s = self.scaler
        n, q = qry_x.shape
        k = ctx_x.shape[1]
        mask = np.broadcast_to(mask if mask.ndim == 3 else mask[:, None, :], (n, q, k))
        resid = np.broadcast_to(s.dy(ctx_y - pred_ctx)[:, None, :], (n, q, k)) * mask
        per_task = np.concatenate([s.x(ctx_x), s.y(pred_ctx)], axis=1)
        cols = [
            s.x(qry_x)[..., None],
            s.y(pred_q)[..., None],
            np.broadcast_to(per_task[:, None, :], (n, q, 2 * k)),
            resid,
            mask,
            np.broadcast_to((np.asarray(phi, dtype=float) / self.coef_half)[:, None, None], (n, q, 1)),
        ]
        return np.concatenate(cols, axis=2).reshape(n * q, -1).astype(np.float32)

    def fit_job(self, make_arrays, val_arrays, rng, progress=None) -> Job:
        """Training on arrays (qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi, qry_y) from ``make_arrays(rng)``."""

        def to_rows(a):
            qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi, qry_y = a
            rows = self.features(qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi)
            return rows, self.scaler.dy(qry_y - pred_q).reshape(-1).astype(np.float32)

        return self._batch_job(make_arrays, val_arrays, to_rows, rng, progress)

    def predict(self, qry_x, pred_q, ctx_x, ctx_y, pred_ctx, phi, mask=None) -> np.ndarray:
        """Predicted target values (n, q); ``mask`` defaults to the whole context."""
        if mask is None:
            mask = np.ones_like(ctx_x)
        rows = self.features(qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi)
        return pred_q + self.scaler.dy_inv(self._predict_rows(rows, len(qry_x)))

    def loo_loss(self, ctx_x, ctx_y, pred_ctx, phi) -> np.ndarray:
        """Leave-one-out context loss (n,): predict each context point with it masked; MSE to ``ctx_y``."""
        n, k = ctx_x.shape
        masks = np.broadcast_to(loo_masks(k)[None], (n, k, k))
        pred = self.predict(ctx_x, pred_ctx, ctx_x, ctx_y, pred_ctx, phi, mask=masks)
        return ((pred - ctx_y) ** 2).mean(axis=1)
