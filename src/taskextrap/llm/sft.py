"""Relational fine-tuning: train a causal LM on (prompt, completion) pairs, loss on completions only.

Full-parameter or LoRA (peft). Every step draws fresh pairs from its own seeded generator and
reseeds dropout, so a run resumed from a checkpoint continues exactly like an uninterrupted one.
A checkpoint is a folder ``ckpt-<step>/`` with the trainable weights (safetensors), the optimizer
and scheduler state (``torch.save``, read back with ``weights_only=True``) and a small JSON
(step, loss history, config fingerprint, each file's sha256 and its own checksum); each file is
written atomically and the JSON last, so a folder without the JSON is an interrupted save and
is ignored. A complete checkpoint that is damaged afterwards is deleted with a one-line warning
and the run resumes from the one before it, or restarts (see :func:`_resume`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
import math
import os
import pickle  # only for its error type: nothing is unpickled here
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from taskextrap import audit
from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.llm import require
from taskextrap.llm.model import LanguageModel
from taskextrap.llm.scorer import _pad
from taskextrap.files import read_json, write_bytes_atomic, write_text_atomic
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
CODEIO_LORA = LoraSettings(
    r=32,
    alpha=16,
    dropout=0.0,
    target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
)


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
        return [*ids, tok.eos_token_id], [*labels, tok.eos_token_id]


def training_batch(lm: LanguageModel, pairs: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``(input_ids, attention_mask, labels)`` for ``pairs``.

    An item is a ``(prompt, completion)`` pair, whose sequence is ``prompt_ids + completion_ids``
    (EOS included) as the scorer builds it, with labels on the completion tokens only; or a
    :class:`ScoredText`, with labels on its scored pieces. Labels are ``-100`` elsewhere.
    """
    seqs, labels = [], []
    for item in pairs:
        item_ids, item_labels = ids_and_labels(lm, item)
        seqs.append(item_ids)
        labels.append(item_labels)
    ids, mask = _pad(seqs, lm.tokenizer.pad_token_id, "right", lm.device)
    lab, _ = _pad(labels, IGNORE, "right", lm.device)
    return ids, mask, lab


def ids_and_labels(lm: LanguageModel, item) -> tuple[list[int], list[int]]:
    """Token ids of one training item and its labels (the id where it carries loss, else
    ``IGNORE``): for a ``(prompt, completion)`` pair ``prompt_ids + completion_ids`` with the
    completion and its EOS labelled, for a :class:`ScoredText` its own
    (:meth:`ScoredText.ids_and_labels`)."""
    if isinstance(item, ScoredText):
        return item.ids_and_labels(lm)
    prompt, completion = item
    p, c = lm.prompt_ids(prompt), lm.completion_ids(completion)
    return p + c, [IGNORE] * len(p) + c


def train(
    lm: LanguageModel,
    sample_pairs: SamplePairs,
    cfg: SFTConfig,
    out_dir: str | os.PathLike | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[LanguageModel, dict]:
    """Fine-tune ``lm`` on pairs from ``sample_pairs(g, n)``; return the model (eval mode) and a log.

    Step ``s`` draws its pairs with ``taskextrap.seeding.rng(cfg.seed, "sft-batch", s)``. With
    ``out_dir``, checkpoints are written every ``cfg.checkpoint_every`` steps and at the end, and
    a later call with the same config resumes from the latest usable one (the model passed in
    must be the same starting model; a damaged checkpoint is deleted with a one-line warning and
    the one before it, or a fresh start, is used, with the same result). ``lm.model`` is trained
    in place; with LoRA it is wrapped by peft and the wrapped model is returned. The log holds
    ``loss`` (each step's mean completion-token loss, resumed steps included), ``wall_time_s`` of
    this call and ``resumed_from``.
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
    start = 0
    history: list[float] = []
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


def _prepare_model(model: Any, cfg: SFTConfig, device: torch.device) -> Any:
    """The model to train (a transformers model): itself (all parameters) or a peft LoRA wrapper with
    seeded adapters."""
    if cfg.lora is None:
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    require("peft")
    from peft import LoraConfig, get_peft_model

    if hasattr(model, "peft_config"):
        raise TaskextrapError("the model already has a LoRA adapter: merge it or pass the base model")
    lora = LoraConfig(
        r=cfg.lora.r,
        # peft annotates lora_alpha as int; it is a scale (lora_alpha / r): a float works the same
        lora_alpha=cfg.lora.alpha,  # type: ignore[arg-type]
        lora_dropout=cfg.lora.dropout,
        target_modules=list(cfg.lora.target_modules),
        task_type="CAUSAL_LM",
    )
    # the adapters' random init must not depend on earlier draws from the global RNG
    with torch.random.fork_rng(devices=_cuda_devices(device)), warnings.catch_warnings():
        # peft reads a transformers attribute deprecated in v5; the warning is not ours to fix
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        torch.manual_seed(derive_seed(cfg.seed, "sft-lora-init"))
        return get_peft_model(model, lora)


def _optimizer(model: torch.nn.Module, cfg: SFTConfig) -> torch.optim.AdamW:
    """AdamW; biases and norm gains (1-d parameters) get no weight decay, as usual."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
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
    micro = [training_batch(lm, pairs[k : k + cfg.batch_size]) for k in range(0, len(pairs), cfg.batch_size)]
    # normalise by the step's token count, so accumulation equals one big batch
    n_tokens = sum(int((lab[:, 1:] != IGNORE).sum()) for _, _, lab in micro)
    total = 0.0
    for ids, mask, lab in micro:
        logits = lm.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), lab[:, 1:].reshape(-1), ignore_index=IGNORE, reduction="sum"
        )
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

    The JSON holds each file's sha256 and a checksum of its own contents, so a file damaged or
    edited afterwards is found on resume (:func:`_resume`). Older checkpoints are deleted only
    once the new one is complete, so there is always one.
    """
    from safetensors.torch import save

    folder = out / f"{CKPT_PREFIX}{step:08d}"
    folder.mkdir(parents=True, exist_ok=True)
    weights = save({n: t.contiguous().cpu() for n, t in _trainable_state(model).items()})
    buffer = io.BytesIO()
    torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, buffer)
    files = {CKPT_WEIGHTS: weights, CKPT_STATE: buffer.getvalue()}
    for name, data in files.items():
        write_bytes_atomic(folder / name, data)  # a crash never leaves a half-written file
    meta = {
        "step": step,
        "fingerprint": cfg.fingerprint(),
        "loss": history,
        "config": dataclasses.asdict(cfg),
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    write_text_atomic(folder / CKPT_JSON, json.dumps({**meta, "checksum": _meta_checksum(meta)}))
    for old in out.glob(f"{CKPT_PREFIX}*"):
        if old != folder and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


def _meta_checksum(meta: dict) -> str:
    """The sha256 of a checkpoint's JSON contents (all but the checksum) in canonical form."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _complete_checkpoints(out_dir: str | os.PathLike) -> list[Path]:
    """The checkpoint folders of ``out_dir`` whose JSON was written (the last step of a save),
    highest step first; a folder without it is an interrupted save and is ignored."""
    folders = [f for f in Path(out_dir).glob(f"{CKPT_PREFIX}*") if (f / CKPT_JSON).is_file()]
    return sorted(folders, key=lambda f: f.name, reverse=True)


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint folder with the highest step in ``out_dir``, or None."""
    folders = _complete_checkpoints(out_dir)
    return folders[0] if folders else None


def finished_checkpoint(out_dir: str | os.PathLike, cfg: SFTConfig) -> Path | None:
    """The final checkpoint of a finished run of ``cfg`` in ``out_dir`` (None while it is
    missing: not started, still training, another config's, or with a damaged JSON, which the
    run's resume then replaces)."""
    folder = latest_checkpoint(out_dir) if Path(out_dir).is_dir() else None
    if folder is None:
        return None
    meta, _ = _read_meta(folder)
    return (
        folder
        if meta is not None and meta.get("fingerprint") == cfg.fingerprint() and meta["step"] == cfg.steps
        else None
    )


class _Damaged(Exception):
    """A checkpoint that cannot be used; the message says why (one line)."""


def _read_meta(folder: Path) -> tuple[dict | None, str | None]:
    """(the checkpoint JSON of ``folder``, None), or (None, why it cannot be used). Its
    fingerprint is not compared here: an intact checkpoint of another config is no damage.

    A JSON without a checksum (written before checkpoints had one) is accepted on its structure,
    and its files without theirs.
    """
    try:
        meta = read_json(folder / CKPT_JSON)
    except TaskextrapError:
        return None, f"{CKPT_JSON} is empty or not JSON"
    if not isinstance(meta, dict):
        return None, f"{CKPT_JSON} is not a JSON object"
    if "checksum" in meta and meta["checksum"] != _meta_checksum(meta):
        return None, f"{CKPT_JSON} does not match its checksum (edited or damaged)"
    step, loss = meta.get("step"), meta.get("loss")
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        return None, f"{CKPT_JSON} has no valid step"
    if not isinstance(loss, list) or len(loss) != step or not all(isinstance(v, (int, float)) for v in loss):
        return None, f"{CKPT_JSON} has no loss history of {step} steps"
    if not isinstance(meta.get("fingerprint"), str):
        return None, f"{CKPT_JSON} has no config fingerprint"
    return meta, None


def _load_checkpoint(folder: Path, model, opt, sched, cfg: SFTConfig) -> tuple[int, list[float]]:
    """Restore ``folder`` into the model, optimizer and scheduler; return (its step, its loss
    history). Raises :class:`_Damaged` when it cannot be used, having changed nothing; a
    checkpoint of another config or model (intact, so no damage) is a one-line TaskextrapError."""
    meta, why = _read_meta(folder)
    if meta is None:
        raise _Damaged(why)
    if meta["fingerprint"] != cfg.fingerprint():
        raise TaskextrapError(f"{folder.parent} holds a checkpoint of a different training config: use another out_dir")
    if meta["step"] > cfg.steps:  # the fingerprint holds the steps: only a damaged JSON goes past them
        raise _Damaged(f"{CKPT_JSON} has step {meta['step']}, past the run's {cfg.steps}")
    data = {}
    for name in (CKPT_WEIGHTS, CKPT_STATE):
        try:
            data[name] = (folder / name).read_bytes()
        except OSError as exc:
            raise _Damaged(
                f"{name} is missing"
                if isinstance(exc, FileNotFoundError)
                else f"cannot read {name} ({exc.strerror or type(exc).__name__})"
            ) from None
        expected = meta.get("files", {}).get(name) if isinstance(meta.get("files"), dict) else None
        if expected is not None and hashlib.sha256(data[name]).hexdigest() != expected:
            raise _Damaged(f"{name} does not match its checksum (truncated, edited or damaged)")
    from safetensors.torch import load

    params = dict(model.named_parameters())
    trainable = _trainable_state(model)
    try:
        weights = load(data[CKPT_WEIGHTS])
    except Exception as exc:  # noqa: BLE001 - safetensors' errors on bad bytes vary
        raise _Damaged(f"{CKPT_WEIGHTS} is unreadable ({_first_line(exc)})") from None
    if set(weights) != set(trainable):
        raise TaskextrapError(f"the checkpoint in {folder} does not match this model's trainable parameters")
    for name, t in weights.items():
        if t.shape != trainable[name].shape or t.dtype != trainable[name].dtype:
            raise _Damaged(
                f"{CKPT_WEIGHTS} holds {name} as {t.dtype} {list(t.shape)}, the model has "
                f"{trainable[name].dtype} {list(trainable[name].shape)}"
            )
    device = next(model.parameters()).device
    try:  # weights_only: the file is never unpickled as arbitrary objects
        state = torch.load(io.BytesIO(data[CKPT_STATE]), map_location=device, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch's errors on bad bytes vary
        # an UnpicklingError's message is a long essay on weights_only: say what it means here
        why = "not a torch.save file of plain tensors" if isinstance(exc, pickle.UnpicklingError) else _first_line(exc)
        raise _Damaged(f"{CKPT_STATE} is unreadable ({why})") from None
    if not (
        isinstance(state, dict)
        and isinstance(state.get("optimizer"), dict)
        and isinstance(state.get("scheduler"), dict)
    ):
        raise _Damaged(f"{CKPT_STATE} holds no optimizer and scheduler state")
    fresh = copy.deepcopy((opt.state_dict(), sched.state_dict()))
    try:
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
    except Exception as exc:  # noqa: BLE001 - a state of another shape; put the fresh one back
        opt.load_state_dict(fresh[0])
        sched.load_state_dict(fresh[1])
        raise _Damaged(f"{CKPT_STATE} does not fit this run's optimizer ({_first_line(exc)})") from None
    with torch.no_grad():  # last: every check passed, so the model is changed only by a good checkpoint
        for name, t in weights.items():
            params[name].copy_(t)
    return meta["step"], [float(v) for v in meta["loss"]]


def _first_line(exc: BaseException) -> str:
    """An exception's type and the first line of its message, at most 160 characters."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _resume(out: Path, model, opt, sched, cfg: SFTConfig) -> tuple[int, list[float]]:
    """Load the latest usable checkpoint in ``out``; return (its step, its loss history), or
    (0, []) when there is none.

    A damaged checkpoint (unreadable, malformed, truncated, a file missing or not matching its
    checksum) is deleted, so it is never tried again, with a one-line warning; the run then
    resumes from the one before it, else restarts from step 0. Either way it ends exactly like
    an uninterrupted run, as each step's draws and dropout depend on the step alone.
    """
    folders = _complete_checkpoints(out)
    for k, folder in enumerate(folders):
        try:
            return _load_checkpoint(folder, model, opt, sched, cfg)
        except _Damaged as exc:
            shutil.rmtree(folder, ignore_errors=True)
            then = f"resuming from {folders[k + 1].name}" if k + 1 < len(folders) else "restarting this run from step 0"
            warnings.warn(
                f"fine-tuning checkpoint {folder} is damaged ({exc}): deleted it, {then}",
                TaskextrapWarning,
                stacklevel=3,
            )
    return 0, []
