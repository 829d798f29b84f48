"""Sparse-parity task module: library/test split, prompts, samplers, LOO pairs, exact search."""

import importlib.util
import itertools
import re

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.llm import parity as P
from taskextrap.tasks import parity as T
from taskextrap.seeding import rng

ALL_X = np.array(list(itertools.product([0, 1], repeat=8)))


def test_counts_and_sizes():
    assert len(T.TRAIN_MASKS) == 210 and len(set(T.TRAIN_MASKS)) == 210
    sizes = [len(m) for m in T.TRAIN_MASKS]
    assert sizes == sorted(sizes)  # enumeration order: by size, then lexicographic
    assert {len(m) for m in T.TRAIN_MASKS} == {2, 3, 4, 5}
    assert len(T.TEST_MASKS) == 28 and all(len(m) == 6 for m in T.TEST_MASKS)
    assert list(T.TEST_MASKS) == sorted(T.TEST_MASKS)
    assert not set(T.TRAIN_MASKS) & set(T.TEST_MASKS)
    assert len(T.candidates("frontier")) == 168
    assert len(T.candidates("all")) == 1680
    assert len(T.candidates("authors")) == 448 == 56 * 8


def test_authors_space_is_every_size5_mask_times_every_bit():
    cands = T.candidates("authors")
    assert len(set(cands)) == 448
    assert {m for m, _ in cands} == {m for m in T.TRAIN_MASKS if len(m) == 5}
    assert all({b for m2, b in cands if m2 == m} == set(range(8)) for m, _ in cands)
    implied = [T.implied_mask(m, b) for m, b in cands]
    assert {len(m) for m in implied} == {4, 6}
    assert sum(len(m) == 6 for m in implied) == 168 and sum(len(m) == 4 for m in implied) == 280
    assert set(implied) >= set(T.TEST_MASKS)  # every test mask is reachable
    assert set(T.candidates("frontier")) < set(cands)


def test_dev_split_is_one_level_down():
    dev = T.get_split("dev")
    assert dev.train_sizes == (2, 3, 4) and dev.target_size == 5 and dev.frontier_size == 4
    assert len(dev.train_masks) == 154 and len(dev.target_masks) == 56
    assert not set(dev.train_masks) & set(dev.target_masks)
    assert set(dev.train_masks) < set(T.TRAIN_MASKS) and set(dev.target_masks) <= set(T.TRAIN_MASKS)
    assert [len(T.candidates(s, "dev")) for s in T.SPACES] == [560, 280, 1232]
    implied = {s: [T.implied_mask(*c) for c in T.candidates(s, "dev")] for s in T.SPACES}
    assert {len(m) for m in implied["authors"]} == {3, 5}
    assert set(implied["frontier"]) == set(dev.target_masks)
    assert max(len(m) for s in T.SPACES for m in implied[s]) == 5  # no candidate reaches size 6
    tasks = T.make_test_tasks(0, split="dev")
    assert [t.mask for t in tasks] == list(dev.target_masks)
    assert all(np.array_equal(t.query_y, T.parity(t.mask, t.query_x)) for t in tasks)
    with pytest.raises(TaskextrapError, match="split"):
        T.get_split("val")
    with pytest.raises(TaskextrapError, match="dev training mask"):
        T.sample_training_task(rng(0, "t"), mask=(0, 1, 2, 3, 4), split="dev")


@pytest.mark.parametrize("split", ["test", "dev"])
def test_training_corpora_hold_only_the_splits_training_masks(split):
    """Every item of every fine-tuning or pretraining sampler carries its mask; none is held out."""
    sizes = T.get_split(split).train_sizes
    items = [
        i
        for f in (P.baseline_pairs, P.extender_pairs, P.row_pairs, P.pretraining_pairs)
        for i in f(rng(0, f.__name__), 200, split)
    ]
    assert all(isinstance(i, audit.Tagged) for i in items) and len(items) == 800
    assert {len(i.task) for i in items} == set(sizes)


def test_dev_pretraining_corpora_hold_no_mask_of_size_5_or_6():
    from taskextrap.llm.pretrain import SPECS

    spec = SPECS["parity-dev"]
    assert [st.corpus.split(":")[1] for st in spec.stages] == ["dev_row_pairs", "dev_pretraining_pairs"]
    assert spec.check.endswith(":dev_pretraining_check")
    items = [i for k, stage in enumerate(spec.stages) for i in stage.sampler()(rng(0, "dev-corpus", k), 500)]
    assert len(items) == 1000 and {len(i.task) for i in items} == {2, 3, 4}


def test_test_split_streams_are_unchanged():
    """--test-seed 10000 reproduces the tasks of the runs before the split option."""
    tasks = T.make_test_tasks(10_000)
    assert tasks[0].support_x[0].tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
    assert tasks[27].query_x[9].tolist() == [0, 0, 1, 1, 1, 1, 0, 0]
    dev = T.make_test_tasks(10_000, split="dev")
    assert not np.array_equal(dev[0].support_x, tasks[0].support_x)


def test_frontier_implies_size6_and_covers_every_test_mask():
    implied = [T.implied_mask(m, b) for m, b in T.candidates("frontier")]
    assert all(len(m) == 6 for m in implied)
    assert set(implied) == set(T.TEST_MASKS)
    assert T.implied_mask((1, 2), 2) == (1,) and T.implied_mask((1, 2), 5) == (1, 2, 5)
    with pytest.raises(TaskextrapError, match="authors, frontier, all"):
        T.candidates("everything")


def test_parity_bit_order():
    x = np.array([[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0, 1]])
    assert T.parity((0,), x).tolist() == [1, 0]
    assert T.parity((1, 2), x).tolist() == [0, 0]
    assert T.parity((0, 7), x).tolist() == [1, 1]


def test_test_tasks_deterministic_and_correct():
    tasks = T.make_test_tasks(0)
    assert [t.mask for t in tasks] == list(T.TEST_MASKS)
    t = tasks[3]
    assert t.support_x.shape == (5, 8) and t.query_x.shape == (10, 8)
    assert np.array_equal(t.support_y, T.parity(t.mask, t.support_x))
    assert np.array_equal(t.query_y, T.parity(t.mask, t.query_x))
    again = T.make_test_tasks(0)
    assert all(np.array_equal(a.query_x, b.query_x) for a, b in zip(tasks, again, strict=True))
    other = T.make_test_tasks(1)
    assert not all(np.array_equal(a.query_x, b.query_x) for a, b in zip(tasks, other, strict=True))


def test_training_task_rejects_test_masks():
    with pytest.raises(TaskextrapError):
        T.sample_training_task(rng(0, "t"), mask=T.TEST_MASKS[0])
    t = T.sample_training_task(rng(0, "t"), mask=(3, 1))
    assert t.mask == (1, 3) and t.support_x.shape == (5, 8) and t.query_x.shape == (1, 8)


def test_baseline_prompt_format():
    sx = np.array([[1, 0, 0, 0, 0, 0, 0, 1]])
    prompt = P.baseline_prompt(sx, [1], np.zeros(8, dtype=int))
    assert prompt == ("Instruction: Compute the Output.\n###\nIn: 1 0 0 0 0 0 0 1\nOut: 1\n\nIn: 0 0 0 0 0 0 0 0\nOut:")
    assert P.label_completion(np.int64(0)) == " 0" and P.label_completion(1) == " 1"
    assert P.parse_label(" 1\n") == 1 and P.parse_label("x") is None


def test_extender_prompt_format():
    sx = np.array([[1, 1, 0, 0, 0, 0, 0, 0]])
    q = np.array([0, 1, 0, 0, 0, 0, 0, 1])
    prompt = P.extender_prompt(sx, [0], q, parent_mask=(0, 1), bit=7)
    assert prompt == (
        "Instruction: Compute the Output.\n###\n"
        "In: 1 1 0 0 0 0 0 0\nAnchor: 0\nBit: 0\nOut: 0\n\n"
        "In: 0 1 0 0 0 0 0 1\nAnchor: 1\nBit: 1\nOut:"
    )


def _rows(prompt):
    """(anchor, bit, out) of each complete example row of an extender prompt."""
    return [tuple(map(int, r)) for r in re.findall(r"Anchor: (\d)\nBit: (\d)\nOut: (\d)", prompt)]


def test_samplers_use_training_masks_only(monkeypatch):
    seen, ext = [], []
    real_task, real_ext = T.sample_training_task, P.extender_prompt

    def spy_task(g, mask=None, **kw):
        t = real_task(g, mask, **kw)
        seen.append(t.mask)
        return t

    def spy_ext(sx, sy, qx, parent, bit):
        ext.append((seen[-1], tuple(parent), bit))
        return real_ext(sx, sy, qx, parent, bit)

    monkeypatch.setattr(P, "sample_training_task", spy_task)
    monkeypatch.setattr(P, "extender_prompt", spy_ext)
    base = P.baseline_pairs(rng(0, "b"), 300)
    exts = P.extender_pairs(rng(0, "e"), 300)
    corpus = P.pretraining_pairs(rng(0, "c"), 200)
    assert len(seen) == 800 and set(seen) <= set(T.TRAIN_MASKS)
    n_ext = sum("Anchor:" in p for p, _ in corpus)
    assert 60 < n_ext < 140 and len(corpus) == 200  # a mix of both formats
    assert len(set(seen)) > 150  # the whole library is visited, not one mask
    for mask, parent, bit in ext:
        assert 1 <= len(parent) <= 4 and bit not in parent
        assert T.implied_mask(parent, bit) == mask
    for prompt, completion in base + exts:
        assert completion in (" 0", " 1") and prompt.endswith("Out:")
        assert prompt.count("In: ") == 6
    for prompt, _ in exts:  # the label is always Anchor XOR Bit
        assert all(a ^ b == o for a, b, o in _rows(prompt))


def _keyed_answer(prompt):
    """(key, expected answer) of a keyed extender prompt's query row."""
    m = re.search(r"Anchor: (\d)\nBit: (\d)\n(Out:|CpA:|CpB:) ?$", prompt)
    a, b, key = int(m.group(1)), int(m.group(2)), m.group(3)
    return key, {"Out:": a ^ b, "CpA:": a, "CpB:": b}[key]


def test_curriculum_stage1_rows_answer_anchor_bit_or_xor():
    pairs = P.row_pairs(rng(0, "rows"), 300)
    keys = []
    for prompt, answer in pairs:
        assert prompt.startswith("In: ") and prompt.count("In: ") == 1 and prompt.endswith(": ")
        assert P.INSTRUCTION not in prompt and answer in ("0", "1")
        key, expected = _keyed_answer(prompt)
        assert int(answer) == expected
        keys.append(key)
    assert all(70 < keys.count(k) < 130 for k in ("Out:", *P.AUX_KEYS))


def test_curriculum_stage2_mixes_fewshot_and_keyed_extender_prompts():
    pairs = P.pretraining_pairs(rng(0, "stage2"), 400)
    keyed = [(p, c) for p, c in pairs if "Anchor:" in p]
    assert 150 < len(keyed) < 250
    shots = set()
    for prompt, completion in pairs:
        assert prompt.startswith(P.INSTRUCTION) and completion in (" 0", " 1")
    for prompt, completion in keyed:
        _key, expected = _keyed_answer(prompt)
        assert int(completion) == expected
        assert all(a ^ b == o for a, b, o in _rows(prompt))  # shots always show the XOR
        shots.add(prompt.count("In: ") - 1)
    assert shots == set(range(6))


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,  # before the fixture builds a model
    reason="transformers is not installed: pip install 'taskextrap[llm]'",
)
def test_label_accuracy_reads_the_lower_nll_label(noisy_lm):
    pairs = [(p[:-1], " " + a) for p, a in P.row_pairs(rng(0, "acc"), 20)]  # short: the tiny model's 256
    acc = P.label_accuracy(noisy_lm, pairs)
    flipped = [(p, " 1" if c == " 0" else " 0") for p, c in pairs]
    assert acc + P.label_accuracy(noisy_lm, flipped) == pytest.approx(1.0)


def test_loo_pairs_hold_out_each_support_once():
    task = T.make_test_tasks(0)[5]
    parent, bit = T.oracle_parent(task.mask)
    pairs = P.loo_pairs(task, parent, bit)
    assert len(pairs) == 5
    rows = [P.format_bits(x) for x in task.support_x]
    for i, (prompt, completion) in enumerate(pairs):
        ins = re.findall(r"In: ([01 ]+)\n", prompt)
        assert ins[-1] == rows[i] and sorted(ins[:-1]) == sorted(rows[:i] + rows[i + 1 :])
        assert completion == P.label_completion(task.support_y[i])
        # the oracle decomposition is consistent, so Anchor XOR Bit is the label on every row
        assert all(a ^ b == o for a, b, o in _rows(prompt))


def test_oracle_parent():
    assert T.oracle_parent((4, 1, 2)) == ((2, 4), 1)
    m = T.TEST_MASKS[0]
    parent, bit = T.oracle_parent(m)
    assert parent in T.TRAIN_MASKS and T.implied_mask(parent, bit) == m


def _brute_consistent(task, space, split="test"):
    return [
        (m, b)
        for m, b in T.candidates(space, split)
        if np.array_equal(T.parity(T.implied_mask(m, b), task.support_x), task.support_y)
    ]


@pytest.mark.parametrize("split", ["test", "dev"])
@pytest.mark.parametrize("space", ["authors", "frontier", "all"])
def test_exact_search_counts_and_contains_truth(space, split):
    for task in T.make_test_tasks(0, split=split)[:10]:
        cons = T.consistent_candidates(task, space, split)
        assert cons == _brute_consistent(task, space, split)
        assert T.oracle_parent(task.mask) in cons
        preds, n = T.exact_search(task, space, split=split)
        assert n == len(cons) and preds.shape == (10,)
        first = T.parity(T.implied_mask(*cons[0]), task.query_x)
        assert np.array_equal(preds, first)


@pytest.mark.parametrize("space", ["authors", "frontier", "all"])
def test_exact_search_full_information_is_exact(space):
    mask = T.TEST_MASKS[7]
    y = T.parity(mask, ALL_X)
    task = T.ParityTask(mask, ALL_X, y, ALL_X[:10], y[:10])
    preds, n = T.exact_search(task, space, tie_vote=True)
    assert n == 6  # the six (size-5 parent, missing bit) decompositions of the mask
    assert all(T.implied_mask(*c) == mask for c in T.consistent_candidates(task, space))
    assert np.array_equal(preds, y[:10])


def test_tie_vote_rule():
    for task in T.make_test_tasks(3)[:8]:
        cons = T.consistent_candidates(task, "all")
        votes = np.stack([T.parity(T.implied_mask(*c), task.query_x) for c in cons])
        ones, first = votes.sum(0), votes[0]
        expected = np.where(2 * ones == len(cons), first, (2 * ones > len(cons)).astype(int))
        preds, n = T.exact_search(task, "all", tie_vote=True)
        assert n == len(cons) and np.array_equal(preds, expected)


def test_exact_search_without_consistent_candidate():
    x = np.zeros((2, 8), dtype=int)
    task = T.ParityTask((0, 1, 2, 3, 4, 5), x, np.array([0, 1]), x[:1], np.array([0]))
    preds, n = T.exact_search(task, "frontier")
    assert n == 0 and preds.shape == (1,)


def test_shipped_dev_model_was_pretrained_on_dev_masks_only():
    """The --split dev base model's log: the dev spec (corpora of sizes 2-4), and it executes the XOR."""
    import dataclasses
    import json

    from taskextrap.llm.pretrain import MODELS_DIR, SPECS, TRAINING_LOG

    log = json.loads((MODELS_DIR / "parity-dev" / TRAINING_LOG).read_text())
    assert log["spec"] == json.loads(json.dumps(dataclasses.asdict(SPECS["parity-dev"])))
    assert [st["corpus"] for st in log["stages"]] == [st.corpus for st in SPECS["parity-dev"].stages]
    assert all(":dev_" in st["corpus"] for st in log["stages"])
    assert log["check"]["extender_accuracy"] >= 0.99
    assert (MODELS_DIR / "parity-dev" / "model.safetensors").exists()
