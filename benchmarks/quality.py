"""Benchmark helper: how well a proxy embedding ranks true parameter distances (used to choose the default Gamma).

Measured on training-region *validation* tasks only: fresh F1 tasks, embedded from one context
draw each, are compared with the library; for each one the Spearman correlation between proxy
distance and true (range-normalised) parameter distance to every library task is computed.
"""

from __future__ import annotations

import numpy as np

from taskextrap.estimators.parameter import RTE
from taskextrap.search.index import nearest
from taskextrap.seeding import rng
from taskextrap.tasks.regimes import get_protocol
from taskextrap.tasks.taskset import TaskSet


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Spearman correlation of two (n, m) arrays, ties given their average rank: the
    Pearson correlation of ``scipy.stats.rankdata(method="average")`` ranks, row by row
    (``scipy.stats.spearmanr`` of each pair of rows, vectorised over the rows)."""
    from scipy import stats

    ra = stats.rankdata(a, method="average", axis=1)
    rb = stats.rankdata(b, method="average", axis=1)
    return stats.pearsonr(ra, rb, axis=1).statistic


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
    val = TaskSet.sample(
        family,
        {r: n_val // len(family.train_regions) for r in family.train_regions},
        rng(seed, family.name, "validation"),
    )
    obs = protocol.draw(val, 1, rng(seed, family.name, "validation-draws"), rte.noise_scale_)
    z = rte.embed(obs.ctx_x, obs.ctx_y)
    d_proxy = np.linalg.norm(z[:, None] - rte.z_library_[None], axis=2)
    t_val, t_lib = family.scaled_params(val.params), family.scaled_params(library.params)
    d_theta = np.linalg.norm(t_val[:, None] - t_lib[None], axis=2)
    d_shift = np.abs(t_val[:, None, 0] - t_lib[None, :, 0])
    top5 = nearest(t_val, t_lib, 5)[0]
    nn = nearest(z, rte.z_library_, 1)[0][:, 0]
    return {
        "rho_theta": float(spearman_rows(d_proxy, d_theta).mean()),
        "rho_shift": float(spearman_rows(d_proxy, d_shift).mean()),
        "nn_top5": float((top5 == nn[:, None]).any(1).mean()),
    }
