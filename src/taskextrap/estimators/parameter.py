"""The Relational Task Extrapolator for the parameter regime (Algorithm 1).

Phase 1: every library task is observed through the protocol; Gamma (proxy embedding) is fitted
on library observations only; Psi is trained on pairs (anchor, target) of library tasks with the
signed proxy shift phi = Gamma(target context) - Gamma(anchor).
Phase 2: a target is embedded from its context only. The decomposition objective
(``search="objective"``, the paper's Eq. 3; the default, the parameter table's ``rte`` row): the
``retrieve`` nearest anchors and ``screen`` more, each with shifts on a grid of scales of its
proxy difference, are scored by Psi's leave-one-out loss on the context; the posterior over
these candidates (``search.posterior``) weights Psi's predictions, and its spread gives a
predictive interval (``predict(..., return_std=True)``). Strategy A (``search="proxy"``, the
paper's shortcut, the table's ``strategy-a`` row): its anchors are its nearest library tasks in
proxy space, phi is the difference, and Psi predicts the queries (averaged over anchors).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from taskextrap import audit
from taskextrap.embed import ProxyEmbedding, check_embedding, fit_library_embedding, mean_per_task
from taskextrap.errors import TaskextrapError
from taskextrap.lanes import map_lanes
from taskextrap.estimators.base import (
    Decomposition,
    Estimator,
    PendingFit,
    check_decomposition,
    check_is_fitted,
    check_progress,
)
from taskextrap.estimators.progress import FitProgress
from taskextrap.operators.parameter import RelationalOperator, sort_context
from taskextrap.operators.train import TrainConfig, train_jobs
from taskextrap.scaling import FamilyScaler
from taskextrap.search.index import nearest
from taskextrap.search.calibration import check_scale, resolved_scale
from taskextrap.search.posterior import WEIGHTINGS, candidate_weights, mixture
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.observe import Observations, get_protocol, noise_scale
from taskextrap.tasks.taskset import TaskSet
from taskextrap.validation import (
    as_float_array,
    as_index_array,
    check_context,
    check_device,
    check_finite_result,
    check_instance,
    check_int,
    check_optional_int,
    check_real,
)


SEARCHES = ("proxy", "objective")
# What Phase 1a (scaler, library draws, Gamma, library embeddings) reads: two RTEs that agree on
# these share it (``fit(..., embedded=...)``); the search, Psi and inference settings may differ.
PHASE1A_SETTINGS = ("protocol", "embedding", "n_pairs", "library_draws", "val_fraction", "embed_dim", "seed", "device")
POOL_DISTANCE_ENTRIES = 2**25  # draws x pool distances kept for Psi's pair draws (256 MB at most)
OBJECTIVE_CHUNK = 512  # targets per batched objective pass: (targets x candidates x context) Psi rows


@dataclass(frozen=True)
class Draws:
    """The library's observed draws: shared by Psi, the inductive baselines and the embedding."""

    obs: Observations
    z: np.ndarray  # Gamma of each draw's own context (n_draws, dim)
    train: np.ndarray  # boolean mask over draws: tasks used for training
    val: np.ndarray  # boolean mask over draws: held-out *library* tasks for model selection


@dataclass(eq=False)
class RTE(Estimator):
    """Relational Task Extrapolator, scikit-learn style: ``RTE(...).fit(library).predict(...)``.

    The defaults are the parameter experiment's ``rte`` row under the paper profile: the
    decomposition objective in the variant chosen on the dev split (``retrieve=16``,
    ``screen=16``, ``phi_scales=(0.5, 1, 2, 3)``, under both protocols; ``experiments.parameter``'s
    ``CHOSEN``), Psi trained on 20000 pairs per pass for 1000 steps of 4096 rows.
    ``RTE(search="proxy")`` is Strategy A (the ``strategy-a`` row).

    Args:
        protocol: observation protocol name or object; library tasks and targets are observed
            through it, and Psi is trained for its number of context points.
        embedding: Gamma estimator, "gradient", "adapted" or "fisher".
        anchors: number of nearest anchors whose predictions are averaged.
        n_pairs: training (target draw, anchor) pairs per pass; anchors are redrawn every pass.
        library_draws: context draws averaged into a library task's embedding.
        near_fraction: share of training pairs whose anchor is one of the target's ``n_near``
            nearest library tasks in proxy space (the rest are uniform over the library), so
            both retrieval-like small shifts and region-sized shifts are in distribution.
        val_fraction: share of library tasks held out (still training region) for model selection.
        train: optimiser settings of Psi.
        search: "objective" (Eq. 3: candidates scored by Psi's leave-one-out context loss, weighted
            by their posterior) or "proxy" (Strategy A: nearest anchors, proxy difference, equal
            average).
        loo: train Psi on leave-one-out context rows as well (needed by ``search="objective"``;
            None: exactly when the search is the objective).
        retrieve: anchors retrieved by proxy distance and scored by the objective.
        screen: further anchors scored by the objective, the library tasks whose own curves fit
            the context best among the rest (a cheap screen of the whole library; 0: none).
        phi_scales: the shifts tried for each retrieved anchor, as multiples of its proxy difference.
        weighting: how the objective's posterior weights its candidates
            (``search.posterior.candidate_weights``).
        temperature: the temperature of that posterior (``search.posterior.candidate_weights``).
        n_average: candidates the objective's prediction mixes (the posterior's best).
        seed: seeds every stream (draws, probe, network, batches).
        device: where Gamma's probe and Psi run ("cpu", "cuda", "cuda:N"); inputs and outputs stay
            numpy. Every network is initialised on the CPU, so a device changes rounding only.
        min_context: the fewest context points ``decompose`` and ``predict`` read. None (default):
            the protocol's ``n_context``, the size Psi reads; a smaller number trains Psi with
            a random number of context points hidden (down to ``min_context``; it needs the
            leave-one-out rows' masks, ``loo=True``), and a context of fewer points than
            ``n_context`` is read with the missing ones hidden. A context of more points is
            always read, as the average over subsets of ``n_context`` points (:meth:`views`).
        interval_scale: multiplier of the predictive sd of ``predict(..., return_std=True)``: None
            (default) the scale chosen on this regime's dev split for the protocol
            (``search.calibration``; 1.0 where none was chosen), or a number > 0.
        verbose: show a progress bar on stderr during a fit that takes more than a few seconds
            (``estimators.progress``). Not part of the repr: it changes nothing that is computed.

    Examples:
        A fit on 40 quadratics of the training regions (sizes far below the defaults, so it takes
        seconds), then predictions with intervals for three targets of the held-out region:

        >>> import numpy as np
        >>> from taskextrap import RTE
        >>> from taskextrap.operators.train import TrainConfig
        >>> from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
        >>> family = PARAMETER_FAMILIES["quadratic"]
        >>> library = TaskSet.sample(family, {"F1_1": 20, "F1_2": 20}, np.random.default_rng(0))
        >>> rte = RTE(n_pairs=200, train=TrainConfig(steps=5, batch=64), verbose=False).fit(library)
        >>> targets = TaskSet.sample(family, {"F2": 3}, np.random.default_rng(1))
        >>> obs = get_protocol("paper").draw(targets, 1, np.random.default_rng(2))
        >>> mean, sd = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        >>> mean.shape, bool((sd > 0).all())
        ((3, 8), True)
        >>> rte.decompose(obs.ctx_x, obs.ctx_y).anchors.shape  # each target's candidates, best first
        (3, ...)
    """

    protocol: Any = "paper"
    embedding: str = "gradient"
    anchors: int = 2
    n_pairs: int = 20000
    library_draws: int = 4
    near_fraction: float = 0.5
    n_near: int = 8
    val_fraction: float = 0.1
    embed_dim: int = 16
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=1000, batch=4096, eval_every=100))
    search: str = "objective"
    loo: bool | None = None
    retrieve: int = 16
    screen: int = 16
    phi_scales: tuple = (0.5, 1.0, 2.0, 3.0)
    weighting: str = "likelihood"
    temperature: float | None = 1.0
    n_average: int = 4
    seed: int = 0
    device: str = "cpu"
    min_context: int | None = None
    interval_scale: float | None = None
    verbose: bool = field(default=True, repr=False, compare=False)

    inference_arguments = ("phi_scales",)
    saveable = True
    any_context_size = True  # decompose and predict read contexts of any size (ChainedRTE: n_context only)

    def _settings(self) -> dict:
        """Every constructor argument checked (a one-line error for a bad one), and what ``fit``
        resolves from them: the protocol object, ``loo`` (None: exactly when the search is the
        objective) and ``phi_scales`` as floats. ``fit`` sets ``protocol_`` and ``loo_`` (training
        settings); ``phi_scales`` is read when a target is decomposed (an inference setting: a later
        ``set_params`` counts)."""
        protocol = get_protocol(self.protocol)
        check_device(self.device)
        loo, phi_scales = self._check_search()
        check_scale(self.interval_scale)
        check_embedding(self.embedding)
        check_int("anchors", self.anchors, 1)
        check_int("n_pairs", self.n_pairs, 1)
        check_int("library_draws", self.library_draws, 1)
        check_real("near_fraction", self.near_fraction, 0.0, 1.0)
        check_int("n_near", self.n_near, 1)
        check_real("val_fraction", self.val_fraction, 0.0, 1.0, max_open=True)
        check_int("embed_dim", self.embed_dim, 1)
        check_instance("train", self.train, TrainConfig, "a TrainConfig (see taskextrap.operators.train)")
        check_int("seed", self.seed, 0)
        check_instance("verbose", self.verbose, bool, "True or False")
        return {
            "protocol": protocol,
            "loo": loo,
            "phi_scales": phi_scales,
            "min_context": self._check_min_context(protocol, loo),
        }

    def _check_min_context(self, protocol, loo: bool) -> int:
        """``min_context`` resolved (None: the protocol's ``n_context``), with one-line errors."""
        n = protocol.n_context
        if self.min_context is None:
            return n
        check_int("min_context", self.min_context, 1)
        if self.min_context > n:
            raise TaskextrapError(f"min_context={self.min_context} is more than the protocol's n_context={n}")
        if self.min_context < n and not (loo and self.any_context_size):
            raise TaskextrapError(
                f"min_context={self.min_context} < n_context={n} trains Psi with hidden context points, which "
                + (
                    "needs loo=True (search='objective')"
                    if self.any_context_size
                    else f"{type(self).__name__} does not read"
                )
            )
        return self.min_context

    def calibration_regime(self) -> str:
        """The key of this estimator's dev-chosen interval scale (``search.calibration``): the
        parameter regime and the search ("parameter-objective": ``rte``; "parameter-proxy":
        Strategy A)."""
        return f"parameter-{self.search}"

    def calibrated_scale(self) -> float:
        """The multiplier of the predictive sd: ``interval_scale``, or the dev-chosen one of the
        library's family (by name) or of the regime, for this protocol (``search.calibration``)."""
        self.check_is_fitted()
        return resolved_scale(self.interval_scale, self.calibration_regime(), self.protocol_, self.library_.family.name)

    def _check_search(self) -> tuple[bool, tuple[float, ...]]:
        """The search settings: one-line errors for bad ones; ``loo`` resolved from ``search``
        and ``phi_scales`` as floats."""
        if self.search not in SEARCHES:
            raise TaskextrapError(f"search must be one of {list(SEARCHES)}, got {self.search!r}")
        loo = self.search == "objective" if self.loo is None else self.loo
        if not isinstance(loo, (bool, np.bool_)):
            raise TaskextrapError(f"loo must be True, False or None, got {type(loo).__name__}")
        if self.search == "objective" and not loo:
            raise TaskextrapError("search='objective' scores Psi's leave-one-out context loss: it needs loo=True")
        check_int("retrieve", self.retrieve, 1)
        check_int("screen", self.screen, 0)
        scales = self.phi_scales
        if (
            not isinstance(scales, (tuple, list))
            or not scales
            or not all(
                isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool) and np.isfinite(a)
                for a in scales
            )
        ):
            raise TaskextrapError(f"phi_scales must be a non-empty tuple of finite numbers, got {scales!r}")
        if self.weighting not in WEIGHTINGS:
            raise TaskextrapError(f"weighting must be one of {list(WEIGHTINGS)}, got {self.weighting!r}")
        if self.temperature is not None:
            check_real("temperature", self.temperature, 0.0, min_open=True)
        check_int("n_average", self.n_average, 1)
        return bool(loo), tuple(float(a) for a in scales)

    # ----------------------------------------------------------------------------- phase 1
    def fit(self, library: TaskSet, progress=None, embedded: RTE | None = None) -> RTE:
        """Fit Gamma and Psi on ``library`` (training-region tasks only). With ``embedded``, a
        fitted RTE of the same library and Phase-1a settings (:data:`PHASE1A_SETTINGS`), its
        scaler, library draws and Gamma are adopted instead of fitted again: the same arrays, so
        the same numbers, without a second embedding of the library (Strategy A's fit and the
        objective's share one). ``progress(step, loss)`` is called after every training step of
        Psi; with ``verbose`` a fit longer than a few seconds also shows a progress bar.

        Returns:
            The estimator itself, fitted: ``embedding_`` (Gamma), ``psi_`` (Psi),
                ``z_library_`` (the library's proxies), the noise and calibration
                attributes.
        """
        check_progress(progress)
        with FitProgress(self.verbose, self.train.steps, progress, type(self).__name__) as bar:
            if embedded is None:
                bar.phase("embedding library")
            pending = self.begin_fit(library, embedded, bar.callback)
            t = time.perf_counter()
            train_jobs(pending.jobs, phase=bar.phase)
            self.timing_["psi_training_s"] = time.perf_counter() - t
            bar.phase("calibrating")
            pending.finish()
        return self

    def begin_fit(self, library: TaskSet, embedded: RTE | None = None, progress=None) -> PendingFit:
        """:meth:`fit` up to Psi's training: Phase 1a (or ``embedded``'s), and Psi's training as
        a job, to train beside other fits' networks (``estimators.base.fit_together``); the
        pending fit's ``finish()`` calibrates and completes the fit."""
        if embedded is None:
            self.fit_embedding(library)
        else:
            self._adopt(embedded, library)
        psi = self._make_psi()
        val = self._pair_arrays(np.flatnonzero(self.draws_.val), rng(self.seed, "psi-val"))
        train_idx = np.flatnonzero(self.draws_.train)
        job = psi.fit_job(lambda g: self._pair_arrays(train_idx, g), val, rng(self.seed, "psi-batches"), progress)

        def finish() -> None:
            self._calibrate(psi, val)
            self.psi_ = psi  # set last: an estimator is fitted once this exists

        return PendingFit([job], finish)

    def _make_psi(self) -> RelationalOperator:
        """Psi, untrained, on the estimator's device (fit trains it; restore loads its weights)."""
        return RelationalOperator(
            self.scaler_,
            self.protocol_.n_context,
            self.z_library_.shape[1],
            derive_seed(self.seed, "psi"),
            self.train,
            loo=bool(self.loo_),
        ).to(self.device)

    def _calibrate(self, psi: RelationalOperator, val: tuple) -> None:
        """Psi's own error on the validation pairs (held-out *library* tasks, never targets):
        ``query_var_``, its mean squared error at the queries (the predictive spread of a correct
        decomposition), and ``loss_scale_``, its mean leave-one-out loss on the context (the
        residual variance the objective's likelihood expects of a correct decomposition)."""
        ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, qry_y = val[:7]
        present = val[8:9]  # with min_context: the mask of the points present (contexts of every size)
        pred = psi.predict(ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, *present)
        self.query_var_ = float(np.mean((pred - qry_y) ** 2))
        self.loss_scale_ = float(np.mean(psi.loo_loss(ctx_x, ctx_y, anc_ctx, shift, *present))) if psi.loo else None

    def fit_embedding(self, library: TaskSet) -> RTE:
        """Phase 1a: scalers, the library's observed draws, Gamma and the library embeddings."""
        self._check_library(library)
        held = set(library.family.held_out_regions)
        if any(r in held for r in library.region):
            raise TaskextrapError("the library contains held-out-region tasks; fit on training regions only")
        self._set_library(library)
        t = time.perf_counter()
        self.draws_ = self._draw_library(library)
        self.timing_ = {"embedding_s": time.perf_counter() - t}
        return self

    def _set_library(self, library: TaskSet) -> None:
        """The resolved arguments, and what the (checked) library alone gives: itself, its noise
        scale and the scaler (fit and restore share it)."""
        self._resolve()
        self.library_ = library
        self.noise_scale_ = noise_scale(library.family)
        self.noise_sd_ = self.protocol_.noise * self.noise_scale_  # context noise (the leak audit's tolerance)
        self.scaler_ = FamilyScaler.fit(library)

    def _adopt(self, fitted: RTE, library: TaskSet) -> None:
        """Phase 1a of ``fitted`` (same library, same :data:`PHASE1A_SETTINGS`, same way of
        embedding the library), taken over as it is; a one-line error otherwise."""
        check_instance("embedded", fitted, RTE, "a fitted RTE")
        check_is_fitted(fitted, "embedding_")
        self._resolve()
        same = [a for a in PHASE1A_SETTINGS if fitted.resolved(a) != self.resolved(a)]
        if fitted.library_ is not library or same or type(fitted)._fit_descriptors is not type(self)._fit_descriptors:
            raise TaskextrapError(
                "embedded must be an RTE of the same kind fitted on the same library with the same "
                f"{', '.join(PHASE1A_SETTINGS)}" + (f" (differs: {', '.join(same)})" if same else "")
            )
        for a in (
            "library_",
            "noise_scale_",
            "noise_sd_",
            "scaler_",
            "draws_",
            "embedding_",
            "z_library_",
            "train_tasks_",
        ):
            setattr(self, a, getattr(fitted, a))
        self.timing_ = {"embedding_s": 0.0}  # adopted, not computed

    def fitted_state(self) -> tuple[dict, dict]:
        """The fit as named arrays and plain meta for a safetensors file (:meth:`restore`): the
        library draws' embeddings, Gamma, Psi and the calibration. The library itself, its
        scaler and its draws are not saved: :meth:`restore` redraws them from the seed."""
        self.check_is_fitted()
        arrays = {"draws.z": self.draws_.z, **self.psi_.state("psi")}
        meta = {
            "estimator": repr(self),
            "timing": self.timing_,
            "query_var": self.query_var_,
            "loss_scale": self.loss_scale_,
        }
        if getattr(self, "embedding_", None) is not None:
            emb_arrays, meta["embedding"] = self.embedding_.state("embedding.")
            arrays |= emb_arrays
        return arrays, meta

    def restore(self, library: TaskSet, arrays: dict, meta: dict) -> RTE:
        """This unfitted estimator fitted as :meth:`fitted_state` saved it, on the same
        ``library``: the same arrays, so the same numbers as the fit that saved them. A state
        of other settings is refused in one line."""
        self._check_state(meta)
        self._check_library(library)
        self._set_library(library)
        if "embedding" in meta:
            self.embedding_ = ProxyEmbedding.from_state(arrays, meta["embedding"], "embedding.")
        self.draws_ = self._draw_library(library, z=arrays["draws.z"])
        self.timing_ = dict(meta["timing"])
        psi = self._make_psi()
        psi.load_state(arrays, "psi")
        self.query_var_, self.loss_scale_ = meta["query_var"], meta["loss_scale"]
        self.psi_ = psi  # set last: an estimator is fitted once this exists
        return self

    def _adopt_fit(self, fitted: RTE, library: TaskSet) -> None:
        """Every fitted attribute of ``fitted``, an estimator of the same kind fitted on
        ``library`` with the same settings of :class:`RTE` (a subclass such as ``ChainedRTE``
        adds inference settings only, so a plain RTE's fit is its fit); a one-line error otherwise."""
        check_instance("fitted", fitted, RTE, "a fitted RTE")
        fitted.check_is_fitted()
        self._resolve()
        same = [
            f.name for f in dataclasses.fields(RTE) if f.compare and fitted.resolved(f.name) != self.resolved(f.name)
        ]  # verbose is not a setting
        if fitted.library_ is not library or same or type(fitted)._fit_descriptors is not type(self)._fit_descriptors:
            raise TaskextrapError(
                "fitted must be an RTE of the same kind fitted on the same library with the same "
                "settings" + (f" (differs: {', '.join(same)})" if same else "")
            )
        self.__dict__.update({k: v for k, v in vars(fitted).items() if k.endswith("_") and not k.startswith("_")})

    def _check_library(self, library) -> None:
        """``library`` must be a TaskSet with at least two training tasks once ``val_fraction`` is
        held out (Psi learns from pairs of distinct library tasks) and at least ``anchors`` tasks."""
        cls = type(self).__name__
        check_instance("library", library, TaskSet, f"a TaskSet for {cls}.fit (see taskextrap.tasks.TaskSet)")
        n = len(library)
        n_train = n - round(self.val_fraction * n)
        if n_train < 2:
            raise TaskextrapError(
                f"library has {n} task(s): {cls}.fit needs at least 2 training tasks once "
                f"val_fraction={self.val_fraction} of them are held out"
            )
        if self.anchors > n:
            raise TaskextrapError(f"anchors={self.anchors} is more than the library's {n} tasks")

    def _draw_library(self, library: TaskSet, z: np.ndarray | None = None) -> Draws:
        """The library's draws, Gamma fitted on them and their embeddings (``z`` given: a
        restored state's embeddings of these same draws, nothing fitted)."""
        n = len(library)
        per_task = max(self.library_draws, int(np.ceil(self.n_pairs / n)))
        obs = self.protocol_.draw(library, per_task, rng(self.seed, "library-draws"), self.noise_scale_)
        first = np.tile(np.arange(per_task) < self.library_draws, n)
        if z is None:
            z = self._fit_descriptors(library, obs, first)
        elif z.shape[0] != len(obs.ctx_x):
            raise TaskextrapError(
                f"the saved state embeds {z.shape[0]} library draws, this library has {len(obs.ctx_x)}"
            )
        self.z_library_ = mean_per_task(z[first], obs.task[first], n)
        val_tasks = rng(self.seed, "val-split").permutation(n)[: round(self.val_fraction * n)]
        val = np.isin(obs.task, val_tasks)
        self.train_tasks_ = np.setdiff1d(np.arange(n), val_tasks)
        return Draws(obs, z, ~val, val)

    def _fit_descriptors(self, library: TaskSet, obs: Observations, first: np.ndarray) -> np.ndarray:
        """Fit Gamma (probe pretrained on the library's curves, PCA on library contexts); embed every draw."""
        self.embedding_ = fit_library_embedding(
            self.embedding,
            self.embed_dim,
            derive_seed(self.seed, "probe"),
            self.scaler_,
            library,
            obs.subset(first),
            noise_sd=self.noise_sd_,
            device=self.device,
        )
        return self.embed(obs.ctx_x, obs.ctx_y)

    def _pair_arrays(self, draw_idx: np.ndarray, g: np.random.Generator) -> audit.Batch:
        """Arrays for Psi: each draw paired with an anchor (near in proxy space or uniform).

        A batch (ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, qry_y) naming the target draws and the
        anchors it was made from, for the leak audit.
        """
        d = self.draws_
        n = len(draw_idx)
        pool = self.train_tasks_
        anchor = pool[g.integers(len(pool), size=n)]
        near = g.random(n) < self.near_fraction
        if near.any():
            dist = self._pool_distances(draw_idx[near])
            dist[d.obs.task[draw_idx[near], None] == pool[None]] = np.inf  # never itself
            k = min(self.n_near, len(pool) - 1)
            # a random one of the k nearest, not nearest first: this stays a partial sort, as the
            # random draw indexes argpartition's order and search.index.nearest's order would
            # pick other anchors (other training pairs, other numbers than the committed runs)
            near_k = np.argpartition(dist, k - 1, axis=1)[:, :k]
            anchor[near] = pool[near_k[np.arange(len(near_k)), g.integers(k, size=len(near_k))]]
        same = anchor == d.obs.task[draw_idx]
        anchor[same] = pool[(np.searchsorted(pool, anchor[same]) + 1) % len(pool)]
        ctx_x, ctx_y = sort_context(d.obs.ctx_x[draw_idx], d.obs.ctx_y[draw_idx])
        qry_x = d.obs.qry_x[draw_idx]
        lib = self.library_
        arrays: tuple[np.ndarray, ...] = (
            ctx_x,
            ctx_y,
            lib.values(ctx_x, anchor),
            qry_x,
            lib.values(qry_x, anchor),
            d.z[draw_idx] - self.z_library_[anchor],
            d.obs.qry_y[draw_idx],
        )
        target_checks: tuple[tuple[int, int, float], ...] = ((0, 1, 8.0 * self.noise_sd_), (3, 6, 0.0))
        if self.loo_:  # the leave-one-out rows' targets: the noiseless values at the context
            arrays += (lib.values(ctx_x, d.obs.task[draw_idx]),)
            target_checks += ((0, 7, 0.0),)
        if self.min_context_ < ctx_x.shape[1]:  # drawn last: the other arrays are those of a full context
            arrays += (present_masks(g, n, ctx_x.shape[1], self.min_context_),)
        return audit.Batch(
            arrays,
            [
                audit.Source(lib.family, d.obs.params[draw_idx], target_checks),
                audit.Source(lib.family, lib.params[anchor], ((0, 2, 0.0), (3, 4, 0.0))),
            ],
        )

    def _pool_distances(self, draw_idx: np.ndarray) -> np.ndarray:
        """Proxy distances (len(draw_idx), pool) from library draws to the training pool's
        embeddings. Every pass of Psi's training asks again for the same draws, so all draws'
        rows are computed once per library (row by row the same numbers; while they fit in
        :data:`POOL_DISTANCE_ENTRIES`) and returned as a copy."""
        d, pool = self.draws_, self.train_tasks_
        rows = lambda idx: np.linalg.norm(d.z[idx, None] - self.z_library_[None, pool], axis=2)  # noqa: E731
        if len(d.z) * len(pool) > POOL_DISTANCE_ENTRIES:
            return rows(draw_idx)
        cached = getattr(self, "_pool_distance_cache", None)
        if cached is None or cached[0] is not d or cached[1] is not pool:
            full = np.concatenate([rows(np.arange(i, min(i + 1024, len(d.z)))) for i in range(0, len(d.z), 1024)])
            self._pool_distance_cache = cached = (d, pool, full)
        return cached[2][draw_idx]

    # ----------------------------------------------------------------------------- phase 2
    def _sized_context(self, ctx_x, ctx_y) -> tuple[np.ndarray, np.ndarray]:
        """The context as float arrays (n, m): ``m`` from ``min_context_`` up (any number above
        ``n_context`` too, :meth:`views`), or exactly ``n_context`` for an estimator that reads no
        other size."""
        if not self.any_context_size:
            return super()._sized_context(ctx_x, ctx_y)
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        m, k, low = ctx_x.shape[1], self.protocol_.n_context, self.min_context_
        if m < low:
            hint = f"fit with RTE(min_context={m}) to read fewer" if self.loo_ else "give more points"
            raise TaskextrapError(
                f"ctx_x has {m} point(s) per task; this {type(self).__name__} reads at least "
                f"{low} (its Psi was trained on {k}-point contexts{'' if low == k else f', down to {low}'}): {hint}"
            )
        return ctx_x, ctx_y

    def views(self, sx: np.ndarray, sy: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """A sorted context (n, m) as the ``n_context``-point contexts Psi reads, with a mask of
        the points present (None: all): itself when ``m == n_context``; ``ceil(m / n_context)``
        interleaved subsets covering every point when larger (predictions and context losses
        are averaged over them); when smaller, the context padded with hidden points spread over
        the protocol's context span (their x carries no information about the target: only
        the anchor is read there)."""
        n, m = sx.shape
        k = self.protocol_.n_context
        if m == k:
            return [(sx, sy, None)]
        if m > k:
            s = -(-m // k)
            idx = [np.floor((np.arange(k) + j / s) * m / k).astype(int) for j in range(s)]
            return [(sx[:, i], sy[:, i], None) for i in idx]
        lo, hi = self.library_.family.domain
        a, b = self.protocol_.context_span
        pad = lo + (a + (b - a) * (np.arange(k - m) + 0.5) / (k - m)) * (hi - lo)
        vx = np.concatenate([sx, np.broadcast_to(pad, (n, k - m))], axis=1)
        vy = np.concatenate([sy, np.zeros((n, k - m))], axis=1)
        present = np.concatenate([np.ones((n, m)), np.zeros((n, k - m))], axis=1)
        order = np.argsort(vx, axis=1, kind="stable")
        take = lambda v: np.take_along_axis(v, order, 1)  # noqa: E731
        return [(take(vx), take(vy), take(present))]

    def embed(self, ctx_x, ctx_y) -> np.ndarray:
        """Gamma of each context (n, dim): computed from the context points only."""
        check_is_fitted(self, "embedding_")
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        z = self.embedding_.transform(self.scaler_.x(ctx_x), self.scaler_.y(ctx_y))
        return check_finite_result("the embedding", z, "ctx_x or ctx_y")

    def decompose(self, ctx_x, ctx_y, k: int | None = None, search: str | None = None) -> Decomposition:
        """Each target's candidates, best first, by ``search`` (default: the estimator's).

        "proxy" (Strategy A): the ``k`` (default ``anchors``) library tasks nearest each target in
        proxy space, the shifts phi (n, k, dim) from them to the target, scored by proxy distance.
        "objective" (Eq. 3): the ``retrieve`` nearest anchors with shifts ``phi_scales`` times
        their proxy difference, scored by Psi's leave-one-out context loss, with the posterior
        over them in ``weights`` (its best ``n_average`` only). ``k`` belongs to the proxy search:
        with the objective it is refused (its candidates are set by ``retrieve`` and ``screen``).

        Returns:
            A :class:`~taskextrap.estimators.base.Decomposition`: ``anchors`` (n, k),
                ``phi`` (n, k, d) proxy shifts, ``score`` (n, k) leave-one-out context losses
                (Strategy A: its own ranking), lower is better, ``weights`` (n, k), best first.
        """
        self.check_is_fitted()
        check_optional_int("k", k, 1)
        search = self.search if search is None else search
        if search not in SEARCHES:
            raise TaskextrapError(f"search must be one of {list(SEARCHES)}, got {search!r}")
        if k is not None and search == "objective":  # silently ignored before: say what sets the candidates
            raise TaskextrapError(
                "k sets the candidates of search='proxy' (Strategy A); the objective's are set by "
                "retrieve and screen (RTE(retrieve=..., screen=...)), or pass search='proxy'"
            )
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        z = self.embed(ctx_x, ctx_y)
        if search == "proxy":
            return self._nearest(z, k)
        if not self.psi_.loo:
            raise TaskextrapError("search='objective' needs a Psi trained with loo=True")
        return self._objective(z, *sort_context(ctx_x, ctx_y))

    def _retrieved(self, z: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The objective's anchors (n, r) and their proxy distances: the ``retrieve`` nearest in
        proxy space, then the ``screen`` library tasks whose curves fit the context best among the rest."""
        size = len(self.z_library_)
        anchors, dist = nearest(z, self.z_library_, min(self.retrieve, size))
        extra = min(self.screen, size - anchors.shape[1])
        if extra > 0:
            fit = np.concatenate(
                [
                    np.mean(
                        (self.library_.curves(sx[i : i + OBJECTIVE_CHUNK]) - sy[i : i + OBJECTIVE_CHUNK, None]) ** 2,
                        axis=2,
                    )
                    for i in range(0, len(sx), OBJECTIVE_CHUNK)
                ]
            )  # (n, library)
            np.put_along_axis(fit, anchors, np.inf, axis=1)  # already retrieved
            best = np.argpartition(fit, extra - 1, axis=1)[:, :extra]
            anchors = np.concatenate([anchors, best], axis=1)
            dist = np.linalg.norm(z[:, None] - self.z_library_[anchors], axis=2)
        return anchors, dist

    def _objective(self, z: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> Decomposition:
        """Eq. 3 over the retrieved anchors and scaled shifts: candidates sorted by leave-one-out
        context loss, the posterior over the best ``n_average`` in ``weights``."""
        retrieved, dist = self._retrieved(z, sx, sy)
        n, r = retrieved.shape
        scales = np.asarray(self.resolved("phi_scales"))
        anchors = np.repeat(retrieved, len(scales), axis=1)  # (n, r*S), anchor-major
        phi0 = z[:, None] - self.z_library_[retrieved]
        phi = (phi0[:, :, None, :] * scales[None, None, :, None]).reshape(n, r * len(scales), -1)

        def chunk(i: int) -> np.ndarray:  # one chunk of targets: the same numbers in any lane
            sl = slice(i, i + OBJECTIVE_CHUNK)
            return self._loo_losses(sx[sl], sy[sl], anchors[sl], phi[sl])

        loss = np.concatenate(map_lanes(chunk, range(0, n, OBJECTIVE_CHUNK), self.device))
        check_finite_result("the context loss", loss, "ctx_x or ctx_y")
        order = np.argsort(loss, axis=1, kind="stable")
        loss = np.take_along_axis(loss, order, 1)
        w = candidate_weights(
            loss[:, : self.n_average], self.weighting, self.temperature, sx.shape[1], self.loss_scale_
        )
        weights = np.concatenate([w, np.zeros((n, loss.shape[1] - w.shape[1]))], axis=1)
        take = lambda a: np.take_along_axis(a, order, 1)  # noqa: E731
        extras = {
            "phi_scale": take(np.broadcast_to(np.tile(scales, r), (n, r * len(scales)))),
            "proxy_distance": take(np.repeat(dist, len(scales), axis=1)),
        }
        return Decomposition(take(anchors), np.take_along_axis(phi, order[..., None], 1), loss, extras, weights)

    def _loo_losses(self, sx, sy, anchors, phi) -> np.ndarray:
        """Psi's leave-one-out context loss (n, c) of candidates ``anchors`` (n, c) with shifts ``phi`` (n, c, dim)."""
        n, c = anchors.shape
        losses = []
        for vx, vy, present in self.views(sx, sy):
            rx, ry = np.repeat(vx, c, axis=0), np.repeat(vy, c, axis=0)
            anc_ctx = self.library_.values(rx, anchors.reshape(-1))
            extra = () if present is None else (np.repeat(present, c, axis=0),)
            losses.append(self.psi_.loo_loss(rx, ry, anc_ctx, phi.reshape(n * c, -1), *extra).reshape(n, c))
        return losses[0] if len(losses) == 1 else np.mean(losses, axis=0)

    def _nearest(self, z: np.ndarray, k: int | None) -> Decomposition:
        """The ``k`` library tasks nearest positions ``z`` (n, dim), nearest first, with shifts."""
        k = self.anchors if k is None else check_int("k", k, 1)
        if not 1 <= k <= len(self.z_library_):
            raise TaskextrapError(f"k must be between 1 and the library size {len(self.z_library_)}")
        anchor, dist = nearest(z, self.z_library_, k)
        return Decomposition(anchor, z[:, None] - self.z_library_[anchor], dist)

    def decomposition_for(self, ctx_x, ctx_y, anchors, phi=None) -> Decomposition:
        """The decomposition with the given ``anchors`` (n, a) (the ablations: random or far
        anchors); ``phi`` (n, a, dim) defaults to the proxy-space shift from each anchor."""
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        anchors = _per_target("anchors", as_index_array("anchors", anchors, len(self.library_)), len(ctx_x))
        auto = self.embed(ctx_x, ctx_y)[:, None] - self.z_library_[anchors]
        if phi is None:
            return Decomposition.given(anchors, auto)
        phi = as_float_array("phi", phi)
        if phi.size != auto.size:
            raise TaskextrapError(
                f"phi must have shape (n, a, dim) = {auto.shape} (one proxy shift per anchor), got {phi.shape}"
            )
        return Decomposition.given(anchors, phi.reshape(auto.shape))

    def _predict_inputs(self, ctx_x, ctx_y, x_query, decomposition: Decomposition | None):
        """What ``predict`` works from, validated: the decomposition (given, else
        :meth:`decompose`), the context sorted by x and the query inputs."""
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        qry_x = self._checked_query(x_query, len(ctx_x))
        if decomposition is not None:
            check_decomposition(decomposition, len(ctx_x), len(self.library_), (), self.z_library_.shape[1:])
        d = self.decompose(ctx_x, ctx_y) if decomposition is None else decomposition
        return (d, *sort_context(ctx_x, ctx_y), qry_x)

    def predict(self, ctx_x, ctx_y, x_query, decomposition: Decomposition | None = None, return_std: bool = False):
        """Predict each target at ``x_query`` (n, q) from its context (n, k): Psi from each
        candidate of ``decomposition`` (default: :meth:`decompose`), mixed by its ``weights``
        (the objective's posterior) or averaged equally (Strategy A, a given decomposition).
        With ``return_std`` also the predictive sd (n, q): the candidates' spread plus Psi's
        validation error (``query_var_``), times ``interval_scale``.

        Returns:
            predictions (numpy.ndarray | tuple): The predictions (n, q); with ``return_std=True`` the pair
                (predictions, predictive sd), both (n, q).
        """
        d, sx, sy, qry_x = self._predict_inputs(ctx_x, ctx_y, x_query, decomposition)
        w = np.full(d.score.shape, 1.0 / d.k) if d.weights is None else d.weights
        cols = [j for j in range(d.k) if w[:, j].any()]  # a candidate no target weights is never run
        preds = np.stack([self._predict_one(sx, sy, qry_x, d.anchors[:, j], d.phi[:, j]) for j in cols])
        mean, std = mixture(preds, w[:, cols], self.query_var_)
        check_finite_result("the prediction", mean, "ctx_x, ctx_y or x_query")
        return (mean, self.calibrated_scale() * std) if return_std else mean

    def _predict_one(self, sx, sy, qry_x, anchors, phi) -> np.ndarray:
        """Psi from one anchor (n,) with shift phi (n, dim) per target."""
        lib = self.library_
        anc_q = lib.values(qry_x, anchors)
        preds = [
            self.psi_.predict(vx, vy, lib.values(vx, anchors), qry_x, anc_q, phi, *(() if p is None else (p,)))
            for vx, vy, p in self.views(sx, sy)
        ]
        return preds[0] if len(preds) == 1 else np.mean(preds, axis=0)


def present_masks(g: np.random.Generator, n: int, k: int, low: int) -> np.ndarray:
    """(n, k) masks of the context points Psi sees in training when it learns to read contexts
    of ``low`` to ``k`` points: each row hides a uniform number of its points in [0, k - low],
    chosen uniformly."""
    hidden = g.integers(0, k - low + 1, size=n)
    rank = np.argsort(g.random((n, k)), axis=1).argsort(axis=1)
    return (rank >= hidden[:, None]).astype(float)


def _per_target(name: str, a: np.ndarray, n: int) -> np.ndarray:
    """``a`` reshaped to one row per target (n, -1): its size must be a multiple of ``n``."""
    if a.size % n:
        raise TaskextrapError(f"{name} must have one row per target ({n} rows), got shape {a.shape}")
    return a.reshape(n, -1)
