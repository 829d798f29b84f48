"""Benchmark helper: how well a proxy embedding ranks true parameter distances (used to choose the default Gamma).

Measured on training-region *validation* tasks only: fresh F1 tasks, embedded from one context
draw each, are compared with the library; for each one the Spearman correlation between proxy
distance and true (range-normalised) parameter distance to every library task is computed.
"""

from __future__ import annotations

import numpy as np

from taskextrap.estimators.parameter import RTE
from taskextrap.seeding import rng
from taskextrap.tasks.observe import get_protocol
from taskextrap.tasks.taskset import TaskSet


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Spearman correlation of two (n, m) arrays (ties broken by order)."""
    ra = np.argsort(np.argsort(a, axis=1), axis=1).astype(float)
    rb = np.argsort(np.argsort(b, axis=1), axis=1).astype(float)
    ra -= ra.mean(1, keepdims=True)
    rb -= rb.mean(1, keepdims=True)
    return (ra * rb).sum(1) / np.sqrt((ra**2).sum(1) * (rb**2).sum(1))


def ranking_quality(family, protocol="paper", method="gradient", seed=0, n_library=100, n_val=200) -> dict:
    """Spearman(proxy distance, parameter distance) of validation F1 tasks to the library.

    Returns the mean over validation tasks for the full parameter vector (``rho_theta``) and for
    the shifted parameter alone (``rho_shift``), and how often the proxy nearest neighbour is
    among the 5 nearest by true parameters (``nn_top5``).
    """
    protocol = get_protocol(protocol)
    library = TaskSet.sample(family, {r: n_library for r in family.train_regions}, rng(seed, family.name, "library"))
    # Gamma only (Psi is not needed here), fitted on library draws as in a full RTE fit.
    rte = RTE(protocol=protocol, embedding=method, n_pairs=len(library) * 4, seed=seed).fit_embedding(library)
    val = TaskSet.sample(family, {r: n_val // len(family.train_regions) for r in family.train_regions},
                         rng(seed, family.name, "validation"))
    obs = protocol.draw(val, 1, rng(seed, family.name, "validation-draws"), rte.noise_scale_)
    z = rte.embed(obs.ctx_x, obs.ctx_y)
    d_proxy = np.linalg.norm(z[:, None] - rte.z_library_[None], axis=2)
    t_val, t_lib = family.scaled_params(val.params), family.scaled_params(library.params)
    d_theta = np.linalg.norm(t_val[:, None] - t_lib[None], axis=2)
    d_shift = np.abs(t_val[:, None, 0] - t_lib[None, :, 0])
    top5 = np.argsort(d_theta, axis=1)[:, :5]
    nn = np.argmin(d_proxy, axis=1)
    return {"rho_theta": float(_spearman_rows(d_proxy, d_theta).mean()),
            "rho_shift": float(_spearman_rows(d_proxy, d_shift).mean()),
            "nn_top5": float((top5 == nn[:, None]).any(1).mean())}
