"""Speed of every experiment: one unit (one family or ladder, training seed 0, the paper protocol)
of its ``paper`` profile, timed as a whole process, with the unit's per-phase timing, peak
memory, threads, device and commit. Writes benchmarks/results/speed.json; docs/results.md shows
its table (``python benchmarks/speed.py --table``).

    python benchmarks/run.py --only speed                       # every CPU-sized unit, 1 thread
    python benchmarks/speed.py --label before --only parameter  # one experiment, under a label
    python benchmarks/speed.py --device cuda --label gpu        # the GPU column
    python benchmarks/speed.py --table                          # print the markdown table
    python benchmarks/speed.py --count parameter                # operators per training step (JSON)

A label (``before``, ``after``, ``gpu``) keeps one record per experiment; a rerun under the same
label replaces that experiment's record only, so the before and after columns are measured
separately, each at its own commit (recorded). Units run in a fresh process each, one after
another: nothing is cached between them (their ``--out`` is a new temporary folder), so a unit's
wall time includes its imports and every fit it needs.

Each record also carries the unit's step counters (``counters``, issue 44): aten operators and
host reads per training step of all its networks together on the stacked (GPU) path, counted on
the CPU on the unit's networks at the ``tiny`` profile (the same networks; batch sizes do not
change the count) with the paper profiles' validation interval (:data:`COUNT_INTERVAL`); and on
a GPU the mean SM utilisation ``nvidia-smi dmon`` read during the unit (``gpu_util``).

The anchor is the authors' Table 1 script measured on this machine class (issue 35: 1,114 s for
one training seed of the five families with 2 threads, 223 s per family-seed): the one number in
this file that a person typed in, with that source.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "speed.json"
ANCHOR = {
    "what": "the authors' FuncExtrap_no_label.py (Table 1), one training seed of the five families",
    "wall_s": 1114.0,
    "per_family_seed_s": 1114.0 / 5,
    "threads": 2,
    "source": "issue 35: the authors' script timed on this machine class",
}

# One unit per experiment: name -> (extra CLI arguments, what the unit is). The language-model
# units are hours on a CPU: they run when named (or on --device cuda).
UNITS = {
    "parameter": (["--family", "cubic"], "cubic, seed 0"),
    "parameter-ablations": (["--family", "quadratic"], "quadratic, seed 0"),
    "parameter-multistep": (["--family", "cubic"], "cubic, seed 0"),
    # the same unit where `parameter` ran first into the same --out (as in `reproduce all`): the
    # fits the two share are loaded from its artifacts (experiments/artifacts.py)
    "parameter-multistep:after-parameter": (["--family", "cubic"], "cubic, seed 0, fits from parameter"),
    "length": ([], "polynomial ladder, seed 0"),
    "length-ablations": ([], "polynomial ladder, seed 0"),
    "composition": ([], "seed 0"),
    "composition-ablations": ([], "seed 0"),
    "composition-depth3": ([], "seed 0"),
    "composition-em": ([], "seed 0"),
    "projectile": ([], "seed 0"),
    "manifolds": ([], "seed 0"),
    "parity": ([], "seed 0"),
    "codeio": ([], "seed 0"),
    "codeio-em": ([], "seed 0"),
    "llm-geometry": ([], "seed 0"),
}
CPU_DEFAULT = (
    "parameter",
    "parameter-multistep",
    "parameter-multistep:after-parameter",
    "length",
    "composition",
    "composition-depth3",
    "projectile",
    "manifolds",
)  # the ablations share their main experiment's
# units; the rest (composition-em, the language models: hours on a CPU) run when named
SEEDLESS = ("projectile",)  # experiments whose profile has no --seed
COUNT_INTERVAL = 100  # steps between validations in the paper profiles (the depth-3 Psi: 200)


ROOT = Path(__file__).resolve().parents[1]


def commit(root: Path = ROOT) -> str:
    """The short commit of the checkout ``root``, with ``+dirty`` when files differ from it;
    ``$TASKEXTRAP_COMMIT`` when set and ``root`` is this checkout (the lent GPU machine's copy,
    scripts/gpu_device.sh: its git metadata need not be the checkout's; each record also keeps
    the source hash of the package that ran)."""
    named = os.environ.get("TASKEXTRAP_COMMIT", "")
    if named and Path(root).resolve() == ROOT:  # a full hash is shortened as git's --short would
        return named[:7] if re.fullmatch(r"[0-9a-f]{40}", named) else named
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def time_unit(
    experiment: str,
    threads: int = 1,
    device: str = "cpu",
    checkout: Path = ROOT,
    profile: str = "paper",
    keep: Path | None = None,
) -> dict:
    """Run one ``paper`` unit of ``experiment`` in a fresh process with the package of
    ``checkout`` (another worktree gives the before column); its record: wall time of the
    process, the unit's per-phase timing (from its results.json), peak resident memory, threads,
    device, the checkout's commit and the command. (``profile``: ``tiny`` for the tests.)
    ``keep``: a folder the unit's results.json is copied to (as ``<experiment>.json``), for
    ``scripts/same_results.py`` between two columns."""
    extra, unit = UNITS[experiment]
    experiment, _, after = experiment.partition(":after-")
    with tempfile.TemporaryDirectory(prefix="speed-") as out:

        def command(name):
            return [
                sys.executable,
                "-m",
                "taskextrap.cli",
                "reproduce",
                name,
                "--profile",
                profile,
                *([] if name in SEEDLESS else ["--seed", "0"]),
                *extra,
                "--unit-cpus",
                str(threads),
                "--device",
                device,
                "--out",
                out,
                "--no-plots",
                "--quiet",
            ]

        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": str(threads),
            "PYTHONPATH": str(Path(checkout) / "src"),
        }
        if after:  # the experiment it shares fits with runs first, untimed
            subprocess.run(command(after), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cmd = command(experiment)
        t = time.perf_counter()
        with gpu_utilisation(device) as util:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        err = proc.stderr.read()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"error: {experiment} failed:\n{err[-2000:]}")
        results_file = next(Path(out).glob(f"{experiment}-*/results.json"))
        results = json.loads(results_file.read_text())
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(results_file, keep / f"{experiment}.json")
    timing = {k: round(float(v), 2) for k, v in results["timing"].items()}
    return {
        "unit": unit,
        "wall_s": round(wall, 2),
        "counters": step_counters(experiment, extra, checkout),
        **({"gpu_util": util} if util else {}),
        "timing": timing,
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "threads": threads,
        "device": device,
        "commit": commit(Path(checkout)),
        "source_hash": _source_hash(Path(checkout)),
        "command": " ".join(["taskextrap", *cmd[3:]]).replace(out, "TMP"),
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _source_hash(checkout: Path) -> str | None:
    """``taskextrap.provenance.source_hash`` of ``checkout``'s package (None before it existed)."""
    proc = subprocess.run(
        [sys.executable, "-c", "from taskextrap.provenance import source_hash; print(source_hash())"],
        env={**os.environ, "PYTHONPATH": str(Path(checkout) / "src")},
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or None


def step_counters(experiment: str, extra: list[str], checkout: Path = ROOT) -> dict | None:
    """Operators and host reads per training step of the unit's networks together on the stacked
    path (``operators.counting``), counted in a fresh process with ``checkout``'s package on its
    ``tiny`` unit; None when that package has no counters (a commit before issue 44)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(checkout) / "src")}
    proc = subprocess.run(
        [sys.executable, __file__, "--count", experiment, *extra], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"error: counting {experiment} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def count_unit(experiment: str, extra: list[str]) -> dict | None:
    """:func:`step_counters` in this process: the ``tiny`` unit of ``experiment`` runs, and every
    group of networks it trains is counted (the largest, all of a unit's networks, first)."""
    try:
        from taskextrap.operators import train
        from taskextrap.operators.counting import count_training_steps
    except ImportError:
        return None
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import run_experiment

    family = extra[extra.index("--family") + 1] if "--family" in extra else None
    counts: list[dict] = []
    train.OBSERVERS.append(lambda jobs: counts.append(count_training_steps(jobs, COUNT_INTERVAL)))
    with tempfile.TemporaryDirectory(prefix="count-") as out:
        options = RunOptions(profile="tiny", out=Path(out), family=family, plots=False, progress=False)
        run_experiment(experiment, options)
    counts.sort(key=lambda c: -c["networks"])
    return {**counts[0], "other_trainings": counts[1:]} if counts else None


@contextlib.contextmanager
def gpu_utilisation(device: str):
    """While the block runs on a CUDA ``device``, ``nvidia-smi dmon`` samples the GPU's SM
    utilisation every second; the dict yielded is filled at the end with the mean over the
    samples (``sm_mean_pct``) and their count (empty on a CPU or without nvidia-smi)."""
    util: dict = {}
    if not device.startswith("cuda") or shutil.which("nvidia-smi") is None:
        yield util
        return
    index = device.partition(":")[2] or "0"
    proc = subprocess.Popen(
        ["nvidia-smi", "dmon", "-s", "u", "-d", "1", "-i", index], stdout=subprocess.PIPE, text=True
    )
    try:
        yield util
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        util.update(parse_dmon(out))


def parse_dmon(text: str) -> dict:
    """The mean SM utilisation of ``nvidia-smi dmon -s u`` output (its ``sm`` column, in %)."""
    header = next((line.lstrip("# ").split() for line in text.splitlines() if line.startswith("# gpu")), None)
    if header is None or "sm" not in header:
        return {}
    col = header.index("sm")
    samples = [
        float(parts[col])
        for parts in (line.split() for line in text.splitlines() if line.strip() and not line.startswith("#"))
        if len(parts) > col and parts[col].replace(".", "", 1).isdigit()
    ]
    return {"sm_mean_pct": round(sum(samples) / len(samples), 1), "samples": len(samples)} if samples else {}


def load(path: Path = OUT) -> dict:
    """speed.json as it stands (an empty document when there is none)."""
    return json.loads(path.read_text()) if path.exists() else {"anchor": ANCHOR, "labels": {}}


def run(
    experiments,
    label: str,
    threads: int,
    device: str,
    checkout: Path = ROOT,
    path: Path = OUT,
    keep: Path | None = None,
) -> dict:
    """Time each experiment's unit and write it under ``label`` in ``path`` after each one (an
    interrupted benchmark keeps what it measured); ``keep``: see :func:`time_unit`."""
    from taskextrap.files import write_json_atomic

    doc = load(path)
    doc["anchor"] = ANCHOR
    for name in experiments:
        print(f"speed: {name} ({UNITS[name][1]}, {threads} thread(s), {device}) ...", flush=True)
        record = time_unit(name, threads, device, checkout, keep=keep)
        doc.setdefault("labels", {}).setdefault(label, {})[name] = record
        write_json_atomic(path, doc)
        print(f"speed: {name}: {record['wall_s']:.1f} s, peak {record['peak_rss_mb']:.0f} MB", flush=True)
    return doc


PHASES = (  # the keys of units' timing, old and new (a before column keeps the keys of its commit)
    "embedding_s",
    "setup_s",
    "training_s",
    "rte_fit_s",
    "fits_loaded_s",
    "objective_fit_s",
    "psi_training_s",
    "decomposer_training_s",
    "baselines_fit_s",
    "evaluation_s",
)


def table(doc: dict, before: str = "before", after: str = "after") -> str:
    """The markdown speed table: each experiment's unit before and after, the speed-up, the
    further columns that time several experiments (a label of one experiment is a row of its
    :func:`unit_table`), and the after run's phases; the authors' anchor beneath."""
    labels = doc.get("labels", {})
    b, a = labels.get(before, {}), labels.get(after, {})
    others = [lab for lab in labels if lab not in (before, after) and len(labels[lab]) > 1]
    head = [
        "experiment",
        "unit",
        f"{before} (s)",
        f"{after} (s)",
        "speed-up",
        *[f"{o} (s)" for o in others],
        f"{after}: phases (s)",
        "ops / step (networks)",
        "host reads / step",
        "peak MB",
        "threads",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in [n for n in UNITS if n in b or n in a or any(n in labels[o] for o in others)]:
        rb, ra = b.get(name), a.get(name)
        ref = ra or rb or next(labels[o][name] for o in others if name in labels[o])
        phases = ", ".join(f"{k.removesuffix('_s')} {ref['timing'][k]:.0f}" for k in PHASES if k in ref["timing"])
        speedup = f"{rb['wall_s'] / ra['wall_s']:.1f}x" if rb and ra else ""
        cells = [
            f"`{name}`",
            ref["unit"],
            f"{rb['wall_s']:.0f}" if rb else "",
            f"{ra['wall_s']:.0f}" if ra else "",
            speedup,
            *[_other(labels[o].get(name)) for o in others],
            phases,
            *_counter_cells(ref.get("counters")),
            f"{ref['peak_rss_mb']:.0f}",
            str(ref["threads"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    anchor = doc.get("anchor", ANCHOR)
    commits = {lab: sorted({r["commit"] for r in labels[lab].values()}) for lab in (before, after, *others)}
    lines += [
        "",
        f"_one `paper` unit per experiment, each a fresh process (imports and every fit included); "
        f"commits: {'; '.join(f'{lab} ' + ', '.join(c) for lab, c in commits.items())}. Anchor: "
        f"{anchor['what']}, {anchor['wall_s']:.0f} s with {anchor['threads']} threads = "
        f"{anchor['per_family_seed_s']:.0f} s per family-seed ({anchor['source']})._",
    ]
    return "\n".join(lines)


# the phases of a unit_table, as the parameter unit's timing names them (blank where a commit had none)
UNIT_PHASES = ("embedding_s", "setup_s", "training_s", "cnp_training_s", "meta-gp_fit_s", "rte-gp_choice_s",
               "search_s", "ctx-gp_predict_s", "evaluation_s")  # fmt: skip


def unit_table(doc: dict, name: str) -> str:
    """One experiment's unit under every label that timed it, a row each in the labels' order:
    its device, commit (and the package's source hash), wall and CPU seconds, peak memory and
    phases."""
    rows = [(lab, recs[name]) for lab, recs in doc.get("labels", {}).items() if name in recs]
    phases = [k.removesuffix("_s") + " s" for k in UNIT_PHASES]
    head = ["label", "device", "commit (package)", "wall s", "cpu s", "peak MB", *phases]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * (len(head) - 3)]
    for lab, r in rows:
        t = r["timing"]
        package = f" ({r['source_hash'][:8]})" if r.get("source_hash") else ""
        cells = [lab, r["device"], r["commit"] + package, f"{r['wall_s']:.0f}", f"{r.get('cpu_s', 0):.0f}"]
        cells += [f"{r['peak_rss_mb']:.0f}", *(f"{t[k]:.0f}" if k in t else "" for k in UNIT_PHASES)]
        lines.append("| " + " | ".join(cells) + " |")
    first = rows[0][1] if rows else {"unit": "", "threads": 1}
    lines += [
        "",
        f"_`{name}` ({first['unit']}, `paper` profile, {first['threads']} torch thread), each label a fresh "
        "process (cpu: this 2-core machine; cuda: the lent H200): `benchmarks/speed.py --only "
        f"{name} --label LABEL`._",
    ]
    return "\n".join(lines)


def _other(record: dict | None) -> str:
    """A further column's cell: wall time, device and (on a GPU) the mean SM utilisation."""
    if record is None:
        return ""
    util = record.get("gpu_util", {}).get("sm_mean_pct")
    return f"{record['wall_s']:.0f} ({record['device']}" + (f", SM {util:.0f}%)" if util is not None else ")")


def _counter_cells(counters: dict | None) -> list[str]:
    """Operators per step (networks stacked) and host reads per step, or blanks (no counters)."""
    if not counters:
        return ["", ""]
    alone = f", {counters['trained_alone']} alone" if counters["trained_alone"] else ""
    return [f"{counters['ops_per_step']:.0f} ({counters['networks']}{alone})", f"{counters['host_reads_per_step']:.0f}"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--only",
        nargs="+",
        choices=list(UNITS),
        default=None,
        help=f"experiments to time (default: {', '.join(CPU_DEFAULT)})",
    )
    ap.add_argument("--label", default="after", help="the column these runs fill (before, after, gpu, ...)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the unit")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument(
        "--checkout",
        type=Path,
        default=ROOT,
        help="the git worktree whose package runs (a worktree of the old commit: the before column)",
    )
    ap.add_argument("--out", type=Path, default=OUT, help="the speed.json to update")
    ap.add_argument("--table", action="store_true", help="print the markdown table of speed.json and exit")
    ap.add_argument("--keep", type=Path, default=None, help="copy each unit's results.json into this folder")
    ap.add_argument(
        "--count",
        nargs="+",
        metavar=("EXPERIMENT", "ARGS"),
        help="print the step counters of EXPERIMENT's tiny unit as JSON (ARGS: e.g. --family cubic) and exit",
    )
    args, rest = ap.parse_known_args(argv)
    if args.count:
        print(json.dumps(count_unit(args.count[0], args.count[1:] + rest)))
        return
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.table:
        print(table(load(args.out)))
        return
    run(args.only or CPU_DEFAULT, args.label, args.threads, args.device, args.checkout, args.out, args.keep)
    print(table(load(args.out)))


if __name__ == "__main__":
    main()
