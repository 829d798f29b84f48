"""scripts/claims_hold.py: which clear paired claims of one run hold in another (a GPU's tables
beside the CPU's), and scripts/gpu_check.sh refusing to run without a GPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _comparison(a, b, diff, clear, winner):
    return {
        "group": "g",
        "metric": "mse",
        "a": a,
        "b": b,
        "diff": diff,
        "lo": diff - 1,
        "hi": diff + 1,
        "clear": clear,
        "winner": winner if clear else None,
    }


def _results(comparisons, value):
    rows = [{"group": "g", "method": "rte", "metric": "mse", "value": value, "ci95": 0.1}]
    return {"rows": rows, "comparisons": comparisons}


def test_a_claim_holds_only_when_clear_in_both_with_the_same_winner(load_script, tmp_path):
    claims = load_script("scripts/claims_hold.py")
    cpu = _results(
        [
            _comparison("rte", "x", -2, True, "rte"),
            _comparison("rte", "y", -3, True, "rte"),
            _comparison("rte", "z", 0.1, False, None),
        ],
        1.0,
    )
    gpu = _results(
        [
            _comparison("rte", "x", -2.1, True, "rte"),
            _comparison("rte", "y", -0.5, False, None),
            _comparison("rte", "z", 0.2, False, None),
        ],
        1.1,
    )
    lines, total, held = claims.compare(cpu, gpu)
    assert (total, held) == (2, 1)  # z is clear in neither run: no claim
    text = "\n".join(lines)
    assert "| g | mse | rte vs y | rte clearly, -3 [-4, -2] | not clear, -0.5 [-1.5, 0.5] | **no** |" in text
    assert "| g | rte | mse | 1 ± 0.1 | 1.1 ± 0.1 |" in text
    (tmp_path / "cpu.json").write_text(json.dumps(cpu))
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    assert (
        claims.main([str(tmp_path / "cpu.json"), str(tmp_path / "gpu.json"), "--markdown", str(tmp_path / "m.md")]) == 1
    )
    assert (tmp_path / "m.md").read_text().startswith("1 of 2 clear claims hold in both runs")
    assert (
        claims.main([str(tmp_path / "cpu.json"), str(tmp_path / "cpu.json"), "--markdown", str(tmp_path / "m.md")]) == 0
    )


@pytest.mark.skipif(sys.platform != "linux", reason="a bash script")
def test_the_gpu_session_script_stops_at_once_without_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would run")
    proc = subprocess.run(
        ["bash", "scripts/gpu_check.sh", str(tmp_path / "gpu")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode != 0 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "gpu").exists()
