"""The real-data suite: RTE beside every method a user's library gets, on three public data sets
of measured curves that install offline with statsmodels (the ``examples`` extra), each with a
shift split and two questions, three seeds.

Data sets (each task a curve; the targets lie beyond the library in the way named):

- ``elnino``: sea-surface temperature of the Nino 1+2 region (NOAA ERSST v3b), one curve of 12
  monthly values per year; library 1950-1994, targets 1995-2010 (later years). Known parameter:
  the year.
- ``sunspots``: yearly sunspot numbers 1700-2008 (SIDC), one curve per solar cycle (the years
  from one minimum of the 3-year running mean to the next, at least 8 years apart; x is the year
  within the cycle); library the cycles that start before 1900, targets the later ones (later
  cycles). Known parameter: the cycle's start year.
- ``fertility``: births per woman (World Bank), one curve of yearly values 1960-2011 per
  country observed every year; targets the fifth of countries with the highest mean rate in the
  1960s, library the others (another unit, of a higher level). Known parameter: that mean.

Questions (each with the observation protocol that matches it, as ``examples/elnino.py``):

- ``interpolate``: a few random points of a target known, the rest predicted (protocol ``paper``);
- ``forecast``: the first part of the curve known, the rest predicted (protocol ``strict``).

For each data set, question and seed (0, 1, 2) RTE is fitted with ``workflow.fit_observed``:
every interval scale (rte's and each classic's: ``ctx-gp``, ``meta-gp``, ``cnp``) chosen on the
library's own dev split (its tasks of the largest known parameter held out, observed as the
question observes targets), and
evaluated with ``evaluation.evaluate_observed`` beside every method of the method table's
``observed`` regime on the same targets and contexts (the context draw does not change with the
seed, so seeds share targets). Rows per (data set:question, method): ``mse`` (per target and
seed), ``coverage`` at the dev-chosen scale and raw (``METHOD-uncalibrated``); the paired
comparisons (rte against each, over targets, clear only when every seed agrees) are the
results schema's.

    python benchmarks/realdata.py                        # writes benchmarks/results/realdata.json
    python benchmarks/realdata.py --tiny --out /tmp/r.json  # a plumbing check (not results)

Each (data set, question, seed)'s fit and evaluation is kept under
``benchmarks/results/realdata-seeds`` (keyed by its settings, its tables, the torch threads and
the package source, with the tree its process began with: its ``dirty`` leaves out the kept
seeds themselves), so a suite stopped part-way resumes where it stopped, on this machine or, once the
kept seeds are committed, on a clean clone of the same source; two processes given different
``--data`` fill it side by side, and a last run over every data set reads them all. A damaged
kept file is a one-line error: remove it to recompute.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import csv
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (0, 1, 2)
CACHE = ROOT / "benchmarks" / "results" / "realdata-seeds"  # each seed's run (cached_run), committed as it lands
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


@dataclass(frozen=True)
class Question:
    """How a target is observed: ``size`` context points chosen as ``how``, read by ``protocol``."""

    protocol: str
    size: int
    how: str


@dataclass(frozen=True)
class DataSet:
    """A data set as two long tables (task, x, y, known parameter): its library and its targets."""

    name: str
    source: str
    shift: str
    library: list[tuple]
    targets: list[tuple]
    questions: dict[str, Question]


def elnino() -> DataSet:
    from statsmodels.datasets import elnino as data

    frame = data.load_pandas().data
    rows = [(int(r["YEAR"]), m, float(r[name]), int(r["YEAR"])) for _, r in frame.iterrows()
            for m, name in enumerate(MONTHS, start=1)]  # fmt: skip
    return DataSet(
        "elnino",
        "statsmodels.datasets.elnino (NOAA ERSST v3b, Nino 1+2; public domain)",
        "targets are the years 1995-2010, later than every library year",
        [r for r in rows if r[0] <= 1994],
        [r for r in rows if r[0] > 1994],
        {"interpolate": Question("paper", 8, "random"), "forecast": Question("strict", 6, "first")},
    )


def solar_cycles(years: np.ndarray, activity: np.ndarray, gap: int = 8) -> list[tuple[int, int]]:
    """(first, last) index of each solar cycle: from one minimum of the 3-year running mean to the
    year before the next, minima at least ``gap`` years apart (the first cycle starts at the
    first such minimum; the years after the last minimum are an unfinished cycle, left out)."""
    smooth = np.convolve(activity, np.ones(3) / 3, mode="same")
    minima: list[int] = []
    for i in range(1, len(smooth) - 1):
        if smooth[i] <= smooth[i - 1] and smooth[i] <= smooth[i + 1]:
            if minima and i - minima[-1] < gap:
                if smooth[i] < smooth[minima[-1]]:
                    minima[-1] = i
                continue
            minima.append(i)
    return [(a, b - 1) for a, b in itertools.pairwise(minima)]


def sunspots() -> DataSet:
    from statsmodels.datasets import sunspots as data

    frame = data.load_pandas().data
    years, activity = frame["YEAR"].to_numpy(int), frame["SUNACTIVITY"].to_numpy(float)
    rows = []
    for a, b in solar_cycles(years, activity):
        rows += [(int(years[a]), int(years[i] - years[a]), float(activity[i]), int(years[a])) for i in range(a, b + 1)]
    return DataSet(
        "sunspots",
        "statsmodels.datasets.sunspots (yearly sunspot numbers 1700-2008, SIDC)",
        "targets are the solar cycles that start in 1900 or later; the library the earlier ones",
        [r for r in rows if r[3] < 1900],
        [r for r in rows if r[3] >= 1900],
        {"interpolate": Question("paper", 6, "random"), "forecast": Question("strict", 5, "first")},
    )


def fertility() -> DataSet:
    from statsmodels.datasets import fertility as data

    frame = data.load_pandas().data
    years = [str(y) for y in range(1960, 2012)]
    complete = frame[frame[years].notna().all(axis=1)]
    level = complete[[str(y) for y in range(1960, 1970)]].mean(axis=1).to_numpy()
    cut = np.quantile(level, 0.8)
    rows = {True: [], False: []}
    for (_, r), lv in zip(complete.iterrows(), level, strict=True):
        rows[bool(lv > cut)] += [(r["Country Code"], int(y), float(r[y]), float(lv)) for y in years]
    return DataSet(
        "fertility",
        "statsmodels.datasets.fertility (births per woman 1960-2011, World Bank)",
        "targets are the fifth of countries with the highest mean rate in the 1960s",
        rows[False],
        rows[True],
        {"interpolate": Question("paper", 8, "random"), "forecast": Question("strict", 26, "first")},
    )


DATA_SETS = {"elnino": elnino, "sunspots": sunspots, "fertility": fertility}


def write_tables(data: DataSet, folder: Path) -> tuple[Path, Path]:
    """The library and the targets as CSV files (task, x, y, param)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / f"{data.name}-library.csv", folder / f"{data.name}-targets.csv")
    for path, rows in zip(paths, (data.library, data.targets), strict=True):
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["task", "x", "y", "param"])
            w.writerows(rows)
    return paths


def cached_run(cache: Path | None, data: DataSet, question: str, seed: int, tiny: bool, compute) -> dict:
    """One seed's fit and evaluation of a question (``compute()``: {"fit", "evaluation",
    "wall_s"}), read from ``cache`` when an earlier run of the same settings under the same
    package source and data tables saved it (``experiments.units.fingerprint``), else computed and saved there
    atomically: a suite stopped part-way resumes at the first seed it had not finished. No cache
    (``None``): always computed."""
    import torch

    from taskextrap.experiments.units import fingerprint
    from taskextrap.errors import TaskextrapError
    from taskextrap.files import read_json, write_json_atomic
    from taskextrap.report.schema import environment_info

    if cache is None:
        return compute()
    rows = hashlib.sha256(repr((data.library, data.targets)).encode()).hexdigest()  # the tables this file builds
    key = fingerprint(suite="realdata", data=data.name, rows=rows, question=vars(data.questions[question]),
                      seed=seed, tiny=tiny, threads=torch.get_num_threads())  # they move last digits  # fmt: skip
    path = Path(cache) / f"{data.name}-{question}-seed{seed}-{key}.json"
    if path.exists():
        print(f"{data.name}/{question} seed {seed}: read from {path}", file=sys.stderr)
        try:
            return read_json(path)
        except TaskextrapError as exc:
            raise SystemExit(f"error: {exc}; remove it to recompute that seed") from None
    if cache not in _TREE:  # the tree as this process's first seed starts: the code every seed of it runs
        _TREE[cache] = environment_info("cpu") | {"dirty": _dirty_besides(cache)}
    got = compute() | {"environment": _TREE[cache]}
    write_json_atomic(path, got)
    return got


_TREE: dict = {}  # cache folder -> the environment its kept seeds record (read once per process)


def _dirty_besides(cache: Path) -> bool | None:
    """Whether the repository had uncommitted changes other than kept seeds in ``cache`` (those
    land while a suite runs, before they are committed); None without git."""
    import subprocess

    folder = Path(cache).resolve()
    besides = [f":(exclude){folder}"] if folder.is_relative_to(ROOT.resolve()) else []  # git refuses outside paths
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", ".", *besides],
                             cwd=ROOT, capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.strip())


def run_question(
    data: DataSet, question: str, folder: Path, seeds, tiny: bool, cache: Path | None = None
) -> tuple[list, dict]:
    """Fit and evaluate one question of a data set for every seed (each seed's run kept in
    ``cache``, :func:`cached_run`): (rows, what the config keeps)."""
    from taskextrap.operators.train import TrainConfig
    from taskextrap.report.schema import make_row
    from taskextrap.tasks.observe import PROTOCOLS
    from taskextrap.evaluation import evaluate_observed
    from taskextrap.posterior.estimator import choice_summary
    from taskextrap.workflow import Columns, Contexts, DevCalibration, Reading, fit_observed

    q = data.questions[question]
    library, targets = write_tables(data, folder)
    columns = Columns(task="task", x="x", y="y", params=("param",))
    runs = []
    for seed in seeds:
        settings: dict = {"protocol": q.protocol, "seed": seed}
        if q.size < PROTOCOLS[q.protocol].n_context:  # a shorter context than the protocol's: RTE learns to read it
            settings["min_context"] = q.size
        if tiny:
            settings |= {"train": TrainConfig(steps=5, batch=256, eval_every=5), "n_pairs": 200}
        model = folder / f"model-{data.name}-{question}-{seed}"

        def compute(model=model, settings=settings) -> dict:
            t0 = time.perf_counter()
            _, record = fit_observed([library], columns, model, settings,
                                     DevCalibration(order="param", context_size=q.size, context=q.how),
                                     Reading(name=data.name), verbose=False)  # fmt: skip
            result = evaluate_observed(model, targets, Contexts(q.size, q.how), columns)
            return {"fit": record, "evaluation": result, "wall_s": round(time.perf_counter() - t0, 1)}

        runs.append(cached_run(cache, data, question, seed, tiny, compute))
        print(f"{data.name}/{question} seed {seed}: {runs[-1]['evaluation']['verdict']} ({runs[-1]['wall_s']} s)",
              file=sys.stderr)  # fmt: skip
    group = f"{data.name}:{question}"
    stack = lambda key, m: np.array([r["evaluation"][key][m] for r in runs]).T  # noqa: E731 - (targets, seeds)
    evaluations = [r["evaluation"] for r in runs]
    rows = [make_row("realdata", group, m, "mse", stack("per_target_mse", m)) for m in evaluations[0]["mse"]]
    for m in evaluations[0]["coverage_by_method"]:
        rows.append(make_row("realdata", group, m, "coverage", stack("per_target_coverage", m)))
        rows.append(make_row("realdata", group, f"{m}-uncalibrated", "coverage", stack("per_target_coverage_raw", m)))
    config = {
        "question": vars(q),
        "targets": evaluations[0]["targets"],
        "library_tasks": runs[0]["fit"]["tasks"]["library"],
        "interval_scales": [e["interval_scales"] for e in evaluations],
        "seconds_by_method": [e["seconds_by_method"] for e in evaluations],  # each method's price, per seed
        "dev": [{k: r["fit"]["dev"][k] for k in ("split", "targets", "coverage_raw", "coverage")} for r in runs],
        "rte-gp_choice": [choice_summary(r["fit"]["dev"]["rte-gp"]) for r in runs],  # per seed, on dev
        "wall_s": [r["wall_s"] for r in runs],
        "made_by": [_made_by(r) for r in runs],  # each seed's tree and CPU (a kept seed's own)
    }
    return rows, config


def _made_by(run: dict) -> dict:
    """What made a seed's run (its kept file's environment: commit, dirty, source hash, CPU);
    this process's when it computed the seed without a cache."""
    from taskextrap.report.schema import environment_info

    env = run.get("environment") or environment_info("cpu")
    return {k: env.get(k) for k in ("git", "dirty", "source_hash", "cpu")}


def dev_choices(folder: Path, names, seeds) -> dict:
    """``rte-gp``'s dev choice of every data set, question and seed, and nothing else: the dev step
    of ``taskextrap fit`` (``workflow._dev_scale``: the dev RTE and the posterior's choice on the
    library's own dev split, exactly as :func:`run_question` fits it), no final fit and no target.
    Whether each choice corrects RTE (``correct``) says whether a rule change that added RTE
    alone as a candidate moves the suite's ``rte-gp`` rows."""
    from taskextrap.posterior.estimator import choice_summary
    from taskextrap.tasks.observe import PROTOCOLS
    from taskextrap.workflow import Columns, DevCalibration, Reading, _dev_scale

    columns = Columns(task="task", x="x", y="y", params=("param",))
    out: dict = {}
    for name in names:
        data = DATA_SETS[name]()
        library = columns.read([write_tables(data, folder)[0]]).with_split("train")
        for question, q in data.questions.items():
            for seed in seeds:
                settings: dict = {"protocol": q.protocol, "seed": seed, "verbose": False}
                if q.size < PROTOCOLS[q.protocol].n_context:
                    settings["min_context"] = q.size
                dev = DevCalibration(order="param", context_size=q.size, context=q.how)
                record = _dev_scale(library, settings, dev, Reading(name=data.name), False)
                out.setdefault(f"{name}:{question}", []).append(choice_summary(record["rte-gp"]))
                print(f"{name}:{question} seed {seed}: {out[f'{name}:{question}'][-1]}", file=sys.stderr)
    return out


def run(folder: Path, names, seeds, tiny: bool, cache: Path | None = None) -> dict:
    """Every question of every data set of ``names``: a results document (the results schema);
    each seed's run kept in ``cache`` (:func:`cached_run`)."""
    from taskextrap.report.compare import compare_rows
    from taskextrap.report.schema import environment_info

    environment = environment_info("cpu")  # the tree as the run starts (a later commit does not make it)
    rows, config = [], {}
    for name in names:
        data = DATA_SETS[name]()
        config[name] = {"source": data.source, "shift": data.shift, "library": len({r[0] for r in data.library}),
                        "targets": len({r[0] for r in data.targets}), "questions": {}}  # fmt: skip
        for question in data.questions:
            got, config[name]["questions"][question] = run_question(data, question, folder, seeds, tiny, cache)
            rows += got
    return {
        "experiment": "realdata",
        "protocol": "per question",
        "profile": "tiny" if tiny else "paper",
        "seeds": list(seeds),
        "rows": rows,
        "comparisons": compare_rows(rows),
        "timing": {"wall_s": 0.0},
        "environment": environment,
        "config": config,
    }


def main(argv=None) -> None:
    from taskextrap.files import write_json_atomic
    from taskextrap.baselines.classics import classic_variants
    from taskextrap.provenance import source_hash
    from taskextrap.report.schema import validate_results

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "realdata.json"))
    ap.add_argument("--data", nargs="+", default=list(DATA_SETS), choices=list(DATA_SETS))
    ap.add_argument("--tiny", action="store_true", help="one seed, five training steps: a plumbing check")
    ap.add_argument("--cache", help=f"where each seed's run is kept, so a stopped suite resumes (default {CACHE}; "
                    "none under --tiny unless given; 'none': keep nothing)")  # fmt: skip
    ap.add_argument("--dev-choices", action="store_true", help="rte-gp's dev choices only (realdata-rte-gp-dev.json)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: the cnp's long training flushes subnormals only at one; "
                    "at several it ran many times slower)")  # fmt: skip
    a = ap.parse_args(argv)
    if a.threads < 1:
        raise SystemExit(f"error: --threads must be at least 1, got {a.threads}")
    import torch

    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    if a.dev_choices:
        from taskextrap.report.schema import environment_info

        with tempfile.TemporaryDirectory() as tmp:
            choices = dev_choices(Path(tmp), a.data, SEEDS)
        out = (
            a.out
            if a.out != ap.get_default("out")
            else str(ROOT / "benchmarks" / "results" / "realdata-rte-gp-dev.json")
        )
        doc = {"command": "python benchmarks/realdata.py --dev-choices", "seeds": list(SEEDS), "choices": choices}
        doc |= {"source_hash": source_hash(), "environment": environment_info("cpu")}
        write_json_atomic(out, doc | {"wall_s": round(time.perf_counter() - t0, 1)})
        print(f"written: {out}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        cache = None if a.cache == "none" else Path(a.cache) if a.cache else None if a.tiny else CACHE
        doc = run(Path(tmp), a.data, (0,) if a.tiny else SEEDS, a.tiny, cache)
    doc["timing"]["wall_s"] = round(time.perf_counter() - t0, 1)
    doc["config"] |= {"command": "python benchmarks/realdata.py" + (" --tiny" if a.tiny else ""),
                      "source_hash": source_hash(),
                      "classic_variants": classic_variants("observed"),  # a user's library keeps CHOSEN
                      "threads": a.threads}  # fmt: skip
    validate_results(doc)
    write_json_atomic(a.out, doc)
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
