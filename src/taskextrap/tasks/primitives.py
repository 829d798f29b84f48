"""Primitives and their compositions (the paper's compositional regime, Section 2.4, Appendix F).

A ``PrimitiveFamily`` generates 1-D functions (poly, sin, tanh). A ``PrimitiveSet`` is the
library of primitives: their family, their parameters and their curves stored on a wide grid,
so compositions of library members can be evaluated by interpolating stored curves (which is
all a user with sampled primitives has). A ``CompositionSet`` holds tasks h = f o g (outer f,
inner g, both library members); which pairs of families may be composed in training and which
are held out is the ``PairSplit``. A ``CompositionFamily`` names a whole primitive set for the
composition experiments (its families, its pair split, its domain and curve grid, and for depth
3 its recipe split): what ``--family`` takes in the composition regime.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from collections.abc import Callable, Mapping

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.checks import CHECK_TASKS, checked_values, sample_inputs
from taskextrap.tasks.specs import register_builtins, task_object, task_spec
from taskextrap.validation import (
    as_float_array,
    as_index_array,
    check_callable,
    check_instance,
    check_int,
    check_output,
    check_range,
    check_rng,
    check_str,
    describe,
)

if TYPE_CHECKING:
    from taskextrap.tasks.recipes import RecipeSplit


def _check_pairs(name: str, pairs, allow_empty: bool = False) -> None:
    """``pairs`` must be a tuple (or list) of (outer family, inner family) name pairs."""
    ok = not isinstance(pairs, (str, bytes)) and isinstance(pairs, (tuple, list)) and (allow_empty or len(pairs) > 0)
    if not ok or not all(
        isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(f, str) for f in p) for p in pairs
    ):
        raise TaskextrapError(
            f"{name} must be a non-empty tuple of (outer family, inner family) name pairs, got {describe(pairs)}"
        )


def _check_grid(grid) -> np.ndarray:
    """The curve grid as a float array: 1-D, at least 2 points, increasing."""
    grid = as_float_array("grid", grid)
    if grid.ndim != 1 or len(grid) < 2:
        raise TaskextrapError(f"grid must be a 1-D array of at least 2 points, got shape {grid.shape}")
    if np.any(np.diff(grid) <= 0):
        raise TaskextrapError("the curve grid must be increasing")
    return grid


@dataclass(frozen=True)
class PrimitiveFamily:
    """A family of 1-D primitive functions ``fn(x, **params)``, each parameter drawn uniformly from its range.

    Args:
        name: the family's name in pair and recipe names (``"sin o poly"``), results and the leak
            audit. ``"identity"`` is reserved (the depth-3 padding, ``tasks.chains.IDENTITY``).
        fn: numpy-vectorised ``fn(x, **params)``: ``x`` has shape (n, m) (n functions, m inputs
            each) and every parameter shape (n, 1); it must return exactly x's shape (n, m) of
            real numbers (a broadcastable (n, 1) or a scalar is refused, naming the family) and
            depend on x. An outer function is evaluated at its inner function's outputs, so
            ``fn`` must be finite over the library's whole curve grid, not only the domain.
        params: ``{name: (low, high)}``, each parameter uniform on its range (low == high fixes it);
            sampling needs at least one parameter.

    Example:
        >>> import numpy as np
        >>> from taskextrap.tasks.primitives import PrimitiveFamily
        >>> bump = PrimitiveFamily("bump", lambda x, a, w: a * np.exp(-(w * x) ** 2),
        ...                        {"a": (0.5, 2.0), "w": (0.2, 1.0)})
        >>> params = bump.sample(4, np.random.default_rng(0))   # (4, 2): columns a, w
        >>> bump(params, np.zeros((4, 3))).shape                # x (4, 3) -> (4, 3)
        (4, 3)

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks import PrimitiveFamily
        >>> sin = PrimitiveFamily("sin", lambda x, A, w: A * np.sin(w * x), {"A": (0.5, 2.0), "w": (0.5, 1.5)})
        >>> sin.sample(3, np.random.default_rng(0)).shape  # A and w of each primitive
        (3, 2)
    """

    name: str
    fn: Callable[..., np.ndarray]
    params: dict[str, tuple[float, float]]

    def __post_init__(self):
        check_str("PrimitiveFamily name", self.name)
        check_callable(f"primitive family {self.name!r}: fn", self.fn, "fn(x, **params)")
        check_instance(f"primitive family {self.name!r}: params", self.params, dict, "a dict {name: (low, high)}")
        for k, span in self.params.items():
            check_str(f"primitive family {self.name!r}: a parameter name", k)
            check_range(f"primitive family {self.name!r}: params[{k!r}]", span, strict=False)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` parameter vectors (n, len(params)), columns in the order of ``params``.

        Returns:
            The parameters (n, p), one column per parameter in ``params``' order.
        """
        check_int("n", n, 1)
        check_rng("rng", rng)
        if not self.params:
            raise TaskextrapError(f"primitive family {self.name!r} has no parameters to sample")
        return np.stack([rng.uniform(lo, hi, size=n) for lo, hi in self.params.values()], axis=1)

    def __call__(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values (n, m) of the functions ``params`` (n, p) at ``x`` (n, m); a one-line error naming
        the family if ``fn`` returns another shape than x's or values that are not real numbers."""
        kwargs = {k: params[:, i : i + 1] for i, k in enumerate(self.params)}
        out = check_output(self.fn(x, **kwargs), np.shape(x), f"primitive family {self.name!r}: fn")
        return np.array(out, dtype=float)  # a copy: fn may return x itself (the identity)


# Ranges of the authors' composition experiment (reference §7.1).
POLY = PrimitiveFamily(
    "poly", lambda x, a, b, c: a * x**2 + b * x + c, {"a": (-0.1, 0.1), "b": (-0.5, 0.5), "c": (-2.0, 2.0)}
)
SIN = PrimitiveFamily(
    "sin", lambda x, A, w, phi: A * np.sin(w * x + phi), {"A": (0.5, 2.0), "w": (0.5, 1.5), "phi": (0.0, np.pi)}
)
TANH = PrimitiveFamily(
    "tanh", lambda x, A, w, c: A * np.tanh(w * (x - c)), {"A": (1.0, 3.0), "w": (0.5, 2.0), "c": (-2.0, 2.0)}
)
PRIMITIVE_FAMILIES = (POLY, SIN, TANH)
register_builtins("primitive", {f.name: f for f in PRIMITIVE_FAMILIES})  # a saved library names them (tasks.specs)


@dataclass(frozen=True)
class PairSplit:
    """Which (outer family, inner family) pairs are composed in training and which are held out.

    A pair ``(f, g)`` is the composition h = f o g, h(x) = f(g(x)): ``f`` is applied to the
    output of ``g``. Targets are compositions of library primitives in the ``test`` pairs; no
    fit ever sees a composition of a ``test`` pair (single primitives of every family are
    library members and are never held out). Names are ``PrimitiveFamily`` names.

    Args:
        train: the family pairs composed in training; at least one.
        test: the held-out family pairs; at least one, none of them a training pair.

    Example:
        >>> from taskextrap.tasks.primitives import PairSplit
        >>> split = PairSplit(train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump")), test=(("bump", "sin"),))
        >>> sorted(split.training_labels())
        ['bump o bump', 'primitive:bump', 'primitive:sin', 'sin o bump', 'sin o sin']

    Examples:
        >>> from taskextrap.tasks import PairSplit
        >>> split = PairSplit(train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump")), test=(("bump", "sin"),))
        >>> split.families
        ('sin', 'bump')
    """

    train: tuple[tuple[str, str], ...]
    test: tuple[tuple[str, str], ...]

    def __post_init__(self):
        _check_pairs("pair split train", self.train, allow_empty=True)  # emptiness has its own message below
        _check_pairs("pair split test", self.test, allow_empty=True)
        if set(map(tuple, self.train)) & set(map(tuple, self.test)):
            both = sorted(set(map(tuple, self.train)) & set(map(tuple, self.test)))
            raise TaskextrapError(f"pair split: {both} both trained and held out")
        if not self.train or not self.test:
            raise TaskextrapError("pair split needs at least one training pair and one held-out pair")

    @property
    def families(self) -> tuple[str, ...]:
        """The family names the pairs name, in order of first appearance (train, then test)."""
        return tuple(dict.fromkeys(f for pair in tuple(self.train) + tuple(self.test) for f in pair))

    def training_labels(self) -> set[str]:
        """The labels a fit may consume: the training pairs ``"f o g"`` and single primitives of
        every family named in the split (library primitives are never held out; pairs are)."""
        families = {f for pair in self.train + self.test for f in pair}
        return {f"{o} o {i}" for o, i in self.train} | {f"primitive:{f}" for f in families}


# The paper's split (Appendix F): train on P o S, test on S o P, and so on.
PAPER_SPLIT = PairSplit(
    train=(("poly", "poly"), ("sin", "sin"), ("tanh", "tanh"), ("poly", "sin"), ("sin", "tanh"), ("tanh", "poly")),
    test=(("sin", "poly"), ("tanh", "sin"), ("poly", "tanh")),
)


_SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # it names unit files, plots and result groups
DEFAULT_GRID = (-10.0, 10.0, 401)  # the stored curves of PrimitiveSet.sample: np.linspace(-10, 10, 401)


@dataclass(frozen=True)
class CompositionFamily:
    """A primitive set for the composition regime: its primitive families, which family pairs
    train and which are held out, where tasks are observed and where curves are stored.

    It is what ``--family`` names for ``composition``, ``composition-ablations``,
    ``composition-em`` and ``composition-depth3`` (a built-in name such as ``poly-sin-tanh``, or
    ``module:attr`` of your own instance; ``taskextrap list`` names the built-in sets). The
    library holds primitives of every family; a run trains on compositions of the ``split``'s
    training pairs and scores compositions of its held-out pairs (``composition-depth3``:
    chains of the ``recipe_split``'s recipes).

    Args:
        name: letters, digits, ``-``, ``_`` and ``.`` (it names the run's units, plots and result groups).
        families: two or more :class:`PrimitiveFamily` with distinct names (not ``"identity"``).
        split: the :class:`PairSplit` of these families' names; every family is named by some pair.
        domain: (low, high) where compositions are observed (context and query points).
        grid: (low, high, points) of the stored curves, ``np.linspace(low, high, points)``: it must
            cover ``domain``, and should cover the values inner functions take there (an outer
            curve is read at them; beyond the grid its end values are held).
        recipe_split: ``composition-depth3`` only: a depth-3 ``tasks.chains.RecipeSplit`` over the
            same families (which recipes train; those holding a held-out relation are targets).
        description: free text for listings.

    Example:
        >>> import numpy as np
        >>> from taskextrap.tasks.primitives import CompositionFamily, PairSplit, PrimitiveFamily
        >>> sin = PrimitiveFamily("sin", lambda x, A, w: A * np.sin(w * x), {"A": (0.5, 2.0), "w": (0.5, 1.5)})
        >>> bump = PrimitiveFamily("bump", lambda x, a, w: a * np.exp(-(w * x) ** 2),
        ...                        {"a": (0.5, 2.0), "w": (0.2, 1.0)})
        >>> waves = CompositionFamily("waves", (sin, bump), PairSplit(
        ...     train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump")), test=(("bump", "sin"),)))
        >>> library = waves.library(10, np.random.default_rng(0))   # 10 primitives per family
        >>> library.curves.shape                                   # curves on the 401-point grid
        (20, 401)

        Saved as ``waves.py`` on ``PYTHONPATH``, it runs with
        ``taskextrap reproduce composition --family waves:waves``.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks import CompositionFamily, PairSplit, PrimitiveFamily
        >>> sin = PrimitiveFamily("sin", lambda x, A, w: A * np.sin(w * x), {"A": (0.5, 2.0), "w": (0.5, 1.5)})
        >>> bump = PrimitiveFamily(
        ...     "bump", lambda x, a, w: a * np.exp(-((w * x) ** 2)), {"a": (0.5, 2.0), "w": (0.2, 1.0)})
        >>> waves = CompositionFamily("waves", (sin, bump), PairSplit(
        ...     train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump")), test=(("bump", "sin"),)))
        >>> waves.family_names
        ('sin', 'bump')
        >>> len(waves.library(5, np.random.default_rng(0)).family)
        10
    """

    name: str
    families: tuple[PrimitiveFamily, ...]
    split: PairSplit
    domain: tuple[float, float] = (-5.0, 5.0)
    grid: tuple[float, float, int] = DEFAULT_GRID
    recipe_split: RecipeSplit | None = None
    description: str = field(default="", compare=False)

    def __post_init__(self):
        from taskextrap.tasks.recipes import IDENTITY_NAME, RecipeSplit

        check_str("CompositionFamily name", self.name)
        if not _SET_NAME.fullmatch(self.name):
            raise TaskextrapError(
                f"primitive set name {self.name!r} must be letters, digits, '-', '_' or '.' "
                "(it names files and result groups)"
            )
        where = f"primitive set {self.name!r}"
        families = self.families
        if (
            isinstance(families, (str, bytes))
            or not isinstance(families, (tuple, list))
            or not all(isinstance(f, PrimitiveFamily) for f in families)
        ):
            raise TaskextrapError(
                f"{where}: families must be a tuple of PrimitiveFamily objects, got {describe(families)}"
            )
        names = [f.name for f in families]
        if len(names) < 2:
            raise TaskextrapError(
                f"{where}: needs at least 2 primitive families (a held-out pair must differ "
                f"from every training pair), got {len(names)}"
            )
        if len(set(names)) != len(names) or IDENTITY_NAME in names:
            raise TaskextrapError(f"{where}: family names must be distinct and not {IDENTITY_NAME!r}, got {names}")
        check_instance(f"{where}: split", self.split, PairSplit, "a PairSplit (see taskextrap.tasks.primitives)")
        self._check_names("its pair split", self.split.families, names)
        check_range(f"{where}: domain", self.domain)
        self._check_grid(where)
        if self.recipe_split is not None:
            check_instance(
                f"{where}: recipe_split",
                self.recipe_split,
                RecipeSplit,
                "a RecipeSplit (see taskextrap.tasks.chains) or None",
            )
            if self.recipe_split.depth != 3:
                raise TaskextrapError(f"{where}: recipe_split must have depth 3, got {self.recipe_split.depth}")
            self._check_names("its recipe split", self.recipe_split.families, names)
        check_str(f"{where}: description", self.description, allow_empty=True)
        object.__setattr__(self, "families", tuple(families))  # frozen: the checked tuple replaces a list
        object.__setattr__(self, "domain", tuple(float(v) for v in self.domain))

    def _check_names(self, what: str, named, names: list[str]) -> None:
        """``named`` (the families a split names) must be exactly the set's ``names``."""
        unknown, unnamed = [f for f in named if f not in names], [f for f in names if f not in named]
        if unknown:
            raise TaskextrapError(
                f"primitive set {self.name!r}: {what} names {unknown}, not families of the set {names}"
            )
        if unnamed:
            raise TaskextrapError(
                f"primitive set {self.name!r}: {what} names no pair of {unnamed}; every family "
                "of the set must be in some pair"
            )

    def _check_grid(self, where: str) -> None:
        grid = self.grid
        if isinstance(grid, (str, bytes)) or not isinstance(grid, (tuple, list)) or len(grid) != 3:
            raise TaskextrapError(f"{where}: grid must be (low, high, points), got {describe(grid)}")
        lo, hi = check_range(f"{where}: grid (low, high)", tuple(grid[:2]))
        points = check_int(f"{where}: grid points", grid[2], 2)
        if lo > self.domain[0] or hi < self.domain[1]:
            raise TaskextrapError(f"{where}: the curve grid [{lo}, {hi}] must cover the domain {tuple(self.domain)}")
        object.__setattr__(self, "grid", (lo, hi, points))

    @property
    def family_names(self) -> tuple[str, ...]:
        """The primitive families' names, in order."""
        return tuple(f.name for f in self.families)

    def curve_grid(self) -> np.ndarray:
        """The inputs the library's curves are stored at: ``np.linspace(*grid)``."""
        lo, hi, points = self.grid
        return np.linspace(lo, hi, points)

    def library(self, n_per_family: int, rng: np.random.Generator) -> PrimitiveSet:
        """A library of ``n_per_family`` primitives of every family (:meth:`PrimitiveSet.sample`)."""
        return PrimitiveSet.sample(self.families, n_per_family, rng, domain=self.domain, grid=self.curve_grid())


@dataclass(frozen=True)
class PrimitiveSet:
    """The library of primitives: family index (n,), parameters (n, p) and curves (n, G) on ``grid``.

    ``domain`` is where tasks are observed; ``grid`` is wider, so an outer function's curve covers
    the values an inner function takes. ``params`` may be None for primitives known only by
    their curves (``from_curves``); exact evaluation then falls back to interpolation.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks.primitives import PrimitiveSet
        >>> prims = PrimitiveSet.sample(n_per_family=4, rng=np.random.default_rng(0))
        >>> [f.name for f in prims.families]
        ['poly', 'sin', 'tanh']
        >>> len(prims.family)  # four primitives of each family
        12
    """

    families: tuple[PrimitiveFamily, ...]
    family: np.ndarray
    params: np.ndarray | None
    grid: np.ndarray
    curves: np.ndarray
    domain: tuple[float, float] = (-5.0, 5.0)
    name: str = "primitives"

    def __post_init__(self):
        if (
            isinstance(self.families, (str, bytes))
            or not isinstance(self.families, (tuple, list))
            or not all(isinstance(f, PrimitiveFamily) for f in self.families)
        ):
            raise TaskextrapError("families must be a tuple of PrimitiveFamily objects")
        if np.ndim(self.family) != 1:
            raise TaskextrapError(
                f"family must be a 1-D array of indices into families, got shape {np.shape(self.family)}"
            )
        if len(self.family):
            as_index_array("family", self.family, len(self.families), "indices into families")
        grid = _check_grid(self.grid)
        curves = as_float_array("curves", self.curves)
        if curves.shape != (len(self.family), len(grid)):
            raise TaskextrapError(f"curves must have shape (len(family), len(grid)), got {curves.shape}")
        check_range("domain", self.domain)
        check_str("name", self.name)
        object.__setattr__(self, "grid", grid)  # frozen: the validated float arrays replace the inputs
        object.__setattr__(self, "curves", curves)

    def __len__(self) -> int:
        return len(self.family)

    @classmethod
    def sample(
        cls,
        families=PRIMITIVE_FAMILIES,
        n_per_family: int = 100,
        rng: np.random.Generator | None = None,
        domain=(-5.0, 5.0),
        grid=None,
    ) -> PrimitiveSet:
        """``n_per_family`` primitives of each family, curves stored on ``grid`` (default [-10, 10], 401 points).

        A family whose ``fn`` returns another shape than x's, or whose every sampled function is
        constant in x, is refused in one line naming it.

        Returns:
            A :class:`PrimitiveSet` of ``n_per_family`` primitives of each family, their
                curves on the grid.
        """
        if (
            isinstance(families, (str, bytes))
            or not isinstance(families, (tuple, list))
            or not families
            or not all(isinstance(f, PrimitiveFamily) for f in families)
        ):
            raise TaskextrapError("families must be a non-empty tuple of PrimitiveFamily objects")
        check_int("n_per_family", n_per_family, 1)
        rng = check_rng("rng", rng) if rng is not None else np.random.default_rng(0)
        check_range("domain", domain)
        grid = np.linspace(-10.0, 10.0, 401) if grid is None else _check_grid(grid)
        width = max(len(f.params) for f in families)
        params = np.zeros((n_per_family * len(families), width))
        for i, fam in enumerate(families):
            params[i * n_per_family : (i + 1) * n_per_family, : len(fam.params)] = fam.sample(n_per_family, rng)
        family = np.repeat(np.arange(len(families)), n_per_family)
        prims = cls(tuple(families), family, params, grid, np.zeros((len(family), len(grid))), tuple(domain))
        curves = prims.exact(np.broadcast_to(grid, (len(family), len(grid))))
        for i, fam in enumerate(families):  # exact() has checked each family's shapes; this costs one pass
            if not np.ptp(curves[family == i], axis=1).any():
                raise TaskextrapError(
                    f"primitive family {fam.name!r}: fn does not depend on x (every sampled "
                    "function is constant over the curve grid)"
                )
        return cls(prims.families, family, params, grid, curves, tuple(domain))

    @classmethod
    def from_curves(
        cls, names: list[str], family: np.ndarray, grid: np.ndarray, curves: np.ndarray, domain=(-5.0, 5.0)
    ) -> PrimitiveSet:
        """A library known only by sampled curves (n, G) on ``grid``; ``family`` indexes ``names``."""
        if isinstance(names, (str, bytes)) or not isinstance(names, (tuple, list)) or not names:
            raise TaskextrapError(f"names must be a non-empty list of family names, got {describe(names)}")
        grid, curves = _check_grid(grid), as_float_array("curves", curves)
        family = as_index_array("family", family, len(names), "indices into names")
        if family.ndim != 1:
            raise TaskextrapError(f"family must be a 1-D array of indices into names, got shape {family.shape}")
        if curves.ndim != 2 or curves.shape[1] != len(grid) or len(curves) != len(family):
            raise TaskextrapError("curves must have shape (len(family), len(grid))")
        fams = tuple(PrimitiveFamily(n, lambda x: x, {}) for n in names)
        return cls(fams, np.asarray(family, dtype=int), None, grid, curves, tuple(domain))

    def state(self, prefix: str = "library.") -> tuple[dict[str, np.ndarray], dict]:
        """The primitives as arrays under ``prefix`` (family indices, grid, curves and parameters
        when known) and a description (how to find each family again: a library known by its
        curves alone names its families only) for :meth:`from_state`."""
        arrays = {f"{prefix}family": self.family, f"{prefix}grid": self.grid, f"{prefix}curves": self.curves}
        if self.params is not None:
            arrays[f"{prefix}params"] = self.params
        by_curves = self.params is None  # from_curves: families are names only, no formula to find
        families = [{"curves_only": f.name} if by_curves else task_spec(f) for f in self.families]
        return arrays, {"kind": "PrimitiveSet", "families": families, "domain": list(self.domain), "name": self.name}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], desc: dict, prefix: str = "library.") -> PrimitiveSet:
        """The primitives :meth:`state` wrote: the same curves of the same families."""
        family, grid, curves = arrays[f"{prefix}family"], arrays[f"{prefix}grid"], arrays[f"{prefix}curves"]
        if all("curves_only" in spec for spec in desc["families"]):  # a library known by its curves alone
            names = [spec["curves_only"] for spec in desc["families"]]
            known = cls.from_curves(names, family, grid, curves, tuple(desc["domain"]))
            return dataclasses.replace(known, name=desc["name"])
        families = tuple(task_object(spec, PrimitiveFamily) for spec in desc["families"])
        params = arrays.get(f"{prefix}params")
        return cls(families, family, params, grid, curves, tuple(desc["domain"]), desc["name"])

    @property
    def family_names(self) -> np.ndarray:
        """Each primitive's family name."""
        return np.array([f.name for f in self.families], dtype=object)[self.family]

    def exact(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Primitives ``index`` evaluated exactly at ``x`` (len(index), m); interpolated when only curves are known."""
        index = np.arange(len(self)) if index is None else np.asarray(index, dtype=int)
        if self.params is None:
            return self.interp(x, index)
        out = np.empty(np.shape(x), dtype=float)
        for i, fam in enumerate(self.families):
            rows = np.flatnonzero(self.family[index] == i)
            if len(rows):
                out[rows] = fam(self.params[index[rows], : len(fam.params)], np.asarray(x)[rows])
        return out

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Primitives ``index`` (all by default) at ``x`` (len(index), m), as every task set gives
        its tasks' values: :meth:`exact`."""
        return self.exact(x, index)

    def _locate(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Grid cell of each ``x`` and the position inside it (clipped: end values are held)."""
        g = self.grid
        x = np.asarray(x, dtype=float)
        step = (g[-1] - g[0]) / (len(g) - 1)
        if np.allclose(np.diff(g), step, rtol=1e-9, atol=0.0):
            # Uniform grid (the default): arithmetic instead of a binary search, ~5x faster.
            u = (x - g[0]) / step
            pos = np.clip(np.floor(u), 0, len(g) - 2).astype(np.int64)
            return pos, np.clip(u - pos, 0.0, 1.0)
        pos = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
        return pos, np.clip((x - g[pos]) / (g[pos + 1] - g[pos]), 0.0, 1.0)

    def locate(self, x) -> tuple[np.ndarray, np.ndarray]:
        """The grid cell (int64) of each ``x`` and the position (0..1) inside it, as :meth:`interp`
        uses them (outside the grid the end cell, clipped)."""
        return self._locate(x)

    def interp(self, x: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Stored curves of primitives ``index`` (any shape s) linearly interpolated at ``x`` (shape s + (m,)).

        Vectorised over rows; outside the grid the end values are held (as ``np.interp``).
        """
        g = self.grid
        pos, t = self._locate(x)
        # Gather the two neighbouring grid values straight from the flat curve table, without
        # materialising every selected curve (k*k candidate pairs would need gigabytes).
        flat = np.asarray(index, dtype=np.int64)[..., None] * len(g) + pos
        table = self.curves.ravel()
        lo, hi = table[flat], table[flat + 1]
        return lo + t * (hi - lo)

    def interp_rows(self, index: np.ndarray, pos: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Primitive ``index[r]`` (``index`` (n,)) read at row r's points already located by
        :meth:`locate` (``pos``, ``t`` (n, ...)): the values :meth:`interp` gives at those points.

        A coordinate sweep reads one curve per row at the same (context x library) points every
        round; locating them once and gathering from the n selected curves (a small table that
        stays in cache) is what makes a round cheap.
        """
        n = len(index)
        rows = self.curves[np.asarray(index, dtype=np.int64)]  # (n, grid)
        p = pos.reshape(n, -1)
        lo, hi = np.take_along_axis(rows, p, 1), np.take_along_axis(rows, p + 1, 1)
        return (lo + t.reshape(n, -1) * (hi - lo)).reshape(pos.shape)

    def interp_all(self, x: np.ndarray) -> np.ndarray:
        """Every stored curve interpolated at ``x`` (any shape s): shape s + (len(self),).

        One position lookup serves the whole library, which makes a sweep over all primitives
        (coordinate refinement of a composition) a single gather.
        """
        pos, t = self._locate(x)
        # Grid-major table: each gathered row is contiguous over the library (cache-friendly).
        table = self._curves_by_grid
        lo, hi = table[pos], table[pos + 1]  # s + (L,)
        return lo + t[..., None] * (hi - lo)

    @functools.cached_property
    def _curves_by_grid(self) -> np.ndarray:
        return np.ascontiguousarray(self.curves.T)

    def compose_interp(self, outer: np.ndarray, inner: np.ndarray, x: np.ndarray) -> np.ndarray:
        """f(g(x)) from stored curves only: pairs (outer, inner) of any shape s, ``x`` of shape s + (m,)."""
        return self.interp(self.interp(x, inner), outer)


@dataclass(frozen=True)
class Composer:
    """The composition 'family': evaluates tasks params = (outer index, inner index) exactly."""

    primitives: PrimitiveSet
    train_pairs: tuple[tuple[str, str], ...] = PAPER_SPLIT.train
    name: str = "composition"

    @property
    def domain(self) -> tuple[float, float]:
        """Where compositions are observed: the primitives' domain."""
        return self.primitives.domain

    def grid(self, m: int) -> np.ndarray:
        """``m`` evenly spaced inputs over the domain."""
        return np.linspace(*self.domain, m)

    def __call__(self, pairs: np.ndarray, x: np.ndarray) -> np.ndarray:
        """h(x) = f(g(x)) for pairs (n, 2) at ``x`` (n, m)."""
        pairs = np.asarray(pairs).astype(int)
        inner = self.primitives.exact(x, pairs[:, 1])
        return self.primitives.exact(inner, pairs[:, 0])

    def task_labels(self, pairs: np.ndarray) -> np.ndarray:
        """The leak audit's name of each task: its family pair ``"f o g"``, from the indices."""
        names = self.primitives.family_names
        pairs = np.asarray(pairs).astype(int)
        return np.array([f"{names[o]} o {names[i]}" for o, i in pairs], dtype=object)

    def output_range(self, rng: np.random.Generator, n: int = 512, m: int = 200) -> float:
        """Spread of the outputs of training-pair compositions over the domain (no held-out pair)."""
        pairs = CompositionSet.sample(self.primitives, self.train_pairs, n, rng).params
        y = self(pairs, np.broadcast_to(self.grid(m), (n, m)))
        return float(y.max() - y.min())


@dataclass(frozen=True)
class CompositionSet:
    """Tasks h = f o g: ``params`` (n, 2) = (outer, inner) library indices, with their family pair."""

    family: Composer
    params: np.ndarray
    pair: np.ndarray = field(repr=False)  # (n, 2) family names (outer, inner)

    def __len__(self) -> int:
        return len(self.params)

    @property
    def outer(self) -> np.ndarray:
        """Library index of each task's outer function f."""
        return self.params[:, 0].astype(int)

    @property
    def inner(self) -> np.ndarray:
        """Library index of each task's inner function g."""
        return self.params[:, 1].astype(int)

    @property
    def region(self) -> np.ndarray:
        """Each task's family pair as a name ("sin o poly"), for plots and tables."""
        return np.array([f"{o} o {i}" for o, i in self.pair], dtype=object)

    @classmethod
    def sample(
        cls,
        primitives: PrimitiveSet,
        pairs: tuple[tuple[str, str], ...],
        n: int,
        rng: np.random.Generator,
        pool: np.ndarray | None = None,
        train_pairs: tuple[tuple[str, str], ...] | None = None,
        balanced: bool = False,
    ) -> CompositionSet:
        """``n`` compositions: a family pair uniform over ``pairs``, then members of ``pool`` (default all).

        ``train_pairs`` (default ``pairs``) are the pairs the noise scale is measured on. With
        ``balanced`` every pair gets ``n // len(pairs)`` compositions or one more, in random order
        (so with ``n >= len(pairs)`` none is left without), instead of a uniform draw each.

        Returns:
            A :class:`CompositionSet` of ``n`` compositions, each an (outer, inner) pair
                of library primitives.
        """
        check_instance("primitives", primitives, PrimitiveSet, "a PrimitiveSet (see taskextrap.tasks.primitives)")
        _check_pairs("pairs", pairs)
        if train_pairs is not None:
            _check_pairs("train_pairs", train_pairs)
        check_int("n", n, 1)
        check_rng("rng", rng)
        pool = np.arange(len(primitives)) if pool is None else as_index_array("pool", pool, len(primitives))
        names = primitives.family_names[pool]
        by_family = {name: pool[names == name] for name in set(names)}
        missing = {f for p in pairs for f in p} - set(by_family)
        if missing:
            raise TaskextrapError(f"no library primitive of family {sorted(missing)}")
        check_instance("balanced", balanced, bool, "True or False")
        which = rng.permutation(np.arange(n) % len(pairs)) if balanced else rng.integers(len(pairs), size=n)
        out = np.empty((n, 2), dtype=int)
        for j, (fo, fi) in enumerate(pairs):
            rows = np.flatnonzero(which == j)
            out[rows, 0] = by_family[fo][rng.integers(len(by_family[fo]), size=len(rows))]
            out[rows, 1] = by_family[fi][rng.integers(len(by_family[fi]), size=len(rows))]
        pair = np.array(pairs, dtype=object)[which].reshape(n, 2)
        return cls(Composer(primitives, tuple(train_pairs) if train_pairs else tuple(pairs)), out.astype(float), pair)

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Exact values of tasks ``index`` (all by default) at ``x`` of shape (len(index), m)."""
        params = self.params if index is None else self.params[index]
        return self.family(params, x)

    def subset(self, index) -> CompositionSet:
        """The tasks at ``index`` (an index array or boolean mask)."""
        return CompositionSet(self.family, self.params[index], self.pair[index])


@dataclass(frozen=True)
class _PrimitiveEval:
    """Evaluates library primitives by index, so primitives can be observed like any task."""

    primitives: PrimitiveSet
    name: str = "primitives"

    @property
    def domain(self) -> tuple[float, float]:
        """The primitives' domain."""
        return self.primitives.domain

    def grid(self, m: int) -> np.ndarray:
        """``m`` evenly spaced inputs over the domain."""
        return np.linspace(*self.domain, m)

    def __call__(self, index: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of primitives ``index`` (n, 1) at ``x`` (n, m)."""
        return self.primitives.exact(x, np.asarray(index)[:, 0].astype(int))

    def task_labels(self, index: np.ndarray) -> np.ndarray:
        """The leak audit's name of each primitive: ``primitive:<family>`` (no pair is involved)."""
        names = self.primitives.family_names[np.asarray(index)[:, 0].astype(int)]
        return np.array([f"primitive:{n}" for n in names], dtype=object)

    def output_range(self, rng: np.random.Generator, m: int = 200) -> float:
        """Spread of the library primitives' outputs over the domain (noise scale of their draws)."""
        y = self.primitives.exact(np.broadcast_to(self.grid(m), (len(self.primitives), m)))
        return float(y.max() - y.min())


@dataclass(frozen=True)
class PrimitiveTasks:
    """The library primitives as a task set (``params`` = their index), for observation protocols."""

    family: _PrimitiveEval
    params: np.ndarray

    @classmethod
    def of(cls, primitives: PrimitiveSet) -> PrimitiveTasks:
        """Every primitive of the library, as a task set."""
        return cls(_PrimitiveEval(primitives), np.arange(len(primitives), dtype=float)[:, None])

    def __len__(self) -> int:
        return len(self.params)

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Values of primitives ``index`` (all by default) at ``x`` of shape (len(index), m)."""
        params = self.params if index is None else self.params[index]
        return self.family(params, x)


def check_primitives(primitive_set: CompositionFamily, label: str | None = None) -> None:
    """Evaluate every primitive family of ``primitive_set`` once on :data:`CHECK_TASKS` functions
    at :data:`CHECK_POINTS` inputs spread over its curve grid (an outer function is read at its
    inner function's outputs, anywhere on the grid); a one-line TaskextrapError naming the set
    and the primitive family if ``fn`` raises, returns something of another shape than its input
    ``x`` (n, m) (a broadcastable (n, 1) or scalar included), a non-real value or NaN/inf, or
    does not depend on x (every sampled function constant), or if the family has no parameter
    or the grid is too wide to draw inputs from."""
    label = label or f"primitive set {primitive_set.name!r}"
    rng = np.random.default_rng(0)
    lo, hi, _ = primitive_set.grid
    for family in primitive_set.families:
        what = f"{label}, primitive family {family.name!r}"
        if not family.params:
            raise TaskextrapError(f"{what}: params is empty; a family needs at least one parameter to sample")
        params = family.sample(CHECK_TASKS, rng)
        x = sample_inputs(rng, (lo, hi), label)
        kwargs = {name: params[:, i : i + 1] for i, name in enumerate(family.params)}
        y = checked_values(functools.partial(family.fn, x, **kwargs), x.shape, f"{what}: its fn")
        if not np.ptp(y, axis=1).any():
            raise TaskextrapError(f"{what}: its fn does not depend on x (each function is constant over the grid)")
