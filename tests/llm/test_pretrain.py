"""llm.pretrain: a default model is built, trained on its corpus, saved and loaded back."""

import json

import pytest

pytest.importorskip("transformers")

from taskextrap.errors import TaskextrapError  # noqa: E402
from taskextrap.llm import pretrain  # noqa: E402
from taskextrap.llm.scorer import completion_nll  # noqa: E402
from taskextrap.llm.sft import SFTConfig  # noqa: E402


def test_pretrain_saves_a_loadable_model(tmp_path, monkeypatch):
    stages = (pretrain.PretrainStage("taskextrap.llm.parity:row_pairs", SFTConfig(steps=3, batch_size=2, lr=1e-3)),
              pretrain.PretrainStage("taskextrap.llm.parity:pretraining_pairs",
                                     SFTConfig(steps=2, batch_size=2, lr=1e-3)))
    spec = pretrain.DefaultModelSpec("parity", "tiny", stages, check="tests_pretrain_check:check", d_model=32,
                                     n_layers=1, n_heads=2, max_len=512)
    monkeypatch.setitem(pretrain.SPECS, "parity", spec)
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path)
    seen = []
    lm, log = pretrain.pretrain("parity", checkpoint_dir=tmp_path / "ckpt",
                                progress=lambda stage, step, loss: seen.append((stage, step)))
    assert seen == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert (tmp_path / "ckpt" / "stage0").is_dir() and (tmp_path / "ckpt" / "stage1").is_dir()
    assert (tmp_path / "parity" / "config.json").exists()
    saved = json.loads((tmp_path / "parity" / pretrain.TRAINING_LOG).read_text())
    assert [len(st["loss"]) for st in saved["stages"]] == [3, 2]
    assert saved["stages"][0]["corpus"].endswith("row_pairs") and saved["check"] == {"n_params": _n_params(lm)}
    again = pretrain.default_model("parity")
    pairs = (["In: 0 1\nOut:"], [" 1"])
    assert completion_nll(again, *pairs)[0] == pytest.approx(completion_nll(lm, *pairs)[0], abs=1e-5)


def _n_params(lm):
    return sum(p.numel() for p in lm.model.parameters())


def test_missing_default_model_and_unknown_names_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path)
    with pytest.raises(TaskextrapError, match="train_default_models.py parity"):
        pretrain.default_model("parity")
    with pytest.raises(TaskextrapError, match="no default model"):
        pretrain.get_spec("nope")
