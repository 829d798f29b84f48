"""The composition experiments: rows, per-pair breakdown, shared units with the ablations."""

from dataclasses import replace

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.baselines.table import is_method
from taskextrap.experiments import composition
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.experiments.settings import UnitSpec
from taskextrap.report.schema import validate_results
from taskextrap.tasks.builtin import POLY_SIN_TANH
from taskextrap.tasks.regimes import get_protocol
from taskextrap.tasks.primitives import PAPER_SPLIT

CLASSICS = ("ctx-gp", "meta-gp", "cnp")


def test_targets_are_held_out_pairs_of_library_members():
    prims = composition.make_library(8)
    tg, obs = composition.make_targets(prims, get_protocol("paper", "composition"), 30, 2)
    assert {tuple(p) for p in tg.pair} <= set(PAPER_SPLIT.test)
    assert tg.outer.max() < len(prims) and obs.ctx_x.shape == (60, 25)


@pytest.mark.slow  # end to end, run by .ci/run's slow set (make test stays under 5 minutes)
def test_run_unit_never_fits_on_held_out_pairs():
    prims = composition.make_library(composition.PROFILES["tiny"].n_library)
    names = prims.family_names
    with audit.spy() as seen:
        spec = UnitSpec(
            POLY_SIN_TANH, get_protocol("strict", "composition"), composition.PROFILES["tiny"], 0, "gradient"
        )
        unit = composition.run_unit(replace(spec, split=PAPER_SPLIT))
    for m in composition.all_methods():
        assert unit.errors[m].shape == (6,) and np.all(np.isfinite(unit.errors[m])), m
    table = [m for m in composition.all_methods() if is_method(m)]  # each table row's price
    assert table and all(unit.timing[f"{m}_predict_s"] >= 0 for m in table), unit.timing
    audit.check(
        seen,
        PAPER_SPLIT.training_labels(),
        required={"scaler", "probe", "pca", "sparse-inductive", "psi", "decomposer"},
    )
    for component, params in seen:
        if params.shape[1] == 2:  # compositions (the PCA's records are single primitives)
            assert not {(names[int(o)], names[int(i)]) for o, i in params} & set(PAPER_SPLIT.test), component


# slow: a whole tiny composition run and its ablations (with rte-gp's dev choice in the unit,
# make test was 300 s of its 5 minutes on a clean clone): make test-slow, which CI also runs
@pytest.mark.slow
def test_composition_and_ablations_share_units(tmp_path, monkeypatch):
    opts = RunOptions(profile="tiny", out=tmp_path, progress=False)
    res = run_experiment("composition", opts)
    validate_results(res)
    for kind in ("predictions", "embedding"):  # experiments.discrete.Figures
        assert (tmp_path / "composition-paper-tiny" / "plots" / f"composition-paper-{kind}.png").exists()
    main = [r["method"] for r in res["rows"] if r["group"] == "unseen-pairs" and r["metric"] == "mse"]
    assert main == list(composition.main_methods()) and "strategy-b" in main  # the paper's plain Strategy B, named
    cover = [r for r in res["rows"] if r["metric"] == "coverage"]
    assert [(r["group"], r["method"]) for r in cover] == [
        ("unseen-pairs", m)
        for m in (*(f"{c}{s}" for c in ("rte", "rte-gp", *CLASSICS) for s in ("", "-uncalibrated")),)
    ]  # every interval calibrated alike on dev: each calibrated and raw (rte-gp's inside its fit)
    assert all(0 <= r["value"] <= 1 for r in cover)
    width = [r for r in res["rows"] if r["metric"] == "interval-width"]
    assert [(r["group"], r["method"]) for r in width] == [
        ("unseen-pairs", m) for m in ("rte", "rte-gp", "ctx-gp", "meta-gp", "cnp")
    ]
    assert all(r["value"] > 0 for r in width)
    assert [c["dev_targets"] for c in res["config"]["rte-gp_choice"]] == [6]  # rte-gp's choice, on its dev split
    (ent,) = [r for r in res["rows"] if r["metric"] == "entropy"]  # rte's posterior over decompositions
    assert (ent["group"], ent["method"]) == ("unseen-pairs", "rte") and ent["value"] >= 0
    assert {r["group"] for r in res["rows"]} >= {"sin o poly", "tanh o sin", "poly o tanh", "pair-retrieved"}
    per_pair_n = sum(r["n"] for r in res["rows"] if r["method"] == "rte" and " o " in r["group"])
    assert per_pair_n == 6
    monkeypatch.setattr(composition, "run_unit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refit")))
    abl = run_experiment("composition-ablations", opts)
    assert [r["method"] for r in abl["rows"] if r["group"] == "unseen-pairs"] == list(composition.ABLATION_METHODS)
    with pytest.raises(TaskextrapError, match="unknown primitive set 'quadratic'; choose from"):
        run_experiment("composition", RunOptions(profile="tiny", out=tmp_path, family="quadratic", progress=False))


@pytest.mark.slow
def test_a_runs_seeds_fit_ctx_gp_once_on_their_shared_targets(tmp_path, monkeypatch):
    """ctx-gp does not depend on the training seed: two seeds' units (one process, one after the
    other) fit it once, and both report the same numbers."""
    from dataclasses import replace

    from taskextrap.baselines import classics

    fits = []
    real = classics.ctx_gp
    monkeypatch.setattr(classics, "ctx_gp", lambda *a, **k: fits.append(1) or real(*a, **k))
    monkeypatch.setattr(classics, "_ctx_gp_fits", type(classics._ctx_gp_fits)())
    monkeypatch.setitem(composition.PROFILES, "tiny", replace(composition.PROFILES["tiny"], seeds=(0, 1)))
    res = run_experiment("composition", RunOptions(profile="tiny", out=tmp_path, progress=False))
    assert res["seeds"] == [0, 1] and len(fits) == 1
    (row,) = [r for r in res["rows"] if (r["group"], r["method"], r["metric"]) == ("unseen-pairs", "ctx-gp", "mse")]
    assert row["seed_sd"] == 0
