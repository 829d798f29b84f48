"""llm.pretrain: a default model is built, trained on its corpus, saved and loaded back."""

import importlib.util
import json

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.errors import TaskextrapError
from taskextrap.llm import pretrain
from taskextrap.llm.scorer import completion_nll
from taskextrap.llm.sft import SFTConfig


def test_pretrain_saves_a_loadable_model(tmp_path, monkeypatch):
    stages = (
        pretrain.PretrainStage("taskextrap.llm.parity:row_pairs", SFTConfig(steps=3, batch_size=2, lr=1e-3)),
        pretrain.PretrainStage("taskextrap.llm.parity:pretraining_pairs", SFTConfig(steps=2, batch_size=2, lr=1e-3)),
    )
    spec = pretrain.DefaultModelSpec(
        "parity", "tiny", stages, check="tests_pretrain_check:check", d_model=32, n_layers=1, n_heads=2, max_len=512
    )
    monkeypatch.setitem(pretrain.SPECS, "parity", spec)
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path)
    seen = []
    lm, _log = pretrain.pretrain(
        "parity", checkpoint_dir=tmp_path / "ckpt", progress=lambda stage, step, loss: seen.append((stage, step))
    )
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
    with pytest.raises(TaskextrapError, match=r"train_default_models\.py parity"):
        pretrain.default_model("parity")
    with pytest.raises(TaskextrapError, match="no default model"):
        pretrain.get_spec("nope")


def test_base_model_choice_labels_and_loads(noisy_lm, tmp_path, monkeypatch):
    from taskextrap.llm.model import save_model
    from taskextrap.llm.modeldir import model_fingerprint

    save_model(noisy_lm, tmp_path / "mine")
    assert pretrain.BaseModel.from_extra({}) == pretrain.BaseModel()
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path)
    assert pretrain.BaseModel().label("codeio") == "default:codeio"  # no shipped model: no weights tag
    save_model(noisy_lm, tmp_path / "codeio")
    tag = pretrain.BaseModel().label("codeio")
    assert tag.startswith("default:codeio@") and len(tag) == len("default:codeio@") + 12
    weights = tmp_path / "codeio" / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")
    assert pretrain.BaseModel().label("codeio") != tag  # other weights, another label
    choice = pretrain.BaseModel.from_extra({"model": str(tmp_path / "mine"), "dtype": "bfloat16"})
    mine = f"{tmp_path / 'mine'}@{model_fingerprint(tmp_path / 'mine')[:16]}"  # a --model: its path and files
    assert choice.label("codeio") == f"{mine} dtype=bfloat16"
    assert pretrain.BaseModel(load_in_4bit=True).label("parity") == "default:parity 4bit"
    lm = pretrain.load_base("codeio", choice)
    assert (
        next(lm.model.parameters()).dtype.is_floating_point
        and str(next(lm.model.parameters()).dtype) == "torch.bfloat16"
    )
    with pytest.raises(TaskextrapError, match="CUDA"):
        pretrain.load_base("codeio", pretrain.BaseModel(str(tmp_path / "mine"), load_in_4bit=True))
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path / "none")
    with pytest.raises(TaskextrapError, match=r"train_default_models\.py codeio"):
        pretrain.load_base("codeio")


def _tiny_spec(n_stages, lr=1e-3):
    stages = (
        pretrain.PretrainStage("taskextrap.llm.parity:row_pairs", SFTConfig(steps=3, batch_size=2, lr=lr)),
        pretrain.PretrainStage(
            "taskextrap.llm.parity:pretraining_pairs", SFTConfig(steps=2, batch_size=2, lr=1e-3, seed=1)
        ),
    )
    return pretrain.DefaultModelSpec(
        "parity", "tiny", stages[:n_stages], d_model=32, n_layers=1, n_heads=2, max_len=512
    )


def test_continue_shipped_trains_only_the_new_stages(tmp_path, monkeypatch):
    pairs = (["In: 0 1\nOut:", "In: 1 1\nOut:"], [" 1", " 0"])
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path / "scratch")
    monkeypatch.setitem(pretrain.SPECS, "parity", _tiny_spec(2))
    scratch, _ = pretrain.pretrain("parity")
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path / "shipped")
    monkeypatch.setitem(pretrain.SPECS, "parity", _tiny_spec(1))
    _, first = pretrain.pretrain("parity")
    monkeypatch.setitem(pretrain.SPECS, "parity", _tiny_spec(2))
    seen = []
    cont, log = pretrain.pretrain("parity", continue_shipped=True, progress=lambda k, step, loss: seen.append(k))
    assert set(seen) == {1} and log["stages"][0] == first["stages"][0] and len(log["stages"]) == 2
    assert completion_nll(cont, *pairs) == pytest.approx(completion_nll(scratch, *pairs), abs=1e-5)
    with pytest.raises(TaskextrapError, match="nothing to continue"):
        pretrain.pretrain("parity", continue_shipped=True)  # every stage is done
    monkeypatch.setitem(pretrain.SPECS, "parity", _tiny_spec(2, lr=5e-4))
    with pytest.raises(TaskextrapError, match="another spec"):
        pretrain.pretrain("parity", continue_shipped=True)  # its first stage differs from the shipped one's
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path / "none")
    with pytest.raises(TaskextrapError, match="no shipped"):
        pretrain.pretrain("parity", continue_shipped=True)
