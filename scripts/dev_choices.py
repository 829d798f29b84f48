"""Choose inference-time settings on the dev split, never on test tasks.

    python scripts/dev_choices.py [--profile paper] [--protocols paper strict] [--targets 200]
    python scripts/dev_choices.py --regimes length --set k=20 --sweep screen_fraction=0.2,0.4,0.6,1.0 --tag joint

For length (levels <= 7 -> level 8), composition (one training pair held out), with ``--regimes
composition-depth3`` the depth-3 compositions (poly applied to a sin output held out as well:
``tasks.chains.dev_recipe_split``) and, with ``--regimes parameter``, each parameter family
(F1_1 -> F1_2, ``tasks.dev.dev_family``), per protocol and seed: fit the estimator once on the
dev library, draw dev targets, then score every variant of one setting at a time (the others at
their defaults) on the same targets and draws:

- parameter: ``anchors`` (nearest anchors averaged; training does not use it);
- length: ``k`` (verified candidates), ``screen_fraction`` (library share screened; 1.0 screens
  the whole library at the decomposer's coefficient), ``temperature`` (posterior averaging; None =
  the paper's arg-min), ``weighting+temperature`` (the posterior: relative, or the likelihood
  under the calibrated residual variance at temperature 1, 2, 4);
- composition: ``k`` (candidates per slot), ``refine_rounds``, ``temperature``, ``n_average``,
  ``weighting+temperature``;
- composition-depth3: the same four, and two fit-time settings, each variant a refit scored with
  the default search on the same draws: ``identity`` (the identity primitive and padded shallower
  compositions) and ``psi_context`` (Psi_chain's steps also read the context).

``--set`` fixes settings before the sweep (the depth-3 fit-time ones before the fit; ``true`` and
``false`` are booleans) and ``--sweep`` replaces the variants (a follow-up around a first result);
a setting ``a+b`` changes several at once, its values ``va:vb`` (``--sweep
weighting+temperature=relative:1,likelihood:2``). Writes
``benchmarks/results/dev-choices-<profile>[-<tag>].json`` with the mean dev MSE of every variant,
its paired difference to the current default (a t interval over targets), the coverage of its
90% predictive interval at the dev queries (``predict(..., return_std=True)``; not for the
parameter regime) and which variant is best. A default is changed only where the dev numbers say so.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from taskextrap.experiments import composition as C
from taskextrap.experiments import composition_depth3 as D3
from taskextrap.experiments import length as L
from taskextrap.experiments import parameter as P
from taskextrap.experiments.discrete import DEFAULT_EMBEDDING
from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES
from taskextrap.profiles import get_profile
from taskextrap.experiments.settings import UnitSpec
from taskextrap.experiments.units import per_target
from taskextrap.files import write_json_atomic
from taskextrap.report.schema import environment_info
from taskextrap.search.posterior import covered
from taskextrap.tasks import PARAMETER_FAMILIES
from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT, dev_recipe_split, recipe_name
from taskextrap.tasks.dev import dev_family, dev_ladder, dev_pair_split
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER
from taskextrap.tasks.regimes import get_protocol
from taskextrap.tasks.primitives import PAPER_SPLIT

OUT = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
DEV_SEED = 777  # the dev targets' stream; the dev split holds no real held-out task anyway

# The posterior's weighting: the relative rule at its temperature, the calibrated likelihood at 1, 2, 4.
WEIGHTING_VARIANTS = {
    "weighting+temperature": (("relative", 1.0), ("likelihood", 1.0), ("likelihood", 2.0), ("likelihood", 4.0))
}
LENGTH_VARIANTS = {
    "k": (5, 10, 20),
    "screen_fraction": (0.05, 0.1, 0.2, 0.4, 1.0),
    "temperature": (None, 0.5, 1.0, 2.0),
    **WEIGHTING_VARIANTS,
}
PARAMETER_VARIANTS = {"anchors": (1, 2, 4, 8)}
COMPOSITION_VARIANTS = {
    "k": (10, 25, 50),
    "refine_rounds": (0, 1, 2, 3),
    "temperature": (None, 0.5, 1.0, 2.0),
    "n_average": (1, 5, 10, 20),
    **WEIGHTING_VARIANTS,
}
DEPTH3_VARIANTS = {
    "k": (10, 20, 40, 60),
    "refine_rounds": (0, 1, 2),
    "temperature": (None, 0.5, 1.0, 2.0),
    "n_average": (1, 5, 20, 64),
}
DEPTH3_FIT_VARIANTS = {"identity": (True, False), "psi_context": (False, True)}  # each variant is a refit


def _paired(a: np.ndarray, b: np.ndarray) -> dict:
    """Mean of b - a over targets with a 95% t half-width (per-target errors of one seed)."""
    from scipy import stats

    d = b - a
    half = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
    return {"mean": float(d.mean()), "ci95": half, "b_better_share": float(np.mean(d < 0))}


def _get(model, name: str):
    """Setting ``name`` of ``model``; ``a+b`` is the tuple of ``a`` and ``b``."""
    return tuple(getattr(model, n) for n in name.split("+")) if "+" in name else getattr(model, name)


def _set(model, name: str, value) -> None:
    """Set ``name`` (``a+b``: each part from the tuple ``value``) on ``model``."""
    for n, v in zip(name.split("+"), value, strict=True) if "+" in name else ((name, value),):
        setattr(model, n, v)


def _sweep(rte, variants: dict, score) -> dict:
    """Score each variant (one setting changed, the others at their defaults) with ``score(rte)``:
    (per-target MSE, per-target coverage of the 90% interval or None)."""
    default = {name: _get(rte, name) for name in variants}
    base, base_cov = score(rte)
    out = {"default": dict(default), "default_mse": float(base.mean()), "settings": {}}
    if base_cov is not None:
        out["default_coverage"] = float(base_cov.mean())
    for name, values in variants.items():
        rows = []
        for v in values:
            _set(rte, name, v)
            e, cov = (base, base_cov) if v == default[name] else score(rte)
            rows.append({"value": v, "mse": float(e.mean()), "vs_default": _paired(base, e)})
            if cov is not None:
                rows[-1]["coverage"] = float(cov.mean())
            print(
                f"  {name}={v}: dev mse {e.mean():.4g}" + ("" if cov is None else f", coverage {cov.mean():.3f}"),
                flush=True,
            )
        _set(rte, name, default[name])
        out["settings"][name] = {"variants": rows, "best": min(rows, key=lambda r: r["mse"])["value"]}
    return out


def _parse(items: list[str] | None, many: bool) -> dict:
    """``name=value`` (or ``name=v1,v2``) strings as a dict of numbers (``none`` -> None, ``true``
    and ``false`` booleans, other words strings; ``a:b`` a tuple, for a setting ``x+y``)."""

    def num(v):
        if ":" in v:
            return tuple(num(part) for part in v.split(":"))
        if v.lower() in ("true", "false"):
            return v.lower() == "true"
        if v.lower() == "none":
            return None
        try:
            return int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            return v

    out = {}
    for item in items or []:
        name, _, values = item.partition("=")
        vals = tuple(num(v) for v in values.split(","))
        out[name] = vals if many else vals[0]
    return out


def _fit_and_sweep(rte, fit_library, obs, n_targets: int, fixed: dict, variants: dict, spread: bool = True) -> dict:
    """Fit ``rte`` on ``fit_library``, fix ``fixed``, then sweep ``variants`` on the dev draws
    ``obs`` (per-target MSE over queries and draws, and with ``spread`` the coverage of the 90%
    predictive interval); every name (``a+b``: each part) must be a setting of ``rte``."""
    for name in {**fixed, **variants}:
        for part in name.split("+"):
            if not hasattr(rte, part):
                raise SystemExit(f"error: {type(rte).__name__} has no setting {part!r}")
    t = time.perf_counter()
    rte.fit(fit_library)
    fit_s = time.perf_counter() - t
    for name, value in fixed.items():
        setattr(rte, name, value)

    def score(model):
        if not spread:
            return per_target((model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x) - obs.qry_y) ** 2, n_targets), None
        mean, std = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        return (
            per_target((mean - obs.qry_y) ** 2, n_targets),
            per_target(covered(mean, std, obs.qry_y).astype(float), n_targets),
        )

    return {"fit_s": fit_s, "fixed": fixed, **_sweep(rte, variants, score)}


def length_unit(
    protocol_name: str, profile, seed: int, n_targets: int, n_draws: int, fixed: dict, variants: dict
) -> dict:
    """Fit LengthRTE on the dev ladder (levels <= 7); sweep its inference settings on level-8 targets."""
    protocol = get_protocol(protocol_name, "length")
    library = L.make_library(dev_ladder(POLYNOMIAL_LADDER), profile.n_library)
    _, obs = L.make_targets(library, protocol, n_targets, n_draws, DEV_SEED)
    rte = L.make_rte(UnitSpec(dev_ladder(POLYNOMIAL_LADDER), protocol, profile, seed, DEFAULT_EMBEDDING))
    return _fit_and_sweep(rte, library, obs, n_targets, fixed, variants or LENGTH_VARIANTS)


def composition_unit(
    protocol_name: str, profile, seed: int, n_targets: int, n_draws: int, fixed: dict, variants: dict
) -> dict:
    """Fit CompositionRTE on the dev pair split; sweep its inference settings on the held-out training pair."""
    protocol = get_protocol(protocol_name, "composition")
    split = dev_pair_split(PAPER_SPLIT)
    prims = C.make_library(profile.n_library)
    _, obs = C.make_targets(prims, protocol, n_targets, n_draws, split, DEV_SEED)
    rte = C.make_rte(UnitSpec(None, protocol, profile, seed, DEFAULT_EMBEDDING, split=split))
    return {
        "held_out_pair": list(split.test[0]),
        **_fit_and_sweep(rte, prims, obs, n_targets, fixed, variants or COMPOSITION_VARIANTS),
    }


def depth3_unit(
    protocol_name: str, profile, seed: int, n_targets: int, n_draws: int, fixed: dict, variants: dict
) -> dict:
    """Fit Composition3RTE on the depth-3 dev split (recipes holding poly applied to a sin output
    held out); sweep its search settings, then refit once per fit-time variant (``identity``,
    ``psi_context``) and score it with the default search, all on the same dev draws."""
    protocol = get_protocol(protocol_name, "composition-depth3")
    split = dev_recipe_split(PAPER_RECIPE_SPLIT)
    prims = D3.make_library(profile.n_library)
    targets, obs = D3.make_targets(prims, protocol, n_targets, n_draws, split, DEV_SEED)
    variants = variants or {**DEPTH3_VARIANTS, **DEPTH3_FIT_VARIANTS}
    search = {k: v for k, v in variants.items() if k not in DEPTH3_FIT_VARIANTS}
    refits = {k: v for k, v in variants.items() if k in DEPTH3_FIT_VARIANTS}
    rte = D3.make_rte(UnitSpec(None, protocol, profile, seed, DEFAULT_EMBEDDING, split=split))
    for name in set(refits) | (set(fixed) & set(DEPTH3_FIT_VARIANTS)):
        if not hasattr(rte, name):
            raise SystemExit(f"error: {type(rte).__name__} has no setting {name!r}")
    rte = dataclasses.replace(rte, **{k: v for k, v in fixed.items() if k in DEPTH3_FIT_VARIANTS})  # before the fit
    out = {
        "held_out_recipes": [recipe_name(r) for r in split.test],
        **_fit_and_sweep(rte, prims, obs, n_targets, fixed, search),
    }

    def errors(model, chains=None):
        d = None if chains is None else model.decomposition_for(obs.ctx_x, obs.ctx_y, chains)
        return per_target((model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d) - obs.qry_y) ** 2, n_targets)

    truth = targets.chains[obs.task]
    base = errors(rte)
    for name, values in refits.items():
        default = getattr(rte, name)
        out["default"][name] = default
        rows = []
        for v in values:
            model = rte if v == default else dataclasses.replace(rte, **{name: v})
            if model is not rte:
                t = time.perf_counter()
                model.fit(prims)
                for k, value in fixed.items():
                    setattr(model, k, value)
                print(f"  refit {name}={v}: {time.perf_counter() - t:.0f} s", flush=True)
            e = base if model is rte else errors(model)
            oracle = errors(model, truth)
            rows.append(
                {"value": v, "mse": float(e.mean()), "oracle_mse": float(oracle.mean()), "vs_default": _paired(base, e)}
            )
            print(f"  {name}={v}: dev mse {e.mean():.4g} (oracle {oracle.mean():.4g})", flush=True)
        out["settings"][name] = {"variants": rows, "best": min(rows, key=lambda r: r["mse"])["value"]}
    return out


def parameter_unit(
    family_name: str, protocol_name: str, profile, seed: int, n_targets: int, n_draws: int, fixed: dict, variants: dict
) -> dict:
    """Fit RTE on one family's dev split (F1_1 halves -> F1_2); sweep its inference settings."""
    family = dev_family(PARAMETER_FAMILIES[family_name])
    protocol = get_protocol(protocol_name)
    library = P.make_library(family, profile.n_library, seed)
    _, obs = P.make_targets(family, protocol, n_targets, n_draws, DEV_SEED)
    rte = P.make_rte(UnitSpec(family, protocol, profile, seed, P.DEFAULT_EMBEDDING))  # as the test runs'; 2 anchors
    return _fit_and_sweep(rte, library, obs, n_targets, fixed, variants or PARAMETER_VARIANTS, spread=False)


def expand_regimes(names: list[str], units: dict) -> list[str]:
    """The units to run for ``--regimes`` (``parameter`` is one unit per built-in family),
    checked before anything runs: an unknown name is a one-line error."""
    out = []
    for name in names:
        expanded = [u for u in units if u.startswith("parameter-")] if name == "parameter" else [name]
        for unit in expanded:
            if unit not in units:
                raise SystemExit(
                    f"error: unknown regime {name!r}; use parameter, length, composition or composition-depth3"
                )
        out += expanded
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="paper", choices=["quick", "paper", "tiny"])
    ap.add_argument("--protocols", nargs="+", default=["paper", "strict"])
    ap.add_argument("--regimes", nargs="+", default=["length", "composition"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", type=int, default=200, help="dev targets per unit")
    ap.add_argument("--draws", type=int, default=4, help="context draws per dev target")
    ap.add_argument("--set", nargs="*", metavar="NAME=VALUE", help="settings fixed before the sweep")
    ap.add_argument("--sweep", nargs="*", metavar="NAME=V1,V2", help="variants to sweep (default: the built-in grid)")
    ap.add_argument("--tag", default=None, help="suffix of the output file")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 when another run shares 2 cores)")
    args = ap.parse_args()
    fixed, variants = _parse(args.set, many=False), _parse(args.sweep, many=True)
    path = OUT / f"dev-choices-{args.profile}{'-' + args.tag if args.tag else ''}.json"
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    out = {
        "command": "python scripts/dev_choices.py " + " ".join(__import__("sys").argv[1:]),
        "profile": args.profile,
        "seed": args.seed,
        "dev_seed": DEV_SEED,
        "n_targets": args.targets,
        "n_draws": args.draws,
        "environment": environment_info(),
        "units": {},
    }
    units = {
        "length": (length_unit, L.PROFILES),
        "composition": (composition_unit, C.PROFILES),
        "composition-depth3": (depth3_unit, D3.PROFILES),
    }
    units |= {f"parameter-{name}": (partial(parameter_unit, name), PARAMETER_PROFILES) for name in PARAMETER_FAMILIES}
    regimes = expand_regimes(args.regimes, units)
    for regime in regimes:
        fn, profiles = units[regime]
        profile = dataclasses.replace(get_profile(profiles, args.profile), seeds=(args.seed,))
        for protocol in args.protocols:
            print(f"{regime} / {protocol} (dev split, profile {args.profile}, seed {args.seed})", flush=True)
            out["units"][f"{regime}-{protocol}"] = fn(
                protocol, profile, args.seed, args.targets, args.draws, fixed, variants
            )
            out["wall_s"] = time.perf_counter() - t0
            write_json_atomic(path, out)
    print(f"written {path} ({out['wall_s'] / 60:.1f} min)")


if __name__ == "__main__":
    main()
