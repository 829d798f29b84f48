"""Recipes of deep compositions and their splits: which chains of primitive families train and
which are held out (``RecipeSplit``), named and padded with the identity. Below
``tasks.primitives`` and ``tasks.chains`` (both import it; it imports neither), so a primitive
set validates its recipe split without an import circle.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from taskextrap.errors import TaskextrapError
from taskextrap.validation import check_int, describe

IDENTITY_NAME = "identity"  # the padding primitive's family name, reserved


def recipe_name(recipe) -> str:
    """``"tanh o sin o poly"``: the recipe outermost first, identities left out."""
    parts = [f for f in recipe if f != IDENTITY_NAME]
    return " o ".join(parts) if parts else IDENTITY_NAME


def reduced(recipe) -> tuple[str, ...]:
    """The recipe without its identities."""
    return tuple(f for f in recipe if f != IDENTITY_NAME)


def holds(recipe, relation) -> bool:
    """Whether ``relation`` (f, g) -- f applied directly to a g output -- occurs in ``recipe``
    (identities removed: tanh o identity o sin applies tanh to a sin output)."""
    r = reduced(recipe)
    return any(tuple(r[i : i + 2]) == tuple(relation) for i in range(len(r) - 1))


def padded(recipe, depth: int) -> tuple[str, ...]:
    """``recipe`` padded to ``depth`` with identities in the outermost slots."""
    r = reduced(recipe)
    if len(r) > depth:
        raise TaskextrapError(f"recipe {recipe_name(recipe)!r} is deeper than {depth}")
    return (IDENTITY_NAME,) * (depth - len(r)) + r


def _check_names(what: str, names, allow_empty: bool = False) -> tuple[str, ...]:
    ok = (
        isinstance(names, (tuple, list))
        and (allow_empty or len(names) > 0)
        and all(isinstance(f, str) and f for f in names)
    )
    if not ok:
        raise TaskextrapError(f"{what} must be a non-empty tuple of family names, got {describe(names)}")
    return tuple(names)


@dataclass(frozen=True)
class RecipeSplit:
    """Which depth-``depth`` recipes train and which are held out, by a rule on relations.

    ``families`` are the primitive families; every recipe of ``depth`` families that holds a
    relation of ``held_out`` is a test recipe, every other one trains. Shallower compositions
    that hold no held-out relation (:meth:`shallow`) may also train, padded with the identity.

    Args:
        families: distinct primitive family names (not ``"identity"``).
        depth: the recipes' length, 2 to 6 (``composition-depth3``: 3).
        held_out: relations ``(f, g)``, "f applied directly to a g output", of these families;
            they must leave at least one training and one held-out recipe.

    Example:
        >>> from taskextrap.tasks.chains import RecipeSplit
        >>> split = RecipeSplit(("sin", "bump"), 3, held_out=(("bump", "sin"),))
        >>> len(split.train), len(split.test)     # of the 2 ** 3 recipes
        (4, 4)
    """

    families: tuple[str, ...]
    depth: int
    held_out: tuple[tuple[str, str], ...]
    train: tuple[tuple[str, ...], ...] = field(init=False, repr=False)
    test: tuple[tuple[str, ...], ...] = field(init=False, repr=False)

    def __post_init__(self):
        families = _check_names("recipe split families", self.families)
        if IDENTITY_NAME in families or len(set(families)) != len(families):
            raise TaskextrapError(f"recipe split families must be distinct and not {IDENTITY_NAME!r}, got {families}")
        check_int("recipe split depth", self.depth, 2, 6)
        if (
            not isinstance(self.held_out, (tuple, list))
            or not self.held_out
            or not all(
                isinstance(r, (tuple, list)) and len(r) == 2 and all(f in families for f in r) for r in self.held_out
            )
        ):
            raise TaskextrapError(
                f"held_out must be a non-empty tuple of (f, g) relations of the families "
                f"{families}, got {describe(self.held_out)}"
            )
        held = tuple(tuple(r) for r in self.held_out)
        recipes = list(itertools.product(families, repeat=self.depth))
        test = tuple(r for r in recipes if any(holds(r, rel) for rel in held))
        train = tuple(r for r in recipes if r not in test)
        if not train or not test:
            which = "training" if not train else "held-out"
            raise TaskextrapError(f"held-out relations {held} leave no {which} recipe")
        for name, value in (("families", families), ("held_out", held), ("train", train), ("test", test)):
            object.__setattr__(self, name, value)

    def shallow(self) -> tuple[tuple[str, ...], ...]:
        """Every composition of 1 .. depth-1 families holding no held-out relation, padded to
        ``depth`` with the identity (outermost first)."""
        out = []
        for d in range(1, self.depth):
            out += [
                padded(r, self.depth)
                for r in itertools.product(self.families, repeat=d)
                if not any(holds(r, rel) for rel in self.held_out)
            ]
        return tuple(out)

    def training_labels(self, identity: bool = True) -> set[str]:
        """The labels a fit may consume: the training recipes' names, the shallower compositions'
        (with ``identity``) and single library primitives (``primitive:<family>``)."""
        names = {recipe_name(r) for r in self.train}
        if identity:
            names |= {recipe_name(r) for r in self.shallow()}
        return names | {f"primitive:{f}" for f in self.families + ((IDENTITY_NAME,) if identity else ())}

    def test_labels(self) -> set[str]:
        """The held-out recipes' names."""
        return {recipe_name(r) for r in self.test}


# The paper's rule (App. B.1.2): no recipe applies tanh directly to a sin output.
PAPER_RECIPE_SPLIT = RecipeSplit(("poly", "sin", "tanh"), 3, (("tanh", "sin"),))


def dev_recipe_split(split: RecipeSplit, label: str = "the recipe split") -> RecipeSplit:
    """The recipe split's dev split: the first cross-family relation (f, g), in the order of the
    families, that is not held out already is held out too; its training recipes become the dev
    targets and the remaining training recipes train. The real held-out recipes stay out of both
    (for the paper's split: poly applied to a sin output; 6 dev recipes, 15 train). A split that
    has no such relation is refused in one line that starts with ``label`` (what the split
    belongs to, e.g. ``primitive set 'waves:waves'``)."""
    candidates = [(f, g) for f in split.families for g in split.families if f != g and (f, g) not in split.held_out]
    for rel in candidates:
        targets = tuple(r for r in split.train if holds(r, rel))
        if targets and any(not holds(r, rel) for r in split.train):  # dev targets, and recipes to train on
            dev = RecipeSplit(split.families, split.depth, (*split.held_out, rel))
            return DevRecipeSplit(split.families, split.depth, dev.held_out, targets=targets)
    why = (
        "every cross-family relation is held out already"
        if not candidates
        else "no other cross-family relation ("
        + ", ".join(f"{f} o {g}" for f, g in candidates)
        + ") is held by some training recipes and not by others"
    )
    raise TaskextrapError(
        f"{label}: a dev split holds out one more cross-family relation, whose training recipes become "
        f"the dev targets while the other training recipes train; {why}"
    )


@dataclass(frozen=True)
class DevRecipeSplit(RecipeSplit):
    """A dev split: held out like a :class:`RecipeSplit`, but its test recipes are only ``targets``
    (training recipes of the real split holding the dev relation); the real held-out recipes are
    neither trained nor tested."""

    targets: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        super().__post_init__()
        targets = tuple(tuple(r) for r in self.targets)
        if not targets or not set(targets) <= set(self.test):
            raise TaskextrapError("dev targets must be held-out recipes of the dev split")
        object.__setattr__(self, "targets", targets)
        object.__setattr__(self, "test", targets)
