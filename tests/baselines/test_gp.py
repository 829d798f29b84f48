"""baselines.gp: a GP on each target's context alone (ctx-gp)."""

import numpy as np
import pytest

from taskextrap.baselines.gp import GP_KERNELS, ctx_gp
from taskextrap.errors import TaskextrapError


def _context(n=3, k=8, seed=0):
    g = np.random.default_rng(seed)
    x = np.sort(g.uniform(-2, 2, (n, k)), axis=1)
    a = g.uniform(0.5, 2.0, (n, 1))
    return x, a * np.sin(x), a


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


def test_each_target_is_fitted_on_its_own_context_only():
    x, y, _ = _context(n=2)
    q = np.zeros((2, 1))
    alone = ctx_gp(x[:1], y[:1], q[:1])[0]
    y2 = y.copy()
    y2[1] += 100.0  # another target's values change nothing for the first
    np.testing.assert_array_equal(ctx_gp(x, y2, q)[0][:1], alone)


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
