"""Length extrapolation (paper Section 3.2, Table 2) and its ablations (Appendix K.2).

The library holds ladder tasks of every training level (polynomials of degree 1-8). Targets are
held-out-level tasks (degree 9) whose predecessor is a library member of the level below: one
extension step beyond anything any fit has seen. The library and the targets come from fixed
streams that do not depend on the training seed, so every method and seed is scored on the
same targets and draws; a training seed changes the library's observations and every network.
"""

from __future__ import annotations

import functools

from pathlib import Path

import numpy as np

from taskextrap.baselines.context import ctx_polyfit
from taskextrap.baselines.discrete import DiscreteInductive
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.length import LengthRTE
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
    Figures,
    retrieval_rows,
)
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.experiments.registry import FRESH_TEST_SEED, register
from taskextrap.experiments.units import Plan, UnitResult
from taskextrap.provenance import callable_hash
from taskextrap.search.calibration import interval_diagnostics, scale_source
from taskextrap.search.posterior import entropy
from taskextrap.seeding import rng
from taskextrap.tasks.dev import dev_ladder
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder, LadderSet
from taskextrap.tasks.observe import Observations, noise_scale
from taskextrap.tasks.registry import resolve

# the regime's own rows (rte-gp: rte with a context posterior, posterior.estimator); the table's follow
OWN_METHODS = ("rte", "rte-gp", "strategy-b", "sparse-inductive", "oracle")
ABLATION_METHODS = (
    "rte",
    "strategy-b",
    "no-averaging",
    "rank3-anchor",
    "random-anchors",
    "zero-shift",
    "sparse-inductive",
    "oracle",
)


def main_methods(dev: bool = False) -> tuple[str, ...]:
    """The rows of ``length`` (:func:`~taskextrap.experiments.discrete.table_rows`; ``dev``: a
    dev split's, with the classics' dev variants)."""
    return table_rows("length", OWN_METHODS, dev=dev)


def all_methods(dev: bool = False) -> tuple[str, ...]:
    """Every method a unit scores: ``length``'s rows and the ablations' (``dev``: and the
    classics' dev variants)."""
    return table_rows("length", OWN_METHODS, ABLATION_METHODS, dev)


GROUP = "degree9"


# n_library: tasks per level
PROFILES = discrete_profiles(
    {
        "quick": dict(n_library=250, n_pairs=6000, n_targets=100, n_draws=8),
        "paper": dict(n_library=1000, n_pairs=20000, n_targets=200, n_draws=16),
        "tiny": dict(n_library=12, n_pairs=300, n_targets=6, n_draws=2),
    }
)


def make_library(ladder: Ladder, n_per_level: int) -> LadderSet:
    """The library: ``n_per_level`` tasks of every training level, from a fixed stream."""
    return LadderSet.sample_library(ladder, n_per_level, rng(LIBRARY_SEED, ladder.name, "library"))


def make_targets(
    library: LadderSet, protocol, n_targets: int, n_draws: int, test_seed: int = FRESH_TEST_SEED
) -> tuple[LadderSet, Observations]:
    """Held-out-level targets: one extension step of library tasks at the top training level,
    from the test stream ``test_seed`` (keyed by the held-out level, so a dev ladder draws its own)."""
    ladder = library.family
    g = rng(test_seed, ladder.name, ladder.test_level, "targets")
    top = np.flatnonzero(library.level == ladder.test_level - 1)
    if len(top) == 0:
        raise TaskextrapError(f"ladder {ladder.name!r}: the library has no level-{ladder.test_level - 1} task")
    targets = LadderSet.extend(library, top[g.integers(len(top), size=n_targets)], g)
    obs = protocol.draw(
        targets, n_draws, rng(test_seed, ladder.name, ladder.test_level, protocol.name, "draws"), noise_scale(ladder)
    )
    return targets, obs


def library_dev_split(library: LadderSet, n_targets: int, seed: int) -> tuple[LadderSet, LadderSet]:
    """The library's own dev split (``tasks.dev.dev_ladder``): its tasks below the top training
    level are the dev library, and ``n_targets`` one-step extensions of its tasks one level below
    the top (a stream of ``seed``) the dev targets, as :func:`make_targets` makes the real ones."""
    ladder = dev_ladder(library.family)
    keep = np.isin(library.level, ladder.train_levels)
    params = library.params[keep][:, : ladder.n_coefs]  # a lower ladder's tasks have no higher coefficient
    dev_library = LadderSet(ladder, params, library.level[keep], library.parent[keep])
    g = rng(seed, ladder.name, ladder.test_level, "rte-gp-dev-targets")
    top = np.flatnonzero(dev_library.level == ladder.test_level - 1)
    return dev_library, LadderSet.extend(dev_library, top[g.integers(len(top), size=n_targets)], g)


def make_rte(spec: UnitSpec) -> LengthRTE:
    """The unfitted estimator of one unit (its repr is part of the unit's cache fingerprint)."""
    return LengthRTE(**estimator_settings(spec))


def predict_all(
    rte: LengthRTE, inductive: DiscreteInductive, library: LadderSet, targets: LadderSet, obs: Observations, seed: int
) -> tuple[dict[str, np.ndarray], dict, Decomposition]:
    """Predictions of every method at the query points, per-draw diagnostics (retrieval and
    the coverage of rte's 90% predictive interval) and the decomposition behind the ``rte`` row.

    ``strategy-b`` is the paper's plain Strategy B from the same fit: the decomposer's top-``k``
    (no wider screening), the coefficient search, the arg-min (no averaging).
    """
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    d = rte.decompose(cx, cy)
    mean, std = rte.predict(cx, cy, qx, decomposition=d, return_std=True)
    parent = targets.parent[obs.task]
    random_anchor = rng(seed, "random-anchors").integers(len(library), size=len(cx))
    rank3 = min(2, d.anchors.shape[1] - 1)
    preds = {
        "rte": mean,
        "strategy-b": rte.predict(cx, cy, qx, rte.decompose(cx, cy, screen_fraction=0.0).columns(0)),
        "no-averaging": rte.predict(cx, cy, qx, d.columns(0)),
        "rank3-anchor": rte.predict(cx, cy, qx, d.columns(rank3)),
        "random-anchors": rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, random_anchor, d.extras["guess_phi"])),
        "zero-shift": rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, d.anchors[:, 0], np.zeros(len(cx)))),
        "oracle": rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, parent, targets.new_coef()[obs.task])),
        "sparse-inductive": inductive.predict(cx, cy, qx),
    }
    weights = rte.weighted(d).weights
    assert weights is not None  # weighted() fills them
    retrieval = {
        "parent_top1": (d.anchors[:, 0] == parent).astype(float),
        "parent_in_topk": (d.anchors == parent[:, None]).any(1).astype(float),
        **interval_diagnostics("rte", mean, std, obs.qry_y, rte.calibrated_scale()),
        "rte_entropy": entropy(weights),
    }
    return preds, retrieval, d


def run_unit(spec: UnitSpec, plot_dir: Path | None = None) -> UnitResult:
    """Fit RTE and the baseline for the unit's training seed on its ladder and evaluate every
    method on the targets of its test seed; ``plot_dir``: where it draws its figures (None: none)."""
    return fit_and_score(*unit_inputs(spec, plot_dir))


def unit_inputs(spec: UnitSpec, plot_dir: Path | None = None) -> tuple:
    """What :func:`run_unit` fits and scores (``discrete.fit_and_score``'s arguments): the
    unit's library, its estimator (unfitted), its targets and their observations, and its work."""
    ladder, protocol, profile = spec.family, spec.protocol, spec.profile
    library = make_library(ladder, profile.n_library)
    targets, obs = make_targets(library, protocol, profile.n_targets, profile.n_draws, spec.test_seed)
    figures = Figures(
        f"{ladder.name}-{protocol.name}",
        ladder.grid(200),
        [f"level {ladder.test_level} target {i}" for i in range(4)],
        ("retrieved predecessor", lambda rte, grid, d: library.values(grid, d.anchors[:, 0])),
        ("ctx-polyfit", ctx_polyfit),
        lambda rte: library.region.astype(str),
        f"{ladder.name}: proxy embedding of the library by level",
    )
    plot = None if plot_dir is None else lambda rte: figures.draw(plot_dir, rte, targets, obs)
    dev = lambda lib, rte: (make_rte(spec), *library_dev_split(lib, profile.n_targets, spec.seed))  # noqa: E731
    work = UnitWork(predict_all, all_methods(spec.dev), "length", plot, dev)
    return library, make_rte(spec), targets, obs, work


def run_ladder(settings: Settings) -> Ladder:
    """The ladder a run's units climb: ``--family`` or the built-in one, its dev ladder under
    ``--split dev``."""
    ladder = settings.family or get_ladder(None)
    return dev_ladder(ladder) if settings.dev else ladder


def _run(experiment: str, methods: tuple[str, ...], settings: Settings, plot_dir: Path | None) -> Plan:
    profile, protocol, test_seed = settings.profile, settings.protocol, settings.test_seed
    embedding = embedding_of(settings, "length")
    ladder = run_ladder(settings)
    base = dict(
        experiment="length",
        ladder=ladder.name,
        basis=getattr(ladder.basis, "__qualname__", ""),
        basis_code=callable_hash(ladder.basis),
        domain=ladder.domain,
        coef_range=ladder.coef_range,
        levels=ladder.train_levels,
        test_level=ladder.test_level,
        protocol=protocol,
        profile=profile.to_dict(),
        embedding=embedding,
        test_seed=test_seed,
        methods=all_methods(settings.dev),
    )
    spec = lambda s: UnitSpec.of(settings, s, ladder, embedding)  # noqa: E731
    stem = f"{ladder.name}-{protocol.name}"
    run = DiscreteRun(settings, f"length-{stem}", base, spec, make_rte, run_unit, f"{stem}-predictions.png")
    scale = (
        make_rte(spec(0)).calibrated_scale(),
        scale_source("length", protocol, None, settings.builtin, ladder.name),
    )
    full = experiment == "length"  # rte's calibration beside its MSE

    def rows(errors):
        errors, out, calibration = rte_rows(experiment, settings, errors, group_name(ladder), methods, scale, full)
        out += retrieval_rows(
            experiment,
            errors,
            "predecessor-retrieved",
            (("rte", "parent_top1"), ("top-k-candidates", "parent_in_topk")),
        )
        config = {
            "ladder": ladder.name,
            "protocol": {**vars(protocol)},
            "profile": profile.to_dict(),
            "train_levels": list(ladder.train_levels),
            "test_level": ladder.test_level,
            "embedding": embedding,
            "library_seed": LIBRARY_SEED,
            "test_seed": test_seed,
            "units": "shared with length / length-ablations under OUT/units",
            **calibration,
        }
        return out, config

    return run.plan(plot_dir, rows)


def group_name(ladder: Ladder) -> str:
    """The results group of the held-out level: ``degree9`` (the paper's rows, beside which the
    paper's values are printed) for the built-in polynomial ladder object only; any other ladder
    (a user's, even one named "polynomial", or a dev split) is ``<name>-level<test_level>``."""
    return GROUP if ladder is POLYNOMIAL_LADDER else f"{ladder.name}-level{ladder.test_level}"


def get_ladder(option: str | None) -> Ladder:
    """The built-in polynomial ladder (also for None), or a user's Ladder given as ``module:attr``
    (:func:`taskextrap.tasks.registry.resolve`), whose basis is checked once on a small sample
    (:func:`taskextrap.tasks.registry.check_ladder`)."""
    ladder = resolve(option or POLYNOMIAL_LADDER.name, Ladder, {POLYNOMIAL_LADDER.name: POLYNOMIAL_LADDER}, "ladder")
    if ladder is not POLYNOMIAL_LADDER:
        ladder.check(f"ladder {option!r}")
    return ladder


LENGTH_OPTIONS = ("protocol", "family", "embedding", "test_seed", "device")
# length and its ablations register alike (they share their units)
register_length = functools.partial(
    register, profiles=PROFILES, options=LENGTH_OPTIONS, regime="length", dev=True, family=get_ladder
)


@register_length("length", "Table 2: length extrapolation (degree-1..8 library -> degree-9 targets)")
def run_length(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The length experiment: rte, sparse-inductive, oracle and the context-only baselines."""
    return _run("length", main_methods(settings.dev), settings, plot_dir)


@register_length("length-ablations", "App. K.2: length ablations (rank-3 anchor, random anchors, zero shift)")
def run_length_ablations(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The length ablations: the same fits as ``length`` (shared unit cache), other rows."""
    return _run("length-ablations", ABLATION_METHODS, settings, None)
