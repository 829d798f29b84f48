"""The GP marginal likelihood evaluated a chunk of rows at a time (``baselines.gp.EVAL_CHUNK``).

``python benchmarks/gp_chunks.py``: at ``ctx-gp``'s size in a parameter unit (12,800 contexts
of 8 points, 17 L-BFGS starts each, split over two lanes: 108,800 problems per lane) times one
evaluation of the negative log marginal likelihood and its closed-form gradient
(``_nll_value_grad``, what each L-BFGS iteration and line-search trial calls) with the rows in
one pass and in chunks of each size of ``--chunks``, and checks that every chunk size gives the
same bits as one pass. The median, min and max of ``--repeats`` timed evaluations after a
warm-up, one torch thread. Writes ``benchmarks/results/gp-chunks.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KERNEL, CONTEXTS, POINTS, STARTS = "rbf+linear", 6400, 8, 17  # one lane's share of a parameter unit


def problems(seed: int):
    """The (rows, P) log hyper-parameters and (rows, POINTS) inputs, outputs and noise flags of
    ``CONTEXTS`` smooth random contexts at ``STARTS`` starts each, as ``ctx_gp`` builds them."""
    import numpy as np
    import torch

    from taskextrap.baselines import gp

    g = np.random.default_rng(seed)
    x = g.uniform(-1, 1, (CONTEXTS, POINTS))
    y = g.uniform(-2, 2, (CONTEXTS, 1)) * np.sin(3 * x + g.uniform(-2, 2, (CONTEXTS, 1))) + x**2
    xs, ys = (torch.from_numpy(a) for a in gp.standardised_context(x, y)[:2])
    starts = gp._starts(KERNEL, CONTEXTS, STARTS - 1, seed, "ctx-gp")
    rows = gp._per_start(STARTS, xs, ys, torch.ones_like(xs))
    return (starts.reshape(-1, starts.shape[-1]), *rows)


def measure(chunk: int | None, data, repeats: int) -> tuple[dict, tuple]:
    """Seconds of ``repeats`` evaluations with ``EVAL_CHUNK`` = ``chunk`` (None: every row in one
    pass), and the last evaluation's (value, gradient)."""
    from taskextrap.baselines import gp

    before = gp.EVAL_CHUNK
    gp.EVAL_CHUNK = chunk or len(data[0])
    try:
        out = gp._nll_value_grad(KERNEL, *data)  # the warm-up
        ms = []
        for _ in range(repeats):
            t = time.perf_counter()
            out = gp._nll_value_grad(KERNEL, *data)
            ms.append(1000 * (time.perf_counter() - t))
    finally:
        gp.EVAL_CHUNK = before
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 16384])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import json

    import torch

    from taskextrap.baselines import gp
    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    torch.set_num_threads(1)
    data = problems(args.seed)
    whole, want = measure(None, data, args.repeats)
    cells = [{"chunk": "all", **whole}]
    for c in args.chunks:
        timing, got = measure(c, data, args.repeats)
        same = all(torch.equal(a, b) for a, b in zip(want, got, strict=True))
        cells.append(
            {"chunk": c, **timing, "same_bits": same, "speedup_median": whole["median_ms"] / timing["median_ms"]}
        )
    doc = {
        "problems": len(data[0]),
        "points": POINTS,
        "kernel": KERNEL,
        "chosen": gp.EVAL_CHUNK,
        "cells": cells,
        "command": "python benchmarks/gp_chunks.py" + (f" --seed {args.seed}" if args.seed else ""),
        "seed": args.seed,
        "threads": 1,
        "torch": torch.__version__,
        "source_hash": source_hash(),
    }
    out = Path(args.out) if args.out else RESULTS / "gp-chunks.json"
    write_json_atomic(out, doc)
    print(json.dumps(cells, indent=1))


if __name__ == "__main__":
    main()
