"""Is ``meta-gp``'s marginal likelihood converged? Adam as ``baselines.gp.MetaGP`` fits it (300
steps of 256 draws at lr 0.03: the unit's steps) against Adam run longer and against full-batch
L-BFGS run to convergence (``MetaGP(optimizer="lbfgs")``: ``torch.optim.LBFGS`` with a
strong-Wolfe line search, stopping when the objective changes by less than 1e-10 or the gradient
is below 1e-7; the hyper-parameters kept inside ``baselines.gp.HYPER``'s bounds by a sigmoid), at
several prior-mean degrees.

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
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("quadratic", "cubic", "exp", "sin_trend", "tri_trend")
ADAM_STEPS = (300, 600, 2400)  # 300: what a unit gives it today
DEGREES = (0, 1, 3)  # 3: MetaGP's default prior mean


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


def dev_draws(family_name: str) -> tuple:
    """One dev family's library draws and dev targets: (ctx_x, ctx_y, qry_x, qry_y, scaler, obs),
    the library's 8 draws of each of 200 tasks per dev training region and one draw of each of
    200 dev targets (``obs``), both by the ``paper`` protocol."""
    from taskextrap.baselines.method import own_draws
    from taskextrap.operators.train import TrainConfig
    from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
    from taskextrap.tasks.dev import dev_family

    fam = dev_family(PARAMETER_FAMILIES[family_name])
    library = TaskSet.sample(fam, {r: 200 for r in fam.train_regions}, np.random.default_rng(0))
    shared = own_draws(library, get_protocol("paper"), 8, 0, TrainConfig(steps=300, batch=256, eval_every=50))
    held = [r for r in fam.regions if r not in fam.train_regions][-1]
    obs = get_protocol("paper").draw(TaskSet.sample(fam, {held: 200}, np.random.default_rng(1)), 1,
                                     np.random.default_rng(2))  # fmt: skip
    return (*shared.draws[:4], shared.scaler, obs)


def measure(family_name: str) -> list[dict]:
    """Every fit of one dev family: its objective, evaluations, seconds and dev MSE."""
    from taskextrap.baselines.gp import MetaGP

    cx, cy, qx, qy, scaler, obs = dev_draws(family_name)
    fits = [(f"adam-{s}", 3, MetaGP(steps=s)) for s in ADAM_STEPS]
    fits += [(f"lbfgs-deg{d}", d, MetaGP(mean_degree=d, optimizer="lbfgs", steps=1000)) for d in DEGREES]
    out = []
    for name, degree, gp in fits:
        t0 = time.perf_counter()
        gp.fit(cx, cy, qx, qy, scaler)
        seconds, evaluations = time.perf_counter() - t0, gp.evaluations_
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
