"""The Relational Task Extrapolator for the length regime (Algorithm 1, Strategy B).

Phase 1 (training levels only): every library task is observed through the protocol and
embedded by Gamma; extension steps d -> d+1 are built from library predecessors whose d+1 is
itself a training level, so no held-out-level task ever reaches a fit. On those steps we train
Psi_ext (predecessor + new coefficient + context -> target) and the decomposer g (context ->
predecessor embedding and new coefficient).

Phase 2: g proposes a predecessor embedding and a coefficient; the top-k library tasks nearest
that embedding are candidates; verification scores every (candidate, coefficient) on the context
by Psi_ext's leave-one-out loss, searching the coefficient over the ladder's range (a coarse
grid that includes g's guess, then a finer one around the best), all in batched passes. The
best pair is extended by Psi_ext to the queries. No closed-form fit of the new term is used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from taskextrap import audit
from taskextrap.embed import check_embedding, fit_library_embedding, mean_per_task
from taskextrap.errors import TaskextrapError
from taskextrap.operators.extension import ExtensionOperator, loo_masks
from taskextrap.operators.mlp import POINTWISE_BLOCKS
from taskextrap.operators.param import sort_context
from taskextrap.operators.train import TrainConfig
from taskextrap.scaling import FamilyScaler
from taskextrap.search.decomposer import Decomposer
from taskextrap.search.index import nearest
from taskextrap.search.posterior import posterior_weights
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.ladder import LadderSet
from taskextrap.tasks.observe import get_protocol, noise_scale
from taskextrap.validation import check_context, check_query

VERIFY_CHUNK = 256  # targets per batched verification pass: bounds memory


@dataclass(frozen=True)
class LengthDecomposition:
    """Verified candidates of each target, best first: library indices, coefficients, context losses (n, k)."""

    anchors: np.ndarray
    phi: np.ndarray
    loss: np.ndarray
    guess_phi: np.ndarray  # the decomposer's coefficient (n,)


@dataclass
class LengthRTE:
    """RTE for ladders: ``LengthRTE(...).fit(library).predict(ctx_x, ctx_y, x_query)``.

    Args:
        protocol: observation protocol (name from the length table, or an object).
        embedding: Gamma estimator ("gradient", "adapted" or "fisher").
        k: candidates fully verified per target (the coefficient searched for each).
        screen_fraction: share of the library retrieved per target (nearest to the decomposer's
            embedding, at least ``k``) and screened by its context loss at the decomposer's
            coefficient; the best ``k`` go on to the full search. 0 gives the paper's plain top-k.
            ``k=20`` and ``screen_fraction=0.4`` were chosen on the dev split (levels <= 7 -> 8,
            ``scripts/dev_choices.py``): k 10 -> 20 lowers the strict dev MSE by 6% (a tie under
            paper), screening 0.2 -> 0.4 with k=20 lowers the paper dev MSE by 10% (a tie under strict).
        c_grid: coarse coefficient grid size of the verification search (a finer pass follows).
        temperature: the prediction averages Psi_ext over the ``k`` verified candidates, weighted by
            their context losses (``search.posterior``); None keeps only the best (the paper's arg-min).
        n_pairs: extension steps drawn per pass to train Psi_ext (fresh steps every pass).
        library_draws: context draws averaged into a library task's embedding.
        val_fraction: share of library predecessors held out (training levels) for model selection.
        train: optimiser settings of Psi_ext; decomposer_train: of g (batch = steps per batch).
        blocks: Psi_ext's MLP blocks.
        seed: seeds every stream.
    """

    protocol: object = "paper"
    embedding: str = "adapted"
    k: int = 20
    screen_fraction: float = 0.4
    c_grid: int = 17
    temperature: float | None = 1.0
    n_pairs: int = 20000
    library_draws: int = 4
    val_fraction: float = 0.1
    embed_dim: int = 16
    train: TrainConfig = field(default_factory=TrainConfig)
    decomposer_train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=2000, batch=512))
    blocks: tuple = POINTWISE_BLOCKS
    seed: int = 0

    def __post_init__(self):
        self.protocol = get_protocol(self.protocol, "length")
        check_embedding(self.embedding)
        if self.k < 1 or self.c_grid < 2 or not 0.0 <= self.screen_fraction <= 1.0:
            raise TaskextrapError("need k >= 1, c_grid >= 2 and screen_fraction in [0, 1]")

    # ----------------------------------------------------------------------------- phase 1
    def fit(self, library: LadderSet, progress=None) -> "LengthRTE":
        """Fit Gamma, Psi_ext and the decomposer on a library of training-level tasks."""
        ladder = self._check_library(library)
        self.library_, self.ladder_ = library, ladder
        self.noise_scale_ = noise_scale(ladder)
        self.noise_sd_ = self.protocol.noise * self.noise_scale_  # context noise (the leak audit's tolerance)
        self.scaler_ = FamilyScaler.fit(library)
        self.coef_half_ = (ladder.coef_range[1] - ladder.coef_range[0]) / 2
        t = time.perf_counter()
        self._fit_embedding(library)
        self.timing_ = {"embedding_s": time.perf_counter() - t}
        self._split_predecessors(library)
        t = time.perf_counter()
        self._fit_extension(progress)
        self.timing_["psi_training_s"] = time.perf_counter() - t
        t = time.perf_counter()
        self._fit_decomposer(progress)
        self.timing_["decomposer_training_s"] = time.perf_counter() - t
        return self

    def _check_library(self, library) -> object:
        if not isinstance(library, LadderSet):
            raise TaskextrapError("LengthRTE.fit needs a LadderSet library (see taskextrap.tasks.ladder)")
        ladder = library.family
        if np.any(library.level >= ladder.test_level):
            raise TaskextrapError(f"the library contains held-out level-{ladder.test_level} tasks; "
                                  "fit on training levels only")
        if not ladder.train_steps:
            raise TaskextrapError(f"ladder {ladder.name!r} has no extension step inside its training levels")
        return ladder

    def _fit_embedding(self, library: LadderSet):
        """Gamma fitted on library draws; each library task's embedding is the mean over its draws."""
        obs = self.protocol.draw(library, self.library_draws, rng(self.seed, "library-draws"), self.noise_scale_)
        self.embedding_ = fit_library_embedding(self.embedding, self.embed_dim, derive_seed(self.seed, "probe"),
                                                self.scaler_, library, obs, noise_sd=self.noise_sd_)
        z = self.embedding_.transform(self.scaler_.x(obs.ctx_x), self.scaler_.y(obs.ctx_y))
        self.z_library_ = mean_per_task(z, obs.task, len(library))

    def _split_predecessors(self, library: LadderSet):
        """Predecessors whose extension stays inside the training levels, split train / validation."""
        pred = np.flatnonzero(np.isin(library.level + 1, self.ladder_.train_steps))
        perm = rng(self.seed, "val-split").permutation(pred)
        n_val = max(1, int(round(self.val_fraction * len(pred))))
        self.val_pool_, self.train_pool_ = np.sort(perm[:n_val]), np.sort(perm[n_val:])

    def draw_training_tasks(self, pool: np.ndarray, n: int, g: np.random.Generator):
        """``n`` fresh extension steps of predecessors from ``pool`` and one observation of each."""
        targets = LadderSet.extend(self.library_, pool[g.integers(len(pool), size=n)], g)
        return targets, self.protocol.draw(targets, 1, g, self.noise_scale_)

    def _extension_arrays(self, pool: np.ndarray, n: int, g: np.random.Generator) -> audit.Batch:
        """Psi_ext arrays: query rows with the whole context, plus leave-one-out rows at the context points.

        A batch (qx, pred_q, cx, cy, pred_ctx, mask, phi, qy) naming the targets and their
        predecessors, for the leak audit.
        """
        targets, obs = self.draw_training_tasks(pool, n, g)
        cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
        k = cx.shape[1]
        lib, parents = self.library_, targets.parent
        qx = np.concatenate([obs.qry_x, cx], axis=1)
        mask = np.concatenate([np.ones((n, obs.qry_x.shape[1], k)), np.broadcast_to(loo_masks(k), (n, k, k))], axis=1)
        qy = np.concatenate([obs.qry_y, targets.values(cx)], axis=1)
        arrays = (qx, lib.values(qx, parents), cx, cy, lib.values(cx, parents), mask, targets.new_coef(), qy)
        return audit.Batch(arrays, [
            audit.Source(targets.family, obs.params, ((0, 7, 0.0), (2, 3, 8.0 * self.noise_sd_))),
            audit.Source(lib.family, lib.params[parents], ((0, 1, 0.0), (2, 4, 0.0)))])

    def _fit_extension(self, progress):
        self.psi_ = ExtensionOperator(self.scaler_, self.protocol.n_context, self.coef_half_,
                                      derive_seed(self.seed, "psi"), self.train, self.blocks)
        val = self._extension_arrays(self.val_pool_, max(256, self.n_pairs // 10), rng(self.seed, "psi-val"))
        self.psi_.fit(lambda g: self._extension_arrays(self.train_pool_, self.n_pairs, g), val,
                      rng(self.seed, "psi-batches"), progress)

    def _decomposer_arrays(self, pool: np.ndarray, n: int, g: np.random.Generator) -> audit.Batch:
        """Decomposer batch (ctx_x, ctx_y, parts) naming the targets and their predecessors."""
        targets, obs = self.draw_training_tasks(pool, n, g)
        parts = np.concatenate([self.z_library_[targets.parent], targets.new_coef()[:, None] / self.coef_half_], 1)
        return audit.Batch((obs.ctx_x, obs.ctx_y, parts), [
            audit.Source(targets.family, obs.params, ((0, 1, 8.0 * self.noise_sd_),)),
            audit.Source(self.library_.family, self.library_.params[targets.parent])])

    def _fit_decomposer(self, progress):
        cfg = self.decomposer_train
        self.decomposer_ = Decomposer(self.scaler_, self.protocol.n_context, (self.z_library_.shape[1], 1),
                                      derive_seed(self.seed, "decomposer"), cfg)
        val = self._decomposer_arrays(self.val_pool_, max(256, cfg.batch), rng(self.seed, "decomposer-val"))
        self.decomposer_.fit(lambda g: self._decomposer_arrays(self.train_pool_, cfg.batch, g), val,
                             rng(self.seed, "decomposer-batches"), progress)

    # ----------------------------------------------------------------------------- phase 2
    def _check_fitted(self):
        if not hasattr(self, "decomposer_"):
            raise TaskextrapError("LengthRTE is not fitted: call fit(library) first")

    def guess(self, ctx_x, ctx_y) -> tuple[np.ndarray, np.ndarray]:
        """The decomposer's proposal: predecessor embedding (n, dim) and coefficient (n,)."""
        self._check_fitted()
        ctx_x, ctx_y = check_context(ctx_x, ctx_y, self.protocol.n_context)
        z, c = self.decomposer_.predict(ctx_x, ctx_y)
        lo, hi = self.ladder_.coef_range
        return z, np.clip(c[:, 0] * self.coef_half_, lo, hi)

    def decompose(self, ctx_x, ctx_y, k: int | None = None, verify: bool = True) -> LengthDecomposition:
        """Strategy B: candidates retrieved by the decomposer, verified on the context, best first.

        The ``screen`` nearest library tasks are scored at the decomposer's coefficient; the best
        ``k`` get the full coefficient search. With ``verify=False`` the ``k`` nearest keep their
        retrieval order and the decomposer's coefficient (losses still computed, for inspection).
        """
        ctx_x, ctx_y = check_context(ctx_x, ctx_y, self.protocol.n_context)
        k = self.k if k is None else k
        z, c_hat = self.guess(ctx_x, ctx_y)
        cand, _ = nearest(z, self.z_library_, self.screen(k) if verify else k)
        cx, cy = sort_context(ctx_x, ctx_y)
        parts = [self._verify(cx[i:i + VERIFY_CHUNK], cy[i:i + VERIFY_CHUNK], cand[i:i + VERIFY_CHUNK],
                              c_hat[i:i + VERIFY_CHUNK], k, verify) for i in range(0, len(cx), VERIFY_CHUNK)]
        cand, phi, loss = (np.concatenate(p) for p in zip(*parts))
        order = np.argsort(loss, axis=1, kind="stable") if verify else np.tile(np.arange(cand.shape[1]), (len(cand), 1))
        take = lambda a: np.take_along_axis(a, order, 1)  # noqa: E731
        return LengthDecomposition(take(cand), take(phi), take(loss), c_hat)

    def screen(self, k: int | None = None) -> int:
        """Candidates retrieved and screened per target: ``screen_fraction`` of the library, at least ``k``."""
        k = self.k if k is None else k
        return int(min(len(self.z_library_), max(k, np.ceil(self.screen_fraction * len(self.z_library_)))))

    def _verify(self, cx, cy, cand, c_hat, k: int, search: bool):
        """(candidates, coefficients, leave-one-out context losses), each (n, k), for one chunk of targets."""
        n = len(cand)
        guess = c_hat[:, None, None]
        pred_ctx = self._values(cx, cand)
        screen_loss = self._loss(cx, cy, pred_ctx, np.broadcast_to(guess, (n, cand.shape[1], 1)))[..., 0]
        if not search:
            return cand, np.repeat(c_hat[:, None], cand.shape[1], 1), screen_loss
        keep = np.argsort(screen_loss, axis=1, kind="stable")[:, :k]
        cand = np.take_along_axis(cand, keep, 1)
        pred_ctx = np.take_along_axis(pred_ctx, keep[..., None], 1)
        lo, hi = self.ladder_.coef_range
        coarse = np.broadcast_to(np.linspace(lo, hi, self.c_grid), (n, k, self.c_grid))
        grid = np.concatenate([coarse, np.broadcast_to(guess, (n, k, 1))], axis=2)
        best_c, best_l = self._best(grid, self._loss(cx, cy, pred_ctx, grid))
        step = (hi - lo) / (self.c_grid - 1)
        fine = np.clip(best_c[..., None] + np.linspace(-step / 2, step / 2, 7), lo, hi)
        c2, l2 = self._best(fine, self._loss(cx, cy, pred_ctx, fine))
        better = l2 < best_l
        return cand, np.where(better, c2, best_c), np.where(better, l2, best_l)

    def _values(self, cx, cand) -> np.ndarray:
        """Library candidates ``cand`` (n, c) at each target's context inputs -> (n, c, m)."""
        return self.library_.values_at(cx, cand)

    @staticmethod
    def _best(grid, loss):
        j = np.argmin(loss, axis=2)[..., None]
        return np.take_along_axis(grid, j, 2)[..., 0], np.take_along_axis(loss, j, 2)[..., 0]

    def _loss(self, cx, cy, pred_ctx, phis) -> np.ndarray:
        """Leave-one-out context loss (n, k, g) of candidates ``pred_ctx`` (n, k, m) with coefficients ``phis``."""
        n, k, m = pred_ctx.shape
        g = phis.shape[2]
        rep = lambda a: np.repeat(a, k * g, axis=0)  # noqa: E731  task rows -> (task, candidate, c) rows
        pc = np.repeat(pred_ctx.reshape(n * k, m), g, axis=0)
        loss = self.psi_.loo_loss(rep(cx), rep(cy), pc, np.broadcast_to(phis, (n, k, g)).reshape(-1))
        return loss.reshape(n, k, g)

    def retrieval_quality(self, n: int = 512, seed: int = 0) -> dict:
        """How well the decomposer's embedding finds the predecessor, on held-out *training* steps.

        Steps d -> d+1 from the validation predecessors (never fitted on, all inside the training
        levels) are observed through the protocol; returns the median rank of the true predecessor
        among all library tasks by distance to the predicted embedding, and its recall in the top
        ``k`` (``recall_top_k``, with ``k``) and top ``screen`` (``recall_screened``). Used to choose the Gamma estimator without touching held-out levels.
        """
        self._check_fitted()
        targets, obs = self.draw_training_tasks(self.val_pool_, n, rng(seed, "retrieval-quality"))
        z, _ = self.guess(obs.ctx_x, obs.ctx_y)
        d = np.linalg.norm(z[:, None] - self.z_library_[None], axis=2)
        rank = (d < d[np.arange(n), targets.parent][:, None]).sum(1)
        return {"median_rank": float(np.median(rank)), "recall_top_k": float(np.mean(rank < self.k)), "k": self.k,
                "recall_screened": float(np.mean(rank < self.screen())), "screened": self.screen(),
                "library_size": len(self.z_library_)}

    def predict(self, ctx_x, ctx_y, x_query, anchors=None, phi=None,
                decomposition: LengthDecomposition | None = None) -> np.ndarray:
        """Predict each target at ``x_query`` (n, q) from its context.

        By default the search runs and the verified candidates' predictions are averaged with
        weights from their context losses (see ``temperature``). ``anchors`` (n,) library indices
        and ``phi`` (n,) coefficients, passed together, override the search (the oracle and the
        ablations); ``decomposition`` reuses an earlier ``decompose`` result.
        """
        self._check_fitted()
        ctx_x, ctx_y = check_context(ctx_x, ctx_y, self.protocol.n_context)
        qry_x = check_query(x_query, len(ctx_x))
        if anchors is None and phi is None:
            d = decomposition if decomposition is not None else self.decompose(ctx_x, ctx_y)
            w = posterior_weights(d.loss, self.temperature)
            cols = [j for j in range(w.shape[1]) if w[:, j].any()]
            return sum(w[:, j:j + 1] * self._extend(ctx_x, ctx_y, qry_x, d.anchors[:, j], d.phi[:, j]) for j in cols)
        if anchors is None or phi is None:
            raise TaskextrapError("pass both anchors and phi, or neither")
        return self._extend(ctx_x, ctx_y, qry_x, anchors, phi)

    def _extend(self, ctx_x, ctx_y, qry_x, anchors, phi) -> np.ndarray:
        """Psi_ext with the given predecessors (n,) and coefficients (n,)."""
        anchors = np.asarray(anchors, dtype=int).reshape(len(ctx_x))
        if anchors.min() < 0 or anchors.max() >= len(self.library_):
            raise TaskextrapError(f"anchors must be library indices in [0, {len(self.library_)})")
        phi = np.asarray(phi, dtype=float).reshape(len(ctx_x))
        cx, cy = sort_context(ctx_x, ctx_y)
        lib = self.library_
        return self.psi_.predict(qry_x, lib.values(qry_x, anchors), cx, cy, lib.values(cx, anchors), phi)
