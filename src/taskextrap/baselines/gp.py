"""A Gaussian process on the target's context alone (``ctx-gp``): the first baseline a
machine-learning reader expects beside a method that predicts a function from a few points.

Each target gets its own GP (scikit-learn's ``GaussianProcessRegressor``): a constant times a
stationary kernel plus white noise, every hyper-parameter chosen by the marginal likelihood of
that target's context points alone. Nothing is learned from the library, so nothing can leak;
it is a context-only fit like ``ctx-polyfit``, with a predictive interval of its own.

Inputs are rescaled to the context's span and outputs standardised before the fit (the
length-scale bounds then mean the same for every family); the predictions are mapped back.
The predictive sd is the latent function's (the fitted white noise is left out): the queries
are the noiseless curve.
"""

from __future__ import annotations

import warnings

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import derive_seed
from taskextrap.validation import check_context, check_int, check_query

__all__ = ["DEFAULT_KERNEL", "GP_KERNELS", "ctx_gp"]

GP_KERNELS = ("rbf", "matern52", "rbf+linear")  # the kernel families compared on the dev split
# Chosen on the parameter regime's dev split, both protocols (benchmarks/gp_dev.py,
# benchmarks/results/ctx-gp-dev.json): MSE over the best kernel of each (family, protocol), as a
# geometric mean: rbf+linear 1.10, rbf 1.51, matern52 3.58.
DEFAULT_KERNEL = "rbf+linear"


def _kernel(name: str):
    """A fresh kernel of family ``name`` (amplitude x shape + white noise), for inputs on [0, 1]."""
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, DotProduct, Matern, WhiteKernel

    amplitude = ConstantKernel(1.0, (1e-3, 1e3))
    noise = WhiteKernel(1e-2, (1e-8, 1.0))
    if name == "rbf":
        return amplitude * RBF(0.3, (1e-2, 1e2)) + noise
    if name == "matern52":
        return amplitude * Matern(0.3, (1e-2, 1e2), nu=2.5) + noise
    if name == "rbf+linear":
        return (
            amplitude * RBF(0.3, (1e-2, 1e2)) + ConstantKernel(0.1, (1e-3, 1e2)) * DotProduct(1.0, (1e-3, 1e2)) + noise
        )
    raise TaskextrapError(f"unknown GP kernel {name!r}; choose from {', '.join(GP_KERNELS)}")


def ctx_gp(ctx_x, ctx_y, qry_x, kernel: str = "rbf", restarts: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A GP fitted on each target's context alone, at the queries.

    Args:
        ctx_x, ctx_y: the contexts (n, k), k >= 2 points per target, in any order.
        qry_x: the query inputs (n, q), or one row (q,) shared by every target.
        kernel: the kernel family, one of :data:`GP_KERNELS` (default: the one chosen on the
            dev split, :data:`DEFAULT_KERNEL`).
        restarts: extra starts of the marginal-likelihood optimiser (from random hyper-parameters).
        seed: seeds the restarts (target i uses its own stream), so the result is reproducible.

    Returns:
        (mean, sd): the predictive mean and the latent function's predictive sd, both (n, q).

    Examples:
        >>> import numpy as np
        >>> from taskextrap.baselines.gp import ctx_gp
        >>> x = np.linspace(-1, 1, 8)[None]
        >>> mean, sd = ctx_gp(x, np.sin(3 * x), np.array([[0.0, 0.1]]))
        >>> bool(np.abs(mean - np.sin(3 * np.array([[0.0, 0.1]]))).max() < 0.05), bool((sd >= 0).all())
        (True, True)
    """
    x, y = check_context(ctx_x, ctx_y)
    if x.shape[1] < 2:
        raise TaskextrapError(f"ctx-gp needs at least 2 context points per target, got {x.shape[1]}")
    q = check_query(qry_x, x.shape[0], "qry_x")
    check_int("restarts", restarts, 0)
    _kernel(kernel)  # an unknown name fails here, before any fit
    mean, sd = np.empty(q.shape), np.empty(q.shape)
    for i in range(len(x)):
        mean[i], sd[i] = _fit_one(x[i], y[i], q[i], kernel, restarts, derive_seed(seed, "ctx-gp", i))
    return mean, sd


def _fit_one(x: np.ndarray, y: np.ndarray, q: np.ndarray, kernel: str, restarts: int, seed: int):
    """(mean, latent sd) at ``q`` of one target's GP, fitted on its rescaled context."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor

    order = np.lexsort((y, x))  # a set of points: the fit must not depend on their order
    x, y = x[order], y[order]
    lo, span = x.min(), max(float(np.ptp(x)), 1e-12)
    centre, scale = y.mean(), max(float(y.std()), 1e-12)
    gp = GaussianProcessRegressor(_kernel(kernel), n_restarts_optimizer=restarts, random_state=seed % (2**32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a bound reached is a fit, not an error
        gp.fit(((x - lo) / span)[:, None], (y - centre) / scale)
    m, s = gp.predict(((q - lo) / span)[:, None], return_std=True)
    noise = gp.kernel_.k2.noise_level  # the fitted white noise: the queries are noiseless
    latent = np.sqrt(np.maximum(s**2 - noise, 0.0))
    return centre + scale * m, scale * latent
