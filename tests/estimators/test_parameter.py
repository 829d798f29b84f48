"""The RTE estimator API: fit / embed / decompose / predict, input validation, training."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.estimators.parameter import RTE
from taskextrap.tasks import get_protocol


def _parts(d):
    """(anchors, phi, score) of a decomposition."""
    return d.anchors, d.phi, d.score


def _one_line(exc_info):
    msg = str(exc_info.value)
    assert msg and "\n" not in msg
    return msg


# ----------------------------------------------------------------------------- fitted state


def test_fit_sets_state(fitted_rte, quad_library):
    rte = fitted_rte
    assert rte.protocol_ is get_protocol("paper")
    assert rte.z_library_.shape == (len(quad_library), 16)
    np.testing.assert_allclose(np.linalg.norm(rte.z_library_, axis=1), 1.0, atol=1e-9)
    assert len(rte.psi_.history) == 15
    assert set(rte.timing_) >= {"embedding_s", "psi_training_s"}
    # the validation split holds out library (training-region) tasks only, disjoint from training
    d = rte.draws_
    assert d.train.any() and d.val.any() and not (d.train & d.val).any()
    assert set(d.obs.task[d.val]).isdisjoint(rte.train_tasks_)


# ----------------------------------------------------------------------------- decompose


def test_decompose_returns_nearest_anchors_sorted_with_phi(fitted_rte, quad_targets):
    rte = fitted_rte
    _, obs = quad_targets
    anchors, phi, dist = _parts(rte.decompose(obs.ctx_x, obs.ctx_y))
    n = len(obs)
    assert anchors.shape == (n, rte.anchors) == (n, 2)
    assert phi.shape == (n, 2, 16) and dist.shape == (n, 2)
    assert np.issubdtype(anchors.dtype, np.integer)
    assert anchors.min() >= 0 and anchors.max() < len(rte.library_)
    z = rte.embed(obs.ctx_x, obs.ctx_y)
    np.testing.assert_allclose(phi, z[:, None, :] - rte.z_library_[anchors], atol=1e-12)
    np.testing.assert_allclose(dist, np.linalg.norm(phi, axis=2), atol=1e-12)
    assert np.all(np.diff(dist, axis=1) >= 0)  # nearest first
    all_dist = np.linalg.norm(z[:, None] - rte.z_library_[None], axis=2)
    np.testing.assert_allclose(dist[:, 0], all_dist.min(axis=1), atol=1e-12)
    np.testing.assert_allclose(dist, np.sort(all_dist, axis=1)[:, :2], atol=1e-12)
    # k overrides the number of anchors
    a5, phi5, d5 = _parts(rte.decompose(obs.ctx_x, obs.ctx_y, k=5))
    assert a5.shape == (n, 5) and phi5.shape == (n, 5, 16)
    np.testing.assert_array_equal(a5[:, :2], anchors)
    assert np.all(np.diff(d5, axis=1) >= 0)


# ----------------------------------------------------------------------------- predict


def test_predict_shapes_and_shared_query_row(fitted_rte, quad_targets):
    rte = fitted_rte
    _, obs = quad_targets
    n = len(obs)
    pred = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    assert pred.shape == (n, 8) and np.all(np.isfinite(pred))
    # a different number of queries per task
    assert rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x[:, :3]).shape == (n, 3)
    # one query row shared by every task (1-D or (1, q))
    row = np.linspace(0.0, 20.0, 5)
    shared = rte.predict(obs.ctx_x, obs.ctx_y, row)
    assert shared.shape == (n, 5)
    np.testing.assert_allclose(shared, rte.predict(obs.ctx_x, obs.ctx_y, np.tile(row, (n, 1))), rtol=1e-6)
    np.testing.assert_allclose(rte.predict(obs.ctx_x, obs.ctx_y, row[None]), shared, rtol=1e-6)
    # a single task given as 1-D arrays
    single = rte.predict(obs.ctx_x[0], obs.ctx_y[0], obs.qry_x[0])
    assert single.shape == (1, 8)
    np.testing.assert_allclose(single[0], pred[0], rtol=1e-5, atol=1e-6)


def test_predict_averages_the_anchors_and_takes_a_given_decomposition(fitted_rte, quad_targets):
    rte = fitted_rte
    _, obs = quad_targets
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    n = len(obs)
    anchors, _, _ = _parts(rte.decompose(cx, cy))
    default = rte.predict(cx, cy, qx)
    np.testing.assert_allclose(rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, anchors)), default, rtol=1e-6)
    each = [rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, anchors[:, j : j + 1])) for j in range(2)]
    np.testing.assert_allclose(np.mean(each, axis=0), default, rtol=1e-5, atol=1e-6)
    # zero shift (the ablation): runs, and differs from the retrieved shift
    zero = rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, anchors, np.zeros((n, 2, 16))))
    assert zero.shape == (n, 8) and np.all(np.isfinite(zero))
    assert not np.allclose(zero, default)
    # random anchors (the ablation)
    rand = np.random.default_rng(0).integers(len(rte.library_), size=(n, 3))
    out = rte.predict(cx, cy, qx, rte.decomposition_for(cx, cy, rand))
    assert out.shape == (n, 8) and np.all(np.isfinite(out))


def test_psi_predicts_the_target_minus_anchor_residual(fitted_rte, quad_targets, monkeypatch):
    """Psi's output is the target's residual to the anchor, scaled: it is trained on
    dy(target - anchor) and its prediction is anchor + dy_inv(network output)."""
    import torch

    from taskextrap.operators.parameter import RelationalOperator

    rte = fitted_rte
    # training: the regression target of every row is the scaled target - anchor residual
    batch = rte._pair_arrays(np.flatnonzero(rte.draws_.val), np.random.default_rng(0))
    op = RelationalOperator(rte.scaler_, rte.protocol_.n_context, rte.z_library_.shape[1], 0, rte.train)
    seen = {}
    monkeypatch.setattr(op, "_job", lambda make_rows, val_rows, rng, progress=None: seen.update(val=val_rows))
    op.fit_job(lambda g: batch, batch, np.random.default_rng(0))
    _ctx_x, _ctx_y, _anc_ctx, _qry_x, anc_q, _shift, qry_y = batch
    np.testing.assert_allclose(seen["val"][1], rte.scaler_.dy(qry_y - anc_q).reshape(-1), rtol=1e-6, atol=1e-6)
    assert not np.allclose(seen["val"][1], rte.scaler_.y(qry_y).reshape(-1))  # not the target itself
    # prediction: a network that outputs c everywhere predicts the anchor shifted by c * y_std
    _, obs = quad_targets
    anchors, _, _ = _parts(rte.decompose(obs.ctx_x, obs.ctx_y))
    anchor_vals = rte.library_.values(obs.qry_x, anchors[:, 0])
    for c in (0.0, 0.5):
        monkeypatch.setattr(rte.psi_, "net", lambda rows, c=c: torch.full((len(rows), 1), c))
        pred = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, rte.decomposition_for(obs.ctx_x, obs.ctx_y, anchors[:, :1]))
        np.testing.assert_allclose(pred, anchor_vals + c * rte.scaler_.y_std, rtol=1e-6, atol=1e-6)


def test_unfitted_rte_raises():
    rte = RTE()
    x = np.linspace(0, 20, 8)[None]
    with pytest.raises(TaskextrapError, match="not fitted") as e:
        rte.predict(x, x, x)
    _one_line(e)
    with pytest.raises(TaskextrapError, match="not fitted"):
        rte.decompose(x, x)


def test_unfitted_rte_embed_raises_taskextrap_error():
    x = np.linspace(0, 20, 8)[None]
    with pytest.raises(TaskextrapError, match="not fitted"):
        RTE().embed(x, x)


# ----------------------------------------------------------------------------- bad input


def _bad_inputs(obs):
    cx, cy = obs.ctx_x.copy(), obs.ctx_y.copy()
    nan_y = cy.copy()
    nan_y[1, 2] = np.nan
    inf_x = cx.copy()
    inf_x[0, 0] = np.inf
    return {
        "nan": (cx, nan_y, "NaN"),
        "inf": (inf_x, cy, "NaN or inf"),
        "empty": (np.zeros((len(cx), 0)), np.zeros((len(cx), 0)), "empty"),
        "empty-1d": (np.array([]), np.array([]), "empty"),
        "shape-points": (cx, cy[:, :7], "same shape"),
        "shape-rows": (cx, cy[:-1], "same shape"),
        "wrong-count": (cx[:, :5], cy[:, :5], "reads at least 8"),
        "3d": (cx[None], cy[None], "shape"),
        "text": (np.array([["a"] * 8]), np.ones((1, 8)), "numeric"),
    }


@pytest.mark.parametrize(
    "case", ["nan", "inf", "empty", "empty-1d", "shape-points", "shape-rows", "wrong-count", "3d", "text"]
)
def test_bad_context_gives_one_line_error(fitted_rte, quad_targets, case):
    _, obs = quad_targets
    cx, cy, match = _bad_inputs(obs)[case]
    for call in (
        lambda: fitted_rte.predict(cx, cy, obs.qry_x[: len(cx)]),
        lambda: fitted_rte.decompose(cx, cy),
        lambda: fitted_rte.embed(cx, cy),
    ):
        with pytest.raises(TaskextrapError, match=match) as e:
            call()
        _one_line(e)


def test_bad_queries_give_one_line_errors(fitted_rte, quad_targets):
    _, obs = quad_targets
    q = obs.qry_x.copy()
    q[0, 0] = np.nan
    for bad, match in ((q, "NaN"), (obs.qry_x[:3], "rows"), (np.zeros((len(obs), 0)), "empty")):
        with pytest.raises(TaskextrapError, match=match) as e:
            fitted_rte.predict(obs.ctx_x, obs.ctx_y, bad)
        _one_line(e)


def test_strict_protocol_rte_wants_five_context_points(make_rte):
    rte = make_rte(protocol="strict")
    assert rte.resolved("protocol").n_context == 5
    rte._resolve()  # pretend fitted: the count is checked before anything is used
    rte.psi_ = object()
    with pytest.raises(TaskextrapError, match="reads at least 5"):
        rte.decompose(np.ones((2, 3)), np.ones((2, 3)))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(anchors=0), "anchors"),
        (dict(near_fraction=1.5), "near_fraction"),
        (dict(protocol="lenient"), "unknown protocol"),
    ],
)
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(TaskextrapError, match=match):
        RTE(**kwargs)


# ----------------------------------------------------------------------------- Gamma of a target


def test_target_embedding_depends_on_its_context_only(fitted_rte, quad_targets):
    rte = fitted_rte
    targets, obs = quad_targets
    z_lib = rte.z_library_.copy()
    z = rte.embed(obs.ctx_x, obs.ctx_y)
    anchors, _, _ = _parts(rte.decompose(obs.ctx_x, obs.ctx_y))
    pred = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)

    # Other draws: new query points and values for every target, and new contexts for the others.
    other = get_protocol("paper").draw(targets, 1, np.random.default_rng(999))
    assert not np.allclose(other.qry_x, obs.qry_x) and not np.allclose(other.qry_y, obs.qry_y)
    cx, cy = other.ctx_x.copy(), other.ctx_y.copy()
    cx[0], cy[0] = obs.ctx_x[0], obs.ctx_y[0]  # target 0 keeps its own context
    z2 = rte.embed(cx, cy)
    np.testing.assert_allclose(z2[0], z[0], atol=1e-6)
    a2, _, _ = _parts(rte.decompose(cx, cy))
    np.testing.assert_array_equal(a2[0], anchors[0])
    # target 0's predictions at its own queries do not depend on other tasks or on its query values
    qx = other.qry_x.copy()
    qx[0] = obs.qry_x[0]
    p2 = rte.predict(cx, cy, qx)
    np.testing.assert_allclose(p2[0], pred[0], rtol=1e-5, atol=1e-6)
    # ... nor on its other query points (pointwise prediction)
    qx[0, 1:] = other.qry_x[0, 1:]
    p3 = rte.predict(cx, cy, qx)
    np.testing.assert_allclose(p3[0, 0], pred[0, 0], rtol=1e-5, atol=1e-6)
    # embedding targets never refits anything
    np.testing.assert_array_equal(rte.z_library_, z_lib)

    # Changing one context y value does change Gamma (and can move the anchors)
    cy3 = obs.ctx_y.copy()
    cy3[0, 4] += 0.2 * np.abs(obs.ctx_y).max()
    z3 = rte.embed(obs.ctx_x, cy3)
    assert np.linalg.norm(z3[0] - z[0]) > 1e-4
    np.testing.assert_allclose(z3[1:], z[1:], atol=1e-6)


def test_context_order_does_not_change_predictions(fitted_rte, quad_targets):
    _, obs = quad_targets
    perm = np.random.default_rng(0).permutation(8)
    a = fitted_rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    b = fitted_rte.predict(obs.ctx_x[:, perm], obs.ctx_y[:, perm], obs.qry_x)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- training


def test_psi_training_loss_falls(make_rte, quad_library):
    rte = make_rte(train=TrainConfig(steps=200, batch=256, eval_every=50)).fit(quad_library)
    h = np.asarray(rte.psi_.history)
    assert len(h) == 200 and np.all(np.isfinite(h))
    assert h[-20:].mean() < 0.5 * h[:20].mean()


def test_transductive_oracle_decomposes_from_the_truth_only(quad_library, quad_targets):
    from taskextrap.baselines.oracles import TransductiveOracle
    from taskextrap.operators.train import TrainConfig

    targets, obs = quad_targets
    oracle = TransductiveOracle(n_pairs=200, train=TrainConfig(steps=5, batch=256, eval_every=5)).fit(quad_library)
    d = oracle.decompose_truth(obs.ctx_x, obs.ctx_y, targets.params[obs.task])
    theta = quad_library.family.scaled_params(targets.params[obs.task])
    nearest = np.argmin(np.linalg.norm(theta[:, None] - oracle.z_library_[None], axis=2), axis=1)
    np.testing.assert_array_equal(d.anchors[:, 0], nearest)  # the library task nearest by true theta
    np.testing.assert_allclose(d.phi, theta[:, None] - oracle.z_library_[d.anchors])  # the true shift
    assert oracle.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d).shape == obs.qry_x.shape
    for call in (
        lambda: oracle.decompose(obs.ctx_x, obs.ctx_y),
        lambda: oracle.decomposition_for(obs.ctx_x, obs.ctx_y, d.anchors),
    ):
        with pytest.raises(TaskextrapError, match="decompose_truth") as e:
            call()
        _one_line(e)
