"""Leak audit: every fit reports the tasks behind the data it consumes, where it consumes them.

A fitted component (scaler, probe pretraining, PCA, Psi and its model selection, decomposer,
inductive baselines, SFT corpora) reports at the point where data reaches its optimiser or its
PCA, from the data itself, not from what a caller says it passed:

* a fit that computes its data from a task set (the scaler) reports that task set
  (:func:`record_tasks`);
* a fit fed arrays receives them as a :class:`Batch`: the arrays plus the :class:`Source` tasks
  they were drawn from. :func:`consume` reports the sources and, while a spy listens, *verifies*
  them: every ``(x, y)`` pair of arrays a source names must be ``family(params, x)`` (within the
  protocol's noise for noisy contexts), so a batch whose arrays come from other tasks than the
  ones it names raises :class:`LeakError` instead of passing silently. A batch with no sources
  is reported as unlabelled, which :func:`check` rejects;
* a fine-tuning run reports the task identity of every item its sampler produced
  (:func:`record_items`; items carry it as ``item.task``).

In normal runs nothing listens and all of this is a no-op (no verification cost). Tests install a
spy (``with audit.spy() as seen:``) and call :func:`check`, which raises :class:`LeakError`
naming every component that consumed a task outside the allowed (training) labels.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from collections.abc import Callable, Container, Iterable
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError

_listeners: list[Callable[[Record], None]] = []


class LeakError(TaskextrapError):
    """A fit consumed a held-out task, unlabelled data, or data its reported tasks do not generate."""


@dataclass(frozen=True)
class Source:
    """The tasks behind part of a batch.

    ``family(params, x)`` evaluates the tasks; ``checks`` are ``(i, j, atol)``: the batch's array
    ``j`` must equal ``family(params, batch[i])`` within ``atol`` (plus a relative 1e-6). Use
    ``atol=0`` for noise-free values and a few noise standard deviations for noisy contexts.
    """

    family: Any
    params: np.ndarray
    checks: tuple[tuple[int, int, float], ...] = ()


class Batch(tuple):
    """Arrays a fit consumes (a tuple), carrying the :class:`Source` tasks they were made from."""

    sources: tuple[Source, ...]

    def __new__(cls, arrays: Iterable, sources: Iterable[Source] = ()):
        obj = super().__new__(cls, tuple(arrays))
        obj.sources = tuple(sources)
        return obj


class Tagged(tuple):
    """A training item (e.g. a ``(prompt, completion)`` pair) that carries ``task``, the identity
    of the task it was drawn from (a parity mask, a CodeIO pair), for :func:`record_items`."""

    task: Any

    def __new__(cls, item: Iterable, task: Any):
        obj = super().__new__(cls, tuple(item))
        obj.task = task
        return obj

    def __getnewargs__(self):
        return tuple(self), self.task


class Record(tuple):
    """One report: unpacks as ``(component, params)``; also ``family``, ``stage`` and ``labels``.

    ``labels`` are the tasks' names the audit judges: ``family.task_labels(params)`` (a region,
    a ladder level, a family pair) or the identities given directly (fine-tuning items); None when
    the data carried no task identity.
    """

    component: str
    params: np.ndarray | None
    family: Any
    stage: str
    _labels: np.ndarray | None

    def __new__(cls, component: str, params, family=None, stage: str = "train", labels=None):
        obj = super().__new__(cls, (component, None if params is None else np.array(params, copy=True)))
        obj.component, obj.params, obj.family, obj.stage = component, obj[1], family, stage
        obj._labels = None if labels is None else np.asarray(labels, dtype=object)
        return obj

    @property
    def where(self) -> str:
        """``component (stage)`` for messages."""
        return f"{self.component} ({self.stage})"

    @property
    def labels(self) -> np.ndarray | None:
        """The label of every task behind the data (None when it carried no identity)."""
        if self._labels is not None:
            return self._labels
        if self.params is None or not hasattr(self.family, "task_labels"):
            return None
        return np.asarray(self.family.task_labels(self.params), dtype=object)


def listening() -> bool:
    """Whether a spy is installed (fits verify their batches only then)."""
    return bool(_listeners)


def _emit(record: Record) -> None:
    for listener in list(_listeners):
        listener(record)


def record_fit(component: str, params, family=None, stage: str = "train") -> None:
    """Report that ``component`` is fitted on tasks ``params`` of ``family`` (labels come from
    ``family.task_labels``). Call it only where the fit computes its data from these tasks itself."""
    if _listeners:
        _emit(Record(component, np.asarray(params), family, stage))


def record_tasks(component: str, tasks, stage: str = "train") -> None:
    """Report a fit that computes its data from the task set ``tasks`` (``.family``, ``.params``)."""
    record_fit(component, tasks.params, tasks.family, stage)


def record_items(component: str, items: Iterable, stage: str = "train") -> None:
    """Report the training items a fine-tuning step consumes, by the ``task`` each carries
    (None for an item without one, which :func:`check` rejects). A label that can tell from an
    item's text whether it made the item (a ``check_item(item)`` method, e.g. the examples a
    target's context items are built from, ``llm.geometry.TargetContext``) is verified, as
    :func:`consume` verifies arrays: an item its label does not make raises :class:`LeakError`."""
    if _listeners:
        items = list(items)
        tasks = [getattr(item, "task", None) for item in items]
        for item, task in zip(items, tasks, strict=True):
            made = getattr(task, "check_item", None)
            if made is not None and not made(item):
                raise LeakError(
                    f"leak audit: {component} ({stage}) consumed an item that its label does not make (label {task})"
                )
        labels = np.empty(len(tasks), dtype=object)
        labels[:] = tasks
        _emit(Record(component, None, None, stage, labels=labels))


def _verify(component: str, stage: str, batch: tuple, source: Source) -> None:
    for i, j, atol in source.checks:
        x, y = np.asarray(batch[i], dtype=float), np.asarray(batch[j], dtype=float)
        truth = np.asarray(source.family(np.asarray(source.params), x), dtype=float)
        err = np.abs(truth - y)
        if truth.shape != y.shape or not np.all(err <= atol + 1e-6 * (1.0 + np.abs(truth))):
            worst = float(np.max(err)) if truth.shape == y.shape else float("nan")
            raise LeakError(
                f"leak audit: {component} ({stage}) consumed arrays that its reported tasks do not "
                f"generate (array {j} vs family at array {i}: max error {worst:.3g}, allowed {atol:.3g})"
            )


def consume(component: str, batch: tuple, stage: str = "train") -> tuple:
    """Called by a fit where ``batch`` reaches its optimiser or PCA: while a spy listens, verify
    and report its sources (an unlabelled batch is reported as such). Returns the plain arrays."""
    if _listeners:
        sources = getattr(batch, "sources", ())
        if not sources:
            _emit(Record(component, None, None, stage))
        for source in sources:
            _verify(component, stage, batch, source)
            _emit(Record(component, source.params, source.family, stage))
    return tuple(batch)


@contextlib.contextmanager
def spy():
    """Collect a :class:`Record` for every report made inside the ``with`` block."""
    seen: list[Record] = []

    def listener(record: Record) -> None:
        seen.append(record)

    _listeners.append(listener)
    try:
        yield seen
    finally:
        _listeners.remove(listener)


def check(
    seen: Iterable[Record],
    allowed: Container | Callable[[Any], bool],
    labels: Callable[[np.ndarray], np.ndarray] | None = None,
    required: Iterable[str] = (),
) -> None:
    """Raise :class:`LeakError` (one line) unless every reported task is allowed.

    ``allowed`` is a container of training labels or a predicate on one label. ``labels``, when
    given, names the tasks from their parameters (e.g. the test's own ``family.region_of``)
    instead of the family each record carries. Records without a task identity fail, and so
    does a ``required`` component that never reported.
    """
    ok = allowed if callable(allowed) else (lambda lab: lab in allowed)
    seen = list(seen)
    problems = []
    for rec in seen:
        names = rec.labels if labels is None or rec.params is None else np.asarray(labels(rec.params), dtype=object)
        if names is None or any(n is None for n in names):
            problems.append(f"{rec.where}: data without task identity")
            continue
        bad = sorted({str(n) for n in names if not ok(n)})
        if bad:
            shown = ", ".join(bad[:4]) + (", ..." if len(bad) > 4 else "")
            problems.append(f"{rec.where}: {shown}")
    missing = sorted(set(required) - {rec.component for rec in seen})
    if missing:
        problems.append(f"never reported: {', '.join(missing)}")
    if problems:
        raise LeakError("leak audit failed: " + "; ".join(dict.fromkeys(problems)))
