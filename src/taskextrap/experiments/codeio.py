"""CodeIO string compositions with a language model (paper §4.2, Table 5; Appendix I): the
experiment, its profiles, units and rows. What a seed runs (the three fine-tuning runs, every
method, the prompt records) is in :mod:`taskextrap.sequence_runs.codeio`, which says how each
method answers.

Groups: ``held-out-pairs`` (every scored test task) and ``novel-pairs`` (the held-out pairs
whose behaviour differs from every training pair and every single, ``novel_test_pairs``).
Diagnostics: ``decomposition-found`` (the chosen candidate behaves like the true pair on
``tasks.strings.PROBE``), ``answer-in-prompt`` (per method, the fraction of tasks whose final
prompt shows the query's answer, ``llm.codeio.answer_in_prompt``: 0 by construction) and
``primitives`` / ``base-model`` (the base model, before any fine-tuning, executing each single
primitive from 3 shots on fresh strings). Accuracy is exact match of the stripped answer; its
interval is a bootstrap over the test tasks. The run directory keeps every final prompt with its
task, answer and prediction (``prompts.jsonl``). ``--split dev`` holds out a seeded fifth of the
training pairs and never touches the test pairs. Finished units are cached; a unit's runs and
search resume from their checkpoints.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from taskextrap.profiles import TINY_SFT, CodeIOProfile
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.registry import RunOptions, register
from taskextrap.experiments.units import Plan, UnitResult, fingerprint, gather, seed_units, unit_done
from taskextrap.report.schema import accuracy_row
from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap.sequence_runs.codeio import PAIR_METHODS, PROMPT_METHODS, SPLIT_SEED, Split

if TYPE_CHECKING:  # the llm extra is imported only when an experiment runs
    from taskextrap.llm.pretrain import BaseModel

GROUPS = ("held-out-pairs", "novel-pairs")  # "held-out-pairs" is the paper's Table 5 group

# paper: the authors' ~1,150 steps of 8 (4 epochs of 2,307 examples), lr 2e-4, 5 warm-up steps;
# all 192 held-out tasks; one seed (the bounded search scores about 40% of the full one's
# 571,392 sequences per seed: benchmarks/results/codeio-search.json). The default model's
# full_lr, score_shots and anchored were chosen on dev (codeio-recipe-dev.json; docs/design.md
# "Sequence models": full fine-tuning 0.353 against the paper's LoRA 0.085, 153 dev tasks).
PAPER = CodeIOProfile(
    name="paper",
    seeds=(0,),
    sft_steps=1150,
    sft_batch=8,
    sft_lr=2e-4,
    warmup=5,
    full_lr=5e-4,
    score_shots=True,
    anchored=True,
)
PROFILES = {
    # quick: 6 of the 192 held-out tasks (3 novel), 150 steps per run (the paper's 1,150 would
    # take most of the budget) at a higher learning rate; the full search would score 992 x 3
    # leave-one-out sequences per task (the bounded one scores every candidate's first).
    "quick": dataclasses.replace(
        PAPER,
        name="quick",
        sft_steps=150,
        sft_lr=1e-3,
        warmup=10,
        n_tasks=6,
        base_queries=5,
        full_lr=1e-3,
        full_warmup=10,
    ),
    "paper": PAPER,
    # tiny: for tests only (with a tiny model the search over all 992 candidates takes seconds).
    "tiny": CodeIOProfile(**TINY_SFT, cot_samples=2, answer_tokens=8, cot_tokens=8, base_queries=1, max_tied=4),
}


def split_of(options: RunOptions) -> Split:
    """The split a run's options ask for (``--split``, ``--split-seed``, ``--test-seed``)."""
    seed = SPLIT_SEED if options.split_seed is None else int(options.split_seed)
    return Split(options.split, seed, options.seed_of_tests)


def build_rows(values: dict, novel: np.ndarray) -> list[dict]:
    """Every row: each pair method on both groups (the novel group when any novel task was
    scored), the decomposition-found diagnostics, answer-in-prompt of every prompting method
    (when ``values`` has them) and the base model on single primitives."""
    rows: list[dict] = []
    for group, keep in zip(GROUPS, (None, novel), strict=True):
        if keep is not None and not keep.any():
            continue
        suffix = "" if keep is None else "-novel"
        rows += [accuracy_row("codeio", values[m], group, m, keep) for m in PAIR_METHODS]
        rows.append(accuracy_row("codeio", values["found"], f"decomposition-found{suffix}", "rte", keep))
    rows += [
        accuracy_row("codeio", values[f"answer-in-prompt/{m}"], "answer-in-prompt", m)
        for m in PROMPT_METHODS
        if f"answer-in-prompt/{m}" in values
    ]
    rows.append(accuracy_row("codeio", values["base-model"], "primitives", "base-model"))
    return rows


def ckpt_root(cache_dir: Path | None, base: dict, seed: int, name: str = "codeio") -> Path | None:
    """Where one seed's SFT checkpoints and search scores live: ``<name>-seed<seed>-<fingerprint
    of base>``, so a run with other settings never resumes from them (``llm-geometry`` reads the
    extender and the search from here when codeio has run into the same cache; ``codeio-em``
    keeps its EM phases under its own ``name``)."""
    if cache_dir is None:
        return None
    return Path(cache_dir) / f"{name}-seed{seed}-{fingerprint(**base, seed=seed)}"


@register(
    "codeio",
    "Table 5: CodeIO string compositions with a language model (few-shot, cot-majority, rte, exact-search, oracle)",
    PROFILES,
    options=("device", "extra", "shard", "test_seed", "split_seed"),
    dev=True,
)
def run_codeio(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The CodeIO experiment: every method on the held-out (and novel) pairs of ``options.split``,
    bootstrap intervals; every final prompt goes to ``options.run_dir/prompts.jsonl``.

    Under ``options.shard`` a process other than the lead scores its part of the search and
    returns None (the lead writes the results)."""
    options = settings.options
    from taskextrap.llm.pretrain import BaseModel

    model = BaseModel.from_extra(options.extra)
    profile = codeio_runs.for_model(settings.profile, model)
    split = split_of(options)
    tasks, novel, sizes = codeio_runs.held_out_tasks(profile.n_tasks, split)
    base, units = codeio_units(options, cache_dir, model, profile, split, tasks)
    shard = options.shard
    if not shard.is_lead:
        for s in profile.seeds:
            if not unit_done(cache_dir, f"codeio-seed{s}", {**base, "seed": s}):
                codeio_runs.run_worker(
                    seed_run(options, model, profile, s, ckpt_root(cache_dir, base, s), split), tasks
                )
        return None

    def assemble(results):
        values, timing = gather(results, units)
        extras = {s: results[u.name].extras for s, u in zip(profile.seeds, units, strict=True)}
        records = [r for s in profile.seeds for r in codeio_runs.prompt_records(tasks, profile, s, extras[s])]
        codeio_runs.write_prompts(options.run_dir, records)
        values.update(codeio_runs.answer_in_prompt_values(records, profile.seeds))
        config = {
            **run_config(base, sizes, novel, tasks, split, profile, model),
            "mean_tied_candidates": float(np.mean(np.concatenate(values["n_tied"]))),
        }
        return build_rows(values, novel), config, list(profile.seeds), timing

    return Plan(units, assemble)


def codeio_units(
    options: RunOptions, cache_dir: Path | None, model: BaseModel, profile: CodeIOProfile, split: Split, tasks
) -> tuple[dict, list]:
    """(the fingerprinted settings, one unit per seed) of the codeio experiment on ``tasks``: the
    three fine-tuning runs and every method (``sequence_runs.codeio.run_seed``). ``codeio-em`` plans the same
    units, so it reuses a finished codeio run's units and checkpoints."""
    base = codeio_base(options, model, profile, split, tasks)
    units = seed_units(
        profile.seeds,
        name=lambda s: f"codeio-seed{s}",
        config=lambda s: {**base, "seed": s},
        compute=lambda s, _: UnitResult(
            *codeio_runs.run_seed(seed_run(options, model, profile, s, ckpt_root(cache_dir, base, s), split), tasks)
        ),
    )
    return base, units


def seed_run(options: RunOptions, model: BaseModel, profile, seed: int, ckpt_dir: Path | None, split: Split):
    """The :class:`~taskextrap.sequence_runs.codeio.SeedRun` of ``seed`` in a run of ``options``
    (its device, progress and shard)."""
    return codeio_runs.SeedRun(model, profile, seed, ckpt_dir, options.device, options.progress, options.shard, split)


def codeio_base(options: RunOptions, model: BaseModel, profile: CodeIOProfile, split: Split, tasks) -> dict:
    """Everything that changes a codeio unit's numbers (its fingerprint, and that of its checkpoint
    folder, :func:`ckpt_root`): a unit or checkpoint of other settings is never reused."""
    from taskextrap.llm import codeio as codeio_llm

    return {
        "experiment": "codeio",
        "profile": profile.to_dict(),
        "model": model.label("codeio"),
        "split": split.name,
        "test_seed": split.test_seed,
        "split_seed": split.split_seed,
        "prompt_format": codeio_llm.PROMPT_FORMAT,
        "tasks": ["+".join(t.pair) for t in tasks],
        "threads": options.unit_cpus,
    }  # as units.bind adds it: shards and checkpoints find the unit's key


def run_config(
    base: dict, sizes: dict, novel: np.ndarray, tasks, split: Split, profile: CodeIOProfile, model: BaseModel
) -> dict:
    """The results' config of a codeio run: its settings, split sizes and how it trained and searched."""
    from taskextrap.search.likelihood import DEFAULT_TIE_TOL
    from taskextrap.tasks import strings as string_tasks

    return {
        **base,
        **sizes,
        "novel": novel.tolist(),
        "subsample": codeio_runs.subsample_note(len(tasks), sizes, split),
        "n_candidates": len(string_tasks.candidates()),
        "block_rows": string_tasks.BLOCK_ROWS,
        "fine_tuning": "lora" if codeio_runs.sft_config(profile, 0, model).lora else f"full (lr {profile.full_lr})",
        "loss": "shot answers and completion" if profile.score_shots else "completion",
        "tie_tol_nats": DEFAULT_TIE_TOL,
        "max_tied": profile.max_tied,
        "base_model_queries_per_primitive": profile.base_queries,
    }
