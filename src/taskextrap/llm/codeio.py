"""Prompts and training corpora of the CodeIO language-model experiment (paper Section 4.2;
reference 11), on the string tasks of :mod:`taskextrap.tasks.strings`.

Models see the primitives under masked names (Func_00..Func_30, ``tasks.strings.masked_name``).

Leaks avoided (reference 11.7): training samplers draw only from the ``train_pairs`` they are
given, and the pretraining corpus (``pretraining_texts``) shows single primitives only. No
prompt shows a value computed from the query input: reference blocks demonstrate each primitive
on the shot inputs and random filler strings (``block_inputs``, the paper's Appendix I), never
on the query (the authors align them on the query too, which puts the answer in the prompt of
many held-out tasks). Leave-one-out scoring treats the held-out support example exactly as a
query. ``answer_in_prompt`` checks a prompt. Every training item carries the candidate it was
drawn from as ``.task`` (``audit.Tagged`` pairs, ``ScoredText.task``); fine-tuning reports it to
the leak audit.

Prompts are compact plain text for a small character-level model; exact wording is in each
docstring. Completions start with one space. An anchored reference prompt
(``reference_prompt(..., anchored=True)``) writes the anchor's output a(s), also shown in the
first block, before " =>" on each shot line; the query line stays "In: q Out:" and the model
writes " a(q) => b(a(q))" itself (``target_completion``, read with ``parse_cot``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from taskextrap.audit import Tagged
from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng
from taskextrap.tasks.strings import (
    BLOCK_ROWS,
    NAMES,
    PRIMITIVES,
    apply,
    as_candidate,
    examples,
    filler_strings,
    functions_of,
    masked_name,
    random_strings,
)

# --------------------------------------------------------------------------------- prompts

FEWSHOT_HEADER = "Perform the string transformation pattern seen below:\n"
REFERENCE_HEADER = "Reference Functions:\n"
TARGET_HEADER = "Now, use the Reference Functions above to solve the Target Task:\n"
QUERY_HEADER = "### Query:\n"
# Recorded in the experiment's fingerprints: a change of the prompt format recomputes every unit.
PROMPT_FORMAT = f"v2: blocks on the shot inputs then fillers ({BLOCK_ROWS} rows), never the query; query line plain"


def answer_completion(answer: str) -> str:
    """The completion for an answer: " <answer>"."""
    return f" {answer}"


def anchor_of(candidate) -> str | None:
    """The anchor of a candidate for an anchored target section: a of a pair (a, b); None for a
    single (its block alone determines the answer)."""
    fns = functions_of(candidate)
    return fns[0] if len(fns) == 2 else None


def target_completion(candidate, x: str, answer: str, anchored: bool = False) -> str:
    """What the model writes after "In: x Out:" of a query line: " <answer>", or, ``anchored``
    for a pair (a, b), " a(x) => <answer>" (it computes the intermediate itself, as a chain of
    thought; :func:`parse_cot` reads the answer)."""
    anchor = anchor_of(candidate) if anchored else None
    return answer_completion(answer) if anchor is None else cot_completion(PRIMITIVES[anchor](x), answer)


def _out(x: str, anchor: str | None) -> str:
    # what follows "Out:" on a shot line before its answer: nothing, or a(x) and an arrow
    return "" if anchor is None else f" {PRIMITIVES[anchor](x)} =>"


def _shot_lines(shots, anchor: str | None = None) -> str:
    return "".join(f"In: {s} Out:{_out(s, anchor)} {t}\n" for s, t in shots)


def _target_section(shots, query_in: str, anchor: str | None = None) -> str:
    # the query line is always plain: no value computed from the query input is shown
    return f"{_shot_lines(shots, anchor)}{QUERY_HEADER}In: {query_in} Out:"


def fewshot_prompt(shots, query_in: str) -> str:
    """Plain prompt: FEWSHOT_HEADER, "In: s Out: t\n" per shot, "### Query:\nIn: q Out:"."""
    return FEWSHOT_HEADER + _target_section(shots, query_in)


@lru_cache(maxsize=16384)
def _block(name: str, inputs: tuple[str, ...]) -> str:
    rows = "".join(f"In: {x} Out: {PRIMITIVES[name](x)}\n" for x in inputs)
    return f"--- {masked_name(name)} ---\n{rows}"


def reference_block(name: str, inputs) -> str:
    """One block: "--- Func_NN ---\n" then "In: x Out: f(x)\n" for each raw input x (cached: a
    search builds the same block for many candidates)."""
    if name not in PRIMITIVES:
        raise TaskextrapError(f"unknown primitive {name!r}")
    return _block(name, tuple(inputs))


def block_inputs(shot_inputs, fillers) -> list[str]:
    """The inputs of every reference block: the shot inputs, then fillers up to BLOCK_ROWS rows
    (the paper's Appendix I: blocks demonstrate on the target's support, never its query)."""
    shot_inputs = list(shot_inputs)
    need = max(0, BLOCK_ROWS - len(shot_inputs))
    if len(fillers) < need:
        raise TaskextrapError(f"{len(shot_inputs)} shots need {need} filler strings, got {len(fillers)}")
    return shot_inputs + list(fillers[:need])


def reference_prefix(candidate, inputs) -> str:
    """REFERENCE_HEADER, one block per function of the candidate (a then b) on ``inputs``,
    TARGET_HEADER. Every block applies its own primitive to the raw inputs; nothing is chained."""
    blocks = "".join(reference_block(f, inputs) for f in functions_of(candidate))
    return REFERENCE_HEADER + blocks + TARGET_HEADER


def reference_prompt(candidate, shots, query_in: str, fillers, anchored: bool = False) -> str:
    """Relational prompt: reference_prefix on :func:`block_inputs` (the shot inputs, then
    ``fillers``), then the shots and the query as in fewshot_prompt.

    No block shows the query input, so no line shows a value computed from it. ``anchored``
    (for a pair (a, b)): each shot line shows the anchor's output, "In: s Out: a(s) => t"
    (a(s) is also in the first block); the query line stays "In: q Out:" and the model writes
    " a(q) => b(a(q))" itself (:func:`target_completion`).
    """
    inputs = block_inputs([s for s, _ in shots], fillers)
    if query_in in inputs:
        raise TaskextrapError(f"the query input {query_in!r} is a shot or filler input: a block would show it")
    anchor = anchor_of(candidate) if anchored else None
    return reference_prefix(candidate, inputs) + _target_section(shots, query_in, anchor)


def loo_pairs(candidate, support, fillers, anchored: bool = False) -> list[tuple[str, str]]:
    """Leave-one-out scoring pairs: support i is a test query exactly, the others are shots.

    Prompt i is :func:`reference_prompt` with the other support examples as shots, so its
    blocks show the other support inputs and fillers, never the held-out one; the completion is
    :func:`target_completion` (anchored: " a(s_i) => t_i", scored whole). The prompts of all
    candidates with the same first function share the header and its block (the scorer's
    prefix groups: ``search.likelihood.prefix_keys`` by first function).
    """
    support = list(support)
    if not support:
        raise TaskextrapError("loo_pairs needs at least one support example")
    return [
        (
            reference_prompt(candidate, support[:i] + support[i + 1 :], s_i, fillers, anchored),
            target_completion(candidate, s_i, t_i, anchored),
        )
        for i, (s_i, t_i) in enumerate(support)
    ]


def prompt_outputs(prompt: str) -> set[str]:
    """Every output value a prompt shows: each value after "Out:" on a line, an anchor value
    before "=>" and the answer after it counted separately (block rows and shot lines alike)."""
    values = set()
    for tail in _OUT_TAIL.findall(prompt):
        values |= {v.strip() for v in tail.split("=>") if v.strip()}
    return values


_OUT_TAIL = re.compile(r"Out:([^\n]*)")


def answer_in_prompt(prompt: str, answer: str, query_in: str) -> bool:
    """True when ``answer`` is an output value the prompt shows (:func:`prompt_outputs`), unless
    the answer is the query input itself (an identity-like task's answer is on its query line)."""
    # the substring test first: it rules out almost every prompt at C speed
    return answer != query_in and answer in prompt and answer in prompt_outputs(prompt)


def cot_prompt(shots, query_in: str) -> str:
    """The chain-of-thought prompt: the same text as fewshot_prompt (shots cannot show steps)."""
    return fewshot_prompt(shots, query_in)


def cot_completion(intermediate: str, answer: str) -> str:
    """The chain-of-thought completion: " <intermediate> => <answer>"."""
    return f" {intermediate} => {answer}"


def parse_cot(text: str) -> str:
    """The answer in a generated CoT text: after the last "=>" of its first line, stripped.

    Primitive outputs never contain "=" or ">", so the split is unambiguous. Without an arrow the
    whole first line is returned stripped; None or empty gives "".
    """
    line = (text or "").lstrip("\n").split("\n", 1)[0]
    return line.rpartition("=>")[2].strip()


# ------------------------------------------------------------------------------ samplers


def _pick(g: np.random.Generator, items):
    return items[int(g.integers(len(items)))]


def _train_list(train_pairs) -> list[tuple[str, str]]:
    candidates = [as_candidate(p) for p in train_pairs]
    pairs = [p for p in candidates if not isinstance(p, str)]
    if not pairs or len(pairs) != len(candidates):
        raise TaskextrapError("train_pairs must be a non-empty list of (a, b) pairs")
    return pairs


# characters that primitive outputs contain: upper case, digits, "_", "-" and the fancy brackets
_WIDE = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-«»"))
_WIDE_P = np.concatenate([np.full(26, 0.55 / 26), np.full(26, 0.2 / 26), np.full(10, 0.1 / 10), np.full(4, 0.15 / 4)])


def wide_strings(g: np.random.Generator, n: int, min_len: int = 1, max_len: int = 20) -> list[str]:
    """n random strings over lower and upper case letters, digits, "_", "-", "«" and "»".

    The pretraining corpus mixes them in so that the model executes a primitive on any string,
    not only on a-z: the extender must apply b to a(q), which is rarely lowercase a-z. They are
    random strings, never a primitive's output, so no pair is shown.
    """
    if not 1 <= min_len <= max_len:
        raise TaskextrapError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    lengths = g.integers(min_len, max_len + 1, size=n)
    return ["".join(g.choice(_WIDE, size=int(k), p=_WIDE_P)) for k in lengths]


def pretraining_texts(
    g: np.random.Generator, n: int, p_wide: float = 0.25, min_shots: int = 2, max_shots: int = 6
) -> list:
    """Pretraining corpus of the default codeio model: few-shot texts of one random single primitive.

    Each text is a plain few-shot prompt (``min_shots``..``max_shots`` shots, then the query)
    with its answer, as a :class:`~taskextrap.llm.sft.ScoredText` that scores every answer after
    the first shot's (" t\n" of each later shot, " t" + EOS of the query): several examples'
    worth of signal per sequence. With probability ``p_wide`` a text's strings come from
    :func:`wide_strings`, otherwise from :func:`random_strings`. No pair of primitives appears.
    """
    if not 0.0 <= p_wide <= 1.0:
        raise TaskextrapError(f"p_wide must lie in [0, 1], got {p_wide}")
    if not 1 <= min_shots <= max_shots:
        raise TaskextrapError(f"need 1 <= min_shots <= max_shots, got {min_shots}, {max_shots}")
    out = []
    for _ in range(n):
        name = _pick(g, NAMES)
        k = int(g.integers(min_shots, max_shots + 1)) + 1
        draw = wide_strings if g.random() < p_wide else random_strings
        *shots, (q, t) = [(x, PRIMITIVES[name](x)) for x in draw(g, k)]
        out.append(scored_text(FEWSHOT_HEADER, shots, q, answer_completion(t), first_scored=1, task=name))
    return out


def scored_text(
    prefix: str, shots, query_in: str, completion: str, first_scored: int, anchor: str | None = None, task=None
):
    """``prefix + _target_section(shots, query_in, anchor) + completion`` as a
    :class:`~taskextrap.llm.sft.ScoredText` that scores the completion and the answer of every
    shot from index ``first_scored`` on (" t\n"): several examples' worth of signal per sequence.

    ``first_scored``: 1 for a plain few-shot text (the first answer cannot be known from the
    prompt), 0 under reference blocks (they show both functions on every shot input).
    ``anchor``: the anchored shot lines of :func:`reference_prompt` (the query line is plain;
    the completion then is :func:`target_completion`'s " a(q) => t"). ``task``: the candidate
    the text was drawn from (a name or a pair), for the leak audit.
    """
    from taskextrap.llm.sft import ScoredText

    pieces = [(prefix, False)]
    for i, (x, y) in enumerate(shots):
        pieces += [(f"In: {x} Out:{_out(x, anchor)}", False), (f" {y}\n", i >= first_scored)]
    pieces += [(f"{QUERY_HEADER}In: {query_in} Out:", False), (completion, True)]
    return ScoredText(tuple(pieces), task=task)


def fewshot_pairs(g: np.random.Generator, n: int, train_pairs, score_shots: bool = False) -> list:
    """Baseline training items: 3 shots + 1 query of a random training pair, plain prompt.

    ``(prompt, completion)`` pairs, or with ``score_shots`` :func:`scored_text` items that also
    score the answers of shots 2 and 3.
    """
    pairs = _train_list(train_pairs)
    out = []
    for _ in range(n):
        pair = _pick(g, pairs)
        *shots, (q, t) = examples(g, pair, 4)
        out.append(
            scored_text(FEWSHOT_HEADER, shots, q, answer_completion(t), 1, task=pair)
            if score_shots
            else Tagged((fewshot_prompt(shots, q), answer_completion(t)), pair)
        )
    return out


def cot_pairs(g: np.random.Generator, n: int, train_pairs, score_shots: bool = False) -> list:
    """CoT training items: plain prompt, completion " a(q) => b(a(q))" of a training pair (a, b).

    With ``score_shots`` the answers of shots 2 and 3 are scored too (:func:`scored_text`): the
    shots show no steps, so they are plain answers.
    """
    pairs = _train_list(train_pairs)
    out = []
    for _ in range(n):
        pair = _pick(g, pairs)
        *shots, (q, t) = examples(g, pair, 4)
        completion = cot_completion(apply(pair[0], q), t)
        out.append(
            scored_text(FEWSHOT_HEADER, shots, q, completion, 1, task=pair)
            if score_shots
            else Tagged((cot_prompt(shots, q), completion), pair)
        )
    return out


def reference_pairs(
    g: np.random.Generator,
    n: int,
    train_pairs,
    p_single: float = 0.2,
    score_shots: bool = False,
    anchored: bool = False,
) -> list:
    """Relational training items: the reference prompt of the true candidate, its blocks on the
    shot inputs and fillers (never the query), and :func:`target_completion`.

    With probability p_single the task is a random single primitive (one block), otherwise a
    random training pair (two blocks); 3 shots + 1 query + BLOCK_ROWS - 3 fillers. With
    ``score_shots`` the answers of all three shots are scored too (:func:`scored_text`; the
    blocks determine each of them). ``anchored``: as in :func:`reference_prompt`.
    """
    pairs = _train_list(train_pairs)
    if not 0.0 <= p_single <= 1.0:
        raise TaskextrapError(f"p_single must lie in [0, 1], got {p_single}")
    out = []
    for _ in range(n):
        cand = _pick(g, NAMES) if g.random() < p_single else _pick(g, pairs)
        out.append(reference_item(g, cand, score_shots=score_shots, anchored=anchored))
    return out


def reference_item(g: np.random.Generator, label, source=None, score_shots: bool = False, anchored: bool = False):
    """One relational training item: 3 shots and a query of the task ``source`` (default: the
    candidate ``label`` itself), shown under ``label``'s reference blocks, with
    :func:`target_completion` under ``label``.

    ``source`` differs from ``label`` when the label is a guess (an EM pseudo-label,
    ``llm.codeio_em``): the examples always come from the task itself, the blocks and the
    anchor from its label. The item is tagged with ``source`` for the leak audit: the data came
    from that task.
    """
    source = label if source is None else source
    *shots, (q, t) = examples(g, source, 4)
    fillers = filler_strings(g, BLOCK_ROWS - len(shots), [s for s, _ in shots] + [q])
    completion = target_completion(label, q, t, anchored)
    if score_shots:
        prefix = reference_prefix(label, block_inputs([s for s, _ in shots], fillers))
        anchor = anchor_of(label) if anchored else None
        return scored_text(prefix, shots, q, completion, 0, anchor, task=source)
    return Tagged((reference_prompt(label, shots, q, fillers, anchored), completion), source)


# ------------------------------------------------------------------- executing primitives


def primitive_prompts(
    name: str, n: int, seed: int, stream: str = "primitive-probe", n_shots: int = 3
) -> list[tuple[str, str]]:
    """n few-shot prompts (n_shots shots + a query) of the single primitive ``name``, with answers.

    Strings come from ``rng(seed, "codeio", stream, name)``: a stream of its own, never one a
    training sampler draws from (those are keyed by "sft-batch").
    """
    if name not in PRIMITIVES:
        raise TaskextrapError(f"unknown primitive {name!r}")
    g = rng(seed, "codeio", stream, name)
    out = []
    for _ in range(n):
        *shots, (q, t) = examples(g, name, n_shots + 1)
        out.append((fewshot_prompt(shots, q), t))
    return out


def primitive_accuracy(
    lm, n_per: int = 10, seed: int = 0, stream: str = "primitive-probe", batch_size: int = 32, max_new_tokens: int = 48
) -> dict[str, float]:
    """Greedy exact match of ``lm`` on ``n_per`` few-shot prompts of each primitive: {name: accuracy}.

    The default budget of 48 new tokens covers the longest single output (42 characters).
    """
    from taskextrap.llm.generate import generate

    items = [(name, p, t) for name in NAMES for p, t in primitive_prompts(name, n_per, seed, stream)]
    outputs = generate(lm, [p for _, p, _ in items], max_new_tokens=max_new_tokens, batch_size=batch_size)
    hits: dict[str, list[bool]] = {name: [] for name in NAMES}
    for (name, _, answer), out in zip(items, outputs, strict=True):
        hits[name].append(out[0] == answer)
    return {name: float(np.mean(h)) for name, h in hits.items()}


def pretraining_check(lm) -> dict[str, float]:
    """What the default model must execute: mean greedy exact match over the 31 primitives
    (10 fresh few-shot prompts each, from a stream no training or test code uses)."""
    acc = primitive_accuracy(lm, n_per=10, seed=0, stream="pretraining-check")
    return {"primitive_exact_match": float(np.mean(list(acc.values())))}


# ------------------------------------------------------------------------------ adapter


@dataclass(frozen=True)
class CodeIOAdapter:
    """CodeIO for :class:`~taskextrap.estimators.sequence.SequenceRTE`: the 992 candidates
    (``tasks.strings.candidates``), the reference prompts (anchored or not) and their answers
    (the text after the last "=>" when anchored, the whole completion otherwise).

    ``answer_tokens`` / ``cot_tokens``: generation budgets of a plain answer and of an anchored
    " a(q) => b(a(q))" completion."""

    anchored: bool = False
    answer_tokens: int = 130
    cot_tokens: int = 180

    @classmethod
    def of(cls, profile) -> CodeIOAdapter:
        """The adapter of a ``CodeIOProfile`` (its ``anchored`` and generation budgets)."""
        return cls(anchored=profile.anchored, answer_tokens=profile.answer_tokens, cot_tokens=profile.cot_tokens)

    @property
    def max_new_tokens(self) -> int:
        """The answer budget: the CoT budget when the extender writes " a(q) => b(a(q))"."""
        return self.cot_tokens if self.anchored else self.answer_tokens

    def candidates(self) -> list:
        """Every single primitive, then every pair (``tasks.strings.candidates``)."""
        from taskextrap.tasks.strings import candidates

        return candidates()

    def prefix_of(self, candidate):
        """The prompts of candidates with the same first function share the header and its block."""
        return functions_of(candidate)[0]

    def loo_pairs(self, task, candidate) -> list[tuple[str, str]]:
        """Leave-one-out scoring pairs of ``candidate`` on ``task``'s support."""
        return loo_pairs(candidate, task.support, task.fillers, self.anchored)

    def query_prompts(self, task, candidate) -> list[str]:
        """The reference prompt of ``task``'s query under ``candidate``."""
        return [reference_prompt(candidate, task.support, task.query[0], task.fillers, self.anchored)]

    def parse(self, completion: str) -> str:
        """The answer of a completion."""
        return parse_cot(completion) if self.anchored else completion
