"""Sparse parity with a language model (paper §4.1, Table 4; Appendix I).

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

Candidate spaces, one row group each (``size6-<space>``; ``size5-<space>`` under dev), run in
this order, each labelled with what it assumes (``tasks.parity.SPACE_ASSUMPTIONS``):

- ``authors``: every frontier-size mask x every bit 0-7 (448 under test), the authors' code's
  space and so the one the paper's Table 4 numbers come from: its group leads the table and is
  the only group with the paper's values;
- ``frontier``: frontier-size parents x a bit they lack (168): assumes the target lies one step
  beyond the training frontier (the length regime's assumption);
- ``all``: every training mask x every bit (1680; the paper's wording), on ``n_tasks_wide`` tasks.

``few-shot`` and ``oracle`` use no candidate space; their rows stand, with the same values, in
every group, so that each space's ``rte`` is compared with them on the same tasks.

Accuracy is a fraction; its interval is a bootstrap over the held-out tasks.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.experiments.profiles import LLMProfile, get_profile
from taskextrap.experiments.registry import FRESH_TEST_SEED, RunOptions, register
from taskextrap.experiments.units import Plan, UnitResult, fingerprint, gather, seed_units
from taskextrap.report.schema import accuracy_row

if TYPE_CHECKING:  # the llm extra is imported only when an experiment runs
    from taskextrap.llm.pretrain import BaseModel

SPACES = ("authors", "frontier", "all")  # run and tabulated in this order (== tasks.parity.SPACES)
WIDE_SPACES = ("all",)  # scored on profile.n_tasks_wide tasks only
TARGET_SIZE = {"test": 6, "dev": 5}
SEARCH_METHODS = ("rte", "rte-tie-vote", "exact-search", "exact-search-tie-vote")


def group_of(space: str, split: str = "test") -> str:
    """The row group of candidate space ``space``: ``size6-<space>`` (``size5-<space>`` under dev)."""
    if space not in SPACES or split not in TARGET_SIZE:
        raise TaskextrapError(f"unknown parity space/split {space!r}/{split!r}")
    return f"size{TARGET_SIZE[split]}-{space}"


def base_model_name(split: str) -> str:
    """The default model a split starts from: ``parity``, or ``parity-dev`` (pretrained on sizes 2-4)."""
    return "parity-dev" if split == "dev" else "parity"


PARITY_PROFILES = {
    "quick": LLMProfile("quick", (0,), sft_steps=150, sft_batch=16, sft_lr=2e-4, warmup=15, n_tasks_wide=8),
    "paper": LLMProfile("paper", (0, 1, 2), sft_steps=600, sft_batch=16, sft_lr=2e-4, warmup=50),
    "tiny": LLMProfile(
        "tiny", (0,), sft_steps=2, sft_batch=2, sft_lr=2e-4, warmup=1, n_tasks=1, n_tasks_wide=1, score_batch=32
    ),
}


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


def run_unit(
    model: BaseModel,
    profile: LLMProfile,
    seed: int,
    ckpt_dir: Path | None,
    device: str = "cpu",
    split: str = "test",
    test_seed: int = FRESH_TEST_SEED,
) -> UnitResult:
    """Both LoRA runs of one seed on ``split``'s training masks, then every method on its held-out
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
    return UnitResult(errors, timing)


def _accuracy(lm, tasks, prompts_of, profile: LLMProfile) -> np.ndarray:
    """Per task, the fraction of its queries whose greedy label (``baselines.prompting.few_shot``,
    ``llm.parity.label_of``) is right; ``prompts_of(task)``: one prompt per query."""
    from taskextrap.baselines.prompting import few_shot
    from taskextrap.llm.parity import LABEL_TOKENS, label_of

    prompts = [p for t in tasks for p in prompts_of(t)]
    pred = np.array(few_shot(lm, prompts, LABEL_TOKENS, profile.score_batch, label_of)).reshape(len(tasks), -1)
    return (pred == np.stack([t.query_y for t in tasks])).mean(axis=1)


def _rows(errors, split: str) -> list[dict]:
    """The table, one group per space (authors first): few-shot, the searches, oracle; then the
    decomposition-found diagnostics. few-shot and oracle use no candidate space: the same values
    stand in every group, so each group compares its rte with them (paper values: authors only)."""
    rows: list[dict] = []
    for space in SPACES:
        group = group_of(space, split)
        rows.append(accuracy_row("parity", errors["few-shot"], group, "few-shot"))
        rows += [accuracy_row("parity", errors[f"{space}/{m}"], group, m) for m in SEARCH_METHODS]
        rows.append(accuracy_row("parity", errors["oracle"], group, "oracle"))
    rows += [accuracy_row("parity", errors[f"{s}/found"], f"decomposition-found-{s}", "rte") for s in SPACES]
    return rows


def _spaces_config(split: str) -> dict:
    """Per space: its row group, candidate count and what it assumes (for results.json)."""
    from taskextrap.tasks import parity as parity_tasks

    return {
        s: {
            "group": group_of(s, split),
            "n_candidates": len(parity_tasks.candidates(s, split)),
            "assumes": parity_tasks.SPACE_ASSUMPTIONS[s],
        }
        for s in SPACES
    }


@register(
    "parity",
    "Table 4: sparse parity |S| = 6 with a language model (few-shot, rte, exact-search, oracle)",
    PARITY_PROFILES,
    options=("device", "extra", "test_seed"),
    dev=True,
)
def run_parity(options: RunOptions, cache_dir: Path | None, plot_dir: Path | None):
    """The parity experiment on ``options.split``: every candidate space, bootstrap intervals over
    the held-out tasks (test: 28 of size 6; dev: 56 of size 5), drawn from ``options.seed_of_tests``."""
    from taskextrap.tasks import parity as parity_tasks
    from taskextrap.llm.pretrain import BaseModel
    from taskextrap.search.likelihood import DEFAULT_TIE_TOL

    split, test_seed = options.split, options.seed_of_tests
    sp = parity_tasks.get_split(split)
    model = BaseModel.from_extra(options.extra)
    profile = get_profile(PARITY_PROFILES, options.profile).with_seeds(options.seeds, options.seed)
    # "threads" as units.bind adds it: the checkpoints are named by the unit's own key
    base = {
        "experiment": "parity",
        "profile": profile.to_dict(),
        "model": model.label(base_model_name(split)),
        "split": split,
        "test_seed": test_seed,
        "threads": options.unit_cpus,
    }
    tag = "parity" if split == "test" else f"parity-{split}"
    units = seed_units(
        profile.seeds,
        name=lambda s: f"{tag}-seed{s}",
        config=lambda s: {**base, "seed": s},
        # the checkpoints are named by the unit's fingerprint too: other settings or other code
        # never resume from them
        compute=lambda s, _: run_unit(
            model,
            profile,
            s,
            cache_dir and cache_dir / f"{tag}-sft-seed{s}-{fingerprint(**base, seed=s)}",
            options.device,
            split,
            test_seed,
        ),
    )

    def assemble(results):
        errors, timing = gather(results, units)
        config = {
            **base,
            "train_sizes": list(sp.train_sizes),
            "target_size": sp.target_size,
            "spaces": _spaces_config(split),
            "few_shot_and_oracle": "use no candidate space: the same values in every space's group",
            "tie_tol_nats": DEFAULT_TIE_TOL,
            "n_tasks_wide": profile.n_tasks_wide,
            "mean_tied_candidates": {s: float(np.mean(np.concatenate(errors[f"{s}/n_tied"]))) for s in SPACES},
        }
        return _rows(errors, split), config, list(profile.seeds), timing

    return Plan(units, assemble)
