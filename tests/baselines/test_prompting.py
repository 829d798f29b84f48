"""The prompting baselines: greedy few-shot answers and the self-consistency vote of sampled chains."""

import importlib.util

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.baselines import prompting


def test_majority_vote_tie_rule():
    assert prompting.majority_answer(["b", "a", "a", "b"]) == "b"  # a tie: the first sampled wins
    assert prompting.majority_answer(["a", "b", "b"]) == "b"
    assert prompting.majority_answer(["", "", "x"]) == "x"  # unparseable chains do not vote
    assert prompting.majority_answer(["", ""]) == ""


def test_cot_majority_samples_parses_and_votes(monkeypatch):
    calls = []

    def fake_generate(lm, prompts, **kw):
        calls.append(kw)
        return [["ab => x", "ba => y", "cd => y", "junk"] for _ in prompts]

    monkeypatch.setattr("taskextrap.llm.generate.generate", fake_generate)
    last = lambda c: c.rpartition("=>")[2].strip() if "=>" in c else ""  # noqa: E731
    assert prompting.cot_majority(
        None, ["p1", "p2"], last, n_samples=4, temperature=0.5, max_new_tokens=9, batch_size=2, seed=3
    ) == ["y", "y"]
    assert calls == [{"max_new_tokens": 9, "batch_size": 2, "temperature": 0.5, "n_samples": 4, "seed": 3}]


def test_few_shot_decodes_greedily_and_parses(monkeypatch):
    seen = []

    def fake_greedy(lm, prompts, max_new_tokens, batch_size):
        seen.append((list(prompts), max_new_tokens, batch_size))
        return [" 1", "x"]

    monkeypatch.setattr("taskextrap.llm.generate.greedy_once", fake_greedy)
    assert prompting.few_shot(None, ["a", "b"], 3, 8) == [" 1", "x"]
    assert prompting.few_shot(None, ["a", "b"], 3, 8, parse=lambda s: s.strip() or "?") == ["1", "x"]
    assert seen[0] == (["a", "b"], 3, 8)
