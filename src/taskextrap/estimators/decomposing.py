"""What the Strategy B estimators share (Algorithm 1 with a decomposer; the length and the
composition regime).

Phase 1: Gamma is fitted on library draws; fresh training-relation tasks (one extension step,
one training-pair composition) drawn from a training pool of the library train the relational
operator Psi and the decomposer g, each selected on tasks drawn from a held-out validation pool
of the same library. Phase 2: g proposes, verification ranks candidates on the context, and the
prediction averages Psi over the best candidates weighted by their context losses.

A subclass says how to prepare a library (``_prepare``), draws its training tasks
(``draw_training_tasks``), builds Psi's and g's batches (``_operator_arrays``,
``_decomposer_arrays``), decomposes, and predicts from one candidate per target
(``_predict_one``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from taskextrap.embed import check_embedding, fit_library_embedding, mean_per_task
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition, Estimator, check_decomposition, check_progress
from taskextrap.operators.mlp import POINTWISE_BLOCKS
from taskextrap.operators.train import TrainConfig
from taskextrap.search.decomposer import Decomposer
from taskextrap.search.posterior import posterior_weights
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.observe import get_protocol
from taskextrap.validation import (check_finite_result, check_instance, check_int, check_optional_int, check_real,
                                   describe)


@dataclass
class DecomposingRTE(Estimator):
    """Base class of :class:`~taskextrap.estimators.length.LengthRTE` and
    :class:`~taskextrap.estimators.composition.CompositionRTE` (see their Args)."""

    protocol: object = "paper"
    embedding: str = "adapted"
    temperature: float | None = 1.0
    n_average: int | None = None
    n_pairs: int = 20000
    library_draws: int = 4
    val_fraction: float = 0.1
    embed_dim: int = 16
    train: TrainConfig = field(default_factory=TrainConfig)
    decomposer_train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=2000, batch=512))
    blocks: tuple = POINTWISE_BLOCKS
    seed: int = 0

    regime = ""  # the protocol table a protocol name is looked up in
    fitted_attribute = "decomposer_"

    def __post_init__(self):
        self.protocol = get_protocol(self.protocol, self.regime)
        check_embedding(self.embedding)
        if self.temperature is not None:
            check_real("temperature", self.temperature, 0.0, min_open=True)
        check_optional_int("n_average", self.n_average, 1)
        check_int("n_pairs", self.n_pairs, 1)
        check_int("library_draws", self.library_draws, 1)
        check_real("val_fraction", self.val_fraction, 0.0, 1.0, max_open=True)
        check_int("embed_dim", self.embed_dim, 1)
        for name in ("train", "decomposer_train"):
            check_instance(name, getattr(self, name), TrainConfig, "a TrainConfig (see taskextrap.operators.train)")
        _check_blocks(self.blocks)
        check_int("seed", self.seed, 0)

    # ----------------------------------------------------------------------------- phase 1
    def fit(self, library, progress=None):
        """Fit Gamma on ``library``, then Psi and the decomposer on training-relation tasks."""
        check_progress(progress)
        tasks, scale = self._prepare(library)
        t = time.perf_counter()
        self._fit_embedding(tasks, scale)
        self.timing_ = {"embedding_s": time.perf_counter() - t}
        t = time.perf_counter()
        self.psi_ = self._make_operator()
        self._fit_stream(self.psi_, self._operator_arrays, "psi", self.n_pairs, max(256, self.n_pairs // 10), progress)
        self.timing_["psi_training_s"] = time.perf_counter() - t
        t = time.perf_counter()
        cfg = self.decomposer_train
        decomposer = Decomposer(self.scaler_, self.protocol.n_context, self._part_dims(),
                                derive_seed(self.seed, "decomposer"), cfg)
        self._fit_stream(decomposer, self._decomposer_arrays, "decomposer", cfg.batch, max(256, cfg.batch), progress)
        self.decomposer_ = decomposer  # set last: an estimator is fitted once this exists
        self.timing_["decomposer_training_s"] = time.perf_counter() - t
        return self

    def _prepare(self, library):  # pragma: no cover - abstract
        """Check ``library``, set the library, scaler, noise and the train / validation pools;
        return (the tasks Gamma is fitted on, their noise scale)."""
        raise NotImplementedError

    def _fit_embedding(self, tasks, scale: float):
        """Gamma fitted on library draws; each library task's embedding is the mean over its draws."""
        obs = self.protocol.draw(tasks, self.library_draws, rng(self.seed, "library-draws"), scale)
        self.embedding_ = fit_library_embedding(self.embedding, self.embed_dim, derive_seed(self.seed, "probe"),
                                                self.scaler_, tasks, obs, noise_sd=self.protocol.noise * scale)
        z = self.embedding_.transform(self.scaler_.x(obs.ctx_x), self.scaler_.y(obs.ctx_y))
        self.z_library_ = mean_per_task(z, obs.task, len(tasks))

    def _fit_stream(self, model, arrays, name: str, n_train: int, n_val: int, progress):
        """Train ``model`` on fresh batches of ``n_train`` tasks from the training pool, selected
        on ``n_val`` tasks from the validation pool (streams named after ``name``)."""
        val = arrays(self.val_pool_, n_val, rng(self.seed, f"{name}-val"))
        model.fit(lambda g: arrays(self.train_pool_, n_train, g), val, rng(self.seed, f"{name}-batches"), progress)

    def draw_training_tasks(self, pool: np.ndarray, n: int, g: np.random.Generator):  # pragma: no cover
        """``n`` fresh training-relation tasks built on library tasks of ``pool``, and one
        observation of each (also what the inductive baseline trains on)."""
        raise NotImplementedError

    # ----------------------------------------------------------------------------- phase 2
    def predict(self, ctx_x, ctx_y, x_query, decomposition: Decomposition | None = None) -> np.ndarray:
        """Predict each target at ``x_query`` (n, q) from its context.

        Psi from each of the ``n_average`` best candidates of ``decomposition`` (default:
        :meth:`decompose`), averaged with weights from their context losses (``temperature``;
        ``search.posterior``). A decomposition of one candidate per target (an oracle's, an
        ablation's) is used as it is; a chosen one of several (scores NaN) is averaged equally.
        """
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        qry_x = self._checked_query(x_query, len(ctx_x))
        if decomposition is not None:
            check_decomposition(decomposition, len(ctx_x), len(self.z_library_), *self._decomposition_shape())
        d = self.decompose(ctx_x, ctx_y) if decomposition is None else decomposition
        if d.k == 1:
            pred = self._predict_one(ctx_x, ctx_y, qry_x, d.anchors[:, 0], d.phi[:, 0])
        else:
            top = d.k if self.n_average is None else min(self.n_average, d.k)
            score = d.score[:, :top]
            # A chosen (not searched) decomposition has no scores: its candidates count equally.
            w = np.full(score.shape, 1.0 / top) if np.isnan(score).any() else posterior_weights(score, self.temperature)
            cols = [j for j in range(top) if w[:, j].any()]
            pred = sum(w[:, j:j + 1] * self._predict_one(ctx_x, ctx_y, qry_x, d.anchors[:, j], d.phi[:, j])
                       for j in cols)
        return check_finite_result("the prediction", pred, "ctx_x, ctx_y or x_query")

    def _decomposition_shape(self) -> tuple[tuple, tuple]:  # pragma: no cover - abstract
        """(the trailing shape of a candidate's anchors, of its phi): what ``predict`` accepts."""
        raise NotImplementedError

    def _predict_one(self, ctx_x, ctx_y, qry_x, anchors, phi) -> np.ndarray:  # pragma: no cover - abstract
        """Psi's prediction from one candidate per target: ``anchors`` (n[, parts]), ``phi`` (n, ...)."""
        raise NotImplementedError


def _check_blocks(blocks) -> None:
    """``blocks`` as the MLP takes them: a non-empty tuple of non-empty tuples of layer widths >= 1."""
    ok = isinstance(blocks, (tuple, list)) and len(blocks) > 0 and all(
        isinstance(b, (tuple, list)) and len(b) > 0 and all(
            isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 1 for w in b) for b in blocks)
    if not ok:
        raise TaskextrapError(f"blocks must be a non-empty tuple of non-empty tuples of layer widths >= 1, "
                              f"got {describe(blocks)}")
