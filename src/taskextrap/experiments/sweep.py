"""A sweep: several experiments x observation protocols x splits, planned together so that one
executor runs all their units at once (``taskextrap sweep``)."""

from __future__ import annotations

import dataclasses

from taskextrap.errors import TaskextrapError
from taskextrap.experiments.registry import SPLITS, RunOptions
from taskextrap.experiments.catalogue import all_experiments, get_experiment
from taskextrap.experiments.units import load_unit


def sweep_runs(
    experiments: list[str], protocols: list[str], splits: list[str], options: RunOptions
) -> list[tuple[str, RunOptions, None]]:
    """The runs of a sweep, as ``(experiment, options, None)`` for
    :func:`taskextrap.experiments.runner.run_experiments`: every experiment (``all``: those
    ``reproduce all`` runs) under every protocol of ``protocols`` when it takes a protocol (else
    its one default) and every split of ``splits`` it has (``dev`` is skipped where there is none)."""
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise TaskextrapError(f"unknown split {unknown[0]!r}; choose from {', '.join(SPLITS)}")
    names = []
    for e in experiments:
        for n in all_experiments(in_all_only=True) if e == "all" else [e]:
            if n not in names:
                names.append(n)
    runs = []
    for name in names:
        experiment = get_experiment(name)
        for protocol in protocols if "protocol" in experiment.options else ["paper"]:
            for split in splits:
                if split == "dev" and not experiment.dev:
                    continue
                runs.append((name, dataclasses.replace(options, protocol=protocol, split=split), None))
    if not runs:
        raise TaskextrapError("the sweep has no runs: the experiments have none of the splits asked for")
    return runs


def unit_listing(planned) -> str:
    """One line per unit of the planned runs (:func:`~taskextrap.experiments.runner.plan_run`):
    the run folder, the unit and whether a finished copy is cached; a unit two runs share
    (``parameter`` and ``parameter-ablations``) is listed once, under the first."""
    lines, seen = [], set()
    for run in planned:
        if run is None:
            continue
        for unit in run.plan.units:
            key = (unit.name, unit.key)
            if key in seen:
                continue
            seen.add(key)
            cached = run.cache_dir.is_dir() and load_unit(run.cache_dir, unit.name, unit.key) is not None
            status = ("to run (its plots are missing)" if unit.needs_plots else "cached") if cached else "to run"
            lines.append(f"{run.out_dir.name:40s} {unit.name:48s} {status}")
    todo = sum("to run" in line for line in lines)
    return "\n".join([*lines, f"{len(lines)} units, {todo} to run"])
