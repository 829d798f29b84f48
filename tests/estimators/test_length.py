"""LengthRTE: fit on training levels only, Strategy B search, predictions and input checks."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.operators.parameter import sort_context
from taskextrap.search.index import nearest
from taskextrap.estimators.length import LengthRTE
from taskextrap.seeding import rng
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet

TINY = dict(
    n_pairs=200,
    train=TrainConfig(steps=10, batch=512, eval_every=5),
    decomposer_train=TrainConfig(steps=10, batch=64, eval_every=5),
    seed=0,
)


@pytest.fixture(scope="module")
def library():
    return LadderSet.sample_library(POLYNOMIAL_LADDER, 8, rng(0, "test-ladder"))


@pytest.fixture(scope="module")
def fitted(library):
    return LengthRTE(**TINY).fit(library)


@pytest.fixture(scope="module")
def targets(library):
    g = np.random.default_rng(5)
    top = np.flatnonzero(library.level == 8)
    tg = LadderSet.extend(library, top[:3], g)
    return tg, LengthRTE(**TINY).resolved("protocol").draw(tg, 2, g)


def test_decompose_ranks_verified_candidates(fitted, targets):
    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y, k=5)
    assert d.anchors.shape == d.phi.shape == d.score.shape == (6, 5)
    assert np.all(np.diff(d.score, axis=1) >= 0)
    assert np.all(np.abs(d.phi) <= 2) and d.extras["guess_phi"].shape == (6,)
    # each target's k candidates are distinct library tasks from its screened retrieval (the
    # screen() nearest to the decomposer's embedding), and each loss is Psi_ext's leave-one-out
    # context loss at the reported coefficient
    z, _ = fitted.guess(obs.ctx_x, obs.ctx_y)
    screened, _ = nearest(z, fitted.z_library_, fitted.screen(5))
    assert screened.shape[1] > 5
    for row, pool in zip(d.anchors, screened, strict=True):
        assert len(set(row)) == 5 and set(row) <= set(pool)
    cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
    pred_ctx = fitted.library_.values_at(cx, d.anchors)  # (6, 5, 8)
    direct = fitted.psi_.loo_loss(np.repeat(cx, 5, 0), np.repeat(cy, 5, 0), pred_ctx.reshape(30, 8), d.phi.reshape(-1))
    np.testing.assert_allclose(d.score, direct.reshape(6, 5), rtol=1e-5, atol=1e-9)
    unverified = fitted.decompose(obs.ctx_x, obs.ctx_y, k=5, verify=False)
    np.testing.assert_allclose(unverified.phi, np.repeat(d.extras["guess_phi"][:, None], 5, 1))


def test_coefficient_search_finds_the_minimum_of_the_context_loss(fitted, targets, monkeypatch):
    _, obs = targets
    best = 0.37  # a loss whose minimum lies between grid points: the fine pass must find it

    def loss(ctx_x, ctx_y, pred_ctx, phis):  # (n, candidates, m) values, (n, candidates, grid) coefficients
        return (phis - best) ** 2 + 0.01 * np.abs(pred_ctx).mean(axis=2)[..., None]

    monkeypatch.setattr(fitted.psi_, "loo_loss_grid", loss)
    d = fitted.decompose(obs.ctx_x, obs.ctx_y, k=3)
    step = 4 / (fitted.c_grid - 1)
    assert np.all(np.abs(d.phi - best) <= step / 6 + 1e-9)


def test_predict_with_and_without_a_given_decomposition(fitted, targets, library):
    tg, obs = targets
    pred = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    assert pred.shape == obs.qry_x.shape and np.all(np.isfinite(pred))
    parent = tg.parent[obs.task]
    truth = fitted.decomposition_for(obs.ctx_x, obs.ctx_y, parent, tg.new_coef()[obs.task])
    assert truth.k == 1 and np.isnan(truth.score).all()
    oracle = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, truth)
    assert oracle.shape == pred.shape
    bad = fitted.decomposition_for(obs.ctx_x, obs.ctx_y, np.full(6, len(library)), np.zeros(6))
    with pytest.raises(TaskextrapError, match="library indices"):
        fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, bad)
    with pytest.raises(TaskextrapError, match="8 points"):
        fitted.predict(obs.ctx_x[:, :5], obs.ctx_y[:, :5], obs.qry_x)


def test_fit_refuses_held_out_levels_and_wrong_inputs(library):
    with pytest.raises(TaskextrapError, match="held-out level-9"):
        LengthRTE(**TINY).fit(
            LadderSet.extend(library, np.flatnonzero(library.level == 8)[:2], np.random.default_rng(0))
        )
    with pytest.raises(TaskextrapError, match="LadderSet"):
        LengthRTE(**TINY).fit("library")
    with pytest.raises(TaskextrapError, match="not fitted"):
        LengthRTE(**TINY).predict(np.zeros((1, 8)), np.zeros((1, 8)), np.zeros((1, 2)))
    with pytest.raises(TaskextrapError, match="unknown protocol"):
        LengthRTE(protocol="loose")


def test_no_fit_ever_sees_a_level9_task(library):
    with audit.spy() as seen:
        LengthRTE(**TINY).fit(library)
    # adapted Gamma: no probe pretraining, the PCA is the embedding's only fit
    audit.check(seen, POLYNOMIAL_LADDER.training_labels(), required={"scaler", "pca", "psi", "decomposer"})
    assert {("psi", "val"), ("decomposer", "val")} <= {(r.component, r.stage) for r in seen}
    for component, coefs in seen:
        assert coefs.shape[1] == 10 and len(coefs) > 0
        assert np.all(coefs[:, 9] == 0), component  # no degree-9 term anywhere


def test_same_seed_same_numbers(library, targets):
    _, obs = targets
    a = LengthRTE(**TINY).fit(library).predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    b = LengthRTE(**TINY).fit(library).predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    np.testing.assert_array_equal(a, b)


def test_given_anchors_default_to_the_decomposers_coefficient_and_screen_size(fitted, targets):
    _, obs = targets
    given = fitted.decomposition_for(obs.ctx_x, obs.ctx_y, np.zeros((6, 2), dtype=int))
    np.testing.assert_array_equal(given.phi, np.repeat(fitted.guess(obs.ctx_x, obs.ctx_y)[1][:, None], 2, 1))
    assert fitted.screen() == max(fitted.k, int(np.ceil(fitted.screen_fraction * len(fitted.z_library_))))
    assert fitted.screen(k=60) == 60
    q = fitted.retrieval_quality(n=32)
    assert 0 <= q["recall_top_k"] <= q["recall_screened"] <= 1 and q["library_size"] == 64


def test_posterior_average_equals_weighted_candidates(fitted, targets):
    from taskextrap.search.posterior import posterior_weights

    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    w = posterior_weights(d.score, fitted.temperature)
    manual = sum(w[:, j : j + 1] * fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in range(d.k))
    np.testing.assert_allclose(fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, decomposition=d), manual, rtol=1e-9)


def test_relative_weights_are_the_old_rule_and_likelihood_sharpens_as_the_scale_shrinks(fitted, targets):
    import copy

    from taskextrap.search.posterior import posterior_weights

    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    np.testing.assert_allclose(d.weights.sum(axis=1), 1.0)
    np.testing.assert_array_equal(d.weights, posterior_weights(d.score, fitted.temperature))  # n_average None: all k
    model = copy.copy(fitted)
    model.weighting = "likelihood"
    peak = []
    for scale in (fitted.loss_scale_ * 10, fitted.loss_scale_, fitted.loss_scale_ / 10):
        model.loss_scale_ = scale
        w = model.decompose(obs.ctx_x, obs.ctx_y).weights
        np.testing.assert_allclose(w.sum(axis=1), 1.0)
        peak.append(w.max(axis=1))
    assert np.all(peak[0] <= peak[1] + 1e-12) and np.all(peak[1] <= peak[2] + 1e-12) and np.any(peak[2] > peak[0])
    assert fitted.weighting == "relative"  # the fixture is untouched


def test_predictive_sd_is_the_mixture_of_the_weighted_candidates(fitted, targets):
    from taskextrap.search.posterior import mixture

    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    mean, std = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d, return_std=True)
    np.testing.assert_array_equal(mean, fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d))
    preds = np.stack([fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in range(d.k)])
    m2, s2 = mixture(preds, d.weights, fitted.query_var_)
    np.testing.assert_allclose(mean, m2, rtol=1e-9)
    scale = fitted.calibrated_scale()  # the dev-chosen interval scale (search.calibration)
    np.testing.assert_allclose(std, scale * s2, rtol=1e-9)
    assert np.all(std >= scale * np.sqrt(fitted.query_var_) * (1 - 1e-9))
    _one_mean, one_std = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(0), return_std=True)
    np.testing.assert_allclose(one_std, scale * np.sqrt(fitted.query_var_))  # one candidate: Psi's own error only


def test_bad_weighting_is_a_one_line_error():
    with pytest.raises(TaskextrapError, match="unknown weighting 'bayes'") as e:
        LengthRTE(weighting="bayes")
    assert "\n" not in str(e.value)


def test_calibration_uses_validation_pool_tasks_only(library):
    rte = LengthRTE(**TINY)
    with audit.spy() as seen:
        rte.fit(library)
    calib = [r for r in seen if r.component == "calibration"]
    assert calib and all(r.stage == "val" for r in calib)
    audit.check(calib, POLYNOMIAL_LADDER.training_labels())
    drawn = []
    real = rte.draw_training_tasks

    def spy(pool, n, g):
        out = real(pool, n, g)
        drawn.append((pool, out[0]))
        return out

    rte.draw_training_tasks = spy
    try:
        scale, var = rte._calibrate()
    finally:
        del rte.draw_training_tasks
    assert (scale, var) == (rte.loss_scale_, rte.query_var_) and scale > 0 and var > 0
    ((pool, tasks),) = drawn
    assert pool is rte.val_pool_ and set(tasks.parent) <= set(rte.val_pool_)
    assert not set(tasks.parent) & set(rte.train_pool_)


@pytest.mark.parametrize(("m", "chunk"), [(8, None), (5, None), (8, 100), (5, 37)])
def test_the_grid_of_leave_one_out_losses_is_loo_loss_on_repeated_rows_bit_for_bit(fitted, m, chunk, monkeypatch):
    """The verification's rows, scaled once per target and candidate and written in float32 a
    prediction pass at a time (also passes that end inside a task's m rows), are those of
    loo_loss on every (target, candidate, coefficient) repeated into its own rows."""
    if chunk is not None:
        monkeypatch.setattr("taskextrap.operators.mlp.PREDICT_CHUNK", chunk)
    g = np.random.default_rng(m)
    n, c, grid = 5, 7, 4
    cx = np.sort(g.uniform(-5, 5, (n, m)), 1)
    cy, pred_ctx, phis = g.normal(size=(n, m)), g.normal(size=(n, c, m)), g.uniform(-1, 1, (n, c, grid))
    rep = lambda a: np.repeat(a, c * grid, axis=0)  # noqa: E731
    pc = np.repeat(pred_ctx.reshape(n * c, m), grid, axis=0)
    psi = fitted.psi_
    if m != psi.n_context:  # a network for m context points (the strict protocol has 5)
        from taskextrap.operators.extension import ExtensionOperator

        psi = ExtensionOperator(psi.scaler, m, psi.coef_half, 0, psi.cfg)
    direct = psi.loo_loss(rep(cx), rep(cy), pc, phis.reshape(-1)).reshape(n, c, grid)
    assert np.array_equal(psi.loo_loss_grid(cx, cy, pred_ctx, phis), direct)


def test_grid_rows_are_the_same_rows_whichever_slices_ask_for_them():
    from taskextrap.operators.extension import ExtensionOperator, LooGridRows
    from taskextrap.operators.train import TrainConfig
    from taskextrap.scaling import FamilyScaler

    g = np.random.default_rng(3)
    n, c, grid, m = 3, 4, 2, 5
    op = ExtensionOperator(FamilyScaler(0.0, 5.0, 0.0, 2.0), m, 1.5, 0, TrainConfig())
    rows = LooGridRows(
        op, g.normal(size=(n, m)), g.normal(size=(n, m)), g.normal(size=(n, c, m)), g.normal(size=(n, c, grid))
    )
    whole = rows[0 : len(rows)]
    assert whole.shape == (n * c * grid * m, 3 + 4 * m) and whole.dtype == np.float32
    for a, b in [(0, 7), (7, 23), (3, 4), (len(rows) - 6, len(rows)), (11, 11)]:
        assert np.array_equal(rows[a:b], whole[a:b])
    task = whole[:m].reshape(m, -1)  # target 0, candidate 0, coefficient 0: row j hides point j
    assert np.array_equal(task[:, 2 + 3 * m : 2 + 4 * m], 1 - np.eye(m))
    assert np.all(task[:, 2 + 2 * m : 2 + 3 * m][np.eye(m, dtype=bool)] == 0)
    with pytest.raises(ValueError, match="contiguous"):
        rows[0:10:2]
