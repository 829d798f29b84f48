"""A context posterior on RTE's relational prior (issue 64): what RTE predicts, corrected towards
the points of the target's context it has seen.

RTE chooses anchors and a shift from a target's context, then predicts from the library; it
never moves its prediction towards the context points themselves. Here its prediction is the
mean function of a Gaussian process on its residuals y - RTE(x):

* :class:`ResidualPrior`: a zero-mean GP (plus a constant) on the residuals, its kernel and
  noise fitted by the marginal likelihood of the residuals of **dev** targets (context and query
  points together; white noise on the context points only), conditioned on a target's context
  residuals. Between context points the correction follows the context; away from them it
  decays, so RTE's extrapolation is kept.
* optionally, a polynomial of each context's residuals beside the GP (a vague prior on its
  coefficients, Rasmussen & Williams section 2.7): where the residual is a polynomial, as RTE's
  is on a polynomial family, the context fixes it exactly.
* an optional second expert, a GP prior fitted on the library (``meta-gp``): the two posteriors
  are multiplied at each query with the residual GP's ``share`` of the precision (1: RTE's
  corrected prediction alone, 0: the library prior alone), and the product's sd is scaled to
  cover 90% of the dev queries.
* an interval that follows each target: the residual prior's amplitude is uncertain (an
  inverse-gamma prior of ``dof`` pseudo-points centred on the fitted one), so a target whose
  context residuals are larger than the dev targets' (their quadratic form Q under the prior,
  about k for k context points like dev's) widens its interval by sqrt((dof + Q) / (dof + k));
  ``dof`` None keeps one width for all.

:func:`choose_posterior` makes every choice on dev targets only, out of fold (two folds by
target, each fitted on one and scored on the other): the kernel family, the polynomial's degree
and the share by the lowest out-of-fold MSE, the amplitude's pseudo-points by the lowest
out-of-fold interval score, each at its interval scale chosen by split-conformal calibration on
the out-of-fold predictions (``search.calibration.choose_scale``); the prior is then fitted on
every dev target.
The designs tried before this one and why it was kept: ``benchmarks/context_posterior_dev.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.stats import norm

from taskextrap.baselines.gp import GP_KERNELS, MetaGP, gp_predict_basis, hyper_names
from taskextrap.errors import TaskextrapError
from taskextrap.scaling import FamilyScaler
from taskextrap.search.calibration import SCALE_GRID, choose_scale
from taskextrap.search.posterior import INTERVAL_LEVEL, covered
from taskextrap.validation import check_context, check_int, check_query, check_real

__all__ = [
    "DEGREES",
    "DOFS",
    "SHARES",
    "ContextPosterior",
    "DevDraws",
    "ResidualPrior",
    "amplitude",
    "choose_posterior",
    "interval_score",
    "out_of_fold_prediction",
    "product",
]

# The residual GP's share of the product's precision, tried on dev: the two experts alone and a
# logistic grid between them (dev picked an end in every cell of the parameter regime's dev
# split and two of six real-data cells: context-posterior-dev*.json).
SHARES = (0.0, *(float(s) for s in 1.0 / (1.0 + np.exp(-np.linspace(-12.0, 12.0, 25)))), 1.0)
# The residual prior's amplitude pseudo-points a choice can try (None: a fixed amplitude, one
# width for every target; fewer pseudo-points: each target's interval follows its own context more).
DOFS = (None, 1.0, 3.0, 10.0, 30.0)
# The degrees of the polynomial fitted to each context's residuals beside the GP a choice can try
# (None: the GP alone; a polynomial under a vague prior follows a residual that is one exactly,
# and extrapolates as a polynomial does).
DEGREES = (None, 0, 1, 2, 3)
# What choose_posterior tries by default: neither, as the dev split said. Each candidate set was
# chosen on one fold of dev targets and scored on the other (context-posterior-dev*.json, designs
# chosen-*): the amplitude narrowed the parameter regime's intervals (paper: interval score -10%)
# but widened the real data's and moved their coverage out of the band (0.90 -> 0.87, 0.84 ->
# 0.80); the polynomial helped interpolation (log MSE -0.04 parameter, -0.12 real) and hurt a
# forecast as much (+0.12), no clear gain over 14 dev cells (-0.016 on average).
DEFAULT_DEGREES: tuple = (None,)
DEFAULT_DOFS: tuple = (None,)
PRIOR_EVALUATIONS = 2000  # the residual prior's L-BFGS: the most objective evaluations (meta-gp's)


@dataclass(frozen=True)
class ResidualPrior:
    """A zero-mean GP prior (plus a constant ``offset``) of an estimator's residuals, in the
    units of its scaler (x mapped to [-1, 1] over the domain, residuals divided by the library's
    output spread ``y_std``).

    Attributes:
        kernel: the kernel family (``baselines.gp.GP_KERNELS``).
        log_theta: the kernel's log hyper-parameters, in ``baselines.gp.hyper_names`` order.
        offset: the prior's constant mean, in scaled units.
        x_mid, x_half, y_std: the scaler's maps (``scaling.FamilyScaler``; no output offset).
    """

    kernel: str
    log_theta: tuple[float, ...]
    offset: float
    x_mid: float
    x_half: float
    y_std: float

    def __post_init__(self):
        if len(self.log_theta) != len(hyper_names(self.kernel)):
            raise TaskextrapError(
                f"a {self.kernel} residual prior has {len(hyper_names(self.kernel))} hyper-parameters, "
                f"got {len(self.log_theta)}"
            )
        check_real("y_std", self.y_std, 0.0, min_open=True)
        check_real("x_half", self.x_half, 0.0, min_open=True)

    @classmethod
    def fit(cls, kernel: str, ctx_x, ctx_r, qry_x, qry_r, scaler, device: str = "cpu") -> ResidualPrior:
        """Fit the prior's kernel, noise and offset by the summed marginal likelihood of the
        residuals ``ctx_r`` at ``ctx_x`` (noisy) and ``qry_r`` at ``qry_x`` (noise-free), one row
        per dev target draw, mapped by ``scaler`` (the estimator's)."""
        units = FamilyScaler(scaler.x_mid, scaler.x_half, 0.0, scaler.y_std)
        gp = MetaGP(kernel, mean_degree=0, steps=PRIOR_EVALUATIONS, device=device, optimizer="lbfgs")
        gp.fit(ctx_x, ctx_r, qry_x, qry_r, units)
        theta = tuple(float(v) for v in gp.log_theta_[0].cpu())
        return cls(kernel, theta, float(gp.mean_[0]), float(scaler.x_mid), float(scaler.x_half), float(scaler.y_std))

    def condition(self, ctx_x, ctx_r, qry_x, degree: int | None = None, device: str = "cpu") -> tuple[np.ndarray, ...]:
        """The residual's posterior at ``qry_x`` given each row's context residuals ``ctx_r`` at
        ``ctx_x`` (n, k): with ``degree``, plus a polynomial of that degree fitted to the context
        under a vague prior (its constant replaces the prior's ``offset``).

        Returns:
            (mean, sd, quadratic): the posterior mean and sd (n, q) and each row's quadratic form
            (n,) of its context residuals under the prior (``baselines.gp.gp_predict_basis``).
        """
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(torch.device(device))  # noqa: E731
        x, q = t((ctx_x - self.x_mid) / self.x_half), t((qry_x - self.x_mid) / self.x_half)
        offset = 0.0 if degree is not None else self.offset
        r = t(np.asarray(ctx_r) / self.y_std - offset)
        theta = torch.tensor([self.log_theta], dtype=torch.float64, device=x.device).expand(len(x), -1)
        with torch.no_grad():
            mean, sd, quad = (v.cpu().numpy() for v in gp_predict_basis(self.kernel, theta, x, r, q, degree))
        return (mean + offset) * self.y_std, sd * self.y_std, quad


def free_points(k: int, degree: int | None) -> int:
    """The context points a residual's quadratic form is spread over: ``k``, less the
    coefficients of a fitted polynomial of ``degree``."""
    return k if degree is None else max(k - degree - 1, 0)


def amplitude(quadratic, k: int, dof: float | None) -> np.ndarray:
    """Each target's interval factor (n,) from its context's quadratic form ``quadratic`` (n,)
    over ``k`` points: the posterior amplitude sqrt((dof + Q) / (dof + k)) of an inverse-gamma
    prior of ``dof`` pseudo-points at the fitted amplitude (None: 1 for every target)."""
    q = np.asarray(quadratic, dtype=float)
    return np.ones_like(q) if dof is None else np.sqrt((dof + q) / (dof + k))


def interval_score(mean, sd, truth, weights, level: float = INTERVAL_LEVEL) -> float:
    """The mean interval (Winkler) score of the central ``level`` interval mean +- z*sd: its
    width plus 2/(1 - level) times how far a truth lies outside it (lower is better; a proper
    score, so an interval gains only by being right where it is narrow)."""
    z = float(norm.ppf(0.5 + level / 2.0))
    lo, hi = mean - z * sd, mean + z * sd
    miss = np.maximum(lo - truth, 0.0) + np.maximum(truth - hi, 0.0)
    score = (hi - lo) + 2.0 / (1.0 - level) * miss
    return float((score * weights).sum() / weights.sum())


def product(first: tuple, second: tuple | None, share: float) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian posteriors (mean, sd) multiplied at each point, ``first`` holding ``share``
    of the precision: the precision-weighted mean and the product's sd. ``share`` 1 (or no
    ``second``) is ``first`` itself, 0 is ``second``."""
    m1, s1 = first
    if second is None or share >= 1.0:
        return m1, s1
    m2, s2 = second
    if share <= 0.0:
        return m2, s2
    tiny = np.finfo(float).tiny
    p1, p2 = share / np.maximum(s1, tiny) ** 2, (1.0 - share) / np.maximum(s2, tiny) ** 2
    return (p1 * m1 + p2 * m2) / (p1 + p2), 1.0 / np.sqrt(p1 + p2)


@dataclass(frozen=True)
class ContextPosterior:
    """The context posterior chosen on dev (:func:`choose_posterior`): the residual prior, the
    residual GP's share of the product with the library prior, the interval scale, the
    amplitude's pseudo-points ``dof`` (None: one interval width for every target; :func:`amplitude`),
    the ``degree`` of the polynomial fitted to each context's residuals beside the GP (None: none)
    and whether the residual GP's mean ``correct``s the prediction (False: the estimator's own
    prediction, with the residual GP's interval; dev found no correction that helped)."""

    prior: ResidualPrior
    share: float = 1.0
    scale: float = 1.0
    dof: float | None = None
    degree: int | None = None
    correct: bool = True

    def __post_init__(self):
        check_real("share", self.share, 0.0, 1.0)
        check_real("scale", self.scale, 0.0, min_open=True)
        if self.dof is not None:
            check_real("dof", self.dof, 0.0, min_open=True)
        if self.degree is not None:
            check_int("degree", self.degree, 0)
        if not isinstance(self.correct, bool):
            raise TaskextrapError(f"correct must be True or False, got {self.correct!r}")

    def predict(self, base_ctx, base_qry, ctx_x, ctx_y, qry_x, expert: tuple | None = None, device: str = "cpu"):
        """The corrected prediction and its calibrated sd (n, q) at ``qry_x``: ``base_ctx`` and
        ``base_qry`` are the estimator's predictions at the context and query inputs, ``expert``
        the library prior's (mean, sd) at the queries (None: the residual GP alone). Reads the
        target's context and the predictions only, never a query value."""
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        qry_x = check_query(qry_x, len(ctx_x), "qry_x")
        if self.degree is not None and ctx_x.shape[1] <= self.degree:
            raise TaskextrapError(
                f"this context posterior fits a degree-{self.degree} polynomial to each context: "
                f"it needs at least {self.degree + 1} context points, got {ctx_x.shape[1]}"
            )
        if expert is None and self.share < 1.0:
            raise TaskextrapError(
                f"this context posterior gives the library prior a share of {1 - self.share:g}: pass expert="
            )
        m, s, quad = self.prior.condition(ctx_x, ctx_y - base_ctx, qry_x, self.degree, device)
        mean, sd = product((base_qry + m if self.correct else base_qry, s), expert, self.share)
        factor = amplitude(quad, free_points(ctx_x.shape[1], self.degree), self.dof)
        return mean, self.scale * factor[:, None] * sd

    def to_dict(self) -> dict:
        """Plain JSON values (a model folder's ``config.json`` keeps them)."""
        d = asdict(self)
        d["prior"]["log_theta"] = list(self.prior.log_theta)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ContextPosterior:
        """The inverse of :meth:`to_dict` (a one-line error for a malformed record)."""
        try:
            prior = ResidualPrior(**{**d["prior"], "log_theta": tuple(d["prior"]["log_theta"])})
            dof, degree = d.get("dof"), d.get("degree")
            return cls(
                prior,
                float(d["share"]),
                float(d["scale"]),
                None if dof is None else float(dof),
                None if degree is None else int(degree),
                bool(d.get("correct", True)),  # records written before the field always corrected
            )
        except (KeyError, TypeError) as exc:
            raise TaskextrapError(f"a context posterior record is malformed: {exc}") from None


@dataclass(frozen=True)
class DevDraws:
    """Dev targets' draws and an estimator's predictions at them: what a context posterior is
    chosen on (:func:`choose_posterior`).

    Attributes:
        ctx_x, ctx_y, qry_x, qry_y: the draws' contexts (n, k) and queries (n, q).
        base_ctx, base_qry: the estimator's predictions at the context and query inputs.
        groups: each draw's target (n,), so that a target's draws share a fold (None: one each).
        mask: (n, q) the real queries of padded rows (None: all).
    """

    ctx_x: np.ndarray
    ctx_y: np.ndarray
    qry_x: np.ndarray
    qry_y: np.ndarray
    base_ctx: np.ndarray
    base_qry: np.ndarray
    groups: np.ndarray | None = None
    mask: np.ndarray | None = None

    def folds(self) -> np.ndarray:
        """Each draw's fold (n,): 0 or 1 by its target's rank (a one-line error for one target)."""
        groups = np.arange(len(self.ctx_x)) if self.groups is None else np.asarray(self.groups)
        fold = np.unique(groups, return_inverse=True)[1] % 2
        if fold.min() == fold.max():
            raise TaskextrapError("choosing a context posterior needs at least 2 dev targets (two folds)")
        return fold

    def weights(self) -> np.ndarray:
        """(n, q) 1 at a real query, 0 at padding."""
        return np.ones_like(self.qry_y, dtype=float) if self.mask is None else np.asarray(self.mask, dtype=float)

    def shared_queries(self) -> int:
        """The queries every row has (the priors are fitted on them; the rest may be padding)."""
        return int(self.weights().sum(1).min())


def out_of_fold_prediction(kernel: str, dev: DevDraws, fold, scaler, degrees=(None,), device: str = "cpu") -> dict:
    """The residual GP's corrected prediction and sd at every dev draw's queries and its
    context residuals' quadratic form (n,), for each polynomial degree of ``degrees``, each
    draw's from a prior fitted on the other fold only (``fold`` (n,): 0 or 1), on the queries
    every row has (:meth:`DevDraws.shared_queries`). Returns {degree: (mean, sd, quadratic)}."""
    q = dev.shared_queries()
    r_ctx, r_qry = dev.ctx_y - dev.base_ctx, dev.qry_y[:, :q] - dev.base_qry[:, :q]
    out = {d: (np.zeros_like(dev.base_qry, dtype=float), np.zeros_like(dev.base_qry, dtype=float), np.zeros(len(fold)))
           for d in degrees}  # fmt: skip
    for f in (0, 1):
        fit_on, on = fold != f, fold == f
        given = (dev.ctx_x[fit_on], r_ctx[fit_on], dev.qry_x[fit_on, :q], r_qry[fit_on])
        prior = ResidualPrior.fit(kernel, *given, scaler, device)
        for d, (m, s, quad) in out.items():
            correction, s[on], quad[on] = prior.condition(dev.ctx_x[on], r_ctx[on], dev.qry_x[on], d, device)
            m[on] = dev.base_qry[on] + correction
    return out


def choose_posterior(
    dev: DevDraws,
    scaler,
    expert=None,
    kernels: tuple[str, ...] = GP_KERNELS,
    device: str = "cpu",
    degrees: tuple = DEFAULT_DEGREES,
    dofs: tuple = DEFAULT_DOFS,
) -> tuple[ContextPosterior, dict]:
    """The context posterior of an estimator, chosen on dev targets' draws ``dev``.

    Args:
        dev: the dev draws and the estimator's predictions at them (:class:`DevDraws`).
        scaler: the estimator's scaler (``scaling.FamilyScaler``).
        expert: the library prior's (mean, sd) at the queries (n, q), or None (the residual GP alone).
        kernels: the kernel families tried.
        device: where the GPs run.
        degrees: the polynomial degrees tried (None: the GP alone; a degree d is skipped unless
            the contexts have d + 2 points; :data:`DEGREES` are all it can try).
        dofs: the amplitude pseudo-points tried (None: one width for every target; :data:`DOFS`).

    Returns:
        (the chosen :class:`ContextPosterior`, a record: every (kernel, degree, share)'s
        out-of-fold MSE and the estimator's own MSE on the same queries, every ``dof``'s
        out-of-fold interval score at its own scale, the choice, and its out-of-fold coverage raw
        and calibrated).
    """
    check_context(dev.ctx_x, dev.ctx_y)
    check_context(dev.qry_x, dev.qry_y)
    fold, w, y, k = dev.folds(), dev.weights(), dev.qry_y, dev.ctx_x.shape[1]
    mse = lambda m: float((((m - y) ** 2) * w).sum() / w.sum())  # noqa: E731
    degrees = tuple(d for d in degrees if d is None or d + 2 <= k)  # a degree leaves a point for the GP
    scores, out_of_fold = {}, {}
    for kernel in kernels:
        found = out_of_fold_prediction(kernel, dev, fold, scaler, degrees, device)
        for degree, (m, s, quad) in found.items():
            out_of_fold[(kernel, degree)] = m, s, quad
            for share in SHARES if expert is not None else (1.0,):
                scores[(kernel, degree, share)] = mse(product((m, s), expert, share)[0])
    # on a tie: no polynomial, then the residual GP alone
    kernel, degree, share = min(scores, key=lambda c: (scores[c], c[1] is not None, c[2] != 1.0))
    m, s, quad = out_of_fold[(kernel, degree)]
    # RTE's own prediction is a candidate too: where no correction helped out of fold, the mean
    # stays RTE's (the interval keeps the residual GP's width, chosen below)
    correct = not mse(dev.base_qry) < scores[(kernel, degree, share)]
    if not correct:
        m, share = dev.base_qry, 1.0
    mean, sd = product((m, s), expert, share)
    dof, scale, widths = _choose_width(mean, sd, quad, free_points(k, degree), dev, dofs)
    sd = sd * amplitude(quad, free_points(k, degree), dof)[:, None]
    inside = lambda scale: float((covered(mean, scale * sd, y) * w).sum() / w.sum())  # noqa: E731
    q = dev.shared_queries()
    every = (dev.ctx_x, dev.ctx_y - dev.base_ctx, dev.qry_x[:, :q], y[:, :q] - dev.base_qry[:, :q])
    prior = ResidualPrior.fit(kernel, *every, scaler, device)
    record = {
        "kernel": kernel,
        "degree": degree,
        "share": share,
        "correct": correct,
        "interval_scale": scale,
        "dof": dof,
        "out_of_fold_interval_score": widths,
        "out_of_fold_mse": {f"{c[0]}@{c[1]}@{c[2]:.4g}": v for c, v in scores.items()},
        "out_of_fold_coverage_raw": inside(1.0),
        "out_of_fold_coverage": inside(scale),
        "base_mse": mse(dev.base_qry),  # the estimator's own, on the same dev queries: what the choice improved on
        "dev_draws": len(fold),
    }
    return ContextPosterior(prior, share, scale, dof, degree, correct), record


def _choose_width(mean, sd, quad, k: int, dev: DevDraws, dofs: tuple) -> tuple[float | None, float, dict]:
    """The amplitude pseudo-points (:data:`DOFS`) with the lowest out-of-fold interval score,
    each at its own split-conformal scale (on a tie, one width for all), that scale, and every
    one's score; ``k``: the free context points of the quadratic forms ``quad``."""
    w, y = dev.weights(), dev.qry_y
    found = {}
    for dof in dofs:
        spread = sd * amplitude(quad, k, dof)[:, None]
        curve = [float((covered(mean, c * spread, y) * w).sum() / w.sum()) for c in SCALE_GRID]
        scale = choose_scale(np.array(curve))
        found[dof] = (interval_score(mean, scale * spread, y, w), scale)
    dof = min(found, key=lambda d: (found[d][0], d is not None))
    return dof, found[dof][1], {str(d): v[0] for d, v in found.items()}
