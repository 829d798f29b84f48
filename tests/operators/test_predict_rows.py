"""``operators.mlp.predict_rows``: every pass on a CPU flushes subnormals, and keeps its bits."""

import numpy as np
import pytest
import torch

from taskextrap.lanes import map_lanes
from taskextrap.operators.mlp import POINTWISE_BLOCKS, block_mlp, predict_rows


def _subnormal_survives() -> bool:
    return (torch.tensor([1e-39], dtype=torch.float32) * 1.0).item() != 0.0


class _Probe(torch.nn.Module):
    """Reports, per pass, whether the thread it runs on keeps subnormals."""

    def __init__(self):
        super().__init__()
        self.seen: list[bool] = []

    def forward(self, rows):
        self.seen.append(_subnormal_survives())
        return rows[:, :1]


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_each_pass_flushes_subnormals_on_its_own_thread_and_restores_it(monkeypatch, lanes):
    """A trained network carries subnormal weights, which an x86 CPU multiplies with many times
    slower (benchmarks/predict_subnormals.py): every pass flushes them, in whichever lane it
    runs, and the calling thread is as before afterwards."""
    monkeypatch.setenv("TASKEXTRAP_LANES", lanes)
    probe = _Probe()
    predict_rows(probe, np.zeros((10, 3), dtype=np.float32), chunk=4)
    assert probe.seen == [False, False, False]
    assert _subnormal_survives()
    # every lane that ran a pass is as before too: what it runs next is not flushed
    assert map_lanes(lambda _: _subnormal_survives(), range(6)) == [True] * 6


def test_several_torch_threads_are_never_flushed():
    """With several torch threads a pass is not flushed: a worker thread started inside it would
    keep the setting and flush later training."""
    before = torch.get_num_threads()
    probe = _Probe()
    torch.set_num_threads(2)
    try:
        predict_rows(probe, np.zeros((4, 3), dtype=np.float32), chunk=4)
    finally:
        torch.set_num_threads(before)
    assert probe.seen == [True]


def test_subnormal_weights_change_no_output_bit():
    """A network with subnormal weights predicts the very bits it predicted unflushed."""
    net = block_mlp(12, 1, 0, POINTWISE_BLOCKS)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for w in net.parameters():
            w[torch.rand(w.shape, generator=g) < 0.3] = 1e-39
    rows = np.random.default_rng(0).standard_normal((3000, 12)).astype(np.float32)
    assert _subnormal_survives()
    with torch.no_grad():
        plain = torch.cat([net(torch.from_numpy(rows[i : i + 1000])) for i in range(0, 3000, 1000)])
    assert torch.equal(predict_rows(net, rows, chunk=1000), plain)
