"""llm.pretrain: a default model is built, trained on its corpus, saved and loaded back."""

import json

import pytest

pytest.importorskip("transformers")

from taskextrap.errors import TaskextrapError  # noqa: E402
from taskextrap.llm import pretrain  # noqa: E402
from taskextrap.llm.scorer import completion_nll  # noqa: E402
from taskextrap.llm.sft import SFTConfig  # noqa: E402


def test_pretrain_saves_a_loadable_model(tmp_path, monkeypatch):
    spec = pretrain.DefaultModelSpec("parity", "taskextrap.llm.parity:pretraining_pairs", "tiny", d_model=32,
                                     n_layers=1, n_heads=2, max_len=512,
                                     train=SFTConfig(steps=3, batch_size=2, lr=1e-3, seed=0))
    monkeypatch.setitem(pretrain.SPECS, "parity", spec)
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path)
    lm, log = pretrain.pretrain("parity")
    assert (tmp_path / "parity" / "config.json").exists()
    saved = json.loads((tmp_path / "parity" / pretrain.TRAINING_LOG).read_text())
    assert len(saved["loss"]) == 3 and saved["spec"]["corpus"].endswith("pretraining_pairs")
    again = pretrain.default_model("parity")
    pairs = (["In: 0 1\nOut:"], [" 1"])
    assert completion_nll(again, *pairs)[0] == pytest.approx(completion_nll(lm, *pairs)[0], abs=1e-5)


def test_missing_default_model_and_unknown_names_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path)
    with pytest.raises(TaskextrapError, match="train_default_models.py parity"):
        pretrain.default_model("parity")
    with pytest.raises(TaskextrapError, match="no default model"):
        pretrain.get_spec("nope")
