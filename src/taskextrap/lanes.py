"""Lanes: independent pieces of a unit's work run side by side on the cores the unit leaves idle.

A unit runs with a fixed number of torch threads (``--unit-cpus``, one by default), because a
sum split over more threads rounds differently. On a machine with more cores than that, the
rest would idle. A *lane* is another thread that runs whole pieces of work, each exactly as it
would run alone: one network's training (``operators.train.train_jobs``), one chunk of rows
through a network (``operators.mlp.predict_rows``), one chunk of targets' verification or of
Γ's per-task adaptation. Every piece computes the same operations with the same thread count
on the same inputs, so its numbers keep every bit; only the wall time changes. torch and NumPy
release the GIL inside their kernels, so lanes overlap the arithmetic.

How many: ``TASKEXTRAP_LANES`` when set, else the cores this process may use divided by torch's
threads (2 on a 2-core machine at one thread); 1 inside a Ray task (``limited``), whose other
cores run other units. A piece that runs inside a lane runs its own pieces inline (no nesting, no deadlock).

A lane also takes the caller's subnormal setting (x86's MXCSR, see ``operators.jobs.subnormals_flushed``)
for each piece and drops it after: a new thread inherits the setting of the thread that starts it,
so lanes started while their caller flushed would otherwise flush for the rest of the process, and
a piece's bits would depend on what ran first in it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_local = threading.local()  # .inside: this thread is a lane
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()


_limit: int | None = None  # set by limited(): a Ray task's lanes


@contextlib.contextmanager
def limited(n: int):
    """Run the block with at most ``n`` lanes (a Ray task: its cores beyond its own threads are
    other units', so it runs its pieces one after another)."""
    global _limit
    before, _limit = _limit, n
    try:
        yield
    finally:
        _limit = before


def lanes() -> int:
    """How many pieces run at once: ``TASKEXTRAP_LANES``, else this process's usable cores over
    torch's thread count (at least 1); never more than a :func:`limited` block allows."""
    auto = _lanes()
    return auto if _limit is None else min(auto, _limit)


def _lanes() -> int:
    env = os.environ.get("TASKEXTRAP_LANES", "")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"TASKEXTRAP_LANES must be a whole number, got {env!r}") from None
    import torch

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, torch.get_num_threads()))


@contextlib.contextmanager
def threads_limited(n: int):
    """Run the block with ``n`` threads in torch and in every native thread pool loaded (NumPy's
    and SciPy's BLAS, OpenMP): a sum split over other threads rounds differently, so a unit's
    numbers depend on its thread count and on nothing else about the machine."""
    import scipy.linalg  # noqa: F401  (loads SciPy's own BLAS now: threadpool_limits only
    import sklearn.neighbors  # noqa: F401  reaches the pools already loaded, and these two are
    import torch  # otherwise loaded midway through a unit, at the machine's thread count)
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)


def _executor(n: int) -> ThreadPoolExecutor:
    """A pool of ``n`` lane threads, kept between calls (made again when ``n`` changes)."""
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="taskextrap-lane")
            _pool_size = n
        return _pool


def flushing() -> bool:
    """Whether this thread flushes subnormal floats to zero (torch has no getter: a subnormal
    times one comes out zero)."""
    import torch

    return (torch.tensor([1e-39], dtype=torch.float32, device="cpu") * 1.0).item() == 0.0  # the CPU's setting


def _in_lane(fn: Callable[[T], R], item: T, threads: int, flush: bool) -> R:
    import torch

    _local.inside = True
    torch.set_num_threads(threads)  # a lane computes with the unit's thread count, as the caller does
    torch.set_flush_denormal(flush)  # and with its subnormal setting, whatever this thread inherited
    try:
        return fn(item)
    finally:
        torch.set_flush_denormal(False)
        _local.inside = False


def map_lanes(fn: Callable[[T], R], items: Iterable[T], device: object = "cpu") -> list[R]:
    """``[fn(item) for item in items]``, with up to :func:`lanes` items at once, in order. The
    first error is raised here, once every started item has finished. Inline (one after
    another) when there is one lane, one item, the caller is itself a lane, or the work runs
    on another ``device`` than the CPU (a GPU's kernels queue on one stream anyway)."""
    items = list(items)
    n = min(lanes(), len(items))
    if n <= 1 or getattr(_local, "inside", False) or str(device).split(":")[0] != "cpu":
        return [fn(item) for item in items]
    import torch

    threads, flush = torch.get_num_threads(), flushing()
    futures = [_executor(n).submit(_in_lane, fn, item, threads, flush) for item in items]
    error: BaseException | None = None
    out = []
    for f in futures:
        try:
            out.append(f.result())
        except BaseException as e:  # noqa: BLE001 - kept, and raised once all have finished
            error = error or e
    if error is not None:
        raise error
    return out


def run_lanes(calls: Sequence[Callable[[], R]]) -> list[R]:
    """Each of ``calls`` (no arguments), up to :func:`lanes` at once; their results in order."""
    return map_lanes(lambda call: call(), calls)
