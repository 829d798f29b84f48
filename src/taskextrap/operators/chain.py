"""The recursive composition operator Psi_chain of deep compositions (paper App. B.1.2, "RTE
(Recursive)").

One step network maps the current state at a query point and the next primitive's curve on a
fixed grid of values to the next state. It is applied from the innermost primitive outwards,
starting from the query input itself, so a depth-d chain is d applications of the same network,
which never knows which slot it is filling. Like Psi_comp, it is never handed the composed
values: it reads each primitive only through its curve on the value grid and has to learn to
apply it. With ``context=True`` every step also reads the sorted context, as the depth-2
Psi_comp does (the estimator's dev-chosen default: only under the noisy ``strict`` protocol;
docs/design.md). Training unrolls the d steps and scores every intermediate state against the
true one, so the network is trained on its own states, not teacher-forced (the authors' code
teacher-forces its composer and then never uses it, to avoid exactly that covariate shift).
"""

from __future__ import annotations

import numpy as np

from taskextrap.operators.mlp import POINTWISE_BLOCKS, Unrolled, predict_rows
from taskextrap.operators.pointwise import PointwiseNet
from taskextrap.operators.rows import RowBlocks
from taskextrap.operators.jobs import Job, TrainConfig
from taskextrap.scaling import FamilyScaler
from taskextrap.tasks.primitives import PrimitiveSet


class ChainOperator(PointwiseNet):
    """Psi_chain(x_q, curves of the chain's primitives[, context]) -> the states r_d(x_q), ...,
    h(x_q) (innermost first); the prediction is the last state. The context is read only with
    ``context=True``.

    ``value_span`` is the interval the value grid covers (where states fall: the domain and the
    training primitives' outputs); ``points`` its size.
    """

    def __init__(
        self,
        scaler: FamilyScaler,
        primitives: PrimitiveSet,
        n_context: int,
        depth: int,
        seed: int,
        cfg: TrainConfig,
        value_span: tuple[float, float],
        points: int = 49,
        blocks=POINTWISE_BLOCKS,
        context: bool = False,
    ):
        super().__init__(1 + points + (2 * n_context if context else 0), seed, cfg, blocks)  # the step network
        self.step = self.net
        self.net = Unrolled(self.step, depth, points)
        self.scaler, self.primitives, self.depth, self.context = scaler, primitives, depth, context
        self.value_grid = np.linspace(*value_span, points)

    def features(self, qry_x, chains, ctx_x, ctx_y) -> np.ndarray:
        """Rows (n*q, d) for queries (n, q), chains (n, depth) outermost first and the sorted
        context (n, k) (read only with ``context``)."""
        return self.feature_blocks(qry_x, chains, ctx_x, ctx_y).numpy()

    def feature_blocks(self, qry_x, chains, ctx_x, ctx_y) -> RowBlocks:
        """:meth:`features` as the blocks the rows broadcast from (``operators.rows``)."""
        s, p = self.scaler, self.primitives
        n, q = qry_x.shape
        grid = np.broadcast_to(self.value_grid, (n, len(self.value_grid)))
        blocks = [s.y(p.interp(grid, chains[:, j])) for j in range(self.depth - 1, -1, -1)]  # innermost first
        per_task = blocks + ([s.x(ctx_x), s.y(ctx_y)] if self.context else [])
        return RowBlocks.of([s.y(qry_x)[..., None], *(b[:, None] for b in per_task)], n, q)

    def states(self, qry_x, chains) -> np.ndarray:
        """The true states (n*q, depth) of chains at the queries, innermost first, scaled."""
        v, out = qry_x, []
        for j in range(self.depth - 1, -1, -1):
            v = self.primitives.exact(v, chains[:, j])
            out.append(self.scaler.y(v).reshape(-1))
        return np.stack(out, axis=1).astype(np.float32)

    def fit_job(self, make_arrays, val_arrays, rng, progress=None) -> Job:
        """Training on arrays (qry_x, chains, ctx_x, ctx_y, qry_y) from ``make_arrays(rng)``: every
        intermediate state is scored (the last one is ``qry_y``)."""

        def to_rows(a):
            qry_x, chains, ctx_x, ctx_y, _qry_y = a
            chains = np.asarray(chains).astype(int)
            return self.feature_blocks(qry_x, chains, ctx_x, ctx_y), self.states(qry_x, chains)

        return self._batch_job(make_arrays, val_arrays, to_rows, rng, progress)

    def predict(self, qry_x, chains, ctx_x, ctx_y) -> np.ndarray:
        """Predicted h at ``qry_x`` (n, q)."""
        rows = self.features(qry_x, np.asarray(chains).astype(int), ctx_x, ctx_y)
        out = predict_rows(self.net, rows, self.device)
        return self.scaler.y_inv(out[:, -1].numpy().astype(float).reshape(qry_x.shape))
