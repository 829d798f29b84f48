"""RTE reads contexts of any size: more points than Psi's width as subsets, fewer with min_context."""

from __future__ import annotations

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.operators.pairs import present_masks
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet


@pytest.fixture(scope="module")
def objective_rte(quad_library, make_rte):
    return make_rte(search="objective", min_context=3).fit(quad_library)


def _targets(m: int, n: int = 4, seed: int = 0):
    fam = PARAMETER_FAMILIES["quadratic"]
    tasks = TaskSet.sample(fam, {"F2": n}, rng(seed, "context-size-targets"))
    g = np.random.default_rng(seed + m)
    cx, qx = g.uniform(*fam.domain, size=(n, m)), g.uniform(*fam.domain, size=(n, 5))
    return cx, tasks.values(cx), qx


def test_a_context_larger_than_psi_is_read_as_the_mean_of_its_subsets(fitted_rte):
    cx, cy, qx = _targets(16)
    d = fitted_rte.decompose(cx, cy)
    order = np.argsort(cx, axis=1)
    sx, sy = np.take_along_axis(cx, order, 1), np.take_along_axis(cy, order, 1)
    views = fitted_rte.views(sx, sy)
    assert len(views) == 2 and all(v[0].shape == (4, 8) for v in views)
    assert sorted(np.concatenate([v[0] for v in views], axis=1)[0]) == sorted(sx[0])  # every point once
    got = fitted_rte.predict(cx, cy, qx, decomposition=d)
    lib = fitted_rte.library_
    one = [
        np.mean([fitted_rte.psi_.predict(vx, vy, lib.values(vx, d.anchors[:, j]), qx, lib.values(qx, d.anchors[:, j]),
                                         d.phi[:, j]) for vx, vy, _ in views], axis=0)
        for j in range(d.k)
    ]  # fmt: skip
    np.testing.assert_allclose(got, np.mean(one, axis=0), rtol=1e-12)


@pytest.mark.parametrize("m", [9, 13, 32])
def test_every_point_of_any_larger_context_is_in_some_subset(fitted_rte, m):
    sx = np.sort(np.random.default_rng(m).uniform(0, 1, size=(2, m)), axis=1)
    views = fitted_rte.views(sx, sx)
    assert len(views) == -(-m // 8)
    for vx, _, present in views:
        assert vx.shape == (2, 8) and present is None and np.all(np.diff(vx, axis=1) > 0)
    assert set(np.concatenate([v[0][0] for v in views])) == set(sx[0])


def test_a_smaller_context_needs_min_context_and_the_error_names_it(fitted_rte):
    cx, cy, qx = _targets(5)
    with pytest.raises(TaskextrapError, match=r"ctx_x has 5 point\(s\) per task; this RTE reads at least 8"):
        fitted_rte.predict(cx, cy, qx)


@pytest.mark.parametrize("m", [3, 5, 8, 20])
def test_with_min_context_contexts_of_any_size_above_it_are_predicted(objective_rte, m):
    cx, cy, qx = _targets(m)
    mean, std = objective_rte.predict(cx, cy, qx, return_std=True)
    assert mean.shape == qx.shape and np.all(np.isfinite(mean)) and np.all(std > 0)


def test_a_padded_context_hides_the_missing_points(objective_rte):
    sx = np.sort(np.random.default_rng(0).uniform(-1, 1, size=(2, 3)), axis=1)
    ((vx, vy, present),) = objective_rte.views(sx, sx * 2)
    assert vx.shape == (2, 8) and present.sum(axis=1).tolist() == [3, 3]
    assert np.all(np.diff(vx, axis=1) >= 0)
    np.testing.assert_array_equal(vx[present == 1].reshape(2, 3), sx)
    assert np.all(vy[present == 0] == 0)


def test_below_min_context_is_still_refused(objective_rte):
    cx, cy, qx = _targets(2)
    with pytest.raises(
        TaskextrapError, match=r"reads at least 3 \(its Psi was trained on 8-point contexts, down to 3\)"
    ):
        objective_rte.predict(cx, cy, qx)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(min_context=9), "more than the protocol's n_context=8"),
        (dict(min_context=4, search="proxy"), "needs loo=True"),
        (dict(min_context=0), "min_context"),
    ],
)
def test_bad_min_context_is_one_line(make_rte, quad_library, kwargs, match):
    with pytest.raises(TaskextrapError, match=match):
        make_rte(**kwargs).fit(quad_library)


def test_present_masks_hide_up_to_k_minus_low_points():
    m = present_masks(np.random.default_rng(0), 2000, 8, 3)
    kept = m.sum(axis=1)
    assert kept.min() == 3 and kept.max() == 8 and set(np.unique(m)) == {0.0, 1.0}
    np.testing.assert_array_equal(m, present_masks(np.random.default_rng(0), 2000, 8, 3))


def test_a_chained_rte_reads_only_its_own_size(make_rte):
    from taskextrap.estimators.multistep import ChainedRTE

    with pytest.raises(TaskextrapError, match="ChainedRTE does not read"):
        ChainedRTE(min_context=4, search="objective", verbose=False)._settings()
