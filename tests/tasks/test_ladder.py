"""Ladders: the polynomial ladder matches the paper's formula; extension steps and their checks."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder, LadderSet
from taskextrap.tasks.regimes import get_protocol


def test_polynomial_ladder_is_the_papers_scaled_polynomial():
    c = POLYNOMIAL_LADDER.sample_coefs(9, 3, np.random.default_rng(0))
    x = np.random.default_rng(1).uniform(-5, 5, size=(3, 7))
    raw = c / 5.0 ** np.arange(10)  # the paper's c_p ~ U(-2, 2) / 5^p on x^p
    expected = np.stack([np.polynomial.polynomial.polyval(x[i], raw[i]) for i in range(3)])
    np.testing.assert_allclose(POLYNOMIAL_LADDER(c, x), expected, rtol=1e-10, atol=1e-12)
    assert np.all(np.abs(c) <= 2)


def test_sample_coefs_has_exactly_the_level():
    c = POLYNOMIAL_LADDER.sample_coefs(4, 50, np.random.default_rng(0))
    assert c.shape == (50, 10)
    assert np.all(c[:, 5:] == 0) and np.all(c[:, :5] != 0)


def test_values_at_matches_values_for_shared_and_per_row_tasks():
    lib = LadderSet.sample_library(POLYNOMIAL_LADDER, 4, rng(0, "lib"))
    g = np.random.default_rng(2)
    x = g.uniform(-5, 5, size=(6, 5))
    shared = lib.values_at(x, np.array([3, 0, 17]))
    assert shared.shape == (6, 3, 5)
    for j, t in enumerate([3, 0, 17]):
        np.testing.assert_allclose(shared[:, j], lib.values(x, np.full(6, t)), rtol=1e-12, atol=1e-12)
    per_row = g.integers(len(lib), size=(6, 2))
    each = lib.values_at(x, per_row)
    for j in range(2):
        np.testing.assert_allclose(each[:, j], lib.values(x, per_row[:, j]), rtol=1e-12, atol=1e-12)
    assert lib.values_at(x).shape == (6, len(lib), 5)
    with pytest.raises(TaskextrapError, match="rows but x has"):
        lib.values_at(x, per_row[:4])
    with pytest.raises(TaskextrapError, match="shape"):
        lib.values_at(x[0])


def test_library_holds_training_levels_only():
    lib = LadderSet.sample_library(POLYNOMIAL_LADDER, 5, rng(0, "lib"))
    assert len(lib) == 40 and set(lib.level) == set(range(1, 9))
    assert np.all(lib.params[:, 9] == 0) and np.all(lib.parent == -1)
    assert list(lib.region[:1]) == ["level-1"]


def test_extend_adds_one_term_to_the_parent():
    lib = LadderSet.sample_library(POLYNOMIAL_LADDER, 5, rng(0, "lib"))
    parents = np.array([0, 7, 39])
    ext = LadderSet.extend(lib, parents, np.random.default_rng(2))
    np.testing.assert_array_equal(ext.level, lib.level[parents] + 1)
    np.testing.assert_array_equal(ext.parent, parents)
    x = np.random.default_rng(3).uniform(-5, 5, size=(3, 6))
    diff = ext.values(x) - lib.values(x, parents)
    np.testing.assert_allclose(diff, ext.new_coef()[:, None] * (x / 5) ** ext.level[:, None], atol=1e-12)
    with pytest.raises(TaskextrapError, match="beyond level"):
        LadderSet.extend(ext, np.array([2]), np.random.default_rng(0))


def test_train_steps_stay_inside_training_levels():
    assert POLYNOMIAL_LADDER.train_steps == tuple(range(2, 9))
    short = Ladder("short", basis=lambda x, p: x**p, domain=(-1, 1), train_levels=(1, 3), test_level=4)
    assert short.train_steps == ()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(domain=(1.0, 1.0)), "domain"),
        (dict(train_levels=(0, 1)), "train_levels"),
        (dict(test_level=3, train_levels=(1, 2, 3)), "test_level"),
    ],
)
def test_bad_ladders_fail_with_one_line(kwargs, match):
    opts = dict(name="bad", basis=lambda x, p: x**p, domain=(-1.0, 1.0))
    opts.update(kwargs)
    with pytest.raises(TaskextrapError, match=match) as e:
        Ladder(**opts)
    assert "\n" not in str(e.value)


def test_ladder_call_checks_shapes():
    with pytest.raises(TaskextrapError, match="coefficients"):
        POLYNOMIAL_LADDER(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(TaskextrapError, match="x must have shape"):
        POLYNOMIAL_LADDER(np.zeros((2, 10)), np.zeros((3, 4)))


def test_protocols_draw_ladder_tasks():
    lib = LadderSet.sample_library(POLYNOMIAL_LADDER, 3, rng(0, "lib"))
    strict = get_protocol("strict", "length")
    obs = strict.draw(lib, 2, np.random.default_rng(0), noise_scale=1.0)
    assert obs.ctx_x.shape == (48, 8) and obs.qry_x.shape == (48, 8)
    assert obs.ctx_x.max() <= 0.0 and obs.qry_x.min() >= 0.0
    clean = lib.values(obs.ctx_x, obs.task)
    assert 0 < np.std(obs.ctx_y - clean) < 0.05
    assert POLYNOMIAL_LADDER.output_range(np.random.default_rng(0)) > 0


def test_get_protocol_per_regime():
    assert get_protocol("paper", "composition").n_context == 25
    assert get_protocol("paper", "length").n_context == 8
    with pytest.raises(TaskextrapError, match="regime"):
        get_protocol("paper", "nope")
