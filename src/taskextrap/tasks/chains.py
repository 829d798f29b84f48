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

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.primitives import PrimitiveFamily, PrimitiveSet
from taskextrap.tasks.specs import register_builtins
from taskextrap.tasks.recipes import (  # noqa: F401 - the recipes, re-exported where they were
    IDENTITY_NAME,
    PAPER_RECIPE_SPLIT,
    DevRecipeSplit,
    RecipeSplit,
    _check_names,
    dev_recipe_split,
    holds,
    padded,
    recipe_name,
    reduced,
)
from taskextrap.validation import as_index_array, check_instance, check_int, check_real, check_rng, describe

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
register_builtins("primitive-depth3", {f.name: f for f in DEPTH3_FAMILIES})  # a saved library names them (tasks.specs)
register_builtins("primitive-depth3-raw", {f.name: f for f in RAW_DEPTH3_FAMILIES})
DEPTH3_GRID = np.linspace(-6.0, 6.0, 601)  # stored curves: the rescaled values stay within about +-5


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
