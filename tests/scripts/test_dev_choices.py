"""scripts/dev_choices.py: settings are swept on dev targets only, each variant on the same draws."""

import pytest


def test_parameter_sweep_scores_anchors_on_the_dev_region_only(monkeypatch, load_script):
    from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES

    mod = load_script("scripts/dev_choices.py")
    seen = []
    real_targets, real_library = mod.P.make_targets, mod.P.make_library
    monkeypatch.setattr(
        mod.P, "make_targets", lambda fam, *a, **k: seen.append(("targets", fam)) or real_targets(fam, *a, **k)
    )
    monkeypatch.setattr(
        mod.P, "make_library", lambda fam, *a, **k: seen.append(("library", fam)) or real_library(fam, *a, **k)
    )
    out = mod.parameter_unit("quadratic", "paper", PARAMETER_PROFILES["tiny"], 0, 6, 2, {}, {"anchors": (1, 2, 4)})
    assert out["default"] == {"anchors": 2}
    rows = out["settings"]["anchors"]["variants"]
    assert [r["value"] for r in rows] == [1, 2, 4]
    assert rows[1]["mse"] == pytest.approx(out["default_mse"]) and rows[1]["vs_default"]["mean"] == 0
    assert rows[0]["mse"] != rows[1]["mse"]  # the setting reaches the prediction
    assert out["settings"]["anchors"]["best"] == min(rows, key=lambda r: r["mse"])["value"]
    # fitted on the dev family's training regions, scored on its dev region; F2 never appears
    for what, fam in seen:
        assert "F2" not in fam.regions and "dev" in fam.regions and "dev" not in fam.train_regions, what
    assert {w for w, _ in seen} == {"targets", "library"}


def test_regimes_and_settings_are_checked_before_any_fit(load_script):
    mod = load_script("scripts/dev_choices.py")
    units = {"length": None, "composition": None, "parameter-quadratic": None, "parameter-exp": None}
    assert mod.expand_regimes(["parameter", "length"], units) == ["parameter-quadratic", "parameter-exp", "length"]
    with pytest.raises(SystemExit, match="unknown regime 'lenght'"):
        mod.expand_regimes(["length", "lenght"], units)
    fitted = []
    rte = type("Stub", (), {"anchors": 2, "fit": lambda self, lib: fitted.append(lib)})()
    with pytest.raises(SystemExit, match="has no setting 'k'"):
        mod._fit_and_sweep(rte, "library", None, 3, {}, {"k": (1, 2)})
    assert fitted == []  # refused before the (long) fit


@pytest.mark.parametrize("regime", ["length", "composition"])
def test_discrete_units_build_their_estimator_with_the_default_embedding(monkeypatch, load_script, regime):
    from taskextrap.experiments.discrete import DEFAULT_EMBEDDING

    mod = load_script("scripts/dev_choices.py")
    seen = []
    monkeypatch.setattr(mod, "_fit_and_sweep", lambda rte, *a: seen.append(rte) or {})
    profiles = mod.L.PROFILES if regime == "length" else mod.C.PROFILES
    getattr(mod, f"{regime}_unit")("paper", profiles["tiny"], 0, 2, 1, {}, {})
    assert seen and seen[0].embedding == DEFAULT_EMBEDDING


def test_depth3_unit_sweeps_search_settings_and_refits_for_fit_time_ones(monkeypatch, load_script):
    from taskextrap.experiments.composition_depth3 import PROFILES as DEPTH3_PROFILES
    from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT, dev_recipe_split, recipe_name

    mod = load_script("scripts/dev_choices.py")
    monkeypatch.setattr(mod, "DEFAULT_EMBEDDING", "gradient")  # the cheap Gamma: this checks the plumbing
    fitted = []
    real_fit = mod.D3.Composition3RTE.fit
    monkeypatch.setattr(
        mod.D3.Composition3RTE, "fit", lambda self, lib: fitted.append(self.identity) or real_fit(self, lib)
    )
    out = mod.depth3_unit("paper", DEPTH3_PROFILES["tiny"], 0, 4, 1, {}, {"k": (2, 3), "identity": (True, False)})
    assert fitted == [True, False]  # one refit, for the fit-time variant only
    assert out["held_out_recipes"] == [recipe_name(r) for r in dev_recipe_split(PAPER_RECIPE_SPLIT).test]
    assert set(out["settings"]) == {"k", "identity"} and out["default"]["identity"] is True
    rows = out["settings"]["identity"]["variants"]
    assert rows[0]["mse"] == pytest.approx(out["default_mse"]) and rows[0]["vs_default"]["mean"] == 0
    assert rows[1]["mse"] != rows[0]["mse"] and all("oracle_mse" in r for r in rows)


def test_joint_settings_parse_and_sweep_with_coverage(load_script):
    from taskextrap.experiments.length import PROFILES as LENGTH_PROFILES

    mod = load_script("scripts/dev_choices.py")
    assert mod._parse(["weighting+temperature=relative:1,likelihood:2.5"], many=True) == {
        "weighting+temperature": (("relative", 1), ("likelihood", 2.5))
    }
    assert mod._parse(["temperature=none", "weighting=likelihood"], many=False) == {
        "temperature": None,
        "weighting": "likelihood",
    }
    out = mod.length_unit(
        "paper",
        LENGTH_PROFILES["tiny"],
        0,
        4,
        1,
        {},
        {"weighting+temperature": (("relative", 1.0), ("likelihood", 2.0))},
    )
    assert out["default"] == {"weighting+temperature": ("relative", 1.0)}
    rows = out["settings"]["weighting+temperature"]["variants"]
    assert rows[0]["mse"] == pytest.approx(out["default_mse"]) and rows[1]["mse"] != rows[0]["mse"]
    assert all(0 <= r["coverage"] <= 1 for r in rows) and rows[0]["coverage"] == out["default_coverage"]
