"""The E-step of relational fine-tuning without meta-labels, for language models (paper App. B.2).

For each training task whose decomposition is hidden, every candidate is scored by the current
model's leave-one-out NLL of the task's support examples, with the prompts of the test-time
search (:class:`~taskextrap.estimators.sequence.TaskAdapter`'s ``loo_pairs``), and the arg-min
becomes the task's pseudo-label. The M-step is the experiment's fine-tuning on prompts built from
the pseudo-labels (``llm.codeio_em`` for CodeIO). Only support examples of training tasks are
scored; each call reports those tasks to the leak audit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from taskextrap import audit
from taskextrap.errors import TaskextrapError

if TYPE_CHECKING:
    from taskextrap.estimators.sequence import TaskAdapter


@dataclass(frozen=True)
class EStepAdapter:
    """The E-step's view of a task adapter: the leave-one-out pairs of the last ``n_loo`` support
    examples only (the search holds out every one), and the adapter's prefix groups."""

    adapter: TaskAdapter
    n_loo: int = 1

    def loo_pairs(self, task, candidate) -> list[tuple[str, str]]:
        """The held-out-example prompts of ``candidate`` on ``task``'s support, last ``n_loo`` only."""
        return self.adapter.loo_pairs(task, candidate)[-self.n_loo :]

    def prefix_of(self, candidate):
        """Candidates with an equal key share their prompts' beginning (None: no sharing)."""
        prefix = getattr(self.adapter, "prefix_of", None)
        return None if prefix is None else prefix(candidate)


def e_step(
    lm,
    tasks,
    adapter,
    candidates,
    n_loo: int,
    batch_size: int,
    cache_dir: Path | None = None,
    progress: str | None = None,
) -> tuple[list, np.ndarray]:
    """(pseudo-label of each task, scores (n_tasks, n_candidates)): the arg-min over ``candidates``
    of the current model's summed leave-one-out NLL of each task's support (ties: enumeration order).

    ``tasks`` carry ``.support`` and ``.pair`` (the hidden label, read only by the leak audit);
    ``cache_dir`` keeps the scores, so a rerun reads them."""
    from taskextrap.search.likelihood import candidate_scores

    audit.record_items("e-step", [audit.Tagged((), t.pair) for t in tasks])  # whose support it scores
    if not tasks or not 1 <= n_loo <= min(len(t.support) for t in tasks):
        raise TaskextrapError(f"need at least one task and n_loo in [1, support size], got {n_loo}")
    view = EStepAdapter(adapter, n_loo)
    scores = candidate_scores(
        lm, tasks, list(candidates), view.loo_pairs, batch_size, cache_dir, None, view.prefix_of, progress=progress
    )
    assert scores is not None  # an unsharded search always returns them
    return [candidates[int(j)] for j in np.argmin(scores, axis=1)], scores
