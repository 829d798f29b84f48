"""Relational fine-tuning: train a causal LM on (prompt, completion) pairs, loss on completions only.

Full-parameter or LoRA (peft). Every step draws fresh pairs from its own seeded generator and
reseeds dropout, so a run resumed from a checkpoint continues exactly like an uninterrupted one.
A checkpoint is a folder ``ckpt-<step>/`` with the trainable weights (safetensors), the optimizer
and scheduler state and a small JSON (step, loss history, config fingerprint); each file is
written atomically and the JSON last, so a checkpoint is either complete or ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.llm import require
from taskextrap.llm.model import LanguageModel
from taskextrap.llm.scorer import _pad
from taskextrap.files import atomic_path, write_text_atomic
from taskextrap.seeding import derive_seed, rng

IGNORE = -100  # label of positions without loss (prompt, padding), as in Hugging Face
CKPT_PREFIX = "ckpt-"
CKPT_JSON = "checkpoint.json"
CKPT_WEIGHTS = "trainable.safetensors"
CKPT_STATE = "optimizer.pt"

SamplePairs = Callable[[np.random.Generator, int], list]  # (prompt, completion) pairs or ScoredText items


@dataclass(frozen=True)
class LoraSettings:
    """LoRA rank ``r``, scale ``alpha``, ``dropout`` and the module names that get adapters."""

    r: int
    alpha: float
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


PARITY_LORA = LoraSettings(r=16, alpha=32, dropout=0.05)  # the paper's parity runs
# the paper's CodeIO runs: adapters on the attention and the MLP projections, as the authors' code
CODEIO_LORA = LoraSettings(r=32, alpha=16, dropout=0.0,
                           target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))


@dataclass(frozen=True)
class SFTConfig:
    """Optimisation settings; ``lora=None`` trains every parameter.

    Each step draws ``batch_size * grad_accum`` pairs. The learning rate warms up linearly over
    ``warmup_steps`` then decays to 0 along a cosine. ``checkpoint_every=0`` saves only at the end
    (when an output directory is given).
    """

    steps: int
    batch_size: int
    lr: float
    grad_accum: int = 1
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    seed: int = 0
    checkpoint_every: int = 0
    lora: LoraSettings | None = None

    def fingerprint(self) -> str:
        """Hash of every setting that changes the result (``checkpoint_every`` does not)."""
        fields = dataclasses.asdict(self)
        fields.pop("checkpoint_every")
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ScoredText:
    """A training sequence with several scored pieces, e.g. every answer of a few-shot text after
    the first (the model can only name the function once it has seen an example).

    ``pieces`` are ``(text, scored)`` in order. The sequence is BOS, each piece's tokens, then EOS
    (scored). Pieces are encoded one by one and no chat template is applied: exact for
    character tokenizers, which is what pretraining from scratch uses.
    """

    pieces: tuple[tuple[str, bool], ...]
    task: object = field(default=None, compare=False)  # the task it was drawn from, for the leak audit

    def ids_and_labels(self, lm: LanguageModel) -> tuple[list[int], list[int]]:
        """Token ids of the sequence and its labels (the id where scored, else ``IGNORE``)."""
        tok = lm.tokenizer
        ids = [] if tok.bos_token_id is None else [tok.bos_token_id]
        labels = [IGNORE] * len(ids)
        for text, scored in self.pieces:
            piece = tok.encode(text)
            ids += piece
            labels += piece if scored else [IGNORE] * len(piece)
        return ids + [tok.eos_token_id], labels + [tok.eos_token_id]


def training_batch(lm: LanguageModel, pairs: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``(input_ids, attention_mask, labels)`` for ``pairs``.

    An item is a ``(prompt, completion)`` pair, whose sequence is ``prompt_ids + completion_ids``
    (EOS included) as the scorer builds it, with labels on the completion tokens only; or a
    :class:`ScoredText`, with labels on its scored pieces. Labels are ``-100`` elsewhere.
    """
    seqs, labels = [], []
    for item in pairs:
        if isinstance(item, ScoredText):
            ids, lab = item.ids_and_labels(lm)
        else:
            prompt, completion = item
            p, c = lm.prompt_ids(prompt), lm.completion_ids(completion)
            ids, lab = p + c, [IGNORE] * len(p) + c
        seqs.append(ids)
        labels.append(lab)
    ids, mask = _pad(seqs, lm.tokenizer.pad_token_id, "right", lm.device)
    lab, _ = _pad(labels, IGNORE, "right", lm.device)
    return ids, mask, lab


def train(lm: LanguageModel, sample_pairs: SamplePairs, cfg: SFTConfig, out_dir: str | os.PathLike | None = None,
          progress: Callable[[int, float], None] | None = None) -> tuple[LanguageModel, dict]:
    """Fine-tune ``lm`` on pairs from ``sample_pairs(g, n)``; return the model (eval mode) and a log.

    Step ``s`` draws its pairs with ``taskextrap.seeding.rng(cfg.seed, "sft-batch", s)``. With
    ``out_dir``, checkpoints are written every ``cfg.checkpoint_every`` steps and at the end, and
    a later call with the same config resumes from the latest one (the model passed in must be
    the same starting model). ``lm.model`` is trained in place; with LoRA it is wrapped by peft
    and the wrapped model is returned. The log holds ``loss`` (each step's mean completion-token
    loss, resumed steps included), ``wall_time_s`` of this call and ``resumed_from``.
    ``progress(step, loss)`` is called after each step. Each step's items are reported to the
    leak audit by the ``task`` they carry (:class:`taskextrap.audit.Tagged`, ``ScoredText.task``).
    """
    require("transformers")
    _check_config(cfg)
    model = _prepare_model(lm.model, cfg, lm.device)
    lm = LanguageModel(model, lm.tokenizer, lm.device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = _optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg))
    start, history = 0, []
    if out_dir is not None:
        start, history = _resume(Path(out_dir), model, opt, sched, cfg)
    t0 = time.perf_counter()
    model.train()
    # fork_rng: dropout is reseeded per step without disturbing the caller's global RNG
    try:
        with torch.random.fork_rng(devices=_cuda_devices(lm.device)):
            for step in range(start, cfg.steps):
                torch.manual_seed(derive_seed(cfg.seed, "sft-dropout", step))
                pairs = sample_pairs(rng(cfg.seed, "sft-batch", step), cfg.batch_size * cfg.grad_accum)
                audit.record_items("sft", pairs)  # the task of every item this step trains on
                history.append(_step(lm, pairs, params, opt, sched, cfg))
                if out_dir is not None and _checkpoint_due(step + 1, cfg):
                    _save_checkpoint(Path(out_dir), model, opt, sched, cfg, step + 1, history)
                if progress is not None:
                    progress(step, history[-1])
    finally:
        model.eval()  # also after an interruption: the caller may go on to score with it
    return lm, {"loss": history, "wall_time_s": time.perf_counter() - t0, "resumed_from": start}


def merge_lora(lm: LanguageModel) -> LanguageModel:
    """A model with the LoRA weights merged into the base weights (the peft wrapper is consumed)."""
    if not hasattr(lm.model, "merge_and_unload"):
        raise TaskextrapError("the model has no LoRA adapter to merge")
    return LanguageModel(lm.model.merge_and_unload().eval(), lm.tokenizer, lm.device)


def _check_config(cfg: SFTConfig) -> None:
    """One-line errors for settings that cannot train."""
    if cfg.steps < 0 or cfg.batch_size < 1 or cfg.grad_accum < 1 or cfg.lr <= 0:
        raise TaskextrapError("need steps >= 0, batch_size >= 1, grad_accum >= 1 and lr > 0")
    if cfg.warmup_steps < 0 or cfg.checkpoint_every < 0:
        raise TaskextrapError("warmup_steps and checkpoint_every must be >= 0")


def _checkpoint_due(done: int, cfg: SFTConfig) -> bool:
    """Whether to checkpoint after ``done`` steps: every ``checkpoint_every`` steps and at the end."""
    return done == cfg.steps or bool(cfg.checkpoint_every and done % cfg.checkpoint_every == 0)


def _cuda_devices(device: torch.device) -> list[int]:
    """CUDA devices whose RNG state must be forked too (none on CPU)."""
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


def _prepare_model(model: torch.nn.Module, cfg: SFTConfig, device: torch.device) -> torch.nn.Module:
    """The model to train: itself (all parameters) or a peft LoRA wrapper with seeded adapters."""
    if cfg.lora is None:
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    require("peft")
    from peft import LoraConfig, get_peft_model

    if hasattr(model, "peft_config"):
        raise TaskextrapError("the model already has a LoRA adapter: merge it or pass the base model")
    lora = LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                      target_modules=list(cfg.lora.target_modules), task_type="CAUSAL_LM")
    # the adapters' random init must not depend on earlier draws from the global RNG
    with torch.random.fork_rng(devices=_cuda_devices(device)), warnings.catch_warnings():
        # peft reads a transformers attribute deprecated in v5; the warning is not ours to fix
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        torch.manual_seed(derive_seed(cfg.seed, "sft-lora-init"))
        return get_peft_model(model, lora)


def _optimizer(model: torch.nn.Module, cfg: SFTConfig) -> torch.optim.AdamW:
    """AdamW; biases and norm gains (1-d parameters) get no weight decay, as usual."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr)


def _lr_lambda(cfg: SFTConfig) -> Callable[[int], float]:
    """Learning-rate factor of step ``s``: linear warm-up, then cosine decay reaching 0 at the end."""
    warm, total = cfg.warmup_steps, cfg.steps

    def factor(s: int) -> float:
        if s < warm:
            return (s + 1) / warm
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (s - warm) / max(1, total - warm))))

    return factor


def _step(lm: LanguageModel, pairs, params, opt, sched, cfg: SFTConfig) -> float:
    """One optimiser step over ``grad_accum`` micro-batches; return the mean completion-token loss."""
    micro = [training_batch(lm, pairs[k:k + cfg.batch_size]) for k in range(0, len(pairs), cfg.batch_size)]
    # normalise by the step's token count, so accumulation equals one big batch
    n_tokens = sum(int((lab[:, 1:] != IGNORE).sum()) for _, _, lab in micro)
    total = 0.0
    for ids, mask, lab in micro:
        logits = lm.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                 lab[:, 1:].reshape(-1), ignore_index=IGNORE, reduction="sum")
        (loss / n_tokens).backward()
        total += float(loss.detach())
    if cfg.max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return total / n_tokens


def _trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Trainable parameters by name (tied weights appear once)."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


def _save_checkpoint(out: Path, model, opt, sched, cfg: SFTConfig, step: int, history: list[float]) -> None:
    """Write ``out/ckpt-<step>/`` (weights, optimizer state, then the JSON that makes it valid).

    Older checkpoints are deleted only once the new one is complete, so there is always one.
    """
    from safetensors.torch import save_file

    folder = out / f"{CKPT_PREFIX}{step:08d}"
    folder.mkdir(parents=True, exist_ok=True)
    weights = {n: t.contiguous().cpu() for n, t in _trainable_state(model).items()}
    with atomic_path(folder / CKPT_WEIGHTS) as tmp:  # a crash never leaves a half-written file
        save_file(weights, tmp)
    with atomic_path(folder / CKPT_STATE) as tmp:
        torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, tmp)
    meta = {"step": step, "fingerprint": cfg.fingerprint(), "loss": history, "config": dataclasses.asdict(cfg)}
    write_text_atomic(folder / CKPT_JSON, json.dumps(meta))
    for old in out.glob(f"{CKPT_PREFIX}*"):
        if old != folder and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint folder with the highest step in ``out_dir``, or None."""
    folders = [f for f in Path(out_dir).glob(f"{CKPT_PREFIX}*") if (f / CKPT_JSON).is_file()]
    return max(folders, key=lambda f: f.name, default=None)


def finished_checkpoint(out_dir: str | os.PathLike, cfg: SFTConfig) -> Path | None:
    """The final checkpoint of a finished run of ``cfg`` in ``out_dir`` (None while it is
    missing: not started, still training, or another config's)."""
    folder = latest_checkpoint(out_dir) if Path(out_dir).is_dir() else None
    if folder is None:
        return None
    meta = json.loads((folder / CKPT_JSON).read_text(encoding="utf-8"))
    return folder if meta.get("fingerprint") == cfg.fingerprint() and meta.get("step") == cfg.steps else None


def _resume(out: Path, model, opt, sched, cfg: SFTConfig) -> tuple[int, list[float]]:
    """Load the latest checkpoint in ``out`` if any; return (its step, its loss history)."""
    folder = latest_checkpoint(out)
    if folder is None:
        return 0, []
    meta = json.loads((folder / CKPT_JSON).read_text(encoding="utf-8"))
    if meta.get("fingerprint") != cfg.fingerprint():
        raise TaskextrapError(f"{out} holds a checkpoint of a different training config: use another out_dir")
    from safetensors.torch import load_file

    weights = load_file(str(folder / CKPT_WEIGHTS))
    params = dict(model.named_parameters())
    if set(weights) != set(_trainable_state(model)):
        raise TaskextrapError(f"the checkpoint in {folder} does not match this model's trainable parameters")
    with torch.no_grad():
        for name, t in weights.items():
            params[name].copy_(t)
    state = torch.load(folder / CKPT_STATE, map_location=params[next(iter(weights))].device, weights_only=True)
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    return int(meta["step"]), list(meta["loss"])
