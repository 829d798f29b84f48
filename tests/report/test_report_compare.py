"""Paired comparisons: the interval over targets, per-seed agreement, and the comparisons list."""

import math

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.report.compare import claim_changes, clear_claims, compare_rows, differences, keyed, paired_difference
from taskextrap.report.schema import make_row, validate_results


def test_paired_difference_known_case_is_clear():
    # 4 targets x 2 seeds; b is worse than a by 1 +- a little on every target and seed
    a = np.array([[1.0, 1.2], [2.0, 2.2], [3.0, 2.8], [0.5, 0.7]])
    b = a + np.array([[1.0, 1.1], [0.9, 1.0], [1.2, 1.0], [1.0, 0.8]])
    p = paired_difference(a, b)
    d = (a - b).mean(axis=1)  # seed-averaged per-target differences
    half = 3.182446305284263 * d.std(ddof=1) / 2.0  # t(0.975, 3) * sd / sqrt(4)
    assert p["diff"] == pytest.approx(d.mean()) and p["n"] == 4
    assert p["lo"] == pytest.approx(d.mean() - half) and p["hi"] == pytest.approx(d.mean() + half)
    assert p["ci95"] == pytest.approx(half) and p["ci_method"] == "t-targets"
    assert p["seed_diffs"] == pytest.approx(list((a - b).mean(axis=0)))
    assert p["clear"] is True


def test_one_disagreeing_seed_is_not_clear():
    # the interval over targets excludes zero, but seed 2's mean difference has the other sign
    rng = np.random.default_rng(0)
    b = rng.uniform(1.0, 2.0, size=(50, 3))
    shift = np.array([-1.0, -1.0, 0.2])  # a better under seeds 0 and 1, worse under seed 2
    a = b + shift + rng.normal(0, 0.01, size=b.shape)
    p = paired_difference(a, b)
    assert p["hi"] < 0  # the interval alone would support "a beats b"
    assert p["seed_diffs"][2] > 0
    assert p["clear"] is False


def test_interval_covering_zero_is_not_clear_and_identical_methods_are_not_either():
    a = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    b = a + np.array([[0.5, 0.4], [-0.5, -0.6], [0.1, 0.2]])
    assert paired_difference(a, b)["clear"] is False
    same = paired_difference(a, a)
    assert same["diff"] == 0.0 and same["clear"] is False


def test_paired_difference_one_target_uses_seeds_and_single_value_has_no_interval():
    p = paired_difference([[1.0, 2.0, 3.0]], [[0.0, 0.0, 0.0]])
    assert p["n"] == 3 and p["ci_method"] == "t-seeds"
    assert p["lo"] == pytest.approx(2.0 - 4.302652729749464 / math.sqrt(3))
    one = paired_difference([[1.0]], [[0.0]])
    assert one["lo"] is None and one["clear"] is False


def test_paired_difference_accuracy_bootstrap_and_bad_input():
    a = np.array([[1.0], [1.0], [1.0], [0.0], [1.0], [1.0]])
    b = np.zeros((6, 1))
    p = paired_difference(a, b, "accuracy")
    assert p["ci_method"] == "bootstrap-bca-targets" and p["lo"] > 0 and p["clear"] is True
    with pytest.raises(TaskextrapError, match="shape"):
        paired_difference(np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(TaskextrapError, match="metric"):
        paired_difference(np.zeros((3, 2)), np.zeros((3, 2)), "rmse")


def test_compare_rows_rte_against_each_method_and_claims():
    base = np.linspace(1.0, 2.0, 20)[:, None] * np.ones((1, 2))
    rows = [
        make_row("parameter", "quadratic", "ctx-polyfit", "mse", base + 1.0),  # rte clearly better
        make_row("parameter", "quadratic", "rte", "mse", base + np.array([0.0, 0.01])),
        make_row("parameter", "quadratic", "oracle", "mse", base + np.array([-0.5, 0.5])),  # seeds disagree
        make_row("parameter", "cubic", "rte", "mse", base[:5]),  # other shape, other group: no partner
        make_row("projectile", "v=65", "inductive-oracle", "mse", [[3.0, 4.0, 5.0]]),
        make_row("projectile", "v=65", "transductive-oracle", "mse", [[0.1, 0.2, 0.1]]),
    ]
    comps = compare_rows(rows)
    # a row without its array (hand-made, or a {**row} copy) is refused, never silently skipped
    for lost in ({"group": "quadratic", "method": "hand-made", "metric": "mse", "value": 1.0}, {**rows[0]}):
        with pytest.raises(TaskextrapError, match="no per-target errors"):
            compare_rows([*rows, lost])
    kept = rows[0].replace(paper_value=1.0)
    assert kept.errors is rows[0].errors and kept["paper_value"] == 1.0 and rows[0]["paper_value"] is None
    pairs = [(c["group"], c["a"], c["b"]) for c in comps]
    assert pairs == [
        ("quadratic", "rte", "ctx-polyfit"),
        ("quadratic", "rte", "oracle"),
        ("v=65", "inductive-oracle", "transductive-oracle"),
    ]
    by = {c["b"]: c for c in comps}
    assert by["ctx-polyfit"]["clear"] and by["ctx-polyfit"]["winner"] == "rte"
    assert by["ctx-polyfit"]["diff"] < 0 and by["ctx-polyfit"]["n"] == 20
    assert not by["oracle"]["clear"] and by["oracle"]["winner"] is None
    assert by["transductive-oracle"]["winner"] == "transductive-oracle"  # lower mse wins
    assert clear_claims(comps) == [
        "quadratic: rte beats ctx-polyfit (mse)",
        "v=65: transductive-oracle beats inductive-oracle (mse)",
    ]
    obj = {
        "experiment": "parameter",
        "protocol": "paper",
        "profile": "tiny",
        "seeds": [0, 1],
        "rows": [r for r in rows if "paper_value" in r],
        "comparisons": comps,
        "timing": {"wall_s": 1.0},
        "environment": {"taskextrap": "0", "torch": "0", "device": "cpu", "git": None},
        "config": {},
    }
    validate_results(obj)


def test_compare_rows_accuracy_higher_wins():
    rows = [
        make_row("codeio", "held-out-pairs", "rte", "accuracy", np.ones((8, 2))),
        make_row("codeio", "held-out-pairs", "few-shot", "accuracy", np.zeros((8, 2))),
    ]
    (c,) = compare_rows(rows)
    # every difference is 1: BCa is undefined, the percentile interval is the point [1, 1]
    assert c["diff"] == 1.0 and c["winner"] == "rte" and c["ci_method"] == "bootstrap-percentile-targets"
    assert c["lo"] == c["hi"] == 1.0


def test_diagnostic_metrics_are_never_compared_and_carry_no_paper_value():
    e = np.random.default_rng(1).uniform(0.1, 1.0, size=(10, 2))
    rows = [
        make_row("parameter", "quadratic", m, metric, e + i)
        for i, m in enumerate(("rte", "strategy-a"))
        for metric in ("entropy", "coverage")
        if not (metric == "coverage" and i)
    ]
    assert compare_rows(rows) == []
    assert all(r["paper_value"] is None for r in rows)  # strategy-a has a paper mse, not an entropy
    with pytest.raises(TaskextrapError, match="entropy"):
        make_row("parameter", "quadratic", "rte", "entropy", -e)


def _file(rte_value, comparisons):
    row = {"group": "g", "method": "rte", "metric": "mse", "value": rte_value, "ci95": 0.1}
    return {"rows": [row], "comparisons": comparisons, "environment": {"git": str(rte_value)}}


def _claim(b, clear, winner=None):
    return {"group": "g", "metric": "mse", "a": "rte", "b": b, "diff": -1.0, "clear": clear, "winner": winner}


def test_differences_name_every_changed_number_and_ignore_provenance():
    old = _file(1.0, [_claim("x", True, "rte")])
    assert differences(old, {**old, "environment": {"git": "other"}}) == []
    nan = _file(float("nan"), [])
    assert differences(nan, _file(float("nan"), [])) == []  # a diverged row stays diverged
    new = _file(1.5, [_claim("x", False), _claim("y", True, "y")])
    assert differences(old, new) == [
        ("rows", ("g", "rte", "mse"), "value", 1.0, 1.5),
        ("comparisons", ("g", "mse", "rte", "y"), None, None, new["comparisons"][1]),
        ("comparisons", ("g", "mse", "rte", "x"), "clear", True, False),
        ("comparisons", ("g", "mse", "rte", "x"), "winner", "rte", None),
    ]
    assert keyed(new, "comparisons")[("g", "mse", "rte", "y")]["winner"] == "y"


def test_claim_changes_keep_only_claims_clear_in_either_file():
    old = _file(
        1.0,
        [_claim("held", True, "rte"), _claim("gone", True, "rte"), _claim("flip", True, "rte"), _claim("never", False)],
    )
    new = _file(
        1.0,
        [
            _claim("held", True, "rte"),
            _claim("gone", False),
            _claim("flip", True, "flip"),
            _claim("never", False),
            _claim("new", True, "rte"),
        ],
    )
    assert {k[3]: v for k, v in claim_changes(old, new).items()} == {
        "held": "held",
        "gone": "vanished",
        "flip": "reversed",
        "new": "appeared",
    }


def test_the_estimator_judged_beside_rte_is_compared_with_every_other_method():
    base = np.linspace(1.0, 2.0, 20)[:, None] * np.ones((1, 2))
    rows = [
        make_row("parameter", "quadratic", "rte", "mse", base),
        make_row("parameter", "quadratic", "rte-gp", "mse", base - 0.5),
        make_row("parameter", "quadratic", "meta-gp", "mse", base - 0.2),
    ]
    pairs = {(c["a"], c["b"]): c["winner"] for c in compare_rows(rows)}
    assert pairs == {("rte", "rte-gp"): "rte-gp", ("rte", "meta-gp"): "meta-gp", ("rte-gp", "meta-gp"): "rte-gp"}
