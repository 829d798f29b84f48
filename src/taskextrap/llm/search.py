"""Likelihood search over candidate decompositions (Algorithm 2, Phase 2; paper §2.5).

Each candidate (an anchor and a transformation: a parity parent and an added bit, or a pair of
string primitives) turns the target's support examples into leave-one-out (prompt, completion)
pairs; its score is the summed completion negative log-likelihood under the relationally
fine-tuned model. The arg-min wins. With a tie vote, every candidate within ``tie_tol`` nats of
the best one predicts and the predictions are put to a vote: a posterior average over
decompositions that explain the context equally well.

Different candidates often produce identical prompts (two parity parents with the same parity
on the five support rows, say); every distinct (prompt, completion) pair is scored once, and
all tasks go through the scorer together so batches stay full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.llm.model import LanguageModel
from taskextrap.llm.scorer import completion_nll

Pair = tuple[str, str]

DEFAULT_TIE_TOL = 0.5  # nats, summed over the support: far below one wrong label's cost (~ln 2 and up)


def total_nll(lm: LanguageModel, pair_lists: Sequence[Sequence[Pair]], batch_size: int = 32,
              progress: Callable[[int, int], None] | None = None, share_within_list: bool = False,
              prefix_keys: Sequence[Sequence[Hashable]] | None = None) -> np.ndarray:
    """Summed completion NLL of each list of (prompt, completion) pairs, shape ``(len(pair_lists),)``.

    Identical pairs, within a list or across lists, are scored once. With ``share_within_list``
    the prompts of one list run their common prefix once (``completion_nll``'s
    ``prefix_groups``). ``prefix_keys`` (one key per pair, lists shaped as ``pair_lists``)
    groups pairs across lists instead: pairs with an equal key run their common prefix once
    (e.g. the prompts of every candidate whose first reference block is the same); a pair
    scored in several places takes the key of its first place.
    """
    if prefix_keys is not None and [len(k) for k in prefix_keys] != [len(p) for p in pair_lists]:
        raise TaskextrapError("prefix_keys must hold one key per pair, shaped as pair_lists")
    index: dict[Pair, int] = {}
    group: list[Hashable] = []  # the prefix group of each distinct pair
    owners = []
    for k, pairs in enumerate(pair_lists):
        ids = []
        for j, p in enumerate(pairs):
            key = tuple(p)
            if key not in index:
                index[key] = len(index)
                group.append(k if prefix_keys is None else prefix_keys[k][j])
            ids.append(index[key])
        owners.append(ids)
    if not index:
        return np.zeros(len(pair_lists))
    unique = list(index)
    share = share_within_list or prefix_keys is not None
    nll = completion_nll(lm, [p for p, _ in unique], [c for _, c in unique], batch_size=batch_size,
                         prefix_groups=group if share else None, progress=progress)
    return np.array([nll[ids].sum() if ids else 0.0 for ids in owners])


def tied(scores: np.ndarray, tol: float = DEFAULT_TIE_TOL) -> np.ndarray:
    """Indices of the candidates within ``tol`` of the best score, best first (ties: enumeration order)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or len(scores) == 0:
        raise TaskextrapError("scores must be a non-empty 1-D array")
    if tol < 0:
        raise TaskextrapError(f"tie_tol must be >= 0, got {tol}")
    keep = np.flatnonzero(scores <= scores.min() + tol)
    return keep[np.argsort(scores[keep], kind="stable")]


def vote(predictions: Sequence[Hashable]) -> Hashable:
    """The most common prediction; among equally common ones, the first seen (the best-scored)."""
    if not predictions:
        raise TaskextrapError("vote needs at least one prediction")
    counts = Counter(predictions)
    top = max(counts.values())
    return next(p for p in predictions if counts[p] == top)
