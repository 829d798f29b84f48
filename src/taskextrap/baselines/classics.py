"""The meta-learning classics, as methods (``baselines.method``): ``ctx-gp`` (:class:`CtxGP`, a
GP on the target's context alone), ``meta-gp`` (:class:`LibraryGP`, a GP prior fitted on the
library's tasks, conditioned on the context) and ``cnp`` (:class:`NeuralProcess`, a conditional
neural process trained on the library's tasks). Each gives a predictive mean and its own interval.

In an experiment ``meta-gp`` and ``cnp`` learn from exactly the library draws the unit's
inductive baseline trains on (the parameter regime's draws of Phase 1a, or the discrete regimes'
fresh training tasks), with the estimator's scaler and training settings (its ``SharedDraws``),
so the classics, the inductive baseline and RTE see the same data; ``ctx-gp`` needs no library
fit, and its fit on a set of contexts is made once for all training seeds (:func:`ctx_gp_once`).

Their settings were chosen on the dev split (:data:`CHOSEN`): on it every variant of
:data:`VARIANTS` is a row (the method table, ``baselines.table``): meta-gp's kernel family and
cnp's width, then the number of training steps at the chosen kernel and width (one setting at a
time, as RTE's were).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch

from taskextrap import audit
from taskextrap.baselines.gp import GP_KERNELS, MetaGP, check_optimizer, ctx_gp, hyper_names
from taskextrap.baselines.method import Method, SharedDraws, own_draws
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import PendingFit
from taskextrap.operators.cnp import CNPRegressor
from taskextrap.operators.jobs import TrainConfig
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.regimes import get_protocol
from taskextrap.validation import check_device, check_instance, check_int, check_real

CNP_WIDTHS = (64, 128)
# The first dev round's choice (kernel family, width), at which the second round scores the
# fit: meta-gp's optimiser (Adam's steps, or L-BFGS to convergence at each prior-mean degree) and
# cnp's training steps.
FIRST_ROUND = {"kernel": "rbf+linear", "width": 128}
# Training steps as a multiple of the unit's (whose steps every network of a unit takes); 1 is the
# plain variant. No cap ties a classic to RTE's budget: the dev-best is chosen whatever it costs,
# and each row's seconds are recorded beside its error.
STEP_SCALES = (0.5, 2.0)
CNP_STEP_SCALES = (0.5, 2.0, 4.0)
MEAN_DEGREES = (0, 1, 3)  # meta-gp's polynomial prior mean, scored with the converged fit
LBFGS_EVALUATIONS = 2000  # meta-gp's L-BFGS: the most objective evaluations (it stops on its tolerance first)
# Every variant the dev split scores, by row name, as its constructor arguments: meta-gp's kernel
# family (LibraryGP), cnp's width (NeuralProcess), then each one's fit.
VARIANTS: dict[str, dict] = {
    **{f"meta-gp-{k}": {"kernel": k, "step_scale": 1.0} for k in GP_KERNELS},
    **{
        f"meta-gp-{FIRST_ROUND['kernel']}-x{s:g}": {"kernel": FIRST_ROUND["kernel"], "step_scale": s}
        for s in STEP_SCALES
    },
    **{
        f"meta-gp-{FIRST_ROUND['kernel']}-lbfgs-deg{d}": {
            "kernel": FIRST_ROUND["kernel"],
            "optimizer": "lbfgs",
            "mean_degree": d,
        }
        for d in MEAN_DEGREES
    },
    **{f"cnp-w{w}": {"width": w, "step_scale": 1.0} for w in CNP_WIDTHS},
    **{
        f"cnp-w{FIRST_ROUND['width']}-x{s:g}": {"width": FIRST_ROUND["width"], "step_scale": s} for s in CNP_STEP_SCALES
    },
}
# cnp step scales scored after the dev files, outside the dev units (benchmarks/cnp_steps_dev.py:
# the same dev splits and draws as a dev unit's cnp row, to the bit; its files
# benchmarks/results/cnp-steps-dev*.json), so that no dev unit trains them: a regime may choose
# one (choose_classics' ``scored_after``), and its interval's scale is chosen on the same files'
# coverage (scripts/calibrate_intervals.py). Built by name like a dev row, never a table's row.
CNP_STEP_SCALES_AFTER = (8.0, 16.0, 32.0, 64.0, 128.0)
SCORED_AFTER: dict[str, dict] = {
    f"cnp-w{FIRST_ROUND['width']}-x{s:g}": {"width": FIRST_ROUND["width"], "step_scale": s}
    for s in CNP_STEP_SCALES_AFTER
}
# The dev choice (choose_classics on benchmarks/results/parameter-{paper,strict}-paper-dev.json
# together, with the variants scored after them on the same dev cells; a test holds CHOSEN to
# those files), mean log MSE over both protocols' families, with no cap on the steps: meta-gp's
# marginal likelihood run to convergence by L-BFGS at prior-mean degree 3, -0.80 (Adam at twice
# the unit's steps -0.58, the unit's -0.49, half -0.37; L-BFGS at degree 1 -0.28, 0 -0.18; rbf
# -0.37, matern52 0.25); cnp width 128 at thirty-two times the unit's steps 0.83 (scored after
# the dev files, benchmarks/cnp_steps_dev.py: sixteen times 0.89, eight 1.04, four 1.21 there;
# in the dev files four times 1.18, twice 1.31, the unit's 1.41, half 1.60, width 64 1.54; at
# four times, three and ten times the learning rate 1.16 and 1.31).
CHOSEN = {"meta-gp": "meta-gp-rbf+linear-lbfgs-deg3", "cnp": "cnp-w128-x32"}
# A regime whose dev runs score the variants too has its own choice, by the same rule
# (choose_classics on its quick dev runs, both protocols, and the variants scored after them on
# the same cells; a test holds each to its files); a regime without one (a user's library:
# observed) keeps CHOSEN. Mean log MSE: length meta-gp-matern52 -0.70 (the parameter regime's
# L-BFGS degree 3: -0.04), cnp x64 -0.525 (scored after: x32 -0.517, x16 -0.45, x8 -0.39, x4
# -0.34; the dev files' x4 -0.34, x2 -0.25); composition meta-gp-matern52 -3.02 (L-BFGS degree
# 3: -2.69), cnp x128 -2.03 (scored after: x64 -1.87, x32 -1.74, x16 -1.69, x8 -1.65, x4 -1.61;
# the dev files' x4 -1.60, x2 -1.56; not choosable, at three times the rate: x64 -2.01, x16
# -1.84); composition-depth3 meta-gp-matern52 1.559 (rbf+linear 1.678,
# L-BFGS degree 3 2.193), cnp x4 2.533 (the unit's 2.534, x2 2.537; not scored further).
CHOSEN_BY_REGIME: dict[str, dict[str, str]] = {
    "length": {"meta-gp": "meta-gp-matern52", "cnp": "cnp-w128-x64"},
    "composition": {"meta-gp": "meta-gp-matern52", "cnp": "cnp-w128-x128"},
    "composition-depth3": {"meta-gp": "meta-gp-matern52", "cnp": "cnp-w128-x4"},
}


def chosen(regime: str | None = None) -> dict[str, str]:
    """The variant behind each learned classic's row in ``regime``: its own dev choice
    (:data:`CHOSEN_BY_REGIME`), else the parameter regime's (:data:`CHOSEN`). A copy."""
    return {**CHOSEN, **CHOSEN_BY_REGIME.get(regime or "parameter", {})}


def scale_name(method: str, regime: str | None = None) -> str:
    """The name a method's interval scale is chosen and looked up under: a learned classic's row
    (``meta-gp``, ``cnp``) by the variant behind it in ``regime`` (:func:`chosen`), so that a
    scale chosen for one variant is never applied to another; any other method by its own name."""
    return chosen(regime).get(method, method)


# ctx-gp's fit, chosen on the parameter regime's dev split (benchmarks/ctx_gp_fit.py): the dev
# MSE relative to the best fit of each (family, protocol), as a geometric mean. The first grid
# (ctx-gp-fit.json): L-BFGS from 1 + 16 starts 1.000, 1 + 8 1.030, 1 + 5 1.050, 1 + 2 1.087; the
# fixed Adam budget it had (300 steps from 1 + 2 starts) 1.106. Its largest setting won, so the
# grid's next doubling was scored after it (ctx-gp-fit-r32.json, the same rule on the same dev
# contexts): 1 + 32 starts 1.000 against 1.015 for 1 + 16, at 2.4 times the price. As for the cnp,
# a setting scored after the grid is adopted when it wins, and the grid is extended once (a test
# holds this to both files). Its interval's scale is chosen on the quick dev units' targets like
# every other (benchmarks/ctx_gp_dev_coverage.py, ctx-gp-dev-coverage.json).
CTX_GP_CHOSEN: dict[str, Any] = {"optimizer": "lbfgs", "restarts": 32}


def ctx_gp_variant(optimizer: str, restarts: int) -> str:
    """The name of a ``ctx-gp`` fit (``ctx-gp-lbfgs-r32``): what a run's config records behind its
    ``ctx-gp`` row (``classic_variants``), so a file made with another fit says so."""
    return f"ctx-gp-{optimizer}-r{restarts}"


CTX_GP_VARIANT = ctx_gp_variant(**CTX_GP_CHOSEN)


def classic_variants(regime: str) -> dict[str, str]:
    """The variant behind each learned classic's row in a run of ``regime`` (:func:`chosen`) and
    ``ctx-gp``'s fit (:data:`CTX_GP_VARIANT`), for its config or an evaluation's record:
    ``scripts/calibrate_intervals.py`` chooses a row's scale for that variant, and a table says
    when a file was made with another."""
    return {**chosen(regime), "ctx-gp": CTX_GP_VARIANT}


# ctx-gp's last fits by their inputs: a GP on the context alone does not depend on the training
# seed, so the seeds of a run (one unit after another in one process, on the same targets) fit
# it once per set of contexts; a few sets, as a unit may score several (protocols, groups).
CTX_GP_KEPT = 4
OWN_DRAWS = 8  # draws of each library task a classic fitted alone learns from
_ctx_gp_fits: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()


def _inputs_key(device: str, *arrays) -> str:
    """A digest of ``arrays`` (dtype, shape and bytes), the device and torch's threads: inputs
    that give the same fit to the bit."""
    h = hashlib.sha256(f"{device}|{torch.get_num_threads()}".encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"|{a.dtype.str}{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def ctx_gp_once(ctx_x, ctx_y, qry_x, device: str = "cpu", **fit) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~taskextrap.baselines.gp.ctx_gp` (the dev-chosen kernel; ``fit``: its other
    arguments), fitted once for the same inputs: the last :data:`CTX_GP_KEPT` fits are kept in
    memory and a repeat gets copies of them, the same numbers to the bit.

    Returns:
        (mean, sd): each (n, q).
    """
    key = _inputs_key(f"{device}|{sorted(fit.items())}", ctx_x, ctx_y, qry_x)
    got = _ctx_gp_fits.get(key)
    if got is None:
        got = _ctx_gp_fits[key] = ctx_gp(ctx_x, ctx_y, qry_x, device=str(device), **fit)
        while len(_ctx_gp_fits) > CTX_GP_KEPT:  # the oldest first
            _ctx_gp_fits.popitem(last=False)
    else:
        _ctx_gp_fits.move_to_end(key)
    mean, sd = got
    return mean.copy(), sd.copy()


@dataclass(eq=False)
class CtxGP(Method):
    """``ctx-gp``: a GP on each target's context alone, its hyper-parameters chosen by that
    context's marginal likelihood (``baselines.gp.ctx_gp``, the dev-chosen kernel). Nothing is
    learned from the library; a fit on a set of contexts is made once for every training seed
    (:func:`ctx_gp_once`).

    Args:
        device: where the fits run.
        optimizer: the marginal likelihood's optimiser, ``"lbfgs"`` (each start run to its own
            convergence) or ``"adam"`` (a fixed budget of steps); dev chose L-BFGS
            (:data:`CTX_GP_CHOSEN`).
        restarts: random starts beside scikit-learn's starting values (dev chose
            :data:`CTX_GP_CHOSEN`'s).
    """

    interval: ClassVar[bool] = True
    device: str = "cpu"
    optimizer: str = CTX_GP_CHOSEN["optimizer"]
    restarts: int = CTX_GP_CHOSEN["restarts"]

    def _settings(self) -> dict:
        check_device(self.device)
        check_int("restarts", self.restarts, 0)
        check_optimizer(self.optimizer)
        return {}

    def _predict(self, ctx_x, ctx_y, x_query):
        fit = {"optimizer": self.optimizer, "restarts": self.restarts}
        return ctx_gp_once(ctx_x, ctx_y, x_query, device=str(self.device), **fit)


def _check_learned(method) -> None:
    """The arguments LibraryGP and NeuralProcess share, checked."""
    check_real("step_scale", method.step_scale, 0.0, min_open=True)
    if method.train is not None:
        check_instance("train", method.train, TrainConfig, "a TrainConfig or None")
    check_int("seed", method.seed, 0)
    check_device(method.device)
    get_protocol(method.protocol)


def _learning(method, library, shared: SharedDraws | None) -> tuple[SharedDraws, TrainConfig]:
    """What a classic learns from and for how long: the unit's draws (its own draws of the library
    when fitted alone), and the training config (its own, else the unit's) at ``step_scale``
    times its steps."""
    if shared is None:
        shared = own_draws(
            library, get_protocol(method.protocol), OWN_DRAWS, method.seed, method.train or TrainConfig()
        )
    train = method.train or shared.train
    return shared, replace(train, steps=max(1, round(train.steps * method.step_scale)))


def _variant(stem: str, step_scale: float) -> str:
    """A variant's row name: ``stem``, and ``-x<scale>`` unless it trains for the unit's steps."""
    return stem + ("" if step_scale == 1.0 else f"-x{step_scale:g}")


@dataclass(eq=False)
class LibraryGP(Method):
    """``meta-gp``: one GP prior, its polynomial mean and kernel fitted on library draws by their
    summed marginal likelihood (``baselines.gp.MetaGP``), conditioned on each target's context.

    Args:
        kernel: the kernel family, one of ``baselines.gp.GP_KERNELS`` (dev chose rbf+linear).
        step_scale: Adam's steps as a multiple of the training config's steps (not read by L-BFGS).
        train: the training config whose steps it scales; None: the unit's (in an experiment),
            else ``TrainConfig()``'s.
        seed: seeds the draws of each step (in an experiment, the unit's seed).
        device: where the fit and the predictions run.
        protocol: how a fit alone observes the library's tasks (in an experiment: as the
            unit's estimator does).
        optimizer: ``"adam"`` (``step_scale`` times the unit's steps of 256 draws) or ``"lbfgs"``
            (every draw at each evaluation, run to convergence: ``MetaGP(optimizer="lbfgs")``).
        mean_degree: the degree of the polynomial prior mean.
    """

    interval: ClassVar[bool] = True
    kernel: str = "rbf+linear"
    step_scale: float = 1.0
    train: TrainConfig | None = None
    seed: int = 0
    device: str = "cpu"
    protocol: str = "paper"
    optimizer: str = "adam"
    mean_degree: int = 3

    def _settings(self) -> dict:
        hyper_names(self.kernel)
        _check_learned(self)
        check_int("mean_degree", self.mean_degree, 0)
        check_optimizer(self.optimizer)
        return {}

    @property
    def variant(self) -> str:
        """The variant's name (a dev row's), e.g. ``meta-gp-rbf+linear-x0.5`` or
        ``meta-gp-rbf+linear-lbfgs-deg3``."""
        if self.optimizer == "lbfgs":
            return f"meta-gp-{self.kernel}-lbfgs-deg{self.mean_degree}"
        return _variant(f"meta-gp-{self.kernel}", self.step_scale) + (
            "" if self.mean_degree == 3 else f"-deg{self.mean_degree}"
        )

    def _begin(self, library, shared: SharedDraws | None) -> PendingFit:
        shared, cfg = _learning(self, library, shared)
        cx, cy, qx, qy, _ = audit.consume("meta-gp", shared.fixed(rng(self.seed, "meta-gp-draws")), "train")
        steps = LBFGS_EVALUATIONS if self.optimizer == "lbfgs" else cfg.steps
        self.gp_ = MetaGP(self.kernel, self.mean_degree, steps, seed=self.seed, device=str(self.device),
                          optimizer=self.optimizer)  # fmt: skip

        def fit() -> None:  # a lane's work beside the unit's networks (its own draws, its own bits)
            t = time.perf_counter()
            self.gp_.fit(cx, cy, qx, qy, shared.scaler)
            self.timing_ = {"fit_s": time.perf_counter() - t}

        return PendingFit([], lambda: None, [fit])

    def _predict(self, ctx_x, ctx_y, x_query):
        return self.gp_.predict(ctx_x, ctx_y, x_query)


@dataclass(eq=False)
class NeuralProcess(Method):
    """``cnp``: a conditional neural process (``operators.cnp``) trained on library draws by the
    Gaussian likelihood, as the inductive baseline trains (the same draws, scaler and steps).

    Args:
        width: the encoder's and decoder's width (dev chose 128).
        step_scale: training steps as a multiple of the training config's steps.
        train: the training config; None: the unit's (in an experiment), else ``TrainConfig()``.
        seed: the unit's seed (its network and batches are seeded from it and the variant's name).
        device: where it trains and predicts.
        protocol: how a fit alone observes the library's tasks (in an experiment: as the
            unit's estimator does).
    """

    interval: ClassVar[bool] = True
    width: int = 128
    step_scale: float = 1.0
    train: TrainConfig | None = None
    seed: int = 0
    device: str = "cpu"
    protocol: str = "paper"

    def _settings(self) -> dict:
        check_int("width", self.width, 1)
        _check_learned(self)
        return {}

    @property
    def variant(self) -> str:
        """The variant's name (a dev row's), e.g. ``cnp-w128-x0.5``."""
        return _variant(f"cnp-w{self.width}", self.step_scale)

    def _begin(self, library, shared: SharedDraws | None) -> PendingFit:
        shared, cfg = _learning(self, library, shared)
        v = self.variant
        self.net_ = CNPRegressor(shared.scaler, shared.n_context, derive_seed(self.seed, v), cfg, self.width).to(
            self.device
        )
        g = rng(self.seed, v, "batches")
        d = shared.draws
        job = self.net_.fit_stream_job(d, shared.val, g) if callable(d) else self.net_.fit_job(d, shared.val, g)
        return PendingFit([job], lambda: None)

    def _predict(self, ctx_x, ctx_y, x_query):
        return self.net_.predict_with_sd(ctx_x, ctx_y, x_query)


def variant_scores(rows) -> dict[str, float]:
    """Each variant's dev score from dev runs' rows (several files' rows may be joined): the mean
    over (experiment, group) of log MSE, so every family counts alike whatever its scale. Lower
    is better."""
    by: dict[str, list[float]] = {}
    for r in rows:
        if r["metric"] == "mse" and r["method"] in VARIANTS:
            by.setdefault(r["method"], []).append(float(np.log(r["value"])))
    return {v: float(np.mean(s)) for v, s in by.items()}


def variant_settings(name: str) -> dict:
    """The constructor arguments of a classic's variant: a dev row's (:data:`VARIANTS`) or one
    scored after the dev files (:data:`SCORED_AFTER`); a one-line error for any other name."""
    if name in VARIANTS:
        return dict(VARIANTS[name])
    if name in SCORED_AFTER:
        return dict(SCORED_AFTER[name])
    raise TaskextrapError(f"unknown classic variant {name!r}; choose from {', '.join([*VARIANTS, *SCORED_AFTER])}")


def choose_classics(rows, scored_after: dict[str, float] | None = None) -> dict[str, str]:
    """The variant behind each fitted classic row (``meta-gp``, ``cnp``): the lowest
    :func:`variant_scores` among its variants (the first listed on a tie), whatever it costs.
    ``scored_after``: the same rule's scores of :data:`SCORED_AFTER` variants on the same dev
    cells (``benchmarks/cnp_steps_dev.py``'s ``scores``); other names in it are ignored."""
    scores = variant_scores(rows) | {v: float(s) for v, s in (scored_after or {}).items() if v in SCORED_AFTER}
    out = {}
    for row in CHOSEN:
        mine = [v for v in (*VARIANTS, *SCORED_AFTER) if v.startswith(f"{row}-") and v in scores]
        if not mine:
            raise TaskextrapError(f"no dev rows of {row}'s variants: run the dev split first")
        out[row] = min(mine, key=lambda v: (scores[v], mine.index(v)))
    return out
