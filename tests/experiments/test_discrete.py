"""experiments.discrete: the set-up length and composition share keeps their unit names and keys."""

from pathlib import Path

import pytest

from taskextrap.baselines.table import is_dev_row, method_rows
from taskextrap.experiments import composition, discrete, length
from taskextrap.experiments.catalogue import get_experiment
from taskextrap.experiments.registry import RunOptions


def _unit_of(monkeypatch, module, **options):
    """(name, config, plot file) of seed 0's unit in ``module._run``'s plan."""
    name = module.__name__.rsplit(".", 1)[1]
    settings = get_experiment(name).check(RunOptions(profile="tiny", **options))
    plan = module._run(name, module.main_methods(), settings, Path("plots"))
    unit = plan.units[0]
    return unit.name, unit.config, unit.plot_file


@pytest.mark.parametrize("split, suffix", [("test", ""), ("dev", "-dev")])
def test_length_units_keep_their_names_and_keys(monkeypatch, split, suffix):
    name, config, plot_file = _unit_of(monkeypatch, length, protocol="strict", split=split)
    assert name == f"length-polynomial-strict{suffix}-seed0" and plot_file == "polynomial-strict-predictions.png"
    assert list(config) == [
        "experiment",
        "ladder",
        "basis",
        "basis_code",
        "domain",
        "coef_range",
        "levels",
        "test_level",
        "protocol",
        "profile",
        "embedding",
        "test_seed",
        "methods",
        "seed",
        "estimator",
    ]
    assert config["methods"] == length.all_methods(split == "dev")  # a method added to the table is a new key
    # a dev split also scores the classics' variants (each regime chooses its own), a test split never
    variants = [m for m in config["methods"] if is_dev_row(m)]
    assert (variants == list(method_rows("length", dev=True))) == (split == "dev") and bool(variants) == (
        split == "dev"
    )
    assert config["embedding"] == discrete.DEFAULT_EMBEDDING and config["seed"] == 0
    assert config["test_level"] == (8 if split == "dev" else 9)


@pytest.mark.parametrize("split, suffix", [("test", ""), ("dev", "-dev")])
def test_composition_units_keep_their_names_and_keys(monkeypatch, split, suffix):
    name, config, _ = _unit_of(monkeypatch, composition, protocol="paper", split=split, embedding="gradient")
    assert name == f"composition-paper{suffix}-seed0"
    assert list(config) == [
        "experiment",
        "split",
        "protocol",
        "profile",
        "embedding",
        "test_seed",
        "methods",
        "seed",
        "estimator",
    ]
    assert config["embedding"] == "gradient" and "CompositionRTE" in config["estimator"]
    assert config["methods"] == composition.all_methods(split == "dev")
    assert any(is_dev_row(m) for m in config["methods"]) == (split == "dev")


def test_classic_variants_names_the_variant_behind_each_learned_classic(monkeypatch):
    from taskextrap.baselines import classics

    got = classics.classic_variants("parameter")
    assert got == {**classics.CHOSEN, "ctx-gp": classics.CTX_GP_VARIANT} and set(got) == {"meta-gp", "cnp", "ctx-gp"}
    assert all(v.startswith(f"{m}-") for m, v in got.items())  # a variant of that method, not another's
    assert got["ctx-gp"] == "ctx-gp-lbfgs-r{}".format(classics.CTX_GP_CHOSEN["restarts"])  # its fit, by name
    got["cnp"] = "changed"
    assert classics.CHOSEN["cnp"] != "changed"  # a run's config holds a copy, not the live choice
    # a run made after the choice changes records the new variant, so a scale is never carried over
    monkeypatch.setitem(classics.CHOSEN, "meta-gp", "meta-gp-rbf")
    assert classics.classic_variants("parameter")["meta-gp"] == "meta-gp-rbf"
    assert classics.scale_name("meta-gp") == "meta-gp-rbf" and classics.scale_name("rte") == "rte"


def test_a_regime_with_its_own_dev_choice_records_and_scales_its_own_variant(monkeypatch):
    from taskextrap.baselines import classics

    monkeypatch.setattr(classics, "CHOSEN_BY_REGIME", {"length": {"meta-gp": "meta-gp-matern52"}})
    gp = {"ctx-gp": classics.CTX_GP_VARIANT}
    assert classics.classic_variants("length") == {**classics.CHOSEN, "meta-gp": "meta-gp-matern52", **gp}
    assert classics.classic_variants("composition-depth3") == {**classics.CHOSEN, **gp}  # none of its own
    assert classics.scale_name("meta-gp", "length") == "meta-gp-matern52"
    assert classics.scale_name("cnp", "length") == classics.CHOSEN["cnp"]
