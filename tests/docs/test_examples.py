"""The worked example on real data runs end to end at tiny sizes (its committed numbers come from
the full run, ``python examples/elnino.py``)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from taskextrap.baselines.table import method_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # make test-slow (CI runs it too): six tiny fits
def test_the_elnino_example_runs_at_tiny_sizes(tmp_path):
    pytest.importorskip("statsmodels")
    example = runpy.run_path(str(ROOT / "examples" / "elnino.py"))
    example["main"](["--tiny", "--out", str(tmp_path / "elnino.json"), "--csv", str(tmp_path / "data")])
    doc = json.loads((tmp_path / "elnino.json").read_text())
    assert set(doc["questions"]) == {"interpolate", "forecast"}
    baselines = set(method_rows("observed"))  # evaluate's: the method table's for a user's library
    assert {"ctx-polyfit", "ctx-interp", "library-best-fit", "ctx-gp"} <= baselines
    for q in doc["questions"].values():
        assert q["targets"] == 16 and set(q["mse"]) == {"rte", "rte-gp"} | baselines  # rte-gp: fit's context posterior
        assert {c["b"] for c in q["comparisons"]} == baselines
    library = (tmp_path / "data" / "library.csv").read_text().splitlines()
    assert library[0] == "year,month,sst" and len(library) == 1 + 45 * 12  # 1950-1994, 12 months each


@pytest.mark.slow  # make test-slow (CI runs it too): six tiny fits
def test_the_elnino_example_leaves_out_the_rows_it_is_told_to(tmp_path):
    pytest.importorskip("statsmodels")
    example = runpy.run_path(str(ROOT / "examples" / "elnino.py"))
    example["main"](["--tiny", "--out", str(tmp_path / "elnino.json"), "--skip", "cnp"])
    doc = json.loads((tmp_path / "elnino.json").read_text())
    assert doc["command"] == "python examples/elnino.py --tiny --skip cnp"
    for q in doc["questions"].values():
        assert q["skipped"] == ["cnp"] and "cnp" not in q["mse"] and "ctx-gp" in q["mse"]
        assert "cnp" not in {c["b"] for c in q["comparisons"]}
