"""Choices for a user's own data, made on the built-in families' dev splits (no test task is read).

``python benchmarks/observed.py interpolants``: how well each interpolant of
``tasks.observed`` reads an observed task between its points. Every dev-library task of the five
built-in families (the dev split's training regions, ``tasks.dev``) is observed at ``m`` random
inputs (the domain's ends included), without noise and with noise of 2% of the output range
(measured data are noisy), and read at 200 other inputs; the error is the mean squared
difference to the formula, over the family's output range squared. The default interpolant is
the one whose error is lowest relative to the best interpolant of each (family, noise, density),
as a geometric mean, so that every family, noise and density weighs the same
(``benchmarks/results/observed-interpolants.json``).

``python benchmarks/observed.py context-sizes``: accuracy and interval coverage against the
number of context points. RTE fitted on each family's dev library (quick profile sizes), once as
it is (Psi reads 8 points; more are read as subsets) and once with ``min_context=4`` (Psi trained
with up to 4 of its 8 context points hidden); dev targets with contexts of 4, 8, 16 and 32 points
(the protocol's spans) and 8 queries; ``rte`` beside ``ctx-polyfit`` and ``library-best-fit`` on
the same targets, paired differences over targets (one seed)
(``benchmarks/results/context-sizes.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DENSITIES = (12, 24, 48)
NOISES = (0.0, 0.02)  # observation noise sd over the output range (measured data are noisy; strict's 2%)
SIZES = (4, 8, 16, 32)
MIN_CONTEXTS = (None, 4)


def _observed(library, m: int, g: np.random.Generator, noise_sd: float = 0.0):
    """Every task of ``library`` observed at ``m`` random inputs, the domain's ends included,
    with Gaussian noise of sd ``noise_sd``."""
    from taskextrap.tasks.observed import ObservedTasks

    lo, hi = library.family.domain
    x = np.sort(g.uniform(lo, hi, size=(len(library), m)), axis=1)
    x[:, 0], x[:, -1] = lo, hi
    y = library.values(x) + g.normal(0.0, noise_sd, size=x.shape) * (noise_sd > 0)
    task = np.repeat(np.arange(len(library)).astype(str), m)
    return ObservedTasks.from_columns({"task": task, "x": x.reshape(-1), "y": y.reshape(-1)})


def interpolants(seed: int = 0) -> dict:
    from taskextrap.experiments.parameter import make_library
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import dev_family
    from taskextrap.tasks.observe import noise_scale
    from taskextrap.tasks.observed import INTERPOLANTS

    rows = []
    for name, family in PARAMETER_FAMILIES.items():
        dev = dev_family(family)
        library = make_library(dev, 50, seed)
        spread = noise_scale(dev)
        g = np.random.default_rng(seed)
        for noise in NOISES:
            for m in DENSITIES:
                data = _observed(library, m, g, noise * spread)
                q = g.uniform(*dev.domain, size=(len(library), 200))
                truth = library.values(q)
                for kind in INTERPOLANTS:
                    err = float(np.mean((data.library(name, kind).values(q) - truth) ** 2) / spread**2)
                    rows.append({"family": name, "noise": noise, "points": m, "interpolant": kind, "nmse": err})

    def best(r):  # the lowest error of any interpolant on r's family, noise and density
        cell = ("family", "noise", "points")
        return min(s["nmse"] for s in rows if all(s[c] == r[c] for c in cell))

    pooled = {k: float(np.mean([r["nmse"] for r in rows if r["interpolant"] == k])) for k in INTERPOLANTS}
    relative = {
        k: float(np.exp(np.mean([np.log(r["nmse"] / best(r)) for r in rows if r["interpolant"] == k])))
        for k in INTERPOLANTS
    }
    wins = {k: sum(1 for r in rows if r["interpolant"] == k and r["nmse"] == best(r)) for k in INTERPOLANTS}
    return {
        "cells": rows,
        "pooled_nmse": pooled,
        "relative_to_best": relative,
        "wins": wins,
        "criterion": "relative_to_best: the geometric mean over (family, noise, points) of the error over the "
        "best interpolant's there, so each family, noise and density weighs the same (the pooled mean is "
        "dominated by the two oscillating families at 12 points)",
        "chosen": min(relative, key=relative.get),
    }


def context_sizes(seed: int = 0, protocols=("paper", "strict"), families=None) -> dict:
    from taskextrap import RTE
    from taskextrap.baselines.context import ctx_polyfit, library_best_fit
    from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES, make_library
    from taskextrap.report.compare import paired_difference
    from taskextrap.search.posterior import covered
    from taskextrap.seeding import rng
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import DEV_REGION, dev_family
    from taskextrap.tasks.regimes import get_protocol
    from taskextrap.tasks.taskset import TaskSet

    profile = PARAMETER_PROFILES["quick"]
    rows = []
    for name in families or PARAMETER_FAMILIES:
        dev = dev_family(PARAMETER_FAMILIES[name])
        library = make_library(dev, profile.n_library, seed)
        targets = TaskSet.sample(dev, {DEV_REGION: profile.n_targets}, rng(seed, name, "context-size-targets"))
        for pname in protocols:
            base = get_protocol(pname)
            for low in MIN_CONTEXTS:
                t0 = time.perf_counter()
                rte = RTE(protocol=base, n_pairs=profile.n_pairs, train=profile.train, seed=seed, min_context=low,
                          verbose=False).fit(library)  # fmt: skip
                fit_s = time.perf_counter() - t0
                for m in SIZES:
                    if m < rte.min_context_:
                        continue
                    protocol = dataclasses.replace(base, n_context=m)
                    obs = protocol.draw(targets, 1, rng(seed, name, pname, m, "context-size-draws"), rte.noise_scale_)
                    t1 = time.perf_counter()
                    mean, std = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
                    predict_s = time.perf_counter() - t1
                    preds = {
                        "rte": mean,
                        "ctx-polyfit": ctx_polyfit(obs.ctx_x, obs.ctx_y, obs.qry_x),
                        "library-best-fit": library_best_fit(
                            obs.ctx_x, obs.ctx_y, obs.qry_x, lambda i, x, lib=library: lib.values(x, i), len(library)
                        )[0],
                    }
                    err = {k: ((v - obs.qry_y) ** 2).mean(axis=1) for k, v in preds.items()}
                    row = {
                        "family": name,
                        "protocol": pname,
                        "min_context": low,
                        "context": m,
                        "mse": {k: float(v.mean()) for k, v in err.items()},
                        "coverage": float(covered(mean, std, obs.qry_y).mean()),
                        "coverage_raw": float(covered(mean, std / rte.calibrated_scale(), obs.qry_y).mean()),
                        "fit_s": round(fit_s, 1),
                        "predict_s": round(predict_s, 2),
                    }
                    for b in ("ctx-polyfit", "library-best-fit"):
                        p = paired_difference(err["rte"], err[b])
                        row[f"rte-{b}"] = {k: p[k] for k in ("diff", "lo", "hi", "clear")}
                    rows.append(row)
                    print(_line(row), file=sys.stderr, flush=True)
    return {"profile": "quick", "targets": profile.n_targets, "cells": rows}


def _line(r: dict) -> str:
    mc = "-" if r["min_context"] is None else r["min_context"]
    m = r["mse"]
    return (
        f"{r['family']:10s} {r['protocol']:6s} min {mc:>2} ctx {r['context']:>2}  rte {m['rte']:9.4g}  "
        f"poly {m['ctx-polyfit']:9.4g}  lbf {m['library-best-fit']:9.4g}  cover {r['coverage']:.3f}"
    )


def main(argv=None) -> None:
    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("interpolants", "context-sizes"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default=None, help="comma-separated built-in families (default: all five)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    if a.what == "interpolants":
        doc = interpolants(a.seed)
        out = Path(a.out or RESULTS / "observed-interpolants.json")
    else:
        doc = context_sizes(a.seed, families=a.families.split(",") if a.families else None)
        out = Path(a.out or RESULTS / "context-sizes.json")
    doc |= {
        "command": f"python benchmarks/observed.py {a.what} --seed {a.seed}",
        "seed": a.seed,
        "source_hash": source_hash(),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    write_json_atomic(out, doc)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
