"""Per-family normalisation, fitted on training-region tasks only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError


class Library(Protocol):
    """What a scaler is fitted on: training tasks (a ``TaskSet``, a ``LadderSet``, ...) with their
    ``family`` (its ``domain`` and ``grid(m)``), ``params``, a length and ``values(x)`` (n, m)."""

    @property
    def family(self) -> Any: ...

    @property
    def params(self) -> np.ndarray: ...

    def __len__(self) -> int: ...

    def values(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class FamilyScaler:
    """Affine maps x -> [-1, 1] over the domain and y -> zero mean, unit spread on the library."""

    x_mid: float
    x_half: float
    y_mean: float
    y_std: float

    @classmethod
    def fit(cls, library: Library, m: int = 64) -> FamilyScaler:
        """Fit on the library's values over a grid of the domain (training tasks only)."""
        audit.record_tasks("scaler", library)  # the values below are computed from these tasks
        lo, hi = library.family.domain
        y = library.values(np.broadcast_to(library.family.grid(m), (len(library), m)))
        if len(library) == 0:
            raise TaskextrapError("the library is empty: at least one task is needed to fit a scaler")
        if not np.all(np.isfinite(y)):
            raise TaskextrapError("the library's values over its domain contain NaN or inf: check the family's formula")
        return cls((lo + hi) / 2, (hi - lo) / 2, float(y.mean()), float(y.std() + 1e-12))

    def x(self, x: np.ndarray) -> np.ndarray:
        """Inputs mapped to [-1, 1] over the domain."""
        return (x - self.x_mid) / self.x_half

    def y(self, y: np.ndarray) -> np.ndarray:
        """Outputs standardised with the library's mean and spread."""
        return (y - self.y_mean) / self.y_std

    def dy(self, dy: np.ndarray) -> np.ndarray:
        """Scale a difference of outputs (no offset)."""
        return dy / self.y_std

    def y_inv(self, y: np.ndarray) -> np.ndarray:
        """Inverse of ``y``."""
        return y * self.y_std + self.y_mean

    def dy_inv(self, dy: np.ndarray) -> np.ndarray:
        """Inverse of ``dy``."""
        return dy * self.y_std
