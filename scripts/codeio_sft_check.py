"""Check a fine-tuning recipe for the default CodeIO model on the dev split, before a paper run.

    python scripts/codeio_sft_check.py extender --steps 1150 --lr 5e-4 --full --warmup 50
    python scripts/codeio_sft_check.py extender --steps 1150 --lr 2e-4 --warmup 5     # the paper's LoRA
    python scripts/codeio_sft_check.py extender --full --score-shots   # loss on the shot answers too

Trains one run (``extender`` or ``few-shot``) of the ``paper`` profile with the given settings on
the dev-training pairs (``tasks.strings.dev_split``: the training pairs of the pair split less a
seeded fifth) and prints its completion loss and the exact match of its method (``oracle`` for
the extender, ``few-shot`` otherwise) on every 16th dev-training pair with fresh strings
("train") and on every dev task ("dev", the held-out fifth: 153 tasks at split seed 1). A recipe
is chosen on these; no held-out test pair is trained on or evaluated. Each run is recorded under
its recipe's name in ``benchmarks/results/codeio-recipe-dev.json`` (``--out``), with the command
and its per-task hits on the dev tasks (``dev_hits``), so two recipes can be compared task by task:

    python scripts/codeio_sft_check.py --compare "extender full ... score-shots" "extender full ... anchored"

prints the paired difference of their dev exact match (``report.compare.paired_difference``,
bootstrap over the dev tasks) and records it under ``comparisons``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import torch

from taskextrap.errors import TaskextrapError
from taskextrap.experiments import codeio as E
from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap.tasks import strings as S
from taskextrap.llm.pretrain import BaseModel, load_base
from taskextrap.llm.sft import CODEIO_LORA, merge_lora, train
from taskextrap.report.compare import paired_difference
from taskextrap.files import read_json, write_json_atomic
from taskextrap.report.schema import environment_info

OUT = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "codeio-recipe-dev.json"
TRAIN_STRINGS_SEED = 777  # fresh strings for the training-pair tasks (the dev tasks use the default test seed)


def check(
    corpus: str,
    steps: int,
    lr: float,
    full: bool,
    warmup: int,
    train_every: int = 16,
    dev_every: int = 1,
    seed: int = 0,
    score_shots: bool = False,
    anchored: bool = False,
    split_seed: int = codeio_runs.SPLIT_SEED,
) -> dict:
    """Train one run on the dev-training pairs; return {"sft_s", "final_loss" (mean of the last
    50 steps), "train", "dev", "dev_hits"}: exact match on training-pair and dev tasks, and the
    dev tasks' hits (1/0, in task order) for paired comparisons."""
    profile = dataclasses.replace(E.PROFILES["paper"], anchored=anchored)
    cfg = dataclasses.replace(
        codeio_runs.sft_config(profile, seed, BaseModel()),
        steps=steps,
        lr=lr,
        warmup_steps=warmup,
        lora=None if full else CODEIO_LORA,
    )
    split = codeio_runs.Split("dev", split_seed)
    dev_train, _ = split.pairs()
    t = time.perf_counter()
    lm, log = train(
        load_base("codeio", BaseModel()), codeio_runs.samplers(dev_train, score_shots, anchored)[corpus], cfg
    )
    out = {"sft_s": time.perf_counter() - t, "final_loss": float(np.mean(log["loss"][-50:]))}
    lm = lm if full else merge_lora(lm)
    method = "oracle" if corpus == "extender" else "few-shot"
    for name, tasks in (
        ("train", S.make_test_tasks(dev_train[::train_every], TRAIN_STRINGS_SEED, stream="train")),
        ("dev", codeio_runs.held_out_tasks(None, split)[0][::dev_every]),
    ):
        said = codeio_runs.predict(method, lm, tasks, profile, seed)
        out[name + "_hits"] = [int(a == tk.query[1]) for a, tk in zip(said, tasks, strict=True)]
        out[name] = float(np.mean(out[name + "_hits"]))
    del out["train_hits"]  # only the dev tasks are compared
    return out


def compare(results: dict, a: str, b: str) -> dict:
    """The paired difference ``a - b`` of two recorded recipes' dev exact match, task by task
    (``report.compare.paired_difference`` with the accuracy bootstrap); both must carry
    ``dev_hits`` over the same dev tasks."""
    runs = results.get("runs", {})
    for name in (a, b):
        if name not in runs:
            raise TaskextrapError(f"no recorded recipe {name!r}; recorded: {', '.join(sorted(runs)) or 'none'}")
        if "dev_hits" not in runs[name]:
            raise TaskextrapError(
                f"recipe {name!r} has no per-task dev hits (recorded before they were kept); re-run it"
            )
    if runs[a].get("split_seed") != runs[b].get("split_seed") or len(runs[a]["dev_hits"]) != len(runs[b]["dev_hits"]):
        raise TaskextrapError(
            f"recipes {a!r} and {b!r} were scored on different dev tasks (split seed or count differ)"
        )
    d = paired_difference(np.array(runs[a]["dev_hits"], float), np.array(runs[b]["dev_hits"], float), metric="accuracy")
    return {"a": a, "b": b, "diff": d["diff"], "lo": d["lo"], "hi": d["hi"], "n": d["n"], "clear": d["clear"]}


def main():
    """Command line: train and check one recipe, or compare two recorded ones (``--compare``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", choices=["extender", "few-shot"])
    ap.add_argument(
        "--compare",
        nargs=2,
        metavar=("RECIPE_A", "RECIPE_B"),
        help="compare two recorded recipes task by task instead of training one",
    )
    ap.add_argument("--steps", type=int, default=1150)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--full", action="store_true", help="train every parameter (default: the paper's LoRA)")
    ap.add_argument("--score-shots", action="store_true", help="the loss also covers the shot answers")
    ap.add_argument("--anchored", action="store_true", help="the extender's shot lines show a(x) before ' =>'")
    ap.add_argument("--split-seed", type=int, default=codeio_runs.SPLIT_SEED, help="seed of the pair split")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT, help="results file the run is added to")
    args = ap.parse_args()
    results = read_json(args.out) if args.out.exists() else {"runs": {}}
    if args.compare:
        try:
            cmp = compare(results, *args.compare)
        except TaskextrapError as e:
            sys.exit(f"error: {e}")
        print(
            f"{cmp['a']} - {cmp['b']}: {cmp['diff']:+.3f} [{cmp['lo']:+.3f}, {cmp['hi']:+.3f}] over {cmp['n']} dev "
            f"tasks ({'clear' if cmp['clear'] else 'not clear'})"
        )
        results.setdefault("comparisons", {})[" vs ".join(args.compare)] = cmp
        write_json_atomic(args.out, results)
        return
    if args.corpus is None:
        ap.error("give a corpus (extender or few-shot) or --compare RECIPE_A RECIPE_B")
    torch.set_num_threads(args.threads)
    out = check(
        args.corpus,
        args.steps,
        args.lr,
        args.full,
        args.warmup,
        score_shots=args.score_shots,
        anchored=args.anchored,
        split_seed=args.split_seed,
    )
    print({k: v for k, v in out.items() if k != "dev_hits"})
    name = recipe_name(args)
    results = read_json(args.out) if args.out.exists() else {"runs": {}}  # re-read: another run may have landed
    run = {
        **out,
        "command": "python scripts/codeio_sft_check.py " + " ".join(sys.argv[1:]),
        "seed": 0,
        "split_seed": args.split_seed,
        "environment": environment_info(),
    }
    write_json_atomic(args.out, record(results, name, run))


def record(results: dict, name: str, run: dict) -> dict:
    """``results`` with ``run`` recorded under ``name``; the comparisons that name it are dropped
    (they were computed on the run it replaces)."""
    comparisons = {k: c for k, c in (results.get("comparisons") or {}).items() if name not in (c["a"], c["b"])}
    return {**results, "runs": {**results.get("runs", {}), name: run}, "comparisons": comparisons}


def recipe_name(args) -> str:
    """A run's key in the results file, e.g. ``extender full lr0.0005 warmup50 steps1150 score-shots anchored``."""
    parts = [
        args.corpus,
        "full" if args.full else "lora",
        f"lr{args.lr:g}",
        f"warmup{args.warmup}",
        f"steps{args.steps}",
    ]
    parts += [flag for flag, on in (("score-shots", args.score_shots), ("anchored", args.anchored)) if on]
    return " ".join(parts + ([f"split{args.split_seed}"] if args.split_seed != codeio_runs.SPLIT_SEED else []))


if __name__ == "__main__":
    main()
