"""A parity training seed's runs and every method's answers (paper §4.1, Table 4; Appendix I);
``experiments.parity`` registers the experiment and writes its rows.

Per training seed, two LoRA runs start from the same base model: the few-shot model learns
plain prompts of training masks and the extender learns Anchor / Bit / Out prompts (Algorithm
2, Phase 1). Every held-out task (5 support examples and 10 queries from the ``test_seed``
stream) is then answered by:

- ``few-shot``: the few-shot model on the plain prompt;
- ``rte``: likelihood search (Phase 2) over a candidate space with leave-one-out prompts on the
  support, arg-min, then the extender on the queries; ``rte-tie-vote``: a vote of every
  candidate within ``DEFAULT_TIE_TOL`` nats of the best;
- ``exact-search`` / ``exact-search-tie-vote``: the same consistency search with no model;
- ``oracle``: the extender with the true parent and bit.

Splits: ``test`` trains on mask sizes 2-5 and answers the 28 size-6 masks; ``dev`` trains on
sizes 2-4 only and answers the 56 size-5 masks, from the ``parity-dev`` default model (the
``parity`` one was pretrained on size 5).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from taskextrap.seeding import FRESH_TEST_SEED

if TYPE_CHECKING:  # the llm extra is imported only when an experiment runs; the profile is the experiment's
    from taskextrap.profiles import LLMProfile
    from taskextrap.llm.pretrain import BaseModel

SPACES = ("authors", "frontier", "all")  # run and tabulated in this order (== tasks.parity.SPACES)
WIDE_SPACES = ("all",)  # scored on profile.n_tasks_wide tasks only
SEARCH_METHODS = ("rte", "rte-tie-vote", "exact-search", "exact-search-tie-vote")


def base_model_name(split: str) -> str:
    """The default model a split starts from: ``parity``, or ``parity-dev`` (pretrained on sizes 2-4)."""
    return "parity-dev" if split == "dev" else "parity"


def fine_tune(
    model: BaseModel,
    sampler,
    profile: LLMProfile,
    seed: int,
    out_dir: Path | None,
    device: str = "cpu",
    split: str = "test",
):
    """(model, log) of one LoRA run (the paper's parity settings, ``llm.finetune``) from a fresh
    copy of the base model (a :class:`~taskextrap.llm.pretrain.BaseModel`; the default one is
    that of ``split``)."""
    from taskextrap.llm.finetune import fine_tune as run, recipe
    from taskextrap.llm.pretrain import load_base
    from taskextrap.llm.sft import PARITY_LORA

    return run(load_base(base_model_name(split), model, device), sampler, recipe(profile, seed, PARITY_LORA), out_dir)


def search_space(extender, tasks, space: str, batch_size: int, split: str = "test") -> dict[str, np.ndarray]:
    """RTE's likelihood search (:class:`SequenceRTE`) and the exact search on one candidate space:
    per-task accuracies, whether the best candidate implies the true mask, and the tie count."""
    from taskextrap.estimators.sequence import SequenceRTE
    from taskextrap.llm.parity import ParityAdapter
    from taskextrap.tasks import parity as parity_tasks

    rte = SequenceRTE.from_extender(ParityAdapter(space, split), extender, batch_size=batch_size)
    answers = rte.answer(tasks, rte.decompose(tasks))
    cands = parity_tasks.candidates(space, split)
    acc: dict[str, list[float]] = {m: [] for m in SEARCH_METHODS}
    found, n_tied = [], []
    for i, t in enumerate(tasks):
        acc["rte"].append(np.mean(np.array(answers.best[i]) == t.query_y))
        acc["rte-tie-vote"].append(np.mean(np.array(answers.voted[i]) == t.query_y))
        for m, tv in (("exact-search", False), ("exact-search-tie-vote", True)):
            acc[m].append(np.mean(parity_tasks.exact_search(t, space, tie_vote=tv, split=split)[0] == t.query_y))
        found.append(float(parity_tasks.implied_mask(*cands[answers.voters[i][0]]) == t.mask))
        n_tied.append(len(answers.voters[i]))
    out = {f"{space}/{m}": np.array(v) for m, v in acc.items()}
    out[f"{space}/found"] = np.array(found)
    out[f"{space}/n_tied"] = np.array(n_tied, dtype=float)
    return out


def run_seed(
    model: BaseModel,
    profile: LLMProfile,
    seed: int,
    ckpt_dir: Path | None,
    device: str = "cpu",
    split: str = "test",
    test_seed: int = FRESH_TEST_SEED,
) -> tuple[dict, dict]:
    """(values, timing) of one seed: both LoRA runs on ``split``'s training masks, then every method on its held-out
    tasks (drawn from ``test_seed``)."""
    from taskextrap.llm import parity as parity_llm
    from taskextrap.tasks import parity as parity_tasks

    timing = {}
    tasks = parity_tasks.make_test_tasks(test_seed, split=split)[: profile.n_tasks]
    t = time.perf_counter()
    tune = functools.partial(fine_tune, model, profile=profile, seed=seed, device=device, split=split)
    fewshot, _ = tune(
        functools.partial(parity_llm.baseline_pairs, split=split), out_dir=ckpt_dir and ckpt_dir / "few-shot"
    )
    extender, _ = tune(
        functools.partial(parity_llm.extender_pairs, split=split), out_dir=ckpt_dir and ckpt_dir / "extender"
    )
    timing["sft_s"] = time.perf_counter() - t
    t = time.perf_counter()
    errors = {
        "few-shot": _accuracy(
            fewshot,
            tasks,
            lambda tk: [parity_llm.baseline_prompt(tk.support_x, tk.support_y, q) for q in tk.query_x],
            profile,
        ),
        "oracle": _accuracy(
            extender, tasks, lambda tk: parity_llm.query_prompts(tk, *parity_tasks.oracle_parent(tk.mask)), profile
        ),
    }
    timing["baseline_eval_s"] = time.perf_counter() - t
    for space in SPACES:
        t = time.perf_counter()
        subset = tasks[: profile.n_tasks_wide] if space in WIDE_SPACES else tasks
        errors.update(search_space(extender, subset, space, profile.score_batch, split))
        timing[f"search_{space}_s"] = time.perf_counter() - t
    return errors, timing


def _accuracy(lm, tasks, prompts_of, profile: LLMProfile) -> np.ndarray:
    """Per task, the fraction of its queries whose greedy label (``baselines.prompting.few_shot``,
    ``llm.parity.label_of``) is right; ``prompts_of(task)``: one prompt per query."""
    from taskextrap.baselines.prompting import few_shot
    from taskextrap.llm.parity import LABEL_TOKENS, label_of

    prompts = [p for t in tasks for p in prompts_of(t)]
    pred = np.array(few_shot(lm, prompts, LABEL_TOKENS, profile.score_batch, label_of)).reshape(len(tasks), -1)
    return (pred == np.stack([t.query_y for t in tasks])).mean(axis=1)
