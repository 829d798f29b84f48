"""Composition3RTE: training recipes only, identity padding, batched k^3 verification, Psi_chain."""

import copy

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.composition_depth3 import Composition3RTE
from taskextrap.operators.train import TrainConfig
from taskextrap.search.chain_search import chain_losses_loop
from taskextrap.seeding import rng
from taskextrap.tasks.chains import (
    DEPTH3_FAMILIES,
    DEPTH3_GRID,
    IDENTITY_NAME,
    PAPER_RECIPE_SPLIT,
    ChainSet,
    RecipeSplit,
    with_identity,
)
from taskextrap.tasks.primitives import PrimitiveSet

TINY = dict(
    n_pairs=80,
    k=3,
    keep=8,
    embedding="gradient",
    train=TrainConfig(steps=6, batch=256, eval_every=3),
    decomposer_train=TrainConfig(steps=6, batch=64, eval_every=3),
    seed=0,
)


@pytest.fixture(scope="module")
def prims():
    return PrimitiveSet.sample(DEPTH3_FAMILIES, 6, rng(0, "test-depth3-prims"), grid=DEPTH3_GRID)


@pytest.fixture(scope="module")
def fitted(prims):
    with audit.spy() as seen:
        model = Composition3RTE(**TINY).fit(prims)
    model.seen_ = seen
    return model


@pytest.fixture(scope="module")
def targets(prims, fitted):
    tg = ChainSet.sample(prims, PAPER_RECIPE_SPLIT.test, 4, np.random.default_rng(3))
    return tg, fitted.protocol_.draw(tg, 1, np.random.default_rng(4))


def test_no_fit_sees_a_held_out_recipe_and_shallower_ones_are_padded_with_the_identity(fitted):
    split = PAPER_RECIPE_SPLIT
    audit.check(fitted.seen_, split.training_labels(), required={"scaler", "pca", "psi", "decomposer"})
    labels = {str(lab) for rec in fitted.seen_ for lab in rec.labels}
    assert not labels & split.test_labels() and "tanh o sin" not in labels
    assert {"sin o poly", "tanh", "primitive:identity"} <= labels  # padded depth-2 and depth-1 compositions
    # the padded slots are the identity, outermost first, and the decomposer learns its embedding there
    tasks, _ = fitted.draw_training_tasks(fitted.train_pool_, 400, np.random.default_rng(0))
    ident = tasks.chains == fitted.identity_
    assert fitted.identity_ == len(fitted.primitives_) - 1 and 0.1 < ident[:, 0].mean() < 0.4
    assert np.all(ident[:, 0] >= ident[:, 1]) and not ident[:, 2].any()
    batch = fitted._decomposer_arrays(fitted.train_pool_, 50, np.random.default_rng(1))
    np.testing.assert_allclose(batch[2][:, :16], fitted.z_library_[batch.sources[0].params[:, 0].astype(int)])


def test_without_identity_no_padding_and_no_identity_primitive(prims):
    model = Composition3RTE(**{**TINY, "identity": False})
    model._resolve()
    model._prepare(prims)
    assert IDENTITY_NAME not in set(model.primitives_.family_names) and model.identity_ is None
    tasks, _ = model.draw_training_tasks(model.train_pool_, 200, np.random.default_rng(0))
    assert set(tasks.region) <= {" o ".join(r) for r in PAPER_RECIPE_SPLIT.train}


def test_decompose_verifies_all_k_cubed_chains_as_the_loop_does(fitted, targets):
    _, obs = targets
    cands = fitted.candidates(obs.ctx_x, obs.ctx_y)
    assert cands.shape == (4, 3, 3)
    d = fitted.decompose(obs.ctx_x, obs.ctx_y, refine=0)
    assert d.anchors.shape == (4, 8, 3) and d.phi.shape == (4, 8, 0) and np.all(np.diff(d.score, axis=1) >= 0)
    loop = chain_losses_loop(fitted.primitives_, obs.ctx_x, obs.ctx_y, [cands[:, j] for j in range(3)])
    np.testing.assert_allclose(d.score, np.sort(loop, axis=1)[:, :8], rtol=1e-9)
    np.testing.assert_allclose(fitted.context_loss(obs.ctx_x, obs.ctx_y, d.anchors), d.score)
    r = fitted.refined(obs.ctx_x, obs.ctx_y, d, rounds=1)
    assert np.all(r.score[:, 0] <= d.score[:, 0] + 1e-12)
    plain = fitted.decompose(obs.ctx_x, obs.ctx_y, verify=False)
    np.testing.assert_array_equal(plain.anchors[:, 0], cands[:, :, 0])
    pred = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, r)
    assert pred.shape == obs.qry_y.shape and np.all(np.isfinite(pred))
    lib, (o, m, i) = fitted.primitives_, r.anchors[0, 0]
    by_hand = np.interp(
        np.interp(np.interp(obs.qry_x[0], lib.grid, lib.curves[i]), lib.grid, lib.curves[m]), lib.grid, lib.curves[o]
    )
    np.testing.assert_allclose(fitted.compose(obs.qry_x, r.anchors[:, 0])[0], by_hand)


def test_oracle_and_bad_inputs(fitted, targets, prims):
    tg, obs = targets
    one = fitted.decomposition_for(obs.ctx_x, obs.ctx_y, tg.chains)
    assert one.k == 1 and np.isnan(one.score).all()
    assert np.all(np.isfinite(fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, one)))
    for call, match in (
        (lambda: fitted.decomposition_for(obs.ctx_x, obs.ctx_y, tg.chains[:, :2]), "chains of 3 primitives"),
        (lambda: fitted.decomposition_for(obs.ctx_x, obs.ctx_y, tg.chains, phi=np.zeros(4)), "no continuous part"),
        (lambda: fitted.compose(obs.qry_x, tg.chains[:, :2]), r"shape \(n, 3\)"),
        (lambda: fitted.decompose(obs.ctx_x[:, :3], obs.ctx_y[:, :3]), "50 points per task"),
        (lambda: Composition3RTE(k=0), "k must be"),
        (lambda: Composition3RTE(pad_share=1.0), "pad_share"),
        (lambda: Composition3RTE(depth=2), "depth 3"),
        (lambda: Composition3RTE(identity="yes"), "identity must be"),
        (lambda: Composition3RTE(**TINY).fit(with_identity(prims)), "without the identity"),
        (
            lambda: Composition3RTE(**TINY, split=RecipeSplit(("poly", "cos"), 3, (("cos", "poly"),))).fit(prims),
            "no primitive of the split's families",
        ),
    ):
        with pytest.raises(TaskextrapError, match=match) as e:
            call()
        assert "\n" not in str(e.value)
    dev = (Composition3RTE().resolved("psi_context"), Composition3RTE(protocol="strict").resolved("psi_context"))
    assert dev == (False, True)
    with pytest.raises(TaskextrapError, match="not fitted"):
        Composition3RTE().decompose(obs.ctx_x, obs.ctx_y)


def test_chains_carry_their_posterior_and_a_predictive_sd(fitted, targets):
    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    assert (fitted.weighting, fitted.temperature) == ("relative", 1.0) and fitted.n_average >= d.k
    np.testing.assert_allclose(d.weights.sum(axis=1), 1.0)
    # the relative weighting by hand: w_j / w_0 = exp(-(L_j - L_0) / (T L_0)), L_0 the best loss
    ratio = np.exp(-(d.score - d.score[:, :1]) / (fitted.temperature * d.score[:, :1]))
    np.testing.assert_allclose(d.weights / d.weights[:, :1], ratio, rtol=1e-9)
    mean, std = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d, return_std=True)
    np.testing.assert_array_equal(mean, fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d))
    # the mixture by hand: each chain's Psi prediction, weighted; spread plus Psi's own variance
    singles = [fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in range(d.k)]
    want = sum(d.weights[:, j, None] * singles[j] for j in range(d.k))
    spread = sum(d.weights[:, j, None] * (singles[j] - want) ** 2 for j in range(d.k))
    np.testing.assert_allclose(mean, want, rtol=1e-6, atol=1e-9)
    # the raw posterior sd, times the dev-chosen interval scale (search.calibration)
    np.testing.assert_allclose(std, fitted.calibrated_scale() * np.sqrt(spread + fitted.query_var_), rtol=1e-6)
    assert fitted.loss_scale_ > 0 and {r.stage for r in fitted.seen_ if r.component == "calibration"} == {"val"}
    with pytest.raises(TaskextrapError, match="unknown weighting"):
        Composition3RTE(**{**TINY, "weighting": "flat"})


def test_chain_posterior_weights_of_hand_made_scores(fitted):
    """Scores 1, 1.5, 3 (best first) under the relative weighting at T = 1: w ∝ 1, e^-0.5, e^-2;
    with n_average 2 the third gets nothing; T = None is the arg-min."""
    chains, phi = np.zeros((1, 3, 3), int), np.zeros((1, 3, 0))
    d = Decomposition(chains, phi, np.array([[1.0, 1.5, 3.0]]))
    w = np.array([1.0, np.exp(-0.5), np.exp(-2.0)])
    np.testing.assert_allclose(fitted.weighted(d).weights, [w / w.sum()], rtol=1e-9)
    two, argmin = copy.copy(fitted), copy.copy(fitted)
    two.n_average, argmin.temperature = 2, None
    np.testing.assert_allclose(two.weighted(d).weights, [[w[0] / w[:2].sum(), w[1] / w[:2].sum(), 0.0]], rtol=1e-9)
    np.testing.assert_array_equal(argmin.weighted(d).weights, [[1.0, 0.0, 0.0]])
