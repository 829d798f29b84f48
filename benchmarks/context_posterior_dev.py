"""Designs of a context posterior on RTE's relational prior, scored on the parameter regime's dev
split (issue 64, item 1): which one becomes the new estimator is chosen here, never on test tasks.

``python benchmarks/context_posterior_dev.py``: for each built-in family's dev split
(``tasks.dev.dev_family``: the last training region held out, the library drawn from the others)
and each protocol, one ``quick``-profile unit's objective RTE (the ``rte`` row, at the protocol's
dev-chosen variant) is fitted on the library and predicts every dev target at its context and
query inputs. Each design then corrects RTE's prediction from the target's own context:

* ``rte-gp-<kernel>``: a GP on RTE's residuals y - RTE(x) (zero mean), its kernel and noise
  fitted by the marginal likelihood of the residuals of dev targets (context and query points
  together; white noise on the context points only), conditioned on the target's context
  residuals. The correction decays away from the context, so RTE's extrapolation is kept.
* ``rte-gp-std-<kernel>``: the same GP on residuals divided by RTE's own predictive sd (raw),
  so the kernel's amplitude follows each target's spread: k(x, x') = s(x) s(x') k0(x, x').
* ``meta-gp``, ``ctx-gp``, ``cnp``: the classics' MSE on the same targets and draws, read from
  the committed dev run (``parameter-<protocol>-<profile>-dev.json``, seed 0): the yardstick the
  designs must not lose to.

* ``chosen-<set>``: the library's whole rule (``posterior.context.choose_posterior``, the one
  ``rte-gp`` runs) chosen on one fold of the dev targets and applied to the other, for each
  candidate set: ``base`` (kernel and share; the default), ``width`` (+ the amplitude's
  pseudo-points: an interval that follows each target), ``poly`` (+ a polynomial of the
  residuals beside the GP), ``poly-width`` (both). Their coverage is calibrated (the rule's own
  scale) and their interval score is kept: which candidate set is the default is read here.

The residual GP's hyper-parameters are fitted on half of the dev targets and score the other
half (two folds by target index, every target scored once out of fold), so no design is scored
on the targets that fitted it. Writes ``benchmarks/results/context-posterior-dev.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROTOCOLS = ("paper", "strict")
KERNELS = ("rbf", "matern52", "rbf+linear")
Z90 = 1.6448536269514722


def residual_gp(kernel: str, scaler, fit: tuple, given: tuple, std: bool):
    """A zero-mean GP on residuals, fitted by the marginal likelihood on ``fit`` = (context x,
    context residuals, query x, query residuals, RTE's sd at [context, queries]) and conditioned
    on each row of ``given`` = (context x, context residuals, query x, RTE's sd at [context,
    queries]). With ``std`` the residuals are divided by RTE's sd first (the kernel's amplitude
    follows each target's spread). Returns the correction and its sd at ``given``'s queries and
    each given row's context negative log likelihood under the fitted prior."""
    import torch

    from taskextrap.baselines.gp import MetaGP, gp_nll
    from taskextrap.scaling import FamilyScaler

    cx, rc, qx, rq, sd_fit = fit
    gx, grc, gq, sd_given = given
    k = cx.shape[1]
    if std:
        rc, rq, grc = rc / sd_fit[:, :k], rq / sd_fit[:, k:], grc / sd_given[:, :k]
    res = FamilyScaler(scaler.x_mid, scaler.x_half, 0.0, 1.0 if std else scaler.y_std)
    gp = MetaGP(kernel=kernel, mean_degree=0, optimizer="lbfgs", steps=2000).fit(cx, rc, qx, rq, res)
    m, s = gp.predict(gx, grc, gq)
    x, y = gp._t(res.x(gx)), gp._t(res.y(grc) - float(gp.mean_[0]))
    with torch.no_grad():
        nll = gp_nll(kernel, gp.log_theta_.expand(len(x), -1), x, y).cpu().numpy()
    if std:
        m, s = m * sd_given[:, k:], s * sd_given[:, k:]
        nll = nll + np.log(sd_given[:, :k] / scaler.y_std).sum(1)  # the same units as unscaled residuals
    return m, s, nll


def residual_designs(a: dict, fold, kernels=KERNELS) -> dict[str, tuple]:
    """Every residual-GP design's out-of-fold (mean, sd, context nll) at the queries, from a
    cell's arrays ``a`` (:func:`cell_arrays`); ``fold`` (n,) each draw's fold (0 or 1)."""
    k = a["ctx_x"].shape[1]
    pred, sd = a["rte_pred"], a["rte_sd"]
    r = np.concatenate([a["ctx_y"], a["qry_y"]], 1) - pred  # residuals at context and query points
    # the fit reads the queries every row has (a real-data row's last ones may be padding)
    q = int(a["mask"].sum(1).min()) if "mask" in a else a["qry_x"].shape[1]
    out: dict[str, tuple] = {}
    for kernel in kernels:
        for std in (False, True):
            mean, spread, nll = np.zeros_like(a["qry_y"]), np.zeros_like(a["qry_y"]), np.zeros(len(fold))
            for f in (0, 1):
                fit_on, on = fold != f, fold == f
                if not on.any() or not fit_on.any():
                    continue
                fit = (a["ctx_x"][fit_on], r[fit_on, :k], a["qry_x"][fit_on, :q], r[fit_on, k : k + q],
                       sd[fit_on, : k + q])  # fmt: skip
                given = (a["ctx_x"][on], r[on, :k], a["qry_x"][on], sd[on])
                m, s, ll = residual_gp(kernel, a["scaler"], fit, given, std)
                mean[on], spread[on], nll[on] = pred[on, k:] + m, s, ll
            out[f"rte-gp-{'std-' if std else ''}{kernel}"] = (mean, spread, nll)
    return out


def gated(a: dict, fold, rte_gp: tuple) -> dict[str, tuple]:
    """The mixture of a residual-GP design and meta-gp, each weighted by its likelihood of the
    target's context: w = sigmoid(alpha * (ll_rte_gp - ll_meta_gp) + beta), alpha and beta
    fitted on the other fold by the mixture's log predictive density at the queries; and the
    hard choice of the more likely one under the same gate (w > 1/2)."""
    m1, s1, nll1 = rte_gp
    m2, s2, nll2 = a["meta_mean"], a["meta_sd"], a["meta_ctx_nll"]
    y = a["qry_y"]
    diff = np.clip(nll2 - nll1, -500, 500)  # ll_rte_gp - ll_meta_gp
    floor = 1e-6 * a["scaler"].y_std

    w = a["mask"].astype(float) if "mask" in a else np.ones_like(y)

    def logpdf(m, s):
        s = np.maximum(s, floor)
        return ((-0.5 * ((y - m) / s) ** 2 - np.log(s)) * w).sum(1)

    lp1, lp2 = logpdf(m1, s1), logpdf(m2, s2)
    grid = [(al, be) for al in (0.0, 0.1, 0.3, 1.0, 3.0) for be in np.linspace(-8, 8, 33)]
    mix_m, mix_s, pick_m, pick_s = (np.zeros_like(y) for _ in range(4))
    chosen = []
    for f in (0, 1):
        fit_on, score_on = fold != f, fold == f

        def density(al, be, rows):
            w = 1 / (1 + np.exp(-(al * diff[rows] + be)))
            return np.logaddexp(np.log(w + 1e-300) + lp1[rows], np.log(1 - w + 1e-300) + lp2[rows]).mean()

        al, be = max(grid, key=lambda g: density(*g, fit_on))
        chosen.append([al, float(be)])
        w = (1 / (1 + np.exp(-(al * diff[score_on] + be))))[:, None]
        mm = w * m1[score_on] + (1 - w) * m2[score_on]
        second = w * (s1[score_on] ** 2 + m1[score_on] ** 2) + (1 - w) * (s2[score_on] ** 2 + m2[score_on] ** 2)
        mix_m[score_on], mix_s[score_on] = mm, np.sqrt(np.maximum(second - mm**2, 0))
        take = w > 0.5
        pick_m[score_on] = np.where(take, m1[score_on], m2[score_on])
        pick_s[score_on] = np.where(take, s1[score_on], s2[score_on])
    return {"gate-mix": (mix_m, mix_s, chosen), "gate-pick": (pick_m, pick_s, chosen)}


def product(a: dict, fold, rte_gp: tuple) -> dict[str, tuple]:
    """The product of two experts at each query: a residual-GP design's posterior and meta-gp's,
    their sds multiplied by temperatures (t1, t2) fitted on the other fold by the Gaussian log
    predictive density at the queries; the precision-weighted mean and the product's sd. Where
    meta-gp is sure (queries between context points) it leads; where it is not (extrapolation),
    RTE's relational prior does."""
    m1, s1, _ = rte_gp
    m2, s2 = a["meta_mean"], a["meta_sd"]
    y = a["qry_y"]
    floor = 1e-6 * a["scaler"].y_std
    s1, s2 = np.maximum(s1, floor), np.maximum(s2, floor)
    temps = np.exp(np.linspace(-2, 3, 21))
    mean, sd = np.zeros_like(y), np.zeros_like(y)
    chosen = []

    def combine(t1, t2, rows):
        p1, p2 = 1 / (t1 * s1[rows]) ** 2, 1 / (t2 * s2[rows]) ** 2
        return (p1 * m1[rows] + p2 * m2[rows]) / (p1 + p2), 1 / np.sqrt(p1 + p2)

    w = a["mask"].astype(float) if "mask" in a else np.ones_like(y)

    def density(t1, t2, rows):
        m, s = combine(t1, t2, rows)
        return float(((-0.5 * ((y[rows] - m) / s) ** 2 - np.log(s)) * w[rows]).sum() / w[rows].sum())

    def mse(t1, rows):
        return float((((combine(t1, 1.0, rows)[0] - y[rows]) ** 2) * w[rows]).sum() / w[rows].sum())

    mean2, sd2, chosen2 = np.zeros_like(y), np.zeros_like(y), []
    ratios = np.exp(np.linspace(-6, 6, 49))
    for f in (0, 1):
        fit_on, score_on = fold != f, fold == f
        t1, t2 = max(((u, v) for u in temps for v in temps), key=lambda tt: density(*tt, fit_on))
        chosen.append([float(t1), float(t2)])
        mean[score_on], sd[score_on] = combine(t1, t2, score_on)
        # the weights by the MSE (t1 / t2), then one scale of the sd by the log density
        r = min(ratios, key=lambda u: mse(u, fit_on))
        c = max(np.exp(np.linspace(-3, 12, 61)), key=lambda v: density(r * v, v, fit_on))
        chosen2.append([float(r), float(c)])
        mean2[score_on], sd2[score_on] = combine(r * c, c, score_on)
    return {"poe": (mean, sd, chosen), "poe-mse": (mean2, sd2, chosen2)}


def score(mean, sd, qry_y, n_targets: int, mask=None) -> dict:
    """MSE (mean over targets of each one's query MSE) and the raw 90% interval's coverage; a
    ``mask`` (n, q) marks the real queries of padded rows (the real-data targets)."""
    from taskextrap.experiments.units import per_target

    w = np.ones_like(qry_y) if mask is None else mask.astype(float)
    per_row = lambda v: (v * w).sum(1) / w.sum(1)  # noqa: E731
    err = per_target(per_row((mean - qry_y) ** 2), n_targets)
    out = {"mse": float(err.mean())}
    if sd is not None:
        out["coverage"] = float(per_row(np.abs(mean - qry_y) <= Z90 * sd).mean())
    return out


def dev_file_mse(protocol: str, profile: str, family: str, peers=("meta-gp", "ctx-gp", "cnp")) -> dict:
    """The classics' MSE on the same dev targets and draws, from the committed dev run of the
    same profile (its seed 0, the seed measured here): the yardstick, not refitted."""
    import json

    path = RESULTS / f"parameter-{protocol}-{profile}-dev.json"
    if not path.exists():  # the tiny profile has no committed dev run
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {
        r["method"]: r["value"] for r in rows if r["metric"] == "mse" and r["group"] == family and r["method"] in peers
    }


def cell_arrays(name: str, protocol_name: str, seed: int, profile_name: str, cache: Path | None) -> dict:
    """One dev cell's arrays: the targets' draws, the objective RTE's mean and raw sd at their
    context and query inputs, and the parameter regime's meta-gp (fitted on the same library by
    itself) at the queries with its context's negative log likelihood; kept in ``cache`` (an npz
    per cell, no pickles) so the designs can be scored again without refitting."""
    import torch

    from taskextrap.baselines.classics import chosen
    from taskextrap.baselines.gp import gp_nll
    from taskextrap.baselines.table import get_method
    from taskextrap.experiments import parameter as P
    from taskextrap.experiments.settings import UnitSpec
    from taskextrap.tasks import get_protocol
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import dev_family

    path = None if cache is None else cache / f"{name}-{protocol_name}-{profile_name}-seed{seed}.npz"
    if path is not None and path.exists():
        with np.load(path, allow_pickle=False) as z:
            a = {key: z[key] for key in z.files}
        a["scaler"] = _Scaler(*a["scaler"])
        return a
    profile = P.PROFILES[profile_name]
    family = dev_family(PARAMETER_FAMILIES[name])
    protocol = get_protocol(protocol_name)
    spec = UnitSpec(family, protocol, profile, seed, P.DEFAULT_EMBEDDING, dev=True)
    t = time.perf_counter()
    library = P.make_library(family, profile.n_library, seed)
    rte = P.make_rte(spec, "objective").set_params(interval_scale=1.0).fit(library)
    rte_fit_s = time.perf_counter() - t
    _, obs = P.make_targets(family, protocol, profile.n_targets, profile.n_draws, spec.test_seed)
    pred, sd = rte.predict(obs.ctx_x, obs.ctx_y, np.concatenate([obs.ctx_x, obs.qry_x], 1), return_std=True)
    t = time.perf_counter()
    meta = get_method(chosen("parameter")["meta-gp"]).build(seed=seed, protocol=protocol_name).fit(library)
    meta_fit_s = time.perf_counter() - t
    mm, ms = meta.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    gp = meta.gp_
    x, y = gp._t(gp.scaler_.x(obs.ctx_x)), gp._t(gp.scaler_.y(obs.ctx_y))
    with torch.no_grad():
        nll = gp_nll(gp.kernel, gp.log_theta_.expand(len(x), -1), x, y - gp._mean(x)).cpu().numpy()
    s = rte.scaler_
    a = dict(
        ctx_x=obs.ctx_x, ctx_y=obs.ctx_y, qry_x=obs.qry_x, qry_y=obs.qry_y, rte_pred=pred, rte_sd=sd,
        meta_mean=mm, meta_sd=ms, meta_ctx_nll=nll, scaler=np.array([s.x_mid, s.x_half, s.y_mean, s.y_std]),
        seconds=np.array([rte_fit_s, meta_fit_s]), n_targets=np.array(profile.n_targets),
        n_draws=np.array(profile.n_draws),
    )  # fmt: skip
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **a)
    a["scaler"] = _Scaler(*a["scaler"])
    return a


def _Scaler(x_mid, x_half, y_mean, y_std):
    from taskextrap.scaling import FamilyScaler

    return FamilyScaler(float(x_mid), float(x_half), float(y_mean), float(y_std))


REAL_PEERS = ("ctx-interp", "library-best-fit", "ctx-gp", "library-mean", "library-knn", "library-fpca")


def observed_arrays(name: str, question: str, seed: int, cache: Path | None) -> dict:
    """One real-data cell's arrays on the library's own dev split, as ``taskextrap fit`` makes it
    (``workflow.dev_split``: the fifth of the library tasks with the largest known parameter held
    out): the dev RTE and meta-gp fitted on the rest, the dev targets split into context and
    queries as the question asks. The data set's real targets are never read. The peers'
    predictions (at their default settings) are kept for the yardstick."""
    import tempfile

    import torch

    from taskextrap.baselines.classics import chosen
    from taskextrap.baselines.gp import gp_nll
    from taskextrap.baselines.table import get_method
    from taskextrap.estimators.parameter import RTE
    from taskextrap.tasks.observe import PROTOCOLS as OBS
    from taskextrap.workflow import DEV_FRACTION, Columns, Reading, dev_split, peer_unit, split_targets

    path = None if cache is None else cache / f"real-{name}-{question}-seed{seed}.npz"
    if path is not None and path.exists():
        return _load(path)
    from taskextrap.scripts import sibling

    realdata = sibling(__file__, "realdata")

    data = realdata.DATA_SETS[name]()
    q = data.questions[question]
    with tempfile.TemporaryDirectory() as tmp:
        library_csv, _ = realdata.write_tables(data, Path(tmp))
        tasks = Columns(task="task", x="x", y="y", params=("param",)).read([library_csv]).with_split("train")
    dev_lib, dev_tgt, _ = dev_split(tasks, "param", DEV_FRACTION, seed)
    dev_library = Reading(name=data.name).library(dev_lib)
    settings: dict = {"protocol": q.protocol, "seed": seed, "verbose": False, "interval_scale": 1.0}
    if q.size < OBS[q.protocol].n_context:
        settings["min_context"] = q.size
    t = time.perf_counter()
    rte = RTE(**settings).fit(dev_library)
    rte_fit_s = time.perf_counter() - t
    split = split_targets(dev_tgt, q.size, q.how, rte.library_.family.domain, seed=1)
    cx, cy, qx = split.ctx_x, split.ctx_y, split.qry_x
    pred, sd = rte.predict(cx, cy, np.concatenate([cx, qx], 1), return_std=True)
    unit = peer_unit(rte)
    t = time.perf_counter()
    meta = get_method(chosen("observed")["meta-gp"]).build(**unit).fit(dev_library)
    meta_fit_s = time.perf_counter() - t
    mm, ms = meta.predict(cx, cy, qx, return_std=True)
    gp = meta.gp_
    x, y = gp._t(gp.scaler_.x(cx)), gp._t(gp.scaler_.y(cy))
    with torch.no_grad():
        nll = gp_nll(gp.kernel, gp.log_theta_.expand(len(x), -1), x, y - gp._mean(x)).cpu().numpy()
    peers = {f"peer_{m}": get_method(m).build(**unit).fit(dev_library).predict(cx, cy, qx) for m in REAL_PEERS}
    sc = rte.scaler_
    a = dict(
        ctx_x=cx, ctx_y=cy, qry_x=qx, qry_y=split.qry_y, mask=split.mask, rte_pred=pred, rte_sd=sd,
        meta_mean=mm, meta_sd=ms, meta_ctx_nll=nll, scaler=np.array([sc.x_mid, sc.x_half, sc.y_mean, sc.y_std]),
        seconds=np.array([rte_fit_s, meta_fit_s]), n_targets=np.array(len(cx)), n_draws=np.array(1), **peers,
    )  # fmt: skip
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **a)
    return _load(path) if path is not None else {**a, "scaler": _Scaler(*a["scaler"])}


def _load(path: Path) -> dict:
    """A cell's arrays from its npz (no pickles), the scaler rebuilt."""
    with np.load(path, allow_pickle=False) as z:
        a = {key: z[key] for key in z.files}
    a["scaler"] = _Scaler(*a["scaler"])
    return a


# The candidate sets of the library's rule (posterior.context.choose_posterior) scored here, each
# chosen on one fold of dev targets and scored on the other: (polynomial degrees, amplitude dofs).
CANDIDATE_SETS = {
    "chosen-base": ((None,), (None,)),
    "chosen-width": ((None,), None),
    "chosen-poly": (None, (None,)),
    "chosen-poly-width": (None, None),
}


def nested_choice(a: dict, fold) -> dict[str, tuple]:
    """The library's whole rule (``choose_posterior``: kernel, polynomial degree, share,
    amplitude pseudo-points and interval scale, each chosen out of fold inside its own dev draws)
    run on one fold of the cell's dev targets and applied to the other, for every candidate set of
    :data:`CANDIDATE_SETS` (None: the library's default set): each set's mean, its calibrated sd
    and the choices. What a candidate set adds is scored on targets its choice never saw."""
    from taskextrap.posterior.context import DEGREES, DOFS, DevDraws, choose_posterior

    k, n_draws = a["ctx_x"].shape[1], int(a["n_draws"])
    groups = np.arange(len(a["ctx_x"])) // n_draws
    if len(np.unique(groups)) < 4:  # each fold's own choice needs two folds of its own
        return {}
    pred, mask = a["rte_pred"], a.get("mask")
    dev = DevDraws(a["ctx_x"], a["ctx_y"], a["qry_x"], a["qry_y"], pred[:, :k], pred[:, k:], groups, mask)
    out = {}
    for name, (degrees, dofs) in CANDIDATE_SETS.items():
        mean, sd, picks = np.zeros_like(a["qry_y"]), np.zeros_like(a["qry_y"]), []
        for f in (0, 1):
            on, score_on = fold != f, fold == f
            part = DevDraws(*(v[on] for v in (dev.ctx_x, dev.ctx_y, dev.qry_x, dev.qry_y, dev.base_ctx, dev.base_qry)),
                            groups[on], None if mask is None else mask[on])  # fmt: skip
            expert = (a["meta_mean"][on], a["meta_sd"][on])
            posterior, record = choose_posterior(
                part, a["scaler"], expert, degrees=degrees or DEGREES, dofs=dofs or DOFS
            )
            mean[score_on], sd[score_on] = posterior.predict(
                dev.base_ctx[score_on], dev.base_qry[score_on], dev.ctx_x[score_on], dev.ctx_y[score_on],
                dev.qry_x[score_on], (a["meta_mean"][score_on], a["meta_sd"][score_on]),
            )  # fmt: skip
            picks.append({key: record[key] for key in ("kernel", "degree", "share", "dof", "interval_scale")})
        out[name] = (mean, sd, picks)
    return out


def interval_score_of(mean, sd, y, mask=None) -> float:
    """The mean 90% interval (Winkler) score (``posterior.context.interval_score``)."""
    from taskextrap.posterior.context import interval_score

    return interval_score(mean, sd, y, np.ones_like(y) if mask is None else mask.astype(float))


def library_choice(a: dict) -> dict:
    """What ``posterior.context.choose_posterior`` (the library's rule) chooses on the
    cell's dev draws with meta-gp as the second expert: the kernel, the share, the interval scale,
    and the out-of-fold MSE and coverage of its choice (in-sample for the choice itself)."""
    from taskextrap.posterior.context import DevDraws, choose_posterior

    k = a["ctx_x"].shape[1]
    n_draws = int(a["n_draws"])
    groups = np.arange(len(a["ctx_x"])) // n_draws
    pred = a["rte_pred"]
    dev = DevDraws(a["ctx_x"], a["ctx_y"], a["qry_x"], a["qry_y"], pred[:, :k], pred[:, k:], groups, a.get("mask"))
    _, record = choose_posterior(dev, a["scaler"], expert=(a["meta_mean"], a["meta_sd"]))
    best = record["out_of_fold_mse"][f"{record['kernel']}@{record['degree']}@{record['share']:.4g}"]
    keep = ("kernel", "degree", "share", "dof", "interval_scale", "out_of_fold_coverage_raw", "out_of_fold_coverage")
    return {key: record[key] for key in keep} | {"out_of_fold_mse": best}


def score_cell(a: dict, family: str, protocol: str, peers: dict[str, float]) -> dict:
    """Every design's out-of-fold MSE and raw coverage on one cell's dev targets (two folds by
    target), beside RTE, meta-gp fitted alone and the ``peers``' MSE."""
    n_targets, n_draws = int(a["n_targets"]), int(a["n_draws"])
    y, mask = a["qry_y"], a.get("mask")
    k = a["ctx_x"].shape[1]
    fold = (np.arange(len(a["ctx_x"])) // n_draws) % 2  # draws are task-major
    cell = {"family": family, "protocol": protocol, "fit_s": a["seconds"].round(1).tolist(), "designs": {}}
    cell["designs"]["rte"] = score(a["rte_pred"][:, k:], a["rte_sd"][:, k:], y, n_targets, mask)
    cell["designs"]["meta-gp-alone"] = score(a["meta_mean"], a["meta_sd"], y, n_targets, mask)
    t = time.perf_counter()
    designs = residual_designs(a, fold)
    for design, (m, s, _) in designs.items():
        cell["designs"][design] = score(m, s, y, n_targets, mask)
    for design, (m, s, gate) in gated(a, fold, designs["rte-gp-rbf+linear"]).items():
        cell["designs"][design] = {**score(m, s, y, n_targets, mask), "gate": gate}
    for design, (m, s, temps) in product(a, fold, designs["rte-gp-rbf+linear"]).items():
        cell["designs"][design] = {**score(m, s, y, n_targets, mask), "temperatures": temps}
    for design, (m, s, picks) in nested_choice(a, fold).items():  # calibrated inside: coverage at its scale
        cell["designs"][design] = {
            **score(m, s, y, n_targets, mask), "interval_score": interval_score_of(m, s, y, mask), "picks": picks
        }  # fmt: skip
    cell["designs_s"] = round(time.perf_counter() - t, 1)
    cell["chosen"] = library_choice(a)
    for peer in [key.removeprefix("peer_") for key in a if key.startswith("peer_")]:
        cell["designs"][peer] = score(a[f"peer_{peer}"], None, y, n_targets, mask)
    cell["designs"] |= peers
    shown = {d: (round(v["mse"], 4), round(v.get("coverage", np.nan), 2)) for d, v in cell["designs"].items()}
    print(family, protocol, shown, flush=True)
    return cell


def measure(families: list[str], seed: int, profile_name: str, cache: Path | None = None) -> list[dict]:
    """One cell per (family, protocol) of the parameter regime's dev split."""
    cells = []
    for name in families:
        for protocol in PROTOCOLS:
            a = cell_arrays(name, protocol, seed, profile_name, cache)
            source = f"parameter-{protocol}-{profile_name}-dev.json"
            peers = {p: {"mse": v, "from": source} for p, v in dev_file_mse(protocol, profile_name, name).items()}
            cells.append(score_cell(a, name, protocol, peers))
    return cells


def measure_real(names: list[str], seed: int, cache: Path | None = None) -> list[dict]:
    """One cell per (data set, question) of the real-data suite, on each library's dev split."""
    cells = []
    for name in names:
        for question, protocol in (("interpolate", "paper"), ("forecast", "strict")):
            cell = score_cell(observed_arrays(name, question, seed, cache), f"{name}:{question}", protocol, {})
            cells.append(cell)
    return cells


def _mean_or_none(values: list) -> float | None:
    """The mean of the values present (None: none is)."""
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _log_ratio(cell: dict, design: str, against: str) -> float | None:
    """log(MSE of ``design`` / MSE of ``against``) in one cell (None where either is missing)."""
    d = cell["designs"]
    if against == "meta-gp" and against not in d:  # the real-data cells have meta-gp fitted here only
        against = "meta-gp-alone"
    return float(np.log(d[design]["mse"] / d[against]["mse"])) if design in d and against in d else None


def _in_band(values: list, lo: float = 0.85, hi: float = 0.95) -> str | None:
    """How many of the coverages present lie in [lo, hi], as "m of n" (None: none present)."""
    present = [v for v in values if v is not None]
    return f"{sum(lo <= v <= hi for v in present)} of {len(present)}" if present else None


def _log_score(cell: dict, design: str) -> float | None:
    """log(interval score of ``design`` / that of ``chosen-base``) in one cell (None: no score)."""
    d = cell["designs"]
    if "interval_score" not in d.get(design, {}) or "interval_score" not in d.get("chosen-base", {}):
        return None
    return float(np.log(d[design]["interval_score"] / d["chosen-base"]["interval_score"]))


def summary(cells: list[dict]) -> dict:
    """Per protocol and design: the mean over families of log(MSE / rte's MSE) (scale-free; lower
    is better, rte 0), the same against meta-gp, and the mean coverage."""
    out: dict = {}
    for protocol in PROTOCOLS:
        mine = [c for c in cells if c["protocol"] == protocol]
        if not mine:
            continue
        designs = list(dict.fromkeys(d for c in mine for d in c["designs"]))  # a small cell lacks the nested ones
        out[protocol] = {
            d: {
                "log_mse_vs_rte": _mean_or_none([_log_ratio(c, d, "rte") for c in mine]),
                "log_mse_vs_meta_gp": _mean_or_none([_log_ratio(c, d, "meta-gp") for c in mine]),
                "coverage": _mean_or_none([c["designs"].get(d, {}).get("coverage") for c in mine]),
                "coverage_in_band": _in_band([c["designs"].get(d, {}).get("coverage") for c in mine]),
                "log_interval_score_vs_base": _mean_or_none([_log_score(c, d) for c in mine]),
            }
            for d in designs
        }
    return out


def main(argv: list[str] | None = None) -> None:
    from taskextrap.files import write_json_atomic
    from taskextrap.report.schema import environment_info
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("parameter", "realdata"), default="parameter")
    parser.add_argument("--families", nargs="+", default=list(PARAMETER_FAMILIES))
    parser.add_argument("--data", nargs="+", default=["elnino", "sunspots", "fertility"], help="realdata: data sets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--out", type=Path, default=None, help="default: results/context-posterior-dev[-realdata].json")
    parser.add_argument("--cache", type=Path, default=None, help="keep each cell's fitted arrays here (npz)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    out = args.out or RESULTS / f"context-posterior-dev{'' if args.suite == 'parameter' else '-realdata'}.json"
    t = time.perf_counter()
    if args.suite == "parameter":
        cells = measure(args.families, args.seed, args.profile, args.cache)
    else:
        cells = measure_real(args.data, args.seed, args.cache)
    result = {
        "command": "python benchmarks/context_posterior_dev.py"
        + ("" if args.suite == "parameter" else " --suite realdata"),
        "suite": args.suite,
        "profile": args.profile if args.suite == "parameter" else "paper (the suite's own sizes)",
        "seed": args.seed,
        "split": "dev",
        "cells": cells,
        "summary": summary(cells),
        "wall_s": round(time.perf_counter() - t, 1),
        "environment": environment_info(),
    }
    write_json_atomic(out, result)
    for protocol, rows in result["summary"].items():
        print(protocol)
        for d, v in sorted(rows.items(), key=lambda kv: kv[1]["log_mse_vs_rte"]):
            against, cov = v["log_mse_vs_meta_gp"], v["coverage"]
            shown = "-" if cov is None else f"{cov:.3f}"
            print(f"  {d:24s} vs rte {v['log_mse_vs_rte']:+.3f}  vs meta-gp {against:+.3f}  coverage {shown}")


if __name__ == "__main__":
    main()
