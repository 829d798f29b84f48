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

from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import grad, vmap

from taskextrap import audit
from taskextrap.embed.probe import Params, flatten, init_probe, probe_loss
from taskextrap.errors import TaskextrapError
from taskextrap.seeding import torch_generator

CHUNK = 2048  # tasks per vectorised batch: bounds memory at about CHUNK * n_params * 16 bytes


def _pretrain(x: torch.Tensor, y: torch.Tensor, width: int, steps: int, seed: int) -> Params:
    """Fit one probe to all library points at once (full batch, Adam)."""
    p = {k: v.requires_grad_() for k, v in init_probe(width, torch_generator(seed, "probe"), xavier=True).items()}
    opt = torch.optim.Adam(p.values(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        probe_loss(p, x, y).backward()
        opt.step()
    return {k: v.detach() for k, v in p.items()}


def _per_task_gradient(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return flatten(vmap(grad(probe_loss), in_dims=(None, 0, 0))(p, x, y))


def _per_task_fisher(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    def point_loss(params, xi, yi):
        return probe_loss(params, xi[None], yi[None])

    per_point = vmap(vmap(grad(point_loss), in_dims=(None, 0, 0)), in_dims=(None, 0, 0))(p, x, y)
    return flatten(per_point).pow(2).mean(dim=1)


def _per_task_adapted(p0: Params, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float) -> torch.Tensor:
    """Adapt a copy of p0 to each task with Adam (vectorised over tasks); return the displacement."""
    n = x.shape[0]
    p = {k: v.expand(n, *v.shape).clone() for k, v in p0.items()}
    m = {k: torch.zeros_like(v) for k, v in p.items()}
    s = {k: torch.zeros_like(v) for k, v in p.items()}
    g_fn = vmap(grad(probe_loss), in_dims=(0, 0, 0))
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        g = g_fn(p, x, y)
        for k in p:
            m[k].mul_(b1).add_(g[k], alpha=1 - b1)
            s[k].mul_(b2).addcmul_(g[k], g[k], value=1 - b2)
            p[k] -= lr * (m[k] / (1 - b1**t)) / ((s[k] / (1 - b2**t)).sqrt() + eps)
    return flatten(p) - flatten(p0)


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

    Inputs are expected already normalised (x in about [-1, 1], y with unit spread).
    """

    method: str = "adapted"
    dim: int = 16
    width: int = 64
    pretrain_steps: int = 500
    adapt_steps: int = 50
    adapt_lr: float = 1e-2
    seed: int = 0
    probe_: Params | None = field(default=None, init=False, repr=False)
    pca_: object = field(default=None, init=False, repr=False)

    def __post_init__(self):
        check_embedding(self.method)

    def fit(self, ctx_x: np.ndarray, ctx_y: np.ndarray, params: np.ndarray,
            pretrain_x: np.ndarray | None = None, pretrain_y: np.ndarray | None = None) -> "ProxyEmbedding":
        """Fit the probe (on ``pretrain_x/y``, library points) and the PCA (on library contexts).

        ``params`` are the true parameters of the library draws, reported to the leak audit.
        """
        from sklearn.decomposition import PCA

        audit.record_fit("embedding", params)
        if self.method == "adapted":
            self.probe_ = init_probe(self.width, torch_generator(self.seed, "probe"), xavier=True)
        else:
            if pretrain_x is None:
                pretrain_x, pretrain_y = ctx_x, ctx_y
            self.probe_ = _pretrain(torch.as_tensor(pretrain_x, dtype=torch.float32).reshape(-1),
                                    torch.as_tensor(pretrain_y, dtype=torch.float32).reshape(-1),
                                    self.width, self.pretrain_steps, self.seed)
        raw = self.raw(ctx_x, ctx_y)
        self.pca_ = PCA(n_components=min(self.dim, *raw.shape), random_state=self.seed % 2**32).fit(raw)
        return self

    def raw(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> np.ndarray:
        """High-dimensional estimator output (n, n_params) before PCA."""
        if self.probe_ is None:
            raise TaskextrapError("ProxyEmbedding is not fitted")
        out = []
        with torch.no_grad():
            for i in range(0, len(ctx_x), CHUNK):
                x = torch.as_tensor(ctx_x[i:i + CHUNK], dtype=torch.float32)
                y = torch.as_tensor(ctx_y[i:i + CHUNK], dtype=torch.float32)
                if self.method == "gradient":
                    out.append(_per_task_gradient(self.probe_, x, y))
                elif self.method == "fisher":
                    out.append(_per_task_fisher(self.probe_, x, y))
                else:
                    out.append(_per_task_adapted(self.probe_, x, y, self.adapt_steps, self.adapt_lr))
        return torch.cat(out).double().numpy()

    def transform(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> np.ndarray:
        """Gamma(context): PCA projection normalised to unit length, shape (n, dim)."""
        if self.pca_ is None:
            raise TaskextrapError("ProxyEmbedding is not fitted")
        z = self.pca_.transform(self.raw(ctx_x, ctx_y))
        return z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-8)


EMBEDDINGS = ("adapted", "gradient", "fisher")


def check_embedding(name: str) -> str:
    """``name`` if it is a known Gamma estimator; a one-line TaskextrapError otherwise."""
    if name not in EMBEDDINGS:
        raise TaskextrapError(f"unknown embedding {name!r}; choose from {sorted(EMBEDDINGS)}")
    return name


def mean_per_task(z: np.ndarray, task: np.ndarray, n_tasks: int) -> np.ndarray:
    """Average embeddings of several draws of each task (library embeddings), re-normalised."""
    out = np.zeros((n_tasks, z.shape[1]))
    np.add.at(out, task, z)
    out /= np.maximum(np.bincount(task, minlength=n_tasks), 1)[:, None]
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-8)


def fit_library_embedding(method: str, dim: int, seed: int, scaler, library, obs, m: int = 64) -> ProxyEmbedding:
    """Gamma for a library: the probe pretrained on the library's curves over an ``m``-point grid
    of the domain, the PCA fitted on the library's observed contexts ``obs`` (scaled by ``scaler``).

    ``library`` is any task set with ``family.grid``, ``values`` and ``params`` (training tasks only).
    """
    grid = np.broadcast_to(library.family.grid(m), (len(library), m))
    emb = ProxyEmbedding(method, dim=dim, seed=seed)
    return emb.fit(scaler.x(obs.ctx_x), scaler.y(obs.ctx_y), obs.params,
                   pretrain_x=scaler.x(grid), pretrain_y=scaler.y(library.values(grid)))
