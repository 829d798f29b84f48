"""The batched k^d chain verification equals its Python-loop reference; refinement never fits worse."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.search import chain_search as S
from taskextrap.seeding import rng
from taskextrap.tasks.chains import DEPTH3_FAMILIES, DEPTH3_GRID, PAPER_RECIPE_SPLIT, ChainSet, with_identity
from taskextrap.tasks.primitives import PrimitiveSet


@pytest.fixture(scope="module")
def problem():
    prims = with_identity(PrimitiveSet.sample(DEPTH3_FAMILIES, 10, rng(0, "test-search-depth3"), grid=DEPTH3_GRID))
    tg = ChainSet.sample(prims, PAPER_RECIPE_SPLIT.test, 4, np.random.default_rng(1))
    g = np.random.default_rng(2)
    x = g.uniform(-5, 5, (4, 12))
    y = tg.values(x)
    # slot candidates of different sizes; the true primitive is among them except in the last target's outer slot
    cands = [g.integers(len(prims), size=(4, k)) for k in (5, 3, 4)]
    for j in range(3):
        cands[j][:, -1] = tg.chains[:, j]
    cands[0][3] = (tg.chains[3, 0] + 1 + np.arange(5)) % len(prims)
    return prims, tg, x, y, cands


def test_batched_verification_equals_the_python_loop(problem):
    prims, _, x, y, cands = problem
    loop = S.chain_losses_loop(prims, x, y, cands)
    assert loop.shape == (4, 5 * 3 * 4)
    np.testing.assert_allclose(S.chain_losses(prims, x, y, cands), loop, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(S.chain_losses(prims, x, y, cands, max_floats=7), loop, rtol=1e-5, atol=1e-6)  # chunked
    chains, loss = S.verify_chains(prims, x, y, cands, keep=10)
    assert chains.shape == (4, 10, 3) and np.all(np.diff(loss, axis=1) >= 0)
    np.testing.assert_allclose(loss, np.sort(loop, axis=1)[:, :10], rtol=1e-9, atol=1e-12)  # exact float64 rescoring
    np.testing.assert_allclose(S.context_losses(prims, x, y, chains), loss)
    # the true chain (loss ~0: interpolation of stored curves only) wins where it is a candidate
    truth = np.array([[c[i, -1] for c in cands] for i in range(3)])
    np.testing.assert_array_equal(chains[:3, 0], truth)


def test_refinement_never_fits_worse_and_finds_the_missing_outer_slot(problem):
    prims, tg, x, y, cands = problem
    chains, loss = S.verify_chains(prims, x, y, cands, keep=6)
    assert not (chains[3, 0] == tg.chains[3]).all()
    ref, ref_loss = S.refine_chains(prims, x, y, chains, loss, rounds=2)
    assert ref.shape == chains.shape and np.all(ref_loss[:, 0] <= loss[:, 0] + 1e-12)
    assert np.all(np.diff(ref_loss, axis=1) >= 0)
    np.testing.assert_allclose(S.context_losses(prims, x, y, ref), ref_loss, rtol=1e-9, atol=1e-12)
    assert all(len({tuple(c) for c in row}) == len(row) for row in ref)  # distinct chains
    np.testing.assert_array_equal(ref[:, 0], tg.chains)
    same, _same_loss = S.refine_chains(prims, x, y, chains, loss, rounds=0)
    np.testing.assert_array_equal(same, chains)


@pytest.mark.parametrize(("lanes", "values"), [("1", 1), ("2", 1), ("2", 2 * 12 * 31)])
def test_refinement_keeps_every_bit_in_any_chunk_and_lane_count(problem, monkeypatch, lanes, values):
    prims, _, x, y, cands = problem
    chains, loss = S.verify_chains(prims, x, y, cands, keep=6)
    one = S.refine_chains(prims, x, y, chains, loss, rounds=2)  # this machine's lanes, every target in a chunk
    monkeypatch.setenv("TASKEXTRAP_LANES", lanes)
    monkeypatch.setattr(S, "REFINE_VALUES", values)  # a target per chunk; two per chunk
    assert S.refine_chunk(len(x), x.shape[1], len(prims)) == (1 if values == 1 else 2)
    other = S.refine_chains(prims, x, y, chains, loss, rounds=2)
    np.testing.assert_array_equal(one[0], other[0])
    np.testing.assert_array_equal(one[1], other[1])


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_map_target_chunks_covers_every_target_once_in_order(monkeypatch, lanes):
    monkeypatch.setenv("TASKEXTRAP_LANES", lanes)
    monkeypatch.setattr(S, "REFINE_VALUES", 3 * 4 * 5)  # 3 targets of 4 points x 5 primitives per chunk
    slices = S.map_target_chunks(lambda s: s, 10, 4, 5)
    step = S.refine_chunk(10, 4, 5)
    assert step == 3 and [(s.start, s.stop) for s in slices] == [(0, 3), (3, 6), (6, 9), (9, 12)]
    assert np.concatenate([np.arange(10)[s] for s in slices]).tolist() == list(range(10))


def test_bad_candidates_are_one_line_errors(problem):
    prims, _, x, y, cands = problem
    for bad, match in ((cands[0], "list"), ([cands[0][:2]], r"\(4, k\)"), ([cands[0] + 1000], "library indices")):
        with pytest.raises(TaskextrapError, match=match):
            S.verify_chains(prims, x, y, bad, keep=3)
