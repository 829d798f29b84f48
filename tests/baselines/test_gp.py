"""baselines.gp: ctx-gp (a GP on each target's context alone) and meta-gp (a GP prior fitted on
the library), batched exact GPs checked against scikit-learn's."""

import math
import warnings

import numpy as np
import pytest
import torch

from taskextrap.baselines import gp as G
from taskextrap.baselines.gp import GP_KERNELS, MetaGP, ctx_gp
from taskextrap.errors import TaskextrapError
from taskextrap.scaling import FamilyScaler


def _context(n=3, k=8, seed=0):
    g = np.random.default_rng(seed)
    x = np.sort(g.uniform(-2, 2, (n, k)), axis=1)
    a = g.uniform(0.5, 2.0, (n, 1))
    return x, a * np.sin(x), a


def _sklearn_kernel(kernel, h):
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, DotProduct, Matern, WhiteKernel

    shape = Matern(h["length"], "fixed", nu=2.5) if kernel == "matern52" else RBF(h["length"], "fixed")
    k = ConstantKernel(h["amplitude"], "fixed") * shape
    if kernel == "rbf+linear":
        k = k + ConstantKernel(h["linear"], "fixed") * DotProduct(h["offset"], "fixed")
    return k + WhiteKernel(h["noise"], "fixed")


@pytest.mark.parametrize("kernel", GP_KERNELS)
def test_likelihood_and_posterior_match_scikit_learn_at_the_same_hyper_parameters(kernel):
    from sklearn.gaussian_process import GaussianProcessRegressor

    g = np.random.default_rng(1)
    x, y, q = g.uniform(0, 1, 7), g.normal(size=7), g.uniform(-0.5, 1.5, 4)
    h = {"amplitude": 1.7, "length": 0.4, "noise": 0.03, "linear": 0.2, "offset": 0.5}
    names = G.hyper_names(kernel)
    theta = torch.tensor([[math.log(h[n]) for n in names]], dtype=torch.float64)
    t = lambda a: torch.tensor(a[None], dtype=torch.float64)  # noqa: E731
    sk = GaussianProcessRegressor(_sklearn_kernel(kernel, h), optimizer=None).fit(x[:, None], y)
    assert float(G.gp_nll(kernel, theta, t(x), t(y))[0]) == pytest.approx(-sk.log_marginal_likelihood_value_, rel=1e-9)
    mean, sd = G.gp_predict(kernel, theta, t(x), t(y), t(q))
    sk_mean, sk_sd = sk.predict(q[:, None], return_std=True)
    np.testing.assert_allclose(mean[0].numpy(), sk_mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sd[0].numpy() ** 2 + h["noise"], sk_sd**2, rtol=1e-7)  # ours leaves the noise out


@pytest.mark.parametrize("kernel", GP_KERNELS)
def test_the_closed_form_gradient_equals_autograds(kernel, load_script):
    autograd_nll = load_script("benchmarks/gp_step.py").autograd_nll  # the plain formula the benchmark times
    g = np.random.default_rng(3)
    b, n, p = 4, 9, len(G.hyper_names(kernel))
    x = torch.tensor(g.uniform(-1, 1, (b, n)))
    noisy = torch.tensor((g.uniform(size=(b, n)) < 0.5).astype(float))
    theta0 = torch.tensor(g.uniform(-1.5, 0.5, (b, p)))
    y0 = torch.tensor(np.sin(3 * x.numpy()) + 0.1 * g.normal(size=(b, n)))
    weights = torch.tensor(g.uniform(0.5, 2.0, b))  # a weighted sum: the incoming gradient is not all ones
    grads = []
    for f in (G.gp_nll, autograd_nll):
        theta, y = theta0.clone().requires_grad_(True), y0.clone().requires_grad_(True)
        value = f(kernel, theta, x, y, noisy)
        (value * weights).sum().backward()
        grads.append((value.detach(), theta.grad, y.grad))
    for ours, plain in zip(grads[0], grads[1], strict=True):  # to rounding: some Gram matrices are ill-conditioned
        np.testing.assert_allclose(ours.numpy(), plain.numpy(), rtol=1e-6, atol=1e-9 * float(plain.abs().max()))


def test_the_likelihood_is_not_differentiable_in_the_inputs():
    x = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TaskextrapError, match="not differentiable in the inputs"):
        G.gp_nll("rbf", torch.zeros(1, 3, dtype=torch.float64), x, torch.zeros(1, 3, dtype=torch.float64))


def test_the_fit_reaches_scikit_learns_marginal_likelihood():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    g = np.random.default_rng(2)
    x = np.sort(g.uniform(0, 1, (12, 8)), axis=1)
    y = np.sin(6 * x + g.uniform(0, 3, (12, 1))) + 0.05 * g.normal(size=x.shape)
    y = (y - y.mean(1, keepdims=True)) / y.std(1, keepdims=True)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    starts = G._starts("rbf", len(x), 2, 0, "test")
    by_fit = {
        name: G.gp_nll("rbf", fit("rbf", t(x), t(y), t(np.ones_like(x)), starts), t(x), t(y)).numpy()
        for name, fit in (("adam", G.fit_hyper), ("lbfgs", G.fit_hyper_lbfgs))
    }
    theirs = []
    for i in range(len(x)):
        k = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(0.3, (1e-2, 1e2)) + WhiteKernel(1e-2, (1e-6, 1.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sk = GaussianProcessRegressor(k, n_restarts_optimizer=2, random_state=i).fit(x[i, :, None], y[i])
        theirs.append(-sk.log_marginal_likelihood_value_)
    for ours in by_fit.values():
        assert ours.mean() <= np.mean(theirs) + 0.1  # the same optimum, up to the optimiser
        assert (ours <= np.array(theirs) + 0.5).all()
    assert by_fit["lbfgs"].mean() <= by_fit["adam"].mean() + 1e-3  # converged: no worse than the fixed budget


def test_the_batched_lbfgs_solves_each_row_as_if_alone_and_keeps_the_bounds():
    """Each (start, row) is its own problem: a row's fit does not depend on the other rows of the
    batch, to the bit (5 and 7 points: torch.cholesky_inverse rounded a 5 x 5 row by its place in
    the batch), and a hyper-parameter whose optimum lies past its bound stops on the bound."""
    g = np.random.default_rng(4)
    x = np.sort(g.uniform(0, 1, (6, 7)), axis=1)
    y = np.sin(5 * x + g.uniform(0, 3, (6, 1)))
    y[0] = 0.0 * x[0] + 1e-9 * np.arange(7)  # a flat row: its amplitude wants to shrink without end
    y = (y - y.mean(1, keepdims=True)) / np.maximum(y.std(1, keepdims=True), 1e-12)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    ones = t(np.ones_like(x))
    starts = G._starts("rbf+linear", len(x), 1, 0, "test")
    together = G.fit_hyper_lbfgs("rbf+linear", t(x), t(y), ones, starts)
    alone = torch.cat([G.fit_hyper_lbfgs("rbf+linear", t(x[i : i + 1]), t(y[i : i + 1]), ones[i : i + 1],
                                         starts[:, i : i + 1]) for i in range(len(x))])  # fmt: skip
    assert torch.equal(together, alone)
    five = G._starts("rbf+linear", len(x), 3, 0, "test")
    xs, ys = t(x[:, :5]), t(y[:, :5])
    together = G.fit_hyper_lbfgs("rbf+linear", xs, ys, ones[:, :5], five)
    parts = (slice(0, 1), slice(1, None))
    halves = [G.fit_hyper_lbfgs("rbf+linear", xs[s], ys[s], ones[s, :5], five[:, s]) for s in parts]
    assert torch.equal(together, torch.cat(halves))
    lo, hi = G._log_bounds(G.hyper_names("rbf+linear"), together)
    assert ((together >= lo - 1e-12) & (together <= hi + 1e-12)).all()
    with pytest.raises(TaskextrapError, match="optimizer must be one of"):
        ctx_gp(x, y, x, optimizer="newton")


def test_a_smooth_curve_is_recovered_between_its_points_with_a_narrow_interval():
    x, y, a = _context()
    q = np.tile(np.linspace(-1, 1, 5), (3, 1))
    for kernel in GP_KERNELS:
        mean, sd = ctx_gp(x, y, q, kernel=kernel)
        assert mean.shape == sd.shape == (3, 5)
        assert np.abs(mean - a * np.sin(q)).max() < 0.05, kernel
        assert (sd >= 0).all() and sd.max() < 0.2, kernel


def test_the_interval_widens_away_from_the_context():
    x, y, _ = _context(n=1)
    _, sd = ctx_gp(x, y, np.array([[0.0, 6.0]]))
    assert sd[0, 1] > 5 * sd[0, 0]


def test_the_fit_reads_the_context_as_a_set_and_is_reproducible():
    x, y, _ = _context()
    q = np.linspace(-3, 3, 7)  # one row shared by every target
    perm = np.random.default_rng(1).permutation(x.shape[1])
    first = ctx_gp(x, y, q, seed=3)
    np.testing.assert_array_equal(ctx_gp(x[:, perm], y[:, perm], q, seed=3)[0], first[0])
    np.testing.assert_array_equal(ctx_gp(x, y, q, seed=3)[0], first[0])


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_the_fit_is_the_same_to_the_bit_on_any_number_of_lanes(optimizer, monkeypatch):
    """ctx_gp splits its targets over the idle cores (lanes); the numbers do not move."""
    x, y, _ = _context(n=5)
    q = np.linspace(-1, 1, 4)
    monkeypatch.setenv("TASKEXTRAP_LANES", "1")
    one = ctx_gp(x[:, :5], y[:, :5], q, optimizer=optimizer, restarts=2)
    monkeypatch.setenv("TASKEXTRAP_LANES", "3")
    three = ctx_gp(x[:, :5], y[:, :5], q, optimizer=optimizer, restarts=2)
    for a, b in zip(one, three, strict=True):
        np.testing.assert_array_equal(a, b)


def test_each_target_is_fitted_on_its_own_context_only():
    x, y, _ = _context(n=2)
    q = np.zeros((2, 1))
    alone = ctx_gp(x[:1], y[:1], q[:1])[0]
    y2 = y.copy()
    y2[1] += 100.0  # another target's values change nothing for the first
    np.testing.assert_allclose(ctx_gp(x, y2, q)[0][:1], alone, rtol=1e-9)


def test_bad_inputs_are_one_line_errors():
    x, y, _ = _context()
    with pytest.raises(TaskextrapError, match="at least 2 context points"):
        ctx_gp(x[:, :1], y[:, :1], x)
    with pytest.raises(TaskextrapError, match="unknown GP kernel 'cubic'"):
        ctx_gp(x, y, x, kernel="cubic")
    with pytest.raises(TaskextrapError):
        ctx_gp(x, y[:, :3], x)
    with pytest.raises(TaskextrapError, match="restarts"):
        ctx_gp(x, y, x, restarts=-1)
    with pytest.raises(TaskextrapError, match="unknown GP kernel"):
        MetaGP(kernel="cubic")
    with pytest.raises(TaskextrapError, match="not fitted"):
        MetaGP().predict(x, y, x)


def _parabolas(n, seed):
    g = np.random.default_rng(seed)
    x = g.uniform(-1, 1, (n, 10))
    a = g.uniform(1.0, 2.0, (n, 1))
    return x, a * x**2, a


def test_meta_gp_learns_the_librarys_shape_and_beats_a_gp_on_the_context_alone():
    x, y, _ = _parabolas(200, 0)
    gp = MetaGP(steps=300).fit(x[:, :3], y[:, :3], x[:, 3:], y[:, 3:], FamilyScaler(0.0, 1.0, 0.0, 1.0))
    tx, _, a = _parabolas(50, 1)
    ctx = np.sort(tx[:, :3], 1) * 0.3  # three points near the middle: the ends are an extrapolation
    q = np.tile([-0.95, 0.95], (50, 1))
    truth = a * q**2
    meta = gp.predict(ctx, a * ctx**2, q)[0]
    alone = ctx_gp(ctx, a * ctx**2, q)[0]
    assert np.mean((meta - truth) ** 2) < 0.5 * np.mean((alone - truth) ** 2)
    assert gp.mean_.shape == (4,) and set(gp.hyper_) == set(G.hyper_names(gp.kernel))


def test_meta_gp_is_reproducible_and_order_free():
    x, y, _ = _parabolas(64, 0)
    s = FamilyScaler(0.0, 1.0, 0.0, 1.0)
    a = MetaGP(steps=20, seed=4).fit(x[:, :5], y[:, :5], x[:, 5:], y[:, 5:], s)
    b = MetaGP(steps=20, seed=4).fit(x[:, :5], y[:, :5], x[:, 5:], y[:, 5:], s)
    perm = [4, 2, 0, 1, 3]
    m1 = a.predict(x[:3, :5], y[:3, :5], x[:3, 5:])[0]
    np.testing.assert_array_equal(m1, b.predict(x[:3, :5], y[:3, :5], x[:3, 5:])[0])
    np.testing.assert_allclose(m1, a.predict(x[:3, perm], y[:3, perm], x[:3, 5:])[0], rtol=1e-9)


def test_a_context_is_standardised_whatever_the_order_of_its_points():
    g = np.random.default_rng(5)
    x, y = g.uniform(-2, 3, (4, 6)), g.normal(size=(4, 6))
    xs, ys, lo, span, centre, scale = G.standardised_context(x, y)
    assert np.allclose(xs.min(1), 0) and np.allclose(xs.max(1), 1) and (np.diff(xs, axis=1) >= 0).all()
    assert np.allclose(ys.mean(1), 0) and np.allclose(ys.std(1), 1)
    np.testing.assert_allclose(np.sort(xs * span + lo, 1), np.sort(x, 1))
    perm = g.permutation(6)
    for a, b in zip(G.standardised_context(x[:, perm], y[:, perm]), (xs, ys, lo, span, centre, scale), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TaskextrapError, match="optimizer must be one of"):
        G.check_optimizer("sgd")


def test_a_gram_matrix_that_does_not_factor_gets_a_jitter_and_one_that_does_keeps_its_bits():
    """Noise-free points under a long length-scale (meta-gp's queries, as L-BFGS's line search
    tries them) made torch.linalg.cholesky raise; _cholesky retries that row alone with a jitter."""
    x = torch.linspace(0, 1, 16, dtype=torch.float64).repeat(2, 1)
    theta = torch.log(torch.tensor([[1e3, 1e2, 1e-6, 1e2, 1e2], [1.0, 0.3, 1e-2, 0.1, 1.0]], dtype=torch.float64))
    h = G._hyper("rbf+linear", theta)
    k, quiet = G.gram("rbf+linear", h, x, x), torch.zeros_like(x)
    plain = k + torch.diag_embed(h["noise"][:, None] * quiet + G.JITTER)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(plain[:1])
    chol = G._cholesky(h, k, quiet)
    assert torch.isfinite(chol).all()
    torch.testing.assert_close(chol[:1] @ chol[:1].transpose(1, 2), k[:1], rtol=1e-6, atol=1e-3)
    assert torch.equal(chol[1:], torch.linalg.cholesky(plain[1:]))  # the row that factors: untouched
    # each matrix takes the first jitter it factors with, whatever its neighbours need
    k = torch.diag_embed(torch.tensor([[1.0, 1.0, 1.0, -1e-9], [1.0, 1.0, 1.0, -1e-7]], dtype=torch.float64))
    zero = torch.zeros(2, 4, dtype=torch.float64)
    both = G._cholesky({"noise": zero[:, 0]}, k, zero)
    alone = [G._cholesky({"noise": zero[:1, 0]}, k[i : i + 1], zero[:1]) for i in (0, 1)]
    assert torch.equal(both, torch.cat(alone)) and both[0, 3, 3] < both[1, 3, 3]


@pytest.mark.parametrize("line_batch", [1, 3, 2048])
def test_the_blocked_line_search_takes_the_step_a_one_at_a_time_search_takes(line_batch, monkeypatch):
    """_backtrack tries its halvings several per evaluation; the accepted point is the first of
    step, step / 2, ... that passes, as trying them one by one finds it, to the bit."""
    g = np.random.default_rng(7)
    n, k = 40, 6
    x = torch.tensor(np.sort(g.uniform(0, 1, (n, k)), axis=1))
    y = torch.tensor(g.normal(size=(n, k)))
    ones = torch.ones_like(x)
    z = torch.tensor(g.uniform(-2, 1, (n, 5)))
    lo, hi = G._log_bounds(G.hyper_names("rbf+linear"), z)
    f, grad = G._nll_value_grad("rbf+linear", z, x, y, ones)
    d = -grad * torch.tensor(g.uniform(1, 50, (n, 1)))  # long steps: most problems halve several times
    step = torch.ones(n, dtype=torch.float64)
    monkeypatch.setattr(G, "_LINE_BATCH", line_batch)
    got = G._backtrack("rbf+linear", (x, y, ones), (z, f, grad), d, step, (lo, hi))
    want = [t.clone() for t in (z, f, grad)]  # one halving at a time, one problem at a time
    for i in range(n):
        for j in range(G.LBFGS_BACKTRACK):
            trial = torch.maximum(torch.minimum(z[i : i + 1] + 0.5**j * d[i : i + 1], hi), lo)
            ft, gt = G._nll_value_grad("rbf+linear", trial, x[i : i + 1], y[i : i + 1], ones[i : i + 1])
            if ft <= f[i] + 1e-4 * (grad[i] * (trial[0] - z[i])).sum() and torch.isfinite(ft):
                want[0][i], want[1][i], want[2][i] = trial[0], ft[0], gt[0]
                break
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
    assert (got[0] != z).any(1).float().mean() > 0.5  # most problems moved


@pytest.mark.parametrize("kernel", G.GP_KERNELS)
def test_chunked_evaluation_keeps_every_bit(monkeypatch, kernel):
    # the marginal likelihood and its gradient, a chunk of rows at a time (EVAL_CHUNK) or all at
    # once: every row is its own GP, so the chunk size must not change a bit, by either route
    g = np.random.default_rng(3)
    n, k = 700, 8
    x = torch.tensor(np.sort(g.uniform(0, 1, (n, k)), axis=1))
    y = torch.tensor(g.normal(size=(n, k)))
    noisy = torch.tensor((g.uniform(size=(n, k)) < 0.7).astype(float))
    z = torch.tensor(g.uniform(-2, 1, (n, len(G.hyper_names(kernel)))))

    def both():
        f, grad = G._nll_value_grad(kernel, z, x, y, noisy)
        theta, yy = z.clone().requires_grad_(True), y.clone().requires_grad_(True)
        G.gp_nll(kernel, theta, x, yy, noisy).sum().backward()
        shared = z[:1].clone().requires_grad_(True)  # meta-gp's one row of hyper-parameters, expanded
        G.gp_nll(kernel, shared.expand(n, -1), x, y, noisy).mean().backward()
        return f, grad, theta.grad, yy.grad, shared.grad

    monkeypatch.setattr(G, "EVAL_CHUNK", 10**6)
    whole = both()
    monkeypatch.setattr(G, "EVAL_CHUNK", 64)  # 11 chunks, the last one short
    chunked = both()
    for a, b in zip(whole, chunked, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(whole[1], whole[2])  # the closed form's two routes: the same gradient
    loss = G.gp_nll(kernel, z.clone().requires_grad_(True), x, y, noisy).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(TaskextrapError, match="already differentiated once"):
        loss.backward()
