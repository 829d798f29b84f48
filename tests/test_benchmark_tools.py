"""benchmarks/paired.py and benchmarks/tables.py: paired differences from unit files; README tables."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "paired.py"


@pytest.fixture(scope="module")
def paired_mod():
    spec = importlib.util.spec_from_file_location("bench_paired", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_paired_differences_over_seeds(tmp_path, paired_mod):
    for seed, (a, b) in enumerate([([1.0, 2.0], [2.0, 2.5]), ([1.0, 1.0], [1.5, 0.5])]):
        (tmp_path / f"parameter-exp-strict-seed{seed}-abc123.json").write_text(
            json.dumps({"errors": {"rte": a, "random-anchors": b}}))
    (tmp_path / "parameter-exp-paper-seed0-abc123.json").write_text(json.dumps({"errors": {"rte": [9], "random-anchors": [0]}}))
    res = paired_mod.paired(tmp_path, "parameter", "strict", "rte", "random-anchors")
    d = np.array([1.0, 0.5, 0.5, -0.5])
    assert set(res) == {"exp"}
    assert res["exp"]["n"] == 4 and res["exp"]["mean"] == pytest.approx(d.mean())
    assert res["exp"]["ci95"] == pytest.approx(1.96 * d.std(ddof=1) / 2)
    assert res["exp"]["first_better"] == pytest.approx(0.75)


def test_paired_filters_by_saved_profile(tmp_path, paired_mod):
    for name, prof in (("quick", [1.0]), ("paper", [2.0, 4.0])):
        (tmp_path / f"length-poly-paper-seed0-{len(prof):x}ab.json").write_text(json.dumps(
            {"config": {"profile": {"name": name}}, "errors": {"rte": [0.0] * len(prof), "sparse-inductive": prof}}))
    res = paired_mod.paired(tmp_path, "length", "paper", "rte", "sparse-inductive", profile="paper")
    assert res["poly"]["n"] == 2 and res["poly"]["mean"] == pytest.approx(3.0)
    assert paired_mod.paired(tmp_path, "length", "paper", "rte", "sparse-inductive")["poly"]["n"] == 3


def test_tables_render_mse_and_accuracy_rows_with_wall_time(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_tables", _PATH.parent / "tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [{"group": "g", "method": "rte", "metric": "mse", "value": 0.5, "ci95": 0.1, "n": 3, "paper_value": 0.7},
            {"group": "found", "method": "rte", "metric": "accuracy", "value": 0.25, "ci95": None, "n": 3}]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 90.0}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    text = mod.render("x")
    assert "| `rte` | 0.500 ± 0.100 (paper 0.700) |" in text
    assert "| `rte` | 0.250 |" in text and "_wall 1.5 min" in text
