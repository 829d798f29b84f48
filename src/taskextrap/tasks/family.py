"""Parametric task families: a formula, a domain, and named regions of the shifted parameter."""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.checks import CHECK_TASKS, check_once, checked_values, sample_inputs
from taskextrap.validation import (
    as_float_array,
    check_callable,
    check_int,
    check_output,
    check_range,
    check_rng,
    check_str,
    check_instance,
    describe,
)

TRAIN_REGIONS = ("F1_1", "F1_2")
TEST_REGION = "F2"


@dataclass(frozen=True)
class ParametricFamily:
    """A family of tasks f_theta(x) = fn(x, **theta) whose ``shift`` parameter is extrapolated.

    Args:
        name: short identifier used in results, plots and unit files.
        fn: numpy-vectorised formula ``fn(x, **params)``: ``x`` has shape (n, m) (n tasks, m inputs
            each) and every parameter (``shift`` and each ``fixed`` one, passed by name) shape
            (n, 1); it must return exactly x's shape (n, m) of finite real numbers and depend on x.
            A broadcastable (n, 1) or scalar is refused in one line naming the family; the rest is
            checked on a small sample (:meth:`check`) the first time a ``TaskSet`` holds the family.
        domain: (low, high) interval of the input x.
        fixed: ranges of the other parameters, drawn uniformly and identically in every region.
        shift: the name of the parameter whose range defines the regions.
        regions: disjoint ranges of ``shift`` by region name. A degenerate range (lo == hi) is a
            single value. The ``parameter`` experiments (``--family``) need regions named
            exactly ``F1_1`` and ``F1_2`` (the training regions) and ``F2`` (held out);
            ``parameter-multistep`` also ``F3``, ``F4`` and ``F5`` (each further out). Any names
            work from Python.
        train_regions: the regions the library is drawn from (default ``("F1_1", "F1_2")``);
            every other region is held out.
        description: free text for listings.

    Example:
        >>> import numpy as np
        >>> from taskextrap.tasks import ParametricFamily
        >>> damped = ParametricFamily(
        ...     name="damped", fn=lambda x, omega, A, gamma: A * np.exp(-gamma * x) * np.cos(omega * x),
        ...     domain=(0.0, 20.0), fixed={"A": (0.5, 1.5), "gamma": (0.05, 0.1)}, shift="omega",
        ...     regions={"F1_1": (0.5, 0.8), "F1_2": (0.8, 1.1), "F2": (1.1, 1.4)})
        >>> params = damped.sample_params("F2", 4, np.random.default_rng(0))  # (4, 3): omega, A, gamma
        >>> damped(params, np.broadcast_to(damped.grid(50), (4, 50))).shape
        (4, 50)

        Saved as ``damped.py`` on ``PYTHONPATH``, it runs with
        ``taskextrap reproduce parameter --family damped:damped``.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks import ParametricFamily
        >>> damped = ParametricFamily(
        ...     name="damped", fn=lambda x, A, gamma, omega: A * np.exp(-gamma * x) * np.cos(omega * x),
        ...     domain=(0.0, 20.0), fixed={"A": (0.5, 1.5), "gamma": (0.05, 0.1)}, shift="omega",
        ...     regions={"F1_1": (0.5, 0.8), "F1_2": (0.8, 1.1), "F2": (1.1, 1.4)})
        >>> sorted(damped.training_labels()), damped.held_out_regions
        (['F1_1', 'F1_2'], ('F2',))
        >>> damped.sample_params("F2", 4, np.random.default_rng(0)).shape  # A, gamma, omega per task
        (4, 3)
    """

    name: str
    fn: Callable[..., np.ndarray]
    domain: tuple[float, float]
    fixed: Mapping[str, tuple[float, float]]
    shift: str
    regions: Mapping[str, tuple[float, float]]
    train_regions: tuple[str, ...] = TRAIN_REGIONS
    description: str = field(default="", compare=False)

    def __post_init__(self):
        check_str("ParametricFamily name", self.name)
        where = f"family {self.name!r}"
        check_callable(f"{where}: fn", self.fn, "fn(x, **params)")
        check_range(f"{where}: domain", self.domain)
        check_str(f"{where}: shift", self.shift)
        check_instance(f"{where}: fixed", self.fixed, Mapping, "a dict {name: (low, high)}")
        check_instance(f"{where}: regions", self.regions, Mapping, "a dict {region: (low, high)}")
        if not self.regions:
            raise TaskextrapError(f"{where}: regions is empty; name at least the training regions")
        if (
            isinstance(self.train_regions, str)
            or not isinstance(self.train_regions, (tuple, list))
            or not self.train_regions
            or not all(isinstance(r, str) for r in self.train_regions)
        ):
            raise TaskextrapError(f"{where}: train_regions must be a non-empty tuple of region names")
        check_str(f"{where}: description", self.description, allow_empty=True)
        if self.shift in self.fixed:
            raise TaskextrapError(f"family {self.name!r}: shift parameter {self.shift!r} is also in fixed")
        for kind, ranges in (("fixed", self.fixed), ("regions", self.regions)):
            for name, span in ranges.items():
                check_str(f"{where}: a key of {kind}", name)
                check_range(f"{where}: {kind}[{name!r}]", span, strict=False)
        self._check_signature()
        missing = [r for r in self.train_regions if r not in self.regions]
        if missing:
            raise TaskextrapError(f"family {self.name!r}: training regions {missing} are not in regions")
        spans = sorted(self.regions.items(), key=lambda kv: kv[1])
        for (n1, (_, b1)), (n2, (a2, _)) in itertools.pairwise(spans):
            if a2 < b1:
                raise TaskextrapError(f"family {self.name!r}: regions {n1!r} and {n2!r} overlap")

    def _check_signature(self):
        """fn must take x and every parameter by name, or the first evaluation would be a TypeError."""
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):  # a builtin or C function without a signature: trust it
            return
        try:
            sig.bind(None, **{name: None for name in self.param_names})
        except TypeError:
            raise TaskextrapError(
                f"family {self.name!r}: fn must accept fn(x, {', '.join(self.param_names)}), its signature is {sig}"
            ) from None

    def check(self, label: str | None = None) -> None:
        """Evaluate the formula once on a small sample of every region
        (:func:`check_family`): a one-line TaskextrapError that starts
        with ``label`` (default ``family '<name>'``) and names the region if it raises, returns
        another shape than x's, a non-real or non-finite value, or does not depend on x.

        Every ``TaskSet`` of the family runs it (``--family`` runs it first), once per family
        object: a family that passed is not evaluated again. It draws from its own generator,
        never from a run's streams, so it changes no number a run computes."""
        check_once(self, lambda: check_family(self, label))

    @property
    def param_names(self) -> tuple[str, ...]:
        """Parameter order of every ``params`` array: the shifted parameter first."""
        return (self.shift, *self.fixed)

    @property
    def held_out_regions(self) -> tuple[str, ...]:
        """Regions that no fitted component may ever see."""
        return tuple(r for r in self.regions if r not in self.train_regions)

    def region_of(self, params: np.ndarray) -> np.ndarray:
        """Name of the region each row of ``params`` falls in ('' if none)."""
        s = self._params(params)[:, 0]
        out = np.full(s.shape, "", dtype=object)
        # Later regions win on shared boundaries, so a task at the F1_2/F2 edge counts as F2.
        for name, (a, b) in sorted(self.regions.items(), key=lambda kv: kv[1]):
            out[(s >= a) & (s <= b)] = name
        return out

    def task_labels(self, params: np.ndarray) -> np.ndarray:
        """The leak audit's name of each task: its region (``region_of``)."""
        return self.region_of(params)

    def training_labels(self) -> set[str]:
        """The labels a fit may consume: the training regions."""
        return set(self.train_regions)

    def sample_params(self, region: str, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` parameter vectors (n, p): shift uniform in ``region``, the rest uniform.

        Returns:
            The parameters (n, p), in ``param_names`` order.
        """
        if not isinstance(region, str) or region not in self.regions:
            raise TaskextrapError(f"family {self.name!r} has no region {describe(region)}; has {sorted(self.regions)}")
        check_int("n", n, 1)
        check_rng("rng", rng)
        cols = [rng.uniform(*self.regions[region], size=n)]
        cols += [rng.uniform(*rng_range, size=n) for rng_range in self.fixed.values()]
        return np.stack(cols, axis=1)

    def param_scale(self) -> tuple[np.ndarray, np.ndarray]:
        """(offset, scale) that map each parameter's training range to [0, 1]."""
        lo_s = min(self.regions[r][0] for r in self.train_regions)
        hi_s = max(self.regions[r][1] for r in self.train_regions)
        lows = np.array([lo_s, *(a for a, _ in self.fixed.values())], dtype=float)
        highs = np.array([hi_s, *(b for _, b in self.fixed.values())], dtype=float)
        return lows, np.maximum(highs - lows, 1e-12)

    def scaled_params(self, params: np.ndarray) -> np.ndarray:
        """True parameters mapped so each training range is [0, 1] (a shift of one region ~ 0.5):
        the ground truth the oracles are handed."""
        lo, scale = self.param_scale()
        return (self._params(params) - lo) / scale

    def _params(self, params) -> np.ndarray:
        """``params`` as a finite float array (n, p) in ``param_names`` order."""
        params = as_float_array("params", params)
        if params.ndim != 2 or params.shape[1] != len(self.param_names):
            raise TaskextrapError(
                f"family {self.name!r}: params must have shape (n, {len(self.param_names)}), got {params.shape}"
            )
        return params

    def __call__(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Evaluate the tasks ``params`` (n, p) at inputs ``x`` (n, m) -> (n, m); a one-line error
        if ``fn`` returns another shape than x's (a broadcastable (n, 1) included) or non-real values."""
        params = self._params(params)
        x = as_float_array("x", x)
        if x.ndim != 2 or x.shape[0] != params.shape[0]:
            raise TaskextrapError(f"family {self.name!r}: x must have shape ({params.shape[0]}, m), got {x.shape}")
        kwargs = {name: params[:, i : i + 1] for i, name in enumerate(self.param_names)}
        y = check_output(self.fn(x, **kwargs), x.shape, f"family {self.name!r}: fn")
        return np.array(y, dtype=float)

    def grid(self, m: int) -> np.ndarray:
        """``m`` evenly spaced inputs over the domain."""
        return np.linspace(*self.domain, check_int("m", m, 1))

    def output_range(self, rng: np.random.Generator, n: int = 256, m: int = 200) -> float:
        """Spread (max - min) of task outputs over the domain, measured on training-region tasks only."""
        check_rng("rng", rng)
        params = np.concatenate([self.sample_params(r, n, rng) for r in self.train_regions])
        y = self(params, np.broadcast_to(self.grid(m), (len(params), m)))
        return float(y.max() - y.min())


def check_family(family: ParametricFamily, label: str | None = None) -> None:
    """Evaluate ``family``'s formula once on :data:`CHECK_TASKS` tasks of every region at
    :data:`CHECK_POINTS` inputs spread over its domain; a one-line TaskextrapError naming the
    family and the region if the formula raises, returns something of another shape than its
    input ``x`` (n, m) (a broadcastable (n, 1) included), a non-real value, or NaN/inf, that does
    not depend on x in some region, or whose outputs do not vary at all over the training regions
    (a constant: every scale is relative to that spread)."""
    label = label or f"family {family.name!r}"
    rng = np.random.default_rng(0)
    training = []
    for region in family.regions:
        params = family.sample_params(region, CHECK_TASKS, rng)
        x = sample_inputs(rng, family.domain, label)
        kwargs = {name: params[:, i : i + 1] for i, name in enumerate(family.param_names)}
        what = f"{label}, region {region!r}: its formula"
        y = checked_values(functools.partial(family.fn, x, **kwargs), x.shape, what)
        if not np.ptp(y, axis=1).any():  # every task constant in x: the formula ignores its input
            raise TaskextrapError(f"{what} does not depend on x (each task's outputs are constant over the domain)")
        if region in family.train_regions:
            training.append(y)
    if np.ptp(np.concatenate(training)) == 0:  # every scale and noise level is relative to this spread
        raise TaskextrapError(
            f"{label}: its outputs do not vary over the training regions "
            f"({', '.join(family.train_regions)}): there is nothing to learn"
        )
