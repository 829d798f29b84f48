"""Multi-step compositional extrapolation (paper App. B.1.2, table tab:comp_extrap_multistep).

The library holds the authors' depth-3 primitives (poly, sin, tanh, each rescaled to [-5, 5] on
the domain) with their curves. Targets are chains h = r_3 o r_2 o r_1 of library primitives
whose recipe applies tanh directly to a sin output: the 6 held-out recipes; every fit sees the
21 training recipes only (and, for the identity padding, shallower compositions that hold no
held-out relation). The library and the targets come from fixed streams independent of the
training seed, so every method and seed is scored on the same targets and draws.

``--family`` names another primitive set (``tasks.primitives.CompositionFamily``) that carries a
depth-3 recipe split; as in ``composition``, its streams, units, plots and groups carry its name.
"""

from __future__ import annotations

import functools
from typing import Any
from pathlib import Path

import numpy as np

from taskextrap.baselines.context import ctx_interp
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.composition_depth3 import Composition3RTE
from taskextrap.experiments.discrete import (
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
    retrieval_rows,
    set_group,
    set_record,
    set_stem,
    set_streams,
    set_unit_key,
    table_rows,
)
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.experiments.registry import FRESH_TEST_SEED, register
from taskextrap.experiments.units import Plan, UnitResult
from taskextrap.operators.train import TrainConfig
from taskextrap.search.calibration import interval_diagnostics, scale_source
from taskextrap.seeding import rng
from taskextrap.tasks.builtin import POLY_SIN_TANH_RESCALED
from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT, ChainSet, RecipeSplit, dev_recipe_split, recipe_name
from taskextrap.tasks.observe import Observations, noise_scale
from taskextrap.tasks.primitives import CompositionFamily, PrimitiveSet
from taskextrap.tasks.registry import get_primitive_set

EXPERIMENT = "composition-depth3"
REGIME = "composition-depth3"  # its regime (tasks.regimes): protocols, default Gamma, interval scales
# the regime's own rows; the method table's follow (main_methods)
# the regime's own rows (rte-gp: rte with a context posterior, posterior.estimator); the table's follow
OWN_METHODS = (
    "rte",
    "rte-gp",
    "sparse-inductive",
    "oracle",
    "verified-composition",
    "no-verification",
    "no-refinement",
)
GROUP = "unseen-recipes"


def main_methods(dev: bool = False) -> tuple[str, ...]:
    """The rows of ``composition-depth3``: the regime's own, then the method table's
    (``baselines.table``); a dev split's run has no ``rte-gp`` and scores the classics' dev
    variants (``experiments.discrete.table_rows``)."""
    return table_rows(REGIME, OWN_METHODS, dev=dev)


BREAKDOWN = ("rte", "sparse-inductive", "verified-composition")  # per held-out recipe
SEARCH_SETTINGS = ("k", "keep", "refine_rounds", "n_average", "temperature", "identity", "pad_share", "psi_context")
SLOTS = ("outer", "middle", "inner")  # r_3, r_2, r_1 of h = r_3 o r_2 o r_1
# The default test stream of this experiment. A smoke run during development (quick profile,
# before any choice was made on the dev split) showed the draws of FRESH_TEST_SEED, so the final
# tables take fresh ones (DESIGN.md, "Splits": looked-at test draws move to fresh seeds).
DEPTH3_TEST_SEED = 31_338


# n_library: primitives per family (the paper: 500); n_pairs: compositions per pass of Psi_chain's
# and the inductive baseline's training; Psi_chain's optimiser steps count rows (query points) of
# 2,048; the decomposer's, compositions of 512. The authors train each network 25,000 steps of 64
# compositions; the paper profile's budgets are what 2 CPU cores do in about 30 minutes per protocol.
PROFILES = discrete_profiles(
    {
        "quick": dict(n_library=500, n_pairs=2000, n_targets=200, n_draws=2),
        "paper": dict(n_library=500, n_pairs=8000, n_targets=1000, n_draws=1),
        "tiny": dict(n_library=8, n_pairs=100, n_targets=6, n_draws=1),
    },
    train={
        "quick": TrainConfig(steps=2000, batch=2048, eval_every=100),
        "paper": TrainConfig(steps=6000, batch=2048, eval_every=200),
        "tiny": TrainConfig(steps=10, batch=256, eval_every=5),
    },
    decomposer_train={
        "quick": TrainConfig(steps=1500, batch=512, eval_every=100),
        "paper": TrainConfig(steps=3000, batch=512, eval_every=100),
        "tiny": TrainConfig(steps=10, batch=64, eval_every=5),
    },
)


def get_set(option: str | None) -> CompositionFamily:
    """The primitive set of ``--family``: the built-in poly-sin-tanh-rescaled set (also for None),
    another built-in name, or a user's ``module:attr``; it must carry a depth-3 recipe split
    (:func:`taskextrap.tasks.registry.get_primitive_set`)."""
    return get_primitive_set(option or POLY_SIN_TANH_RESCALED.name, depth3=True)


def get_split(primitive_set: CompositionFamily, dev: bool, spec: str | None = None) -> RecipeSplit:
    """The recipe split a run on ``primitive_set`` trains and scores on: the set's own, or with
    ``dev`` its dev split (:func:`taskextrap.tasks.chains.dev_recipe_split`; a set that cannot have
    one is refused in one line naming it as ``spec``, the ``--family`` given, or its name)."""
    recipes = primitive_set.recipe_split
    assert recipes is not None  # get_set refuses a set without one
    return dev_recipe_split(recipes, f"primitive set {spec or primitive_set.name!r}") if dev else recipes


def make_library(n_per_family: int, primitive_set: CompositionFamily = POLY_SIN_TANH_RESCALED) -> PrimitiveSet:
    """The depth-3 primitive library (default: rescaled poly, sin, tanh), from a fixed stream."""
    streams = set_streams(primitive_set, POLY_SIN_TANH_RESCALED)
    return primitive_set.library(n_per_family, rng(LIBRARY_SEED, "primitives-depth3", *streams, "library"))


def make_targets(
    primitives: PrimitiveSet,
    protocol,
    n_targets: int,
    n_draws: int,
    split: RecipeSplit = PAPER_RECIPE_SPLIT,
    test_seed: int = FRESH_TEST_SEED,
    streams: tuple[str, ...] = (),
) -> tuple[ChainSet, Observations]:
    """Held-out-recipe chains of library primitives and their draws, from the test stream
    ``test_seed`` (keyed by the held-out recipes, so a dev split draws its own, and by ``streams``:
    a primitive set's :func:`~taskextrap.experiments.discrete.set_streams`)."""
    held = [*streams, *sorted(recipe_name(r) for r in split.test)]
    targets = ChainSet.sample(
        primitives, split.test, n_targets, rng(test_seed, EXPERIMENT, *held, "targets"), train_recipes=split.train
    )
    obs = protocol.draw(
        targets, n_draws, rng(test_seed, EXPERIMENT, *held, protocol.name, "draws"), noise_scale(targets.family)
    )
    return targets, obs


def make_rte(spec: UnitSpec) -> Composition3RTE:
    """The unfitted estimator of one unit (its repr is part of the unit's cache fingerprint)."""
    return Composition3RTE(split=spec.split, **estimator_settings(spec))


def predict_all(
    rte: Composition3RTE, inductive, primitives: PrimitiveSet, targets: ChainSet, obs: Observations, seed: int
) -> tuple[dict, dict, Decomposition]:
    """Predictions of every method at the query points, per-draw diagnostics (retrieval and
    the coverage of rte's 90% predictive interval) and the decomposition behind the ``rte`` row."""
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    plain = rte.decompose(cx, cy, refine=0)  # the paper's search: k^3 verification only
    d = rte.refined(cx, cy, plain)
    mean, std = rte.predict(cx, cy, qx, d, return_std=True)
    cands = d.extras["candidates"]  # (n, depth, k)
    truth = targets.chains[obs.task]  # (n, depth)
    given = lambda chains: rte.decomposition_for(cx, cy, chains)  # noqa: E731
    preds = {
        "rte": mean,
        "no-refinement": rte.predict(cx, cy, qx, plain),
        "verified-composition": rte.compose(qx, d.anchors[:, 0]),
        "no-verification": rte.predict(cx, cy, qx, given(cands[:, :, 0])),
        "oracle": rte.predict(cx, cy, qx, given(truth)),
        "sparse-inductive": inductive.predict(cx, cy, qx),
    }
    retrieval = {
        "chain_top1": (d.anchors[:, 0] == truth).all(axis=1).astype(float),
        "chain_top1_unrefined": (plain.anchors[:, 0] == truth).all(axis=1).astype(float),
        "chain_in_candidates": (cands == truth[:, :, None]).any(axis=2).all(axis=1).astype(float),
        **interval_diagnostics("rte", mean, std, obs.qry_y, rte.calibrated_scale()),
    }
    for j, slot in enumerate(SLOTS):  # where retrieval loses the chain: each slot's recall
        retrieval[f"{slot}_in_candidates"] = (cands[:, j] == truth[:, j : j + 1]).any(axis=1).astype(float)
    return preds, retrieval, d


EMBEDDING_TITLE = "primitives: proxy embedding by family"


def run_unit(spec: UnitSpec, plot_dir: Path | None = None) -> UnitResult:
    """Fit RTE and the baseline for the unit's training seed on ``spec.split.train`` (a recipe
    split of the primitive set ``spec.family``'s families); evaluate every method on chains of
    the held-out recipes ``spec.split.test`` drawn from its test seed; ``plot_dir``: where it
    draws its figures (None: none)."""
    primitive_set, protocol, profile, split = spec.family, spec.protocol, spec.profile, spec.split
    test_seed = spec.test_seed
    streams = set_streams(primitive_set, POLY_SIN_TANH_RESCALED)
    primitives = make_library(profile.n_library, primitive_set)
    targets, obs = make_targets(primitives, protocol, profile.n_targets, profile.n_draws, split, test_seed, streams)
    stem = set_stem(EXPERIMENT, primitive_set, POLY_SIN_TANH_RESCALED, protocol)
    figures = Figures(
        stem,
        np.linspace(primitives.domain[0], primitives.domain[1], 200),
        list(targets.region[:4]),
        ("verified composition", lambda rte, grid, d: rte.compose(grid, d.anchors[:, 0])),
        ("ctx-interp", ctx_interp),
        lambda rte: rte.primitives_.family_names.astype(str),  # the identity primitive among them
        EMBEDDING_TITLE,
        target_labels=[],
    )
    plot = None if plot_dir is None else lambda rte: figures.draw(plot_dir, rte, targets, obs)
    dev = lambda lib, rte: dev_split_of(spec, lib, streams)  # noqa: E731
    work = UnitWork(predict_all, main_methods(spec.dev), REGIME, plot, dev)
    unit = fit_and_score(primitives, make_rte(spec), targets, obs, work)
    # Which held-out recipe each target belongs to, for the per-recipe breakdown of the table.
    unit.errors["recipe_id"] = np.array([split.test.index(tuple(r)) for r in targets.recipe], dtype=float)
    return unit


def dev_split_of(spec: UnitSpec, primitives, streams: tuple) -> tuple[Composition3RTE, Any, ChainSet]:
    """The unit's own dev split for ``rte-gp``'s choice (``experiments.discrete.context_posterior``):
    an RTE of the unit's settings trained on the dev split of its recipe split
    (``tasks.chains.dev_recipe_split``), the same primitives, and chains of the held-out training
    recipes from a stream of the unit's training seed."""
    split = dev_recipe_split(spec.split, f"the recipe split of unit seed {spec.seed}")
    profile = spec.profile
    targets, _ = make_targets(primitives, spec.protocol, profile.n_targets, profile.n_draws, split, spec.seed, streams)
    return Composition3RTE(split=split, **estimator_settings(spec)), primitives, targets


@register(
    EXPERIMENT,
    "App. B.1.2: depth-3 compositions (train 21 recipes, test the 6 that apply tanh to a sin output)",
    PROFILES,
    options=("protocol", "family", "embedding", "test_seed", "device"),
    regime=REGIME,
    dev=True,
    family=get_set,
)
def run_composition_depth3(settings: Settings, cache_dir: Path | None, plot_dir: Path | None) -> Plan:
    """The depth-3 experiment: rte, sparse-inductive, oracle, verified-composition, no-verification,
    no-refinement, the sanity baselines and how often the true chain is found."""
    options, profile, protocol, embedding = (
        settings.options,
        settings.profile,
        settings.protocol,
        embedding_of(settings, REGIME),
    )
    test_seed = DEPTH3_TEST_SEED if options.test_seed is None else settings.test_seed
    primitive_set = settings.family or get_set(None)
    split = get_split(primitive_set, settings.dev, settings.family_spec)
    group = functools.partial(set_group, primitive_set, POLY_SIN_TANH_RESCALED)  # a results group of this set
    methods = main_methods(settings.dev)
    base = dict(
        experiment=EXPERIMENT,
        split=repr(split),
        protocol=protocol,
        profile=profile.to_dict(),
        embedding=embedding,
        test_seed=test_seed,
        methods=methods,
        **set_unit_key(primitive_set, POLY_SIN_TANH_RESCALED),
    )
    stem = set_stem(EXPERIMENT, primitive_set, POLY_SIN_TANH_RESCALED, protocol)
    spec = lambda s: UnitSpec.of(settings, s, primitive_set, embedding, split=split, test_seed=test_seed)  # noqa: E731
    run = DiscreteRun(settings, stem, base, spec, make_rte, run_unit, f"{stem}-predictions.png")
    chosen = make_rte(spec(0))  # the settings every unit's estimator has
    source = scale_source("composition-depth3", protocol, None, settings.builtin, primitive_set.name)

    def rows(errors):
        errors, out, calibration = rte_rows(
            EXPERIMENT, settings, errors, group(GROUP), methods, (chosen.calibrated_scale(), source), True
        )
        recipes = [group(recipe_name(recipe)) for recipe in split.test]
        out += held_out_rows(EXPERIMENT, errors, errors["recipe_id"][0], recipes, BREAKDOWN)
        out += retrieval_rows(
            EXPERIMENT,
            errors,
            group("chain-retrieved"),
            (
                ("rte", "chain_top1"),
                ("no-refinement", "chain_top1_unrefined"),
                ("top-k-candidates", "chain_in_candidates"),
                *((f"top-k-{slot}", f"{slot}_in_candidates") for slot in SLOTS),
            ),
        )
        per_seed = [
            float(np.mean(a) / np.mean(b)) for a, b in zip(errors["rte"], errors["sparse-inductive"], strict=True)
        ]
        config = {
            "primitive_set": set_record(primitive_set, settings.family_spec),
            "recipes": {
                "train": [recipe_name(r) for r in split.train],
                "test": [recipe_name(r) for r in split.test],
                "held_out_relations": [f"{f} o {g}" for f, g in split.held_out],
            },
            "protocol": {**vars(protocol)},
            "profile": profile.to_dict(),
            "embedding": embedding,
            "library_seed": LIBRARY_SEED,
            "test_seed": test_seed,
            "search": {k: getattr(chosen, k) for k in SEARCH_SETTINGS},
            **calibration,
            "rte_over_sparse_inductive": {"per_seed": per_seed, "mean": float(np.mean(per_seed))},
        }
        return out, config

    return run.plan(plot_dir, rows)
