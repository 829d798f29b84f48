"""Primitives, compositions and the family-pair split."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng
from taskextrap.tasks.regimes import get_protocol
from taskextrap.tasks.primitives import (
    PAPER_SPLIT,
    POLY,
    SIN,
    TANH,
    CompositionSet,
    PairSplit,
    PrimitiveSet,
    PrimitiveTasks,
)


@pytest.fixture(scope="module")
def prims():
    return PrimitiveSet.sample(n_per_family=20, rng=rng(0, "test-prims"))


def test_primitive_formulas_and_ranges(prims):
    x = np.linspace(-5, 5, 11)[None]
    p = POLY.sample(1, np.random.default_rng(0))
    np.testing.assert_allclose(POLY(p, x), p[0, 0] * x**2 + p[0, 1] * x + p[0, 2])
    s = SIN.sample(1, np.random.default_rng(1))
    np.testing.assert_allclose(SIN(s, x), s[0, 0] * np.sin(s[0, 1] * x + s[0, 2]))
    t = TANH.sample(1, np.random.default_rng(2))
    np.testing.assert_allclose(TANH(t, x), t[0, 0] * np.tanh(t[0, 1] * (x - t[0, 2])))
    assert len(prims) == 60 and set(prims.family_names) == {"poly", "sin", "tanh"}


def test_interpolated_curves_match_exact_values(prims):
    g = np.random.default_rng(0)
    x = g.uniform(-8, 8, size=(60, 9))
    idx = np.arange(60)
    assert np.abs(prims.interp(x, idx) - prims.exact(x, idx)).max() < 5e-3
    comp = CompositionSet.sample(prims, PAPER_SPLIT.train, 30, g)
    xs = g.uniform(-5, 5, size=(30, 7))
    np.testing.assert_allclose(prims.compose_interp(comp.outer, comp.inner, xs), comp.values(xs), atol=2e-2)


def test_whole_library_interpolation_matches_per_primitive_interpolation(prims):
    x = np.random.default_rng(1).uniform(-12, 12, size=(4, 5))  # beyond the grid too: end values held
    every = prims.interp_all(x)
    assert every.shape == (4, 5, len(prims))
    for j in (0, 17, len(prims) - 1):
        np.testing.assert_allclose(every[..., j], prims.interp(x, np.full(4, j)))
    # A non-uniform grid takes the binary-search path and agrees with np.interp.
    grid = np.concatenate([np.linspace(-10, 0, 50), np.linspace(0.5, 10, 300)])
    lib = PrimitiveSet.from_curves(["a"], np.zeros(3, dtype=int), grid, np.sin(grid[None] * [[1], [2], [3]]))
    expect = np.stack([np.interp(x, grid, c) for c in lib.curves], -1)
    np.testing.assert_allclose(lib.interp_all(x), expect)
    np.testing.assert_allclose(lib.interp(x, np.full(4, 2)), expect[..., 2])


def test_paper_split_holds_out_the_reversed_pairs():
    assert set(PAPER_SPLIT.test) == {("sin", "poly"), ("tanh", "sin"), ("poly", "tanh")}
    assert not set(PAPER_SPLIT.train) & set(PAPER_SPLIT.test)
    with pytest.raises(TaskextrapError, match="both trained and held out"):
        PairSplit(train=(("sin", "poly"),), test=(("sin", "poly"),))


def test_composition_sampling_respects_pairs_and_pool(prims):
    comp = CompositionSet.sample(prims, PAPER_SPLIT.test, 200, np.random.default_rng(0))
    names = prims.family_names
    pairs = {(names[o], names[i]) for o, i in zip(comp.outer, comp.inner, strict=True)}
    assert pairs == set(PAPER_SPLIT.test)
    pool = np.flatnonzero(np.arange(60) % 2 == 0)
    comp = CompositionSet.sample(prims, PAPER_SPLIT.train, 50, np.random.default_rng(1), pool=pool)
    assert np.isin(comp.outer, pool).all() and np.isin(comp.inner, pool).all()
    with pytest.raises(TaskextrapError, match="no library primitive"):
        CompositionSet.sample(prims, (("cos", "sin"),), 3, np.random.default_rng(0))


def test_from_curves_library_composes_by_interpolation():
    grid = np.linspace(-10, 10, 201)
    curves = np.stack([np.sin(grid), 0.1 * grid**2, np.tanh(grid)])
    lib = PrimitiveSet.from_curves(["sin", "poly", "tanh"], np.array([0, 1, 2]), grid, curves)
    x = np.array([[0.5, 1.5]])
    np.testing.assert_allclose(lib.compose_interp(np.array([0]), np.array([1]), x), np.sin(0.1 * x**2), atol=1e-2)
    with pytest.raises(TaskextrapError, match="increasing"):
        PrimitiveSet.from_curves(["a"], np.array([0]), grid[::-1], curves[:1])


def test_primitives_are_observable_tasks(prims):
    obs = get_protocol("paper", "composition").draw(PrimitiveTasks.of(prims), 2, np.random.default_rng(0))
    assert obs.ctx_x.shape == (120, 25)
    np.testing.assert_allclose(obs.ctx_y, prims.exact(obs.ctx_x, obs.task))


def test_reading_located_points_from_one_curve_per_row_equals_interpolation(prims):
    x = np.random.default_rng(2).uniform(-12, 12, size=(5, 4, 7))  # beyond the grid too
    index = np.array([0, 3, 17, 42, len(prims) - 1])
    got = prims.interp_rows(index, *prims.locate(x))
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, prims.interp(x, np.broadcast_to(index[:, None], x.shape[:2])))
