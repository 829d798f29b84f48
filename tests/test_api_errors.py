"""Issue 16, "nothing bad gets through" (Python API): every bad argument to a public entry point
is a one-line TaskextrapError that names the argument, raised at the call; for finite but huge
inputs the result is either finite and of the right shape, or such an error (never NaN, never
another exception).

Each case is (call, the argument name the message must contain). The estimators are fitted once
per module at tiny sizes.
"""

import contextlib
import re

import numpy as np
import pytest

from taskextrap.baselines.context import ctx_interp, ctx_polyfit, library_best_fit
from taskextrap.baselines.inductive import InductiveBaseline
from taskextrap.baselines.oracles import TransductiveOracle
from taskextrap.embed import ProxyEmbedding
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.composition import CompositionRTE
from taskextrap.estimators.length import LengthRTE
from taskextrap.estimators.parameter import RTE
from taskextrap.operators.train import TrainConfig
from taskextrap.search.index import nearest
from taskextrap.search.likelihood import tied
from taskextrap.search.posterior import posterior_weights
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, ObservationProtocol, ParametricFamily, TaskSet, get_protocol
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder, LadderSet
from taskextrap.tasks.primitives import PAPER_SPLIT, POLY, CompositionSet, PairSplit, PrimitiveFamily, PrimitiveSet

TRAIN = TrainConfig(steps=6, batch=256, eval_every=3)
DECOMPOSER = TrainConfig(steps=6, batch=64, eval_every=3)
G = np.random.default_rng(0)


@contextlib.contextmanager
def one_line_error(name):
    """The block raises a one-line TaskextrapError whose message names ``name``."""
    with pytest.raises(TaskextrapError, match=re.escape(name)) as e:
        yield e
    assert "\n" not in str(e.value), str(e.value)


def raises(call, name):
    """``call()`` raises a one-line TaskextrapError whose message names ``name``; returns the message."""
    with one_line_error(name) as e:
        call()
    return str(e.value)


# ----------------------------------------------------------------------------- fitted estimators


@pytest.fixture(scope="module")
def parameter():
    fam = PARAMETER_FAMILIES["quadratic"]
    library = TaskSet.sample(fam, {"F1_1": 6, "F1_2": 6}, rng(0, "api-library"))
    obs = get_protocol("paper").draw(TaskSet.sample(fam, {"F2": 3}, rng(0, "api-targets")), 1, rng(1))
    return RTE(n_pairs=150, train=TRAIN, seed=0, search="proxy").fit(library), library, obs  # Strategy A: k anchors


@pytest.fixture(scope="module")
def length():
    library = LadderSet.sample_library(POLYNOMIAL_LADDER, 4, rng(0, "api-ladder"))
    g = np.random.default_rng(5)
    targets = LadderSet.extend(library, np.flatnonzero(library.level == 8)[:3], g)
    model = LengthRTE(n_pairs=150, k=3, train=TRAIN, decomposer_train=DECOMPOSER, seed=0).fit(library)
    return model, library, model.resolved("protocol").draw(targets, 1, g)


@pytest.fixture(scope="module")
def composition():
    prims = PrimitiveSet.sample(n_per_family=6, rng=rng(0, "api-prims"))
    targets = CompositionSet.sample(prims, PAPER_SPLIT.test, 3, np.random.default_rng(3))
    model = CompositionRTE(n_pairs=120, k=3, train=TRAIN, decomposer_train=DECOMPOSER, seed=0).fit(prims)
    return model, prims, model.resolved("protocol").draw(targets, 1, np.random.default_rng(4))


REGIMES = ["parameter", "length", "composition"]


@pytest.fixture(params=REGIMES)
def regime(request):
    """(fitted estimator, its library, target observations) of each regime."""
    return request.getfixturevalue(request.param)


# ----------------------------------------------------------------------------- contexts


def _bad_contexts(cx, cy):
    """(ctx_x, ctx_y, argument named) for every kind of bad context; cx, cy are valid (n, k)."""
    n, k = cx.shape
    ragged = [[1.0] * k, [1.0] * (k - 1)]
    nan_y, inf_x = cy.copy(), cx.copy()
    nan_y[0, 0], inf_x[-1, -1] = np.nan, -np.inf
    return {
        "zero-rows": (np.zeros((0, k)), np.zeros((0, k)), "ctx_x"),
        "zero-columns": (np.zeros((n, 0)), np.zeros((n, 0)), "ctx_x"),
        "x-y-shapes-differ": (cx, cy[:-1], "ctx_x and ctx_y") if n > 1 else (cx, cy[:, :-1], "ctx_y"),
        "3-d": (cx[None], cy[None], "ctx_x"),
        "0-d": (np.float64(1.0), cy, "ctx_x"),
        "string": ("abc", cy, "ctx_x"),
        "None": (cx, None, "ctx_y"),
        "object-array": (cx.astype(object), cy, "ctx_x"),
        "string-array": (cx.astype(str), cy, "ctx_x"),
        "datetime-array": (np.zeros(cx.shape, dtype="datetime64[s]"), cy, "ctx_x"),
        "ragged-list": (ragged, ragged, "ctx_x"),
        "complex": (cx, cy + 1j, "ctx_y"),
        "bool": (cx > 0, cy, "ctx_x"),
        "nan": (cx, nan_y, "ctx_y"),
        "inf": (inf_x, cy, "ctx_x"),
        "1e300": (cx, cy * 0 + 1e300, "ctx_y"),
        "wrong-point-count": (cx[:, :2], cy[:, :2], "ctx_x"),  # fewer than any estimator reads
    }


CONTEXT_CASES = list(_bad_contexts(np.ones((2, 3)), np.ones((2, 3))))


@pytest.mark.parametrize("case", CONTEXT_CASES)
def test_bad_contexts_are_named_errors_for_every_estimator(regime, case):
    model, _, obs = regime
    cx, cy, name = _bad_contexts(obs.ctx_x, obs.ctx_y)[case]
    raises(lambda: model.predict(cx, cy, obs.qry_x[:1]), name)
    raises(lambda: model.decompose(cx, cy), name)


@pytest.mark.parametrize("case", [c for c in CONTEXT_CASES if c != "wrong-point-count"])
def test_bad_contexts_are_named_errors_for_the_context_baselines(case):
    cx = np.linspace(0, 1, 8)[None].repeat(2, 0)
    bad_x, bad_y, name = _bad_contexts(cx, cx**2)[case]
    q = np.full((1, 2), 0.5)
    lib = lambda i, x: x * 0 + i[:, None]  # noqa: E731
    for call in (
        lambda: ctx_interp(bad_x, bad_y, q),
        lambda: ctx_polyfit(bad_x, bad_y, q),
        lambda: library_best_fit(bad_x, bad_y, q, lib, 3),
    ):
        raises(call, name)


def _bad_queries(q):
    nan = q.copy()
    nan[0, 0] = np.nan
    return {
        "nan": nan,
        "complex": q + 1j,
        "bool": q > 0,
        "None": None,
        "string": "q",
        "3-d": q[None],
        "zero-columns": q[:, :0],
        "object": q.astype(object),
        "1e300": q * 0 + 1e300,
        "wrong-rows": np.concatenate([q, q, q]),
    }


@pytest.mark.parametrize("case", list(_bad_queries(np.ones((2, 2)))))
def test_bad_queries_are_named_errors(regime, case):
    model, _, obs = regime
    q = _bad_queries(obs.qry_x)[case]
    raises(lambda: model.predict(obs.ctx_x, obs.ctx_y, q), "x_query")
    raises(lambda: ctx_interp(obs.ctx_x, obs.ctx_y, q), "qry_x")


@pytest.mark.parametrize("scale", [1e3, 1e8, 1e12, 1e20, 1e60, 1e149, 1e300])
@pytest.mark.parametrize("where", ["ctx_x", "ctx_y", "x_query"])
def test_huge_finite_values_give_finite_results_or_a_named_error(regime, scale, where):
    model, _, obs = regime
    args = {"ctx_x": obs.ctx_x, "ctx_y": obs.ctx_y, "x_query": obs.qry_x}
    args[where] = args[where] * scale
    calls = [lambda: model.predict(args["ctx_x"], args["ctx_y"], args["x_query"])]
    if where != "x_query":
        calls.append(lambda: model.decompose(args["ctx_x"], args["ctx_y"]).score)
    for call in calls:
        try:
            out = call()
        except TaskextrapError as e:
            assert "\n" not in str(e) and where in str(e), str(e)
        else:
            assert np.all(np.isfinite(out)), (where, scale)
    try:
        out = ctx_polyfit(args["ctx_x"], args["ctx_y"], args["x_query"])
    except TaskextrapError as e:
        assert "\n" not in str(e) and (where if where != "x_query" else "qry_x") in str(e)
    else:
        assert out.shape == obs.qry_x.shape and np.all(np.isfinite(out))


def test_huge_values_are_refused_with_the_reason(parameter):
    assert "1e+150" in raises(lambda: ctx_interp([[0.0, 1e300]], [[0.0, 1.0]], [[0.5]]), "ctx_x")
    model, _, obs = parameter
    # Finite in float64 but beyond the float32 networks' range once in library units.
    assert "too far outside" in raises(lambda: model.predict(obs.ctx_x, obs.ctx_y * 1e12, obs.qry_x), "ctx_y")
    assert "too far outside" in raises(lambda: model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x * 1e12), "x_query")


# ----------------------------------------------------------------------------- before fit


@pytest.mark.parametrize(
    "make,calls",
    [
        (lambda: RTE(), ("predict", "decompose", "embed", "decomposition_for")),
        (lambda: LengthRTE(), ("predict", "decompose", "guess", "decomposition_for", "screen", "retrieval_quality")),
        (
            lambda: CompositionRTE(),
            ("predict", "decompose", "candidates", "decomposition_for", "compose", "context_loss", "refined"),
        ),
    ],
)
def test_every_method_before_fit_says_call_fit_first(make, calls):
    model = make()
    x = np.ones((1, model.resolved("protocol").n_context))
    args = {
        "predict": (x, x, x),
        "decompose": (x, x),
        "embed": (x, x),
        "guess": (x, x),
        "decomposition_for": (x, x, [[0, 0]]),
        "screen": (),
        "retrieval_quality": (),
        "candidates": (x, x),
        "compose": (x, [0], [0]),
        "context_loss": (x, x, [[0]], [[0]]),
        "refined": (x, x, None),
    }
    for name in calls:
        with one_line_error("call fit("):
            getattr(model, name)(*args[name])


# ----------------------------------------------------------------------------- constructors


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(anchors=2.5), "anchors"),
        (dict(anchors=0), "anchors"),
        (dict(anchors=-1), "anchors"),
        (dict(anchors=True), "anchors"),
        (dict(anchors="2"), "anchors"),
        (dict(anchors=None), "anchors"),
        (dict(n_pairs=0), "n_pairs"),
        (dict(n_pairs=1e4), "n_pairs"),
        (dict(library_draws=0), "library_draws"),
        (dict(near_fraction=float("nan")), "near_fraction"),
        (dict(near_fraction=1.5), "near_fraction"),
        (dict(n_near=0), "n_near"),
        (dict(val_fraction=1.0), "val_fraction"),
        (dict(val_fraction=-0.1), "val_fraction"),
        (dict(embed_dim=0), "embed_dim"),
        (dict(train={"steps": 5}), "train"),
        (dict(seed=-1), "seed"),
        (dict(seed=1.5), "seed"),
        (dict(protocol=["paper"]), "protocol"),
        (dict(protocol="loose"), "protocol"),
        (dict(embedding=3), "embedding"),
    ],
)
def test_bad_rte_arguments(kwargs, name):
    raises(lambda: RTE(**kwargs), name)


@pytest.mark.parametrize("cls", [LengthRTE, CompositionRTE])
@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(k=0), "k"),
        (dict(k=2.5), "k"),
        (dict(k=True), "k"),
        (dict(temperature=0.0), "temperature"),
        (dict(temperature=-1.0), "temperature"),
        (dict(temperature=float("inf")), "temperature"),
        (dict(n_average=0), "n_average"),
        (dict(n_pairs=-5), "n_pairs"),
        (dict(library_draws=1.0), "library_draws"),
        (dict(val_fraction=2), "val_fraction"),
        (dict(embed_dim=0), "embed_dim"),
        (dict(train=None), "train"),
        (dict(decomposer_train=(1, 2)), "decomposer_train"),
        (dict(blocks=()), "blocks"),
        (dict(blocks=((0,),)), "blocks"),
        (dict(blocks=((4.5,),)), "blocks"),
        (dict(seed="0"), "seed"),
        (dict(protocol=None), "protocol"),
        (dict(embedding="pca"), "embedding"),
    ],
)
def test_bad_strategy_b_arguments(cls, kwargs, name):
    raises(lambda: cls(**kwargs), name)


@pytest.mark.parametrize(
    "cls,kwargs,name",
    [
        (LengthRTE, dict(c_grid=1), "c_grid"),
        (LengthRTE, dict(screen_fraction=1.5), "screen_fraction"),
        (LengthRTE, dict(screen_fraction=float("nan")), "screen_fraction"),
        (CompositionRTE, dict(refine_rounds=-1), "refine_rounds"),
        (CompositionRTE, dict(refine_rounds=0.5), "refine_rounds"),
        (CompositionRTE, dict(split="paper"), "split"),
    ],
)
def test_bad_regime_specific_arguments(cls, kwargs, name):
    raises(lambda: cls(**kwargs), name)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(batch=0), "batch"),
        (dict(batch=True), "batch"),
        (dict(batch=64.0), "batch"),
        (dict(steps=0), "steps"),
        (dict(steps=-3), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(lr=float("nan")), "lr"),
        (dict(lr=float("inf")), "lr"),
        (dict(lr=0.0), "lr"),
        (dict(lr=-1e-3), "lr"),
        (dict(lr="1e-3"), "lr"),
        (dict(lr=1j), "lr"),
        (dict(weight_decay=float("nan")), "weight_decay"),
        (dict(weight_decay=-1.0), "weight_decay"),
        (dict(eval_every=0), "eval_every"),
    ],
)
def test_bad_train_config(kwargs, name):
    raises(lambda: TrainConfig(**kwargs), f"TrainConfig.{name}")


def _family(**overrides):
    spec = dict(
        name="t",
        fn=lambda x, a, b: a * x + b,
        domain=(0.0, 1.0),
        fixed={"b": (0.0, 1.0)},
        shift="a",
        regions={"F1_1": (0.0, 1.0), "F1_2": (1.0, 2.0), "F2": (2.0, 3.0)},
    )
    spec.update(overrides)
    return ParametricFamily(**spec)


@pytest.mark.parametrize(
    "overrides,name",
    [
        (dict(fn=42), "fn"),
        (dict(fn=lambda x, a: a * x), "fn"),
        (dict(name=3), "name"),
        (dict(name=""), "name"),
        (dict(domain=(0.0, 1.0, 2.0)), "domain"),
        (dict(domain="ab"), "domain"),
        (dict(domain=None), "domain"),
        (dict(domain=(0.0, 1j)), "domain"),
        (dict(domain=(True, 2.0)), "domain"),
        (dict(regions={}), "regions"),
        (dict(regions=[("F1_1", (0, 1))]), "regions"),
        (dict(regions={"F1_1": (0.0, 1.0), "F1_2": "ab", "F2": (2.0, 3.0)}), "regions['F1_2']"),
        (dict(regions={"F1_1": (0.0, 1.0), "F1_2": (1.0, float("nan")), "F2": (2.0, 3.0)}), "regions['F1_2']"),
        (dict(shift=3), "shift"),
        (dict(fixed=None), "fixed"),
        (dict(fixed={"b": (0.0,)}), "fixed['b']"),
        (dict(train_regions="F1_1"), "train_regions"),
        (dict(train_regions=()), "train_regions"),
        (dict(description=None), "description"),
    ],
)
def test_bad_parametric_family(overrides, name):
    raises(lambda: _family(**overrides), name)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(name=None), "name"),
        (dict(basis="x**p"), "basis"),
        (dict(domain=(1.0,)), "domain"),
        (dict(coef_range=(2.0, -2.0)), "coef_range"),
        (dict(train_levels=(1.5, 2)), "train_levels"),
        (dict(train_levels=()), "train_levels"),
        (dict(test_level=9.0), "test_level"),
    ],
)
def test_bad_ladder(kwargs, name):
    opts = dict(name="l", basis=lambda x, p: x**p, domain=(-1.0, 1.0))
    opts.update(kwargs)
    raises(lambda: Ladder(**opts), name)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(n_context=1), "n_context"),
        (dict(n_context=8.0), "n_context"),
        (dict(n_query=0), "n_query"),
        (dict(context_span=(0.5, 0.2)), "context_span"),
        (dict(query_span=(0.0, 1.5)), "query_span"),
        (dict(query_span=None), "query_span"),
        (dict(noise=float("nan")), "noise"),
        (dict(noise=-0.1), "noise"),
        (dict(name=7), "name"),
    ],
)
def test_bad_observation_protocol(kwargs, name):
    opts = dict(name="p", n_context=4, n_query=4)
    opts.update(kwargs)
    raises(lambda: ObservationProtocol(**opts), name)


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: PrimitiveFamily("p", 42, {"a": (0.0, 1.0)}), "fn"),
        (lambda: PrimitiveFamily("p", np.sin, {"a": (1.0, 0.0)}), "params['a']"),
        (lambda: PrimitiveFamily(None, np.sin, {}), "name"),
        (lambda: PairSplit(train="poly o sin", test=(("sin", "poly"),)), "train"),
        (lambda: PairSplit(train=(("poly", "sin"),), test=(("sin",),)), "test"),
        (lambda: PrimitiveSet.sample(families=[], rng=G), "families"),
        (lambda: PrimitiveSet.sample(grid=[0.0, 0.0, 1.0], rng=G), "grid"),
        (lambda: PrimitiveSet.sample(grid=np.ones((2, 2)), rng=G), "grid"),
        (lambda: PrimitiveSet.sample(domain=(5.0, -5.0), rng=G), "domain"),
        (lambda: PrimitiveSet.from_curves(["a"], [0], np.linspace(0, 1, 3), [[0.0, np.nan, 1.0]]), "curves"),
        (lambda: PrimitiveSet.from_curves(["a"], [0], np.linspace(0, 1, 3), [[0.0, 1j, 1.0]]), "curves"),
        (lambda: PrimitiveSet.from_curves(["a"], [1], np.linspace(0, 1, 3), [[0.0, 0.5, 1.0]]), "family"),
        (lambda: PrimitiveSet.from_curves(["a"], [0.5], np.linspace(0, 1, 3), [[0.0, 0.5, 1.0]]), "family"),
        (lambda: PrimitiveSet.from_curves("a", [0], np.linspace(0, 1, 3), [[0.0, 0.5, 1.0]]), "names"),
    ],
)
def test_bad_primitives(make, name):
    raises(make, name)


# ----------------------------------------------------------------------------- sample counts

FAM = PARAMETER_FAMILIES["quadratic"]
LIB = LadderSet.sample_library(POLYNOMIAL_LADDER, 2, rng(0, "api-counts"))
PRIMS = PrimitiveSet.sample(n_per_family=3, rng=rng(0, "api-counts"))
PAPER = get_protocol("paper")


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", None, np.float64(2.0)])
def test_bad_sample_counts(bad):
    raises(lambda: FAM.sample_params("F1_1", bad, G), "n must")
    raises(lambda: TaskSet.sample(FAM, {"F1_1": bad}, G), "counts['F1_1']")
    raises(lambda: PAPER.draw(TaskSet.sample(FAM, {"F2": 2}, G), bad, G), "n_draws")
    raises(lambda: POLYNOMIAL_LADDER.sample_coefs(2, bad, G), "n must")
    raises(lambda: LadderSet.sample_library(POLYNOMIAL_LADDER, bad, G), "n_per_level")
    raises(lambda: PrimitiveSet.sample(n_per_family=bad, rng=G), "n_per_family")
    raises(lambda: CompositionSet.sample(PRIMS, PAPER_SPLIT.test, bad, G), "n must")
    raises(lambda: POLY.sample(bad, G), "n must")


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: FAM.sample_params("F1_1", 3, 0), "rng"),
        (lambda: FAM.sample_params(["F1_1"], 3, G), "region"),
        (lambda: TaskSet.sample(FAM, [("F1_1", 3)], G), "counts"),
        (lambda: TaskSet.sample(FAM, {}, G), "counts"),
        (lambda: TaskSet.sample("quadratic", {"F1_1": 3}, G), "family"),
        (lambda: TaskSet(FAM, np.ones((2, 2)), np.array(["F1_1"] * 2)), "params"),
        (lambda: TaskSet(FAM, np.full((2, 3), np.nan), np.array(["F1_1"] * 2)), "params"),
        (lambda: TaskSet(FAM, np.ones((2, 3)), np.array(["F1_1"])), "region"),
        (lambda: PAPER.draw([[1.0, 2.0, 3.0]], 1, G), "tasks"),
        (lambda: PAPER.draw(TaskSet.sample(FAM, {"F2": 2}, G), 1, G, noise_scale=float("nan")), "noise_scale"),
        (lambda: POLYNOMIAL_LADDER.sample_coefs(2.0, 3, G), "level"),
        (lambda: POLYNOMIAL_LADDER.sample_coefs(10, 3, G), "level"),
        (lambda: LadderSet.sample_library("polynomial", 3, G), "ladder"),
        (lambda: LadderSet.extend(LIB, [len(LIB)], G), "parents"),
        (lambda: LadderSet.extend(LIB, [0.5], G), "parents"),
        (lambda: LadderSet.extend(LIB, [], G), "parents"),
        (lambda: LadderSet.extend(LIB, [[0]], G), "parents"),
        (lambda: LadderSet.extend(LIB.params, [0], G), "library"),
        (lambda: CompositionSet.sample(PRIMS, PAPER_SPLIT.test, 3, G, pool=[10**6]), "pool"),
        (lambda: CompositionSet.sample(PRIMS, "sin o poly", 3, G), "pairs"),
        (lambda: CompositionSet.sample([1, 2], PAPER_SPLIT.test, 3, G), "primitives"),
        (lambda: FAM(np.ones((2, 3)) + 1j, np.ones((2, 4))), "params"),
        (lambda: FAM(np.ones((2, 3)), np.ones((2, 4), dtype=bool)), "x"),
        (lambda: POLYNOMIAL_LADDER(np.ones((2, 10)), np.ones((2, 4)) * 1j), "x"),
        (lambda: FAM.grid(0), "m"),
    ],
)
def test_bad_task_arguments(call, name):
    raises(call, name)


# ----------------------------------------------------------------------------- libraries


@pytest.mark.parametrize("bad", [[1, 2, 3], {"F1_1": 3}, np.ones((4, 3)), None, "quadratic"])
def test_fit_refuses_what_is_not_a_library(bad):
    raises(lambda: RTE(n_pairs=50, train=TRAIN).fit(bad), "library")
    raises(lambda: LengthRTE(n_pairs=50, train=TRAIN).fit(bad), "library")
    raises(lambda: CompositionRTE(n_pairs=50, train=TRAIN).fit(bad), "library")


def test_fit_refuses_libraries_too_small_to_learn_relations(parameter):
    _, library, _ = parameter
    for n in (0, 1):
        with one_line_error("library"):
            RTE(n_pairs=50, train=TRAIN).fit(library.subset(np.arange(n)))
    raises(lambda: RTE(anchors=50, n_pairs=50, train=TRAIN).fit(library), "anchors")
    ladder = LadderSet.sample_library(POLYNOMIAL_LADDER, 1, rng(0, "api-small"))
    top_and_one = ladder.subset(np.flatnonzero(np.isin(ladder.level, (7, 8))))
    raises(lambda: LengthRTE(n_pairs=50, train=TRAIN).fit(top_and_one), "library")
    raises(lambda: LengthRTE(n_pairs=50, train=TRAIN).fit(ladder.subset(np.arange(0))), "library")
    one_each = PrimitiveSet.sample(n_per_family=1, rng=rng(0, "api-small"))
    raises(lambda: CompositionRTE(n_pairs=50, train=TRAIN).fit(one_each), "library primitives")


# ----------------------------------------------------------------------------- anchors, phi, decompositions


def test_bad_anchors_and_phi_for_the_parameter_regime(parameter):
    model, library, obs = parameter
    cx, cy, n = obs.ctx_x, obs.ctx_y, len(obs)
    anchors = np.zeros((n, 2), dtype=int)
    dim = model.z_library_.shape[1]
    for bad in (
        [[len(library)] * 2] * n,
        anchors - 1,
        anchors + 0.5,
        anchors.astype(bool),
        "0",
        None,
        np.zeros((n, 0), int),
        np.zeros(n + 1, int),
    ):
        with one_line_error("anchors"):
            model.decomposition_for(cx, cy, bad)
    for bad in (
        np.full((n, 2, dim), np.nan),
        np.full((n, 2, dim), np.inf),
        np.zeros((n, 2, dim + 1)),
        np.zeros((n, 2, dim)) + 1j,
        np.zeros((n, 2, dim), dtype=object),
        "phi",
        np.zeros(3),
    ):
        with one_line_error("phi"):
            model.decomposition_for(cx, cy, anchors, bad)
    for bad in (2.5, 0, True, len(library) + 1):
        with one_line_error("k"):
            model.decompose(cx, cy, k=bad)


def test_bad_anchors_and_phi_for_the_length_regime(length):
    model, library, obs = length
    cx, cy, n = obs.ctx_x, obs.ctx_y, len(obs)
    for bad in (np.full(n, 0.5), "0", np.zeros(0, int), np.zeros(n + 1, int), np.ones(n, dtype=bool)):
        with one_line_error("anchors"):
            model.decomposition_for(cx, cy, bad)
    for bad in (np.full(n, np.nan), np.full(n, -np.inf), np.zeros(n + 1), np.zeros(n) + 1j, "phi"):
        with one_line_error("phi"):
            model.decomposition_for(cx, cy, np.zeros(n, int), bad)
    d = model.decomposition_for(cx, cy, np.full(n, len(library)), np.zeros(n))
    raises(lambda: model.predict(cx, cy, obs.qry_x, d), "anchors")
    for bad in (0, -1, 1.5):
        with one_line_error("k"):
            model.decompose(cx, cy, k=bad)
        with one_line_error("k"):
            model.screen(bad)
    raises(lambda: model.retrieval_quality(n=0), "n must")
    raises(lambda: model.retrieval_quality(seed=-2), "seed")


def test_bad_anchors_for_the_composition_regime(composition):
    model, prims, obs = composition
    cx, cy, n = obs.ctx_x, obs.ctx_y, len(obs)
    for bad in (np.zeros(n, int), np.zeros((n, 3), int), np.full((n, 2), 0.5), "0", None):
        with one_line_error("anchors"):
            model.decomposition_for(cx, cy, bad)
    raises(lambda: model.decomposition_for(cx, cy, np.zeros((n, 2), int), np.zeros((n, 1))), "continuous part")
    raises(lambda: model.compose(obs.qry_x, np.zeros(n, int), np.zeros(n + 1, int)), "outer and inner")
    raises(lambda: model.compose(obs.qry_x, np.full(n, len(prims)), np.zeros(n, int)), "outer")
    raises(lambda: model.compose(obs.qry_x, np.zeros(n, int), np.full(n, 1.5)), "inner")
    raises(lambda: model.context_loss(cx, cy, np.zeros(n, int), np.zeros(n, int)), "outer and inner")
    for bad in (0, 2.5):
        with one_line_error("k"):
            model.candidates(cx, cy, k=bad)
    raises(lambda: model.decompose(cx, cy, refine=-1), "refine")
    raises(lambda: model.refined(cx, cy, model.decompose(cx, cy, refine=0), rounds=1.5), "rounds")
    raises(lambda: model.refined(cx, cy, {"anchors": 0}), "decomposition")


def test_bad_decompositions_passed_to_predict(regime):
    model, _, obs = regime
    cx, cy, q = obs.ctx_x, obs.ctx_y, obs.qry_x
    d = model.decompose(cx, cy)
    fewer = Decomposition(d.anchors[:-1], d.phi[:-1], d.score[:-1])
    none = d.columns(slice(0, 0))
    other_phi = Decomposition(d.anchors, np.zeros((*d.anchors.shape[:2], 3, 3)), d.score)
    for bad in (fewer, none, other_phi, {"anchors": d.anchors}, d.anchors):
        with one_line_error("decomposition"):
            model.predict(cx, cy, q, bad)


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: Decomposition(np.zeros((2, 1), int), np.full((2, 1, 3), np.nan), np.zeros((2, 1))), "phi"),
        (lambda: Decomposition(np.zeros((2, 1)), np.zeros((2, 1, 3)), np.zeros((2, 1))), "anchors"),
        (lambda: Decomposition(np.zeros((2, 1), int), np.zeros((2, 1)), np.zeros(2)), "score"),
        (lambda: Decomposition(np.zeros((2, 1), int), np.zeros((2, 1)) + 1j, np.zeros((2, 1))), "phi"),
        (lambda: Decomposition(np.zeros((2, 1), int), np.zeros((2, 1)), np.zeros((2, 1)), extras=[]), "extras"),
        (lambda: Decomposition.given(np.zeros((2, 1)) + 0.5, np.zeros((2, 1))), "anchors"),
        (lambda: Decomposition.given(np.zeros(2, int), np.zeros(2)), "anchors"),
        (lambda: Decomposition.given(np.zeros((2, 1), int), np.full((2, 1), np.inf)), "phi"),
        (lambda: Decomposition.given(np.zeros((2, 1), int), "phi"), "phi"),
    ],
)
def test_bad_decompositions_are_refused_when_made(make, name):
    raises(make, name)


# ----------------------------------------------------------------------------- the rest of the API


def test_oracles_baselines_and_search_arguments(parameter):
    model, library, obs = parameter
    cx, cy, n = obs.ctx_x, obs.ctx_y, len(obs)
    raises(lambda: InductiveBaseline("nope", model), "inductive kind")
    raises(lambda: InductiveBaseline("sparse-inductive", RTE()), "call fit(")
    raises(lambda: InductiveBaseline("sparse-inductive", "rte"), "rte")
    oracle = TransductiveOracle(n_pairs=60, train=TRAIN).fit(library)
    for bad in (np.full((n, 3), np.nan), np.zeros((n, 2)), np.zeros((n, 3)) + 1j, None):
        with one_line_error("theta"):
            oracle.decompose_truth(cx, cy, bad)
    raises(lambda: oracle.decompose_truth(cx, cy, np.zeros((n, 3)), k=1.5), "k")
    z = np.zeros((3, 2))
    for bad in (0, 2.5, True, 4):
        with one_line_error("k"):
            nearest(z, z, bad)
    raises(lambda: nearest(z, z, 1, chunk=0), "chunk")
    raises(lambda: nearest(z, np.zeros((3, 5)), 1), "library_z")
    raises(lambda: nearest(z + 1j, z, 1), "z")
    raises(lambda: posterior_weights(np.ones((2, 2)), -1.0), "temperature")
    raises(lambda: tied(np.ones(3), float("nan")), "tie_tol")
    raises(lambda: ctx_polyfit(cx, cy, obs.qry_x, max_degree=True), "max_degree")
    raises(lambda: library_best_fit(cx, cy, obs.qry_x, lambda i, x: x**400.0, 2), "library_fn")


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: ProxyEmbedding(dim=0), "dim"),
        (lambda: ProxyEmbedding(width=-1), "width"),
        (lambda: ProxyEmbedding(adapt_lr=float("nan")), "adapt_lr"),
        (lambda: ProxyEmbedding(adapt_steps=1.5), "adapt_steps"),
        (lambda: ProxyEmbedding(pretrain_steps=-1), "pretrain_steps"),
        (lambda: ProxyEmbedding(seed=None), "seed"),
        (lambda: ProxyEmbedding(method="pca"), "embedding"),
        (lambda: ProxyEmbedding().fit(None, np.ones((3, 4))), "ctx_x"),
        (lambda: ProxyEmbedding().fit(np.ones((3, 4)), np.ones((3, 4)) + 1j), "ctx_y"),
        (lambda: ProxyEmbedding().fit(np.ones((3, 4)), np.ones((3, 4)), params=np.ones((2, 1))), "params"),
        (lambda: ProxyEmbedding().fit(np.ones((3, 4)), np.ones((3, 4)), pretrain_x=np.ones(3)), "pretrain_x"),
        (lambda: ProxyEmbedding().transform(np.ones((3, 4)), np.ones((3, 4))), "not fitted"),
    ],
)
def test_bad_embedding_arguments(make, name):
    raises(make, name)


def test_valid_inputs_of_other_dtypes_are_accepted_as_floats(parameter):
    """int, float32 and float16 contexts are numbers: the same predictions as their float64 copy."""
    model, _, obs = parameter
    ref = model.predict(
        obs.ctx_x.astype(np.float16).astype(float), obs.ctx_y.astype(np.float16).astype(float), obs.qry_x
    )
    got = model.predict(obs.ctx_x.astype(np.float16), obs.ctx_y.astype(np.float16), obs.qry_x.tolist())
    np.testing.assert_array_equal(got, ref)
    ints = np.round(obs.ctx_x).astype(np.int32)
    np.testing.assert_array_equal(
        model.predict(ints, obs.ctx_y, obs.qry_x), model.predict(ints.astype(float), obs.ctx_y, obs.qry_x)
    )


def test_fit_progress_columns_values_and_protocol_lookups(parameter):
    model, library, obs = parameter
    raises(lambda: RTE(n_pairs=50, train=TRAIN).fit(library, progress=5), "progress")
    raises(lambda: LengthRTE(n_pairs=50, train=TRAIN).fit(LIB, progress="bar"), "progress")
    d = model.decompose(obs.ctx_x, obs.ctx_y)
    for bad in (d.k, -1, 0.5, True, "0", [0, 5]):
        with one_line_error("cols"):
            d.columns(bad)
    for tasks in (library, LIB):
        for bad in ([len(tasks)], [-1], [0.5], np.array([True]), "0"):
            with one_line_error("index"):
                tasks.values(np.ones((1, 3)), bad)
    raises(lambda: LIB.values_at(np.ones((1, 3)), [[len(LIB)]]), "index")
    raises(lambda: FAM.region_of(np.ones(3)), "params")
    raises(lambda: FAM.scaled_params(np.full((1, 3), np.nan)), "params")
    raises(lambda: FAM.output_range(3), "rng")
    raises(lambda: get_protocol("paper", ["length"]), "regime")


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: __import__("taskextrap.experiments.catalogue", fromlist=["x"]).get_experiment("paramter"),
            r"unknown experiment 'paramter'.*; did you mean 'parameter'\?$",
        ),
        (
            lambda: __import__("taskextrap.tasks.registry", fromlist=["x"]).get_family("quadratc"),
            r"unknown family 'quadratc'.*; did you mean 'quadratic'\?$",
        ),
        (
            lambda: __import__("taskextrap.tasks.regimes", fromlist=["x"]).get_protocol("stric"),
            r"unknown protocol 'stric'.*; did you mean 'strict'\?$",
        ),
    ],
)
def test_a_near_miss_name_gets_a_did_you_mean(call, match):
    with pytest.raises(TaskextrapError, match=match):
        call()


def test_a_far_name_gets_no_guess():
    from taskextrap.errors import did_you_mean

    assert did_you_mean("zzz", ["parameter", "length"]) == ""
    assert did_you_mean(3, ["parameter"]) == ""
    assert did_you_mean("lenght", ["parameter", "length"]) == "; did you mean 'length'?"
