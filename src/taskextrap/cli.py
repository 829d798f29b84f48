"""Command line: ``taskextrap list | reproduce EXPERIMENT | report DIR...``.

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="taskextrap")
def cli():
    """Relational Task Extrapolator (RTE): reproduce the paper and apply RTE to your own tasks."""


@cli.command("list", short_help="List the experiments, profiles and options.")
def list_cmd():
    """List the registered experiments, their profiles and the options each takes."""
    from taskextrap.embed import EMBEDDINGS
    from taskextrap.experiments.registry import EXPERIMENTS, OPTION_FLAGS, all_experiments
    from taskextrap.tasks.observe import REGIME_PROTOCOLS

    for name in all_experiments():
        e = EXPERIMENTS[name]
        takes = " ".join(OPTION_FLAGS[o] for o in sorted(e.options)) or "-"
        click.echo(f"{name:22s} {e.description}\n{'':22s} profiles: {', '.join(e.profiles)}; takes: {takes}")
    protocols = sorted({p for table in REGIME_PROTOCOLS.values() for p in table})
    click.echo(f"\nprotocols: {', '.join(protocols)}; embeddings: {', '.join(EMBEDDINGS)}")


class _ReproduceCommand(click.Command):
    """``reproduce``, whose help ends with every experiment, its profiles and the options it takes."""

    def format_epilog(self, ctx, formatter):
        from taskextrap.experiments.registry import EXPERIMENTS, OPTION_FLAGS, all_experiments

        rows = []
        for name in all_experiments():
            e = EXPERIMENTS[name]
            takes = ", ".join(OPTION_FLAGS[o] for o in sorted(e.options)) or "none"
            rows.append((name, f"{e.description}. Profiles: {', '.join(e.profiles)}. Takes: {takes}"
                               + ("; --split dev." if e.dev else ".")))
        with formatter.section("Experiments (EXPERIMENT, or 'all'; the options above not named here are "
                               "common to all)"):
            formatter.write_dl(rows)


@cli.command(cls=_ReproduceCommand, short_help="Run an experiment and write its results.")
@click.argument("experiment")
@click.option("--profile", default="quick", show_default=True,
              help="quick: 1 seed, minutes; paper: the paper's sizes and seeds; tiny: seconds (tests). "
                   "`taskextrap list` shows each experiment's profiles.")
@click.option("--protocol", default="paper", show_default=True,
              help="paper: the authors' interleaved points; strict: sparse noisy context, queries elsewhere "
                   "(the experiments with a protocol table; `taskextrap list`).")
@click.option("--family", default=None,
              help="parameter: a built-in family name or module:attr of a ParametricFamily; "
                   "length: 'polynomial' or module:attr of a Ladder.")
@click.option("--seeds", type=int, default=None, help="Number of training seeds (overrides the profile).")
@click.option("--out", type=click.Path(), default="runs", show_default=True,
              help="Parent directory of the run directories.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--embedding", default=None,
              help="Proxy embedding estimator Gamma, one of the registered ones (`taskextrap list`) "
                   "[default: each regime's measured best: gradient for "
                   "parameter, adapted for length and composition].")
@click.option("--anchors", type=click.IntRange(1, 16), default=2, show_default=True,
              help="Nearest anchors whose predictions are averaged.")
@click.option("--model", default=None, metavar="DIR|OWNER/NAME",
              help="Language-model experiments: a local Hugging Face causal-LM directory, or a hub id "
                   "owner/name[@revision] (fetched once into the Hugging Face cache; safetensors only) "
                   "[default: the shipped character-level model].")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None,
              help="Language-model experiments: the dtype the base model is loaded in [default: float32].")
@click.option("--load-in-4bit", is_flag=True,
              help="Language-model experiments: load the base model in 4-bit NF4 (needs CUDA and bitsandbytes).")
@click.option("--shard", default=None, metavar="I/N",
              help="codeio: be process I of N sharing --out (one per GPU); process 0 writes the results "
                   "[default: RANK/WORLD_SIZE under torchrun, else 0/1].")
@click.option("--split", type=click.Choice(["test", "dev"]), default="test", show_default=True,
              help="test: the real held-out tasks; dev: a pseudo-extrapolation built from training tasks "
                   "only, on which every design choice is made.")
@click.option("--test-seed", type=int, default=None,
              help="Seed of the test (or dev) draws [default: the fresh seed 31337; 10000 gives the draws of "
                   "the runs before the integrity review].")
@click.option("--split-seed", type=int, default=None,
              help="codeio: seed of the split of the 961 pairs [default: 1; 0 gives the split of the earlier runs].")
@click.option("--no-plots", is_flag=True, help="Skip the plots.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def reproduce(experiment, profile, protocol, family, seeds, out, device, embedding, anchors, model, dtype,
              load_in_4bit, shard, split, test_seed, split_seed, no_plots, quiet):
    """Run EXPERIMENT (or 'all') and write results.json, results.md, config.yaml and plots."""
    from taskextrap.experiments.registry import RunOptions, all_experiments, get_experiment
    from taskextrap.experiments.runner import run_dir_name, run_experiment
    from taskextrap.sharding import Shard
    from taskextrap.report.tables import console_table

    if not out.strip():
        raise TaskextrapError("--out is empty: name the folder the run directories go in (e.g. --out runs)")
    out = Path(out)
    if dtype == "float16" and device != "cuda":
        raise TaskextrapError("--dtype float16 needs --device cuda (half precision on a CPU is slow and inexact; "
                              "use bfloat16 or float32)")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise TaskextrapError("--device cuda was asked for but no CUDA device is available")
    shard = Shard.parse(shard) if shard is not None else Shard.from_env()
    if shard.count > 1 and experiment == "all":
        raise TaskextrapError("--shard runs one experiment: name it instead of 'all'")
    options = RunOptions(profile=profile, protocol=protocol, family=family, seeds=seeds, out=out,
                         device=shard.device(device), embedding=embedding, anchors=anchors, plots=not no_plots,
                         progress=not quiet, extra=_model_extra(model, dtype, load_in_4bit), shard=shard,
                         split=split, test_seed=test_seed, split_seed=split_seed)
    names = all_experiments(in_all_only=True) if experiment == "all" else [experiment]
    for name in names:  # every option checked against every experiment before anything runs
        get_experiment(name).check(options)
    for name in names:
        results = run_experiment(name, options)
        if results is None:
            click.echo(f"shard {shard.index}/{shard.count} of {name}: its search scores are saved under {out}; "
                       "process 0 writes the results")
            continue
        click.echo(console_table(results))
        click.echo(f"written: {run_dir_name(name, options)}/results.json")


def _model_extra(model, dtype, load_in_4bit) -> dict:
    """The base-model choice for ``RunOptions.extra``: only what was given, so fingerprints of runs
    without these options stay as they were."""
    extra = {} if model is None else {"model": str(model)}
    if dtype is not None:
        extra["dtype"] = dtype
    if load_in_4bit:
        extra["load_in_4bit"] = True
    return extra


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
