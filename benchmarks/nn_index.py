"""Nearest-neighbour backends at the paper's library sizes and at 10x and 100x: time per query and
exactness. Writes benchmarks/results/nn-index.json; ``taskextrap.search.index`` picks its
``auto`` backend from these numbers.

    python benchmarks/nn_index.py            # a minute or so on 2 shared cores
    python benchmarks/nn_index.py --full     # also builds the kd/ball trees at 100x (minutes)

Three retrieval workloads, with the sizes of the paper profiles (``experiments/*.py``) and the
estimators' embedding width (16): the parameter RTE's anchors (library 2 regions x 100 tasks,
k = 2 anchors), the length RTE's screening (8 training levels x 1000 tasks, k = 40% of the
library) and the composition RTE's primitive retrieval (3 families x 3000 primitives, k = 10, the
paper protocol's). Embeddings are standard normal draws from ``--seed``. For each backend and
library size: ``build_s`` (building the index once), ``query_us`` (the index's own k-nearest
search per query), ``nearest_us`` (:func:`taskextrap.search.index.nearest` end to end per query:
build, candidates, exact re-ranking, recomputed rows), and ``exact`` (the share of queries whose
raw index answer, indices in order, equals the exact rule: nearest first, ties by lowest index;
``nearest`` itself is checked to equal the rule on every query). A ``ties`` case repeats the
paper sizes on coordinates drawn from {0, 1, 2}, where most distances tie.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from taskextrap.files import write_json_atomic
from taskextrap.report.schema import environment_info
from taskextrap.search import index as nn

OUT = Path(__file__).parent / "results" / "nn-index.json"
WIDTH = 16
# (workload, library size at the paper profile, k as a function of the library size)
WORKLOADS = (
    ("parameter", 200, lambda n: 2),
    ("length", 8000, lambda n: int(np.ceil(0.4 * n))),
    ("composition", 9000, lambda n: 10),
)
SCALES = (1, 10, 100)
QUERIES = {1: 1024, 10: 128, 100: 16}  # queries per call, timed per library size
BIG_K_QUERIES = {1: 128, 10: 16, 100: 2}  # the same where k is 40% of the library (length): bounded time
BACKENDS = [b for b in nn.BACKENDS if b != "auto"]


def _available(backend: str) -> bool:
    if backend != "faiss":
        return True
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _time(fn, repeat: int = 3) -> tuple[float, object]:
    """The best of up to ``repeat`` wall times of ``fn()`` (one when a call takes over 0.5 s) and its result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
        if best > 0.5:
            break
    return best, out


def bench_case(lib: np.ndarray, z: np.ndarray, k: int, full: bool, scale: int) -> dict:
    """Every backend on one library ``lib`` and query batch ``z``."""
    ref = nn.nearest_exact(z, lib, k)[0]
    repeat = 3
    out = {}
    for backend in BACKENDS:
        if not _available(backend):
            out[backend] = {"skipped": "faiss is not installed (the optional faiss extra)"}
            continue
        if backend in ("kd_tree", "ball_tree") and scale == 100 and not full:
            out[backend] = {"skipped": "trees are not built at 100x in the default run (--full builds them)"}
            continue
        build_s, search = _time(functools.partial(nn._index, backend, lib), repeat)
        k_c = min(len(lib), k)
        query_s, (idx, d2) = _time(functools.partial(search, z, k_c), repeat)
        raw = np.take_along_axis(idx, np.argsort(d2, axis=1, kind="stable"), 1)  # by the index's own distances
        nearest_s, (got, _) = _time(functools.partial(nn.nearest, z, lib, k, backend=backend), repeat)
        if not np.array_equal(got, ref):
            raise SystemExit(f"nearest(backend={backend!r}) differs from the exact rule: a bug")
        out[backend] = {
            "build_s": build_s,
            "query_us": 1e6 * query_s / len(z),
            "nearest_us": 1e6 * nearest_s / len(z),
            "exact": float(np.mean([np.array_equal(a, b) for a, b in zip(raw, ref, strict=True)])),
        }
    return out


def run(seed: int = 0, full: bool = False) -> dict:
    """The whole table: {workload: {library size: {backend: numbers}}} plus the ties case."""
    g = np.random.default_rng(seed)
    results, ties = {}, {}
    for name, paper_n, k_of in WORKLOADS:
        results[name] = {}
        for scale in SCALES:
            n = paper_n * scale
            queries = (BIG_K_QUERIES if 8 * k_of(n) > n else QUERIES)[scale]
            lib, z = g.normal(size=(n, WIDTH)), g.normal(size=(queries, WIDTH))
            t = time.perf_counter()
            results[name][str(n)] = {
                "scale": scale,
                "k": k_of(n),
                "queries": len(z),
                "backends": bench_case(lib, z, k_of(n), full, scale),
            }
            print(
                f"{name:11s} N={n:7d} k={k_of(n):6d} {time.perf_counter() - t:6.1f} s: "
                + ", ".join(
                    f"{b} {r['nearest_us']:.0f}us"
                    for b, r in results[name][str(n)]["backends"].items()
                    if "nearest_us" in r
                ),
                flush=True,
            )
        lib = g.integers(0, 3, size=(paper_n, WIDTH)).astype(float)
        z = g.integers(0, 3, size=((BIG_K_QUERIES if 8 * k_of(paper_n) > paper_n else QUERIES)[1], WIDTH)).astype(float)
        ties[name] = {
            "n": paper_n,
            "k": k_of(paper_n),
            "queries": len(z),
            "backends": bench_case(lib, z, k_of(paper_n), full, 1),
        }
    return {"results": results, "ties": ties}


def machine() -> dict:
    """Where the numbers were taken."""
    import sklearn

    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "sklearn": sklearn.__version__,
    }
    try:
        import faiss

        info["faiss"] = faiss.__version__
    except ImportError:
        info["faiss"] = None
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full", action="store_true", help="also build the kd/ball trees at 100x (minutes)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    write_json_atomic(a.out, document("python benchmarks/nn_index.py" + (" --full" if a.full else ""), a.seed, a.full))
    print(f"written: {a.out}")


def document(command: str, seed: int = 0, full: bool = False) -> dict:
    """The results file: the command, seed, machine, environment, ``auto``'s threshold, wall time and :func:`run`."""
    t = time.perf_counter()
    res = run(seed, full)
    return {
        "command": command,
        "seed": seed,
        "width": WIDTH,
        "machine": machine(),
        "environment": environment_info(),
        "auto_rule": nn.AUTO_RULE,
        "wall_s": time.perf_counter() - t,
        **res,
    }


if __name__ == "__main__":
    main()
