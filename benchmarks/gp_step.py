"""One step of the ``meta-gp`` fit (``baselines.gp``): the marginal likelihood's gradient by
autograd through the Cholesky factor against its closed form (issue 47).

``python benchmarks/gp_step.py``: at the shapes ``MetaGP.fit`` reads in the parameter unit (8
context + 8 query points per draw), the composition unit (25 + 25) and the depth-3 unit (50 +
50), 256 draws per step, times the forward and backward pass of the summed negative log marginal
likelihood (the kernel ``rbf+linear`` chosen on dev, white noise on the context points) when
autograd differentiates the plain formula (what the fit did before) and when ``gp_nll``'s
closed-form backward does (what it does now), and checks that both give the same gradient. The
median and min of ``--repeats`` timed steps after a warm-up. Writes
``benchmarks/results/gp-step.json``.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# (unit, context points, query points) of the draws MetaGP.fit reads
SHAPES = (("parameter", 8, 8), ("composition", 25, 25), ("composition-depth3", 50, 50))
KERNEL, BATCH = "rbf+linear", 256


def autograd_nll(kernel, log_theta, x, y, noisy):
    """The negative log marginal likelihood written plainly, for autograd to differentiate."""
    import torch

    from taskextrap.baselines import gp

    h = {n: log_theta[:, i].exp() for i, n in enumerate(gp.hyper_names(kernel))}
    k = gp.gram(kernel, h, x, x) + torch.diag_embed(h["noise"][:, None] * noisy + gp.JITTER)
    chol = torch.linalg.cholesky(k)
    alpha = torch.cholesky_solve(y[:, :, None], chol)[:, :, 0]
    logdet = torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
    return 0.5 * (y * alpha).sum(1) + logdet + 0.5 * x.shape[1] * math.log(2 * math.pi)


def step(nll, x, y, noisy):
    """One forward and backward pass, as ``MetaGP.fit`` takes it: one set of hyper-parameters
    shared by every draw. Returns the gradient by the log hyper-parameters (1, P)."""
    import torch

    theta = torch.tensor([[0.0, math.log(0.3), math.log(1e-2), math.log(0.1), 0.0]], dtype=torch.float64)
    theta.requires_grad_(True)
    nll(KERNEL, theta.expand(len(x), -1), x, y, noisy).mean().backward()
    return theta.grad


def time_ms(call, repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` calls of ``call`` (no arguments) after two warm-up calls."""
    out = []
    for i in range(repeats + 2):
        t = time.perf_counter()
        call()
        if i >= 2:
            out.append(1000 * (time.perf_counter() - t))
    return out


def main(argv=None) -> None:
    import torch

    from taskextrap.baselines.gp import gp_nll
    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(a.seed)
    cells = []
    for name, k, q in SHAPES:
        x = (2 * torch.rand(BATCH, k + q, generator=g, dtype=torch.float64) - 1).sort(1).values
        y = torch.sin(3 * x) + 0.1 * torch.randn(BATCH, k + q, generator=g, dtype=torch.float64)
        noisy = torch.cat([torch.ones(BATCH, k), torch.zeros(BATCH, q)], 1).to(torch.float64)
        plain, closed = step(autograd_nll, x, y, noisy), step(gp_nll, x, y, noisy)
        cell = {"unit": name, "points_per_draw": k + q, "draws": BATCH,
                "gradient_max_rel_diff": float((plain - closed).abs().max() / plain.abs().max())}  # fmt: skip
        for label, nll in (("autograd", autograd_nll), ("closed_form", gp_nll)):
            ms = time_ms(functools.partial(step, nll, x, y, noisy), a.repeats)
            cell[label] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}
        cell["speedup_median"] = cell["autograd"]["median_ms"] / cell["closed_form"]["median_ms"]
        cells.append(cell)
        print(name, {x: round(cell[x]["median_ms"], 1) for x in ("autograd", "closed_form")}, flush=True)
    doc = {
        "cells": cells,
        "command": f"python benchmarks/gp_step.py --repeats {a.repeats} --threads {a.threads} --seed {a.seed}",
        "seed": a.seed,
        "threads": a.threads,
        "torch": torch.__version__,
        "source_hash": source_hash(),
    }
    out = Path(a.out or RESULTS / "gp-step.json")
    write_json_atomic(out, doc)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
