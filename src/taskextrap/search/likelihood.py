"""Likelihood search over candidate decompositions (Algorithm 2, Phase 2; paper §2.5).

Each candidate (an anchor and a transformation: a parity parent and an added bit, or a pair of
string primitives) turns the target's support examples into leave-one-out (prompt, completion)
pairs; its score is the summed completion negative log-likelihood under the relationally
fine-tuned model. The arg-min wins. With a tie vote, every candidate within ``tie_tol`` nats of
the best one predicts and the predictions are put to a vote: a posterior average over
decompositions that explain the context equally well.

:func:`candidate_scores` scores the (task, candidate) pairs a chunk of tasks at a time: each
chunk's scores are saved as they finish, so an interrupted search resumes, and the chunks can
be split over several processes (:class:`~taskextrap.sharding.Shard`).

With ``keep_within`` the search is a branch and bound: a candidate's score is a sum of
leave-one-out NLLs, each **non-negative** (a negative one is refused in one line: it would make a
partial sum no lower bound), so the examples scored so far bound it from below. Every candidate's
first example is scored; a few candidates per task are then scored whole, which bounds the best
score from above; each further example is scored only for the candidates whose lower bound is
still within ``keep_within`` of the best complete score. A candidate left out scores ``inf`` (one
scored whole anyway keeps its score).

What is kept, exactly: if every pair's NLL were the same whatever batch it is scored in, the
arg-min, the tied set and their scores would be the full search's. A real model's NLL moves with
its batch (padding, kernel choice: up to about 6e-05 nats per pair on CPU, docs/performance.md),
and the bounded search scores pairs in other batches than the full one: its scores equal the
full search's up to that rounding, and a candidate whose score lies within that rounding of the
tie boundary (or of the best) can fall on either side. Pairs repeated across candidates are
scored once, so exact ties stay exact (and in enumeration order).

Different candidates often produce identical prompts (two parity parents with the same parity
on the five support rows, say); every distinct (prompt, completion) pair of a chunk is scored
once, in whichever stage of the bound first needs it, so candidates with identical prompts
keep identical scores (and exact ties their enumeration order); all tasks of a chunk go through
the scorer together so batches stay full.
"""

from __future__ import annotations

import functools
import hashlib
import io
import warnings
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.files import write_bytes_atomic
from taskextrap.llm.model import LanguageModel
from taskextrap.llm.scorer import completion_nll
from taskextrap.sharding import Shard, wait_for
from taskextrap.validation import check_real

Pair = tuple[str, str]
H = TypeVar("H", bound=Hashable)  # a prediction: an answer string, a label

DEFAULT_TIE_TOL = 0.5  # nats, summed over the support: far below one wrong label's cost (~ln 2 and up)


def total_nll(
    lm: LanguageModel,
    pair_lists: Sequence[Sequence[Pair]],
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    share_within_list: bool = False,
    prefix_keys: Sequence[Sequence[Hashable]] | None = None,
) -> np.ndarray:
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
    index: dict[tuple[str, ...], int] = {}
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
    nll = completion_nll(
        lm,
        [p for p, _ in unique],
        [c for _, c in unique],
        batch_size=batch_size,
        prefix_groups=group if share else None,
        progress=progress,
    )
    return np.array([nll[ids].sum() if ids else 0.0 for ids in owners])


def tied(scores: np.ndarray, tol: float = DEFAULT_TIE_TOL) -> np.ndarray:
    """Indices of the candidates within ``tol`` of the best score, best first (ties: enumeration order)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or len(scores) == 0:
        raise TaskextrapError("scores must be a non-empty 1-D array")
    check_real("tie_tol", tol, 0.0)
    keep = np.flatnonzero(scores <= scores.min() + tol)
    return keep[np.argsort(scores[keep], kind="stable")]


def vote(predictions: Sequence[H]) -> H:
    """The most common prediction; among equally common ones, the first seen (the best-scored)."""
    if not predictions:
        raise TaskextrapError("vote needs at least one prediction")
    counts = Counter(predictions)
    top = max(counts.values())
    return next(p for p in predictions if counts[p] == top)


def candidate_scores(
    lm: LanguageModel,
    tasks: Sequence,
    candidates: Sequence,
    loo_pairs: Callable[[object, object], list[Pair]],
    batch_size: int,
    cache_dir: Path | None = None,
    tasks_per_chunk: int | None = None,
    prefix_of: Callable[[object], Hashable] | None = None,
    shard: Shard = Shard(),
    progress: str | None = None,
    keep_within: float | None = None,
) -> np.ndarray | None:
    """Summed leave-one-out NLL of every (task, candidate): shape ``(len(tasks), len(candidates))``.

    ``loo_pairs(task, candidate)`` gives a candidate's (prompt, completion) pairs on a task's
    support, as many for every candidate. Tasks are scored ``tasks_per_chunk`` at a time
    (default: all at once), all their candidates in one :func:`total_nll` call per stage of the
    bound (one call without it); with ``cache_dir`` each chunk's scores are saved
    (``scores-<first task>.npy``, ``scores-<first task>-within<keep_within>.npy`` for a bounded
    search) and read back on a rerun (a full search's file answers a bounded one too).
    ``prefix_of(candidate)`` groups the prompts of one held-out example under candidates with an
    equal key, which run their common
    prefix once. Under a ``shard`` of several processes this one scores only its own chunks;
    the lead waits for the others' files and returns every score, any other process returns
    None. ``progress``: the label of a progress bar over the sequences (None: no bar).
    ``keep_within`` (nats; None: score everything): only the candidates that can be within this
    much of each task's best are scored exactly, the others are ``inf`` (the branch and bound of
    the module docstring); pass the tie tolerance, or 0 when only the arg-min matters. A NaN
    score is an error (it would bound nothing).
    """
    from tqdm import tqdm

    if keep_within is not None:
        check_real("keep_within", keep_within, 0.0)

    if shard.count > 1 and cache_dir is None:
        raise TaskextrapError("a sharded search needs a cache directory that every process shares")
    size = tasks_per_chunk or max(1, len(tasks))
    starts = range(0, len(tasks), size)
    n_loo = len(loo_pairs(tasks[0], candidates[0])) if len(tasks) and len(candidates) else 0
    mine = [k for i, k in enumerate(starts) if shard.owns(i)]
    n_mine = sum(len(tasks[k : k + size]) for k in mine)
    bar = tqdm(total=n_mine * len(candidates) * n_loo, desc=progress, unit="seq", disable=progress is None)
    score = _ChunkScorer(lm, candidates, loo_pairs, batch_size, prefix_of, n_loo, bar, keep_within)
    rows = {k: score(tasks[k : k + size], cache_dir, k) for k in mine}
    bar.close()
    if not shard.is_lead:
        return None
    for i, k in enumerate(starts):
        if k not in rows:
            shape, path = (len(tasks[k : k + size]), len(candidates)), _chunk_path(cache_dir, k, keep_within)
            rows[k] = wait_for(
                functools.partial(_saved_chunk, cache_dir, k, keep_within, shape),
                f"{path} (shard {i % shard.count}/{shard.count})",
            )
    return np.concatenate([rows[k] for k in starts]) if rows else np.zeros((0, len(candidates)))


class _ChunkScorer:
    """Scores one chunk of tasks (or reads its saved scores) and advances the progress bar."""

    def __init__(self, lm, candidates, loo_pairs, batch_size, prefix_of, n_loo, bar, keep_within=None):
        self.lm, self.candidates, self.loo_pairs, self.batch_size = lm, candidates, loo_pairs, batch_size
        self.prefix_of, self.n_loo, self.bar, self.keep_within = prefix_of, n_loo, bar, keep_within
        self.memo: dict[Pair, float] = {}

    def __call__(self, chunk, cache_dir: Path | None, start: int) -> np.ndarray:
        shape = (len(chunk), len(self.candidates))
        saved = _saved_chunk(cache_dir, start, self.keep_within, shape)
        if saved is not None:
            self.bar.update(shape[0] * shape[1] * self.n_loo)
            return saved
        pairs = [[self.loo_pairs(t, c) for c in self.candidates] for t in chunk]
        if any(len(p) != self.n_loo for row in pairs for p in row):
            raise TaskextrapError(f"loo_pairs must give every candidate the same number of pairs ({self.n_loo})")
        self.memo = {}  # every distinct pair of the chunk, scored once across the stages
        if self.keep_within is None or self.n_loo < 2:  # one example: nothing to bound
            scores = self._score(pairs, np.ones((*shape, self.n_loo), dtype=bool)).sum(2)
        else:
            scores = self._bounded(pairs, shape)
        path = _chunk_path(cache_dir, start, self.keep_within)
        if path is not None:
            _save_atomic(path, scores)
        return scores

    def _score(self, pairs, cells: np.ndarray, part: np.ndarray | None = None) -> np.ndarray:
        """NLL of the pairs ``pairs[t][c][j]`` where ``cells[t, c, j]``, written into ``part``
        (n_tasks, n_candidates, n_loo); the ones not yet scored in this chunk go through the scorer
        together."""
        part = np.zeros(cells.shape) if part is None else part
        where = np.argwhere(cells)
        new = [(t, c, j) for t, c, j in where if tuple(pairs[t][c][j]) not in self.memo]
        if new:
            self._score_new(pairs, new, cells.shape)
        if len(where):
            part[tuple(where.T)] = [self.memo[tuple(pairs[t][c][j])] for t, c, j in where]
        return part

    def _score_new(self, pairs, where: list[tuple[int, int, int]], shape: tuple[int, int, int]) -> None:
        """Score the pairs at ``where`` (their first places) in one :func:`total_nll` call, into the memo."""
        last = [0]

        def tick(done: int, _n: int) -> None:
            self.bar.update(done - last[0])
            last[0] = done

        lists = [[pairs[t][c][j]] for t, c, j in where]
        keys = None
        if self.prefix_of is not None:
            n_tasks, n_cands, n_loo = shape
            every = prefix_keys(n_tasks, self.candidates, n_loo, self.prefix_of)
            keys = [[every[t * n_cands + c][j]] for t, c, j in where]
        scores = total_nll(self.lm, lists, self.batch_size, progress=tick, prefix_keys=keys)
        if np.isnan(scores).any():  # checked before any bound reads it
            raise TaskextrapError("the scorer gave NaN for a leave-one-out pair: no score to rank candidates by")
        if self.keep_within is not None and (scores < 0).any():  # a partial sum would bound nothing
            raise TaskextrapError(
                f"the scorer gave a negative score ({scores.min():.3g}) for a leave-one-out pair: the bounded "
                "search needs non-negative NLLs (score every candidate: bounded=False / keep_within=None)"
            )
        self.memo.update(zip((tuple(p[0]) for p in lists), scores, strict=True))

    def _bounded(self, pairs, shape: tuple[int, int]) -> np.ndarray:
        """The branch and bound of the module docstring: exact scores of every candidate that can
        be within ``keep_within`` of its task's best, ``inf`` for the others."""
        n_loo = self.n_loo
        done = np.zeros((*shape, n_loo), dtype=bool)
        first = done.copy()
        first[:, :, 0] = True
        part = self._score(pairs, first)
        done |= first
        # a few candidates per task scored whole: the best of them bounds the task's best score
        lead = np.argsort(part[:, :, 0], axis=1, kind="stable")[:, :BOUND_LEAD]
        whole = np.zeros_like(done)
        np.put_along_axis(whole, lead[:, :, None].repeat(n_loo, 2), True, axis=1)
        whole &= ~done
        self._score(pairs, whole, part)
        done |= whole
        for j in range(1, n_loo):
            complete = done.all(2)
            best = np.where(complete, part.sum(2), np.inf).min(1)
            alive = ~done[:, :, j] & (part.sum(2) <= best[:, None] + self.keep_within)
            cells = np.zeros_like(done)
            cells[:, :, j] = alive
            self._score(pairs, cells, part)
            done |= cells
        self.bar.update(int((~done).sum()))  # the pruned sequences count as finished
        return np.where(done.all(2), part.sum(2), np.inf)


BOUND_LEAD = 4  # candidates per task scored whole first, in the order of their first example


def prefix_keys(n_tasks: int, candidates, n_loo: int, prefix_of: Callable[[object], Hashable]) -> list[list[tuple]]:
    """The scorer's prefix group of each leave-one-out pair (task-major, then candidate, then
    held-out example): (task, held-out example, ``prefix_of(candidate)``). The prompts of one
    held-out example under candidates with an equal key share their beginning; a candidate's
    own prompts do not (each omits another support example)."""
    first = [prefix_of(c) for c in candidates]
    return [[(t, i, f) for i in range(n_loo)] for t in range(n_tasks) for f in first]


def _chunk_path(cache_dir: Path | None, start: int, keep_within: float | None = None) -> Path | None:
    """Where the scores of the chunk of tasks that begins at task ``start`` are saved (a bounded
    search's, ``inf`` outside ``keep_within``, in a file of its own)."""
    if cache_dir is None:
        return None
    bound = "" if keep_within is None else f"-within{keep_within:g}"
    return Path(cache_dir) / f"scores-{start:04d}{bound}.npy"


def _saved_chunk(
    cache_dir: Path | None, start: int, keep_within: float | None, shape: tuple[int, int]
) -> np.ndarray | None:
    """A chunk's saved scores: the full search's file, or else the file of a search bounded by
    the same ``keep_within`` (full scores answer a bounded search too)."""
    bounds = [None] if keep_within is None else [None, keep_within]
    found = (_saved_scores(_chunk_path(cache_dir, start, b), shape) for b in bounds)
    return next((s for s in found if s is not None), None)


def _saved_scores(path: Path | None, shape: tuple[int, int]) -> np.ndarray | None:
    """The finished scores saved at ``path`` (None when absent or of another shape). A file that
    cannot be read, does not match the checksum saved beside it or holds a NaN is damaged: a
    one-line warning, and None, so the chunk is scored again and the file replaced."""
    if path is None or not path.exists():
        return None
    why = None
    try:
        data = path.read_bytes()
        digest = path.with_suffix(".sha256")
        if digest.exists() and digest.read_text().strip() != hashlib.sha256(data).hexdigest():
            why = "checksum mismatch (edited or damaged)"
        else:  # a file saved before the checksums existed is still read (np.save wrote it atomically)
            saved = np.load(io.BytesIO(data), allow_pickle=False)
            if saved.dtype.kind != "f" or saved.ndim != 2 or np.isnan(saved).any():
                why = "not a table of scores"
    except (OSError, ValueError, EOFError) as exc:
        why = f"unreadable: {type(exc).__name__}"
    if why is not None:
        warnings.warn(
            f"search scores {path} are damaged ({why}); scoring that chunk again", TaskextrapWarning, stacklevel=2
        )
        return None
    return saved if saved.shape == shape else None


def _save_atomic(path: Path, array: np.ndarray) -> None:
    """np.save written atomically (``files.write_bytes_atomic``): a crash never leaves half a file."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    data = buf.getvalue()
    write_bytes_atomic(path, data)
    # The checksum goes beside the scores, written second: a crash between the two writes leaves an
    # intact file without a checksum, which is read like the files saved before checksums existed.
    write_bytes_atomic(path.with_suffix(".sha256"), hashlib.sha256(data).hexdigest().encode())
