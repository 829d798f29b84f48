"""Shape checks that hold for ladders and parametric families: a basis term p >= 1 or a formula that
ignores x, or returns a broadcastable (n, 1) or scalar instead of x's shape, is refused in one line
naming it, at check time (the command line) and when the Python API evaluates it."""

import dataclasses

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.builtin import PARAMETER_FAMILIES
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder
from taskextrap.tasks.registry import check_ladder, get_family


def ladder(basis) -> Ladder:
    return Ladder("mine", basis=basis, domain=(-1.0, 1.0), train_levels=(1, 2, 3), test_level=4)


@pytest.mark.parametrize(
    "basis, match",
    [
        (
            lambda x, p: np.ones_like(x) * 0.5 if p == 2 else x**p,
            (
                r"basis term 2 \(level 2\) does not depend on x; only "
                r"term 0 \(the constant term\) may be constant"
            ),
        ),
        (
            lambda x, p: (x**p)[:, :1] if p == 3 else x**p,
            (
                r"basis term 3 \(level 3\) returned shape \(8, 1\) for "
                r"inputs x of shape \(8, 16\); it must return exactly"
            ),
        ),
        (lambda x, p: np.float64(2.0) if p == 1 else x**p, r"basis term 1 \(level 1\) returned shape \(\)"),
    ],
)
def test_check_ladder_refuses_a_term_that_ignores_x_or_is_not_xs_shape(basis, match):
    with pytest.raises(TaskextrapError, match=f"ladder 'mine': {match}") as info:
        check_ladder(ladder(basis))
    assert "\n" not in str(info.value)


def test_the_constant_term_may_be_constant():
    check_ladder(ladder(lambda x, p: np.ones_like(x) if p == 0 else np.sin(p * x)))
    check_ladder(POLYNOMIAL_LADDER)


def test_the_python_api_refuses_a_basis_term_of_another_shape():
    scalar = ladder(lambda x, p: 1.0 if p == 0 else x**p)
    x = np.zeros((2, 5))
    with pytest.raises(
        TaskextrapError,
        match=r"ladder 'mine': basis term 0 returned shape \(\) for x of shape "
        r"\(2, 5\).*np.ones_like\(x\)",
    ):
        scalar(np.ones((2, 5)), x)
    assert POLYNOMIAL_LADDER.basis_matrix(x).shape == (2, 5, 10)


def test_the_polynomial_ladder_values_are_unchanged():
    x = np.random.default_rng(0).uniform(-5.0, 5.0, size=(6, 9))
    before = np.stack([np.broadcast_to(POLYNOMIAL_LADDER.basis(x, p), x.shape) for p in range(10)], axis=-1)
    assert np.array_equal(POLYNOMIAL_LADDER.basis_matrix(x), before)


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda x, a, b, c: a + b + c, r"fn returned shape \(3, 1\) for x of shape \(3, 4\); it must return exactly"),
        (lambda x, a, b, c: np.float64(1.0), r"fn returned shape \(\)"),
    ],
)
def test_a_family_call_refuses_a_broadcastable_output(fn, match):
    fam = dataclasses.replace(PARAMETER_FAMILIES["quadratic"], fn=fn)
    params = fam.sample_params("F1_1", 3, np.random.default_rng(0))
    with pytest.raises(TaskextrapError, match=f"family 'quadratic': {match}"):
        fam(params, np.zeros((3, 4)))


@pytest.mark.parametrize("name", sorted(PARAMETER_FAMILIES))
def test_built_in_family_values_are_unchanged(name):
    fam = PARAMETER_FAMILIES[name]
    g = np.random.default_rng(1)
    params = np.concatenate([fam.sample_params(r, 5, g) for r in fam.regions])
    x = np.broadcast_to(fam.grid(30), (len(params), 30))
    kwargs = {k: params[:, i : i + 1] for i, k in enumerate(fam.param_names)}
    before = np.array(np.broadcast_to(np.asarray(fam.fn(x, **kwargs), dtype=float), x.shape))
    assert np.array_equal(fam(params, x), before)


def test_the_region_rule_is_stated_in_the_error():
    renamed = dataclasses.replace(
        PARAMETER_FAMILIES["quadratic"],
        regions={"a": (0.5, 1.5), "b": (1.5, 2.5), "c": (2.5, 3.5)},
        train_regions=("a", "b"),
    )
    with pytest.raises(
        TaskextrapError,
        match=r"needs regions named exactly F1_1, F1_2 \(train_regions\) and F2 "
        r"\(held out\), got regions \['a', 'b', 'c'\] with train_regions "
        r"\['a', 'b'\]",
    ):
        get_family(renamed)
