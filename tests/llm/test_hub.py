"""``--model owner/name``: a Hugging Face hub model, found in (or fetched into) the local cache.

No test here reaches the hub: a fake cache in a temporary folder stands for a model downloaded
earlier, and the hub itself is either switched off (``HF_HUB_OFFLINE=1``) or an endpoint where
nothing listens.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.llm.hub import is_hub_id, model_tag, parse_hub_id, resolve_model
from taskextrap.llm.model import save_model

SHA = "0123456789abcdef0123456789abcdef01234567"
SRC = str(Path(__file__).resolve().parents[2] / "src")


def fake_cache(root: Path, lm=None, repo: str = "owner/name", files: dict | None = None) -> Path:
    """A Hugging Face hub cache at ``root`` holding ``repo`` at commit SHA (branch main): ``lm``
    saved in its snapshot, or the given ``files``; returns the snapshot folder."""
    storage = root / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / SHA
    snapshot.mkdir(parents=True)
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(SHA)
    if lm is not None:
        save_model(lm, snapshot)
    for name, data in (files or {}).items():
        (snapshot / name).write_bytes(data)
    return snapshot


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """An empty hub cache in tmp_path, offline."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _one_line_cli_error(argv, capsys) -> str:
    from taskextrap.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_what_counts_as_a_hub_id(tmp_path, monkeypatch):
    assert parse_hub_id("Qwen/Qwen2.5-0.5B") == ("Qwen/Qwen2.5-0.5B", None)
    assert parse_hub_id("sshleifer/tiny-gpt2@main") == ("sshleifer/tiny-gpt2", "main")
    assert parse_hub_id(f"owner/name@{SHA}") == ("owner/name", SHA)
    for text in (
        "",
        "name",
        "a/b/c/d",
        "/abs/path",
        "./rel",
        "../x/y",
        "-a/b",
        "a/b-",
        "a--b/c",
        "a/b..c",
        "a/b@",
        "a b/c",
        "~/models",
    ):
        assert parse_hub_id(text) is None, text
    monkeypatch.chdir(tmp_path)
    assert is_hub_id("owner/name")
    (tmp_path / "owner" / "name").mkdir(parents=True)
    assert not is_hub_id("owner/name")  # an existing local path always wins
    assert resolve_model("owner/name") == Path("owner/name")
    assert model_tag("Qwen/Qwen2.5-0.5B@main") == "Qwen_Qwen2.5_0.5B_main"


def test_bad_ids_are_one_line(offline_cache, tmp_path, capsys):
    with pytest.raises(TaskextrapError, match=r"^--model is empty"):
        resolve_model("")
    out = tmp_path / "out"
    err = _one_line_cli_error(
        ["reproduce", "parity", "--profile", "tiny", "--model", "a/b/c/d", "--out", str(out)], capsys
    )
    assert (
        err == "error: cannot load model at a/b/c/d: no such directory (give a local Hugging Face model "
        "directory, or a hub id owner/name)"
    )
    assert "--model is empty" in _one_line_cli_error(["reproduce", "parity", "--model", "", "--out", str(out)], capsys)
    assert not out.exists()


def test_offline_and_not_cached_says_what_to_do(offline_cache, tmp_path, capsys):
    out = tmp_path / "out"
    err = _one_line_cli_error(
        ["reproduce", "parity", "--profile", "tiny", "--model", "Qwen/Qwen2.5-0.5B", "--out", str(out), "--quiet"],
        capsys,
    )
    assert err == (
        f"error: cannot load model Qwen/Qwen2.5-0.5B: it is neither a local directory nor in the local "
        f"Hugging Face cache ({offline_cache}), and HF_HUB_OFFLINE=1 is set; download it once with "
        "network access (unset HF_HUB_OFFLINE) or pass a local directory"
    )
    assert not out.exists() and list(offline_cache.iterdir()) == []  # refused before any work, nothing written


def test_no_network_is_one_line_and_quick(tmp_path):
    # a fresh interpreter: huggingface_hub reads HF_HUB_OFFLINE once, at import
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(PYTHONPATH=SRC, HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path / "hub"))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from taskextrap.cli import main; main()",
            "reproduce",
            "parity",
            "--profile",
            "tiny",
            "--model",
            "nobody/nothing",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(
        "error: cannot load model nobody/nothing: it is neither a local directory nor in the local Hugging Face cache"
    )
    assert "the hub cannot be reached" in done.stderr and "connect to the network once" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_cached_hub_model_is_used_offline(noisy_lm, offline_cache, tmp_path, monkeypatch):
    from taskextrap.experiments import parity
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.runner import run_dir_name
    from taskextrap.llm.modeldir import model_fingerprint
    from taskextrap.llm.pretrain import BaseModel, load_base
    from taskextrap.llm.scorer import completion_nll

    snapshot = fake_cache(offline_cache, noisy_lm)
    for spec in ("owner/name", "owner/name@main", f"owner/name@{SHA}"):
        assert resolve_model(spec) == snapshot
    base = BaseModel("owner/name")
    digest = model_fingerprint(snapshot)
    assert base.label("parity") == f"owner/name@{digest[:16]}"
    lm = load_base("parity", base)
    np.testing.assert_array_equal(
        completion_nll(lm, ["ab", "x\n"], ["c", "yz"]), completion_nll(noisy_lm, ["ab", "x\n"], ["c", "yz"])
    )
    # the experiment takes it: its check passes, the run directory is tagged and the units keyed by it
    options = RunOptions(profile="tiny", out=tmp_path / "runs", progress=False, extra={"model": "owner/name"})
    get_experiment("parity").check(options)
    assert run_dir_name("parity", options).name == f"parity-paper-tiny-modelowner_name.{digest[:8]}"
    unit = parity.run_parity(get_experiment("parity").check(options), tmp_path / "units", None).units[0]
    assert json.dumps(unit.config, default=str).count(f"owner/name@{digest[:16]}") >= 1


def test_a_repository_without_safetensors_is_refused(offline_cache, noisy_lm, tmp_path):
    snapshot = fake_cache(offline_cache, noisy_lm, repo="owner/pickled")
    (snapshot / "model.safetensors").rename(snapshot / "pytorch_model.bin")  # as a pickle-only repository
    with pytest.raises(TaskextrapError) as err:
        resolve_model("owner/pickled")
    assert str(err.value).startswith("cannot load model owner/pickled: the repository has no safetensors weights")
    assert "\n" not in str(err.value)
