"""Every kind of run profile: ``quick`` (1 seed, reduced sizes, minutes on a laptop), ``paper``
(the paper's sizes and seeds) and ``tiny`` (seconds, for the tests).

Each experiment module owns its table, named ``PROFILES`` (name -> profile), and registers it.
A profile is a frozen keyword-only dataclass; each field says what it holds in its ``help``
metadata (as PEFT's configs do) (:func:`describe` lists them). A table derives one profile from another with
:func:`dataclasses.replace`, never from positional tuples or dict merges.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.llm.geometry import FisherSettings
from taskextrap.operators.train import TrainConfig


MAX_SEEDS = 1000  # far beyond any run (the paper uses 3): a typo is refused, not run for ever


class SeededProfile:
    """Shared behaviour of every experiment's profile dataclass (fields ``name`` and ``seeds``)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # for the type checker: every subclass is a dataclass

    def to_dict(self) -> dict:
        """The profile as plain data (recorded in results and in unit fingerprints).

        Returns:
            ``{field: value}``, nested settings (a ``TrainConfig``) as dicts too.
        """
        return asdict(self)

    def with_seeds(self, n: int | None, seed: int | None = None):
        """The profile with seeds 0..n-1, or with the one seed ``seed`` (unchanged when both are
        None): ``--seeds N`` and ``--seed S``, for a Slurm array task computing one seed.

        Returns:
            A copy with ``seeds`` replaced (the profile itself when both are None).
        """
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


def describe(profile_class: type) -> dict[str, str]:
    """What each field of a profile class holds.

    Returns:
        ``{field name: its help text}`` in field order.

    Examples:
        >>> describe(ProjectileProfile)["steps"]
        'optimiser steps of each of its two networks'
    """
    return {f.name: f.metadata.get("help", "") for f in fields(profile_class)}


# The seeds of the three usual profiles: one for quick and tiny (tests only: seconds), the
# paper's three for paper.
SEEDS = {"quick": (0,), "paper": (0, 1, 2), "tiny": (0,)}
# The fine-tuning of every language-model experiment's tiny profile (tests only): one seed, one
# task, two steps of two sequences.
TINY_SFT: dict[str, Any] = dict(
    name="tiny", seeds=SEEDS["tiny"], sft_steps=2, sft_batch=2, sft_lr=2e-4, warmup=1, n_tasks=1
)


def profile_table(cls: type, sizes: dict[str, dict], **per_profile: dict) -> dict:
    """A profile table of ``cls``: for each name of ``sizes`` (quick, paper, tiny) a profile of
    those sizes with that name's :data:`SEEDS` and, for every keyword of ``per_profile`` (a
    table by profile name, such as each profile's ``train``), that name's entry.

    Returns:
        ``{name: profile}`` in the order of ``sizes``.
    """
    return {
        name: cls(name=name, seeds=SEEDS[name], **size, **{k: v[name] for k, v in per_profile.items()})
        for name, size in sizes.items()
    }


def get_profile(table: dict, name: str):
    """The profile ``name`` of an experiment's ``table``, with a one-line error otherwise."""
    if name not in table:
        raise TaskextrapError(f"unknown profile {name!r}; choose from {sorted(table)}" + did_you_mean(name, table))
    return table[name]


_NAME = "the profile's name: quick, paper or tiny"
_SEEDS = "training seeds, each a unit of its own"


@dataclass(frozen=True, kw_only=True)
class ParameterProfile(SeededProfile):
    """Sizes of the parameter experiment (and its multi-step form)."""

    name: str = field(metadata={"help": _NAME})
    seeds: tuple[int, ...] = field(metadata={"help": _SEEDS})
    n_library: int = field(
        metadata={"help": "library tasks per training region (F1_1 and F1_2); per level, or per family, in a subclass"}
    )
    n_pairs: int = field(metadata={"help": "Psi training pairs per pass"})
    n_targets: int = field(metadata={"help": "held-out targets"})
    n_draws: int = field(metadata={"help": "context draws of each target"})
    train: TrainConfig = field(metadata={"help": "Psi's optimiser settings"})


@dataclass(frozen=True, kw_only=True)
class DiscreteProfile(ParameterProfile):
    """Sizes of the length and composition experiments: a :class:`ParameterProfile` (n_library
    counts tasks per level, or primitives per family) plus the decomposer's optimiser settings."""

    decomposer_train: TrainConfig = field(metadata={"help": "the decomposer's optimiser settings"})


@dataclass(frozen=True, kw_only=True)
class ProjectileProfile(SeededProfile):
    """Sizes of the Fig. 1 experiment."""

    name: str = field(metadata={"help": _NAME})
    seeds: tuple[int, ...] = field(metadata={"help": _SEEDS})
    steps: int = field(metadata={"help": "optimiser steps of each of its two networks"})


@dataclass(frozen=True, kw_only=True)
class ManifoldProfile(SeededProfile):
    """Sizes of the manifold maps (App. H)."""

    name: str = field(metadata={"help": _NAME})
    seeds: tuple[int, ...] = field(metadata={"help": _SEEDS})
    n_per_class: int = field(metadata={"help": "tasks per class (degree, primitive family, region)"})
    width: int = field(metadata={"help": "the probe network's width"})
    pretrain_steps: int = field(metadata={"help": "the probe's full-batch pretraining steps"})
    pca_dim: int = field(metadata={"help": "PCA dimensions kept before the manifold learner"})


@dataclass(frozen=True, kw_only=True)
class LLMProfile(SeededProfile):
    """Sizes of a language-model experiment (the paper's LoRA: 600 steps of 16, lr 2e-4, 50
    warm-up steps)."""

    name: str = field(metadata={"help": _NAME})
    seeds: tuple[int, ...] = field(metadata={"help": _SEEDS})
    sft_steps: int = field(metadata={"help": "optimiser steps of each fine-tuning run"})
    sft_batch: int = field(metadata={"help": "sequences per fine-tuning step"})
    sft_lr: float = field(metadata={"help": "the LoRA runs' learning rate"})
    warmup: int = field(metadata={"help": "the LoRA runs' warm-up steps"})
    n_tasks: int | None = field(default=None, metadata={"help": "test tasks scored (None: all)"})
    n_tasks_wide: int | None = field(
        default=None,
        metadata={"help": "test tasks scored on the wide candidate space, which costs ten times more (None: all)"},
    )
    score_batch: int = field(default=64, metadata={"help": "sequences per scoring pass"})


@dataclass(frozen=True, kw_only=True)
class CodeIOProfile(LLMProfile):
    """Sizes of the CodeIO experiment: an :class:`LLMProfile` plus its decoding settings.

    A subclass rather than new LLMProfile fields, so the parity profiles stay as they are. The
    paper's LoRA recipe is tuned for a 7B model that already composes; on the 1M-parameter
    default model it underfits, hence ``full_lr`` (``sequence_runs.codeio.sft_config``).
    """

    cot_samples: int = field(
        default=16, metadata={"help": "the CoT baseline's sampled chains per task (the paper: 16)"}
    )
    temperature: float = field(default=0.7, metadata={"help": "the CoT baseline's sampling temperature"})
    answer_tokens: int = field(
        default=130,
        metadata={"help": "generation budget of an answer (the longest output of any candidate is 126 characters)"},
    )
    cot_tokens: int = field(default=180, metadata={"help": "generation budget of a chain of thought"})
    base_queries: int = field(default=10, metadata={"help": "few-shot prompts per primitive for the base-model row"})
    max_tied: int = field(default=16, metadata={"help": "most tied candidates generated for the tie vote"})
    full_lr: float | None = field(
        default=None,
        metadata={
            "help": "with the shipped default model: every parameter trained at this learning rate instead of "
            "the paper's LoRA (same steps and batch); None: LoRA"
        },
    )
    full_warmup: int = field(default=50, metadata={"help": "warm-up steps of a full fine-tuning run"})
    score_shots: bool = field(
        default=False,
        metadata={
            "help": "with the default model: each run's loss also covers the answers of the shots its prompt "
            "determines (llm.codeio.scored_text)"
        },
    )
    anchored: bool = field(
        default=False,
        metadata={
            "help": "with the default model: the extender's prompts show each input's anchor output (\"In: s Out: "
            'a(s) => t"; llm.codeio.reference_prompt) in training, search and prediction alike'
        },
    )


@dataclass(frozen=True, kw_only=True)
class CodeIOEMProfile(CodeIOProfile):
    """A :class:`CodeIOProfile` (the ``codeio`` runs it reuses) plus EM's sizes."""

    em_tasks: int = field(default=12, metadata={"help": "training composite tasks EM labels"})
    em_rounds: int = field(default=2, metadata={"help": "E/M rounds"})
    em_loo: int = field(
        default=1,
        metadata={"help": "support examples held out in turn by the E-step's score (the search holds out all 3)"},
    )

    @classmethod
    def extending(cls, codeio: CodeIOProfile, *, em_tasks: int, em_rounds: int, em_loo: int) -> CodeIOEMProfile:
        """``codeio``'s profile with EM's sizes: its runs are those codeio-em reuses.

        Returns:
            The profile whose :meth:`codeio` is ``codeio``.
        """
        return cls(**_codeio_fields(codeio), em_tasks=em_tasks, em_rounds=em_rounds, em_loo=em_loo)

    def codeio(self) -> CodeIOProfile:
        """The ``codeio`` profile of the same sizes (its units are the supervised arms')."""
        return CodeIOProfile(**_codeio_fields(self))


def _codeio_fields(profile: CodeIOProfile) -> dict:
    """``profile``'s values of the fields every CodeIO profile has."""
    return {f.name: getattr(profile, f.name) for f in fields(CodeIOProfile)}


@dataclass(frozen=True, kw_only=True)
class GeometryProfile(SeededProfile):
    """Sizes of the language-model geometry experiment."""

    name: str = field(metadata={"help": _NAME})
    seeds: tuple[int, ...] = field(metadata={"help": _SEEDS})
    fit: FisherSettings = field(metadata={"help": "how one task is embedded: its LoRA fit and Fisher (llm.geometry)"})
    k: int = field(default=3, metadata={"help": "the k of the neighbour agreement"})
    gamma_m: tuple[int, ...] = field(
        default=(4, 6, 8, 10),
        metadata={"help": "primitives a Gamma keeps: m + m^2 candidates each (20, 42, 72, 110 of 992)"},
    )
