"""Row streams serve the batches the training loop drew for itself, with or without a producer
thread, and draw exactly the passes the steps use."""

import numpy as np
import pytest
import torch

from taskextrap.operators.streams import DEVICE_LOCK, RowStream, served_batches


def _make_rows(sizes, calls):
    """A make_rows whose i-th pass has sizes[i] rows (then the last size), recording each call."""

    def make(g):
        n = sizes[min(len(calls), len(sizes) - 1)]
        calls.append(n)
        x = g.normal(size=(n, 3)).astype(np.float32)
        return x, x.sum(1)

    return make


def _loop_batches(make_rows, g, batch, steps):
    """The loop before streams (operators/parameter.py at 5bc8dc0), as the reference."""
    state = {"x": None, "pos": 0}
    out = []
    for _ in range(steps):
        if state["x"] is None or state["pos"] + batch > len(state["x"]):
            x, y = make_rows(g)
            perm = g.permutation(len(x))
            state.update(x=torch.from_numpy(x[perm]), y=torch.from_numpy(y[:, None][perm]), pos=0)
        sl = slice(state["pos"], state["pos"] + batch)
        state["pos"] += batch
        out.append((state["x"][sl], state["y"][sl]))
    return out


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("sizes", [[100], [64, 10, 100], [250, 33]])
def test_a_stream_serves_the_loops_batches_and_draws_only_the_passes_it_uses(prefetch, sizes):
    steps, batch = 23, 32
    ref_calls, calls = [], []
    expected = _loop_batches(_make_rows(sizes, ref_calls), np.random.default_rng(5), batch, steps)
    stream = RowStream(_make_rows(sizes, calls), np.random.default_rng(5), batch, steps, prefetch=prefetch)
    got = [stream(s) for s in range(steps)]
    stream.close()
    for (ex, ey), (gx, gy) in zip(expected, got, strict=True):
        assert torch.equal(ex, gx) and torch.equal(ey, gy)
    assert calls == ref_calls  # no pass drawn ahead that training never sees


def test_served_batches_counts_whole_batches_or_one_short_one():
    assert served_batches(100, 32) == 3 and served_batches(10, 32) == 1 and served_batches(7, None) == 1


def test_a_stream_of_whole_passes_serves_one_fresh_pass_per_step_in_order():
    calls = []
    stream = RowStream(_make_rows([5, 7, 6], calls), np.random.default_rng(0), None, 3)
    assert [len(stream(s)[0]) for s in range(3)] == [5, 7, 6]
    g = np.random.default_rng(0)
    first = g.normal(size=(5, 3)).astype(np.float32)
    stream2 = RowStream(_make_rows([5], []), np.random.default_rng(0), None, 1)
    assert torch.equal(stream2(0)[0], torch.from_numpy(first))  # not permuted


def test_a_producers_error_is_raised_in_the_training_thread():
    def broken(g):
        raise ValueError("bad rows")

    stream = RowStream(broken, np.random.default_rng(0), 8, 4, prefetch=True)
    with pytest.raises(ValueError, match="bad rows"):
        stream(0)


def test_a_producer_builds_rows_during_a_capture_but_waits_to_put_them_on_the_device(monkeypatch):
    """While DEVICE_LOCK is held (a CUDA graph being captured), a GPU stream's producer thread
    may build its pass but not send it: CUDA voids a capture when another thread copies
    meanwhile. A CPU stream has nothing to wait for."""
    import threading

    assert RowStream(_make_rows([4], []), np.random.default_rng(0), 2, 1, "cuda")._device_lock() is DEVICE_LOCK
    monkeypatch.setattr(RowStream, "_device_lock", lambda self: DEVICE_LOCK)  # a GPU's, on this CPU
    built = threading.Event()

    def make(g):
        built.set()
        return g.normal(size=(16, 2)).astype(np.float32), np.zeros(16)

    stream, taken = RowStream(make, np.random.default_rng(0), 8, 2, prefetch=True), []
    with DEVICE_LOCK:
        consumer = threading.Thread(target=lambda: taken.append(stream(0)), daemon=True)
        consumer.start()
        assert built.wait(5)  # rows are built while the lock is held ...
        consumer.join(0.3)
        assert consumer.is_alive() and not taken  # ... but the pass is not served
    consumer.join(5)
    assert taken and taken[0][0].shape == (8, 2)
    monkeypatch.undo()
    with DEVICE_LOCK:  # a CPU stream does not wait
        assert RowStream(make, np.random.default_rng(0), 8, 2, prefetch=True)(0)[0].shape == (8, 2)


def test_padding_widens_inputs_with_zero_columns_and_must_come_first():
    stream = RowStream(_make_rows([16], []), np.random.default_rng(0), 8, 2, prefetch=False)
    stream.pad_to(5)
    x, _ = stream(0)
    assert x.shape == (8, 5) and torch.all(x[:, 3:] == 0)
    with pytest.raises(RuntimeError, match="before the first batch"):
        stream.pad_to(6)


@pytest.mark.parametrize("device_rows", [False, True])
def test_a_grouped_stream_serves_whole_groups_in_a_shuffled_order(device_rows):
    def make(g):
        x = np.repeat(np.arange(10, dtype=np.float32), 3)[:, None]  # group i: three rows of value i
        return x, x[:, 0]

    stream = RowStream(make, np.random.default_rng(0), 8, 4, prefetch=False, device_rows=device_rows, group=3)
    assert stream.batch == 6  # 8 rows rounded down to whole groups
    seen = [stream(s)[0].reshape(-1, 3) for s in range(3)]  # a pass of 30 rows serves 5 batches
    for t in seen:
        assert torch.equal(t, t[:, :1].expand(-1, 3))  # every group whole
    order = torch.cat(seen)[:, 0]
    assert sorted(order.tolist()) == sorted(set(order.tolist())) and order.tolist() != sorted(order.tolist())
    bad = RowStream(lambda g: (np.zeros((7, 1), np.float32), np.zeros(7)), np.random.default_rng(0), 6, 1,
                    prefetch=False, group=3)  # fmt: skip
    with pytest.raises(ValueError, match="not whole groups of 3"):
        bad(0)
