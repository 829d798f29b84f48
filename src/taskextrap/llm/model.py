"""A causal LM with its tokenizer, and how to build, save and load one (local files only).

The sequence for a (prompt, completion) pair is always ``prompt_ids(prompt) +
completion_ids(completion)``, in training, scoring and generation alike: special tokens are
placed here and nowhere else.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.llm import require
from taskextrap.llm.modeldir import HF_TOKENIZER_FILES, check_model_dir, model_error
from taskextrap.llm.tokenizer import CHAR_TOKENIZER_FILE, CharTokenizer, HFTokenizer


@dataclass
class LanguageModel:
    """A Hugging Face causal LM (``model``), its ``tokenizer`` and the ``device`` inputs go to."""

    model: Any  # a transformers PreTrainedModel, or a peft PeftModel wrapping one
    tokenizer: CharTokenizer | HFTokenizer
    device: torch.device

    def prompt_ids(self, prompt: str) -> list[int]:
        """``[bos] + encode(wrap_prompt(prompt))``; BOS is skipped when absent or already there.

        A chat template usually writes BOS itself, hence the check rather than always adding it.
        """
        ids = self.tokenizer.encode(self.tokenizer.wrap_prompt(prompt))
        bos = self.tokenizer.bos_token_id
        if bos is not None and (not ids or ids[0] != bos):
            ids = [bos, *ids]
        return ids

    def completion_ids(self, completion: str, eos: bool = True) -> list[int]:
        """``encode(completion) + [eos]`` (EOS only when ``eos``)."""
        ids = self.tokenizer.encode(completion)
        return [*ids, self.tokenizer.eos_token_id] if eos else ids

    @property
    def max_length(self) -> int | None:
        """Longest sequence the model's positions cover, when its config says."""
        return getattr(self.model.config, "max_position_embeddings", None)

    def eval(self) -> LanguageModel:
        """Put the model in eval mode (no dropout); return self."""
        self.model.eval()
        return self


def build_char_model(
    tokenizer: CharTokenizer | None = None,
    d_model: int = 128,
    n_layers: int = 4,
    n_heads: int = 4,
    d_ff: int | None = None,
    max_len: int = 1024,
    seed: int = 0,
) -> LanguageModel:
    """A small Llama-architecture model over a character vocabulary, initialised from ``seed``.

    Built from a local config (no hub); embeddings are tied to the output layer. ``d_ff``
    defaults to ``4 * d_model``.
    """
    require("transformers")
    from transformers import LlamaConfig, LlamaForCausalLM

    from taskextrap.seeding import derive_seed

    tok = tokenizer or CharTokenizer()
    if d_model % n_heads:
        raise TaskextrapError(f"d_model={d_model} is not a multiple of n_heads={n_heads}")
    config = LlamaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=d_model,
        intermediate_size=d_ff or 4 * d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        max_position_embeddings=max_len,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    # fork_rng: seed the initialisation without touching the caller's global torch RNG
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "char-model-init"))
        model = LlamaForCausalLM(config)
    return LanguageModel(model.eval(), tok, torch.device("cpu"))


def save_model(lm: LanguageModel, directory: str | os.PathLike) -> Path:
    """Save weights (safetensors), config and tokenizer into ``directory``; return it.

    Everything is in Hugging Face's formats: ``AutoModelForCausalLM.from_pretrained`` and
    ``AutoTokenizer.from_pretrained`` load the directory without taskextrap.

    A LoRA-wrapped model must be merged first (:func:`taskextrap.llm.sft.merge_lora`), so the
    directory always holds a complete model that :func:`load_model` can read.
    """
    if hasattr(lm.model, "peft_config"):
        raise TaskextrapError("merge the LoRA adapter before saving: save_model(merge_lora(lm), directory)")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    lm.model.save_pretrained(out, safe_serialization=True)
    lm.tokenizer.save(out)  # transformers' tokenizer files (a character tokenizer's too)
    return out


def load_model(
    path: str | os.PathLike,
    device: str | torch.device = "cpu",
    dtype=None,
    load_in_4bit: bool = False,
    chat: bool = False,
) -> LanguageModel:
    """Load a causal LM from a local directory, in eval mode.

    The tokenizer is the directory's own (``AutoTokenizer``): a :class:`CharTokenizer` when it is
    the character tokenizer, else through :class:`HFTokenizer` (``chat`` selects its chat
    template); a directory saved by earlier versions with only ``char_tokenizer.json`` gives a
    :class:`CharTokenizer` too.
    ``dtype`` is a torch dtype or its name (``"bfloat16"``, ``"auto"``); ``load_in_4bit`` needs
    bitsandbytes and CUDA.

    A directory that cannot be loaded gives one line, "cannot load model at PATH: <reason>"
    (:func:`taskextrap.llm.modeldir.check_model_dir` first, then whatever the load itself
    finds): weights whose tensors are missing from, or shaped otherwise than, what ``config.json``
    describes are refused rather than silently re-initialised. Weights the config does not use
    are dropped with a one-line :class:`TaskextrapWarning`.
    """
    require("transformers")
    root = check_model_dir(path)
    device = torch.device(device)
    kwargs = {
        "local_files_only": True,
        "output_loading_info": True,
        "ignore_mismatched_sizes": True,
    }  # mismatches come back in the loading info: refused below
    if any(root.glob("*.safetensors")):
        kwargs["use_safetensors"] = True  # never unpickle weights when safetensors are there
    if dtype is not None:
        kwargs["dtype"] = _torch_dtype(dtype)
    if load_in_4bit:
        kwargs.update(_four_bit_kwargs(device, kwargs.get("dtype")))
    try:
        model = _from_pretrained(root, kwargs)
        if not load_in_4bit:
            model = model.to(device)  # a 4-bit model is placed by its device_map and cannot be moved
    except Exception as exc:  # noqa: BLE001 - whatever transformers or safetensors raise, one line
        raise model_error(path, _one_line(exc)) from None
    try:
        tok = _load_tokenizer(root, chat)
    except Exception as exc:  # noqa: BLE001 - as above
        raise model_error(path, f"its tokenizer cannot be loaded ({_one_line(exc)})") from None
    n_embed = model.get_input_embeddings().num_embeddings
    if tok.vocab_size > n_embed:
        raise model_error(
            path,
            f"the tokenizer has {tok.vocab_size} ids but the model's embedding only {n_embed} "
            "(tokenizer and weights of different models?)",
        )
    return LanguageModel(model.eval(), tok, device)


def _from_pretrained(root: Path, kwargs: dict) -> Any:
    """``AutoModelForCausalLM.from_pretrained`` with its multi-line load report silenced; weights
    missing from the files or shaped otherwise than the config says raise a one-line error."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one bar per load would flood the experiment's own progress
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its report is a table; what matters in it is raised below
    try:
        # (model, loading info) under output_loading_info=True, a return transformers' annotations omit
        loaded: Any = AutoModelForCausalLM.from_pretrained(root, **kwargs)
    finally:
        hf_logging.set_verbosity(verbosity)
    model, info = loaded
    mismatched = sorted(info.get("mismatched_keys") or [], key=str)
    if mismatched:
        first = mismatched[0]  # (name, shape in the weights, shape the config gives)
        example = (
            f"{first[0]}: {list(first[1])} in the weights, {list(first[2])} in the config"
            if isinstance(first, (tuple, list)) and len(first) == 3
            else str(first)
        )
        raise TaskextrapError(
            f"the weights do not fit config.json: {len(mismatched)} tensors have other shapes (e.g. {example})"
        )
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise TaskextrapError(
            f"the weights lack {len(missing)} tensors the config's architecture needs "
            f"(e.g. {missing[0]}): weights and config.json of different models?"
        )
    unexpected = sorted(info.get("unexpected_keys") or [])
    if unexpected:
        warnings.warn(
            f"model at {root}: {len(unexpected)} tensors of the weights are not used by config.json's "
            f"architecture and were dropped (e.g. {unexpected[0]})",
            TaskextrapWarning,
            stacklevel=4,
        )
    return model


def _load_tokenizer(root: Path, chat: bool) -> CharTokenizer | HFTokenizer:
    """The directory's tokenizer: transformers' own when its files are there (a
    :class:`CharTokenizer` when it is the character tokenizer), else the ``char_tokenizer.json``
    of a directory saved by earlier versions."""
    if not any((root / name).is_file() for name in HF_TOKENIZER_FILES) and (root / CHAR_TOKENIZER_FILE).is_file():
        return CharTokenizer.load_legacy(root)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(root, local_files_only=True)
    return CharTokenizer.from_hf(tok) or HFTokenizer(tok, chat=chat)


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, at most 300 characters (library
    errors can run over many lines); our own errors as they are, a lookup or type error (whose
    message alone, e.g. ``'added_tokens'``, says little) after its type name."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if not text or (
        not isinstance(exc, TaskextrapError)
        and isinstance(exc, (LookupError, TypeError, AttributeError, ValueError))
        and len(text) < 40
    ):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _torch_dtype(dtype):
    """A torch dtype from a dtype or its name; ``"auto"`` passes through (the checkpoint's dtype)."""
    if not isinstance(dtype, str) or dtype == "auto":
        return dtype
    value = getattr(torch, dtype, None)
    if not isinstance(value, torch.dtype):
        raise TaskextrapError(f"unknown dtype {dtype!r}: use e.g. 'float32', 'bfloat16' or 'auto'")
    return value


def _four_bit_kwargs(device: torch.device, dtype) -> dict:
    """``from_pretrained`` arguments for NF4 loading; a one-line error when it is impossible."""
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None or not torch.cuda.is_available():
        raise TaskextrapError("load_in_4bit needs bitsandbytes and a CUDA device")
    if device.type != "cuda":
        raise TaskextrapError(f"load_in_4bit needs a CUDA device, got {device}")
    from transformers import BitsAndBytesConfig

    compute = dtype if isinstance(dtype, torch.dtype) else torch.bfloat16
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute)
    return {"quantization_config": quant, "device_map": {"": device}}
