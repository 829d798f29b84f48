"""The inductive baseline of the discrete regimes (the paper's "naive baseline"): context -> the
target at a query, with no anchor, no constituents and no search. It is trained on exactly the
tasks the RTE's networks are trained on (fresh training-relation tasks every pass, drawn by the
fitted RTE's ``draw_training_tasks``) and selected on the same held-out library pool."""

from __future__ import annotations

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import PendingFit, check_is_fitted
from taskextrap.estimators.decomposing import DecomposingRTE
from taskextrap.operators.train import train_jobs
from taskextrap.operators.parameter import InductiveRegressor, sort_context
from taskextrap.seeding import derive_seed, rng
from taskextrap.validation import check_finite_result


def training_batch(rte: DecomposingRTE, pool, n: int, g: np.random.Generator) -> audit.Batch:
    """``n`` fresh training tasks from ``rte``'s ``pool`` (its ``train_pool_`` or ``val_pool_``),
    observed as a fit consumes them: (ctx_x, ctx_y sorted by x, qry_x, qry_y, no descriptor),
    with the tasks they come from for the leak audit."""
    tasks, obs = rte.draw_training_tasks(pool, n, g)
    cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
    source = audit.Source(tasks.family, obs.params, ((0, 1, 8.0 * rte.noise_sd_), (2, 3, 0.0)))
    return audit.Batch((cx, cy, obs.qry_x, obs.qry_y, np.zeros((n, 0))), [source])


class DiscreteInductive:
    """``sparse-inductive`` for ladders and compositions, fitted beside a LengthRTE or
    CompositionRTE (fitted, or begun with ``begin_fit``: its pools and scaler are what it reads)."""

    def __init__(self, rte):
        if not isinstance(rte, DecomposingRTE):
            raise TaskextrapError(f"rte must be a LengthRTE or CompositionRTE, got {type(rte).__name__}")
        check_is_fitted(rte, "train_pool_")
        self.rte = rte
        self.net = InductiveRegressor(
            rte.scaler_,
            rte.protocol_.n_context,
            0,
            derive_seed(rte.seed, "sparse-inductive"),
            rte.train,
            rte.blocks,
            component="sparse-inductive",
        ).to(rte.device)

    def fit(self, progress=None) -> DiscreteInductive:
        """Train on fresh training tasks from the RTE's training pool; select on its validation pool."""
        train_jobs(self.begin_fit(progress).jobs)
        return self

    def begin_fit(self, progress=None) -> PendingFit:
        """:meth:`fit`'s training as a job, to train beside other fits' networks
        (``estimators.base.fit_together``)."""
        r = self.rte
        val = training_batch(r, r.val_pool_, max(256, r.n_pairs // 10), rng(r.seed, "sparse-inductive-val"))
        job = self.net.fit_stream_job(
            lambda g: training_batch(r, r.train_pool_, r.n_pairs, g),
            val,
            rng(r.seed, "sparse-inductive-batches"),
            progress,
        )
        return PendingFit([job], lambda: None)

    def predict(self, ctx_x, ctx_y, qry_x) -> np.ndarray:
        """Predictions (n, q) from the context alone."""
        ctx_x, ctx_y = self.rte._checked_context(ctx_x, ctx_y)
        qry_x = self.rte._checked_query(qry_x, len(ctx_x))
        cx, cy = sort_context(ctx_x, ctx_y)
        pred = self.net.predict(cx, cy, qry_x, np.zeros((len(cx), 0)))
        return check_finite_result("the prediction", pred, "ctx_x, ctx_y or qry_x")
