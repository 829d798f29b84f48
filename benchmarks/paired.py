"""Paired comparison of two methods on the same test targets, from cached unit files.

Every method of a unit is scored on the same targets and draws, so the per-target difference
between two methods has a much tighter interval than the two separate intervals suggest.

    python benchmarks/paired.py benchmarks/results/runs/units parameter strict rte random-anchors --profile paper

prints, per family (or ladder), the mean of (other - first) over per-(target, seed) errors with
its ci95 = 1.96 sd / sqrt(n), and the share of targets on which the first method is better.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np


def paired(units_dir: Path, experiment: str, protocol: str, first: str, other: str,
           profile: str | None = None) -> dict[str, dict]:
    """{group: {"mean", "ci95", "n", "first_better"}} from ``units_dir/EXPERIMENT-GROUP-PROTOCOL-seedS-*.json``.

    ``profile`` keeps only units whose saved configuration names that profile.
    """
    pattern = re.compile(rf"{re.escape(experiment)}-(.+)-{re.escape(protocol)}-seed(\d+)(-[0-9a-f]+)?\.json$")
    diffs = defaultdict(list)
    for path in sorted(Path(units_dir).glob("*.json")):
        m = pattern.match(path.name)
        if not m:
            continue
        saved = json.loads(path.read_text())
        if profile is not None and saved.get("config", {}).get("profile", {}).get("name") != profile:
            continue
        errors = saved["errors"]
        if first in errors and other in errors:
            diffs[m.group(1)].append(np.asarray(errors[other]) - np.asarray(errors[first]))
    out = {}
    for group, parts in diffs.items():
        d = np.concatenate(parts)
        out[group] = {"mean": float(d.mean()), "ci95": float(1.96 * d.std(ddof=1) / np.sqrt(len(d))),
                      "n": int(len(d)), "first_better": float((d > 0).mean())}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("units_dir", type=Path)
    ap.add_argument("experiment")
    ap.add_argument("protocol")
    ap.add_argument("first")
    ap.add_argument("other")
    ap.add_argument("--profile", default=None, help="only units of this profile (quick, paper)")
    a = ap.parse_args()
    res = paired(a.units_dir, a.experiment, a.protocol, a.first, a.other, a.profile)
    if not res:
        raise SystemExit(f"no unit files for {a.experiment}/{a.protocol} with both methods in {a.units_dir}")
    for group, r in res.items():
        print(f"{group:12s} {a.other} - {a.first}: {r['mean']:.4g} ± {r['ci95']:.2g} (n={r['n']}); "
              f"{a.first} better on {r['first_better']:.0%} of targets")


if __name__ == "__main__":
    main()
