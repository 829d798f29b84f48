"""Lanes run independent pieces side by side and change no bit: each piece is the same
computation with the same thread count whichever lane runs it."""

import threading

import numpy as np
import pytest
import torch

from taskextrap import lanes as L
from taskextrap.operators.mlp import block_mlp, predict_rows


def test_map_lanes_keeps_the_order_and_uses_several_threads(monkeypatch):
    monkeypatch.setenv("TASKEXTRAP_LANES", "3")
    seen = set()
    barrier = threading.Barrier(3, timeout=10)  # passes only if three items run at once

    def work(i):
        seen.add(threading.current_thread().name)
        barrier.wait()
        return i * i

    assert L.map_lanes(work, range(3)) == [0, 1, 4]
    assert len(seen) == 3


def test_map_lanes_runs_inline_with_one_lane_inside_a_lane_or_off_the_cpu(monkeypatch):
    main = threading.current_thread().name
    monkeypatch.setenv("TASKEXTRAP_LANES", "1")
    assert L.map_lanes(lambda i: threading.current_thread().name, range(2)) == [main, main]
    monkeypatch.setenv("TASKEXTRAP_LANES", "2")
    assert L.map_lanes(lambda i: threading.current_thread().name, range(2), device="cuda:0") == [main, main]
    nested = L.map_lanes(lambda i: L.map_lanes(lambda j: threading.current_thread().name, range(2)), range(2))
    assert all(inner[0] == inner[1] != main for inner in nested)  # a lane runs its own pieces inline


def test_an_error_in_a_lane_is_raised_to_the_caller(monkeypatch):
    monkeypatch.setenv("TASKEXTRAP_LANES", "2")

    def work(i):
        if i == 1:
            raise ValueError("piece 1 failed")
        return i

    with pytest.raises(ValueError, match="piece 1 failed"):
        L.map_lanes(work, range(4))


def test_the_lane_count_comes_from_the_environment_or_the_cores(monkeypatch):
    monkeypatch.setenv("TASKEXTRAP_LANES", "nope")
    with pytest.raises(ValueError, match="TASKEXTRAP_LANES"):
        L.lanes()
    monkeypatch.delenv("TASKEXTRAP_LANES")
    assert L.lanes() >= 1


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_predictions_and_training_keep_their_bits_in_lanes(monkeypatch, lanes):
    from taskextrap.operators.train import Job, TrainConfig, train_jobs

    def run():
        net = block_mlp(6, 1, seed=0).eval()
        rows = np.random.default_rng(0).normal(size=(20000, 6)).astype(np.float32)
        cfg = TrainConfig(steps=6, batch=128, eval_every=3)
        jobs = []
        for i in range(3):
            g = np.random.default_rng(i)
            x = torch.from_numpy(g.normal(size=(512, 6)).astype(np.float32))
            jobs.append(Job(block_mlp(6, 1, seed=i), lambda s, x=x: (x[:128], x[:128, :1]), (x, x[:, :1]), cfg))
        train_jobs(jobs)
        return predict_rows(net, rows, chunk=4096), [torch.cat([p.flatten() for p in j.net.parameters()]) for j in jobs]

    monkeypatch.setenv("TASKEXTRAP_LANES", "1")
    alone = run()
    monkeypatch.setenv("TASKEXTRAP_LANES", lanes)
    beside = run()
    assert torch.equal(alone[0], beside[0])
    assert all(torch.equal(a, b) for a, b in zip(alone[1], beside[1], strict=True))


def test_a_limited_block_runs_its_pieces_inline(monkeypatch):
    monkeypatch.setenv("TASKEXTRAP_LANES", "2")
    main = threading.current_thread().name
    with L.limited(1):
        assert L.lanes() == 1
        assert L.map_lanes(lambda i: threading.current_thread().name, range(2)) == [main, main]
    assert L.lanes() == 2


def test_train_jobs_runs_the_work_beside_first_then_the_longest_network_first(monkeypatch):
    from taskextrap.operators.train import Job, TrainConfig, longest_first, train_jobs

    monkeypatch.setenv("TASKEXTRAP_LANES", "1")  # one lane: the order the pieces start in, one after another
    order = []

    def job(name, steps, width):
        x = torch.zeros(8, 2)
        net = torch.nn.Sequential(torch.nn.Linear(2, width), torch.nn.Linear(width, 1))

        def batches(step):
            if step == 0:
                order.append(name)
            return x, x[:, :1]

        return Job(net, batches, None, TrainConfig(steps=steps, batch=8), name=name)

    jobs = [job("small", 4, 4), job("long", 40, 4), job("wide", 4, 16)]  # 68, 680 and 260
    assert [j.name for j in longest_first(jobs)] == ["long", "wide", "small"]  # steps x parameters
    train_jobs(jobs, stacked=False, beside=[lambda: order.append("work")])
    assert order == ["work", "long", "wide", "small"]
    assert [j.name for j in jobs] == ["small", "long", "wide"] and all(len(j.history) for j in jobs)


def test_the_stacked_path_runs_the_work_beside_before_its_networks():
    from taskextrap.operators.train import Job, TrainConfig, train_jobs

    order = []
    x = torch.zeros(8, 2)

    def batches(step):
        if step == 0:
            order.append("network")
        return x, x[:, :1]

    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    job = Job(net, batches, None, TrainConfig(steps=3, batch=8), name="n")
    train_jobs([job], stacked=True, beside=[lambda: order.append("work")])
    assert order == ["work", "network"] and len(job.history) == 3


def test_a_lane_computes_with_its_callers_subnormal_setting_whatever_it_inherited(monkeypatch):
    # a thread inherits the flush setting of the thread that starts it: lanes started while the
    # caller flushed must not flush later work (its bits would depend on what ran first)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    monkeypatch.setenv("TASKEXTRAP_LANES", "2")
    monkeypatch.setattr(L, "_pool", None)  # fresh lane threads, started below while flushing
    try:
        assert L.map_lanes(lambda i: L.flushing(), range(2)) == [True, True]
    finally:
        torch.set_flush_denormal(False)
    assert L.map_lanes(lambda i: L.flushing(), range(2)) == [False, False]
    assert not L.flushing()


def test_threads_limited_sets_every_pool_and_restores_torch():
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    with L.threads_limited(1):
        assert torch.get_num_threads() == 1
        pools = threadpool_info()
        assert any(p["internal_api"] == "openblas" for p in pools)  # SciPy's BLAS is loaded and limited too
        assert all(p["num_threads"] == 1 for p in pools)
    assert torch.get_num_threads() == before
