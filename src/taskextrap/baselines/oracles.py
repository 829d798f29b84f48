"""Oracles of the parameter regime: methods handed the ground truth the paper says they receive."""

from __future__ import annotations

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.rte import RTE
from taskextrap.tasks.observe import Observations
from taskextrap.tasks.taskset import TaskSet


def scaled_theta(family, params: np.ndarray) -> np.ndarray:
    """True parameters mapped so each training range is [0, 1] (a shift of one region ~ 0.5)."""
    lo, scale = family.param_scale()
    return (np.asarray(params, dtype=float) - lo) / scale


class TransductiveOracle(RTE):
    """RTE with a perfect proxy: the anchor is the library task nearest by true theta and the
    shift is the full true delta-theta. It trains its own Psi on library pairs with true shifts."""

    def _fit_descriptors(self, library: TaskSet, obs: Observations, first: np.ndarray) -> np.ndarray:
        return scaled_theta(library.family, obs.params)

    def _descriptor(self, ctx_x, ctx_y, theta) -> np.ndarray:
        if theta is None:
            raise TaskextrapError("the transductive oracle needs the targets' true parameters (theta=...)")
        theta = np.asarray(theta, dtype=float).reshape(len(ctx_x), -1)
        return scaled_theta(self.library_.family, theta)
