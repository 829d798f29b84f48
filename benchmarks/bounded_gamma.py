"""Gamma's bounded pre-training on dev (issue 65): does a probe pre-trained on a sample of
``PRETRAIN_POINTS`` points per step rank library tasks as well as the full-batch probe?

For each family, a library of ``--n-library`` tasks per training region (beyond the cap: 400 a
region is 51,200 grid points against the cap's 16,384) gets Gamma twice, once with the cap and
once with every point in every step, and each is scored by ``quality.ranking_quality`` on fresh
*training-region* validation tasks (Spearman of proxy against parameter distance to the library,
and how often the proxy's nearest neighbour is among the 5 nearest by parameters): a dev
measure, no held-out region is drawn. The fit time of each is recorded beside it (one thread).

    python benchmarks/bounded_gamma.py                         # 5 families, 400 tasks a region
    python benchmarks/bounded_gamma.py --families cubic --n-library 40 --out /tmp/g.json  # a check

Writes ``benchmarks/results/bounded-gamma.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(family: str, n_library: int, capped: bool, seed: int) -> dict:
    """Ranking quality and fit seconds of Gamma with (``capped``) or without the cap."""
    from unittest import mock

    from taskextrap.embed import estimators as E
    from taskextrap.scripts import sibling
    from taskextrap.tasks import PARAMETER_FAMILIES

    ranking_quality = sibling(__file__, "quality").ranking_quality

    cap = E.PRETRAIN_POINTS if capped else 1 << 62
    t = time.perf_counter()
    with mock.patch.object(E, "PRETRAIN_POINTS", cap):
        q = ranking_quality(PARAMETER_FAMILIES[family], n_library=n_library, seed=seed)
    return q | {"fit_and_score_s": round(time.perf_counter() - t, 2)}


def main(argv=None) -> None:
    import sys

    import torch

    from taskextrap.scripts import sibling

    write_result = sibling(__file__, "scale").write_result

    from taskextrap.embed.estimators import PRETRAIN_POINTS
    from taskextrap.tasks import PARAMETER_FAMILIES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", default=list(PARAMETER_FAMILIES))
    ap.add_argument("--n-library", type=int, default=400, help="tasks per training region")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bounded-gamma.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    t = time.perf_counter()
    rows = {}
    for fam in a.families:
        rows[fam] = {arm: one(fam, a.n_library, arm == "capped", a.seed) for arm in ("capped", "full-batch")}
        print(fam, {arm: {k: round(v, 3) for k, v in r.items()} for arm, r in rows[fam].items()}, file=sys.stderr)
    fields = {
        "pretrain_points": PRETRAIN_POINTS,
        "n_library_per_region": a.n_library,
        "seed": a.seed,
        "split": "dev (training-region validation tasks)",
        "rows": rows,
    }
    write_result(a.out, "bounded_gamma.py", argv, t, fields)


if __name__ == "__main__":
    main()
