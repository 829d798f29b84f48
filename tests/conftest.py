"""Shared fixtures for the fast test suite: tiny libraries and one small fitted RTE.

Sizes are tiny on purpose (a few seconds per fit on one CPU thread); accuracy targets live in
benchmarks/, not here.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers already take every core: no lanes beside them
    os.environ.setdefault("TASKEXTRAP_LANES", "1")

import pytest
import torch

torch.set_num_threads(1)

from taskextrap.operators.train import TrainConfig  # noqa: E402
from taskextrap.seeding import rng  # noqa: E402
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet  # noqa: E402

TINY_TRAIN = TrainConfig(steps=15, batch=256, eval_every=5)
N_PER_REGION = 10


def tiny_rte(**kwargs):
    """An unfitted Strategy A RTE with tiny sizes, quiet; keyword arguments override these. The
    objective's settings are those the tests were written for (``FINGERPRINT_OBJECTIVE``: 8 retrieved
    anchors, no screen, shifts 0.5 to 2 times the proxy difference), not RTE's defaults (the
    dev-chosen variant)."""
    from taskextrap.estimators.parameter import RTE
    from taskextrap.experiments.parameter import FINGERPRINT_OBJECTIVE

    opts = dict(n_pairs=300, train=TINY_TRAIN, seed=0, search="proxy", **FINGERPRINT_OBJECTIVE, verbose=False)
    opts.update(kwargs)
    return RTE(**opts)


def make_quadratic_library(seed: int = 0, n: int = N_PER_REGION) -> TaskSet:
    fam = PARAMETER_FAMILIES["quadratic"]
    return TaskSet.sample(fam, {"F1_1": n, "F1_2": n}, rng(seed, "test-library"))


@pytest.fixture(scope="session")
def quad_library() -> TaskSet:
    return make_quadratic_library()


@pytest.fixture(scope="session")
def quad_targets():
    """Held-out F2 quadratic targets and one paper-protocol draw of each (4 targets)."""
    from taskextrap.tasks import get_protocol

    fam = PARAMETER_FAMILIES["quadratic"]
    targets = TaskSet.sample(fam, {"F2": 4}, rng(0, "test-targets"))
    obs = get_protocol("paper").draw(targets, 1, rng(0, "test-target-draws"))
    return targets, obs


@pytest.fixture(scope="session")
def fitted_rte(quad_library):
    """A small RTE (paper protocol, gradient embedding) fitted on the quadratic library.

    Shared by many tests: never refit or mutate it.
    """
    return tiny_rte().fit(quad_library)


@pytest.fixture(scope="session")
def make_rte():
    """Factory fixture: ``make_rte(**overrides)`` gives an unfitted tiny RTE."""
    return tiny_rte


@pytest.fixture(scope="session")
def make_library():
    """Factory fixture: ``make_library(seed)`` gives a tiny quadratic F1 library."""
    return make_quadratic_library


@pytest.fixture(scope="session")
def load_script():
    """Import a repository script (``scripts/x.py``, ``benchmarks/x.py``) as a module, by its
    path relative to the repository root; the scripts are not a package. A fresh copy each call,
    under ``<folder>_<stem>``: nothing is put on ``sys.path`` (``taskextrap.scripts``)."""
    from pathlib import Path

    from taskextrap.scripts import load_script as load_by_path

    root = Path(__file__).resolve().parents[1]
    return lambda relative: load_by_path(root / relative, fresh=True)


@pytest.fixture
def leak_held_out_pairs(monkeypatch):
    """``leak_held_out_pairs(cls, method)``: while ``cls.method`` runs, the estimator's pair split
    trains on its held-out pairs too (a mutation that the leak audit must name)."""
    from taskextrap.tasks.primitives import PairSplit

    # the swap below is seen by every thread: with one lane, no other network's stream draws
    # while the mutated method runs (two lanes would let the decomposer's see the swapped split)
    monkeypatch.setenv("TASKEXTRAP_LANES", "1")

    def patch(cls, method: str) -> None:
        honest = getattr(cls, method)

        def leaky(self, *args, **kwargs):
            split = self.split
            self.split = PairSplit(train=split.train + split.test, test=(("x", "y"),))
            try:
                return honest(self, *args, **kwargs)
            finally:
                self.split = split

        monkeypatch.setattr(cls, method, leaky)

    return patch


# ----------------------------------------------------------------------------- language models
# Tiny character models shared by the language-model tests (a few thousand parameters, built in
# milliseconds); transformers is imported inside the fixtures, so the suite collects without the
# [llm] extra.
TINY_LM = dict(d_model=32, n_layers=2, n_heads=2)  # the tiny char models of the language-model tests


def tiny_char_model(seed: int = 0, noise: float = 0.0):
    """A tiny char model; ``noise`` perturbs every weight so greedy text is not one repeated char."""
    from taskextrap.llm.model import build_char_model

    lm = build_char_model(seed=seed, max_len=256, **TINY_LM)
    if noise:
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for p in lm.model.parameters():
                p.add_(noise * torch.randn(p.shape, generator=g))
    return lm


def hf_char_tokenizer(chat: bool = False):
    """A local transformers tokenizer with the same ids as CharTokenizer, BOS added, a toy chat template."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    from taskextrap.llm.tokenizer import DEFAULT_ALPHABET

    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>"])}
    for ch in DEFAULT_ALPHABET:
        vocab[ch] = len(vocab)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))  # no merges: one token per char
    tk.decoder = decoders.Fuse()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    hf.chat_template = (
        "{{ bos_token }}{% for m in messages %}[user]{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}[bot]{% endif %}"
    )
    return hf


@pytest.fixture(scope="session")
def char_lm():
    """A freshly initialised tiny char model; never train or modify it."""
    return tiny_char_model()


@pytest.fixture(scope="session")
def noisy_lm():
    """A tiny char model with perturbed weights (varied greedy text); never modify it."""
    return tiny_char_model(seed=3, noise=0.3)


@pytest.fixture(scope="session")
def make_char_model():
    """Factory fixture: ``make_char_model(seed=0, noise=0.0)`` gives a new tiny char model."""
    return tiny_char_model


@pytest.fixture(scope="session")
def make_hf_tokenizer():
    """Factory fixture: a new local transformers tokenizer with CharTokenizer's ids."""
    return hf_char_tokenizer
