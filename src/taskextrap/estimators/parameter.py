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
from taskextrap.embed import check_embedding
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import (
    Decomposition,
    PendingFit,
    check_decomposition,
    check_progress,
)
from taskextrap.estimators.library_fit import LibraryFit
from taskextrap.estimators.progress import FitProgress
from taskextrap.operators.pairs import PairSampler, context_views
from taskextrap.operators.parameter import RelationalOperator, sort_context
from taskextrap.operators.train import TrainConfig, train_jobs
from taskextrap.search.index import nearest
from taskextrap.search.calibration import check_scale, resolved_scale
from taskextrap.search.objective import SEARCHES, ObjectiveSearch, candidate_plan, check_objective
from taskextrap.search.posterior import mixture
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.regimes import get_protocol
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


@dataclass(eq=False)
class RTE(LibraryFit):
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
        reference_library: the library size ``retrieve`` and ``screen`` are counts for; a larger
            library scores the same share of its tasks (up to ``search.objective.CANDIDATE_POOL``
            tasks' worth, then from a seeded subset of that many: ``candidate_plan``), so its
            candidates spread as far. None: the counts as given at every size.
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
    reference_library: int | None = field(default=200, repr=False)  # out of the repr keying saved fits
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
        loo, phi_scales = check_objective(self)
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

    def fit_settings(self) -> list[str]:
        """Every argument of :class:`RTE` but ``verbose``: what a whole fit depends on (a subclass
        such as ``ChainedRTE`` adds inference settings only, so a plain RTE's fit is its fit)."""
        return [f.name for f in dataclasses.fields(RTE) if f.compare]

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

    def _pair_arrays(self, draw_idx: np.ndarray, g: np.random.Generator) -> audit.Batch:
        """Psi's training pairs from the library draws ``draw_idx``, their anchors drawn from ``g``
        (``operators.pairs.PairSampler.batch``)."""
        return self._sampler().batch(draw_idx, g)

    def _pool_distances(self, draw_idx: np.ndarray) -> np.ndarray:
        """Proxy distances from library draws to the training pool (``PairSampler.pool_distances``)."""
        return self._sampler().pool_distances(draw_idx)

    def _sampler(self) -> PairSampler:
        """The pair sampler of this fit's draws, made once per set of draws (it keeps their
        distances to the pool)."""
        d, pool = self.draws_, self.train_tasks_
        cached = getattr(self, "_pair_sampler", None)
        if cached is None or cached.draws is not d or cached.pool is not pool:
            cached = self._pair_sampler = PairSampler(
                self.library_,
                d,
                self.z_library_,
                pool,
                self.near_fraction,
                self.n_near,
                self.noise_sd_,
                bool(self.loo_),
                self.min_context_,
                self.seed,
            )
        return cached

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
        the points present (``operators.pairs.context_views``)."""
        p = self.protocol_
        return context_views(sx, sy, p.n_context, self.library_.family.domain, p.context_span)

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

    def _objective(self, z: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> Decomposition:
        """Eq. 3 over the retrieved anchors and scaled shifts (``search.objective``): candidates
        sorted by leave-one-out context loss, the posterior over the best ``n_average`` in ``weights``."""
        r, s, pool = candidate_plan(len(self.z_library_), self.retrieve, self.screen, self.reference_library, self.seed)
        search = ObjectiveSearch(
            self.library_,
            self.z_library_,
            self.psi_,
            self.views,
            self,
            self.resolved("phi_scales"),
            self.loss_scale_,
            self.device,
            (r, s),
            pool,
        )
        c = search.candidates(z, sx, sy)
        return Decomposition(c.anchors, c.phi, c.loss, c.extras, c.weights)

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


def _per_target(name: str, a: np.ndarray, n: int) -> np.ndarray:
    """``a`` reshaped to one row per target (n, -1): its size must be a multiple of ``n``."""
    if a.size % n:
        raise TaskextrapError(f"{name} must have one row per target ({n} rows), got shape {a.shape}")
    return a.reshape(n, -1)
