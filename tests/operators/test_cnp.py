"""operators.cnp: the conditional neural process of the cnp baseline."""

import numpy as np
import torch

from taskextrap.operators.cnp import CNPNet, CNPRegressor, gaussian_nll
from taskextrap.operators.jobs import TrainConfig
from taskextrap.operators.stacked import stack
from taskextrap.scaling import FamilyScaler


def test_the_context_is_read_as_a_set():
    net = CNPNet(4, 16, seed=0)
    rows = torch.randn(5, 9)
    perm = torch.tensor([0, 3, 1, 4, 2, 7, 5, 8, 6])  # the same permutation of the x's and the y's
    out = net(rows)
    assert out.shape == (5, 2) and (out[:, 1] > 0).all()
    torch.testing.assert_close(net(rows[:, perm]), out)


def test_the_likelihood_rewards_a_calibrated_sd():
    y = torch.zeros(1000, 1)
    y.normal_(generator=torch.Generator().manual_seed(0))
    at = lambda sd: gaussian_nll(torch.cat([torch.zeros(1000, 1), torch.full((1000, 1), sd)], 1), y)  # noqa: E731
    assert at(1.0) < at(0.3) and at(1.0) < at(3.0)


def _draws(n, k, g):
    x = g.uniform(-1, 1, (n, k + 4))
    a = g.uniform(-2, 2, (n, 1))
    y = a * x
    return x[:, :k], y[:, :k], x[:, k:], y[:, k:], np.zeros((n, 0))


def test_a_cnp_learns_a_family_of_lines_with_an_interval_that_covers():
    g = np.random.default_rng(0)
    cfg = TrainConfig(steps=400, batch=512, lr=3e-3, eval_every=100)
    cnp = CNPRegressor(FamilyScaler(0.0, 1.0, 0.0, 1.0), 3, seed=0, cfg=cfg, width=32)
    job = cnp.fit_stream_job(lambda r: _draws(256, 3, r), _draws(128, 3, g), np.random.default_rng(1))
    assert job.loss is gaussian_nll and stack([job])[1] == [job]  # its own loss: it trains alone
    from taskextrap.operators.train import train_jobs

    train_jobs([job])
    cx, cy, qx, qy, _ = _draws(200, 3, np.random.default_rng(2))
    mean, sd = cnp.predict_with_sd(cx, cy, qx)
    assert mean.shape == sd.shape == (200, 4)
    assert np.mean((mean - qy) ** 2) < 0.1 * np.var(qy)
    assert 0.6 < np.mean(np.abs(mean - qy) <= 1.645 * sd) <= 1.0
