"""``ctx-gp``'s fits on the dev units' own targets, each interval's raw coverage recorded so the
fit chosen after the dev files can be calibrated like every other interval (issue 63, item 3).

``benchmarks/ctx_gp_fit.py`` chose ``ctx-gp``'s fit on the parameter regime's dev split (the
``paper`` profile's 400 targets); its next doubling (1 + 32 starts) was scored after and won, so
``baselines.classics.CTX_GP_CHOSEN`` is that fit. No dev file ran it: their ``ctx-gp`` rows are
the 1 + 16-start fit. An interval's scale is chosen on the ``quick`` dev units' coverage
(``scripts/calibrate_intervals.py``), so this scores each fit on exactly those targets: for every
regime with a ``ctx-gp`` row (parameter: each family; length, composition, depth 3: their one
held-out group) and protocol, the ``quick`` dev unit's targets and context draws (seed 31337 as
a dev run's units; depth 3 its own test seed), each of ``--fits``: its MSE (per target, then
over targets, as a unit's row) and its raw interval's coverage at every grid scale (pooled as a
dev run's config records it). A test holds the 1 + 16-start cells to the dev files' own
``ctx-gp`` rows (to the bit where a dev file was made at today's GP code, depth 3; within the
rounding of the code since elsewhere), so these are the same targets. ``ctx-gp`` learns nothing from the
library, so no network is trained. Nothing here reads a test target.

    python benchmarks/ctx_gp_dev_coverage.py    # writes benchmarks/results/ctx-gp-dev-coverage.json

Each cell is one piece of work on ``taskextrap.lanes`` (one torch thread each).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "ctx-gp-dev-coverage.json"
PROTOCOLS = ("paper", "strict")
REGIMES = ("parameter", "length", "composition", "composition-depth3")
FITS = {"lbfgs-r16": ("lbfgs", 16), "lbfgs-r32": ("lbfgs", 32)}  # name -> (optimizer, restarts)


def dev_observations(regime: str, protocol: str, profile: str) -> list[tuple[str, object, int]]:
    """(group, observations, targets) of each group of ``regime``'s dev unit (seed 0) under
    ``protocol``: the targets and context draws that unit scores, built by the regime's own
    functions as its unit builds them."""
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.options import RunOptions
    from taskextrap.tasks.regimes import get_protocol

    if regime == "parameter":
        from taskextrap.experiments import parameter as P
        from taskextrap.seeding import FRESH_TEST_SEED
        from taskextrap.tasks.builtin import PARAMETER_FAMILIES
        from taskextrap.tasks.dev import dev_family

        prof, proto = P.PROFILES[profile], get_protocol(protocol)
        out = []
        for name, family in PARAMETER_FAMILIES.items():
            _, obs = P.make_targets(dev_family(family), proto, prof.n_targets, prof.n_draws, FRESH_TEST_SEED)
            out.append((name, obs, prof.n_targets))
        return out
    if regime == "composition-depth3":
        from taskextrap.experiments import composition_depth3 as D
        from taskextrap.experiments.discrete import set_streams

        settings = get_experiment(regime).check(RunOptions(profile=profile, protocol=protocol, split="dev"))
        primitive_set = settings.family or D.get_set(None)
        split = D.get_split(primitive_set, True, settings.family_spec)
        prof = settings.profile
        primitives = D.make_library(prof.n_library, primitive_set)
        streams = set_streams(primitive_set, D.POLY_SIN_TANH_RESCALED)
        targets, obs = D.make_targets(
            primitives, settings.protocol, prof.n_targets, prof.n_draws, split, D.DEPTH3_TEST_SEED, streams
        )
        return [("", obs, len(targets))]
    import importlib

    from taskextrap.scripts import sibling

    dev_spec = sibling(
        __file__, "cnp_steps_dev"
    ).dev_spec  # the discrete regimes' dev unit spec, as the cnp's builds it

    module = importlib.import_module(f"taskextrap.experiments.{regime}")
    _, _, targets, obs, _ = module.unit_inputs(dev_spec(regime, protocol, profile, 0))
    return [("", obs, len(targets))]


def score(obs, n_targets: int, fits) -> dict:
    """Each fit's ``mse``, ``coverage_by_scale`` (its raw interval's coverage at every grid scale,
    pooled as a dev run's config records it) and ``seconds`` on ``obs``."""
    from taskextrap.baselines.gp import ctx_gp
    from taskextrap.experiments.units import per_target
    from taskextrap.search.calibration import interval_diagnostics, pooled_curve

    out: dict[str, dict] = {"mse": {}, "coverage_by_scale": {}, "seconds": {}}
    for name in fits:
        optimizer, restarts = FITS[name]
        t = time.perf_counter()
        mean, sd = ctx_gp(obs.ctx_x, obs.ctx_y, obs.qry_x, optimizer=optimizer, restarts=restarts)
        out["mse"][name] = float(per_target((mean - obs.qry_y) ** 2, n_targets).mean())
        diag = interval_diagnostics(name, mean, sd, obs.qry_y, 1.0)
        out["coverage_by_scale"][name] = pooled_curve({k: [per_target(v, n_targets)] for k, v in diag.items()}, name)
        out["seconds"][name] = time.perf_counter() - t
    return out


def cell(regime: str, protocol: str, profile: str, fits) -> list[dict]:
    """The cells of one (regime, protocol): one per group (a parameter family; a discrete
    regime's one group, named after the regime as benchmarks/cnp_steps_dev.py names it)."""
    return [
        {"regime": regime, "family": group or regime, "protocol": protocol, **score(obs, n, fits)}
        for group, obs, n in dev_observations(regime, protocol, profile)
    ]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--regimes", nargs="+", choices=REGIMES, default=list(REGIMES))
    ap.add_argument("--fits", nargs="+", choices=list(FITS), default=list(FITS))
    ap.add_argument("--profile", default="quick", help="the dev units' profile (the calibration's: quick)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.lanes import map_lanes
    from taskextrap.provenance import source_hash

    torch.set_num_threads(1)
    t = time.perf_counter()
    todo = [(r, p) for r in args.regimes for p in PROTOCOLS]
    cells = [c for cs in map_lanes(lambda rp: cell(*rp, args.profile, args.fits), todo) for c in cs]
    doc = {
        "what": "ctx-gp's fits on the quick dev units' targets: MSE and the raw interval's coverage"
        " at every grid scale",
        "profile": args.profile,
        "fits": {name: {"optimizer": o, "restarts": r} for name, (o, r) in FITS.items() if name in args.fits},
        "cells": cells,
        "threads": 1,
        "wall_s": time.perf_counter() - t,
        "command": " ".join(["python benchmarks/ctx_gp_dev_coverage.py", *(sys.argv[1:] if argv is None else argv)]),
        "source_hash": source_hash(),
        "torch": torch.__version__,
    }
    write_json_atomic(args.out, doc)
    for c in cells:
        print(c["regime"], c["family"], c["protocol"], {k: round(v, 5) for k, v in c["mse"].items()})


if __name__ == "__main__":
    main()
