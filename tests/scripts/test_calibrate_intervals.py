"""scripts/calibrate_intervals.py: scales chosen from dev runs' coverage curves only."""

import json

import numpy as np
import pytest

from taskextrap.search.calibration import SCALE_GRID


def _write(results, experiment, protocol, curves, split="dev", variant="objective-r16-s16"):
    config = {"split": split, "coverage_by_scale": curves}
    if experiment == "parameter":
        config["objective"] = {"variant": variant}
    (results / f"{experiment}-{protocol}-quick-dev.json").write_text(json.dumps({"config": config}))


def test_scales_reach_the_level_on_dev_and_are_written(tmp_path, monkeypatch, load_script):
    mod = load_script("scripts/calibrate_intervals.py")
    monkeypatch.setattr(mod, "SCALES_FILE", tmp_path / "scales.json")
    ramp = list(np.linspace(0.5, 1.0, len(SCALE_GRID)))
    flat = [0.95] * len(SCALE_GRID)
    for e in mod.EXPERIMENTS:
        for p in mod.PROTOCOLS:
            if e == "parameter":
                _write(
                    tmp_path, e, p, {"f1": {"rte": ramp, "strategy-a": flat}, "f2": {"rte": flat, "strategy-a": flat}}
                )
            else:
                _write(tmp_path, e, p, {"g": {"rte": ramp}})
    assert mod.main(["--results", str(tmp_path)]) == 0
    scales = json.loads((tmp_path / "scales.json").read_text())["scales"]
    regimes = {
        f"{k}/{p}"
        for k in ("parameter-objective", "parameter-proxy", "composition", "length", "composition-depth3")
        for p in ("paper", "strict")
    }
    families = {
        f"parameter-{s}/{p}/{f}" for s in ("objective", "proxy") for p in ("paper", "strict") for f in ("f1", "f2")
    }
    assert set(scales) == regimes | families
    assert scales["parameter-objective/paper/f2"]["scale"] == SCALE_GRID[0]  # its own dev split already covers
    assert scales["parameter-objective/paper/f1"]["dev_coverage_calibrated"] >= 0.9
    pooled = (np.array(ramp) + np.array(flat)) / 2  # two families, equal weight
    assert scales["parameter-objective/paper"]["scale"] == SCALE_GRID[int(np.flatnonzero(pooled >= 0.9)[0])]
    assert scales["parameter-proxy/strict"]["scale"] == SCALE_GRID[0]  # already covers: the smallest scale
    assert scales["length/paper"]["dev_coverage_calibrated"] >= 0.9 > scales["length/paper"]["dev_coverage_raw"]


def test_a_learned_classic_is_scaled_only_for_the_variant_its_file_ran(load_script):
    """A dev file records the variant behind each learned classic's row; its curve chooses that
    variant's scale only when it is today's (classics.chosen; ctx-gp's fit, classics.CTX_GP_VARIANT,
    alike), and a file that does not say chooses none."""
    from taskextrap.baselines.classics import CTX_GP_VARIANT, chosen

    CHOSEN = chosen("length") | {"ctx-gp": CTX_GP_VARIANT}  # today's variants in the length regime

    mod = load_script("scripts/calibrate_intervals.py")
    curve = [0.95] * len(SCALE_GRID)
    by_scale = {"g": {"rte": curve, "ctx-gp": curve, "meta-gp": curve, "cnp": curve}}
    today = {"split": "dev", "coverage_by_scale": by_scale, "classic_variants": dict(CHOSEN)}
    keys = set(mod.curves_of("length", {"config": today}))
    assert keys == {"length", "length:ctx-gp", f"length:{CHOSEN['meta-gp']}", f"length:{CHOSEN['cnp']}"}
    older = {"split": "dev", "coverage_by_scale": by_scale, "classic_variants": {"meta-gp": "meta-gp-rbf"}}
    assert set(mod.curves_of("length", {"config": older})) == {"length"}
    unsaid = {"split": "dev", "coverage_by_scale": by_scale}
    assert set(mod.curves_of("length", {"config": unsaid})) == {"length"}


def test_a_test_split_file_is_refused(tmp_path, load_script):
    mod = load_script("scripts/calibrate_intervals.py")
    _write(tmp_path, "parameter", "paper", {"f": {"rte": [1.0] * len(SCALE_GRID)}}, split="test")
    with pytest.raises(SystemExit, match="not a dev run"):
        mod.calibrate("quick", tmp_path)


def test_a_runs_record_says_where_its_interval_scale_came_from():
    from taskextrap.search.calibration import scale_source
    from taskextrap.tasks import get_protocol

    paper = get_protocol("paper")
    assert scale_source("parameter-objective", paper, "cubic") == (
        "chosen on cubic's own dev split (parameter-objective/paper/cubic)"
    )
    assert scale_source("length", paper).startswith("chosen on the dev splits of polynomial-level8 (length/paper)")
    borrowed = scale_source("length", paper, None, builtin=False, tasks="chebyshev")
    assert (
        borrowed.startswith("borrowed: chosen on the built-in dev splits of polynomial-level8")
        and "not on chebyshev" in borrowed
    )
    assert scale_source("no-such-regime", paper) == "none chosen for no-such-regime/paper: 1.0, the raw interval"


def test_transfer_reports_the_scales_in_use_on_another_profiles_dev_runs(tmp_path, monkeypatch, load_script):
    mod = load_script("scripts/calibrate_intervals.py")
    grid = np.array(SCALE_GRID)
    ramp = list(np.clip(grid / 4, 0, 1))  # coverage = scale / 4: 1.0 covers 0.25, 3.7321 covers 0.933
    curves = {f: {"rte": ramp, "strategy-a": ramp} for f in ("f1", "f2")}
    config = {"split": "dev", "objective": {"variant": "objective-r16-s16"}, "coverage_by_scale": curves}
    (tmp_path / "parameter-paper-paper-dev.json").write_text(json.dumps({"config": config}))
    scales = {"profile": "quick", "scales": {
        "parameter-objective/paper": {"scale": 2.0}, "parameter-objective/paper/f1": {"scale": 3.7321},
        "parameter-proxy/paper": {"scale": 1.0}}}  # fmt: skip
    monkeypatch.setattr(mod, "SCALES_FILE", tmp_path / "scales.json")
    (tmp_path / "scales.json").write_text(json.dumps(scales))
    assert mod.main(["--results", str(tmp_path), "--transfer", "paper"]) == 0
    out = json.loads((tmp_path / "interval-transfer-paper.json").read_text())
    assert out["profile"] == "paper" and out["scales_profile"] == "quick" and out["split"] == "dev"
    objective = out["regimes"]["parameter-objective/paper"]["groups"]
    assert objective["f1"] == {"scale": 3.7321, "raw": 0.25, "calibrated": round(3.7321 / 4, 4)}  # its own scale
    assert objective["f2"]["scale"] == 2.0 and objective["f2"]["calibrated"] == 0.5  # the regime's
    assert set(out["regimes"]) == {"parameter-objective/paper", "parameter-proxy/paper"}  # only the files that exist
    config["split"] = "test"
    (tmp_path / "parameter-paper-paper-dev.json").write_text(json.dumps({"config": config}))
    with pytest.raises(SystemExit, match="not a dev run"):
        mod.main(["--results", str(tmp_path), "--transfer", "paper"])
    with pytest.raises(SystemExit, match="no strange-profile dev runs"):
        mod.main(["--results", str(tmp_path), "--transfer", "strange"])


def test_a_regimes_own_variant_is_scaled_from_its_variant_row(load_script, monkeypatch):
    """Where a regime chooses its own variant (classics.CHOSEN_BY_REGIME), a dev file that scored
    the variants gives that variant's scale from the variant's own row, whatever the file's
    meta-gp row was made with; the other variants' rows choose nothing."""
    from taskextrap.baselines import classics

    monkeypatch.setattr(classics, "CHOSEN_BY_REGIME", {"length": {"meta-gp": "meta-gp-matern52"}})
    mod = load_script("scripts/calibrate_intervals.py")
    low, high = [0.5] * len(SCALE_GRID), [0.95] * len(SCALE_GRID)
    rows = {"rte": high, "ctx-gp": high, "meta-gp": high, "cnp": high, "meta-gp-matern52": low, "meta-gp-rbf": high}
    made = {
        "split": "dev",
        "coverage_by_scale": {"g": rows},
        "classic_variants": {**classics.CHOSEN, "ctx-gp": classics.CTX_GP_VARIANT},
    }
    curves = mod.curves_of("length", {"config": made})
    assert set(curves) == {"length", "length:ctx-gp", "length:meta-gp-matern52", f"length:{classics.CHOSEN['cnp']}"}
    assert curves["length:meta-gp-matern52"][0][0] == 0.5  # the variant's own row, not the meta-gp row's


def test_a_variant_scored_after_the_dev_files_is_scaled_from_their_coverage(tmp_path, load_script, monkeypatch):
    """Today's cnp variant that no dev file ran (classics.SCORED_AFTER) takes its curves from
    benchmarks/cnp_steps_dev.py's files of the same regime, profile and protocol, group by group,
    and the scale records that file; another profile's or regime's file, or one without coverage,
    gives nothing."""
    from taskextrap.baselines import classics

    monkeypatch.setattr(classics, "CHOSEN", {**classics.CHOSEN, "cnp": "cnp-w128-x32"})
    monkeypatch.setattr(classics, "CHOSEN_BY_REGIME", {})
    mod = load_script("scripts/calibrate_intervals.py")
    low, high = [0.5] * len(SCALE_GRID), [0.95] * len(SCALE_GRID)
    cell = lambda fam, proto, curve: {  # noqa: E731
        "family": fam,
        "protocol": proto,
        "mse": {"cnp-w128-x32": 1.0},
        "coverage_by_scale": {"cnp-w128-x32": curve},
    }
    doc = {"regime": "parameter", "profile": "quick", "cells": [cell("f1", "paper", low), cell("f2", "paper", high)]}
    (tmp_path / "cnp-steps-dev-quick-x32.json").write_text(json.dumps(doc))
    other = {**doc, "profile": "paper", "cells": [cell("f1", "strict", low), cell("f2", "strict", low)]}
    (tmp_path / "cnp-steps-dev-x32.json").write_text(json.dumps(other))
    after = mod.scored_after(tmp_path, "parameter", "paper", "quick")
    assert after == {"cnp-w128-x32": ("cnp-steps-dev-quick-x32.json", {"f1": low, "f2": high})}
    assert mod.scored_after(tmp_path, "parameter", "strict", "quick") == {}  # the strict cells are paper's
    assert mod.scored_after(tmp_path, "length", "paper", "quick") == {}

    made = {"split": "dev", "objective": {"variant": "strategy-a"}, "classic_variants": {"cnp": "cnp-w128-x4"}}
    made["coverage_by_scale"] = {"f1": {"strategy-a": high, "cnp": high}, "f2": {"strategy-a": high, "cnp": high}}
    sources = {}
    curves = mod.curves_of("parameter", {"config": made}, after, sources)
    assert curves["parameter:cnp-w128-x32"].tolist() == [low, high]  # not the file's x4 row
    assert sources == {"parameter:cnp-w128-x32": "cnp-steps-dev-quick-x32.json"}
    missing = {"cnp-w128-x32": ("x.json", {"f1": low})}  # a group it did not score: nothing chosen
    assert "parameter:cnp-w128-x32" not in mod.curves_of("parameter", {"config": made}, missing)


def test_a_discrete_regimes_cell_maps_to_its_dev_files_one_group_by_name(tmp_path, load_script, monkeypatch):
    """A discrete regime's cnp_steps_dev cell is named after the regime and maps to its dev
    file's one held-out group; a cell of another name maps to nothing, and a dev file with two
    groups is refused in one line rather than paired by position."""
    from taskextrap.baselines import classics

    monkeypatch.setattr(classics, "CHOSEN_BY_REGIME", {"length": {**classics.CHOSEN, "cnp": "cnp-w128-x32"}})
    mod = load_script("scripts/calibrate_intervals.py")
    low, high = [0.5] * len(SCALE_GRID), [0.95] * len(SCALE_GRID)
    made = {"split": "dev", "classic_variants": {"cnp": "cnp-w128-x4"}}
    made["coverage_by_scale"] = {"level8": {"rte": high, "cnp": high}}
    curves = mod.curves_of("length", {"config": made}, {"cnp-w128-x32": ("a.json", {"length": low})})
    assert curves["length:cnp-w128-x32"].tolist() == [low]
    other = mod.curves_of("length", {"config": made}, {"cnp-w128-x32": ("a.json", {"composition": low})})
    assert "length:cnp-w128-x32" not in other
    made["coverage_by_scale"]["level9"] = {"rte": high, "cnp": high}
    with pytest.raises(SystemExit, match="holds one group, this one 2"):
        mod.curves_of("length", {"config": made}, {"cnp-w128-x32": ("a.json", {"length": low})})


def test_the_dev_rules_scores_after_the_dev_files_need_both_protocols(tmp_path, load_script):
    """after_scores reads the scores of one regime and profile's files; a file that scored one
    protocol only is refused (the dev choice pools both)."""
    mod = load_script("scripts/calibrate_intervals.py")
    cells = [{"family": "length", "protocol": p} for p in ("paper", "strict")]
    doc = {"regime": "length", "profile": "quick", "cells": cells, "scores": {"cnp-w128-x32": 0.5}}
    (tmp_path / "cnp-steps-dev-length-x32.json").write_text(json.dumps(doc))
    (tmp_path / "cnp-steps-dev-x8.json").write_text(json.dumps({**doc, "regime": "parameter", "scores": {"x": 1.0}}))
    assert mod.after_scores(tmp_path, "length", "quick") == {"cnp-w128-x32": 0.5}
    assert mod.after_scores(tmp_path, "length", "paper") == {}
    (tmp_path / "cnp-steps-dev-length-x64.json").write_text(json.dumps({**doc, "cells": cells[:1]}))
    with pytest.raises(SystemExit, match="not both protocols"):
        mod.after_scores(tmp_path, "length", "quick")


def test_ctx_gps_fit_is_scaled_from_the_dev_units_targets_when_no_dev_file_ran_it(tmp_path, load_script):
    """ctx-gp's scale is chosen for today's fit (classics.CTX_GP_VARIANT): from a dev file's row
    when its config records that fit, else from benchmarks/ctx_gp_dev_coverage.py's cells of the
    same regime, profile and protocol; the key stays the row's own (regime:ctx-gp)."""
    from taskextrap.baselines.classics import CTX_GP_CHOSEN, CTX_GP_VARIANT

    mod = load_script("scripts/calibrate_intervals.py")
    low, high = [0.5] * len(SCALE_GRID), [0.95] * len(SCALE_GRID)
    fits = {"lbfgs-r1": {"optimizer": "lbfgs", "restarts": 1}, "today": dict(CTX_GP_CHOSEN)}
    cells = [
        {
            "regime": "length",
            "family": "length",
            "protocol": "paper",
            "coverage_by_scale": {"lbfgs-r1": high, "today": low},
        },
        {"regime": "length", "family": "length", "protocol": "strict", "coverage_by_scale": {"today": high}},
    ]
    (tmp_path / "ctx-gp-dev-coverage.json").write_text(json.dumps({"profile": "quick", "fits": fits, "cells": cells}))
    after = mod.everything_after(tmp_path, "length", "paper", "quick")
    assert after[CTX_GP_VARIANT] == ("ctx-gp-dev-coverage.json", {"length": low})
    assert mod.ctx_gp_after(tmp_path, "length", "paper", "paper") == {}  # another profile's dev units
    older = {"split": "dev", "classic_variants": {}, "coverage_by_scale": {"level8": {"rte": high, "ctx-gp": high}}}
    sources = {}
    curves = mod.curves_of("length", {"config": older}, after, sources)
    assert curves["length:ctx-gp"].tolist() == [low] and sources == {"length:ctx-gp": "ctx-gp-dev-coverage.json"}
    made = {**older, "classic_variants": {"ctx-gp": CTX_GP_VARIANT}}  # a dev file made with today's fit: its row
    assert mod.curves_of("length", {"config": made}, after)["length:ctx-gp"].tolist() == [high]
    assert "length:ctx-gp" not in mod.curves_of("length", {"config": older}, {})  # neither: no scale
