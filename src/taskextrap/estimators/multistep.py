"""Multi-step parameter extrapolation (paper App. B.1.1): RTE's one-step operator, chained.

A target far beyond the library (F4, F5) is not reachable by one in-distribution shift. The
chained estimator splits the proxy shift phi from an anchor into ``n`` steps and applies Psi
``n`` times; the curve predicted at step ``t`` is the anchor of step ``t + 1``.

Psi needs a target context at every step, but the intermediate tasks are latent. The paper's
"ghost context": at step ``t`` the context values are the straight line between the anchor's
values at the context inputs and the target's observed values,
``ghost_t = anchor + t/n (ctx_y - anchor)``, so the last step sees the real context. The
anchor of step ``t + 1`` is ``ghost_t`` at the context inputs and Psi's prediction at the
queries (the authors' "current curve"). For a family linear in its shifted parameter
(quadratic, cubic, both trends) the ghost context is exactly the context of the task with the
interpolated parameter; for ``exp`` it is not.

How many steps, and how the shift is split, are settings (chosen on the dev split, never on
test tasks; ``docs/results.md``):

- ``steps``: a fixed count for every target, or ``"auto"``: the fewest steps that keep every
  step within the ``step_quantile`` quantile of what Psi was trained on, measured by
  ``step_measure``: ``"shift"`` (the norm of the proxy shift per step) or ``"context"`` (the
  root-mean-square gap between a step's context and its anchor's, in Psi's scaled units: the
  ghost context divides the target's gap to the anchor by ``n``);
- ``shift_split``: ``"linear"`` (the paper: ``phi / n`` per step) or ``"re-embed"`` (the
  proxy shift between consecutive ghost contexts, Gamma(ghost_t) - Gamma(ghost_{t-1}),
  which sums to phi).

A decomposition may carry its own step counts (``extras["steps"]``, one per target and
anchor; :func:`with_steps`): the paper's fixed schedule (2 steps to F3, 3 to F4, 4 to F5) is
passed that way. With one step the prediction is exactly the one-step RTE's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.parameter import RTE
from taskextrap.search.posterior import mixture
from taskextrap.seeding import rng
from taskextrap.validation import check_finite_result, check_real, describe

SHIFT_SPLITS = ("linear", "re-embed")
STEP_MEASURES = ("shift", "context")
MAX_STEPS = 64  # an "auto" schedule never takes more steps than this


def with_steps(decomposition: Decomposition, steps) -> Decomposition:
    """``decomposition`` carrying step counts ``steps``: one int for all, (n,) per target or
    (n, k) per target and anchor; each at least 1."""
    n, k = decomposition.score.shape
    arr = np.asarray(steps)
    if arr.dtype.kind not in "iu" or arr.ndim > 2:
        raise TaskextrapError(
            f"steps must be integer step counts (one, per target or per target and anchor), got {describe(steps)}"
        )
    arr = arr.reshape(n, 1) if arr.ndim == 1 and arr.size == n else arr
    try:
        arr = np.broadcast_to(arr, (n, k)).astype(np.int64)
    except ValueError:
        raise TaskextrapError(f"steps must broadcast to (targets, anchors) = {(n, k)}, got shape {arr.shape}") from None
    if arr.size and (arr.min() < 1 or arr.max() > MAX_STEPS):
        raise TaskextrapError(f"step counts must be between 1 and {MAX_STEPS}, got {arr.min()}..{arr.max()}")
    return dataclasses.replace(decomposition, extras={**decomposition.extras, "steps": arr})


def _check_steps(steps) -> None:
    if steps == "auto":
        return
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, (int, np.integer)) or not 1 <= steps <= MAX_STEPS:
        raise TaskextrapError(f"steps must be 'auto' or an int from 1 to {MAX_STEPS}, got {describe(steps)}")


@dataclass(eq=False)
class ChainedRTE(RTE):
    """RTE reaching far targets in several in-distribution steps (App. B.1.1), scikit-learn style.

    Fitted exactly like :class:`~taskextrap.estimators.parameter.RTE` (same Gamma, Psi and
    streams for the same settings); only prediction differs. Its search defaults to Strategy A's
    (``search="proxy"``): the chain the parameter-multistep experiment scores is Strategy A's (no
    chain of the objective's search was evaluated); its sizes are RTE's. Extra settings (module
    docstring):

    Args:
        steps: ``"auto"`` or a fixed step count for every target and anchor.
        step_quantile: for ``"auto"``, the quantile of the training pairs' measure that one
            step may not exceed.
        step_measure: for ``"auto"``, ``"shift"`` or ``"context"``.
        shift_split: ``"linear"`` (phi / n per step) or ``"re-embed"``.

    Examples:
        Fitted on F1 only, it reaches F3 in steps through in-distribution ghost contexts:

        >>> import numpy as np
        >>> from taskextrap.estimators.multistep import ChainedRTE
        >>> from taskextrap.operators.train import TrainConfig
        >>> from taskextrap.tasks import TaskSet, get_protocol
        >>> from taskextrap.tasks.builtin import MULTISTEP_FAMILIES
        >>> family = MULTISTEP_FAMILIES["quadratic"]
        >>> library = TaskSet.sample(family, {"F1_1": 20, "F1_2": 20}, np.random.default_rng(0))
        >>> chained = ChainedRTE(n_pairs=200, train=TrainConfig(steps=5, batch=64), verbose=False).fit(library)
        >>> far = TaskSet.sample(family, {"F3": 2}, np.random.default_rng(1))
        >>> obs = get_protocol("paper").draw(far, 1, np.random.default_rng(2))
        >>> chained.predict(obs.ctx_x, obs.ctx_y, obs.qry_x).shape
        (2, 8)
    """

    search: str = "proxy"
    steps: int | str = "auto"
    step_quantile: float = 0.9
    step_measure: str = "shift"
    shift_split: str = "linear"

    any_context_size = False  # each chained step reads Psi's own n_context points

    def calibration_regime(self) -> str:
        """Chained prediction has no dev-chosen interval scale of its own (1.0 unless given)."""
        return "parameter-multistep"

    def _settings(self) -> dict:
        """The base class's checks, and this estimator's own arguments'."""
        settings = super()._settings()
        _check_steps(self.steps)
        check_real("step_quantile", self.step_quantile, 0.0, 1.0, min_open=True)
        if self.step_measure not in STEP_MEASURES:
            raise TaskextrapError(
                f"step_measure must be one of {list(STEP_MEASURES)}, got {describe(self.step_measure)}"
            )
        if self.shift_split not in SHIFT_SPLITS:
            raise TaskextrapError(f"shift_split must be one of {list(SHIFT_SPLITS)}, got {describe(self.shift_split)}")
        return settings

    def fit(self, library, progress=None, fitted: RTE | None = None) -> ChainedRTE:
        """Fit Gamma and Psi as RTE does, then record the step measures of the pairs Psi trained on.
        With ``fitted``, a plain RTE of this kind already fitted on ``library`` with the same RTE
        settings, its fit is taken over (it is this fit: the chain adds inference settings only).

        Returns:
            The estimator itself, fitted (as
                :class:`~taskextrap.estimators.parameter.RTE`, plus ``step_measures_``, what sizes its steps).
        """
        if fitted is None:
            super().fit(library, progress)
        else:
            self._adopt_fit(fitted, library)
        self._measure_steps()
        return self

    def restore(self, library, arrays: dict, meta: dict) -> ChainedRTE:
        """RTE's :meth:`~taskextrap.estimators.parameter.RTE.restore`, and the step measures
        measured again (they are a function of the restored draws and the seed)."""
        super().restore(library, arrays, meta)
        self._measure_steps()
        return self

    def _measure_steps(self) -> None:
        """The step measures of the pairs Psi trains on: one pass of training pairs from a
        stream of its own, so the fit itself is RTE's exactly."""
        _ctx_x, ctx_y, anc_ctx, _, _, shift, _ = self._pair_arrays(
            np.flatnonzero(self.draws_.train), rng(self.seed, "step-measures")
        )[:7]
        self.step_measures_ = {
            "shift": np.sort(np.linalg.norm(shift, axis=1)),
            "context": np.sort(self._gap(ctx_y, anc_ctx)),
        }

    def _gap(self, ctx_y: np.ndarray, anc_ctx: np.ndarray) -> np.ndarray:
        """Root-mean-square context gap to the anchor in Psi's scaled units, per row."""
        return np.sqrt(np.mean(self.scaler_.dy(ctx_y - anc_ctx) ** 2, axis=-1))

    def step_size(self) -> float:
        """The largest ``step_measure`` one "auto" step may take."""
        self.check_is_fitted()
        return float(np.quantile(self.step_measures_[self.step_measure], self.step_quantile))

    def step_counts(self, decomposition: Decomposition, ctx_x, ctx_y) -> np.ndarray:
        """Steps (n, k) for each target and anchor: ``extras["steps"]`` when the decomposition
        carries them, else the estimator's ``steps`` rule on the context ``ctx_x``, ``ctx_y``."""
        if "steps" in decomposition.extras:
            return with_steps(decomposition, decomposition.extras["steps"]).extras["steps"]
        n, k = decomposition.score.shape
        if self.steps != "auto":
            return np.full((n, k), int(self.steps))
        if self.step_measure == "shift":
            measure = np.linalg.norm(decomposition.phi.reshape(n, k, -1), axis=2)
        else:  # the gap's mean over context points needs no particular order of them
            anchors = self.library_.values(np.repeat(ctx_x, k, axis=0), decomposition.anchors.reshape(-1))
            measure = self._gap(np.repeat(ctx_y, k, axis=0), anchors).reshape(n, k)
        return np.clip(np.ceil(measure / self.step_size()), 1, MAX_STEPS).astype(np.int64)

    def predict(self, ctx_x, ctx_y, x_query, decomposition: Decomposition | None = None, return_std: bool = False):
        """Predict each target at ``x_query`` (n, q) by chaining Psi from each anchor of
        ``decomposition`` (default :meth:`decompose`) with ghost contexts; mixed by its
        ``weights`` or averaged equally over anchors. ``return_std``: as :meth:`RTE.predict`
        (Psi's one-step validation error: a chain's own error is larger, so this is a lower bound).

        Returns:
            predictions (numpy.ndarray | tuple): The predictions (n, q) after the chain's last step; with
                ``return_std=True`` the pair (predictions, predictive sd).
        """
        d, sx, sy, qry_x = self._predict_inputs(ctx_x, ctx_y, x_query, decomposition)
        steps = self.step_counts(d, sx, sy)
        n, k = steps.shape
        rows = np.repeat(np.arange(n), k)  # one chain per (target, anchor), target-major
        pred = self._chain(
            sx[rows], sy[rows], qry_x[rows], d.anchors.reshape(-1), d.phi.reshape(n * k, -1), steps.reshape(-1)
        )
        w = np.full((n, k), 1.0 / k) if d.weights is None else d.weights
        mean, std = mixture(pred.reshape(n, k, -1).transpose(1, 0, 2), w, self.query_var_)
        check_finite_result("the prediction", mean, "ctx_x, ctx_y or x_query")
        return (mean, self.calibrated_scale() * std) if return_std else mean

    def _chain(self, sx, sy, qry_x, anchors, phi, steps) -> np.ndarray:
        """Psi applied ``steps`` times per row from library task ``anchors``; the final queries."""
        lib = self.library_
        anc_ctx = lib.values(sx, anchors)
        prev_ctx, cur_q = anc_ctx, lib.values(qry_x, anchors)
        z_prev = self.z_library_[anchors]
        for t in range(1, int(steps.max()) + 1):
            act = steps >= t  # rows still walking; the others are done
            n_t = steps[act][:, None].astype(float)
            ghost = anc_ctx[act] + (t / n_t) * (sy[act] - anc_ctx[act])
            if self.shift_split == "linear":
                shift = phi[act] / n_t
            else:
                z = self.embed(sx[act], ghost)
                shift, z_prev = z - z_prev[act], _set(z_prev, act, z)
            step = self.psi_.predict(sx[act], ghost, prev_ctx[act], qry_x[act], cur_q[act], shift)
            prev_ctx, cur_q = _set(prev_ctx, act, ghost), _set(cur_q, act, step)
        return cur_q


def _set(a: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A copy of ``a`` with ``a[rows] = values`` (the chain never writes into its inputs)."""
    out = a.copy()
    out[rows] = values
    return out
