"""Command line: ``taskextrap list | reproduce EXPERIMENT | report DIR... | fit | predict | evaluate``.

Heavy imports happen inside the commands so that ``--help`` stays fast. Every user error ends
the process with a one-line message and a non-zero exit status.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

from taskextrap import __version__
from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.validation import check_device


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="taskextrap")
def cli():
    """Relational Task Extrapolator (RTE): reproduce the paper and apply RTE to your own tasks."""


@cli.command("list", short_help="List the experiments, profiles and options.")
def list_cmd():
    """List the registered experiments in the paper's order, their profiles and the options each takes."""
    from taskextrap.embed import EMBEDDINGS
    from taskextrap.experiments.registry import EXPERIMENTS, OPTION_FLAGS
    from taskextrap.experiments.catalogue import paper_order
    from taskextrap.tasks.regimes import REGIMES

    for name in paper_order():
        e = EXPERIMENTS[name]
        takes = " ".join(OPTION_FLAGS[o] for o in sorted(e.options)) or "-"
        click.echo(f"{name:22s} {e.description}\n{'':22s} profiles: {', '.join(e.profiles)}; takes: {takes}")
    protocols = sorted({p for regime in REGIMES.values() for p in regime.protocols})
    click.echo(f"\nprotocols: {', '.join(protocols)}; embeddings: {', '.join(EMBEDDINGS)}")
    click.echo("\n--family takes a built-in name or a module:attr of your own:")
    for label, names, builtins in _family_kinds():
        click.echo(f"  {label} ({', '.join(names)}): {builtins}")


def _family_kinds() -> list[tuple[str, list[str], str]]:
    """``(what --family names, the experiments taking it, its built-in names)`` for each kind of
    ``--family`` (:func:`taskextrap.experiments.registry.family_kind`), experiments in the paper's
    order; a kind without built-ins, or an experiment whose resolver does not say, shows none."""
    from taskextrap.experiments.registry import EXPERIMENTS, family_kind
    from taskextrap.experiments.catalogue import paper_order
    from taskextrap.tasks import CompositionFamily, Ladder, ParametricFamily
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES, PRIMITIVE_SETS
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER

    sets = ", ".join(f"{s.name} ({'/'.join(f.name for f in s.families)})" for s in PRIMITIVE_SETS.values())
    known = {
        ParametricFamily: ("families", ", ".join(PARAMETER_FAMILIES)),
        Ladder: ("ladders", POLYNOMIAL_LADDER.name),
        CompositionFamily: ("primitive sets", sets),
    }
    groups: dict = {}
    for name in paper_order():
        e = EXPERIMENTS[name]
        if "family" in e.options:
            groups.setdefault(family_kind(e), []).append(name)
    listed = []
    for kind, names in groups.items():
        label, builtins = known.get(kind, (getattr(kind, "__name__", "other objects"), "none"))
        listed.append((label, names, builtins))
    return listed


class _ReproduceCommand(click.Command):
    """``reproduce``, whose help shows its options in groups (:data:`OPTION_GROUPS`: the common
    ones first) and ends with every experiment, its profiles and the options it takes."""

    # (heading, parameter names); a parameter in no group is shown under "Other options"
    OPTION_GROUPS = (
        (
            "Common options",
            (
                "profile",
                "seeds",
                "seed",
                "out",
                "split",
                "calibrate",
                "protocol",
                "family",
                "quiet",
                "no_plots",
                "help",
            ),
        ),
        ("Re-running a saved run", ("saved",)),
        ("The synthetic regimes' methods (parameter, length, composition)", ("embedding", "anchors", "test_seed")),
        (
            "Language-model experiments (parity, codeio, codeio-em, llm-geometry)",
            ("model", "dtype", "load_in_4bit", "split_seed"),
        ),
        ("Scaling out (GPUs, Ray, Slurm, torchrun)", ("device", "executor", "unit_cpus", "units_per_gpu", "shard")),
    )

    def format_options(self, ctx, formatter):
        help_option = self.get_help_option(ctx)  # named differently by click versions: "help" here
        records = {
            "help" if p is help_option else p.name: p.get_help_record(ctx)
            for p in self.get_params(ctx)
            if isinstance(p, click.Option)
        }
        records = {name: r for name, r in records.items() if r is not None}  # a hidden option has none
        placed: set[str] = set()
        for heading, names in (*self.OPTION_GROUPS, ("Other options", tuple(records))):
            rows = [records[n] for n in names if n in records and n not in placed]
            placed.update(names)
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)

    def format_epilog(self, ctx, formatter):
        from taskextrap.experiments.registry import EXPERIMENTS, OPTION_FLAGS
        from taskextrap.experiments.catalogue import paper_order

        rows = []
        for name in paper_order():
            e = EXPERIMENTS[name]
            takes = ", ".join(OPTION_FLAGS[o] for o in sorted(e.options)) or "none"
            rows.append(
                (
                    name,
                    f"{e.description}. Profiles: {', '.join(e.profiles)}. Takes: {takes}"
                    + ("; --split dev." if e.dev else "."),
                )
            )
        with formatter.section(
            "Experiments (EXPERIMENT, or 'all'; the options above not named here are common to all)"
        ):
            formatter.write_dl(rows)


def _run_options(f):
    """The options ``reproduce`` and ``sweep`` share (applied bottom-up, so listed in reverse)."""
    for option in reversed(
        [
            click.option(
                "--profile",
                default="quick",
                show_default=True,
                help="quick: 1 seed, minutes; paper: the paper's sizes and seeds, about half an hour per "
                "experiment; tiny: seconds, a plumbing check (its numbers are not results). "
                "`taskextrap list` shows each experiment's profiles.",
            ),
            click.option(
                "--seeds", type=int, default=None, help="Number of training seeds, 0..N-1 (overrides the profile)."
            ),
            click.option(
                "--seed",
                type=int,
                default=None,
                help="One training seed (e.g. $SLURM_ARRAY_TASK_ID): compute its units into --out; a later "
                "run with --seeds assembles every seed from the cache.",
            ),
            click.option(
                "--out",
                type=click.Path(),
                default="runs",
                show_default=True,
                help="Parent folder of the run folders (OUT/<experiment>-<protocol>-<profile>[-<family>]...) "
                "and of their shared unit cache (OUT/units).",
            ),
            click.option(
                "--device",
                default="cpu",
                show_default=True,
                metavar="cpu|cuda|cuda:N",
                help="Where the networks, probes and searches run (every experiment that fits one; "
                "`taskextrap list` says which take it).",
            ),
            click.option(
                "--executor",
                type=click.Choice(["serial", "ray"]),
                default="serial",
                show_default=True,
                help="serial: the units run one after another in this process; ray: each unit is a Ray task "
                "(on the cluster at RAY_ADDRESS, else a Ray instance started on this machine for the "
                "run; needs taskextrap[ray]).",
            ),
            click.option(
                "--unit-cpus",
                type=click.IntRange(1, 1024),
                default=1,
                show_default=True,
                help="Torch threads of each unit under either executor (under Ray also the CPUs its task "
                "declares). The thread count moves a float's last digits, so it is part of a unit's "
                "key: the same N gives the same numbers serially, under Ray and on any machine.",
            ),
            click.option(
                "--units-per-gpu",
                type=click.IntRange(1, 64),
                default=1,
                show_default=True,
                help="With --executor ray and --device cuda: how many units share one GPU at once (each "
                "Ray task declares 1/N of a GPU), so small units do not leave a large GPU idle.",
            ),
            click.option(
                "--test-seed",
                type=int,
                default=None,
                help="Seed of the test (or dev) draws [default: the fresh seed 31337; 10000 gives the draws "
                "of the runs before the integrity review].",
            ),
            click.option("--no-plots", is_flag=True, help="Skip the plots."),
            click.option("--quiet", is_flag=True, help="No progress bars."),
        ]
    ):
        f = option(f)
    return f


@cli.command(cls=_ReproduceCommand, short_help="Run an experiment and write its results.")
@click.argument("experiment", required=False)
@click.option(
    "--from",
    "saved",
    default=None,
    metavar="DIR|DIR/config.yaml",
    help="Run the saved run in DIR again: the experiment and options its config.yaml records, into DIR "
    "(reusing its --out's unit cache). Beside it only --out (run it elsewhere, e.g. from scratch "
    "into an empty folder), --quiet and --executor may be given.",
)
@click.option(
    "--protocol",
    default="paper",
    show_default=True,
    help="paper: the authors' interleaved points; strict: sparse noisy context, queries elsewhere "
    "(the experiments with a protocol table; `taskextrap list`).",
)
@click.option(
    "--family",
    default=None,
    help="A built-in name (`taskextrap list`) or module:attr of your own: a ParametricFamily "
    "(parameter*), a Ladder (length*) or a CompositionFamily (composition*).",
)
@click.option(
    "--embedding",
    default=None,
    help="Proxy embedding estimator Gamma, one of the registered ones (`taskextrap list`) "
    "[default: each regime's measured best: gradient for "
    "parameter, adapted for length and composition].",
)
@click.option(
    "--anchors",
    type=click.IntRange(1, 16),
    default=2,
    show_default=True,
    help="Nearest anchors whose predictions are averaged.",
)
@click.option(
    "--model",
    default=None,
    metavar="DIR|OWNER/NAME",
    help="Language-model experiments: a local Hugging Face causal-LM directory, or a hub id "
    "owner/name[@revision] (fetched once into the Hugging Face cache; safetensors only) "
    "[default: the shipped character-level model].",
)
@click.option(
    "--dtype",
    type=click.Choice(["auto", "float32", "bfloat16", "float16"]),
    default=None,
    help="Language-model experiments: the dtype the base model is loaded in [default: float32].",
)
@click.option(
    "--load-in-4bit",
    is_flag=True,
    help="Language-model experiments: load the base model in 4-bit NF4 (needs CUDA and bitsandbytes).",
)
@click.option(
    "--shard",
    default=None,
    metavar="I/N",
    help="codeio: be process I of N sharing --out (one per GPU); process 0 writes the results "
    "[default: RANK/WORLD_SIZE under torchrun, SLURM_PROCID/SLURM_NTASKS under srun, else 0/1].",
)
@click.option(
    "--split",
    type=click.Choice(["test", "dev"]),
    default="test",
    show_default=True,
    help="test: the real held-out tasks; dev: a pseudo-extrapolation built from training tasks "
    "only, on which every design choice is made.",
)
@click.option(
    "--split-seed",
    type=int,
    default=None,
    help="codeio: seed of the split of the 961 pairs [default: 1; 0 gives the split of the earlier runs].",
)
@click.option(
    "--calibrate",
    is_flag=True,
    help="Run the dev split first and choose rte's interval scale on it, then the test split with that "
    "scale (parameter, length, composition, composition-depth3; for a --family of your own).",
)
@_run_options
@click.pass_context
def reproduce(
    ctx,
    experiment,
    saved,
    protocol,
    family,
    embedding,
    anchors,
    model,
    dtype,
    load_in_4bit,
    shard,
    split,
    split_seed,
    calibrate,
    **common,
):
    """Run EXPERIMENT (or 'all', or the saved run of --from) and write results.json, results.md,
    config.yaml and plots into OUT/<experiment>-<protocol>-<profile>, the name followed by the
    --family, the dev split, --test-seed, --split-seed, --seed and the model when they are given.

    \b
    Examples:
      taskextrap reproduce parameter --profile tiny      # seconds: does it run?
      taskextrap reproduce parameter                     # Table 1, quick profile: about 1.5 min
      taskextrap reproduce parameter --family mymod:fam  # your family (mymod on PYTHONPATH)
      taskextrap reproduce --from runs/parameter-paper-quick   # a saved run, again

    \b
    Profiles (wall times on 2 CPU cores, approximate):
      tiny   seconds per experiment: a plumbing check, its numbers are not results
      quick  1 seed: 1 to 20 min per experiment (parameter 1.5, codeio 16)
      paper  the paper's sizes and seeds: 25 to 40 min per experiment, codeio over an hour
    """
    from taskextrap.experiments.catalogue import all_experiments
    from taskextrap.experiments.runner import check_run_folders, options_of, run_dir_name, run_experiment
    from taskextrap.report.tables import console_table

    if saved is not None:
        runs = [_saved_run(ctx, experiment, saved)]
    else:
        if experiment is None:
            raise TaskextrapError(
                "name the EXPERIMENT to run (or 'all'; `taskextrap list` shows them), or run a "
                "saved run again with --from DIR"
            )
        names = all_experiments(in_all_only=True) if experiment == "all" else [experiment]
        options = _options(
            common,
            protocol=protocol,
            family=family,
            embedding=embedding,
            anchors=anchors,
            extra=_model_extra(model, dtype, load_in_4bit, common["device"]),
            shard=_shard(shard, names),
            split=split,
            split_seed=split_seed,
        )
        # every option checked against every experiment before anything runs; each run keeps the
        # settings its options resolved to (the --family object among them), so none is resolved twice
        runs = [(name, _check(name, options), None) for name in names]
    if calibrate:
        from taskextrap.experiments.runner import calibrate_on_dev

        if saved is not None or experiment == "all" or split != "test":
            raise TaskextrapError(
                "--calibrate runs one experiment's dev split, then its test split: not with --from, all or --split dev"
            )
        options, note = calibrate_on_dev(experiment, options)
        click.echo(note)
        runs = [(experiment, options, None)]
    if len(runs) > 1:  # 'all' refuses a folder of another configuration now, not hours in (one run: as planned)
        check_run_folders(runs)
    for name, given, out_dir in runs:
        results = run_experiment(name, given, out_dir)
        options = options_of(given)
        if results is None:
            click.echo(
                f"shard {options.shard.index}/{options.shard.count} of {name}: its search scores are saved "
                f"under {options.out}; process 0 writes the results"
            )
            continue
        click.echo(console_table(results))
        click.echo(f"written: {out_dir or run_dir_name(name, options)}/results.json")


# What may be given beside --from: where the run goes and how it is shown or executed, none of
# which changes its numbers (the executors give the same results: experiments.executors).
_WITH_FROM = ("saved", "out", "quiet", "executor", "units_per_gpu")


def _saved_run(ctx, experiment: str | None, path: str):
    """``(name, settings, run folder or None)`` of the saved run at ``path`` (``--from``): its
    record read back (:mod:`taskextrap.experiments.run_record`) and checked like a new run's;
    a one-line error for any option given beside it but those of :data:`_WITH_FROM` and for a
    user family whose code changed since, run into the same folder; one warning when the code
    that made it is not this code."""
    import dataclasses

    from click.core import ParameterSource

    from taskextrap.experiments.run_record import (
        family_code_changed,
        options_from_record,
        read_saved_run,
        run_record,
        warn_if_code_changed,
    )

    given = [
        max(p.opts, key=len)
        for p in ctx.command.params
        if p.name not in (*_WITH_FROM, "experiment")
        and ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)
    ]
    if experiment is not None:
        given.insert(0, f"EXPERIMENT {experiment!r}")
    if given:
        raise TaskextrapError(
            f"--from runs the saved run with the options it recorded: drop {', '.join(given)} "
            "(beside --from give only --out, --quiet, --executor or --units-per-gpu)"
        )
    record, folder = read_saved_run(path)
    on_command_line = {n: ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE for n in _WITH_FROM}
    out = _out_folder(ctx.params["out"]) if on_command_line["out"] else folder.parent
    overrides = {k: ctx.params[k] for k in ("executor", "units_per_gpu") if on_command_line[k]}
    if overrides.get("executor") == "serial":  # units share a GPU only as Ray tasks
        overrides.setdefault("units_per_gpu", 1)
    name, options = options_from_record(record, out=out, progress=not ctx.params["quiet"], **overrides)
    shard = _shard(None, [name])
    options = dataclasses.replace(options, shard=shard, device=shard.device(options.device))
    try:
        check_device(options.device)
    except TaskextrapError as exc:
        raise TaskextrapError(f"--from {path}: run.device: {exc}") from None
    settings = _check(name, options)
    now = run_record(name, settings)
    changed = family_code_changed(record, now)
    if changed and not on_command_line["out"]:
        raise TaskextrapError(
            f"--from {path}: the family's code changed since this run ({changed[0]} -> {changed[1]}), "
            "so its results would be replaced by other code's: give --out to run it into another folder"
        )
    warn_if_code_changed(record, now)
    return name, settings, None if on_command_line["out"] else folder


@cli.command(short_help="Run several experiments' units together (Ray or serial).")
@click.argument("experiments", nargs=-1, required=True)
@click.option(
    "--protocols",
    "protocols",
    multiple=True,
    metavar="P[,P...]",
    help="Observation protocols for the experiments that take one (comma-separated or repeated) [default: paper].",
)
@click.option(
    "--splits",
    "splits",
    multiple=True,
    metavar="S[,S...]",
    help="test and/or dev; an experiment without a dev split runs test only [default: test].",
)
@click.option("--list", "list_only", is_flag=True, help="List every unit and whether it is cached; run nothing.")
@_run_options
def sweep(experiments, protocols, splits, list_only, **common):
    """List every unit of work of EXPERIMENTS (or 'all') x protocols x splits x seeds up front,
    run them through one executor, then write each run's results.json from the units."""
    from taskextrap.experiments.runner import plan_run, run_dir_name, run_experiments
    from taskextrap.experiments.sweep import sweep_runs, unit_listing

    options = _options(common)
    runs = sweep_runs(list(experiments), _comma_list(protocols) or ["paper"], _comma_list(splits) or ["test"], options)
    checked = [(name, _check(name, opts), out) for name, opts, out in runs]  # all checked first, resolved once
    if list_only:
        click.echo(unit_listing([plan_run(name, settings, make_dirs=False) for name, settings, _ in checked]))
        return
    results = run_experiments(checked)
    for (name, settings, _), res in zip(checked, results, strict=True):
        assert res is not None  # sweep takes no --shard: this process is the lead
        click.echo(f"written: {run_dir_name(name, settings.options)}/results.json ({len(res['rows'])} rows)")
    click.echo(f"{len(runs)} runs; one table: taskextrap report {options.out}/<run>/results.json ...")


def _comma_list(values) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _options(common: dict, **specific):
    """``RunOptions`` from the shared options (``_run_options``) and an experiment's own."""
    from taskextrap.experiments.registry import RunOptions

    out = _out_folder(common["out"])
    device = common["device"]
    try:
        check_device(device)
    except TaskextrapError as exc:
        raise TaskextrapError(f"--device: {exc}") from None
    shard = specific.get("shard")
    if shard is not None:
        device = shard.device(device)
    return RunOptions(
        profile=common["profile"],
        seeds=common["seeds"],
        seed=common["seed"],
        out=out,
        device=device,
        plots=not common["no_plots"],
        progress=not common["quiet"],
        test_seed=common["test_seed"],
        executor=common["executor"],
        unit_cpus=common["unit_cpus"],
        units_per_gpu=common["units_per_gpu"],
        **specific,
    )


def _out_folder(text: str) -> Path:
    """``--out`` as a folder: a one-line error when it is empty or names an existing file."""
    if not text.strip():
        raise TaskextrapError("--out is empty: name the folder the run directories go in (e.g. --out runs)")
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise TaskextrapError(f"--out {text} is a file: --out must be a folder (the run folders go inside it)")
    return out


def _shard(text: str | None, names: list[str]):
    """This process's shard: ``--shard I/N``, else the launcher's (torchrun, srun). A launcher's
    several processes on an experiment that runs in one get a one-line error, not N copies."""
    import os

    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.sharding import Shard

    if text is not None:
        shard = Shard.parse(text)
    else:
        shard = Shard.from_env()
        if shard.count > 1 and any("shard" not in get_experiment(n).options for n in names):
            world = "WORLD_SIZE" if "WORLD_SIZE" in os.environ else "SLURM_NTASKS"
            raise TaskextrapError(
                f"{world}={shard.count} makes this process {shard.index} of {shard.count}, but "
                f"{', '.join(names)} runs in one process; run one task per job step (a Slurm "
                "array with --seed S) or use --executor ray"
            )
    if shard.count > 1 and len(names) > 1:
        raise TaskextrapError("--shard runs one experiment: name it instead of 'all'")
    return shard


def _check(name: str, options):
    """The run's settings (``Experiment.check``): a one-line error for options it refuses."""
    from taskextrap.experiments.catalogue import get_experiment

    return get_experiment(name).check(options)


def _model_extra(model, dtype, load_in_4bit, device: str = "cpu") -> dict:
    """The base-model choice for ``RunOptions.extra``: only what was given, so fingerprints of runs
    without these options stay as they were."""
    if dtype == "float16" and not str(device).startswith("cuda"):
        raise TaskextrapError(
            "--dtype float16 needs --device cuda (half precision on a CPU is slow and inexact; use bfloat16 or float32)"
        )
    extra: dict[str, str | bool] = {} if model is None else {"model": str(model)}
    if dtype is not None:
        extra["dtype"] = dtype
    if load_in_4bit:
        extra["load_in_4bit"] = True
    return extra


def _column_options(f):
    """The options naming a data table's columns (fit, predict and evaluate share them)."""
    for option in reversed(
        [
            click.option("--task-col", default="task", show_default=True, help="The column naming each row's task."),
            click.option("--x-col", default="x", show_default=True, help="The input column."),
            click.option("--y-col", default="y", show_default=True, help="The output column."),
            click.option(
                "--split-col",
                default=None,
                help="A column labelling each task: 'train' tasks are the library, any other label is held out.",
            ),
            click.option(
                "--param-cols", default="", help="Comma-separated columns of known task parameters (constant per task)."
            ),
        ]
    ):
        f = option(f)
    return f


def _columns(kw: dict):
    from taskextrap.workflow import Columns

    params = tuple(c for c in _comma_list([kw.pop("param_cols")]) if c)
    return Columns(kw.pop("task_col"), kw.pop("x_col"), kw.pop("y_col"), kw.pop("split_col"), params)


@cli.command(short_help="Fit RTE on your own observed tasks (CSV, Parquet, NPZ) and save it.")
@click.option(
    "--data",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="A table of observations (repeatable).",
)
@click.option("--regime", default="parameter", show_default=True, help="The regime (parameter; see docs/own-data.md).")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The model folder to write.")
@_column_options
@click.option("--protocol", default="paper", show_default=True, help="paper or strict: how library tasks are observed.")
@click.option("--min-context", type=int, default=None, help="The fewest context points the model will read.")
@click.option("--steps", type=int, default=None, help="Psi's training steps (default: RTE's, 1000).")
@click.option("--pairs", type=int, default=None, help="Training pairs per pass (default: RTE's, 20000).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option(
    "--interpolant", default="pchip", show_default=True, help="How an observed task is read between its points."
)
@click.option(
    "--outside", default="error", show_default=True, help="A read outside a task's observed range: error or hold."
)
@click.option(
    "--calibrate/--no-calibrate",
    default=True,
    show_default=True,
    help="Choose the interval scale on a dev split of the library's own tasks (a second fit).",
)
@click.option("--dev-order", default=None, help="A known parameter: hold out its largest tasks for the dev split.")
@click.option(
    "--peers/--no-peers",
    default=False,
    show_default=True,
    help="Also choose every peer's settings and interval scale on the dev split now (else evaluate does, once).",
)
@click.option(
    "--context-size",
    type=int,
    default=None,
    help="Context points of the dev split's targets (default: the protocol's); as you will predict.",
)
@click.option(
    "--context", "how", default="random", show_default=True, help="The dev targets' context: random or first (by x)."
)
@click.option("--name", default=None, help="The library's name (default: the first file's stem).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def fit(data, regime, out, protocol, min_context, steps, pairs, seed, device, quiet, context_size, how, **kw):
    """Fit RTE on the observed tasks of --data (one row per observation) and save the model into
    --out (config.json, model.safetensors, fit.json), with its interval scale chosen on a dev
    split of the library's own tasks."""
    from taskextrap.operators.train import TrainConfig
    from taskextrap.workflow import DevCalibration, Reading, fit_observed

    if regime != "parameter":
        raise TaskextrapError(
            f"fit reads the parameter regime's data so far, not {regime!r} (a composition library from data: "
            "read_tasks(..., group='family').primitives() in Python, docs/own-data.md)"
        )
    columns = _columns(kw)
    settings: dict = {"protocol": protocol, "seed": seed, "device": check_device(device), "min_context": min_context}
    if steps is not None:
        settings["train"] = TrainConfig(steps=steps, batch=4096, eval_every=min(100, steps))
    if pairs is not None:
        settings["n_pairs"] = pairs
    reading = Reading(kw.pop("interpolant"), kw.pop("outside"), kw.pop("name") or Path(data[0]).stem)
    peers = kw.pop("peers")
    dev = DevCalibration(kw.pop("dev_order"), context_size, how, peers) if kw.pop("calibrate") else None
    rte, record = fit_observed(list(data), columns, out, settings, dev, reading, verbose=not quiet)
    click.echo(
        f"library: {record['tasks']['library']} tasks on x in [{record['domain'][0]:g}, {record['domain'][1]:g}]"
    )
    if "dev" in record:
        d = record["dev"]
        click.echo(
            f"interval scale {d['interval_scale']:g}, chosen on the dev split ({d['split']}): "
            f"90% interval covers {d['coverage']:.3f} of {d['targets']} dev targets' queries "
            f"(raw {d['coverage_raw']:.3f})"
        )
        if "methods" in d:  # fit --peers: every peer at its dev choice, on the same dev targets as rte
            ranked = sorted(((m, c["dev_mse"]) for m, c in d["methods"].items()), key=lambda r: r[1])
            click.echo(
                f"dev split, mean MSE over its {d['targets']} targets: rte {d['mse']:.4g}; "
                + ", ".join(f"{m} {v:.4g}" for m, v in ranked)
                + " (in-sample for the peers' settings; evaluate compares them on held-out targets)"
            )
        if "rte-gp" in d:  # the context posterior evaluate scores as rte-gp, chosen on the same dev targets
            g = d["rte-gp"]
            click.echo(
                f"rte-gp: a {g['kernel']} residual GP"
                + ("" if g.get("degree") is None else f" and a degree-{g['degree']} polynomial")
                + f" on rte's prediction, {g['share']:.3g} of the precision "
                f"against meta-gp's, interval scale {g['interval_scale']:g}, "
                + ("one width for all" if g.get("dof") is None else f"width following each context (dof {g['dof']:g})")
                + " (out of fold on the dev targets: "
                f"covers {g['out_of_fold_coverage']:.3f})"
            )
    shown = ", ".join(f"{k}={v!r}" for k, v in rte.get_params().items() if k != "verbose")
    click.echo(f"settings: {shown}")
    click.echo(f"saved: {out} (fit {record['fit_s']:.1f} s, total {record['total_s']:.1f} s)")


# predict, evaluate and index: a model folder is data; importing the code its family names needs consent
_trust_code_option = click.option(
    "--trust-code",
    is_flag=True,
    help="Import the user module the model's family names (module:attr), which runs its code; a folder whose "
    "library is user code is refused without it.",
)


@cli.command(short_help="Predict targets from their contexts with a saved model.")
@click.option("--model", required=True, type=click.Path(path_type=Path), help="A folder fit wrote.")
@click.option("--context", required=True, type=click.Path(path_type=Path), help="Targets' context points (task, x, y).")
@click.option("--query", default=None, type=click.Path(path_type=Path), help="Query inputs (task, x); default a grid.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The predictions CSV to write.")
@_trust_code_option
@_column_options
def predict(model, context, query, out, trust_code, **kw):
    """Per query point: the mean, the 90% interval's bounds, and the candidate used (anchor task,
    its posterior weight and shift scale)."""
    from taskextrap.workflow import predict_observed, write_predictions

    columns = _columns(kw)
    rows = predict_observed(model, context, query, columns, trust_code=trust_code)
    write_predictions(rows, out)
    click.echo(f"written: {out} ({len(rows['task'])} predictions of {len(set(rows['task'].tolist()))} targets)")


@cli.command(short_help="Evaluate a saved model on held-out targets beside the baselines, classics and peers.")
@click.option("--model", required=True, type=click.Path(path_type=Path), help="A folder fit wrote.")
@click.option("--data", required=True, type=click.Path(path_type=Path), help="Held-out targets' observations.")
@click.option("--context-size", type=int, default=8, show_default=True, help="Context points per target.")
@click.option(
    "--context",
    "how",
    default="random",
    show_default=True,
    help="Which points are the context: random or first (by x).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the random contexts.")
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Also write the evaluation as JSON.")
@click.option(
    "--plot",
    "plot_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="Also draw evaluation.png into this folder: a few targets with every method's prediction, and the errors.",
)
@click.option(
    "--skip",
    multiple=True,
    help="A peer to leave out, neither chosen nor scored (repeat it, or commas: --skip cnp,ctx-gp); cnp trained "
    "for 32 times rte's steps is the dearest row.",
)
@_trust_code_option
@_column_options
def evaluate(model, data, context_size, how, seed, out, plot_dir, trust_code, skip, **kw):
    """Split every held-out target's points into a context and queries (library tasks, by the
    split column or by id, are left out and counted), predict with rte and the method table's
    rows for a user's library, and print the verdict, the errors and the paired differences
    over targets."""
    from taskextrap.files import write_json_atomic
    from taskextrap.evaluation import evaluate_observed, evaluation_table
    from taskextrap.workflow import Contexts

    columns = _columns(kw)
    skip = tuple(s.strip() for item in skip for s in item.split(",") if s.strip())
    result = evaluate_observed(model, data, Contexts(context_size, how, seed), columns, trust_code, plot_dir, skip)
    click.echo(evaluation_table(result))
    if result["plot"] is not None:
        click.echo(f"drawn: {result['plot']}")
    if out is not None:
        write_json_atomic(out, result)
        click.echo(f"written: {out}")


@cli.command(short_help="Embed a large Parquet library a row group at a time (serial or Ray).")
@click.option("--model", required=True, type=click.Path(path_type=Path), help="A folder fit wrote.")
@click.option(
    "--data", required=True, type=click.Path(path_type=Path), help="A Parquet library, each task in one row group."
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The index folder to write (resumes).")
@click.option("--engine", type=click.Choice(["serial", "ray"]), default="serial", show_default=True)
@click.option("--workers", type=int, default=2, show_default=True, help="Ray workers (a local instance's CPUs).")
@click.option("--near", "n_near", type=int, default=8, show_default=True, help="Near anchors kept per task.")
@click.option("--reference", type=int, default=3200, show_default=True, help="Seeded reference tasks searched.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--task-col", default="task", show_default=True, help="The column naming each row's task.")
@click.option("--x-col", default="x", show_default=True, help="The input column.")
@click.option("--y-col", default="y", show_default=True, help="The output column.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@_trust_code_option
def index(model, data, out, engine, workers, n_near, reference, seed, task_col, x_col, y_col, quiet, trust_code):
    """Embed every task of --data with --model's Γ and give each its --near nearest reference tasks,
    one row group at a time on --engine (``taskextrap.streaming``): a Parquet part per row group
    and index.json in --out. Ray connects to RAY_ADDRESS when set, else starts --workers CPUs here."""
    from taskextrap.streaming import Engine, NearAnchors, stream_index

    near = NearAnchors(n_near, reference, seed)
    record = stream_index(
        model, data, out, Engine(engine, workers), near, (task_col, x_col, y_col), not quiet, trust_code
    )
    s = record["seconds"]
    click.echo(
        f"indexed {record['tasks']} tasks in {len(record['row_groups'])} row groups on {engine} "
        f"({record['workers']} worker(s)): embedding {s['embed']:.1f} s, near anchors {s['near']:.1f} s; "
        f"written: {out}"
    )


@cli.command(short_help="Render one table from several runs' results.")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
def report(dirs):
    """Render one table from the results.json of several run directories (or of results files)."""
    from taskextrap.report.tables import render_report

    click.echo(render_report([str(d) for d in dirs]))


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warning: <message>`` on one line of stderr for the package's warnings, written past any
    progress bar (``tqdm.write``); Python's usual display for others."""
    if issubclass(category, TaskextrapWarning):
        from tqdm import tqdm

        tqdm.write(f"warning: {message}", file=sys.stderr)
    else:
        _python_show(message, category, filename, lineno, file, line)


_python_show = warnings.showwarning


def _one_line(message: str) -> str:
    """``message`` on one printable line: a line break or control character that came from the
    user's input (a path, an option value) is shown escaped, as Python would write it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message.strip())


def main(argv=None):
    """Entry point: runs the CLI and turns user errors into one line on stderr and exit status 2;
    the package's warnings (a damaged cache file recomputed) are one line on stderr too."""
    warnings.showwarning = _show_warning
    try:
        cli.main(args=argv, standalone_mode=False)
    except TaskextrapError as exc:
        click.echo(f"error: {_one_line(str(exc))}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare ``taskextrap``: the help, as for --help
        click.echo(exc.ctx.get_help())
        sys.exit(0)
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code or 2)
    sys.exit(0)


if __name__ == "__main__":
    main()
