"""Multi-step parameter extrapolation (paper App. B.1.1, table tab:multi_step_results).

The library, Gamma and Psi are those of ``parameter`` (F1 tasks only, the same profile sizes and
seeds); the targets lie further out, in F3, F4 and F5 (one, two and three region-widths beyond
F2). RTE reaches them by chaining its one-step operator (:mod:`taskextrap.estimators.multistep`):

- ``rte-ghost``: the paper's method, ghost context and the paper's fixed schedule (2 steps to
  F3, 3 to F4, 4 to F5), the shift split linearly;
- ``rte-chained``: the chain settings chosen on the dev split (:data:`CHAINED`);
- ``rte``: the plain one-step estimator of Table 1 applied directly;

beside the transductive oracle chained with the true shift (the paper's schedule), the
inductive baselines, and the context-only sanity baselines.

The paper's schedule is set by the target's *true* region (:func:`paper_steps`), which a
context alone does not give: ``rte-ghost``, the chained ``transductive-oracle`` and the dev
variants ``chain-paper-*`` are given the target's true region (their number of steps), as the
paper's were. ``rte-chained`` (a fixed count or ``auto``) and ``rte`` are not. Under ``--split dev`` the library is
the dev family's (:func:`taskextrap.tasks.dev.dev_multistep_family`) and every candidate chain
variant (:data:`DEV_VARIANTS`) is scored too; test runs score only the methods above.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.baselines.table import get_method
from taskextrap.baselines.inductive import INDUCTIVE_KINDS
from taskextrap.baselines.oracles import ChainedTransductiveOracle
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.multistep import ChainedRTE, with_steps
from taskextrap.experiments import parameter as parameter_exp
from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES, per_target_mse
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, Unit, UnitResult, gather, seed_units
from taskextrap.report.schema import make_row
from taskextrap.seeding import rng
from taskextrap.tasks.builtin import FAR_REGIONS, MULTISTEP_FAMILIES
from taskextrap.tasks.dev import dev_multistep_family
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.observe import Observations, noise_scale
from taskextrap.tasks.registry import get_family
from taskextrap.tasks.taskset import TaskSet

EXPERIMENT = "parameter-multistep"
# the paper's schedule: F4 in 3 steps, F5 in 4 (F3: its code's 2). Keyed by the target's true
# region, so the rows that use it are given that information (the module docstring).
PAPER_STEPS = {"F3": 2, "F4": 3, "F5": 4}

# Candidate chain settings scored on the dev split: (steps, "auto" quantile, "auto" measure,
# shift split), see estimators.multistep. "paper" is the paper's schedule by the true region.
DEV_VARIANTS = {
    "chain-paper-linear": ("paper", None, None, "linear"),  # = rte-ghost
    "chain-paper-reembed": ("paper", None, None, "re-embed"),
    "chain-fixed1-linear": (1, None, None, "linear"),  # = rte, the one-step estimator
    "chain-fixed2-linear": (2, None, None, "linear"),
    "chain-fixed3-linear": (3, None, None, "linear"),
    "chain-shift05-linear": ("auto", 0.05, "shift", "linear"),
    "chain-shift25-linear": ("auto", 0.25, "shift", "linear"),
    "chain-context50-linear": ("auto", 0.5, "context", "linear"),
    "chain-context90-linear": ("auto", 0.9, "context", "linear"),
    "chain-context99-linear": ("auto", 0.99, "context", "linear"),
}
# rte-chained: the variant chosen on the dev split for each protocol (docs/results.md, "Multi-step
# parameter extrapolation: the dev choice"; benchmarks/results/parameter-multistep-*-dev.json); a
# protocol of the user's takes the paper protocol's.
# Dev (paper profile, seed 0): two steps for every target under the paper protocol (geometric-mean
# ratio to one step 0.60; the paper's schedule 0.65), one step under the strict one (every chain
# was worse there: 1.03 to 1.25).
CHAINED = {"paper": "chain-fixed2-linear", "strict": "chain-fixed1-linear"}


def chained_variant(protocol) -> str:
    """The dev-chosen variant behind ``rte-chained`` under ``protocol``."""
    return CHAINED.get(protocol.name, CHAINED["paper"])


TABLE_METHODS = ("ctx-interp", "ctx-polyfit", "library-best-fit")  # the method table's rows it shows
METHODS = (
    "rte-chained",
    "rte-ghost",
    "rte",
    "transductive-oracle",
    "sparse-inductive",
    "t2v-inductive",
    "inductive-oracle",
    *TABLE_METHODS,
)
REFERENCE = "rte-chained"  # the paired comparisons of a run are against it


def variant_scores(rows) -> dict[str, float]:
    """The dev choice's score of every candidate in :data:`DEV_VARIANTS` from a dev run's rows:
    the mean over (family, region) groups of log(MSE of the variant / MSE of the one-step
    ``rte``), i.e. the log of the geometric-mean ratio to one step (scale-free, so a quadratic's
    1e3 and a trend's 1e-2 count alike). Lower is better; 0 is one step's score."""
    by = {(r["group"], r["method"]): r["value"] for r in rows}
    groups = sorted({g for g, _ in by})
    return {v: float(np.mean([np.log(by[(g, v)] / by[(g, "rte")]) for g in groups])) for v in DEV_VARIANTS}


def choose_variant(rows) -> str:
    """The candidate with the lowest :func:`variant_scores` (the first listed on a tie)."""
    scores = variant_scores(rows)
    return min(scores, key=lambda v: (scores[v], list(DEV_VARIANTS).index(v)))


def get_multistep_family(spec: str | ParametricFamily) -> ParametricFamily:
    """A built-in family with F3-F5 (``tasks.builtin.MULTISTEP_FAMILIES``) by name, or a user's
    family (``module:attr`` or the object) that defines training regions F1_1, F1_2 and the
    held-out regions F2, F3, F4, F5 (see ``tasks.builtin.with_far_regions``)."""
    return get_family(spec, MULTISTEP_FAMILIES, ("F2", *FAR_REGIONS), EXPERIMENT)


def families_for(family: ParametricFamily | None, split: str = "test") -> list[ParametricFamily]:
    """The five built-in families (or ``family``, the run's resolved ``--family``), dev-split
    under ``split="dev"``."""
    families = list(MULTISTEP_FAMILIES.values()) if family is None else [family]
    return [dev_multistep_family(f) for f in families] if split == "dev" else families


def is_dev(family: ParametricFamily) -> bool:
    """Whether ``family`` is a multi-step dev split (:func:`dev_multistep_family`)."""
    return "dev-F3" in family.regions


def target_regions(family: ParametricFamily) -> tuple[str, ...]:
    """The regions scored: F3, F4, F5 (dev-F3 .. dev-F5 for a dev family)."""
    return tuple(f"dev-{r}" for r in FAR_REGIONS) if is_dev(family) else FAR_REGIONS


def paper_steps(region: str) -> int:
    """The paper's step count for ``region`` (a dev region takes its real counterpart's): the
    target's true region, information the methods that use it are given (not read off a context)."""
    return PAPER_STEPS[region.removeprefix("dev-")]


def make_targets(
    family: ParametricFamily, region: str, protocol, n_targets: int, n_draws: int, test_seed: int
) -> tuple[TaskSet, Observations]:
    """Targets of ``region`` and their draws from the test stream (no training seed touches it)."""
    targets = TaskSet.sample(family, {region: n_targets}, rng(test_seed, family.name, region, "targets"))
    obs = protocol.draw(
        targets, n_draws, rng(test_seed, family.name, region, protocol.name, "draws"), noise_scale(family)
    )
    return targets, obs


def variant(model: ChainedRTE, steps, quantile: float | None, measure: str | None, split: str) -> ChainedRTE:
    """A copy of the fitted ``model`` with other chain settings (the fit is shared); ``steps``
    "paper" leaves the count to the decomposition (:func:`with_steps`)."""
    out = copy.copy(model)
    out.steps = 1 if steps == "paper" else steps
    out.step_quantile = model.step_quantile if quantile is None else quantile
    out.step_measure = model.step_measure if measure is None else measure
    out.shift_split = split
    return out


def fit_models(spec: UnitSpec):
    """The chained RTE, the chained transductive oracle and the inductive baselines: the
    parameter experiment's fits of the same library (``parameter.library_fits``, loaded from
    the artifacts beside ``spec.cache_dir`` when that experiment saved them), chained."""
    library, fits, timing = parameter_exp.library_fits(spec)
    common = parameter_exp.common_settings(spec)
    t = time.perf_counter()
    rte = ChainedRTE(embedding=spec.embedding, **common).fit(library, fitted=fits["strategy-a"])
    models: dict[str, Any] = {
        "rte": rte,
        "transductive-oracle": ChainedTransductiveOracle(**common).fit(library, fitted=fits["transductive-oracle"]),
    }
    models |= {kind: fits[kind] for kind in INDUCTIVE_KINDS}  # trained on the same draws as rte's
    models |= {m: get_method(m).build(seed=spec.seed, device=spec.device).fit(library) for m in TABLE_METHODS}
    timing["chain_s"] = time.perf_counter() - t
    return library, models, timing


def predict_region(
    models: dict, library: TaskSet, obs: Observations, region: str, methods: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """Predictions (n_draws_total, q) of ``methods`` on draws ``obs`` of targets in ``region``."""
    rte: ChainedRTE = models["rte"]
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    d = rte.decompose(cx, cy)
    paper = with_steps(d, paper_steps(region))
    settings = {
        **DEV_VARIANTS,
        "rte-chained": DEV_VARIANTS[chained_variant(rte.protocol_)],
        "rte-ghost": DEV_VARIANTS["chain-paper-linear"],
    }
    out = {}
    for m in methods:
        if m == "rte":
            out[m] = rte.predict(cx, cy, qx, with_steps(d, 1))
        elif m in settings:
            steps = settings[m][0]
            out[m] = variant(rte, *settings[m]).predict(cx, cy, qx, paper if steps == "paper" else d)
        elif m == "transductive-oracle":
            oracle = models[m]
            out[m] = oracle.predict(
                cx, cy, qx, with_steps(oracle.decompose_truth(cx, cy, obs.params), paper_steps(region))
            )
        elif m in INDUCTIVE_KINDS:
            out[m] = models[m].predict(cx, cy, qx, theta=obs.params)
        elif m in TABLE_METHODS:
            out[m] = models[m].predict(cx, cy, qx)
        else:
            raise TaskextrapError(f"unknown method {m!r}")
    return out


def methods_for(family: ParametricFamily) -> tuple[str, ...]:
    """What a unit scores: :data:`METHODS`, plus every dev variant on a dev family."""
    return METHODS + tuple(DEV_VARIANTS) if is_dev(family) else METHODS


def run_unit(spec: UnitSpec, plot_dir: Path | None = None) -> UnitResult:
    """Fit once on the family's library with the unit's training seed; score every method on the
    targets of each far region. Errors are keyed ``"<region>|<method>"``."""
    t0 = time.perf_counter()
    family, protocol, profile, test_seed = spec.family, spec.protocol, spec.profile, spec.test_seed
    library, models, timing = fit_models(spec)
    methods = methods_for(family)
    errors, examples = {}, []
    t = time.perf_counter()
    for region in target_regions(family):
        _targets, obs = make_targets(family, region, protocol, profile.n_targets, profile.n_draws, test_seed)
        preds = predict_region(models, library, obs, region, methods)
        errors.update({f"{region}|{m}": per_target_mse(preds[m], obs, profile.n_targets) for m in methods})
        examples.append((region, obs.subset([0])))
    timing["evaluation_s"] = time.perf_counter() - t
    steps = {
        m: variant(models["rte"], *DEV_VARIANTS[m]).step_size() for m in DEV_VARIANTS if DEV_VARIANTS[m][0] == "auto"
    }
    if plot_dir is not None:
        t = time.perf_counter()
        _plot(plot_dir, family, protocol, models, library, examples)
        timing["plots_s"] = time.perf_counter() - t
    timing["total_s"] = time.perf_counter() - t0
    return UnitResult(errors, timing, {"auto_step_size": steps})


def _plot(plot_dir, family, protocol, models, library, examples):
    from taskextrap.report.plots import plot_predictions

    grid = family.grid(200)
    truth, cx, cy, titles = [], [], [], []
    preds: dict[str, list] = {}
    for region, ex in examples:
        g = grid[None]
        truth.append(family(ex.params, g)[0])
        for m, p in predict_region(
            models,
            library,
            Observations(ex.task, ex.params, ex.ctx_x, ex.ctx_y, g, family(ex.params, g)),
            region,
            ("rte-chained", "rte-ghost", "rte", "sparse-inductive"),
        ).items():
            preds.setdefault(m, []).append(p[0])
        cx.append(ex.ctx_x[0])
        cy.append(ex.ctx_y[0])
        titles.append(f"{region}: {family.shift}={ex.params[0, 0]:.3g}")
    plot_predictions(
        plot_dir / f"{family.name}-{protocol.name}-multistep.png",
        grid,
        np.array(truth),
        {m: np.array(v) for m, v in preds.items()},
        cx,
        cy,
        titles=titles,
    )


def unit_config(spec: UnitSpec) -> dict:
    """Everything that determines a unit's numbers (its cache fingerprint): the parameter unit's
    settings, with this experiment's regions, methods and chain settings."""
    return {
        **parameter_exp.unit_config(spec),
        "experiment": EXPERIMENT,
        "target_region": target_regions(spec.family),
        "methods": methods_for(spec.family),
        "chained": DEV_VARIANTS[chained_variant(spec.protocol)],
        "paper_steps": PAPER_STEPS,
    }


def family_units(family, settings: Settings, plot_dir: Path | None, cache_dir: Path | None = None) -> list[Unit]:
    """One unit per training seed of ``family`` under the run's ``settings`` (the first seed
    draws the plot)."""
    embedding, profile, protocol = parameter_exp.run_settings(settings)
    spec = lambda s: UnitSpec.of(settings, s, family, embedding, cache_dir=cache_dir)  # noqa: E731
    tag = f"{family.name}-{protocol.name}" + ("-dev" if is_dev(family) else "")
    return seed_units(
        profile.seeds,
        name=lambda s: f"{EXPERIMENT}-{tag}-seed{s}",
        config=lambda s: unit_config(spec(s)),
        compute=lambda s, plots: run_unit(spec(s), plots),
        plot_dir=plot_dir,
        plot_file=f"{family.name}-{protocol.name}-multistep.png",
    )


@register(
    EXPERIMENT,
    "App. B.1.1: multi-step parameter extrapolation to F3, F4, F5 (chained RTE, ghost context)",
    PARAMETER_PROFILES,
    options=("protocol", "family", "embedding", "anchors", "test_seed", "device"),
    regime="parameter",
    dev=True,
    family=get_multistep_family,
)
def run_multistep(settings: Settings, cache_dir: Path | None, plot_dir: Path | None) -> Plan:
    """Every family's units, and the rows "<family>/<region>" x method built from them."""
    families = families_for(settings.family, settings.split)
    embedding, profile, protocol = parameter_exp.run_settings(settings)
    options = settings.options
    units = {f.name: family_units(f, settings, plot_dir, cache_dir) for f in families}

    def assemble(results):
        rows, step_sizes = [], {}
        timing: dict[str, float] = {}
        for f in families:
            errors, t = gather(results, units[f.name])
            for k, v in t.items():
                timing[k] = timing.get(k, 0.0) + v
            step_sizes[f.name] = [results[u.name].extras.get("auto_step_size") for u in units[f.name]]
            for region in target_regions(f):
                rows += [
                    parameter_exp.paper_checked(
                        make_row(EXPERIMENT, f"{f.name}/{region}", m, "mse", np.stack(errors[f"{region}|{m}"], axis=1)),
                        f,
                        MULTISTEP_FAMILIES,
                    )
                    for m in methods_for(f)
                ]
        config = {
            "families": [f.name for f in families],
            "protocol": {**vars(protocol)},
            "profile": profile.to_dict(),
            "embedding": embedding,
            "anchors": options.anchors,
            "test_seed": options.seed_of_tests,
            "regions": {f.name: dict(f.regions) for f in families},
            "paper_steps": PAPER_STEPS,
            "chained": {"variant": chained_variant(protocol), "settings": DEV_VARIANTS[chained_variant(protocol)]},
            "dev_variants": DEV_VARIANTS,
            "auto_step_size": step_sizes,
        }
        return rows, config, list(profile.seeds), timing

    return Plan([u for f in families for u in units[f.name]], assemble, reference=REFERENCE)
