"""The parameter-multistep experiment (App. B.1.1) at the 'tiny' profile."""

import json
import sys
import types

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.experiments import multistep as M
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.experiments.settings import UnitSpec
from taskextrap.report.schema import validate_results
from taskextrap.tasks.builtin import MULTISTEP_FAMILIES, PARAMETER_FAMILIES, with_far_regions


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("multistep")
    opts = RunOptions(profile="tiny", family="cubic", out=out, plots=True, progress=False)
    return out, run_experiment(M.EXPERIMENT, opts)


def _rows(results):
    return {(r["group"], r["method"]): r for r in results["rows"]}


def test_every_method_is_scored_on_f3_f4_f5_with_the_papers_values_beside(tiny_run):
    out, results = tiny_run
    validate_results(json.loads((out / "parameter-multistep-paper-tiny-cubic" / "results.json").read_text()))
    rows = _rows(results)
    assert set(rows) == {(f"cubic/{r}", m) for r in ("F3", "F4", "F5") for m in M.METHODS}
    assert rows[("cubic/F4", "rte-ghost")]["paper_value"] == pytest.approx(4.83)
    assert rows[("cubic/F5", "sparse-inductive")]["paper_value"] == pytest.approx(108.63)
    assert rows[("cubic/F3", "rte-ghost")]["paper_value"] is None  # the paper has no F3 column
    assert rows[("cubic/F4", "rte")]["paper_value"] is None
    assert all(r["n"] == 6 and r["value"] >= 0 for r in results["rows"])
    assert {c["a"] for c in results["comparisons"]} == {"rte-chained"}
    assert (out / "parameter-multistep-paper-tiny-cubic" / "plots" / "cubic-paper-multistep.png").exists()
    assert results["config"]["paper_steps"] == {"F3": 2, "F4": 3, "F5": 4}


def test_methods_differ_where_they_should(tiny_run):
    rows = _rows(tiny_run[1])
    for region in ("F4", "F5"):  # more than one step: the chain is not the one-step estimator
        assert rows[(f"cubic/{region}", "rte-ghost")]["value"] != rows[(f"cubic/{region}", "rte")]["value"]
    assert rows[("cubic/F5", "sparse-inductive")]["value"] != rows[("cubic/F5", "inductive-oracle")]["value"]


def test_dev_split_scores_every_variant_inside_the_training_span(tmp_path, monkeypatch):
    seen = []
    real = M.make_targets
    monkeypatch.setattr(M, "make_targets", lambda fam, region, *a: seen.append((fam, region)) or real(fam, region, *a))
    opts = RunOptions(profile="tiny", family="quadratic", split="dev", out=tmp_path, plots=False, progress=False)
    results = run_experiment(M.EXPERIMENT, opts)
    rows = _rows(results)
    assert {g for g, _ in rows} == {"quadratic/dev-F3", "quadratic/dev-F4", "quadratic/dev-F5"}
    assert set(M.DEV_VARIANTS) <= {m for _, m in rows}
    assert all(r["paper_value"] is None for r in results["rows"])
    # the variant the paper's schedule names is rte-ghost itself
    for g in ("quadratic/dev-F4", "quadratic/dev-F5"):
        assert rows[(g, "chain-paper-linear")]["value"] == rows[(g, "rte-ghost")]["value"]
        assert rows[(g, "rte-chained")]["value"] == rows[(g, M.CHAINED["paper"])]["value"]
        assert rows[(g, "chain-fixed1-linear")]["value"] == rows[(g, "rte")]["value"]
    lo, hi = PARAMETER_FAMILIES["quadratic"].regions["F1_1"][0], PARAMETER_FAMILIES["quadratic"].regions["F1_2"][1]
    for fam, region in seen:
        assert all(lo <= a and b <= hi for a, b in fam.regions.values())  # dev tasks are training-span tasks
        assert region.startswith("dev-F")


def test_a_users_family_needs_the_far_regions(monkeypatch):
    mod = types.ModuleType("ms_user_families")
    mod.ok = with_far_regions(
        PARAMETER_FAMILIES["sin_trend"].__class__(
            name="mytrend",
            fn=PARAMETER_FAMILIES["sin_trend"].fn,
            domain=(0.0, 20.0),
            shift="s",
            fixed={"A": (0.5, 1.0)},
            regions={"F1_1": (0.1, 0.2), "F1_2": (0.2, 0.3), "F2": (0.3, 0.4)},
        )
    )
    mod.short = PARAMETER_FAMILIES["sin_trend"]
    monkeypatch.setitem(sys.modules, "ms_user_families", mod)
    fam = M.get_multistep_family("ms_user_families:ok")
    assert fam.regions["F5"] == pytest.approx((0.6, 0.7))
    with pytest.raises(
        TaskextrapError,
        match="needs regions named exactly F1_1, F1_2 \\(train_regions\\) and F2, F3, F4, F5 \\(held out\\)",
    ) as e:
        M.get_multistep_family("ms_user_families:short")
    assert "\n" not in str(e.value)
    assert M.get_multistep_family("exp") is MULTISTEP_FAMILIES["exp"]


class _StubChain:
    """What run_unit reads of a fitted chained RTE besides its predictions: the auto step size."""

    def step_size(self):
        return 0.0


def _targets_scored(monkeypatch, seed: int, test_seed: int) -> dict:
    """The draws run_unit scores in each region for training seed ``seed`` and ``test_seed``: the
    fit is a stand-in that moves numpy's and torch's global streams by the training seed (as a
    real fit does), and the predictions are recorded, not made."""
    import torch

    from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES
    from taskextrap.tasks.regimes import get_protocol

    def fit(spec):
        s = spec.seed
        np.random.seed(s)
        np.random.random(10 + s)
        torch.manual_seed(s)
        return None, {"rte": _StubChain()}, {}

    seen = {}

    def predict(models, library, obs, region, methods):
        seen[region] = obs
        return {m: np.zeros_like(obs.qry_y) for m in methods}

    monkeypatch.setattr(M, "fit_models", fit)
    monkeypatch.setattr(M, "predict_region", predict)
    M.run_unit(
        UnitSpec(
            MULTISTEP_FAMILIES["exp"], get_protocol("paper"), PARAMETER_PROFILES["tiny"], seed, "gradient", test_seed
        )
    )
    return seen


def test_targets_do_not_depend_on_the_training_seed(monkeypatch):
    """A unit's targets and draws come from the test seed alone: two training seeds score the
    same draws in every region, another test seed scores other ones."""
    a, b = _targets_scored(monkeypatch, 0, 123), _targets_scored(monkeypatch, 1, 123)
    other = _targets_scored(monkeypatch, 0, 124)
    assert set(a) == set(b) == set(other) == {"F3", "F4", "F5"}
    for region in a:
        for field in ("params", "ctx_x", "ctx_y", "qry_x", "qry_y"):
            np.testing.assert_array_equal(getattr(a[region], field), getattr(b[region], field))
            assert not np.allclose(getattr(a[region], field), getattr(other[region], field))
    lo, hi = MULTISTEP_FAMILIES["exp"].regions["F4"]
    assert np.all((a["F4"].params[:, 0] >= lo) & (a["F4"].params[:, 0] <= hi))
    assert not np.allclose(a["F4"].ctx_x, a["F5"].ctx_x)  # each region its own stream


@pytest.mark.parametrize("protocol", ["paper", "strict"])
def test_rte_chained_is_the_variant_the_committed_dev_run_chose(protocol):
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[2]
        / "benchmarks"
        / "results"
        / f"parameter-multistep-{protocol}-paper-dev.json"
    )
    dev = json.loads(path.read_text())
    assert dev["config"]["split"] == "dev" and set(dev["config"]["dev_variants"]) == set(M.DEV_VARIANTS)
    assert M.CHAINED[protocol] == M.choose_variant(dev["rows"])


def test_the_choice_is_the_lowest_geometric_mean_ratio_to_one_step():
    rows = [
        {"group": g, "method": m, "value": v}
        for g, vals in {
            "a/dev-F3": {"rte": 1.0, **{v: 1.0 for v in M.DEV_VARIANTS}},
            "b/dev-F3": {"rte": 100.0, **{v: 100.0 for v in M.DEV_VARIANTS}},
        }.items()
        for m, v in vals.items()
    ]
    assert M.choose_variant(rows) == next(iter(M.DEV_VARIANTS))  # all tied: the first listed
    for r in rows:
        if r["method"] == "chain-fixed3-linear":
            r["value"] *= 0.5 if r["group"] == "a/dev-F3" else 1.5  # halves a small error, +50% on a large one
    assert M.variant_scores(rows)["chain-fixed3-linear"] == pytest.approx(np.log(0.75) / 2)
    assert M.choose_variant(rows) == "chain-fixed3-linear"  # scale-free: the ratios count, not the raw MSE
