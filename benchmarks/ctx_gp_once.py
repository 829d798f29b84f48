"""What fitting ``ctx-gp`` once per set of contexts saves in a ``paper`` run (issue 47).

``ctx-gp`` (a GP on each target's context alone) does not depend on the training seed, yet every
seed's unit used to fit it again on the same targets; ``baselines.classics.ctx_gp_once`` keeps the
last fits, so a run's seeds fit it once. ``python benchmarks/ctx_gp_once.py`` times one fit at each
regime's ``paper``-profile size under both protocols (targets x draws contexts of the protocol's
context points, smooth random curves), then the repeat through ``ctx_gp_once`` (a look-up), checks
that the repeat gives the same numbers to the bit, and counts the fits a ``paper`` run makes before
(seeds x groups) and after (groups). Writes ``benchmarks/results/ctx-gp-once.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# (regime, the module whose PROFILES["paper"] sizes its targets, groups scored per protocol and seed)
REGIMES = (
    ("parameter", "parameter", 5),  # the five families
    ("length", "length", 1),
    ("composition", "composition", 1),
    ("composition-depth3", "composition_depth3", 1),
)


def contexts(n: int, k: int, q: int, seed: int = 0):
    """``n`` smooth random curves: (ctx_x, ctx_y, qry_x), k context and q query points each."""
    import numpy as np

    g = np.random.default_rng(seed)
    x = g.uniform(-1, 1, (n, k + q))
    a, b, c = (g.uniform(-2, 2, (n, 1)) for _ in range(3))
    y = a * np.sin(3 * x + b) + c * x**2
    return x[:, :k], y[:, :k], x[:, k:]


def measure(regime: str, module: str, groups: int) -> list[dict]:
    """One fit and one repeat per protocol of ``regime`` at its ``paper`` size."""
    import importlib

    import numpy as np

    from taskextrap.baselines import classics
    from taskextrap.tasks.regimes import get_regime

    profile = importlib.import_module(f"taskextrap.experiments.{module}").PROFILES["paper"]
    out = []
    for name, protocol in get_regime(regime).protocols.items():
        n = profile.n_targets * profile.n_draws
        cx, cy, qx = contexts(n, protocol.n_context, protocol.n_query)
        classics._ctx_gp_fits.clear()  # a fit, whatever was timed before (two protocols may share a shape)
        t = time.perf_counter()
        first = classics.ctx_gp_once(cx, cy, qx)
        fit_s = time.perf_counter() - t
        t = time.perf_counter()
        again = classics.ctx_gp_once(cx, cy, qx)
        repeat_s = time.perf_counter() - t
        same = all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
        seeds = len(profile.seeds)
        out.append(
            {
                "regime": regime,
                "protocol": name,
                "contexts": n,
                "context_points": protocol.n_context,
                "fit_s": fit_s,
                "repeat_s": repeat_s,
                "same_bits": same,
                "fits_before": seeds * groups,
                "fits_after": groups,
                "saved_s": (seeds - 1) * groups * fit_s,
            }
        )
        print(f"{regime:20s} {name:7s} {n:6d} x {protocol.n_context:2d}: fit {fit_s:7.1f} s, repeat {repeat_s:.4f} s")
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the paper runs' --threads 2)")
    ap.add_argument("--only", nargs="*", default=None, help="regimes to time (default: all four)")
    ap.add_argument("--out", type=Path, default=RESULTS / "ctx-gp-once.json")
    args = ap.parse_args(argv)
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    torch.set_num_threads(args.threads)
    rows = [r for reg in REGIMES if args.only is None or reg[0] in args.only for r in measure(*reg)]
    result = {
        "source_hash": source_hash(),
        "torch": torch.__version__,
        "threads": args.threads,
        "cells": rows,
        "saved_s": sum(r["saved_s"] for r in rows),
        "command": "python benchmarks/ctx_gp_once.py" + (f" --threads {args.threads}" if args.threads != 2 else ""),
    }
    write_json_atomic(args.out, result)
    before, after = sum(r["fits_before"] for r in rows), sum(r["fits_after"] for r in rows)
    print(f"ctx-gp fits of a paper run: {after} instead of {before}, {result['saved_s'] / 60:.1f} min saved")
    return result


if __name__ == "__main__":
    main()
