"""What the Strategy B estimators share (Algorithm 1 with a decomposer; the length and the
composition regime).

Phase 1: Gamma is fitted on library draws; fresh training-relation tasks (one extension step,
one training-pair composition) drawn from a training pool of the library train the relational
operator Psi and the decomposer g, each selected on tasks drawn from a held-out validation pool
of the same library. Phase 2: g proposes, verification ranks candidates on the context, and the
prediction averages Psi over the best candidates weighted by their context losses.

Calibration (end of phase 1): on fresh training-relation tasks of the *validation* pool, whose
decomposition is known, the context loss of the true decomposition (``loss_scale_``: the
residual variance a correct candidate leaves, the scale of the ``likelihood`` weighting) and
Psi's squared error at the queries with it (``query_var_``: each candidate's own predictive
variance in ``predict(..., return_std=True)``).

A subclass says how to prepare a library (``_prepare``), draws its training tasks
(``draw_training_tasks``), builds Psi's and g's batches (``_operator_arrays``,
``_decomposer_arrays``), decomposes (filling the posterior with :meth:`DecomposingRTE.weighted`),
predicts from one candidate per target (``_predict_one``) and names the true decomposition of its
training tasks (``_true_candidates``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from taskextrap import audit
from taskextrap.embed import ProxyEmbedding, check_embedding, fit_library_embedding, mean_per_task
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition, Estimator, PendingFit, check_decomposition, check_progress
from taskextrap.estimators.progress import FitProgress
from taskextrap.operators.mlp import POINTWISE_BLOCKS
from taskextrap.operators.train import Job, TrainConfig, job_seconds, train_jobs
from taskextrap.search.decomposer import Decomposer
from taskextrap.search.calibration import check_scale, resolved_scale
from taskextrap.search.posterior import WEIGHTINGS, candidate_weights, mixture
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.regimes import get_protocol
from taskextrap.validation import (
    as_index_array,
    check_device,
    check_finite_result,
    check_instance,
    check_int,
    check_optional_int,
    check_real,
    describe,
)

CALIBRATION_TASKS = 512  # validation-pool tasks on which loss_scale_ and query_var_ are measured


@dataclass(eq=False)
class DecomposingRTE(Estimator):
    """Base class of :class:`~taskextrap.estimators.length.LengthRTE` and
    :class:`~taskextrap.estimators.composition.CompositionRTE` (see their Args). Its sizes
    (``n_pairs``, ``train``, ``decomposer_train``) are the length experiment's paper profile;
    a subclass of another regime declares its own paper profile's.

    Args:
        verbose: show a progress bar on stderr during a fit that takes more than a few seconds
            (``estimators.progress``). Not part of the repr: it changes nothing that is computed.
    """

    protocol: Any = "paper"
    embedding: str = "adapted"
    temperature: float | None = 1.0
    n_average: int | None = None
    weighting: str = "relative"
    n_pairs: int = 20000
    library_draws: int = 4
    val_fraction: float = 0.1
    embed_dim: int = 16
    train: TrainConfig = field(default_factory=TrainConfig)
    decomposer_train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=3000, batch=512, eval_every=100))
    blocks: tuple = POINTWISE_BLOCKS
    seed: int = 0
    device: str = "cpu"
    interval_scale: float | None = None
    verbose: bool = field(default=True, repr=False, compare=False)

    regime = ""  # the protocol table a protocol name is looked up in
    fitted_attribute = "decomposer_"

    def _settings(self) -> dict:
        """Every constructor argument checked (a one-line error for a bad one); ``fit`` resolves
        the protocol (``protocol_``, from this regime's table when given by name)."""
        protocol = get_protocol(self.protocol, self.regime)
        check_device(self.device)
        check_scale(self.interval_scale)
        check_embedding(self.embedding)
        if self.temperature is not None:
            check_real("temperature", self.temperature, 0.0, min_open=True)
        check_optional_int("n_average", self.n_average, 1)
        if self.weighting not in WEIGHTINGS:
            raise TaskextrapError(f"unknown weighting {self.weighting!r}; use one of {', '.join(WEIGHTINGS)}")
        check_int("n_pairs", self.n_pairs, 1)
        check_int("library_draws", self.library_draws, 1)
        check_real("val_fraction", self.val_fraction, 0.0, 1.0, max_open=True)
        check_int("embed_dim", self.embed_dim, 1)
        for name in ("train", "decomposer_train"):
            check_instance(name, getattr(self, name), TrainConfig, "a TrainConfig (see taskextrap.operators.train)")
        _check_blocks(self.blocks)
        check_int("seed", self.seed, 0)
        check_instance("verbose", self.verbose, bool, "True or False")
        return {"protocol": protocol}

    # ----------------------------------------------------------------------------- phase 1
    def fit(self, library, progress=None):
        """Fit Gamma on ``library``, then Psi and the decomposer on training-relation tasks.
        ``progress(step, loss)`` is called after every training step (Psi's, then the
        decomposer's); with ``verbose`` a fit longer than a few seconds also shows a progress bar.

        Returns:
            The estimator itself, fitted: Gamma, Psi, the decomposer and the calibration
                attributes.
        """
        check_progress(progress)
        cfg = self.decomposer_train
        with FitProgress(self.verbose, self.train.steps + cfg.steps, progress, type(self).__name__) as bar:
            bar.phase("embedding library")
            pending = self.begin_fit(library, bar.callback)
            t = time.perf_counter()
            psi, decomposer = train_jobs(pending.jobs, phase=bar.phase)
            self.timing_["training_s"] = time.perf_counter() - t
            self.timing_ |= job_seconds({"psi_training_s": psi, "decomposer_training_s": decomposer})
            bar.phase("calibrating")
            pending.finish()
        return self

    def begin_fit(self, library, progress=None) -> PendingFit:
        """:meth:`fit` up to the training of its networks: Gamma fitted, and Psi's and the
        decomposer's training as jobs, to train beside other fits' networks
        (``estimators.base.fit_together``); the pending fit's ``finish()`` calibrates and
        completes the fit."""
        self._resolve()
        tasks, scale = self._prepare(library)
        t = time.perf_counter()
        self._fit_embedding(tasks, scale)
        self.timing_ = {"embedding_s": time.perf_counter() - t}
        self.psi_ = self._make_operator().to(self.device)
        psi = self._stream_job(
            self.psi_, self._operator_arrays, "psi", self.n_pairs, max(256, self.n_pairs // 10), progress
        )
        cfg = self.decomposer_train
        decomposer = self._make_decomposer()
        g = self._stream_job(
            decomposer, self._decomposer_arrays, "decomposer", cfg.batch, max(256, cfg.batch), progress
        )

        def finish() -> None:
            t = time.perf_counter()
            self.loss_scale_, self.query_var_ = self._calibrate()
            self.timing_["calibration_s"] = time.perf_counter() - t
            self.decomposer_ = decomposer  # set last: an estimator is fitted once this exists

        return PendingFit([psi, g], finish)

    def fitted_state(self) -> tuple[dict, dict]:
        """The fit as named arrays and plain meta (``estimators.saving``): Gamma, the library's
        embeddings, Psi, the decomposer, the pools and the calibration. The library, its scaler
        and pools are made again from the library by :meth:`restore` (and checked)."""
        self.check_is_fitted()
        emb_arrays, emb_meta = self.embedding_.state("embedding.")
        arrays = {
            **emb_arrays,
            "z_library": self.z_library_,
            "train_pool": np.asarray(self.train_pool_),
            "val_pool": np.asarray(self.val_pool_),
            **self.psi_.state("psi"),
            **self.decomposer_.state("decomposer"),
        }
        meta = {
            "estimator": repr(self),
            "embedding": emb_meta,
            "timing": self.timing_,
            "loss_scale": self.loss_scale_,
            "query_var": self.query_var_,
        }
        return arrays, meta

    def restore(self, library, arrays: dict, meta: dict):
        """This unfitted estimator fitted as :meth:`fitted_state` saved it, on the same
        ``library``: the same arrays, so the same numbers. A state of other settings, or of
        another library (its pools differ), is refused in one line."""
        self._check_state(meta)
        self._resolve()
        self._prepare(library)
        if not (
            np.array_equal(self.train_pool_, arrays["train_pool"])
            and np.array_equal(self.val_pool_, arrays["val_pool"])
        ):
            raise TaskextrapError("the saved state was fitted on another library (its training pools differ)")
        self.embedding_ = ProxyEmbedding.from_state(arrays, meta["embedding"], "embedding.")
        self.z_library_ = arrays["z_library"]
        self.psi_ = self._make_operator().to(self.device)
        self.psi_.load_state(arrays, "psi")
        decomposer = self._make_decomposer()
        decomposer.load_state(arrays, "decomposer")
        self.timing_ = dict(meta["timing"])
        self.loss_scale_, self.query_var_ = meta["loss_scale"], meta["query_var"]
        self.decomposer_ = decomposer  # set last: an estimator is fitted once this exists
        return self

    def _make_decomposer(self) -> Decomposer:
        """The decomposer g, untrained, on the estimator's device (fit trains it; restore loads it)."""
        cfg, seed = self.decomposer_train, derive_seed(self.seed, "decomposer")
        return Decomposer(self.scaler_, self.protocol_.n_context, self._part_dims(), seed, cfg).to(self.device)

    def _prepare(self, library):  # pragma: no cover - abstract
        """Check ``library``, set the library, scaler, noise and the train / validation pools;
        return (the tasks Gamma is fitted on, their noise scale)."""
        raise NotImplementedError

    def _make_operator(self):  # pragma: no cover - abstract
        """Psi, untrained (a torch module with ``fit(make_arrays, val_arrays, rng, progress)``)."""
        raise NotImplementedError

    def _operator_arrays(self, pool: np.ndarray, n: int, g: np.random.Generator) -> audit.Batch:  # pragma: no cover
        """Psi's training arrays: ``n`` fresh training-relation tasks built on library tasks of ``pool``."""
        raise NotImplementedError

    def _decomposer_arrays(self, pool: np.ndarray, n: int, g: np.random.Generator) -> audit.Batch:  # pragma: no cover
        """The decomposer's training arrays (ctx_x, ctx_y, parts) of ``n`` fresh training-relation tasks."""
        raise NotImplementedError

    def _part_dims(self) -> tuple[int, ...]:  # pragma: no cover - abstract
        """The widths of the decomposer's heads, one per part of a decomposition."""
        raise NotImplementedError

    def _fit_embedding(self, tasks, scale: float):
        """Gamma fitted on library draws; each library task's embedding is the mean over its draws."""
        obs = self.protocol_.draw(tasks, self.library_draws, rng(self.seed, "library-draws"), scale)
        self.embedding_ = fit_library_embedding(
            self.embedding,
            self.embed_dim,
            derive_seed(self.seed, "probe"),
            self.scaler_,
            tasks,
            obs,
            noise_sd=self.protocol_.noise * scale,
            device=self.device,
        )
        z = self.embedding_.transform(self.scaler_.x(obs.ctx_x), self.scaler_.y(obs.ctx_y))
        self.z_library_ = mean_per_task(z, obs.task, len(tasks))

    def _stream_job(self, model, arrays, name: str, n_train: int, n_val: int, progress) -> Job:
        """``model``'s training job on fresh batches of ``n_train`` tasks from the training pool,
        selected on ``n_val`` tasks from the validation pool (streams named after ``name``)."""
        val = arrays(self.val_pool_, n_val, rng(self.seed, f"{name}-val"))
        return model.fit_job(
            lambda g: arrays(self.train_pool_, n_train, g), val, rng(self.seed, f"{name}-batches"), progress
        )

    def _calibrate(self, n: int = CALIBRATION_TASKS) -> tuple[float, float]:
        """(mean context loss, mean squared query error of Psi) of the true decomposition, on
        ``n`` fresh training-relation tasks of the validation pool (never a held-out relation)."""
        targets, obs = self.draw_training_tasks(self.val_pool_, n, rng(self.seed, "calibration"))
        audit.record_tasks("calibration", targets, stage="val")
        anchors, phi, loss = self._true_candidates(targets, obs)
        pred = self._predict_one(obs.ctx_x, obs.ctx_y, obs.qry_x, anchors, phi)
        tiny = np.finfo(float).tiny  # a positive scale even for a perfect fit
        return max(float(np.mean(loss)), tiny), max(float(np.mean((pred - obs.qry_y) ** 2)), tiny)

    def _true_candidates(self, targets, obs):  # pragma: no cover - abstract
        """The true decomposition of training tasks ``targets`` drawn by ``draw_training_tasks``:
        (anchors, phi) as ``_predict_one`` takes them, and its context loss (n,) as the
        verification scores it."""
        raise NotImplementedError

    def draw_training_tasks(self, pool: np.ndarray, n: int, g: np.random.Generator):  # pragma: no cover
        """``n`` fresh training-relation tasks built on library tasks of ``pool``, and one
        observation of each (also what the inductive baseline trains on)."""
        raise NotImplementedError

    def observe_once(self, tasks, g: np.random.Generator):
        """One observation of each of ``tasks`` under the fitted protocol, at the library's noise
        scale once the fit has measured it."""
        return self.protocol_.draw(tasks, 1, g, getattr(self, "noise_scale_", None))

    # ----------------------------------------------------------------------------- phase 2
    def _named_candidates(self, ctx_x, ctx_y, anchors, phi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(context, context values, anchors as indices) of ``decomposition_for`` in a regime whose
        candidates are library tasks alone (compositions): ``phi`` refused, the context checked.
        The anchors' shape is the regime's to check; their range is checked by ``predict``."""
        if phi is not None:
            raise TaskextrapError("a composition has no continuous part: pass anchors only")
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        return ctx_x, ctx_y, as_index_array("anchors", anchors, None)

    def predict(self, ctx_x, ctx_y, x_query, decomposition: Decomposition | None = None, return_std: bool = False):
        """Predict each target at ``x_query`` (n, q) from its context.

        Psi from each candidate of ``decomposition`` (default: :meth:`decompose`), mixed with its
        posterior ``weights`` (:meth:`weighted`: the ``n_average`` best, weighted by their context
        losses under ``weighting`` and ``temperature``). A decomposition without weights of one
        candidate per target (an oracle's, an ablation's) is used as it is; a chosen one of
        several (scores NaN) is averaged equally. With ``return_std`` also the predictive
        standard deviation (n, q): the candidates' spread plus Psi's own error ``query_var_``
        (``search.posterior.mixture``), times ``interval_scale`` (``search.calibration``): (mean, std).

        Returns:
            The predictions (n, q); with ``return_std=True`` the pair (predictions,
                predictive sd), both (n, q).
        """
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        qry_x = self._checked_query(x_query, len(ctx_x))
        if decomposition is not None:
            check_decomposition(decomposition, len(ctx_x), len(self.z_library_), *self._decomposition_shape())
        d = self.decompose(ctx_x, ctx_y) if decomposition is None else decomposition
        w = d.weights if d.weights is not None else self._weights(d, ctx_x.shape[1])
        cols = [j for j in range(d.k) if w[:, j].any()]  # a candidate nobody weighs is never run
        preds = [self._predict_one(ctx_x, ctx_y, qry_x, d.anchors[:, j], d.phi[:, j]) for j in cols]
        pred = preds[0] if d.k == 1 else sum(w[:, j : j + 1] * p for j, p in zip(cols, preds, strict=True))
        pred = check_finite_result("the prediction", pred, "ctx_x, ctx_y or x_query")
        if not return_std:
            return pred
        return pred, self.calibrated_scale() * mixture(np.stack(preds), w[:, cols], self.query_var_)[1]

    def calibrated_scale(self) -> float:
        """The multiplier of the predictive sd: ``interval_scale``, or the regime's dev-chosen one
        for this protocol (``search.calibration``)."""
        return resolved_scale(self.interval_scale, self.regime, self.resolved("protocol"))

    def weighted(self, d: Decomposition) -> Decomposition:
        """``d`` with its posterior ``weights`` filled from its scores (:meth:`_weights`); ``d``
        itself when it carries these already."""
        w = self._weights(d, self.protocol_.n_context)
        return d if d.weights is not None and np.array_equal(d.weights, w) else replace(d, weights=w)

    def _weights(self, d: Decomposition, n_points: int) -> np.ndarray:
        """The posterior (n, k) over ``d``'s candidates: one candidate gets everything; the best
        ``n_average`` get ``candidate_weights`` of their scores (equal weights when the scores are
        NaN: a chosen, not searched, decomposition), the rest 0."""
        n, k = d.score.shape
        top = k if self.n_average is None else min(self.n_average, k)
        w = np.zeros((n, k))
        if k == 1:
            w[:, 0] = 1.0
            return w
        score = d.score[:, :top]
        w[:, :top] = (
            np.full(score.shape, 1.0 / top)
            if np.isnan(score).any()
            else candidate_weights(score, self.weighting, self.temperature, n_points, self.loss_scale_)
        )
        return w

    def _decomposition_shape(self) -> tuple[tuple, tuple]:  # pragma: no cover - abstract
        """(the trailing shape of a candidate's anchors, of its phi): what ``predict`` accepts."""
        raise NotImplementedError

    def _predict_one(self, ctx_x, ctx_y, qry_x, anchors, phi) -> np.ndarray:  # pragma: no cover - abstract
        """Psi's prediction from one candidate per target: ``anchors`` (n[, parts]), ``phi`` (n, ...)."""
        raise NotImplementedError


def _check_blocks(blocks) -> None:
    """``blocks`` as the MLP takes them: a non-empty tuple of non-empty tuples of layer widths >= 1."""
    ok = (
        isinstance(blocks, (tuple, list))
        and len(blocks) > 0
        and all(
            isinstance(b, (tuple, list))
            and len(b) > 0
            and all(isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 1 for w in b)
            for b in blocks
        )
    )
    if not ok:
        raise TaskextrapError(
            f"blocks must be a non-empty tuple of non-empty tuples of layer widths >= 1, got {describe(blocks)}"
        )
