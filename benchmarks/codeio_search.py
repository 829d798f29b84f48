"""Speed of the CodeIO likelihood search: the full search against the bounded one
(``search.likelihood.candidate_scores(keep_within=...)``, a branch and bound that scores only
what can be within the tie tolerance of the best), on the same fine-tuned extender and tasks.

    python benchmarks/run.py --only codeio-search          # 8 dev tasks, the paper extender
    python benchmarks/codeio_search.py --tasks 4 --profile quick

The extender is the ``paper`` profile's, fine-tuned on the **dev** split's training pairs
(seed 0; cached under ``--cache``, so a rerun only searches); the tasks are the first dev
tasks. Nothing here looks at the test pairs. For each mode the record has the wall time, the
sequences actually scored and the throughput in the full search's sequences per second (992
candidates x 3 leave-one-out prompts per task, whichever were scored). The two modes must agree
on each task's best candidate, its tied candidates and their scores; the file records that
check, and the time the paper profile's search (192 tasks) would take at each rate.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "codeio-search.json"
PAPER_TASKS = 192  # held-out tasks of the paper profile's search (sequence_runs/codeio.py)


@contextlib.contextmanager
def _counting(search_module):
    """Within the block, count the sequences the scorer is given (one entry per call)."""
    calls, score = [], search_module.completion_nll

    def counted(lm, prompts, completions, *args, **kwargs):
        calls.append(len(prompts))
        return score(lm, prompts, completions, *args, **kwargs)

    search_module.completion_nll = counted
    try:
        yield calls
    finally:
        search_module.completion_nll = score


def measure(n_tasks: int, profile_name: str, cache: Path, threads: int) -> dict:
    """Fine-tune (or load) the dev extender, then time both searches on the first ``n_tasks``
    dev tasks; the record described in the module docstring."""
    import torch

    from taskextrap.experiments.codeio import PROFILES as CODEIO_PROFILES
    from taskextrap.sequence_runs.codeio import Split, corpora, fine_tune, for_model, held_out_tasks, search_estimator
    from taskextrap.profiles import get_profile
    from taskextrap.llm.codeio import CodeIOAdapter
    from taskextrap.llm.pretrain import BaseModel
    from taskextrap.search import likelihood
    from taskextrap.search.likelihood import DEFAULT_TIE_TOL, tied

    torch.set_num_threads(threads)
    model = BaseModel()
    profile = for_model(get_profile(CODEIO_PROFILES, profile_name), model)
    split = Split("dev")
    t = time.perf_counter()
    extender = fine_tune(
        model,
        corpora(profile, model, split.pairs()[0])["extender"],
        profile,
        0,
        cache / f"extender-{profile_name}",
        progress="extender (dev)",
    )
    sft_s = time.perf_counter() - t
    tasks = held_out_tasks(None, split)[0][:n_tasks]
    n_full = n_tasks * len(CodeIOAdapter.of(profile).candidates()) * 3
    record, scores = {}, {}
    with _counting(likelihood) as calls:
        for mode, bounded in (("full", False), ("bounded", True)):
            calls.clear()
            t = time.perf_counter()
            scores[mode] = (
                search_estimator(extender, profile, bounded)
                .decompose(tasks, progress=f"search ({mode})")
                .extras["scores"]
            )
            wall = time.perf_counter() - t
            record[mode] = {
                "wall_s": round(wall, 2),
                "sequences_scored": int(sum(calls)),
                "sequences_per_s": round(n_full / wall, 1),
                "paper_search_estimate_s": round(PAPER_TASKS * wall / n_tasks, 0),
            }
            print(
                f"codeio search, {mode}: {wall:.1f} s, {sum(calls)} of {n_full} sequences scored, "
                f"{n_full / wall:.1f} seq/s",
                flush=True,
            )
    full, bounded = scores["full"], scores["bounded"]
    finite = np.isfinite(bounded)
    same = {
        "best": bool((full.argmin(1) == bounded.argmin(1)).all()),
        "tied": all(np.array_equal(tied(f), tied(b)) for f, b in zip(full, bounded, strict=True)),
        "max_abs_score_difference": float(np.abs(full[finite] - bounded[finite]).max()),
        "candidates_scored_whole": round(float(finite.mean()), 4),
    }
    return {
        "profile": profile_name,
        "split": "dev",
        "seed": 0,
        "n_tasks": n_tasks,
        "threads": threads,
        "tie_tolerance": DEFAULT_TIE_TOL,
        "sequences_full_search": n_full,
        "sft_s": round(sft_s, 1),
        "modes": record,
        "agreement": same,
        "speed_up": round(record["full"]["wall_s"] / record["bounded"]["wall_s"], 2),
    }


def main(argv=None):
    from taskextrap.files import write_json_atomic

    from taskextrap.scripts import sibling

    environment_info = sibling(__file__, "run").environment_info

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=8, help="dev tasks searched (default 8: two saved chunks)")
    ap.add_argument("--profile", default="paper", help="the CodeIO profile whose extender recipe is used")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(".bench-cache") / "codeio-search",
        help="where the fine-tuned extender is kept between runs",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    command = "python benchmarks/codeio_search.py " + " ".join(sys.argv[1:] if argv is None else argv)
    doc = {
        "environment": environment_info(),
        "command": command.strip(),
        **measure(args.tasks, args.profile, args.cache, args.threads),
    }
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}: {doc['speed_up']}x, agreement {doc['agreement']}")


if __name__ == "__main__":
    main()
