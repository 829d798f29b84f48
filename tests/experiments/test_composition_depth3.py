"""composition-depth3: schema-valid rows for every method, resume from cache, dev split, no leak."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import composition_depth3 as D3
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.experiments.settings import UnitSpec
from taskextrap.report.schema import validate_results
from taskextrap.tasks.builtin import POLY_SIN_TANH_RESCALED
from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT, dev_recipe_split, recipe_name
from taskextrap.tasks.regimes import get_protocol

CLASSICS = ("ctx-gp", "meta-gp", "cnp")


# slow: a whole tiny depth-3 run with the dev-best classics (meta-gp's L-BFGS to convergence)
@pytest.mark.slow
def test_run_writes_every_method_and_resumes_from_its_cache(tmp_path, monkeypatch):
    opts = RunOptions(profile="tiny", out=tmp_path, progress=False, embedding="gradient")
    res = run_experiment("composition-depth3", opts)
    validate_results(res)
    main = {r["method"]: r for r in res["rows"] if r["group"] == D3.GROUP and r["metric"] == "mse"}
    assert list(main) == list(D3.main_methods())
    cover = [r for r in res["rows"] if r["metric"] == "coverage"]
    assert [(r["group"], r["method"]) for r in cover] == [
        (D3.GROUP, m) for m in (*(f"{c}{s}" for c in ("rte", "rte-gp", *CLASSICS) for s in ("", "-uncalibrated")),)
    ]  # every interval calibrated alike on dev: each calibrated and raw (rte-gp's inside its fit)
    assert all(0 <= r["value"] <= 1 for r in cover)
    width = [r for r in res["rows"] if r["metric"] == "interval-width"]
    assert [(r["group"], r["method"]) for r in width] == [
        (D3.GROUP, m) for m in ("rte", "rte-gp", "ctx-gp", "meta-gp", "cnp")
    ]
    assert [c["dev_targets"] for c in res["config"]["rte-gp_choice"]] == [6]  # rte-gp's choice, on its dev split
    assert all(r["value"] > 0 for r in width)
    assert cover[0]["paper_value"] is None  # the paper's 12.54 is an MSE
    assert main["rte"]["paper_value"] == pytest.approx(12.5424) and main["sparse-inductive"]["paper_value"] == 16.0375
    assert main["oracle"]["paper_value"] is None
    assert sum(r["n"] for r in res["rows"] if r["method"] == "rte" and " o " in r["group"]) == main["rte"]["n"] == 6
    assert [r["method"] for r in res["rows"] if r["group"] == "chain-retrieved"] == [
        "rte",
        "no-refinement",
        "top-k-candidates",
        "top-k-outer",
        "top-k-middle",
        "top-k-inner",
    ]
    assert res["config"]["test_seed"] == D3.DEPTH3_TEST_SEED and len(res["config"]["recipes"]["test"]) == 6
    ratio = res["config"]["rte_over_sparse_inductive"]
    assert ratio["mean"] == pytest.approx(main["rte"]["value"] / main["sparse-inductive"]["value"])
    assert (tmp_path / "composition-depth3-paper-tiny" / "plots" / "composition-depth3-paper-predictions.png").exists()
    monkeypatch.setattr(D3, "run_unit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refit")))
    again = run_experiment("composition-depth3", opts)
    assert [(r["group"], r["method"], r["value"]) for r in again["rows"]] == [
        (r["group"], r["method"], r["value"]) for r in res["rows"]
    ]


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_dev_unit_fits_on_dev_training_recipes_only_and_scores_the_dev_recipes():
    dev = dev_recipe_split(PAPER_RECIPE_SPLIT)
    with audit.spy() as seen:
        protocol = get_protocol("strict", "composition-depth3")
        spec = UnitSpec(POLY_SIN_TANH_RESCALED, protocol, D3.PROFILES["tiny"], 0, "gradient", 5, split=dev, dev=True)
        unit = D3.run_unit(spec)
    assert "rte-gp" not in D3.main_methods(dev=True) and "rte-gp" in D3.main_methods()  # a dev run has none
    # a dev run scores the classics' variants (the regime's own choice of them), a test run none
    assert "meta-gp-matern52" in D3.main_methods(dev=True) and "meta-gp-matern52" not in D3.main_methods()
    for m in D3.main_methods(dev=True):
        assert unit.errors[m].shape == (6,) and np.all(np.isfinite(unit.errors[m])), m
    audit.check(
        seen, dev.training_labels(), required={"scaler", "probe", "pca", "sparse-inductive", "psi", "decomposer"}
    )
    labels = {str(lab) for rec in seen for lab in rec.labels}
    real_test = {recipe_name(r) for r in PAPER_RECIPE_SPLIT.test}
    assert not labels & (real_test | dev.test_labels())
    targets, _ = D3.make_targets(D3.make_library(4), get_protocol("strict", "composition-depth3"), 30, 1, dev, 5)
    assert set(targets.region) <= dev.test_labels()


def test_bad_options_are_one_line_errors(tmp_path):
    for opts, match in (
        (dict(family="quadratic"), "unknown primitive set 'quadratic'"),
        (dict(protocol="lenient"), "unknown protocol"),
        (dict(profile="huge"), "unknown profile"),
    ):
        with pytest.raises(TaskextrapError, match=match) as e:
            run_experiment("composition-depth3", RunOptions(out=tmp_path, progress=False, **opts))
        assert "\n" not in str(e.value)
