"""Why EM without meta-labels falls short of supervision (issue 36, part 2), on the dev split only.

    python scripts/diagnose_em.py composition --protocol paper   # about 5 minutes on 2 cores
    python scripts/diagnose_em.py codeio                         # about 25 minutes on 2 cores

An EM arm can fail at either step: the E-step may not find the right labels even with a good
model, or the model that starts EM may be too weak to rank labels. This scores one E-step on the
same hidden training tasks with different models and reports the pseudo-labels' quality:

- ``composition``: the search-only E-step that starts the warm-up arm (random library pairs swept
  over the whole library), and the E-step driven by the *supervised* estimator's decomposer
  (``rte`` of the composition experiment, trained with every label: what the E-step reaches with
  a perfect M-step). Each with pseudo-labels restricted to the training family pairs (what the
  EM arms do) and unrestricted. Also: how often the found label fits the task at least as well as
  the true one (then the E-step did its job and only identifiability limits it).
- ``codeio``: the leave-one-out NLL arg-min over the split's training pairs under three models:
  the base model, the primitive warm-up model that starts the ``rte-em-warmup`` arm (the
  profile's start phase on single primitives), and the supervised extender (every training
  pair's label). Also the true pair's rank among the candidates (chance: half of them).

Everything is fitted on the dev split's training relations, and the hidden tasks are training
tasks of the dev split; no test relation is read. Writes
``benchmarks/results/em-diagnosis-<regime>[-<protocol>].json``.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np
import torch

from taskextrap.files import write_json_atomic
from taskextrap.report.schema import environment_info

OUT_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def mean(v) -> float:
    return float(np.mean(v)) if len(v) else float("nan")


def composition(protocol_name: str, profile_name: str, n_tasks: int | None) -> dict:
    """One E-step on the dev split's hidden training compositions, started three ways."""
    from taskextrap.experiments import composition as C
    from taskextrap.experiments.composition_em import make_em
    from taskextrap.experiments.discrete import DEFAULT_EMBEDDING
    from taskextrap.experiments.settings import UnitSpec
    from taskextrap.tasks.builtin import POLY_SIN_TANH
    from taskextrap.tasks.dev import dev_pair_split
    from taskextrap.tasks.regimes import get_protocol
    from taskextrap.tasks.primitives import PAPER_SPLIT

    profile = C.PROFILES[profile_name]
    protocol = get_protocol(protocol_name, "composition")
    split = dev_pair_split(PAPER_SPLIT)
    prims = C.make_library(profile.n_library)
    t = time.perf_counter()
    spec = UnitSpec(POLY_SIN_TANH, protocol, profile, 0, DEFAULT_EMBEDDING, split=split)
    supervised = C.make_rte(spec).fit(prims)
    fit_s = time.perf_counter() - t
    out = {"fit_s": fit_s, "variants": {}}
    n = n_tasks or profile.n_pairs
    for label_pairs in ("train", "any"):
        em = make_em(spec, 0.0)
        em.label_pairs = label_pairs
        em._adopt(supervised, prims)
        hidden = em._hidden_set(em.train_pool_, n, "train")
        truth = np.stack([hidden.tasks.outer, hidden.tasks.inner], axis=1)
        true_loss = em.context_loss_at(hidden.x, hidden.y, truth[:, :1], truth[:, 1:])[:, 0]
        for start, decomposer in (("search only (warm-up start)", None), ("supervised decomposer", "sup")):
            s = copy.deepcopy(hidden)
            em.history_ = []
            if decomposer is not None:  # the E-step reads candidates through the estimator's decomposer
                em.decomposer_ = supervised.decomposer_
            t = time.perf_counter()
            em._e_step(s, None if decomposer is None else supervised.decomposer_)
            q = em.label_quality(s)
            out["variants"][f"{start}, labels: {label_pairs} pairs"] = {
                "exact": mean(q["exact"]),
                "behaves": mean(q["behaves"]),
                "held_out_pair": mean(q["held_out_pair"]),
                "fits at least as well as the truth": mean(s.loss <= true_loss * (1 + 1e-9)),
                "e_step_s": time.perf_counter() - t,
            }
            print(
                f"{start} ({label_pairs}): {out['variants'][f'{start}, labels: {label_pairs} pairs']}", file=sys.stderr
            )
    out.update(
        {
            "tasks": n,
            "protocol": protocol_name,
            "profile": profile_name,
            "split": repr(split),
            "chance_exact": 1.0 / len(prims) ** 2,
        }
    )
    return out


def codeio(profile_name: str, n_tasks: int, n_loo: int, cache: Path) -> dict:
    """The E-step's arg-min and the true pair's rank under the base, warm-up and supervised models."""
    from taskextrap.estimators.sequence_em import e_step
    from taskextrap.sequence_runs import codeio as codeio_runs
    from taskextrap.experiments import codeio_em as X
    from taskextrap.profiles import get_profile
    from taskextrap.llm import codeio_em as M
    from taskextrap.llm.codeio import CodeIOAdapter
    from taskextrap.llm.pretrain import BaseModel, load_base

    model = BaseModel()
    profile = codeio_runs.for_model(get_profile(X.PROFILES, profile_name), model)
    split = codeio_runs.Split("dev")
    train_pairs = split.pairs()[0]
    tasks = M.em_tasks(train_pairs, n_tasks, 0)
    candidates = M.em_candidates(train_pairs)
    start, _ = X.phase_steps(profile.sft_steps, profile.em_rounds)
    t = time.perf_counter()
    models = {
        "base model": lambda: load_base("codeio", model, "cpu"),
        f"primitive warm-up ({start} steps, the warm-up arm's start)": lambda: X._tune(
            load_base("codeio", model, "cpu"),
            M.single_sampler(profile.score_shots, profile.anchored),
            codeio_runs.SeedRun(model, profile, 0, cache / f"warmup-{profile_name}"),
            start,
            "start",
        ),
        f"supervised extender ({profile.sft_steps} steps, every label)": lambda: codeio_runs.fine_tune(
            model,
            codeio_runs.corpora(profile, model, train_pairs)["extender"],
            profile.codeio(),
            0,
            cache / f"extender-{profile_name}",
            progress="extender (dev)",
        ),
    }
    out = {"variants": {}}
    truth = np.array([candidates.index(t.pair) for t in tasks])
    for name, make in models.items():
        lm = make()
        t = time.perf_counter()
        labels, scores = e_step(
            lm, tasks, CodeIOAdapter.of(profile), candidates, n_loo, profile.score_batch, progress=f"e-step: {name}"
        )
        rank = (scores < scores[np.arange(len(tasks)), truth][:, None]).sum(axis=1)  # 0: the truth is the arg-min
        q = M.label_quality(tasks, labels)
        out["variants"][name] = {
            "exact": mean(q["exact"]),
            "behaves": mean(q["behaves"]),
            "median rank of the truth": float(np.median(rank)),
            "truth in the top 10": mean(rank < 10),
            "e_step_s": time.perf_counter() - t,
        }
        print(f"{name}: {out['variants'][name]}", file=sys.stderr)
        del lm
    out.update(
        {
            "tasks": n_tasks,
            "n_loo": n_loo,
            "candidates": len(candidates),
            "profile": profile_name,
            "split": "dev",
            "chance_exact": 1.0 / len(candidates),
            "chance_median_rank": (len(candidates) - 1) / 2,
        }
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("regime", choices=("composition", "codeio"))
    ap.add_argument("--protocol", default="paper", choices=("paper", "strict"), help="composition only")
    ap.add_argument("--profile", default=None, help="composition: quick (default); codeio: paper (default)")
    ap.add_argument(
        "--tasks", type=int, default=None, help="hidden training tasks (composition: the profile's n_pairs; codeio: 24)"
    )
    ap.add_argument("--loo", type=int, default=1, help="codeio: held-out support examples scored per task")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(".bench-cache") / "codeio-search",
        help="codeio: where the fine-tuned models are kept between runs",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    if args.regime == "composition":
        report = composition(args.protocol, args.profile or "quick", args.tasks)
        name = f"em-diagnosis-composition-{args.protocol}"
    else:
        report = codeio(args.profile or "paper", args.tasks or 24, args.loo, args.cache)
        name = "em-diagnosis-codeio"
    report.update(
        {
            "regime": args.regime,
            "seed": 0,
            "wall_s": time.perf_counter() - t0,
            "command": "python scripts/diagnose_em.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "environment": environment_info(),
        }
    )
    out = args.out or OUT_DIR / f"{name}.json"
    write_json_atomic(out, report)
    print(f"wrote {out} ({report['wall_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
