"""Which paired claims of one set of runs hold in another: a GPU's tables beside the CPU's.

    python scripts/claims_hold.py CPU GPU [--markdown FILE]   # two results.json files or folders

A GPU trains and rounds differently from a CPU, so its tables are not the CPU's bit for bit
(``scripts/same_results.py`` says where they differ); what must survive is every claim. For each
paired comparison that is clear in either run (its interval excludes 0 and every seed agrees:
``report.compare.claim_changes``), this says whether it is clear in both with the same winner; and it puts
every row's value and interval side by side. Prints the markdown (or writes it to FILE) and
exits 1 when a claim clear in one run is not clear in the other, so a prepared GPU session
(``scripts/gpu_check.sh``) stops on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from taskextrap.report.compare import claim_changes, keyed
from taskextrap.scripts import sibling

_results_files = sibling(__file__, "same_results")._results_files  # a sibling script, not a package


def _fmt(value, ci) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" + (f" ± {ci:.2g}" if ci is not None else "")


def _cell(c) -> str:
    """One run's verdict on a claim, with its paired difference and interval."""
    if c is None:
        return "not compared"
    verdict = f"{c['winner']} clearly" if c.get("clear") else "not clear"
    return f"{verdict}, {c['diff']:.3g} [{c['lo']:.3g}, {c['hi']:.3g}]" if c.get("lo") is not None else verdict


def compare(a: dict, b: dict, names: tuple[str, str] = ("CPU", "GPU")) -> tuple[list[str], int, int]:
    """The markdown lines comparing two parsed results files, the number of claims clear in
    either run, and how many of them hold in both (same winner, clear in both)."""
    ca, cb = keyed(a, "comparisons"), keyed(b, "comparisons")
    claims = claim_changes(a, b)
    lines = [f"| group | metric | claim | {names[0]} | {names[1]} | holds in both |", "|---|---|---|---|---|---|"]
    for k, status in claims.items():
        held_here = "yes" if status == "held" else "**no**"
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} vs {k[3]} | {_cell(ca.get(k))} | {_cell(cb.get(k))} | {held_here} |")
    held = sum(status == "held" for status in claims.values())
    rows_a, rows_b = keyed(a), keyed(b)
    lines += ["", f"| group | method | metric | {names[0]} | {names[1]} |", "|---|---|---|---|---|"]
    for k in sorted(rows_a.keys() | rows_b.keys()):
        ra, rb = rows_a.get(k, {}), rows_b.get(k, {})
        va, vb = _fmt(ra.get("value"), ra.get("ci95")), _fmt(rb.get("value"), rb.get("ci95"))
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {va} | {vb} |")
    return lines, len(claims), held


def main(argv=None) -> int:
    """Command line: compare CPU and GPU; exit 1 when a claim does not hold in both."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cpu", type=Path)
    ap.add_argument("gpu", type=Path)
    ap.add_argument("--names", nargs=2, default=("CPU", "GPU"), help="the two columns' names")
    ap.add_argument("--markdown", type=Path, default=None, help="write the markdown here instead of printing it")
    args = ap.parse_args(argv)
    if args.cpu.is_file() and args.gpu.is_file():
        pairs = [(args.gpu.name, args.cpu, args.gpu)]
    else:
        a, b = _results_files(args.cpu), _results_files(args.gpu)
        pairs = [(name, a[name], b[name]) for name in sorted(a.keys() & b.keys())]
    out, total, held = [], 0, 0
    for name, x, y in pairs:
        lines, n, h = compare(json.loads(x.read_text()), json.loads(y.read_text()), tuple(args.names))
        out += [f"## {name}", "", f"{h} of {n} clear claims hold in both.", "", *lines, ""]
        total, held = total + n, held + h
    out.insert(0, f"{held} of {total} clear claims hold in both runs ({len(pairs)} results files).\n")
    text = "\n".join(out)
    if args.markdown is not None:
        args.markdown.write_text(text)
    else:
        print(text)
    print(f"{held} of {total} clear claims hold in both", file=sys.stderr)
    return 0 if held == total else 1


if __name__ == "__main__":
    sys.exit(main())
