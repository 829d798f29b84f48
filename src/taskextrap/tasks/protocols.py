"""What the rest of the package assumes of a task family and of a set of its tasks, written
down as typing protocols (structural: any object with these members qualifies, no base class).

The observation protocols (``tasks.observe``), the scalers (``scaling``), Γ (``embed``) and the
leak audit (``audit``) read only these members, so a new family works with every estimator of
its regime once it has them. The built-in ones (``ParametricFamily``, ``Ladder``, the composer
of ``tasks.primitives`` and the primitives observed as tasks) all do; ``tests/tasks/test_protocols.py``
checks each.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TaskFamily(Protocol):
    """A generator of tasks f_θ on a 1-D input domain.

    ``family(params, x)`` evaluates tasks ``params`` (n, p) at inputs ``x`` (n, m) -> (n, m);
    ``grid(m)`` is ``m`` inputs spanning the domain (the scaler and Γ's probe read the library
    on it); ``output_range(rng)`` the spread of training tasks' outputs (it scales a protocol's
    context noise); ``task_labels(params)`` names each task's region or relation (what the
    leak audit checks against the names a fit may see).
    """

    name: str
    domain: tuple[float, float]

    def __call__(self, params: np.ndarray, x: np.ndarray) -> np.ndarray: ...

    def grid(self, m: int) -> np.ndarray: ...

    def output_range(self, rng: np.random.Generator) -> float: ...

    def task_labels(self, params: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class TaskCollection(Protocol):
    """Some tasks of one family, stored as arrays: a library, or targets.

    ``params`` (n, p) are the tasks' parameters (what ``family`` evaluates and what the audit
    labels); ``values(x, index=None)`` evaluates the tasks ``index`` (default all) at ``x``
    (n, m) -> (n, m).
    """

    family: TaskFamily
    params: np.ndarray

    def __len__(self) -> int: ...

    def values(self, x: np.ndarray, index: np.ndarray | None = None) -> np.ndarray: ...
