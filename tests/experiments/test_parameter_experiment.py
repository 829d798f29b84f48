"""The parameter and projectile experiments at the 'tiny' profile."""

import json

import numpy as np

import pytest

from taskextrap.baselines.table import has_own_interval, method_rows
from taskextrap.errors import TaskextrapError
from taskextrap.experiments.executors import run_units
from taskextrap.experiments.parameter import (
    INTERVAL_METHODS,
    SELF_CALIBRATED,
    families_for,
    family_units,
    main_methods,
)
from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES
from taskextrap.profiles import get_profile
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.catalogue import all_experiments, get_experiment
from taskextrap.experiments.runner import run_experiment
from taskextrap.baselines.gp import GP_KERNELS
from taskextrap.posterior.context import DOFS
from taskextrap.report.schema import validate_results
from taskextrap.tasks import PARAMETER_FAMILIES
from taskextrap.search.calibration import interval_keys

OWN_INTERVALS = tuple(filter(has_own_interval, method_rows("parameter")))  # the table's own intervals


def test_registry_lists_parameter_and_projectile():
    names = all_experiments()
    assert "parameter" in names and "projectile" in names
    with pytest.raises(TaskextrapError, match="unknown experiment"):
        get_experiment("nosuch")


def test_reproduce_all_skips_experiments_registered_out_of_it(monkeypatch):
    from taskextrap.experiments import registry

    monkeypatch.setattr(registry, "EXPERIMENTS", dict(registry.EXPERIMENTS))  # the test's own copy
    registry.register("held-back", "an experiment kept out of 'all'", {"quick": None}, in_all=False)(lambda *a: None)
    assert "held-back" in all_experiments() and "held-back" not in all_experiments(in_all_only=True)
    assert {"parity", "codeio"} <= set(all_experiments(in_all_only=True))  # both default models ship


def test_profiles():
    tiny = get_profile(PARAMETER_PROFILES, "tiny")
    assert tiny.seeds == (0,)
    assert tiny.with_seeds(3).seeds == (0, 1, 2)
    assert tiny.with_seeds(None) is tiny
    for bad in (0, -1, 1001, 2.0, True, 10**19):
        with pytest.raises(TaskextrapError, match="--seeds must be"):
            tiny.with_seeds(bad)
    with pytest.raises(TaskextrapError, match="unknown profile"):
        get_profile(PARAMETER_PROFILES, "huge")
    assert {"quick", "paper", "tiny"} <= set(PARAMETER_PROFILES)
    assert PARAMETER_PROFILES["paper"].n_library == 100 and len(PARAMETER_PROFILES["paper"].seeds) == 3


def test_families_for():
    assert [f.name for f in families_for(None)] == list(PARAMETER_FAMILIES)
    assert families_for(PARAMETER_FAMILIES["exp"]) == [PARAMETER_FAMILIES["exp"]]


def test_unit_errors_and_checkpoint_resume(tmp_path):
    fam = PARAMETER_FAMILIES["sin_trend"]
    prof = PARAMETER_PROFILES["tiny"]
    from taskextrap.experiments.catalogue import get_experiment

    settings = get_experiment("parameter").check(RunOptions(profile="tiny", protocol="strict", test_seed=1))
    (unit,) = family_units(fam, settings, None)
    first = run_units([unit], tmp_path, progress=False)[(unit.name, unit.key)]
    errors = first.errors
    intervals = {
        k for m in (*INTERVAL_METHODS, *SELF_CALIBRATED, *OWN_INTERVALS) for k in interval_keys(f"interval:{m}")
    }
    fractions = {k for k in intervals if not k.endswith("_width")} | {
        f"anchor-retrieved:{m}" for m in ("rte", "strategy-a")
    }
    entropies = {"entropy:rte", "entropy:strategy-a"}
    assert set(errors) == set(main_methods()) | {"far-anchors"} | intervals | fractions | entropies
    for m, e in errors.items():
        assert e.shape == (prof.n_targets,) and np.all(np.isfinite(e)) and np.all(e >= 0), m
    for m in fractions:
        assert np.all(errors[m] <= 1.0), m
    # Strategy A averages its anchors equally: the entropy of its posterior is log(anchors)
    np.testing.assert_allclose(errors["entropy:strategy-a"], np.log(2))
    assert "resumed" not in first.extras
    (path,) = tmp_path.glob("parameter-sin_trend-strict-seed0-*.json")
    saved = json.loads(path.read_text())
    assert set(saved) >= {"fingerprint", "errors", "timing"}
    mtime = path.stat().st_mtime_ns
    again = run_units([unit], tmp_path, progress=False)[(unit.name, unit.key)]
    assert again.extras.get("resumed") is True
    assert path.stat().st_mtime_ns == mtime
    for m in main_methods():
        np.testing.assert_array_equal(again.errors[m], errors[m])


def test_projectile_tiny_writes_two_rows(tmp_path):
    opts = RunOptions(profile="tiny", out=tmp_path, plots=False, progress=False)
    results = run_experiment("projectile", opts)
    path = tmp_path / "projectile-paper-tiny" / "results.json"
    on_disk = json.loads(path.read_text())
    validate_results(on_disk)
    assert len(on_disk["rows"]) == 2 == len(results["rows"])
    assert {r["method"] for r in on_disk["rows"]} == {"inductive-oracle", "transductive-oracle"}
    for r in on_disk["rows"]:
        assert r["metric"] == "mse" and r["value"] >= 0 and np.isfinite(r["value"])
    assert (tmp_path / "projectile-paper-tiny" / "results.md").exists()
    assert (tmp_path / "projectile-paper-tiny" / "config.yaml").exists()


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_parameter_ablations_reuse_the_quadratic_units(tmp_path, monkeypatch):
    from taskextrap.experiments import parameter
    from taskextrap.report.schema import validate_results

    opts = RunOptions(profile="tiny", out=tmp_path, family="quadratic", plots=False, progress=False)
    main = run_experiment("parameter", opts)
    (choice,) = main["config"]["rte-gp_choice"]["quadratic"]  # rte-gp's dev choice in the one unit
    assert choice["kernel"] in GP_KERNELS and choice["dof"] in DOFS and 0.0 <= choice["share"] <= 1.0
    monkeypatch.setattr(parameter, "run_unit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refit")))
    abl = run_experiment("parameter-ablations", RunOptions(profile="tiny", out=tmp_path, plots=False, progress=False))
    validate_results(abl)
    assert [r["method"] for r in abl["rows"] if r["metric"] == "mse"] == list(parameter.ABLATION_METHODS)
    by = {r["method"]: r for r in abl["rows"] if r["metric"] == "mse"}
    assert by["rte"]["value"] == next(r["value"] for r in main["rows"] if r["method"] == "rte" and r["metric"] == "mse")
    assert by["strategy-a"]["paper_value"] == 1096.9
    assert by["far-anchors"]["paper_value"] == 2325.5


def test_far_anchors_come_from_the_far_region(fitted_rte, quad_library, quad_targets):
    from taskextrap.experiments.parameter import far_anchors

    _, obs = quad_targets
    a = far_anchors(fitted_rte, quad_library, obs.ctx_x, obs.ctx_y)
    assert a.shape == (len(obs), fitted_rte.anchors)
    assert set(quad_library.region[a.ravel()]) == {"F1_1"}


def test_every_experiment_registers_its_profiles_and_options():
    from taskextrap.experiments.registry import EXPERIMENTS, OPTION_FLAGS, RunOptions
    from taskextrap.experiments.catalogue import all_experiments

    for name in all_experiments():
        e = EXPERIMENTS[name]
        assert {"quick", "paper", "tiny"} <= set(e.profiles), name
        assert e.options <= set(OPTION_FLAGS), name
        e.check(RunOptions(profile="tiny"))  # the defaults are taken by every experiment
    assert RunOptions().given() == set()
    assert RunOptions(anchors=3, device="cuda:0", extra={"model": "m"}).given() == {"anchors", "device", "extra"}


def test_an_unknown_option_name_cannot_be_registered():
    from taskextrap.experiments import registry

    with pytest.raises(ValueError, match="colour"):
        registry.register("x", "x", {"quick": None}, options=("colour",))


@pytest.mark.parametrize("protocol", ["paper", "strict"])
def test_the_chosen_objective_variant_is_the_dev_files_choice(protocol):
    """CHOSEN is what the committed dev run says (benchmarks/results/parameter-<protocol>-paper-dev.json)."""
    from pathlib import Path

    from taskextrap.experiments import parameter as P

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / f"parameter-{protocol}-paper-dev.json"
    if not path.exists():
        pytest.skip(f"no committed dev run {path.name}")
    assert P.CHOSEN[protocol] == P.choose_variant(json.loads(path.read_text())["rows"])


def test_the_choice_is_the_lowest_geometric_mean_ratio_to_strategy_a():
    from taskextrap.experiments import parameter as P

    variants = [f"rte-{v}" for v in P.OBJECTIVE_VARIANTS]
    rows = [
        {"group": g, "method": m, "metric": "mse", "value": base}
        for g, base in (("a", 1.0), ("b", 100.0))
        for m in ["strategy-a", *variants]
    ]
    assert P.choose_variant(rows) == "strategy-a"  # all tied: Strategy A stays
    for r in rows:
        if r["method"] == variants[1]:
            r["value"] *= 0.5 if r["group"] == "a" else 1.5  # halves a small error, +50% on a large one
    assert P.variant_scores(rows)[variants[1][4:]] == pytest.approx(np.log(0.75) / 2)
    assert P.choose_variant(rows) == variants[1][4:]
    rows.append({"group": "a", "method": "rte", "metric": "coverage", "value": 0.5})  # other metrics do not count
    assert P.choose_variant(rows) == variants[1][4:]
