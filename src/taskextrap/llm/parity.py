"""Prompts and training corpora of the sparse-parity language-model experiment (paper Section
4.1; reference section 10), on the tasks of :mod:`taskextrap.tasks.parity`.

The harness computes a candidate parent's parity ("Anchor") and the added bit ("Bit") exactly;
the model's only job in the extender prompt is their XOR. Every training item carries its task's
mask as ``.task`` (``audit.Tagged``); fine-tuning reports it to the leak audit, so no held-out
size reaches a fit. The pretraining corpora are named by the shipped models' pretraining.json
(``taskextrap.llm.parity:row_pairs`` ...), so they stay here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from taskextrap.audit import Tagged
from taskextrap.seeding import rng
from taskextrap.tasks.parity import Mask, ParityTask, check_bit, parity, sample_training_task

INSTRUCTION = "Instruction: Compute the Output.\n###\n"
LABEL_TOKENS = 3  # new tokens a label is read from (" 0" / " 1" and a newline)

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
    shots = "".join(f"In: {format_bits(x)}\nOut: {int(y)}\n\n" for x, y in zip(support_x, support_y, strict=True))
    return f"{INSTRUCTION}{shots}In: {format_bits(query_x)}\nOut:"


def extender_prompt(support_x, support_y, query_x, parent_mask, bit: int) -> str:
    """Relational prompt: each row shows In, Anchor (parent parity), Bit (x_bit) and Out.

    The query shows In/Anchor/Bit and ends with "Out:"; the answer is Anchor XOR Bit.
    """
    check_bit(bit)
    rows = np.concatenate([np.atleast_2d(support_x), np.atleast_2d(query_x)]).astype(np.int64)
    anchors, bits = parity(parent_mask, rows), rows[:, bit]
    lines = [f"In: {format_bits(x)}\nAnchor: {a}\nBit: {b}\n" for x, a, b in zip(rows, anchors, bits, strict=True)]
    shots = "".join(f"{line}Out: {int(y)}\n\n" for line, y in zip(lines[:-1], support_y, strict=True))
    return f"{INSTRUCTION}{shots}{lines[-1]}Out:"


# ---------------------------------------------------------------------- training samplers


def baseline_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[Tagged]:
    """n (prompt, completion) pairs: a random training mask of ``split``, 5 support + 1 query fresh vectors.

    Every pair carries its mask as ``.task`` (:class:`taskextrap.audit.Tagged`) for the leak audit.
    """
    out = []
    for _ in range(n):
        t = sample_training_task(g, split=split)
        out.append(
            Tagged((baseline_prompt(t.support_x, t.support_y, t.query_x[0]), label_completion(t.query_y[0])), t.mask)
        )
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


def extender_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[Tagged]:
    """n extender (prompt, completion) pairs on random training tasks of ``split``: 5 shots + 1
    query; each carries its (target) mask as ``.task``."""
    out = []
    for _ in range(n):
        t, parent, bit = _extender_draw(g, 5, split)
        out.append(
            Tagged(
                (extender_prompt(t.support_x, t.support_y, t.query_x[0], parent, bit), label_completion(t.query_y[0])),
                t.mask,
            )
        )
    return out


# Auxiliary queries of the pretraining curriculum: the query row ends with one of these keys
# instead of "Out:" and the answer is that row's Anchor, its Bit, or their XOR. All keys have
# the length of "Out:", so the answer always sits at the same offset from the row's values.
AUX_KEYS = ("CpA:", "CpB:")


def _keyed_pair(g: np.random.Generator, n_shots: int, instruction: bool, split: str = "test") -> tuple[str, int, Mask]:
    """An extender prompt whose query key is "Out:", "CpA:" or "CpB:" (one third each), its answer
    and the task's mask."""
    t, parent, bit = _extender_draw(g, n_shots, split)
    prompt = extender_prompt(t.support_x[:n_shots], t.support_y[:n_shots], t.query_x[0], parent, bit)
    anchor, value = int(parity(parent, t.query_x[0])[0]), int(t.query_x[0][bit])
    key = ("Out:", *AUX_KEYS)[int(g.integers(3))]
    answer = {"Out:": anchor ^ value, "CpA:": anchor, "CpB:": value}[key]
    if not instruction:
        prompt = prompt[len(INSTRUCTION) :]
    return prompt[: -len("Out:")] + key, answer, t.mask


def row_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[Tagged]:
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


def pretraining_pairs(g: np.random.Generator, n: int, split: str = "test") -> list[Tagged]:
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


def label_accuracy(lm, pairs: Sequence[tuple], batch_size: int = 64) -> float:
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
    return {
        "extender_accuracy": label_accuracy(lm, extender_pairs(g, 500, split)),
        "baseline_accuracy": label_accuracy(lm, baseline_pairs(g, 500, split)),
    }


# The dev base model's corpora and check (``llm.pretrain`` names corpora "module:function").
def dev_row_pairs(g: np.random.Generator, n: int) -> list[Tagged]:
    """:func:`row_pairs` on the dev split's training masks (sizes 2-4)."""
    return row_pairs(g, n, "dev")


def dev_pretraining_pairs(g: np.random.Generator, n: int) -> list[Tagged]:
    """:func:`pretraining_pairs` on the dev split's training masks (sizes 2-4)."""
    return pretraining_pairs(g, n, "dev")


def dev_pretraining_check(lm) -> dict[str, float]:
    """:func:`pretraining_check` on dev training masks."""
    return pretraining_check(lm, "dev")


def loo_pairs(task: ParityTask, parent, bit: int) -> list[tuple[str, str]]:
    """Leave-one-out scoring pairs of one candidate: support i as query, the others as shots."""
    n = len(task.support_x)
    out = []
    for i in range(n):
        keep = [j for j in range(n) if j != i]
        prompt = extender_prompt(task.support_x[keep], task.support_y[keep], task.support_x[i], parent, bit)
        out.append((prompt, label_completion(task.support_y[i])))
    return out


# ------------------------------------------------------------------------------ adapter


def label_of(completion: str) -> int:
    """The label a completion gives: its first 0/1 character, -1 when there is none."""
    label = parse_label(completion)
    return -1 if label is None else label


def query_prompts(task: ParityTask, parent, bit: int) -> list[str]:
    """The extender's prompt for each query of ``task`` under the candidate (parent, bit)."""
    return [extender_prompt(task.support_x, task.support_y, q, parent, bit) for q in task.query_x]


@dataclass(frozen=True)
class ParityAdapter:
    """Sparse parity for :class:`~taskextrap.estimators.sequence.SequenceRTE`: candidates
    (parent mask, bit) of one candidate space (``tasks.parity.candidates``), the extender's
    Anchor / Bit / Out prompts, a label per query (-1 when the output holds neither 0 nor 1)."""

    space: str
    split: str = "test"
    max_new_tokens: int = LABEL_TOKENS
    prefix_of = None  # the prompts share no prefix worth running once

    def candidates(self) -> list:
        """The candidates of the space, in its fixed enumeration order."""
        from taskextrap.tasks.parity import candidates

        return candidates(self.space, self.split)

    def loo_pairs(self, task: ParityTask, candidate) -> list[tuple[str, str]]:
        """Leave-one-out scoring pairs of ``candidate`` on ``task``'s support."""
        return loo_pairs(task, *candidate)

    def query_prompts(self, task: ParityTask, candidate) -> list[str]:
        """The extender's prompt for each query of ``task`` under ``candidate``."""
        return query_prompts(task, *candidate)

    def parse(self, completion: str) -> int:
        """The label a completion gives (:func:`label_of`)."""
        return label_of(completion)
