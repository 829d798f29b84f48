"""Exclusive locks on files, for processes that share an ``--out``: a unit's lock
(:func:`taskextrap.experiments.units.unit_lock`), a plot folder's manifest lock
(:mod:`taskextrap.experiments.plotfiles`) and a run folder's record
(:func:`taskextrap.experiments.run_record.claim_run`).

A lock is the operating system's (``flock``, through ``filelock``), which the kernel releases
when its process dies, so a killed run leaves no lock that blocks the next. Some file systems
have no ``flock`` (some NFS and Lustre mounts): recent ``filelock`` versions then lock in their
own way; where locking fails instead (older versions, an NFS mount without a lock manager) no
lock is taken, after one ``warning:`` line per file system: two processes on that ``--out`` may then
compute a unit twice (every file is written atomically, so nothing is damaged). A lock file
that outlives a killed process would block every later run instead, which is worse on a
cluster whose jobs are killed at their time limit.
"""

from __future__ import annotations

import errno
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from taskextrap.errors import TaskextrapWarning

if TYPE_CHECKING:
    from filelock import BaseFileLock

# What flock fails with on a file system without it: no such call, no lock manager (NFS without
# lockd), not supported. filelock raises NotImplementedError for the first in some versions.
_NO_FLOCK = frozenset({errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)})
_warned: set[int] = set()  # the file systems (device numbers) already warned about in this process


class Lock:
    """The exclusive lock of the file ``path`` (created if missing; it stays on release, so every
    waiter locks the same file). ``path`` None is no lock at all (a run without a cache)."""

    def __init__(self, path: Path | None):
        self.path = None if path is None else Path(path)
        self._lock: BaseFileLock | None = None  # made on first use: filelock is imported only then
        self._held = False

    def acquire(self, wait: bool = True) -> bool:
        """Take the lock, waiting for another holder when ``wait``; False when ``wait`` is False
        and another process holds it. On a file system without locks: True, no lock held (one
        warning per file system)."""
        if self.path is None:
            return True
        from filelock import FileLock, Timeout

        self.path.parent.mkdir(parents=True, exist_ok=True)  # not every filelock version creates the folder
        if self._lock is None:
            self._lock = FileLock(str(self.path))
        try:
            self._lock.acquire(timeout=-1 if wait else 0)
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            return False
        except (NotImplementedError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno not in _NO_FLOCK:
                raise
            _warn_no_locks(self.path.parent)
            return True
        self._held = True
        return True

    def release(self) -> None:
        """Release the lock when this object holds it (nothing otherwise)."""
        if self._held and self._lock is not None:
            self._lock.release()
            self._held = False

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _warn_no_locks(folder: Path) -> None:
    """One warning per file system and process: ``folder``'s takes no locks."""
    device = folder.stat().st_dev
    if device in _warned:
        return
    _warned.add(device)
    warnings.warn(
        f"{folder} is on a file system without file locks (flock): running without them, so two "
        "processes sharing this --out may compute a unit twice",
        TaskextrapWarning,
        stacklevel=3,
    )
