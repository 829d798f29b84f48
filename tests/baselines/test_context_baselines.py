"""Context-only sanity baselines: interpolation, LOO-selected polyfit, best library curve."""

import numpy as np
import pytest

from taskextrap.baselines.context import ctx_interp, ctx_polyfit, library_best_fit
from taskextrap.errors import TaskextrapError


def _perm_rows(rng, *arrays):
    """Apply one independent random permutation per row to each (n, k) array (same per row)."""
    n, k = arrays[0].shape
    order = np.argsort(rng.random((n, k)), axis=1)
    return [np.take_along_axis(a, order, axis=1) for a in arrays]


# ---------------------------------------------------------------- ctx_interp


def test_interp_exact_on_linear_inside_and_constant_outside():
    rng = np.random.default_rng(0)
    n, k, q = 6, 7, 40
    a, b = rng.normal(size=(n, 1)), rng.normal(size=(n, 1))
    cx = rng.uniform(-2, 2, size=(n, k))
    cy = a * cx + b
    lo, hi = cx.min(1, keepdims=True), cx.max(1, keepdims=True)
    inside = lo + (hi - lo) * rng.random((n, q))
    np.testing.assert_allclose(ctx_interp(cx, cy, inside), a * inside + b, atol=1e-12)
    # context points themselves are reproduced
    np.testing.assert_allclose(ctx_interp(cx, cy, cx), cy, atol=1e-12)
    left = lo - rng.uniform(0.1, 5, size=(n, q))
    right = hi + rng.uniform(0.1, 5, size=(n, q))
    np.testing.assert_allclose(ctx_interp(cx, cy, left), np.broadcast_to(a * lo + b, (n, q)), atol=1e-12)
    np.testing.assert_allclose(ctx_interp(cx, cy, right), np.broadcast_to(a * hi + b, (n, q)), atol=1e-12)


def test_interp_matches_np_interp_on_random_data():
    rng = np.random.default_rng(1)
    n, k, q = 20, 9, 30
    cx, cy = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    qx = rng.normal(scale=2, size=(n, q))
    want = np.stack([np.interp(qx[i], np.sort(cx[i]), cy[i][np.argsort(cx[i])]) for i in range(n)])
    np.testing.assert_allclose(ctx_interp(cx, cy, qx), want, atol=1e-12)


def test_interp_single_point_is_constant():
    out = ctx_interp([[0.5]], [[3.0]], [[-1.0, 0.5, 9.0]])
    np.testing.assert_array_equal(out, [[3.0, 3.0, 3.0]])


# ---------------------------------------------------------------- ctx_polyfit


def test_polyfit_recovers_quadratic_exactly():
    rng = np.random.default_rng(2)
    n, k = 5, 8
    coef = rng.normal(size=(n, 3))
    cx = rng.uniform(-1, 3, size=(n, k))

    def f(x):
        return coef[:, :1] + coef[:, 1:2] * x + coef[:, 2:3] * x**2

    qx = rng.uniform(-2, 5, size=(n, 15))  # inside and outside the context range
    pred, deg = ctx_polyfit(cx, f(cx), qx, return_degree=True)
    assert deg.shape == (n,)
    assert np.all(deg >= 2)
    np.testing.assert_allclose(pred, f(qx), atol=1e-8)


def test_polyfit_picks_low_degree_on_noisy_linear_data():
    rng = np.random.default_rng(3)
    n, k = 30, 200
    cx = rng.uniform(-1, 1, size=(n, k))
    slope = rng.uniform(1, 2, size=(n, 1))
    cy = slope * cx + 0.5 + rng.normal(scale=0.3, size=(n, k))
    qx = np.linspace(-1, 1, 11)[None, :].repeat(n, 0)
    pred, deg = ctx_polyfit(cx, cy, qx, max_degree=5, return_degree=True)
    assert np.all(deg >= 1)  # the slope is far above the noise
    assert np.median(deg) <= 2
    assert np.mean(deg <= 2) >= 0.7
    assert np.sqrt(np.mean((pred - (slope * qx + 0.5)) ** 2)) < 0.15


def test_polyfit_degree_capped_by_context_size():
    _, deg = ctx_polyfit([[0.0, 1.0, 2.0]], [[0.0, 1.0, 4.0]], [[3.0]], max_degree=5, return_degree=True)
    assert deg.tolist() == [1]  # k - 2
    pred = ctx_polyfit([[0.0, 1.0]], [[1.0, 3.0]], [[5.0]])
    np.testing.assert_allclose(pred, [[2.0]])  # k = 2: only the constant


def _brute_force_loo(x, y, degree):
    """Mean squared LOO error of a plain Vandermonde fit, by refitting k times."""
    errs = []
    for i in range(len(x)):
        m = np.arange(len(x)) != i
        c = np.polyfit(x[m], y[m], degree)
        errs.append((np.polyval(c, x[i]) - y[i]) ** 2)
    return np.mean(errs)


def test_polyfit_closed_form_loo_matches_brute_force():
    from taskextrap.baselines.context import _fit_degree, _rescale

    rng = np.random.default_rng(4)
    n, k = 4, 9
    cx, cy = rng.uniform(-3, 3, size=(n, k)), rng.normal(size=(n, k))
    qx = rng.uniform(-3, 3, size=(n, 2))
    u, uq = _rescale(cx, qx)
    for d in range(4):
        cv, pred = _fit_degree(u, cy, uq, d)
        want = [_brute_force_loo(cx[i], cy[i], d) for i in range(n)]
        np.testing.assert_allclose(cv, want, rtol=1e-8)
        want_pred = [np.polyval(np.polyfit(cx[i], cy[i], d), qx[i]) for i in range(n)]
        np.testing.assert_allclose(pred, want_pred, rtol=1e-8, atol=1e-10)
    # the public function chooses the brute-force argmin
    _, deg = ctx_polyfit(cx, cy, qx, max_degree=4, return_degree=True)
    want_deg = [np.argmin([_brute_force_loo(cx[i], cy[i], d) for d in range(5)]) for i in range(n)]
    assert deg.tolist() == want_deg


def test_polyfit_duplicate_x_does_not_fail():
    cx = np.array([[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]])
    cy = np.array([[1.0, 1.2, 2.0, 2.2, 3.0, 3.2]])
    pred = ctx_polyfit(cx, cy, [[0.0, 3.0]])
    assert np.all(np.isfinite(pred))
    np.testing.assert_allclose(pred, [[1.1, 4.1]], atol=1e-8)


# ---------------------------------------------------------------- library_best_fit


def _library(n_library, rng):
    freq = rng.uniform(0.5, 3.0, size=n_library)
    amp = rng.uniform(0.5, 2.0, size=n_library)
    calls = []

    def fn(index, x):
        index = np.asarray(index)
        assert index.ndim == 1 and x.ndim == 2 and x.shape[0] == index.shape[0]
        calls.append(index.shape[0])
        return amp[index][:, None] * np.sin(freq[index][:, None] * x)

    return fn, calls


def test_library_best_fit_recovers_member_and_offset():
    rng = np.random.default_rng(5)
    L, n, k, q = 40, 23, 6, 10
    fn, calls = _library(L, rng)
    true = rng.integers(0, L, size=n)
    offset = rng.normal(scale=3, size=(n, 1))
    cx = rng.uniform(0, 4, size=(n, k))
    qx = rng.uniform(-2, 8, size=(n, q))
    cy = fn(true, cx) + offset
    pred, idx = library_best_fit(cx, cy, qx, fn, L, chunk=5)
    assert idx.shape == (n,) and idx.dtype.kind == "i"
    np.testing.assert_array_equal(idx, true)
    np.testing.assert_allclose(pred, fn(true, qx) + offset, atol=1e-10)
    assert max(calls) <= 5 * L  # chunking bounds the library evaluations


def test_library_best_fit_noisy_picks_closest():
    def fn(index, x):
        slopes = np.array([0.0, 1.0, -1.0, 2.0])
        return slopes[index][:, None] * x

    rng = np.random.default_rng(6)
    cx = rng.uniform(-1, 1, size=(50, 20))
    cy = 1.0 * cx + 7.0 + rng.normal(scale=0.05, size=cx.shape)
    pred, idx = library_best_fit(cx, cy, cx[:, :3], fn, 4)
    assert np.all(idx == 1)
    np.testing.assert_allclose(pred, cx[:, :3] + 7.0, atol=0.1)


def test_library_best_fit_grid_path_equals_the_per_function_path():
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet

    lib = LadderSet.sample_library(POLYNOMIAL_LADDER, 6, np.random.default_rng(0))
    rng = np.random.default_rng(7)
    cx = rng.uniform(-5, 5, size=(30, 8))
    cy = lib.values(cx, rng.integers(len(lib), size=30)) + rng.normal(scale=0.1, size=cx.shape)
    qx = rng.uniform(-5, 5, size=(30, 4))
    fn = lambda i, x: lib.values(x, i)  # noqa: E731
    slow = library_best_fit(cx, cy, qx, fn, len(lib), chunk=7)
    fast = library_best_fit(cx, cy, qx, fn, len(lib), chunk=7, library_grid=lib.values_at)
    np.testing.assert_array_equal(slow[1], fast[1])
    np.testing.assert_allclose(slow[0], fast[0], rtol=1e-12, atol=1e-12)
    with pytest.raises(TaskextrapError, match="library_grid must return shape"):
        library_best_fit(cx, cy, qx, fn, len(lib), library_grid=lambda x: np.zeros((len(x), 2, 8)))


# ---------------------------------------------------------------- permutation invariance


def test_all_baselines_invariant_to_context_order():
    rng = np.random.default_rng(7)
    n, k, q = 12, 10, 8
    cx = rng.uniform(-1, 1, size=(n, k))
    cy = np.sin(3 * cx) + rng.normal(scale=0.1, size=(n, k))
    qx = rng.uniform(-1.5, 1.5, size=(n, q))
    px, py = _perm_rows(rng, cx, cy)
    assert not np.array_equal(px, cx)

    np.testing.assert_allclose(ctx_interp(px, py, qx), ctx_interp(cx, cy, qx), atol=1e-12)

    a, da = ctx_polyfit(cx, cy, qx, return_degree=True)
    b, db = ctx_polyfit(px, py, qx, return_degree=True)
    np.testing.assert_array_equal(da, db)
    np.testing.assert_allclose(a, b, atol=1e-9)

    fn, _ = _library(15, rng)
    a, ia = library_best_fit(cx, cy, qx, fn, 15)
    b, ib = library_best_fit(px, py, qx, fn, 15)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_interp_invariant_with_duplicate_x():
    cx = np.array([[0.0, 1.0, 1.0, 2.0]])
    cy = np.array([[0.0, 5.0, 3.0, 1.0]])
    qx = np.array([[0.5, 1.0, 1.5]])
    ref = ctx_interp(cx, cy, qx)
    for perm in ([3, 2, 1, 0], [2, 1, 0, 3], [1, 3, 0, 2]):
        np.testing.assert_array_equal(ctx_interp(cx[:, perm], cy[:, perm], qx), ref)


# ---------------------------------------------------------------- validation


def _lib(index, x):
    return np.zeros_like(x)


CALLS = {
    "interp": lambda cx, cy, qx: ctx_interp(cx, cy, qx),
    "polyfit": lambda cx, cy, qx: ctx_polyfit(cx, cy, qx),
    "library": lambda cx, cy, qx: library_best_fit(cx, cy, qx, _lib, 3),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize(
    "cx, cy, qx",
    [
        pytest.param([[0.0, np.nan, 1.0]], [[0.0, 1.0, 2.0]], [[0.5]], id="nan-x"),
        pytest.param([[0.0, 0.5, 1.0]], [[0.0, np.inf, 2.0]], [[0.5]], id="inf-y"),
        pytest.param([[0.0, 0.5, 1.0]], [[0.0, 1.0, 2.0]], [[np.nan]], id="nan-query"),
        pytest.param([[0.0, 0.5, 1.0]], [[0.0, 1.0]], [[0.5]], id="ctx-shape-mismatch"),
        pytest.param(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((3, 1)), id="query-rows"),
        pytest.param(np.zeros((2, 0)), np.zeros((2, 0)), np.zeros((2, 1)), id="empty-context"),
        pytest.param(np.zeros((2, 3, 1)), np.zeros((2, 3, 1)), np.zeros((2, 1)), id="3d"),
        pytest.param([["a", "b"]], [[0.0, 1.0]], [[0.5]], id="non-numeric"),
    ],
)
def test_bad_inputs_raise(name, cx, cy, qx):
    with pytest.raises(TaskextrapError):
        CALLS[name](cx, cy, qx)


def test_polyfit_needs_two_points_and_valid_degree():
    with pytest.raises(TaskextrapError, match="at least 2"):
        ctx_polyfit([[1.0]], [[1.0]], [[0.0]])
    with pytest.raises(TaskextrapError):
        ctx_polyfit([[0.0, 1.0]], [[0.0, 1.0]], [[0.0]], max_degree=-1)


def test_library_argument_checks():
    cx, cy, qx = [[0.0, 1.0]], [[0.0, 1.0]], [[0.5]]
    with pytest.raises(TaskextrapError):
        library_best_fit(cx, cy, qx, _lib, 0)
    with pytest.raises(TaskextrapError):
        library_best_fit(cx, cy, qx, _lib, 3, chunk=0)
    with pytest.raises(TaskextrapError, match="shape"):
        library_best_fit(cx, cy, qx, lambda i, x: np.zeros(len(i)), 3)
    with pytest.raises(TaskextrapError, match="NaN"):
        library_best_fit(cx, cy, qx, lambda i, x: np.full_like(x, np.nan), 3)
