"""Intervals of a user's own family: the scale borrowed from the built-in tasks' dev splits against
the one chosen on the family's own dev split (``reproduce --calibrate``).

    python benchmarks/own_dev.py      # writes benchmarks/results/own-dev-calibration.json

For each case (a ladder and a family the project never designed for, ``benchmarks/unseen.py``; the
Chebyshev ladder is the issue-45 finding: levels 1-4 trained, 5 held out), quick profile, paper
protocol, seed 0: the test run with the borrowed scale, the dev run, and the test run with the
dev-chosen scale (its units are the first test run's: only the reading of the intervals changes).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = (("length", "unseen:chebyshev"), ("parameter", "unseen:logistic"))


def _coverage(results: dict, method: str = "rte") -> dict:
    return {r["group"]: r["value"] for r in results["rows"] if r["method"] == method and r["metric"] == "coverage"}


def main() -> None:
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import calibrate_on_dev, run_experiment
    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash
    from taskextrap.search.calibration import SCALE_GRID

    out: dict = {"cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, family in CASES:
            t0 = time.perf_counter()
            options = RunOptions(profile="quick", family=family, out=Path(tmp), plots=False, progress=False)
            borrowed = run_experiment(name, options)
            calibrated_options, note = calibrate_on_dev(name, options)
            dev = run_experiment(name, dataclasses.replace(options, split="dev"))  # cached: the same run
            calibrated = run_experiment(name, calibrated_options)
            out["cases"][f"{name} {family}"] = {
                "borrowed": {"scale": borrowed["config"]["interval_scale"], "coverage": _coverage(borrowed)},
                "own_dev": {
                    "scale": calibrated["config"]["interval_scale"],
                    "coverage": _coverage(calibrated),
                    # the raw curve of the dev run at the chosen scale: what the choice reached on dev
                    "dev_coverage": {
                        g: c["rte"][SCALE_GRID.index(calibrated_options.interval_scales["rte"])]
                        for g, c in dev["config"]["coverage_by_scale"].items()
                    },
                    "note": note,
                },
                "raw_coverage": _coverage(borrowed, "rte-uncalibrated"),
                "wall_s": round(time.perf_counter() - t0, 1),
            }
            print(f"{name} {family}: {out['cases'][f'{name} {family}']}", file=sys.stderr)
    out |= {"command": "python benchmarks/own_dev.py", "seed": 0, "profile": "quick", "source_hash": source_hash()}
    write_json_atomic(ROOT / "benchmarks" / "results" / "own-dev-calibration.json", out)
    print("written: benchmarks/results/own-dev-calibration.json")


if __name__ == "__main__":
    main()
