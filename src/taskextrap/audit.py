"""Leak audit: every fitted component reports the true parameters of the tasks it is fitted on.

In normal runs this is a no-op. Tests install a spy (``with audit.spy() as seen:``) and assert
that no task from a held-out region ever reaches a fit (probe, PCA, scalers, Psi, baselines).
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

_listeners: list[Callable[[str, np.ndarray], None]] = []


def record_fit(component: str, params: np.ndarray) -> None:
    """Report that ``component`` is being fitted on tasks with true parameters ``params``."""
    for listener in _listeners:
        listener(component, np.asarray(params))


@contextlib.contextmanager
def spy():
    """Collect ``(component, params)`` for every fit made inside the ``with`` block."""
    seen: list[tuple[str, np.ndarray]] = []

    def listener(component: str, params: np.ndarray) -> None:
        seen.append((component, params.copy()))

    _listeners.append(listener)
    try:
        yield seen
    finally:
        _listeners.remove(listener)
