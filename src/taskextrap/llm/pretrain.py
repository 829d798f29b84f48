"""The default language models: small character-level Llamas pretrained from scratch, on CPU.

A user with a GPU passes ``--model PATH`` (any local Hugging Face causal LM). Without one, each
language-model experiment starts from a small model pretrained on a corpus of its own domain
that holds no held-out task:

- ``parity``: few-shot parity prompts and extender prompts (Anchor / Bit / Out) of the 210
  training masks (sizes 2-5) only; no size-6 mask is ever drawn.
- ``codeio``: single-primitive few-shot prompts on random strings (no pair at all).

``scripts/train_default_models.py`` trains them once; the checkpoints (safetensors, config,
tokenizer, and a JSON with the training log) ship inside the package under ``llm/models/``, so
a run never retrains them. ``default_model(name)`` loads one.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from taskextrap.errors import TaskextrapError
from taskextrap.llm.sft import SFTConfig

MODELS_DIR = Path(__file__).parent / "models"
TRAINING_LOG = "pretraining.json"


@dataclass(frozen=True)
class DefaultModelSpec:
    """How a default model is built and pretrained: architecture, corpus and optimiser settings."""

    name: str
    corpus: str  # "module:function" with signature sample(g, n) -> [(prompt, completion)]
    description: str
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    max_len: int = 512
    train: SFTConfig = field(default_factory=lambda: SFTConfig(steps=600, batch_size=32, lr=1e-3,
                                                              warmup_steps=50, seed=0))

    def corpus_sampler(self) -> Callable:
        """The corpus's ``sample(g, n)`` function."""
        from taskextrap.tasks.registry import load_object

        return load_object(self.corpus, "corpus sampler")


SPECS = {
    "parity": DefaultModelSpec(
        "parity", "taskextrap.llm.parity:pretraining_pairs",
        "few-shot and extender parity prompts over the 210 training masks (sizes 2-5)"),
}


def get_spec(name: str) -> DefaultModelSpec:
    """The spec of default model ``name``."""
    if name not in SPECS:
        raise TaskextrapError(f"no default model {name!r}; choose from {sorted(SPECS)}")
    return SPECS[name]


def pretrain(name: str, out_dir: Path | None = None, checkpoint_dir: Path | None = None, progress=None):
    """Build and pretrain default model ``name``; save it to ``out_dir`` (default: the package's).

    Resumable through ``checkpoint_dir``. Returns the model and the training log.
    """
    from taskextrap.llm.model import build_char_model, save_model
    from taskextrap.llm.sft import train

    spec = get_spec(name)
    lm = build_char_model(d_model=spec.d_model, n_layers=spec.n_layers, n_heads=spec.n_heads,
                          max_len=spec.max_len, seed=spec.train.seed)
    t = time.perf_counter()
    lm, info = train(lm, spec.corpus_sampler(), spec.train, out_dir=checkpoint_dir, progress=progress)
    out_dir = Path(out_dir) if out_dir is not None else MODELS_DIR / name
    save_model(lm, out_dir)
    log = {"spec": {**asdict(spec), "train": asdict(spec.train)}, "wall_s": time.perf_counter() - t,
           "final_loss": float(sum(info["loss"][-50:]) / len(info["loss"][-50:])), "loss": info["loss"]}
    (out_dir / TRAINING_LOG).write_text(json.dumps(log))
    return lm, log


def default_model(name: str, device: str = "cpu"):
    """Load the shipped default model ``name`` (a clear error if it was never trained)."""
    from taskextrap.llm.model import load_model

    get_spec(name)
    path = MODELS_DIR / name
    if not (path / "config.json").exists():
        raise TaskextrapError(f"the default {name} model is missing from {path}; "
                              f"train it with: python scripts/train_default_models.py {name}")
    return load_model(path, device=device)
