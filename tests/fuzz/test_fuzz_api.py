"""Property-based fuzzing of the public Python API (Hypothesis).

Random shapes, dtypes (float16..64, ints, bools, complex, strings, objects), NaN/inf, empty and
huge values go to the three fitted estimators' ``decompose``/``predict``, and random settings to
the constructors users call (``RTE``, ``TrainConfig``, ``ParametricFamily``, ``TaskSet.sample``).
Every call must either return a result of the right shape with finite values or raise a one-line
``TaskextrapError``: never another exception, never a NaN, never a hang (Hypothesis' deadline).
"""

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from taskextrap.errors import TaskextrapError  # noqa: E402
from taskextrap.operators.train import TrainConfig  # noqa: E402
from taskextrap.seeding import rng  # noqa: E402

FUZZ = settings(
    max_examples=60,
    deadline=10_000,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TINY_DISCRETE = dict(
    train=TrainConfig(steps=10, batch=256, eval_every=5),
    decomposer_train=TrainConfig(steps=10, batch=64, eval_every=5),
    seed=0,
)

# Numbers that hurt: NaN, inf, signed zeros, subnormals, huge and tiny values.
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-320, 1e300, -1e300, 1e150, 1e20, 3.0, -5.0, 0.5]),
)
DTYPES = st.sampled_from(
    [np.float64, np.float32, np.float16, np.int64, np.int8, np.uint8, np.bool_, np.complex128, "U3", object]
)


def hostile_array(max_dims: int = 3):
    """Any shape (0-d to 3-d, sides 0..9) of any dtype, filled with hostile numbers where it can."""

    def build(dtype):
        if dtype in (np.float64, np.float32, np.float16, np.complex128):
            return hnp.arrays(
                dtype,
                hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=9),
                elements=NUMBERS.map(lambda v: np.dtype(dtype).type(v))
                if dtype != np.complex128
                else st.complex_numbers(allow_nan=True, allow_infinity=True),
            )
        if dtype is object:
            return st.lists(st.one_of(st.none(), st.text(max_size=2), st.floats()), max_size=6).map(
                lambda v: np.array(v, dtype=object)
            )
        return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=9))

    return DTYPES.flatmap(build)


@st.composite
def contexts(draw, n_points: int, domain: tuple[float, float]):
    """(ctx_x, ctx_y, x_query): mostly well-formed (right point count, inside the domain, moderate
    values) with one part made hostile, so both the accepting and the refusing paths are hit."""
    n = draw(st.integers(1, 4))
    q = draw(st.integers(1, 5))
    inside = st.floats(*domain, allow_nan=False)
    ctx_x = draw(hnp.arrays(np.float64, (n, n_points), elements=inside))
    ctx_y = draw(hnp.arrays(np.float64, (n, n_points), elements=st.floats(-50, 50, allow_nan=False)))
    x_query = draw(hnp.arrays(np.float64, (n, q), elements=inside))
    which = draw(st.sampled_from(["none", "ctx_x", "ctx_y", "x_query", "scale", "list", "swap"]))
    if which in ("ctx_x", "ctx_y", "x_query"):
        hostile = draw(hostile_array())
        ctx_x, ctx_y, x_query = (
            hostile if which == k else v for k, v in (("ctx_x", ctx_x), ("ctx_y", ctx_y), ("x_query", x_query))
        )
    elif which == "scale":  # finite but far outside anything seen in training
        ctx_y = ctx_y * draw(st.sampled_from([1e6, 1e12, 1e100, -1e140, 1e-300]))
    elif which == "list":
        ctx_x, ctx_y, x_query = ctx_x.tolist(), ctx_y.tolist(), x_query.tolist()
    elif which == "swap":
        ctx_x, x_query = x_query, ctx_x
    return ctx_x, ctx_y, x_query


def check_call(call, expected_rows=None):
    """Run ``call()``: a finite float array (of ``expected_rows`` rows) or a one-line TaskextrapError."""
    try:
        out = call()
    except TaskextrapError as exc:
        assert str(exc) and "\n" not in str(exc)
        _event("refused")
        return None
    out = np.asarray(out)
    assert out.dtype.kind == "f" and np.all(np.isfinite(out)), out
    if expected_rows is not None:
        assert out.shape[0] == expected_rows
    _event("accepted")
    return out


def _event(name: str) -> None:
    """Count an outcome in Hypothesis' statistics (``--hypothesis-show-statistics``)."""
    if hypothesis.control.currently_in_test_context():
        hypothesis.event(name)


# ----------------------------------------------------------------------------- fitted estimators


@pytest.fixture(scope="module")
def length_rte():
    from taskextrap.estimators.length import LengthRTE
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet

    return LengthRTE(n_pairs=200, **TINY_DISCRETE).fit(LadderSet.sample_library(POLYNOMIAL_LADDER, 8, rng(0, "f")))


@pytest.fixture(scope="module")
def composition_rte():
    from taskextrap.estimators.composition import CompositionRTE
    from taskextrap.tasks.primitives import PrimitiveSet

    return CompositionRTE(n_pairs=150, k=4, **TINY_DISCRETE).fit(PrimitiveSet.sample(n_per_family=12, rng=rng(0, "f")))


def _fuzz_estimator(model, data, domain):
    ctx_x, ctx_y, x_query = data.draw(contexts(model.resolved("protocol").n_context, domain))
    pred = check_call(lambda: model.predict(ctx_x, ctx_y, x_query))
    if pred is not None:  # (targets, queries); a 1-D x_query is one row shared by every target
        assert pred.ndim == 2 and pred.shape[1] == np.shape(x_query)[-1]
        assert pred.shape[0] == (1 if np.ndim(ctx_x) == 1 else np.shape(ctx_x)[0])
    check_call(lambda: model.decompose(ctx_x, ctx_y).score)


@FUZZ
@given(data=st.data())
def test_rte_predict_and_decompose(fitted_rte, data):
    from taskextrap.tasks import PARAMETER_FAMILIES

    _fuzz_estimator(fitted_rte, data, PARAMETER_FAMILIES["quadratic"].domain)


@FUZZ
@given(data=st.data())
def test_length_rte_predict_and_decompose(length_rte, data):
    _fuzz_estimator(length_rte, data, length_rte.library_.family.domain)


@FUZZ
@given(data=st.data())
def test_composition_rte_predict_and_decompose(composition_rte, data):
    _fuzz_estimator(composition_rte, data, (-5.0, 5.0))


@FUZZ
@given(anchors=hostile_array(max_dims=3), phi=hostile_array(max_dims=3), data=st.data())
def test_rte_decomposition_for(fitted_rte, anchors, phi, data):
    ctx_x, ctx_y, x_query = data.draw(contexts(fitted_rte.protocol_.n_context, (-5.0, 5.0)))
    d = check_call(lambda: fitted_rte.decomposition_for(ctx_x, ctx_y, anchors, phi).phi)
    if d is not None:
        check_call(
            lambda: fitted_rte.predict(ctx_x, ctx_y, x_query, fitted_rte.decomposition_for(ctx_x, ctx_y, anchors, phi))
        )


# ----------------------------------------------------------------------------- constructors

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    NUMBERS,
    st.text(max_size=4),
    st.lists(st.integers(-3, 3), max_size=3),
    st.complex_numbers(max_magnitude=10),
)


def settings_of(names):
    """Up to three of ``names`` set to hostile values."""
    return st.dictionaries(st.sampled_from(names), ANY, max_size=3)


def check_constructor(make, kwargs) -> None:
    """``make(**kwargs)`` builds, or refuses in one line that names one of the settings given."""
    try:
        make(**kwargs)
    except TaskextrapError as exc:
        assert "\n" not in str(exc) and any(k in str(exc) for k in kwargs), (kwargs, str(exc))
        _event("refused")


@FUZZ
@given(
    kwargs=settings_of(
        [
            "anchors",
            "n_pairs",
            "library_draws",
            "near_fraction",
            "n_near",
            "val_fraction",
            "embed_dim",
            "seed",
            "embedding",
            "protocol",
        ]
    )
)
def test_rte_constructor(kwargs):
    from taskextrap.estimators.parameter import RTE

    check_constructor(RTE, kwargs)


@FUZZ
@given(kwargs=settings_of(["steps", "batch", "lr", "weight_decay", "eval_every"]))
def test_train_config(kwargs):
    check_constructor(TrainConfig, kwargs)


@FUZZ
@given(
    fn=st.one_of(st.just(lambda x, a, b: a * x + b), ANY),
    name=st.one_of(st.just("f"), ANY),
    domain=st.one_of(st.just((0.0, 1.0)), st.tuples(NUMBERS, NUMBERS), ANY),
    regions=st.one_of(
        st.just({"F1_1": (0.0, 1.0), "F1_2": (1.0, 2.0), "F2": (2.0, 3.0)}),
        st.dictionaries(st.text(max_size=3), st.tuples(NUMBERS, NUMBERS), max_size=3),
        ANY,
    ),
    counts=st.dictionaries(st.sampled_from(["F1_1", "F1_2", "F2", "F9"]), ANY, min_size=1, max_size=2),
)
def test_family_and_sampling(fn, name, domain, regions, counts):
    from taskextrap.tasks import TaskSet
    from taskextrap.tasks.family import ParametricFamily

    try:
        family = ParametricFamily(name=name, fn=fn, domain=domain, fixed={"b": (0.0, 1.0)}, shift="a", regions=regions)
        tasks = TaskSet.sample(family, counts, np.random.default_rng(0))
        values = tasks.values(np.broadcast_to(family.grid(5), (len(tasks), 5)))
        assert values.shape == (len(tasks), 5)
        _event("accepted")
    except TaskextrapError as exc:
        assert "\n" not in str(exc)
        _event("refused")


def test_the_oracle_of_the_fuzz_suite_can_fail():
    """``check_call`` fails on a NaN result and on a non-TaskextrapError exception."""
    with pytest.raises(AssertionError):
        check_call(lambda: np.array([np.nan]))
    with pytest.raises(ValueError):
        check_call(lambda: (_ for _ in ()).throw(ValueError("not ours")))
    assert check_call(lambda: np.ones((2, 3)), expected_rows=2).shape == (2, 3)
