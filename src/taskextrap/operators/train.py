"""A short, readable regression training loop with validation-based model selection, and the
entry point that trains every network of a unit at once (:func:`train_jobs`).

A :class:`Job` is one network with its batch stream, validation rows, optimiser settings and
progress callback. :func:`train_jobs` trains a list of them: on a CPU one after another with
:func:`train_regressor`, exactly as each network trained alone before (the same bits); on a GPU
as stacked models, one per architecture (``operators.stacked``: batched matrix products over a
network axis, one optimiser, no host sync inside the step loop). Every network keeps its own
stream and generator, so its data never depend on which networks train beside it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from taskextrap.lanes import map_lanes
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
) -> list[float]:
    """Minimise MSE of ``model`` on batches from ``make_batch(step)``; return the loss history.

    When ``val`` is given (inputs, targets from held-out *training-region* tasks), the weights
    with the lowest validation loss are restored at the end.
    """
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.steps, 1), eta_min=cfg.lr * 0.05)
    history, best, best_state = [], np.inf, None
    for step in range(cfg.steps):
        x, y = make_batch(step)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        history.append(loss.item())
        if val is not None and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            with torch.no_grad():
                v = float(nn.functional.mse_loss(model(val[0]), val[1]))
            if v < best:
                best, best_state = v, {k: t.clone() for k, t in model.state_dict().items()}
        if progress is not None:
            progress(step, history[-1])
    if best_state is not None:
        model.load_state_dict(best_state)
    return history


@dataclass
class Job:
    """One network to train: ``net`` (an ``nn.Module`` on its device), ``batches(step)`` ->
    (inputs, targets) on that device, ``val`` (inputs, targets) for model selection (or None),
    the optimiser settings ``cfg``, the ``progress(step, loss)`` callback and a ``name`` for
    reports. :func:`train_jobs` fills ``history`` (the training loss of every step) and
    ``seconds`` (its own training time; None when it trained stacked with others, whose time
    it shares), then calls ``done(job)`` (the network's owner takes its history and leaves
    training mode)."""

    net: nn.Module
    batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    val: tuple[torch.Tensor, torch.Tensor] | None
    cfg: TrainConfig
    progress: Callable[[int, float], None] | None = None
    name: str = "network"
    done: Callable[[Job], None] | None = None
    history: list[float] = field(default_factory=list)
    seconds: float | None = None

    def run(self) -> Job:
        """Train this job alone (:func:`train_jobs`)."""
        train_jobs([self])
        return self

    @property
    def device(self) -> torch.device:
        """Where the network's parameters are."""
        return next(self.net.parameters()).device


def train_jobs(
    jobs: Sequence[Job], stacked: bool | None = None, phase: Callable[[str], None] | None = None
) -> list[Job]:
    """Train every job; each ends with its best-validation weights and its ``history``.
    ``phase(description)`` hears what trains now ("training Psi", ...; a progress bar's phase).

    ``stacked`` None (default): stacked on a GPU; on a CPU each network alone as
    :func:`train_regressor` trains it (where a stacked step is slower and separate ones keep
    every bit), as many at once as there are lanes (``taskextrap.lanes``: the cores the unit's
    torch threads leave idle; each network's numbers are the same whichever lane it runs in).
    ``stacked=True`` runs the stacked path on any device (the tests run it on the CPU); networks that cannot be
    stacked (another layer than Linear and ReLU, or alone of their architecture) train alone.
    """
    jobs = list(jobs)
    for observe in OBSERVERS:
        observe(jobs)
    if stacked is None:
        stacked = STACKED if STACKED is not None else any(j.device.type == "cuda" for j in jobs)
    try:
        if stacked:
            from taskextrap.operators.stacked import train_stacked

            if phase is not None:
                phase("training " + ", ".join(j.name for j in jobs))
            train_stacked(jobs)
        else:
            map_lanes(lambda job: _train_alone(job, phase), jobs)
    finally:
        for job in jobs:  # a stream's producer thread ends with its training
            close = getattr(job.batches, "close", None)
            if close is not None:
                close()
    for job in jobs:
        if job.done is not None:
            job.done(job)
    return jobs


def _train_alone(job: Job, phase: Callable[[str], None] | None = None) -> None:
    """``job`` trained by :func:`train_regressor` (announced to ``phase`` as it starts), timed:
    one lane's work."""
    if phase is not None:
        phase(f"training {job.name}")
    t = time.perf_counter()
    job.history = train_regressor(job.net, job.batches, job.val, job.cfg, job.progress)
    job.seconds = time.perf_counter() - t


# Called with every list of jobs train_jobs receives, before it trains them (benchmarks/speed.py
# counts a unit's operations per step on its networks: operators.counting).
OBSERVERS: list[Callable[[list[Job]], None]] = []

# The path train_jobs takes when not told: None stacks on a GPU only; True or False forces it
# (tests and the operation counters run the stacked path on a CPU). TASKEXTRAP_STACKED=1 or 0
# sets it for a process.
STACKED: bool | None = {"1": True, "0": False}.get(os.environ.get("TASKEXTRAP_STACKED", ""))


def job_seconds(jobs: dict[str, Job]) -> dict[str, float]:
    """``{key: seconds}`` of each job of ``jobs`` (timing key -> job) that trained alone: the
    phases of a unit's timing. Jobs trained stacked share one time, which their caller records
    as ``training_s``."""
    return {key: j.seconds for key, j in jobs.items() if j.seconds is not None}
