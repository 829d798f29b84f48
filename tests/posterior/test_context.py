"""The context posterior on an estimator's prediction (posterior.context, issue 64)."""

import dataclasses
import json

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.scaling import FamilyScaler
from taskextrap.posterior.context import (
    DEGREES,
    DOFS,
    ContextPosterior,
    DevDraws,
    ResidualPrior,
    amplitude,
    choose_posterior,
    interval_score,
    out_of_fold_prediction,
    product,
)

SCALER = FamilyScaler(0.0, 1.0, 0.0, 1.0)


def draws(n=24, k=8, q=8, seed=0):
    """Smooth curves on [-1, 1] with a random context and queries, and a base prediction that
    misses each curve by a smooth residual (a tilted bump)."""
    g = np.random.default_rng(seed)
    x = np.sort(g.uniform(-1, 1, (n, k + q)), 1)
    order = np.argsort(g.uniform(size=(n, k + q)), 1)
    x = np.take_along_axis(x, order, 1)
    a, b = g.normal(size=(n, 1)), g.normal(size=(n, 1))
    truth = np.sin(2 * x) + a * x
    base = np.sin(2 * x) + b * np.cos(x)  # what an estimator predicts: wrong by a smooth residual
    return DevDraws(x[:, :k], truth[:, :k], x[:, k:], truth[:, k:], base[:, :k], base[:, k:])


def test_residual_prior_corrects_towards_the_context():
    d = draws()
    cx, cy, qx, qy, bc, bq = d.ctx_x, d.ctx_y, d.qry_x, d.qry_y, d.base_ctx, d.base_qry
    prior = ResidualPrior.fit("rbf", cx, cy - bc, qx, qy - bq, SCALER)
    m, s, quad = prior.condition(cx, cy - bc, qx)
    assert np.mean((bq + m - qy) ** 2) < 0.1 * np.mean((bq - qy) ** 2)
    assert m.shape == s.shape == qx.shape and (s > 0).all() and quad.shape == (len(cx),) and (quad > 0).all()


def test_a_polynomial_beside_the_gp_follows_a_polynomial_residual():
    """A residual that is a quadratic in x (RTE's on a polynomial family) is recovered to
    rounding by the degree-2 polynomial beside the GP, its quadratic form then about 0; with
    no polynomial the GP only approaches it."""
    d = draws()
    cx, qx = d.ctx_x, d.qry_x
    g = np.random.default_rng(3)
    c = g.normal(size=(len(cx), 3, 1))
    poly = lambda x: c[:, 0] + c[:, 1] * x + c[:, 2] * x**2  # noqa: E731
    prior = ResidualPrior.fit("rbf", cx, poly(cx), qx, poly(qx), SCALER)
    m2, s2, q2 = prior.condition(cx, poly(cx), qx, degree=2)
    m0, _, _ = prior.condition(cx, poly(cx), qx)
    assert np.abs(m2 - poly(qx)).max() < 1e-6 < np.abs(m0 - poly(qx)).max()
    assert q2.max() < 1e-6 and (s2 >= 0).all()
    chosen = ContextPosterior(prior, degree=2)
    with pytest.raises(TaskextrapError, match="at least 3 context points"):
        chosen.predict(d.base_ctx[:, :2], d.base_qry, cx[:, :2], d.ctx_y[:, :2], qx)


def test_product_of_two_posteriors():
    first, second = (np.array([0.0]), np.array([1.0])), (np.array([2.0]), np.array([1.0]))
    assert product(first, second, 1.0) == first and product(first, None, 0.3) == first
    assert product(first, second, 0.0) == second
    mean, sd = product(first, second, 0.5)  # equal precisions: the midpoint, sd 1 / sqrt(1/2 + 1/2)
    assert mean[0] == pytest.approx(1.0) and sd[0] == pytest.approx(1.0)
    mean, _ = product((np.array([0.0]), np.array([0.1])), second, 0.5)  # the surer expert leads
    assert mean[0] < 0.1


def test_choice_keeps_the_better_expert():
    d = draws()
    good, bad = (d.qry_y.copy(), np.full_like(d.qry_y, 0.01)), (d.qry_y + 3.0, np.full_like(d.qry_y, 0.01))
    kw = dict(kernels=("rbf",))
    chosen, record = choose_posterior(d, SCALER, expert=good, **kw)
    assert chosen.share == 0.0 and record["kernel"] == "rbf"
    chosen, _ = choose_posterior(d, SCALER, expert=bad, **kw)
    assert chosen.share > 0.99
    chosen, record = choose_posterior(d, SCALER, **kw)
    assert chosen.share == 1.0 and set(record["out_of_fold_mse"]) == {"rbf@None@1"}
    assert 0.85 <= record["out_of_fold_coverage"] <= 1.0 and chosen.scale > 0
    assert chosen.degree is None and chosen.dof is None  # the defaults try neither (dev said so)
    _, record = choose_posterior(d, SCALER, degrees=DEGREES, **kw)
    assert set(record["out_of_fold_mse"]) == {f"rbf@{d}@1" for d in DEGREES}


def test_choice_keeps_the_estimator_alone_where_no_correction_helps():
    """A base prediction right at every query whose context residuals are pure noise: every
    correction moves it away from the truth out of fold, so the choice keeps the estimator's own
    mean (with the residual GP's interval); an old record without the field still corrects."""
    d = draws()
    g = np.random.default_rng(5)
    exact = dataclasses.replace(d, base_qry=d.qry_y.copy(), base_ctx=d.ctx_y + g.normal(0, 0.5, d.ctx_y.shape))
    chosen, record = choose_posterior(exact, SCALER, kernels=("rbf",))
    assert not chosen.correct and not record["correct"] and chosen.share == 1.0
    assert record["base_mse"] == 0.0 < min(record["out_of_fold_mse"].values())
    mean, sd = chosen.predict(exact.base_ctx, exact.base_qry, d.ctx_x, d.ctx_y, d.qry_x)
    assert np.array_equal(mean, exact.base_qry) and (sd > 0).all()
    helped, record = choose_posterior(d, SCALER, kernels=("rbf",))
    assert helped.correct and record["correct"]
    old = {k: v for k, v in helped.to_dict().items() if k != "correct"}
    assert ContextPosterior.from_dict(json.loads(json.dumps(old))).correct


def test_out_of_fold_predictions_never_read_their_own_queries():
    """A dev draw's out-of-fold prediction comes from a prior fitted on the other fold: moving
    the query values of fold 0's targets leaves fold 0's predictions as they were, bit for bit,
    and moves fold 1's (whose prior read them)."""
    d = draws()
    fold = d.folds()
    before = out_of_fold_prediction("rbf", d, fold, SCALER, (None, 2))
    moved = d.qry_y.copy()
    moved[fold == 0] += 0.5
    after = out_of_fold_prediction("rbf", dataclasses.replace(d, qry_y=moved), fold, SCALER, (None, 2))
    for degree in (None, 2):
        (b, _, qb), (a, _, qa) = before[degree], after[degree]
        assert np.array_equal(a[fold == 0], b[fold == 0]) and np.array_equal(qa[fold == 0], qb[fold == 0])
        assert not np.allclose(a[fold == 1], b[fold == 1])


def test_prediction_reads_the_context_only():
    d = draws()
    cx, cy, qx, qy, bc, bq = d.ctx_x, d.ctx_y, d.qry_x, d.qry_y, d.base_ctx, d.base_qry
    chosen, _ = choose_posterior(d, SCALER, kernels=("rbf",))
    mean, sd = chosen.predict(bc, bq, cx, cy, qx)
    again, _ = chosen.predict(bc, bq, cx, cy, qx)  # no query value is an argument: the same bits
    assert np.array_equal(mean, again) and (sd > 0).all()
    assert np.mean((mean - qy) ** 2) < np.mean((bq - qy) ** 2)
    with pytest.raises(TaskextrapError, match="expert="):
        ContextPosterior(chosen.prior, share=0.5).predict(bc, bq, cx, cy, qx)


def test_record_round_trip_and_errors():
    d = draws()
    chosen, _ = choose_posterior(d, SCALER, kernels=("matern52",))
    back = ContextPosterior.from_dict(json.loads(json.dumps(chosen.to_dict())))
    assert back == chosen
    with pytest.raises(TaskextrapError, match="malformed"):
        ContextPosterior.from_dict({"share": 1.0})
    with pytest.raises(TaskextrapError, match="hyper-parameters"):
        ResidualPrior("rbf", (0.0,), 0.0, 0.0, 1.0, 1.0)
    with pytest.raises(TaskextrapError, match="share"):
        ContextPosterior(chosen.prior, share=1.5)
    with pytest.raises(TaskextrapError, match="dof"):
        ContextPosterior(chosen.prior, dof=0.0)
    with pytest.raises(TaskextrapError, match="degree"):
        ContextPosterior(chosen.prior, degree=-1)
    with_dof = dataclasses.replace(chosen, dof=3.0, degree=1)
    assert ContextPosterior.from_dict(json.loads(json.dumps(with_dof.to_dict()))) == with_dof
    with pytest.raises(TaskextrapError, match="2 dev targets"):
        choose_posterior(dataclasses.replace(d, groups=np.zeros(len(d.ctx_x))), SCALER, kernels=("rbf",))


def test_amplitude_and_interval_score():
    q = np.array([2.0, 8.0, 32.0])
    assert np.array_equal(amplitude(q, 8, None), np.ones(3))
    assert amplitude(q, 8, 4.0) == pytest.approx(np.sqrt([6 / 12, 1.0, 36 / 12]))
    assert amplitude(q, 8, 1e9) == pytest.approx(np.ones(3))  # many pseudo-points: one width
    mean, sd, w = np.zeros((1, 2)), np.ones((1, 2)), np.ones((1, 2))
    z = 1.6448536269514722
    assert interval_score(mean, sd, np.zeros((1, 2)), w) == pytest.approx(2 * z)  # inside: the width
    outside = interval_score(mean, sd, np.array([[z + 1.0, 0.0]]), w)  # one miss by 1: + 2/0.1 on average / 2
    assert outside == pytest.approx(2 * z + 10.0)


def test_interval_follows_each_targets_context():
    """With a dof, a target whose context residuals are ten times the dev targets' gets a wider
    interval, its mean unchanged; without one, every target keeps its width. The choice tries
    every dof on dev and records each one's out-of-fold interval score."""
    d = draws()
    cx, cy, qx, bc, bq = d.ctx_x, d.ctx_y, d.qry_x, d.base_ctx, d.base_qry
    chosen, record = choose_posterior(d, SCALER, kernels=("rbf",), dofs=DOFS)
    assert set(record["out_of_fold_interval_score"]) == {str(v) for v in DOFS} and record["dof"] in DOFS
    loud = bc + 10.0 * (cy - bc)  # the same target, its residuals ten times larger
    fixed, adaptive = dataclasses.replace(chosen, dof=None), dataclasses.replace(chosen, dof=3.0)
    assert np.array_equal(fixed.predict(bc, bq, cx, cy, qx)[1], fixed.predict(bc, bq, cx, loud, qx)[1])
    (m1, s1), (m2, _) = adaptive.predict(bc, bq, cx, cy, qx), fixed.predict(bc, bq, cx, cy, qx)
    assert np.array_equal(m1, m2)
    ratio = adaptive.predict(bc, bq, cx, loud, qx)[1] / s1  # sqrt((3 + 100 Q) / (3 + Q)) for each target
    assert (ratio > 1.0).all() and np.median(ratio) > 3.0
