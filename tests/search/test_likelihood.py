"""search.likelihood: distinct pairs scored once, ties within a tolerance, the vote rule."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.search import likelihood as search


def test_total_nll_scores_each_distinct_pair_once(monkeypatch):
    calls = []

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        calls.append(list(zip(prompts, completions, strict=True)))
        assert prefix_groups is None
        return np.array([len(p) + 10 * len(c) for p, c in zip(prompts, completions, strict=True)], dtype=float)

    monkeypatch.setattr(search, "completion_nll", fake)
    lists = [[("ab", "x"), ("abc", "y")], [("ab", "x")], [], [("ab", "x"), ("ab", "x")]]
    out = search.total_nll(None, lists)
    assert len(calls) == 1 and sorted(calls[0]) == [("ab", "x"), ("abc", "y")]
    np.testing.assert_allclose(out, [12 + 13, 12, 0, 24])


def _record_prefix_groups(monkeypatch, score: float) -> dict:
    """Replace the scorer by one that records each prompt's prefix group and scores ``score``."""
    seen = {}

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        seen.update(zip(prompts, prefix_groups, strict=True))
        return np.full(len(prompts), score)

    monkeypatch.setattr(search, "completion_nll", fake)
    return seen


def test_total_nll_groups_prefixes_by_first_list(monkeypatch):
    seen = _record_prefix_groups(monkeypatch, 0.0)
    search.total_nll(None, [[("p1", "x"), ("p2", "y")], [("p2", "y"), ("p3", "z")]], share_within_list=True)
    assert seen == {"p1": 0, "p2": 0, "p3": 1}  # a pair shared by two lists joins the first


def test_total_nll_groups_prefixes_by_given_keys_across_lists(monkeypatch):
    seen = _record_prefix_groups(monkeypatch, 1.0)
    lists = [[("p1", "x"), ("p2", "y")], [("p2", "y"), ("p3", "z")]]
    out = search.total_nll(None, lists, prefix_keys=[["a", "b"], ["c", "a"]])
    assert seen == {"p1": "a", "p2": "b", "p3": "a"} and out.tolist() == [2.0, 2.0]  # p2 keeps its first key
    with pytest.raises(TaskextrapError, match="one key per pair"):
        search.total_nll(None, lists, prefix_keys=[["a"], ["c", "a"]])


def test_prefix_keys_change_no_score(char_lm):
    """Sharing a prefix across lists is exact: the same scores as no sharing."""
    lists = [
        [("In: abc Out: cba\nIn: x", " y"), ("In: abc Out: cba\nIn: zz", " q")],
        [("In: abc Out: cba\nIn: w", " v")],
        [("In: d Out: d\nIn: e", " e")],
    ]
    plain = search.total_nll(char_lm, lists)
    shared = search.total_nll(char_lm, lists, prefix_keys=[["k", "k"], ["k"], ["other"]])
    np.testing.assert_allclose(shared, plain, rtol=1e-5, atol=1e-5)


def test_tied_and_vote():
    s = np.array([3.0, 0.2, 0.1, 0.55, 9.0])
    np.testing.assert_array_equal(search.tied(s, 0.5), [2, 1, 3])
    np.testing.assert_array_equal(search.tied(s, 0.0), [2])
    assert search.tied(np.array([1.0, 1.0]), 0.0).tolist() == [0, 1]  # exact ties: enumeration order
    assert search.vote([1, 0, 0, 1]) == 1 and search.vote([0, 1, 1]) == 1 and search.vote(["a"]) == "a"
    with pytest.raises(TaskextrapError):
        search.tied(np.array([]))
    with pytest.raises(TaskextrapError):
        search.tied(s, -1.0)
    with pytest.raises(TaskextrapError):
        search.vote([])


def test_candidate_scores_resume_from_saved_chunks_and_equal_one_call(char_lm, tmp_path):
    """Chunked, saved and resumed scores equal one unchunked call; a rerun reads every chunk."""
    tasks = [("ab", "ba"), ("abc", "cba"), ("xy", "yx")]
    cands = ["reverse", "identity"]

    def loo(task, cand):
        x, y = task
        return [(f"{cand}: {x} ->", f" {y}"), (f"{cand}: {y} ->", f" {x}")]

    whole = search.candidate_scores(char_lm, tasks, cands, loo, batch_size=4)
    chunked = search.candidate_scores(char_lm, tasks, cands, loo, batch_size=4, cache_dir=tmp_path, tasks_per_chunk=2)
    np.testing.assert_allclose(chunked, whole, rtol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "scores-0000.npy",
        "scores-0000.sha256",
        "scores-0002.npy",
        "scores-0002.sha256",
    ]
    again = search.candidate_scores(None, tasks, cands, loo, batch_size=4, cache_dir=tmp_path, tasks_per_chunk=2)
    np.testing.assert_array_equal(again, chunked)  # no model needed: every chunk is read back

    # a damaged chunk is scored again (one warning) and replaced; an intact one is still read back
    from taskextrap.errors import TaskextrapWarning

    chunk = tmp_path / "scores-0000.npy"
    original = chunk.read_bytes()
    damages = {
        "truncated": original[: len(original) // 2],
        "empty": b"",
        "garbage": b"\x93NUMPY garbage",
        "edited": original[:-8] + np.float64(7.0).tobytes(),
    }
    for how, data in damages.items():
        chunk.write_bytes(data)
        with pytest.warns(TaskextrapWarning, match="scores-0000.npy are damaged") as caught:
            redone = search.candidate_scores(
                char_lm, tasks, cands, loo, batch_size=4, cache_dir=tmp_path, tasks_per_chunk=2
            )
        assert len(caught) == 1, how
        np.testing.assert_allclose(redone, chunked, rtol=1e-5, err_msg=how)
        again = search.candidate_scores(None, tasks, cands, loo, batch_size=4, cache_dir=tmp_path, tasks_per_chunk=2)
        np.testing.assert_array_equal(again, redone)  # the replaced file is intact


def _fake_scorer(monkeypatch, seed: int = 0) -> list:
    """Replace the scorer by a fixed random NLL per (prompt, completion) pair; returns the pairs
    it was asked for, call by call."""
    calls = []

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        calls.append(list(zip(prompts, completions, strict=True)))
        # a few candidates explain the support (small NLLs), most do not
        return np.array(
            [
                np.random.default_rng([seed, *map(ord, p + c)]).exponential(1.0 if "good" in p else 6.0)
                for p, c in zip(prompts, completions, strict=True)
            ]
        )

    monkeypatch.setattr(search, "completion_nll", fake)
    return calls


def _loo3(task, cand):
    return [(f"{cand} {task} {j}", " y") for j in range(3)]


@pytest.mark.parametrize("within", [0.0, 0.5, 3.0])
def test_bounded_search_keeps_the_best_and_the_tied_with_their_scores(monkeypatch, within):
    """Branch and bound: every candidate within ``keep_within`` of its task's best keeps its
    exact score, every other one is inf, and fewer sequences are scored than in the full search."""
    calls = _fake_scorer(monkeypatch)
    tasks = list(range(5))
    cands = [f"good{i}" for i in range(4)] + [f"bad{i}" for i in range(60)]
    full = search.candidate_scores(None, tasks, cands, _loo3, batch_size=8)
    n_full = sum(map(len, calls))
    calls.clear()
    bounded = search.candidate_scores(None, tasks, cands, _loo3, batch_size=8, keep_within=within)
    n_bounded = sum(map(len, calls))
    keep = full <= full.min(1, keepdims=True) + within
    np.testing.assert_array_equal(bounded[keep], full[keep])
    np.testing.assert_array_equal(bounded[np.isfinite(bounded)], full[np.isfinite(bounded)])
    for f, b in zip(full, bounded, strict=True):
        np.testing.assert_array_equal(search.tied(b, within), search.tied(f, within))
    assert n_bounded < (0.5 if within == 0 else 0.9) * n_full  # every first example, then fewer
    assert len({p for c in calls for p in c}) == n_bounded  # no pair scored twice


def test_bounded_search_with_a_real_model_matches_the_full_one(noisy_lm, tmp_path):
    """The same best and tied candidates, the same scores (to float tolerance: batches differ),
    saved in a file of its own; a full search's file answers a bounded one."""
    tasks = [("ab", "ba"), ("abc", "cba"), ("xy", "yx"), ("aab", "baa")]
    cands = ["reverse", "identity", "swap", "first", "last", "double"]

    def loo(task, cand):
        x, y = task
        return [(f"{cand}: {x} ->", f" {y}"), (f"{cand}: {y} ->", f" {x}"), (f"{cand}: {x}{y} ->", f" {y}{x}")]

    full = search.candidate_scores(noisy_lm, tasks, cands, loo, batch_size=4)
    bounded = search.candidate_scores(
        noisy_lm, tasks, cands, loo, batch_size=4, cache_dir=tmp_path / "b", keep_within=0.5
    )
    finite = np.isfinite(bounded)
    np.testing.assert_allclose(bounded[finite], full[finite], rtol=1e-5)
    assert (full[~finite] > full.min(1, keepdims=True).repeat(len(cands), 1)[~finite] + 0.5).all()
    for f, b in zip(full, bounded, strict=True):
        np.testing.assert_array_equal(search.tied(b), search.tied(f))
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "scores-0000-within0.5.npy",
        "scores-0000-within0.5.sha256",
    ]
    search.candidate_scores(noisy_lm, tasks, cands, loo, batch_size=4, cache_dir=tmp_path / "f")
    again = search.candidate_scores(None, tasks, cands, loo, batch_size=4, cache_dir=tmp_path / "f", keep_within=0.5)
    np.testing.assert_array_equal(again, full)  # no model: the full file was read
    with pytest.raises(TaskextrapError, match="keep_within"):
        search.candidate_scores(noisy_lm, tasks, cands, loo, batch_size=4, keep_within=-1.0)


def test_bounded_search_scores_a_repeated_pair_once_so_exact_ties_stay_exact(monkeypatch):
    """Candidates with identical prompts (parity parents, say) keep identical scores even when the
    bound scores them in different stages, whose batches round differently: the arg-min of an
    exact tie stays the first in enumeration order, as in the full search."""
    calls = []

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        calls.append(list(zip(prompts, completions, strict=True)))  # a score that moves with the batch, as real ones do
        return np.array([float(len(p) % 5) + 1e-6 * len(prompts) for p in prompts])

    monkeypatch.setattr(search, "completion_nll", fake)
    cands = [f"c{i}" for i in range(12)]

    def loo(task, cand):  # candidates of equal number mod 3 have identical prompts
        return [(f"{int(cand[1:]) % 3} {task} {j}" + "x" * (j * (int(cand[1:]) % 3)), " y") for j in range(3)]

    full = search.candidate_scores(None, [0, 1], cands, loo, batch_size=4)
    calls.clear()
    bounded = search.candidate_scores(None, [0, 1], cands, loo, batch_size=4, keep_within=0.5)
    pairs = [p for c in calls for p in c]
    assert len(calls) > 1 and len(pairs) == len(set(pairs))  # stages, and nothing scored twice
    for b in bounded:  # every group of identical candidates: one score (or inf)
        assert all(len(set(b[g::3][np.isfinite(b[g::3])])) <= 1 for g in range(3))
    np.testing.assert_array_equal(bounded.argmin(1), full.argmin(1))


def test_unbounded_search_gives_the_scorer_what_one_call_over_all_lists_did(monkeypatch):
    """keep_within=None is the search of before the bound: one call, the same distinct pairs in
    the same order with the same prefix groups as ``total_nll`` over every candidate's list."""
    seen = []

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        seen.append((list(prompts), list(completions), list(prefix_groups)))
        return np.arange(len(prompts), dtype=float)

    monkeypatch.setattr(search, "completion_nll", fake)
    tasks, cands = [0, 1], ["ab", "ac", "b", "ab"]  # a repeated candidate: repeated pairs

    def loo(task, cand):
        return [(f"{cand[0]} {task} {j} {cand}", " y") for j in range(3)]

    scores = search.candidate_scores(None, tasks, cands, loo, batch_size=4, prefix_of=lambda c: c[0])
    old = search.total_nll(
        None,
        [loo(t, c) for t in tasks for c in cands],
        4,
        prefix_keys=search.prefix_keys(len(tasks), cands, 3, lambda c: c[0]),
    )
    assert len(seen) == 2 and seen[0] == seen[1]
    np.testing.assert_array_equal(scores.ravel(), old)


def test_search_refuses_nan_scores_and_uneven_pair_lists(monkeypatch):
    monkeypatch.setattr(search, "completion_nll", lambda lm, p, c, **kw: np.full(len(p), np.nan))
    with pytest.raises(TaskextrapError, match="NaN"):
        search.candidate_scores(None, [0], ["a", "b"], _loo3, batch_size=4, keep_within=0.5)
    monkeypatch.setattr(search, "completion_nll", lambda lm, p, c, **kw: np.ones(len(p)))
    with pytest.raises(TaskextrapError, match="same number of pairs"):
        search.candidate_scores(None, [0], ["a", "bb"], lambda t, c: _loo3(t, c)[: len(c) + 1], batch_size=4)


def test_bounded_search_refuses_negative_scores_which_would_drop_the_true_best(monkeypatch):
    """The issue-46 case: per-pair scores [5, -4, 0.1] against [0.5, 0.5, 0.5] sum to 1.1 and 1.5,
    but after the first pair the bound would drop the first candidate (5 > 0.5 + tolerance)."""
    table = {"a": [5.0, -4.0, 0.1], "b": [0.5, 0.5, 0.5]}

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        return np.array([table[p.split()[0]][int(p.split()[-1])] for p in prompts])

    monkeypatch.setattr(search, "completion_nll", fake)
    full = search.candidate_scores(None, [0], ["a", "b"], _loo3, batch_size=4)
    np.testing.assert_allclose(full, [[1.1, 1.5]])  # the full search ranks a first
    with pytest.raises(TaskextrapError, match=r"negative score \(-4\).*non-negative NLLs"):
        search.candidate_scores(None, [0], ["a", "b"], _loo3, batch_size=4, keep_within=0.5)


def test_with_a_batch_dependent_scorer_the_bounded_scores_match_only_up_to_the_rounding(monkeypatch):
    """Where the guarantee ends: a pair's score moves with its batch (here by 1e-6 per pair in the
    call), so the bounded search's scores differ from the full one's by that much, not 0; the best
    stays the best when the gap to the others is larger than the rounding."""

    def fake(lm, prompts, completions, batch_size=32, progress=None, prefix_groups=None):
        base = [1.0 if "good0" in p else 3.0 + (len(p) % 7) for p in prompts]
        return np.array(base) + 1e-6 * len(prompts)

    monkeypatch.setattr(search, "completion_nll", fake)
    cands = ["good0", *(f"bad{i}" for i in range(20))]
    full = search.candidate_scores(None, [0, 1], cands, _loo3, batch_size=4)
    bounded = search.candidate_scores(None, [0, 1], cands, _loo3, batch_size=4, keep_within=0.5)
    finite = np.isfinite(bounded)
    assert not np.array_equal(bounded[finite], full[finite])  # other batches: other rounding
    np.testing.assert_allclose(bounded[finite], full[finite], atol=1e-3)
    np.testing.assert_array_equal(bounded.argmin(1), full.argmin(1))
