"""build_char_model, save_model and load_model (local directories only)."""

import importlib.util

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.llm.model import LanguageModel, load_model, save_model
from taskextrap.llm.scorer import completion_nll
from taskextrap.llm.tokenizer import CharTokenizer, HFTokenizer

PROMPTS, COMPS = ["ab", "hello", "x"], ["c", " world", "yz"]


def test_build_is_seeded(make_char_model):
    a, b, c = make_char_model(seed=0), make_char_model(seed=0), make_char_model(seed=1)
    sa, sb, sc = (completion_nll(m, PROMPTS, COMPS) for m in (a, b, c))
    assert np.array_equal(sa, sb) and not np.allclose(sa, sc)
    assert not a.model.training


def test_save_load_round_trip(noisy_lm, tmp_path):
    save_model(noisy_lm, tmp_path / "m")
    assert any((tmp_path / "m").glob("*.safetensors"))
    back = load_model(tmp_path / "m")
    assert isinstance(back.tokenizer, CharTokenizer) and not back.model.training
    np.testing.assert_array_equal(completion_nll(back, PROMPTS, COMPS), completion_nll(noisy_lm, PROMPTS, COMPS))


def test_a_directory_of_an_earlier_version_still_loads(noisy_lm, tmp_path):
    import json

    save_model(noisy_lm, tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # as saved before: char_tokenizer.json only
        (tmp_path / name).unlink()
    (tmp_path / "char_tokenizer.json").write_text(
        json.dumps({"type": "taskextrap-char", "alphabet": noisy_lm.tokenizer.alphabet})
    )
    back = load_model(tmp_path)
    assert isinstance(back.tokenizer, CharTokenizer) and back.prompt_ids("ab") == noisy_lm.prompt_ids("ab")
    np.testing.assert_array_equal(completion_nll(back, PROMPTS, COMPS), completion_nll(noisy_lm, PROMPTS, COMPS))


def test_load_with_hf_tokenizer(noisy_lm, make_hf_tokenizer, tmp_path):
    lm = LanguageModel(noisy_lm.model, HFTokenizer(make_hf_tokenizer()), noisy_lm.device)
    save_model(lm, tmp_path)
    back = load_model(tmp_path)
    assert isinstance(back.tokenizer, HFTokenizer)
    np.testing.assert_allclose(
        completion_nll(back, PROMPTS, COMPS), completion_nll(noisy_lm, PROMPTS, COMPS), atol=1e-6
    )


def test_load_errors(tmp_path):
    with pytest.raises(TaskextrapError, match="no such directory"):
        load_model(tmp_path / "missing")
    with pytest.raises(TaskextrapError, match=r"config\.json"):
        load_model(tmp_path)


def test_four_bit_needs_cuda(noisy_lm, tmp_path):
    save_model(noisy_lm, tmp_path)
    with pytest.raises(TaskextrapError, match="4bit"):
        load_model(tmp_path, load_in_4bit=True)  # CPU here; on a GPU machine it asks for a cuda device


def test_missing_extra_is_one_line_error(monkeypatch):
    import importlib.util

    from taskextrap.llm.model import build_char_model

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TaskextrapError, match=r"pip install 'taskextrap\[llm\]'"):
        build_char_model(d_model=8, n_layers=1, n_heads=1)
