"""Leak audit of fine-tuning corpora: every item names its task, and ``sft.train`` reports them.

The samplers tag each item with the task it was drawn from (a parity mask, a CodeIO candidate);
``train`` reports the items of every step; the audit fails on a held-out task or an untagged item.
"""

import importlib.util

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.llm import codeio as C
from taskextrap.tasks import strings as S
from taskextrap.llm import parity as P
from taskextrap.tasks import parity as T
from taskextrap.seeding import rng

TRAIN_PAIRS, TEST_PAIRS = S.split_pairs(0)
CODEIO_ALLOWED = set(TRAIN_PAIRS) | set(S.NAMES)


def _parity_ok(mask) -> bool:
    return len(mask) in T.TRAIN_SIZES


@pytest.mark.parametrize("sampler", [P.baseline_pairs, P.extender_pairs, P.row_pairs, P.pretraining_pairs])
def test_parity_items_carry_their_training_mask(sampler):
    items = sampler(rng(0, "audit"), 40)
    assert all(isinstance(i, audit.Tagged) and len(i) == 2 for i in items)
    assert {len(i.task) for i in items} <= set(T.TRAIN_SIZES) and len({i.task for i in items}) > 5
    prompt, completion = items[0]  # still a (prompt, completion) pair
    assert isinstance(prompt, str) and completion in (" 0", " 1", "0", "1")


@pytest.mark.parametrize("score_shots", [False, True])
def test_codeio_items_carry_their_training_candidate(score_shots):
    g = rng(0, "audit")
    fewshot = C.fewshot_pairs(g, 30, TRAIN_PAIRS, score_shots=score_shots)
    cot = C.cot_pairs(g, 30, TRAIN_PAIRS, score_shots=score_shots)
    ref = C.reference_pairs(g, 60, TRAIN_PAIRS, score_shots=score_shots)
    for items in (fewshot, cot):
        assert {i.task for i in items} <= set(TRAIN_PAIRS)
    assert {i.task for i in ref} <= CODEIO_ALLOWED and any(isinstance(i.task, str) for i in ref)
    assert {i.task for i in C.pretraining_texts(g, 20)} <= set(S.NAMES)
    # the tag is the true function of the item: its answer is the candidate applied to the query
    item = fewshot[0]
    text = "".join(t for t, _ in item.pieces) if score_shots else item[0] + item[1]
    query = text.rsplit("In: ", 1)[1].split(" Out:")[0]
    assert text.rstrip().endswith(S.apply(item.task, query))


needs_llm = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers is not installed: pip install 'taskextrap[llm]'",
)


def _train_one_step(sampler):
    from taskextrap.llm.model import build_char_model
    from taskextrap.llm.sft import SFTConfig, train

    lm = build_char_model(seed=0, max_len=1024, d_model=16, n_layers=1, n_heads=2)
    with audit.spy() as seen:
        train(lm, sampler, SFTConfig(steps=2, batch_size=3, lr=1e-3))
    return seen


@needs_llm
def test_sft_reports_every_item_and_passes_on_training_masks():
    seen = _train_one_step(P.baseline_pairs)
    assert [(r.component, len(r.labels)) for r in seen] == [("sft", 3), ("sft", 3)]
    audit.check(seen, _parity_ok, required={"sft"})


@needs_llm
def test_sft_audit_detects_a_size6_mask_in_the_corpus():
    def leaky(g, n):
        items = P.baseline_pairs(g, n - 1)
        t = T._draw_task(g, T.TEST_MASKS[3], 5, 1)  # a held-out (size-6) task, tagged honestly
        return [
            *items,
            audit.Tagged(
                (P.baseline_prompt(t.support_x, t.support_y, t.query_x[0]), P.label_completion(t.query_y[0])), t.mask
            ),
        ]

    seen = _train_one_step(leaky)
    with pytest.raises(audit.LeakError, match=r"sft \(train\): \(" + ", ".join(map(str, T.TEST_MASKS[3]))):
        audit.check(seen, _parity_ok)


@needs_llm
def test_sft_audit_rejects_untagged_items_and_held_out_codeio_pairs():
    seen = _train_one_step(lambda g, n: [tuple(i) for i in P.baseline_pairs(g, n)])  # tags stripped
    with pytest.raises(audit.LeakError, match="without task identity"):
        audit.check(seen, _parity_ok)

    def leaky(g, n):
        return C.fewshot_pairs(g, n - 1, TRAIN_PAIRS) + C.fewshot_pairs(g, 1, TEST_PAIRS[:1])

    seen = _train_one_step(leaky)
    with pytest.raises(audit.LeakError, match=r"sft \(train\): \('" + TEST_PAIRS[0][0]):
        audit.check(seen, CODEIO_ALLOWED)
    honest = _train_one_step(lambda g, n: C.reference_pairs(g, n, TRAIN_PAIRS))
    audit.check(honest, CODEIO_ALLOWED)
    assert np.all([len(r.labels) == 3 for r in honest])
