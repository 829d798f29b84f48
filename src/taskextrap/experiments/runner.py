"""Run a registered experiment and write DIR/results.json, results.md, config.yaml and plots."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tempfile
import time
from pathlib import Path

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.regimes import REGIMES
from taskextrap.experiments import plotfiles
from taskextrap.experiments.executors import run_units
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.catalogue import get_experiment
from taskextrap.experiments.run_record import check_same_run, claim_run, plain, run_record
from taskextrap.experiments.units import Plan, bind
from taskextrap.report.compare import compare_rows
from taskextrap.files import write_json_atomic, write_text_atomic
from taskextrap.report.schema import environment_info, validate_results
from taskextrap.report.tables import results_markdown


def run_experiment(name: str, options: RunOptions | Settings, out_dir: Path | None = None) -> dict | None:
    """Run experiment ``name``; results go to ``out_dir`` (default: :func:`run_dir_name`).
    ``options``: the run's options, or the :class:`Settings` ``Experiment.check`` already
    resolved them to (the command line checks every run first and hands its settings on, so
    nothing is resolved twice).

    The experiment lists its units of work (one family or ladder and one training seed) up front;
    ``options.executor`` runs them (``serial`` here, or ``ray``: :mod:`.executors`). Finished
    units are cached under ``options.out/units`` and reused by a rerun with the same
    configuration, so an interrupted run resumes where it stopped and sibling experiments
    (``length`` and ``length-ablations``) share fits.

    Under ``options.shard`` with several processes only the lead writes results; the others
    return None once their part is saved.

    ``results["comparisons"]`` holds the paired comparisons of ``rte`` (else each group's first
    method) with every other method of its group (:func:`taskextrap.report.compare.compare_rows`),
    computed from the per-(target, seed) arrays that rows built by ``make_row`` keep.
    """
    return run_experiments([(name, options, out_dir)])[0]


def calibrated() -> tuple[str, ...]:
    """The experiments ``--calibrate`` serves: those named after a regime that says so (``tasks.regimes``)."""
    return tuple(r.name for r in REGIMES.values() if r.calibrated)


def calibrate_on_dev(name: str, options: RunOptions) -> tuple[RunOptions, str]:
    """``reproduce --calibrate``: experiment ``name``'s dev split run (its own folder; the units
    cache is shared), every interval's scale chosen on it per method (rte's and each classic's)
    (``search.calibration.own_dev_scales``: the smallest grid scale whose raw interval covers 90%
    of the dev targets' query points), and the options of the test run that applies them (its
    folder ends in ``-calibrated``), with one line saying what was chosen."""
    import numpy as np

    from taskextrap.search.calibration import SCALE_GRID, own_dev_scales

    if name not in calibrated():
        raise TaskextrapError(f"--calibrate serves {', '.join(calibrated())}, not {name}")
    dev = run_experiment(name, dataclasses.replace(options, split="dev"))
    if dev is None:
        raise TaskextrapError("--calibrate needs the dev run's results in this process (not a non-lead shard)")
    curves = dev["config"]["coverage_by_scale"]
    scales = own_dev_scales(curves)
    reached = {
        m: float(np.mean([c[m][SCALE_GRID.index(s)] for c in curves.values() if m in c])) for m, s in scales.items()
    }
    note = "interval scales chosen on the dev split ({}): {}".format(
        run_dir_name(name, dataclasses.replace(options, split="dev")),
        ", ".join(f"{m} {s:g} (covers {reached[m]:.3f} there)" for m, s in scales.items()),
    )
    return dataclasses.replace(options, interval_scales=scales), note


def run_experiments(runs: list[tuple]) -> list[dict | None]:
    """Run several experiments as one pool of units: ``runs`` is a list of ``(name, options,
    out_dir or None)`` whose options share one executor, thread count, device and ``--out``;
    every run is checked and planned before any unit runs, then all their units go through the
    first run's ``options.executor`` together, each with ``options.unit_cpus`` torch threads, and
    each run's results are written. Returns each run's results (None for a non-lead shard)."""
    first = options_of(runs[0][1])
    t = time.perf_counter()
    planned = [_plan(name, options, out_dir, checks=True) for name, options, out_dir in runs]
    cache_dirs = {p.cache_dir for p in planned if p is not None}
    if len(cache_dirs) > 1:
        raise TaskextrapError("runs executed together must share one --out")
    for run in planned:  # once every run is planned: a run refused while planning leaves no folder of the others
        if run is not None:
            open_run(run)
    units = [u for p in planned if p is not None for u in p.plan.units]
    results = run_units(
        units,
        next(iter(cache_dirs), None),
        first.executor,
        first.progress,
        first.unit_cpus,
        first.device,
        first.units_per_gpu,
    )
    wall = time.perf_counter() - t
    shared = {"runs_sharing_wall": float(len(runs))} if len(runs) > 1 else {}
    return [None if p is None else write_run(p, results, wall, shared) for p in planned]


@dataclasses.dataclass
class PlannedRun:
    """A checked run whose units are listed: where it writes, its :class:`Plan` and its record
    (config.yaml's ``run`` section, :func:`taskextrap.experiments.run_record.run_record`)."""

    name: str
    options: RunOptions
    out_dir: Path
    cache_dir: Path
    plan: Plan
    record: dict


def plan_run(
    name: str, options: RunOptions | Settings, out_dir: Path | None = None, make_dirs: bool = True
) -> PlannedRun | None:
    """Check experiment ``name`` under ``options``, list its units and make its folders (unless
    ``make_dirs`` is False: only to list the units); None for a non-lead shard, whose part is
    done inside the experiment.

    Before anything is created or computed, a folder that holds another configuration's run is
    refused (:func:`~taskextrap.experiments.run_record.check_same_run`) and so is an ``--out``
    that cannot be created (:func:`check_creatable`). The folders are made once the plan is
    built (:func:`open_run`), so a run refused while planning (a dev split its family cannot
    make, say) leaves no empty folder behind.
    """
    run = _plan(name, options, out_dir, checks=make_dirs)
    if run is not None and make_dirs:
        open_run(run)
    return run


def options_of(given: RunOptions | Settings) -> RunOptions:
    """The options of a run given as options or as their resolved :class:`Settings`."""
    return given.options if isinstance(given, Settings) else given


def resolved(name: str, given: RunOptions | Settings) -> Settings:
    """Experiment ``name``'s :class:`Settings` of ``given``: as they are when already resolved,
    else ``Experiment.check`` of the options (which refuses what the experiment does not take)."""
    return given if isinstance(given, Settings) else get_experiment(name).check(given)


def _plan(name: str, given: RunOptions | Settings, out_dir: Path | None, checks: bool) -> PlannedRun | None:
    """:func:`plan_run` without making the run's folders (with ``checks``: its folder and
    ``--out`` are checked first)."""
    experiment = get_experiment(name)
    settings = resolved(name, given)  # the options resolved, once
    options = settings.options
    out_dir = Path(out_dir or run_dir_name(name, options))
    options = dataclasses.replace(options, run_dir=out_dir)
    settings = dataclasses.replace(settings, options=options)
    record = run_record(name, settings)
    cache_dir, plot_dir = Path(options.out) / "units", (out_dir / "plots" if options.plots else None)
    if checks:
        if options.shard.is_lead:  # the lead writes the results, so it alone checks the folder
            check_same_run(out_dir, record)
        for folder in (out_dir, cache_dir):  # a bad --out fails now, before any work
            check_creatable(folder)
        if not options.shard.is_lead:  # its part of the work is done while planning, into the unit cache
            check_writable(cache_dir)
    plan = experiment.run(settings, cache_dir, plot_dir)
    if plan is None:  # a non-lead process of a sharded run
        return None
    bind(plan.units, name, options)
    return PlannedRun(name, options, out_dir, cache_dir, plan, record)


def open_run(run: PlannedRun) -> None:
    """Make ``run``'s folder and the unit cache (a one-line error when they cannot be written)
    and write the run's record into its config.yaml before any unit runs
    (:func:`~taskextrap.experiments.run_record.claim_run`)."""
    for folder in (run.out_dir, run.cache_dir):
        check_writable(folder)
    if run.options.shard.is_lead:
        claim_run(run.out_dir, run.record)


def check_run_folders(runs: list[tuple]) -> None:
    """:func:`~taskextrap.experiments.run_record.check_same_run` for every run of ``runs``
    (``(name, options, out_dir or None)``, as :func:`run_experiments` takes them): a command
    that runs several experiments one after another refuses a folder of another configuration
    before the first starts, not when that experiment's turn comes."""
    for name, given, out_dir in runs:
        settings = resolved(name, given)
        if settings.options.shard.is_lead:
            check_same_run(Path(out_dir or run_dir_name(name, settings.options)), run_record(name, settings))


def write_run(run: PlannedRun, results: dict, wall_s: float, timing_extra: dict | None = None) -> dict:
    """Assemble ``run``'s rows from the units' ``results`` (by (name, fingerprint)) and write
    results.json, results.md and config.yaml (its ``run`` section first) into its folder, then,
    when the run makes plots, remove from its plots/ the plots of other runs
    (:func:`taskextrap.experiments.plotfiles.prune`; a ``--no-plots`` run leaves plots/ as it
    is: it draws nothing, so it cannot tell a figure of its own from another's); returns the
    results. ``wall_s`` is the time its units took (of all runs executed together, which
    ``timing_extra`` then says)."""
    import yaml

    t = time.perf_counter()
    plot_dir = run.out_dir / "plots"
    before = plotfiles.stamps(plot_dir)
    rows, config, seeds, timing = run.plan.assemble({u.name: results[(u.name, u.key)] for u in run.plan.units})
    drawn_now = [name for name, stamp in plotfiles.stamps(plot_dir).items() if before.get(name) != stamp]
    options = run.options
    comparisons = compare_rows(rows, run.plan.reference)
    if options.split == "dev":  # the paper's numbers belong to its own (test) tasks only
        rows = [r.replace(paper_value=None, paper_ci95=None) for r in rows]
    results = {
        "experiment": run.name,
        "protocol": options.protocol,
        "profile": options.profile,
        "seeds": seeds,
        "rows": rows,
        "comparisons": comparisons,
        "timing": {"wall_s": wall_s + time.perf_counter() - t, **timing, **(timing_extra or {})},
        "environment": environment_info(options.device),
        "config": {
            **config,
            "split": options.split,
            # the torch threads of every unit: they move a float's last digits (the unit keys hold them)
            "threads": options.unit_cpus,
            "test_seed": config.get("test_seed", options.seed_of_tests),
            "family": options.family,
            "family_code_hash": run.record.get("family_code_hash"),
        },
    }
    validate_results(results)
    write_json_atomic(run.out_dir / "results.json", results)
    write_text_atomic(run.out_dir / "results.md", results_markdown(results))
    write_text_atomic(
        run.out_dir / "config.yaml", yaml.safe_dump(plain({"run": run.record, **config}), sort_keys=False)
    )
    if options.plots:
        plotfiles.prune(plot_dir, {u.draw_id for u in run.plan.units}, drawn_now)
    return results


def check_creatable(folder: Path) -> None:
    """A one-line :class:`TaskextrapError` when ``folder`` cannot be created or written into
    (a file in the way, no permission, a read-only disk), found without creating anything: the
    nearest part of its path that exists must be a folder this process may write into."""
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise TaskextrapError(f"cannot write to {folder}: {existing} is a file (choose another --out)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TaskextrapError(f"cannot write to {folder}: {existing} is not writable (choose another --out)")


def check_writable(folder: Path) -> None:
    """Create ``folder`` and write and delete a probe file in it; a one-line
    :class:`TaskextrapError` when that fails (a file in the way, no permission, read-only disk)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")  # unique: shards share folders
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TaskextrapError(f"cannot write to {folder}: {reason} (choose another --out)") from None


def run_dir_name(name: str, options: RunOptions) -> Path:
    """The run directory: ``out/name-protocol-profile``, then the ``--family`` given
    (:func:`family_tag`: ``myfam:bump`` gives ``-myfam.bump``), ``-dev`` for the dev split,
    ``-testNNNN`` for a test seed other than the default, ``-splitN`` for a split seed, ``-seedS``
    for a one-seed run (``--seed S``) and the
    base-model tags of a ``--model``/``--dtype``/``--load-in-4bit`` (:func:`_model_parts`), so no
    run overwrites another's results. A run with none of these keeps the plain name."""
    parts = [name, options.protocol, options.profile]
    if options.family is not None:
        parts.append(family_tag(options.family))
    if options.split != "test":
        parts.append(options.split)
    if options.test_seed is not None:
        parts.append(f"test{options.test_seed}")
    if options.split_seed is not None:
        parts.append(f"split{options.split_seed}")
    if options.seed is not None:  # one seed of an array job: its results.json stands beside the others'
        parts.append(f"seed{options.seed}")
    if options.interval_scales is not None:  # intervals from the family's own dev split: beside the others
        parts.append("calibrated")
    parts += _model_parts(options.extra)
    return Path(options.out) / "-".join(parts)


_TAG_LIMIT = 60  # characters of a family's part of a folder name (a long module path is shortened)
_TAG_SAFE = re.compile(r"[A-Za-z0-9_-]+(:[A-Za-z0-9_-]+)?")  # specs the folder name shows exactly


def family_tag(spec: str) -> str:
    """A ``--family`` spec as part of a folder name, never the same for two specs.

    A built-in name (letters, digits, ``_`` and ``-``: ``quadratic``, ``poly-sin-tanh``) is kept
    as it is, and so is a ``module:attr`` of such names, with ``.`` for ``:`` (``myfam:bump`` ->
    ``myfam.bump``). Any other spec is made file-name safe (``:`` becomes ``.``, a character
    other than a letter, digit, ``.``, ``_`` or ``-`` becomes ``_``) and, since that loses
    information (``a.b:c`` and ``a:b.c`` would both be ``a.b.c``), ends with ``.`` and 8 hex
    digits of the spec's hash; so does a tag cut at 60 characters.
    """
    tag = re.sub(r"[^A-Za-z0-9._-]", "_", spec.replace(":", "."))
    if _TAG_SAFE.fullmatch(spec) and len(tag) <= _TAG_LIMIT:
        return tag
    return f"{tag[: _TAG_LIMIT - 9]}.{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


def _model_parts(extra: dict) -> list[str]:
    """The run-directory tags of a base-model choice: ``model<name>.<8 hex of its files' hash>``
    for a ``--model`` (its folder's name, or the hub id made file-name safe:
    ``llm.hub.model_tag``), then the ``--dtype`` and ``4bit``; none for the default model, so
    the directories of those runs keep their names."""
    parts = []
    if extra.get("model") is not None:
        from taskextrap.llm.hub import model_tag, resolve_model
        from taskextrap.llm.modeldir import model_fingerprint

        spec = str(extra["model"])
        parts.append(f"model{model_tag(spec)}.{model_fingerprint(resolve_model(spec))[:8]}")
    if extra.get("dtype") is not None:
        parts.append(str(extra["dtype"]))
    if extra.get("load_in_4bit"):
        parts.append("4bit")
    return parts
