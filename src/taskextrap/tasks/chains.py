"""Deeper compositions of primitives (the paper's multi-step compositional regime, App. B.1.2).

A *recipe* is an ordered tuple of family names, outermost first: ``("tanh", "sin", "poly")`` is
the recipe of h = tanh o sin o poly (poly applied first). A *chain* is a recipe filled with
library primitives: ``params`` (n, depth) library indices, outermost first, as the depth-2
regime's (outer, inner) pairs.

Which recipes are held out is a :class:`RecipeSplit`, built by a rule on *relations*: a relation
(f, g) is "f applied directly to a g output"; a recipe holding a held-out relation anywhere in
its chain (after removing identities) is held out. The paper's rule holds out (tanh, sin):
6 of the 27 depth-3 recipes, 21 train.

The library may hold the *identity* primitive (:func:`with_identity`), which pads a shallower
composition to the full depth, outermost slots first: sin o poly is ``("identity", "sin",
"poly")``. Its name in recipes is ``"identity"`` and it never counts in a recipe's name
(:func:`recipe_name`) or in the held-out rule.

The depth-3 primitives are the authors' (reference §8.1): poly a x^2 + b x + c (a, b, c in
[-1, 1]), sin(w x + phi), tanh(w (x - c)), each rescaled affinely so that its minimum and maximum
over 100 evenly spaced points of the domain are exactly -5 and +5.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.primitives import PrimitiveFamily, PrimitiveSet
from taskextrap.validation import as_index_array, check_instance, check_int, check_real, check_rng, describe

IDENTITY_NAME = "identity"
IDENTITY = PrimitiveFamily(IDENTITY_NAME, lambda x: x, {})


def rescaled(raw, domain=(-5.0, 5.0), points: int = 100, span=(-5.0, 5.0)):
    """``fn(x, **params)`` of ``raw`` mapped affinely so that its min and max over ``points``
    evenly spaced inputs of ``domain`` are ``span`` (the authors' depth-3 primitives). Exact at
    any x: each call recomputes the primitive's own min and max on the fixed grid."""
    grid = np.linspace(domain[0], domain[1], points)
    lo_s, hi_s = span

    def fn(x, **params):
        ref = np.asarray(raw(grid, **params), dtype=float)  # (n, points) for (n, 1) parameters
        lo, hi = ref.min(axis=-1, keepdims=True), ref.max(axis=-1, keepdims=True)
        return lo_s + (hi_s - lo_s) * (raw(x, **params) - lo) / (hi - lo)

    return fn


def _poly(x, a, b, c):
    return a * x**2 + b * x + c


def _sin(x, w, phi):
    return np.sin(w * x + phi)


def _tanh(x, w, c):
    return np.tanh(w * (x - c))


_RAW: dict[str, tuple[Callable[..., np.ndarray], dict[str, tuple[float, float]]]] = {
    "poly": (_poly, {"a": (-1.0, 1.0), "b": (-1.0, 1.0), "c": (-1.0, 1.0)}),
    "sin": (_sin, {"w": (0.5, 1.5), "phi": (0.0, np.pi)}),
    "tanh": (_tanh, {"w": (0.5, 2.0), "c": (-2.0, 2.0)}),
}

# The authors' depth-3 families, rescaled to [-5, 5] on the domain (reference §8.1), and the same
# families without the rescaling (whose poly o poly o poly chains reach |h| ~ 10^4).
DEPTH3_FAMILIES = tuple(PrimitiveFamily(name, rescaled(fn), params) for name, (fn, params) in _RAW.items())
RAW_DEPTH3_FAMILIES = tuple(PrimitiveFamily(name, fn, params) for name, (fn, params) in _RAW.items())
DEPTH3_GRID = np.linspace(-6.0, 6.0, 601)  # stored curves: the rescaled values stay within about +-5


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


def with_identity(primitives: PrimitiveSet) -> PrimitiveSet:
    """The library with the identity primitive appended (index ``len(primitives)``), its curve the
    grid itself; the other primitives keep their indices."""
    check_instance("primitives", primitives, PrimitiveSet, "a PrimitiveSet (see taskextrap.tasks.primitives)")
    if IDENTITY_NAME in [f.name for f in primitives.families]:
        return primitives
    width = 0 if primitives.params is None else primitives.params.shape[1]
    params = None if primitives.params is None else np.vstack([primitives.params, np.zeros((1, width))])
    families = (*primitives.families, IDENTITY)
    return PrimitiveSet(
        families,
        np.append(primitives.family, len(primitives.families)),
        params,
        primitives.grid,
        np.vstack([primitives.curves, primitives.grid[None]]),
        primitives.domain,
        primitives.name,
    )


def identity_index(primitives: PrimitiveSet) -> int | None:
    """The library index of the identity primitive (None when the library has none)."""
    names = primitives.family_names
    where = np.flatnonzero(names == IDENTITY_NAME)
    return int(where[0]) if len(where) else None


@dataclass(frozen=True)
class Chainer:
    """The chain 'family': evaluates chains ``params`` (n, depth) of library indices exactly,
    innermost (last column) first; names them by their recipe for the leak audit."""

    primitives: PrimitiveSet
    train_recipes: tuple[tuple[str, ...], ...]
    name: str = "composition-depth3"

    @property
    def domain(self) -> tuple[float, float]:
        """Where chains are observed: the primitives' domain."""
        return self.primitives.domain

    def grid(self, m: int) -> np.ndarray:
        """``m`` evenly spaced inputs over the domain."""
        return np.linspace(*self.domain, m)

    def __call__(self, chains: np.ndarray, x: np.ndarray) -> np.ndarray:
        """h(x) for chains (n, depth), outermost first, at ``x`` (n, m)."""
        chains = np.asarray(chains).astype(int)
        v = np.asarray(x, dtype=float)
        for j in range(chains.shape[1] - 1, -1, -1):
            v = self.primitives.exact(v, chains[:, j])
        return v

    def task_labels(self, chains: np.ndarray) -> np.ndarray:
        """The leak audit's name of each chain: its recipe (``"tanh o sin o poly"``, no identities)."""
        names = self.primitives.family_names[np.asarray(chains).astype(int)]
        return np.array([recipe_name(r) for r in names], dtype=object)

    def output_range(self, rng: np.random.Generator, n: int = 512, m: int = 200) -> float:
        """Spread of the outputs of training-recipe chains over the domain (no held-out recipe)."""
        chains = ChainSet.sample(self.primitives, self.train_recipes, n, rng).params
        y = self(chains, np.broadcast_to(self.grid(m), (n, m)))
        return float(y.max() - y.min())


@dataclass(frozen=True)
class ChainSet:
    """Tasks h = r_1 o ... o r_d: ``params`` (n, d) library indices, outermost first, with their recipes."""

    family: Chainer
    params: np.ndarray
    recipe: np.ndarray = field(repr=False)  # (n, d) family names, outermost first

    def __len__(self) -> int:
        return len(self.params)

    @property
    def chains(self) -> np.ndarray:
        """Library indices (n, d), outermost first."""
        return self.params.astype(int)

    @property
    def region(self) -> np.ndarray:
        """Each task's recipe name ("tanh o sin o poly")."""
        return np.array([recipe_name(r) for r in self.recipe], dtype=object)

    @classmethod
    def sample(
        cls,
        primitives: PrimitiveSet,
        recipes,
        n: int,
        rng: np.random.Generator,
        pool: np.ndarray | None = None,
        train_recipes=None,
        weights=None,
    ) -> ChainSet:
        """``n`` chains: a recipe from ``recipes`` (uniform, or by ``weights``), then members of
        ``pool`` (default all) of each slot's family. ``train_recipes`` (default ``recipes``) are
        the recipes the noise scale is measured on."""
        check_instance("primitives", primitives, PrimitiveSet, "a PrimitiveSet (see taskextrap.tasks.primitives)")
        if not isinstance(recipes, (tuple, list)) or not recipes:
            raise TaskextrapError(f"recipes must be a non-empty tuple of recipes, got {describe(recipes)}")
        recipes = [_check_names("a recipe", r) for r in recipes]
        depth = len(recipes[0])
        if any(len(r) != depth for r in recipes):
            raise TaskextrapError("every recipe must have the same depth")
        check_int("n", n, 1)
        check_rng("rng", rng)
        pool = np.arange(len(primitives)) if pool is None else as_index_array("pool", pool, len(primitives))
        names = primitives.family_names[pool]
        by_family = {name: pool[names == name] for name in set(names)}
        missing = {f for r in recipes for f in r} - set(by_family)
        if missing:
            raise TaskextrapError(f"no library primitive of family {sorted(missing)}")
        if weights is None:
            which = rng.integers(len(recipes), size=n)
        else:
            w = np.asarray(weights, dtype=float)
            if w.shape != (len(recipes),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise TaskextrapError("weights must be one non-negative number per recipe, not all 0")
            which = rng.choice(len(recipes), size=n, p=w / w.sum())
        out = np.empty((n, depth), dtype=int)
        for j, recipe in enumerate(recipes):
            rows = np.flatnonzero(which == j)
            for s, f in enumerate(recipe):
                out[rows, s] = by_family[f][rng.integers(len(by_family[f]), size=len(rows))]
        recipe = np.array(recipes, dtype=object)[which].reshape(n, depth)
        train = tuple(tuple(r) for r in (train_recipes if train_recipes else recipes))
        return cls(Chainer(primitives, train), out.astype(float), recipe)

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Exact values of tasks ``index`` (all by default) at ``x`` of shape (len(index), m)."""
        params = self.params if index is None else self.params[index]
        return self.family(params, x)

    def subset(self, index) -> ChainSet:
        """The tasks at ``index`` (an index array or boolean mask)."""
        return ChainSet(self.family, self.params[index], self.recipe[index])


def check_share(name: str, value) -> float:
    """A share in [0, 1)."""
    return check_real(name, value, 0.0, 1.0, max_open=True)
