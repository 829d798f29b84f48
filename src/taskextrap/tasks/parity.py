"""Sparse parity tasks (paper Section 4.1; reference section 10): masks, splits, tasks, the
candidate spaces of the relational search and the LLM-free exact search. No language model here:
the prompts and training corpora built on these tasks are in :mod:`taskextrap.llm.parity`.

n = 8 uniform random bits; the label of a task with mask S is the XOR of the bits in S (bit i of
the mask <-> position i of the printed vector). Training library = all 210 masks of size 2..5;
test = all 28 masks of size 6. The relational view: f_{P xor {b}}(x) = f_P(x) xor x_b, so a size-6
task is a size-5 parent plus one added bit.

Splits (DESIGN.md "Splits"): ``test`` trains on sizes 2-5 and holds out the 28 size-6 masks;
``dev`` trains on sizes 2-4 only and holds out the 56 size-5 masks, a pseudo-extrapolation of
the same shape inside the test split's training library. A training sampler refuses any mask
outside its split's training sizes.

Candidate spaces (``SPACES``; sizes below for test, dev one level down), each with what it assumes:

- ``authors``: every mask of the frontier size (5) x every bit 0..7 = 448 candidates, the space
  of the authors' code (reference 10.4); a candidate implies a size-6 or a size-4 mask;
- ``frontier``: every size-5 parent x a bit it lacks = 168, all implying size 6: assumes the
  target lies one step beyond the training frontier (the length regime's assumption);
- ``all``: every training mask x every bit = 1680, the paper's wording.

``exact_search`` is the LLM-free search (a candidate is kept when its implied parity fits every
support label), the reference point that any language-model search must beat to show it adds
something (reference 10.6).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng

N_BITS = 8
TRAIN_SIZES = (2, 3, 4, 5)
TEST_SIZE = 6

Mask = tuple[int, ...]
Candidate = tuple[Mask, int]


def _masks_of_size(k: int) -> tuple[Mask, ...]:
    return tuple(itertools.combinations(range(N_BITS), k))


@dataclass(frozen=True)
class ParitySplit:
    """A split: the mask sizes that train (every mask of those sizes) and the held-out target size.

    The frontier is the largest training size; every candidate space is built from it.
    """

    name: str
    train_sizes: tuple[int, ...]
    target_size: int
    train_masks: tuple[Mask, ...]
    target_masks: tuple[Mask, ...]

    @property
    def frontier_size(self) -> int:
        """The largest training mask size (the parents of the authors / frontier spaces)."""
        return max(self.train_sizes)


def _make_split(name: str, train_sizes: tuple[int, ...], target_size: int) -> ParitySplit:
    train = tuple(m for k in train_sizes for m in _masks_of_size(k))
    return ParitySplit(name, train_sizes, target_size, train, _masks_of_size(target_size))


SPLITS: dict[str, ParitySplit] = {
    "test": _make_split("test", TRAIN_SIZES, TEST_SIZE),
    "dev": _make_split("dev", (2, 3, 4), 5),
}
TRAIN_MASKS: tuple[Mask, ...] = SPLITS["test"].train_masks
TEST_MASKS: tuple[Mask, ...] = SPLITS["test"].target_masks


def get_split(split: str | ParitySplit) -> ParitySplit:
    """The split named ``split`` ("test" or "dev"); a ParitySplit is returned as it is."""
    if isinstance(split, ParitySplit):
        return split
    if split not in SPLITS:
        raise TaskextrapError(f"unknown parity split {split!r}; choose from {', '.join(SPLITS)}")
    return SPLITS[split]


def as_mask(bits) -> Mask:
    """A mask as a sorted tuple of distinct bit positions in 0..7 (accepts any iterable)."""
    out = tuple(sorted({int(b) for b in bits}))
    if out and (out[0] < 0 or out[-1] >= N_BITS):
        raise TaskextrapError(f"mask bits must lie in 0..{N_BITS - 1}, got {out}")
    return out


def parity(mask, x) -> np.ndarray:
    """Labels (n,) of mask on inputs x (n, 8) or (8,): XOR of the masked bits (empty mask -> 0)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.int64))
    cols = list(as_mask(mask))
    return x[:, cols].sum(axis=1) % 2 if cols else np.zeros(len(x), dtype=np.int64)


@dataclass(frozen=True)
class ParityTask:
    """One parity task: its hidden mask, a support set and queries (x rows are 0/1 vectors)."""

    mask: Mask
    support_x: np.ndarray
    support_y: np.ndarray
    query_x: np.ndarray
    query_y: np.ndarray


def _draw_task(g: np.random.Generator, mask: Mask, n_support: int, n_query: int) -> ParityTask:
    # i.i.d. uniform vectors, as the authors drew them (duplicates allowed).
    x = g.integers(0, 2, size=(n_support + n_query, N_BITS))
    y = parity(mask, x)
    return ParityTask(mask, x[:n_support], y[:n_support], x[n_support:], y[n_support:])


def _check_counts(n_support: int, n_query: int) -> None:
    if n_support < 1 or n_query < 1:
        raise TaskextrapError(f"n_support and n_query must be >= 1, got {n_support}, {n_query}")


def make_test_tasks(seed: int, n_support: int = 5, n_query: int = 10, split: str = "test") -> list[ParityTask]:
    """The held-out tasks of ``split`` in mask order (test: the 28 size-6 masks; dev: the 56
    size-5 masks); each mask has its own stream under ``seed`` and the split's name."""
    _check_counts(n_support, n_query)
    sp = get_split(split)
    return [_draw_task(rng(seed, "parity", sp.name, *m), m, n_support, n_query) for m in sp.target_masks]


def mask_indicator(mask) -> np.ndarray:
    """A mask as a 0/1 vector over the 8 bits."""
    out = np.zeros(N_BITS, dtype=np.int64)
    out[list(as_mask(mask))] = 1
    return out


def sample_training_task(
    g: np.random.Generator, mask=None, n_support: int = 5, n_query: int = 1, split: str = "test"
) -> ParityTask:
    """A training task of ``split``: mask (random from its training masks if None), fresh vectors from g."""
    _check_counts(n_support, n_query)
    sp = get_split(split)
    if mask is None:
        mask = sp.train_masks[int(g.integers(len(sp.train_masks)))]
    mask = as_mask(mask)
    if len(mask) not in sp.train_sizes:
        # The guard that keeps held-out masks (size 6; size 5 and 6 under dev) out of every training sampler.
        raise TaskextrapError(f"mask {mask} is not a {sp.name} training mask (sizes {sp.train_sizes})")
    return _draw_task(g, mask, n_support, n_query)


def check_bit(bit: int) -> None:
    """A one-line error unless ``bit`` is a position 0..7."""
    if not 0 <= int(bit) < N_BITS:
        raise TaskextrapError(f"bit must lie in 0..{N_BITS - 1}, got {bit}")


# ------------------------------------------------------------------- candidates and exact search


def implied_mask(parent, bit: int) -> Mask:
    """The target a candidate (parent, bit) implies: parent XOR {bit} (adds or removes the bit)."""
    check_bit(bit)
    return as_mask(set(as_mask(parent)) ^ {int(bit)})


SPACES = ("authors", "frontier", "all")
# What each candidate space assumes (recorded in results.json).
SPACE_ASSUMPTIONS = {
    "authors": "the authors' code's space (reference 10.4): every frontier-size mask x every bit 0-7; "
    "implies masks one size above or below the frontier",
    "frontier": "the target lies one step beyond the training frontier (the length regime's assumption): "
    "every frontier-size mask x every bit it lacks",
    "all": "every training mask x every bit 0-7 (the paper's wording)",
}


def candidates(space: str, split: str = "test") -> list[Candidate]:
    """Search candidates (parent_mask, bit) of ``space`` under ``split``, in a fixed enumeration order.

    Under test (frontier size 5): "authors" = every size-5 mask x every bit 0..7 (448; implies
    size 6 or 4); "frontier" = every size-5 mask x every bit outside it (168, all imply size 6);
    "all" = every training mask x every bit 0..7 (1680). Under dev the same one level down
    (560, 280 and 1232 candidates).
    """
    sp = get_split(split)
    top = _masks_of_size(sp.frontier_size)
    if space == "authors":
        return [(m, b) for m in top for b in range(N_BITS)]
    if space == "frontier":
        return [(m, b) for m in top for b in range(N_BITS) if b not in m]
    if space == "all":
        return [(m, b) for m in sp.train_masks for b in range(N_BITS)]
    raise TaskextrapError(f"unknown candidate space {space!r}; choose from {', '.join(SPACES)}")


def oracle_parent(mask) -> Candidate:
    """The oracle decomposition: (mask minus its lowest set bit, that bit)."""
    mask = as_mask(mask)
    if not mask:
        raise TaskextrapError("the empty mask has no parent")
    return mask[1:], mask[0]


@functools.cache
def _implied_matrix(space: str, split: str) -> np.ndarray:
    # One 0/1 row per candidate of the space: the implied mask as an indicator over the 8 bits.
    m = np.stack([mask_indicator(implied_mask(parent, bit)) for parent, bit in candidates(space, split)])
    m.flags.writeable = False
    return m


def consistent_candidates(task: ParityTask, space: str, split: str = "test") -> list[Candidate]:
    """The candidates whose implied parity matches every support label, in enumeration order."""
    split = get_split(split).name
    fits = _support_errors(task, _implied_matrix(space, split)) == 0
    return [c for c, ok in zip(candidates(space, split), fits, strict=True) if ok]


def _support_errors(task: ParityTask, implied: np.ndarray) -> np.ndarray:
    pred = np.asarray(task.support_x, dtype=np.int64) @ implied.T % 2
    return (pred != np.asarray(task.support_y)[:, None]).sum(axis=0)


def exact_search(task: ParityTask, space: str, tie_vote: bool = False, split: str = "test") -> tuple[np.ndarray, int]:
    """LLM-free search: (query predictions, number of consistent candidates).

    Predicts with the first consistent candidate in enumeration order or, with tie_vote, the
    per-query majority over all consistent candidates (an exact tie takes the first consistent
    candidate's prediction). With no consistent candidate the one with the fewest support errors
    (first on ties) predicts and the count is 0.
    """
    implied = _implied_matrix(space, get_split(split).name)
    errors = _support_errors(task, implied)
    preds = np.asarray(task.query_x, dtype=np.int64) @ implied.T % 2  # (n_query, n_candidates)
    ok = np.flatnonzero(errors == 0)
    if len(ok) == 0:
        return preds[:, int(np.argmin(errors))], 0
    first = preds[:, ok[0]]
    if not tie_vote:
        return first, len(ok)
    ones = preds[:, ok].sum(axis=1)
    vote = np.where(2 * ones > len(ok), 1, 0)
    return np.where(2 * ones == len(ok), first, vote), len(ok)
