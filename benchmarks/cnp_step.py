"""One training step of the ``cnp`` baseline (``operators.cnp``), per-row against per-task context
encoding (issue 47).

``python benchmarks/cnp_step.py``: at the row shapes the cnp trains on in the parameter unit (8
context points, 8 queries per task, batches of 2048 rows) and the composition unit (25 and 25,
4096 rows), times an Adam step of the chosen width (128) when every row encodes its context
(``group=1``: what the cnp did before) and when a batch is read as whole tasks, each context
encoded once (``group`` = the queries per task: what it does now). Same network, same rows; the
median and min of ``--repeats`` timed steps after a warm-up. Writes
``benchmarks/results/cnp-step.json``.

``python benchmarks/cnp_step.py --long 2500``: the step time over a long training instead (the
parameter shape, per task, one thread, Adam with the units' weight decay on cubic tasks), in
windows of 250 steps, plain and under ``operators.jobs.subnormals_flushed`` (at one torch thread,
as the cnp trains: with ``--threads 2`` the plain run is what a cnp trained at two threads did
before it trained at one): a trained network carries subnormal numbers, which x86 CPUs compute
with many times slower. Writes ``benchmarks/results/cnp-subnormals.json`` (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# (name, context points, queries per task, rows per batch) of the units the cnp trains in
SHAPES = (("parameter", 8, 8, 2048), ("composition", 25, 25, 4096))


def step_ms(k: int, group: int, rows: int, repeats: int, seed: int) -> list[float]:
    """Milliseconds of ``repeats`` Adam steps of a width-128 CNPNet reading ``rows`` rows in
    tasks of ``group`` rows (1: every row encodes its own context)."""
    import torch

    from taskextrap.operators.cnp import CNPNet

    net = CNPNet(k, 128, seed)
    net.group = group
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    g = torch.Generator().manual_seed(seed)
    rows = rows // group * group
    x, y = torch.randn(rows, 1 + 2 * k, generator=g), torch.randn(rows, 1, generator=g)
    out = []
    for i in range(repeats + 3):  # three warm-up steps
        t = time.perf_counter()
        _adam_step(net, opt, x, y)
        if i >= 3:
            out.append(1000 * (time.perf_counter() - t))
    return out


def long_training(steps: int, flushed: bool, seed: int, window: int = 250) -> dict:
    """ms per step in each ``window`` of ``steps`` Adam steps of a width-128 CNPNet at the
    parameter shape on fresh cubic tasks (coefficients N(0, 1), inputs in [-1, 1], noise 0.01),
    plain or as the cnp's training runs (``operators.jobs.train_alone``: under ``subnormals_flushed``
    at one torch thread, whatever ``--threads`` says); and the last window's mean loss."""
    import torch

    from taskextrap.operators.cnp import CNPNet
    from taskextrap.operators.jobs import one_torch_thread, subnormals_flushed

    _, k, q, rows = SHAPES[0]
    net = CNPNet(k, 128, seed)
    net.group = q
    opt = torch.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    windows, losses = [], []
    with one_torch_thread(flushed), subnormals_flushed(flushed):
        t = time.perf_counter()
        for step in range(steps):
            losses.append(_adam_step(net, opt, *_cubic_rows(g, k, q, rows // q)).item())
            if (step + 1) % window == 0:
                now = time.perf_counter()
                windows.append(1000 * (now - t) / window)
                t = now
        threads = torch.get_num_threads()  # the run's own: one when flushed, whatever --threads says
    return {"ms_per_step": windows, "window": window, "last_window_loss": statistics.mean(losses[-window:]),
            "threads": threads}  # fmt: skip


def _adam_step(net, opt, x, y):
    """One Adam step of ``net`` on the Gaussian likelihood of ``y`` given rows ``x``: its loss."""
    from taskextrap.operators.cnp import gaussian_nll

    loss = gaussian_nll(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def _cubic_rows(g, k: int, q: int, tasks: int):
    """Rows (query x, context xs, context ys) and targets of ``tasks`` cubic tasks, ``q`` rows each."""
    import torch

    c = torch.randn(tasks, 4, generator=g)
    xs = torch.rand(tasks, k + q, generator=g) * 2 - 1
    ys = c[:, :1] + c[:, 1:2] * xs + c[:, 2:3] * xs**2 + c[:, 3:4] * xs**3
    ys = ys + 0.01 * torch.randn(tasks, k + q, generator=g)
    rows = torch.cat(
        [xs[:, k:].reshape(-1, 1), xs[:, :k].repeat_interleave(q, 0), ys[:, :k].repeat_interleave(q, 0)], 1
    )
    return rows, ys[:, k:].reshape(-1, 1)


def main(argv=None) -> None:
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--long", type=int, default=None, metavar="STEPS", help="time a long training instead")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.long:
        return _main_long(a)
    cells = []
    for name, k, q, rows in SHAPES:
        cell = {"unit": name, "n_context": k, "queries_per_task": q, "rows": rows}
        for label, group in (("per_row", 1), ("per_task", q)):
            ms = step_ms(k, group, rows, a.repeats, a.seed)
            cell[label] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}
        cell["speedup_median"] = cell["per_row"]["median_ms"] / cell["per_task"]["median_ms"]
        cells.append(cell)
        print(name, {x: round(cell[x]["median_ms"], 1) for x in ("per_row", "per_task")}, flush=True)
    doc = {
        "cells": cells,
        "command": f"python benchmarks/cnp_step.py --repeats {a.repeats} --threads {a.threads} --seed {a.seed}",
        "seed": a.seed,
        "threads": a.threads,
        "torch": torch.__version__,
        "source_hash": source_hash(),
    }
    out = Path(a.out or RESULTS / "cnp-step.json")
    write_json_atomic(out, doc)
    print(f"written: {out}")


def _main_long(a) -> None:
    """``--long``: the step time of one long training, plain and with subnormals flushed."""
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import cpu_info, source_hash

    runs = {}
    for label, flushed in (("plain", False), ("subnormals_flushed", True)):
        runs[label] = long_training(a.long, flushed, a.seed)
        print(label, [round(m, 1) for m in runs[label]["ms_per_step"]], flush=True)
    doc = {
        "shape": dict(zip(("unit", "n_context", "queries_per_task", "rows"), SHAPES[0], strict=True)),
        "steps": a.long,
        "runs": runs,
        "command": f"python benchmarks/cnp_step.py --long {a.long} --threads {a.threads} --seed {a.seed}",
        "seed": a.seed,
        "threads": a.threads,
        "torch": torch.__version__,
        "cpu": cpu_info(),
        "source_hash": source_hash(),
    }
    out = Path(a.out or RESULTS / "cnp-subnormals.json")
    write_json_atomic(out, doc)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
