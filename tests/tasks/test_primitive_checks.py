"""A primitive set (CompositionFamily) for the composition regime: what it refuses, in one line naming
the set and the primitive family; the built-in sets are the paper's; a primitive must return exactly
x's shape and depend on x; the docstring examples of the public task objects run."""

import doctest
import sys

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.tasks import PRIMITIVE_SETS, CompositionFamily, PairSplit, PrimitiveFamily, get_primitive_set
from taskextrap.tasks.builtin import POLY_SIN_TANH, POLY_SIN_TANH_RESCALED
from taskextrap.tasks.chains import (
    DEPTH3_FAMILIES,
    DEPTH3_GRID,
    PAPER_RECIPE_SPLIT,
    RAW_DEPTH3_FAMILIES,
    RecipeSplit,
    dev_recipe_split,
)
from taskextrap.tasks.dev import dev_pair_split
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.ladder import Ladder
from taskextrap.tasks.primitives import PAPER_SPLIT, PRIMITIVE_FAMILIES, PrimitiveSet
from taskextrap.tasks.registry import check_primitives

SIN = PrimitiveFamily("sin", lambda x, A, w: A * np.sin(w * x), {"A": (0.5, 2.0), "w": (0.5, 1.5)})
BUMP = PrimitiveFamily("bump", lambda x, a, w: a * np.exp(-((w * x) ** 2)), {"a": (0.5, 2.0), "w": (0.2, 1.0)})
SPLIT = PairSplit(train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump")), test=(("bump", "sin"),))


def waves(*families, **kw) -> CompositionFamily:
    """A two-family set (sin and bump, or ``families`` under those names) with the split above."""
    return CompositionFamily(kw.pop("name", "waves"), families or (SIN, BUMP), kw.pop("split", SPLIT), **kw)


def bump_with(fn) -> PrimitiveFamily:
    return PrimitiveFamily("bump", fn, {"a": (0.5, 2.0), "w": (0.2, 1.0)})


# --- the built-in sets ---------------------------------------------------------------------------


def test_the_built_in_sets_are_the_papers_families_splits_and_grids():
    assert list(PRIMITIVE_SETS) == ["poly-sin-tanh", "poly-sin-tanh-rescaled"]
    assert POLY_SIN_TANH.families == PRIMITIVE_FAMILIES and POLY_SIN_TANH.split is PAPER_SPLIT
    assert POLY_SIN_TANH.domain == (-5.0, 5.0)
    assert np.array_equal(POLY_SIN_TANH.curve_grid(), np.linspace(-10.0, 10.0, 401))
    assert POLY_SIN_TANH_RESCALED.families == DEPTH3_FAMILIES
    assert np.array_equal(POLY_SIN_TANH_RESCALED.curve_grid(), DEPTH3_GRID)
    for s in PRIMITIVE_SETS.values():
        assert s.recipe_split is PAPER_RECIPE_SPLIT
        check_primitives(s)  # the built-in sets pass the check a user's set gets
        assert get_primitive_set(s.name) is s and get_primitive_set(s) is s


def test_a_sets_library_is_primitive_set_sample_with_its_grid_and_domain():
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    lib = POLY_SIN_TANH.library(5, g1)
    legacy = PrimitiveSet.sample(PRIMITIVE_FAMILIES, 5, g2)  # the default grid and domain
    assert np.array_equal(lib.curves, legacy.curves) and np.array_equal(lib.params, legacy.params)
    assert np.array_equal(lib.grid, legacy.grid) and lib.domain == legacy.domain


@pytest.mark.parametrize("family", PRIMITIVE_FAMILIES + DEPTH3_FAMILIES + RAW_DEPTH3_FAMILIES, ids=lambda f: f.name)
def test_built_in_primitive_values_are_bit_identical_to_the_broadcast_they_replaced(family):
    g = np.random.default_rng(11)
    params, x = family.sample(40, g), g.uniform(-10.0, 10.0, size=(40, 23))
    kwargs = {k: params[:, i : i + 1] for i, k in enumerate(family.params)}
    before = np.broadcast_to(np.asarray(family.fn(x, **kwargs), dtype=float), x.shape).copy()
    assert np.array_equal(family(params, x), before)


# --- PrimitiveFamily and PrimitiveSet.sample (the Python API) ------------------------------------


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda x, a, w: a * w, r"returned shape \(4, 1\) for x of shape \(4, 3\)"),  # a column: ignores x
        (lambda x, a, w: (a * x)[:, :1], r"returned shape \(4, 1\)"),
        (lambda x, a, w: np.float64(1.0), r"returned shape \(\)"),  # a scalar
        (lambda x, a, w: a * x + 1j, "returned complex128 values"),
    ],
)
def test_a_primitive_of_another_shape_than_x_is_refused_naming_it(fn, match):
    with pytest.raises(TaskextrapError, match=f"primitive family 'bump': fn {match}") as info:
        bump_with(fn)(np.ones((4, 2)), np.zeros((4, 3)))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda x, a, w: a + w, r"primitive family 'bump': fn returned shape \(5, 1\) for x of shape \(5, 401\)"),
        (lambda x, a, w: a + 0.0 * x, "primitive family 'bump': fn does not depend on x"),
    ],
)
def test_sampling_a_library_refuses_a_primitive_that_ignores_x(fn, match):
    with pytest.raises(TaskextrapError, match=match) as info:
        PrimitiveSet.sample((SIN, bump_with(fn)), 5, np.random.default_rng(0))
    assert "\n" not in str(info.value)


# --- check_primitives (the command line's check, before any work) --------------------------------


@pytest.mark.parametrize(
    "fn, match",
    [
        (
            lambda x, a, w: a * w,
            r"its fn returned shape \(8, 1\) for inputs x of shape \(8, 16\); it must return exactly",
        ),
        (lambda x, a, w: np.float64(2.0), r"its fn returned shape \(\)"),
        (lambda x, a, w: a + 0.0 * x, "its fn does not depend on x"),
        (lambda x, a, w: a * np.log(x), "returned NaN or inf"),  # NaN on the grid's negative half
        (lambda x, a, w: a * x + 1j, "complex128 values"),
        (lambda x, a, w: a * undefined_name, "raised NameError"),  # noqa: F821
        (lambda x, b: b * x, "raised TypeError"),  # wrong parameter names
    ],
)
def test_check_primitives_refuses_a_broken_primitive_in_one_line_naming_set_and_family(fn, match):
    with pytest.raises(TaskextrapError, match=match) as info:
        check_primitives(waves(SIN, bump_with(fn)), "primitive set 'mod:waves'")
    text = str(info.value)
    assert text.startswith("primitive set 'mod:waves', primitive family 'bump'") and "\n" not in text


def test_check_primitives_refuses_a_family_without_parameters():
    flat = PrimitiveFamily("bump", lambda x: np.sin(x), {})
    with pytest.raises(TaskextrapError, match="primitive family 'bump': params is empty"):
        check_primitives(waves(SIN, flat))


def test_check_primitives_evaluates_over_the_curve_grid_not_only_the_domain():
    sqrt = bump_with(lambda x, a, w: a * np.sqrt(x + 6.0))  # finite on the domain [-5, 5] only
    with pytest.raises(TaskextrapError, match="NaN or inf"):
        check_primitives(waves(SIN, sqrt))
    check_primitives(waves(SIN, sqrt, grid=(-6.0, 6.0, 121)))  # a grid where it is finite passes


# --- CompositionFamily: what cannot work is refused when it is built -----------------------------


@pytest.mark.parametrize(
    "build, match",
    [
        (
            lambda: CompositionFamily("one", (SIN,), PairSplit((("sin", "sin"),), (("sin", "sin"),))),
            "both trained and held out",
        ),
        (lambda: CompositionFamily("one", (SIN,), SPLIT), "needs at least 2 primitive families"),
        (
            lambda: waves(split=PairSplit((("sin", "sin"), ("cos", "sin")), (("bump", "sin"),))),
            r"its pair split names \['cos'\], not families of the set \['sin', 'bump'\]",
        ),
        (lambda: waves(split=PairSplit((("sin", "sin"),), (("sin", "sin2"),))), r"names \['sin2'\]"),
        (lambda: waves(split=PairSplit((("sin", "sin"),), (("sin", "bump"),))), None),  # bump in a held-out pair only
        (
            lambda: CompositionFamily(
                "w", (SIN, BUMP, PrimitiveFamily("tri", lambda x, a: a * x, {"a": (1.0, 2.0)})), SPLIT
            ),
            r"its pair split names no pair of \['tri'\]",
        ),
        (lambda: waves(SIN, PrimitiveFamily("sin", BUMP.fn, BUMP.params)), "family names must be distinct"),
        (lambda: waves(SIN, PrimitiveFamily("identity", BUMP.fn, BUMP.params)), "not 'identity'"),
        (lambda: waves(name="my set/1"), "must be letters, digits"),
        (lambda: waves(name=""), "CompositionFamily name must be a non-empty string"),
        (lambda: CompositionFamily("w", [SIN, "bump"], SPLIT), "families must be a tuple of PrimitiveFamily"),
        (lambda: CompositionFamily("w", (SIN, BUMP), (("sin", "bump"),)), "split must be a PairSplit"),
        (lambda: waves(domain=(5.0, -5.0)), "domain"),
        (lambda: waves(grid=(-4.0, 4.0, 101)), r"the curve grid \[-4.0, 4.0\] must cover the domain"),
        (lambda: waves(grid=(-10.0, 10.0, 1)), "grid points"),
        (lambda: waves(grid=np.linspace(-10, 10, 5)), r"grid must be \(low, high, points\)"),
        (lambda: waves(recipe_split=RecipeSplit(("sin", "bump"), 2, (("bump", "sin"),))), "must have depth 3"),
        (lambda: waves(recipe_split=PAPER_RECIPE_SPLIT), r"its recipe split names \['poly', 'tanh'\]"),
        (lambda: waves(recipe_split=(("bump", "sin"),)), "recipe_split must be a RecipeSplit"),
    ],
)
def test_a_set_that_cannot_work_is_refused_in_one_line(build, match):
    if match is None:
        assert isinstance(build(), CompositionFamily)
        return
    with pytest.raises(TaskextrapError, match=match) as info:
        build()
    assert "\n" not in str(info.value)


def test_a_set_takes_lists_and_records_checked_values():
    s = CompositionFamily("w", [SIN, BUMP], SPLIT, domain=(-2, 2), grid=[-3, 3, 61])
    assert s.families == (SIN, BUMP) and s.domain == (-2.0, 2.0) and s.grid == (-3.0, 3.0, 61)
    assert s.family_names == ("sin", "bump") and len(s.curve_grid()) == 61
    assert s.library(3, np.random.default_rng(0)).domain == (-2.0, 2.0)


# --- resolving a set by name or module:attr ------------------------------------------------------


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write ``name.py`` with ``body`` into a folder on sys.path; forget it again afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(name: str, body: str):
        (tmp_path / f"{name}.py").write_text(body)
        sys.modules.pop(name, None)
        written.append(name)

    yield write
    for name in written:
        sys.modules.pop(name, None)


HEADER = (
    "import numpy as np\nfrom taskextrap.tasks import CompositionFamily, PairSplit, PrimitiveFamily\n"
    "from taskextrap.tasks.chains import RecipeSplit\n"
    "SIN = PrimitiveFamily('sin', lambda x, A, w: A * np.sin(w * x), {'A': (0.5, 2.0), 'w': (0.5, 1.5)})\n"
    "SPLIT = PairSplit(train=(('sin', 'sin'), ('bump', 'bump'), ('sin', 'bump')), test=(('bump', 'sin'),))\n"
)


def set_module(bump: str, extra: str = "") -> str:
    return HEADER + (
        f"BUMP = PrimitiveFamily('bump', lambda x, a, w: {bump}, {{'a': (0.5, 2.0), 'w': (0.2, 1.0)}})\n"
        f"WAVES = CompositionFamily('waves', (SIN, BUMP), SPLIT{extra})\n"
    )


def test_get_primitive_set_loads_and_checks_a_users_set(user_module):
    user_module("goodset", set_module("a * np.exp(-(w * x) ** 2)"))
    s = get_primitive_set("goodset:WAVES")
    assert s.name == "waves" and s.family_names == ("sin", "bump")
    user_module("flatset", set_module("a * w"))
    with pytest.raises(
        TaskextrapError,
        match=r"primitive set 'flatset:WAVES', primitive family 'bump': its fn "
        r"returned shape \(8, 1\)",
    ):
        get_primitive_set("flatset:WAVES")


@pytest.mark.parametrize(
    "spec, match",
    [
        (
            "poly-sin-tanhh",
            (
                r"unknown primitive set 'poly-sin-tanhh'; choose from \['poly-sin-tanh', "
                r"'poly-sin-tanh-rescaled'\] or module:attr.*did you mean"
            ),
        ),
        ("goodset:SIN", "is a PrimitiveFamily, not a taskextrap.tasks.primitives.CompositionFamily"),
        ("goodset:SPLIT", "is a PairSplit, not a"),
        ("oneset:WAVES", "importing 'oneset' failed: TaskextrapError: primitive set 'waves': needs at least 2"),
    ],
)
def test_a_spec_that_is_not_a_set_is_one_line(user_module, spec, match):
    user_module("goodset", set_module("a * np.exp(-(w * x) ** 2)"))
    user_module("oneset", HEADER + "WAVES = CompositionFamily('waves', (SIN,), SPLIT)\n")
    with pytest.raises(TaskextrapError, match=match) as info:
        get_primitive_set(spec)
    assert "\n" not in str(info.value)


def test_depth3_needs_a_recipe_split(user_module):
    user_module("goodset", set_module("a * np.exp(-(w * x) ** 2)"))
    with pytest.raises(
        TaskextrapError, match="primitive set 'goodset:WAVES': composition-depth3 needs its recipe_split"
    ):
        get_primitive_set("goodset:WAVES", depth3=True)
    user_module(
        "deepset",
        set_module("a * np.exp(-(w * x) ** 2)", ", recipe_split=RecipeSplit(('sin', 'bump'), 3, (('bump', 'sin'),))"),
    )
    assert get_primitive_set("deepset:WAVES", depth3=True).recipe_split.depth == 3


def test_dev_splits_of_a_users_set():
    pairs = dev_pair_split(SPLIT)
    assert pairs.test == (("sin", "bump"),) and pairs.train == (("sin", "sin"), ("bump", "bump"))
    recipes = RecipeSplit(("sin", "bump"), 3, (("bump", "sin"),))
    dev = dev_recipe_split(recipes)
    assert set(dev.test) <= set(recipes.train) and not set(dev.train) & set(recipes.test)
    with pytest.raises(
        TaskextrapError,
        match=r"^primitive set 'waves': a dev split holds out a training pair of two different families .* "
        r"trains on \['sin o bump'\]: no other training pair to train on$",
    ):
        dev_pair_split(PairSplit(train=(("sin", "bump"),), test=(("bump", "sin"),)), "primitive set 'waves'")
    with pytest.raises(TaskextrapError, match=r"^the pair split: .*: no training pair of two different families$"):
        dev_pair_split(PairSplit(train=(("sin", "sin"), ("bump", "bump")), test=(("bump", "sin"),)))
    both = RecipeSplit(("sin", "bump"), 3, (("bump", "sin"), ("sin", "bump")))
    with pytest.raises(TaskextrapError, match=r"^primitive set 'waves': .*every cross-family relation is held out"):
        dev_recipe_split(both, "primitive set 'waves'")
    only = RecipeSplit(("a", "b"), 2, (("a", "a"), ("b", "b"), ("b", "a")))  # trains on a o b alone
    with pytest.raises(TaskextrapError, match=r"^the recipe split: .*no other cross-family relation \(a o b\) is held"):
        dev_recipe_split(only)


# --- the docstring examples of the public task objects run ---------------------------------------


@pytest.mark.parametrize(
    "obj",
    [PrimitiveFamily, PairSplit, CompositionFamily, RecipeSplit, ParametricFamily, Ladder],
    ids=lambda o: o.__name__,
)
def test_docstring_examples_run(obj):
    tests = doctest.DocTestFinder(recurse=False).find(obj, obj.__name__, globs={})
    assert tests and tests[0].examples, f"{obj.__name__} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0
