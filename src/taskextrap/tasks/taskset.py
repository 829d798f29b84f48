"""A set of tasks of one family stored as arrays: the library and the held-out targets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.specs import family_from_state, family_state
from taskextrap.validation import as_float_array, as_index_array, check_instance, check_int, check_rng, describe


@dataclass(frozen=True)
class TaskSet:
    """Tasks ``params`` (n, p) of ``family``, with the region each was drawn from.

    The first task set of a family checks its formula (:meth:`ParametricFamily.check`).

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet
        >>> tasks = TaskSet.sample(PARAMETER_FAMILIES["quadratic"], {"F1_1": 3, "F2": 2}, np.random.default_rng(0))
        >>> tasks.region.tolist()
        ['F1_1', 'F1_1', 'F1_1', 'F2', 'F2']
        >>> x = np.tile(np.linspace(-1, 1, 4), (5, 1))  # each task's inputs: one row per task
        >>> tasks.values(x).shape
        (5, 4)
    """

    family: ParametricFamily
    params: np.ndarray
    region: np.ndarray

    def __post_init__(self):
        check_instance("family", self.family, ParametricFamily, "a ParametricFamily (see taskextrap.tasks)")
        self.family.check()
        params = as_float_array("params", self.params)
        p = len(self.family.param_names)
        if params.ndim != 2 or params.shape[1] != p:
            raise TaskextrapError(
                f"params must have shape (n_tasks, {p}) for family {self.family.name!r}, got {params.shape}"
            )
        if np.shape(self.region) != (len(params),):
            raise TaskextrapError(
                f"region must hold one region name per task ({len(params)}), got shape {np.shape(self.region)}"
            )
        object.__setattr__(self, "params", params)  # frozen: the validated float array replaces the input

    def __len__(self) -> int:
        return len(self.params)

    @classmethod
    def sample(cls, family: ParametricFamily, counts: dict[str, int], rng: np.random.Generator) -> TaskSet:
        """Draw ``counts[region]`` tasks from each region, region by region in the given order.

        Returns:
            A :class:`TaskSet` of ``sum(counts.values())`` tasks, region by region in
                ``counts``' order.
        """
        check_instance("family", family, ParametricFamily, "a ParametricFamily (see taskextrap.tasks)")
        if not isinstance(counts, Mapping) or not counts:
            raise TaskextrapError(
                f"counts must be a non-empty dict {{region: number of tasks}}, got {describe(counts)}"
            )
        for name, n in counts.items():
            check_int(f"counts[{name!r}]", n, 1)
        check_rng("rng", rng)
        params, region = [], []
        for name, n in counts.items():
            params.append(family.sample_params(name, n, rng))
            region += [name] * n
        return cls(family, np.concatenate(params), np.array(region, dtype=object))

    def subset(self, index) -> TaskSet:
        """The tasks at ``index`` (an index array or boolean mask)."""
        return TaskSet(self.family, self.params[index], self.region[index])

    def state(self, prefix: str = "library.") -> tuple[dict[str, np.ndarray], dict]:
        """The tasks as arrays under ``prefix`` (parameters, each task's region as an index into the
        sorted region names) and a description (:func:`taskextrap.tasks.specs.family_state`: how
        to find the family again, or an observed family's own points) for :meth:`from_state`."""
        regions = sorted(set(self.region.tolist()))
        arrays = {
            f"{prefix}params": self.params,
            f"{prefix}region": np.array([regions.index(r) for r in self.region], dtype=np.int64),
        }
        family_arrays, family = family_state(self.family, f"{prefix}observed.")
        return arrays | family_arrays, {"kind": "TaskSet", "family": family, "regions": regions}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], desc: dict, prefix: str = "library.") -> TaskSet:
        """The tasks :meth:`state` wrote: the same parameters of the same family."""
        family = family_from_state(arrays, desc["family"], ParametricFamily, f"{prefix}observed.")
        regions = np.array(desc["regions"], dtype=object)[arrays[f"{prefix}region"]]
        return cls(family, arrays[f"{prefix}params"], np.asarray(regions.tolist()))

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Values of tasks ``index`` (all tasks by default) at inputs ``x`` of shape (len(index), m).

        Returns:
            The values (len(index), m).
        """
        if index is not None:
            index = as_index_array("index", index, len(self), "task indices")
        params = self.params if index is None else self.params[index]
        return self.family(params, x)

    def curves(self, x: np.ndarray) -> np.ndarray:
        """Every task at every row of ``x`` (c, m) -> (c, tasks, m), in one call of the family."""
        c, m = x.shape
        params = np.tile(self.params, (c, 1))
        return self.family(params, np.repeat(x, len(self), axis=0)).reshape(c, len(self), m)
