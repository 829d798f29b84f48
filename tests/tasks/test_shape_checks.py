"""Shape checks that hold for ladders and parametric families: a basis term p >= 1 or a formula that
ignores x, or returns a broadcastable (n, 1) or scalar instead of x's shape, is refused in one line
naming it, at check time (the command line, and from Python the first task set of a family or
ladder) and when the Python API evaluates it."""

import dataclasses

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.provenance import callable_hash
from taskextrap.tasks.builtin import PARAMETER_FAMILIES, PRIMITIVE_SETS
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder, LadderSet
from taskextrap.tasks.registry import check_ladder, get_family, get_primitive_set
from taskextrap.tasks.taskset import TaskSet


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


def test_the_python_api_refuses_a_basis_term_of_text():
    """Families, ladders and primitives share one output check (validation.check_output)."""
    text = ladder(lambda x, p: np.full(x.shape, "a") if p == 1 else x**p)
    with pytest.raises(TaskextrapError, match=r"^ladder 'mine': basis term 1 returned <U1 values; it must return real"):
        text(np.ones((2, 5)), np.zeros((2, 5)))


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


# --- the Python API holds the docstrings' rules too: the first task set checks its family ----------


def test_a_task_set_of_a_family_that_ignores_x_is_refused_from_python():
    flat = dataclasses.replace(PARAMETER_FAMILIES["quadratic"], name="flat", fn=lambda x, a, b, c: a + 0.0 * x)
    with pytest.raises(TaskextrapError, match=r"^family 'flat', region 'F1_1': its formula does not depend on x"):
        TaskSet.sample(flat, {"F1_1": 4}, np.random.default_rng(0))
    params = np.ones((2, 3))
    with pytest.raises(TaskextrapError, match="does not depend on x"):  # a task set built by hand too
        TaskSet(flat, params, np.array(["F1_1", "F1_1"], dtype=object))


def test_a_task_set_of_a_family_that_is_not_finite_is_refused_from_python():
    log = dataclasses.replace(PARAMETER_FAMILIES["quadratic"], name="log", fn=lambda x, a, b, c: a * np.log(x - 10.0))
    with pytest.raises(TaskextrapError, match=r"^family 'log', region 'F1_1': its formula returned NaN or inf"):
        TaskSet.sample(log, {"F1_1": 4}, np.random.default_rng(0))


def test_a_ladder_set_of_a_constant_term_is_refused_from_python():
    const = ladder(lambda x, p: np.full_like(x, 0.5) if p == 2 else x**p)
    with pytest.raises(TaskextrapError, match=r"^ladder 'mine': basis term 2 \(level 2\) does not depend on x"):
        LadderSet.sample_library(const, 3, np.random.default_rng(0))


def test_a_family_and_a_ladder_are_checked_once_per_object():
    calls = []
    quadratic = PARAMETER_FAMILIES["quadratic"]
    counted = dataclasses.replace(quadratic, fn=lambda x, a, b, c: calls.append(1) or quadratic.fn(x, a, b, c))
    library = TaskSet.sample(counted, {"F1_1": 3, "F1_2": 3}, np.random.default_rng(0))
    checked = len(calls)
    assert checked == len(counted.regions)  # once per region
    library.subset([0, 1])
    TaskSet.sample(counted, {"F2": 2}, np.random.default_rng(1))
    assert len(calls) == checked  # no second check of the same object
    terms = []
    mine = ladder(lambda x, p: terms.append(p) or x**p)
    LadderSet.extend(LadderSet.sample_library(mine, 2, np.random.default_rng(0)), [0], np.random.default_rng(1))
    assert terms == list(range(mine.n_coefs))


def test_the_check_changes_no_draw_and_no_repr():
    quadratic = PARAMETER_FAMILIES["quadratic"]
    fresh = dataclasses.replace(quadratic)  # not checked yet
    tasks = TaskSet.sample(fresh, {"F1_1": 5, "F2": 3}, np.random.default_rng(7))
    g = np.random.default_rng(7)
    expected = np.concatenate([fresh.sample_params("F1_1", 5, g), fresh.sample_params("F2", 3, g)])
    assert np.array_equal(tasks.params, expected)
    assert repr(fresh) == repr(quadratic) and fresh == quadratic
    coefs = LadderSet.sample_library(dataclasses.replace(POLYNOMIAL_LADDER), 2, np.random.default_rng(3)).params
    g = np.random.default_rng(3)
    assert np.array_equal(coefs, np.concatenate([POLYNOMIAL_LADDER.sample_coefs(d, 2, g) for d in range(1, 9)]))


def test_the_check_leaves_no_trace_in_the_code_hash_of_a_formula_that_reads_the_family():
    """The memo is kept beside the family, not in it: the hash of a user's formula that reads a
    family object (``provenance.callable_hash`` hashes its attributes) is the same before and
    after that family was checked, so a unit's key does not depend on it."""
    base = dataclasses.replace(PARAMETER_FAMILIES["quadratic"])
    namespace = {"BASE": base}
    exec("def doubled(x, a, b, c):\n    return 2.0 * BASE.fn(x, a, b, c)\n", namespace)
    before, attributes = callable_hash(namespace["doubled"]), dict(vars(base))
    base.check()
    assert callable_hash(namespace["doubled"]) == before and vars(base) == attributes


def test_a_domain_too_wide_to_draw_from_is_one_line():
    wide = dataclasses.replace(PARAMETER_FAMILIES["quadratic"], name="wide", domain=(-1.7e308, 1.7e308))
    with pytest.raises(TaskextrapError, match=r"^family 'wide': its domain .* is too wide to draw inputs from$"):
        wide.check()


def test_a_primitive_grid_too_wide_to_draw_from_is_one_line():
    wide = dataclasses.replace(PRIMITIVE_SETS["poly-sin-tanh"], name="wide", grid=(-1.7e308, 1.7e308, 401))
    with pytest.raises(TaskextrapError, match=r"^primitive set 'wide': its domain .* is too wide to draw inputs from$"):
        get_primitive_set(wide)


def test_a_primitive_set_is_checked_once_per_object(monkeypatch):
    import taskextrap.tasks.registry as registry

    calls = []
    monkeypatch.setattr(registry, "check_primitives", lambda s, label=None: calls.append(s.name))
    own = dataclasses.replace(PRIMITIVE_SETS["poly-sin-tanh"], name="own")
    for _ in range(3):
        assert get_primitive_set(own) is own
    get_primitive_set(dataclasses.replace(own))  # an equal copy is another object: checked on its own
    get_primitive_set(PRIMITIVE_SETS["poly-sin-tanh"])  # a built-in set is never checked
    assert calls == ["own", "own"]
