"""The kernels behind the speed work, timed alone on one torch thread (a minute or so): what
docs/performance.md cites. Writes benchmarks/results/kernels.json.

    python benchmarks/kernel_timings.py

* ``psi_step``: one Adam step of the parameter regime's Psi network (PARAMETER_BLOCKS, 60
  inputs) on 4,096 rows: ms per step and the GFLOP/s it reaches (6 x rows x parameters).
* ``predict_chunks``: 524,288 feature rows through the same network in passes of 65,536 rows
  (before) and 4,096 (now), and whether the outputs are bit-identical.
* ``adapted``: the ``adapted`` Gamma of 2,048 tasks with 25 context points, 50 steps: the
  per-parameter textbook Adam in one chunk of 2,048 (before) against the flat in-place Adam in
  chunks of 256 (now), and whether the embeddings are bit-identical.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch.func import grad, vmap

from taskextrap.embed import estimators as E
from taskextrap.embed.probe import flatten, init_probe, probe_loss
from taskextrap.files import write_json_atomic
from taskextrap.operators.mlp import block_mlp, predict_rows
from taskextrap.report.schema import environment_info
from taskextrap.seeding import torch_generator

OUT = Path(__file__).parent / "results" / "kernels.json"


def _best(fn, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timings of ``fn()`` in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def psi_step(rows: int = 4096, d_in: int = 60, steps: int = 50) -> dict:
    """Ms per Adam step of Psi on ``rows`` rows of ``d_in`` features, and the GFLOP/s that is."""
    net = block_mlp(d_in, 1, 0)
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    x, y = torch.randn(rows, d_in), torch.randn(rows, 1)

    def run():
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    s = _best(run) / steps
    n = sum(p.numel() for p in net.parameters())
    return {"rows": rows, "parameters": n, "ms_per_step": round(1e3 * s, 2), "gflops": round(6 * rows * n / s / 1e9, 1)}


def predict_chunks(rows: int = 524288, d_in: int = 60) -> dict:
    """Seconds to predict ``rows`` rows in 65,536-row passes and in 4,096-row ones; same bits?"""
    net = block_mlp(d_in, 1, 0).eval()
    x = np.random.default_rng(0).normal(size=(rows, d_in)).astype(np.float32)
    before = predict_rows(net, x, chunk=65536)
    return {
        "rows": rows,
        "before_s": round(_best(lambda: predict_rows(net, x, chunk=65536)), 3),
        "now_s": round(_best(lambda: predict_rows(net, x, chunk=4096)), 3),
        "identical": bool(torch.equal(predict_rows(net, x, chunk=4096), before)),
    }


def textbook_adapted(p0, x, y, steps, lr):
    """The ``adapted`` Gamma as it was before the flat rewrite: per-parameter Adam, allocating
    (the reference tests/test_speed.py holds the rewrite to, bit for bit)."""
    n = x.shape[0]
    p = {k: v.expand(n, *v.shape).clone() for k, v in p0.items()}
    m = {k: torch.zeros_like(v) for k, v in p.items()}
    s = {k: torch.zeros_like(v) for k, v in p.items()}
    g_fn = vmap(grad(probe_loss), in_dims=(0, 0, 0))
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        g = g_fn(p, x, y)
        for k in p:
            m[k].mul_(b1).add_(g[k], alpha=1 - b1)
            s[k].mul_(b2).addcmul_(g[k], g[k], value=1 - b2)
            p[k] -= lr * (m[k] / (1 - b1**t)) / ((s[k] / (1 - b2**t)).sqrt() + eps)
    return flatten(p) - flatten(p0)


def adapted(n: int = 2048, k: int = 25, steps: int = 50) -> dict:
    """Seconds for the ``adapted`` Gamma of ``n`` tasks: textbook in one chunk against the flat
    rewrite in chunks of 256; same bits?"""
    p0 = init_probe(64, torch_generator(0, "probe"), xavier=True)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, k, generator=g) * 2 - 1
    y = torch.sin(3 * x)
    before = textbook_adapted(p0, x, y, steps, 1e-2)
    c = E.CHUNK

    def now():
        return torch.cat([E._per_task_adapted(p0, x[i : i + c], y[i : i + c], steps, 1e-2) for i in range(0, n, c)])

    return {
        "tasks": n,
        "context": k,
        "steps": steps,
        "before_s": round(_best(lambda: textbook_adapted(p0, x, y, steps, 1e-2), 1), 2),
        "now_s": round(_best(now, 1), 2),
        "identical": bool(torch.equal(now(), before)),
    }


def main():
    torch.set_num_threads(1)
    doc = {
        "environment": environment_info(),
        "threads": 1,
        "psi_step": psi_step(),
        "predict_chunks": predict_chunks(),
        "adapted": adapted(),
    }
    write_json_atomic(OUT, doc)
    print({k: v for k, v in doc.items() if k != "environment"})


if __name__ == "__main__":
    main()
