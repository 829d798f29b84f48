"""A set of tasks of one family stored as arrays: the library and the held-out targets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from taskextrap.tasks.family import ParametricFamily


@dataclass(frozen=True)
class TaskSet:
    """Tasks ``params`` (n, p) of ``family``, with the region each was drawn from."""

    family: ParametricFamily
    params: np.ndarray
    region: np.ndarray

    def __len__(self) -> int:
        return len(self.params)

    @classmethod
    def sample(cls, family: ParametricFamily, counts: dict[str, int], rng: np.random.Generator) -> "TaskSet":
        """Draw ``counts[region]`` tasks from each region, region by region in the given order."""
        params, region = [], []
        for name, n in counts.items():
            params.append(family.sample_params(name, n, rng))
            region += [name] * n
        return cls(family, np.concatenate(params), np.array(region, dtype=object))

    def subset(self, index) -> "TaskSet":
        """The tasks at ``index`` (an index array or boolean mask)."""
        return TaskSet(self.family, self.params[index], self.region[index])

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Values of tasks ``index`` (all tasks by default) at inputs ``x`` of shape (len(index), m)."""
        params = self.params if index is None else self.params[index]
        return self.family(params, x)
