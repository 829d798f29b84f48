"""Does a classic fitted alone lose anything by drawing from at most ``OWN_TASKS`` library tasks
(issue 65)? On dev: the cubic family's dev split, a library of ``--tasks`` tasks (above the cap),
``meta-gp`` and ``cnp`` at the parameter regime's dev-chosen variants fitted once with the cap
(``baselines.method.OWN_TASKS``, 1,024) and once without it, each scored on the same 100 dev
targets (one draw each, the paper protocol); the paired difference capped − uncapped per target
(``report.compare.paired_difference``; one seed: a clear difference is this seed's), and the fit
seconds of each.

    python benchmarks/own_tasks_dev.py                    # 3,072 tasks
    python benchmarks/own_tasks_dev.py --tasks 1500 --out /tmp/o.json   # a plumbing check

Writes ``benchmarks/results/own-tasks-dev.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from taskextrap.scripts import sibling

_scale = sibling(__file__, "scale")
library_of, targets_and_draws, write_result = _scale.library_of, _scale.targets_and_draws, _scale.write_result

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("meta-gp", "cnp")


def fit_and_score(method: str, library, obs, cap: int, seed: int) -> dict:
    """``method`` (the parameter regime's dev-chosen variant) fitted alone on ``library`` with
    ``cap`` as OWN_TASKS, its per-target MSE on ``obs`` and its fit seconds."""
    import numpy as np

    from taskextrap.baselines import method as method_module
    from taskextrap.baselines.classics import chosen
    from taskextrap.baselines.table import get_method
    from taskextrap.operators.train import TrainConfig

    saved = method_module.OWN_TASKS
    method_module.OWN_TASKS = cap
    try:
        entry = get_method(chosen("parameter")[method])
        model = entry.build(seed=seed, device="cpu", protocol="paper", train=TrainConfig(steps=1000, batch=4096))
        t = time.perf_counter()
        model.fit(library)
        fit_s = time.perf_counter() - t
    finally:
        method_module.OWN_TASKS = saved
    pred = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)[0]
    per_target = ((pred - obs.qry_y) ** 2).mean(1)
    return {"variant": entry.name, "fit_s": round(fit_s, 1), "per_target_mse": per_target.tolist(),
            "mse": float(np.mean(per_target))}  # fmt: skip


def run(n: int, seed: int) -> dict:
    import numpy as np
    import torch

    from taskextrap.baselines.method import OWN_TASKS
    from taskextrap.report.compare import paired_difference

    torch.set_num_threads(1)
    library, obs = library_of(n, seed, "dev"), targets_and_draws("dev")
    out: dict = {"tasks": n, "cap": OWN_TASKS, "methods": {}}
    for m in METHODS:
        capped = fit_and_score(m, library, obs, OWN_TASKS, seed)
        whole = fit_and_score(m, library, obs, 10**9, seed)
        d = paired_difference(np.asarray(capped["per_target_mse"]), np.asarray(whole["per_target_mse"]))
        diff = {"diff": d["diff"], "interval": [d["lo"], d["hi"]], "clear": d["clear"]}
        out["methods"][m] = {"capped": capped, "uncapped": whole, "capped_minus_uncapped": diff}
        said = f"capped {capped['mse']:.4g} ({capped['fit_s']} s), uncapped {whole['mse']:.4g} ({whole['fit_s']} s)"
        print(f"{m}: {said}", file=sys.stderr)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=3072)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "own-tasks-dev.json")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    doc = run(a.tasks, a.seed) | {"family": "cubic", "split": "dev", "seed": a.seed}
    write_result(a.out, "own_tasks_dev.py", argv, t, doc)


if __name__ == "__main__":
    main()
