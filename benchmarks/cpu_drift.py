"""Same code, same seeds, another machine: how far do the numbers move?

``python benchmarks/cpu_drift.py`` runs the README's demo (``taskextrap reproduce parameter
--profile quick``: Table 1 under the paper protocol, training seed 0, one torch thread per unit)
on this machine into a temporary folder and compares it with the committed file the README's
table renders (``benchmarks/results/parameter-paper-quick.json``), row by row and claim by claim.
Writes ``benchmarks/results/cpu-drift.json``: both files' provenance (commit, source hash and,
where recorded, CPU and library versions), how many rows moved and by how much, and which clear
paired claims (``rte`` against each method, clear in every seed) hold in both, appear or vanish.

The point is what a reader can expect: a result is reproduced to the bit on the machine that
made it (same code, seeds, threads, CPU and libraries: every re-run in this project has checked
that); on another CPU the kernels round differently and training amplifies that, so the numbers
move within their training noise and a claim near its threshold can flip.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from taskextrap.report.compare import claim_changes, keyed

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
REFERENCE = "parameter-paper-quick"
COMMAND = "taskextrap reproduce parameter --profile quick"


def _claim_name(key: tuple) -> str:
    """(group, metric, a, b) as ``"group metric: a vs b"``."""
    return f"{key[0]} {key[1]}: {key[2]} vs {key[3]}"


def drift(reference: dict, here: dict) -> dict:
    """How ``here`` differs from ``reference`` (two results of the same experiment and settings)."""
    ref, new = keyed(reference), keyed(here)
    shared = [k for k in ref if k in new and ref[k]["value"] is not None and new[k]["value"] is not None]
    rel = {
        k: abs(new[k]["value"] / ref[k]["value"] - 1)
        for k in shared
        if k[2] == "mse" and ref[k]["value"] != 0 and k[1] not in ("ctx-polyfit", "ctx-interp")
    }
    rte = {k[0]: {"reference": ref[k]["value"], "here": new[k]["value"]} for k in shared if k[1:] == ("rte", "mse")}
    claims = claim_changes(reference, here)
    named = lambda status: sorted(_claim_name(k) for k, s in claims.items() if s == status)  # noqa: E731
    return {
        "rows": len(shared),
        "rows_moved": sum(ref[k]["value"] != new[k]["value"] for k in shared),
        "mse_relative_change": {
            "rows": len(rel),
            "median": statistics.median(rel.values()) if rel else None,
            "max": max(rel.values()) if rel else None,
            "max_row": " ".join(max(rel, key=rel.get)) if rel else None,
        },
        "rte_mse": rte,
        "clear_claims": {
            "reference": sum(s != "appeared" for s in claims.values()),
            "here": sum(s != "vanished" for s in claims.values()),
            "in_both": len(named("held")),
            "vanished": named("vanished"),
            "appeared": named("appeared"),
            "reversed": named("reversed"),
        },
    }


def run_demo(out: Path) -> tuple[dict, float]:
    """The README demo's run into ``out``: its results and wall seconds."""
    from taskextrap.experiments.options import RunOptions
    from taskextrap.experiments.runner import run_experiment

    t = time.perf_counter()
    results = run_experiment("parameter", RunOptions(profile="quick", out=out, plots=False, progress=False))
    return results, time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "cpu-drift.json")
    args = parser.parse_args(argv)
    reference = json.loads((RESULTS / f"{REFERENCE}.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        here, wall = run_demo(Path(tmp))
    if here["seeds"] != reference["seeds"]:
        raise SystemExit(f"cpu_drift: the reference has seeds {reference['seeds']}, this run {here['seeds']}")
    out = {
        "command": COMMAND,
        "reference_file": f"benchmarks/results/{REFERENCE}.json",
        "reference_environment": reference["environment"],
        "here_environment": here["environment"],
        "seeds": here["seeds"],
        "wall_s": round(wall, 1),
        **drift(reference, here),
    }
    from taskextrap.files import write_json_atomic

    write_json_atomic(args.out, out)
    c = out["clear_claims"]
    print(
        f"{out['rows_moved']} of {out['rows']} rows moved (median {out['mse_relative_change']['median']:.3g}, "
        f"max {out['mse_relative_change']['max']:.3g}); clear claims {c['reference']} -> {c['here']} "
        f"({c['in_both']} in both); wrote {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
