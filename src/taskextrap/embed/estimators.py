"""Proxy embedding estimators Gamma: one interface, three estimators.

Every estimator maps a task's observed points (its context) to a vector; ``ProxyEmbedding``
then projects with PCA and normalises to unit length. The probe and the PCA are fitted on
library (training-region) observations only, and every task, library task or target, is
embedded from observations drawn the same way.

* ``gradient`` (the authors' code): one loss gradient at a probe pretrained on the library.
* ``fisher`` (Task2Vec): diagonal empirical Fisher, the mean of squared per-point gradients at
  the pretrained probe.
* ``adapted`` (the paper's Appendix G.1): a probe from a shared Xavier init is adapted for a
  few Adam steps to the observed points; the embedding is the weight displacement, i.e. the
  gradients accumulated along the adaptation ("the weights themselves" of G.1). The gradient at
  the adapted weights was measured too and ranks tasks far worse (it only holds the residual
  misfit of an almost-fitted probe), so it is not offered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.func import grad, vmap

from taskextrap import audit
from taskextrap.embed.probe import Params, flatten, init_probe, probe_loss
from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.lanes import map_lanes
from taskextrap.seeding import rng, torch_generator
from taskextrap.validation import (
    as_float_array,
    check_context,
    check_device,
    check_finite_result,
    check_instance,
    check_int,
    check_real,
    describe,
)

# Tasks per vectorised batch. Every task's numbers are independent of the chunk it is in (each is
# its own batched matmul), so this is a speed setting only: 256 keeps a chunk's per-task
# parameter tensors (256 x 4.3k floats, 4.4 MB) in cache, faster than 2048 for ``adapted``
# (benchmarks/results/kernels.json).
CHUNK = 256
# On a GPU one chunk is one set of kernel launches per adaptation step whatever its tasks: the
# whole width at once (a task's embedding does not depend on its chunk: tests/test_speed.py).
GPU_CHUNK = 1 << 14


# The parameter regime's bounds on Gamma's fit (issue 65; ``estimators.library_fit`` passes them,
# the discrete regimes fit unbounded as before): the pre-training reads at most this many library
# points per Adam step (a fresh uniform sample of that size beyond it), and the PCA is fitted on
# at most PCA_ROWS contexts, so both cost the same at any library size. Every committed parameter
# run is below them (the paper's 200 tasks: 12,800 grid points, 800 contexts; the real-data
# suite's at most 153 tasks), so their Gammas are the unbounded ones, bit for bit.
PRETRAIN_POINTS = 1 << 14
PCA_ROWS = 1 << 14


def _pretrain(x: torch.Tensor, y: torch.Tensor, width: int, steps: int, seed: int, most: int | None = None) -> Params:
    """Fit one probe to the library's points (Adam; all of them per step, or with ``most`` a
    seeded sample of that many per step beyond it), on the device of ``x`` (initialised on the
    CPU, so the same start on every device)."""
    p = {
        k: v.to(x.device).requires_grad_()
        for k, v in init_probe(width, torch_generator(seed, "probe"), xavier=True).items()
    }
    opt = torch.optim.Adam(p.values(), lr=1e-2)
    batches = _point_batches(len(x), steps, seed, x.device, most)
    for _ in range(steps):
        opt.zero_grad()
        idx = next(batches)
        (probe_loss(p, x, y) if idx is None else probe_loss(p, x[idx], y[idx])).backward()
        opt.step()
    return {k: v.detach() for k, v in p.items()}


def _point_batches(n: int, steps: int, seed: int, device: torch.device, most: int | None):
    """The points each pre-training step reads: None (all ``n``) up to ``most`` (None: always),
    else uniform draws of that many (with replacement, from the stream ``probe-batches``), made on
    the CPU a block of steps at a time and moved once per block (no host round trip per step)."""
    if most is None or n <= most:
        while True:
            yield None
    g = torch_generator(seed, "probe-batches")
    block = 16
    for start in range(0, steps, block):
        rows = torch.randint(n, (min(block, steps - start), most), generator=g).to(device)
        yield from rows


def _per_task_gradient(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return flatten(vmap(grad(probe_loss), in_dims=(None, 0, 0))(p, x, y))


def _per_task_fisher(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    def point_loss(params, xi, yi):
        return probe_loss(params, xi[None], yi[None])

    per_point = vmap(vmap(grad(point_loss), in_dims=(None, 0, 0)), in_dims=(None, 0, 0))(p, x, y)
    return flatten(per_point).pow(2).mean(dim=1)


def _per_task_adapted(p0: Params, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float) -> torch.Tensor:
    """Adapt a copy of p0 to each task with Adam (vectorised over tasks); return the displacement.

    Adam runs on one flat (tasks, n_params) tensor per state with preallocated buffers: the same
    elementwise operations in the same order as ``torch.optim.Adam``'s textbook form (so the same
    bits), in a few passes over memory instead of one allocation per parameter and operation."""
    n = x.shape[0]
    names, shapes = list(p0), [v.shape for v in p0.values()]
    sizes = [v.numel() for v in p0.values()]
    flat0 = flatten(p0)
    flat = flat0.expand(n, -1).clone()
    p = {k: v.view(n, *s) for k, v, s in zip(names, flat.split(sizes, dim=1), shapes, strict=True)}  # views into flat
    m, s, step, scale = (torch.zeros_like(flat), torch.zeros_like(flat), torch.empty_like(flat), torch.empty_like(flat))
    g_fn = vmap(grad(probe_loss), in_dims=(0, 0, 0))
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        g = flatten(g_fn(p, x, y))
        m.mul_(b1).add_(g, alpha=1 - b1)
        s.mul_(b2).addcmul_(g, g, value=1 - b2)
        torch.div(m, 1 - b1**t, out=step).mul_(lr)  # lr * m_hat
        torch.div(s, 1 - b2**t, out=scale).sqrt_().add_(eps)  # sqrt(v_hat) + eps
        flat.sub_(step.div_(scale))
    return flat - flat0


@dataclass
class ProxyEmbedding:
    """Gamma: observed points -> unit vector in a ``dim``-dimensional proxy space.

    Args:
        method: "adapted", "gradient" or "fisher".
        dim: PCA components kept.
        width: probe hidden width.
        pretrain_steps: full-batch Adam steps of the shared probe (gradient, fisher).
        adapt_steps, adapt_lr: per-task adaptation (adapted).
        seed: probe initialisation.
        device: where the probe runs ("cpu", "cuda", "cuda:N"); embeddings come back as numpy.
        bounded: fit on bounded samples, so the fit costs the same at any library size: at most
            :data:`PRETRAIN_POINTS` points per pre-training step and :data:`PCA_ROWS` contexts
            for the PCA (seeded samples beyond them; the parameter regime's RTE sets it).

    Inputs are expected already normalised (x in about [-1, 1], y with unit spread).
    """

    method: str = "adapted"
    dim: int = 16
    width: int = 64
    pretrain_steps: int = 500
    adapt_steps: int = 50
    adapt_lr: float = 1e-2
    seed: int = 0
    device: str = "cpu"
    bounded: bool = False
    probe_: Params | None = field(default=None, init=False, repr=False)
    pca_: Any = field(default=None, init=False, repr=False)  # a fitted sklearn PCA
    # The last few transforms by input bytes: an experiment embeds the same target contexts for
    # several methods (decompositions, ablations, the t2v baseline); each is computed once.
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # The raw outputs the PCA was fitted on, kept for the next projection only: a library is
    # embedded right after the fit on the same contexts (Strategy B's library embeddings), and
    # for ``adapted`` Gamma that second pass was half of the embedding time.
    _fit_raw: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        check_embedding(self.method)
        check_int("dim", self.dim, 1)
        check_int("width", self.width, 1)
        check_int("pretrain_steps", self.pretrain_steps, 0)
        check_int("adapt_steps", self.adapt_steps, 0)
        check_real("adapt_lr", self.adapt_lr, 0.0, min_open=True)
        check_int("seed", self.seed, 0)
        check_instance("bounded", self.bounded, bool, "True or False")
        self.device = check_device(self.device)

    def fit(
        self,
        ctx_x: np.ndarray,
        ctx_y: np.ndarray,
        params: np.ndarray | None = None,
        pretrain_x: np.ndarray | None = None,
        pretrain_y: np.ndarray | None = None,
    ) -> ProxyEmbedding:
        """Fit the probe (on ``pretrain_x/y``, default the contexts) and the PCA (on the contexts),
        from already normalised arrays.

        ``params`` (true parameters of the context rows, optional) are passed to the leak audit
        as given, and separate ``pretrain_x/y`` as unlabelled: arrays without a family cannot be
        verified. Library fits use :meth:`fit_observed`, which reports what it consumes from the
        data itself.
        """
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        if params is not None:
            params = as_float_array("params", params)
            if params.ndim != 2 or len(params) != len(ctx_x):
                raise TaskextrapError(f"params must have one row per context ({len(ctx_x)}), got shape {params.shape}")
        if (pretrain_x is None) != (pretrain_y is None):
            raise TaskextrapError("pretrain_x and pretrain_y go together: pass both or neither")
        if pretrain_x is not None:
            pretrain_x = as_float_array("pretrain_x", pretrain_x)
            pretrain_y = as_float_array("pretrain_y", pretrain_y)
            if pretrain_x.shape != pretrain_y.shape or pretrain_x.size == 0:
                raise TaskextrapError(
                    f"pretrain_x and pretrain_y must have one equal, non-empty shape, "
                    f"got {pretrain_x.shape} and {pretrain_y.shape}"
                )
        contexts = audit.Batch((ctx_x, ctx_y), [] if params is None else [audit.Source(None, np.asarray(params))])
        pretrain = None if pretrain_x is None else audit.Batch((pretrain_x, pretrain_y))
        return self._fit(contexts, pretrain, None)

    def fit_observed(self, scaler, tasks, obs, m: int = 64, noise_sd: float = 0.0) -> ProxyEmbedding:
        """Fit on a library: the probe pretrained on the curves of ``tasks`` over an ``m``-point grid
        of the domain, the PCA on the contexts of ``obs`` (draws of ``tasks``); ``scaler``
        normalises both. Each reaches the leak audit as a batch whose arrays are verified against
        the tasks it names (contexts within ``noise_sd`` times 8, the protocol's noise).
        """
        grid = np.broadcast_to(tasks.family.grid(m), (len(tasks), m))
        curves = audit.Batch((grid, tasks.values(grid)), [audit.Source(tasks.family, tasks.params, ((0, 1, 0.0),))])
        contexts = audit.Batch(
            (obs.ctx_x, obs.ctx_y, obs.qry_x, obs.qry_y),
            [audit.Source(tasks.family, obs.params, ((0, 1, 8.0 * noise_sd), (2, 3, 0.0)))],
        )
        return self._fit(contexts, curves, scaler)

    def _fit(self, contexts: tuple, pretrain: tuple | None, scaler) -> ProxyEmbedding:
        """The fit itself: each batch is reported to the leak audit where it is consumed;
        ``scaler`` (None: arrays already normalised) maps x and y before fitting."""
        from sklearn.decomposition import PCA

        sx = (lambda a: a) if scaler is None else scaler.x
        sy = (lambda a: a) if scaler is None else scaler.y
        if not GAMMAS[self.method].pretrained:
            self.probe_ = {
                k: v.to(self.device)
                for k, v in init_probe(self.width, torch_generator(self.seed, "probe"), xavier=True).items()
            }
        else:
            px, py = audit.consume("probe", contexts if pretrain is None else pretrain)[:2]
            self.probe_ = _pretrain(
                self._tensor(sx(px)).reshape(-1),
                self._tensor(sy(py)).reshape(-1),
                self.width,
                self.pretrain_steps,
                self.seed,
                PRETRAIN_POINTS if self.bounded else None,
            )
        self._memo.clear()
        cx, cy = audit.consume("pca", contexts)[:2]
        cx, cy = check_context(sx(cx), sy(cy))
        rows = _pca_rows(len(cx), self.seed) if self.bounded else slice(None)
        raw = check_finite_result(
            "the probe's output",
            self.raw(cx[rows], cy[rows]),
            "the library contexts",
            "are too large for the float32 probe",
        )
        self.pca_ = PCA(n_components=min(self.dim, *raw.shape), random_state=self.seed % 2**32).fit(raw)
        self._fit_raw = (_memo_key(cx, cy), raw) if len(raw) == len(cx) else None
        return self

    PCA_ARRAYS = ("components_", "mean_", "explained_variance_", "explained_variance_ratio_", "singular_values_")
    PCA_SCALARS = ("n_components_", "n_features_in_", "n_samples_", "noise_variance_")

    def state(self, prefix: str = "") -> tuple[dict, dict]:
        """The fitted embedding as named arrays (the probe's weights, the PCA's fitted arrays,
        each name after ``prefix``) and plain settings, for a safetensors file (:meth:`from_state`
        rebuilds it)."""
        if self.pca_ is None or self.probe_ is None:
            raise TaskextrapError("ProxyEmbedding is not fitted")
        arrays = {f"{prefix}probe.{k}": v.cpu().numpy() for k, v in self.probe_.items()}
        arrays |= {f"{prefix}pca.{k}": getattr(self.pca_, k) for k in self.PCA_ARRAYS}
        meta = {
            "settings": {
                k: getattr(self, k)
                for k in (
                    "method",
                    "dim",
                    "width",
                    "pretrain_steps",
                    "adapt_steps",
                    "adapt_lr",
                    "seed",
                    "device",
                    "bounded",
                )
            },
            "probe_order": list(self.probe_),  # flatten's layout follows the dict's order
            "pca": {
                k: getattr(self.pca_, k).item() if hasattr(getattr(self.pca_, k), "item") else getattr(self.pca_, k)
                for k in self.PCA_SCALARS
            },
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict, meta: dict, prefix: str = "") -> ProxyEmbedding:
        """The embedding :meth:`state` saved (under ``prefix``): the same weights and PCA, so the
        same transform."""
        from sklearn.decomposition import PCA

        emb = cls(**meta["settings"])
        probe = meta["probe_order"]
        emb.probe_ = {k: torch.from_numpy(arrays[f"{prefix}probe.{k}"].copy()).to(emb.device) for k in probe}
        pca = PCA(n_components=meta["pca"]["n_components_"], random_state=emb.seed % 2**32)
        for k in cls.PCA_ARRAYS:
            setattr(pca, k, arrays[f"{prefix}pca.{k}"].copy(order="K"))  # the saved layout (read_state keeps it)
        for k, v in meta["pca"].items():
            setattr(pca, k, np.float64(v) if k == "noise_variance_" else v)
        emb.pca_ = pca
        return emb

    def raw(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> np.ndarray:
        """High-dimensional estimator output (n, n_params) before PCA."""
        if self.probe_ is None:
            raise TaskextrapError("ProxyEmbedding is not fitted")
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)

        def chunk(i: int) -> torch.Tensor:  # a task's output does not depend on its chunk
            with torch.no_grad():
                x, y = self._tensor(ctx_x[i : i + size]), self._tensor(ctx_y[i : i + size])
                return GAMMAS[self.method].per_task(self, x, y).cpu()

        size = CHUNK if torch.device(self.device).type == "cpu" else GPU_CHUNK
        return torch.cat(map_lanes(chunk, range(0, len(ctx_x), size), self.device)).double().numpy()

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        """A numpy array as a float32 tensor on the probe's device."""
        return torch.as_tensor(a, dtype=torch.float32, device=torch.device(self.device))

    def project(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> np.ndarray:
        """The PCA projection before normalisation, shape (n, dim): coordinates for a map of the
        proxy space (``experiments.manifolds``), where unit length would bend lines into arcs."""
        if self.pca_ is None:
            raise TaskextrapError("ProxyEmbedding is not fitted")
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        kept, self._fit_raw = self._fit_raw, None  # the fit's raw outputs serve one projection at most
        if kept is not None and kept[0] == _memo_key(ctx_x, ctx_y):
            return self.pca_.transform(kept[1])
        # Beyond PCA_ROWS contexts the raw outputs (4k floats a context) are projected a block at
        # a time, so memory stays (contexts x dim); below, in one call, as the committed runs were.
        block = PCA_ROWS if self.bounded and len(ctx_x) > PCA_ROWS else len(ctx_x)
        return np.concatenate(
            [
                self.pca_.transform(
                    check_finite_result(
                        "the probe's output",
                        self.raw(ctx_x[i : i + block], ctx_y[i : i + block]),
                        "ctx_x or ctx_y",
                        "are too large for the float32 probe (it expects normalised values)",
                    )
                )
                for i in range(0, len(ctx_x), block)
            ]
        )

    def transform(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> np.ndarray:
        """Gamma(context): PCA projection normalised to unit length, shape (n, dim). Contexts
        embedded recently (the same bytes) are answered from a small memo, as a copy."""
        if self.pca_ is None:
            raise TaskextrapError("ProxyEmbedding is not fitted")
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        key = _memo_key(ctx_x, ctx_y)
        if key not in self._memo:
            z = self.project(ctx_x, ctx_y)
            self._memo[key] = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-8)
            while len(self._memo) > MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))
        return self._memo[key].copy()


MEMO_SIZE = 4  # transforms a ProxyEmbedding remembers (the newest)


def _pca_rows(n: int, seed: int) -> np.ndarray | slice:
    """The contexts the PCA is fitted on: all ``n`` up to :data:`PCA_ROWS`, else a sorted uniform
    sample of that many (the stream ``pca-rows``)."""
    if n <= PCA_ROWS:
        return slice(None)
    return np.sort(rng(seed, "pca-rows").choice(n, PCA_ROWS, replace=False))


def _memo_key(*arrays) -> tuple:
    """A key of arrays' exact contents: shape, dtype and a hash of their bytes."""
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.data)
    return h.hexdigest(), tuple(np.shape(a) for a in arrays)


@dataclass(frozen=True)
class Gamma:
    """One registered Gamma estimator: ``per_task(embedding, x, y)`` maps a chunk of normalised
    contexts (n, k) to per-task vectors (n, n_params) at ``embedding.probe_``; ``pretrained``
    says whether that probe is first pretrained on the library's curves (else a shared Xavier
    init)."""

    per_task: Callable
    pretrained: bool


# The registry of Gamma estimators: adding one is one entry here (the CLI, ``taskextrap list``
# and every regime read their names from it).
GAMMAS: dict[str, Gamma] = {
    "adapted": Gamma(lambda e, x, y: _per_task_adapted(e.probe_, x, y, e.adapt_steps, e.adapt_lr), pretrained=False),
    "gradient": Gamma(lambda e, x, y: _per_task_gradient(e.probe_, x, y), pretrained=True),
    "fisher": Gamma(lambda e, x, y: _per_task_fisher(e.probe_, x, y), pretrained=True),
}
EMBEDDINGS = tuple(GAMMAS)


def check_embedding(name: str) -> str:
    """``name`` if it is a known Gamma estimator; a one-line TaskextrapError otherwise."""
    if name not in EMBEDDINGS:
        raise TaskextrapError(
            f"unknown embedding {describe(name)}; choose from {sorted(EMBEDDINGS)}" + did_you_mean(name, EMBEDDINGS)
        )
    return name


def mean_per_task(z: np.ndarray, task: np.ndarray, n_tasks: int) -> np.ndarray:
    """Average embeddings of several draws of each task (library embeddings), re-normalised."""
    out = np.zeros((n_tasks, z.shape[1]))
    np.add.at(out, task, z)
    out /= np.maximum(np.bincount(task, minlength=n_tasks), 1)[:, None]
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-8)


def fit_library_embedding(
    method: str,
    dim: int,
    seed: int,
    scaler,
    library,
    obs,
    m: int = 64,
    noise_sd: float = 0.0,
    device: str = "cpu",
    bounded: bool = False,
) -> ProxyEmbedding:
    """Gamma for a library: the probe pretrained on the library's curves over an ``m``-point grid
    of the domain, the PCA fitted on the library's observed contexts ``obs`` (scaled by ``scaler``;
    ``noise_sd`` is the protocol's context noise, for the leak audit's verification).

    ``library`` is any task set with ``family.grid``, ``values`` and ``params`` (training tasks
    only). ``bounded``: :class:`ProxyEmbedding`'s.
    """
    return ProxyEmbedding(method, dim=dim, seed=seed, device=device, bounded=bounded).fit_observed(
        scaler, library, obs, m=m, noise_sd=noise_sd
    )
