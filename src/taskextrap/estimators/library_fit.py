"""What a parameter-regime fit learns from its library before Psi (Phase 1a), and how a fit is
shared and kept: the base of ``estimators.parameter.RTE``.

Phase 1a: the library's scaler and noise scale, its draws observed through the protocol
(``operators.pairs``), Gamma fitted on them and each library task's proxy. A second fit of the same
library and :data:`PHASE1A_SETTINGS` adopts the first's Phase 1a (``fit(..., embedded=...)``),
and an estimator of the same settings adopts a whole fit (``_adopt_fit``: the chained RTE of
parameter-multistep); ``fitted_state`` / ``restore`` save the fit as arrays and load it back.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from taskextrap.embed import ProxyEmbedding, fit_library_embedding, mean_per_task
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Estimator, check_is_fitted
from taskextrap.operators.pairs import Draws, observe_library, validation_split
from taskextrap.scaling import FamilyScaler
from taskextrap.seeding import derive_seed
from taskextrap.tasks.observe import Observations, noise_scale
from taskextrap.tasks.taskset import TaskSet
from taskextrap.validation import check_finite_result, check_instance

# What Phase 1a (scaler, library draws, Gamma, library embeddings) reads: two RTEs that agree on
# these share it (``fit(..., embedded=...)``); the search, Psi and inference settings may differ.
PHASE1A_SETTINGS = ("protocol", "embedding", "n_pairs", "library_draws", "val_fraction", "embed_dim", "seed", "device")


class LibraryFit(Estimator):
    """Phase 1a of a parameter-regime fit, its sharing and its persistence. A subclass (``RTE``)
    is a dataclass with the arguments read here, makes its Psi (:meth:`_make_psi`) and says which
    settings a whole fit depends on (:meth:`fit_settings`)."""

    # Declared for the type checker only: the subclass's constructor arguments and fitted
    # attributes that Phase 1a reads or sets.
    embedding: str
    embed_dim: int
    anchors: int
    n_pairs: int
    library_draws: int
    val_fraction: float
    seed: int
    device: str
    library_: TaskSet
    draws_: Draws
    embedding_: Any
    z_library_: np.ndarray
    train_tasks_: np.ndarray
    noise_scale_: float
    timing_: dict
    psi_: Any
    query_var_: float
    loss_scale_: float | None

    def fit_settings(self) -> list[str]:
        """The settings two estimators must share for one to adopt the other's whole fit."""
        raise NotImplementedError

    def _make_psi(self) -> Any:
        """Psi, untrained, on the estimator's device (``restore`` loads its weights)."""
        raise NotImplementedError

    def fit_embedding(self, library: TaskSet) -> LibraryFit:
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

    def _adopt(self, fitted: LibraryFit, library: TaskSet) -> None:
        """Phase 1a of ``fitted`` (same library, same :data:`PHASE1A_SETTINGS`, same way of
        embedding the library), taken over as it is; a one-line error otherwise."""
        check_instance("embedded", fitted, LibraryFit, "a fitted RTE")
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

    def restore(self, library: TaskSet, arrays: dict, meta: dict) -> LibraryFit:
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

    def _adopt_fit(self, fitted: LibraryFit, library: TaskSet) -> None:
        """Every fitted attribute of ``fitted``, an estimator of the same kind fitted on
        ``library`` with the same settings of :class:`RTE` (a subclass such as ``ChainedRTE``
        adds inference settings only, so a plain RTE's fit is its fit); a one-line error otherwise."""
        check_instance("fitted", fitted, LibraryFit, "a fitted RTE")
        fitted.check_is_fitted()
        self._resolve()
        same = [a for a in self.fit_settings() if fitted.resolved(a) != self.resolved(a)]
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
        obs = observe_library(library, self.protocol_, per_task, self.seed, self.noise_scale_)
        first = np.tile(np.arange(per_task) < self.library_draws, n)
        if z is None:
            z = self._fit_descriptors(library, obs, first)
        elif z.shape[0] != len(obs.ctx_x):
            raise TaskextrapError(
                f"the saved state embeds {z.shape[0]} library draws, this library has {len(obs.ctx_x)}"
            )
        self.z_library_ = mean_per_task(z[first], obs.task[first], n)
        self.train_tasks_, val = validation_split(n, self.val_fraction, self.seed, obs.task)
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
            bounded=True,  # a fit that costs the same at any library size (issue 65)
        )
        return self.embed(obs.ctx_x, obs.ctx_y)

    def embed(self, ctx_x, ctx_y) -> np.ndarray:
        """Gamma of each context (n, dim): computed from the context points only."""
        check_is_fitted(self, "embedding_")
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        z = self.embedding_.transform(self.scaler_.x(ctx_x), self.scaler_.y(ctx_y))
        return check_finite_result("the embedding", z, "ctx_x or ctx_y")
