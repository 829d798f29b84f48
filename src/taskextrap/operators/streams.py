"""A network's training rows, served batch by batch on its device.

A *pass* is a block of rows from ``make_rows(rng)``, permuted by the same generator; it is used
up ``batch`` rows at a time before the next pass is drawn (a pass shorter than a batch serves
one short batch). These are exactly the batches the training loop drew for itself before
streams existed, so a network trains on the same rows in the same order whichever way it is
trained (alone on a CPU, or stacked with others on a GPU: ``operators.stacked``).

A pass reaches the device in one copy. With ``prefetch`` a producer thread draws the next pass
while the current one trains (on a 2-core machine the other core builds rows while torch runs
on one): the generator is used by that one thread in the same order as without it, so the rows
keep every bit. On a GPU the pass is pinned and copied asynchronously, so the step loop never
waits for the host. The producer draws exactly the passes the steps use up, no more (a pass
serves ``max(1, rows // batch)`` batches), so nothing is drawn or audited that training does
not see.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable

import numpy as np
import torch

from taskextrap.operators.rows import RowBlocks

Rows = tuple[np.ndarray | RowBlocks, np.ndarray]  # (inputs or their blocks, targets)
# Whether streams draw their next pass on a producer thread by default (same rows either way).
PREFETCH = True
# Held while a step is captured in a CUDA graph (operators.stacked) and while a pass is put on its
# device: CUDA refuses another thread's pinned allocations and copies during a capture
# (cudaErrorStreamCaptureUnsupported, seen on an H200 with a producer thread), so they wait it out.
DEVICE_LOCK = threading.Lock()


def column(y: np.ndarray) -> np.ndarray:
    """Targets as (rows, outputs): one output per row (rows,) becomes a column."""
    return y[:, None] if y.ndim == 1 else y


class RowStream:
    """The batches of one network: ``stream(step)`` returns that step's (inputs, targets) on
    ``device``, inputs float32 (rows, features), targets (rows, outputs).

    Args:
        make_rows: ``make_rows(rng)`` -> (inputs (rows, features) or their ``RowBlocks``, targets
            (rows,) or (rows, outputs)), numpy.
        rng: the stream's generator (passes and their permutations are drawn from it).
        batch: rows per step; None: every step is one whole pass, in its order (a fresh batch
            of tasks per step, as the decomposer trains).
        steps: steps the stream serves (passes are drawn until they cover these).
        device: where the batches are used.
        permute: shuffle each pass (False: a pass is served in its order, e.g. one pass per step).
        prefetch: draw the next pass on a producer thread (default :data:`PREFETCH`).
        device_rows: make rows given as blocks on the device and permute them there (default:
            off the CPU; True runs that path on a CPU too, which the tests do).
        group: rows that belong together (a task's query rows, consecutive in every pass): each
            pass is permuted by whole groups and a batch holds whole groups (``batch`` rounded
            down to a multiple, at least one group), so a network can read the rows of a batch
            as (batch // group, group) tasks (``operators.cnp``). Default 1: single rows.
    """

    def __init__(
        self,
        make_rows: Callable[[np.random.Generator], Rows],
        rng: np.random.Generator,
        batch: int | None,
        steps: int,
        device: torch.device | str = "cpu",
        permute: bool = True,
        prefetch: bool | None = None,
        device_rows: bool | None = None,
        group: int = 1,
    ):
        if group < 1:
            raise ValueError(f"group must be >= 1, got {group}")
        if batch is not None and group > 1:
            batch = max(group, batch // group * group)
        self.make_rows, self.rng, self.batch, self.steps, self.group = make_rows, rng, batch, steps, group
        self.device = torch.device(device)
        self.permute = permute and batch is not None
        self.prefetch = PREFETCH if prefetch is None else prefetch
        self.device_rows = self.device.type != "cpu" if device_rows is None else device_rows
        self.width: int | None = None  # inputs zero-padded to this many columns (stacked training)
        self._pass: tuple[torch.Tensor, torch.Tensor] | None = None  # the pass being served
        self._sent: tuple | None = None  # (the last pass's host rows, their device copy)
        self._pos = 0
        self._producer: _Producer | None = None
        self._pass_rng: dict | None = None  # the generator's state when the pass being served was drawn
        self._pass_step = 0  # the step that drew it
        self._resume: tuple[int, int] | None = None  # (first step, position) of a pass to draw again

    def pad_to(self, width: int) -> None:
        """Serve inputs zero-padded on the right to ``width`` columns (before the first batch)."""
        if self._pass is not None or self._producer is not None:
            raise RuntimeError("pad_to must be called before the first batch")
        self.width = width

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._resume is not None:
            self._draw_again()
        if self.batch is None:
            return self._next_pass(step)
        if self._pass is None or self._pos + self.batch > len(self._pass[0]):
            self._pass = self._next_pass(step)
            self._pos = 0
        x, y = self._pass
        sl = slice(self._pos, self._pos + self.batch)
        self._pos += self.batch
        return x[sl], y[sl]

    def state(self) -> dict:
        """Where the stream stands between two steps, JSON-able (a training checkpoint's,
        ``operators.checkpoints``): the generator's state when the pass being served was drawn,
        the step that drew it and the position in it. The producer may have drawn further; this
        is where a stream made afresh restarts (:meth:`restore`)."""
        if self._pass_rng is None:
            return {"rng": self.rng.bit_generator.state, "first_step": 0, "pos": 0, "drawn": False}
        return {"rng": self._pass_rng, "first_step": self._pass_step, "pos": self._pos, "drawn": True}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state` of a stream made with the same arguments: the next batch
        is the one that stream would have served next, to the bit (the pass being served is drawn
        again from the same generator state). Only before the first batch."""
        if self._pass is not None or self._producer is not None or self._pass_rng is not None:
            raise RuntimeError("restore must be called before the first batch")
        self.rng.bit_generator.state = state["rng"]
        if state["drawn"]:
            self._resume = (int(state["first_step"]), int(state["pos"]))

    def _draw_again(self) -> None:
        """The restored pass, drawn again; with one pass a step it was used up, so it is dropped."""
        assert self._resume is not None
        first, pos = self._resume
        self._resume = None
        current = self._next_pass(first)
        if self.batch is not None:
            self._pass, self._pos = current, pos

    def _next_pass(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.prefetch:
            x, y, start = self._draw()
        else:
            if self._producer is None:  # it draws the passes of the steps left from here
                self._producer = _Producer(self._draw, self.batch, self.steps - step)
            x, y, start = self._producer.take()
        self._pass_rng, self._pass_step = start, step
        return x, y

    def _draw(self) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """One pass, and the generator's state before it was drawn: rows from ``make_rows``,
        permuted, on the device. Rows given as blocks
        (``operators.rows.RowBlocks``) are made on the device when it is not the CPU, from
        blocks sent once (pinned and asynchronous), and permuted there; rows that are the same
        array as the last pass's (a fixed training set) are sent once and permuted there."""
        start = dict(self.rng.bit_generator.state)
        x, y = self.make_rows(self.rng)
        y = column(y)
        perm = self._permutation(len(x)) if self.permute else None
        if self.device_rows:
            with self._device_lock():
                xd = self._on_device(x)
                yd = _to_device(np.ascontiguousarray(y), self.device)
                if perm is not None:
                    index = _to_device(perm, self.device)
                    xd, yd = xd[index], yd[index]
            return xd, yd, start
        x = x.numpy() if isinstance(x, RowBlocks) else x
        if perm is not None:
            x, y = x[perm], y[perm]
        if self.width is not None and x.shape[1] < self.width:
            x = np.pad(x, ((0, 0), (0, self.width - x.shape[1])))
        with self._device_lock():  # the rows were built unlocked; only their way onto a GPU waits
            return _to_device(x, self.device), _to_device(y, self.device), start

    def _device_lock(self):
        """:data:`DEVICE_LOCK` on a GPU (no capture can be voided elsewhere: nothing to wait for)."""
        return DEVICE_LOCK if self.device.type == "cuda" else contextlib.nullcontext()

    def _permutation(self, rows: int) -> np.ndarray:
        """A pass's order: its rows shuffled, or its groups shuffled whole."""
        g = self.group
        if g == 1:
            return self.rng.permutation(rows)
        if rows % g:
            raise ValueError(f"a pass of {rows} rows is not whole groups of {g}")
        return (self.rng.permutation(rows // g)[:, None] * g + np.arange(g)).ravel()

    def _on_device(self, x) -> torch.Tensor:
        """The pass's inputs on the device, ``width`` wide: made there from blocks, or sent,
        once for a fixed set of rows."""
        if self._sent is not None and self._sent[0] is x:
            return self._sent[1]
        if isinstance(x, RowBlocks):
            xd = x.torch(self.device, max(self.width or 0, x.width))
        else:
            pad = 0 if self.width is None else max(0, self.width - x.shape[1])
            xd = _to_device(np.pad(x, ((0, 0), (0, pad))) if pad else x, self.device)
        self._sent = (x, xd)
        return xd

    def close(self) -> None:
        """Stop the producer (it is a daemon thread: an abandoned stream never blocks exit)."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None


def as_tensor(x, device: torch.device | str) -> torch.Tensor:
    """Rows (an array or ``RowBlocks``) as a float32 tensor on ``device``: blocks are made into
    rows there (on a CPU, on the host as always)."""
    device = torch.device(device)
    if isinstance(x, RowBlocks):
        return torch.from_numpy(x.numpy()) if device.type == "cpu" else x.torch(device)
    return _to_device(np.asarray(x), device)


def _to_device(a: np.ndarray, device: torch.device) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(a))
    if device.type == "cuda":  # pinned, so the copy is asynchronous and the host never waits
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def served_batches(rows: int, batch: int | None) -> int:
    """Batches a pass of ``rows`` rows serves: whole batches, or one short batch (one batch:
    the whole pass, when ``batch`` is None)."""
    return 1 if batch is None else max(1, rows // batch)


class _Producer:
    """Draws passes on a thread, one ahead of the consumer: the next pass is built while the
    current one trains, and never more than that (two passes in memory at most). It stops once
    its passes serve ``steps`` batches of ``batch`` rows: the passes the loop would draw itself."""

    _END = object()  # no pass follows

    def __init__(self, draw: Callable[[], tuple[torch.Tensor, torch.Tensor, dict]], batch: int | None, steps: int):
        self._draw, self._batch, self._steps = draw, batch, steps
        self._passes: queue.SimpleQueue = queue.SimpleQueue()  # passes, an error, or _END
        self._wanted = threading.Semaphore(1)  # the consumer took the last pass: draw the next
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="taskextrap-rows")
        self._thread.start()

    def _run(self) -> None:
        served = 0
        while served < self._steps:
            self._wanted.acquire()
            if self._stop.is_set():
                return
            try:
                drawn = self._draw()
            except Exception as e:  # noqa: BLE001 - handed to the consumer and raised in its thread
                self._passes.put(e)
                return
            self._passes.put(drawn)
            served += served_batches(len(drawn[0]), self._batch)
        self._passes.put(self._END)

    def take(self) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """The next pass and the generator's state before it (waits for the producer); the
        producer then starts on the one after."""
        item = self._passes.get()
        if isinstance(item, Exception):
            raise item
        if item is self._END:
            raise RuntimeError("the row stream is used up: it serves only the steps it was made for")
        self._wanted.release()
        return item

    def close(self) -> None:
        """Stop after the pass being drawn (if any)."""
        self._stop.set()
        self._wanted.release()
