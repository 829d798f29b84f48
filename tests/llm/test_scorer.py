"""completion_nll: batching, padding and prefix sharing never change a score; only completions count."""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

import torch

from taskextrap.errors import TaskextrapError
from taskextrap.llm.model import LanguageModel
from taskextrap.llm.scorer import completion_nll
from taskextrap.llm.tokenizer import HFTokenizer

PROMPTS = ["ab", "hello wor", "x", "ab", "a much longer prompt here", "x", "ab", "q"]
COMPS = ["c", "ld!", "yz", "cdefg", "", "qq", "c", "a longer completion"]


def manual_nll(lm, prompt, completion, eos=True):
    """One unpadded forward pass of the whole sequence; sum -log p over completion positions only."""
    p, c = lm.prompt_ids(prompt), lm.completion_ids(completion, eos=eos)
    ids = torch.tensor([p + c])
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(input_ids=ids).logits[0].double(), dim=-1)
    return -sum(float(logp[len(p) + j - 1, t]) for j, t in enumerate(c))


def one_by_one(lm, prompts, comps, **kw):
    return np.array([completion_nll(lm, [p], [c], **kw)[0] for p, c in zip(prompts, comps, strict=True)])


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_batched_equals_one_by_one(noisy_lm, side, batch_size):
    ref = one_by_one(noisy_lm, PROMPTS, COMPS, share_prefix=False)
    got = completion_nll(noisy_lm, PROMPTS, COMPS, batch_size=batch_size, padding_side=side, share_prefix=False)
    np.testing.assert_allclose(got, ref, atol=1e-4)


@pytest.mark.parametrize("eos", [True, False])
def test_matches_manual_completion_only_sum(noisy_lm, eos):
    comps = [c or "z" for c in COMPS]  # eos=False needs a token to score
    got = completion_nll(noisy_lm, PROMPTS, comps, eos=eos, batch_size=3)
    ref = [manual_nll(noisy_lm, p, c, eos=eos) for p, c in zip(PROMPTS, comps, strict=True)]
    np.testing.assert_allclose(got, ref, atol=1e-4)


def test_eos_adds_its_own_term(noisy_lm):
    with_eos = completion_nll(noisy_lm, PROMPTS, [c or "z" for c in COMPS], eos=True)
    without = completion_nll(noisy_lm, PROMPTS, [c or "z" for c in COMPS], eos=False)
    assert np.all(with_eos > without)  # -log p(EOS | ...) > 0


def test_prompt_conditions_the_score(noisy_lm):
    a, b = completion_nll(noisy_lm, ["abc", "xbc"], ["d", "d"])
    assert abs(a - b) > 1e-6


@pytest.mark.parametrize("side", ["right", "left"])
def test_share_prefix_equals_no_sharing(noisy_lm, side):
    prompts = PROMPTS + ["ab"] * 5 + ["zz top"] * 3
    comps = [*COMPS, "1", "22", "333", "", "x y z", "a", "bb", ""]
    calls = []
    shared = completion_nll(
        noisy_lm,
        prompts,
        comps,
        batch_size=4,
        padding_side=side,
        share_prefix=True,
        progress=lambda done, n: calls.append((done, n)),
    )
    plain = completion_nll(noisy_lm, prompts, comps, batch_size=4, padding_side=side, share_prefix=False)
    np.testing.assert_allclose(shared, plain, atol=1e-4)
    assert calls[-1] == (len(prompts), len(prompts))


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("batch_size", [2, 16])
def test_prefix_groups_equal_no_sharing(noisy_lm, side, batch_size):
    # leave-one-out style: each group shares a long reference prefix, then its own tail
    heads = ["Reference block one: ab -> ba\n", "Other block: xyz -> zyx, q -> q\n", "short"]
    tails = ["In: abc Out:", "In: q Out:", "In: a much longer query line Out:"]
    prompts, comps, keys = [], [], []
    for g, head in enumerate(heads):
        for t, tail in enumerate(tails):
            prompts.append(head + tail)
            comps.append(["c", " cba", ""][t])
            keys.append(g)
    prompts.append("Reference block one: ab -> ba\nIn: abc Out:")  # same prompt, another group
    comps.append(" x")
    keys.append("alone")
    shared = completion_nll(noisy_lm, prompts, comps, batch_size=batch_size, padding_side=side, prefix_groups=keys)
    plain = completion_nll(noisy_lm, prompts, comps, batch_size=batch_size, padding_side=side, share_prefix=False)
    np.testing.assert_allclose(shared, plain, atol=1e-4)


def test_identical_long_prompts_share_one_cache(noisy_lm):
    prompts = ["a prompt long enough to share"] * 4 + ["another prompt, long enough"] * 2
    comps = ["1", "22", "", "x y z", "a", "bb"]
    np.testing.assert_allclose(
        completion_nll(noisy_lm, prompts, comps, batch_size=3),
        completion_nll(noisy_lm, prompts, comps, share_prefix=False),
        atol=1e-4,
    )


def test_prefix_groups_length_checked(char_lm):
    with pytest.raises(TaskextrapError, match="prefix_groups"):
        completion_nll(char_lm, ["a", "b"], ["c", "d"], prefix_groups=[0])


def test_order_is_restored(noisy_lm):
    perm = np.random.default_rng(0).permutation(len(PROMPTS))
    base = completion_nll(noisy_lm, PROMPTS, COMPS, batch_size=3)
    shuffled = completion_nll(noisy_lm, [PROMPTS[i] for i in perm], [COMPS[i] for i in perm], batch_size=3)
    np.testing.assert_allclose(shuffled, base[perm], atol=1e-4)


def test_bos_exactly_once(char_lm, make_hf_tokenizer):
    tok = char_lm.tokenizer
    ids = char_lm.prompt_ids("ab") + char_lm.completion_ids("c")
    assert ids == [tok.bos_token_id, *tok.encode("abc"), tok.eos_token_id]
    # a chat template that writes BOS itself: still one BOS
    chat = LanguageModel(char_lm.model, HFTokenizer(make_hf_tokenizer(), chat=True), char_lm.device)
    ids = chat.prompt_ids("ab")
    assert ids[0] == 1 and ids.count(1) == 1
    # same ids, same model: the HF adapter scores like the char tokenizer
    plain = LanguageModel(char_lm.model, HFTokenizer(make_hf_tokenizer()), char_lm.device)
    np.testing.assert_allclose(
        completion_nll(plain, PROMPTS, COMPS), completion_nll(char_lm, PROMPTS, COMPS), atol=1e-6
    )


def test_bad_input(char_lm):
    with pytest.raises(TaskextrapError):
        completion_nll(char_lm, ["a", "b"], ["c"])
    with pytest.raises(TaskextrapError):
        completion_nll(char_lm, ["a"], [""], eos=False)
    with pytest.raises(TaskextrapError):
        completion_nll(char_lm, "a", "b")
    with pytest.raises(TaskextrapError):
        completion_nll(char_lm, ["a"], ["b"], padding_side="middle")
    with pytest.raises(TaskextrapError):
        completion_nll(char_lm, ["a" * 300], ["b"])  # longer than max_len=256
    assert completion_nll(char_lm, [], []).shape == (0,)
