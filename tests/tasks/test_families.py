"""Built-in families (paper Appendix F), region bookkeeping and user-defined families."""

import itertools
import math

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.tasks import PARAMETER_FAMILIES, PROJECTILE, ParametricFamily, TaskSet, get_family
from taskextrap.tasks.builtin import PERIOD

# The paper's regions of the shifted parameter and the ranges of the fixed parameters.
EXPECTED = {
    "quadratic": (
        "a",
        {"F1_1": (0.5, 1.5), "F1_2": (1.5, 2.5), "F2": (2.5, 3.5)},
        {"b": (-2.0, 2.0), "c": (-2.0, 2.0)},
    ),
    "exp": (
        "beta",
        {"F1_1": (0.05, 0.10), "F1_2": (0.10, 0.15), "F2": (0.15, 0.20)},
        {"alpha": (1.0, 2.0), "c0": (-1.0, 1.0)},
    ),
    "cubic": ("a3", {"F1_1": (0.5, 1.5), "F1_2": (1.5, 2.5), "F2": (2.5, 3.5)}, {"b3": (2.0, 4.0), "c3": (-2.0, 2.0)}),
    "sin_trend": ("s", {"F1_1": (0.1, 0.2), "F1_2": (0.2, 0.3), "F2": (0.3, 0.4)}, {"A": (0.5, 1.0)}),
    "tri_trend": ("s", {"F1_1": (0.1, 0.2), "F1_2": (0.2, 0.3), "F2": (0.3, 0.4)}, {"A": (0.5, 1.0)}),
}


def test_the_five_builtin_families_are_registered():
    assert set(PARAMETER_FAMILIES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builtin_regions_and_ranges_match_the_paper(name):
    fam = PARAMETER_FAMILIES[name]
    shift, regions, fixed = EXPECTED[name]
    assert fam.shift == shift
    assert fam.param_names[0] == shift
    assert set(fam.regions) == set(regions)
    for r, (lo, hi) in regions.items():
        assert fam.regions[r] == pytest.approx((lo, hi), abs=1e-12), r
    assert set(fam.fixed) == set(fixed)
    for p, (lo, hi) in fixed.items():
        assert fam.fixed[p] == pytest.approx((lo, hi)), p
    assert fam.domain == (0.0, 20.0)
    assert tuple(fam.train_regions) == ("F1_1", "F1_2")
    assert fam.held_out_regions == ("F2",)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builtin_regions_are_disjoint_and_ordered(name):
    fam = PARAMETER_FAMILIES[name]
    spans = [fam.regions[r] for r in ("F1_1", "F1_2", "F2")]
    for (a1, b1), (a2, b2) in itertools.pairwise(spans):
        assert a1 < b1 <= a2 < b2
    # The held-out region lies strictly beyond every training region.
    assert fam.regions["F2"][0] >= max(fam.regions[r][1] for r in fam.train_regions)


# (family, params in param_names order, x, hand-computed value)
FORMULA_CASES = [
    ("quadratic", [1.0, 2.0, 3.0], 2.0, 11.0),  # 4 + 4 + 3
    ("quadratic", [3.0, -1.0, 0.5], 10.0, 290.5),  # 300 - 10 + 0.5
    ("cubic", [1.0, 3.0, 0.5], 14.0, 1.86),  # 64/400 + 0.3*4 + 0.5
    ("cubic", [2.0, 2.0, -1.0], 10.0, -1.0),  # centre: c3 only
    ("cubic", [2.0, 2.0, -1.0], 0.0, -1000 * 2 / 400 - 2.0 - 1.0),  # -5 - 2 - 1
    ("exp", [0.1, 2.0, 0.5], 10.0, 0.5),  # exp(0) - 1 = 0
    ("exp", [0.1, 2.0, 0.5], 20.0, 2.0 * (math.e - 1.0) + 0.5),
    ("exp", [0.2, 1.0, -1.0], 0.0, math.exp(-2.0) - 1.0 - 1.0),
    ("sin_trend", [0.2, 0.8], PERIOD / 4, 0.2 * PERIOD / 4 + 0.4),  # sin(pi/2) = 1
    ("sin_trend", [0.3, 1.0], PERIOD / 2, 0.3 * PERIOD / 2),  # sin(pi) = 0
    ("tri_trend", [0.2, 0.8], 0.0, 0.8 * 1.5),  # tri(0) = 2
    ("tri_trend", [0.2, 0.8], PERIOD / 2, 0.2 * PERIOD / 2 - 0.4),  # tri(1/2) = 0
    ("tri_trend", [0.1, 0.5], PERIOD / 4, 0.1 * PERIOD / 4 + 0.5 * 0.5),  # tri(1/4) = 1
]


@pytest.mark.parametrize("name,params,x,expected", FORMULA_CASES)
def test_formulas_match_hand_computed_values(name, params, x, expected):
    fam = PARAMETER_FAMILIES[name]
    y = fam(np.array([params]), np.array([[x]]))
    assert y.shape == (1, 1)
    assert y[0, 0] == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_projectile_formula_and_regions():
    # theta = 45 degrees: y = x - g x^2 / v^2
    y = PROJECTILE(np.array([[30.0, 45.0]]), np.array([[0.0, 30.0, 90.0]]))
    np.testing.assert_allclose(y[0], [0.0, 30.0 - 9.81 * 900 / 900, 90.0 - 9.81 * 8100 / 900], rtol=1e-9)
    assert PROJECTILE.train_regions == ("train",)
    assert PROJECTILE.held_out_regions == ("target",)


def test_family_evaluation_is_vectorised_per_task():
    fam = PARAMETER_FAMILIES["quadratic"]
    params = np.array([[1.0, 0.0, 0.0], [2.0, 1.0, -1.0]])
    x = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]])
    np.testing.assert_allclose(fam(params, x), [[1.0, 4.0, 9.0], [-1.0, 2.0, 9.0]])


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("region", ["F1_1", "F1_2", "F2"])
def test_sampled_params_lie_in_their_region(name, region):
    fam = PARAMETER_FAMILIES[name]
    params = fam.sample_params(region, 2000, np.random.default_rng(7))
    assert params.shape == (2000, 1 + len(fam.fixed))
    lo, hi = fam.regions[region]
    s = params[:, 0]
    assert np.all((s >= lo) & (s <= hi))
    # uniform over the whole region, not a corner of it
    assert s.min() < lo + 0.02 * (hi - lo) and s.max() > hi - 0.02 * (hi - lo)
    for j, (p, (a, b)) in enumerate(fam.fixed.items(), start=1):
        assert np.all((params[:, j] >= a) & (params[:, j] <= b)), p
        assert params[:, j].min() < a + 0.02 * (b - a) and params[:, j].max() > b - 0.02 * (b - a), p
    assert set(fam.region_of(params)) == {region}


def test_region_of_names_regions_and_outside():
    fam = PARAMETER_FAMILIES["quadratic"]
    params = np.array([[1.0, 0, 0], [2.0, 0, 0], [3.0, 0, 0], [5.0, 0, 0]])
    assert list(fam.region_of(params)) == ["F1_1", "F1_2", "F2", ""]


def test_taskset_sample_counts_regions_in_order():
    fam = PARAMETER_FAMILIES["exp"]
    ts = TaskSet.sample(fam, {"F1_1": 3, "F1_2": 4}, np.random.default_rng(0))
    assert len(ts) == 7
    assert list(ts.region) == ["F1_1"] * 3 + ["F1_2"] * 4
    assert list(fam.region_of(ts.params)) == list(ts.region)
    x = np.tile(np.linspace(0, 20, 5), (7, 1))
    np.testing.assert_allclose(ts.values(x), fam(ts.params, x))
    sub = ts.subset(np.array([0, 6]))
    assert list(sub.region) == ["F1_1", "F1_2"]


def test_sample_from_unknown_region_raises():
    with pytest.raises(TaskextrapError, match="no region"):
        PARAMETER_FAMILIES["quadratic"].sample_params("F9", 3, np.random.default_rng(0))


def _family(**overrides):
    spec = dict(
        name="t",
        fn=lambda x, a, b: a * x + b,
        domain=(0.0, 1.0),
        fixed={"b": (0.0, 1.0)},
        shift="a",
        regions={"F1_1": (0.0, 1.0), "F1_2": (1.0, 2.0), "F2": (2.0, 3.0)},
    )
    spec.update(overrides)
    return ParametricFamily(**spec)


def test_valid_family_constructs():
    assert _family().held_out_regions == ("F2",)


@pytest.mark.parametrize(
    "regions",
    [
        {"F1_1": (0.0, 1.5), "F1_2": (1.0, 2.0), "F2": (2.0, 3.0)},  # F1_1 / F1_2 overlap
        {"F1_1": (0.0, 1.0), "F1_2": (1.0, 2.5), "F2": (2.0, 3.0)},  # F1_2 / F2 overlap
        {"F1_1": (0.0, 3.0), "F1_2": (1.0, 1.5), "F2": (2.0, 2.5)},  # nested
    ],
)
def test_overlapping_regions_are_rejected(regions):
    with pytest.raises(TaskextrapError, match="overlap"):
        _family(regions=regions)


@pytest.mark.parametrize("domain", [(1.0, 1.0), (2.0, 1.0), (0.0, float("inf")), (float("nan"), 1.0)])
def test_bad_domain_is_rejected(domain):
    with pytest.raises(TaskextrapError, match="domain"):
        _family(domain=domain)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(fixed={"a": (0.0, 1.0), "b": (0.0, 1.0)}), "also in fixed"),
        (dict(fixed={"b": (1.0, 0.0)}), "low <= high"),
        (dict(regions={"F1_1": (0.0, 1.0), "F1_2": (2.0, 1.0), "F2": (2.0, 3.0)}), "low <= high"),
        (dict(regions={"F1_1": (0.0, 1.0), "F2": (2.0, 3.0)}), "training regions"),
    ],
)
def test_inconsistent_family_specs_are_rejected(overrides, match):
    with pytest.raises(TaskextrapError, match=match):
        _family(**overrides)


def test_family_call_rejects_bad_shapes():
    fam = PARAMETER_FAMILIES["quadratic"]
    with pytest.raises(TaskextrapError):
        fam(np.ones((2, 2)), np.ones((2, 3)))  # wrong number of parameters
    with pytest.raises(TaskextrapError):
        fam(np.ones((2, 3)), np.ones((3, 3)))  # rows do not match


def test_design_md_damped_example_constructs_and_evaluates():
    damped = ParametricFamily(
        name="damped",
        fn=lambda x, A, gamma, omega: A * np.exp(-gamma * x) * np.cos(omega * x),
        domain=(0.0, 20.0),
        fixed={"A": (0.5, 1.5), "gamma": (0.05, 0.1)},
        shift="omega",
        regions={"F1_1": (0.5, 0.8), "F1_2": (0.8, 1.1), "F2": (1.1, 1.4)},
    )
    assert damped.param_names == ("omega", "A", "gamma")
    assert damped.held_out_regions == ("F2",)
    # params are in param_names order: omega first
    y = damped(np.array([[1.0, 1.2, 0.1]]), np.array([[0.0, 5.0, np.pi]]))
    np.testing.assert_allclose(y[0], [1.2, 1.2 * np.exp(-0.5) * np.cos(5.0), 1.2 * np.exp(-0.1 * np.pi) * -1.0])
    lib = TaskSet.sample(damped, {"F1_1": 5, "F1_2": 5}, np.random.default_rng(0))
    vals = lib.values(np.broadcast_to(damped.grid(11), (10, 11)))
    assert vals.shape == (10, 11) and np.all(np.isfinite(vals))
    assert set(damped.region_of(lib.params)) == {"F1_1", "F1_2"}
    assert get_family(damped) is damped
    assert damped.output_range(np.random.default_rng(0)) > 0


def test_get_family_by_name_and_errors():
    assert get_family("cubic") is PARAMETER_FAMILIES["cubic"]
    with pytest.raises(TaskextrapError, match="unknown family"):
        get_family("nosuchfamily")
    with pytest.raises(TaskextrapError, match="cannot import"):
        get_family("nosuchmodule_taskextrap_test:x")
    with pytest.raises(TaskextrapError, match="no attribute"):
        get_family("taskextrap.tasks.builtin:NOPE")
    with pytest.raises(TaskextrapError, match="not a taskextrap"):
        get_family("taskextrap.tasks.builtin:PERIOD")
    # a module:attr family without F1_1/F1_2/F2 cannot run the parameter experiment
    with pytest.raises(TaskextrapError, match="F1_1"):
        get_family("taskextrap.tasks.builtin:PROJECTILE")
    assert get_family("taskextrap.tasks.builtin:QUADRATIC") is PARAMETER_FAMILIES["quadratic"]
