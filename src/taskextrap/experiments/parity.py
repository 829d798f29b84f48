"""Sparse parity with a language model (paper §4.1, Table 4; Appendix I): the experiment, its
profiles, units and rows. What a seed runs (two LoRA runs, every method) is in
:mod:`taskextrap.sequence_runs.parity`, which says how each method answers.

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

from pathlib import Path

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.profiles import TINY_SFT, LLMProfile
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, UnitResult, fingerprint, gather, seed_units
from taskextrap.report.schema import accuracy_row
from taskextrap.sequence_runs import parity as parity_runs
from taskextrap.sequence_runs.parity import SEARCH_METHODS, SPACES

TARGET_SIZE = {"test": 6, "dev": 5}


def group_of(space: str, split: str = "test") -> str:
    """The row group of candidate space ``space``: ``size6-<space>`` (``size5-<space>`` under dev)."""
    if space not in SPACES or split not in TARGET_SIZE:
        raise TaskextrapError(f"unknown parity space/split {space!r}/{split!r}")
    return f"size{TARGET_SIZE[split]}-{space}"


PROFILES = {
    "quick": LLMProfile(name="quick", seeds=(0,), sft_steps=150, sft_batch=16, sft_lr=2e-4, warmup=15, n_tasks_wide=8),
    "paper": LLMProfile(name="paper", seeds=(0, 1, 2), sft_steps=600, sft_batch=16, sft_lr=2e-4, warmup=50),
    "tiny": LLMProfile(**TINY_SFT, n_tasks_wide=1, score_batch=32),
}


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
    PROFILES,
    options=("device", "extra", "test_seed"),
    dev=True,
)
def run_parity(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """The parity experiment on ``options.split``: every candidate space, bootstrap intervals over
    the held-out tasks (test: 28 of size 6; dev: 56 of size 5), drawn from ``options.seed_of_tests``."""
    options = settings.options
    from taskextrap.tasks import parity as parity_tasks
    from taskextrap.llm.pretrain import BaseModel
    from taskextrap.search.likelihood import DEFAULT_TIE_TOL

    split, test_seed = options.split, options.seed_of_tests
    sp = parity_tasks.get_split(split)
    model = BaseModel.from_extra(options.extra)
    profile = settings.profile
    # "threads" as units.bind adds it: the checkpoints are named by the unit's own key
    base = {
        "experiment": "parity",
        "profile": profile.to_dict(),
        "model": model.label(parity_runs.base_model_name(split)),
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
        compute=lambda s, _: UnitResult(
            *parity_runs.run_seed(
                model,
                profile,
                s,
                cache_dir and cache_dir / f"{tag}-sft-seed{s}-{fingerprint(**base, seed=s)}",
                options.device,
                split,
                test_seed,
            )
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
