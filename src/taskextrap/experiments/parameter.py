"""Parameter extrapolation (paper Section 3.1, Table 1): five families, F1 library, F2 targets.

For each family and training seed: draw the library (100 F1_1 + 100 F1_2 tasks in the paper
profile), fit RTE and every baseline on it, then evaluate on held-out F2 targets observed through
the protocol. Targets and their draws come from a test stream that does not depend on the
training seed, so every method and seed is scored on the same tasks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.baselines.inductive import INDUCTIVE_KINDS, InductiveBaseline, library_batch
from taskextrap.baselines.method import Method, SharedDraws
from taskextrap.baselines.table import begin_methods, has_own_interval, is_method, method_rows
from taskextrap.baselines.oracles import TransductiveOracle
from taskextrap.estimators.base import Decomposition, PendingFit, fit_together
from taskextrap.estimators.parameter import RTE
from taskextrap.posterior.estimator import RTEGP, SELF_CALIBRATED, choice_summary, in_unit
from taskextrap.experiments.artifacts import cached_fit
from taskextrap.baselines.classics import classic_variants
from taskextrap.experiments.discrete import classic_scale, interval_rows, own_dev_scale
from taskextrap.profiles import ParameterProfile, profile_table
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, Unit, UnitResult, gather, per_target, seed_units
from taskextrap.errors import TaskextrapError
from taskextrap.files import read_state, write_state_atomic
from taskextrap.operators.train import TrainConfig, job_seconds
from taskextrap.report.schema import make_row
from taskextrap.search.index import nearest
from taskextrap.search.calibration import interval_diagnostics, pooled_curve, scale_and_source
from taskextrap.search.posterior import entropy
from taskextrap.seeding import rng
from taskextrap.tasks.builtin import PARAMETER_FAMILIES
from taskextrap.tasks.dev import DEV_REGION, dev_family
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.observe import ObservationProtocol, Observations, noise_scale
from taskextrap.provenance import callable_hash
from taskextrap.tasks.registry import get_family
from taskextrap.tasks.regimes import get_regime
from taskextrap.tasks.taskset import TaskSet

# The regime's own rows; the method table's (baselines.table) follow them (main_methods).
OWN_METHODS = (
    "rte",
    "rte-gp",
    "strategy-a",
    "sparse-inductive",
    "t2v-inductive",
    "inductive-oracle",
    "transductive-oracle",
    "random-anchors",
    "zero-shift",
)
# The decomposition objective (paper Eq. 3; ``RTE(search="objective")``) in the variants scored on
# the dev split (F1_1 -> F1_2): anchors retrieved by proxy distance (``retrieve``), more screened
# by their own context fit over the whole library (``screen``), shifts at multiples of the proxy
# difference (``phi_scales``). The test runs' ``rte`` row is the variant dev chose per protocol
# (:data:`CHOSEN`); ``strategy-a`` is the paper's shortcut, with the paper's Psi (no
# leave-one-out rows).
OBJECTIVE_VARIANTS = {
    "objective-r8": {"retrieve": 8, "screen": 0, "phi_scales": (0.5, 1.0, 1.5, 2.0)},
    "objective-r32": {"retrieve": 32, "screen": 0, "phi_scales": (0.5, 1.0, 2.0, 3.0)},
    "objective-r16-s16": {"retrieve": 16, "screen": 16, "phi_scales": (0.5, 1.0, 2.0, 3.0)},
}
# The objective settings in every Strategy A fit's cache fingerprint (the estimator's repr):
# Strategy A never reads them, and fixing them keeps its saved fits' keys whatever the dev choice.
FINGERPRINT_OBJECTIVE = OBJECTIVE_VARIANTS["objective-r8"]
# The dev choice (choose_variant on benchmarks/results/parameter-<protocol>-paper-dev.json, seed 0;
# a test holds CHOSEN to those files): the widest search under both protocols.
CHOSEN = {"paper": "objective-r16-s16", "strict": "objective-r16-s16"}
# RTE's dev rows: every variant, and Strategy A with the objective's Psi (trained with leave-one-out rows).
RTE_DEV_METHODS = (*(f"rte-{v}" for v in OBJECTIVE_VARIANTS), "strategy-a-loo")
INTERVAL_METHODS = ("rte", "strategy-a")  # methods with a calibrated predictive interval: a coverage row each
ORACLES = ("inductive-oracle", "transductive-oracle")
# Appendix K.1 (quadratic): every row on the same targets and draws as the main table's.
ABLATION_FAMILY = "quadratic"
ABLATION_METHODS = ("rte", "strategy-a", "far-anchors", "random-anchors", "zero-shift", "sparse-inductive")
TARGET_REGION = "F2"  # the real held-out region; the dev split holds out DEV_REGION instead
DEFAULT_EMBEDDING = get_regime("parameter").embedding  # the regime's Gamma (tasks.regimes), measured

PROFILES = profile_table(
    ParameterProfile,
    {
        "quick": dict(n_library=50, n_pairs=6000, n_targets=100, n_draws=8),
        "paper": dict(n_library=100, n_pairs=20000, n_targets=400, n_draws=32),
        "tiny": dict(n_library=12, n_pairs=400, n_targets=6, n_draws=2),  # for tests only: seconds
    },
    train={
        "quick": TrainConfig(steps=500, batch=2048, eval_every=50),
        "paper": TrainConfig(steps=1000, batch=4096, eval_every=100),
        "tiny": TrainConfig(steps=20, batch=256, eval_every=10),
    },
)


def main_methods() -> tuple[str, ...]:
    """The rows of ``parameter``: the regime's own, then the method table's."""
    return (*OWN_METHODS, *method_rows("parameter"))


def all_methods() -> tuple[str, ...]:
    """Every method a test unit scores: ``parameter``'s rows and the ablations' far anchors."""
    return (*main_methods(), "far-anchors")


def dev_methods() -> tuple[str, ...]:
    """The rows a dev split adds: RTE's variants and the method table's dev variants (the
    meta-learning classics' settings)."""
    return (*RTE_DEV_METHODS, *method_rows("parameter", dev=True))


def make_library(family: ParametricFamily, n_per_region: int, seed: int) -> TaskSet:
    """The training library: ``n_per_region`` tasks from each training region."""
    return TaskSet.sample(family, {r: n_per_region for r in family.train_regions}, rng(seed, family.name, "library"))


def target_region(family: ParametricFamily) -> str:
    """The held-out region targets come from: ``dev`` for a dev family (``tasks.dev``), else F2."""
    return DEV_REGION if DEV_REGION in family.regions else TARGET_REGION


def make_targets(
    family: ParametricFamily, protocol, n_targets: int, n_draws: int, test_seed: int
) -> tuple[TaskSet, Observations]:
    """Held-out targets (region :func:`target_region`) and their context/query draws, from the
    test stream ``test_seed``, which no training seed touches."""
    region = target_region(family)
    targets = TaskSet.sample(family, {region: n_targets}, rng(test_seed, family.name, region, "targets"))
    obs = protocol.draw(
        targets, n_draws, rng(test_seed, family.name, region, protocol.name, "draws"), noise_scale(family)
    )
    return targets, obs


def common_settings(spec: UnitSpec) -> dict:
    """The settings a unit's RTE, transductive oracle and parameter-multistep's chained ones share:
    Strategy A's search (the objective's RTE overrides it), with the objective's settings, which
    Strategy A never reads, at the values of the fits' cache fingerprints (the estimator's repr;
    RTE's defaults before they became the objective's), and no progress bar of their own (the
    run has one over its units)."""
    return dict(
        protocol=spec.protocol,
        n_pairs=spec.profile.n_pairs,
        train=spec.profile.train,
        seed=spec.seed,
        anchors=spec.anchors,
        device=spec.device,
        search="proxy",
        **FINGERPRINT_OBJECTIVE,
        verbose=False,
    )


def variant_scores(rows) -> dict[str, float]:
    """The dev choice's score of ``strategy-a`` and of every objective variant from a dev run's
    rows: the mean over families of log(MSE of the candidate / MSE of ``strategy-a``), the log of
    the geometric-mean ratio (scale-free: a quadratic's 1e2 and a trend's 1e-2 count alike).
    Lower is better; Strategy A scores 0."""
    by = {(r["group"], r["method"]): r["value"] for r in rows if r["metric"] == "mse"}
    groups = sorted({g for g, m in by if m == "strategy-a"})
    scores = {"strategy-a": 0.0}
    scores |= {
        v: float(np.mean([np.log(by[(g, f"rte-{v}")] / by[(g, "strategy-a")]) for g in groups]))
        for v in OBJECTIVE_VARIANTS
    }
    return scores


def choose_variant(rows) -> str:
    """The candidate with the lowest :func:`variant_scores` (Strategy A first on a tie)."""
    scores = variant_scores(rows)
    return min(scores, key=lambda v: (scores[v], list(scores).index(v)))


def chosen_variant(protocol) -> str:
    """The dev-chosen objective variant of ``protocol``: its entry of :data:`CHOSEN` by name; a
    protocol of another name gets strict's when its context is noisy, else paper's."""
    return CHOSEN.get(protocol.name, CHOSEN["strict" if protocol.noise > 0 else "paper"])


def make_rte(spec: UnitSpec, search: str = "proxy") -> RTE:
    """The unfitted RTE of a unit (the same for test runs and the dev-choice sweeps): Strategy A
    (``search="proxy"``, the paper's Psi) or the objective in the protocol's chosen variant."""
    variant = chosen_variant(spec.protocol)
    settings = {} if search == "proxy" or variant == "strategy-a" else {"search": search, **OBJECTIVE_VARIANTS[variant]}
    return RTE(embedding=spec.embedding, **{**common_settings(spec), **settings})


LIBRARY_FITS = ("strategy-a", "transductive-oracle", *INDUCTIVE_KINDS)  # fitted alike by parameter-multistep


def library_fits(
    spec: UnitSpec, also: Callable[[RTE], dict[str, PendingFit]] | None = None
) -> tuple[TaskSet, dict, dict]:
    """The library and the models ``parameter`` and ``parameter-multistep`` fit alike on it
    (:data:`LIBRARY_FITS`: Strategy A's RTE, the transductive oracle, the inductive baselines),
    with their timing. Saved as one artifact beside the unit cache ``spec.cache_dir``
    (:mod:`.artifacts`), so the second experiment loads what the first fitted: the same numbers.

    ``also(strategy_a)`` gives further fits by name, begun on Strategy A's Phase 1a
    (``parameter``'s objective RTE): their networks train together with these
    (``estimators.base.fit_together``; one stacked model on a GPU), or alone when these are
    loaded; they are not part of the artifact.
    """
    family, protocol, profile, seed = spec.family, spec.protocol, spec.profile, spec.seed
    library = make_library(family, profile.n_library, seed)
    common = common_settings(spec)
    timing: dict[str, float] = {}

    def fit() -> dict:
        t = time.perf_counter()
        models: dict[str, Any] = {"strategy-a": make_rte(spec)}
        pending = {"strategy-a": models["strategy-a"].begin_fit(library)}
        timing["embedding_s"] = models["strategy-a"].timing_["embedding_s"]
        models["transductive-oracle"] = TransductiveOracle(**common)
        pending["transductive-oracle"] = models["transductive-oracle"].begin_fit(library)
        for kind in INDUCTIVE_KINDS:
            models[kind] = InductiveBaseline(kind, models["strategy-a"])
            pending[kind] = models[kind].begin_fit()
        pending |= also(models["strategy-a"]) if also is not None else {}
        timing["setup_s"] = time.perf_counter() - t - timing["embedding_s"]
        timing["training_s"] = fit_together(list(pending.values()))
        timing.update(job_seconds({f"{name}_training_s": p.jobs[0] for name, p in pending.items() if p.jobs}))
        return models

    def save(models: dict, folder: Path) -> None:
        for name in ("strategy-a", "transductive-oracle"):
            models[name].save_pretrained(folder / name, library=False)  # the library is at hand on load
        arrays = {k: v for kind in INDUCTIVE_KINDS for k, v in models[kind].state().items()}
        write_state_atomic(folder / "inductive.safetensors", arrays, {})

    def load(folder: Path) -> dict:
        models: dict[str, Any] = {
            "strategy-a": RTE.from_pretrained(folder / "strategy-a", library=library),
            "transductive-oracle": TransductiveOracle.from_pretrained(folder / "transductive-oracle", library=library),
        }
        expected = make_rte(spec).get_params()
        if models["strategy-a"].get_params() != expected:  # the key covers them: a folder of other settings
            raise TaskextrapError("the saved Strategy A RTE has other settings")
        arrays = read_state(folder / "inductive.safetensors")[0]
        for kind in INDUCTIVE_KINDS:
            models[kind] = InductiveBaseline(kind, models["strategy-a"]).restore(arrays)
        return models

    t = time.perf_counter()
    config = {
        **unit_config(spec),
        "experiment": "library-fits",
        "profile": {k: v for k, v in profile.to_dict().items() if k in ("n_library", "n_pairs", "train")},
    }
    config.pop("target_region"), config.pop("test_seed")
    # a fit sees the training regions only: parameter-multistep's families (F3-F5 added) share it
    config["regions"] = {r: family.regions[r] for r in family.train_regions}
    models, loaded = cached_fit(
        spec.cache_dir, f"parameter-fits-{family.name}-{protocol.name}-seed{seed}", config, fit, save, load
    )
    if loaded:
        timing["fits_loaded_s"] = time.perf_counter() - t
        if also is not None:  # nothing to train beside: the further fits train alone
            timing["training_s"] = fit_together(list(also(models["strategy-a"]).values()))
    return library, models, timing


def fit_models(spec: UnitSpec):
    """Fit RTE (the objective, and Strategy A with the paper's Psi), the transductive oracle, the
    inductive baselines and the method table's rows on one library (the fits it shares with
    parameter-multistep from :func:`library_fits`)."""
    family, protocol = spec.family, spec.protocol
    objective = None
    if chosen_variant(protocol) != "strategy-a" or target_region(family) == DEV_REGION:
        # the objective's fit (its Psi has leave-one-out rows): the headline's, or the dev rows'
        # (the variants differ in inference settings only, set on this one fit: _chosen,
        # _with_settings); it adopts Strategy A's Phase 1a and trains beside the library's fits
        objective = RTE(embedding=spec.embedding, **{**common_settings(spec), "search": "objective"})
    methods: dict[str, Method] = {}
    method_timing: dict[str, float] = {}  # each row's fit seconds (its work beside the training adds its own)

    def also(sa: RTE) -> dict[str, PendingFit]:
        rows = [m for m in methods_of(family) if is_method(m)]
        fitted, pending, seconds = begin_methods(
            rows, sa.library_, shared_draws(sa), seed=spec.seed, device=spec.device
        )
        methods.update(fitted)
        nonlocal method_timing
        method_timing = seconds  # read after the training, when the work beside has added its seconds
        if objective is not None:
            pending["objective"] = objective.begin_fit(sa.library_, embedded=sa)
        return pending

    library, models, timing = library_fits(spec, also)
    timing |= method_timing
    strategy_a = models["strategy-a"]
    rte = strategy_a if objective is None or chosen_variant(protocol) == "strategy-a" else _chosen(objective, protocol)
    models = {**models, "rte": rte, "objective": objective, "methods": methods}
    if "rte-gp" in methods_of(family):
        t = time.perf_counter()
        models["rte-gp"] = context_posterior(spec, library, rte, methods.get("meta-gp"))
        timing["rte-gp_choice_s"] = time.perf_counter() - t
    return library, models, timing


def shared_draws(sa: RTE) -> SharedDraws:
    """What the method table's rows learn from beside a unit's Strategy A (after its Phase 1a,
    ``begin_fit``): its library draws, scaler and training config, as the inductive baselines do."""
    d = sa.draws_
    return SharedDraws(
        sa.scaler_, sa.protocol_.n_context, sa.train, library_batch(sa, d.train), library_batch(sa, d.val)
    )


def context_posterior(spec: UnitSpec, library: TaskSet, rte: RTE, library_gp) -> RTEGP:
    """``rte-gp`` of a unit (``posterior.estimator.in_unit``) on the unit library's own dev split
    (its first training regions the dev library, its last the dev targets)."""
    return in_unit(RTE(**{**rte.get_params(), "interval_scale": 1.0}), rte, library, None, library_gp, "parameter")


def predict_method(
    method: str,
    models: dict,
    obs: Observations,
    seed: int,
    qry_x=None,
    decomposition: Decomposition | None = None,
    return_std: bool = False,
):
    """Predictions (n, q) of one method on the draws ``obs`` at their queries (or at ``qry_x``);
    ``decomposition`` (Strategy A's) may be passed to reuse it. ``return_std`` (a method with an
    interval, :func:`has_interval`): (mean, std)."""
    rte: RTE = models["strategy-a"]  # the ablations are the paper's ablations of Strategy A
    library = rte.library_
    ctx_x, ctx_y, theta = obs.ctx_x, obs.ctx_y, obs.params
    qry_x = obs.qry_x if qry_x is None else qry_x
    if method in ("strategy-a", "random-anchors", "zero-shift") and decomposition is None:
        decomposition = rte.decompose(ctx_x, ctx_y)
    anchors = None if decomposition is None else decomposition.anchors
    if method in ("rte", "rte-gp"):
        return models[method].predict(ctx_x, ctx_y, qry_x, return_std=return_std)
    if method == "strategy-a":
        return rte.predict(ctx_x, ctx_y, qry_x, decomposition, return_std=return_std)
    if method.startswith("rte-objective-"):
        settings = OBJECTIVE_VARIANTS[method.removeprefix("rte-")]
        return _with_settings(
            models["objective"], settings, lambda m: m.predict(ctx_x, ctx_y, qry_x, return_std=return_std)
        )
    if method == "strategy-a-loo":
        objective = models["objective"]
        return objective.predict(
            ctx_x, ctx_y, qry_x, objective.decompose(ctx_x, ctx_y, search="proxy"), return_std=return_std
        )
    if method == "transductive-oracle":
        oracle = models[method]
        return oracle.predict(ctx_x, ctx_y, qry_x, oracle.decompose_truth(ctx_x, ctx_y, theta))
    if method in ("sparse-inductive", "t2v-inductive", "inductive-oracle"):
        return models[method].predict(ctx_x, ctx_y, qry_x, theta=theta)
    if method == "random-anchors":
        assert anchors is not None  # decomposed above
        random_anchors = rng(seed, "random-anchors").integers(len(library), size=anchors.shape)
        return rte.predict(ctx_x, ctx_y, qry_x, rte.decomposition_for(ctx_x, ctx_y, random_anchors))
    if method == "far-anchors":
        far = far_anchors(rte, library, ctx_x, ctx_y)
        return rte.predict(ctx_x, ctx_y, qry_x, rte.decomposition_for(ctx_x, ctx_y, far))
    if method == "zero-shift":
        assert anchors is not None  # decomposed above
        zero = np.zeros((*anchors.shape, rte.embed_dim))
        return rte.predict(ctx_x, ctx_y, qry_x, rte.decomposition_for(ctx_x, ctx_y, anchors, zero))
    if method in models["methods"]:
        return models["methods"][method].predict(ctx_x, ctx_y, qry_x, return_std=return_std)
    raise ValueError(f"unknown method {method!r}")


def _chosen(objective: RTE, protocol) -> RTE:
    """The fitted objective RTE set to ``protocol``'s chosen variant (inference settings only)."""
    for k, v in OBJECTIVE_VARIANTS[chosen_variant(protocol)].items():
        setattr(objective, k, v)
    return objective


def _with_settings(rte: RTE, settings: dict, call):
    """``call(rte)`` with the inference ``settings`` set on the fitted ``rte``, then restored."""
    saved = {k: getattr(rte, k) for k in settings}
    try:
        for k, v in settings.items():
            setattr(rte, k, v)
        return call(rte)
    finally:
        for k, v in saved.items():
            setattr(rte, k, v)


def far_anchors(rte: RTE, library: TaskSet, ctx_x, ctx_y) -> np.ndarray:
    """The nearest anchors in proxy space among the far training region only (the first one, F1_1)."""
    far = np.flatnonzero(library.region == library.family.train_regions[0])
    z = rte.embed(ctx_x, ctx_y)
    return far[nearest(z, rte.z_library_[far], rte.anchors)[0]]


def methods_of(family: ParametricFamily) -> tuple[str, ...]:
    """The methods scored on ``family``'s targets: every variant besides on the dev split."""
    return all_methods() + (dev_methods() if target_region(family) == DEV_REGION else ())


def predict_all(
    models: dict, obs: Observations, seed: int, methods: tuple[str, ...]
) -> tuple[dict, dict, dict, dict[str, float]]:
    """Predictions (n_draws_total, q) of ``methods`` at the query points, the predictive sd of
    those with an interval (:func:`has_interval`), per-draw diagnostics (:func:`diagnostics`) of
    ``rte`` and ``strategy-a``, and the seconds of each method's prediction (``<method>_predict_s``;
    the two searches the RTE rows share, ``search_s``, apart: a method's price beside its error)."""
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    t = time.perf_counter()
    d = models["strategy-a"].decompose(cx, cy)
    d_rte = d if models["rte"] is models["strategy-a"] else models["rte"].decompose(cx, cy)
    seconds = {"search_s": time.perf_counter() - t}
    preds, stds = {}, {}
    for m in methods:
        t = time.perf_counter()
        if m in ("rte", "rte-gp"):  # rte-gp's relational prior is rte's fit: its search is rte's
            out = models[m].predict(cx, cy, qx, return_std=True, decomposition=d_rte)
        else:
            out = predict_method(m, models, obs, seed, decomposition=d, return_std=has_interval(m))
        preds[m], stds[m] = out if has_interval(m) else (out, None)
        seconds[f"{m}_predict_s"] = time.perf_counter() - t
    truth = models["transductive-oracle"].decompose_truth(cx, cy, obs.params).anchors
    diag = {**diagnostics("rte", d_rte, truth), **diagnostics("strategy-a", d, truth)}
    return preds, {m: s for m, s in stds.items() if s is not None}, diag, seconds


def diagnostics(method: str, d: Decomposition, truth_anchors: np.ndarray) -> dict[str, np.ndarray]:
    """Per-draw diagnostics of ``method``'s decomposition ``d``: the entropy (nats) of its
    posterior over candidates (equal weights when it has none) and whether its heaviest anchor
    is one of the transductive oracle's ``truth_anchors`` (n, anchors), the library tasks
    nearest the target in true parameters: how often the search found a right anchor."""
    w = np.full(d.score.shape, 1.0 / d.k) if d.weights is None else d.weights
    top = d.anchors[np.arange(len(w)), np.argmax(w, axis=1)]
    return {
        entropy_key(method): entropy(w),
        anchor_key(method): (truth_anchors == top[:, None]).any(axis=1).astype(float),
    }


def entropy_key(method: str) -> str:
    """The key of ``method``'s per-target posterior entropy among a unit's errors."""
    return f"entropy:{method}"


def anchor_key(method: str) -> str:
    """The key of ``method``'s per-target anchor-retrieval rate among a unit's errors."""
    return f"anchor-retrieved:{method}"


def has_interval(method: str) -> bool:
    """Whether ``method`` gives a predictive interval (a coverage row)."""
    return method in (*INTERVAL_METHODS, *SELF_CALIBRATED) or method in RTE_DEV_METHODS or has_own_interval(method)


def per_target_mse(pred: np.ndarray, obs: Observations, n_targets: int) -> np.ndarray:
    """MSE over query points, averaged over each target's draws -> (n_targets,)."""
    return per_target((pred - obs.qry_y) ** 2, n_targets)


def run_unit(spec: UnitSpec, plot_dir: Path | None = None) -> UnitResult:
    """Fit and evaluate every method for one family and one training seed on the targets of
    ``spec.test_seed`` (the held-out region of the family: F2, or ``dev`` for a dev family); the
    fits shared with parameter-multistep come from the artifacts beside ``spec.cache_dir`` when
    saved. ``plot_dir``: where the unit draws its figures (None: none)."""
    t0 = time.perf_counter()
    family, protocol, profile = spec.family, spec.protocol, spec.profile
    library, models, timing = fit_models(spec)
    targets, obs = make_targets(family, protocol, profile.n_targets, profile.n_draws, spec.test_seed)
    t = time.perf_counter()
    preds, stds, diag, seconds = predict_all(models, obs, spec.seed, methods_of(family))
    timing |= seconds | {"evaluation_s": time.perf_counter() - t}
    errors = {m: per_target_mse(p, obs, profile.n_targets) for m, p in preds.items()}
    errors |= {k: per_target(v, profile.n_targets) for k, v in diag.items()}
    for m, s in stds.items():  # calibrated and raw coverage, width, and the raw coverage at every scale
        diag = interval_diagnostics(interval_prefix(m), preds[m], s, obs.qry_y, interval_scale_of(m, models))
        errors |= {k: per_target(v, profile.n_targets) for k, v in diag.items()}
    if plot_dir is not None:
        t = time.perf_counter()
        _plots(plot_dir, family, protocol, models, library, targets, obs, errors)
        timing["plots_s"] = time.perf_counter() - t
    timing["total_s"] = time.perf_counter() - t0
    extras = {"rte-gp": choice_summary(models["rte-gp"].dev_record_)} if "rte-gp" in models else {}
    return UnitResult(errors, timing, extras)


def interval_prefix(method: str) -> str:
    """The prefix of ``method``'s interval diagnostics among a unit's errors
    (``search.calibration.interval_diagnostics``)."""
    return f"interval:{method}"


def search_of(method: str, protocol) -> str:
    """The search behind ``method``'s interval: Strategy A's proxy search, or ``rte``'s (the
    protocol's dev-chosen variant)."""
    return "proxy" if method == "strategy-a" or chosen_variant(protocol) == "strategy-a" else "objective"


def interval_scale_of(method: str, models: dict) -> float:
    """The interval scale of the fit behind ``method``'s interval: ``rte``'s, Strategy A's, the
    objective fit's for the dev variants, 1 for the method table's (their own interval)."""
    if has_own_interval(method):
        return 1.0
    if method in SELF_CALIBRATED:
        return models[method].posterior_.scale
    return models[method if method in ("rte", "strategy-a") else "objective"].calibrated_scale()


def _plots(plot_dir, family, protocol, models, library, targets, obs, errors):
    from taskextrap.report.plots import plot_embedding, plot_predictions

    baselines = [
        m for m in main_methods() if m not in ORACLES and m not in ("rte", "strategy-a", "random-anchors", "zero-shift")
    ]
    best = min(baselines, key=lambda m: float(errors[m].mean()))
    n_draws = len(obs) // len(targets)
    idx = np.arange(min(4, len(targets))) * n_draws  # the first draw of the first targets
    sub = obs.subset(idx)
    grid = np.broadcast_to(family.grid(200), (len(idx), 200))
    truth = targets.values(grid, np.arange(len(idx)))
    rte = models["rte"]
    preds = {
        "RTE": rte.predict(sub.ctx_x, sub.ctx_y, grid),
        best: predict_method(best, models, sub, 0, qry_x=grid),
    }
    titles = [f"{family.shift}={p:.3g}" for p in targets.params[: len(idx), 0]]
    plot_predictions(
        plot_dir / f"{family.name}-{protocol.name}-predictions.png",
        family.grid(200),
        truth,
        preds,
        sub.ctx_x,
        sub.ctx_y,
        titles=titles,
    )
    z_targets = rte.embed(obs.ctx_x[::n_draws], obs.ctx_y[::n_draws])
    z = np.concatenate([rte.z_library_, z_targets])
    labels = np.concatenate(
        [library.region.astype(str), np.full(len(z_targets), f"{target_region(family)} (context only)")]
    )
    plot_embedding(
        plot_dir / f"{family.name}-{protocol.name}-embedding.png",
        z,
        labels,
        f"{family.name}: proxy embedding ({rte.embedding}, {protocol.name} protocol)",
    )


def unit_config(spec: UnitSpec) -> dict:
    """Everything that determines a unit's numbers (its cache fingerprint)."""
    family = spec.family
    return dict(
        experiment="parameter",
        family=family.name,
        fn=getattr(family.fn, "__qualname__", ""),
        fn_code=callable_hash(family.fn),
        domain=family.domain,
        shift=family.shift,
        fixed=dict(family.fixed),
        regions=dict(family.regions),
        train_regions=family.train_regions,
        protocol=spec.protocol,
        profile=spec.profile.to_dict(),
        seed=spec.seed,
        embedding=spec.embedding,
        anchors=spec.anchors,
        test_seed=spec.test_seed,
        target_region=target_region(family),
        device=spec.device,
    )


def search_config(family, protocol) -> dict:
    """What a parameter unit's rows add to :func:`unit_config`: the headline's objective variant
    (or Strategy A) and the methods scored (the dev split's variants)."""
    return dict(objective=OBJECTIVE_VARIANTS.get(chosen_variant(protocol), "strategy-a"), methods=methods_of(family))


def family_units(family, settings: Settings, plot_dir: Path | None, cache_dir: Path | None = None) -> list[Unit]:
    """One unit per training seed of ``family`` under the run's ``settings`` (the first seed
    draws the plots)."""
    embedding, profile, protocol = run_settings(settings)
    spec = lambda s: UnitSpec.of(settings, s, family, embedding, cache_dir=cache_dir)  # noqa: E731
    tag = f"{family.name}-{protocol.name}" + ("-dev" if target_region(family) == DEV_REGION else "")
    return seed_units(
        profile.seeds,
        name=lambda s: f"parameter-{tag}-seed{s}",
        config=lambda s: {**unit_config(spec(s)), **search_config(family, protocol)},
        compute=lambda s, plots: run_unit(spec(s), plots),
        plot_dir=plot_dir,
        plot_file=f"{family.name}-{protocol.name}-predictions.png",
    )


def paper_checked(row: dict, family: ParametricFamily, builtins: dict = PARAMETER_FAMILIES) -> dict:
    """``row`` without the paper's value and interval unless ``family`` is the built-in family
    object of that name: a user's family named "quadratic" (or a dev split of the built-in one)
    is not the paper's quadratic, so the paper's numbers must not stand beside it."""
    if builtins.get(family.name) is not family:
        row.update(paper_value=None, paper_ci95=None)
    return row


def families_for(family: ParametricFamily | None, split: str = "test") -> list[ParametricFamily]:
    """All five built-in families, or ``family`` (the run's resolved ``--family``); under the
    ``dev`` split each family's :func:`~taskextrap.tasks.dev.dev_family`."""
    families = list(PARAMETER_FAMILIES.values()) if family is None else [family]
    return [dev_family(f) for f in families] if split == "dev" else families


def run_settings(settings: Settings) -> tuple[str, ParameterProfile, ObservationProtocol]:
    """The embedding (the regime's default unless ``--embedding``), profile and protocol of a
    parameter-regime run."""
    return settings.options.embedding or DEFAULT_EMBEDDING, settings.profile, settings.protocol


def _run(
    experiment: str,
    methods: tuple[str, ...],
    families: list[ParametricFamily],
    settings: Settings,
    plot_dir: Path | None,
    cache_dir: Path | None = None,
) -> Plan:
    embedding, profile, protocol = run_settings(settings)
    options = settings.options
    units = {f.name: family_units(f, settings, plot_dir, cache_dir) for f in families}

    def assemble(results):
        errors: dict[str, dict] = {}
        timing: dict[str, float] = {}
        scales: dict[str, dict] = {}
        sources: dict[str, dict] = {}
        for family in families:
            errors[family.name], family_timing = gather(results, units[family.name])
            for k, v in family_timing.items():
                timing[k] = timing.get(k, 0.0) + v
            scales[family.name], sources[family.name] = {}, {}
            for m in (m for m in methods if m in INTERVAL_METHODS):
                regime = f"parameter-{search_of(m, protocol)}"
                errors[family.name], scales[family.name][m], sources[family.name][m] = own_dev_scale(
                    options,
                    errors[family.name],
                    m,
                    interval_prefix(m),
                    *scale_and_source(regime, protocol, family.name, settings.builtin),
                )
            for m in (m for m in methods + _dev_rows(family, methods) if has_own_interval(m)):
                errors[family.name], scales[family.name][m], sources[family.name][m] = classic_scale(
                    settings, errors[family.name], "parameter", m, interval_prefix(m), family.name
                )
        rows = [
            paper_checked(make_row(experiment, f.name, m, "mse", np.stack(errors[f.name][m], axis=1)), f)
            for f in families
            for m in methods + _dev_rows(f, methods)
        ]
        rows += [
            paper_checked(row, f)
            for f in families
            for m in methods + _dev_rows(f, methods)
            if has_interval(m)
            for row in interval_rows(experiment, errors[f.name], f.name, m, interval_prefix(m))
        ]
        rows += [
            paper_checked(row, f)
            for f in families
            for row in diagnostic_rows(experiment, f.name, errors[f.name])
            if row["method"] in methods
        ]
        config = {
            "families": [f.name for f in families],
            "protocol": {**vars(protocol)},
            "objective": {
                "variant": chosen_variant(protocol),
                **OBJECTIVE_VARIANTS.get(chosen_variant(protocol), {"search": "proxy"}),
            },
            "profile": profile.to_dict(),
            "embedding": embedding,
            "anchors": options.anchors,
            "test_seed": options.seed_of_tests,
            "regions": {f.name: dict(f.regions) for f in families},
            "target_region": {f.name: target_region(f) for f in families},
            "coverage_by_scale": {
                f.name: {m: pooled_curve(errors[f.name], interval_prefix(m)) for m in methods if has_interval(m)}
                for f in families
            },
            "interval_scale": scales,
            "interval_scale_source": sources,
            "classic_variants": classic_variants("parameter"),
        }
        if "rte-gp" in methods:  # rte-gp's dev choice in each unit (training seed order)
            config["rte-gp_choice"] = {
                f.name: [results[u.name].extras.get("rte-gp") for u in units[f.name]] for f in families
            }
        return rows, config, list(profile.seeds), timing

    return Plan([u for f in families for u in units[f.name]], assemble)


def diagnostic_rows(experiment: str, group: str, errors: dict) -> list:
    """What the search found, beside what it scored: ``rte``'s posterior entropy (group
    ``group``; Strategy A's equal mean is log(anchors) everywhere) and the anchor-retrieval rate
    of ``rte`` and ``strategy-a`` (group ``<group>:anchor-retrieved``)."""
    return [make_row(experiment, group, "rte", "entropy", np.stack(errors[entropy_key("rte")], axis=1))] + [
        make_row(experiment, f"{group}:anchor-retrieved", m, "accuracy", np.stack(errors[anchor_key(m)], axis=1))
        for m in ("rte", "strategy-a")
    ]


def _dev_rows(family: ParametricFamily, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The dev variants' rows where ``family`` is a dev split and the experiment shows ``rte``."""
    return dev_methods() if "rte" in methods and target_region(family) == DEV_REGION else ()


PARAMETER_OPTIONS = ("protocol", "family", "embedding", "anchors", "test_seed", "device")


@register(
    "parameter",
    "Table 1: parameter extrapolation on five families (F1 library -> F2 targets)",
    PROFILES,
    options=PARAMETER_OPTIONS,
    regime="parameter",
    dev=True,
    family=get_family,
)
def run_parameter(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The parameter experiment's plan: every family's units and the rows built from them."""
    return _run(
        "parameter", main_methods(), families_for(settings.family, settings.split), settings, plot_dir, cache_dir
    )


@register(
    "parameter-ablations",
    "App. K.1: parameter ablations on quadratic (far / random anchors, zero shift)",
    PROFILES,
    options=PARAMETER_OPTIONS,
    regime="parameter",
    dev=True,
    family=get_family,
)
def run_parameter_ablations(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The quadratic ablations: the same fits as ``parameter`` (shared unit cache), other rows."""
    family = families_for(settings.family or PARAMETER_FAMILIES[ABLATION_FAMILY], settings.split)
    return _run("parameter-ablations", ABLATION_METHODS, family, settings, None, cache_dir)
