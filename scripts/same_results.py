"""Check that two runs give the same numbers: a refactor must not change any result.

    python scripts/same_results.py OLD NEW      # two results.json files, or two folders of them

Compares every row (group, method, metric: value, ci95, n, seed_sd, paper_value and the
per-target errors when kept) and every paired comparison, and nothing else: the environment
(commit, source hash), timing and paths are expected to differ. Folders are compared file by
file over the ``*.json`` files that hold rows (``benchmarks/results``, or run directories'
``results.json``). Prints one line per difference and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from taskextrap.report import compare


def differences(old: dict, new: dict) -> list[str]:
    """Every difference between the rows and comparisons of two parsed results files, one line
    each (``report.compare.differences``, worded)."""
    out = []
    for kind, key, field, a, b in compare.differences(old, new):
        name = f"{kind[:-1]} {'/'.join(map(str, key))}"
        if field is None:
            out.append(f"{name} only in the {'old' if b is None else 'new'} run")
        else:
            out.append(f"{name}: {field} {a!r} -> {b!r}")
    return out


def _results_files(path: Path) -> dict[str, Path]:
    """A file as itself, a folder as its results files (``*.json`` with rows) by relative name."""
    if path.is_file():
        return {path.name: path}
    if not path.is_dir():
        raise SystemExit(f"error: {path} is neither a results file nor a folder")
    files = {}
    for p in sorted(path.rglob("*.json")):
        try:
            if "rows" in json.loads(p.read_text()):
                files[str(p.relative_to(path))] = p
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
    return files


def main():
    """Command line: compare OLD and NEW; exit 1 when any number differs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    args = ap.parse_args()
    lines = []
    if args.old.is_file() and args.new.is_file():
        pairs = [(args.old.name, args.old, args.new)]
    else:
        old, new = _results_files(args.old), _results_files(args.new)
        pairs = [(name, old[name], new[name]) for name in sorted(old.keys() & new.keys())]
        lines += [f"{name}: only in {args.old}" for name in sorted(old.keys() - new.keys())]
        lines += [f"{name}: only in {args.new}" for name in sorted(new.keys() - old.keys())]
    for name, a, b in pairs:
        lines += [f"{name}: {d}" for d in differences(json.loads(a.read_text()), json.loads(b.read_text()))]
    print("\n".join(lines) if lines else f"same numbers in {len(pairs)} results file(s)")
    sys.exit(1 if lines else 0)


if __name__ == "__main__":
    main()
