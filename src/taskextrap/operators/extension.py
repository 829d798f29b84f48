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
from taskextrap.operators.parameter import loo_masks
from taskextrap.operators.pointwise import PointwiseNet
from taskextrap.operators.rows import RowBlocks
from taskextrap.operators.train import Job, TrainConfig
from taskextrap.scaling import FamilyScaler


class ExtensionOperator(PointwiseNet):
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
        return self.feature_blocks(qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi).numpy()

    def feature_blocks(self, qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi) -> RowBlocks:
        """:meth:`features` as the blocks the rows broadcast from (``operators.rows``): float32
        values of the float64 arithmetic, each rounded once."""
        s = self.scaler
        n, q = qry_x.shape
        mask = mask if mask.ndim == 3 else mask[:, None, :]
        resid = (s.dy(ctx_y - pred_ctx)[:, None, :], mask)  # hidden points' residuals are zeroed
        phi = (np.asarray(phi, dtype=float) / self.coef_half)[:, None, None]
        blocks = [s.x(qry_x)[..., None], s.y(pred_q)[..., None], s.x(ctx_x)[:, None], s.y(pred_ctx)[:, None]]
        return RowBlocks.of([*blocks, resid, mask, phi], n, q)

    def fit_job(self, make_arrays, val_arrays, rng, progress=None) -> Job:
        """Training on arrays (qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi, qry_y) from ``make_arrays(rng)``."""

        def to_rows(a):
            qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi, qry_y = a
            rows = self.feature_blocks(qry_x, pred_q, ctx_x, ctx_y, pred_ctx, mask, phi)
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

    def loo_loss_grid(self, ctx_x, ctx_y, pred_ctx, phis) -> np.ndarray:
        """:meth:`loo_loss` of every candidate of every target (the verification's search):
        targets' context ``ctx_x``, ``ctx_y`` (n, m), candidates' values there ``pred_ctx``
        (n, c, m), coefficients ``phis`` (n, c, g) -> losses (n, c, g).

        The same rows, in the same order, as :meth:`loo_loss` on every (target, candidate,
        coefficient) repeated into rows of its own, so the same numbers; but the rows are written
        a prediction pass at a time (:class:`LooGridRows`) rather than all n * c * g * m of them
        at once."""
        s = self.scaler
        n, c, m = pred_ctx.shape
        g = phis.shape[2]
        rows = LooGridRows(self, ctx_x, ctx_y, pred_ctx, phis)
        raw = self._predict_rows(rows, n * c * g)  # (tasks, m), task-major
        pred = np.broadcast_to(pred_ctx[:, :, None, :], (n, c, g, m)).reshape(n * c * g, m) + s.dy_inv(raw)
        err = pred - np.broadcast_to(ctx_y[:, None, None, :], (n, c, g, m)).reshape(n * c * g, m)
        return (err**2).mean(axis=1).reshape(n, c, g)


class LooGridRows:
    """The rows of :meth:`ExtensionOperator.loo_loss_grid`, (n*c*g*m, 3 + 4m), made a slice at a
    time: ``len`` and ``rows[a:b]`` (a float32 array) are all a prediction pass reads
    (``operators.mlp.predict_rows``), so its passes see the very rows a whole array would hold,
    while memory holds one pass (the length screen's whole array was about 1 GB per 256
    targets). A (target, candidate, coefficient) is a "task" of m rows, row j hiding point j;
    a pass's tasks are written by the operator's own :meth:`~ExtensionOperator.feature_blocks`.

    ``ctx_x``, ``ctx_y`` (n, m) the targets' contexts, ``pred_ctx`` (n, c, m) the candidates'
    values there, ``phis`` (n, c, g) their coefficients."""

    def __init__(self, op: ExtensionOperator, ctx_x, ctx_y, pred_ctx, phis):
        self.op, self.ctx_x, self.ctx_y, self.pred_ctx, self.phis = op, ctx_x, ctx_y, pred_ctx, phis
        self.n, self.c, self.m = pred_ctx.shape
        self.g = phis.shape[2]
        self.masks = loo_masks(self.m)[None]  # (1, m rows, m points): the same for every task

    def __len__(self) -> int:
        return self.n * self.c * self.g * self.m

    def __getitem__(self, sl: slice) -> np.ndarray:
        start, stop, step = sl.indices(len(self))
        if step != 1:
            raise ValueError("LooGridRows takes contiguous slices only")
        t0, t1 = start // self.m, -(-stop // self.m)  # the tasks the rows belong to
        return self._tasks(t0, t1)[start - t0 * self.m : stop - t0 * self.m]

    def _tasks(self, t0: int, t1: int) -> np.ndarray:
        t = np.arange(t0, t1)
        i, j, h = t // (self.c * self.g), (t // self.g) % self.c, t % self.g
        cx, pred = self.ctx_x[i], self.pred_ctx[i, j]  # each context point is a query of its task
        return self.op.feature_blocks(cx, pred, cx, self.ctx_y[i], pred, self.masks, self.phis[i, j, h]).numpy()
