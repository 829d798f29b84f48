"""generate: batched greedy equals one-by-one, seeded sampling repeats, stop strings cut."""

import importlib.util

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.errors import TaskextrapError
from taskextrap.llm.generate import generate

PROMPTS = ["ab", "hello wor", "x", "a much longer prompt here", "q="]


def test_batched_greedy_equals_one_by_one(noisy_lm):
    one = [generate(noisy_lm, [p], max_new_tokens=12, stop=None)[0] for p in PROMPTS]
    for bs in (2, 32):
        assert generate(noisy_lm, PROMPTS, max_new_tokens=12, batch_size=bs, stop=None) == one
    assert len({o[0] for o in one}) > 1  # the texts differ: the test compares something


def test_greedy_samples_are_identical(noisy_lm):
    out = generate(noisy_lm, PROMPTS[:2], max_new_tokens=6, n_samples=3, stop=None)
    assert [len(o) for o in out] == [3, 3] and all(len(set(o)) == 1 for o in out)


def test_sampling_is_reproducible(noisy_lm):
    kw = dict(max_new_tokens=10, temperature=1.0, n_samples=3, stop=None)
    a = generate(noisy_lm, PROMPTS, seed=1, **kw)
    assert a == generate(noisy_lm, PROMPTS, seed=1, **kw)
    assert a != generate(noisy_lm, PROMPTS, seed=2, **kw)
    assert [len(o) for o in a] == [3] * len(PROMPTS)


def test_stop_string_cuts(noisy_lm):
    full = generate(noisy_lm, PROMPTS, max_new_tokens=12, stop=None)
    text = next(o[0] for o in full if len(set(o[0].strip())) > 2)
    prompt = PROMPTS[[o[0] for o in full].index(text)]
    stop = text.strip()[2]
    cut = generate(noisy_lm, [prompt], max_new_tokens=12, stop=stop)[0][0]
    assert cut == text.split(stop, 1)[0].strip()


def test_bad_input(char_lm):
    with pytest.raises(TaskextrapError):
        generate(char_lm, "ab")
    with pytest.raises(TaskextrapError):
        generate(char_lm, ["ab"], temperature=-1.0)


def test_greedy_once_decodes_each_distinct_prompt_once(noisy_lm, monkeypatch):
    from taskextrap.llm import generate as G

    prompts = ["In: ab Out:", "In: cd Out:", "In: ab Out:", "In: ab Out:"]
    expected = [o[0] for o in G.generate(noisy_lm, prompts, max_new_tokens=5)]
    seen = []
    real = G.generate
    monkeypatch.setattr(G, "generate", lambda lm, ps, **kw: seen.extend(ps) or real(lm, ps, **kw))
    assert G.greedy_once(noisy_lm, prompts, max_new_tokens=5) == expected
    assert seen == ["In: ab Out:", "In: cd Out:"]
