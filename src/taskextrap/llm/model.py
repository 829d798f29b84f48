"""A causal LM with its tokenizer, and how to build, save and load one (local files only).

The sequence for a (prompt, completion) pair is always ``prompt_ids(prompt) +
completion_ids(completion)``, in training, scoring and generation alike: special tokens are
placed here and nowhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from taskextrap.errors import TaskextrapError
from taskextrap.llm import require
from taskextrap.llm.tokenizer import TOKENIZER_FILE, CharTokenizer, HFTokenizer


@dataclass
class LanguageModel:
    """A Hugging Face causal LM (``model``), its ``tokenizer`` and the ``device`` inputs go to."""

    model: torch.nn.Module
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

    def eval(self) -> "LanguageModel":
        """Put the model in eval mode (no dropout); return self."""
        self.model.eval()
        return self


def build_char_model(tokenizer: CharTokenizer | None = None, d_model: int = 128, n_layers: int = 4,
                     n_heads: int = 4, d_ff: int | None = None, max_len: int = 1024,
                     seed: int = 0) -> LanguageModel:
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
    config = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=d_model, intermediate_size=d_ff or 4 * d_model,
                         num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_heads,
                         max_position_embeddings=max_len, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id)
    # fork_rng: seed the initialisation without touching the caller's global torch RNG
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "char-model-init"))
        model = LlamaForCausalLM(config)
    return LanguageModel(model.eval(), tok, torch.device("cpu"))


def save_model(lm: LanguageModel, directory: str | os.PathLike) -> Path:
    """Save weights (safetensors), config and tokenizer into ``directory``; return it.

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
    if isinstance(lm.tokenizer, CharTokenizer):
        lm.tokenizer.save(out)
    else:
        lm.tokenizer.tokenizer.save_pretrained(out)
    return out


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu", dtype=None,
               load_in_4bit: bool = False, chat: bool = False) -> LanguageModel:
    """Load a causal LM from a local directory, in eval mode.

    The tokenizer is a :class:`CharTokenizer` when ``char_tokenizer.json`` is present, else the
    directory's own tokenizer through :class:`HFTokenizer` (``chat`` selects its chat template).
    ``dtype`` is a torch dtype or its name (``"bfloat16"``, ``"auto"``); ``load_in_4bit`` needs
    bitsandbytes and CUDA.
    """
    require("transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = Path(path)
    if not root.is_dir():
        raise TaskextrapError(f"model directory not found: {path} (only local directories are loaded)")
    if not (root / "config.json").is_file():
        raise TaskextrapError(f"{path} has no config.json: not a saved model directory")
    device = torch.device(device)
    kwargs = {"local_files_only": True}
    if any(root.glob("*.safetensors")):
        kwargs["use_safetensors"] = True  # never unpickle weights when safetensors are there
    if dtype is not None:
        kwargs["dtype"] = _torch_dtype(dtype)
    if load_in_4bit:
        kwargs.update(_four_bit_kwargs(device, kwargs.get("dtype")))
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one bar per load would flood the experiment's own progress
    model = AutoModelForCausalLM.from_pretrained(root, **kwargs)
    if not load_in_4bit:
        model = model.to(device)  # a 4-bit model is placed by its device_map and cannot be moved
    if (root / TOKENIZER_FILE).is_file():
        tok = CharTokenizer.load(root)
    else:
        tok = HFTokenizer(AutoTokenizer.from_pretrained(root, local_files_only=True), chat=chat)
    return LanguageModel(model.eval(), tok, device)


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
