"""Does the ``cnp`` gain from training longer than its dev choice? (issue 63, item 2)

Each regime's dev split chose the ``cnp`` at four times the unit's steps
(``baselines.classics.CHOSEN``, ``CHOSEN_BY_REGIME``), the largest step scale its grid held, so
no dev curve was seen to flatten. This scores further scales (and learning rates) on the same dev
splits. Parameter regime (the default): for each family and protocol, the ``paper``-profile dev
unit's library draws exactly as a unit's ``cnp`` row learns from them (Strategy A's Phase 1a
draws, its scaler and training config: ``experiments.parameter.shared_draws``). ``--regime
length`` or ``composition``: for each protocol, the ``quick``-profile dev unit's (its own
``unit_inputs``, its estimator's Phase 1a, ``experiments.discrete.shared_draws``). A ``cnp`` of
width 128 is trained at each of ``--scales`` times the unit's steps (and ``--lr-scales`` times its
learning rate; each its own variant's seed, as the dev rows are) and scored by its MSE on the dev
targets (the held-out ``dev`` region or level or pairs, seed 31337, the profile's targets and
draws). Each cell also records the raw interval's coverage at every grid scale, as a dev run's
config does, so a scale scored here can be calibrated like a dev row. Tests hold a cell to a dev
unit's own ``cnp`` row (and its coverage), to the bit, in every regime. The score is the dev
choice's (``classics.variant_scores``): the mean over cells of log MSE, lower is better. Nothing
here reads a test target.

    python benchmarks/cnp_steps_dev.py                    # writes benchmarks/results/cnp-steps-dev.json
    python benchmarks/cnp_steps_dev.py --regime length --scales 8 --out benchmarks/results/cnp-steps-dev-length.json

Each cell is one piece of work on ``taskextrap.lanes`` (one torch thread each). Its networks
checkpoint as they train (``operators.checkpoints``) into ``--checkpoints`` (default
``.bench-cache/cnp-steps-dev``), a folder per cell named by the package's source hash: the same
command stopped and started again trains on from where each network stood, to the bit. The
cells' folders go once the file is written.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("paper", "strict")
WIDTH = 128
DISCRETE = ("length", "composition")
# the profile each regime's dev choice was made at (classics.CHOSEN and CHOSEN_BY_REGIME)
PROFILE = {"parameter": "paper", "length": "quick", "composition": "quick"}


def fits(library, shared, obs, n_targets: int, scales, lr_scales, seed: int, protocol: str) -> dict[str, dict]:
    """A ``cnp`` at each step scale and learning-rate scale, learning from the unit's ``shared``
    draws: ``mse`` on ``obs``' queries (averaged per target, then over targets, as a unit's row
    is), ``coverage_by_scale`` (its raw interval's coverage at every grid scale of
    ``search.calibration.SCALE_GRID``, pooled as a dev run's config records it, from which a
    scale is chosen for the variant) and ``seconds``. A learning-rate scale other than 1 adds
    ``-lr<scale>`` to the row's name; its network and batches are seeded as the variant's (each
    pair differs in the rate alone)."""
    from dataclasses import replace

    from taskextrap.baselines.classics import NeuralProcess
    from taskextrap.estimators.base import fit_together
    from taskextrap.experiments.units import per_target
    from taskextrap.search.calibration import interval_diagnostics, pooled_curve

    out: dict[str, dict] = {"mse": {}, "coverage_by_scale": {}, "seconds": {}}
    for s in scales:
        for lr in lr_scales:
            train = replace(shared.train, lr=shared.train.lr * lr)
            cnp = NeuralProcess(width=WIDTH, step_scale=s, train=train, seed=seed, device="cpu", protocol=protocol)
            name = cnp.variant + ("" if lr == 1.0 else f"-lr{lr:g}")
            t = time.perf_counter()
            fit_together([cnp.begin_fit(library, shared)])
            pred, sd = cnp.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)  # sd: the raw interval's
            out["mse"][name] = float(per_target((pred - obs.qry_y) ** 2, n_targets).mean())
            diag = interval_diagnostics(name, pred, sd, obs.qry_y, 1.0)
            out["coverage_by_scale"][name] = pooled_curve(
                {k: [per_target(v, n_targets)] for k, v in diag.items()}, name
            )
            out["seconds"][name] = time.perf_counter() - t
    return out


def cell(
    family_name: str,
    protocol: str,
    scales: tuple[float, ...],
    profile: str,
    seed: int,
    lr_scales: tuple[float, ...] = (1.0,),
) -> dict:
    """The parameter regime's cell: :func:`fits` on one family's dev unit under ``protocol``."""
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
    _, obs = P.make_targets(family, proto, prof.n_targets, prof.n_draws, spec.test_seed)
    scored = fits(library, P.shared_draws(sa), obs, prof.n_targets, scales, lr_scales, seed, protocol)
    return {"family": family_name, "protocol": protocol, **scored}


def dev_spec(regime: str, protocol: str, profile: str, seed: int):
    """The ``dev`` unit's spec of a discrete regime (``length``, ``composition``) under
    ``protocol``: the built-in ladder or primitive set, as ``taskextrap reproduce REGIME --split
    dev`` builds it."""
    from taskextrap.experiments import composition, length
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.discrete import embedding_of
    from taskextrap.experiments.options import RunOptions
    from taskextrap.experiments.settings import UnitSpec

    settings = get_experiment(regime).check(RunOptions(profile=profile, protocol=protocol, split="dev"))
    if regime == "length":
        return UnitSpec.of(settings, seed, length.run_ladder(settings), embedding_of(settings, "length"))
    return composition.set_run("composition", settings, {})[0].spec(seed)


def regime_cell(
    regime: str,
    protocol: str,
    scales: tuple[float, ...],
    profile: str,
    seed: int,
    lr_scales: tuple[float, ...] = (1.0,),
) -> dict:
    """A discrete regime's cell: :func:`fits` on its dev unit under ``protocol``: the library,
    estimator and targets the regime's unit builds (``unit_inputs``), the estimator's Phase 1a
    (its networks are not trained) and the draws a unit's ``cnp`` learns from
    (``experiments.discrete.shared_draws``)."""
    import importlib

    from taskextrap.experiments.discrete import shared_draws

    module = importlib.import_module(f"taskextrap.experiments.{regime}")
    library, rte, targets, obs, _ = module.unit_inputs(dev_spec(regime, protocol, profile, seed))
    rte.begin_fit(library)
    scored = fits(library, shared_draws(rte), obs, len(targets), scales, lr_scales, seed, protocol)
    return {"family": regime, "protocol": protocol, **scored}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[4.0, 8.0])
    ap.add_argument(
        "--lr-scales", type=float, nargs="+", default=[1.0], help="multiples of the unit's learning rate (default: 1)"
    )
    ap.add_argument(
        "--regime", default="parameter", choices=["parameter", *DISCRETE], help="whose dev split (default: parameter)"
    )
    ap.add_argument("--families", nargs="+", default=None, help="parameter: default the five built-in families")
    ap.add_argument("--profile", default=None, help="default: the profile of the regime's dev choice (PROFILE)")
    ap.add_argument("--seed", type=int, default=0, help="the training seed (the dev rows' seed 0)")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--checkpoints", type=Path, default=ROOT / ".bench-cache" / "cnp-steps-dev",
        help="where the networks' mid-training checkpoints go (default .bench-cache/cnp-steps-dev)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.lanes import map_lanes
    from taskextrap.provenance import source_hash
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES

    if args.families and args.regime != "parameter":
        ap.error(f"--families names parameter families; the {args.regime} regime has one task set")
    torch.set_num_threads(1)
    profile = args.profile or PROFILE[args.regime]
    rest = (tuple(args.scales), profile, args.seed, tuple(args.lr_scales))
    t = time.perf_counter()

    grid = "x" + "_".join(f"{s:g}" for s in args.scales) + "-lr" + "_".join(f"{s:g}" for s in args.lr_scales)

    def folder(*names: str) -> Path:  # one per cell, grid and source: never another's progress
        return args.checkpoints / "-".join([args.regime, *names, profile, grid, f"seed{args.seed}", source_hash()])

    if args.regime == "parameter":
        todo = [(f, p) for p in PROTOCOLS for f in args.families or list(PARAMETER_FAMILIES)]
        folders = [folder(f, p) for f, p in todo]
        cells = map_lanes(lambda fp: _checkpointed(folder(*fp), lambda: cell(*fp, *rest)), todo)
    else:
        folders = [folder(p) for p in PROTOCOLS]
        cells = map_lanes(lambda p: _checkpointed(folder(p), lambda: regime_cell(args.regime, p, *rest)), PROTOCOLS)
    # the dev choice's rule (classics.variant_scores), for variants it does not list too
    scores = {v: float(np.mean([np.log(c["mse"][v]) for c in cells])) for v in cells[0]["mse"]}
    doc = {
        "what": f"cnp at each step (and learning-rate) scale on the {args.regime} regime's dev split"
        " (mean log MSE, lower is better)",
        "regime": args.regime,
        "scores": scores,
        "cells": cells,
        "profile": profile,
        "seed": args.seed,
        "test_seed": 31337,
        "threads": 1,
        "wall_s": time.perf_counter() - t,
        "command": command(args),
        "source_hash": source_hash(),
        "torch": torch.__version__,
    }
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "cnp-steps-dev.json"
    write_json_atomic(out, doc)
    for f in folders:
        shutil.rmtree(f, ignore_errors=True)
    print(scores)


def _checkpointed(folder: Path, work):
    """``work()`` with its networks checkpointing into ``folder`` (in this lane's thread)."""
    from taskextrap.operators.checkpoints import checkpointing

    with checkpointing(folder):
        return work()


def command(args) -> str:
    """The command line that wrote the file (the options given, the defaults left out)."""
    words = ["python benchmarks/cnp_steps_dev.py", "--scales", *(f"{s:g}" for s in args.scales)]
    if args.lr_scales != [1.0]:
        words += ["--lr-scales", *(f"{s:g}" for s in args.lr_scales)]
    if args.regime != "parameter":
        words += ["--regime", args.regime]
    if args.families:
        words += ["--families", *args.families]
    if args.seed != 0:
        words += ["--seed", str(args.seed)]
    if args.profile:
        words += ["--profile", args.profile]
    if args.out:
        out = Path(args.out).resolve()
        words += ["--out", str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else args.out]
    return " ".join(words)


if __name__ == "__main__":
    main()
