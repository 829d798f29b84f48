"""Does the ``cnp`` gain from training longer than its dev choice? (issue 63, item 2)

The dev split chose ``cnp-w128-x4`` (four times the unit's steps), the largest step scale it
scored (``baselines.classics.CHOSEN``), so its dev curve was never seen to flatten. This scores
the next doubling on the same dev split: for each family and protocol of the parameter regime,
the ``paper``-profile dev unit's library draws exactly as a unit's ``cnp`` row learns from them
(Strategy A's Phase 1a draws, its scaler and training config: ``experiments.parameter``'s
``SharedDraws``), a ``cnp`` of width 128 trained at each of ``--scales`` times the unit's steps
(each its own variant's seed, as the dev rows are), its MSE on the dev targets (the held-out
``dev`` region, seed 31337, the profile's targets and draws). The score is the dev choice's
(``classics.variant_scores``): the mean over (family, protocol) of log MSE, lower is better.
Nothing here reads a test target.

    python benchmarks/cnp_steps_dev.py      # writes benchmarks/results/cnp-steps-dev.json

Each (family, protocol) is one piece of work on ``taskextrap.lanes`` (one torch thread each).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("paper", "strict")
WIDTH = 128


def cell(
    family_name: str,
    protocol: str,
    scales: tuple[float, ...],
    profile: str,
    seed: int,
    lr_scales: tuple[float, ...] = (1.0,),
) -> dict:
    """MSE on the dev targets of a ``cnp`` at each step scale and learning-rate scale, for one
    family and protocol. A learning-rate scale other than 1 adds ``-lr<scale>`` to the row's name;
    its network and batches are seeded as the variant's (so each pair differs in the rate alone)."""
    from dataclasses import replace

    from taskextrap.baselines.classics import NeuralProcess
    from taskextrap.estimators.base import fit_together
    from taskextrap.experiments import parameter as P
    from taskextrap.experiments.settings import UnitSpec
    from taskextrap.seeding import FRESH_TEST_SEED
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import dev_family
    from taskextrap.tasks.regimes import get_protocol

    family = dev_family(PARAMETER_FAMILIES[family_name])
    prof, proto = P.PROFILES[profile], get_protocol(protocol)
    spec = UnitSpec(family=family, protocol=proto, profile=prof, seed=seed, embedding=P.DEFAULT_EMBEDDING,
                    test_seed=FRESH_TEST_SEED, dev=True)  # fmt: skip
    library = P.make_library(family, prof.n_library, seed)
    sa = P.make_rte(spec)
    sa.begin_fit(library)  # Phase 1a: the embedding, the scaler and the library draws (its networks are not trained)
    shared = P.shared_draws(sa)
    _, obs = P.make_targets(family, proto, prof.n_targets, prof.n_draws, spec.test_seed)
    out = {"family": family_name, "protocol": protocol, "mse": {}, "seconds": {}}
    for s in scales:
        for lr in lr_scales:
            train = replace(shared.train, lr=shared.train.lr * lr)
            cnp = NeuralProcess(width=WIDTH, step_scale=s, train=train, seed=seed, device="cpu", protocol=protocol)
            name = cnp.variant + ("" if lr == 1.0 else f"-lr{lr:g}")
            t = time.perf_counter()
            fit_together([cnp.begin_fit(library, shared)])
            pred = cnp.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
            out["mse"][name] = float(P.per_target_mse(pred, obs, prof.n_targets).mean())
            out["seconds"][name] = time.perf_counter() - t
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[4.0, 8.0])
    ap.add_argument(
        "--lr-scales", type=float, nargs="+", default=[1.0], help="multiples of the unit's learning rate (default: 1)"
    )
    ap.add_argument("--families", nargs="+", default=None, help="default: the five built-in families")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--seed", type=int, default=0, help="the training seed (the dev rows' seed 0)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.lanes import map_lanes
    from taskextrap.provenance import source_hash
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES

    torch.set_num_threads(1)
    families = args.families or list(PARAMETER_FAMILIES)
    todo = [(f, p) for p in PROTOCOLS for f in families]
    t = time.perf_counter()
    cells = map_lanes(lambda fp: cell(*fp, tuple(args.scales), args.profile, args.seed, tuple(args.lr_scales)), todo)
    # the dev choice's rule (classics.variant_scores), for variants it does not list too
    scores = {v: float(np.mean([np.log(c["mse"][v]) for c in cells])) for v in cells[0]["mse"]}
    doc = {
        "what": "cnp at each step scale on the parameter regime's dev split (mean log MSE, lower is better)",
        "scores": scores,
        "cells": cells,
        "profile": args.profile,
        "seed": args.seed,
        "test_seed": 31337,
        "threads": 1,
        "wall_s": time.perf_counter() - t,
        "command": "python benchmarks/cnp_steps_dev.py --scales "
        + " ".join(f"{s:g}" for s in args.scales)
        + ("" if args.lr_scales == [1.0] else " --lr-scales " + " ".join(f"{s:g}" for s in args.lr_scales)),
        "source_hash": source_hash(),
        "torch": torch.__version__,
    }
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "cnp-steps-dev.json"
    write_json_atomic(out, doc)
    print(scores)


if __name__ == "__main__":
    main()
