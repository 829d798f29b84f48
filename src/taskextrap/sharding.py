"""One experiment's work split over several processes (one per GPU) through shared files.

A run with ``--shard I/N`` (or under ``torchrun --nproc_per_node N``, which sets ``RANK`` and
``WORLD_SIZE``, or ``srun -n N``, which sets ``SLURM_PROCID`` and ``SLURM_NTASKS``) is process I
of N. All N share ``--out``: process 0, the lead, does everything that is cheap or sequential
(fine-tuning, baselines, the final answers) and writes the results; each process scores its own
chunks of the likelihood search (chunk k belongs to process k mod N) and saves them beside the
lead's. The lead then reads every chunk. Nothing needs a network
between the processes (no NCCL, no timeouts while the lead fine-tunes): they meet through
files that are written atomically, so processes on several machines with one shared disk work
too, and an interrupted process resumes like an unsharded run.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TypeVar
from collections.abc import Callable

from taskextrap.errors import TaskextrapError

T = TypeVar("T")
WAIT_LIMIT_S = 48 * 3600.0  # how long a process waits for another's files before it gives up
POLL_S = 10.0


@dataclass(frozen=True)
class Shard:
    """Process ``index`` of ``count`` (the default, 0 of 1, is an unsharded run)."""

    index: int = 0
    count: int = 1

    def __post_init__(self):
        if not (self.count >= 1 and 0 <= self.index < self.count):
            raise TaskextrapError(f"a shard is I/N with 0 <= I < N, got {self.index}/{self.count}")

    @property
    def is_lead(self) -> bool:
        """Whether this process writes the results (process 0)."""
        return self.index == 0

    def owns(self, chunk: int) -> bool:
        """Whether this process computes chunk number ``chunk``."""
        return chunk % self.count == self.index

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` -> Shard(I, N); a one-line error for anything else."""
        try:
            index, count = (int(p) for p in text.split("/"))
        except ValueError:
            raise TaskextrapError(f"--shard takes I/N (e.g. 0/4), got {text!r}") from None
        return cls(index, count)

    @classmethod
    def from_env(cls, environ=os.environ) -> Shard:
        """The shard the launcher assigns: torchrun's ``RANK`` of ``WORLD_SIZE``, else Slurm's
        ``SLURM_PROCID`` of ``SLURM_NTASKS`` (``srun -n N``); unsharded without them. A Slurm
        array job's tasks are one task each (``SLURM_NTASKS=1``): unsharded, each given its own
        ``--seed``."""
        for rank, world in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
            if world in environ:
                try:
                    return cls(int(environ.get(rank, "0")), int(environ[world]))
                except ValueError:
                    raise TaskextrapError(
                        f"{rank} and {world} must be integers, got {environ.get(rank)!r} and {environ[world]!r}"
                    ) from None
        return cls()

    def device(self, device: str, environ=os.environ) -> str:
        """The device of this process: ``cuda:<local rank>`` for ``cuda`` with several processes
        (each on its own GPU; torchrun's ``LOCAL_RANK``, else Slurm's ``SLURM_LOCALID``),
        otherwise ``device`` as given."""
        if device == "cuda" and self.count > 1:
            for local in ("LOCAL_RANK", "SLURM_LOCALID"):
                if local in environ:
                    try:
                        return f"cuda:{int(environ[local])}"
                    except ValueError:
                        raise TaskextrapError(f"{local} must be an integer, got {environ[local]!r}") from None
        return device


def wait_for(ready: Callable[[], T | None], what: str, limit_s: float | None = None, poll_s: float | None = None) -> T:
    """Poll ``ready()`` until it returns something other than None, and return that.

    Says once on stderr what it waits for; a one-line error after ``limit_s`` seconds (a
    process that died: rerun it, and the others carry on from their files).
    """
    limit_s = WAIT_LIMIT_S if limit_s is None else limit_s
    poll_s = POLL_S if poll_s is None else poll_s
    start, said = time.monotonic(), False
    while True:
        value = ready()
        if value is not None:
            return value
        if time.monotonic() - start > limit_s:
            raise TaskextrapError(
                f"gave up after {limit_s:.0f} s waiting for {what}; "
                "rerun the process that makes it (the others resume from their files)"
            )
        if not said:
            print(f"waiting for {what}", file=sys.stderr, flush=True)
            said = True
        time.sleep(poll_s)
