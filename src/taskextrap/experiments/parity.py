"""Sparse parity with a language model (paper §4.1, Table 4; Appendix I).

Per training seed, two LoRA runs start from the same base model: the few-shot model learns
plain prompts of training masks (sizes 2-5) and the extender learns Anchor / Bit / Out prompts
(Algorithm 2, Phase 1). Every test task (all 28 masks of size 6, 5 support examples and 10
queries, from a fixed stream) is then answered by:

- ``few-shot``: the few-shot model on the plain prompt;
- ``rte``: likelihood search (Phase 2) over a candidate space with leave-one-out prompts on the
  support, arg-min, then the extender on the queries; ``rte-tie-vote``: a vote of every
  candidate within ``DEFAULT_TIE_TOL`` nats of the best;
- ``exact-search`` / ``exact-search-tie-vote``: the same consistency search with no model;
- ``oracle``: the extender with the true parent and bit.

Candidate spaces: ``frontier`` (size-5 parents, a bit they lack: the training frontier, one step
beyond) and ``all`` (every training mask x every bit, the paper's wording). Accuracy is a
fraction; its interval is a bootstrap over the test tasks.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.experiments.profiles import LLMProfile, get_profile
from taskextrap.experiments.registry import RunOptions, register
from taskextrap.experiments.units import UnitResult, run_seeds
from taskextrap.report.schema import bootstrap_ci95, make_row

if TYPE_CHECKING:  # the llm extra is imported only when an experiment runs
    from taskextrap.llm.pretrain import BaseModel

TEST_SEED = 10_000
SPACES = ("frontier", "all")
GROUPS = {"frontier": "size6", "all": "size6-all-candidates"}
SEARCH_METHODS = ("rte", "rte-tie-vote", "exact-search", "exact-search-tie-vote")

PARITY_PROFILES = {
    "quick": LLMProfile("quick", (0,), sft_steps=150, sft_batch=16, sft_lr=2e-4, warmup=15, n_tasks_wide=8),
    "paper": LLMProfile("paper", (0, 1, 2), sft_steps=600, sft_batch=16, sft_lr=2e-4, warmup=50),
    "tiny": LLMProfile("tiny", (0,), sft_steps=2, sft_batch=2, sft_lr=2e-4, warmup=1, n_tasks=1, n_tasks_wide=1,
                       score_batch=32),
}


def fine_tune(model: BaseModel, sampler, profile: LLMProfile, seed: int, out_dir: Path | None, device: str = "cpu"):
    """One LoRA run (the paper's parity settings) from a fresh copy of the base model
    (a :class:`~taskextrap.llm.pretrain.BaseModel`)."""
    from taskextrap.llm.pretrain import load_base
    from taskextrap.llm.sft import PARITY_LORA, SFTConfig, train

    cfg = SFTConfig(steps=profile.sft_steps, batch_size=profile.sft_batch, lr=profile.sft_lr,
                    warmup_steps=profile.warmup, seed=seed, checkpoint_every=100, lora=PARITY_LORA)
    lm, info = train(load_base("parity", model, device), sampler, cfg, out_dir=out_dir)
    return lm, info


def predict_labels(lm, prompts: list[str], batch_size: int) -> np.ndarray:
    """Greedy labels (0/1; -1 when the output holds neither) of each prompt; each distinct prompt runs once."""
    from taskextrap.llm.generate import greedy_once
    from taskextrap.llm.parity import parse_label

    labels = [parse_label(o) for o in greedy_once(lm, prompts, max_new_tokens=3, batch_size=batch_size)]
    return np.array([-1 if y is None else y for y in labels])


def _query_prompts(task, parent, bit) -> list[str]:
    from taskextrap.llm.parity import extender_prompt

    return [extender_prompt(task.support_x, task.support_y, q, parent, bit) for q in task.query_x]


def search_space(extender, tasks, space: str, batch_size: int) -> dict[str, np.ndarray]:
    """RTE's likelihood search and the exact search on one candidate space: per-task accuracies."""
    from taskextrap.llm import parity as P
    from taskextrap.llm.search import tied, total_nll, vote

    cands = P.candidates(space)
    scores = total_nll(extender, [P.loo_pairs(t, *c) for t in tasks for c in cands], batch_size)
    scores = scores.reshape(len(tasks), len(cands))
    best = [tied(s, 0.0)[0] for s in scores]
    ties = [tied(s) for s in scores]
    # Every query of every (task, candidate) that any rule needs, generated in one batched pass.
    needed = sorted({(i, int(j)) for i in range(len(tasks)) for j in (best[i], *ties[i])})
    prompts = {key: _query_prompts(tasks[key[0]], *cands[key[1]]) for key in needed}
    flat = predict_labels(extender, [p for key in needed for p in prompts[key]], batch_size)
    nq = len(tasks[0].query_y)
    pred = {key: flat[k * nq:(k + 1) * nq] for k, key in enumerate(needed)}
    acc = {m: [] for m in SEARCH_METHODS}
    found, n_tied = [], []
    for i, t in enumerate(tasks):
        acc["rte"].append(np.mean(pred[(i, int(best[i]))] == t.query_y))
        voted = np.array([vote([int(pred[(i, int(j))][q]) for j in ties[i]]) for q in range(nq)])
        acc["rte-tie-vote"].append(np.mean(voted == t.query_y))
        for m, tv in (("exact-search", False), ("exact-search-tie-vote", True)):
            acc[m].append(np.mean(P.exact_search(t, space, tie_vote=tv)[0] == t.query_y))
        found.append(float(P.implied_mask(*cands[best[i]]) == t.mask))
        n_tied.append(len(ties[i]))
    out = {f"{space}/{m}": np.array(v) for m, v in acc.items()}
    out[f"{space}/found"] = np.array(found)
    out[f"{space}/n_tied"] = np.array(n_tied, dtype=float)
    return out


def run_unit(model: BaseModel, profile: LLMProfile, seed: int, ckpt_dir: Path | None, device: str = "cpu") -> UnitResult:
    """Both LoRA runs of one seed, then every method on the test tasks."""
    from taskextrap.llm import parity as P

    timing = {}
    tasks = P.make_test_tasks(TEST_SEED)[: profile.n_tasks]
    t = time.perf_counter()
    fewshot, _ = fine_tune(model, P.baseline_pairs, profile, seed, ckpt_dir and ckpt_dir / "few-shot", device)
    extender, _ = fine_tune(model, P.extender_pairs, profile, seed, ckpt_dir and ckpt_dir / "extender", device)
    timing["sft_s"] = time.perf_counter() - t
    t = time.perf_counter()
    errors = {"few-shot": _accuracy(fewshot, tasks, lambda tk: [P.baseline_prompt(tk.support_x, tk.support_y, q)
                                                                 for q in tk.query_x], profile),
              "oracle": _accuracy(extender, tasks, lambda tk: _query_prompts(tk, *P.oracle_parent(tk.mask)),
                                  profile)}
    timing["baseline_eval_s"] = time.perf_counter() - t
    for space in SPACES:
        t = time.perf_counter()
        subset = tasks if space == "frontier" else tasks[: profile.n_tasks_wide]
        errors.update(search_space(extender, subset, space, profile.score_batch))
        timing[f"search_{space}_s"] = time.perf_counter() - t
    return UnitResult(errors, timing)


def _accuracy(lm, tasks, prompts_of, profile: LLMProfile) -> np.ndarray:
    prompts = [p for t in tasks for p in prompts_of(t)]
    pred = predict_labels(lm, prompts, profile.score_batch).reshape(len(tasks), -1)
    return (pred == np.stack([t.query_y for t in tasks])).mean(axis=1)


def _row(errors, key, group, method):
    e = np.stack(errors[key], axis=1)
    return make_row("parity", group, method, "accuracy", e, ci95=bootstrap_ci95(e))


@register("parity", "Table 4: sparse parity |S| = 6 with a language model (few-shot, rte, exact-search, oracle)")
def run_parity(options: RunOptions, cache_dir: Path | None, plot_dir: Path | None):
    """The parity experiment: both candidate spaces, bootstrap intervals over the 28 test tasks."""
    if options.protocol != "paper":
        raise TaskextrapError("parity has one protocol (the paper's): drop --protocol")
    from taskextrap.llm.pretrain import BaseModel
    from taskextrap.llm.search import DEFAULT_TIE_TOL

    model = BaseModel.from_extra(options.extra)
    profile = get_profile(PARITY_PROFILES, options.profile).with_seeds(options.seeds)
    base = {"experiment": "parity", "profile": profile.to_dict(), "model": model.label("parity"),
            "test_seed": TEST_SEED}
    errors, timing = run_seeds(
        "parity", profile.seeds, cache_dir, name=lambda s: f"parity-seed{s}", config=lambda s: {**base, "seed": s},
        compute=lambda s, _: run_unit(model, profile, s, cache_dir and cache_dir / f"parity-sft-seed{s}",
                                      options.device),
        plot_dir=None, plot_file="", progress=options.progress)
    rows = [_row(errors, m, "size6", m) for m in ("few-shot", "oracle")]
    for space in SPACES:
        rows += [_row(errors, f"{space}/{m}", GROUPS[space], m) for m in SEARCH_METHODS]
        rows.append(_row(errors, f"{space}/found", f"decomposition-found-{space}", "rte"))
    config = {**base, "spaces": {s: GROUPS[s] for s in SPACES}, "tie_tol_nats": DEFAULT_TIE_TOL,
              "n_tasks_wide": profile.n_tasks_wide,
              "mean_tied_candidates": {s: float(np.mean(np.concatenate(errors[f"{s}/n_tied"]))) for s in SPACES}}
    return rows, config, list(profile.seeds), timing
