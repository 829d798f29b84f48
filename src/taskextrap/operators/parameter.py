"""Networks of the parameter regime: the relational operator Psi and the inductive regressors.

Both predict one query point at a time (a row per query), so any number of queries can be asked
for; the context is sorted by x first, which makes every network invariant to its order (the
paper's sorting trick).

Psi is transductive: it predicts the *difference* between the target and the anchor at the
query, from the anchor's values, the target context's difference to the anchor and the shift.
When the target is reachable from an anchor by an in-distribution shift, every input and the
output stay in the range seen in training even though the target's own values do not.
"""

from __future__ import annotations


import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.operators.mlp import (
    PARAMETER_BLOCKS,
)
from taskextrap.operators.pointwise import PointwiseNet
from taskextrap.operators.rows import RowBlocks
from taskextrap.operators.jobs import Job, TrainConfig
from taskextrap.operators.train import train_jobs
from taskextrap.scaling import FamilyScaler


def sort_context(ctx_x: np.ndarray, ctx_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Context sorted by x within each row."""
    order = np.argsort(ctx_x, axis=1)
    return np.take_along_axis(ctx_x, order, 1), np.take_along_axis(ctx_y, order, 1)


def loo_masks(n_context: int) -> np.ndarray:
    """(n_context, n_context) masks: row i hides context point i."""
    return 1.0 - np.eye(n_context)


def _rows(per_query: list[np.ndarray], per_task: list[np.ndarray]) -> np.ndarray:
    """Stack (n, q) per-query columns and (n, d) per-task blocks into (n*q, features) rows."""
    return _row_blocks(per_query, per_task).numpy()


def _row_blocks(per_query: list[np.ndarray], per_task: list[np.ndarray]) -> RowBlocks:
    """(n, q) per-query columns and (n, d) per-task blocks as the blocks of (n*q, features) rows."""
    return RowBlocks.of([c[..., None] for c in per_query] + [b[:, None, :] for b in per_task], *per_query[0].shape)


class RelationalOperator(PointwiseNet):
    """Psi(x_q, anchor(x_q), context x, anchor(context x), context y - anchor, shift) -> target - anchor.

    With ``loo`` Psi also reads a mask over the context (the residual of a hidden point is zeroed
    and its mask entry is 0) and is trained on leave-one-out rows besides the query rows: each
    context point predicted with itself hidden. That gives the decomposition objective (paper
    Eq. 3) a loss on the context that Psi cannot meet by copying the point it is asked about
    (:meth:`loo_loss`).
    """

    def __init__(
        self, scaler: FamilyScaler, n_context: int, shift_dim: int, seed: int, cfg: TrainConfig, loo: bool = False
    ):
        super().__init__(2 + (4 if loo else 3) * n_context + shift_dim, seed, cfg)
        self.scaler, self.loo = scaler, loo

    def features(self, ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask=None) -> np.ndarray:
        """Feature rows (n*q, d); ``ctx_x``/``ctx_y``/``anc_ctx`` must share one sorted order.
        A ``loo`` operator also takes ``mask`` (n, k), or (n, q, k) for one mask per query
        (default: the whole context)."""
        return self.feature_blocks(ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask).numpy()

    def feature_blocks(self, ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask=None) -> RowBlocks:
        """:meth:`features` as the blocks the rows broadcast from (``operators.rows``); a mask of
        shape (1, q, k) is the same for every task."""
        s = self.scaler
        if not self.loo:
            return _row_blocks([s.x(qry_x), s.y(anc_q)], [s.x(ctx_x), s.y(anc_ctx), s.dy(ctx_y - anc_ctx), shift])
        n, q = qry_x.shape
        k = ctx_x.shape[1]
        mask = np.ones((1, 1, k)) if mask is None else (mask if mask.ndim == 3 else mask[:, None, :])
        resid = (s.dy(ctx_y - anc_ctx)[:, None, :], mask)  # hidden points' residuals are zeroed
        blocks = [s.x(qry_x)[..., None], s.y(anc_q)[..., None], s.x(ctx_x)[:, None], s.y(anc_ctx)[:, None]]
        return RowBlocks.of([*blocks, resid, mask, np.asarray(shift)[:, None]], n, q)

    def fit_job(self, make_batch_arrays, val_arrays, rng, progress=None) -> Job:
        """Training on arrays (ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, qry_y) from
        ``make_batch_arrays(rng)``, selected on ``val_arrays``; a ``loo`` operator's arrays end
        with the target's noiseless values at the context, ctx_true, and, to learn contexts of
        fewer points, a mask (n, k) of the points present (the others hidden in every row)."""

        def to_rows(a):
            ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, qry_y = a[:7]
            present = a[8] if len(a) > 8 else None
            rows = self.feature_blocks(ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, present)
            target = self.scaler.dy(qry_y - anc_q).reshape(-1)
            if self.loo:  # each context point predicted with itself hidden
                k = ctx_x.shape[1]
                masks = loo_masks(k)[None] if present is None else present[:, None, :] * loo_masks(k)[None]
                loo = self.feature_blocks(ctx_x, ctx_y, anc_ctx, ctx_x, anc_ctx, shift, masks)
                rows = rows.concat(loo)
                target = np.concatenate([target, self.scaler.dy(a[7] - anc_ctx).reshape(-1)])
            return rows, target.astype(np.float32)

        return self._batch_job(make_batch_arrays, val_arrays, to_rows, rng, progress)

    def predict(self, ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask=None) -> np.ndarray:
        """Predicted target values (n, q) at ``qry_x`` (``mask``: see :meth:`features`)."""
        rows = self.features(ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask)
        return anc_q + self.scaler.dy_inv(self._predict_rows(rows, len(qry_x)))

    def loo_loss(self, ctx_x, ctx_y, anc_ctx, shift, present=None) -> np.ndarray:
        """Leave-one-out context loss (n,) of a ``loo`` operator: each context point predicted
        with itself hidden, mean squared error to ``ctx_y`` (over the points ``present`` (n, k),
        all by default, the others hidden in every row)."""
        if not self.loo:
            raise TaskextrapError("this Psi was trained without leave-one-out rows: fit RTE with loo=True")
        n, k = ctx_x.shape
        if present is None:
            masks = np.broadcast_to(loo_masks(k), (n, k, k))
            pred = self.predict(ctx_x, ctx_y, anc_ctx, ctx_x, anc_ctx, shift, masks)
            return ((pred - ctx_y) ** 2).mean(axis=1)
        masks = present[:, None, :] * loo_masks(k)[None]
        pred = self.predict(ctx_x, ctx_y, anc_ctx, ctx_x, anc_ctx, shift, masks)
        return (((pred - ctx_y) ** 2) * present).sum(axis=1) / present.sum(axis=1)


class InductiveRegressor(PointwiseNet):
    """y(x_q) from the context alone, optionally with a task descriptor (proxy embedding or true theta)."""

    def __init__(
        self,
        scaler: FamilyScaler,
        n_context: int,
        extra_dim: int,
        seed: int,
        cfg: TrainConfig,
        blocks=PARAMETER_BLOCKS,
        component: str = "inductive",
    ):
        super().__init__(1 + 2 * n_context + extra_dim, seed, cfg, blocks)
        self.scaler, self.component = scaler, component

    def features(self, ctx_x, ctx_y, qry_x, extra) -> np.ndarray:
        """Feature rows (n*q, d) for sorted context and per-task descriptors ``extra`` (n, e)."""
        return self.feature_blocks(ctx_x, ctx_y, qry_x, extra).numpy()

    def feature_blocks(self, ctx_x, ctx_y, qry_x, extra) -> RowBlocks:
        """:meth:`features` as the blocks the rows broadcast from (``operators.rows``)."""
        s = self.scaler
        return _row_blocks([s.x(qry_x)], [s.x(ctx_x), s.y(ctx_y), extra])

    def _rows(self, batch: tuple) -> tuple[RowBlocks, np.ndarray]:
        ctx_x, ctx_y, qry_x, qry_y, extra = batch
        return self.feature_blocks(ctx_x, ctx_y, qry_x, extra), self.scaler.y(qry_y).reshape(-1).astype(np.float32)

    def fit_job(self, train: tuple, val: tuple, rng, progress=None) -> Job:
        """Training on fixed draws ``train`` = (ctx_x, ctx_y, qry_x, qry_y, extra), selected on
        ``val`` (the same arrays of held-out library tasks). Both are reported to the leak audit once."""
        rows = self._rows(audit.consume(self.component, train, "train"))
        return self._job(lambda r: rows, self._rows(audit.consume(self.component, val, "val")), rng, progress)

    def fit_stream(self, make_arrays, val, rng, progress=None) -> InductiveRegressor:
        """Train on fresh arrays (ctx_x, ctx_y, qry_x, qry_y, extra) from ``make_arrays(rng)`` each pass."""
        train_jobs([self.fit_stream_job(make_arrays, val, rng, progress)])
        return self

    def fit_stream_job(self, make_arrays, val, rng, progress=None) -> Job:
        """:meth:`fit_stream`'s training, as a job to train beside other networks (``train_jobs``)."""
        return self._batch_job(make_arrays, val, self._rows, rng, progress)

    def predict(self, ctx_x, ctx_y, qry_x, extra) -> np.ndarray:
        """Predicted values (n, q)."""
        return self.scaler.y_inv(self._predict_rows(self.features(ctx_x, ctx_y, qry_x, extra), len(qry_x)))
