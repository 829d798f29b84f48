"""Compositional extrapolation (paper Section 3.3, Table 3) and its ablations (Appendix K.3).

The library holds primitives (poly, sin, tanh). Every fit sees compositions f o g of library
primitives whose family pair is a training pair only; targets are compositions of library
primitives in the held-out pairs (S o P, T o S, P o T). The library and the targets come from
fixed streams independent of the training seed, so every method and seed is scored on the same
targets and draws.

``--family`` names another primitive set (a ``tasks.primitives.CompositionFamily``: a built-in
name or a user's ``module:attr``), checked on a small sample before any work; its library and
targets come from streams of its own name (``set=<name>`` for a user's set), its units, plots and
result groups carry its name. A user's set spreads its targets evenly over its held-out pairs
(the built-in sets draw each target's pair uniformly, as the paper's runs did).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from taskextrap.baselines.context import ctx_interp
from taskextrap.baselines.discrete import DiscreteInductive
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.composition import CompositionRTE
from taskextrap.experiments.discrete import (
    table_rows,
    DiscreteRun,
    rte_rows,
    discrete_profiles,
    LIBRARY_SEED,
    embedding_of,
    estimator_settings,
    UnitWork,
    fit_and_score,
    held_out_rows,
    Figures,
    is_builtin_set,
    retrieval_rows,
    set_group,
    set_record,
    set_stem,
    set_streams,
    set_unit_key,
)
from taskextrap.profiles import DiscreteProfile
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.experiments.registry import FRESH_TEST_SEED, register
from taskextrap.experiments.units import Plan, UnitResult
from taskextrap.search.calibration import interval_diagnostics, scale_source
from taskextrap.search.posterior import entropy
from taskextrap.seeding import rng
from taskextrap.tasks.builtin import POLY_SIN_TANH
from taskextrap.tasks.dev import dev_pair_split
from taskextrap.tasks.observe import Observations, noise_scale
from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionFamily, CompositionSet, PairSplit, PrimitiveSet
from taskextrap.tasks.registry import get_primitive_set

# the regime's own rows (rte-gp: rte with a context posterior, posterior.estimator); the table's follow
OWN_METHODS = ("rte", "rte-gp", "strategy-b", "sparse-inductive", "oracle", "verified-composition")
ABLATION_METHODS = (
    "rte",
    "strategy-b",
    "no-averaging",
    "no-refinement",
    "no-verification",
    "random-constituents",
    "sparse-inductive",
    "oracle",
)


def main_methods(dev: bool = False) -> tuple[str, ...]:
    """The rows of ``composition`` (:func:`~taskextrap.experiments.discrete.table_rows`; ``dev``: a
    dev split's, with the classics' dev variants)."""
    return table_rows("composition", OWN_METHODS, dev=dev)


def all_methods(dev: bool = False) -> tuple[str, ...]:
    """Every method a unit scores: ``composition``'s rows and the ablations' (``dev``: and the
    classics' dev variants)."""
    return table_rows("composition", OWN_METHODS, ABLATION_METHODS, dev)


GROUP = "unseen-pairs"
BREAKDOWN = ("rte", "sparse-inductive", "verified-composition")  # per held-out pair


# n_library: primitives per family
PROFILES = discrete_profiles(
    {
        "quick": dict(n_library=500, n_pairs=4000, n_targets=200, n_draws=2),
        "paper": dict(n_library=3000, n_pairs=10000, n_targets=500, n_draws=4),
        "tiny": dict(n_library=10, n_pairs=200, n_targets=6, n_draws=2),
    }
)


def get_set(option: str | None) -> CompositionFamily:
    """The primitive set of ``--family``: the built-in poly-sin-tanh set (also for None), another
    built-in name, or a user's ``module:attr`` (checked on a small sample:
    :func:`taskextrap.tasks.registry.get_primitive_set`)."""
    return get_primitive_set(option or POLY_SIN_TANH.name)


def get_split(primitive_set: CompositionFamily, dev: bool, spec: str | None = None) -> PairSplit:
    """The pair split a run on ``primitive_set`` trains and scores on: the set's own, or with
    ``dev`` its dev split (:func:`taskextrap.tasks.dev.dev_pair_split`; a set that cannot have one
    is refused in one line naming it as ``spec``, the ``--family`` given, or its name)."""
    if not dev:
        return primitive_set.split
    return dev_pair_split(primitive_set.split, f"primitive set {spec or primitive_set.name!r}")


def make_library(n_per_family: int, primitive_set: CompositionFamily = POLY_SIN_TANH) -> PrimitiveSet:
    """The primitive library of ``primitive_set``, from a fixed stream."""
    streams = set_streams(primitive_set, POLY_SIN_TANH)
    return primitive_set.library(n_per_family, rng(LIBRARY_SEED, "primitives", *streams, "library"))


def make_targets(
    primitives: PrimitiveSet,
    protocol,
    n_targets: int,
    n_draws: int,
    split=PAPER_SPLIT,
    test_seed: int = FRESH_TEST_SEED,
    streams: tuple[str, ...] = (),
    balanced: bool = False,
) -> tuple[CompositionSet, Observations]:
    """Held-out-pair compositions of library primitives and their draws, from the test stream
    ``test_seed`` (keyed by the held-out pairs, so a dev split draws its own, and by ``streams``:
    a primitive set's :func:`~taskextrap.experiments.discrete.set_streams`). ``balanced`` spreads
    the targets evenly over the held-out pairs (a user's set: with a few targets, uniform draws
    may give a pair none); the built-in sets draw each target's pair uniformly, as they always did."""
    held = [*streams, *(f"{o}-{i}" for o, i in split.test)]
    targets = CompositionSet.sample(
        primitives,
        split.test,
        n_targets,
        rng(test_seed, "composition", *held, "targets"),
        train_pairs=split.train,
        balanced=balanced,
    )
    obs = protocol.draw(
        targets, n_draws, rng(test_seed, "composition", *held, protocol.name, "draws"), noise_scale(targets.family)
    )
    return targets, obs


def make_set_targets(
    primitives: PrimitiveSet,
    protocol,
    profile: DiscreteProfile,
    split: PairSplit,
    test_seed: int,
    primitive_set: CompositionFamily,
) -> tuple[CompositionSet, Observations]:
    """A unit's targets and draws (:func:`make_targets` at the profile's sizes) on the library of
    ``primitive_set``: from its streams, spread evenly over the held-out pairs for a user's set."""
    return make_targets(
        primitives,
        protocol,
        profile.n_targets,
        profile.n_draws,
        split,
        test_seed,
        set_streams(primitive_set, POLY_SIN_TANH),
        balanced=not is_builtin_set(primitive_set),
    )


def make_rte(spec: UnitSpec) -> CompositionRTE:
    """The unfitted estimator of one unit (its repr is part of the unit's cache fingerprint)."""
    return CompositionRTE(split=spec.split, **estimator_settings(spec))


def predict_all(
    rte: CompositionRTE,
    inductive: DiscreteInductive,
    primitives: PrimitiveSet,
    targets: CompositionSet,
    obs: Observations,
    seed: int,
) -> tuple[dict, dict, Decomposition]:
    """Predictions of every method at the query points, per-draw diagnostics (retrieval and
    the coverage of rte's 90% predictive interval) and the decomposition behind the ``rte`` row.

    ``strategy-b`` is the paper's plain Strategy B from the same fit: the k*k verified pairs'
    arg-min (no refinement, no averaging).
    """
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    plain = rte.decompose(cx, cy, refine=0)  # the paper's Strategy B: k*k verification only
    d = rte.refined(cx, cy, plain)
    mean, std = rte.predict(cx, cy, qx, d, return_std=True)
    outer_c, inner_c = d.extras["outer_candidates"], d.extras["inner_candidates"]
    true_o, true_i = targets.outer[obs.task], targets.inner[obs.task]
    rand = rng(seed, "random-constituents").integers(len(primitives), size=(2, len(cx)))
    given = lambda outer, inner: rte.decomposition_for(cx, cy, np.stack([outer, inner], axis=1))  # noqa: E731
    best, best_plain = d.anchors[:, 0], plain.anchors[:, 0]
    preds = {
        "rte": mean,
        "strategy-b": rte.predict(cx, cy, qx, plain.columns(0)),
        "no-averaging": rte.predict(cx, cy, qx, d.columns(0)),
        "no-refinement": rte.predict(cx, cy, qx, plain),
        "verified-composition": rte.compose(qx, best[:, 0], best[:, 1]),
        "no-verification": rte.predict(cx, cy, qx, given(outer_c[:, 0], inner_c[:, 0])),
        "random-constituents": rte.predict(cx, cy, qx, given(rand[0], rand[1])),
        "oracle": rte.predict(cx, cy, qx, given(true_o, true_i)),
        "sparse-inductive": inductive.predict(cx, cy, qx),
    }
    weights = rte.weighted(d).weights
    assert weights is not None  # weighted() fills them
    retrieval = {
        "pair_top1": ((best[:, 0] == true_o) & (best[:, 1] == true_i)).astype(float),
        "pair_top1_unrefined": ((best_plain[:, 0] == true_o) & (best_plain[:, 1] == true_i)).astype(float),
        "pair_in_candidates": ((outer_c == true_o[:, None]).any(1) & (inner_c == true_i[:, None]).any(1)).astype(float),
        **interval_diagnostics("rte", mean, std, obs.qry_y, rte.calibrated_scale()),
        "rte_entropy": entropy(weights),
    }
    return preds, retrieval, d


EMBEDDING_TITLE = "primitives: proxy embedding by family"


def run_unit(spec: UnitSpec, plot_dir: Path | None = None) -> UnitResult:
    """Fit RTE and the baseline for the unit's training seed on ``spec.split.train`` (a split of
    the primitive set ``spec.family``'s families); evaluate every method on targets of the
    held-out pairs ``spec.split.test`` drawn from its test seed; ``plot_dir``: where it draws its
    figures (None: none)."""
    primitives, rte, targets, obs, work = unit_inputs(spec, plot_dir)
    unit = fit_and_score(primitives, rte, targets, obs, work)
    # Which held-out pair each target belongs to, for the per-pair breakdown of the table.
    unit.errors["pair_id"] = np.array([spec.split.test.index(tuple(p)) for p in targets.pair], dtype=float)
    return unit


def unit_inputs(spec: UnitSpec, plot_dir: Path | None = None) -> tuple:
    """What :func:`run_unit` fits and scores (``discrete.fit_and_score``'s arguments): the
    unit's primitives, its estimator (unfitted), its targets and their observations, and its work."""
    primitive_set, protocol, profile, split = spec.family, spec.protocol, spec.profile, spec.split
    primitives = make_library(profile.n_library, primitive_set)
    targets, obs = make_set_targets(primitives, protocol, profile, split, spec.test_seed, primitive_set)
    stem = set_stem("composition", primitive_set, POLY_SIN_TANH, protocol)
    figures = Figures(
        stem,
        np.linspace(primitives.domain[0], primitives.domain[1], 200),
        [f"{o} o {i}" for o, i in targets.pair[:4]],
        ("verified composition", lambda rte, grid, d: rte.compose(grid, d.anchors[:, 0, 0], d.anchors[:, 0, 1])),
        ("ctx-interp", ctx_interp),
        lambda rte: primitives.family_names.astype(str),
        EMBEDDING_TITLE,
        target_labels=[],
    )
    plot = None if plot_dir is None else lambda rte: figures.draw(plot_dir, rte, targets, obs)
    dev = lambda lib, rte: dev_split_of(spec, lib)  # noqa: E731
    work = UnitWork(predict_all, all_methods(spec.dev), "composition", plot, dev)
    return primitives, make_rte(spec), targets, obs, work


def dev_split_of(spec: UnitSpec, primitives: PrimitiveSet) -> tuple[CompositionRTE, PrimitiveSet, CompositionSet]:
    """The unit's own dev split for ``rte-gp``'s choice (``experiments.discrete.context_posterior``):
    an RTE of the unit's settings trained on the dev split of its pair split (one training pair
    held out: ``tasks.dev.dev_pair_split``), the same primitives, and compositions of the held-out
    training pair from a stream of the unit's training seed."""
    split = dev_pair_split(spec.split, f"the pair split of unit seed {spec.seed}")
    targets, _ = make_set_targets(primitives, spec.protocol, spec.profile, split, spec.seed, spec.family)
    return CompositionRTE(split=split, **estimator_settings(spec)), primitives, targets


def set_run(experiment: str, settings: Settings, key: dict) -> tuple[DiscreteRun, CompositionFamily, PairSplit]:
    """The run of a composition experiment on ``settings``' primitive set (the built-in one by
    default) and its pair split (a dev split of it under ``--split dev``): its units keyed by
    ``key`` and what every composition unit is keyed by; ``experiment`` names the units."""
    primitive_set = settings.family or get_set(None)
    split = get_split(primitive_set, settings.dev, settings.family_spec)
    embedding = embedding_of(settings, "composition")
    base = dict(
        experiment=experiment,
        split=split,
        protocol=settings.protocol,
        profile=settings.profile.to_dict(),
        embedding=embedding,
        test_seed=settings.test_seed,
        **key,
        **set_unit_key(primitive_set, POLY_SIN_TANH),
    )
    stem = set_stem(experiment, primitive_set, POLY_SIN_TANH, settings.protocol)
    spec = lambda s: UnitSpec.of(settings, s, primitive_set, embedding, split=split)  # noqa: E731
    return DiscreteRun(settings, stem, base, spec, make_rte, run_unit, f"{stem}-predictions.png"), primitive_set, split


def _run(experiment: str, methods: tuple[str, ...], settings: Settings, plot_dir: Path | None) -> Plan:
    run, primitive_set, split = set_run("composition", settings, {"methods": all_methods(settings.dev)})
    group = functools.partial(set_group, primitive_set, POLY_SIN_TANH)  # a results group of this set
    full = experiment == "composition"  # rte's calibration beside its MSE; one group per held-out pair
    source = scale_source("composition", settings.protocol, None, settings.builtin, primitive_set.name)
    scale = (make_rte(run.spec(0)).calibrated_scale(), source)

    def rows(errors):
        errors, out, calibration = rte_rows(experiment, settings, errors, group(GROUP), methods, scale, full)
        if full and len(split.test) > 1:
            pairs = [group(f"{o} o {i}") for o, i in split.test]
            out += held_out_rows(experiment, errors, errors["pair_id"][0], pairs, BREAKDOWN)
        out += retrieval_rows(
            experiment,
            errors,
            group("pair-retrieved"),
            (
                ("rte", "pair_top1"),
                ("no-refinement", "pair_top1_unrefined"),
                ("top-k-candidates", "pair_in_candidates"),
            ),
        )
        config = {
            **set_config(settings, primitive_set, split),
            "library_seed": LIBRARY_SEED,
            "units": "shared with composition / composition-ablations under OUT/units",
            **calibration,
        }
        return out, config

    return run.plan(plot_dir, rows)


def set_config(settings: Settings, primitive_set: CompositionFamily, split: PairSplit) -> dict:
    """What a composition run's config records of its set, pairs, protocol, profile, Gamma and test seed."""
    return {
        "primitive_set": set_record(primitive_set, settings.family_spec),
        "pairs": {"train": split.train, "test": split.test},
        "protocol": {**vars(settings.protocol)},
        "profile": settings.profile.to_dict(),
        "embedding": embedding_of(settings, "composition"),
        "test_seed": settings.test_seed,
    }


COMPOSITION_OPTIONS = ("protocol", "family", "embedding", "test_seed", "device")
# composition and its ablations register alike (they share their units)
register_composition = functools.partial(
    register, profiles=PROFILES, options=COMPOSITION_OPTIONS, regime="composition", dev=True, family=get_set
)


@register_composition(
    "composition", "Table 3: compositional extrapolation (train P o S etc., test S o P, T o S, P o T)"
)
def run_composition(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The composition experiment: rte, sparse-inductive, oracle, verified-composition and sanity baselines."""
    return _run("composition", main_methods(settings.dev), settings, plot_dir)


@register_composition("composition-ablations", "App. K.3: composition ablations (no verification, random constituents)")
def run_composition_ablations(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The composition ablations: the same fits as ``composition`` (shared unit cache), other rows."""
    return _run("composition-ablations", ABLATION_METHODS, settings, None)
