"""Relational fine-tuning: completion-only loss, learning, LoRA, exact resume from checkpoints."""

import dataclasses
import importlib.util
import json
import os
import shutil
import warnings

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)
if importlib.util.find_spec("peft") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("peft is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

import numpy as np
import torch

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.llm.model import save_model
from taskextrap.llm.scorer import completion_nll
from taskextrap.llm.sft import (
    IGNORE,
    LoraSettings,
    ScoredText,
    SFTConfig,
    finished_checkpoint,
    latest_checkpoint,
    merge_lora,
    train,
    training_batch,
)


def last_char_pairs(g: np.random.Generator, n: int) -> list[tuple[str, str]]:
    """Prompt: a few letters and '='; completion: the prompt's last letter."""
    out = []
    for _ in range(n):
        s = "".join(g.choice(list("abcdef"), size=int(g.integers(2, 6))))
        out.append((s + "=", s[-1]))
    return out


def state(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_label_mask_covers_completion_only(char_lm):
    pairs = [("abc=", "c"), ("a=", "xyz")]
    ids, mask, labels = training_batch(char_lm, pairs)
    for r, (p, c) in enumerate(pairs):
        n_p, c_ids = len(char_lm.prompt_ids(p)), char_lm.completion_ids(c)
        n = n_p + len(c_ids)
        assert (labels[r, :n_p] == IGNORE).all()  # prompt (BOS included)
        assert labels[r, n_p:n].tolist() == c_ids == ids[r, n_p:n].tolist()  # completion + EOS
        assert (labels[r, n:] == IGNORE).all() and (mask[r, n:] == 0).all()  # padding
        assert mask[r, :n].all()


def test_scored_text_labels_its_scored_pieces_and_eos(char_lm):
    tok = char_lm.tokenizer
    text = ScoredText((("In: ab Out:", False), (" ba\n", False), ("In: cd Out:", False), (" dc", True)))
    ids, mask, labels = training_batch(char_lm, [text, ("xy=", "z")])
    n = 1 + len("In: ab Out: ba\nIn: cd Out: dc") + 1  # BOS, the text, EOS
    assert ids[0, :n].tolist() == [tok.bos_token_id, *tok.encode("In: ab Out: ba\nIn: cd Out: dc"), tok.eos_token_id]
    scored = [t for t in labels[0].tolist() if t != IGNORE]
    assert scored == [*tok.encode(" dc"), tok.eos_token_id]
    assert (labels[0, n - 4 : n] == ids[0, n - 4 : n]).all() and mask[0, :n].all() and not mask[0, n:].any()
    # a (prompt, completion) pair in the same batch keeps its completion-only labels
    assert [t for t in labels[1].tolist() if t != IGNORE] == char_lm.completion_ids("z")


def test_learns_last_character(make_char_model):
    lm, log = train(make_char_model(), last_char_pairs, SFTConfig(steps=60, batch_size=16, lr=3e-3, warmup_steps=5))
    loss = log["loss"]
    assert len(loss) == 60 and np.mean(loss[-5:]) < 0.5 * np.mean(loss[:5])
    assert not lm.model.training
    # scoring agrees with training: the learnt completion is likelier than a wrong one
    right, wrong = completion_nll(lm, ["abc="] * 2, ["c", "zz"])
    assert right < wrong


def test_grad_accum_equals_big_batch(make_char_model):
    a, _ = train(make_char_model(), last_char_pairs, SFTConfig(steps=2, batch_size=8, lr=1e-3))
    b, _ = train(make_char_model(), last_char_pairs, SFTConfig(steps=2, batch_size=4, grad_accum=2, lr=1e-3))
    for (n, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=0, msg=n)


def test_lora_trains_adapters_only(make_char_model, tmp_path):
    base = make_char_model()
    before = state(base.model)
    cfg = SFTConfig(steps=5, batch_size=8, lr=1e-2, lora=LoraSettings(r=4, alpha=8, dropout=0.05))
    lm, _log = train(base, last_char_pairs, cfg)
    trainable = [n for n, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    after = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p
        for n, p in lm.model.named_parameters()
        if "lora_" not in n
    }
    assert set(after) == set(before)
    assert all(torch.equal(before[n], after[n]) for n in before)  # base weights untouched
    assert any(not torch.all(p == 0) for n, p in lm.model.named_parameters() if "lora_B" in n)  # adapters moved
    prompts, comps = ["abc=", "de="], ["c", "e"]
    wrapped = completion_nll(lm, prompts, comps)
    with pytest.raises(TaskextrapError, match="merge"):
        save_model(lm, tmp_path)
    merged = merge_lora(lm)
    np.testing.assert_allclose(completion_nll(merged, prompts, comps), wrapped, atol=1e-4)


class Interrupt(Exception):
    pass


def stop_after(step):
    def progress(s, loss):
        if s == step:
            raise Interrupt

    return progress


@pytest.mark.parametrize("lora", [None, LoraSettings(r=4, alpha=8, dropout=0.1)])
def test_resume_equals_uninterrupted(make_char_model, tmp_path, lora):
    cfg = SFTConfig(steps=10, batch_size=8, lr=3e-3, warmup_steps=2, checkpoint_every=5, lora=lora)
    ref, ref_log = train(make_char_model(), last_char_pairs, cfg)
    with pytest.raises(Interrupt):  # killed during step 7, after the step-5 checkpoint
        train(make_char_model(), last_char_pairs, cfg, out_dir=tmp_path, progress=stop_after(6))
    assert latest_checkpoint(tmp_path).name.endswith("00000005")
    assert finished_checkpoint(tmp_path, cfg) is None  # a sharded worker keeps waiting
    lm, log = train(make_char_model(), last_char_pairs, cfg, out_dir=tmp_path)
    assert log["resumed_from"] == 5
    np.testing.assert_allclose(log["loss"], ref_log["loss"], atol=1e-5)
    for (n, p), q in zip(ref.model.named_parameters(), lm.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=0, msg=n)
    assert latest_checkpoint(tmp_path).name.endswith("00000010")
    assert finished_checkpoint(tmp_path, cfg) == latest_checkpoint(tmp_path)
    assert finished_checkpoint(tmp_path, dataclasses.replace(cfg, lr=1e-3)) is None  # another run's
    assert finished_checkpoint(tmp_path / "absent", cfg) is None


def test_checkpoint_of_another_config_raises(make_char_model, tmp_path):
    cfg = SFTConfig(steps=2, batch_size=4, lr=1e-3, checkpoint_every=1)
    train(make_char_model(), last_char_pairs, cfg, out_dir=tmp_path)
    # checkpoint_every does not change the result, so it does not change the fingerprint
    _, log = train(make_char_model(), last_char_pairs, SFTConfig(steps=2, batch_size=4, lr=1e-3), out_dir=tmp_path)
    assert log["resumed_from"] == 2
    with pytest.raises(TaskextrapError, match="different training config"):
        train(make_char_model(), last_char_pairs, SFTConfig(steps=2, batch_size=4, lr=2e-3), out_dir=tmp_path)


def _cut(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def _edit_json(folder, **changes):
    meta = json.loads((folder / "checkpoint.json").read_text())
    (folder / "checkpoint.json").write_text(json.dumps({**meta, **changes}))


def _old_format(folder):
    """As written before checkpoints carried checksums."""
    meta = json.loads((folder / "checkpoint.json").read_text())
    (folder / "checkpoint.json").write_text(
        json.dumps({k: v for k, v in meta.items() if k not in ("files", "checksum")})
    )


# damage -> (what it does to a checkpoint folder, the reason the warning gives)
DAMAGE = {
    "truncated weights": (
        lambda f: _cut(f / "trainable.safetensors"),
        "trainable.safetensors does not match its checksum",
    ),
    "weights with one byte changed": (
        lambda f: _flip_last_byte(f / "trainable.safetensors"),
        "trainable.safetensors does not match its checksum",
    ),
    "empty json": (lambda f: (f / "checkpoint.json").write_text(""), "checkpoint.json is empty or not JSON"),
    "garbled json": (
        lambda f: (f / "checkpoint.json").write_text('{"step": 5, "lo'),
        "checkpoint.json is empty or not JSON",
    ),
    "json a list": (lambda f: (f / "checkpoint.json").write_text("[5]"), "checkpoint.json is not a JSON object"),
    "json edited": (lambda f: _edit_json(f, loss=[0.0] * 5), "checkpoint.json does not match its checksum"),
    "garbage optimizer state": (
        lambda f: (f / "optimizer.pt").write_bytes(os.urandom(300)),
        "optimizer.pt does not match its checksum",
    ),
    "weights missing": (lambda f: (f / "trainable.safetensors").unlink(), "trainable.safetensors is missing"),
    "optimizer state missing": (lambda f: (f / "optimizer.pt").unlink(), "optimizer.pt is missing"),
    # checkpoints from before the checksums: the files themselves are parsed and checked
    "old format, truncated weights": (
        lambda f: [_old_format(f), _cut(f / "trainable.safetensors")],
        "trainable.safetensors is unreadable",
    ),
    "old format, garbage optimizer state": (
        lambda f: [_old_format(f), (f / "optimizer.pt").write_bytes(os.urandom(300))],
        "optimizer.pt is unreadable",
    ),
    "old format, optimizer state of another shape": (
        lambda f: [
            _old_format(f),
            torch.save({"optimizer": {"state": {}, "param_groups": []}, "scheduler": {}}, f / "optimizer.pt"),
        ],
        "optimizer.pt does not fit this run's optimizer",
    ),
    "old format, no loss history": (
        lambda f: [_old_format(f), _edit_json(f, loss=None)],
        "checkpoint.json has no loss history of 5 steps",
    ),
}
DAMAGE_CFG = SFTConfig(steps=10, batch_size=8, lr=3e-3, warmup_steps=2, checkpoint_every=5)


@pytest.fixture(scope="module")
def uninterrupted(make_char_model):
    lm, log = train(make_char_model(), last_char_pairs, DAMAGE_CFG)
    return state(lm.model), log["loss"]


def _assert_identical(lm, log, reference):
    weights, losses = reference
    assert log["loss"] == losses  # bit for bit, not within a tolerance
    for name, p in lm.model.named_parameters():
        assert torch.equal(p, weights[name]), name


def _resume_with_warnings(make_char_model, out):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lm, log = train(make_char_model(), last_char_pairs, DAMAGE_CFG, out_dir=out)
    return lm, log, [str(w.message) for w in seen if issubclass(w.category, TaskextrapWarning)]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_only_checkpoint_restarts_the_run(damage, make_char_model, uninterrupted, tmp_path):
    with pytest.raises(Interrupt):  # killed during step 7: ckpt-5 is the only checkpoint
        train(make_char_model(), last_char_pairs, DAMAGE_CFG, out_dir=tmp_path, progress=stop_after(6))
    folder = latest_checkpoint(tmp_path)
    hurt, reason = DAMAGE[damage]
    hurt(folder)
    lm, log, said = _resume_with_warnings(make_char_model, tmp_path)
    assert len(said) == 1 and said[0].startswith(f"fine-tuning checkpoint {folder} is damaged ({reason}")
    assert said[0].endswith("): deleted it, restarting this run from step 0") and "\n" not in said[0]
    assert log["resumed_from"] == 0
    _assert_identical(lm, log, uninterrupted)
    assert latest_checkpoint(tmp_path).name.endswith("00000010") and not folder.exists()


@pytest.mark.parametrize("damage", ["truncated weights", "garbled json", "garbage optimizer state"])
def test_a_damaged_checkpoint_falls_back_to_the_one_before(damage, make_char_model, uninterrupted, tmp_path):
    with pytest.raises(Interrupt):
        train(make_char_model(), last_char_pairs, DAMAGE_CFG, out_dir=tmp_path, progress=stop_after(6))
    first = latest_checkpoint(tmp_path)
    shutil.copytree(first, tmp_path / "keep")
    train(make_char_model(), last_char_pairs, DAMAGE_CFG, out_dir=tmp_path)  # finishes; deletes ckpt-5
    (tmp_path / "keep").rename(first)  # both ckpt-5 and the final ckpt-10 complete
    final = latest_checkpoint(tmp_path)
    DAMAGE[damage][0](final)
    assert finished_checkpoint(tmp_path, DAMAGE_CFG) in (None, final)  # a damaged JSON is not finished
    lm, log, said = _resume_with_warnings(make_char_model, tmp_path)
    assert len(said) == 1 and said[0].startswith(f"fine-tuning checkpoint {final} is damaged (")
    assert said[0].endswith(f"): deleted it, resuming from {first.name}")
    assert log["resumed_from"] == 5
    _assert_identical(lm, log, uninterrupted)
    assert finished_checkpoint(tmp_path, DAMAGE_CFG) == final  # saved again, whole


def test_an_interrupted_save_and_an_old_checkpoint_resume_silently(make_char_model, uninterrupted, tmp_path):
    with pytest.raises(Interrupt):
        train(make_char_model(), last_char_pairs, DAMAGE_CFG, out_dir=tmp_path, progress=stop_after(6))
    folder = latest_checkpoint(tmp_path)
    _old_format(folder)  # no checksums: read on its structure
    lm, log, said = _resume_with_warnings(make_char_model, tmp_path)
    assert said == [] and log["resumed_from"] == 5
    _assert_identical(lm, log, uninterrupted)
    (latest_checkpoint(tmp_path) / "checkpoint.json").unlink()  # killed before the JSON: not a checkpoint
    lm, log, said = _resume_with_warnings(make_char_model, tmp_path)
    assert said == [] and log["resumed_from"] == 0
    _assert_identical(lm, log, uninterrupted)


def test_lora_restarts_from_a_damaged_checkpoint_identically(make_char_model, tmp_path):
    cfg = dataclasses.replace(DAMAGE_CFG, lora=LoraSettings(r=4, alpha=8, dropout=0.1))
    ref, ref_log = train(make_char_model(), last_char_pairs, cfg)
    with pytest.raises(Interrupt):
        train(make_char_model(), last_char_pairs, cfg, out_dir=tmp_path, progress=stop_after(6))
    (latest_checkpoint(tmp_path) / "optimizer.pt").write_bytes(b"")
    with pytest.warns(TaskextrapWarning, match="optimizer.pt does not match its checksum"):
        lm, log = train(make_char_model(), last_char_pairs, cfg, out_dir=tmp_path)
    _assert_identical(lm, log, (state(ref.model), ref_log["loss"]))
