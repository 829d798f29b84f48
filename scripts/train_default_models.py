"""Train the shipped default language models from scratch on CPU (run once; see taskextrap.llm.pretrain).

    python scripts/train_default_models.py parity          # writes src/taskextrap/llm/models/parity/
    python scripts/train_default_models.py parity-dev      # the --split dev base (sizes 2-4 only)

Resumable: checkpoints go to runs/pretrain/<name>/ and an interrupted run continues from the latest.
With --continue, the shipped model is the start and only the stages its log lacks are trained
(after a spec gained a stage).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from taskextrap.llm.pretrain import SPECS, pretrain


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+", choices=sorted(SPECS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--continue",
        dest="cont",
        action="store_true",
        help="start from the shipped model and train only the spec's stages it lacks",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.names:
        t0 = time.perf_counter()

        def report(stage, step, loss, t0=t0, name=name):
            if step % 100 == 0:
                print(
                    f"{name} stage {stage} step {step} loss {loss:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True
                )

        _, log = pretrain(
            name, checkpoint_dir=Path("runs/pretrain") / name, progress=report, continue_shipped=args.cont
        )
        losses = ", ".join(f"{st['final_loss']:.4f}" for st in log["stages"])
        print(f"{name}: final loss per stage {losses}; check {log['check']}; {log['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
