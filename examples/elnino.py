"""A worked example on real data: sea-surface temperature curves (El Niño 1+2 region, NOAA ERSST
v3b, public domain), one curve of 12 monthly values per year 1950-2010, shipped inside statsmodels
(``statsmodels.datasets.elnino``; nothing is downloaded).

The library is the years 1950-1994; the targets are the years 1995-2010, later than every library
task (a held-out target outside the library's range of years). Two questions, each with the
protocol that matches it:

- ``interpolate``: 8 random months of a target year known, the other 4 predicted (protocol
  ``paper``: library contexts of 8 points anywhere in the year);
- ``forecast``: the first 6 months known, the last 6 predicted (protocol ``strict``: library
  contexts in the first half of the year, queries in the second).

For each, RTE is fitted with ``workflow.fit_observed`` (its interval scale chosen on the dev
split: the library's last 9 years held out, ordered by the known parameter ``year``, observed as
the targets are), for seeds
0, 1 and 2, and evaluated with ``evaluate_observed`` against every row of the method table for a
user's library (the sanity baselines, the classics, the library-shape peers at their dev-chosen
settings, and fit's context posterior ``rte-gp``) on the same targets and contexts; the paired
differences are over targets of the seed-averaged errors, and a claim is clear only when every
seed agrees. ``--skip cnp`` leaves out the neural process, trained for 32 times RTE's steps: the
dearest row by far (about 12 minutes a fit on 2 cores; the real-data suite,
``benchmarks/realdata.py``, scores it on the same split).

    python examples/elnino.py                      # writes benchmarks/results/elnino.json
    python examples/elnino.py --csv examples/elnino  # also the library and targets as CSV files
    python examples/elnino.py --skip cnp           # minutes: every row but the neural process
    python examples/elnino.py --tiny --out /tmp/elnino.json   # seconds: a plumbing check
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LAST_LIBRARY_YEAR = 1994
QUESTIONS = {
    # name: (protocol, context size, which points are the context)
    "interpolate": ("paper", 8, "random"),
    "forecast": ("strict", 6, "first"),
}
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


def write_csv(folder: Path) -> tuple[Path, Path]:
    """The data set as two long tables (year, month, sst, split): the library and the targets."""
    from statsmodels.datasets import elnino

    frame = elnino.load_pandas().data
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "library.csv", folder / "targets.csv")
    with open(paths[0], "w", newline="") as lib, open(paths[1], "w", newline="") as tgt:
        writers = [csv.writer(lib), csv.writer(tgt)]
        for w in writers:
            w.writerow(["year", "month", "sst"])
        for _, row in frame.iterrows():
            w = writers[0] if row["YEAR"] <= LAST_LIBRARY_YEAR else writers[1]
            for m, name in enumerate(MONTHS, start=1):
                w.writerow([int(row["YEAR"]), m, row[name]])
    return paths


def run(folder: Path, seeds=(0, 1, 2), tiny: bool = False, skip: tuple[str, ...] = ()) -> dict:
    from taskextrap.operators.train import TrainConfig
    from taskextrap.report.compare import paired_difference
    from taskextrap.baselines.table import method_rows
    from taskextrap.evaluation import evaluate_observed
    from taskextrap.workflow import Columns, Contexts, DevCalibration, Reading, fit_observed

    library, targets = write_csv(folder)
    # the year names each task and is its known parameter, which orders the dev split (its last years)
    columns = Columns(task="year", x="month", y="sst", params=("year",))
    out: dict = {"data": "statsmodels.datasets.elnino (NOAA ERSST v3b, Nino 1+2; public domain)", "questions": {}}
    for question, (protocol, size, how) in QUESTIONS.items():
        errors: dict[str, list] = {}
        runs = []
        for seed in seeds:
            settings: dict = {"protocol": protocol, "seed": seed}
            if tiny:
                settings |= {"train": TrainConfig(steps=5, batch=256, eval_every=5), "n_pairs": 200}
            model = folder / f"model-{question}-{seed}"
            t0 = time.perf_counter()
            _, record = fit_observed(
                [library],
                columns,
                model,
                settings,
                DevCalibration(order="year", context_size=size, context=how),
                Reading(name="elnino"),
                verbose=False,
            )
            result = evaluate_observed(model, targets, Contexts(size, how), columns, skip=skip)
            runs.append(
                {"seed": seed, "fit": record, "evaluation": result, "wall_s": round(time.perf_counter() - t0, 1)}
            )
            for k, v in result["per_target_mse"].items():
                errors.setdefault(k, []).append(v)
        err = {k: np.array(v).T for k, v in errors.items()}  # (targets, seeds)
        comparisons = []
        for b in (m for m in method_rows("observed") if m not in skip):  # evaluate's rows for a user's library
            p = paired_difference(err["rte"], err[b], "mse")
            winner = None if not p["clear"] else ("rte" if p["diff"] < 0 else b)
            comparisons.append({"a": "rte", "b": b, **{k: p[k] for k in ("diff", "lo", "hi", "clear", "seed_diffs")},
                                "winner": winner})  # fmt: skip
        out["questions"][question] = {
            "protocol": protocol,
            "context_size": size,
            "context": how,
            "targets": int(err["rte"].shape[0]),
            "seeds": list(seeds),
            "skipped": list(skip),
            "mse": {k: float(v.mean()) for k, v in err.items()},
            "mse_seed_sd": {k: float(v.mean(axis=0).std(ddof=1)) if v.shape[1] > 1 else None for k, v in err.items()},
            "coverage": [r["evaluation"]["coverage"] for r in runs],
            "dev_coverage": [r["fit"]["dev"]["coverage"] for r in runs],
            "interval_scale": [r["fit"]["dev"]["interval_scale"] for r in runs],
            "comparisons": comparisons,
            "wall_s": [r["wall_s"] for r in runs],
        }
    return out


def main(argv=None) -> None:
    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "elnino.json"))
    ap.add_argument("--csv", default=None, help="a folder for the CSV files and models (default: a temporary one)")
    ap.add_argument("--tiny", action="store_true", help="seconds, one seed: a plumbing check (not results)")
    ap.add_argument("--skip", default="", help="rows to leave out, comma-separated (e.g. cnp: the dearest)")
    a = ap.parse_args(argv)
    skip = tuple(s.strip() for s in a.skip.split(",") if s.strip())
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        doc = run(Path(a.csv or tmp), seeds=(0,) if a.tiny else (0, 1, 2), tiny=a.tiny, skip=skip)
    doc |= {
        "command": "python examples/elnino.py"
        + (" --tiny" if a.tiny else "")
        + (f" --skip {','.join(skip)}" if skip else ""),
        "source_hash": source_hash(),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    write_json_atomic(a.out, doc)
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
