"""Serial against Ray on one sweep: the ``quick`` parameter experiment, five families x 3 seeds x
both protocols (30 units), each executor in a fresh process into its own empty ``--out``.

    python benchmarks/executors.py [--profile quick] [--seeds 3] [--out benchmarks/results/executors.json]

Three sweeps: ``serial`` with one torch thread per unit (the default, ``--unit-cpus 1``),
``serial`` with as many threads as cores (``--unit-cpus <cores>``), and ``ray``: a local Ray
instance (no RAY_ADDRESS) on the same cores, each unit a task with one CPU and one torch thread.
The two one-thread sweeps must give the same rows (checked here; the thread count moves the last
digits, so the all-cores sweep's rows differ there). Writes the wall times, their ratios, and the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "executors.json"


def sweep(executor: str, out: Path, profile: str, seeds: int, threads: int = 1) -> float:
    """Wall seconds of one ``taskextrap sweep`` of the parameter experiment (both protocols)."""
    cmd = [
        sys.executable,
        "-m",
        "taskextrap.cli",
        "sweep",
        "parameter",
        "--protocols",
        "paper,strict",
        "--profile",
        profile,
        "--seeds",
        str(seeds),
        "--no-plots",
        "--quiet",
        "--out",
        str(out),
        "--executor",
        executor,
        "--unit-cpus",
        str(threads),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)  # a local instance on this machine's cores
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    return time.perf_counter() - t


def same_rows(a: Path, b: Path) -> bool:
    """Whether every run folder under ``a`` has the same rows and comparisons as under ``b``."""
    runs = sorted(p.name for p in a.iterdir() if (p / "results.json").exists())
    for name in runs:
        ra, rb = (json.loads((d / name / "results.json").read_text()) for d in (a, b))
        if ra["rows"] != rb["rows"] or ra["comparisons"] != rb["comparisons"]:
            return False
    return bool(runs)


def unit_seconds(out: Path) -> list[float]:
    """Each computed unit's own total_s (from the unit files)."""
    return [json.loads(p.read_text())["timing"]["total_s"] for p in sorted((out / "units").glob("*.json"))]


def bench(profile: str = "quick", seeds: int = 3, out: Path = OUT) -> dict:
    """Run both sweeps, check their rows agree and write the timings to ``out``."""
    import ray

    from taskextrap.files import write_json_atomic
    from taskextrap.report.schema import environment_info

    with tempfile.TemporaryDirectory(prefix="bench-executors-") as tmp:
        tmp = Path(tmp)
        cores = os.cpu_count()
        runs = {"serial": ("serial", 1), "serial-all-cores": ("serial", cores), "ray": ("ray", 1)}
        walls = {k: sweep(e, tmp / k, profile, seeds, n) for k, (e, n) in runs.items()}
        units = {k: unit_seconds(tmp / k) for k in walls}
        identical = same_rows(tmp / "serial", tmp / "ray")
    result = {
        "what": f"taskextrap sweep parameter --protocols paper,strict --profile {profile} --seeds {seeds} "
        "--no-plots, each executor from an empty --out",
        "n_units": len(units["serial"]),
        "cores": cores,
        "threads": {k: n for k, (_, n) in runs.items()},
        "ray_version": ray.__version__,
        "wall_s": walls,
        "serial_over_ray": walls["serial"] / walls["ray"],
        "serial_all_cores_over_ray": walls["serial-all-cores"] / walls["ray"],
        "unit_total_s": {e: {"sum": sum(v), "mean": sum(v) / len(v)} for e, v in units.items()},
        "identical_rows": identical,
        "environment": environment_info("cpu"),
        "command": "python benchmarks/executors.py",
    }
    write_json_atomic(out, result)
    print(
        f"serial {walls['serial']:.1f} s, serial on all cores {walls['serial-all-cores']:.1f} s, ray "
        f"{walls['ray']:.1f} s: serial/ray = {result['serial_over_ray']:.2f}, all cores/ray = "
        f"{result['serial_all_cores_over_ray']:.2f} ({result['n_units']} units, identical rows: {identical}) -> {out}"
    )
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    bench(args.profile, args.seeds, args.out)


if __name__ == "__main__":
    main()
