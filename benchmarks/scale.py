"""Fit cost against library size (issue 65, "measure first"): the parameter regime's RTE fitted
on cubic libraries of growing size, each in its own process, timed and scored on the same
held-out targets.

For every size n (tasks, spread evenly over the family's training regions, each size its own
seeded draw) the child
process fits ``RTE(protocol="paper")`` on one torch thread and records the fit's wall time and
its phases (``RTE.timing_``), the prediction time of the targets, the process's peak resident
memory, and the MSE and the 90% interval's coverage on the same 100 F2 targets (one draw each,
the same draws at every size). With ``--data-file N ...`` the library of each size N is also
written as a table of observations (16 evenly spaced points per task) and fitted by
``taskextrap fit`` (its dev step included: a second RTE, every peer on the dev split, rte-gp's
choice), timed from the command line.

    python benchmarks/scale.py                                # 200, 800, 3200 (make bench)
    python benchmarks/scale.py --sizes 200 800 3200 12800 51200 --data-file 10000
    python benchmarks/scale.py --split dev --sizes 800 3200   # the same on the dev split
    python benchmarks/scale.py --sizes 200 --out /tmp/s.json  # a plumbing check
    python benchmarks/scale.py --sizes 800 3200 51200 --seeds 0 1 2   # paired over three seeds

With ``--split dev`` the library and the targets come from the family's dev split (region
``dev`` held out, ``tasks.dev``), where the scaling changes are chosen; the test split's F2
targets are for the final numbers.

Writes ``benchmarks/results/scale.json`` (``scale-dev.json``): one record per size (and seed), and each
size's per-target MSE against the 800-task library's (paired over the same targets and seeds,
``report.compare.paired_difference``). ``--seeds`` draws each size's library and trains RTE under
each seed, on the same targets: a difference is clear only when every seed agrees.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SIZES = (200, 800, 3200)
REFERENCE = 800  # the size every other is compared with, target by target
FAMILY = "cubic"
N_TARGETS = 100
POINTS = 16  # observations per task in the data-file library


def family_and_region(split: str = "test", name: str = FAMILY):
    """The family and the held-out region of ``split``: the cubic family and F2 (``test``), or
    its dev split and region ``dev`` (``tasks.dev``: F1_2 held out, F1_1 cut in two), for
    choices made on dev."""
    from taskextrap.tasks import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import DEV_REGION, dev_family

    family = PARAMETER_FAMILIES[name]
    return (family, "F2") if split == "test" else (dev_family(family), DEV_REGION)


def library_of(n: int, seed: int = 0, split: str = "test", name: str = FAMILY):
    """``n`` cubic tasks spread evenly over the training regions of ``split`` (the remainder to
    the first)."""
    from taskextrap.seeding import rng
    from taskextrap.tasks import TaskSet

    family = family_and_region(split, name)[0]
    regions = family.train_regions
    counts = {r: n // len(regions) + (i < n % len(regions)) for i, r in enumerate(regions)}
    return TaskSet.sample(family, counts, rng(seed, "scale-library", n))


def targets_and_draws(split: str = "test", name: str = FAMILY):
    """The held-out targets of ``split`` and their one draw each: the same at every size."""
    from taskextrap.seeding import rng
    from taskextrap.tasks import TaskSet, get_protocol

    family, region = family_and_region(split, name)
    targets = TaskSet.sample(family, {region: N_TARGETS}, rng(31337, "scale-targets"))
    return get_protocol("paper").draw(targets, 1, rng(31337, "scale-draws"))


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure_one(n: int, seed: int = 0, split: str = "test") -> dict:
    """Fit and score one size in this process (call it in a fresh one: the peak memory is the
    process's)."""
    import torch

    from taskextrap import RTE
    from taskextrap.search.posterior import covered

    torch.set_num_threads(1)
    library, obs = library_of(n, seed, split), targets_and_draws(split)
    t = time.perf_counter()
    model = RTE(protocol="paper", seed=seed, verbose=False).fit(library)
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    mean, sd = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    predict_s = time.perf_counter() - t
    per_target = ((mean - obs.qry_y) ** 2).mean(1)
    return {
        "tasks": n,
        "fit_s": round(fit_s, 2),
        "fit_s_per_task_ms": round(1000.0 * fit_s / n, 3),
        "phases_s": {k: round(float(v), 2) for k, v in getattr(model, "timing_", {}).items()},
        "predict_s": round(predict_s, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "mse": float(per_target.mean()),
        "coverage": float(covered(mean, sd, obs.qry_y).mean()),
        "per_target_mse": per_target.tolist(),
    }


def data_file_fit(n: int, folder: Path, seed: int = 0) -> dict:
    """``taskextrap fit`` on the size-``n`` library written as observations (POINTS per task on
    one evenly spaced grid),
    its dev calibration included, timed from the command line."""
    library = library_of(n, seed)
    lo, hi = library.family.domain
    x = np.broadcast_to(np.linspace(lo, hi, POINTS), (n, POINTS))  # a measured grid, as a sensor's
    y = library.values(x)
    path = folder / f"library-{n}.csv"
    with path.open("w") as f:
        f.write("task,x,y\n")
        for i in range(n):
            f.writelines(f"t{i},{float(x[i, j])!r},{float(y[i, j])!r}\n" for j in range(POINTS))
    cmd = [sys.executable, "-m", "taskextrap.cli", "fit", "--data", str(path), "--out", str(folder / f"model-{n}")]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=_env())
    wall = round(time.perf_counter() - t, 2)
    record = json.loads((folder / f"model-{n}" / "fit.json").read_text())  # the command's own split of its time
    return {
        "tasks": n,
        "points_per_task": POINTS,
        "fit_command_s": wall,
        "final_fit_s": record.get("fit_s"),
        "in_command_s": record.get("total_s"),
        "dev_seconds": record.get("dev_seconds", {}),  # the dev step's split of its time (peers: with --peers)
        "dev_targets": record.get("dev", {}).get("targets"),
    }


def _env() -> dict:
    """This process's environment with one OpenMP thread (a child fits as the parent measures)."""
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1"}


def paired_against(records: list[dict], reference: int = REFERENCE) -> dict:
    """Each size's per-target MSE against the reference size's, paired over the same targets
    and seeds (``report.compare.paired_difference`` on (targets, seeds): the interval over targets
    of the seed-averaged differences, clear only when every seed's mean difference has its sign;
    one seed: a clear difference is this seed's only). A record without ``seed`` is seed 0."""
    from taskextrap.report.compare import paired_difference

    by: dict[int, dict[int, np.ndarray]] = {}
    for r in records:
        by.setdefault(r["tasks"], {})[r.get("seed", 0)] = np.asarray(r["per_target_mse"])
    if reference not in by:
        return {}
    seeds = sorted(by[reference])
    ref = np.stack([by[reference][s] for s in seeds], axis=1)
    out = {}
    for n, errs in by.items():
        if n != reference and sorted(errs) == seeds:
            d = paired_difference(np.stack([errs[s] for s in seeds], axis=1), ref)
            out[str(n)] = {"mse_minus_reference": d["diff"], "interval": [d["lo"], d["hi"]], "clear": d["clear"]}
            if len(seeds) > 1:
                out[str(n)]["seed_diffs"] = d["seed_diffs"]
    return out


def run(sizes, data_file=(), seeds=(0,), split: str = "test") -> dict:
    """Every (seed, size) in its own process, and each size of ``data_file`` through
    ``taskextrap fit`` (the first seed's library)."""
    records, files = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for n in sizes:
                out = Path(tmp) / f"one-{n}-{seed}.json"
                cmd = [sys.executable, __file__, "--one", str(n), "--seed", str(seed), "--split", split, "--out",
                       str(out)]  # fmt: skip
                subprocess.run(cmd, check=True, env=_env())
                records.append(json.loads(out.read_text()) | {"seed": seed})
                print(
                    f"{n} tasks, seed {seed}: fit {records[-1]['fit_s']} s, mse {records[-1]['mse']:.4g}",
                    file=sys.stderr,
                )
        for n in data_file:
            files.append(data_file_fit(n, Path(tmp), seeds[0]))
            print(f"{n} tasks through taskextrap fit: {files[-1]['fit_command_s']} s", file=sys.stderr)
    return {"records": records, "data_file": files, "paired_vs_reference": paired_against(records)}


def write_result(out: Path, script: str, argv, started: float, fields: dict) -> None:
    """Write a one-thread benchmark's ``fields`` to ``out`` atomically, with the command that made
    them (``script`` and its arguments), its wall time since ``started`` and the environment
    (this script's and ``scale_candidates.py``'s and ``bounded_gamma.py``'s)."""
    from taskextrap.files import write_json_atomic
    from taskextrap.report.schema import environment_info

    doc = {"command": f"python benchmarks/{script} " + " ".join(sys.argv[1:] if argv is None else argv)}
    doc |= fields | {"threads": 1, "wall_s": round(time.perf_counter() - started, 1)}
    write_json_atomic(out, doc | {"environment": environment_info("cpu")})
    print(f"written: {out}")


def main(argv=None) -> None:

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes", type=int, nargs="*", default=list(SIZES), help="sizes fitted in Python (none: --data-file only)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="several seeds (library draws and training), paired over them",
    )
    ap.add_argument(
        "--data-file", type=int, nargs="*", default=[], help="library sizes also timed through `taskextrap fit` (CSV)"
    )
    ap.add_argument(
        "--split", choices=("test", "dev"), default="test", help="dev: the family's dev split (choices are made there)"
    )
    ap.add_argument("--out", type=Path, default=None, help="default benchmarks/results/scale[-dev].json")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a child: one size
    a = ap.parse_args(argv)
    if a.out is None:
        a.out = ROOT / "benchmarks" / "results" / ("scale.json" if a.split == "test" else "scale-dev.json")
    if a.one is not None:
        a.out.write_text(json.dumps(measure_one(a.one, a.seed, a.split)))
        return
    t = time.perf_counter()
    seeds = a.seeds or [a.seed]
    doc = run(a.sizes, a.data_file, seeds, a.split)
    doc |= {"family": FAMILY, "split": a.split, "targets": N_TARGETS, "reference": REFERENCE, "seed": seeds[0]}
    if len(seeds) > 1:
        doc["seeds"] = seeds
    write_result(a.out, "scale.py", argv, t, doc)


if __name__ == "__main__":
    main()
