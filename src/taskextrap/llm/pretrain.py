"""The default language models: small character-level Llamas pretrained from scratch, on CPU.

A user with a GPU passes ``--model PATH`` (any local Hugging Face causal LM). Without one, each
language-model experiment starts from a small model pretrained on a corpus of its own domain
that holds no held-out task:

- ``parity``: a two-stage curriculum on the 210 training masks (sizes 2-5) only; no size-6
  mask is ever drawn. Stage 1: single extender rows whose answer is the Anchor, the Bit, or
  their XOR; stage 2: full few-shot and extender prompts (``llm.parity.row_pairs``,
  ``pretraining_pairs``). The check measures XOR accuracy on fresh 5-shot extender prompts.
- ``parity-dev``: the same recipe on the 154 dev-training masks (sizes 2-4) only, the base
  model of the parity experiment's ``--split dev`` (the ``parity`` model has seen its size-5
  targets).
- ``codeio``: few-shot texts of one single primitive on random strings (no pair at all), every
  answer after the first scored (``llm.codeio.pretraining_texts``); a quarter of the texts use a
  wider alphabet so that the model executes primitives on strings like a primitive's output.
  The check measures greedy exact match on fresh few-shot prompts of each primitive.

``scripts/train_default_models.py`` trains them once; the checkpoints (safetensors, config,
tokenizer, and a JSON with the training log) ship inside the package under ``llm/models/``, so
a run never retrains them. ``default_model(name)`` loads one.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Callable

from taskextrap.errors import TaskextrapError
from taskextrap.llm.sft import SFTConfig

MODELS_DIR = Path(__file__).parent / "models"
TRAINING_LOG = "pretraining.json"


@dataclass(frozen=True)
class PretrainStage:
    """One curriculum stage: a corpus ``"module:function"`` with ``sample(g, n) -> [(prompt,
    completion)]`` and the optimiser settings it is trained with."""

    corpus: str
    train: SFTConfig

    def sampler(self) -> Callable:
        """The corpus's ``sample(g, n)`` function."""
        from taskextrap.tasks.registry import load_object

        return load_object(self.corpus, "corpus sampler")


@dataclass(frozen=True)
class DefaultModelSpec:
    """How a default model is built and pretrained: architecture, curriculum stages, and a
    ``check`` (``"module:function"``, ``check(lm) -> {metric: value}``) of what it must execute,
    whose result is written to the training log."""

    name: str
    description: str
    stages: tuple[PretrainStage, ...]
    check: str | None = None
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 512
    seed: int = 0

    def check_fn(self) -> Callable | None:
        """The ``check(lm)`` function, or None."""
        from taskextrap.tasks.registry import load_object

        return None if self.check is None else load_object(self.check, "pretraining check")


_PARITY = "taskextrap.llm.parity"
_CODEIO = "taskextrap.llm.codeio"


def _parity_spec(name: str, prefix: str, masks: str) -> DefaultModelSpec:
    """The parity recipe on the corpora ``{prefix}row_pairs`` / ``{prefix}pretraining_pairs``."""
    return DefaultModelSpec(
        name,
        f"extender rows (copy Anchor, copy Bit, XOR), then few-shot and extender prompts over {masks}",
        stages=(
            PretrainStage(
                f"{_PARITY}:{prefix}row_pairs", SFTConfig(steps=3000, batch_size=32, lr=6e-4, warmup_steps=50, seed=0)
            ),
            PretrainStage(
                f"{_PARITY}:{prefix}pretraining_pairs",
                SFTConfig(steps=600, batch_size=32, lr=5e-4, warmup_steps=20, seed=0),
            ),
        ),
        check=f"{_PARITY}:{prefix}pretraining_check",
    )


SPECS = {
    "parity": _parity_spec("parity", "", "the 210 training masks (sizes 2-5)"),
    # The base model of ``--split dev``: the same recipe on the 154 dev-training masks only, so
    # no dev target (size 5) and no test target (size 6) is ever drawn.
    "parity-dev": _parity_spec("parity-dev", "dev_", "the 154 dev-training masks (sizes 2-4)"),
    # max_len: the longest sequence the codeio search scores is an anchored leave-one-out pair of
    # (fancy_brackets, fancy_brackets) with every string 14 characters long, 1,525 tokens with
    # BOS and EOS; the held-out tasks' longest prompt plus the completion it needs is 1,320
    # tokens (1,437 on the earlier split; its theoretical worst case, 1,722, is past max_len,
    # which RoPE positions allow without error). Stages 1-3
    # continue with warm restarts; each stage's own seed gives it fresh texts.
    "codeio": DefaultModelSpec(
        "codeio",
        "few-shot texts of one single string primitive on random strings (a-z, and a quarter on "
        "a wider alphabet), every answer after the first scored; no pair at all",
        stages=(
            PretrainStage(
                f"{_CODEIO}:pretraining_texts", SFTConfig(steps=1500, batch_size=32, lr=1e-3, warmup_steps=100, seed=0)
            ),
            PretrainStage(
                f"{_CODEIO}:pretraining_texts",
                SFTConfig(steps=4200, batch_size=32, lr=1e-3, warmup_steps=100, seed=1, checkpoint_every=300),
            ),
            PretrainStage(
                f"{_CODEIO}:pretraining_texts",
                SFTConfig(steps=1500, batch_size=32, lr=5e-4, warmup_steps=50, seed=2, checkpoint_every=300),
            ),
            PretrainStage(
                f"{_CODEIO}:pretraining_texts",
                SFTConfig(steps=1500, batch_size=32, lr=3e-4, warmup_steps=50, seed=3, checkpoint_every=300),
            ),
        ),
        check=f"{_CODEIO}:pretraining_check",
        d_model=128,
        n_layers=4,
        n_heads=4,
        max_len=1536,
    ),
}


def get_spec(name: str) -> DefaultModelSpec:
    """The spec of default model ``name``."""
    if name not in SPECS:
        raise TaskextrapError(f"no default model {name!r}; choose from {sorted(SPECS)}")
    return SPECS[name]


def pretrain(
    name: str,
    out_dir: Path | None = None,
    checkpoint_dir: Path | None = None,
    progress=None,
    continue_shipped: bool = False,
):
    """Build and pretrain default model ``name`` stage by stage; save it to ``out_dir`` (default:
    the package's) with a training log (per-stage losses and wall times, and the check's result).

    Resumable through ``checkpoint_dir`` (one sub-folder per stage). ``progress(stage, step,
    loss)`` is called after each step. With ``continue_shipped``, the shipped model is loaded and
    only the stages its log does not hold yet are trained (each stage starts a fresh optimizer,
    so this equals a run from scratch); the spec's earlier stages must be the ones it was
    trained with. Returns the model and the log.
    """
    from taskextrap.llm.model import build_char_model, save_model
    from taskextrap.llm.sft import merge_lora, train

    spec = get_spec(name)
    t0, stages = time.perf_counter(), []
    if continue_shipped:
        lm, stages = _shipped_prefix(spec)
    else:
        lm = build_char_model(
            d_model=spec.d_model, n_layers=spec.n_layers, n_heads=spec.n_heads, max_len=spec.max_len, seed=spec.seed
        )
    for k, stage in enumerate(spec.stages):
        if k < len(stages):
            continue
        t = time.perf_counter()
        report = None if progress is None else (lambda step, loss, k=k: progress(k, step, loss))
        lm, info = train(
            lm,
            stage.sampler(),
            stage.train,
            progress=report,
            out_dir=None if checkpoint_dir is None else Path(checkpoint_dir) / f"stage{k}",
        )
        if stage.train.lora is not None:
            lm = merge_lora(lm)
        tail = info["loss"][-50:]
        stages.append(
            {
                "corpus": stage.corpus,
                "wall_s": time.perf_counter() - t,
                "resumed_from": info["resumed_from"],
                "final_loss": float(sum(tail) / max(1, len(tail))),
                "loss": info["loss"],
            }
        )
    check = spec.check_fn()
    out_dir = Path(out_dir) if out_dir is not None else MODELS_DIR / name
    save_model(lm, out_dir)
    log = {
        "spec": asdict(spec),
        "wall_s": time.perf_counter() - t0,
        "stages": stages,
        "check": check(lm) if check is not None else {},
    }
    (out_dir / TRAINING_LOG).write_text(json.dumps(log))
    return lm, log


def _shipped_prefix(spec: DefaultModelSpec):
    """The shipped model of ``spec`` and the stage logs it was trained with, after checking that
    they are the first stages of ``spec`` (same architecture, corpora and settings)."""
    path = MODELS_DIR / spec.name / TRAINING_LOG
    if not path.exists():
        raise TaskextrapError(f"no shipped {spec.name} model to continue; train it from scratch")
    old = json.loads(path.read_text())
    now, done = json.loads(json.dumps(asdict(spec))), old["spec"]  # as the log stores it (lists, not tuples)
    n = len(done["stages"])
    same_arch = all(done.get(k) == now[k] for k in now if k not in ("stages", "description", "check"))
    if not same_arch or now["stages"][:n] != done["stages"]:
        raise TaskextrapError(f"the shipped {spec.name} model was trained with another spec: retrain it from scratch")
    if n >= len(spec.stages):
        raise TaskextrapError(f"the shipped {spec.name} model already has all {n} stages: nothing to continue")
    return default_model(spec.name), list(old["stages"])


def default_model(name: str, device: str = "cpu"):
    """Load the shipped default model ``name`` (a clear error if it was never trained)."""
    from taskextrap.llm.model import load_model

    return load_model(_default_dir(name), device=device)


def _default_dir(name: str) -> Path:
    """The folder of the shipped default model ``name``; a one-line error when it was never trained."""
    get_spec(name)
    path = MODELS_DIR / name
    if not (path / "config.json").exists():
        raise TaskextrapError(
            f"the default {name} model is missing from {path}; "
            f"train it with: python scripts/train_default_models.py {name}"
        )
    return path


@dataclass(frozen=True)
class BaseModel:
    """The base model a language-model experiment starts from: a local Hugging Face directory or
    a hub id ``owner/name[@revision]`` (``--model``; :func:`taskextrap.llm.hub.resolve_model`)
    or, when ``path`` is None, the experiment's shipped default; with an optional
    ``dtype`` name (``--dtype``) and 4-bit NF4 loading (``--load-in-4bit``, CUDA + bitsandbytes)."""

    path: str | None = None
    dtype: str | None = None
    load_in_4bit: bool = False

    @classmethod
    def from_extra(cls, extra: dict) -> BaseModel:
        """The choice recorded in ``RunOptions.extra`` by the CLI."""
        return cls(extra.get("model"), extra.get("dtype"), bool(extra.get("load_in_4bit", False)))

    def directory(self) -> Path | None:
        """The local folder of ``path`` (a hub model's snapshot in the Hugging Face cache), or
        None for the shipped default."""
        if self.path is None:
            return None
        from taskextrap.llm.hub import resolve_model

        return resolve_model(self.path)

    def label(self, name: str) -> str:
        """The name recorded in results and fingerprints: ``<path or hub id>@<hash of its files>``, or
        ``default:<name>@<hash of its weights>``, plus the loading options when set (so runs with
        other settings never share a cache).

        The hash (16 hex digits of :func:`taskextrap.llm.modeldir.model_fingerprint`: weights,
        config and tokenizer files) makes a ``--model`` whose files changed, like a retrained
        default model, never reuse the old one's units or checkpoints. The path stays in the
        label too, as results record where the model came from: a copy of the same files at
        another path is computed afresh, never reused. A default model's label is as it always
        was (its files are also in the package's source hash), so existing units stay valid.
        """
        directory = self.directory()
        if directory is not None:
            from taskextrap.llm.modeldir import model_fingerprint

            out = f"{self.path}@{model_fingerprint(directory)[:16]}"
        else:
            out = f"default:{name}{_weights_tag(name)}"
        if self.dtype is not None:
            out += f" dtype={self.dtype}"
        return out + (" 4bit" if self.load_in_4bit else "")


def _weights_tag(name: str) -> str:
    """``@`` and 12 hex digits of the SHA-256 of the shipped weights of ``name`` ("" when absent)."""
    import hashlib

    files = sorted((MODELS_DIR / name).glob("*.safetensors"))
    if not files:
        return ""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return "@" + digest.hexdigest()[:12]


def load_base(name: str, model: BaseModel | None = None, device: str = "cpu"):
    """Load the base model of language-model experiment ``name`` (see :class:`BaseModel`)."""
    from taskextrap.llm.model import load_model

    model = model or BaseModel()
    path = model.directory() or _default_dir(name)  # a given model's folder, else the shipped default
    return load_model(path, device=device, dtype=model.dtype, load_in_4bit=model.load_in_4bit)
