"""The prompting baselines of the sequence-model regimes (paper §4, Tables 4 and 5): a model
fine-tuned on plain prompts of the training tasks answers the target's plain prompt, with no
reference functions and no search.

- :func:`few_shot`: greedy decoding, one answer per prompt (``few-shot``);
- :func:`cot_majority`: self-consistency, the majority answer of sampled chains of thought
  (``cot-majority``; the paper samples 16 at temperature 0.7).
"""

from __future__ import annotations

from collections.abc import Callable


def few_shot(
    lm, prompts: list[str], max_new_tokens: int, batch_size: int, parse: Callable[[str], object] | None = None
) -> list:
    """The greedy answer of each prompt (its first line, stripped; ``parse`` of it when given);
    each distinct prompt runs once."""
    from taskextrap.llm.generate import greedy_once

    said = greedy_once(lm, prompts, max_new_tokens, batch_size)
    return said if parse is None else [parse(s) for s in said]


def majority_answer(answers: list[str]) -> str:
    """Self-consistency vote: the most common non-empty answer; among equally common ones, the
    first sampled. Empty answers (no parseable chain) do not vote; "" when every one is empty."""
    from taskextrap.search.likelihood import vote

    kept = [a for a in answers if a]
    return vote(kept) if kept else ""


def cot_majority(
    lm,
    prompts: list[str],
    parse: Callable[[str], str],
    n_samples: int,
    temperature: float,
    max_new_tokens: int,
    batch_size: int,
    seed: int,
) -> list[str]:
    """The :func:`majority_answer` of ``n_samples`` chains sampled at ``temperature`` for each
    prompt, each chain's answer read by ``parse``; the sampling is seeded by ``seed``."""
    from taskextrap.llm.generate import generate

    chains = generate(
        lm,
        prompts,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        temperature=temperature,
        n_samples=n_samples,
        seed=seed,
    )
    return [majority_answer([parse(c) for c in samples]) for samples in chains]
