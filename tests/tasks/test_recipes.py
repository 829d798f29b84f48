"""Depth-3 recipes: the held-out rule, the dev split, identity padding, the rescaled primitives."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng
from taskextrap.tasks.chains import (
    DEPTH3_FAMILIES,
    DEPTH3_GRID,
    IDENTITY_NAME,
    PAPER_RECIPE_SPLIT,
    ChainSet,
    RecipeSplit,
    dev_recipe_split,
    holds,
    identity_index,
    padded,
    recipe_name,
    with_identity,
)
from taskextrap.tasks.primitives import PrimitiveSet


def test_the_paper_rule_holds_out_the_6_recipes_that_apply_tanh_to_a_sin_output():
    s = PAPER_RECIPE_SPLIT
    assert (len(s.train), len(s.test)) == (21, 6)
    # outermost first: tanh directly after sin means "tanh" right before "sin" in the tuple
    assert set(s.test) == {r for r in s.train + s.test if r[:2] == ("tanh", "sin") or r[1:] == ("tanh", "sin")}
    assert set(s.train) | set(s.test) == {(a, b, c) for a in s.families for b in s.families for c in s.families}
    assert "tanh o sin o poly" in s.test_labels() and not s.test_labels() & s.training_labels()
    # shallower compositions pad to depth 3 with identities outermost; tanh o sin stays out
    shallow = s.shallow()
    assert len(shallow) == 3 + 8 and all(len(r) == 3 and r[0] == IDENTITY_NAME for r in shallow)
    assert ("identity", "tanh", "sin") not in shallow and "tanh o sin" not in s.training_labels()
    assert "primitive:identity" in s.training_labels() and "primitive:identity" not in s.training_labels(identity=False)


def test_identities_do_not_count_in_names_or_in_the_rule():
    assert recipe_name(("identity", "sin", "poly")) == "sin o poly"
    assert padded(("sin", "poly"), 3) == ("identity", "sin", "poly")
    assert holds(("tanh", "identity", "sin"), ("tanh", "sin"))
    assert not holds(("sin", "identity", "tanh"), ("tanh", "sin"))
    with pytest.raises(TaskextrapError, match="deeper than 2"):
        padded(("sin", "poly", "tanh"), 2)


def test_dev_split_holds_out_a_training_relation_and_never_the_real_test_recipes():
    dev = dev_recipe_split(PAPER_RECIPE_SPLIT)
    assert dev.held_out == (("tanh", "sin"), ("poly", "sin"))
    assert (len(dev.train), len(dev.test)) == (15, 6)
    assert set(dev.test) <= set(PAPER_RECIPE_SPLIT.train) and set(dev.train) <= set(PAPER_RECIPE_SPLIT.train)
    assert not set(dev.test) & set(dev.train)
    assert not (set(dev.train) | set(dev.test)) & set(PAPER_RECIPE_SPLIT.test)
    assert all(holds(r, ("poly", "sin")) for r in dev.test)
    assert not {recipe_name(r) for r in dev.shallow()} & {"poly o sin", "tanh o sin"}


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(families=("poly", "poly"), depth=3, held_out=(("poly", "poly"),)), "distinct"),
        (dict(families=("poly", "sin"), depth=1, held_out=(("poly", "sin"),)), "depth"),
        (dict(families=("poly", "sin"), depth=3, held_out=(("poly", "cos"),)), "held_out"),
        (dict(families=("poly",), depth=2, held_out=(("poly", "poly"),)), "no training recipe"),
    ],
)
def test_bad_recipe_splits_are_one_line_errors(bad, match):
    with pytest.raises(TaskextrapError, match=match) as e:
        RecipeSplit(**bad)
    assert "\n" not in str(e.value)


def test_rescaled_primitives_span_minus_5_to_5_on_the_domain_and_the_identity_is_appended():
    prims = PrimitiveSet.sample(DEPTH3_FAMILIES, 4, rng(0, "test-depth3"), grid=DEPTH3_GRID)
    y = prims.exact(np.broadcast_to(np.linspace(-5, 5, 100), (len(prims), 100)))
    np.testing.assert_allclose(y.min(axis=1), -5.0, atol=1e-9)
    np.testing.assert_allclose(y.max(axis=1), 5.0, atol=1e-9)
    lib = with_identity(prims)
    i = identity_index(lib)
    assert i == len(prims) and identity_index(prims) is None and with_identity(lib) is lib
    np.testing.assert_array_equal(lib.curves[:-1], prims.curves)
    x = np.array([[-4.2, 0.3, 5.0]])
    np.testing.assert_allclose(lib.exact(x, np.array([i])), x)
    np.testing.assert_allclose(lib.interp(x, np.array([i])), x)
    chains = ChainSet.sample(lib, (("identity", "sin", "poly"),), 3, np.random.default_rng(0))
    assert list(chains.family.task_labels(chains.params)) == ["sin o poly"] * 3
    direct = lib.exact(lib.exact(x.repeat(3, 0), chains.chains[:, 2]), chains.chains[:, 1])
    np.testing.assert_allclose(chains.values(x.repeat(3, 0)), direct)
