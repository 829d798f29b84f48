"""Old numbers beside new ones: each results file at an earlier commit against the working tree.

    python benchmarks/old_vs_new.py --rev b0a373e                     # markdown on stdout
    python benchmarks/old_vs_new.py --rev b0a373e --out docs/old-vs-new.md

For every results file under benchmarks/results/ that exists at ``--rev`` and now, one table of
every (group, method) row: the old value ± its ci95 (by the rule of its day), the new value ±
ci95 (sd across seeds), and the paper's value where it has one. Groups renamed since (parity's
``size6`` is the ``frontier`` space) are matched through ``GROUP_ALIASES``. The old files are
read with ``git show``, so nothing is checked out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from taskextrap.files import write_text_atomic
from taskextrap.report.tables import format_number as fmt

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path("benchmarks/results")
# new group -> its name in the files written before the integrity review
GROUP_ALIASES = {"size6-frontier": "size6", "size6-all": "size6-all-candidates"}


def old_file(rev: str, name: str) -> dict | None:
    """``benchmarks/results/<name>.json`` at ``rev``, or None when it did not exist there."""
    proc = subprocess.run(["git", "show", f"{rev}:{RESULTS / name}.json"], cwd=ROOT, capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def cell(row: dict | None, sd: bool) -> str:
    """``value ± ci95`` (with ``(sd S)`` when asked and known), or an em dash for a missing row."""
    if row is None or row.get("value") is None:
        return "—"
    out = fmt(row["value"]) + (f" ± {fmt(row['ci95'])}" if row.get("ci95") is not None else "")
    return out + (f" (sd {fmt(row['seed_sd'])})" if sd and row.get("seed_sd") is not None else "")


def compare(name: str, old: dict, new: dict) -> str:
    """The markdown table of one results file: old vs new for every row of the new file."""
    index = {(r["group"], r["method"], r["metric"]): r for r in old.get("rows", [])}
    seeds = lambda d: f"test seed {(d.get('config') or {}).get('test_seed', 10000)}"  # noqa: E731
    wall = lambda d: (d.get("timing") or {}).get("wall_s")  # noqa: E731
    walls = " → ".join(f"{w / 60:.1f} min" if w and w >= 5 else "cached" for w in (wall(old), wall(new)))
    lines = [
        f"#### {name}",
        "",
        f"_old: {seeds(old)}, commit {old.get('environment', {}).get('git') or '?'}; "
        f"new: {seeds(new)}, commit {new.get('environment', {}).get('git') or '?'}; wall {walls}._",
        "",
        "| group | method | metric | old | new | paper |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in new.get("rows", []):
        o = index.get((GROUP_ALIASES.get(r["group"], r["group"]), r["method"], r["metric"])) or index.get(
            (r["group"], r["method"], r["metric"])
        )
        paper = fmt(r["paper_value"]) if r.get("paper_value") is not None else ""
        lines.append(
            f"| {r['group']} | `{r['method']}` | {r['metric']} | {cell(o, False)} | {cell(r, True)} | {paper} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True, help="the earlier commit (e.g. the last one before the re-runs)")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown here (default: stdout)")
    ap.add_argument("names", nargs="*", help="results files (default: every one with rows, old and new)")
    args = ap.parse_args()
    names = args.names or sorted(p.stem for p in (ROOT / RESULTS).glob("*.json"))
    parts = [
        f"# Old vs new numbers (`python benchmarks/old_vs_new.py --rev {args.rev}`)",
        "",
        "_old ± ci95 by the rule of its day (before the integrity review: over every target × seed "
        "entry, too narrow); new ± ci95 over targets of seed-averaged errors (sd across seeds)._",
    ]
    for name in names:
        new = json.loads((ROOT / RESULTS / f"{name}.json").read_text())
        old = old_file(args.rev, name)
        if old is None or not new.get("rows") or old == new:
            continue
        parts += ["", compare(name, old, new)]
    text = "\n".join(parts) + "\n"
    if args.out:
        write_text_atomic(args.out, text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
