"""Nearest-neighbour retrieval: every backend gives the exact brute-force answer, nearest first,
ties by the lowest library index."""

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskextrap.errors import TaskextrapError
from taskextrap.search.index import BACKENDS, nearest, nearest_exact

HAVE_FAISS = importlib.util.find_spec("faiss") is not None
ALL = [b for b in BACKENDS if b != "faiss" or HAVE_FAISS]


def reference(z, lib, k):
    """The rule spelled out: sort each row's (distance, index) pairs, keep the first k."""
    idx, dist = [], []
    for row in z:
        d = [float(np.linalg.norm(row - item)) for item in lib]
        best = sorted(range(len(lib)), key=lambda j: (d[j], j))[:k]
        idx.append(best)
        dist.append([d[j] for j in best])
    return np.array(idx), np.array(dist)


@pytest.mark.parametrize("backend", ALL)
def test_nearest_matches_brute_force(backend):
    g = np.random.default_rng(0)
    z, lib = g.normal(size=(37, 5)), g.normal(size=(50, 5))
    idx, dist = nearest(z, lib, 4, chunk=10, backend=backend)
    d = np.linalg.norm(z[:, None] - lib[None], axis=2)
    np.testing.assert_array_equal(idx, np.argsort(d, axis=1)[:, :4])
    # the distances are bit for bit those of np.linalg.norm over the differences
    np.testing.assert_array_equal(dist, np.take_along_axis(d, idx, 1))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(1, 3), st.sampled_from(ALL), st.data())
def test_nearest_ties_go_to_the_lowest_index(n_lib, n_z, width, backend, data):
    # coordinates from {0, 1, 2}: many exact ties, also at the k-th place
    g = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    lib = g.integers(0, 3, size=(n_lib, width)).astype(float)
    z = g.integers(0, 3, size=(n_z, width)).astype(float)
    k = data.draw(st.integers(1, n_lib))
    idx, dist = nearest(z, lib, k, chunk=data.draw(st.integers(1, 8)), backend=backend)
    ref_idx, ref_dist = reference(z, lib, k)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(dist, ref_dist)


def test_a_near_tie_the_index_cannot_separate_is_recomputed():
    # two library rows 1e-9 apart in distance: a float32 index sees them equal; the answer is exact
    lib = np.array([[1.0, 0.0], [1.0 + 1e-9, 0.0], [5.0, 5.0]] + [[9.0, 9.0]] * 20)
    z = np.zeros((1, 2))
    for backend in ALL:
        idx, _ = nearest(z, lib[[1, 0, *range(2, len(lib))]], 1, backend=backend)
        assert idx[0, 0] == 1, backend  # the row at distance 1.0, now at index 1


@pytest.mark.parametrize("backend", ALL)
def test_ties_beyond_the_candidates_are_recomputed(backend):
    # 30 equal rows: the index proposes 9 of them, maybe not the first; the answer is rows 0, 1
    idx, _dist = nearest(np.full((3, 2), 0.5), np.ones((30, 2)), 2, backend=backend)
    np.testing.assert_array_equal(idx, [[0, 1]] * 3)


def test_nearest_whole_library_and_bad_input():
    g = np.random.default_rng(1)
    idx, _ = nearest(g.normal(size=(3, 2)), g.normal(size=(4, 2)), 4)
    assert sorted(idx[0]) == [0, 1, 2, 3]
    with pytest.raises(TaskextrapError, match="k must be"):
        nearest(np.zeros((1, 2)), np.zeros((3, 2)), 4)
    with pytest.raises(TaskextrapError, match="unknown nearest-neighbour backend"):
        nearest(np.zeros((1, 2)), np.zeros((3, 2)), 1, backend="annoy")
    with pytest.raises(TaskextrapError, match="same width"):
        nearest(np.zeros((1, 2)), np.zeros((3, 3)), 1)


def test_faiss_missing_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    with pytest.raises(TaskextrapError, match=r"faiss extra") as e:
        nearest(np.zeros((1, 2)), np.zeros((3, 2)), 1, backend="faiss")
    assert "\n" not in str(e.value)


def test_nearest_exact_is_the_reference_rule():
    g = np.random.default_rng(2)
    z, lib = g.integers(0, 2, size=(9, 2)).astype(float), g.integers(0, 2, size=(11, 2)).astype(float)
    for k in (1, 5, 11):
        np.testing.assert_array_equal(nearest_exact(z, lib, k)[0], reference(z, lib, k)[0])


def test_posterior_weights():
    from taskextrap.search.posterior import posterior_weights

    loss = np.array([[1.0, 1.0, 10.0], [0.5, 2.0, 4.0]])
    w = posterior_weights(loss, 1.0)
    np.testing.assert_allclose(w.sum(1), 1.0)
    assert w[0, 0] == pytest.approx(w[0, 1]) and w[0, 2] < 1e-3
    assert w[1, 0] > w[1, 1] > w[1, 2]
    np.testing.assert_array_equal(posterior_weights(loss, None), [[1, 0, 0], [1, 0, 0]])


def test_auto_backend_follows_the_benchmark():
    from taskextrap.search.index import auto_backend

    assert auto_backend(200, 2) == "brute"  # the paper's parameter library: small k
    assert auto_backend(9_000, 10) == "brute"  # the paper's composition primitives
    assert auto_backend(8_000, 3_200) == "numpy"  # the length screening: 40% of the library
    assert auto_backend(90_000, 10) == "brute"  # a large library, small k: scikit-learn
    assert auto_backend(80_000, 32_000) == "numpy"  # k a large share of the library (length screening)
