"""Rows made from their blocks: on the host the float32 values of the float64 rows (the CPU's
bits), and on a device the same values from blocks sent once."""

import numpy as np
import pytest
import torch

from taskextrap.operators.rows import RowBlocks
from taskextrap.operators.streams import RowStream, as_tensor


def _blocks(seed=0, n=6, q=4, k=3):
    g = np.random.default_rng(seed)
    mask = (g.random((1, q, k)) < 0.5).astype(float)
    return RowBlocks.of(
        [g.normal(size=(n, q, 1)), g.normal(size=(n, 1, k)) * 1e3, (g.normal(size=(n, 1, k)), mask), mask], n, q
    )


def test_blocks_made_on_a_device_are_the_rows_made_on_the_host():
    rows = _blocks().concat(_blocks(1, n=2, q=5))
    host = rows.numpy()
    assert host.shape == (6 * 4 + 2 * 5, 1 + 3 * 3) and len(rows) == len(host) and rows.width == host.shape[1]
    assert torch.equal(rows.torch("cpu"), torch.from_numpy(host))
    wide = rows.torch("cpu", width=12)
    assert torch.equal(wide[:, :10], torch.from_numpy(host)) and torch.count_nonzero(wide[:, 10:]) == 0
    assert torch.equal(as_tensor(rows, "cpu"), torch.from_numpy(host))


@pytest.mark.parametrize("fixed", [False, True])
def test_a_stream_of_blocks_serves_the_rows_of_the_host_path_wherever_they_are_made(fixed):
    """The device path (blocks sent, rows made and permuted there), run on the CPU, gives the
    batches of the host path, for fresh blocks every pass and for one fixed set sent once."""
    once = _blocks(7, n=40, q=4)

    def make(g):
        rows = once if fixed else _blocks(int(g.integers(100)), n=40, q=4)
        return rows, np.arange(len(rows), dtype=np.float32)

    def batches(device_rows):
        stream = RowStream(make, np.random.default_rng(3), 32, 12, prefetch=False, device_rows=device_rows)
        stream.pad_to(11)
        return [stream(s) for s in range(12)], stream

    host, _ = batches(False)
    device, stream = batches(True)
    for (hx, hy), (dx, dy) in zip(host, device, strict=True):
        assert hx.shape == (32, 11) and torch.equal(hx, dx) and torch.equal(hy, dy)
    if fixed:
        assert stream._sent[0] is once  # a fixed set of rows is sent once


def test_stacked_training_on_rows_made_on_the_device_is_training_on_host_rows():
    """The GPU path end to end on a CPU: networks of two widths, stacked, trained on rows made
    from blocks where they are used; the same weights as from rows made on the host."""
    from taskextrap.operators.mlp import block_mlp
    from taskextrap.operators.train import Job, TrainConfig, train_jobs

    cfg = TrainConfig(steps=8, batch=32, eval_every=4)

    def jobs(device_rows):
        out = []
        for i, k in enumerate((3, 5)):

            def make(g, k=k):
                rows = _blocks(int(g.integers(100)), n=30, q=4, k=k)
                return rows, np.sin(np.arange(len(rows), dtype=np.float32))

            stream = RowStream(make, np.random.default_rng(i), cfg.batch, cfg.steps, device_rows=device_rows)
            val_x, val_y = make(np.random.default_rng(50 + i))
            val = (as_tensor(val_x, "cpu"), torch.from_numpy(val_y[:, None]))
            out.append(Job(block_mlp(1 + 3 * k, 1, seed=i), stream, val, cfg))
        return train_jobs(out, stacked=True)

    for a, b in zip(jobs(False), jobs(True), strict=True):
        for p, r in zip(a.net.parameters(), b.net.parameters(), strict=True):
            assert torch.equal(p, r)
