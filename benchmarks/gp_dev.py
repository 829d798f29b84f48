"""The kernel of ``ctx-gp`` (``baselines.gp``), chosen on the parameter regime's dev split (issue 47).

``python benchmarks/gp_dev.py``: every kernel family of ``baselines.gp.GP_KERNELS`` fitted on the
context of ``--targets`` dev targets of each built-in family (``tasks.dev.dev_family``: the last
training region held out, so no test task is drawn), one context draw each, under both
observation protocols; the MSE at the queries and the 90% interval's coverage. The kernel kept is
the one whose MSE is lowest relative to the best kernel of each (family, protocol), as a
geometric mean, so every family and protocol weighs the same; ``ctx-polyfit`` on the same
contexts is printed beside it for scale. Writes ``benchmarks/results/ctx-gp-dev.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROTOCOLS = ("paper", "strict")


def measure(n_targets: int, seed: int, families: list[str] | None = None) -> dict:
    """Per (family, protocol): every kernel's MSE, coverage and seconds, and ctx-polyfit's MSE."""
    from taskextrap.baselines.context import ctx_polyfit
    from taskextrap.baselines.gp import GP_KERNELS, ctx_gp
    from taskextrap.search.posterior import covered
    from taskextrap.seeding import rng
    from taskextrap.tasks import TaskSet, get_protocol
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import DEV_REGION, dev_family
    from taskextrap.tasks.observe import noise_scale

    cells = []
    for name in families or list(PARAMETER_FAMILIES):
        family = dev_family(PARAMETER_FAMILIES[name])
        targets = TaskSet.sample(family, {DEV_REGION: n_targets}, rng(seed, "gp-dev", name))
        for protocol in PROTOCOLS:
            obs = get_protocol(protocol).draw(targets, 1, rng(seed, "gp-dev-draw", name, protocol), noise_scale(family))
            cell = {"family": name, "protocol": protocol, "kernels": {}}
            for kernel in GP_KERNELS:
                t = time.perf_counter()
                mean, sd = ctx_gp(obs.ctx_x, obs.ctx_y, obs.qry_x, kernel=kernel, seed=seed)
                cell["kernels"][kernel] = {
                    "mse": float(np.mean((mean - obs.qry_y) ** 2)),
                    "coverage": float(np.mean(covered(mean, sd, obs.qry_y))),
                    "seconds": round(time.perf_counter() - t, 2),
                }
            cell["ctx-polyfit_mse"] = float(np.mean((ctx_polyfit(obs.ctx_x, obs.ctx_y, obs.qry_x) - obs.qry_y) ** 2))
            cells.append(cell)
            print(name, protocol, {k: round(v["mse"], 4) for k, v in cell["kernels"].items()}, flush=True)
    score = {
        k: float(
            np.exp(
                np.mean([np.log(c["kernels"][k]["mse"] / min(v["mse"] for v in c["kernels"].values())) for c in cells])
            )
        )
        for k in GP_KERNELS
    }
    return {"cells": cells, "relative_mse_geomean": score, "chosen_kernel": min(score, key=score.get)}


def main(argv=None) -> None:
    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default=None, help="comma-separated built-in families (default: all five)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    doc = measure(a.targets, a.seed, a.families.split(",") if a.families else None)
    doc |= {
        "command": f"python benchmarks/gp_dev.py --targets {a.targets} --seed {a.seed}",
        "split": "dev",
        "seed": a.seed,
        "source_hash": source_hash(),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    out = Path(a.out or RESULTS / "ctx-gp-dev.json")
    write_json_atomic(out, doc)
    print(f"chosen kernel: {doc['chosen_kernel']} ({doc['relative_mse_geomean']})")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
