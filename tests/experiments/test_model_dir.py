"""A damaged ``--model`` directory gives one line, "cannot load model at DIR: <reason>", never a
traceback; and a model's files, not only its path, key the units and checkpoints of a run."""

import importlib.util
import json
import os
import shutil
import warnings

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.llm.model import LanguageModel, load_model, save_model
from taskextrap.llm.modeldir import check_model_dir, model_fingerprint
from taskextrap.llm.tokenizer import CharTokenizer, HFTokenizer


def _saved(lm, root):
    save_model(lm, root)
    return root


def _edit_config(d, **changes):
    config = json.loads((d / "config.json").read_text())
    config.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del config[key]
    (d / "config.json").write_text(json.dumps(config))


def _cut_weights(d):
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])


HF_FILES = ("tokenizer.json", "tokenizer_config.json")


def _legacy(d):
    """``d`` as an earlier version saved it: the character tokenizer in char_tokenizer.json."""
    alphabet = CharTokenizer.load(d).alphabet
    for name in HF_FILES:
        (d / name).unlink()
    (d / "char_tokenizer.json").write_text(json.dumps({"type": "taskextrap-char", "alphabet": alphabet}))
    return d


def _only_config(d):
    for f in d.iterdir():
        if f.name != "config.json":
            f.unlink()


# damage -> (the reason's start, whether the cheap check already finds it)
CASES = {
    "missing": (lambda d: d.rename(d.with_name("gone")), "no such directory", True),
    "a file": (lambda d: [shutil.rmtree(d), d.write_text("weights?")], "not a directory", True),
    "random-byte weights": (
        lambda d: (d / "model.safetensors").write_bytes(os.urandom(4096)),
        "model.safetensors is not a safetensors file",
        True,
    ),
    "truncated weights": (_cut_weights, "model.safetensors is truncated", True),
    "only config.json": (_only_config, "no weights", True),
    "config not JSON": (
        lambda d: (d / "config.json").write_text("{model_type: llama"),
        "config.json is not valid JSON",
        True,
    ),
    "config a list": (lambda d: (d / "config.json").write_text("[1, 2]"), "config.json is a JSON list", True),
    "config without model_type": (lambda d: _edit_config(d, model_type=None), "config.json has no model_type", True),
    "unknown model_type": (lambda d: _edit_config(d, model_type="no-such-arch"), "config.json has model_type", True),
    "tokenizer random bytes": (
        lambda d: (d / "tokenizer.json").write_bytes(b"\xff\x00garbage"),
        "tokenizer.json is not UTF-8",
        True,
    ),
    "tokenizer not JSON": (
        lambda d: (d / "tokenizer.json").write_text('{"model": "ab'),
        "tokenizer.json is not valid JSON",
        True,
    ),
    "no tokenizer": (lambda d: [(d / n).unlink() for n in HF_FILES], "no tokenizer", True),
    "old tokenizer random bytes": (
        lambda d: (_legacy(d) / "char_tokenizer.json").write_bytes(b"\xff\x00garbage"),
        "char_tokenizer.json is not UTF-8",
        True,
    ),
    "old tokenizer not JSON": (
        lambda d: (_legacy(d) / "char_tokenizer.json").write_text('{"alphabet": "ab'),
        "char_tokenizer.json is not valid JSON",
        True,
    ),
    "old tokenizer of another kind": (
        lambda d: (_legacy(d) / "char_tokenizer.json").write_text('{"type": "bpe"}'),
        "char_tokenizer.json is not a taskextrap-char tokenizer",
        True,
    ),
    "generation config garbage": (
        lambda d: (d / "generation_config.json").write_text("]"),
        "generation_config.json is not valid JSON",
        True,
    ),
    "weights of other shapes": (
        lambda d: _edit_config(d, hidden_size=64, intermediate_size=256),
        "the weights do not fit config.json",
        False,
    ),
    "weights lacking tensors": (lambda d: _edit_config(d, num_hidden_layers=3), "the weights lack 9 tensors", False),
    "tokenizer bigger than the embedding": (
        lambda d: CharTokenizer("".join(chr(c) for c in range(200, 400))).save(d),
        "the tokenizer has 204 ids but the model's embedding only 102",
        False,
    ),
    "old tokenizer bigger than the embedding": (
        lambda d: (_legacy(d) / "char_tokenizer.json").write_text(
            json.dumps({"type": "taskextrap-char", "alphabet": "".join(chr(c) for c in range(200, 400))})
        ),
        "the tokenizer has 204 ids but the model's embedding only 102",
        False,
    ),
}


@pytest.mark.parametrize("damage", list(CASES))
def test_a_damaged_model_directory_is_one_line(damage, noisy_lm, tmp_path):
    d = _saved(noisy_lm, tmp_path / "m")
    hurt, reason, early = CASES[damage]
    hurt(d)
    with pytest.raises(TaskextrapError) as err:
        load_model(d)
    message = str(err.value)
    assert message.startswith(f"cannot load model at {d}: {reason}"), message
    assert "\n" not in message and len(message) < 400
    if early:  # found by the cheap check an experiment runs before any work
        with pytest.raises(TaskextrapError, match="cannot load model at"):
            check_model_dir(d)
    else:
        check_model_dir(d)


def test_garbage_hf_tokenizer_files_are_one_line(noisy_lm, make_hf_tokenizer, tmp_path):
    d = _saved(LanguageModel(noisy_lm.model, HFTokenizer(make_hf_tokenizer()), noisy_lm.device), tmp_path / "m")
    load_model(d)
    (d / "tokenizer.json").write_text('{"version": "1.0", "model": 7}')  # JSON, but not a tokenizer
    with pytest.raises(TaskextrapError) as err:
        load_model(d)
    assert str(err.value).startswith(f"cannot load model at {d}: its tokenizer cannot be loaded (")
    assert "\n" not in str(err.value)
    (d / "tokenizer.json").write_text("not json")
    with pytest.raises(TaskextrapError, match=r"tokenizer.json is not valid JSON"):
        check_model_dir(d)


def test_weights_the_config_does_not_use_are_a_warning(noisy_lm, tmp_path):
    d = _saved(noisy_lm, tmp_path / "m")
    _edit_config(d, num_hidden_layers=1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        load_model(d)
    ours = [str(w.message) for w in seen if issubclass(w.category, TaskextrapWarning)]
    assert len(ours) == 1 and "9 tensors of the weights are not used" in ours[0] and "\n" not in ours[0]


def test_a_bad_model_fails_the_cli_before_any_work(noisy_lm, tmp_path, capsys):
    from taskextrap.cli import main

    d = _saved(noisy_lm, tmp_path / "m")
    _cut_weights(d)
    with pytest.raises(SystemExit) as exit_:
        main(
            ["reproduce", "parity", "--profile", "tiny", "--model", str(d), "--out", str(tmp_path / "runs"), "--quiet"]
        )
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: cannot load model at {d}: model.safetensors is truncated")
    assert not (tmp_path / "runs").exists()  # refused in the check step, before the run made anything


def test_the_fingerprint_follows_the_files(noisy_lm, tmp_path):
    d = _saved(noisy_lm, tmp_path / "m")
    before = model_fingerprint(d)
    assert model_fingerprint(d) == before and len(before) == 64
    (d / "README.md").write_text("notes")  # documentation is not a model file
    assert model_fingerprint(d) == before
    copy = _saved(noisy_lm, tmp_path / "copy")
    assert model_fingerprint(copy) == before  # same files elsewhere: same hash
    weights = bytearray((d / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # one byte of one weight
    (d / "model.safetensors").write_bytes(bytes(weights))
    assert model_fingerprint(d) != before
    CharTokenizer(CharTokenizer.load(copy).alphabet[::-1]).save(copy)  # same size, other ids
    assert model_fingerprint(copy) != before


class _Stop(Exception):
    pass


def test_a_changed_byte_of_a_user_model_changes_its_units_and_checkpoints(noisy_lm, tmp_path, monkeypatch):
    from taskextrap.experiments import codeio, parity
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.sequence_runs import codeio as codeio_runs
    from taskextrap.experiments.units import fingerprint

    d = _saved(noisy_lm, tmp_path / "m")
    keys = []

    def spy_codeio(run, tasks):
        keys.append(("codeio checkpoints", run.ckpt_dir.name))  # codeio's unit key has the same base
        raise _Stop

    monkeypatch.setattr(codeio_runs, "run_seed", spy_codeio)

    def run_both():
        options = RunOptions(profile="tiny", out=tmp_path, progress=False, extra={"model": str(d)})
        unit = parity.run_parity(get_experiment("parity").check(options), tmp_path / "units", None).units[0]
        keys.append(("parity unit", fingerprint(**unit.config)))  # parity's checkpoints are named by it too
        with pytest.raises(_Stop):
            codeio.run_codeio(get_experiment("codeio").check(options), tmp_path / "units", None).units[0].compute(None)

    run_both()
    run_both()
    assert keys[:2] == keys[2:]  # same files, same keys
    weights = bytearray((d / "model.safetensors").read_bytes())
    weights[-1] ^= 1
    (d / "model.safetensors").write_bytes(bytes(weights))
    run_both()
    assert [k for k, _ in keys[4:]] == ["parity unit", "codeio checkpoints"]
    assert all(new != old for (_, new), (_, old) in zip(keys[4:], keys[:2], strict=True))
