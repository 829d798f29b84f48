"""The chained RTE of App. B.1.1: ghost contexts, step schedules, and one step = plain RTE."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.baselines.oracles import ChainedTransductiveOracle
from taskextrap.estimators.multistep import MAX_STEPS, ChainedRTE, with_steps
from taskextrap.seeding import rng
from taskextrap.tasks import TaskSet, get_protocol
from taskextrap.tasks.builtin import MULTISTEP_FAMILIES, PARAMETER_FAMILIES, with_far_regions

from conftest import TINY_TRAIN

FAM = MULTISTEP_FAMILIES["quadratic"]


@pytest.fixture(scope="module")
def library():
    return TaskSet.sample(FAM, {"F1_1": 10, "F1_2": 10}, rng(0, "test-library"))


@pytest.fixture(scope="module")
def chained(library):
    return ChainedRTE(n_pairs=300, train=TINY_TRAIN, seed=0).fit(library)


@pytest.fixture(scope="module")
def far():
    targets = TaskSet.sample(FAM, {"F5": 4}, rng(0, "test-far"))
    return get_protocol("paper").draw(targets, 2, rng(1, "test-far-draws"))


def test_far_regions_are_one_f2_width_apart_beyond_f2():
    quad, exp = MULTISTEP_FAMILIES["quadratic"], MULTISTEP_FAMILIES["exp"]
    assert [quad.regions[r] for r in ("F3", "F4", "F5")] == [(3.5, 4.5), (4.5, 5.5), (5.5, 6.5)]
    assert [exp.regions[r] for r in ("F3", "F4", "F5")] == [(0.2, 0.25), (0.25, 0.3), (0.3, 0.35)]
    assert MULTISTEP_FAMILIES["sin_trend"].regions["F5"] == (0.6, 0.7)
    assert set(quad.held_out_regions) == {"F2", "F3", "F4", "F5"} and quad.train_regions == ("F1_1", "F1_2")
    assert "F3" not in PARAMETER_FAMILIES["quadratic"].regions  # Table 1's families are unchanged


def test_one_step_is_exactly_the_plain_rte(library, chained, far, fitted_rte=None):
    from taskextrap.estimators.parameter import RTE

    plain = RTE(n_pairs=300, train=TINY_TRAIN, seed=0, search="proxy").fit(library)  # the chain's search
    d = chained.decompose(far.ctx_x, far.ctx_y)
    one = chained.predict(far.ctx_x, far.ctx_y, far.qry_x, with_steps(d, 1))
    np.testing.assert_allclose(one, plain.predict(far.ctx_x, far.ctx_y, far.qry_x), rtol=1e-6)
    assert not np.allclose(chained.predict(far.ctx_x, far.ctx_y, far.qry_x, with_steps(d, 4)), one)


class _RecordingPsi:
    """Psi stand-in: returns anchor + 1 and records what each step was given."""

    def __init__(self):
        self.calls = []

    def predict(self, ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift):
        self.calls.append(dict(ctx_y=ctx_y.copy(), anc_ctx=anc_ctx.copy(), anc_q=anc_q.copy(), shift=shift.copy()))
        return anc_q + 1.0


def test_each_step_sees_the_ghost_context_and_its_share_of_the_shift(library, chained, far):
    model = ChainedRTE(n_pairs=300, train=TINY_TRAIN, seed=0)
    model.__dict__.update({k: v for k, v in vars(chained).items() if k.endswith("_")})
    model.psi_ = psi = _RecordingPsi()
    cx, cy, qx = far.ctx_x[:1], far.ctx_y[:1], far.qry_x[:1]
    d = with_steps(model.decompose(cx, cy, k=1), 3)
    pred = model.predict(cx, cy, qx, d)
    order = np.argsort(cx, axis=1)
    sy = np.take_along_axis(cy, order, 1)
    anc = library.values(np.take_along_axis(cx, order, 1), d.anchors[:, 0])
    assert len(psi.calls) == 3
    for t, call in enumerate(psi.calls, start=1):
        np.testing.assert_allclose(call["ctx_y"], anc + t / 3 * (sy - anc))  # the ghost context
        prev = anc if t == 1 else psi.calls[t - 2]["ctx_y"]
        np.testing.assert_allclose(call["anc_ctx"], prev)  # the previous ghost is the anchor's context
        np.testing.assert_allclose(call["shift"], d.phi[:, 0] / 3)
    np.testing.assert_allclose(psi.calls[-1]["ctx_y"], sy)  # the last step sees the real context
    np.testing.assert_allclose(pred, library.values(qx, d.anchors[:, 0]) + 3.0)  # each step's curve is the next anchor


def test_re_embedded_shifts_sum_to_the_total_shift(library, chained, far):
    model = ChainedRTE(n_pairs=300, train=TINY_TRAIN, seed=0, shift_split="re-embed")
    model.__dict__.update({k: v for k, v in vars(chained).items() if k.endswith("_")})
    model.psi_ = psi = _RecordingPsi()
    cx, cy, qx = far.ctx_x[:2], far.ctx_y[:2], far.qry_x[:2]
    d = with_steps(model.decompose(cx, cy), 4)
    model.predict(cx, cy, qx, d)
    total = sum(c["shift"] for c in psi.calls)
    np.testing.assert_allclose(total, d.phi.reshape(-1, d.phi.shape[2]), rtol=1e-5, atol=1e-6)
    assert not np.allclose(psi.calls[0]["shift"], psi.calls[1]["shift"])  # not a linear split


def test_auto_steps_keep_every_step_within_the_training_shifts(chained, far):
    cx, cy = far.ctx_x, far.ctx_y
    d = chained.decompose(cx, cy)
    size = chained.step_size()
    assert size == pytest.approx(np.quantile(chained.step_measures_["shift"], 0.9))
    steps = chained.step_counts(d, cx, cy)
    norms = np.linalg.norm(d.phi, axis=2)
    np.testing.assert_array_equal(steps, np.maximum(1, np.ceil(norms / size)))
    assert np.all(norms / steps <= size + 1e-12)
    by_context = _with_fit(
        ChainedRTE(n_pairs=300, train=TINY_TRAIN, seed=0, step_measure="context", step_quantile=0.5), chained
    )
    gap_size = np.quantile(chained.step_measures_["context"], 0.5)
    order = np.argsort(cx, axis=1)
    sx, sy = np.take_along_axis(cx, order, 1), np.take_along_axis(cy, order, 1)
    gap = np.sqrt(np.mean(chained.scaler_.dy(sy - chained.library_.values(sx, d.anchors[:, 0])) ** 2, axis=1))
    np.testing.assert_array_equal(by_context.step_counts(d, cx, cy)[:, 0], np.maximum(1, np.ceil(gap / gap_size)))
    assert by_context.step_counts(d, cx, cy).max() > 1  # F5 is far beyond the training gaps
    assert np.all(
        _with_fit(ChainedRTE(n_pairs=300, train=TINY_TRAIN, seed=0, steps=5), chained).step_counts(d, cx, cy) == 5
    )
    given = with_steps(d, [2, 3] * (len(far) // 2))
    assert np.all(chained.step_counts(given, cx, cy) == np.repeat([[2], [3]] * (len(far) // 2), 2, 1))


def _with_fit(model, fitted):
    """``model`` with ``fitted``'s fitted attributes (the same fit, other settings)."""
    model.__dict__.update({k: v for k, v in vars(fitted).items() if k.endswith("_")})
    return model


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(steps=0), "steps must be 'auto' or an int"),
        (dict(steps="often"), "steps must be 'auto'"),
        (dict(steps=True), "steps must be"),
        (dict(step_quantile=0.0), "step_quantile must be"),
        (dict(shift_split="cubic"), "shift_split must be one of"),
        (dict(step_measure="size"), "step_measure must be"),
    ],
)
def test_bad_settings_are_one_line_errors(bad, match):
    with pytest.raises(TaskextrapError, match=match) as e:
        ChainedRTE(**bad)
    assert "\n" not in str(e.value)


def test_bad_step_counts_are_one_line_errors(chained, far):
    d = chained.decompose(far.ctx_x, far.ctx_y)
    for bad, match in (
        (0, "between 1 and"),
        (MAX_STEPS + 1, "between 1 and"),
        (2.5, "integer step counts"),
        (np.ones((3, 5), int), "must broadcast"),
    ):
        with pytest.raises(TaskextrapError, match=match):
            with_steps(d, bad)


def test_the_oracle_chains_the_true_shift_linearly_only():
    with pytest.raises(TaskextrapError, match="splits the true shift linearly"):
        ChainedTransductiveOracle(shift_split="re-embed")


def test_with_far_regions_on_a_users_family():
    fam = with_far_regions(PARAMETER_FAMILIES["cubic"], ("F3",))
    assert fam.regions["F3"] == (3.5, 4.5) and "F4" not in fam.regions
