"""What a training step launches, counted on any device: aten operators and host reads.

A GPU runs fast when a step launches few large operations and never waits for the host, and
both can be counted on a CPU: :class:`Counter` is a dispatch mode that counts every aten
operator a step runs, and every read of a tensor's value on the host (``.item()``, ``float()``,
``bool()``, ``.tolist()``, ``.cpu()``, ``.numpy()``: each a device-to-host sync on a GPU).
:func:`count_training_steps` runs a unit's networks (the jobs ``train_jobs`` receives) on the
stacked path for one validation interval of stand-in batches of their real shapes, and
reports operators and host reads per training step for all of them together
(``benchmarks/speed.py`` records it per unit).
"""

from __future__ import annotations

import contextlib
import copy
from collections import Counter as Tally
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from taskextrap.operators.streams import RowStream
from taskextrap.operators.train import Job

# Tensor methods that read a value back to the host (on a GPU: a sync).
HOST_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")
_SCALAR_READ = torch.ops.aten._local_scalar_dense.default  # what item(), float() and bool() dispatch to


class Counter(TorchDispatchMode):
    """Counts aten operators (``ops``, and ``by_op``) and host reads (``host_reads``) while active
    (use :func:`counting`, which also catches the reads that never reach the dispatcher)."""

    def __init__(self, refuse_host_reads: bool = False):
        super().__init__()
        self.ops = 0
        self.host_reads = 0
        self.by_op: Tally = Tally()
        self.refuse = refuse_host_reads

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _SCALAR_READ:
            self.read(str(func))
        else:  # a scalar read counts as a host read only, not also as an operator
            self.ops += 1
            self.by_op[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    def read(self, what: str) -> None:
        """A host read: counted, or refused (``refuse_host_reads``)."""
        if self.refuse:
            raise AssertionError(f"host read ({what}) inside the step loop")
        self.host_reads += 1


@contextlib.contextmanager
def counting(refuse_host_reads: bool = False) -> Iterator[Counter]:
    """A :class:`Counter` over the block; host reads through :data:`HOST_READS` are counted
    too (or raise AssertionError with ``refuse_host_reads``: the tests' guard)."""
    counter = Counter(refuse_host_reads)
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def wrap(name, f):
        def read(*args, **kwargs):
            if active[0]:
                counter.read(f"Tensor.{name}")
            active[0] = False  # a read that calls another (item -> dispatch) counts once
            try:
                return f(*args, **kwargs)
            finally:
                active[0] = True

        return read

    active = [True]
    try:
        for name, f in saved.items():
            setattr(torch.Tensor, name, wrap(name, f))
        with counter:
            yield counter
    finally:
        for name, f in saved.items():
            setattr(torch.Tensor, name, f)


def _stand_in(job: Job) -> Job:
    """``job`` on a copy of its network with batches of its real shape (zeros) and its own
    validation rows: counting never touches the real network or its stream."""
    net = copy.deepcopy(job.net)
    # the rows' width: the validation rows' (a network such as Psi_chain reads wider rows than
    # its first layer), else the first layer's
    width = (
        job.val[0].shape[1]
        if job.val is not None
        else next(m for m in net.modules() if isinstance(m, torch.nn.Linear)).in_features
    )
    out = 1 if job.val is None else job.val[1].shape[1]
    group = getattr(job.batches, "group", 1)  # a stream serving whole tasks (the cnp's)

    def make_rows(_g):  # four of the stream's batches (rounded to whole groups) per pass
        rows = 4 * (stream.batch or group)
        return np.zeros((rows, width), np.float32), np.zeros((rows, out), np.float32)

    g = np.random.default_rng(0)
    stream = RowStream(make_rows, g, job.cfg.batch, job.cfg.steps, job.device, prefetch=False, group=group)
    return Job(net, stream, job.val, job.cfg, name=job.name, loss=job.loss)


def count_training_steps(jobs: Sequence[Job], interval: int | None = None) -> dict:
    """Operators and host reads per training step of ``jobs`` together on the stacked path
    (``operators.stacked``): after one validation interval of warm-up, the next interval is
    counted (its validation step included) and divided by its steps. ``interval``: the steps
    between validations to count with (default the jobs' own ``eval_every``; a tiny profile's
    networks counted at the paper profile's interval report the paper's figure). Networks that
    cannot be stacked are counted as they train alone (``train_regressor``: a host read every step).
    Returns ``{"ops_per_step", "host_reads_per_step", "stacked_host_reads_per_step" (those of the
    stacked groups alone), "networks", "stacked_groups", "trained_alone", "top_ops"}``."""
    from taskextrap.operators.stacked import stack, step_groups
    from taskextrap.operators.train import train_regressor

    interval = interval or max(j.cfg.eval_every for j in jobs)
    stand_ins = [_stand_in(replace_cfg(j, 2 * interval, interval)) for j in jobs]
    groups, alone = stack(stand_ins)
    step_groups(groups, range(interval))
    with counting() as c:
        step_groups(groups, range(interval, 2 * interval))
    with counting() as a:
        for job in alone:  # their own loop: counted over the same number of steps
            train_regressor(job.net, job.batches, job.val, replace(job.cfg, steps=interval), loss_fn=job.loss)
    c.by_op.update(a.by_op)
    return {
        "ops_per_step": (c.ops + a.ops) / interval,
        "host_reads_per_step": (c.host_reads + a.host_reads) / interval,
        "stacked_host_reads_per_step": c.host_reads / interval,
        "networks": len(jobs),
        "stacked_groups": len(groups),
        "trained_alone": len(alone),
        "top_ops": dict(c.by_op.most_common(8)),
    }


def replace_cfg(job: Job, steps: int, eval_every: int) -> Job:
    """``job`` with ``steps`` training steps validated every ``eval_every`` (its other settings kept)."""
    return replace(job, cfg=replace(job.cfg, steps=steps, eval_every=eval_every), progress=None, done=None)
