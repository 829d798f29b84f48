"""Sparse parity for the language-model experiment (paper Section 4.1; reference section 10).

n = 8 uniform random bits; the label of a task with mask S is the XOR of the bits in S (bit i of
the mask <-> position i of the printed vector). Training library = all 210 masks of size 2..5;
test = all 28 masks of size 6. The relational view: f_{P xor {b}}(x) = f_P(x) xor x_b, so a size-6
task is a size-5 parent plus one added bit. The harness computes the parent's parity ("Anchor")
and the added bit ("Bit") exactly; the model's only job in the extender prompt is their XOR.

Splits (DESIGN.md "Splits"): ``test`` trains on sizes 2-5 and holds out the 28 size-6 masks;
``dev`` trains on sizes 2-4 only and holds out the 56 size-5 masks, a pseudo-extrapolation of
the same shape inside the test split's training library. Every sampler, candidate space and
task maker takes ``split``; a training sampler refuses any mask outside its split's training
sizes, and every item it returns carries its mask (see below), so the leak audit shows that no
held-out size reaches a fit.

Candidate spaces (``SPACES``; sizes below for test, dev one level down), each with what it assumes:

- ``authors``: every mask of the frontier size (5) x every bit 0..7 = 448 candidates, the space
  of the authors' code (reference 10.4); a candidate implies a size-6 or a size-4 mask;
- ``frontier``: every size-5 parent x a bit it lacks = 168, all implying size 6: assumes the
  target lies one step beyond the training frontier (the length regime's assumption);
- ``all``: every training mask x every bit = 1680, the paper's wording.

Pure Python / numpy: no language model here. ``exact_search`` is the LLM-free search (a candidate
is kept when its implied parity fits every support label), the reference point that any
language-model search must beat to show it adds something (reference 10.6). Every training item
carries its task's mask as ``.task`` (``audit.Tagged``); fine-tuning reports it to the leak audit.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from taskextrap.audit import Tagged
from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng

N_BITS = 8
TRAIN_SIZES = (2, 3, 4, 5)
TEST_SIZE = 6
INSTRUCTION = "Instruction: Compute the Output.\n###\n"

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


SPLITS: dict[str, ParitySplit] = {"test": _make_split("test", TRAIN_SIZES, TEST_SIZE),
                                  "dev": _make_split("dev", (2, 3, 4), 5)}
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


def sample_training_task(g: np.random.Generator, mask=None, n_support: int = 5,
                         n_query: int = 1, split: str = "test") -> ParityTask:
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


# ---------------------------------------------------------------------------------- prompts


def format_bits(row) -> str:
    """A vector printed as the prompts show it: "b0 b1 ... b7"."""
    return " ".join(str(int(b)) for b in np.asarray(row).ravel())


def label_completion(y) -> str:
    """The completion for label y: " 0" or " 1"."""
    return f" {int(y)}"


def parse_label(text: str) -> int | None:
    """The first "0"/"1" character of a generated text (the authors' rule), None if absent."""
    for ch in text or "":
        if ch in "01":
            return int(ch)
    return None


def baseline_prompt(support_x, support_y, query_x) -> str:
    """Plain prompt: instruction, "In: bits\\nOut: y\\n\\n" per shot, then "In: <query>\\nOut:"."""
    shots = "".join(f"In: {format_bits(x)}\nOut: {int(y)}\n\n"
                    for x, y in zip(support_x, support_y))
    return f"{INSTRUCTION}{shots}In: {format_bits(query_x)}\nOut:"


def extender_prompt(support_x, support_y, query_x, parent_mask, bit: int) -> str:
    """Relational prompt: each row shows In, Anchor (parent parity), Bit (x_bit) and Out.

    The query shows In/Anchor/Bit and ends with "Out:"; the answer is Anchor XOR Bit.
    """
    _check_bit(bit)
    rows = np.concatenate([np.atleast_2d(support_x), np.atleast_2d(query_x)]).astype(np.int64)
    anchors, bits = parity(parent_mask, rows), rows[:, bit]
    lines = [f"In: {format_bits(x)}\nAnchor: {a}\nBit: {b}\n"
             for x, a, b in zip(rows, anchors, bits)]
    shots = "".join(f"{line}Out: {int(y)}\n\n" for line, y in zip(lines[:-1], support_y))
    return f"{INSTRUCTION}{shots}{lines[-1]}Out:"


def _check_bit(bit: int) -> None:
    if not 0 <= int(bit) < N_BITS:
        raise TaskextrapError(f"bit must lie in 0..{N_BITS - 1}, got {bit}")


# ---------------------------------------------------------------------- training samplers


def baseline_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[tuple[str, str]]:
    """n (prompt, completion) pairs: a random training mask of ``split``, 5 support + 1 query fresh vectors.

    Every pair carries its mask as ``.task`` (:class:`taskextrap.audit.Tagged`) for the leak audit.
    """
    out = []
    for _ in range(n):
        t = sample_training_task(g, split=split)
        out.append(Tagged((baseline_prompt(t.support_x, t.support_y, t.query_x[0]),
                           label_completion(t.query_y[0])), t.mask))
    return out


def _extender_draw(g: np.random.Generator, n_shots: int, split: str = "test"):
    """A random training task split into (parent, bit), with ``n_shots`` support rows and one query.

    The parent is the task's mask minus one random bit (size 1..4; 1..3 under dev; parents need
    not be library tasks in training). The target mask itself is always a training mask.
    """
    t = sample_training_task(g, n_support=max(n_shots, 1), split=split)
    bit = t.mask[int(g.integers(len(t.mask)))]
    parent = tuple(b for b in t.mask if b != bit)
    return t, parent, bit


def extender_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[tuple[str, str]]:
    """n extender (prompt, completion) pairs on random training tasks of ``split``: 5 shots + 1
    query; each carries its (target) mask as ``.task``."""
    out = []
    for _ in range(n):
        t, parent, bit = _extender_draw(g, 5, split)
        out.append(Tagged((extender_prompt(t.support_x, t.support_y, t.query_x[0], parent, bit),
                           label_completion(t.query_y[0])), t.mask))
    return out


# Auxiliary queries of the pretraining curriculum: the query row ends with one of these keys
# instead of "Out:" and the answer is that row's Anchor, its Bit, or their XOR. All keys have
# the length of "Out:", so the answer always sits at the same offset from the row's values.
AUX_KEYS = ("CpA:", "CpB:")


def _keyed_pair(g: np.random.Generator, n_shots: int, instruction: bool,
                split: str = "test") -> tuple[str, int, Mask]:
    """An extender prompt whose query key is "Out:", "CpA:" or "CpB:" (one third each), its answer
    and the task's mask."""
    t, parent, bit = _extender_draw(g, n_shots, split)
    prompt = extender_prompt(t.support_x[:n_shots], t.support_y[:n_shots], t.query_x[0], parent, bit)
    anchor, value = int(parity(parent, t.query_x[0])[0]), int(t.query_x[0][bit])
    key = ("Out:", *AUX_KEYS)[int(g.integers(3))]
    answer = {"Out:": anchor ^ value, "CpA:": anchor, "CpB:": value}[key]
    if not instruction:
        prompt = prompt[len(INSTRUCTION):]
    return prompt[: -len("Out:")] + key, answer, t.mask


def row_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[tuple[str, str]]:
    """Curriculum stage 1 of the default model: one extender row, no instruction, no shots.

    The query key asks for the XOR ("Out:") or for one of its inputs ("CpA:" copies the Anchor,
    "CpB:" the Bit). Copying teaches the attention where the two values sit; with those in
    place the XOR is a small step, while XOR alone from scratch sits on a long ln 2 plateau
    (measured: 0.5 accuracy after 1,500 steps). The loss is on the answer digit only: the space
    is part of the prompt, so nothing easier competes with it. Measured on seeds 0-2 at lr 6e-4:
    every seed leaves the plateau within 1,200 steps; at lr 3e-3 most never do.
    """
    out = []
    for _ in range(n):
        prompt, answer, mask = _keyed_pair(g, 0, instruction=False, split=split)
        out.append(Tagged((prompt + " ", str(answer)), mask))
    return out


def pretraining_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[tuple[str, str]]:
    """Curriculum stage 2 (the full prompt format), training masks of ``split`` only (``llm.pretrain``).

    Half plain few-shot pairs (5 shots + query), half keyed extender prompts with the
    instruction and 0..5 shots; completions " 0" / " 1" as the scorer reads them.
    """
    out = []
    for _ in range(n):
        if g.random() < 0.5:
            out += baseline_pairs(g, 1, split)
        else:
            prompt, answer, mask = _keyed_pair(g, int(g.integers(0, 6)), instruction=True, split=split)
            out.append(Tagged((prompt, label_completion(answer)), mask))
    return out


def label_accuracy(lm, pairs: list[tuple[str, str]], batch_size: int = 64) -> float:
    """Share of (prompt, " y") pairs where the model gives " y" a lower NLL than the other label."""
    from taskextrap.llm.scorer import completion_nll

    prompts = [p for p, _ in pairs]
    nll = {y: completion_nll(lm, prompts, [label_completion(y)] * len(prompts), batch_size) for y in (0, 1)}
    truth = np.array([int(c.strip()) for _, c in pairs])
    return float(np.mean(np.where(nll[1] < nll[0], 1, 0) == truth))


def pretraining_check(lm, split: str = "test") -> dict[str, float]:
    """What the default model must execute, measured on fresh training-mask prompts (500 each).

    ``extender_accuracy`` (Anchor XOR Bit with 5 shots) must be near 1; ``baseline_accuracy``
    (plain few-shot) is near 0.5, since 5 shots cannot identify a mask.
    """
    g = rng(0, "parity", "pretraining-check")
    return {"extender_accuracy": label_accuracy(lm, extender_pairs(g, 500, split)),
            "baseline_accuracy": label_accuracy(lm, baseline_pairs(g, 500, split))}


# The dev base model's corpora and check (``llm.pretrain`` names corpora "module:function").
def dev_row_pairs(g: np.random.Generator, n: int) -> list[tuple[str, str]]:
    """:func:`row_pairs` on the dev split's training masks (sizes 2-4)."""
    return row_pairs(g, n, "dev")


def dev_pretraining_pairs(g: np.random.Generator, n: int) -> list[tuple[str, str]]:
    """:func:`pretraining_pairs` on the dev split's training masks (sizes 2-4)."""
    return pretraining_pairs(g, n, "dev")


def dev_pretraining_check(lm) -> dict[str, float]:
    """:func:`pretraining_check` on dev training masks."""
    return pretraining_check(lm, "dev")


# ---------------------------------------------------------------------------------- search


def implied_mask(parent, bit: int) -> Mask:
    """The target a candidate (parent, bit) implies: parent XOR {bit} (adds or removes the bit)."""
    _check_bit(bit)
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


def loo_pairs(task: ParityTask, parent, bit: int) -> list[tuple[str, str]]:
    """Leave-one-out scoring pairs of one candidate: support i as query, the others as shots."""
    n = len(task.support_x)
    out = []
    for i in range(n):
        keep = [j for j in range(n) if j != i]
        prompt = extender_prompt(task.support_x[keep], task.support_y[keep], task.support_x[i],
                                 parent, bit)
        out.append((prompt, label_completion(task.support_y[i])))
    return out


@functools.lru_cache(maxsize=None)
def _implied_matrix(space: str, split: str) -> np.ndarray:
    # One 0/1 row per candidate of the space: the implied mask as an indicator over the 8 bits.
    m = np.stack([mask_indicator(implied_mask(parent, bit)) for parent, bit in candidates(space, split)])
    m.flags.writeable = False
    return m


def consistent_candidates(task: ParityTask, space: str, split: str = "test") -> list[Candidate]:
    """The candidates whose implied parity matches every support label, in enumeration order."""
    split = get_split(split).name
    fits = _support_errors(task, _implied_matrix(space, split)) == 0
    return [c for c, ok in zip(candidates(space, split), fits) if ok]


def _support_errors(task: ParityTask, implied: np.ndarray) -> np.ndarray:
    pred = np.asarray(task.support_x, dtype=np.int64) @ implied.T % 2
    return (pred != np.asarray(task.support_y)[:, None]).sum(axis=0)


def exact_search(task: ParityTask, space: str, tie_vote: bool = False,
                 split: str = "test") -> tuple[np.ndarray, int]:
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
