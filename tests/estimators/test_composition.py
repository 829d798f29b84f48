"""CompositionRTE: training pairs only, batched verification of k*k pairs, Psi_comp predictions."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.estimators.composition import CompositionRTE
from taskextrap.seeding import rng
from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PrimitiveSet

TINY = dict(
    n_pairs=150,
    k=4,
    train=TrainConfig(steps=10, batch=512, eval_every=5),
    decomposer_train=TrainConfig(steps=10, batch=64, eval_every=5),
    seed=0,
)


@pytest.fixture(scope="module")
def prims():
    return PrimitiveSet.sample(n_per_family=12, rng=rng(0, "test-prims"))


@pytest.fixture(scope="module")
def fitted(prims):
    with audit.spy() as seen:
        model = CompositionRTE(**TINY).fit(prims)
    model.seen_ = seen
    return model


@pytest.fixture(scope="module")
def targets(prims, fitted):
    tg = CompositionSet.sample(prims, PAPER_SPLIT.test, 5, np.random.default_rng(3))
    return tg, fitted.protocol_.draw(tg, 1, np.random.default_rng(4))


def test_no_fit_sees_a_held_out_pair(fitted, prims):
    names = prims.family_names
    audit.check(fitted.seen_, PAPER_SPLIT.training_labels(), required={"scaler", "pca", "psi", "decomposer"})
    for component, params in fitted.seen_:
        if params.shape[1] == 1:  # the PCA: primitives alone, no pair
            assert component == "pca"
            continue
        pairs = {(names[int(o)], names[int(i)]) for o, i in params}
        assert not pairs & set(PAPER_SPLIT.test), component


def test_verification_ranks_all_pairs_by_context_error(fitted, targets):
    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y, refine=0)
    assert d.anchors[..., 0].shape == d.anchors[..., 1].shape == d.score.shape == (5, 16)
    assert np.all(np.diff(d.score, axis=1) >= 0)
    direct = fitted.context_loss(obs.ctx_x, obs.ctx_y, d.anchors[..., 0], d.anchors[..., 1])
    np.testing.assert_allclose(direct, d.score)
    outer_c, inner_c = fitted.candidates(obs.ctx_x, obs.ctx_y)
    np.testing.assert_array_equal(d.extras["outer_candidates"], outer_c)
    np.testing.assert_array_equal(d.extras["inner_candidates"], inner_c)
    assert {(o, i) for o, i in zip(d.anchors[..., 0][0], d.anchors[..., 1][0], strict=True)} == {
        (o, i) for o in outer_c[0] for i in inner_c[0]
    }
    plain = fitted.decompose(obs.ctx_x, obs.ctx_y, verify=False)
    np.testing.assert_array_equal(plain.anchors[..., 0][:, 0], outer_c[:, 0])
    np.testing.assert_array_equal(plain.anchors[..., 1][:, 0], inner_c[:, 0])


def test_refinement_keeps_distinct_pairs_ranked_and_never_fits_worse(fitted, targets):
    _, obs = targets
    plain = fitted.decompose(obs.ctx_x, obs.ctx_y, refine=0)
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    np.testing.assert_array_equal(fitted.refined(obs.ctx_x, obs.ctx_y, plain).score, d.score)
    assert fitted.refined(obs.ctx_x, obs.ctx_y, plain, rounds=0) is plain
    assert fitted.resolved("refine_rounds") > 0 and d.score.shape == plain.score.shape
    assert np.all(d.score[:, 0] <= plain.score[:, 0] + 1e-12)
    assert np.all(np.diff(d.score, axis=1) >= 0)
    np.testing.assert_allclose(fitted.context_loss(obs.ctx_x, obs.ctx_y, d.anchors[..., 0], d.anchors[..., 1]), d.score)
    for o, i in zip(d.anchors[..., 0], d.anchors[..., 1], strict=True):
        assert len(set(zip(o, i, strict=True))) == len(o)


def test_refinement_finds_the_true_pair_from_a_start_that_shares_one_slot(fitted, targets):
    tg, obs = targets
    size = len(fitted.primitives_)
    wrong_outer = (tg.outer + 1) % size
    # Start: (wrong outer, true inner) ranked first; one outer sweep must restore the true outer.
    start_o = np.stack([wrong_outer, wrong_outer], 1)
    start_i = np.stack([tg.inner, (tg.inner + 1) % size], 1)
    loss = fitted.context_loss(obs.ctx_x, obs.ctx_y, start_o, start_i)
    o, i, refined = fitted._refine(obs.ctx_x, obs.ctx_y, start_o, start_i, loss, rounds=1)
    np.testing.assert_array_equal(o[:, 0], tg.outer)
    np.testing.assert_array_equal(i[:, 0], tg.inner)
    assert np.all(refined[:, 0] < 1e-4)
    with pytest.raises(TaskextrapError, match="refine_rounds"):
        CompositionRTE(refine_rounds=-1)


def test_verification_recovers_the_true_pair_when_it_is_a_candidate(fitted, targets, monkeypatch):
    tg, obs = targets

    def with_truth(ctx_x, ctx_y, k=None):
        k = fitted.resolved("k") if k is None else k
        g = np.random.default_rng(0)
        outer = g.integers(len(fitted.primitives_), size=(len(ctx_x), k))
        inner = g.integers(len(fitted.primitives_), size=(len(ctx_x), k))
        outer[:, 2], inner[:, 1] = tg.outer, tg.inner
        return outer, inner

    monkeypatch.setattr(fitted, "candidates", with_truth)
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    np.testing.assert_array_equal(d.anchors[..., 0][:, 0], tg.outer)
    np.testing.assert_array_equal(d.anchors[..., 1][:, 0], tg.inner)
    np.testing.assert_allclose(
        fitted.compose(obs.qry_x, d.anchors[..., 0][:, 0], d.anchors[..., 1][:, 0]), obs.qry_y, atol=2e-2
    )


def test_predict_shapes_overrides_and_errors(fitted, targets, prims):
    tg, obs = targets
    p = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    assert p.shape == obs.qry_x.shape and np.all(np.isfinite(p))
    truth = fitted.decomposition_for(obs.ctx_x, obs.ctx_y, np.stack([tg.outer, tg.inner], 1))
    assert truth.anchors.shape == (5, 1, 2) and truth.phi.shape == (5, 1, 0)
    o = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, truth)
    assert o.shape == p.shape
    bad = fitted.decomposition_for(obs.ctx_x, obs.ctx_y, np.stack([np.full(5, len(prims)), tg.inner], 1))
    with pytest.raises(TaskextrapError, match="library indices"):
        fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, bad)
    with pytest.raises(TaskextrapError, match="25 points"):
        fitted.predict(obs.ctx_x[:, :3], obs.ctx_y[:, :3], obs.qry_x)
    with pytest.raises(TaskextrapError, match="PrimitiveSet"):
        CompositionRTE(**TINY).fit([1, 2])
    with pytest.raises(TaskextrapError, match="not fitted"):
        CompositionRTE(**TINY).predict(obs.ctx_x, obs.ctx_y, obs.qry_x)


def test_given_pairs_are_checked_and_the_arg_min_is_the_best_column(fitted, targets):
    tg, obs = targets
    with pytest.raises(TaskextrapError, match="pairs"):
        fitted.decomposition_for(obs.ctx_x, obs.ctx_y, tg.outer)
    with pytest.raises(TaskextrapError, match="no continuous part"):
        fitted.decomposition_for(obs.ctx_x, obs.ctx_y, np.stack([tg.outer, tg.inner], 1), np.zeros(5))
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    best_only = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(0))
    fitted.temperature = None
    try:  # a decomposition carries its posterior: re-weigh it under the arg-min
        np.testing.assert_allclose(
            fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, decomposition=fitted.weighted(d)), best_only
        )
    finally:
        fitted.temperature = 1.0


def test_unset_k_and_refine_rounds_take_the_protocols_dev_chosen_settings():
    from dataclasses import replace

    from taskextrap.estimators.composition import DEV_SETTINGS, dev_settings
    from taskextrap.tasks.regimes import get_protocol

    for name in ("paper", "strict"):
        model = CompositionRTE(protocol=name)
        chosen = DEV_SETTINGS[name]
        assert (model.resolved("k"), model.resolved("refine_rounds")) == (chosen["k"], chosen["refine_rounds"])
    assert DEV_SETTINGS["paper"] != DEV_SETTINGS["strict"]
    # Explicit values win; a protocol of another name follows its noise.
    assert (
        CompositionRTE(protocol="strict", k=7, refine_rounds=1).k,
        CompositionRTE(refine_rounds=1).refine_rounds,
    ) == (7, 1)
    noisy = replace(get_protocol("paper", "composition"), name="mine", noise=0.05)
    clean = replace(get_protocol("strict", "composition"), name="mine", noise=0.0)
    assert dev_settings(noisy) == DEV_SETTINGS["strict"] and dev_settings(clean) == DEV_SETTINGS["paper"]


def test_weights_are_the_old_relative_rule_over_the_best_n_average_and_zero_beyond(fitted, targets):
    import copy

    from taskextrap.search.posterior import posterior_weights

    _, obs = targets
    model = copy.copy(fitted)
    model.n_average = 5
    d = model.decompose(obs.ctx_x, obs.ctx_y)
    np.testing.assert_allclose(d.weights.sum(axis=1), 1.0)
    np.testing.assert_array_equal(d.weights[:, :5], posterior_weights(d.score[:, :5], model.temperature))
    assert np.all(d.weights[:, 5:] == 0)
    plain = model.decompose(obs.ctx_x, obs.ctx_y, refine=0)
    assert model.refined(obs.ctx_x, obs.ctx_y, plain, rounds=0) is plain  # already weighted: itself
    model.weighting = "likelihood"
    w = model.decompose(obs.ctx_x, obs.ctx_y).weights
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert np.all(w[:, 5:] == 0)


def test_predictive_sd_and_calibration_on_validation_primitives(fitted, targets):
    from taskextrap.search.posterior import mixture

    _, obs = targets
    d = fitted.decompose(obs.ctx_x, obs.ctx_y)
    mean, std = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d, return_std=True)
    cols = [j for j in range(d.k) if d.weights[:, j].any()]
    preds = np.stack([fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in cols])
    m2, s2 = mixture(preds, d.weights[:, cols], fitted.query_var_)
    np.testing.assert_allclose(mean, m2, rtol=1e-9)
    np.testing.assert_allclose(std, s2, rtol=1e-9)
    assert np.all(std >= np.sqrt(fitted.query_var_) * (1 - 1e-9))
    calib = [r for r in fitted.seen_ if r.component == "calibration"]
    assert calib and all(r.stage == "val" for r in calib)
    tasks, obs_c = fitted.draw_training_tasks(fitted.val_pool_, 512, rng(fitted.seed, "calibration"))
    assert set(tasks.outer) | set(tasks.inner) <= set(fitted.val_pool_)
    np.testing.assert_array_equal(calib[0].params, tasks.params)  # the calibration drew exactly these
    loss = fitted.context_loss(obs_c.ctx_x, obs_c.ctx_y, tasks.outer[:, None], tasks.inner[:, None])
    assert fitted.loss_scale_ == pytest.approx(loss.mean())


def _refine_every_round(est, ctx_x, ctx_y, outer, inner, loss, rounds, allowed):
    """The refinement as it was before converged rows stopped sweeping: every row, every round."""
    lib = est.primitives_
    size, fam = len(lib), lib.family

    def mask(v, a, b):
        return v if allowed is None else np.where(allowed[fam[a], fam[b]], v, np.inf)

    loss, every, at_inner = mask(loss, outer, inner), np.arange(size)[None, :], est.inner_points(ctx_x)
    o, i = outer[:, 0], inner[:, 0]
    for _ in range(rounds):
        lo = mask(est._outer_sweep(ctx_x, ctx_y, i), every, i[:, None])
        i_fixed, o = i, lo.argmin(axis=1)
        li = mask(est._inner_sweep(at_inner, ctx_y, o), o[:, None], every)
        i = li.argmin(axis=1)
    lib_idx = np.broadcast_to(np.arange(size), (len(ctx_x), size))
    ids = np.concatenate([outer * size + inner, lib_idx * size + i_fixed[:, None], o[:, None] * size + lib_idx], 1)
    losses = np.concatenate([loss, lo, li], axis=1)
    by_id = np.argsort(ids, axis=1, kind="stable")
    sorted_ids = np.take_along_axis(ids, by_id, 1)
    dup = np.zeros_like(ids, dtype=bool)
    dup[:, 1:] = sorted_ids[:, 1:] == sorted_ids[:, :-1]
    np.put_along_axis(losses, by_id, np.where(dup, np.inf, np.take_along_axis(losses, by_id, 1)), 1)
    keep = np.argsort(losses, axis=1, kind="stable")[:, : loss.shape[1]]
    best = np.take_along_axis(ids, keep, 1)
    return best // size, best % size, np.take_along_axis(losses, keep, 1)


@pytest.mark.parametrize("restricted", [False, True])
def test_refinement_stops_sweeping_converged_rows_and_keeps_every_bit(fitted, prims, restricted, monkeypatch):
    tg = CompositionSet.sample(prims, PAPER_SPLIT.train, 30, np.random.default_rng(5))
    obs = fitted.protocol_.draw(tg, 1, np.random.default_rng(6))
    cx, cy = obs.ctx_x, obs.ctx_y
    outer, inner = np.random.default_rng(7).integers(len(prims), size=(2, len(cx), 3))
    loss = fitted.context_loss(cx, cy, outer, inner)
    allowed = np.eye(3, dtype=bool) | np.eye(3, k=1, dtype=bool) if restricted else None
    before = inner.copy()
    swept = []
    sweep = fitted._outer_sweep
    monkeypatch.setattr(fitted, "_outer_sweep", lambda x, y, i: swept.append(len(x)) or sweep(x, y, i))
    for rounds in (1, 2, 5):
        got = fitted._refine(cx, cy, outer, inner, loss, rounds, allowed)
        want = _refine_every_round(fitted, cx, cy, outer, inner, loss, rounds, allowed)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(inner, before)  # the caller's starting pairs are left as they were
    assert min(swept) < len(cx)  # some rows converged and were not swept again
