"""Ladders: task families built by recursive extension (the paper's length regime, Section 2.3).

A ladder task of level d is a coefficient vector c_0..c_d over a basis; its value is
sum_p c_p * basis(x, p). Extending a level-d task by one step adds c_{d+1} * basis(x, d+1): the
predecessor is the anchor and the new coefficient is the transformation phi. Coefficients are
stored normalised (drawn uniformly from ``coef_range``), so a user's ladder needs only a basis.

The built-in polynomial ladder has basis (x/5)^p on [-5, 5] with normalised coefficients in
[-2, 2]: exactly the paper's c_p ~ U(-2, 2) / 5^p on x^p (Appendix F), with c_norm = c_p * 5^p.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping

import numpy as np

from taskextrap.errors import TaskextrapError
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


@dataclass(frozen=True)
class Ladder:
    """A family of tasks ordered by level, where level d+1 extends a level-d task by one basis term.

    A level-d task is ``sum_{p=0..d} c_p * basis(x, p)``: terms are numbered from p = 0 (the
    constant term, ``x ** 0`` in the polynomial ladder), so level d has d + 1 coefficients.

    Args:
        name: used in results, seeds and file names.
        basis: ``basis(x, p)`` -> the p-th term at ``x``, for p = 0 .. ``test_level``: ``x`` has
            shape (n, m) and ``p`` is an int; it must return exactly x's shape (n, m) of finite
            real numbers (a scalar or a broadcastable (n, 1) is refused, even for the constant
            term: write ``np.ones_like(x)``), and every term p >= 1 must depend on x (checked on a
            small sample, :meth:`check`, the first time a ``LadderSet`` holds the ladder).
        domain: (lo, hi) of the input.
        coef_range: range of every normalised coefficient (and of the extension shift phi).
        train_levels: levels >= 1 the library holds; extension steps used for training stay inside
            them.
        test_level: the held-out level, above every training level (the ``length`` experiment's
            targets extend a level ``test_level - 1`` library task): no task of this level
            reaches any fit.

    Example:
        >>> import numpy as np
        >>> from taskextrap.tasks import Ladder
        >>> fourier = Ladder("fourier", basis=lambda x, p: np.ones_like(x) if p == 0 else np.sin(p * x),
        ...                  domain=(-np.pi, np.pi), train_levels=(1, 2, 3, 4, 5), test_level=6)
        >>> coefs = fourier.sample_coefs(3, 2, np.random.default_rng(0))   # two level-3 tasks: (2, 7)
        >>> fourier(coefs, np.broadcast_to(fourier.grid(20), (2, 20))).shape
        (2, 20)

        Saved as ``fourier.py`` on ``PYTHONPATH``, it runs with
        ``taskextrap reproduce length --family fourier:fourier``.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks.ladder import Ladder, LadderSet
        >>> cosines = Ladder("cosines", basis=lambda x, p: np.cos(p * x), domain=(-3.0, 3.0))
        >>> library = LadderSet.sample_library(cosines, 4, np.random.default_rng(0))
        >>> sorted(set(library.level.tolist())) == list(cosines.train_levels)
        True
    """

    name: str
    basis: Callable[[np.ndarray, int], np.ndarray]
    domain: tuple[float, float]
    coef_range: tuple[float, float] = (-2.0, 2.0)
    train_levels: tuple[int, ...] = tuple(range(1, 9))
    test_level: int = 9

    def __post_init__(self):
        check_str("Ladder name", self.name)
        check_callable(f"ladder {self.name!r}: basis", self.basis, "basis(x, p)")
        check_range(f"ladder {self.name!r}: domain", self.domain)
        check_range(f"ladder {self.name!r}: coef_range", self.coef_range)
        levels = self.train_levels
        if (
            isinstance(levels, (str, bytes))
            or not hasattr(levels, "__iter__")
            or not levels
            or not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in levels)
            or min(levels) < 1
        ):
            raise TaskextrapError(
                f"ladder {self.name!r}: train_levels must be levels >= 1 (a non-empty tuple of "
                f"integers), got {describe(levels)}"
            )
        check_int(f"ladder {self.name!r}: test_level", self.test_level, 1)
        if self.test_level <= max(self.train_levels):
            raise TaskextrapError(f"ladder {self.name!r}: test_level must be above every training level")

    def check(self, label: str | None = None) -> None:
        """Evaluate the basis once for every term on a small sample
        (:func:`taskextrap.tasks.registry.check_ladder`): a one-line TaskextrapError that starts
        with ``label`` (default ``ladder '<name>'``) and names the term if it raises, returns
        another shape than x's, a non-real or non-finite value, or (p >= 1) does not depend on x.

        Every ``LadderSet`` of the ladder runs it (``--family`` runs it first), once per ladder
        object: a ladder that passed is not evaluated again. It draws from its own generator,
        never from a run's streams, so it changes no number a run computes."""
        from taskextrap.tasks.registry import check_ladder, check_once  # the registry imports this module

        check_once(self, lambda: check_ladder(self, label))

    @property
    def n_coefs(self) -> int:
        """Length of every coefficient vector (levels 0..test_level)."""
        return self.test_level + 1

    @property
    def train_steps(self) -> tuple[int, ...]:
        """Levels d+1 that training extension steps may reach (both d and d+1 are training levels)."""
        levels = set(self.train_levels)
        return tuple(d + 1 for d in sorted(levels) if d + 1 in levels)

    def sample_coefs(self, level: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` tasks of exactly ``level``: coefficients (n, n_coefs), zero above ``level``."""
        check_int(f"ladder {self.name!r}: level", level, 0, self.test_level)
        check_int("n", n, 1)
        check_rng("rng", rng)
        c = np.zeros((n, self.n_coefs))
        c[:, : level + 1] = rng.uniform(*self.coef_range, size=(n, level + 1))
        return c

    def level_of(self, coefs: np.ndarray) -> np.ndarray:
        """Each task's level read from its coefficients (n, n_coefs): the highest non-zero one."""
        nz = np.asarray(coefs, dtype=float) != 0
        return np.where(nz.any(axis=1), nz.shape[1] - 1 - np.argmax(nz[:, ::-1], axis=1), 0)

    def task_labels(self, coefs: np.ndarray) -> np.ndarray:
        """The leak audit's name of each task: ``level-d`` from its coefficients."""
        return np.array([f"level-{d}" for d in self.level_of(coefs)], dtype=object)

    def training_labels(self) -> set[str]:
        """The labels a fit may consume: the training levels."""
        return {f"level-{d}" for d in self.train_levels}

    def basis_matrix(self, x: np.ndarray) -> np.ndarray:
        """Every basis term at ``x``: shape x.shape + (n_coefs,); a one-line error naming the term
        if ``basis`` returns another shape than x's."""
        x = np.asarray(x, dtype=float)
        return np.stack([self._term(x, p) for p in range(self.n_coefs)], axis=-1)

    def _term(self, x: np.ndarray, p: int) -> np.ndarray:
        return check_output(
            self.basis(x, p), x.shape, f"ladder {self.name!r}: basis term {p}", hint="np.ones_like(x) for a constant"
        )

    def __call__(self, coefs: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of tasks ``coefs`` (n, n_coefs) at ``x`` (n, m) -> (n, m)."""
        coefs = as_float_array("coefficients", coefs)
        x = as_float_array("x", x)
        if coefs.ndim != 2 or coefs.shape[1] != self.n_coefs:
            raise TaskextrapError(f"ladder {self.name!r}: coefficients must have shape (n, {self.n_coefs})")
        if x.ndim != 2 or x.shape[0] != coefs.shape[0]:
            raise TaskextrapError(f"ladder {self.name!r}: x must have shape ({coefs.shape[0]}, m), got {x.shape}")
        return np.einsum("nmp,np->nm", self.basis_matrix(x), coefs)

    def grid(self, m: int) -> np.ndarray:
        """``m`` evenly spaced inputs over the domain."""
        return np.linspace(*self.domain, check_int("m", m, 1))

    def output_range(self, rng: np.random.Generator, n: int = 256, m: int = 200) -> float:
        """Spread (max - min) of outputs of training-level tasks over the domain."""
        coefs = np.concatenate([self.sample_coefs(d, n, rng) for d in self.train_levels])
        y = self(coefs, np.broadcast_to(self.grid(m), (len(coefs), m)))
        return float(y.max() - y.min())


@dataclass(frozen=True)
class LadderSet:
    """Ladder tasks as arrays: coefficients (n, n_coefs), their level, and their library parent.

    ``parent[i]`` is the library index of task i's predecessor (-1 when unknown or not built by
    extension). ``family`` and ``params`` are the ladder and the coefficients, so observation
    protocols and scalers treat a LadderSet like any other task set.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet
        >>> library = LadderSet.sample_library(POLYNOMIAL_LADDER, 2, np.random.default_rng(0))
        >>> targets = LadderSet.extend(library, np.flatnonzero(library.level == 8), np.random.default_rng(1))
        >>> targets.level.tolist()  # one level above their parents
        [9, 9]
        >>> targets.values(np.zeros((2, 3))).shape  # one row of inputs per task
        (2, 3)
    """

    family: Ladder
    params: np.ndarray
    level: np.ndarray
    parent: np.ndarray

    def __post_init__(self):
        check_instance("family", self.family, Ladder, "a Ladder (see taskextrap.tasks.ladder)")
        self.family.check()
        n = len(self.params) if hasattr(self.params, "__len__") else -1
        if np.ndim(self.params) != 2 or np.shape(self.params)[1] != self.family.n_coefs:
            raise TaskextrapError(
                f"params must have shape (n_tasks, {self.family.n_coefs}), got {np.shape(self.params)}"
            )
        if np.shape(self.level) != (n,) or np.shape(self.parent) != (n,):
            raise TaskextrapError(f"level and parent must hold one value per task ({n})")

    def __len__(self) -> int:
        return len(self.params)

    @property
    def region(self) -> np.ndarray:
        """Each task's level as a region name ("level-3"), for plots and tables."""
        return np.array([f"level-{d}" for d in self.level], dtype=object)

    @classmethod
    def sample_library(cls, ladder: Ladder, n_per_level: int, rng: np.random.Generator) -> LadderSet:
        """``n_per_level`` independent tasks of every training level.

        Returns:
            A :class:`LadderSet` of ``n_per_level`` tasks of every training level.
        """
        check_instance("ladder", ladder, Ladder, "a Ladder (see taskextrap.tasks.ladder)")
        check_int("n_per_level", n_per_level, 1)
        check_rng("rng", rng)
        coefs = np.concatenate([ladder.sample_coefs(d, n_per_level, rng) for d in ladder.train_levels])
        level = np.repeat(np.asarray(ladder.train_levels), n_per_level)
        return cls(ladder, coefs, level, np.full(len(coefs), -1))

    @classmethod
    def extend(cls, library: LadderSet, parents: np.ndarray, rng: np.random.Generator) -> LadderSet:
        """One extension step of each library task ``parents``: a fresh coefficient at level + 1.

        Returns:
            A :class:`LadderSet` of one task per parent, one level above it.
        """
        check_instance("library", library, LadderSet, "a LadderSet (see taskextrap.tasks.ladder)")
        parents = as_index_array("parents", parents, len(library))
        if parents.ndim != 1:
            raise TaskextrapError(f"parents must be a 1-D array of library indices, got shape {parents.shape}")
        check_rng("rng", rng)
        ladder = library.family
        level = library.level[parents] + 1
        if level.max(initial=0) > ladder.test_level:
            raise TaskextrapError(f"ladder {ladder.name!r}: cannot extend beyond level {ladder.test_level}")
        coefs = library.params[parents].copy()
        coefs[np.arange(len(parents)), level] = rng.uniform(*ladder.coef_range, size=len(parents))
        return cls(ladder, coefs, level, parents)

    def subset(self, index) -> LadderSet:
        """The tasks at ``index`` (an index array or boolean mask)."""
        return LadderSet(self.family, self.params[index], self.level[index], self.parent[index])

    def state(self, prefix: str = "library.") -> tuple[dict[str, np.ndarray], dict]:
        """The tasks as arrays under ``prefix`` (coefficients, levels, parents) and a description
        (how to find the ladder again: :func:`taskextrap.tasks.specs.task_spec`) for :meth:`from_state`."""
        arrays = {f"{prefix}params": self.params, f"{prefix}level": self.level, f"{prefix}parent": self.parent}
        return arrays, {"kind": "LadderSet", "family": task_spec(self.family)}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], desc: dict, prefix: str = "library.") -> LadderSet:
        """The tasks :meth:`state` wrote: the same coefficients of the same ladder."""
        ladder = task_object(desc["family"], Ladder)
        return cls(ladder, arrays[f"{prefix}params"], arrays[f"{prefix}level"], arrays[f"{prefix}parent"])

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Values of tasks ``index`` (all by default) at inputs ``x`` of shape (len(index), m).

        Returns:
            The values (len(index), m).
        """
        if index is not None:
            index = as_index_array("index", index, len(self), "task indices")
        coefs = self.params if index is None else self.params[index]
        return self.family(coefs, x)

    def values_at(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Values of several tasks at each row of inputs: ``x`` (n, m) -> (n, c, m).

        ``index`` is (c,) (the same tasks for every row; all tasks by default) or (n, c) (tasks
        per row). The basis is evaluated once per row and shared by its c tasks, which makes
        this a matrix product instead of c separate polynomial evaluations.
        """
        x = as_float_array("x", x)
        if x.ndim != 2:
            raise TaskextrapError(f"x must have shape (n, m), got {x.shape}")
        if index is not None:
            index = as_index_array("index", index, len(self), "task indices")
        basis = self.family.basis_matrix(x)  # (n, m, p)
        if index is None or np.ndim(index) == 1:
            coefs = self.params if index is None else self.params[index]
            return np.einsum("nmp,cp->ncm", basis, coefs)
        if index.shape[0] != len(x):
            raise TaskextrapError(f"index has {index.shape[0]} rows but x has {len(x)}")
        return np.einsum("nmp,ncp->ncm", basis, self.params[index])

    def new_coef(self) -> np.ndarray:
        """Each task's coefficient at its own level: the shift phi of its last extension step."""
        return self.params[np.arange(len(self)), self.level]


def _power_basis(x: np.ndarray, p: int) -> np.ndarray:
    return (x / 5.0) ** p


# The paper's length family: polynomials on [-5, 5], degrees 1..8 in the library, degree 9 held out.
POLYNOMIAL_LADDER = Ladder("polynomial", basis=_power_basis, domain=(-5.0, 5.0))
register_builtins("ladder", {POLYNOMIAL_LADDER.name: POLYNOMIAL_LADDER})  # a saved library names it (tasks.specs)
