"""Markdown tables of benchmark results (the README's results section is pasted from this).

    python benchmarks/tables.py length-paper-paper composition-paper-paper
    python benchmarks/tables.py --all

Each name is a JSON file under benchmarks/results/ written by benchmarks/run.py; for each one the
accuracy-style rows (retrieval shares) get a second table, and the wall time is printed below.
Cells read ``value ± ci95 (sd S)``: the interval over targets of seed-averaged values, and the
standard deviation across seeds of the per-seed means. Files with paired comparisons list the
clear "A beats B" claims and count the others.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from taskextrap.report.compare import clear_claims
from taskextrap.report.tables import wide_table

RESULTS = Path(__file__).parent / "results"


def render(name: str) -> str:
    """The tables of one results file, with its wall time."""
    data = json.loads((RESULTS / f"{name}.json").read_text())
    parts = [f"#### {name}"]
    for metric in ("mse", "accuracy"):  # accuracy-only runs (parity, codeio) get no empty MSE table
        if any(r["metric"] == metric for r in data["rows"]):
            parts += ["", wide_table(data, metric)]
    if data["rows"] and all("ci_method" in r for r in data["rows"]):
        parts += ["", "_value ± ci95 over targets (seed-averaged); sd: across seeds of the per-seed means._"]
    elif data["rows"]:  # written before the intervals were computed over targets
        parts += ["", "_value ± ci95 by the earlier rule (1.96·sd/√n over all target × seed entries, so "
                      "narrower than it should be); sd: across seeds of the per-seed means._"]
    comparisons = data.get("comparisons") or []
    if comparisons:
        claims = clear_claims(comparisons)
        unclear = len(comparisons) - len(claims)
        parts += ["", f"_clear paired claims (interval excludes 0, every seed agrees): "
                      f"{'; '.join(claims) if claims else 'none'}; {unclear} other comparison(s) not clear._"]
    wall = data.get("timing", {}).get("wall_s")
    if wall is not None and wall >= 5:
        parts += ["", f"_wall {wall / 60:.1f} min on 2 CPU cores._"]
    elif wall is not None:  # every unit came from the cache (ablations reuse the main fits)
        parts += ["", "_scored from the main experiment's cached units._"]
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="results files (without .json)")
    ap.add_argument("--all", action="store_true", help="every results file with rows")
    args = ap.parse_args()
    names = args.names
    if args.all:
        names = sorted(p.stem for p in RESULTS.glob("*.json") if "rows" in json.loads(p.read_text()))
    print("\n\n".join(render(n) for n in names))


if __name__ == "__main__":
    main()
