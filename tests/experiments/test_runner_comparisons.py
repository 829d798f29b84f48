"""The runner adds paired comparisons (from the rows' kept arrays) and provenance to results.json."""

import json

import numpy as np
import pytest

from taskextrap.experiments import registry
from taskextrap.experiments.registry import Experiment, RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.experiments.units import Plan
from taskextrap.report.schema import make_row


def _fake(options, cache_dir, plot_dir):
    def assemble(results):
        base = np.linspace(1.0, 2.0, 12)[:, None] * np.ones((1, 2))
        rows = [make_row("fake", "g", "rte", "mse", base), make_row("fake", "g", "ctx-polyfit", "mse", base + 1.0)]
        return rows, {}, [0, 1], {}

    return Plan([], assemble)


@pytest.mark.parametrize("split", ["test", "dev"])
def test_runner_writes_comparisons_and_provenance(tmp_path, monkeypatch, split):
    import taskextrap.experiments.catalogue  # noqa: F401 - every built-in registered

    monkeypatch.setitem(registry.EXPERIMENTS, "fake", Experiment("fake", _fake, "a test", {"quick": None}, dev=True))
    res = run_experiment("fake", RunOptions(out=tmp_path, split=split, plots=False, progress=False))
    (c,) = res["comparisons"]  # the dev split copies the rows; the comparisons are made before
    assert (c["a"], c["b"], c["clear"], c["winner"], c["n"]) == ("rte", "ctx-polyfit", True, "rte", 12)
    assert all(r["n"] == 12 and r["seed_independent"] for r in res["rows"])
    on_disk = json.loads(
        (tmp_path / ("fake-paper-quick" + ("-dev" if split == "dev" else "")) / "results.json").read_text()
    )
    assert on_disk["comparisons"] == res["comparisons"] and on_disk["rows"] == res["rows"]
    env = on_disk["environment"]
    assert {"git", "dirty", "source_hash"} <= set(env) and len(env["source_hash"]) == 16
