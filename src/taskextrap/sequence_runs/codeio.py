"""A CodeIO training seed's runs and every method's answers (paper §4.2, Table 5; Appendix I);
``experiments.codeio`` registers the experiment and writes its rows.

A task is an ordered pair (a, b) of the 31 string primitives, output b(a(s)). The 961 pairs are
split once (``split_pairs(split_seed)``, default seed 1; 0 is the split of the earlier runs):
769 training pairs, 192 held out. The dev split (:class:`Split` "dev") holds out a seeded fifth
of the training pairs instead (616 dev-training pairs, 153 dev pairs) and never touches the test
pairs. Per training seed, three fine-tuning runs start from the same base model (the paper's
CodeIO LoRA for a ``--model``; the shipped default model trains every parameter, see
:func:`sft_config`): the few-shot model learns plain prompts, the CoT model learns
" a(q) => b(a(q))" completions, and the extender learns the reference prompts (Algorithm 2,
Phase 1), all on training pairs only. Reference blocks show each primitive on the shot inputs
and random fillers, never on the query input (``llm.codeio.reference_prompt``): no prompt shows
a value computed from the query. For the default model the profile may also score every shot
answer a prompt determines (``score_shots``) and anchor the extender's shot lines ("In: s Out:
a(s) => t", ``anchored``; the model then writes " a(q) => b(a(q))" after the plain query line
and the answer is read after the last "=>"); :func:`for_model` switches both off for a
``--model``. Every test task (one held-out pair, 3 support examples, 1 query and 4 filler
strings) is then answered by:

- ``few-shot``: the few-shot model, greedy;
- ``cot-majority``: ``cot_samples`` (16) sampled chains of the CoT model, majority vote of the
  answers after the last "=>";
- ``rte``: likelihood search (Phase 2) over **every** single and every pair (992 candidates; the
  search is never told which pairs are held out), leave-one-out prompts on the support (each
  held-out support example is treated exactly as a query: its input is in no block of its own
  prompt), arg-min, then the extender's greedy answer under the chosen candidate;
  ``rte-tie-vote``: a vote of the answers of the candidates within ``DEFAULT_TIE_TOL`` nats of
  the best, at most ``max_tied`` of them (the best-scored first), which bounds the generation cost;
- ``exact-search`` / ``exact-search-tie-vote``: the same 992 candidates executed in Python on the
  support (no language model): fewest wrong support examples, ties in enumeration order (or a
  majority vote of every tied candidate's query output), then the chosen candidate on the query;
- ``oracle``: the extender with the true pair.

Cost: the full search scores 992 x 3 = 2,976 leave-one-out sequences per task (about 730
characters each; the prompts of one held-out example under all candidates with the same first
function share the header and that function's block, which run once: about 1,400 tokens run per
candidate), so the paper profile's 192 tasks mean 571,392 sequences per seed, which is why that
profile runs one seed. The search is bounded (``search.likelihood``'s branch and bound): every
candidate's first held-out example is scored, the others only while the candidate can still be
within the tie tolerance of the best, so ``rte`` and ``rte-tie-vote`` are those of the full
search at a fraction of its cost (``benchmarks/codeio_search.py``). Everything resumes: SFT runs
restart from their checkpoints and the search from its last finished chunk of tasks. With
several GPUs, ``--shard I/N`` splits the search's chunks over N processes
(``taskextrap.sharding``, :func:`run_worker`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.files import write_text_atomic
from taskextrap.seeding import FRESH_TEST_SEED
from taskextrap.sharding import Shard, wait_for

if TYPE_CHECKING:  # the llm extra is imported only when an experiment runs; the profile is the experiment's
    from taskextrap.profiles import CodeIOProfile
    from taskextrap.llm.pretrain import BaseModel

SPLIT_SEED = 1  # the default pair split (fresh); 0 is the split of the runs before the integrity review
BASE_STREAM = "base-model-probe"  # strings of the base-model row: a stream no training sampler uses
TASKS_PER_CHUNK = 4  # tasks scored per call: ~12k sequences, so the token lists stay small
PROMPT_METHODS = ("few-shot", "cot-majority", "rte", "rte-tie-vote", "oracle")  # methods that prompt a model
PAIR_METHODS = ("few-shot", "cot-majority", "rte", "rte-tie-vote", "exact-search", "exact-search-tie-vote", "oracle")
ProfileT = TypeVar("ProfileT", bound="CodeIOProfile")  # codeio's profile, or codeio-em's (a subclass)


@dataclasses.dataclass(frozen=True)
class SeedRun(Generic[ProfileT]):
    """One training seed of a CodeIO experiment (``codeio``, ``codeio-em``, ``llm-geometry``'s
    Gamma) as its functions read it: what ``UnitSpec`` is to the array regimes.

    Attributes:
        model: the base model (a :class:`~taskextrap.llm.pretrain.BaseModel`).
        profile: the CodeIO profile (codeio's, or codeio-em's subclass).
        seed: the training seed.
        ckpt_dir: the seed's checkpoint folder (None: nothing kept, nothing resumed).
        device: where the models run.
        progress: show progress bars.
        shard: this process's part of a sharded search.
        split: the pair split.
    """

    model: BaseModel
    profile: ProfileT
    seed: int
    ckpt_dir: Path | None = None
    device: str = "cpu"
    progress: bool = False
    shard: Shard = dataclasses.field(default_factory=Shard)
    split: Split = dataclasses.field(default_factory=lambda: Split())

    def sub(self, name: str) -> Path | None:
        """The checkpoint folder ``name`` of this seed (None without a checkpoint folder)."""
        return None if self.ckpt_dir is None else Path(self.ckpt_dir) / name

    def fine_tune(self, sampler, name: str):
        """:func:`fine_tune` of this seed's base model on ``sampler``, kept in checkpoint folder
        ``name`` (its progress bar labelled ``name``)."""
        return fine_tune(
            self.model, sampler, self.profile, self.seed, self.sub(name), self.device, name if self.progress else None
        )


# ------------------------------------------------------------------------------- models


def fine_tune(
    model: BaseModel,
    sampler,
    profile: CodeIOProfile,
    seed: int,
    out_dir: Path | None,
    device: str = "cpu",
    progress: str | None = None,
):
    """One run of :func:`sft_config` (``llm.finetune.fine_tune``) from a fresh copy of the base
    model (a :class:`~taskextrap.llm.pretrain.BaseModel`), a LoRA run with its adapters merged
    (1.8x faster search) unless the base is 4-bit (merging would re-quantise it).

    ``progress``: the label of a progress bar over the steps (None: no bar).
    """
    from taskextrap.llm.finetune import fine_tune as run
    from taskextrap.llm.pretrain import load_base

    return run(
        load_base("codeio", model, device),
        sampler,
        sft_config(profile, seed, model),
        out_dir,
        progress,
        merge=not model.load_in_4bit,
    )[0]


def sft_config(profile: CodeIOProfile, seed: int, model: BaseModel):
    """The settings of each of a seed's three runs (``llm.finetune.recipe``): the paper's CodeIO
    LoRA, or, when :func:`for_model` keeps ``full_lr`` (the shipped default model), every
    parameter at ``full_lr`` (same steps)."""
    from taskextrap.llm.finetune import recipe
    from taskextrap.llm.sft import CODEIO_LORA

    p = for_model(profile, model)
    return recipe(p, seed, CODEIO_LORA, p.full_lr, p.full_warmup)


def samplers(train_pairs, score_shots: bool = False, anchored: bool = False) -> dict:
    """The three training corpora, each ``sample(g, n)`` over the training pairs only;
    ``score_shots``: their items also score the shot answers their prompts determine;
    ``anchored``: the extender's prompts show the anchor's outputs (``codeio_llm.reference_prompt``)."""
    from taskextrap.llm import codeio as codeio_llm

    return {
        "few-shot": partial(codeio_llm.fewshot_pairs, train_pairs=train_pairs, score_shots=score_shots),
        "cot": partial(codeio_llm.cot_pairs, train_pairs=train_pairs, score_shots=score_shots),
        "extender": partial(
            codeio_llm.reference_pairs, train_pairs=train_pairs, score_shots=score_shots, anchored=anchored
        ),
    }


def for_model(profile: ProfileT, model: BaseModel) -> ProfileT:
    """The profile a run uses: as given for the shipped default model; for a ``--model`` the
    paper's recipe (LoRA, completion-only loss, the authors' prompts), so the default-model
    settings ``full_lr``, ``score_shots`` and ``anchored`` are switched off."""
    if model.path is None:
        return profile
    return dataclasses.replace(profile, full_lr=None, score_shots=False, anchored=False)


def corpora(profile: CodeIOProfile, model: BaseModel, train_pairs) -> dict:
    """:func:`samplers` of ``train_pairs`` under :func:`for_model` of ``profile`` (shot answers
    are scored only for the default model: its items are character-exact ScoredText)."""
    p = for_model(profile, model)
    return samplers(train_pairs, p.score_shots, p.anchored)


# ----------------------------------------------------------------------------- decoding


def extender_outputs(lm, prompts: list[str], profile: CodeIOProfile) -> tuple[list[str], list[str]]:
    """(completions, answers) of the extender's greedy decoding of reference prompts. Anchored,
    the model writes " a(q) => b(a(q))" (the CoT budget ``cot_tokens``) and the answer is read
    after the last "=>" (``parse_cot``); plain, the completion is the answer (``CodeIOAdapter``)."""
    from taskextrap.llm.codeio import CodeIOAdapter
    from taskextrap.llm.generate import greedy_once

    adapter = CodeIOAdapter.of(profile)
    said = greedy_once(lm, prompts, adapter.max_new_tokens, profile.score_batch)
    return said, [adapter.parse(s) for s in said]


def query_prompt(method: str, task, profile: CodeIOProfile, candidate=None) -> str:
    """The prompt a method answers ``task``'s query from: the plain few-shot / CoT prompt, or the
    reference prompt of the true pair (``oracle``) or of ``candidate`` (``rte``, ``rte-tie-vote``)."""
    from taskextrap.llm import codeio as codeio_llm

    q = task.query[0]
    if method in ("few-shot", "cot-majority"):
        return (
            codeio_llm.fewshot_prompt(task.support, q)
            if method == "few-shot"
            else codeio_llm.cot_prompt(task.support, q)
        )
    if method == "oracle":
        candidate = task.pair
    elif method not in ("rte", "rte-tie-vote") or candidate is None:
        raise TaskextrapError(f"no prompt for codeio method {method!r} (candidate {candidate!r})")
    return codeio_llm.CodeIOAdapter.of(profile).query_prompts(task, candidate)[0]  # the prompt the search answers from


def _hits(predicted: list[str], tasks) -> np.ndarray:
    """1.0 where a prediction equals its task's query output exactly, else 0.0."""
    return np.array([float(p == t.query[1]) for p, t in zip(predicted, tasks, strict=True)])


# ------------------------------------------------------------------------------- search


def search_estimator(extender, profile: CodeIOProfile, bounded: bool = True):
    """The likelihood search of :func:`search` (:class:`~taskextrap.estimators.sequence.SequenceRTE`
    over the 992 candidates), built in one place so that a shard's processes and its lead bound
    the search alike and read and write the same files."""
    from taskextrap.estimators.sequence import SequenceRTE
    from taskextrap.llm.codeio import CodeIOAdapter

    return SequenceRTE.from_extender(
        CodeIOAdapter.of(profile),
        extender,
        batch_size=profile.score_batch,
        max_tied=profile.max_tied,
        tasks_per_chunk=TASKS_PER_CHUNK,
        bounded=bounded,
    )


def candidate_scores(
    extender,
    tasks,
    cands,
    profile: CodeIOProfile,
    cache_dir: Path | None = None,
    progress: bool = False,
    shard: Shard = Shard(),
    bounded: bool = True,
) -> np.ndarray | None:
    """Summed leave-one-out NLL of every (task, candidate), shape ``(len(tasks), len(cands))``
    (:func:`taskextrap.search.likelihood.candidate_scores`, ``TASKS_PER_CHUNK`` tasks per saved
    chunk), bounded as :func:`search_estimator`'s search (``inf`` past the tie tolerance). The
    prompts of one held-out example under the candidates with the same first function share the
    header and its block, so they run that prefix once
    (:class:`~taskextrap.llm.codeio.CodeIOAdapter`)."""
    from taskextrap.search.likelihood import candidate_scores as scores

    rte = search_estimator(extender, profile, bounded)
    return scores(
        extender,
        tasks,
        cands,
        rte.adapter.loo_pairs,
        rte.batch_size,
        cache_dir,
        rte.tasks_per_chunk,
        rte.adapter.prefix_of,
        shard,
        "codeio search" if progress else None,
        rte.tolerance() if bounded else None,
    )


def search(
    extender,
    tasks,
    profile: CodeIOProfile,
    cache_dir: Path | None = None,
    progress: bool = False,
    shard: Shard = Shard(),
    bounded: bool = True,
) -> dict[str, Any]:
    """RTE's likelihood search over all 992 candidates, then generation
    (:class:`~taskextrap.estimators.sequence.SequenceRTE`): per-task results (for the lead of a
    ``shard``, which reads the other processes' scores).

    Keys: ``rte``, ``rte-tie-vote`` (accuracies), ``found`` (the arg-min behaves like the true
    pair on PROBE), ``n_tied`` (candidates within the tie tolerance, before the cap), ``chosen``
    (the arg-min candidate of each task, "a+b" or "a"), ``voters`` (the candidates that voted,
    best first), ``answers`` ({"rte", "rte-tie-vote"}: per task) and ``completions`` ({"rte"}: the
    chosen candidate's raw greedy completion, " a(q) => b(a(q))" when anchored), ``scores``
    (every (task, candidate) score; with ``bounded``, the search's branch and bound, ``inf`` for
    the candidates that cannot be within the tie tolerance of the best).
    """
    from taskextrap.search.likelihood import tied
    from taskextrap.tasks import strings as string_tasks

    rte = search_estimator(extender, profile, bounded)
    d = rte.decompose(tasks, cache_dir, shard, "codeio search" if progress else None)
    answers = rte.answer(tasks, d)
    cands = rte.adapter.candidates()
    best = [v[0] for v in answers.voters]
    rte_said, voted = [a[0] for a in answers.best], [a[0] for a in answers.voted]
    return {
        "rte": _hits(rte_said, tasks),
        "rte-tie-vote": _hits(voted, tasks),
        "found": np.array(
            [
                float(string_tasks.behaviour(cands[b]) == string_tasks.behaviour(t.pair))
                for b, t in zip(best, tasks, strict=True)
            ]
        ),
        "n_tied": np.array([len(tied(s)) for s in d.extras["scores"]], dtype=float),
        "chosen": [candidate_name(cands[b]) for b in best],
        "voters": [[candidate_name(cands[j]) for j in v] for v in answers.voters],
        "answers": {"rte": rte_said, "rte-tie-vote": voted},
        "completions": {"rte": [c[0] for c in answers.completions]},
        "scores": d.extras["scores"],
    }


def candidate_name(candidate) -> str:
    """A candidate as text: "a+b" for a pair, "a" for a single (:func:`candidate_of` reverses it)."""
    from taskextrap.tasks import strings as string_tasks

    return "+".join(string_tasks.functions_of(candidate))


def candidate_of(name: str):
    """The candidate named by :func:`candidate_name`."""
    parts = tuple(name.split("+"))
    return parts[0] if len(parts) == 1 else parts


def exact_search(tasks) -> dict:
    """The 992 candidates executed in Python on each task's support (``baselines.exact``): per
    task, ``exact-search`` and ``exact-search-tie-vote`` accuracies, and ``answers`` of both."""
    from taskextrap.baselines.exact import exact_search as search_exactly
    from taskextrap.tasks import strings as string_tasks

    best, voted = search_exactly(tasks, string_tasks.candidates(), string_tasks.apply)
    return {
        "exact-search": _hits(best, tasks),
        "exact-search-tie-vote": _hits(voted, tasks),
        "answers": {"exact-search": best, "exact-search-tie-vote": voted},
    }


# -------------------------------------------------------------------------------- tasks


def subsample(tasks, novel, n: int | None) -> list:
    """``n`` of the test tasks, deterministically: ceil(n / 2) novel pairs (as many as there are)
    and the rest from the other held-out pairs, each evenly spaced in split order; all when
    ``n`` is None or covers them. The chosen tasks keep the split order."""
    if n is None or n >= len(tasks):
        return list(tasks)
    if n < 1:
        raise TaskextrapError(f"n_tasks must be >= 1, got {n}")
    fresh = [t for t in tasks if t.pair in novel]
    other = [t for t in tasks if t.pair not in novel]
    k_other = min(len(other), n - min(len(fresh), math.ceil(n / 2)))
    chosen = {t.pair for t in _spread(fresh, n - k_other) + _spread(other, k_other)}
    return [t for t in tasks if t.pair in chosen]


def subsample_note(n: int, sizes: dict, split: Split) -> str:
    """How the scored tasks were chosen (recorded in the results' config)."""
    total, what = sizes["n_test_pairs"], "held-out" if split.name == "test" else "dev"
    if n >= total:
        return f"all {total} {what} pairs"
    return (
        f"{n} of the {total} {what} pairs: ceil({n}/2) novel pairs and the rest from the other "
        f"{what} pairs, evenly spaced in split order (sequence_runs.codeio.subsample)"
    )


def _spread(items: list, k: int) -> list:
    """``k`` items evenly spaced over ``items`` (first and last included when k >= 2)."""
    if k <= 0:
        return []
    return [items[int(i)] for i in np.unique(np.linspace(0, len(items) - 1, k).round())]


@dataclasses.dataclass(frozen=True)
class Split:
    """Where the runs train and the tasks come from: ``name`` "test" (the 192 held-out pairs) or
    "dev" (a seeded fifth of the training pairs, ``tasks.strings.dev_split``), the seed of the pair
    split and the seed of the task draws."""

    name: str = "test"
    split_seed: int = SPLIT_SEED
    test_seed: int = FRESH_TEST_SEED

    def pairs(self) -> tuple[list, list]:
        """(pairs the three runs train on, pairs the tasks are drawn from)."""
        from taskextrap.tasks import strings as string_tasks

        if self.name not in ("test", "dev"):
            raise TaskextrapError(f"unknown codeio split {self.name!r}; choose test or dev")
        return (
            string_tasks.split_pairs(self.split_seed)
            if self.name == "test"
            else string_tasks.dev_split(self.split_seed)
        )


def held_out_tasks(n_tasks: int | None, split: Split = Split()) -> tuple[list, np.ndarray, dict]:
    """(scored tasks, novel flag of each, sizes of the whole split: evaluation and novel pairs).

    Novel pairs behave unlike every pair the runs train on and every single. Dev tasks come
    from a stream of their own ("dev"), test tasks from "test" (the earlier runs' draws)."""
    from taskextrap.tasks import strings as string_tasks

    train, held = split.pairs()
    novel = set(string_tasks.novel_test_pairs(train, held))
    tasks = subsample(string_tasks.make_test_tasks(held, split.test_seed, stream=split.name), novel, n_tasks)
    sizes = {"n_test_pairs": len(held), "n_novel_pairs": len(novel), "n_train_pairs": len(train)}
    return tasks, np.array([t.pair in novel for t in tasks]), sizes


# --------------------------------------------------------------------------------- seed


def run_seed(run: SeedRun, tasks) -> tuple[dict, dict, dict]:
    """(values, timing, extras) of one seed: the three fine-tuning runs on the split's training
    pairs (one after another, so only one fine-tuned model is held at a time), every method on
    ``tasks`` and the base-model row (``experiments.codeio`` makes it a cached unit).

    The extender comes first: under a ``shard`` the other processes (:func:`run_worker`) start
    their part of the search as soon as its final checkpoint is saved. The unit's extras keep
    every method's answers, the extender's completions, the chosen and voting candidates:
    enough to rebuild every final prompt (:func:`prompt_records`) when the unit is resumed.
    """
    model, profile, seed = run.model, run.profile, run.seed
    corpus_of = corpora(profile, model, run.split.pairs()[0])
    timing, acc, said, raw = {"sft_s": 0.0}, {}, {}, {}
    found = None
    for corpus, method in (("extender", "oracle"), ("few-shot", "few-shot"), ("cot", "cot-majority")):
        t = time.perf_counter()
        lm = run.fine_tune(corpus_of[corpus], corpus)
        timing["sft_s"] += time.perf_counter() - t
        t = time.perf_counter()
        raw[method], said[method] = predict_with_completions(method, lm, tasks, profile, seed)
        acc[method] = _hits(said[method], tasks)
        timing[f"{method}_eval_s"] = time.perf_counter() - t
        if found is None:  # the extender's likelihood search
            t = time.perf_counter()
            found = search(lm, tasks, profile, run.sub("search"), run.progress, run.shard)
            timing["search_s"] = time.perf_counter() - t
        del lm
    assert found is not None  # the extender's search, whole in the lead process
    found.pop("scores")
    exact = exact_search(tasks)
    t = time.perf_counter()
    acc["base-model"] = base_model_row(model, profile, run.device, run.split.test_seed)
    timing["base_model_s"] = time.perf_counter() - t
    extras = {
        "answers": {**said, **found.pop("answers"), **exact.pop("answers")},
        "completions": {"oracle": raw["oracle"], **found.pop("completions")},
        "chosen": found.pop("chosen"),
        "voters": found.pop("voters"),
        "tasks": ["+".join(tk.pair) for tk in tasks],
    }
    return {**acc, **found, **exact}, timing, extras


def run_worker(run: SeedRun, tasks) -> None:
    """A non-lead process of ``run.shard``: wait for the lead's extender (its final checkpoint),
    load it, score this process's chunks of the search and save them where the lead reads them."""
    from taskextrap.tasks import strings as string_tasks
    from taskextrap.llm.sft import finished_checkpoint

    out, profile = run.sub("extender"), run.profile
    if out is None:
        raise TaskextrapError("a sharded run needs the shared unit cache (--out) of the lead process")
    cfg = sft_config(profile, run.seed, run.model)
    wait_for(lambda: finished_checkpoint(out, cfg), f"the lead's extender in {out}")
    lm = fine_tune(
        run.model, corpora(profile, run.model, run.split.pairs()[0])["extender"], profile, run.seed, out, run.device
    )
    candidate_scores(lm, tasks, string_tasks.candidates(), profile, run.sub("search"), run.progress, run.shard)


def base_model_row(
    model: BaseModel, profile: CodeIOProfile, device: str = "cpu", test_seed: int = FRESH_TEST_SEED
) -> np.ndarray:
    """Greedy exact match of the base model (never fine-tuned) on each single primitive, (31,),
    on strings of the stream ``BASE_STREAM`` under ``test_seed``."""
    from taskextrap.llm import codeio as codeio_llm
    from taskextrap.tasks import strings as string_tasks
    from taskextrap.llm.pretrain import load_base

    acc = codeio_llm.primitive_accuracy(
        load_base("codeio", model, device),
        n_per=profile.base_queries,
        seed=test_seed,
        stream=BASE_STREAM,
        batch_size=profile.score_batch,
        max_new_tokens=profile.answer_tokens,
    )
    return np.array([acc[name] for name in string_tasks.NAMES])


def predict(method: str, lm, tasks, profile: CodeIOProfile, seed: int) -> list[str]:
    """The answers of ``few-shot``, ``cot-majority`` or ``oracle`` to each task's query."""
    return predict_with_completions(method, lm, tasks, profile, seed)[1]


def predict_with_completions(method: str, lm, tasks, profile: CodeIOProfile, seed: int) -> tuple[list, list]:
    """(completions, answers) of ``few-shot``, ``cot-majority`` (``baselines.prompting``) or
    ``oracle`` (:func:`query_prompt`); cot-majority's completions are its voted answers (its 16
    chains are not kept)."""
    from taskextrap.baselines import prompting
    from taskextrap.llm.codeio import parse_cot

    if method not in ("few-shot", "cot-majority", "oracle"):
        raise TaskextrapError(f"unknown codeio method {method!r}")
    prompts = [query_prompt(method, t, profile) for t in tasks]
    if method == "cot-majority":
        voted = prompting.cot_majority(
            lm,
            prompts,
            parse_cot,
            profile.cot_samples,
            profile.temperature,
            profile.cot_tokens,
            profile.score_batch,
            seed,
        )
        return voted, voted
    if method == "oracle":
        return extender_outputs(lm, prompts, profile)
    said = prompting.few_shot(lm, prompts, profile.answer_tokens, profile.score_batch)
    return said, said


# ------------------------------------------------------------------------------ prompts


def prompt_records(tasks, profile: CodeIOProfile, seed: int, extras: dict) -> list[dict]:
    """Every final prompt of one seed, rebuilt from a unit's extras: one record per (task,
    prompting method) with keys task ("a+b"), method, seed, prompt, answer, predicted and
    answer_in_prompt (``llm.codeio.answer_in_prompt``). rte also gives its candidate and
    completion; rte-tie-vote gives ``prompts`` and ``candidates``, one per voting candidate (its
    ``prompt`` is the best-scored one's), and answer_in_prompt is true when any of them shows it."""
    from taskextrap.llm import codeio as codeio_llm

    out = []
    for i, t in enumerate(tasks):
        q, answer = t.query
        for method in PROMPT_METHODS:
            names = {"rte": [extras["chosen"][i]], "rte-tie-vote": extras["voters"][i]}.get(method, [None])
            prompts = [query_prompt(method, t, profile, None if n is None else candidate_of(n)) for n in names]
            rec = {
                "task": "+".join(t.pair),
                "method": method,
                "seed": seed,
                "prompt": prompts[0],
                "answer": answer,
                "predicted": extras["answers"][method][i],
                "answer_in_prompt": any(codeio_llm.answer_in_prompt(p, answer, q) for p in prompts),
            }
            if method in extras.get("completions", {}):
                rec["completion"] = extras["completions"][method][i]
            if method == "rte":
                rec["candidate"] = names[0]
            elif method == "rte-tie-vote":
                rec.update(prompts=prompts, candidates=names)
            out.append(rec)
    return out


def write_prompts(run_dir: Path | None, records: list[dict]) -> None:
    """``run_dir/prompts.jsonl``, one JSON line per record, written atomically (none without a run dir)."""
    if run_dir is not None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        write_text_atomic(Path(run_dir) / "prompts.jsonl", text)


def answer_in_prompt_values(records: list[dict], seeds, methods=PROMPT_METHODS) -> dict[str, list[np.ndarray]]:
    """Per method of ``methods`` (default: codeio's prompting methods), per seed, 1.0 for each task
    whose final prompt shows the answer (``answer-in-prompt/<method>``: a list over ``seeds``)."""
    return {
        f"answer-in-prompt/{m}": [
            np.array([float(r["answer_in_prompt"]) for r in records if r["method"] == m and r["seed"] == s])
            for s in seeds
        ]
        for m in methods
    }
