"""Why a larger library predicted worse (issue 65, on dev): the objective's candidate set against
library size.

RTE's objective scores a fixed number of candidate anchors per target (``retrieve`` nearest in
proxy space plus ``screen`` best context fits, 16 + 16 by default, chosen on dev at the paper's
200 tasks). In a denser library those 32 candidates cover a smaller part of it. This script
fits RTE once per (family, size) on the family's dev split (region ``dev`` held out,
``tasks.dev``) and scores the same dev targets with several candidate counts
(``retrieve = screen = c``), recording each one's MSE per target, coverage and prediction time:
the numbers a rule for the candidate count is chosen from. Nothing of a test region is drawn.

    python benchmarks/scale_candidates.py                                 # 3 families, 200/800/3200
    python benchmarks/scale_candidates.py --families cubic --sizes 40 --counts 4 8 --out /tmp/c.json

Writes ``benchmarks/results/scale-candidates.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS = (8, 16, 32, 64, 128, 256)


def one(family: str, n: int, counts, seed: int) -> dict:
    """One fit of ``n`` dev-library tasks of ``family`` and the dev targets scored at each count."""
    from taskextrap.scripts import sibling

    scale = sibling(__file__, "scale")
    library_of, targets_and_draws = scale.library_of, scale.targets_and_draws

    from taskextrap import RTE
    from taskextrap.search.posterior import covered

    library, obs = library_of(n, seed, "dev", family), targets_and_draws("dev", family)
    t = time.perf_counter()
    model = RTE(protocol="paper", seed=seed, verbose=False).fit(library)
    out: dict = {"fit_s": round(time.perf_counter() - t, 2), "by_count": {}}
    for c in counts:
        if c > n:
            continue
        model.retrieve = model.screen = c  # inference settings: the fit is the same
        model.reference_library = None  # these very counts at every size (no growth with the library)
        t = time.perf_counter()
        mean, sd = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        err = ((mean - obs.qry_y) ** 2).mean(1)
        out["by_count"][str(c)] = {
            "mse": float(err.mean()),
            "coverage": float(covered(mean, sd, obs.qry_y).mean()),
            "predict_s": round(time.perf_counter() - t, 3),
            "per_target_mse": err.tolist(),
        }
        print(f"{family} {n} tasks, {c} + {c} candidates: mse {err.mean():.4g}", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> None:
    import torch

    from taskextrap.scripts import sibling

    write_result = sibling(__file__, "scale").write_result

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", default=["cubic", "quadratic", "sin_trend"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 800, 3200])
    ap.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale-candidates.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    t = time.perf_counter()
    rows = {f: {str(n): one(f, n, a.counts, a.seed) for n in a.sizes} for f in a.families}
    fields = {"split": "dev (region dev of each family's dev split)", "seed": a.seed, "rows": rows}
    write_result(a.out, "scale_candidates.py", argv, t, fields)


if __name__ == "__main__":
    main()
