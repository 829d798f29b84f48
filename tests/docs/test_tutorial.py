"""docs/tutorial.py, the tutorial in jupytext's percent format, runs as a notebook (nbclient) on
seconds-sized fits (TASKEXTRAP_TUTORIAL=tiny): a change to the API it uses breaks this test, not
a reader's first ten minutes."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.py"


def _outputs(nb) -> str:
    """Every text a code cell printed (stream outputs), in order."""
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )


@pytest.mark.slow  # the whole tutorial as a notebook: half a minute
def test_the_tutorial_runs_as_a_notebook_and_draws_its_figure(tmp_path, monkeypatch):
    nb = jupytext.read(TUTORIAL)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    monkeypatch.setenv("TASKEXTRAP_TUTORIAL", "tiny")  # the kernel inherits this environment
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except CellExecutionError as exc:  # the failing cell's traceback, not nbclient's
        pytest.fail(f"a tutorial cell failed:\n{exc}")
    text = _outputs(nb)
    for expected in ("library: 24 tasks", "candidates per target", "MSE over 6 targets: RTE"):
        assert expected in text, text
    _check_printed_numbers(text)
    images = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert len(images) == 1 and (tmp_path / "tutorial-prediction.png").stat().st_size > 10_000


def test_the_tutorial_is_a_notebook_whose_sections_follow_the_issue():
    """Define a family, fit, decompose, predict with an interval, plot, compare with a baseline."""
    nb = jupytext.read(TUTORIAL)
    headings = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown"]
    assert headings[:6] == [
        "# RTE on your own task family in ten minutes",
        "## 1. A family of tasks",
        "## 2. Fit RTE on the library",
        "## 3. Explain a target from its context",
        "## 4. Predict, with an interval",
        "## 5. Compare with a baseline",
    ]


def _check_printed_numbers(text: str) -> None:
    """The numbers the tutorial prints, against what this test computes on its own: the target's
    omega and the context-only baseline's MSE (the same draws, recomputed here), and the paired
    difference's consistency with the two means it prints."""
    import re

    import numpy as np

    from taskextrap.baselines.context import ctx_polyfit
    from taskextrap.tasks import ParametricFamily, TaskSet, get_protocol
    from taskextrap.tasks.observe import noise_scale

    damped = ParametricFamily(
        name="damped",
        fn=lambda x, A, gamma, omega: A * np.exp(-gamma * x) * np.cos(omega * x),
        domain=(0.0, 20.0),
        fixed={"A": (0.5, 1.5), "gamma": (0.05, 0.1)},
        shift="omega",
        regions={"F1_1": (0.5, 0.8), "F1_2": (0.8, 1.1), "F2": (1.1, 1.4)},
    )
    targets = TaskSet.sample(damped, {"F2": 6}, np.random.default_rng(1))
    obs = get_protocol("paper").draw(targets, 1, np.random.default_rng(2), noise_scale(damped))
    poly = float(((ctx_polyfit(obs.ctx_x, obs.ctx_y, obs.qry_x) - obs.qry_y) ** 2).mean())
    omega = float(re.search(r"the target's is ([0-9.]+)", text).group(1))
    assert omega == round(float(targets.params[0, damped.param_names.index("omega")]), 3)
    m = re.search(
        r"RTE ([0-9.]+), ctx-polyfit ([0-9.]+); paired difference ([-+0-9.]+) \[([-0-9.]+), ([-0-9.]+)\]", text
    )
    rte_mse, poly_mse, diff, lo, hi = map(float, m.groups())
    assert poly_mse == round(poly, 4)
    assert abs(diff - (rte_mse - poly_mse)) <= 1e-4 and lo <= diff <= hi
