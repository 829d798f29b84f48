"""The composition-em E-step (search only, the warm-up arm's): wall time of re-labelling N hidden
training tasks by coordinate sweeps over the paper library (3,000 primitives per family: 9,000
stored curves), from 4 random starting pairs with 3 rounds each, as the paper profile does.

It is most of a composition-em ``paper`` unit. Three settings of the same search, which must
return the same labels to the bit:

- ``chunk32-1lane``: 32 tasks per sweep, one at a time (the sweep size before the E-step was
  chunked by values; each numpy temporary then is ~58 MB, fresh pages every time);
- ``chunked-1lane``: ``refine_chunk`` tasks per sweep (~1M values), one at a time;
- ``chunked-lanes``: the same, chunks spread over the lanes (``taskextrap.lanes``).

    python benchmarks/em_estep.py                  # about 2 minutes on 2 cores
    PYTHONPATH=<checkout of 5549480>/src python benchmarks/em_estep.py --out benchmarks/results/em-estep-before.json
    python benchmarks/run.py --only em-estep       # the same, from make bench

The tasks are training-pair compositions drawn from the estimator's own training pool (no
held-out pair, no test task). Writes benchmarks/results/em-estep.json.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from taskextrap import lanes
from taskextrap.estimators import composition as C
from taskextrap.estimators.composition_em import EMCompositionRTE
from taskextrap.experiments.composition import make_library
from taskextrap.files import write_json_atomic
from taskextrap.report.schema import environment_info
from taskextrap.search import chain_search

# The module whose REFINE_VALUES sizes the sweeps (search.chain_search today); None for the
# package before e458ab9, which swept 32 tasks at a time.
R = next((m for m in (chain_search, C) if hasattr(m, "REFINE_VALUES")), None)

OUT = Path(__file__).parent / "results" / "em-estep.json"
N_PER_FAMILY = 3000  # the paper profile's library
SEED = 0


def e_step_once(prims, n_tasks: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(seconds, labels, losses) of one search-only E-step over ``n_tasks`` hidden tasks."""
    em = EMCompositionRTE(label_share=0.0, restarts=4, sweeps=3, seed=SEED, verbose=False)
    em._resolve()
    em._prepare(prims)
    em.history_ = []
    s = em._hidden_set(em.train_pool_, n_tasks, "train")
    t = time.perf_counter()
    em._e_step(s, None)
    return time.perf_counter() - t, s.labels.copy(), s.loss.copy()


def digest(labels: np.ndarray, loss: np.ndarray) -> str:
    """sha256 of the labels (int64) and losses (float64): equal digests, equal bits, across commits."""
    return hashlib.sha256(labels.astype(np.int64).tobytes() + loss.astype(np.float64).tobytes()).hexdigest()


def measure(n_tasks: int) -> tuple[dict, str]:
    """Each setting's seconds per task, and the labels' :func:`digest`; raises if any setting's
    labels differ from the first's."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a unit's default; lanes then fill the other cores
    prims = make_library(N_PER_FAMILY)
    m = 25  # the paper protocol's context size
    if R is None:  # the package before e458ab9 (PYTHONPATH=<old checkout>/src): as it is
        secs, labels, loss = e_step_once(prims, n_tasks)
        torch.set_num_threads(threads)
        row = {"seconds": secs, "ms_per_task": 1e3 * secs / n_tasks, "lanes": 1, "tasks_per_sweep": 32}
        return {"as-is": row}, digest(labels, loss)
    settings = {
        "chunk32-1lane": (32 * m * len(prims), "1"),
        "chunked-1lane": (R.REFINE_VALUES, "1"),
        "chunked-lanes": (R.REFINE_VALUES, str(lanes.lanes())),
    }
    default, before = R.REFINE_VALUES, os.environ.get("TASKEXTRAP_LANES")
    rows, first = {}, None
    try:
        for name, (values, n_lanes) in settings.items():
            R.REFINE_VALUES = values
            os.environ["TASKEXTRAP_LANES"] = n_lanes
            secs, labels, loss = e_step_once(prims, n_tasks)
            if first is None:
                first = (labels, loss)
            elif not (np.array_equal(first[0], labels) and np.array_equal(first[1], loss)):
                raise SystemExit(f"{name}: the labels differ from the first setting's")
            rows[name] = {
                "seconds": secs,
                "ms_per_task": 1e3 * secs / n_tasks,
                "lanes": int(n_lanes),
                "tasks_per_sweep": R.refine_chunk(n_tasks, m, len(prims)),
            }
            print(f"{name}: {secs:.1f} s ({rows[name]['ms_per_task']:.1f} ms per task)", file=sys.stderr)
    finally:
        torch.set_num_threads(threads)
        R.REFINE_VALUES = default
        if before is None:
            os.environ.pop("TASKEXTRAP_LANES", None)
        else:
            os.environ["TASKEXTRAP_LANES"] = before
    base = rows["chunk32-1lane"]["seconds"]
    for r in rows.values():
        r["speedup_vs_chunk32"] = base / r["seconds"]
    return rows, digest(*first)


def document(n_tasks: int, command: str) -> dict:
    """The results file: settings, timings, the same labels in every setting (checked), their digest."""
    load = os.getloadavg()[0]
    settings, labels_digest = measure(n_tasks)
    return {
        "environment": environment_info("cpu"),
        "command": command,
        "library": {"n_per_family": N_PER_FAMILY, "families": 3},
        "n_tasks": n_tasks,
        "restarts": 4,
        "sweeps": 3,
        "load_average_1min": load,
        "settings": settings,
        "same_labels_in_every_setting": True,
        "labels_digest": labels_digest,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=192, help="hidden tasks to re-label (default 192)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    command = "python benchmarks/em_estep.py" + (f" --tasks {args.tasks}" if args.tasks != 192 else "")
    if args.out.resolve() != OUT.resolve():
        command += f" --out {args.out}"
    if R is None:  # timing another checkout's package: say which
        command = f"PYTHONPATH={Path(C.__file__).parents[2]} {command}"
    doc = document(args.tasks, command)
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
