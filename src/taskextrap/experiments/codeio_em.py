"""codeio-em: the CodeIO extender trained without meta-labels (paper Appendix B.2).

The setting of ``codeio`` (same primitives, pair split, test tasks, prompts and default model or
``--model``). Per training seed, two EM arms (``llm.codeio_em``) start from the base model:

* ``rte-em-warmup``: primitive warm-up on single primitives, then ``em_rounds`` rounds of an
  E-step (every unlabelled training task gets the non-trivial pair whose reference prompt gives
  its support examples the lowest leave-one-out NLL under the current model) and an M-step
  (relational fine-tuning on the pseudo-labelled tasks' prompts, single primitives mixed in at
  the supervised extender's rate);
* ``rte-em-semi25``: 25% of the training tasks keep their true label; the model first fine-tunes
  on those alone, then the same rounds pseudo-label the rest (no single primitive is shown).

Both arms answer the test tasks with the supervised ``rte``'s likelihood search over every one of
the 992 candidates (``codeio.search``). Beside them, from the ``codeio`` units of the same
settings (reused when ``codeio`` has run into the same cache): ``few-shot``, ``cot-majority``,
the supervised ``rte``, ``oracle`` and the LLM-free ``exact-search``.

Gradient steps: every arm takes the profile's ``sft_steps`` (the supervised extender's): EM splits
them into a start phase of ``sft_steps - em_rounds * m`` steps and ``em_rounds`` M-steps of
``m = sft_steps // (em_rounds + 1)``, each warm-started from the model before it with its own
warm-up and cosine schedule. The supervised extender draws its items from all training pairs;
EM sees ``em_tasks`` training composites (their data, never their labels) and, in the warm-up arm,
single primitives.

Not in ``reproduce all``: it chains fine-tuning runs, E-steps and three 992-candidate searches (a
GPU job at the paper's size, an hour at ``quick``); run it by name.

Rows: accuracy of each method on ``held-out-pairs`` and ``novel-pairs`` (as ``codeio``),
``decomposition-found`` of each RTE arm, ``answer-in-prompt`` of each EM arm, and the pseudo-label
quality after each E-step (group ``pseudo-labels``: the label behaves like the true pair on
PROBE; ``pseudo-labels-exact``: it is the true pair), as a ``fraction`` of the unlabelled
training tasks, methods ``<arm>:e<round>``; the figure ``codeio-em.png`` draws them.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.experiments import codeio as codeio_exp
from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap.profiles import CodeIOEMProfile
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, UnitResult, gather, seed_units
from taskextrap.report.schema import accuracy_row, make_row
from taskextrap.seeding import derive_seed

if TYPE_CHECKING:
    pass

ARMS = {"rte-em-warmup": 0.0, "rte-em-semi25": 0.25}  # the share of training tasks that keep their label
CODEIO_METHODS = ("few-shot", "cot-majority", "rte", "oracle", "exact-search")  # from the codeio units
FIGURE = "codeio-em.png"
P_SINGLE = 0.2  # single primitives in the warm-up arm's M-steps: the supervised extender's rate


PROFILES = {
    # quick: codeio's quick runs; 8 training composites, 2 rounds, one held-out support example per
    # E-step score (an E-step scores 8 x 729 prompts: ~3 min on 2 CPU cores).
    "quick": CodeIOEMProfile.extending(codeio_exp.PROFILES["quick"], em_tasks=8, em_rounds=2, em_loo=1),
    # paper: codeio's paper runs; 192 training composites (the authors label 189 training pairs),
    # the authors' 4 rounds, the search's full leave-one-out score (4 x 192 x 2,187 prompts per arm:
    # a GPU job).
    "paper": CodeIOEMProfile.extending(codeio_exp.PROFILES["paper"], em_tasks=192, em_rounds=4, em_loo=3),
    "tiny": CodeIOEMProfile.extending(codeio_exp.PROFILES["tiny"], em_tasks=1, em_rounds=1, em_loo=1),
}


def phase_steps(total: int, rounds: int) -> tuple[int, int]:
    """(start-phase steps, steps of each M-step): ``total`` split into ``rounds + 1`` phases,
    the start phase taking the remainder, so the phases sum to ``total`` exactly."""
    if rounds < 1 or total < rounds + 1:
        raise TaskextrapError(f"need em_rounds >= 1 and sft_steps >= em_rounds + 1, got {rounds}, {total}")
    m = total // (rounds + 1)
    return total - rounds * m, m


# ------------------------------------------------------------------------------------ arm


def _tune(lm, sampler, run: codeio_runs.SeedRun[CodeIOEMProfile], steps: int, phase: str):
    """One phase of an EM arm (``run``: the arm's, its checkpoint folder the arm's): ``steps`` of
    codeio's recipe (``codeio.sft_config``) from the current model, with the phase's own seed and
    a warm-up of at most a fifth of its steps, kept in the phase's folder; LoRA merged."""
    from taskextrap.llm.finetune import fine_tune

    cfg = codeio_runs.sft_config(run.profile, run.seed, run.model)
    cfg = dataclasses.replace(
        cfg, steps=steps, seed=derive_seed(run.seed, "codeio-em", phase), warmup_steps=min(cfg.warmup_steps, steps // 5)
    )
    return fine_tune(lm, sampler, cfg, run.sub(phase), phase if run.progress else None, merge=cfg.lora is not None)[0]


def run_arm(run: codeio_runs.SeedRun[CodeIOEMProfile], share: float, train_tasks, candidates=None):
    """(final model, pseudo-label quality after each E-step, steps taken) of one EM arm of the
    seed ``run`` (its profile a codeio-em profile).

    ``share`` 0: primitive warm-up start; otherwise that share of ``train_tasks`` keeps its label
    and the start phase trains on those alone. ``candidates``: the E-step's (default: every
    non-trivial pair, ``llm.codeio_em.em_candidates``). ``run.ckpt_dir`` keeps every phase's
    checkpoints and every E-step's scores, so a rerun resumes."""
    from taskextrap.estimators.sequence_em import e_step
    from taskextrap.llm import codeio as codeio_llm
    from taskextrap.llm import codeio_em as codeio_em_llm
    from taskextrap.llm.pretrain import load_base

    if candidates is not None and not candidates:
        raise TaskextrapError("the E-step needs at least one candidate pair")
    model, profile, seed, progress = run.model, run.profile, run.seed, run.progress
    if model.load_in_4bit:
        raise TaskextrapError("codeio-em chains fine-tuning runs, which a 4-bit base cannot merge; drop --load-in-4bit")
    start, m = phase_steps(profile.sft_steps, profile.em_rounds)
    known = codeio_em_llm.known_mask(len(train_tasks), share, seed)
    labels = [t.pair if k else None for t, k in zip(train_tasks, known, strict=True)]
    p_single = P_SINGLE if share == 0 else 0.0
    if share == 0:
        first = codeio_em_llm.single_sampler(profile.score_shots, profile.anchored)
    else:
        first = codeio_em_llm.pseudo_sampler(
            [t for t, k in zip(train_tasks, known, strict=True) if k],
            [t.pair for t, k in zip(train_tasks, known, strict=True) if k],
            0.0,
            profile.score_shots,
            profile.anchored,
        )
    lm = _tune(load_base("codeio", model, run.device), first, run, start, "start")
    steps, history = start, []
    unknown = [i for i, k in enumerate(known) if not k]
    for r in range(1, profile.em_rounds + 1):
        if unknown:
            guessed, _ = e_step(
                lm,
                [train_tasks[i] for i in unknown],
                codeio_llm.CodeIOAdapter.of(profile),
                codeio_em_llm.em_candidates() if candidates is None else candidates,
                profile.em_loo,
                profile.score_batch,
                run.sub(f"e{r}"),
                f"e-step {r}" if progress else None,
            )
            for i, lab in zip(unknown, guessed, strict=True):
                labels[i] = lab
            history.append(codeio_em_llm.label_quality(train_tasks, labels, ~known))
        corpus = codeio_em_llm.pseudo_sampler(train_tasks, labels, p_single, profile.score_shots, profile.anchored)
        lm = _tune(lm, corpus, run, m, f"m{r}")
        steps += m
    return lm, history, steps


def run_unit(run: codeio_runs.SeedRun[CodeIOEMProfile], tasks) -> UnitResult:
    """Both EM arms of the seed ``run`` on its split's training pairs, each answering ``tasks`` by
    the search (each arm's checkpoints in its own folder of ``run.ckpt_dir``)."""
    from taskextrap.llm import codeio_em as codeio_em_llm

    train_pairs = run.split.pairs()[0]
    train_tasks = codeio_em_llm.em_tasks(train_pairs, run.profile.em_tasks, run.seed)
    candidates = codeio_em_llm.em_candidates(train_pairs)  # pseudo-labels among the pairs a supervised run sees
    values, timing = {}, {}
    extras: dict[str, Any] = {
        "answers": {},
        "completions": {},
        "chosen": {},
        "train_tasks": ["+".join(t.pair) for t in train_tasks],
        "candidates": ["+".join(p) for p in candidates],  # what the E-steps ran over: the record reads it
    }
    for arm, share in ARMS.items():
        t = time.perf_counter()
        arm_run = dataclasses.replace(run, ckpt_dir=run.sub(arm))
        lm, history, steps = run_arm(arm_run, share, train_tasks, candidates)
        timing[f"{arm}_train_s"] = time.perf_counter() - t
        t = time.perf_counter()
        found = codeio_runs.search(lm, tasks, run.profile, arm_run.sub("search"), run.progress)
        timing[f"{arm}_search_s"] = time.perf_counter() - t
        values[arm], values[f"found|{arm}"] = found["rte"], found["found"]
        for r, quality in enumerate(history, 1):
            for kind, v in quality.items():
                values[f"{arm}|e{r}|{kind}"] = v
        extras.setdefault("steps", {})[arm] = steps
        extras["answers"][arm] = found["answers"]["rte"]
        extras["completions"][arm] = found["completions"]["rte"]
        extras["chosen"][arm] = found["chosen"]
        del lm
    return UnitResult(values, timing, extras)


# ------------------------------------------------------------------------------- prompts


def prompt_records(tasks, profile: CodeIOEMProfile, seed: int, extras: dict) -> list[dict]:
    """Every EM arm's final prompt of one seed (as ``codeio.prompt_records``): task, method, seed,
    prompt, answer, predicted, answer_in_prompt, candidate and completion."""
    from taskextrap.llm import codeio as codeio_llm

    out = []
    for arm in ARMS:
        for i, t in enumerate(tasks):
            cand = extras["chosen"][arm][i]
            prompt = codeio_runs.query_prompt("rte", t, profile, codeio_runs.candidate_of(cand))
            out.append(
                {
                    "task": "+".join(t.pair),
                    "method": arm,
                    "seed": seed,
                    "prompt": prompt,
                    "answer": t.query[1],
                    "predicted": extras["answers"][arm][i],
                    "candidate": cand,
                    "completion": extras["completions"][arm][i],
                    "answer_in_prompt": codeio_llm.answer_in_prompt(prompt, t.query[1], t.query[0]),
                }
            )
    return out


# -------------------------------------------------------------------------------- rows


def build_rows(values: dict, novel: np.ndarray) -> list[dict]:
    """Accuracy of the codeio methods and the EM arms on both groups, decomposition-found of every
    RTE arm, answer-in-prompt of the EM arms and the pseudo-label fractions after each E-step."""
    rows: list[dict] = []
    for group, keep in zip(codeio_exp.GROUPS, (None, novel), strict=True):
        if keep is not None and not keep.any():
            continue
        suffix = "" if keep is None else "-novel"
        rows += [accuracy_row("codeio-em", values[m], group, m, keep) for m in (*CODEIO_METHODS, *ARMS)]
        rows.append(accuracy_row("codeio-em", values["found"], f"decomposition-found{suffix}", "rte", keep))
        rows += [accuracy_row("codeio-em", values[f"found|{a}"], f"decomposition-found{suffix}", a, keep) for a in ARMS]
    rows += [
        accuracy_row("codeio-em", values[f"answer-in-prompt/{a}"], "answer-in-prompt", a)
        for a in ARMS
        if f"answer-in-prompt/{a}" in values
    ]
    for key in sorted(k for k in values if k.count("|") == 2):
        arm, step, kind = key.split("|")
        group = "pseudo-labels" if kind == "behaves" else "pseudo-labels-exact"
        rows.append(make_row("codeio-em", group, f"{arm}:{step}", "fraction", np.stack(values[key], axis=1)))
    return rows


def label_record(ran: list[str], train_pairs) -> dict:
    """What the E-steps' candidates were, from the list that ran (a unit's ``extras``): their
    count, and ``label_pairs`` "train" when every one is a training pair of the split, else
    "any" with the held-out pairs among them counted."""
    train = {"+".join(p) for p in train_pairs}
    held = [c for c in ran if c not in train]
    return {"candidates": len(ran), "label_pairs": "any" if held else "train", "held_out_candidates": len(held)}


@register(
    "codeio-em",
    "App. B.2: CodeIO relational fine-tuning without meta-labels (EM with primitive warm-up, "
    "25% labels) beside codeio's methods",
    PROFILES,
    options=("device", "extra", "test_seed", "split_seed"),
    dev=True,
    in_all=False,
)
def run_codeio_em(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The codeio units of the same settings, one EM unit per seed, and their rows; every final
    prompt of every method goes to ``options.run_dir/prompts.jsonl``."""
    options = settings.options
    from taskextrap.llm.pretrain import BaseModel

    model = BaseModel.from_extra(options.extra)
    profile = codeio_runs.for_model(settings.profile, model)
    codeio_profile = profile.codeio()
    split = codeio_exp.split_of(options)
    tasks, novel, sizes = codeio_runs.held_out_tasks(profile.n_tasks, split)
    codeio_base, codeio_units = codeio_exp.codeio_units(options, cache_dir, model, codeio_profile, split, tasks)
    base = {
        **codeio_base,
        "experiment": "codeio-em",
        "profile": profile.to_dict(),
        "arms": ARMS,
        "p_single": P_SINGLE,
        "label_pairs": "train",
    }  # the E-step's candidates: the split's training pairs, so no M-step learns a held-out pair
    em_units = seed_units(
        profile.seeds,
        name=lambda s: f"codeio-em-seed{s}",
        config=lambda s: {**base, "seed": s},
        compute=lambda s, _: run_unit(
            codeio_exp.seed_run(
                options, model, profile, s, codeio_exp.ckpt_root(cache_dir, base, s, "codeio-em"), split
            ),
            tasks,
        ),
    )

    def assemble(results):
        values, timing = gather(results, codeio_units + em_units)
        records = []
        for s, cu, eu in zip(profile.seeds, codeio_units, em_units, strict=True):
            records += codeio_runs.prompt_records(tasks, codeio_profile, s, results[cu.name].extras)
            records += prompt_records(tasks, profile, s, results[eu.name].extras)
        codeio_runs.write_prompts(options.run_dir, records)
        values.update(codeio_runs.answer_in_prompt_values(records, profile.seeds, ARMS))
        start, m = phase_steps(profile.sft_steps, profile.em_rounds)
        config = {
            **codeio_exp.run_config(base, sizes, novel, tasks, split, codeio_profile, model),
            "em": {
                "tasks": profile.em_tasks,
                "rounds": profile.em_rounds,
                "loo": profile.em_loo,
                **label_record(results[em_units[0].name].extras["candidates"], split.pairs()[0]),
                "start_steps": start,
                "m_steps": m,
                "steps_every_arm": profile.sft_steps,
            },
            "em_train_tasks": results[em_units[0].name].extras["train_tasks"],
            "steps_taken": results[em_units[0].name].extras["steps"],
        }
        if plot_dir is not None:
            plot_pseudo_labels(Path(plot_dir) / FIGURE, values, profile.em_rounds)
        return build_rows(values, novel), config, list(profile.seeds), timing

    return Plan(codeio_units + em_units, assemble)


def plot_pseudo_labels(path: Path, values: dict, rounds: int) -> Path | None:
    """``FIGURE``: per arm, the share of its unlabelled training tasks whose pseudo-label behaves
    like the true pair (and is it) after each E-step, over every seed's tasks (None: no E-step ran)."""
    from taskextrap.report.plots import plot_curves

    curves = {}
    for arm in ARMS:
        for kind, what in (("behaves", "behaves like the truth"), ("exact", "is the true pair")):
            keys = [f"{arm}|e{r}|{kind}" for r in range(1, rounds + 1)]
            if all(k in values for k in keys):
                curves[f"{arm}: {what}"] = [float(np.mean(np.concatenate(values[k]))) for k in keys]
    if not curves:
        return None
    return plot_curves(
        path,
        np.arange(1, rounds + 1),
        curves,
        title="codeio-em: pseudo-labels after each E-step",
        xlabel="E-step",
        ylabel="share of unlabelled training tasks",
    )
