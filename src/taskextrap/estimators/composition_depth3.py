"""The Relational Task Extrapolator for deep compositions (paper App. B.1.2: multi-step
compositional extrapolation, depth 3).

Phase 1 (training recipes only): the library gets the identity primitive (``identity=True``),
every library primitive is observed through the protocol and embedded by Gamma. Chains of
library primitives whose recipe trains (and, a ``pad_share`` of the time, shallower
compositions padded to the full depth with the identity in the outermost slots) train the
recursive composer Psi_chain and the parallel decomposer g, which predicts one embedding per
depth slot from the sorted context in one forward pass.

Phase 2: g proposes z_1 .. z_d; the top-k library primitives nearest each are the slot's
candidates; verification composes every one of the k^d ordered chains from stored library
curves at the context inputs and ranks them by context MSE, one batched evaluation per target
(``search.chain_search.verify_chains``). Coordinate refinement then sweeps the whole library for one
slot at a time (``refine_rounds``). Psi_chain predicts the queries from the best chains' curves
and the context, averaged over the chains that explain the context about equally well.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition, check_decomposition
from taskextrap.estimators.decomposing import DecomposingRTE
from taskextrap.operators.chain import ChainOperator
from taskextrap.operators.parameter import sort_context
from taskextrap.operators.train import TrainConfig
from taskextrap.scaling import FamilyScaler
from taskextrap.search import chain_search as search
from taskextrap.search.index import nearest
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.chains import (
    IDENTITY_NAME,
    PAPER_RECIPE_SPLIT,
    Chainer,
    ChainSet,
    RecipeSplit,
    check_share,
    identity_index,
    with_identity,
)
from taskextrap.tasks.observe import noise_scale
from taskextrap.tasks.primitives import PrimitiveSet, PrimitiveTasks
from taskextrap.validation import as_index_array, check_instance, check_int, check_optional_int, check_query

# The per-protocol settings chosen on the dev split (training recipes holding "poly applied to a
# sin output" held out; quick profile, seed 0, 200 dev targets x 2 draws; scripts/dev_choices.py
# --regimes composition-depth3 -> benchmarks/results/dev-choices-quick-depth3*.json), one setting
# at a time, a change kept only where its paired dev difference was clear and >= 1%:
# - both: k = 60 (the authors'; 10, 20, 40 are worse or a tie), one refinement round (paper:
#   none is +8%), the identity padding kept (removing it is a tie for rte; the oracle chain through
#   Psi_chain is 51% worse without it under paper), averaging 20 -> 256 chains (keep and n_average;
#   paper -16%, strict -8%).
# - paper: Psi_chain does not read the context (reading it: +12%); strict: it does (-2.9%).
DEV_SETTINGS = {
    "paper": {"k": 60, "refine_rounds": 1, "psi_context": False},
    "strict": {"k": 60, "refine_rounds": 1, "psi_context": True},
}


def dev_settings(protocol) -> dict:
    """``k``, ``refine_rounds`` and ``psi_context`` for ``protocol``: its row of :data:`DEV_SETTINGS`
    by name; a protocol of another name gets strict's when its context is noisy, else paper's."""
    if protocol.name in DEV_SETTINGS:
        return DEV_SETTINGS[protocol.name]
    return DEV_SETTINGS["strict" if protocol.noise > 0 else "paper"]


@dataclass(eq=False)
class Composition3RTE(DecomposingRTE):
    """RTE for deep compositions: ``Composition3RTE(...).fit(primitives).predict(ctx_x, ctx_y, x_query)``.

    The defaults are the composition-depth3 experiment's ``rte`` row under the paper profile: the
    protocol's dev-chosen settings (:data:`DEV_SETTINGS`) and the paper profile's sizes (8000
    chains per pass, Psi_chain 6000 steps of 2048 rows, g 3000 steps of 512 chains).

    ``decompose`` gives each target's best chains, best first: anchors (n, keep, depth) library
    primitives outermost first (the identity's index is ``len(primitives)`` when
    ``identity=True``), phi (n, keep, 0), score (n, keep) context MSE, and ``extras["candidates"]``
    (n, depth, k) each slot's retrieved candidates, nearest first.

    Args:
        protocol: observation protocol (name from the ``composition-depth3`` table, or an object).
        embedding: Gamma estimator for the primitives.
        depth: slots of a chain (3: h = r_3 o r_2 o r_1).
        k: candidates per slot; all k^depth chains are verified (the authors' code: 60). None:
            the protocol's dev-chosen value (:data:`DEV_SETTINGS`).
        keep: verified chains kept per target (the posterior average reads the best ``n_average``;
            256 and 256 were chosen on the dev split).
        refine_rounds: rounds of coordinate refinement of the best chain over the whole library
            (0: verification only). None: the protocol's dev-chosen value.
        identity: add the identity primitive to the library and train on shallower compositions
            padded with it (the paper's padding); False: depth-``depth`` training recipes only.
        pad_share: share of training compositions that are shallower (padded), with ``identity``.
        split: which recipes train (the held-out recipes never do).
        temperature: the posterior's temperature when Psi is averaged over the best verified
            chains (``search.posterior``); None keeps only the best (the arg-min).
        n_average: the best verified chains the posterior averages Psi over.
        weighting: how candidates' context losses become posterior weights (``search.posterior``):
            "relative" (within a factor 1 + ``temperature`` of the best) or "likelihood" (the
            Gaussian likelihood under ``loss_scale_``, the context loss of a true decomposition
            measured at fit time on validation-pool tasks; ``temperature`` flattens it). Not swept
            at depth 3: "relative", as length and composition kept on their dev splits.
        value_points: size of the value grid on which Psi_chain reads each primitive's curve.
        psi_context: whether every step of Psi_chain also reads the sorted context. None: the
            protocol's dev-chosen value (:data:`DEV_SETTINGS`).

    ``n_pairs``, ``library_draws``, ``val_fraction``, ``train``, ``decomposer_train``, ``blocks``,
    ``seed``, ``interval_scale`` and ``verbose`` are as in
    :class:`~taskextrap.estimators.composition.CompositionRTE`.

    Examples:
        Depth-3 chains of rescaled primitives; the targets are held-out recipes:

        >>> import numpy as np
        >>> from taskextrap.estimators.composition_depth3 import Composition3RTE
        >>> from taskextrap.operators.train import TrainConfig
        >>> from taskextrap.tasks.chains import DEPTH3_FAMILIES, DEPTH3_GRID, PAPER_RECIPE_SPLIT, ChainSet
        >>> from taskextrap.tasks.primitives import PrimitiveSet
        >>> prims = PrimitiveSet.sample(DEPTH3_FAMILIES, 6, np.random.default_rng(0), grid=DEPTH3_GRID)
        >>> small = TrainConfig(steps=5, batch=64)
        >>> rte = Composition3RTE(n_pairs=80, k=3, keep=8, train=small, decomposer_train=small, verbose=False)
        >>> rte = rte.fit(prims)
        >>> targets = ChainSet.sample(prims, PAPER_RECIPE_SPLIT.test, 2, np.random.default_rng(1))
        >>> obs = rte.protocol_.draw(targets, 1, np.random.default_rng(2))
        >>> rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x).shape[0]
        2
    """

    n_pairs: int = 8000  # the depth-3 paper profile's sizes (its decomposer_train is the base class's)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=6000, batch=2048, eval_every=200))
    depth: int = 3
    k: int | None = None
    keep: int = 256
    n_average: int | None = 256
    refine_rounds: int | None = None
    identity: bool = True
    pad_share: float = 0.25
    split: RecipeSplit = PAPER_RECIPE_SPLIT
    value_points: int = 49
    psi_context: bool | None = None

    inference_arguments = ("k", "refine_rounds")
    saveable = True

    regime = "composition-depth3"
    library_kind = "primitives"

    def _settings(self) -> dict:
        """The base class's, and ``k``, ``refine_rounds`` and ``psi_context`` resolved from the
        protocol's dev-chosen values when None (``fit`` sets ``psi_context_``; ``k`` and
        ``refine_rounds`` are read when a target is decomposed, so a later ``set_params`` counts)."""
        settings = super()._settings()
        chosen = dev_settings(settings["protocol"])
        k = chosen["k"] if self.k is None else self.k
        refine_rounds = chosen["refine_rounds"] if self.refine_rounds is None else self.refine_rounds
        psi_context = chosen["psi_context"] if self.psi_context is None else self.psi_context
        check_int("depth", self.depth, 2, 6)
        check_int("k", k, 1)
        check_int("keep", self.keep, 1)
        check_int("refine_rounds", refine_rounds, 0)
        for name, value in (("identity", self.identity), ("psi_context", psi_context)):
            if not isinstance(value, bool):
                raise TaskextrapError(f"{name} must be True or False, got {value!r}")
        check_share("pad_share", self.pad_share)
        check_instance("split", self.split, RecipeSplit, "a RecipeSplit (see taskextrap.tasks.chains)")
        if self.split.depth != self.depth:
            raise TaskextrapError(f"the recipe split has depth {self.split.depth}, the estimator {self.depth}")
        check_int("value_points", self.value_points, 2)
        return settings | {"k": k, "refine_rounds": refine_rounds, "psi_context": psi_context}

    # ----------------------------------------------------------------------------- phase 1
    def _prepare(self, primitives: PrimitiveSet):
        """Training recipes only: the chain evaluator, pools, the scaler and Psi's value grid;
        Gamma is fitted on the primitives themselves (the identity among them)."""
        check_instance(
            "library",
            primitives,
            PrimitiveSet,
            "a PrimitiveSet for Composition3RTE.fit (see taskextrap.tasks.primitives)",
        )
        names = {f.name for f in primitives.families}
        if IDENTITY_NAME in names:
            raise TaskextrapError("pass the primitives without the identity: Composition3RTE adds it (identity=True)")
        missing = set(self.split.families) - set(primitives.family_names)
        if missing:
            raise TaskextrapError(f"the library has no primitive of the split's families {sorted(missing)}")
        self.library_ = primitives  # as given: what save_pretrained writes and restore takes
        self.primitives_ = with_identity(primitives) if self.identity else primitives
        self.identity_ = identity_index(self.primitives_)
        deep, shallow = self.split.train, (self.split.shallow() if self.identity else ())
        self.recipes_ = deep + shallow
        share = self.pad_share if shallow else 0.0
        self.recipe_weights_ = np.array(
            [(1 - share) / len(deep)] * len(deep) + [share / max(1, len(shallow))] * len(shallow)
        )
        self.composer_ = Chainer(self.primitives_, self.split.train)
        self.noise_scale_ = noise_scale(self.composer_)
        self.noise_sd_ = self.protocol_.noise * self.noise_scale_  # context noise (the leak audit's tolerance)
        self.val_pool_, self.train_pool_ = self._split_pool(self.primitives_)
        self.scaler_ = FamilyScaler.fit(self.draw_training_tasks(self.train_pool_, 512, rng(self.seed, "scaler"))[0])
        dom = np.linspace(*self.primitives_.domain, 100)
        out = self.primitives_.exact(np.broadcast_to(dom, (len(self.train_pool_), 100)), self.train_pool_)
        self.value_span_ = (float(min(dom[0], out.min())), float(max(dom[-1], out.max())))
        tasks = PrimitiveTasks.of(self.primitives_)
        return tasks, noise_scale(tasks.family)

    def _split_pool(self, primitives: PrimitiveSet) -> tuple[np.ndarray, np.ndarray]:
        """Validation primitives: ``val_fraction`` of every family (at least one each), the rest
        train; the identity (one primitive) is in both."""
        g = rng(self.seed, "val-split")
        val, train = [], []
        for f in range(len(primitives.families)):
            members = g.permutation(np.flatnonzero(primitives.family == f))
            if primitives.families[f].name == IDENTITY_NAME:
                val.append(members)
                train.append(members)
                continue
            if len(members) < 2:
                raise TaskextrapError(f"family {primitives.families[f].name!r} needs at least 2 library primitives")
            cut = max(1, round(self.val_fraction * len(members)))
            val.append(members[:cut])
            train.append(members[cut:])
        return np.sort(np.concatenate(val)), np.sort(np.concatenate(train))

    def draw_training_tasks(self, pool, n, g):
        """``n`` fresh training compositions (training recipes, and padded shallower ones a
        ``pad_share`` of the time) of primitives from ``pool``, and one observation of each."""
        tasks = ChainSet.sample(
            self.primitives_,
            self.recipes_,
            n,
            g,
            pool=pool,
            train_recipes=self.split.train,
            weights=self.recipe_weights_,
        )
        return tasks, self.observe_once(tasks, g)

    def _operator_arrays(self, pool, n, g) -> audit.Batch:
        """Psi_chain batch (qry_x, chains, ctx_x, ctx_y, qry_y) naming its compositions."""
        tasks, obs = self.draw_training_tasks(pool, n, g)
        cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
        return audit.Batch(
            (obs.qry_x, tasks.chains, cx, cy, obs.qry_y),
            [audit.Source(tasks.family, obs.params, ((0, 4, 0.0), (2, 3, 8.0 * self.noise_sd_)))],
        )

    def _make_operator(self) -> ChainOperator:
        return ChainOperator(
            self.scaler_,
            self.primitives_,
            self.protocol_.n_context,
            self.depth,
            derive_seed(self.seed, "psi"),
            self.train,
            self.value_span_,
            self.value_points,
            blocks=self.blocks,
            context=bool(self.psi_context_),
        )

    def _decomposer_arrays(self, pool, n, g) -> audit.Batch:
        """Decomposer batch (ctx_x, ctx_y, the slots' embeddings outermost first) naming its compositions."""
        tasks, obs = self.draw_training_tasks(pool, n, g)
        parts = np.concatenate([self.z_library_[tasks.chains[:, j]] for j in range(self.depth)], 1)
        return audit.Batch(
            (obs.ctx_x, obs.ctx_y, parts), [audit.Source(tasks.family, obs.params, ((0, 1, 8.0 * self.noise_sd_),))]
        )

    def _part_dims(self) -> tuple[int, ...]:
        """The decomposer's heads: one embedding per depth slot, outermost first."""
        return (self.z_library_.shape[1],) * self.depth

    # ----------------------------------------------------------------------------- phase 2
    def candidates(self, ctx_x, ctx_y, k: int | None = None) -> np.ndarray:
        """Top-``k`` library primitives of every slot, nearest first: (n, depth, k), outermost first."""
        self.check_is_fitted()
        check_optional_int("k", k, 1)
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        k = self.resolved("k") if k is None else k
        k = min(k, len(self.z_library_))
        return np.stack([nearest(z, self.z_library_, k)[0] for z in self.decomposer_.predict(ctx_x, ctx_y)], axis=1)

    def decompose(
        self, ctx_x, ctx_y, k: int | None = None, verify: bool = True, refine: int | None = None
    ) -> Decomposition:
        """All k^depth chains of the slots' candidates ranked by their composed curves' context MSE
        (the best ``keep`` kept), then ``refine`` rounds (default ``refine_rounds``) of coordinate
        refinement over the library.

        With ``verify=False`` the first ``keep`` chains in retrieval order (rank-1 in every slot
        first, the innermost slot varying fastest), scored but not re-ranked or refined. Either way
        with their posterior ``weights`` (:meth:`weighted`).

        Returns:
            A :class:`~taskextrap.estimators.base.Decomposition`: ``anchors`` (n, k, 3)
                candidate chains of three primitives, ``score`` (n, k) context losses, best first.
        """
        self.check_is_fitted()
        check_optional_int("refine", refine, 0)
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        cands = self.candidates(ctx_x, ctx_y, k)
        slots = [cands[:, j] for j in range(self.depth)]
        extras = {"candidates": cands}
        if not verify:
            kk = cands.shape[2]
            ranks = np.array(np.unravel_index(np.arange(min(self.keep, kk**self.depth)), (kk,) * self.depth)).T
            chains = np.stack([cands[:, j, ranks[:, j]] for j in range(self.depth)], axis=2)
            return self.weighted(_chains(chains, search.context_losses(self.primitives_, ctx_x, ctx_y, chains), extras))
        chains, loss = search.verify_chains(self.primitives_, ctx_x, ctx_y, slots, self.keep, device=self.device)
        return self.refined(ctx_x, ctx_y, _chains(chains, loss, extras), refine)

    def refined(self, ctx_x, ctx_y, d: Decomposition, rounds: int | None = None) -> Decomposition:
        """``d`` (a verified decomposition) after ``rounds`` (default ``refine_rounds``) of
        coordinate refinement over the library, with its posterior ``weights`` (:meth:`weighted`);
        lets a caller keep both without verifying twice."""
        self.check_is_fitted()
        rounds = self.resolved("refine_rounds") if rounds is None else check_int("rounds", rounds, 0)
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        self._check(d, len(ctx_x))
        if rounds <= 0:
            return self.weighted(d)
        chains, loss = search.refine_chains(self.primitives_, ctx_x, ctx_y, d.anchors, d.score, rounds)
        return self.weighted(_chains(chains, loss, d.extras))

    def _check(self, d, n):
        check_decomposition(d, n, len(self.primitives_), *self._decomposition_shape())

    def _true_candidates(self, targets: ChainSet, obs):
        """The true chains (n, depth) of training compositions ``targets`` (padded ones with the
        identity), no continuous part, and their composed curves' context MSE (n,), as verified."""
        chains = targets.chains[obs.task]
        loss = search.context_losses(self.primitives_, obs.ctx_x, obs.ctx_y, chains[:, None])[:, 0]
        return chains, np.zeros((len(chains), 0)), loss

    def context_loss(self, ctx_x, ctx_y, chains) -> np.ndarray:
        """MSE on the context (n, c) of chains (n, c, depth) composed from stored curves."""
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        chains = self._chains_of(chains, len(ctx_x), 3)
        return search.context_losses(self.primitives_, ctx_x, ctx_y, chains)

    def compose(self, x_query, chains) -> np.ndarray:
        """The chains' composition from stored curves, without Psi (the ``verified-composition``
        method): ``chains`` (n, depth) library indices outermost first, ``x_query`` (n, q)."""
        self.check_is_fitted()
        chains = self._chains_of(chains, None, 2)
        qry_x = check_query(x_query, len(chains))
        return search.chain_values(self.primitives_, qry_x, chains)

    def _chains_of(self, chains, n: int | None, ndim: int) -> np.ndarray:
        """``chains`` as library indices of shape (n, depth) or (n, c, depth)."""
        chains = as_index_array("chains", chains, len(self.primitives_))
        if chains.ndim != ndim or chains.shape[-1] != self.depth or (n is not None and len(chains) != n):
            want = f"({'n' if n is None else n}{', c' if ndim == 3 else ''}, {self.depth})"
            raise TaskextrapError(f"chains must have shape {want}, got {chains.shape}")
        return chains

    def decomposition_for(self, ctx_x, ctx_y, anchors, phi=None) -> Decomposition:
        """The decomposition naming chains ``anchors`` (n, depth) or (n, a, depth), outermost
        first (the oracle, the ablations)."""
        ctx_x, ctx_y, anchors = self._named_candidates(ctx_x, ctx_y, anchors, phi)
        n = len(ctx_x)
        if anchors.ndim not in (2, 3) or anchors.shape[0] != n or anchors.shape[-1] != self.depth:
            raise TaskextrapError(
                f"anchors must be chains of {self.depth} primitives, shape ({n}, {self.depth}) "
                f"or ({n}, a, {self.depth}); got {anchors.shape}"
            )
        anchors = anchors.reshape(n, -1, self.depth)
        return Decomposition.given(anchors, np.zeros((*anchors.shape[:2], 0)))

    def _decomposition_shape(self) -> tuple[tuple, tuple]:
        """A candidate is a chain of ``depth`` primitives with no continuous part."""
        return (self.depth,), (0,)

    def _predict_one(self, ctx_x, ctx_y, qry_x, anchors, phi) -> np.ndarray:
        """Psi_chain with the given chains (n, depth), outermost first."""
        chains = np.asarray(anchors, dtype=int).reshape(len(ctx_x), self.depth)
        cx, cy = sort_context(ctx_x, ctx_y)
        return self.psi_.predict(qry_x, chains, cx, cy)


def _chains(chains: np.ndarray, loss: np.ndarray, extras: dict) -> Decomposition:
    """A deep composition's decomposition: chains (n, c, depth), their context MSE (n, c)."""
    return Decomposition(np.asarray(chains, dtype=np.int64), np.zeros((*chains.shape[:2], 0)), loss, extras)
