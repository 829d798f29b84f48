"""The trl recipe (llm.trl_recipe, docs/trl-recipe.md): trl's SFTTrainer sees taskextrap's own
sequences and completion masks, and takes the same steps as taskextrap's trainer."""

import copy
import importlib.util

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)
if importlib.util.find_spec("trl") is None:
    pytest.skip(
        "trl is not installed: pip install 'taskextrap[trl]' (the recipe's optional extra)", allow_module_level=True
    )

import torch

from taskextrap.errors import TaskextrapError
from taskextrap.llm import trl_recipe as R
from taskextrap.llm.sft import IGNORE, LoraSettings, ScoredText, SFTConfig, train, training_batch
from taskextrap.seeding import rng


def mixed_pairs(g, n):
    """Pairs of varied lengths and a ScoredText with two scored pieces (as CodeIO's corpora have)."""
    out = []
    for _ in range(n):
        k = int(g.integers(1, 12))
        if g.random() < 0.5:
            out.append(("x" * k + " -> ", "y" * int(g.integers(1, 5))))
        else:
            out.append(
                ScoredText(
                    (
                        ("in: " + "a" * k + "\n", False),
                        ("out: b", True),
                        ("\nin: c", False),
                        ("\nout: " + "d" * k, True),
                    )
                )
            )
    return out


def test_rows_are_taskextraps_sequences_and_loss_masks(noisy_lm):
    items = mixed_pairs(rng(0, "t"), 6)
    _, _, labels = training_batch(noisy_lm, items)
    for row, item, lab in zip(R.sft_rows(noisy_lm, items), items, labels, strict=True):
        n = len(row["input_ids"])
        assert row["completion_mask"] == [int(v != IGNORE) for v in lab[:n].tolist()]
        assert row["input_ids"][0] == 1 and row["input_ids"][-1] == 2 and row["completion_mask"][-1] == 1
        if not isinstance(item, ScoredText):
            assert sum(row["completion_mask"]) == len(item[1]) + 1  # the completion and its EOS


@pytest.mark.parametrize(
    "cfg",
    [
        SFTConfig(steps=3, batch_size=2, lr=1e-3, warmup_steps=2, weight_decay=0.1),
        SFTConfig(
            steps=3, batch_size=2, grad_accum=2, lr=1e-2, warmup_steps=1, seed=1, lora=LoraSettings(r=4, alpha=8)
        ),
    ],
    ids=["full", "lora-accumulated"],
)
def test_sft_trainer_batches_masks_and_steps_equal_taskextraps(cfg, make_char_model, tmp_path):
    base = make_char_model(seed=3, noise=0.3)
    trainer = R.sft_trainer(copy.deepcopy(base), mixed_pairs, cfg, tmp_path)
    data = trainer.train_dataset
    per_step = cfg.batch_size * cfg.grad_accum
    assert len(data) == cfg.steps * per_step
    for step in range(cfg.steps):  # what trl's collator builds from each micro-batch is taskextrap's batch
        items = mixed_pairs(rng(cfg.seed, "sft-batch", step), per_step)
        for k in range(0, per_step, cfg.batch_size):
            got = trainer.data_collator([data[step * per_step + k + j] for j in range(cfg.batch_size)])
            ids, mask, labels = training_batch(base, items[k : k + cfg.batch_size])
            assert torch.equal(got["input_ids"], ids) and torch.equal(got["attention_mask"], mask)
            assert torch.equal(got["labels"], labels)
    trainer.train()
    trl_losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    _, log = train(copy.deepcopy(base), mixed_pairs, cfg)
    assert trl_losses == pytest.approx(log["loss"], rel=1e-5, abs=1e-5)
    assert trl_losses[-1] < trl_losses[0] - 0.1  # it did learn: not a run that left the weights alone


def test_without_steps_or_transformers_tokenizer_is_one_line(noisy_lm, tmp_path):
    with pytest.raises(TaskextrapError, match="no step"):
        R.sft_dataset(noisy_lm, mixed_pairs, SFTConfig(steps=0, batch_size=2, lr=1e-3))
    bare = copy.copy(noisy_lm)
    bare.tokenizer = object()
    with pytest.raises(TaskextrapError, match="no transformers tokenizer"):
        R.sft_trainer(bare, mixed_pairs, SFTConfig(steps=1, batch_size=2, lr=1e-3), tmp_path)
