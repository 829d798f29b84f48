"""Check a fine-tuning recipe for the default CodeIO model before an 84-minute paper run.

    python scripts/codeio_sft_check.py extender --steps 1150 --lr 5e-4 --full --warmup 50
    python scripts/codeio_sft_check.py extender --steps 1150 --lr 2e-4 --warmup 5     # the paper's LoRA
    python scripts/codeio_sft_check.py extender --full --score-shots   # loss on the shot answers too

Trains one run (``extender`` or ``few-shot``) of the ``paper`` profile with the given settings and
prints its completion loss and the exact match of its method (``oracle`` for the extender,
``few-shot`` otherwise) on every 16th training pair with fresh strings ("train"), which is what a
recipe should be chosen on, and on every 4th held-out task ("held", for information only).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch

from taskextrap.experiments import codeio as E
from taskextrap.llm import codeio as C
from taskextrap.llm.pretrain import BaseModel, load_base
from taskextrap.llm.sft import CODEIO_LORA, merge_lora, train

TRAIN_STRINGS_SEED = 777  # fresh strings for the training-pair tasks (the test tasks use 10,000)


def check(corpus: str, steps: int, lr: float, full: bool, warmup: int, train_every: int = 16,
          held_every: int = 4, seed: int = 0, score_shots: bool = False, anchored: bool = False) -> dict:
    """Train one run and return {"sft_s", "final_loss" (mean of the last 50 steps), "train", "held"}."""
    profile = dataclasses.replace(E.CODEIO_PROFILES["paper"], anchored=anchored)
    cfg = dataclasses.replace(E.sft_config(profile, seed, BaseModel()), steps=steps, lr=lr, warmup_steps=warmup,
                              lora=None if full else CODEIO_LORA)
    train_pairs, test_pairs = C.split_pairs(E.SPLIT_SEED)
    t = time.perf_counter()
    lm, log = train(load_base("codeio", BaseModel()), E.samplers(train_pairs, score_shots, anchored)[corpus], cfg)
    out = {"sft_s": time.perf_counter() - t, "final_loss": float(np.mean(log["loss"][-50:]))}
    lm = lm if full else merge_lora(lm)
    method = "oracle" if corpus == "extender" else "few-shot"
    for name, tasks in (("train", C.make_test_tasks(train_pairs[::train_every], TRAIN_STRINGS_SEED)),
                        ("held", C.make_test_tasks(test_pairs, E.TEST_SEED)[::held_every])):
        said = E.predict(method, lm, tasks, profile, seed)
        out[name] = float(np.mean([a == tk.query[1] for a, tk in zip(said, tasks)]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", choices=["extender", "few-shot"])
    ap.add_argument("--steps", type=int, default=1150)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--full", action="store_true", help="train every parameter (default: the paper's LoRA)")
    ap.add_argument("--score-shots", action="store_true", help="the loss also covers the shot answers")
    ap.add_argument("--anchored", action="store_true", help="the extender's target section shows a(x) before ' =>'")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(check(args.corpus, args.steps, args.lr, args.full, args.warmup, score_shots=args.score_shots, anchored=args.anchored))


if __name__ == "__main__":
    main()
