"""Compositional RTE without meta-labels: EM over hidden (outer, inner) labels (beyond the paper;
the synthetic counterpart of App. B.2).

:class:`~taskextrap.estimators.composition.CompositionRTE` trains Psi_comp and the decomposer on
training compositions whose constituents are known. Here the training compositions are a fixed
set of observed tasks (context and query points, as a user's data would be) whose labels are
hidden, except for a share ``label_share`` that keeps them. The labels are inferred:

* **E-step**: each training task's pseudo-label is the library pair whose composed stored curves
  fit *all* its observed points best (verification against the library). Candidates come from the
  decomposer's top-k per slot when one is trained, then coordinate sweeps over the whole library
  (``CompositionRTE._refine``); before any training (the ``warm-up`` start) from random pairs and
  sweeps alone. A new label replaces the old one only when it fits the task better, so the labels'
  fit never worsens. Labelled tasks keep their true label.
* **M-step**: Psi_comp and the decomposer continue training on the pseudo-labelled tasks.

Every arm trains for the same total gradient steps as the supervised estimator: ``em_rounds``
M-steps of ``steps / em_rounds`` each (warm-starting the same networks). The starts differ: with
no labels (``label_share=0``) round 1 is preceded by a search-only E-step; with labels, the first
M-step trains on the labelled tasks alone. Validation tasks (model selection, calibration) are
pseudo-labelled the same way. Gamma is label-free and is fitted as in ``CompositionRTE``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import check_progress
from taskextrap.estimators.composition import CompositionRTE
from taskextrap.estimators.progress import FitProgress
from taskextrap.operators.parameter import sort_context
from taskextrap.search.chain_search import map_target_chunks
from taskextrap.search.decomposer import Decomposer
from taskextrap.seeding import derive_seed, rng
from taskextrap.validation import check_int, check_real

if TYPE_CHECKING:
    from taskextrap.tasks.observe import Observations
    from taskextrap.tasks.primitives import CompositionSet

LABEL_PAIRS = ("train", "any")  # what a pseudo-label may be: a training family pair, or any library pair
BEHAVES_TOL = 0.01  # a pseudo-label "behaves like" the truth: its composed curve's MSE <= 1% of the curve's variance


@dataclass
class PseudoLabels:
    """A fixed set of observed training compositions and their current labels.

    ``tasks``/``obs``: the compositions (true params for the leak audit and the label accuracy
    only) and one observation of each; ``labels`` (n, 2): current (outer, inner) labels;
    ``loss`` (n,): their fit to all observed points; ``known`` (n,): the labelled tasks.
    """

    tasks: CompositionSet
    obs: Observations
    labels: np.ndarray
    loss: np.ndarray
    known: np.ndarray

    @property
    def x(self) -> np.ndarray:
        """Every observed input of each task (context, then queries)."""
        return np.concatenate([self.obs.ctx_x, self.obs.qry_x], axis=1)

    @property
    def y(self) -> np.ndarray:
        """Every observed output of each task, in the order of :attr:`x`."""
        return np.concatenate([self.obs.ctx_y, self.obs.qry_y], axis=1)


@dataclass(eq=False)
class EMCompositionRTE(CompositionRTE):
    """``CompositionRTE`` fitted with hidden labels (module docstring).

    Args (besides ``CompositionRTE``'s):
        label_share: share of training tasks whose true (outer, inner) label is kept (0: none, the
            warm-up arm; 0.25: the semi-supervised arm; 1: the fixed-set supervised ceiling).
        n_tasks: size of the fixed training set (its validation set has a tenth as many, at least 64);
            the default is the composition-em experiment's under the paper profile (as many as
            ``n_pairs``, one pass of the supervised estimator's Psi pairs).
        em_rounds: M-steps (each ``steps / em_rounds`` of both optimisers); an E-step precedes
            every M-step but a labelled start's first.
        restarts, sweeps: the search-only E-step's random starting pairs per task and its rounds of
            coordinate sweeps.
        label_pairs: which library pairs a pseudo-label may be: "train" (default), pairs whose
            family pair is one of ``split.train``, as every supervised label is, so no M-step
            trains on a held-out family pair; "any": every library pair (the held-out family pairs
            too; the older runs' E-step, kept to reproduce them).

    Examples:
        Half of the training compositions keep their labels; EM labels the rest:

        >>> import numpy as np
        >>> from taskextrap.estimators.composition_em import EMCompositionRTE
        >>> from taskextrap.operators.train import TrainConfig
        >>> from taskextrap.tasks.primitives import PrimitiveSet
        >>> prims = PrimitiveSet.sample(n_per_family=8, rng=np.random.default_rng(0))
        >>> small = TrainConfig(steps=5, batch=64)
        >>> em = EMCompositionRTE(n_pairs=64, k=3, n_tasks=40, em_rounds=2, label_share=0.5,
        ...                       train=small, decomposer_train=small, verbose=False).fit(prims)
        >>> len(em.history_) >= 1  # each round's label quality
        True
    """

    label_share: float = 0.0
    n_tasks: int = 10000
    em_rounds: int = 3
    restarts: int = 4
    sweeps: int = 3

    saveable = True
    label_pairs: str = "train"

    def _settings(self) -> dict:
        """The base class's checks, and this estimator's own arguments'."""
        settings = super()._settings()
        if self.label_pairs not in LABEL_PAIRS:
            raise TaskextrapError(f"label_pairs must be one of {', '.join(LABEL_PAIRS)}, got {self.label_pairs!r}")
        check_real("label_share", self.label_share, 0.0, 1.0)
        check_int("n_tasks", self.n_tasks, 2)
        check_int("em_rounds", self.em_rounds, 1)
        if 0.0 < self.label_share < 1.0 and self.em_rounds < 2:  # round 1 trains on the labelled tasks alone
            raise TaskextrapError(
                f"with label_share={self.label_share} the hidden labels are first inferred in round 2: "
                "give em_rounds >= 2 (or label_share=0, whose round 1 starts with an E-step)"
            )
        check_int("restarts", self.restarts, 1)
        check_int("sweeps", self.sweeps, 1)
        return settings

    # ----------------------------------------------------------------------------- phase 1
    def fit(self, primitives, progress=None, embedded: CompositionRTE | None = None):
        """Gamma (or, with ``embedded``, the label-free state of a fitted ``CompositionRTE`` of the
        same library, protocol, embedding and seed: pools, scaler, Gamma), then EM.

        Returns:
            estimator (EMCompositionRTE): The estimator itself, fitted: as :class:`CompositionRTE`, plus ``sets_``
                (the fixed training and validation sets with their final pseudo-labels),
                ``history_`` (each round's label quality) and ``steps_``.
        """
        check_progress(progress)
        t0 = time.perf_counter()
        self._resolve()  # (again in _adopt: a fit's first step either way)
        steps = lambda cfg: replace(cfg, steps=max(1, math.ceil(cfg.steps / self.em_rounds)))  # noqa: E731
        total = self.em_rounds * (steps(self.train).steps + steps(self.decomposer_train).steps)
        with FitProgress(self.verbose, total, progress, type(self).__name__) as bar:
            if embedded is not None:
                self._adopt(embedded, primitives)
            else:
                tasks, scale = self._prepare(primitives)
                bar.phase("embedding library")
                self._fit_embedding(tasks, scale)
            bar.phase("drawing the training set")
            self.sets_ = {name: self._hidden_set(pool, n, name) for name, pool, n in self._fixed_sets()}
            self.history_ = []
            self.psi_ = self._make_operator().to(self.device)
            self.psi_.cfg = steps(self.train)  # each M-step continues the same network for its share
            decomposer = None
            self.steps_ = {"psi": 0, "decomposer": 0}
            hidden = not self.sets_["train"].known.all()
            for r in range(self.em_rounds):
                if hidden and (r > 0 or not self.label_share):
                    bar.phase(f"round {r + 1}/{self.em_rounds}: E-step (pseudo-labels)")
                    for s in self.sets_.values():
                        self._e_step(s, decomposer)
                    self.history_.append(self.label_quality(self.sets_["train"]))
                bar.phase(f"round {r + 1}/{self.em_rounds}: training Psi")
                self.psi_.fit(*self._batches("psi", r), bar.callback)
                if decomposer is None:
                    decomposer = Decomposer(
                        self.scaler_,
                        self.protocol_.n_context,
                        self._part_dims(),
                        derive_seed(self.seed, "decomposer"),
                        steps(self.decomposer_train),
                    ).to(self.device)
                bar.phase(f"round {r + 1}/{self.em_rounds}: training decomposer")
                decomposer.fit(*self._batches("decomposer", r), bar.callback)
                self.steps_["psi"] += len(self.psi_.history)
                self.steps_["decomposer"] += len(decomposer.history)
                self.decomposer_ = decomposer  # decompose() is usable from the first M-step on
            bar.phase("calibrating")
            self.loss_scale_, self.query_var_ = self._calibrate()
        self.timing_ = {"fit_s": time.perf_counter() - t0}
        return self

    def fitted_state(self) -> tuple[dict, dict]:
        """CompositionRTE's state, and the EM's own: each fixed set's final labels and their loss,
        each round's label quality (``history_``) and the steps each network took."""
        arrays, meta = super().fitted_state()
        for name, s in self.sets_.items():
            arrays[f"em.{name}.labels"], arrays[f"em.{name}.loss"] = s.labels, s.loss
        for r, quality in enumerate(self.history_):
            arrays |= {f"em.history.{r}.{k}": np.asarray(v) for k, v in quality.items()}
        meta["em"] = {"history": [sorted(q) for q in self.history_], "steps": self.steps_}
        return arrays, meta

    def restore(self, primitives, arrays: dict, meta: dict):
        """CompositionRTE's restore, and the fixed sets drawn again from the seed (the same draws)
        with their saved labels, the history and the step counts."""
        super().restore(primitives, arrays, meta)
        self.sets_ = {}
        for name, pool, n in self._fixed_sets():
            s = self._hidden_set(pool, n, name)
            s.labels, s.loss = arrays[f"em.{name}.labels"], arrays[f"em.{name}.loss"]
            self.sets_[name] = s
        self.history_ = [
            {k: arrays[f"em.history.{r}.{k}"] for k in keys} for r, keys in enumerate(meta["em"]["history"])
        ]
        self.steps_ = dict(meta["em"]["steps"])
        return self

    def _fixed_sets(self) -> tuple[tuple[str, np.ndarray, int], ...]:
        """(name, pool, size) of the fixed training sets: ``n_tasks`` training compositions, and a
        tenth as many (at least 64) validation ones."""
        return ("train", self.train_pool_, self.n_tasks), ("val", self.val_pool_, max(64, self.n_tasks // 10))

    def _adopt(self, fitted: CompositionRTE, primitives) -> None:
        """Take the label-free state (library, pools, scaler, Gamma) of a fitted CompositionRTE."""
        fitted.check_is_fitted()
        self._resolve()
        same = ("protocol", "split", "embedding", "embed_dim", "library_draws", "val_fraction", "seed", "device")
        if fitted.primitives_ is not primitives or any(fitted.resolved(a) != self.resolved(a) for a in same):
            raise TaskextrapError(
                f"embedded must be a CompositionRTE fitted on the same library with the same {', '.join(same)}"
            )
        for a in (
            "primitives_",
            "composer_",
            "noise_scale_",
            "noise_sd_",
            "val_pool_",
            "train_pool_",
            "scaler_",
            "embedding_",
            "z_library_",
        ):
            setattr(self, a, getattr(fitted, a))

    def _hidden_set(self, pool, n: int, name: str) -> PseudoLabels:
        """``n`` training compositions of ``pool`` observed once; a ``label_share`` of them labelled."""
        g = rng(self.seed, "em", name)
        tasks, obs = self.draw_training_tasks(pool, n, g)
        known = np.zeros(n, bool)
        known[g.permutation(n)[: round(self.label_share * n)]] = True
        labels = np.stack([tasks.outer, tasks.inner], axis=1)  # read only where known
        s = PseudoLabels(tasks, obs, np.where(known[:, None], labels, -1), np.full(n, np.inf), known)
        s.loss[known] = self.context_loss_at(s.x[known], s.y[known], s.labels[known, :1], s.labels[known, 1:])[:, 0]
        return s

    def _e_step(self, s: PseudoLabels, decomposer) -> None:
        """Re-label the unlabelled tasks of ``s``: keep each new label that fits its task better."""
        todo = np.flatnonzero(~s.known)
        if len(todo) == 0:
            return
        x, y = s.x[todo], s.y[todo]
        if decomposer is None:  # search only: random starting pairs, each swept on its own
            g = rng(self.seed, "em-starts", len(self.history_))
            size = len(self.primitives_)
            starts = [g.integers(size, size=(len(todo), 2, 1)) for _ in range(self.restarts)]
            rounds = self.sweeps
        else:  # the decomposer's top-k of each slot, from the context only, as at test time
            outer_c, inner_c = self.candidates(s.obs.ctx_x[todo], s.obs.ctx_y[todo])
            kk = outer_c.shape[1]
            starts = [np.stack([np.repeat(outer_c, kk, axis=1), np.tile(inner_c, (1, kk))], axis=1)]
            rounds = max(1, self.sweeps - 1)
        allowed = self.allowed_pairs()
        parts = map_target_chunks(
            lambda sl: self._best_of_starts(x[sl], y[sl], [p[sl] for p in starts], rounds, allowed),
            len(x),
            x.shape[1],
            len(self.primitives_),
        )
        best, loss = (np.concatenate(a) for a in zip(*parts, strict=True))
        keep = loss < s.loss[todo]
        s.labels[todo[keep]], s.loss[todo[keep]] = best[keep], loss[keep]

    def _best_of_starts(self, x, y, starts, rounds, allowed) -> tuple[np.ndarray, np.ndarray]:
        """The best refined pair (n, 2) of tasks ``x``, ``y`` over every start (n, 2, c) and its loss (n,)."""
        best, loss = np.zeros((len(x), 2), int), np.full(len(x), np.inf)
        fam = self.primitives_.family
        at_inner = self.inner_points(x)  # the same for every start
        for pairs in starts:
            o, i = pairs[:, 0], pairs[:, 1]
            start_loss = self.context_loss_at(x, y, o, i)
            if allowed is not None:  # a disallowed start is never column 0 when an allowed one exists
                start_loss = np.where(allowed[fam[o], fam[i]], start_loss, np.inf)
            order = np.argsort(start_loss, axis=1, kind="stable")  # _refine starts from column 0
            o, i, start_loss = (np.take_along_axis(a, order, 1) for a in (o, i, start_loss))
            ro, ri, rl = self._refine(x, y, o, i, start_loss, rounds, allowed, at_inner)
            better = rl[:, 0] < loss
            best[better] = np.stack([ro[:, 0], ri[:, 0]], axis=1)[better]
            loss[better] = rl[better, 0]
        return best, loss

    def allowed_pairs(self) -> np.ndarray | None:
        """(families x families) bool, outer first: the family pairs a pseudo-label may have
        (``label_pairs="train"``: the split's training pairs); None for "any"."""
        return None if self.label_pairs == "any" else self._training_pairs()

    def _training_pairs(self) -> np.ndarray:
        """(families x families) bool, outer first: the split's training family pairs."""
        names = [f.name for f in self.primitives_.families]
        mask = np.zeros((len(names), len(names)), bool)
        for outer, inner in self.split.train:
            mask[names.index(outer), names.index(inner)] = True
        return mask

    def context_loss_at(self, x, y, outer, inner) -> np.ndarray:
        """MSE (n, c) of composed stored curves of pairs (n, c) at any points ``x`` (n, m)."""
        xs = np.broadcast_to(x[:, None, :], (*outer.shape, x.shape[1]))
        return ((self.primitives_.compose_interp(outer, inner, xs) - y[:, None, :]) ** 2).mean(axis=2)

    def _batches(
        self, name: str, r: int
    ) -> tuple[Callable[[np.random.Generator], audit.Batch], audit.Batch, np.random.Generator]:
        """(batch maker, validation arrays, rng) for model ``name`` in round ``r`` on the tasks
        :meth:`_trusted` in that round."""
        arrays = self._psi_arrays if name == "psi" else self._g_arrays
        n = self.n_pairs if name == "psi" else self.decomposer_train.batch
        train, val = self.sets_["train"], self.sets_["val"]
        val_idx = np.flatnonzero(self._trusted(val, r) & (val.labels[:, 0] >= 0))
        if len(val_idx) == 0:
            raise TaskextrapError("no labelled validation task: raise label_share or n_tasks")
        pick = np.flatnonzero(self._trusted(train, r) & (train.labels[:, 0] >= 0))
        return (
            (lambda g: arrays(train, pick[g.integers(len(pick), size=n)])),
            arrays(val, val_idx),
            rng(self.seed, f"{name}-em-batches", r),
        )

    def _trusted(self, s: PseudoLabels, r: int) -> np.ndarray:
        """The tasks of ``s`` whose labels round ``r`` trains on: only the known ones in the first
        round of a run given some labels, every pseudo-label after an E-step."""
        return s.known if (r == 0 and self.label_share) else np.ones(len(s.labels), bool)

    def _source(self, s: PseudoLabels, idx, checks) -> list:
        """The audit source of a batch: the true tasks behind its arrays (never their labels)."""
        return [audit.Source(s.tasks.family, s.obs.params[idx], checks)]

    def _psi_arrays(self, s: PseudoLabels, idx) -> audit.Batch:
        o = s.obs.subset(idx)
        cx, cy = sort_context(o.ctx_x, o.ctx_y)
        return audit.Batch(
            (o.qry_x, s.labels[idx, 0], s.labels[idx, 1], cx, cy, o.qry_y),
            self._source(s, idx, ((0, 5, 0.0), (3, 4, 8.0 * self.noise_sd_))),
        )

    def _g_arrays(self, s: PseudoLabels, idx) -> audit.Batch:
        o = s.obs.subset(idx)
        parts = np.concatenate([self.z_library_[s.labels[idx, 0]], self.z_library_[s.labels[idx, 1]]], 1)
        return audit.Batch((o.ctx_x, o.ctx_y, parts), self._source(s, idx, ((0, 1, 8.0 * self.noise_sd_),)))

    def _calibrate(self, n: int | None = None) -> tuple[float, float]:
        """(mean context loss, mean squared query error of Psi) of the validation tasks' pseudo-labels."""
        s = self.sets_["val"]
        audit.record_fit("calibration", s.obs.params, s.tasks.family, stage="val")
        o = s.obs
        loss = self.context_loss(o.ctx_x, o.ctx_y, s.labels[:, :1], s.labels[:, 1:])[:, 0]
        pred = self._predict_one(o.ctx_x, o.ctx_y, o.qry_x, s.labels, np.zeros((len(s.labels), 0)))
        tiny = np.finfo(float).tiny
        return max(float(np.mean(loss)), tiny), max(float(np.mean((pred - o.qry_y) ** 2)), tiny)

    def label_quality(self, s: PseudoLabels) -> dict:
        """How the unlabelled tasks' current labels compare with the truth (the only use of it):
        ``exact`` (the same library pair), ``behaves`` (the composed curve, on a 200-point grid
        of the domain, within :data:`BEHAVES_TOL` of the true curve's variance) and
        ``held_out_pair`` (the label's family pair is not a training pair; 0 under ``label_pairs="train"``)."""
        todo = np.flatnonzero(~s.known)
        truth = np.stack([s.tasks.outer, s.tasks.inner], axis=1)[todo]
        got = s.labels[todo]
        grid = np.broadcast_to(np.linspace(*self.primitives_.domain, 200), (len(todo), 200))
        t = self.primitives_.compose_interp(truth[:, :1], truth[:, 1:], grid[:, None])[:, 0]
        p = self.primitives_.compose_interp(got[:, :1], got[:, 1:], grid[:, None])[:, 0]
        behaves = ((p - t) ** 2).mean(axis=1) <= BEHAVES_TOL * np.maximum(t.var(axis=1), 1e-12)
        fam = self.primitives_.family
        held = ~self._training_pairs()[fam[got[:, 0]], fam[got[:, 1]]]
        return {
            "exact": (got == truth).all(axis=1).astype(float),
            "behaves": behaves.astype(float),
            "held_out_pair": held.astype(float),
        }
