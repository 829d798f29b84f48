"""Is ``meta-gp``'s marginal likelihood converged? Adam as ``baselines.gp.MetaGP`` fits it (300
steps of 256 draws at lr 0.03: the unit's steps) against Adam run longer and against full-batch
L-BFGS run to convergence (``torch.optim.LBFGS`` with a strong-Wolfe line search, stopping when
the objective changes by less than 1e-10 or the gradient is below 1e-7; the hyper-parameters kept
inside ``baselines.gp.HYPER``'s bounds by a sigmoid), each at several prior-mean degrees.

On the parameter regime's **dev** split only (``tasks.dev.dev_family``: the last training region
held out, no test task drawn): a library of 200 tasks per dev training region, observed 8 times
each by the ``paper`` protocol (as a classic fitted alone draws it, ``baselines.method.own_draws``),
and 200 dev targets of the held-out region, one draw each. Per (family, fit): the mean negative
log marginal likelihood over every library draw (lower is better: the objective all fits
minimise), the objective's evaluations, seconds (one torch thread), and the dev targets' MSE.

    python benchmarks/meta_gp_fit.py      # writes benchmarks/results/meta-gp-fit.json
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("quadratic", "cubic", "exp", "sin_trend", "tri_trend")
ADAM_STEPS = (300, 600, 2400)  # 300: what a unit gives it today
DEGREES = (0, 1, 3)  # 3: MetaGP's default prior mean


def lbfgs_fit(gp, cx, cy, qx, qy, scaler, max_iter: int = 1000):
    """``gp`` (a MetaGP) fitted by full-batch L-BFGS: (gp, objective evaluations)."""
    import torch

    from taskextrap.baselines.gp import HYPER, _log_bounds, gp_nll, hyper_names

    gp.scaler_ = scaler
    x, y, noisy = _arrays(gp, cx, cy, qx, qy)
    names = hyper_names(gp.kernel)
    lo, hi = _log_bounds(names, x)
    start = gp._t([[math.log(HYPER[k][0]) for k in names]])
    z = torch.logit((start - lo) / (hi - lo)).clone().requires_grad_(True)
    gp.mean_ = torch.zeros(gp.mean_degree + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([z, gp.mean_], lr=1, max_iter=max_iter, tolerance_grad=1e-7, tolerance_change=1e-10,
                            history_size=20, line_search_fn="strong_wolfe")  # fmt: skip
    evaluations = [0]

    def closure():
        opt.zero_grad()
        evaluations[0] += 1
        theta = lo + (hi - lo) * torch.sigmoid(z)
        loss = gp_nll(gp.kernel, theta.expand(len(x), -1), x, y - gp._mean(x), noisy).mean()
        loss.backward()
        return loss

    opt.step(closure)
    gp.log_theta_ = (lo + (hi - lo) * torch.sigmoid(z)).detach()
    gp.mean_ = gp.mean_.detach()
    gp.hyper_ = {k: float(v) for k, v in zip(names, gp.log_theta_[0].exp(), strict=True)}
    return gp, evaluations[0]


def _arrays(gp, cx, cy, qx, qy):
    import torch

    s = gp.scaler_
    x = gp._t(np.concatenate([s.x(cx), s.x(qx)], 1))
    y = gp._t(np.concatenate([s.y(cy), s.y(qy)], 1))
    noisy = torch.cat([torch.ones_like(x[:, : cx.shape[1]]), torch.zeros_like(x[:, cx.shape[1] :])], 1)
    return x, y, noisy


def mean_nll(gp, cx, cy, qx, qy) -> float:
    """The objective: the mean negative log marginal likelihood over every library draw."""
    import torch

    from taskextrap.baselines.gp import gp_nll

    x, y, noisy = _arrays(gp, cx, cy, qx, qy)
    with torch.no_grad():
        return float(gp_nll(gp.kernel, gp.log_theta_.expand(len(x), -1), x, y - gp._mean(x), noisy).mean())


def measure(family_name: str) -> list[dict]:
    """Every fit of one dev family: its objective, evaluations, seconds and dev MSE."""
    from taskextrap.baselines.gp import MetaGP
    from taskextrap.baselines.method import own_draws
    from taskextrap.operators.train import TrainConfig
    from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
    from taskextrap.tasks.dev import dev_family

    fam = dev_family(PARAMETER_FAMILIES[family_name])
    library = TaskSet.sample(fam, {r: 200 for r in fam.train_regions}, np.random.default_rng(0))
    shared = own_draws(library, get_protocol("paper"), 8, 0, TrainConfig(steps=300, batch=256, eval_every=50))
    cx, cy, qx, qy, _ = shared.draws
    held = [r for r in fam.regions if r not in fam.train_regions][-1]
    obs = get_protocol("paper").draw(TaskSet.sample(fam, {held: 200}, np.random.default_rng(1)), 1,
                                     np.random.default_rng(2))  # fmt: skip
    fits = [(f"adam-{s}", 3, lambda s=s: (MetaGP(steps=s).fit(cx, cy, qx, qy, shared.scaler), s)) for s in ADAM_STEPS]
    fits += [(f"lbfgs-deg{d}", d, lambda d=d: lbfgs_fit(MetaGP(mean_degree=d), cx, cy, qx, qy, shared.scaler))
             for d in DEGREES]  # fmt: skip
    out = []
    for name, degree, fit in fits:
        t0 = time.perf_counter()
        gp, evaluations = fit()
        seconds = time.perf_counter() - t0
        mean, _ = gp.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
        out.append({"family": family_name, "fit": name, "mean_degree": degree, "nll": mean_nll(gp, cx, cy, qx, qy),
                    "evaluations": evaluations, "seconds": round(seconds, 2),
                    "dev_mse": float(((mean - obs.qry_y) ** 2).mean()), "hyper": gp.hyper_})  # fmt: skip
        print(f"{family_name:10s} {name:12s} nll {out[-1]['nll']:9.4f}  evals {evaluations:5d}  "
              f"{seconds:6.1f} s  dev mse {out[-1]['dev_mse']:.4g}")  # fmt: skip
    return out


def main(argv=None) -> None:
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "meta-gp-fit.json"))
    ap.add_argument("--families", nargs="+", default=list(FAMILIES))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = [r for f in a.families for r in measure(f)]
    write_json_atomic(a.out, {"fits": rows, "split": "dev", "command": "python benchmarks/meta_gp_fit.py",
                              "source_hash": source_hash()})  # fmt: skip
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
