"""One network to train (:class:`Job`), its optimiser settings (:class:`TrainConfig`) and the
short, readable regression loop that trains it alone (:func:`train_regressor`): Adam, cosine
decay, the best-validation weights kept. ``operators.train.train_jobs`` trains a list of jobs,
one after another on a CPU or stacked on a GPU (``operators.stacked``); both import this module
and it imports neither.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from taskextrap.lanes import flushing
from taskextrap.operators.checkpoints import Checkpoint
from taskextrap.validation import check_int, check_real


@dataclass(frozen=True)
class TrainConfig:
    """Adam with weight decay, fixed number of steps, cosine decay, best-validation weights kept.

    ``steps``, ``batch`` and ``eval_every`` are integers >= 1, ``lr`` a finite number > 0 and
    ``weight_decay`` a finite number >= 0: anything else is a one-line error when the config is
    made, not a NaN loss or a crash in the middle of training.
    """

    steps: int = 2000
    batch: int = 4096
    lr: float = 1e-3
    weight_decay: float = 1e-4
    eval_every: int = 100

    def __post_init__(self):
        check_int("TrainConfig.steps", self.steps, 1)
        check_int("TrainConfig.batch", self.batch, 1)
        check_real("TrainConfig.lr", self.lr, 0.0, min_open=True)
        check_real("TrainConfig.weight_decay", self.weight_decay, 0.0)
        check_int("TrainConfig.eval_every", self.eval_every, 1)


def train_regressor(
    model: nn.Module,
    make_batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    val: tuple[torch.Tensor, torch.Tensor] | None,
    cfg: TrainConfig,
    progress: Callable[[int, float], None] | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    checkpoint: Checkpoint | None = None,
) -> list[float]:
    """Minimise ``loss_fn(model(x), y)`` (default: the MSE) on batches from ``make_batch(step)``;
    return the loss history.

    When ``val`` is given (inputs, targets from held-out *training-region* tasks), the weights
    with the lowest validation loss are restored at the end. With a ``checkpoint``
    (``operators.checkpoints``; ``make_batch`` a ``RowStream``) training starts from its saved
    step, if it holds one, and saves there as it goes.
    """
    loss_fn = loss_fn or nn.functional.mse_loss
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.steps, 1), eta_min=cfg.lr * 0.05)
    history: list[float] = []
    best, best_state, start = np.inf, None, 0
    resumed = None if checkpoint is None else checkpoint.restore(model, opt, sched, make_batch)
    if resumed is not None:
        start, history, best, best_state = resumed
    for step in range(start, cfg.steps):
        x, y = make_batch(step)
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        history.append(loss.item())
        if val is not None and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            with torch.no_grad():
                v = float(loss_fn(model(val[0]), val[1]))
            if v < best:
                best, best_state = v, {k: t.clone() for k, t in model.state_dict().items()}
        if progress is not None:
            progress(step, history[-1])
        if checkpoint is not None and step + 1 < cfg.steps and checkpoint.due():
            checkpoint.save(step + 1, model, opt, sched, make_batch, history, best, best_state)
    if best_state is not None:
        model.load_state_dict(best_state)
    return history


@contextlib.contextmanager
def subnormals_flushed(on: bool = True) -> Iterator[None]:
    """Within the block, this thread's CPU float arithmetic treats subnormal numbers (below
    1.2e-38 in float32) as zero and rounds results below that to zero; as before after it.

    Why: a network trained for thousands of steps can carry subnormal values, and x86 CPUs
    compute with them many times slower. The ``cnp`` at the parameter unit's shapes (k=8, 2,048
    rows, width 128, one thread) steps several times slower by step 2,500 than at its start, and
    flushed at the same pace throughout (benchmarks/cnp_step.py --long 2500,
    benchmarks/results/cnp-subnormals.json); in a whole ``paper`` unit its training took 14 times
    longer unflushed (speed.json). It is the
    calling thread's setting (x86's MXCSR), so networks training in other lanes keep their bits.
    A no-op with several torch threads: a worker thread torch or its BLAS starts inside the block
    would inherit the setting and keep it after the block (flushing later training, whose bits
    would then depend on what ran first). A no-op too when ``on`` is False or the CPU cannot flush."""
    if not on or torch.get_num_threads() > 1 or flushing():
        yield
        return
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def train_alone(job: Job) -> None:
    """``job`` trained by :func:`train_regressor` (under :func:`subnormals_flushed`, at one torch
    thread, when it asks and trains on a CPU), its history and seconds filled in."""
    t = time.perf_counter()
    flush = job.flush_subnormals and job.device.type == "cpu"
    with one_torch_thread(flush), subnormals_flushed(flush):
        job.history = train_regressor(job.net, job.batches, job.val, job.cfg, job.progress, job.loss, job.checkpoint)
    # with the seconds its earlier runs trained, if it resumed (a run's wall time counts only its own)
    job.seconds = time.perf_counter() - t + (job.checkpoint.seconds_before if job.checkpoint is not None else 0.0)


@contextlib.contextmanager
def one_torch_thread(on: bool = True) -> Iterator[None]:
    """Within the block, this thread computes with one torch thread; as before after it.

    Why: :func:`subnormals_flushed` can only hold on one thread, and a ``cnp`` trained unflushed
    at torch's default thread count (every core) carried subnormals for the rest of its training:
    one fit ran over 55 minutes where it took 630 s at one flushed thread (docs/own-data.md). A
    network this small gains little from more threads. A no-op when ``on`` is False or the
    thread count is already one."""
    threads = torch.get_num_threads()
    if not on or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass
class Job:
    """One network to train: ``net`` (an ``nn.Module`` on its device), ``batches(step)`` ->
    (inputs, targets) on that device, ``val`` (inputs, targets) for model selection (or None),
    the optimiser settings ``cfg``, the ``progress(step, loss)`` callback, a ``name`` for
    reports and its ``loss(outputs, targets)`` (None: the MSE; a network with another loss,
    such as ``operators.cnp``'s likelihood, is not stacked and trains alone).
    ``operators.train.train_jobs`` fills ``history`` (the training loss of every step) and
    ``seconds`` (its own training time; None when it trained stacked with others, whose time
    it shares), then calls ``done(job)`` (the network's owner takes its history and leaves
    training mode). ``flush_subnormals``: a network that trains alone on a CPU does so under
    :func:`subnormals_flushed` at one torch thread (:func:`one_torch_thread`; the ``cnp``, whose
    training in a unit is 14 times slower without the flush). ``checkpoint``: set by
    ``train_jobs`` inside ``operators.checkpoints.checkpointing`` for a network trained alone."""

    net: nn.Module
    batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    val: tuple[torch.Tensor, torch.Tensor] | None
    cfg: TrainConfig
    progress: Callable[[int, float], None] | None = None
    name: str = "network"
    done: Callable[[Job], None] | None = None
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    history: list[float] = field(default_factory=list)
    seconds: float | None = None
    flush_subnormals: bool = False
    checkpoint: Checkpoint | None = None  # where it saves and resumes (operators.checkpoints)

    @property
    def device(self) -> torch.device:
        """Where the network's parameters are."""
        return next(self.net.parameters()).device
