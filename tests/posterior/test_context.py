"""The context posterior on an estimator's prediction (posterior.context, issue 64)."""

import dataclasses
import json

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.scaling import FamilyScaler
from taskextrap.posterior.context import (
    ContextPosterior,
    DevDraws,
    ResidualPrior,
    choose_posterior,
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
    m, s = prior.condition(cx, cy - bc, qx)
    assert np.mean((bq + m - qy) ** 2) < 0.1 * np.mean((bq - qy) ** 2)
    assert m.shape == s.shape == qx.shape and (s > 0).all()


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
    assert chosen.share == 1.0 and set(record["out_of_fold_mse"]) == {"rbf@1"}
    assert 0.85 <= record["out_of_fold_coverage"] <= 1.0 and chosen.scale > 0


def test_out_of_fold_predictions_never_read_their_own_queries():
    """A dev draw's out-of-fold prediction comes from a prior fitted on the other fold: moving
    the query values of fold 0's targets leaves fold 0's predictions as they were, bit for bit,
    and moves fold 1's (whose prior read them)."""
    d = draws()
    fold = d.folds()
    before = out_of_fold_prediction("rbf", d, fold, SCALER)[0]
    moved = d.qry_y.copy()
    moved[fold == 0] += 0.5
    after = out_of_fold_prediction("rbf", dataclasses.replace(d, qry_y=moved), fold, SCALER)[0]
    assert np.array_equal(after[fold == 0], before[fold == 0])
    assert not np.allclose(after[fold == 1], before[fold == 1])


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
    with pytest.raises(TaskextrapError, match="2 dev targets"):
        choose_posterior(dataclasses.replace(d, groups=np.zeros(len(d.ctx_x))), SCALER, kernels=("rbf",))
