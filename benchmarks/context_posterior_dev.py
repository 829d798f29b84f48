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


def residual_gp(kernel: str, scaler, cx, rc, qx, rq, fit_on, score_on, sd=None):
    """A zero-mean GP on residuals (``rc`` at ``cx``, ``rq`` at ``qx``; divided by ``sd`` (n, k + q)
    where given), fitted on the rows ``fit_on`` by the marginal likelihood, conditioned on each
    row of ``score_on``'s context residuals. Returns the correction and its sd at the queries of
    ``score_on`` (in the residuals' units) and each scored row's context negative log
    likelihood under the fitted prior (in the scaler's units)."""
    import torch

    from taskextrap.baselines.gp import MetaGP, gp_nll
    from taskextrap.scaling import FamilyScaler

    k = cx.shape[1]
    if sd is not None:
        rc, rq = rc / sd[:, :k], rq / sd[:, k:]
    res = FamilyScaler(scaler.x_mid, scaler.x_half, 0.0, 1.0 if sd is not None else scaler.y_std)
    gp = MetaGP(kernel=kernel, mean_degree=0, optimizer="lbfgs", steps=2000)
    gp.fit(cx[fit_on], rc[fit_on], qx[fit_on], rq[fit_on], res)
    m, s = gp.predict(cx[score_on], rc[score_on], qx[score_on])
    x, y = gp._t(res.x(cx[score_on])), gp._t(res.y(rc[score_on]) - float(gp.mean_[0]))
    with torch.no_grad():
        nll = gp_nll(kernel, gp.log_theta_.expand(len(x), -1), x, y).cpu().numpy()
    if sd is not None:
        m, s = m * sd[score_on, k:], s * sd[score_on, k:]
        nll = nll + np.log(sd[score_on, :k] / scaler.y_std).sum(1)  # the same units as unscaled residuals
    return m, s, nll


def residual_designs(a: dict, fold, kernels=KERNELS) -> dict[str, tuple]:
    """Every residual-GP design's out-of-fold (mean, sd, context nll) at the queries, from a
    cell's arrays ``a`` (:func:`cell_arrays`); ``fold`` (n,) each draw's fold (0 or 1)."""
    k = a["ctx_x"].shape[1]
    pred, sd = a["rte_pred"], a["rte_sd"]
    r = np.concatenate([a["ctx_y"], a["qry_y"]], 1) - pred  # residuals at context and query points
    out: dict[str, tuple] = {}
    for kernel in kernels:
        for std in (False, True):
            mean, spread, nll = np.zeros_like(a["qry_y"]), np.zeros_like(a["qry_y"]), np.zeros(len(fold))
            for f in (0, 1):
                fit_on, score_on = fold != f, fold == f
                m, s, ll = residual_gp(
                    kernel,
                    a["scaler"],
                    a["ctx_x"],
                    r[:, :k],
                    a["qry_x"],
                    r[:, k:],
                    fit_on,
                    score_on,
                    sd if std else None,
                )
                mean[score_on], spread[score_on], nll[score_on] = pred[score_on, k:] + m, s, ll
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

    def logpdf(m, s):
        s = np.maximum(s, floor)
        return (-0.5 * ((y - m) / s) ** 2 - np.log(s)).sum(1)

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

    def density(t1, t2, rows):
        m, s = combine(t1, t2, rows)
        return float((-0.5 * ((y[rows] - m) / s) ** 2 - np.log(s)).mean())

    def mse(t1, rows):
        return float(((combine(t1, 1.0, rows)[0] - y[rows]) ** 2).mean())

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


def score(mean, sd, obs, n_targets: int) -> dict:
    """MSE (mean over targets of each one's query MSE) and the raw 90% interval's coverage."""
    from taskextrap.experiments.units import per_target

    err = per_target((mean - obs.qry_y) ** 2, n_targets)
    out = {"mse": float(err.mean())}
    if sd is not None:
        out["coverage"] = float(np.mean(np.abs(mean - obs.qry_y) <= Z90 * sd))
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


def measure(families: list[str], seed: int, profile_name: str, cache: Path | None = None) -> list[dict]:
    """One cell per (family, protocol): every design's MSE and coverage on the dev targets."""
    from types import SimpleNamespace

    cells = []
    for name in families:
        for protocol_name in PROTOCOLS:
            a = cell_arrays(name, protocol_name, seed, profile_name, cache)
            n_targets, n_draws = int(a["n_targets"]), int(a["n_draws"])
            obs = SimpleNamespace(qry_y=a["qry_y"])
            k = a["ctx_x"].shape[1]
            fold = (np.arange(len(a["ctx_x"])) // n_draws) % 2  # draws are task-major
            cell = {"family": name, "protocol": protocol_name, "fit_s": a["seconds"].round(1).tolist(), "designs": {}}
            cell["designs"]["rte"] = score(a["rte_pred"][:, k:], a["rte_sd"][:, k:], obs, n_targets)
            cell["designs"]["meta-gp-alone"] = score(a["meta_mean"], a["meta_sd"], obs, n_targets)
            t = time.perf_counter()
            designs = residual_designs(a, fold)
            for design, (m, s, _) in designs.items():
                cell["designs"][design] = score(m, s, obs, n_targets)
            for design, (m, s, gate) in gated(a, fold, designs["rte-gp-rbf+linear"]).items():
                cell["designs"][design] = {**score(m, s, obs, n_targets), "gate": gate}
            for design, (m, s, temps) in product(a, fold, designs["rte-gp-rbf+linear"]).items():
                cell["designs"][design] = {**score(m, s, obs, n_targets), "temperatures": temps}
            cell["designs_s"] = round(time.perf_counter() - t, 1)
            for peer, mse in dev_file_mse(protocol_name, profile_name, name).items():
                cell["designs"][peer] = {"mse": mse, "from": f"parameter-{protocol_name}-{profile_name}-dev.json"}
            cells.append(cell)
            print(
                name,
                protocol_name,
                {
                    d: (round(v["mse"], 4), round(v.get("coverage", float("nan")), 2))
                    for d, v in cell["designs"].items()
                },
                flush=True,
            )
    return cells


def _mean_or_none(values: list) -> float | None:
    """The mean of the values present (None: none is)."""
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _log_ratio(cell: dict, design: str, against: str) -> float | None:
    """log(MSE of ``design`` / MSE of ``against``) in one cell (None where either is missing)."""
    d = cell["designs"]
    return float(np.log(d[design]["mse"] / d[against]["mse"])) if design in d and against in d else None


def summary(cells: list[dict]) -> dict:
    """Per protocol and design: the mean over families of log(MSE / rte's MSE) (scale-free; lower
    is better, rte 0), the same against meta-gp, and the mean coverage."""
    out: dict = {}
    for protocol in PROTOCOLS:
        mine = [c for c in cells if c["protocol"] == protocol]
        if not mine:
            continue
        designs = list(mine[0]["designs"])
        out[protocol] = {
            d: {
                "log_mse_vs_rte": float(
                    np.mean([np.log(c["designs"][d]["mse"] / c["designs"]["rte"]["mse"]) for c in mine])
                ),
                "log_mse_vs_meta_gp": _mean_or_none(
                    [
                        np.log(c["designs"][d]["mse"] / c["designs"]["meta-gp"]["mse"])
                        for c in mine
                        if "meta-gp" in c["designs"]
                    ]
                ),
                "coverage": _mean_or_none([c["designs"][d].get("coverage") for c in mine]),
            }
            for d in designs
        }
    return out


def main(argv: list[str] | None = None) -> None:
    from taskextrap.files import write_json_atomic
    from taskextrap.report.schema import environment_info
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=list(PARAMETER_FAMILIES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--out", type=Path, default=RESULTS / "context-posterior-dev.json")
    parser.add_argument("--cache", type=Path, default=None, help="keep each cell's fitted arrays here (npz)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    t = time.perf_counter()
    cells = measure(args.families, args.seed, args.profile, args.cache)
    result = {
        "command": "python benchmarks/context_posterior_dev.py",
        "profile": args.profile,
        "seed": args.seed,
        "split": "dev",
        "cells": cells,
        "summary": summary(cells),
        "wall_s": round(time.perf_counter() - t, 1),
        "environment": environment_info(),
    }
    write_json_atomic(args.out, result)
    for protocol, rows in result["summary"].items():
        print(protocol)
        for d, v in sorted(rows.items(), key=lambda kv: kv[1]["log_mse_vs_rte"]):
            against, cov = v["log_mse_vs_meta_gp"], v["coverage"]
            shown = "-" if cov is None else f"{cov:.3f}"
            print(f"  {d:24s} vs rte {v['log_mse_vs_rte']:+.3f}  vs meta-gp {against:+.3f}  coverage {shown}")


if __name__ == "__main__":
    main()
