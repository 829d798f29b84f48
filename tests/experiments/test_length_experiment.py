"""The length experiments: rows, leak audit over every fit, shared unit cache, user ladders."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import length
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.report.schema import validate_results
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER
from taskextrap.tasks.regimes import get_protocol
from taskextrap.experiments.settings import UnitSpec

CLASSICS = ("ctx-gp", "meta-gp", "cnp")


@pytest.mark.slow  # end to end, run by .ci/run's slow set (make test stays under 5 minutes)
def test_run_unit_scores_every_method_and_never_fits_on_level9(monkeypatch):
    from taskextrap.posterior.estimator import RTEGP

    rows, handed = [], []  # the rte row at the queries, and what rte-gp is handed as RTE's prediction there
    predict_all, predict = length.predict_all, RTEGP.predict
    monkeypatch.setattr(length, "predict_all", lambda *a: (out := predict_all(*a), rows.append(out[0]["rte"]))[0])
    monkeypatch.setattr(
        RTEGP, "predict", lambda self, *a, **k: (handed.append(k.get("at_query")), predict(self, *a, **k))[1]
    )
    with audit.spy() as seen:
        unit = length.run_unit(
            UnitSpec(POLYNOMIAL_LADDER, get_protocol("paper", "length"), length.PROFILES["tiny"], 0, "gradient")
        )
    assert set(length.all_methods()) <= set(unit.errors)
    for m in length.all_methods():
        assert unit.errors[m].shape == (6,) and np.all(np.isfinite(unit.errors[m])), m
    audit.check(
        seen,
        POLYNOMIAL_LADDER.training_labels(),
        required={"scaler", "probe", "pca", "sparse-inductive", "psi", "decomposer"},
    )
    # no fit sees a level-9 coefficient (rte-gp's dev fit is on the ladder below: 9 coefficients)
    assert all(c.shape[1] <= 9 or np.all(c[:, 9] == 0) for _, c in seen)
    choice = unit.extras["rte-gp"]  # on its own dev split: what it chose, its MSE there beside rte's
    assert choice["dev_targets"] == 6 and unit.errors["rte-gp_coverage"].shape == (6,)
    assert choice["out_of_fold_mse"] > 0 and choice["base_mse"] > 0
    # the test draws' rte-gp corrects the rte row itself (its queries not predicted again)
    assert len(rows) == 1 and handed[-1] is rows[0]


def test_targets_are_one_step_beyond_the_library_and_fixed():
    lib = length.make_library(POLYNOMIAL_LADDER, 5)
    tg, obs = length.make_targets(lib, get_protocol("paper", "length"), 4, 3)
    assert np.all(tg.level == 9) and np.all(lib.level[tg.parent] == 8)
    _tg2, obs2 = length.make_targets(lib, get_protocol("paper", "length"), 4, 3)
    np.testing.assert_array_equal(obs.ctx_y, obs2.ctx_y)


@pytest.mark.slow  # length and its ablations, end to end: end to end, run by make test-slow
def test_length_and_ablations_share_units(tmp_path, monkeypatch):
    opts = RunOptions(profile="tiny", out=tmp_path, progress=False)
    res = run_experiment("length", opts)
    validate_results(res)
    methods = [r["method"] for r in res["rows"] if r["group"] == "degree9" and r["metric"] == "mse"]
    assert methods == list(length.main_methods()) and "strategy-b" in methods  # the paper's plain Strategy B, named
    cover = [r for r in res["rows"] if r["metric"] == "coverage"]
    assert [(r["group"], r["method"]) for r in cover] == [
        ("degree9", m) for m in (*(f"{c}{s}" for c in ("rte", "rte-gp", *CLASSICS) for s in ("", "-uncalibrated")),)
    ]  # every interval calibrated alike on dev: each calibrated and raw (rte-gp's inside its fit)
    assert all(0 <= r["value"] <= 1 for r in cover)
    width = [r for r in res["rows"] if r["metric"] == "interval-width"]
    assert [(r["group"], r["method"]) for r in width] == [
        ("degree9", m) for m in ("rte", "rte-gp", "ctx-gp", "meta-gp", "cnp")
    ]
    assert [c["dev_targets"] for c in res["config"]["rte-gp_choice"]] == [6]  # rte-gp's choice, on its dev split
    assert all(r["value"] > 0 for r in width)
    assert not any(c["metric"] in ("coverage", "entropy") for c in res["comparisons"])
    (ent,) = [r for r in res["rows"] if r["metric"] == "entropy"]  # rte's posterior over decompositions
    assert (ent["group"], ent["method"], ent["paper_value"]) == ("degree9", "rte", None) and ent["value"] >= 0
    rte = next(r for r in res["rows"] if r["group"] == "degree9" and r["method"] == "rte")
    plain = next(r for r in res["rows"] if r["group"] == "degree9" and r["method"] == "strategy-b")
    # the paper's RTE is its Strategy B: its value stands beside our run of that, not beside rte
    assert rte["paper_value"] is None and plain["paper_value"] == 0.3712 and rte["n"] == 6
    assert (tmp_path / "length-paper-tiny" / "plots" / "polynomial-paper-predictions.png").exists()

    def boom(*a, **k):
        raise AssertionError("the ablations must reuse the length unit")

    monkeypatch.setattr(length, "run_unit", boom)
    abl = run_experiment("length-ablations", opts)
    assert [r["method"] for r in abl["rows"] if r["group"] == "degree9"] == list(length.ABLATION_METHODS)
    same = {r["method"]: r["value"] for r in abl["rows"] if r["group"] == "degree9"}
    assert same["rte"] == rte["value"]


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_user_ladder_from_module(tmp_path, monkeypatch):
    mod = tmp_path / "myladder.py"
    mod.write_text(
        "from taskextrap.tasks.ladder import Ladder\n"
        "import numpy as np\n"
        "def basis(x, p):\n    return np.cos(p * np.arccos(np.clip(x, -1, 1)))\n"
        "CHEB = Ladder('chebyshev', basis=basis, domain=(-1.0, 1.0), train_levels=(1, 2, 3, 4),"
        " test_level=5)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ladder = length.get_ladder("myladder:CHEB")
    assert ladder.name == "chebyshev"
    res = run_experiment(
        "length", RunOptions(profile="tiny", out=tmp_path / "runs", family="myladder:CHEB", progress=False, plots=False)
    )
    assert res["config"]["ladder"] == "chebyshev"
    # the user's ladder has its own group, and the paper's Table 2 values never stand beside it
    groups = {r["group"] for r in res["rows"]}
    assert "chebyshev-level5" in groups and "degree9" not in groups
    assert all(r["paper_value"] is None and r["paper_ci95"] is None for r in res["rows"])
    with pytest.raises(TaskextrapError, match="unknown ladder"):
        length.get_ladder("cubic")
    with pytest.raises(TaskextrapError, match="cannot load"):
        length.get_ladder("nomodule_xyz:L")


def test_a_runs_ladder_is_the_built_in_one_or_its_dev_ladder():
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.length import get_ladder, run_ladder
    from taskextrap.experiments.options import RunOptions
    from taskextrap.tasks.dev import dev_ladder

    check = get_experiment("length").check
    assert run_ladder(check(RunOptions(profile="tiny"))) == get_ladder(None)
    assert run_ladder(check(RunOptions(profile="tiny", split="dev"))) == dev_ladder(get_ladder(None))
    assert run_ladder(check(RunOptions(profile="tiny", split="dev"))) != get_ladder(None)
