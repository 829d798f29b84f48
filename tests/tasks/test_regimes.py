"""tasks.regimes: each regime is one registered object that the protocols, saving, the method
table, the experiment registry, the interval scales and --calibrate read."""

import json
from importlib import resources

import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.regimes import REGIMES, Regime, get_protocol, get_regime, register_regime


def test_every_regime_names_its_protocols_estimators_and_gamma():
    assert list(REGIMES) == ["parameter", "length", "composition", "composition-depth3", "observed"]
    for regime in REGIMES.values():
        assert {"paper", "strict"} <= set(regime.protocols), regime.name
        assert all(m.startswith("taskextrap.estimators.") for m in regime.estimators), regime.name
        assert regime.embedding in ("gradient", "adapted"), regime.name
    assert get_protocol("strict", "composition") is get_regime("composition").protocols["strict"]
    assert get_protocol("paper", "length").n_context == 8
    assert get_protocol("strict", "composition-depth3").n_context == 25


def test_the_readers_take_the_regimes_from_the_registry():
    from taskextrap.baselines.table import REGIMES as TABLE_REGIMES
    from taskextrap.estimators.saving import estimator_modules
    from taskextrap.experiments.runner import calibrated

    assert set(TABLE_REGIMES) == set(REGIMES)
    assert calibrated() == ("parameter", "length", "composition", "composition-depth3")
    # every module that holds a saveable estimator is known to saving (before: 4 of these 6)
    assert set(estimator_modules()) == {
        f"taskextrap.estimators.{m}"
        for m in ("parameter", "multistep", "length", "composition", "composition_em", "composition_depth3")
    }


def test_every_dev_chosen_interval_scale_belongs_to_a_regime():
    scales = json.loads(resources.files("taskextrap.search").joinpath("interval_scales.json").read_text())["scales"]
    keys = {k for r in REGIMES.values() for k in r.scale_keys}
    regime_keys = {key.split("/")[0] for key in scales}
    assert {k for k in regime_keys if ":" not in k} <= keys
    classics = [k.split(":") for k in regime_keys if ":" in k]
    from taskextrap.baselines.table import has_own_interval

    # a classic's own key, regime:method (search.calibration.method_key): a regime (or its
    # experiment) and a method of the table with its own interval
    assert classics and all((regime in keys or regime in REGIMES) and has_own_interval(m) for regime, m in classics)
    from taskextrap.search.calibration import interval_scale

    with pytest.raises(TaskextrapError, match="no regime has the interval-scale key 'lenght'"):
        interval_scale("lenght", get_protocol("paper"))


def test_unknown_or_repeated_regimes_are_one_line_errors():
    with pytest.raises(TaskextrapError, match=r"unknown regime 'lenght'.*did you mean 'length'"):
        get_regime("lenght")
    with pytest.raises(TaskextrapError, match="unknown regime"):
        get_protocol("paper", "nosuch")
    with pytest.raises(TaskextrapError, match="registered already"):
        register_regime(Regime("length", {}, "LadderSet", (), "adapted"))
    from taskextrap.experiments.registry import register

    with pytest.raises(TaskextrapError, match="unknown regime 'nosuch'"):
        register("a-new-experiment", "x", {}, regime="nosuch")
