"""The depth-3 decomposition search: time per target of verifying every one of the k^3 chains
(k = 60: 216,000 chains) in one batched evaluation (``search.chain_search.verify_chains``) against the
plain Python-loop reference of the same search (``search.chain_search.chain_losses_loop``: ``np.interp``
chain by chain, the authors' way). Writes benchmarks/results/depth3-search.json.

    python benchmarks/depth3_search.py                 # about a minute on 2 cores
    python benchmarks/run.py --only depth3-search      # the same, from make bench

The library is the experiment's (500 primitives per family and the identity: 1,501 stored
curves); the targets are dev-split chains (timing needs no test task) observed through the
``paper`` protocol (50 context points). Each slot's 60 candidates are seeded random library
primitives with the true one among them, so both searches must return the true chain; the
batched losses are checked against the loop's on the loop's targets. The batched search is
timed with 1 and 2 torch threads (the machine has 2 cores, shared with other work when the load
average says so); the figure is the ratio of the loop's time per target to the batched one's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from taskextrap.experiments import composition_depth3 as D3
from taskextrap.files import write_json_atomic
from taskextrap.report.schema import environment_info
from taskextrap.search import chain_search as S
from taskextrap.seeding import rng
from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT, dev_recipe_split, with_identity
from taskextrap.tasks.regimes import get_protocol

OUT = Path(__file__).parent / "results" / "depth3-search.json"
TARGET_MS = 20.0  # the budget per target at k = 60 on 2 CPU cores
SEED = 0


def problem(n_targets: int, k: int, seed: int = SEED):
    """Library (with the identity), dev targets' contexts and each slot's k candidates (the true one included)."""
    prims = with_identity(D3.make_library(500))
    protocol = get_protocol("paper", "composition-depth3")
    targets, obs = D3.make_targets(prims, protocol, n_targets, 1, dev_recipe_split(PAPER_RECIPE_SPLIT), seed)
    g = rng(seed, "depth3-search-candidates")
    truth = targets.chains
    cands = []
    for j in range(3):
        c = np.stack([g.choice(np.setdiff1d(np.arange(len(prims)), [t]), k, replace=False) for t in truth[:, j]])
        c[np.arange(n_targets), g.integers(k, size=n_targets)] = truth[:, j]
        cands.append(c)
    return prims, obs, cands, truth


def _timed(fn, repeat: int) -> tuple[float, object]:
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bench(k: int = 60, n_batched: int = 40, n_loop: int = 2, keep: int = 64, repeat: int = 3) -> dict:
    """Time the batched search on ``n_batched`` targets (best of ``repeat``) and the loop on ``n_loop``."""
    prims, obs, cands, truth = problem(n_batched, k)
    x, y = obs.ctx_x, obs.ctx_y
    before = torch.get_num_threads()
    batched = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            S.verify_chains(prims, x[:2], y[:2], [c[:2] for c in cands], keep)  # warm-up
            wall, (chains, _) = _timed(lambda: S.verify_chains(prims, x, y, cands, keep), repeat)
            batched[str(threads)] = {
                "ms_per_target": 1e3 * wall / n_batched,
                "n_targets": n_batched,
                "found_true_chain": float((chains[:, 0] == truth).all(axis=1).mean()),
            }
            print(f"batched, {threads} thread(s): {1e3 * wall / n_batched:.1f} ms per target", flush=True)
    finally:
        torch.set_num_threads(before)
    sub = [c[:n_loop] for c in cands]
    t = time.perf_counter()
    loop = S.chain_losses_loop(prims, x[:n_loop], y[:n_loop], sub)
    loop_ms = 1e3 * (time.perf_counter() - t) / n_loop
    print(f"loop: {loop_ms:.0f} ms per target", flush=True)
    fast = S.chain_losses(prims, x[:n_loop], y[:n_loop], sub)
    best_ms = min(b["ms_per_target"] for b in batched.values())
    return {
        "k": k,
        "depth": 3,
        "chains_per_target": k**3,
        "library_size": len(prims),
        "n_context": x.shape[1],
        "keep": keep,
        "batched": batched,
        "loop": {
            "ms_per_target": loop_ms,
            "n_targets": n_loop,
            "found_true_chain": float(np.mean([np.argmin(r) == np.argmin(f) for r, f in zip(loop, fast, strict=True)])),
        },
        "ratio": loop_ms / batched["1"]["ms_per_target"],
        "ratio_best": loop_ms / best_ms,
        "max_abs_diff": float(np.abs(fast - loop).max()),
        "max_loss": float(loop.max()),
        "target_ms": TARGET_MS,
        "meets_target": bool(best_ms <= TARGET_MS),
    }


def document(command: str, **kw) -> dict:
    """The benchmark's JSON: results, machine, load and environment."""
    load = os.getloadavg()
    res = bench(**kw)
    return {
        "command": command,
        "environment": environment_info(),
        "what": __doc__.splitlines()[0],
        "machine": {"cpus": os.cpu_count(), "loadavg_before": load, "loadavg_after": os.getloadavg()},
        **res,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=60)
    ap.add_argument("--targets", type=int, default=40, help="targets of the batched search")
    ap.add_argument("--loop-targets", type=int, default=2, help="targets of the Python-loop reference")
    args = ap.parse_args()
    doc = document(
        "python benchmarks/depth3_search.py " + " ".join(sys.argv[1:]),
        k=args.k,
        n_batched=args.targets,
        n_loop=args.loop_targets,
    )
    write_json_atomic(OUT, doc)
    print(f"written {OUT}: ratio {doc['ratio']:.0f}x")


if __name__ == "__main__":
    main()
