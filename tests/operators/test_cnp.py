"""operators.cnp: the conditional neural process of the cnp baseline."""

import numpy as np
import pytest
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


def test_a_task_is_encoded_once_for_all_its_rows_with_the_same_outputs():
    net = CNPNet(4, 16, seed=0)
    ctx = torch.randn(3, 1, 8).expand(3, 5, 8)  # 3 tasks, 5 query rows each, one context per task
    rows = torch.cat([torch.randn(3, 5, 1), ctx], -1).reshape(15, 9)
    per_row = net(rows)  # group 1: every row encodes its context
    net.group = 5
    torch.testing.assert_close(net(rows), per_row)
    with pytest.raises(ValueError, match="not whole tasks of 5 rows"):
        net(rows[:7])


def test_training_batches_hold_whole_tasks_and_prediction_reads_each_context_once():
    g = np.random.default_rng(0)
    cfg = TrainConfig(steps=3, batch=50, lr=1e-3, eval_every=1)
    cnp = CNPRegressor(FamilyScaler(0.0, 1.0, 0.0, 1.0), 3, seed=0, cfg=cfg, width=8)
    job = cnp.fit_job(_draws(40, 3, g), _draws(10, 3, g), np.random.default_rng(1))
    x, _ = job.batches(0)
    assert cnp.cnp.group == 4 and len(x) == 48  # 50 rows rounded down to whole tasks of 4 queries
    t = x.reshape(12, 4, -1)
    assert torch.equal(t[:, :1, 1:].expand(-1, 4, -1), t[:, :, 1:])  # each task's rows share its context
    cx, cy, qx, _, _ = _draws(6, 3, g)
    mean, sd = cnp.predict_with_sd(cx, cy, qx)
    rows = torch.from_numpy(cnp.features(cx, cy, qx, np.zeros((6, 0))))
    with torch.no_grad():
        out = cnp.net(rows).numpy()
    np.testing.assert_allclose(mean, out[:, 0].reshape(6, 4), rtol=1e-6)
    np.testing.assert_allclose(sd, out[:, 1].reshape(6, 4), rtol=1e-6)
    with pytest.raises(ValueError, match="must all have 4 queries"):
        cnp.fit_job(_draws(40, 3, g)[:2] + (g.uniform(size=(40, 2)),) * 2 + (np.zeros((40, 0)),), _draws(10, 3, g), g)


def _subnormal_survives() -> bool:
    """Whether this thread's float32 arithmetic keeps a subnormal (1e-39 * 1) rather than zero."""
    return bool((torch.tensor([1e-39], dtype=torch.float32) * 1.0).item() != 0.0)


def test_at_several_torch_threads_the_cnp_trains_flushed_at_one():
    """torch's default is every core, where a flush cannot hold (a worker thread would keep it):
    the cnp then trains at one thread, flushed, and the caller's thread count is back after."""
    from taskextrap.operators.train import train_jobs

    g = np.random.default_rng(0)
    cfg = TrainConfig(steps=2, batch=50, lr=1e-3, eval_every=1)
    cnp = CNPRegressor(FamilyScaler(0.0, 1.0, 0.0, 1.0), 3, seed=0, cfg=cfg, width=8)
    job = cnp.fit_job(_draws(40, 3, g), _draws(10, 3, g), np.random.default_rng(1))
    seen = []
    batches = job.batches
    job.batches = lambda step: (seen.append((torch.get_num_threads(), _subnormal_survives())), batches(step))[1]
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train_jobs([job], stacked=False)
        assert seen == [(1, False), (1, False)]
        assert torch.get_num_threads() == 2 and _subnormal_survives()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("stacked", [False, True])  # alone, or beside stacked networks (the GPU path)
def test_the_cnp_trains_with_subnormals_flushed_on_its_own_thread_only(stacked):
    """A long-trained cnp carries subnormal numbers that x86 computes with many times slower
    (benchmarks/cnp_step.py --long): its job trains under subnormals_flushed, other networks do
    not, and the thread is as before once the training ends."""
    from taskextrap.operators.jobs import Job, subnormals_flushed
    from taskextrap.operators.train import train_jobs

    g = np.random.default_rng(0)
    cfg = TrainConfig(steps=2, batch=50, lr=1e-3, eval_every=1)
    cnp = CNPRegressor(FamilyScaler(0.0, 1.0, 0.0, 1.0), 3, seed=0, cfg=cfg, width=8)
    job = cnp.fit_job(_draws(40, 3, g), _draws(10, 3, g), np.random.default_rng(1))
    assert job.flush_subnormals
    seen = []
    batches = job.batches
    job.batches = lambda step: (seen.append(_subnormal_survives()), batches(step))[1]
    plain = Job(torch.nn.Linear(2, 1), None, None, cfg)
    plain.batches = lambda s: (seen.append(_subnormal_survives()), (torch.zeros(4, 2), torch.zeros(4, 1)))[1]
    assert _subnormal_survives()
    train_jobs([job], stacked=stacked)
    train_jobs([plain], stacked=False)
    assert seen == [False, False, True, True]  # flushed while the cnp trains, not the plain network
    assert _subnormal_survives()  # and off again afterwards
    with subnormals_flushed(False):
        assert _subnormal_survives()
    torch.set_flush_denormal(True)  # a caller's own setting is left as it was
    try:
        with subnormals_flushed():
            pass
        assert not _subnormal_survives()
    finally:
        torch.set_flush_denormal(False)
