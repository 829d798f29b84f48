"""Where a unit's time goes: one ``paper`` unit of an experiment (the unit benchmarks/speed.py
times) run under the sampling profiler py-spy, summarised as the functions with the largest
inclusive and own (self) share of the samples. Writes benchmarks/results/profiles/<experiment>.json;
docs/performance.md reads these.

    python benchmarks/profile_unit.py parameter                 # one paper unit, 1 thread (minutes)
    python benchmarks/profile_unit.py composition --profile quick
    python benchmarks/profile_unit.py parameter --label before --checkout /path/to/old/worktree
    python benchmarks/profile_unit.py parameter --device cuda --label gpu   # the lent GPU machine

Needs py-spy (``pip install py-spy``, in the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "profiles"
ROOT = Path(__file__).resolve().parents[1]
_FRAME = re.compile(r" \((?:.*/)?([^/]+\.py):\d+\)$")


def summarise(raw_lines, top: int = 60) -> dict:
    """py-spy's raw (collapsed-stack) lines -> the ``top`` functions by inclusive and by own
    share of the samples, as ``"function (file.py)"`` -> percent."""
    inclusive, own, total = collections.Counter(), collections.Counter(), 0
    for line in raw_lines:
        line = line.rstrip()
        if not line:
            continue
        stack, count = line.rsplit(" ", 1)
        n = int(count)
        total += n
        frames = [_FRAME.sub(r" (\1)", f) for f in stack.split(";")]
        for f in set(frames):
            inclusive[f] += n
        own[frames[-1]] += n
    pct = lambda c: {f: round(100.0 * n / max(total, 1), 1) for f, n in c.most_common(top)}  # noqa: E731
    return {"samples": total, "inclusive_pct": pct(inclusive), "self_pct": pct(own)}


def profile_unit(
    experiment: str, profile: str = "paper", rate: int = 50, checkout: Path = ROOT, device: str = "cpu"
) -> dict:
    """Record one unit of ``experiment`` on ``device`` with py-spy (one torch thread) and
    summarise it. On a GPU the samples show the host's share: a kernel's time appears only where
    the host waits for it."""
    speed = _speed()
    extra, unit = speed.UNITS[experiment]
    beside = Path(sys.executable).with_name("py-spy")  # the venv's, when it is not on PATH
    spy = shutil.which("py-spy") or (str(beside) if beside.exists() else None)
    if spy is None:
        raise SystemExit("error: py-spy is not installed (pip install py-spy)")
    with tempfile.TemporaryDirectory(prefix="profile-") as tmp:
        raw = Path(tmp) / "raw.txt"
        cmd = [
            spy,
            "record",
            "-r",
            str(rate),
            "-f",
            "raw",
            "-o",
            str(raw),
            "--",
            sys.executable,
            "-m",
            "taskextrap.cli",
            "reproduce",
            experiment,
            "--profile",
            profile,
            *([] if experiment in speed.SEEDLESS else ["--seed", "0"]),
            *extra,
            "--unit-cpus",
            "1",
            "--device",
            device,
            "--out",
            str(Path(tmp) / "out"),
            "--no-plots",
            "--quiet",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(checkout) / "src")}
        t = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        summary = summarise(raw.read_text().splitlines())
        timing = json.loads(next((Path(tmp) / "out").glob("*/results.json")).read_text())["timing"]
    return {
        "experiment": experiment,
        "unit": unit,
        "profile": profile,
        "wall_s": round(wall, 1),
        "timing": {k: round(float(v), 2) for k, v in timing.items()},
        "rate_hz": rate,
        "device": device,
        "commit": speed.commit(Path(checkout)),
        **summary,
    }


def _speed():
    from taskextrap.scripts import sibling

    return sibling(__file__, "speed")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", choices=list(_speed().UNITS))
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--label", default="after", help="the key the summary is kept under (before, after)")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the worktree whose package runs")
    ap.add_argument("--device", default="cpu", help="where the unit runs (cpu, cuda)")
    ap.add_argument(
        "--out", type=Path, default=None, help="the JSON to update [default: results/profiles/<exp>-<profile>.json]"
    )
    args = ap.parse_args(argv)
    from taskextrap.files import write_json_atomic

    path = args.out or OUT / f"{args.experiment}-{args.profile}.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc[args.label] = profile_unit(args.experiment, args.profile, checkout=args.checkout, device=args.device)
    write_json_atomic(path, doc)
    s = doc[args.label]
    print(f"{args.experiment} ({args.label}): {s['wall_s']} s, {s['samples']} samples")
    for f, p in list(s["inclusive_pct"].items())[:15]:
        print(f"  {p:5.1f}%  {f}")


if __name__ == "__main__":
    main()
