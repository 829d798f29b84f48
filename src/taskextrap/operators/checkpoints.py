"""Mid-training checkpoints: a network whose training is stopped (a killed run, a session's end)
trains on from where it stood, to the bit, when the same unit runs again.

An experiment's unit computes inside :func:`checkpointing` (``experiments.units.cached_unit``:
a folder beside the unit file, named by the unit's fingerprint, so only the same settings and
source ever read it). There every network that trains alone on a CPU from a
:class:`~taskextrap.operators.streams.RowStream` saves, at most every :data:`EVERY_S` seconds,
one safetensors file: its weights, Adam's and the learning-rate schedule's state, its loss
history, its best-validation weights and score, and where its stream stands. Run again, the
network loads it and trains on from that step: the same batches and the same numbers as if it
had never stopped (tests/operators/test_checkpoints.py). A file is read back only by the same
network from the same start (weights and stream) on a machine with the same CPU kernels and
numeric libraries; anything else starts over, in one line. The folder goes once the unit is saved.

Why: the composition ``cnp`` at its dev-chosen steps trains for hours in a ``paper`` unit,
longer than a working session, and a stopped unit used to start over. Networks trained stacked
(on a GPU, ``operators.stacked``) do not checkpoint: a GPU trains them in minutes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.files import read_state, write_state_atomic
from taskextrap.provenance import cpu_info, library_versions

EVERY_S = 300.0  # seconds between two saves of one network (a save takes milliseconds)
FORMAT = 1  # the layout of a checkpoint file; another is ignored


@dataclass
class _Folder:
    path: Path
    counts: dict[str, int] = field(default_factory=dict)  # networks of each name so far
    lock: threading.Lock = field(default_factory=threading.Lock)


# This thread's folder: each thread that computes a unit (or a benchmark's cell) has its own, so
# two computed at once never read each other's networks' checkpoints.
_HERE = threading.local()


@contextlib.contextmanager
def checkpointing(folder: str | Path | None) -> Iterator[None]:
    """Within the block, networks that this thread trains alone on a CPU (``train_jobs`` called
    here) checkpoint into ``folder`` and resume from what it holds; nothing when ``folder`` is None."""
    before = getattr(_HERE, "folder", None)
    _HERE.folder = None if folder is None else _Folder(Path(folder))
    try:
        yield
    finally:
        _HERE.folder = before


def for_job(job) -> Checkpoint | None:
    """The checkpoint of ``job`` (an ``operators.jobs.Job``) in this thread's folder, named by its
    name and how many networks of that name came before it in the block; None outside
    :func:`checkpointing` or when its batches cannot say where they stand (no ``state``)."""
    folder: _Folder | None = getattr(_HERE, "folder", None)
    if folder is None or not callable(getattr(job.batches, "state", None)):
        return None
    with folder.lock:
        n = folder.counts.get(job.name, 0)
        folder.counts[job.name] = n + 1
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", job.name)
    return Checkpoint(folder.path / f"{stem}-{n}.safetensors", _identity(job))


def _identity(job) -> dict:
    """What a saved state must match to be read back: the network (name, settings, loss, and a
    hash of its initial weights and of its stream's starting generator state, so only the same
    network from the same start resumes) and the machine (its CPU's kernels and the numeric
    libraries' versions move last bits, so a state carried to another machine starts over)."""
    start = hashlib.sha256()
    for k, v in job.net.state_dict().items():
        start.update(k.encode() + _np(v).tobytes())
    start.update(json.dumps(job.batches.state(), sort_keys=True).encode())
    return {
        "format": FORMAT,
        "name": job.name,
        "cfg": asdict(job.cfg),
        "shapes": [list(p.shape) for p in job.net.parameters()],
        "loss": getattr(job.loss, "__name__", None),
        "start": start.hexdigest()[:16],
        "cpu": cpu_info(),
        "libraries": library_versions(),
    }


@dataclass
class Checkpoint:
    """One network's checkpoint file at ``path``; ``identity`` (its name, optimiser settings,
    parameter shapes and loss) must match for a saved file to be read back."""

    path: Path
    identity: dict
    every_s: float = field(default_factory=lambda: EVERY_S)
    seconds_before: float = 0.0  # training seconds of the runs before this one (read back on resume)
    _last: float = field(default_factory=time.monotonic)
    _began: float = field(default_factory=time.perf_counter)
    _broken: bool = False  # a save failed: say so once and save no more

    def due(self) -> bool:
        """Whether :data:`EVERY_S` seconds have passed since the last save (or the start)."""
        return not self._broken and time.monotonic() - self._last >= self.every_s

    def save(self, step: int, net, opt, sched, stream, history: list[float], best: float, best_state) -> None:
        """Write the state after ``step`` steps, atomically (a save cut short leaves the last one).
        A save that fails (a full disk) is said in one line and training goes on without saves."""
        try:
            self._write(step, net, opt, sched, stream, history, best, best_state)
        except (OSError, TaskextrapError) as exc:
            self._broken = True
            print(f"checkpoints of {self.identity['name']} stopped: {exc}", file=sys.stderr)

    def _write(self, step: int, net, opt, sched, stream, history: list[float], best: float, best_state) -> None:
        arrays = {f"net/{k}": _np(v) for k, v in net.state_dict().items()}
        opt_state = opt.state_dict()
        for i, s in opt_state["state"].items():
            arrays |= {f"opt/{i}/{k}": _np(v) for k, v in s.items()}
        if best_state is not None:
            arrays |= {f"best/{k}": _np(v) for k, v in best_state.items()}
        arrays["history"] = np.asarray(history, dtype=np.float64)
        meta = {
            "identity": self.identity,
            "step": step,
            "best": float(best) if np.isfinite(best) else None,
            "param_groups": opt_state["param_groups"],
            "sched": sched.state_dict(),
            "stream": stream.state(),
            "seconds": self.seconds_before + time.perf_counter() - self._began,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_state_atomic(self.path, arrays, meta)
        self._last = time.monotonic()

    def restore(self, net, opt, sched, stream) -> tuple[int, list[float], float, dict | None] | None:
        """Load the saved state into the network, the optimiser, the schedule and the stream made
        afresh for the same job; return (step, history, best, best weights), or None when there
        is no file or it is another network's, another layout's or unreadable (said in one line).
        Called as training starts: its seconds and the time to the first save count from here."""
        self._began, self._last = time.perf_counter(), time.monotonic()
        if not self.path.is_file():
            return None
        try:
            arrays, meta = read_state(self.path)
            if meta.get("identity") != self.identity:
                raise TaskextrapError(f"{self.path} is another network's checkpoint, or from another machine")
            # everything read and checked before anything is loaded: a bad file leaves all fresh
            weights = {k[4:]: _t(v) for k, v in arrays.items() if k.startswith("net/")}
            state: dict[int, dict] = {}
            for k, v in arrays.items():
                if k.startswith("opt/"):
                    _, i, name = k.split("/", 2)
                    state.setdefault(int(i), {})[name] = _t(v)
            groups, sched_state, stream_state = meta["param_groups"], meta["sched"], meta["stream"]
            best_state = {k[5:]: _t(v) for k, v in arrays.items() if k.startswith("best/")} or None
            best = np.inf if meta["best"] is None else float(meta["best"])
            step, history, seconds = int(meta["step"]), arrays["history"].tolist(), float(meta["seconds"])
        except (TaskextrapError, KeyError, TypeError, ValueError) as exc:
            print(f"starting over: {exc if isinstance(exc, TaskextrapError) else f'{self.path} is damaged'}",
                  file=sys.stderr)  # fmt: skip
            return None
        net.load_state_dict(weights)
        opt.load_state_dict({"state": state, "param_groups": groups})
        sched.load_state_dict(sched_state)
        stream.restore(stream_state)
        self.seconds_before = seconds
        total = self.identity["cfg"]["steps"]
        print(f"resuming {self.identity['name']} at step {step:,} of {total:,} from {self.path}", file=sys.stderr)
        return step, history, best, best_state


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy()


def _t(a: np.ndarray):
    import torch  # here, not at import: experiments.units imports this module, and a process
    # that only reads a cached unit back should not wait for torch

    return torch.from_numpy(np.array(a))  # a writable copy
