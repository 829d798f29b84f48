"""Oracles of the parameter regime: methods handed the ground truth the paper says they receive.

The ground truth lives here only: the estimators never take a target's true parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.multistep import ChainedRTE
from taskextrap.estimators.parameter import RTE
from taskextrap.tasks.observe import Observations
from taskextrap.tasks.taskset import TaskSet
from taskextrap.validation import as_rows


@dataclass(eq=False)
class TransductiveOracle(RTE):
    """RTE with a perfect proxy: the anchor is the library task nearest by true theta and the
    shift is the full true delta-theta. It trains its own Psi on library pairs with true shifts.

    ``decompose_truth(ctx_x, ctx_y, theta)`` gives the decomposition to pass to ``predict``. It
    never searches, so its Psi is Strategy A's (``search="proxy"``: no leave-one-out rows).
    """

    search: str = "proxy"

    def _fit_descriptors(self, library: TaskSet, obs: Observations, first: np.ndarray) -> np.ndarray:
        return library.family.scaled_params(obs.params)

    def decompose(self, ctx_x, ctx_y, k: int | None = None, search: str | None = None) -> Decomposition:
        """Not available from a context, whatever ``k`` and ``search``: the oracle decomposes from the
        truth (:meth:`decompose_truth`)."""
        raise TaskextrapError(
            "the transductive oracle needs the targets' true parameters: use decompose_truth(ctx_x, ctx_y, theta)"
        )

    def decomposition_for(self, ctx_x, ctx_y, anchors, phi=None) -> Decomposition:
        """Not available: the oracle's shifts come from the truth (:meth:`decompose_truth`)."""
        raise TaskextrapError(
            "the transductive oracle decomposes from the true parameters: use decompose_truth(ctx_x, ctx_y, theta)"
        )

    def decompose_truth(self, ctx_x, ctx_y, theta, k: int | None = None) -> Decomposition:
        """The ``k`` library tasks nearest each target by true (scaled) parameters ``theta`` (n, p),
        with the true shifts."""
        self.check_is_fitted()
        ctx_x, ctx_y = self._checked_context(ctx_x, ctx_y)
        fam = self.library_.family
        theta = as_rows("theta", theta, len(ctx_x), len(fam.param_names), f"the true {fam.param_names} of each target")
        return self._nearest(fam.scaled_params(theta), k)


@dataclass(eq=False)
class ChainedTransductiveOracle(TransductiveOracle, ChainedRTE):
    """The transductive oracle chained like :class:`ChainedRTE`: anchors by true theta, the
    true shift split linearly over the steps (its proxy is theta itself, so ``re-embed`` has no
    meaning here)."""

    def __post_init__(self):
        super().__post_init__()
        if self.shift_split != "linear":
            raise TaskextrapError(
                "the chained transductive oracle splits the true shift linearly: use shift_split='linear'"
            )
