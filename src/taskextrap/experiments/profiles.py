"""The kinds of run profile: ``quick`` (1 seed, reduced sizes, minutes on a laptop), ``paper``
(the paper's sizes and seeds) and ``tiny`` (seconds, for the tests). Each experiment owns its
table of profiles (``PARAMETER_PROFILES`` in ``experiments.parameter``, ...) and registers it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.operators.train import TrainConfig


MAX_SEEDS = 1000  # far beyond any run (the paper uses 3): a typo is refused, not run for ever


class SeededProfile:
    """Shared behaviour of every experiment's profile dataclass (fields ``name`` and ``seeds``)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # for the type checker: every subclass is a dataclass

    def to_dict(self) -> dict:
        """The profile as plain data (recorded in results and in unit fingerprints)."""
        return asdict(self)

    def with_seeds(self, n: int | None, seed: int | None = None):
        """The profile with seeds 0..n-1, or with the one seed ``seed`` (unchanged when both are
        None): ``--seeds N`` and ``--seed S``, for a Slurm array task computing one seed."""
        if seed is not None:
            if n is not None:
                raise TaskextrapError("give --seeds N (seeds 0..N-1) or --seed S (that one seed), not both")
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < MAX_SEEDS:
                raise TaskextrapError(f"--seed must be a whole number from 0 to {MAX_SEEDS - 1}, got {seed!r}")
            return replace(self, seeds=(seed,))
        if n is None:
            return self
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SEEDS:
            raise TaskextrapError(f"--seeds must be a whole number from 1 to {MAX_SEEDS}, got {n!r}")
        return replace(self, seeds=tuple(range(n)))


@dataclass(frozen=True)
class ParameterProfile(SeededProfile):
    """Sizes of the parameter experiment.

    n_library: library tasks per training region (F1_1 and F1_2); n_pairs: Psi training pairs
    per pass; n_targets x n_draws: held-out F2 targets and context draws of each.
    """

    name: str
    seeds: tuple[int, ...]
    n_library: int
    n_pairs: int
    n_targets: int
    n_draws: int
    train: TrainConfig


@dataclass(frozen=True)
class DiscreteProfile(ParameterProfile):
    """Sizes of the length and composition experiments: a :class:`ParameterProfile` (n_library
    counts tasks per level, or primitives per family) plus the decomposer's optimiser settings."""

    decomposer_train: TrainConfig


def get_profile(table: dict, name: str):
    """The profile ``name`` of an experiment's ``table``, with a one-line error otherwise."""
    if name not in table:
        raise TaskextrapError(f"unknown profile {name!r}; choose from {sorted(table)}" + did_you_mean(name, table))
    return table[name]


@dataclass(frozen=True)
class ProjectileProfile(SeededProfile):
    """Sizes of the Fig. 1 experiment: optimiser steps of each of its two networks."""

    name: str
    seeds: tuple[int, ...]
    steps: int


@dataclass(frozen=True)
class LLMProfile(SeededProfile):
    """Sizes of a language-model experiment.

    sft_steps / sft_batch / sft_lr / warmup: each LoRA run (the paper: 600 steps of 16, lr 2e-4,
    50 warm-up steps); n_tasks: test tasks scored (None: all); n_tasks_wide: test tasks scored
    on the wide candidate space (None: all), which costs ten times more; score_batch: sequences
    per scoring pass.
    """

    name: str
    seeds: tuple[int, ...]
    sft_steps: int
    sft_batch: int
    sft_lr: float
    warmup: int
    n_tasks: int | None = None
    n_tasks_wide: int | None = None
    score_batch: int = 64


@dataclass(frozen=True)
class CodeIOProfile(LLMProfile):
    """Sizes of the CodeIO experiment: an :class:`LLMProfile` plus its decoding settings.

    A subclass rather than new LLMProfile fields, so the parity profiles (and the fingerprints
    of their cached units) stay as they are. cot_samples / temperature: the CoT baseline's
    majority vote (the paper: N = 16); answer_tokens / cot_tokens: generation budgets (the
    longest output of any candidate is 126 characters); base_queries: few-shot prompts per
    primitive for the base-model row; max_tied: most tied candidates generated for the tie vote.

    full_lr / full_warmup: with the shipped default model (no ``--model``) and ``full_lr`` set,
    each of the three runs trains every parameter at this learning rate and warm-up instead of
    the paper's LoRA (same steps and batch). The paper's LoRA recipe is tuned for a 7B model that
    already composes; on the 1M-parameter default model it underfits (``codeio.fine_tune``).
    score_shots: with the default model, each run's loss also covers the answers of the shots its
    prompt determines (``llm.codeio.scored_text``), not only the query's completion.
    anchored: with the default model, the extender's target section shows each input's anchor
    output ("In: s Out: a(s) => t"; ``llm.codeio.reference_prompt``) in training, search and
    prediction alike.
    """

    cot_samples: int = 16
    temperature: float = 0.7
    answer_tokens: int = 130
    cot_tokens: int = 180
    base_queries: int = 10
    max_tied: int = 16
    full_lr: float | None = None
    full_warmup: int = 50
    score_shots: bool = False
    anchored: bool = False
