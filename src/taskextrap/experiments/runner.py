"""Run a registered experiment and write DIR/results.json, results.md, config.yaml and plots."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

from taskextrap.errors import TaskextrapError
from taskextrap.experiments.registry import RunOptions, get_experiment
from taskextrap.report.compare import compare_rows
from taskextrap.files import write_json_atomic, write_text_atomic
from taskextrap.report.schema import environment_info, validate_results
from taskextrap.report.tables import results_markdown


def run_experiment(name: str, options: RunOptions, out_dir: Path | None = None) -> dict | None:
    """Run experiment ``name``; results go to ``out_dir`` (default: :func:`run_dir_name`).

    Under ``options.shard`` with several processes only the lead writes results; the others
    return None once their part is saved.

    Finished units (one family or ladder and one training seed) are cached under
    ``options.out/units`` and reused by a rerun with the same configuration, so an interrupted run
    resumes where it stopped and sibling experiments (``length`` and ``length-ablations``) share fits.

    ``results["comparisons"]`` holds the paired comparisons of ``rte`` (else each group's first
    method) with every other method of its group (:func:`taskextrap.report.compare.compare_rows`),
    computed from the per-(target, seed) arrays that rows built by ``make_row`` keep.
    """
    import torch
    import yaml

    experiment = get_experiment(name)
    experiment.check(options)
    out_dir = Path(out_dir or run_dir_name(name, options))
    options = dataclasses.replace(options, run_dir=out_dir)
    cache_dir, plot_dir = Path(options.out) / "units", (out_dir / "plots" if options.plots else None)
    for folder in (out_dir, cache_dir):  # before any work: a bad --out fails now, not after the run
        check_writable(folder)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    t = time.perf_counter()
    ran = experiment.run(options, cache_dir, plot_dir)
    if ran is None:  # a non-lead process of a sharded run
        return None
    rows, config, seeds, timing = ran
    comparisons = compare_rows(rows)
    if options.split == "dev":  # the paper's numbers belong to its own (test) tasks only
        rows = [r.replace(paper_value=None, paper_ci95=None) for r in rows]
    results = {
        "experiment": name, "protocol": options.protocol, "profile": options.profile, "seeds": seeds,
        "rows": rows, "comparisons": comparisons, "timing": {"wall_s": time.perf_counter() - t, **timing},
        "environment": environment_info(options.device),
        "config": {**config, "split": options.split, "test_seed": config.get("test_seed", options.seed_of_tests)},
    }
    validate_results(results)
    write_json_atomic(out_dir / "results.json", results)
    write_text_atomic(out_dir / "results.md", results_markdown(results))
    write_text_atomic(out_dir / "config.yaml", yaml.safe_dump(_plain(config), sort_keys=False))
    return results


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
    """The run directory: ``out/name-protocol-profile``, with ``-dev`` for the dev split,
    ``-testNNNN`` for a test seed other than the default, ``-splitN`` for a split seed and the
    base-model tags of a ``--model``/``--dtype``/``--load-in-4bit`` (:func:`_model_parts`), so no
    run overwrites another's results."""
    parts = [name, options.protocol, options.profile]
    if options.split != "test":
        parts.append(options.split)
    if options.test_seed is not None:
        parts.append(f"test{options.test_seed}")
    if options.split_seed is not None:
        parts.append(f"split{options.split_seed}")
    parts += _model_parts(options.extra)
    return Path(options.out) / "-".join(parts)


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


def _plain(obj):
    """Config as plain YAML-safe types."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)
