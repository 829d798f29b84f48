"""Paired comparison of two methods on the same test targets, from cached unit files.

Every method of a unit is scored on the same targets and draws, so the per-target difference
between two methods has a much tighter interval than the two separate intervals suggest.

    python benchmarks/paired.py benchmarks/results/runs/units parameter strict rte random-anchors --profile paper

prints, per family (or ladder), the mean of (other - first) with its 95% interval over targets of
the seed-averaged differences (taskextrap.report.compare.paired_difference), n (targets), each
seed's mean difference, whether the claim is clear (interval excludes 0 and every seed agrees in
sign), and the share of targets on which the first method is better.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from taskextrap.report.compare import paired_difference


def paired(
    units_dir: Path,
    experiment: str,
    protocol: str,
    first: str,
    other: str,
    profile: str | None = None,
    metric: str = "mse",
) -> dict[str, dict]:
    """{group: {"diff", "lo", "hi", "ci95", "n", "seed_diffs", "seeds", "clear", "first_better"}}
    from ``units_dir/EXPERIMENT-GROUP-PROTOCOL-seedS-*.json``; ``diff`` is other - first.

    ``profile`` keeps only units whose saved configuration names that profile. Where several unit
    files hold the same group and seed (other settings or older code), the most recently written
    one is used and a line on stderr says so. A group whose seeds scored different numbers of
    targets is skipped with a line on stderr.
    """
    pattern = re.compile(rf"{re.escape(experiment)}-(.+)-{re.escape(protocol)}-seed(\d+)(-[0-9a-f]+)?\.json$")
    found: dict[str, dict[int, list[Path]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(Path(units_dir).glob("*.json")):
        m = pattern.match(path.name)
        if not m:
            continue
        saved = json.loads(path.read_text())
        if profile is not None and saved.get("config", {}).get("profile", {}).get("name") != profile:
            continue
        errors = saved["errors"]
        if first in errors and other in errors:
            found[m.group(1)][int(m.group(2))].append(path)
    out = {}
    for group, by_seed in found.items():
        seeds = sorted(by_seed)
        cols_a, cols_b = [], []
        for s in seeds:
            paths = sorted(by_seed[s], key=lambda p: (p.stat().st_mtime, p.name))
            if len(paths) > 1:
                print(
                    f"{group} seed {s}: {len(paths)} unit files, using the newest ({paths[-1].name})", file=sys.stderr
                )
            errors = json.loads(paths[-1].read_text())["errors"]
            cols_a.append(np.asarray(errors[other], dtype=float))
            cols_b.append(np.asarray(errors[first], dtype=float))
        if len({len(c) for c in cols_a + cols_b}) != 1:
            print(f"{group}: seeds scored different numbers of targets, skipped", file=sys.stderr)
            continue
        a, b = np.stack(cols_a, axis=1), np.stack(cols_b, axis=1)
        res = paired_difference(a, b, metric)
        per_target = (a - b).mean(axis=1)
        first_better = per_target > 0 if metric == "mse" else per_target < 0
        out[group] = {**res, "seeds": seeds, "first_better": float(first_better.mean())}
    return out


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("units_dir", type=Path)
    ap.add_argument("experiment")
    ap.add_argument("protocol")
    ap.add_argument("first")
    ap.add_argument("other")
    ap.add_argument("--profile", default=None, help="only units of this profile (quick, paper)")
    ap.add_argument(
        "--metric", default="mse", choices=["mse", "accuracy"], help="accuracy: bootstrap interval, higher is better"
    )
    a = ap.parse_args()
    res = paired(a.units_dir, a.experiment, a.protocol, a.first, a.other, a.profile, a.metric)
    if not res:
        raise SystemExit(f"no unit files for {a.experiment}/{a.protocol} with both methods in {a.units_dir}")
    for group, r in res.items():
        seeds = ", ".join(f"seed {s}: {_fmt(v)}" for s, v in zip(r["seeds"], r["seed_diffs"], strict=True))
        print(
            f"{group:12s} {a.other} - {a.first}: {_fmt(r['diff'])} [{_fmt(r['lo'])}, {_fmt(r['hi'])}] "
            f"(n={r['n']} targets); per seed {seeds}; clear: {'yes' if r['clear'] else 'no'}; "
            f"{a.first} better on {r['first_better']:.0%} of targets"
        )


if __name__ == "__main__":
    main()
