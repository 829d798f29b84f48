"""Prediction through a trained network, plain against subnormals flushed (``operators.mlp.predict_rows``).

``python benchmarks/predict_subnormals.py``: trains the depth-3 regime's Psi_chain as a ``paper``
unit does (``Composition3RTE`` at the ``paper`` profile's pairs and training, one torch thread;
the decomposer barely trained: it is not timed), then passes the rows of ``--targets`` (1,000) held-out chains
at their context and query inputs (what one candidate chain costs ``rte-gp``'s choice) through
the trained network, one torch thread and one lane: chunk by chunk as ``predict_rows`` did before
(plain) and through ``predict_rows`` now (each chunk under ``operators.jobs.subnormals_flushed``). Records the
trained network's subnormal weights, min/median/max seconds of ``--repeats`` passes each, and
whether the two give the same bits. Writes ``benchmarks/results/predict-subnormals.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "predict-subnormals.json"
TINY = 1.1754944e-38  # the smallest normal float32


def plain_pass(net, rows, chunk: int):
    """The rows through ``net`` chunk by chunk without flushing: ``predict_rows`` before, in one lane."""
    import torch

    with torch.no_grad():
        return torch.cat([net(torch.from_numpy(rows[i : i + chunk])) for i in range(0, len(rows), chunk)])


def timed(fn, repeats: int) -> tuple[list[float], object]:
    """Seconds of ``repeats`` calls of ``fn`` and its last result."""
    out, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - t)
    return out, result


def summary(seconds: list[float]) -> dict:
    return {"min": min(seconds), "median": statistics.median(seconds), "max": max(seconds)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--protocol", default="paper", choices=("paper", "strict"))
    p.add_argument("--profile", default="paper", help="the depth-3 profile whose pairs and training it takes")
    p.add_argument("--targets", type=int, default=1000, help="held-out chains whose rows are timed")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)

    import numpy as np
    import torch

    torch.set_num_threads(1)
    from taskextrap.estimators.composition_depth3 import Composition3RTE
    from taskextrap.experiments import composition_depth3 as depth3
    from taskextrap.files import write_json_atomic
    from taskextrap.lanes import limited
    from taskextrap.operators.mlp import PREDICT_CHUNK, predict_rows
    from taskextrap.operators.parameter import sort_context
    from taskextrap.operators.train import TrainConfig
    from taskextrap.provenance import cpu_info, source_hash
    from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT

    profile = depth3.PROFILES[args.profile]
    library = depth3.make_library(profile.n_library)
    rte = Composition3RTE(
        split=PAPER_RECIPE_SPLIT,
        protocol=args.protocol,
        n_pairs=profile.n_pairs,
        train=profile.train,
        decomposer_train=TrainConfig(steps=10, batch=256),
        seed=args.seed,
        verbose=False,
    )
    t = time.perf_counter()
    rte.fit(library)
    fit_s = time.perf_counter() - t
    targets, obs = depth3.make_targets(library, rte.protocol_, args.targets, 1, PAPER_RECIPE_SPLIT)
    cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
    chains = targets.chains[obs.task]
    rows = rte.psi_.features(np.concatenate([obs.ctx_x, obs.qry_x], 1), chains, cx, cy)
    net = rte.psi_.net
    weights = [w.detach().numpy() for w in net.parameters()]
    tiny = sum(int(((np.abs(w) > 0) & (np.abs(w) < TINY)).sum()) for w in weights)
    with limited(1):  # one lane each: the passes differ in the flush alone
        plain_s, plain = timed(lambda: plain_pass(net, rows, PREDICT_CHUNK), args.repeats)
        flushed_s, flushed = timed(lambda: predict_rows(net, rows), args.repeats)
    record = {
        "what": "one candidate chain's rows through a trained depth-3 Psi_chain, plain and flushed",
        "protocol": args.protocol,
        "profile": args.profile,
        "seed": args.seed,
        "train": {"n_pairs": profile.n_pairs, "steps": profile.train.steps, "batch": profile.train.batch},
        "fit_s": round(fit_s, 1),
        "rows": len(rows),
        "weights": int(sum(w.size for w in weights)),
        "subnormal_weights": tiny,
        "plain_s": summary(plain_s),
        "flushed_s": summary(flushed_s),
        "speedup_median": statistics.median(plain_s) / statistics.median(flushed_s),
        "same_bits": bool(torch.equal(plain, flushed)),
        "threads": 1,
        "lanes": 1,
        "command": f"python benchmarks/predict_subnormals.py --protocol {args.protocol} --profile {args.profile} "
        f"--targets {args.targets} --repeats {args.repeats} --seed {args.seed}",
        "torch": torch.__version__,
        "cpu": cpu_info(),
        "source_hash": source_hash(),
    }
    write_json_atomic(args.out, record)
    print(
        f"{tiny} subnormal weights of {record['weights']}; {len(rows)} rows: plain {statistics.median(plain_s):.2f} s, "
        f"flushed {statistics.median(flushed_s):.2f} s (median of {args.repeats}); same bits: {record['same_bits']}"
    )


if __name__ == "__main__":
    main()
