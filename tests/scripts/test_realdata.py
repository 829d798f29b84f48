"""benchmarks/realdata.py: the real-data suite's data sets, their shift splits and one tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from taskextrap.baselines.classics import CHOSEN, CTX_GP_VARIANT
from taskextrap.baselines.table import method_rows


@pytest.fixture(scope="module")
def realdata(load_script):
    return load_script("benchmarks/realdata.py")


def test_solar_cycles_run_from_minimum_to_minimum(realdata):
    years = np.arange(100)
    activity = 50 + 50 * np.sin(2 * np.pi * (years - 3) / 11 - np.pi / 2)  # minima at 3, 14, 25, ...
    cycles = realdata.solar_cycles(years, activity)
    assert cycles[:3] == [(3, 13), (14, 24), (25, 35)] and all(b - a + 1 == 11 for a, b in cycles)


@pytest.mark.parametrize("name", ["elnino", "sunspots", "fertility"])
def test_every_data_set_holds_out_targets_beyond_its_library(realdata, name):
    pytest.importorskip("statsmodels")
    data = realdata.DATA_SETS[name]()
    library, targets = {r[0] for r in data.library}, {r[0] for r in data.targets}
    assert len(library) >= 15 and len(targets) >= 5 and not library & targets
    # the shift: every target's known parameter lies beyond every library task's
    assert min(r[3] for r in data.targets) > max(r[3] for r in data.library)
    assert set(data.questions) == {"interpolate", "forecast"}


@pytest.mark.slow  # make test-slow (CI runs it too): two tiny fits and evaluations
def test_a_tiny_run_writes_rows_of_every_method_and_both_coverages(realdata, tmp_path, monkeypatch):
    pytest.importorskip("statsmodels")
    realdata.main(["--tiny", "--data", "elnino", "--out", str(tmp_path / "r.json"), "--cache", str(tmp_path / "c")])
    doc = json.loads((tmp_path / "r.json").read_text())
    # run again from the kept seeds: nothing is fitted, and the rows are the same to the bit
    monkeypatch.setattr("taskextrap.workflow.fit_observed", lambda *a, **k: pytest.fail("fitted again"))
    realdata.main(["--tiny", "--data", "elnino", "--out", str(tmp_path / "again.json"), "--cache", str(tmp_path / "c")])
    assert json.loads((tmp_path / "again.json").read_text())["rows"] == doc["rows"]
    groups = {r["group"] for r in doc["rows"]}
    assert groups == {"elnino:interpolate", "elnino:forecast"}
    mse = {r["method"] for r in doc["rows"] if r["metric"] == "mse"}
    assert mse == {"rte", "rte-gp", *method_rows("observed")}  # rte-gp: fit's context posterior, judged beside rte
    coverage = {r["method"] for r in doc["rows"] if r["metric"] == "coverage"}
    assert {"rte", "rte-uncalibrated", "ctx-gp", "ctx-gp-uncalibrated", "rte-gp", "rte-gp-uncalibrated"} <= coverage
    assert {c["b"] for c in doc["comparisons"] if c["a"] == "rte"} == {"rte-gp", *method_rows("observed")}
    assert {c["b"] for c in doc["comparisons"] if c["a"] == "rte-gp"} == set(method_rows("observed"))
    # the variants behind the learned classics' rows and ctx-gp's fit, as a test file records them
    assert doc["config"]["classic_variants"] == {**CHOSEN, "ctx-gp": CTX_GP_VARIANT}
    assert doc["config"]["threads"] == 1  # the cnp flushes subnormals only at one torch thread
    made = doc["config"]["elnino"]["questions"]["interpolate"]["made_by"]  # each seed's tree, as kept
    assert made[0]["source_hash"] and made == json.loads((tmp_path / "again.json").read_text())["config"]["elnino"][
        "questions"]["interpolate"]["made_by"]  # fmt: skip


def test_a_seed_run_is_kept_and_read_back_for_the_same_settings_only(realdata, tmp_path):
    from types import SimpleNamespace

    question = realdata.Question(protocol="paper", size=8, how="random")
    data = SimpleNamespace(name="toy", questions={"interpolate": question}, library=[("a", 0, 1.0, 0)], targets=[])
    calls = []

    def compute():
        calls.append(1)
        return {"fit": {}, "evaluation": {"mse": {"rte": 0.5 + len(calls)}}, "wall_s": 1.0}

    first = realdata.cached_run(tmp_path, data, "interpolate", 0, False, compute)
    assert realdata.cached_run(tmp_path, data, "interpolate", 0, False, compute) == first and len(calls) == 1
    assert "source_hash" in first["environment"]  # each kept seed names the code that made it
    realdata.cached_run(tmp_path, data, "interpolate", 1, False, compute)  # another seed
    realdata.cached_run(tmp_path, data, "interpolate", 0, True, compute)  # tiny
    data.library = [("a", 0, 2.0, 0)]  # another table
    realdata.cached_run(tmp_path, data, "interpolate", 0, False, compute)
    assert len(calls) == 4 and len(list(tmp_path.glob("toy-interpolate-seed*.json"))) == 4
    assert realdata.cached_run(None, data, "interpolate", 0, False, compute)["evaluation"]["mse"]["rte"] == 5.5
    for kept in tmp_path.glob("toy-interpolate-seed*.json"):
        kept.write_text("{")  # damaged: one line naming it, nothing recomputed over it
    with pytest.raises(SystemExit, match="remove it to recompute"):
        realdata.cached_run(tmp_path, data, "interpolate", 0, False, compute)
    assert len(calls) == 5  # the uncached call above computed; the damaged file did not


def test_a_kept_seed_is_not_counted_as_uncommitted_code(realdata, tmp_path, monkeypatch):
    """Kept seeds land in the repository while the suite runs: the next seed's ``dirty`` leaves
    them out, and still says so for any other uncommitted change."""
    import subprocess

    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(realdata, "ROOT", tmp_path)
    cache = tmp_path / "seeds"
    cache.mkdir()
    (cache / "elnino-interpolate-seed0-abc.json").write_text("{}")
    assert realdata._dirty_besides(cache) is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert realdata._dirty_besides(cache) is True
    assert realdata._dirty_besides(tmp_path.parent / "elsewhere") is True  # a cache outside: still read
