"""results.json schema, row construction and paper values."""

import copy
import json
import math

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.report.paper_values import PAPER_VALUES, paper_source, paper_value
from taskextrap.report.schema import (
    bootstrap_ci95,
    bootstrap_interval,
    bootstrap_mean,
    environment_info,
    is_seed_independent,
    make_row,
    summarize_errors,
    t_halfwidth,
    validate_results,
)


COMPARISON = {
    "group": "quadratic",
    "metric": "mse",
    "a": "rte",
    "b": "ctx-polyfit",
    "diff": -1.0,
    "lo": -1.5,
    "hi": -0.5,
    "seed_diffs": [-1.1, -0.9],
    "n": 400,
    "ci_method": "t-targets",
    "clear": True,
    "winner": "rte",
}


def valid_results():
    return {
        "experiment": "parameter",
        "protocol": "paper",
        "profile": "quick",
        "seeds": [0, 1, 2],
        "rows": [
            {
                "group": "quadratic",
                "method": "rte",
                "metric": "mse",
                "value": 12.3,
                "ci95": 1.1,
                "n": 1200,
                "paper_value": 733.0,
                "paper_ci95": 11.9,
                "seed_sd": 0.5,
                "note": "example",
            },
            {
                "group": "size6",
                "method": "rte",
                "metric": "accuracy",
                "value": 0.66,
                "ci95": None,
                "n": 28,
                "paper_value": None,
                "paper_ci95": None,
            },
        ],
        "timing": {"wall_s": 41.2, "train_s": 30.0},
        "environment": {"taskextrap": "0.1.0", "torch": "2.13.0", "device": "cpu", "git": None},
        "config": {"anything": [1, 2]},
        "comparisons": [dict(COMPARISON)],
    }


def test_valid_example_passes():
    validate_results(valid_results())


@pytest.mark.parametrize(
    "key", ["experiment", "protocol", "profile", "seeds", "rows", "timing", "environment", "config"]
)
def test_missing_top_level_key_rejected(key):
    obj = valid_results()
    del obj[key]
    with pytest.raises(TaskextrapError, match=key):
        validate_results(obj)


@pytest.mark.parametrize("key", ["group", "method", "metric", "value", "ci95", "n", "paper_value", "paper_ci95"])
def test_missing_row_key_rejected(key):
    obj = valid_results()
    del obj["rows"][0][key]
    with pytest.raises(TaskextrapError, match=key):
        validate_results(obj)


def mutate(fn):
    obj = valid_results()
    fn(obj)
    return obj


@pytest.mark.parametrize(
    "bad",
    [
        lambda o: o["rows"][1].update(value=1.2),  # accuracy > 1
        lambda o: o["rows"][1].update(value=-0.1),  # accuracy < 0
        lambda o: o["rows"][0].update(metric="rmse"),  # unknown metric
        lambda o: o["rows"][0].update(n=0),  # n >= 1
        lambda o: o["rows"][0].update(n=2.5),  # n integer
        lambda o: o["rows"][0].update(value="12"),  # value number
        lambda o: o["rows"][0].update(value=float("nan")),  # finite
        lambda o: o["rows"][0].update(seed_sd="x"),  # extras typed
        lambda o: o.update(seeds=[0, "1"]),
        lambda o: o["timing"].pop("wall_s"),
        lambda o: o["timing"].update(note="slow"),  # timing fields are numbers
        lambda o: o["environment"].update(git=3),
        lambda o: o["environment"].update(dirty="yes"),
        lambda o: o["environment"].update(source_hash=1),
        lambda o: o["rows"][0].update(ci_method="normal"),
        lambda o: o.update(comparisons=[{"group": "g"}]),
        lambda o: o.update(comparisons=[{**COMPARISON, "diff": float("inf")}]),
        lambda o: o["environment"].pop("torch"),
        lambda o: o.update(config=[]),
        lambda o: o["config"].update(family=["myfam:bump"]),  # the --family spec is text (or null)
        lambda o: o["config"].update(family_code_hash=123),
    ],
)
def test_invalid_results_rejected_with_one_line(bad):
    with pytest.raises(TaskextrapError) as info:
        validate_results(mutate(bad))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "config",
    [
        {"family": "myfam:bump", "family_code_hash": "0123456789abcdef"},  # a user's module:attr
        {"family": "quadratic", "family_code_hash": None},  # a built-in family
        {"family": None, "family_code_hash": None},  # the experiment's own families
        {},  # written before runs were recorded
    ],
)
def test_config_records_the_family_spec(config):
    validate_results(mutate(lambda o: o["config"].update(config)))


def test_not_an_object_rejected():
    with pytest.raises(TaskextrapError):
        validate_results([1, 2])


def test_accuracy_one_is_allowed_and_mse_above_one_too():
    obj = mutate(lambda o: o["rows"][1].update(value=1.0))
    validate_results(obj)
    validate_results(mutate(lambda o: o["rows"][0].update(value=1e6)))


T975 = {1: 12.706204736174707, 2: 4.302652729749464}  # textbook t(0.975, df)


def test_summarize_errors_matches_hand_computation():
    # 3 targets x 2 seeds: the interval runs over the 3 seed-averaged targets, not 6 entries
    e = np.array([[1.0, 2.0], [3.0, 5.0], [2.0, 5.0]])
    s = summarize_errors(e)
    per_target = [1.5, 4.0, 3.5]  # mean 3.0
    sd = math.sqrt(sum((v - 3.0) ** 2 for v in per_target) / 2)  # sqrt(1.75)
    assert s["n"] == 3
    assert s["value"] == pytest.approx(3.0)
    assert s["ci95"] == pytest.approx(T975[2] * sd / math.sqrt(3))
    assert s["ci95"] == pytest.approx(4.3027 * math.sqrt(1.75) / math.sqrt(3), rel=1e-4)
    # per-seed means 2.0 and 4.0 -> sd (ddof=1) = sqrt(2)
    assert s["seed_sd"] == pytest.approx(math.sqrt(2.0))
    assert s["ci_method"] == "t-targets" and s["seed_independent"] is False
    assert all(type(s[k]) in (int, float) for k in ("value", "ci95", "n", "seed_sd"))


def test_seed_independent_method_is_counted_once():
    # two seeds with identical columns: n is the number of targets and the seed sd is 0
    col = np.array([1.0, 4.0, 2.0, 7.0])
    s = summarize_errors(np.stack([col, col], axis=1))
    assert s["n"] == 4 and s["seed_independent"] is True and s["seed_sd"] == 0.0
    assert s == {**summarize_errors(col), "seed_sd": 0.0, "seed_independent": True}
    # float noise across seeds (a sum in another order) still counts as one column
    noisy = np.stack([col, col * (1 + 1e-15)], axis=1)
    assert summarize_errors(noisy)["seed_independent"] is True
    assert summarize_errors(np.stack([col, col + 1e-3], axis=1))["seed_independent"] is False
    # one huge target error does not hide seed differences on the others
    big = np.array([[1e12, 1e12], [0.5, 0.6], [0.2, 0.1]])
    assert not is_seed_independent(big)


def test_summarize_errors_single_seed_and_single_value():
    s = summarize_errors(np.array([[1.0], [3.0]]))
    assert s["seed_sd"] is None and s["n"] == 2 and s["seed_independent"] is False
    assert s["ci95"] == pytest.approx(T975[1] * math.sqrt(2.0) / math.sqrt(2))
    one = summarize_errors(np.array([[4.0]]))
    assert one == {"value": 4.0, "ci95": None, "n": 1, "seed_sd": None, "ci_method": None, "seed_independent": False}
    # a 1-D array is one seed
    assert summarize_errors([1.0, 3.0]) == s


def test_one_target_gets_the_t_interval_over_seeds():
    # the projectile: one trajectory, three seeds; textbook t interval for 1, 2, 3:
    # mean 2, sd 1, t(0.975, 2) = 4.303 -> half-width 4.303 / sqrt(3) = 2.484
    s = summarize_errors(np.array([[1.0, 2.0, 3.0]]))
    assert s["value"] == 2.0 and s["n"] == 3 and s["ci_method"] == "t-seeds"
    assert s["ci95"] == pytest.approx(2.4841377, abs=1e-6)
    assert s["seed_sd"] == pytest.approx(1.0)


def test_accuracy_rows_bootstrap_over_seed_averaged_tasks():
    acc = np.array([[0.0, 1.0], [1.0, 1.0], [0.5, 0.5], [1.0, 0.0], [0.0, 0.0]])
    s = summarize_errors(acc, "accuracy")
    assert s["n"] == 5 and s["ci_method"] == "bootstrap-bca-targets"
    assert s["ci95"] == pytest.approx(bootstrap_ci95(acc))
    lo, hi = bootstrap_interval(acc.mean(axis=1))
    assert s["ci95"] == pytest.approx((hi - lo) / 2) and lo <= s["value"] <= hi
    row = make_row("parity", "size6", "rte", "accuracy", acc, ci95=bootstrap_ci95(acc))
    assert row["ci_method"] == "bootstrap-bca-targets"  # the same number as make_row's own
    assert make_row("parity", "size6", "rte", "accuracy", acc, ci95=0.123)["ci_method"] == "given"


def test_t_halfwidth_and_bootstrap_interval_edge_cases():
    assert t_halfwidth([5.0]) is None and bootstrap_interval([5.0]) is None
    assert t_halfwidth([2.0, 2.0, 2.0]) == 0.0
    assert bootstrap_interval([1.0, 2.0, 3.0], seed=3) == bootstrap_interval([1.0, 2.0, 3.0], seed=3)
    assert not is_seed_independent(np.ones((3, 1)))  # one seed: nothing to compare


@pytest.mark.parametrize("bad", [np.zeros((0, 2)), np.array([[1.0, np.nan]]), np.zeros((2, 2, 2))])
def test_summarize_errors_rejects_bad_input(bad):
    with pytest.raises(TaskextrapError):
        summarize_errors(bad)


def test_bootstrap_ci95_behaviour():
    assert bootstrap_ci95(np.ones((5, 2))) == 0.0
    assert bootstrap_ci95(np.array([[0.3]])) is None  # one task: no interval
    acc = np.array([[0.0], [1.0]] * 10)
    w = bootstrap_ci95(acc, seed=1)
    assert 0.1 < w < 0.35  # normal approx: 1.96*0.5/sqrt(20) = 0.22
    assert bootstrap_ci95(acc, seed=1) == w  # deterministic


def test_bootstrap_mean_is_scipy_bca_with_the_seeded_generator():
    from scipy import stats

    x = np.random.default_rng(5).exponential(size=30)  # skewed: BCa and percentile differ
    iv = bootstrap_mean(x, n_boot=2000, seed=3)
    ref = stats.bootstrap((x,), np.mean, n_resamples=2000, method="BCa", rng=np.random.default_rng(3))
    assert iv["method"] == "bca"
    assert (iv["lo"], iv["hi"]) == (ref.confidence_interval.low, ref.confidence_interval.high)
    pct = stats.bootstrap((x,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(3))
    assert iv["lo"] != pct.confidence_interval.low  # really BCa, not the percentile interval
    assert bootstrap_mean(x, n_boot=2000, seed=3) == iv  # deterministic for a seed
    assert bootstrap_mean(x, n_boot=2000, seed=4) != iv
    assert bootstrap_interval(x, n_boot=2000, seed=3) == (iv["lo"], iv["hi"])


def test_bootstrap_bca_matches_the_t_interval_on_normal_data():
    # a known case: for the mean of many normal values the BCa interval is the t interval
    x = np.random.default_rng(0).normal(size=400)
    iv = bootstrap_mean(x, seed=0)
    assert (iv["hi"] - iv["lo"]) / 2 == pytest.approx(t_halfwidth(x), rel=0.05)
    assert iv["lo"] < x.mean() < iv["hi"]


@pytest.mark.parametrize("value", [1.0, 0.0, 0.1])
def test_bootstrap_falls_back_to_percentile_on_equal_values(value):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's DegenerateDataWarning stays inside
        iv = bootstrap_mean([value] * 7)
        s = summarize_errors(np.full((7, 2), value), "accuracy")
    assert iv == {"lo": value, "hi": value, "method": "percentile"}  # zero width, not NaN
    assert s["ci95"] == 0.0 and s["ci_method"] == "bootstrap-percentile-targets"


def test_bootstrap_mean_bad_input_one_line():
    assert bootstrap_mean([3.0]) is None
    with pytest.raises(TaskextrapError, match="NaN/inf") as e:
        bootstrap_mean([1.0, np.nan])
    assert "\n" not in str(e.value)
    with pytest.raises(TaskextrapError, match="n_boot"):
        bootstrap_mean([1.0, 2.0], n_boot=0)


@pytest.mark.parametrize("method", ["bootstrap-bca-targets", "bootstrap-percentile-targets", "bootstrap-targets"])
def test_schema_accepts_old_and_new_bootstrap_methods(method):
    obj = valid_results()
    obj["rows"][0]["ci_method"] = method
    obj.setdefault("comparisons", [dict(COMPARISON)])[0]["ci_method"] = method
    validate_results(obj)
    obj["rows"][0]["ci_method"] = "bootstrap-normal-targets"
    with pytest.raises(TaskextrapError, match="ci_method"):
        validate_results(obj)


def test_make_row_pulls_paper_value():
    row = make_row("parameter", "quadratic", "strategy-a", "mse", np.ones((4, 2)))
    assert row["paper_value"] == pytest.approx(733.0)  # printed as 7.33 x 10^2
    assert row["paper_ci95"] == pytest.approx(11.9)
    assert row["value"] == 1.0 and row["ci95"] == 0.0 and row["n"] == 4 and row["seed_sd"] == 0.0
    assert row["seed_independent"] is True
    np.testing.assert_array_equal(row.errors, np.ones((4, 2)))  # kept for paired comparisons
    assert "errors" not in row and json.loads(json.dumps(row)) == dict(row)  # never written
    unknown = make_row("parameter", "quadratic", "my-method", "mse", [1.0], note="x")
    assert unknown["paper_value"] is None and unknown["paper_ci95"] is None
    assert unknown["note"] == "x"
    obj = valid_results()
    obj["rows"] = [row, unknown]
    validate_results(obj)


def test_make_row_rejects_bad_metric_accuracy_and_overrides():
    with pytest.raises(TaskextrapError, match="metric"):
        make_row("parameter", "quadratic", "rte", "rmse", [1.0])
    with pytest.raises(TaskextrapError, match="accuracy"):
        make_row("parity", "size6", "rte", "accuracy", [1.5, 2.0])
    with pytest.raises(TaskextrapError, match="paper_value"):
        make_row("parameter", "quadratic", "rte", "mse", [1.0], paper_value=1.0)
    row = make_row("parity", "size6-authors", "rte", "accuracy", [0.0, 1.0], ci95=0.3)
    assert row["ci95"] == 0.3 and row["paper_value"] == pytest.approx(0.6607)


def test_paper_values_table():
    # the numbers themselves are checked against the paper's LaTeX in test_paper_values_tex.py;
    # here: the lookups return exactly the table's entries, and nothing for anything else
    for key, (v, ci, src) in PAPER_VALUES.items():
        assert paper_value(*key) == (v, ci) and paper_source(*key) == src
    assert paper_value("nope", "x", "y") == (None, None) and paper_source("nope", "x", "y") is None
    assert paper_value("length", "chebyshev-level5", "rte") == (None, None)
    assert "tab:param_results" in paper_source("parameter", "exp", "strategy-a")
    for v, ci, src in PAPER_VALUES.values():
        assert math.isfinite(v) and (ci is None or ci >= 0) and src
    groups = {g for (e, g, _m) in PAPER_VALUES if e == "parameter"}
    assert groups == {"quadratic", "cubic", "exp", "sin_trend", "tri_trend"}
    # parity: the authors' candidate space is the paper's; frontier / all rows get no paper value
    assert {g for (e, g, _m) in PAPER_VALUES if e == "parity"} == {"size6-authors"}
    for exp, group, method in PAPER_VALUES:
        if exp in ("parity", "codeio"):
            assert 0.0 <= PAPER_VALUES[(exp, group, method)][0] <= 1.0


def test_environment_info_never_fails():
    env = environment_info("cuda")
    assert env["device"] == "cuda"
    assert isinstance(env["taskextrap"], str) and isinstance(env["torch"], str)
    assert env["git"] is None or isinstance(env["git"], str)
    assert env["dirty"] in (None, True, False)
    assert isinstance(env["source_hash"], str) and len(env["source_hash"]) == 16
    import torch

    assert f"({torch.backends.cpu.get_cpu_capability()})" in env["cpu"]  # the instruction set moves numbers
    import numpy

    assert env["libraries"]["numpy"] == numpy.__version__ and set(env["libraries"]) == {
        "numpy",
        "scipy",
        "scikit-learn",
    }
    obj = valid_results()
    obj["environment"] = env
    validate_results(obj)


def test_validate_does_not_mutate():
    obj = valid_results()
    before = copy.deepcopy(obj)
    validate_results(obj)
    assert obj == before


def test_accuracy_row_stacks_seeds_and_keeps_the_masked_tasks():
    from taskextrap.report.schema import accuracy_row

    per_seed = [np.array([1.0, 0.0, 1.0, 1.0]), np.array([1.0, 1.0, 0.0, 1.0])]
    row = accuracy_row("parity", per_seed, "g", "rte")
    assert row["n"] == 4 and row["value"] == pytest.approx(0.75) and row.errors.shape == (4, 2)
    kept = accuracy_row("parity", per_seed, "g", "rte", keep=np.array([True, False, False, True]))
    assert kept["n"] == 2 and kept["value"] == 1.0 and kept.errors.shape == (2, 2)
