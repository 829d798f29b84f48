"""scripts/keep_units.sh: finished units and a run's figures round-trip through a kept folder."""

import json
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "keep_units.sh"


def _run(*args):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_save_then_restore_brings_back_units_and_plots_with_their_manifest(tmp_path):
    runs, kept, fresh = tmp_path / "runs", tmp_path / "kept", tmp_path / "fresh"
    (runs / "units").mkdir(parents=True)
    (runs / "units" / "u-abc.json").write_text('{"fingerprint": "abc"}')
    (runs / "units" / "u-abc.lock").write_text("")
    plots = runs / "exp-paper-seed0" / "plots"
    plots.mkdir(parents=True)
    (plots / "a.png").write_bytes(b"\x89PNG")
    (plots / ".plots.json").write_text(json.dumps({"u-abc": ["a.png"]}))
    (runs / "exp-paper-seed1").mkdir()  # a run that drew nothing: nothing to keep
    assert _run("save", runs, kept).returncode == 0
    assert sorted(p.name for p in (kept / "units").iterdir()) == ["u-abc.json"]  # no lock files
    assert _run("restore", fresh, kept).returncode == 0
    assert (fresh / "units" / "u-abc.json").read_text() == '{"fingerprint": "abc"}'
    assert json.loads((fresh / "exp-paper-seed0" / "plots" / ".plots.json").read_text()) == {"u-abc": ["a.png"]}
    assert not (fresh / "exp-paper-seed1").exists()


def test_an_unfinished_units_training_checkpoints_go_along(tmp_path):
    runs, kept, fresh = tmp_path / "runs", tmp_path / "kept", tmp_path / "fresh"
    part = runs / "units" / "u-abc.training"
    part.mkdir(parents=True)
    (part / "cnp-0.safetensors").write_bytes(b"state")
    assert _run("save", runs, kept).returncode == 0
    (part / "cnp-0.safetensors").write_bytes(b"newer state")  # a later save replaces the kept one
    assert _run("save", runs, kept).returncode == 0
    (part / ".cnp-0.tmp").write_bytes(b"")  # a save cut short: not a checkpoint
    assert _run("restore", fresh, kept).returncode == 0
    assert (fresh / "units" / "u-abc.training" / "cnp-0.safetensors").read_bytes() == b"newer state"
    (fresh / "units" / "u-abc.training" / "cnp-0.safetensors").write_bytes(b"trained on since")
    assert _run("restore", fresh, kept).returncode == 0  # a restore does not undo later progress
    assert (fresh / "units" / "u-abc.training" / "cnp-0.safetensors").read_bytes() == b"trained on since"
    (runs / "units" / "u-abc.json").write_text("{}")  # the unit finished: its checkpoints are stale
    assert _run("save", runs, kept).returncode == 0
    assert not part.exists() and not (kept / "units" / "u-abc.training").exists()


def test_an_empty_training_folder_is_no_error(tmp_path):
    (tmp_path / "runs" / "units" / "u-abc.training").mkdir(parents=True)
    r = _run("save", tmp_path / "runs", tmp_path / "kept")
    assert r.returncode == 0 and r.stdout.strip() == f"kept 0 unit(s) in {tmp_path / 'kept'}"


def test_an_unknown_mode_is_one_line(tmp_path):
    r = _run("bogus", tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == "keep_units.sh: the mode is save or restore, not 'bogus'"
