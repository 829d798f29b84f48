"""reproduce --calibrate: a user family's interval scale chosen on its own dev split."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap.experiments.discrete import OWN_DEV_SOURCE
from taskextrap.search.calibration import SCALE_GRID, curve_key, own_dev_scales, recalibrated


def test_own_dev_scales_take_the_smallest_grid_scale_reaching_90_percent_over_the_groups():
    ramp = np.linspace(0.5, 1.0, len(SCALE_GRID))
    first = int(np.flatnonzero(ramp >= 0.9)[0])
    curves = {"a": {"rte": ramp.tolist()}, "b": {"rte": ramp.tolist(), "strategy-a": np.ones(len(SCALE_GRID)).tolist()}}
    assert own_dev_scales(curves) == {"rte": SCALE_GRID[first], "strategy-a": SCALE_GRID[0]}


def test_recalibrated_errors_read_the_raw_curve_at_the_chosen_scale():
    errors = {curve_key("rte", i): [np.full(3, i / 100)] for i in range(len(SCALE_GRID))}
    errors |= {"rte_coverage": [np.zeros(3)], "rte_width": [np.full(3, 2.0)]}
    out = recalibrated(errors, "rte", SCALE_GRID[30], used=SCALE_GRID[20])
    np.testing.assert_array_equal(out["rte_coverage"][0], np.full(3, 0.30))
    np.testing.assert_allclose(out["rte_width"][0], 2.0 * SCALE_GRID[30] / SCALE_GRID[20])
    with pytest.raises(TaskextrapError, match="not on the calibration grid"):
        recalibrated(errors, "rte", 1.2345, 1.0)


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_calibrate_runs_the_dev_split_then_the_test_split_with_its_scale(tmp_path, monkeypatch, capsys):
    (tmp_path / "calibfam.py").write_text(
        textwrap.dedent("""
        import numpy as np
        from taskextrap.tasks import Ladder
        fourier = Ladder("fourier", basis=lambda x, p: np.ones_like(x) if p == 0 else np.sin(p * x),
                         domain=(-np.pi, np.pi), train_levels=(1, 2, 3, 4, 5), test_level=6)
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["reproduce", "length", "--family", "calibfam:fourier", "--profile", "tiny", "--out", str(tmp_path / "runs"),
            "--quiet", "--no-plots", "--calibrate"]  # fmt: skip
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert "interval scales chosen on the dev split" in capsys.readouterr().out
    dev = json.loads((tmp_path / "runs" / "length-paper-tiny-calibfam.fourier-dev" / "results.json").read_text())
    test = json.loads(
        (tmp_path / "runs" / "length-paper-tiny-calibfam.fourier-calibrated" / "results.json").read_text()
    )
    scale = own_dev_scales(dev["config"]["coverage_by_scale"])["rte"]
    assert test["config"]["interval_scale"] == scale and test["config"]["interval_scale_source"] == OWN_DEV_SOURCE
    (curve,) = test["config"]["coverage_by_scale"].values()
    (row,) = [r for r in test["rows"] if r["method"] == "rte" and r["metric"] == "coverage"]
    assert row["value"] == pytest.approx(curve["rte"][SCALE_GRID.index(scale)])


@pytest.mark.parametrize(
    "extra,match",
    [(["--split", "dev"], "not with --from, all or --split dev"), (["--profile", "tiny"], "serves parameter")],
)
def test_calibrate_refuses_what_it_cannot_serve_in_one_line(capsys, extra, match):
    name = "projectile" if "serves" in match else "length"
    with pytest.raises(SystemExit) as e:
        main(["reproduce", name, "--calibrate", *extra])
    assert e.value.code == 2 and match in capsys.readouterr().err
