"""Each relational operator on its own (no estimator around it), and ``train_regressor``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from taskextrap.operators.chain import ChainOperator
from taskextrap.operators.composition import CompositionOperator
from taskextrap.operators.extension import ExtensionOperator
from taskextrap.operators.parameter import RelationalOperator, loo_masks
from taskextrap.operators.train import TrainConfig, train_regressor
from taskextrap.scaling import FamilyScaler
from taskextrap.tasks.primitives import PrimitiveSet

CFG = TrainConfig(steps=5, batch=64, eval_every=5)
SCALER = FamilyScaler(x_mid=0.0, x_half=2.0, y_mean=1.0, y_std=4.0)


def test_train_regressor_fits_a_line_and_keeps_the_best_validation_weights():
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    g = torch.Generator().manual_seed(0)

    def batch(step):
        x = torch.rand(64, 1, generator=g) * 4 - 2
        return x, 2 * x + 1

    xv = torch.linspace(-2, 2, 32)[:, None]
    seen = []
    history = train_regressor(model, batch, (xv, 2 * xv + 1), TrainConfig(steps=600, batch=64, lr=0.05,
                              eval_every=50), progress=lambda s, loss: seen.append(s))  # fmt: skip
    assert len(history) == 600 and seen == list(range(600)) and history[-1] < 1e-3 * history[0]
    assert model.weight.item() == pytest.approx(2.0, abs=0.02) and model.bias.item() == pytest.approx(1.0, abs=0.02)


def test_train_regressor_restores_the_weights_of_the_best_validation_check():
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    # the training targets drift away from the validation ones: the early weights validate best
    batch = lambda step: (torch.ones(8, 1), torch.full((8, 1), 1.0 + step))  # noqa: E731
    val = (torch.ones(4, 1), torch.ones(4, 1))
    train_regressor(model, batch, val, TrainConfig(steps=40, batch=8, lr=0.5, eval_every=1))
    with torch.no_grad():
        final = torch.nn.functional.mse_loss(model(val[0]), val[1]).item()
    assert final < 5.0  # the last steps' weights predict ~40: far worse than what was kept


def test_relational_operator_hides_a_masked_point_and_scores_only_present_points():
    psi = RelationalOperator(SCALER, n_context=4, shift_dim=2, seed=0, cfg=CFG, loo=True)
    n = 3
    g = np.random.default_rng(0)
    cx, cy, anc = g.normal(size=(n, 4)), g.normal(size=(n, 4)), g.normal(size=(n, 4))
    qx, aq, phi = g.normal(size=(n, 2)), g.normal(size=(n, 2)), g.normal(size=(n, 2))
    present = np.array([[1, 1, 0, 1]] * n, dtype=float)
    rows = psi.features(
        cx, cy, anc, qx, aq, phi, present
    )  # columns: x_q, anc_q, ctx x(4), anc(4), resid(4), mask(4), phi
    resid, mask = rows[:, 10:14], rows[:, 14:18]
    assert np.all(resid[:, 2] == 0) and np.all(mask[:, 2] == 0) and np.all(resid[:, 0] != 0)
    cy2 = cy.copy()
    cy2[:, 2] += 100.0  # a hidden point's value cannot move a prediction
    np.testing.assert_array_equal(psi.predict(cx, cy, anc, qx, aq, phi, present),
                                  psi.predict(cx, cy2, anc, qx, aq, phi, present))  # fmt: skip
    loss = psi.loo_loss(cx, cy, anc, phi, present)
    pred = psi.predict(cx, cy, anc, cx, anc, phi, present[:, None, :] * loo_masks(4)[None])
    np.testing.assert_allclose(loss, ((pred - cy) ** 2 * present).sum(1) / present.sum(1))


def test_extension_operator_scores_each_candidate_as_its_own_leave_one_out_loss():
    op = ExtensionOperator(SCALER, n_context=5, coef_half=2.0, seed=0, cfg=CFG)
    g = np.random.default_rng(1)
    n, c, k, G = 2, 3, 5, 4
    cx, cy = np.sort(g.normal(size=(n, k)), axis=1), g.normal(size=(n, k))
    pred_ctx, phis = g.normal(size=(n, c, k)), g.normal(size=(n, c, G))
    grid = op.loo_loss_grid(cx, cy, pred_ctx, phis)
    # the same rows as loo_loss on every (target, candidate, coefficient) repeated into rows of its own
    rep = lambda a: np.repeat(a, c * G, axis=0)  # noqa: E731
    pred = np.repeat(pred_ctx, G, axis=1).reshape(n * c * G, k)
    one = op.loo_loss(rep(cx), rep(cy), pred, phis.reshape(-1)).reshape(n, c, G)
    np.testing.assert_array_equal(grid, one)
    mask = np.ones((n, k))
    mask[:, 1] = 0
    rows = op.features(cx, pred_ctx[:, 0], cx, cy, pred_ctx[:, 0], mask, phis[:, 0, 0])
    assert np.all(rows[:, 2 + 2 * k + 1] == 0)  # the hidden point's residual


def test_composition_operator_reads_its_constituents_values_at_the_queries():
    prims = PrimitiveSet.sample(n_per_family=3, rng=np.random.default_rng(0))
    op = CompositionOperator(SCALER, prims, n_context=4, seed=0, cfg=CFG)
    g = np.random.default_rng(2)
    qx, cx = g.uniform(-5, 5, size=(2, 3)), np.sort(g.uniform(-5, 5, size=(2, 4)), axis=1)
    outer, inner = np.array([0, 4]), np.array([5, 1])
    rows = op.features(qx, outer, inner, cx, cx**2).reshape(2, 3, -1)
    np.testing.assert_allclose(rows[..., 1], SCALER.y(prims.interp(qx, outer)), rtol=1e-6)
    np.testing.assert_allclose(rows[..., 2], SCALER.y(prims.interp(qx, inner)), rtol=1e-6)
    assert op.predict(qx, outer, inner, cx, cx**2).shape == (2, 3)


def test_chain_operator_states_are_the_chain_applied_innermost_first():
    prims = PrimitiveSet.sample(n_per_family=3, rng=np.random.default_rng(0))
    op = ChainOperator(SCALER, prims, n_context=4, depth=3, seed=0, cfg=CFG, value_span=(-5.0, 5.0), points=9)
    qx = np.random.default_rng(3).uniform(-5, 5, size=(2, 4))
    chains = np.array([[0, 3, 6], [8, 2, 4]])  # outermost first
    states = op.states(qx, chains)
    v = qx
    for slot, j in enumerate((2, 1, 0)):  # innermost first
        v = prims.exact(v, chains[:, j])
        np.testing.assert_allclose(states[:, slot], SCALER.y(v).reshape(-1), rtol=1e-6)
    rows = torch.from_numpy(op.features(qx, chains, None, None))
    with torch.no_grad():
        unrolled = op.net(rows)
        s = rows[:, :1]
        for i in range(3):  # one step network applied depth times, each to its slot's curve
            s = op.step(torch.cat([s, rows[:, 1 + i * 9 : 1 + (i + 1) * 9]], dim=1))
            torch.testing.assert_close(unrolled[:, i : i + 1], s)
    assert op.predict(qx, chains, None, None).shape == (2, 4)
