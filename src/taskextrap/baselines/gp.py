"""Gaussian-process baselines, the first a machine-learning reader expects beside a method that
predicts a function from a few points:

* ``ctx-gp`` (:func:`ctx_gp`): a GP on each target's context alone, every hyper-parameter chosen
  by the marginal likelihood of that target's context points. Nothing is learned from the
  library, so nothing can leak; a context-only fit like ``ctx-polyfit``, with an interval.
* ``meta-gp`` (:class:`MetaGP`): one GP prior, its mean function and kernel fitted on the
  library's tasks by their summed marginal likelihood (empirical Bayes over the library), then
  conditioned on each target's context.

Both are exact GPs written in torch and batched over targets: thousands of small GPs (5-16
points each) are one batched Cholesky per optimiser step instead of one scikit-learn fit each
(60-120 ms per target, hours per ``paper`` table). The kernels are scikit-learn's: amplitude x
RBF or Matern-5/2 (+ a constant x DotProduct linear part for ``rbf+linear``) + white noise, with
scikit-learn's bounds; a test checks the marginal likelihood and the predictions against
``sklearn.gaussian_process`` at the same hyper-parameters. The optimiser is Adam on the
log-hyper-parameters (projected onto the bounds) from scikit-learn's starting values and
``restarts`` random ones, the best marginal likelihood kept per target.

The predictive sd is the latent function's (the fitted white noise left out): the queries are
the noiseless curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from taskextrap.errors import TaskextrapError
from taskextrap.lanes import lanes, map_lanes
from taskextrap.seeding import derive_seed, rng
from taskextrap.validation import check_context, check_int, check_query, check_real

__all__ = ["DEFAULT_KERNEL", "GP_KERNELS", "MetaGP", "ctx_gp", "gp_nll", "gp_predict", "gp_predict_basis"]

GP_KERNELS = ("rbf", "matern52", "rbf+linear")  # the kernel families compared on the dev split
# Chosen on the parameter regime's dev split, both protocols (benchmarks/gp_dev.py,
# benchmarks/results/ctx-gp-dev.json): MSE relative to the best kernel of each (family,
# protocol), as a geometric mean: rbf+linear 1.03, rbf 1.43, matern52 2.08.
DEFAULT_KERNEL = "rbf+linear"
OPTIMIZERS = ("adam", "lbfgs")  # a fixed budget of Adam steps, or L-BFGS to convergence (ctx-gp and meta-gp)

# Each hyper-parameter's starting value and bounds (scikit-learn's kernels as ctx-gp builds them).
HYPER = {
    "amplitude": (1.0, (1e-3, 1e3)),
    "length": (0.3, (1e-2, 1e2)),
    "noise": (1e-2, (1e-6, 1.0)),  # scikit-learn's lower bound is 1e-8; 1e-6 keeps every Cholesky finite
    "linear": (0.1, (1e-3, 1e2)),
    "offset": (1.0, (1e-3, 1e2)),
}
JITTER = 1e-10  # scikit-learn's ``alpha``: added to the diagonal of every Gram matrix
# A Gram matrix that does not factor gets JITTER_RETRY x its mean diagonal, x10 per try (_cholesky)
JITTER_RETRY, JITTER_TRIES = 1e-8, 4
# Adam on the log-hyper-parameters; 300 steps at 0.1 reach scikit-learn's optimum (mean NLL within 0.1
# nats: tests/baselines/test_gp.py), where 200 at 0.05 fell 0.2-0.5 nats short on dev contexts (a check by hand).
FIT_STEPS, FIT_LR = 300, 0.1
# Batched L-BFGS (fit_hyper_lbfgs): at most LBFGS_ITER iterations, stopping on the objective's
# relative change LBFGS_TOL or the gradient's largest entry LBFGS_GTOL; LBFGS_HISTORY curvature
# pairs; up to LBFGS_BACKTRACK halvings of the step per line search.
LBFGS_ITER, LBFGS_TOL, LBFGS_GTOL, LBFGS_HISTORY, LBFGS_BACKTRACK = 200, 1e-9, 1e-6, 10, 30
_LINE_BATCH = 2048  # a line search's trial points per evaluation once few problems are left (_backtrack)


def check_optimizer(optimizer: str) -> str:
    """``optimizer`` if it is one of :data:`OPTIMIZERS`, else a one-line error."""
    if optimizer not in OPTIMIZERS:
        raise TaskextrapError(f"optimizer must be one of {list(OPTIMIZERS)}, got {optimizer!r}")
    return optimizer


def standardised_context(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Contexts (n, k) as :func:`ctx_gp` fits them: each row's points sorted (a set of points: the
    fit must not depend on their order), x mapped to [0, 1] over the row's span, y standardised.

    Returns:
        (x, y, lo, span, centre, scale): the mapped inputs and outputs (n, k), and each row's
        offsets and scales (n, 1) that map queries in and predictions back.
    """
    order = np.lexsort((y, x), axis=-1)
    x, y = np.take_along_axis(x, order, 1), np.take_along_axis(y, order, 1)
    lo, span = x.min(1, keepdims=True), np.maximum(np.ptp(x, 1, keepdims=True), 1e-12)
    centre, scale = y.mean(1, keepdims=True), np.maximum(y.std(1, keepdims=True), 1e-12)
    return (x - lo) / span, (y - centre) / scale, lo, span, centre, scale


def hyper_names(kernel: str) -> tuple[str, ...]:
    """The hyper-parameters of kernel family ``kernel`` (a one-line error for an unknown one)."""
    if kernel not in GP_KERNELS:
        raise TaskextrapError(f"unknown GP kernel {kernel!r}; choose from {', '.join(GP_KERNELS)}")
    return ("amplitude", "length", "noise") + (("linear", "offset") if kernel == "rbf+linear" else ())


def _log_bounds(names, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lo = torch.tensor([math.log(HYPER[n][1][0]) for n in names], dtype=like.dtype, device=like.device)
    hi = torch.tensor([math.log(HYPER[n][1][1]) for n in names], dtype=like.dtype, device=like.device)
    return lo, hi


def gram(kernel: str, h: dict[str, torch.Tensor], a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The noise-free kernel matrix (B, n, m) between inputs ``a`` (B, n) and ``b`` (B, m); ``h``
    maps each hyper-parameter name to its values (B,)."""
    return _gram(kernel, h, a, b, _shape(kernel, h, a, b)[0])


def _gram(kernel: str, h: dict, a, b, shape: torch.Tensor) -> torch.Tensor:
    """:func:`gram` from its stationary part's ``shape`` (:func:`_shape`)."""
    k = h["amplitude"][:, None, None] * shape
    if kernel == "rbf+linear":
        k = k + h["linear"][:, None, None] * (h["offset"][:, None, None] ** 2 + a[:, :, None] * b[:, None, :])
    return k


def _shape(kernel: str, h, a, b) -> tuple[torch.Tensor, torch.Tensor]:
    """The stationary part's shape (B, n, m) and the scaled distances |a - b| / length it reads."""
    d = (a[:, :, None] - b[:, None, :]).abs() / h["length"][:, None, None]
    if kernel == "matern52":
        s = math.sqrt(5.0) * d
        return (1.0 + s + s * s / 3.0) * torch.exp(-s), d
    return torch.exp(-0.5 * d * d), d


def _inner(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sum_ij a_bij b_bij (B,) for (B, n, n) matrices, as one batched product (no (B, n, n) temporary)."""
    return (a.flatten(1)[:, None, :] @ b.flatten(1)[:, :, None])[:, 0, 0]


def _log_theta_grads(kernel: str, h: dict, x, shape, d, w: torch.Tensor, noisy) -> torch.Tensor:
    """0.5 * sum(w * dK/dlog theta_p) (B, P) for the Gram matrix of ``x`` (B, n) (its stationary
    part's ``shape`` and scaled distances ``d``: :func:`_shape`), in :func:`hyper_names`' order:
    the marginal likelihood's gradient when w = K^-1 - a a^T."""
    if kernel == "matern52":  # d shape / d log length, s = sqrt(5) d: s^2 / 3 (1 + s) exp(-s)
        s = math.sqrt(5.0) * d
        by_length = (s * s / 3.0) * (1.0 + s) * torch.exp(-s)
    else:  # exp(-d^2 / 2): d^2 exp(-d^2 / 2)
        by_length = shape * d * d
    amplitude = h["amplitude"]
    by = [amplitude * _inner(w, shape), amplitude * _inner(w, by_length)]
    by.append(h["noise"] * (torch.diagonal(w, dim1=1, dim2=2) * noisy).sum(1))  # the noise is diagonal
    if kernel == "rbf+linear":  # linear * (offset^2 + x x^T): by log linear, itself; by log offset, 2 linear offset^2
        total, xwx = w.sum((1, 2)), (x[:, None, :] @ w @ x[:, :, None])[:, 0, 0]
        by += [h["linear"] * (h["offset"] ** 2 * total + xwx), 2.0 * h["linear"] * h["offset"] ** 2 * total]
    return 0.5 * torch.stack(by, 1)


def _hyper(kernel: str, log_theta: torch.Tensor) -> dict[str, torch.Tensor]:
    return {n: log_theta[:, i].exp() for i, n in enumerate(hyper_names(kernel))}


def _factor(kernel, log_theta, x, noisy) -> tuple[dict, torch.Tensor]:
    """The hyper-parameters and the Cholesky factor of the Gram matrix of ``x`` (B, n), white
    noise on the points where ``noisy`` (B, n) is 1."""
    h = _hyper(kernel, log_theta)
    return h, _cholesky(h, gram(kernel, h, x, x), noisy)


def _cholesky(h: dict, k: torch.Tensor, noisy: torch.Tensor) -> torch.Tensor:
    """The Cholesky factor of the Gram matrix ``k`` plus the white noise where ``noisy`` is 1.

    A matrix that does not factor (noise-free points, such as meta-gp's query points, under a
    long length-scale and a large amplitude: L-BFGS's line search tries such points) is
    factored again with a jitter of ``JITTER_RETRY`` times its mean diagonal, ten times larger
    at each of ``JITTER_TRIES`` tries, as gpytorch's ``psd_safe_cholesky`` does; each matrix
    takes the first jitter it factors with (whatever its neighbours need), a matrix that
    factors is untouched (the same bits as before), one that never does is a one-line error."""
    k = k + torch.diag_embed(h["noise"][:, None] * noisy + JITTER)
    chol, info = torch.linalg.cholesky_ex(k)
    failed = info > 0
    if not bool(failed.any()):  # the common case; torch.linalg.cholesky read info on the host too
        return chol
    rows = torch.nonzero(failed)[:, 0]
    eye = torch.eye(k.shape[1], dtype=k.dtype, device=k.device)
    for i in range(JITTER_TRIES):
        bad = k[rows]
        scale = torch.diagonal(bad, dim1=1, dim2=2).mean(1)[:, None, None]
        fixed, info = torch.linalg.cholesky_ex(bad + (JITTER_RETRY * 10.0**i) * scale * eye)
        ok = info == 0
        chol = chol.index_put((rows[ok],), fixed[ok])
        rows = rows[~ok]
        if not len(rows):
            return chol
    most = JITTER_RETRY * 10.0 ** (JITTER_TRIES - 1)
    raise TaskextrapError(f"a GP's Gram matrix is not positive definite even with a jitter of {most:g} x its diagonal")


def gp_nll(kernel: str, log_theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, noisy=None) -> torch.Tensor:
    """The negative log marginal likelihood (B,) of values ``y`` at ``x`` (both (B, n); zero prior
    mean) under each row of ``log_theta`` (B, P): the log hyper-parameters of
    :func:`hyper_names`. ``noisy`` (B, n) marks the points with white noise (default: all).
    Differentiable in ``log_theta`` and ``y`` (not ``x``), by the closed form
    (:class:`_MarginalNLL`).

    Returns:
        torch.Tensor: one negative log marginal likelihood per row, (B,).
    """
    noisy = torch.ones_like(x) if noisy is None else noisy
    if x.requires_grad:
        raise TaskextrapError("gp_nll is not differentiable in the inputs x")
    return _MarginalNLL.apply(log_theta, x, y, noisy, kernel)


class _MarginalNLL(torch.autograd.Function):
    """The negative log marginal likelihood with its gradient in closed form: by log theta_p it
    is 0.5 * sum((K^-1 - a a^T) * dK/dlog theta_p) and by the values a = K^-1 y. Autograd
    through the Cholesky factor took up to twice as long for the same derivative (two dozen
    (B, n, n) element-wise kernels and the factor's backward; ``benchmarks/gp_step.py``), and
    ``meta-gp`` fits batches of 256 draws of 50-100 points thousands of times."""

    @staticmethod
    def forward(ctx, log_theta, x, y, noisy, kernel):
        chunks = _row_chunks(x)
        done = [_nll_parts(kernel, log_theta[s], x[s], y[s], noisy[s]) for s in chunks]
        ctx.kernel, ctx.chunks = kernel, chunks
        # each chunk's intermediates (the factor, a = K^-1 y, the kernel's shape and distances),
        # kept as they are: the backward reads them chunk by chunk, as the forward made them
        ctx.parts = [parts[1:] for _, parts in done]
        ctx.save_for_backward(log_theta, x, noisy)
        return _cat([f for f, _ in done])

    @staticmethod
    def backward(ctx, grad):
        if ctx.parts is None:  # freed by the first backward, as saved tensors are
            raise TaskextrapError("gp_nll's graph was already differentiated once; a second backward is not supported")
        log_theta, x, noisy = ctx.saved_tensors
        g_theta = None
        if ctx.needs_input_grad[0]:
            g_theta = _cat([
                _nll_theta_grad(ctx.kernel, x[s], noisy[s], (_hyper(ctx.kernel, log_theta[s]), *parts))
                for s, parts in zip(ctx.chunks, ctx.parts, strict=True)
            ]) * grad[:, None]  # fmt: skip
        g_y = _cat([parts[1] for parts in ctx.parts]) * grad[:, None] if ctx.needs_input_grad[2] else None
        ctx.parts = None  # the intermediates are freed with the graph's first backward
        return g_theta, None, g_y, None, None


# Rows per pass over the (B, n, n) arithmetic on a CPU: a thousand GPs of 5-16 points keep their
# temporaries in the cache, where one pass over a hundred thousand streams each of two dozen
# element-wise kernels through memory. At ctx-gp's size in a parameter unit (108,800 problems of
# 8 points, one thread; benchmarks/gp_chunks.py, gp-chunks.json) an evaluation takes 349 ms
# against 809 ms in one pass (2.3x; 512 to 4,096 rows within 8% of each other); the same bits,
# as every row is its own GP and no operation mixes rows. A GPU takes every row at once.
EVAL_CHUNK = 1024


def _row_chunks(x: torch.Tensor) -> list[slice]:
    """The row slices of ``x`` evaluated in one pass each (:data:`EVAL_CHUNK` on a CPU)."""
    size = EVAL_CHUNK if x.device.type == "cpu" else max(1, len(x))
    return [slice(i, i + size) for i in range(0, max(1, len(x)), size)]


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """The chunks' rows together (the one chunk itself, uncopied)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _nll_parts(kernel: str, log_theta, x, y, noisy) -> tuple[torch.Tensor, tuple]:
    """The negative log marginal likelihood (B,) and what its gradient reads: the
    hyper-parameters, the Gram matrix's Cholesky factor, a = K^-1 y and the kernel's ``shape``
    and scaled distances (:func:`_shape`)."""
    h = _hyper(kernel, log_theta)
    shape, d = _shape(kernel, h, x, x)
    chol = _cholesky(h, _gram(kernel, h, x, x, shape), noisy)
    alpha = torch.cholesky_solve(y[:, :, None], chol)[:, :, 0]
    logdet = torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
    return 0.5 * (y * alpha).sum(1) + logdet + 0.5 * x.shape[1] * math.log(2 * math.pi), (h, chol, alpha, shape, d)


def _nll_theta_grad(kernel: str, x, noisy, parts: tuple) -> torch.Tensor:
    """The gradient (B, P) of the negative log marginal likelihood in the log hyper-parameters,
    0.5 * sum((K^-1 - a a^T) * dK/dlog theta_p), from :func:`_nll_parts`' ``parts``."""
    h, chol, alpha, shape, d = parts
    # K^-1 = L^-T L^-1 by a triangular solve: torch.cholesky_inverse rounds a row differently
    # with its place in the batch (5 x 5 matrices on the CPU), which made a fit depend on its
    # neighbours; this one does not, and takes 8.6 ms against 10.5 for 27,200 5 x 5 factors (1 thread)
    eye = torch.eye(chol.shape[1], dtype=chol.dtype, device=chol.device).expand_as(chol)
    inv_l = torch.linalg.solve_triangular(chol, eye, upper=False)
    w = inv_l.transpose(1, 2) @ inv_l - alpha[:, :, None] * alpha[:, None, :]
    return _log_theta_grads(kernel, h, x, shape, d, w, noisy)


def _nll_value_grad(kernel: str, log_theta, x, y, noisy) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`gp_nll` and its gradient in ``log_theta`` (B, P), computed together without
    autograd's graph (the same numbers as ``gp_nll(...).sum()`` differentiated), a chunk of rows
    at a time (:data:`EVAL_CHUNK`)."""
    out = []
    for s in _row_chunks(x):
        f, parts = _nll_parts(kernel, log_theta[s], x[s], y[s], noisy[s])
        out.append((f, _nll_theta_grad(kernel, x[s], noisy[s], parts)))
    return _cat([f for f, _ in out]), _cat([g for _, g in out])


def gp_predict(kernel: str, log_theta, x, y, q, noisy=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The posterior mean and latent sd (B, m) at ``q`` (B, m) given values ``y`` at ``x`` (B, n),
    zero prior mean, hyper-parameters ``log_theta`` (B, P); ``noisy`` as in :func:`gp_nll`.

    Returns:
        tuple: (mean, sd), each (B, m).
    """
    noisy = torch.ones_like(x) if noisy is None else noisy
    h, chol = _factor(kernel, log_theta, x, noisy)
    cross = gram(kernel, h, x, q)  # (B, n, m)
    alpha = torch.cholesky_solve(y[:, :, None], chol)
    mean = (cross * alpha).sum(1)
    v = torch.linalg.solve_triangular(chol, cross, upper=False)
    prior = torch.diagonal(gram(kernel, h, q, q), dim1=1, dim2=2)
    return mean, (prior - (v * v).sum(1)).clamp_min(0.0).sqrt()


def legendre_basis(x: torch.Tensor, degree: int) -> torch.Tensor:
    """The Legendre polynomials P_0..P_degree at ``x`` (..., n) -> (..., degree + 1, n)."""
    rows = [torch.ones_like(x), x][: degree + 1]
    for j in range(1, degree):  # Bonnet's recursion: (j+1) P_{j+1} = (2j+1) x P_j - j P_{j-1}
        rows.append(((2 * j + 1) * x * rows[j] - j * rows[j - 1]) / (j + 1))
    return torch.stack(rows, -2)


def gp_predict_basis(kernel: str, log_theta, x, y, q, degree: int | None, noisy=None) -> tuple[torch.Tensor, ...]:
    """The posterior of a GP plus a polynomial of ``degree`` under a vague prior (Rasmussen &
    Williams, section 2.7: the coefficients are fitted to the values by generalised least
    squares, their uncertainty added to the sd), given values ``y`` at ``x`` (B, n), at ``q``
    (B, m); ``degree`` None: the zero-mean GP of :func:`gp_predict`.

    Returns:
        (mean, sd, quadratic): the posterior mean and latent sd (B, m), and each row's quadratic
        form (B,) of the values less the fitted polynomial under the GP (about n - degree - 1
        for values the GP could have drawn, larger for values it finds unlikely in scale).
    """
    noisy = torch.ones_like(x) if noisy is None else noisy
    h, chol = _factor(kernel, log_theta, x, noisy)
    cross = gram(kernel, h, x, q)  # (B, n, m)
    v = torch.linalg.solve_triangular(chol, cross, upper=False)
    var = torch.diagonal(gram(kernel, h, q, q), dim1=1, dim2=2) - (v * v).sum(1)
    resid, shift = y, torch.zeros_like(q)
    if degree is not None:
        hx, hq = legendre_basis(x, degree), legendre_basis(q, degree)  # (B, d, n), (B, d, m)
        k_inv_h = torch.cholesky_solve(hx.transpose(1, 2), chol)  # (B, n, d)
        a = hx @ k_inv_h  # (B, d, d)
        beta = torch.linalg.solve(a, (k_inv_h * y[:, :, None]).sum(1))  # (B, d)
        resid = y - (hx * beta[:, :, None]).sum(1)
        r = hq - k_inv_h.transpose(1, 2) @ cross  # (B, d, m)
        var = var + (r * torch.linalg.solve(a, r)).sum(1)
        shift = (hq * beta[:, :, None]).sum(1)
    alpha = torch.cholesky_solve(resid[:, :, None], chol)[:, :, 0]
    mean = (cross * alpha[:, :, None]).sum(1) + shift
    return mean, var.clamp_min(0.0).sqrt(), (resid * alpha).sum(1)


def fit_hyper(kernel: str, x, y, noisy, starts: torch.Tensor, steps: int = FIT_STEPS, lr: float = FIT_LR):
    """Adam on the log hyper-parameters of one GP per row of ``x``/``y`` (B, n) from each of
    ``starts`` (S, B, P) starting points, projected onto the bounds after every step; the start
    with the lowest final negative log marginal likelihood is kept per row.

    Returns:
        torch.Tensor: the fitted log hyper-parameters, (B, P).
    """
    n_starts, _, p = starts.shape
    lo, hi = _log_bounds(hyper_names(kernel), starts)
    theta = starts.reshape(-1, p).clone().requires_grad_(True)
    xs, ys, ns = _per_start(n_starts, x, y, noisy)
    opt = torch.optim.Adam([theta], lr=lr)
    for _ in range(steps):
        loss = gp_nll(kernel, theta, xs, ys, ns).sum()  # the rows are independent GPs
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            theta.copy_(_clip(theta, lo, hi))
    with torch.no_grad():
        return _best_start(theta.detach(), gp_nll(kernel, theta, xs, ys, ns), n_starts)


def fit_hyper_lbfgs(
    kernel: str, x, y, noisy, starts: torch.Tensor, max_iter: int = LBFGS_ITER, tol: float = LBFGS_TOL
) -> torch.Tensor:
    """L-BFGS on the log hyper-parameters of one GP per row of ``x``/``y`` (B, n) from each of
    ``starts`` (S, B, P) starting points, every (start, row) its own problem run to its own
    convergence; the start with the lowest negative log marginal likelihood is kept per row.

    Batched by hand, as ``torch.optim.LBFGS`` runs one problem: per iteration, a two-loop
    recursion per problem (``LBFGS_HISTORY`` pairs), then a backtracking Armijo line search per
    problem whose trial points are evaluated in blocks (``_backtrack``), each evaluation the
    marginal likelihood and its closed-form gradient (``_nll_value_grad``) batched over the
    problems not yet converged. The bounds are kept as Adam's fit keeps them,
    by projection: a trial point is clipped to the box, and a coordinate at a bound whose
    gradient pushes it outwards is held there (the projected gradient is 0). A problem stops when
    its objective changes by less than ``tol`` (relative to 1 + |f|), its projected gradient's
    largest entry is below ``LBFGS_GTOL``, or after ``max_iter`` iterations.

    Returns:
        torch.Tensor: the fitted log hyper-parameters, (B, P).
    """
    n_starts, _, p = starts.shape
    lo, hi = _log_bounds(hyper_names(kernel), starts)
    xs, ys, ns = _per_start(n_starts, x, y, noisy)
    z = _clip(starts.reshape(-1, p).clone(), lo, hi)

    def held(zz, gg):  # coordinates at a bound that the gradient pushes outwards
        return ((zz <= lo) & (gg > 0)) | ((zz >= hi) & (gg < 0))

    n = len(z)
    f, g = _nll_value_grad(kernel, z, xs, ys, ns)
    s_hist = z.new_zeros(LBFGS_HISTORY, n, p)
    y_hist = z.new_zeros(LBFGS_HISTORY, n, p)
    rho = z.new_zeros(LBFGS_HISTORY, n)  # 0: an empty (or skipped) pair
    gamma = z.new_ones(n)
    active = torch.arange(n, device=z.device)
    for it in range(max_iter):
        a = active
        za, fa, ga = z[a], f[a], g[a]
        data = (xs[a], ys[a], ns[a])  # the running problems' contexts, gathered once per iteration
        fixed = held(za, ga)
        pg = ga.masked_fill(fixed, 0.0)
        d = _two_loop(pg, s_hist[:, a], y_hist[:, a], rho[:, a], gamma[a], it % LBFGS_HISTORY, it)
        d = d.masked_fill(fixed, 0.0)
        bad = ~((d * pg).sum(1) < 0)  # not a descent direction (a bad curvature pair): steepest descent
        d[bad] = -pg[bad]
        step = torch.ones_like(fa) if it else 1.0 / pg.norm(dim=1).clamp_min(1.0)
        z_new, f_new, g_new = _backtrack(kernel, data, (za, fa, ga), d, step, (lo, hi))
        s_new, y_new = z_new - za, g_new - ga
        sy = (s_new * y_new).sum(1)
        slot = it % LBFGS_HISTORY
        keep = sy > 1e-10  # a pair with positive curvature only
        s_hist[slot, a], y_hist[slot, a] = s_new, y_new
        rho[slot, a] = torch.where(keep, 1.0 / sy.clamp_min(1e-10), torch.zeros_like(sy))
        gamma[a] = torch.where(keep, sy / (y_new * y_new).sum(1).clamp_min(1e-30), gamma[a])
        pg_new = g_new.masked_fill(held(z_new, g_new), 0.0)
        done = ((fa - f_new).abs() <= tol * (1.0 + f_new.abs())) | (pg_new.abs().amax(1) <= LBFGS_GTOL)
        z[a], f[a], g[a] = z_new, f_new, g_new
        active = a[~done]
        if not len(active):
            break
    return _best_start(z, f, n_starts)


def _per_start(n_starts: int, *rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each (B, n) input once per start, start-major: the (S * B, n) rows of every problem."""
    return tuple(t.repeat(n_starts, 1) if n_starts > 1 else t for t in rows)


def _best_start(theta: torch.Tensor, nll: torch.Tensor, n_starts: int) -> torch.Tensor:
    """The (B, P) rows of ``theta`` (S * B, P) whose start has the lowest objective ``nll`` per
    problem; a start whose objective is NaN never wins (the first of equals does)."""
    final = torch.nan_to_num(nll, nan=math.inf).reshape(n_starts, -1)
    b = final.shape[1]
    return theta.reshape(n_starts, b, -1)[final.argmin(0), torch.arange(b, device=theta.device)]


def _clip(z: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """``z`` projected onto the box [lo, hi] of the log hyper-parameters (NaN stays NaN)."""
    return torch.maximum(torch.minimum(z, hi), lo)


def _backtrack(kernel: str, data: tuple, at: tuple, d, step, bounds: tuple) -> tuple[torch.Tensor, ...]:
    """One projected Armijo line search per problem (``at``: the rows of ``z``, their objective
    ``f`` and gradient ``g``; direction ``d``; the box ``bounds`` (lo, hi) of the log
    hyper-parameters): the largest of ``step``, step / 2, step / 4, ...
    (``LBFGS_BACKTRACK`` trials in all) whose clipped point decreases the objective enough; a
    problem with none stays where it is. The halvings are tried in blocks, several per
    evaluation while few problems are left (one batched evaluation costs about the same for
    ten problems as for one), and the first that passes is taken, so the point is the one a
    search trying them one at a time would reach.

    Returns:
        (z, f, g) at the accepted points.
    """
    (z, f, g), (lo, hi) = at, bounds
    z_new, f_new, g_new = z.clone(), f.clone(), g.clone()
    todo = torch.arange(len(z), device=z.device)
    tried = 0
    while len(todo) and tried < LBFGS_BACKTRACK:
        # halvings per problem in this block: one while the problems fill a batch, more as they thin
        block = min(LBFGS_BACKTRACK - tried, max(1, -(-_LINE_BATCH // len(todo))))
        halve = torch.tensor([0.5**j for j in range(tried, tried + block)], dtype=z.dtype, device=z.device)
        rows = todo.repeat(block)  # block-major: every todo problem at halving 0, then at 1, ...
        trial_step = (step[todo][None, :] * halve[:, None]).reshape(-1)
        trial = _clip(z[rows] + trial_step[:, None] * d[rows], lo, hi)
        ft, gt = _nll_value_grad(kernel, trial, *(t[rows] for t in data))
        ok = (ft <= f[rows] + 1e-4 * (g[rows] * (trial - z[rows])).sum(1)) & torch.isfinite(ft)
        ok = ok.reshape(block, len(todo))
        found = ok.any(0)
        first = ok.to(torch.int8).argmax(0)[found] * len(todo) + torch.arange(len(todo), device=z.device)[found]
        took = todo[found]
        z_new[took], f_new[took], g_new[took] = trial[first], ft[first], gt[first]
        todo = todo[~found]
        tried += block
    return z_new, f_new, g_new


def _two_loop(g, s_hist, y_hist, rho, gamma, newest: int, filled: int) -> torch.Tensor:
    """L-BFGS's direction -H g per row from the stored pairs (history slots, rows, P), newest
    first; a slot whose ``rho`` is 0 contributes nothing."""
    m = s_hist.shape[0]
    order = [(newest - 1 - k) % m for k in range(min(filled, m))]
    q, alphas = g.clone(), []
    for k in order:
        alpha = rho[k] * (s_hist[k] * q).sum(1)
        q = q - alpha[:, None] * y_hist[k]
        alphas.append(alpha)
    r = gamma[:, None] * q
    for k, alpha in zip(reversed(order), reversed(alphas), strict=True):
        beta = rho[k] * (y_hist[k] * r).sum(1)
        r = r + s_hist[k] * (alpha - beta)[:, None]
    return -r


def _starts(kernel: str, n: int, restarts: int, seed: int, label: str) -> torch.Tensor:
    """(1 + restarts, n, P) log starting points: scikit-learn's values, then uniform draws in
    the log bounds (row i's from its own stream, so a target's start does not depend on the
    others)."""
    names = hyper_names(kernel)
    first = np.tile([math.log(HYPER[k][0]) for k in names], (n, 1))
    lo = np.array([math.log(HYPER[k][1][0]) for k in names])
    hi = np.array([math.log(HYPER[k][1][1]) for k in names])
    draws = [first]
    if restarts:
        u = np.stack([rng(derive_seed(seed, label, i)).uniform(size=(restarts, len(names))) for i in range(n)], 1)
        draws += list(lo + u * (hi - lo))
    return torch.from_numpy(np.stack(draws)).to(torch.float64)


def ctx_gp(
    ctx_x: np.ndarray,
    ctx_y: np.ndarray,
    qry_x: np.ndarray,
    kernel: str = DEFAULT_KERNEL,
    restarts: int = 2,
    seed: int = 0,
    device: str = "cpu",
    optimizer: str = "adam",
) -> tuple[np.ndarray, np.ndarray]:
    """A GP fitted on each target's context alone, at the queries.

    Each target's inputs are rescaled to its context's span and its outputs standardised before
    the fit (the length-scale bounds then mean the same for every family); the predictions are
    mapped back.

    Args:
        ctx_x: the context inputs (n, k), k >= 2 points per target, in any order.
        ctx_y: the context outputs (n, k).
        qry_x: the query inputs (n, q), or one row (q,) shared by every target.
        kernel: the kernel family, one of :data:`GP_KERNELS` (default: the one chosen on the
            dev split, :data:`DEFAULT_KERNEL`).
        restarts: extra starts of the marginal-likelihood optimiser (from random hyper-parameters).
        seed: seeds the restarts (target i uses its own stream), so the result is reproducible.
        device: where the batched fit runs (``"cpu"``, ``"cuda"``).
        optimizer: ``"adam"`` (:func:`fit_hyper`: a fixed budget of projected Adam steps) or
            ``"lbfgs"`` (:func:`fit_hyper_lbfgs`: each start run to its own convergence).

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
    hyper_names(kernel)  # an unknown name fails here, before any fit
    fit = {"adam": fit_hyper, "lbfgs": fit_hyper_lbfgs}[check_optimizer(optimizer)]
    x_std, y_std, lo, span, centre, scale = standardised_context(x, y)
    dev = torch.device(device)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(dev)  # noqa: E731
    xs, ys, qs = t(x_std), t(y_std), t((q - lo) / span)
    ones = torch.ones_like(xs)
    starts = _starts(kernel, len(x), restarts, seed, "ctx-gp").to(dev)
    # every target's fit is its own problem, whatever its batch (the closed-form gradient rounds a
    # row the same way in any batch), so the targets are split over the lanes (the idle cores)
    size = -(-len(x) // lanes()) if dev.type == "cpu" else len(x)  # a GPU takes them in one batch
    chunks = [slice(i, i + size) for i in range(0, len(x), size)]
    theta = torch.cat(map_lanes(lambda s: fit(kernel, xs[s], ys[s], ones[s], starts[:, s]), chunks, dev))
    with torch.no_grad():
        mean, sd = gp_predict(kernel, theta, xs, ys, qs, ones)
    return centre + scale * mean.cpu().numpy(), scale * sd.cpu().numpy()


@dataclass(eq=False)
class MetaGP:
    """``meta-gp``: one GP prior for the whole family, fitted on the library's tasks (empirical
    Bayes), then conditioned on each target's context.

    The prior's mean is a Legendre polynomial of degree ``mean_degree`` in the input, its kernel
    one of :data:`GP_KERNELS`; both are shared by every task and fitted by Adam on the summed
    negative log marginal likelihood of ``batch`` library draws per step (each draw's context
    and query points together; white noise on the context points only, whose observation may
    be noisy). Inputs and outputs are mapped by ``scaler`` (a ``scaling.FamilyScaler`` fitted
    on the library: x to [-1, 1] over the domain, y standardised), so one set of
    hyper-parameters means the same for every task.

    Args:
        kernel: the kernel family, one of :data:`GP_KERNELS`.
        mean_degree: the degree of the polynomial prior mean (0: a constant).
        steps: Adam's steps; with ``optimizer="lbfgs"`` the most objective evaluations.
        batch: library draws per step (Adam's; L-BFGS reads every draw at each evaluation).
        lr: Adam's learning rate.
        seed: seeds the draws of each step.
        device: where the fit and the predictions run.
        optimizer: ``"adam"`` (minibatch steps, a fixed budget) or ``"lbfgs"`` (full-batch L-BFGS
            with a strong-Wolfe line search, run until the objective changes by less than
            ``tol``: the converged empirical-Bayes fit, ``benchmarks/meta_gp_fit.py``).
        tol: L-BFGS's stopping rule on the objective's change between iterations.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.baselines.gp import MetaGP
        >>> from taskextrap.scaling import FamilyScaler
        >>> g = np.random.default_rng(0)
        >>> x = g.uniform(-1, 1, (64, 10)); a = g.uniform(1, 2, (64, 1))
        >>> y = a * x**2  # a library of parabolas; the first 5 points of each are its context
        >>> gp = MetaGP(steps=50).fit(x[:, :5], y[:, :5], x[:, 5:], y[:, 5:], FamilyScaler(0, 1, 0, 1))
        >>> mean, sd = gp.predict(x[:2, :5], 3 * x[:2, :5] ** 2, x[:2, 5:])
        >>> mean.shape, sd.shape
        ((2, 5), (2, 5))
    """

    kernel: str = DEFAULT_KERNEL
    mean_degree: int = 3
    steps: int = 300
    batch: int = 256
    lr: float = 0.03
    seed: int = 0
    device: str = "cpu"
    optimizer: str = "adam"
    tol: float = 1e-10

    def __post_init__(self):
        hyper_names(self.kernel)
        check_int("mean_degree", self.mean_degree, 0)
        check_int("steps", self.steps, 1)
        check_int("batch", self.batch, 1)
        check_real("lr", self.lr, 0.0, min_open=True)
        check_optimizer(self.optimizer)
        check_real("tol", self.tol, 0.0, min_open=True)

    def _t(self, a) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(torch.device(self.device))

    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        """The prior mean at scaled inputs ``x`` (any shape): sum_j c_j P_j(x)."""
        p_prev, p, out = torch.ones_like(x), x, self.mean_[0] * torch.ones_like(x)
        if self.mean_degree >= 1:
            out = out + self.mean_[1] * x
        for j in range(1, self.mean_degree):  # Bonnet's recursion: (j+1) P_{j+1} = (2j+1) x P_j - j P_{j-1}
            p_prev, p = p, ((2 * j + 1) * x * p - j * p_prev) / (j + 1)
            out = out + self.mean_[j + 1] * p
        return out

    def fit(self, ctx_x, ctx_y, qry_x, qry_y, scaler) -> MetaGP:
        """Fit the prior on library draws: contexts ``ctx_x``, ``ctx_y`` (n, k) and their tasks'
        values ``qry_y`` at ``qry_x`` (n, q), mapped by ``scaler``.

        Returns:
            MetaGP: this model, fitted.
        """
        cx, cy = check_context(ctx_x, ctx_y)
        qx, qy = check_context(qry_x, qry_y)
        if len(qx) != len(cx):
            raise TaskextrapError(f"meta-gp: {len(cx)} contexts but {len(qx)} query rows")
        self.scaler_ = scaler
        x = self._t(np.concatenate([scaler.x(cx), scaler.x(qx)], 1))
        y = self._t(np.concatenate([scaler.y(cy), scaler.y(qy)], 1))
        noisy = torch.cat([torch.ones_like(x[:, : cx.shape[1]]), torch.zeros_like(x[:, cx.shape[1] :])], 1)
        names = hyper_names(self.kernel)
        lo, hi = _log_bounds(names, x)
        theta = self._t([[math.log(HYPER[k][0]) for k in names]]).requires_grad_(True)
        self.mean_ = torch.zeros(self.mean_degree + 1, dtype=torch.float64, device=x.device, requires_grad=True)
        if self.optimizer == "lbfgs":
            return self._fit_lbfgs(x, y, noisy, theta.detach(), lo, hi, names)
        opt = torch.optim.Adam([theta, self.mean_], lr=self.lr)
        g = rng(self.seed, "meta-gp-batches")
        for _ in range(self.steps):
            i = torch.from_numpy(g.integers(len(x), size=min(self.batch, len(x)))).to(x.device)
            th = theta.expand(len(i), -1)
            loss = gp_nll(self.kernel, th, x[i], y[i] - self._mean(x[i]), noisy[i]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                theta.copy_(_clip(theta, lo, hi))
        self.evaluations_ = self.steps
        self.log_theta_ = theta.detach()
        self.mean_ = self.mean_.detach()
        self.hyper_ = {k: float(v) for k, v in zip(names, self.log_theta_[0].exp(), strict=True)}
        return self

    def _fit_lbfgs(self, x, y, noisy, start, lo, hi, names) -> MetaGP:
        """Full-batch L-BFGS on every draw until the objective changes by less than ``tol`` (or
        ``steps`` evaluations), the hyper-parameters kept inside their bounds by a sigmoid."""
        z = torch.logit((start - lo) / (hi - lo)).clone().requires_grad_(True)
        opt = torch.optim.LBFGS([z, self.mean_], lr=1, max_iter=self.steps, tolerance_grad=1e-7,
                                tolerance_change=self.tol, history_size=20, line_search_fn="strong_wolfe")  # fmt: skip
        evaluations = [0]

        def objective():
            opt.zero_grad()
            evaluations[0] += 1
            theta = lo + (hi - lo) * torch.sigmoid(z)
            loss = gp_nll(self.kernel, theta.expand(len(x), -1), x, y - self._mean(x), noisy).mean()
            loss.backward()
            return loss

        opt.step(objective)
        self.evaluations_ = evaluations[0]
        self.log_theta_ = (lo + (hi - lo) * torch.sigmoid(z)).detach()
        self.mean_ = self.mean_.detach()
        self.hyper_ = {k: float(v) for k, v in zip(names, self.log_theta_[0].exp(), strict=True)}
        return self

    def predict(self, ctx_x, ctx_y, qry_x) -> tuple[np.ndarray, np.ndarray]:
        """The prior conditioned on each target's context, at its queries.

        Returns:
            (mean, sd): the predictive mean and the latent function's sd, both (n, q).
        """
        if not hasattr(self, "log_theta_"):
            raise TaskextrapError("this MetaGP is not fitted yet: call fit(...) first")
        cx, cy = check_context(ctx_x, ctx_y)
        q = check_query(qry_x, len(cx), "qry_x")
        s = self.scaler_
        x, y, qs = self._t(s.x(cx)), self._t(s.y(cy)), self._t(s.x(q))
        with torch.no_grad():
            th = self.log_theta_.expand(len(x), -1)
            mean, sd = gp_predict(self.kernel, th, x, y - self._mean(x), qs, torch.ones_like(x))
            mean = mean + self._mean(qs)
        return s.y_inv(mean.cpu().numpy()), s.dy_inv(sd.cpu().numpy())
