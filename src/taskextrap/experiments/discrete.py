"""What the discrete-regime experiments (length, composition) share: their profile sizes, the
settings a run reads from its options, the loop over seeds, the unit that fits a Strategy B
estimator and its inductive baseline and scores every method, the rows and the example plots.

An experiment module supplies its library, targets, estimator, ``predict_all`` (the rows it
reports) and what keys its units; everything else about a run is the same for both regimes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.baselines.classics import classic_variants
from taskextrap.baselines.discrete import DiscreteInductive, training_batch
from taskextrap.baselines.method import SharedDraws
from taskextrap.baselines.table import begin_methods, has_own_interval, is_dev_row, is_method
from taskextrap.errors import TaskextrapError
from taskextrap.posterior.estimator import SELF_CALIBRATED, choice_summary
from taskextrap.estimators.base import fit_together
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.profiles import DiscreteProfile, profile_table
from taskextrap.experiments.units import Plan, Unit, UnitResult, gather, per_target, seed_units
from taskextrap.operators.train import TrainConfig, job_seconds
from taskextrap.provenance import callable_hash
from taskextrap.report.schema import make_row
from taskextrap.search.calibration import interval_diagnostics, pooled_curve
from taskextrap.seeding import rng
from taskextrap.tasks.builtin import PRIMITIVE_SETS
from taskextrap.tasks.primitives import CompositionFamily
from taskextrap.tasks.regimes import get_regime

LIBRARY_SEED = 20_000  # the library's fixed stream, independent of every training seed
DEFAULT_EMBEDDING = get_regime("length").embedding  # the discrete regimes' Gamma (tasks.regimes), measured

# Optimiser settings per profile, the same in both regimes: Psi's and the decomposer's.
PSI_TRAIN = {
    "quick": TrainConfig(steps=800, batch=4096, eval_every=100),
    "paper": TrainConfig(steps=2000, batch=4096, eval_every=100),
    "tiny": TrainConfig(steps=15, batch=512, eval_every=5),
}
DECOMPOSER_TRAIN = {
    "quick": TrainConfig(steps=1500, batch=512, eval_every=100),
    "paper": TrainConfig(steps=3000, batch=512, eval_every=100),
    "tiny": TrainConfig(steps=15, batch=64, eval_every=5),
}


def discrete_profiles(
    sizes: dict[str, dict], train: dict = PSI_TRAIN, decomposer_train: dict = DECOMPOSER_TRAIN
) -> dict[str, DiscreteProfile]:
    """A discrete regime's profile table (``profiles.profile_table``): each profile's sizes, its
    seeds, and Psi's and the decomposer's optimiser settings (by default the ones both regimes share)."""
    return profile_table(DiscreteProfile, sizes, train=train, decomposer_train=decomposer_train)


def estimator_settings(spec: UnitSpec) -> dict:
    """The settings a unit's estimator takes from its unit, in every discrete regime: the
    protocol, the embedding, the profile's sizes, the training seed and the device, and no
    progress bar of its own (the run has one over its units)."""
    return {
        "protocol": spec.protocol,
        "embedding": spec.embedding,
        "n_pairs": spec.profile.n_pairs,
        "train": spec.profile.train,
        "decomposer_train": spec.profile.decomposer_train,
        "seed": spec.seed,
        "device": spec.device,
        "verbose": False,
    }


def table_rows(
    regime: str, own: tuple[str, ...], ablations: tuple[str, ...] = (), dev: bool = False
) -> tuple[str, ...]:
    """A discrete experiment's rows: its own, then the method table's rows of ``regime`` (read
    now, so a method registered later is among them), then its ablations', each once; with
    ``dev`` (a dev split's run) the table's dev variants of ``regime`` last (the classics'
    settings, scored for their MSE so that each regime's dev split can choose its own) and no
    ``rte-gp`` (it chooses on a dev split of its own library; a dev split's has none to spare)."""
    from taskextrap.baselines.table import method_rows

    variants = method_rows(regime, dev=True) if dev else ()
    own = tuple(m for m in own if not (dev and m in SELF_CALIBRATED))
    return tuple(dict.fromkeys((*own, *method_rows(regime), *ablations, *variants)))


def embedding_of(settings: Settings, regime: str) -> str:
    """The Γ estimator of a run of ``regime``: ``--embedding``, else the regime's default (``tasks.regimes``)."""
    return settings.options.embedding or get_regime(regime).embedding


def discrete_units(
    settings: Settings,
    stem: str,
    base: dict,
    estimator_of: Callable,
    compute: Callable,
    plot_dir: Path | None,
    plot_file: str | None,
) -> list[Unit]:
    """One unit per seed of ``settings``' profile (``units.seed_units``): unit
    ``<stem>[-dev]-seed<s>``, keyed by ``base``, the seed and the estimator's repr
    (``estimator_of(seed)``); ``compute(seed, plots)`` runs one unit."""
    name = stem + ("-dev" if settings.dev else "")
    return seed_units(
        settings.profile.seeds,
        name=lambda s: f"{name}-seed{s}",
        config=lambda s: {**base, "seed": s, "estimator": repr(estimator_of(s))},
        compute=compute,
        plot_dir=plot_dir,
        plot_file=plot_file,
    )


@dataclass(frozen=True)
class DiscreteRun:
    """One run of a discrete experiment: its units' stem and key, each seed's :class:`UnitSpec`, the
    estimator that keys a unit (``estimator(spec)``: its repr is part of the fingerprint) and the
    work of a unit (``compute(spec, plot_dir)``). An experiment and its ablations build the same
    run, so they share their units (one cache) and differ in their rows only.

    ``plot_file``: the figure a unit draws (its cache entry is redone when the file is gone).
    """

    settings: Settings
    stem: str
    base: dict
    spec: Callable[[int], UnitSpec]
    estimator: Callable[[UnitSpec], Any]
    compute: Callable[[UnitSpec, Path | None], UnitResult]
    plot_file: str | None = None

    def plan(self, plot_dir: Path | None, rows: Callable[[dict], tuple[list, dict]]) -> Plan:
        """The run's :class:`Plan`: one unit per seed (:func:`discrete_units`), assembled by
        ``rows(errors) -> (rows, config)`` on the units' gathered errors."""
        units = discrete_units(
            self.settings,
            self.stem,
            self.base,
            estimator_of=lambda s: self.estimator(self.spec(s)),
            compute=lambda s, plots: self.compute(self.spec(s), plots),
            plot_dir=plot_dir,
            plot_file=self.plot_file,
        )

        def assemble(results):
            errors, timing = gather(results, units)
            out, config = rows(errors)
            choices = [results[u.name].extras.get("rte-gp") for u in units]
            if any(choices):  # rte-gp's dev choice in each unit (training seed order)
                config["rte-gp_choice"] = choices
            return out, config, list(self.settings.profile.seeds), timing

        return Plan(units, assemble)


def rte_rows(
    experiment: str, settings: Settings, errors: dict, group: str, methods, scale: tuple[float, str], full: bool
) -> tuple[dict, list, dict]:
    """``(errors, rows, config)`` of a discrete experiment's main group: every method's MSE and,
    when ``full`` (the experiment, not its ablations), every interval calibrated alike: rte's and
    each classic's (calibrated and raw, :func:`interval_rows`), and rte's posterior entropy where
    the units kept it. ``scale``: the interval scale rte's units used and its source; a classic's
    scale is its own, chosen on the same dev split (:func:`classic_scale`); either is replaced by
    the family's own dev-chosen one when the run has it (:func:`own_dev_scale`). The config holds
    each scale, its source and each interval's coverage curve."""
    errors, used, source = own_dev_scale(settings.options, errors, "rte", "rte", *scale)
    rows = mse_rows(experiment, errors, group, methods)
    # the classics' own intervals, calibrated alike; a dev variant has its MSE row and its raw
    # coverage curve (its scale is chosen from it when a regime's dev split chooses that variant)
    classics = [m for m in methods if has_own_interval(m) and not is_dev_row(m)] if full else []
    variants = [m for m in methods if has_own_interval(m) and is_dev_row(m)] if full else []
    scales, sources = {}, {}
    for m in classics:
        errors, scales[m], sources[m] = classic_scale(settings, errors, experiment, m, m)
    own = [m for m in methods if m in SELF_CALIBRATED] if full else []  # calibrated inside their fit
    if full:
        rows += [r for m in ("rte", *own, *classics) for r in interval_rows(experiment, errors, group, m, m)]
        if "rte_entropy" in errors:
            rows += entropy_rows(experiment, errors, group, (("rte", "rte_entropy"),))
    config = {
        "interval_scale": used,
        "interval_scale_source": source,
        "classic_interval_scale": scales,
        "classic_interval_scale_source": sources,
        "coverage_by_scale": {group: {m: pooled_curve(errors, m) for m in ("rte", *own, *classics, *variants)}},
        # the variant behind each learned classic's rows (an ablation's file has none of them)
        **({"classic_variants": classic_variants(experiment)} if full else {}),
    }
    return errors, rows, config


def classic_scale(
    settings: Settings, errors: dict, regime: str, method: str, prefix: str, group: str | None = None
) -> tuple[dict, float, str]:
    """``(errors, scale, source)`` of a classic's own interval (its units score it at scale 1):
    read at the scale chosen for it on ``regime``'s dev split, as rte's is
    (``search.calibration.method_scale``), or at the run's own dev-chosen one
    (:func:`own_dev_scale`, ``reproduce --calibrate``)."""
    from taskextrap.baselines.classics import scale_name
    from taskextrap.search.calibration import method_scale, recalibrated

    scale, source = method_scale(regime, scale_name(method, regime), settings.protocol, group, settings.builtin)
    if scale != 1.0:
        errors = recalibrated(errors, prefix, scale, 1.0)
    return own_dev_scale(settings.options, errors, method, prefix, scale, source)


def is_builtin_set(primitive_set: CompositionFamily) -> bool:
    """Whether ``primitive_set`` is one of the built-in sets (:data:`taskextrap.tasks.builtin.PRIMITIVE_SETS`)
    itself, not a user's set (an equal copy of a built-in one included)."""
    return PRIMITIVE_SETS.get(primitive_set.name) is primitive_set


def set_streams(primitive_set: CompositionFamily, default: CompositionFamily) -> tuple[str, ...]:
    """What a primitive set adds to the names of a composition experiment's random streams:
    nothing for the experiment's built-in ``default`` (its library, targets and draws are those of
    the runs before ``--family`` existed), its name for another built-in set, and ``set=<name>``
    for a user's set (a component no held-out pair's name is, so a user's set never draws the
    default's streams, whatever its name and pairs)."""
    if primitive_set is default:
        return ()
    return (primitive_set.name,) if is_builtin_set(primitive_set) else (f"set={primitive_set.name}",)


def set_stem(experiment: str, primitive_set: CompositionFamily, default: CompositionFamily, protocol) -> str:
    """The stem of a composition experiment's unit and plot names: ``<experiment>-<protocol>`` for
    the built-in ``default`` set, ``<experiment>-<set name>-<protocol>`` for any other set. One
    function for the units and the plots they draw, so the two never disagree."""
    named = () if primitive_set is default else (primitive_set.name,)
    return "-".join((experiment, *named, protocol.name))


def set_group(primitive_set: CompositionFamily, default: CompositionFamily, group: str) -> str:
    """A results group of a composition experiment: ``group`` for the built-in ``default`` set (the
    rows the paper's values stand beside), ``<set name>:<group>`` for any other set."""
    return group if primitive_set is default else f"{primitive_set.name}:{group}"


def set_unit_key(primitive_set: CompositionFamily, default: CompositionFamily) -> dict:
    """What a primitive set adds to a unit's key: nothing for the built-in ``default`` (its units'
    keys are those of the runs before ``--family`` existed), ``{"primitives": ...}`` for any other
    set (:func:`primitive_set_config`: its families' code and ranges key its units)."""
    return {} if primitive_set is default else {"primitives": primitive_set_config(primitive_set)}


def set_record(primitive_set: CompositionFamily, spec: str | None) -> dict:
    """A run config's ``primitive_set`` entry: the ``--family`` spec as given (the set's name when
    none was) and :func:`primitive_set_config`."""
    return {"spec": spec or primitive_set.name, **primitive_set_config(primitive_set)}


def primitive_set_config(primitive_set: CompositionFamily) -> dict:
    """A primitive set as plain data, for a unit's key and a run's config: each family's parameter
    ranges and the code of its ``fn`` (``provenance.callable_hash``: an edited formula is another
    unit), the pair split, the domain, the curve grid and the held-out relations at depth 3."""
    recipes = primitive_set.recipe_split
    return {
        "name": primitive_set.name,
        "families": {
            f.name: {
                "params": {k: list(v) for k, v in f.params.items()},
                "fn": getattr(f.fn, "__qualname__", ""),
                "fn_code": callable_hash(f.fn),
            }
            for f in primitive_set.families
        },
        "pairs": {
            "train": [list(p) for p in primitive_set.split.train],
            "test": [list(p) for p in primitive_set.split.test],
        },
        "domain": list(primitive_set.domain),
        "grid": list(primitive_set.grid),
        "held_out_relations": None if recipes is None else [f"{f} o {g}" for f, g in recipes.held_out],
    }


def mse_rows(experiment: str, errors: dict, group: str, methods) -> list:
    """The mse row of each method on ``group`` (per-seed per-target errors stacked over seeds)."""
    return [make_row(experiment, group, m, "mse", np.stack(errors[m], axis=1)) for m in methods]


def held_out_rows(experiment: str, errors: dict, ids: np.ndarray, groups, methods) -> list:
    """The mse row of each method on each held-out pair or recipe: group ``groups[j]`` holds the
    targets whose ``ids`` (n_targets,) is j. A group without targets (a tiny run may draw none
    for some pair) gets no row."""
    rows = []
    for j, name in enumerate(groups):
        held = ids == j
        if held.any():
            rows += [make_row(experiment, name, m, "mse", np.stack(errors[m], axis=1)[held]) for m in methods]
    return rows


def retrieval_rows(experiment: str, errors: dict, group: str, pairs) -> list:
    """An accuracy row on ``group`` per (method, errors key) of ``pairs``: how often the search
    retrieved the true decomposition."""
    return [make_row(experiment, group, m, "accuracy", np.stack(errors[k], axis=1)) for m, k in pairs]


OWN_DEV_SOURCE = (
    "chosen on this family's own dev split (reproduce --calibrate): the smallest grid scale whose raw 90% "
    "interval covers 90% of its dev targets' query points"
)


def own_dev_scale(options: RunOptions, errors: dict, method: str, prefix: str, used: float, source: str):
    """``(errors, scale, source)`` of ``method``'s interval: with a scale chosen on the family's own
    dev split (``options.interval_scales``), the errors read at it (``search.calibration.recalibrated``),
    that scale and :data:`OWN_DEV_SOURCE`; otherwise as the units computed them, at ``used``."""
    from taskextrap.search.calibration import recalibrated

    scale = (options.interval_scales or {}).get(method)
    if scale is None:
        return errors, used, source
    return recalibrated(errors, prefix, scale, used), scale, OWN_DEV_SOURCE


def interval_rows(experiment: str, errors: dict, group: str, method: str, prefix: str) -> list:
    """``method``'s interval on ``group`` from the keys of ``search.calibration.interval_diagnostics``
    (``prefix``): the share of each target's (draw, query) points inside the calibrated 90%
    interval, inside the raw one (``METHOD-uncalibrated``), and the calibrated interval's width."""
    pick = lambda k: np.stack(errors[k], axis=1)  # noqa: E731
    return [
        make_row(experiment, group, method, "coverage", pick(f"{prefix}_coverage")),
        make_row(experiment, group, f"{method}-uncalibrated", "coverage", pick(f"{prefix}_coverage_raw")),
        make_row(experiment, group, method, "interval-width", pick(f"{prefix}_width")),
    ]


def entropy_rows(experiment: str, errors: dict, group: str, pairs) -> list:
    """An entropy row on ``group`` per (method, errors key) of ``pairs``: each target's mean
    entropy (nats) of the method's posterior over candidate decompositions."""
    return [make_row(experiment, group, m, "entropy", np.stack(errors[k], axis=1)) for m, k in pairs]


@dataclass(frozen=True)
class UnitWork:
    """What a discrete unit scores (:func:`fit_and_score`): ``predict_all`` (the regime's own
    rows), the ``methods`` with a row, the ``regime`` (its classics' dev-chosen variants),
    ``plot(rte)`` (the unit's figures; None: none) and ``dev_split(library, rte)`` (the library's
    own dev split for ``rte-gp``'s choice, :func:`context_posterior`; None: no rte-gp)."""

    predict_all: Callable
    methods: tuple
    regime: str
    plot: Callable | None = None
    dev_split: Callable | None = None


def fit_and_score(library, estimator, targets, obs, work: UnitWork) -> UnitResult:
    """Fit ``estimator`` on ``library``, the inductive baseline and the method table's rows of
    ``methods`` beside it (their networks trained together: ``estimators.base.fit_together``;
    the baselines on the estimator's training tasks; a learned classic at ``regime``'s dev-chosen
    variant, ``classics.chosen``), then score every method of ``methods`` on the targets' query
    points. Every stream is seeded by the estimator's training seed.

    ``predict_all(rte, inductive, library, targets, obs, seed)`` returns (predictions per method,
    per-draw retrieval diagnostics, the decomposition behind the ``rte`` row) of the regime's own
    rows (``rte-gp`` predicts from that decomposition instead of searching again); the table's predictions and the
    interval diagnostics of those with an interval (prefix: the method's name) are added to
    them; errors and diagnostics are averaged per target.
    ``plot(rte)`` draws the unit's figures; ``dev_split`` as :class:`UnitWork` takes it.
    """
    predict_all, methods, regime = work.predict_all, work.methods, work.regime
    from taskextrap.baselines.classics import chosen

    t0 = time.perf_counter()
    rte, seed = estimator, estimator.seed
    pending = rte.begin_fit(library)
    inductive = DiscreteInductive(rte)
    baseline = inductive.begin_fit()
    shared = shared_draws(rte)
    table = [m for m in methods if is_method(m)]
    fitted, fits, timing = begin_methods(table, library, shared, chosen(regime), seed=seed, device=rte.device)
    training = fit_together([pending, baseline, *fits.values()])  # every network of the unit at once
    psi, decomposer = pending.jobs
    timing |= {**rte.timing_, "training_s": training}
    timing |= job_seconds(
        {"psi_training_s": psi, "decomposer_training_s": decomposer, "baselines_fit_s": baseline.jobs[0]}
        | {f"{m}_training_s": p.jobs[0] for m, p in fits.items() if p.jobs}
    )
    t = time.perf_counter()
    preds, retrieval, decomposition = predict_all(rte, inductive, library, targets, obs, seed)
    # each table row's price beside its error: its prediction's seconds (the regime's own rows,
    # predicted together above, are timed only as a whole, in evaluation_s)
    for m in table:
        t_m = time.perf_counter()
        out = fitted[m].predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=fitted[m].interval)
        timing[f"{m}_predict_s"] = time.perf_counter() - t_m
        preds[m] = out[0] if fitted[m].interval else out
        if fitted[m].interval:
            retrieval |= interval_diagnostics(m, preds[m], out[1], obs.qry_y, 1.0)
    timing["evaluation_s"] = time.perf_counter() - t
    extras = {}
    if "rte-gp" in methods:
        t = time.perf_counter()
        model = context_posterior(rte, library, work.dev_split, fitted.get("meta-gp"), regime)
        timing["rte-gp_choice_s"] = time.perf_counter() - t
        # rte's own decomposition of these contexts (the same numbers as searching again, once)
        # and its row's prediction at the queries: only the context inputs run through the chains
        t = time.perf_counter()
        preds["rte-gp"], sd = model.predict(
            obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True, decomposition=decomposition, at_query=preds["rte"]
        )
        timing["rte-gp_predict_s"] = time.perf_counter() - t
        retrieval |= interval_diagnostics("rte-gp", preds["rte-gp"], sd, obs.qry_y, model.posterior_.scale)
        extras["rte-gp"] = choice_summary(model.dev_record_)
    n = len(targets)
    errors = {m: per_target((preds[m] - obs.qry_y) ** 2, n) for m in methods}
    errors.update({k: per_target(v, n) for k, v in retrieval.items()})
    if work.plot is not None:
        work.plot(rte)
    timing["total_s"] = time.perf_counter() - t0
    return UnitResult(errors, timing, extras)


def shared_draws(rte) -> SharedDraws:
    """What the method table learns from beside a (prepared) discrete RTE: its training batches,
    a validation batch and its scaler, every stream seeded by its training seed."""
    val = training_batch(rte, rte.val_pool_, max(256, rte.n_pairs // 10), rng(rte.seed, "classics-val"))
    draws = lambda g: training_batch(rte, rte.train_pool_, rte.n_pairs, g)  # noqa: E731
    return SharedDraws(rte.scaler_, rte.protocol_.n_context, rte.train, draws, val)


def context_posterior(rte, library, dev_split: Callable | None, library_gp, regime: str):
    """``rte-gp`` of a discrete unit: its context posterior chosen on the library's own dev split,
    ``dev_split(library, rte)`` = (an unfitted RTE of the unit's settings on the dev split, the
    dev library, the dev targets) (``posterior.estimator.in_unit``)."""
    from taskextrap.posterior.estimator import in_unit

    if dev_split is None:
        raise TaskextrapError(f"rte-gp in the {regime} regime needs the library's dev split (dev_split=)")
    dev_rte, dev_library, dev_targets = dev_split(library, rte)
    return in_unit(dev_rte, rte, library, (dev_library, dev_targets), library_gp, regime, shared_draws)


@dataclass(frozen=True)
class Figures:
    """What a discrete unit draws, beside RTE's predictions: the first draw of (up to) four
    targets with RTE, the structure it retrieved and a context-only baseline on the grid ``x``
    (``<stem>-predictions.png``), and the library's embedding by ``labels(rte)``, one per
    library member (``<stem>-embedding.png``).

    ``retrieved``: (label, ``fn(rte, grid, decomposition)``); ``baseline``: (label,
    ``fn(ctx_x, ctx_y, grid)``); ``target_labels``: ``report.plots.plot_embedding``'s.
    """

    stem: str
    x: np.ndarray
    titles: list[str]
    retrieved: tuple[str, Callable]
    baseline: tuple[str, Callable]
    labels: Callable[[Any], np.ndarray]
    embedding_title: str
    target_labels: list[str] | None = None

    def draw(self, plot_dir: Path, rte, targets, obs) -> None:
        """Draw both figures of fitted ``rte`` on ``targets`` and their draws ``obs`` into ``plot_dir``."""
        from taskextrap.report.plots import plot_embedding, plot_predictions

        n_draws = len(obs) // len(targets)
        idx = np.arange(min(4, len(targets))) * n_draws
        sub = obs.subset(idx)
        grid = np.broadcast_to(self.x, (len(idx), len(self.x)))
        d = rte.decompose(sub.ctx_x, sub.ctx_y)
        curves = {
            "RTE": rte.predict(sub.ctx_x, sub.ctx_y, grid, d),
            self.retrieved[0]: self.retrieved[1](rte, grid, d),
            self.baseline[0]: self.baseline[1](sub.ctx_x, sub.ctx_y, grid),
        }
        truth = targets.subset(np.arange(len(idx))).values(grid)
        path = plot_dir / f"{self.stem}-predictions.png"
        plot_predictions(path, self.x, truth, curves, sub.ctx_x, sub.ctx_y, titles=self.titles[: len(idx)])
        plot_embedding(
            plot_dir / f"{self.stem}-embedding.png",
            rte.z_library_,
            self.labels(rte),
            self.embedding_title,
            target_labels=self.target_labels,
        )
