"""Relational fine-tuning without meta-labels on CodeIO (paper Appendix B.2, "EM").

The supervised extender (``experiments.codeio``) learns from training pairs whose decomposition
(a, b) it is told. Here a set of training composite tasks keeps its data but hides its label;
EM alternates

* **E-step** (``estimators.sequence_em.e_step``): for each unlabelled task, every candidate decomposition
  (:func:`em_candidates`: every training pair of non-trivial primitives, so neither the trivial
  identity decomposition, a single nor a held-out pair is a candidate) is scored by the current model's leave-one-out
  NLL of the task's support examples, exactly as the test-time search scores a target
  (``CodeIOAdapter.loo_pairs``; the last ``n_loo`` support examples are held out in turn), and
  the arg-min becomes the task's pseudo-label, both constituents inferred;
* **M-step** (:func:`pseudo_sampler`): relational fine-tuning, warm-started from the current
  model, on reference prompts that show each task's fresh examples under its (pseudo-)label's
  blocks.

Two starts (the paper's two warm-starts): **primitive warm-up** (fine-tune on single primitives,
:func:`single_sampler`, before the first E-step; M-steps keep mixing single primitives in as
the supervised extender does) and **semi-supervised** (a share of the tasks keeps its true
label, the model first fine-tunes on those alone, and only the others are pseudo-labelled; no
single primitive is ever shown).

What is kept apart from the authors' script (reference 12): the E-step never sees a task's
query, let alone a held-out one (it scores support examples of training tasks only); the
identity is not a candidate; both functions are inferred; the test-time search is the same
likelihood search as the supervised ``rte``'s, over every candidate, with no access to the answer.

:func:`label_quality` says how good the pseudo-labels are: a label *behaves* like the truth when
both give the same outputs on ``tasks.strings.PROBE`` (two decompositions that compute the same
function are equally right), *exact* when it is the true pair.
"""

from __future__ import annotations

import math

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng
from taskextrap.tasks import strings as string_tasks


def trivial_primitives() -> tuple[str, ...]:
    """Primitives that act as the identity on the task inputs (``identity``, and ``lower_case``
    on lowercase strings): a pair with one of them is a single in disguise."""
    same = string_tasks.behaviour("identity")
    return tuple(n for n in string_tasks.NAMES if string_tasks.behaviour(n) == same)


def em_candidates(train_pairs=None) -> list[tuple[str, str]]:
    """The E-step's candidates: ordered pairs of non-trivial primitives (paper: "excluding the
    trivial identity decomposition"; no single, no pair with an identity-like constituent).

    With ``train_pairs`` only those pairs: a pseudo-label is then a pair the supervised extender
    may be trained on, so no M-step trains on a held-out pair's label (with training tasks' data).
    None: every pair, the held-out ones too (the E-step of the older runs, kept to reproduce them)."""
    skip = set(trivial_primitives())
    allowed = None if train_pairs is None else set(map(tuple, train_pairs))
    return [
        p
        for p in string_tasks.all_pairs()
        if p[0] not in skip and p[1] not in skip and (allowed is None or p in allowed)
    ]


def composite_pairs(train_pairs) -> list[tuple[str, str]]:
    """The training pairs that are real compositions: their behaviour differs from every single
    (a pair like (identity, reverse) is the single reverse and has no non-trivial decomposition)."""
    singles = {string_tasks.behaviour(n) for n in string_tasks.NAMES}
    return [tuple(p) for p in train_pairs if string_tasks.behaviour(tuple(p)) not in singles]


def em_tasks(train_pairs, n: int, seed: int):
    """``n`` training composite tasks (distinct pairs, a seeded choice among
    :func:`composite_pairs`), each with 3 support examples drawn from its own stream "em-train".
    Their pairs are the hidden labels; the E-step reads only their support."""
    pool = composite_pairs(train_pairs)
    if not 1 <= n <= len(pool):
        raise TaskextrapError(f"em_tasks must lie in [1, {len(pool)}] (composite training pairs), got {n}")
    picked = sorted(rng(seed, "codeio", "em-tasks").choice(len(pool), size=n, replace=False))
    return string_tasks.make_test_tasks([pool[i] for i in picked], seed, stream="em-train")


def known_mask(n: int, share: float, seed: int) -> np.ndarray:
    """Which of ``n`` tasks keep their true label: a seeded ``ceil(share * n)`` of them."""
    if not 0.0 <= share <= 1.0:
        raise TaskextrapError(f"label share must lie in [0, 1], got {share}")
    keep = np.zeros(n, dtype=bool)
    keep[rng(seed, "codeio", "em-known").permutation(n)[: math.ceil(share * n)]] = True
    return keep


# ----------------------------------------------------------------------- pseudo-labels


def label_quality(tasks, labels, keep: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per pseudo-labelled task (``keep``: which tasks count, default all), 1.0 where its label
    ``behaves`` like the true pair on PROBE and where it is ``exact``ly the true pair."""
    keep = np.ones(len(tasks), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    pairs = [(t.pair, tuple(lab)) for t, lab, k in zip(tasks, labels, keep, strict=True) if k]
    return {
        "behaves": np.array([float(string_tasks.behaviour(p) == string_tasks.behaviour(lab)) for p, lab in pairs]),
        "exact": np.array([float(p == lab) for p, lab in pairs]),
    }


# --------------------------------------------------------------------------------- samplers


def single_sampler(score_shots: bool = False, anchored: bool = False):
    """``sample(g, n)``: reference items of random single primitives (the primitive warm-up)."""
    from taskextrap.llm.codeio import reference_item

    def sample(g: np.random.Generator, n: int) -> list:
        return [
            reference_item(
                g,
                string_tasks.NAMES[int(g.integers(len(string_tasks.NAMES)))],
                score_shots=score_shots,
                anchored=anchored,
            )
            for _ in range(n)
        ]

    return sample


def pseudo_sampler(tasks, labels, p_single: float = 0.0, score_shots: bool = False, anchored: bool = False):
    """``sample(g, n)``: the M-step's items. Each is a random task's fresh examples (drawn from
    the task itself: training tasks give as many examples as asked) under its label's reference
    blocks (``llm.codeio.reference_item``); with probability ``p_single`` a single primitive's
    item instead."""
    from taskextrap.llm.codeio import reference_item

    if len(tasks) != len(labels) or not tasks:
        raise TaskextrapError("need one label per task and at least one task")
    if not 0.0 <= p_single <= 1.0:
        raise TaskextrapError(f"p_single must lie in [0, 1], got {p_single}")
    single = single_sampler(score_shots, anchored)
    sources, labels = [t.pair for t in tasks], [tuple(lab) for lab in labels]

    def sample(g: np.random.Generator, n: int) -> list:
        out = []
        for _ in range(n):
            if g.random() < p_single:
                out += single(g, 1)
            else:
                i = int(g.integers(len(sources)))
                out.append(reference_item(g, labels[i], sources[i], score_shots, anchored))
        return out

    return sample
