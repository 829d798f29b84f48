"""The contract of every baseline and meta-learning classic (a *method*): fitted on a library of
training tasks, it predicts a target at query inputs from that target's context alone.

A method is an estimator as RTE is (``estimators.base.Fittable``): a dataclass whose fields are
its constructor arguments (its variants: a GP's kernel, a network's width), with ``get_params``,
``set_params``, ``sklearn.base.clone``, a one-line error for a bad argument or a call before
``fit``, and

    fit(library) -> self
    predict(ctx_x, ctx_y, x_query, return_std=False) -> (n, q), or (mean, sd) where ``interval``

In an experiment a method is fitted beside the unit's estimator on the estimator's own data:
``begin_fit(library, shared)`` takes the estimator's :class:`SharedDraws` (its scaler, its
library draws and its training settings; the unit's seed and device are the method's own
arguments) and returns a ``PendingFit`` whose networks train
with the estimator's (``estimators.base.fit_together``). Alone, ``fit(library)`` draws what it
needs from the library itself (:func:`own_draws`). The rows an experiment shows come from the
method table (``baselines.table``), so a new method is one class and one entry there.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Fittable, PendingFit, check_progress, fit_together
from taskextrap.operators.jobs import TrainConfig
from taskextrap.operators.pairs import observe_library, validation_split
from taskextrap.operators.parameter import sort_context
from taskextrap.scaling import FamilyScaler
from taskextrap.validation import check_context, check_query

Draws = audit.Batch | Callable[[np.random.Generator], audit.Batch]
VAL_FRACTION = 0.2  # library tasks a method fitted alone holds out for model selection
# The most library tasks a method fitted alone draws from: a seeded subset beyond (its scaler still
# reads every task), so a classic's fit (meta-gp's L-BFGS reads every draw at each evaluation, a
# network's validation every held-out draw) costs the same for any larger library (issue 65).
OWN_TASKS = 1024


@dataclass(frozen=True)
class SharedDraws:
    """What a unit's estimator shares with the methods fitted beside it, so that every row of a
    table learns from the same data with the same budget.

    Attributes:
        scaler: the estimator's scaler (fitted on the library only).
        n_context: context points per draw (the protocol's).
        train: the estimator's network ``TrainConfig`` (a method's networks take its steps).
        draws: library draws (ctx_x, ctx_y, qry_x, qry_y, extra) to learn from: a fixed batch,
            or a function drawing a fresh batch from a generator (a pass of a stream).
        val: held-out library draws for model selection.
    """

    scaler: FamilyScaler
    n_context: int
    train: TrainConfig
    draws: Draws
    val: audit.Batch

    def fixed(self, g: np.random.Generator) -> audit.Batch:
        """One batch of training draws: the fixed batch, or a fresh one drawn from ``g``."""
        return self.draws(g) if callable(self.draws) else self.draws


class Method(Fittable):
    """Base of the baselines and classics: ``fit(library)``, ``begin_fit(library, shared)`` and
    ``predict(ctx_x, ctx_y, x_query, return_std=False)``. A subclass is a dataclass; it says
    whether it gives its own predictive sd (:attr:`interval`) and implements :meth:`_begin` and
    :meth:`_predict`."""

    fitted_attribute = "library_"
    interval: ClassVar[bool] = False  # predict(return_std=True) gives the method's own sd
    # Settings a user's fit chooses on its dev split (workflow.fit_calibrated: the lowest dev MSE
    # over every combination), as rte's interval scale is chosen there: {argument: candidates}.
    dev_grid: ClassVar[dict[str, tuple]] = {}

    @classmethod
    def grid_predictions(cls, build: Callable[..., Method], settings: list[dict], library, ctx_x, ctx_y, x_query):
        """Each of ``settings``' predictions at ``x_query`` (a list): ``build(**setting)`` fitted
        on ``library``, one fit per setting. A subclass whose settings share work overrides it
        (the same numbers, computed once): a user's dev split scores every one (``workflow``)."""
        return [build(**p).fit(library).predict(ctx_x, ctx_y, x_query) for p in settings]

    def fit(self, library, progress=None) -> Method:
        """Learn from ``library`` alone (its own draws where the method needs draws) and return self.

        Returns:
            The method itself, fitted.
        """
        check_progress(progress)
        fit_together([self.begin_fit(library)])
        return self

    def begin_fit(self, library, shared: SharedDraws | None = None) -> PendingFit:
        """The fit up to its networks' training: ``shared`` is the unit estimator's data (None:
        the method's own draws of ``library``); train the returned jobs and run its work (a GP's
        fit), then ``finish()``: ``estimators.base.fit_together`` does all three.

        Returns:
            PendingFit: the networks' training jobs (none for a method without networks) and the
            work to run beside them (none for most methods).
        """
        self._checked()
        pending = self._begin(library, shared)

        def finish() -> None:
            pending.finish()
            self.library_ = library  # last: a fit that failed half way is not taken for a fitted one

        return PendingFit(pending.jobs, finish, pending.work)

    def _begin(self, library, shared: SharedDraws | None) -> PendingFit:
        """What the method learns before its networks train (nothing by default)."""
        return PendingFit([], lambda: None)

    def predict(self, ctx_x, ctx_y, x_query, return_std: bool = False):
        """Each target at ``x_query`` (n, q) from its context (n, k); with ``return_std`` (a
        method whose :attr:`interval` is true) also its predictive sd (n, q).

        Returns:
            predictions (numpy.ndarray | tuple): The predictions (n, q); with ``return_std=True``
                the pair (predictions, predictive sd), both (n, q).
        """
        self.check_is_fitted()
        if return_std and not self.interval:
            raise TaskextrapError(f"{type(self).__name__} gives no interval: call predict without return_std")
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        x_query = check_query(x_query, len(ctx_x), "x_query")
        mean, sd = self._predict(ctx_x, ctx_y, x_query)
        return (mean, sd) if return_std else mean

    @abc.abstractmethod
    def _predict(self, ctx_x: np.ndarray, ctx_y: np.ndarray, x_query: np.ndarray) -> tuple[np.ndarray, Any]:
        """(mean (n, q), sd (n, q) or None) from validated arrays."""


def own_draws(library, protocol, n_draws: int, seed: int, train: TrainConfig) -> SharedDraws:
    """What a method fitted alone learns from: ``n_draws`` draws of each library task through
    ``protocol`` (an ``ObservationProtocol``) as RTE's Phase 1a draws them
    (``operators.pairs.observe_library``, the stream ``seed``), a scaler fitted on the library, a
    fifth of the tasks held out for model selection (``operators.pairs.validation_split``), and
    ``train``'s steps. Of a library of more than :data:`OWN_TASKS` tasks, a seeded subset of
    that many is drawn."""
    from taskextrap.seeding import rng
    from taskextrap.tasks.observe import noise_scale

    scaler = FamilyScaler.fit(library)
    if len(library) > OWN_TASKS:
        library = library.subset(np.sort(rng(seed, "own-tasks").choice(len(library), OWN_TASKS, replace=False)))
    scale = noise_scale(library.family)
    obs = observe_library(library, protocol, n_draws, seed, scale)
    _, val = validation_split(len(library), VAL_FRACTION, seed, obs.task)
    batch = lambda mask: _batch(library, obs.subset(np.flatnonzero(mask)), 8.0 * protocol.noise * scale)  # noqa: E731
    learn = ~val if (~val).any() else val  # a one-task library learns and selects on its one task
    return SharedDraws(scaler, protocol.n_context, train, batch(learn), batch(val if val.any() else ~val))


def _batch(library, obs, noise_tolerance: float) -> audit.Batch:
    """Draws as a fit consumes them (context sorted by x), naming their tasks for the leak audit."""
    cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
    source = audit.Source(library.family, obs.params, ((0, 1, noise_tolerance), (2, 3, 0.0)))
    return audit.Batch((cx, cy, obs.qry_x, obs.qry_y, np.zeros((len(cx), 0))), [source])
