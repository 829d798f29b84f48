"""LengthRTE: fit on training levels only, Strategy B search, predictions and input checks."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.operators.param import sort_context
from taskextrap.search.index import nearest
from taskextrap.estimators.length import LengthRTE
from taskextrap.seeding import rng
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet

TINY = dict(n_pairs=200, train=TrainConfig(steps=10, batch=512, eval_every=5),
            decomposer_train=TrainConfig(steps=10, batch=64, eval_every=5), seed=0)


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
    return tg, LengthRTE(**TINY).protocol.draw(tg, 2, g)


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
    for row, pool in zip(d.anchors, screened):
        assert len(set(row)) == 5 and set(row) <= set(pool)
    cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
    pred_ctx = fitted.library_.values_at(cx, d.anchors)                      # (6, 5, 8)
    direct = fitted.psi_.loo_loss(np.repeat(cx, 5, 0), np.repeat(cy, 5, 0), pred_ctx.reshape(30, 8), d.phi.reshape(-1))
    np.testing.assert_allclose(d.score, direct.reshape(6, 5), rtol=1e-5, atol=1e-9)
    unverified = fitted.decompose(obs.ctx_x, obs.ctx_y, k=5, verify=False)
    np.testing.assert_allclose(unverified.phi, np.repeat(d.extras["guess_phi"][:, None], 5, 1))


def test_coefficient_search_finds_the_minimum_of_the_context_loss(fitted, targets, monkeypatch):
    _, obs = targets
    best = 0.37  # a loss whose minimum lies between grid points: the fine pass must find it

    def loss(ctx_x, ctx_y, pred_ctx, phi):
        return (phi - best) ** 2 + 0.01 * np.abs(pred_ctx).mean(axis=1)

    monkeypatch.setattr(fitted.psi_, "loo_loss", loss)
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
        LengthRTE(**TINY).fit(LadderSet.extend(library, np.flatnonzero(library.level == 8)[:2],
                                                np.random.default_rng(0)))
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
    manual = sum(w[:, j:j + 1] * fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in range(d.k))
    np.testing.assert_allclose(fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, decomposition=d), manual, rtol=1e-9)
