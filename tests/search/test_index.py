"""Nearest-neighbour retrieval matches a brute-force sort."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.search.index import nearest


def test_nearest_matches_brute_force():
    g = np.random.default_rng(0)
    z, lib = g.normal(size=(37, 5)), g.normal(size=(50, 5))
    idx, dist = nearest(z, lib, 4, chunk=10)
    d = np.linalg.norm(z[:, None] - lib[None], axis=2)
    np.testing.assert_array_equal(idx, np.argsort(d, axis=1)[:, :4])
    np.testing.assert_allclose(dist, np.sort(d, axis=1)[:, :4], atol=1e-9)


def test_nearest_whole_library_and_bad_k():
    g = np.random.default_rng(1)
    idx, _ = nearest(g.normal(size=(3, 2)), g.normal(size=(4, 2)), 4)
    assert sorted(idx[0]) == [0, 1, 2, 3]
    with pytest.raises(TaskextrapError, match="k must be"):
        nearest(np.zeros((1, 2)), np.zeros((3, 2)), 4)


def test_posterior_weights():
    from taskextrap.search.posterior import posterior_weights

    loss = np.array([[1.0, 1.0, 10.0], [0.5, 2.0, 4.0]])
    w = posterior_weights(loss, 1.0)
    np.testing.assert_allclose(w.sum(1), 1.0)
    assert w[0, 0] == pytest.approx(w[0, 1]) and w[0, 2] < 1e-3
    assert w[1, 0] > w[1, 1] > w[1, 2]
    np.testing.assert_array_equal(posterior_weights(loss, None), [[1, 0, 0], [1, 0, 0]])
