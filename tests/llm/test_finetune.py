"""llm.finetune: a profile's run settings (LoRA or every parameter) and the merge rule."""

import importlib.util
from dataclasses import dataclass

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.llm import finetune
from taskextrap.llm.sft import CODEIO_LORA, PARITY_LORA


@dataclass(frozen=True)
class Profile:
    sft_steps: int = 40
    sft_batch: int = 4
    sft_lr: float = 2e-4
    warmup: int = 5


def test_recipe_is_lora_at_the_profiles_rate_or_full_at_full_lr():
    lora = finetune.recipe(Profile(), 7, PARITY_LORA)
    assert (lora.steps, lora.batch_size, lora.lr, lora.warmup_steps, lora.seed, lora.lora) == (
        40,
        4,
        2e-4,
        5,
        7,
        PARITY_LORA,
    )
    assert lora.checkpoint_every == finetune.CHECKPOINT_EVERY
    full = finetune.recipe(Profile(), 7, CODEIO_LORA, full_lr=5e-4, full_warmup=11)
    assert (full.lr, full.warmup_steps, full.lora, full.steps) == (5e-4, 11, None, 40)
    assert finetune.recipe(Profile(), 7, CODEIO_LORA, full_lr=5e-4).warmup_steps == 5  # the profile's warm-up


def test_fine_tune_merges_lora_only_when_asked(monkeypatch):
    merged = []
    monkeypatch.setattr("taskextrap.llm.sft.train", lambda lm, sampler, cfg, out_dir=None, progress=None: (lm, {}))
    monkeypatch.setattr("taskextrap.llm.sft.merge_lora", lambda lm: merged.append(lm) or "merged")
    cfg = finetune.recipe(Profile(), 0, CODEIO_LORA)
    assert finetune.fine_tune("lm", None, cfg)[0] == "lm" and not merged
    assert finetune.fine_tune("lm", None, cfg, merge=True)[0] == "merged"
    full = finetune.recipe(Profile(), 0, CODEIO_LORA, full_lr=1e-3)
    assert finetune.fine_tune("lm", None, full, merge=True)[0] == "lm" and merged == ["lm"]
