"""Fine-tuning through ``trl.SFTTrainer`` on taskextrap's own sequences and completion masks.

taskextrap's trainer (:func:`taskextrap.llm.sft.train`) stays the default: training and scoring
then share one tokenisation and one code path, and its runs resume exactly from checkpoints.
This module is for users who want trl's trainer (its callbacks, logging, multi-GPU launchers,
DeepSpeed/FSDP) on the same data: :func:`sft_dataset` draws, step by step, the very items
taskextrap's trainer would draw under an :class:`~taskextrap.llm.sft.SFTConfig`, and turns each
into the token ids and completion mask that taskextrap trains on
(:func:`taskextrap.llm.sft.ids_and_labels`); :func:`trainer_config` and :func:`sft_trainer`
set ``trl.SFTConfig`` so that trl neither re-tokenises, truncates, adds EOS nor shuffles, and
puts the loss on exactly the masked tokens. See ``docs/trl-recipe.md``.

:func:`sft_trainer` also hands trl the model as taskextrap prepares it (LoRA adapters with their
seeded initialisation) and taskextrap's optimizer and learning-rate schedule, so the two
trainers take the same steps up to floating-point rounding; what stays different is dropout's
random draws (taskextrap reseeds them every step), so with dropout the runs differ slightly.

``trl`` and ``datasets`` belong to the optional ``[trl]`` extra.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from taskextrap.errors import TaskextrapError

if TYPE_CHECKING:
    from taskextrap.llm.model import LanguageModel
    from taskextrap.llm.sft import SamplePairs, SFTConfig

MISSING_TRL = "trl is not installed: pip install 'taskextrap[trl]'"


def require_trl() -> None:
    """A one-line :class:`TaskextrapError` unless ``trl`` and ``datasets`` are importable."""
    for name in ("trl", "datasets", "transformers"):
        if importlib.util.find_spec(name) is None:
            raise TaskextrapError(MISSING_TRL)


def sft_rows(lm: LanguageModel, items) -> list[dict]:
    """One row per item, ``{"input_ids": [...], "completion_mask": [...]}``: the sequence
    taskextrap trains on and 1 where it carries loss (the completion and its EOS of a
    ``(prompt, completion)`` pair, the scored pieces and EOS of a ``ScoredText``), else 0."""
    from taskextrap.llm.sft import IGNORE, ids_and_labels

    rows = []
    for item in items:
        ids, labels = ids_and_labels(lm, item)
        rows.append({"input_ids": ids, "completion_mask": [int(label != IGNORE) for label in labels]})
    return rows


def sft_dataset(lm: LanguageModel, sample_pairs: SamplePairs, cfg: SFTConfig):
    """A ``datasets.Dataset`` of :func:`sft_rows` holding, in order, the items of each of
    ``cfg.steps`` steps (``cfg.batch_size * cfg.grad_accum`` per step, drawn with
    ``taskextrap.seeding.rng(cfg.seed, "sft-batch", step)`` as :func:`taskextrap.llm.sft.train`
    draws them). Read sequentially in batches of ``cfg.batch_size`` (what
    :func:`trainer_config` sets), step ``s`` of trl sees the items of taskextrap's step ``s``."""
    require_trl()
    from datasets import Dataset

    from taskextrap.seeding import rng

    per_step = cfg.batch_size * cfg.grad_accum
    rows = []
    for step in range(cfg.steps):
        items = list(sample_pairs(rng(cfg.seed, "sft-batch", step), per_step))
        if len(items) != per_step:
            raise TaskextrapError(f"the sampler gave {len(items)} items for step {step}, not {per_step}")
        rows += sft_rows(lm, items)
    if not rows:
        raise TaskextrapError("cfg.steps is 0: no step, no data")
    return Dataset.from_list(rows)


def trainer_config(cfg: SFTConfig, output_dir: str | os.PathLike, **overrides):
    """The ``trl.SFTConfig`` matching ``cfg``: its batch size, gradient accumulation, steps,
    learning rate (linear warm-up, then cosine decay to 0, when trl builds the optimizer itself),
    weight decay, clipping and seed; the loss on the ``completion_mask`` tokens only
    (``completion_only_loss=True``: trl would otherwise train on every token of a tokenised
    dataset), no truncation (``max_length=None``: trl's default of 1,024 tokens would cut long
    CodeIO sequences), items in order (``train_sampling_strategy="sequential"``), float32 (trl
    defaults to bf16), no gradient checkpointing, no reports to external services and no
    checkpoints. ``overrides`` are passed on (e.g. ``logging_steps``, ``save_steps``,
    ``bf16=True`` on a GPU)."""
    require_trl()
    import warnings

    from trl import SFTConfig as TRLConfig

    settings: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        max_steps=cfg.steps,
        num_train_epochs=1,
        learning_rate=cfg.lr,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=0.0 if cfg.max_grad_norm is None else cfg.max_grad_norm,
        seed=cfg.seed,
        completion_only_loss=True,
        max_length=None,
        train_sampling_strategy="sequential",
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    settings.update(overrides)
    from transformers import TrainingArguments

    if "train_sampling_strategy" not in TrainingArguments.__dataclass_fields__:
        raise TaskextrapError(
            "the trl recipe needs a transformers whose TrainingArguments has train_sampling_strategy "
            "(to read the steps in order): pip install -U transformers"
        )
    with warnings.catch_warnings():
        # transformers 5 calls gradient_checkpointing a deprecated alias; trl's own default sets it
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
        return TRLConfig(**settings)


def sft_trainer(
    lm: LanguageModel,
    sample_pairs: SamplePairs,
    cfg: SFTConfig,
    output_dir: str | os.PathLike,
    own_optimizer: bool = True,
    **overrides,
):
    """A ``trl.SFTTrainer`` that fine-tunes ``lm`` as :func:`taskextrap.llm.sft.train` would;
    call ``.train()`` on it, then use ``trainer.model`` (``lm.model`` itself, trained in place,
    or its peft LoRA wrapper: merge it with ``merge_and_unload()``).

    Data: :func:`sft_dataset`; settings: :func:`trainer_config` (``overrides`` passed on). The
    model is prepared by taskextrap (``cfg.lora``'s adapters with their seeded initialisation,
    or every parameter trainable). With ``own_optimizer`` (the default) taskextrap's AdamW
    (1-d parameters without weight decay) and learning-rate schedule are handed to trl, so with
    no dropout both trainers take the same steps up to rounding; without, trl builds its own
    (its linear warm-up starts at 0 rather than at ``1/warmup_steps``). The tokenizer trl gets
    is ``lm``'s transformers tokenizer; only its pad token is used, as the data is tokenised.
    """
    require_trl()
    import torch
    from trl import SFTTrainer

    from taskextrap.llm.sft import _check_config, _lr_lambda, _optimizer, _prepare_model

    tokenizer = getattr(lm.tokenizer, "tokenizer", None)
    if tokenizer is None:
        raise TaskextrapError("the model's tokenizer has no transformers tokenizer to give trl")
    _check_config(cfg)
    dataset = sft_dataset(lm, sample_pairs, cfg)
    model = _prepare_model(lm.model, cfg, lm.device)
    optimizers: tuple[torch.optim.Optimizer | None, torch.optim.lr_scheduler.LambdaLR | None] = (None, None)
    if own_optimizer:
        opt = _optimizer(model, cfg)
        optimizers = (opt, torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg)))
    if lm.device.type == "cpu":
        overrides = {"use_cpu": True, "dataloader_pin_memory": False, **overrides}
    return SFTTrainer(
        model=model,
        args=trainer_config(cfg, output_dir, **overrides),
        train_dataset=dataset,
        processing_class=tokenizer,
        optimizers=optimizers,
    )
