"""One training step of the ``cnp`` baseline (``operators.cnp``), per-row against per-task context
encoding (issue 47).

``python benchmarks/cnp_step.py``: at the row shapes the cnp trains on in the parameter unit (8
context points, 8 queries per task, batches of 2048 rows) and the composition unit (25 and 25,
4096 rows), times an Adam step of the chosen width (128) when every row encodes its context
(``group=1``: what the cnp did before) and when a batch is read as whole tasks, each context
encoded once (``group`` = the queries per task: what it does now). Same network, same rows; the
median and min of ``--repeats`` timed steps after a warm-up. Writes
``benchmarks/results/cnp-step.json``.
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

    from taskextrap.operators.cnp import CNPNet, gaussian_nll

    net = CNPNet(k, 128, seed)
    net.group = group
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    g = torch.Generator().manual_seed(seed)
    rows = rows // group * group
    x, y = torch.randn(rows, 1 + 2 * k, generator=g), torch.randn(rows, 1, generator=g)
    out = []
    for i in range(repeats + 3):  # three warm-up steps
        t = time.perf_counter()
        loss = gaussian_nll(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 3:
            out.append(1000 * (time.perf_counter() - t))
    return out


def main(argv=None) -> None:
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
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


if __name__ == "__main__":
    main()
