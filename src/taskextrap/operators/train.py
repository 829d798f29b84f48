"""The entry point that trains every network of a unit at once (:func:`train_jobs`).

A :class:`~taskextrap.operators.jobs.Job` (``operators.jobs``, re-exported here with
``TrainConfig`` and ``train_regressor``) is one network with its batch stream, validation rows,
optimiser settings and progress callback. :func:`train_jobs` trains a list of them: on a CPU one after another with
:func:`train_regressor`, exactly as each network trained alone before (the same bits); on a GPU
as stacked models, one per architecture (``operators.stacked``: batched matrix products over a
network axis, one optimiser, no host sync inside the step loop). Every network keeps its own
stream and generator, so its data never depend on which networks train beside it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial


from taskextrap.lanes import run_lanes
from taskextrap.operators import checkpoints
from taskextrap.operators.jobs import Job, TrainConfig, train_alone, train_regressor  # noqa: F401 - re-exported


def train_jobs(
    jobs: Sequence[Job],
    stacked: bool | None = None,
    phase: Callable[[str], None] | None = None,
    beside: Sequence[Callable[[], object]] = (),
) -> list[Job]:
    """Train every job; each ends with its best-validation weights and its ``history``.
    ``phase(description)`` hears what trains now ("training Psi", ...; a progress bar's phase).
    ``beside``: work without a network (a GP's fit) run in the lanes too, before the networks
    (on the stacked path, before the stacked training).

    ``stacked`` None (default): stacked on a GPU; on a CPU each network alone as
    :func:`train_regressor` trains it (where a stacked step is slower and separate ones keep
    every bit), as many at once as there are lanes (``taskextrap.lanes``: the cores the unit's
    torch threads leave idle; each network's numbers are the same whichever lane it runs in).
    ``stacked=True`` runs the stacked path on any device (the tests run it on the CPU); networks that cannot be
    stacked (another layer than Linear and ReLU, or alone of their architecture) train alone.

    On the lanes the work beside starts first, then the networks by :func:`longest_first`: the
    lane that draws the longest network keeps it for the whole phase while the others share the
    rest, so the lanes finish together (the parameter unit's 4,000-step ``cnp``, listed after
    RTE's networks, started 20 s late). Which lane a piece runs in does not change its numbers.
    """
    jobs = list(jobs)
    for observe in OBSERVERS:
        observe(jobs)
    if stacked is None:
        stacked = STACKED if STACKED is not None else any(j.device.type == "cuda" for j in jobs)
    try:
        if stacked:
            from taskextrap.operators.stacked import train_stacked

            for work in beside:
                work()
            if phase is not None and jobs:
                phase("training " + ", ".join(j.name for j in jobs))
            train_stacked(jobs)
        else:
            for job in jobs:  # in their listed order, so a run again names each the same
                if job.device.type == "cpu":
                    job.checkpoint = checkpoints.for_job(job)
            pieces: list[Callable[[], object]] = [*beside]
            pieces += [partial(_train_alone, job, phase) for job in longest_first(jobs)]
            run_lanes(pieces)
    finally:
        for job in jobs:  # a stream's producer thread ends with its training
            close = getattr(job.batches, "close", None)
            if close is not None:
                close()
    for job in jobs:
        if job.done is not None:
            job.done(job)
    return jobs


def longest_first(jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` by the size of their training, largest first (ties in their order): steps times
    parameters, in proportion to a step's work for networks of the same kinds of layers."""
    size = [j.cfg.steps * sum(p.numel() for p in j.net.parameters()) for j in jobs]
    return [jobs[i] for i in sorted(range(len(jobs)), key=lambda i: -size[i])]


def _train_alone(job: Job, phase: Callable[[str], None] | None = None) -> None:
    """``job`` trained by :func:`train_regressor` (announced to ``phase`` as it starts), timed:
    one lane's work."""
    if phase is not None:
        phase(f"training {job.name}")
    train_alone(job)


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
