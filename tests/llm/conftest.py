"""Tiny character models shared by the llm tests (a few thousand parameters, built in milliseconds).

Imports of transformers stay inside the fixtures so the suite collects without the [llm] extra.
"""

import pytest
import torch

TINY = dict(d_model=32, n_layers=2, n_heads=2)


def tiny_char_model(seed: int = 0, noise: float = 0.0):
    """A tiny char model; ``noise`` perturbs every weight so greedy text is not one repeated char."""
    from taskextrap.llm.model import build_char_model

    lm = build_char_model(seed=seed, max_len=256, **TINY)
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
