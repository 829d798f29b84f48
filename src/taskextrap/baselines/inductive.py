"""Inductive baselines of the parameter regime, trained on the same library draws as RTE's Psi.

``sparse-inductive``: context only. ``t2v-inductive``: context + Gamma(context).
``inductive-oracle``: context + the target's full true theta.
"""

from __future__ import annotations

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import PendingFit, check_is_fitted
from taskextrap.estimators.parameter import RTE
from taskextrap.operators.train import train_jobs
from taskextrap.operators.parameter import InductiveRegressor, sort_context
from taskextrap.seeding import derive_seed, rng
from taskextrap.validation import as_rows, check_finite_result, check_instance, describe

INDUCTIVE_KINDS = ("sparse-inductive", "t2v-inductive", "inductive-oracle")


def _extra(kind: str, rte: RTE, z: np.ndarray, params: np.ndarray) -> np.ndarray:
    if kind == "sparse-inductive":
        return np.zeros((len(z), 0))
    if kind == "t2v-inductive":
        return z
    return rte.library_.family.scaled_params(params)


def library_batch(rte: RTE, mask: np.ndarray, extra: np.ndarray | None = None) -> audit.Batch:
    """The library draws of ``rte`` (Phase 1a done) at ``mask`` (its ``draws_.train`` or
    ``draws_.val``) as a fit consumes them: (ctx_x, ctx_y sorted by x, qry_x, qry_y, extra), with
    the tasks they come from for the leak audit. ``extra`` (rows, e): per-draw descriptors
    (default none)."""
    o = rte.draws_.obs.subset(mask)
    cx, cy = sort_context(o.ctx_x, o.ctx_y)
    extra = np.zeros((len(cx), 0)) if extra is None else extra
    source = audit.Source(rte.library_.family, o.params, ((0, 1, 8.0 * rte.noise_sd_), (2, 3, 0.0)))
    return audit.Batch((cx, cy, o.qry_x, o.qry_y, extra), [source])


class InductiveBaseline:
    """One inductive regressor of ``kind``, fitted on an RTE's library draws (an RTE whose
    Phase 1a is done: fitted, or begun with ``begin_fit``)."""

    def __init__(self, kind: str, rte: RTE):
        if kind not in INDUCTIVE_KINDS:
            raise TaskextrapError(f"unknown inductive kind {describe(kind)}; choose from {list(INDUCTIVE_KINDS)}")
        check_instance("rte", rte, RTE, "an RTE fitted on the library")
        check_is_fitted(rte, "draws_")
        self.kind, self.rte = kind, rte
        d = rte.draws_
        dim = _extra(kind, rte, d.z[:1], d.obs.params[:1]).shape[1]
        self.net = InductiveRegressor(
            rte.scaler_, rte.protocol_.n_context, dim, derive_seed(rte.seed, kind), rte.train, component=kind
        ).to(rte.device)

    def fit(self, progress=None) -> InductiveBaseline:
        """Train on the RTE's training draws; select on its validation draws."""
        train_jobs(self.begin_fit(progress).jobs)
        return self

    def begin_fit(self, progress=None) -> PendingFit:
        """:meth:`fit`'s training as a job, to train beside other fits' networks
        (``estimators.base.fit_together``)."""
        d = self.rte.draws_
        extra = lambda mask: _extra(self.kind, self.rte, d.z[mask], d.obs.params[mask])  # noqa: E731
        train, val = library_batch(self.rte, d.train, extra(d.train)), library_batch(self.rte, d.val, extra(d.val))
        job = self.net.fit_job(train, val, rng(self.rte.seed, self.kind, "batches"), progress)
        return PendingFit([job], lambda: None)

    def state(self) -> dict:
        """The trained regressor as named arrays (:meth:`restore`)."""
        return self.net.state(self.kind)

    def restore(self, arrays: dict) -> InductiveBaseline:
        """This baseline trained as :meth:`state` saved it (on the same RTE's draws)."""
        self.net.load_state(arrays, self.kind)
        return self

    def predict(self, ctx_x, ctx_y, qry_x, theta=None) -> np.ndarray:
        """Predictions (n, q); ``theta`` is read by the inductive oracle only."""
        ctx_x, ctx_y = self.rte._checked_context(ctx_x, ctx_y)
        qry_x = self.rte._checked_query(qry_x, len(ctx_x))
        if self.kind == "inductive-oracle":
            if theta is None:
                raise TaskextrapError("the inductive oracle needs the targets' true parameters (theta=...)")
            fam = self.rte.library_.family
            theta = as_rows(
                "theta", theta, len(ctx_x), len(fam.param_names), f"the true {fam.param_names} of each target"
            )
        z = self.rte.embed(ctx_x, ctx_y) if self.kind == "t2v-inductive" else np.zeros((len(ctx_x), 0))
        cx, cy = sort_context(ctx_x, ctx_y)
        pred = self.net.predict(cx, cy, qry_x, _extra(self.kind, self.rte, z, theta))
        return check_finite_result("the prediction", pred, "ctx_x, ctx_y or qry_x")
