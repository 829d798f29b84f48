"""The catalogue of the built-in experiments: every experiment module imported (each registers
itself with ``experiments.registry``), and the lookups that need all of them. It sits above the
experiment modules, so nothing below it imports an experiment it did not ask for, and the
registry imports no experiment (no circle)."""

from __future__ import annotations

from taskextrap.errors import TaskextrapError, did_you_mean

# Imported for their registration side effect, in the order `reproduce all` runs them.
# llm-geometry registers before codeio: its search is exhaustive (it takes arg-mins over
# subsets), and the scores it saves in codeio's folder answer codeio's bounded search, so
# `reproduce all` searches once (codeio first would search twice).
from taskextrap.experiments import composition, length, multistep, parameter, parity, llm_geometry  # noqa: F401
from taskextrap.experiments import codeio, projectile  # noqa: F401
from taskextrap.experiments import codeio_em, composition_depth3, composition_em, manifolds  # noqa: F401
from taskextrap.experiments import registry
from taskextrap.experiments.registry import PAPER_ORDER, Experiment


def get_experiment(name: str) -> Experiment:
    """The experiment ``name``."""
    if name not in registry.EXPERIMENTS:
        raise TaskextrapError(
            f"unknown experiment {name!r}; choose from {sorted(registry.EXPERIMENTS)} or 'all'"
            + did_you_mean(name, [*registry.EXPERIMENTS, "all"])
        )
    return registry.EXPERIMENTS[name]


def all_experiments(in_all_only: bool = False) -> list[str]:
    """Names of every registered experiment (only those ``reproduce all`` runs, with ``in_all_only``)."""
    return [n for n, e in registry.EXPERIMENTS.items() if e.in_all or not in_all_only]


def paper_order() -> list[str]:
    """Every registered experiment in the paper's order (:data:`PAPER_ORDER`), then any other in
    the order it registered."""
    names = all_experiments()
    return [n for n in PAPER_ORDER if n in names] + [n for n in names if n not in PAPER_ORDER]
