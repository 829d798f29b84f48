"""One fine-tuning run of a sequence-model experiment (Algorithm 2, Phase 1, and the prompting
baselines' runs): a fresh copy of the base model trained on a corpus by :func:`llm.sft.train`,
with a progress bar, its LoRA adapters optionally merged afterwards.

:func:`recipe` turns an experiment's profile into the run's settings: the paper's LoRA
(``llm.sft.PARITY_LORA``, ``llm.sft.CODEIO_LORA``) at the profile's learning rate, or every
parameter at ``full_lr`` when one is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskextrap.llm.model import LanguageModel
    from taskextrap.llm.sft import LoraSettings, SFTConfig

CHECKPOINT_EVERY = 100  # steps between checkpoints: a killed run loses at most this many


def recipe(
    profile, seed: int, lora: LoraSettings, full_lr: float | None = None, full_warmup: int | None = None
) -> SFTConfig:
    """The settings of one run of ``profile`` (an ``LLMProfile``: ``sft_steps``, ``sft_batch``,
    ``sft_lr``, ``warmup``) under ``seed``: LoRA ``lora`` at ``sft_lr``, or with ``full_lr``
    every parameter at that rate with ``full_warmup`` warm-up steps (default: the profile's
    ``warmup``; same steps and batch)."""
    from taskextrap.llm.sft import SFTConfig

    full = full_lr is not None
    warmup = full_warmup if full and full_warmup is not None else profile.warmup
    return SFTConfig(
        steps=profile.sft_steps,
        batch_size=profile.sft_batch,
        lr=profile.sft_lr if full_lr is None else full_lr,
        warmup_steps=warmup,
        seed=seed,
        checkpoint_every=CHECKPOINT_EVERY,
        lora=None if full else lora,
    )


def fine_tune(
    base: LanguageModel,
    sampler,
    cfg: SFTConfig,
    out_dir: Path | None = None,
    progress: str | None = None,
    merge: bool = False,
) -> tuple[LanguageModel, dict]:
    """(fine-tuned model, training log) of ``base`` (trained in place: pass a fresh copy) on
    ``sampler(g, n)`` under ``cfg``, resuming from ``out_dir``'s checkpoints.

    ``progress``: the label of a progress bar over the steps (None: no bar). ``merge``: a LoRA
    run comes back with its adapters merged into the weights, so scoring and generation skip the
    adapters' extra products (1.8x faster CodeIO search); leave it off for a 4-bit base, which
    merging would re-quantise.
    """
    from tqdm import tqdm

    from taskextrap.llm.sft import merge_lora, train

    with tqdm(total=cfg.steps, desc=f"sft {progress}", unit="step", disable=progress is None) as bar:
        lm, info = train(base, sampler, cfg, out_dir=out_dir, progress=lambda step, loss: bar.update(step + 1 - bar.n))
    return (merge_lora(lm) if merge and cfg.lora is not None else lm), info
