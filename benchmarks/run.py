"""Benchmarks (``make bench``): accuracy of every method under both protocols beside the paper's
numbers, the Gamma-estimator comparison, and wall time per phase. Writes JSON under
benchmarks/results/. Not part of the test suite.

    python benchmarks/run.py                       # everything: hours on 2 cores (paper profiles)
    python benchmarks/run.py --profiles quick      # the quick profile only
    python benchmarks/run.py --only embeddings     # just the Gamma comparison
    python benchmarks/run.py --only nn-index       # nearest-neighbour backends (a minute or so)
    python benchmarks/run.py --only depth3-search  # the depth-3 k^3 search against its Python loop
    python benchmarks/run.py --only length --profiles quick --protocols paper
    python benchmarks/run.py --only executors      # serial against Ray on the quick parameter sweep
    python benchmarks/run.py --only codeio-em --profiles quick --split dev  # App. B.2 EM, dev split
    python benchmarks/run.py --only speed [--device cuda]  # one paper unit per experiment, timed (speed.py)
    python benchmarks/run.py --only kernels        # the kernels behind the speed work (kernel_timings.py)
    python benchmarks/run.py --only em-estep       # the composition-em E-step sweep settings (em_estep.py)
    python benchmarks/run.py --only scale          # fit cost against library size (scale.py)
    python benchmarks/run.py --only stream         # a Parquet library indexed serially and on Ray (stream.py)

Finished units are cached under benchmarks/results/runs/units, so an interrupted run resumes and
the ablation experiments reuse the main experiments' fits; benchmarks/paired.py compares two
methods target by target from those files.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch

from taskextrap.embed import EMBEDDINGS
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.scripts import sibling
from taskextrap.operators.train import TrainConfig
from taskextrap.files import write_json_atomic
from taskextrap.report.schema import environment_info
from taskextrap.tasks import PARAMETER_FAMILIES


OUT = Path(__file__).parent / "results"
FIGURES = OUT / "figures"  # figures the docs show, copied from the benchmark runs that drew them


def bench_embeddings(seed: int = 0) -> dict:
    """Spearman(proxy distance, true parameter distance) on validation F1 tasks, per estimator."""
    ranking_quality = sibling(__file__, "quality").ranking_quality
    out = {}
    for protocol in ("paper", "strict"):
        for fam in PARAMETER_FAMILIES.values():
            for method in EMBEDDINGS:
                t = time.perf_counter()
                q = ranking_quality(fam, protocol, method, seed=seed)
                q["wall_s"] = time.perf_counter() - t
                out[f"{protocol}/{fam.name}/{method}"] = q
                print(
                    f"embedding {protocol:6s} {fam.name:10s} {method:8s} "
                    f"rho_theta={q['rho_theta']:.3f} rho_shift={q['rho_shift']:.3f} nn_top5={q['nn_top5']:.2f}"
                )
    means = {}
    for protocol in ("paper", "strict"):
        for method in EMBEDDINGS:
            vals = [out[f"{protocol}/{f}/{method}"]["rho_theta"] for f in PARAMETER_FAMILIES]
            means[f"{protocol}/{method}"] = sum(vals) / len(vals)
    return {"per_family": out, "mean_rho_theta": means}


def bench_length_embeddings(seed: int = 0) -> dict:
    """Predecessor retrieval by each Gamma estimator on held-out training-level steps (quick sizes)."""
    from taskextrap.experiments.length import PROFILES as LENGTH_PROFILES, make_library
    from taskextrap.estimators.length import LengthRTE
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER

    prof = LENGTH_PROFILES["quick"]
    library = make_library(POLYNOMIAL_LADDER, prof.n_library)
    out = {}
    for protocol in ("paper", "strict"):
        for method in EMBEDDINGS:
            t = time.perf_counter()
            # Psi_ext is not measured here: one step keeps the fit to Gamma and the decomposer.
            model = LengthRTE(
                protocol=protocol,
                embedding=method,
                n_pairs=512,
                train=TrainConfig(steps=1, batch=512),
                decomposer_train=prof.decomposer_train,
                seed=seed,
                verbose=False,  # this loop prints a line per fit
            )
            q = model.fit(library).retrieval_quality()
            q["wall_s"] = time.perf_counter() - t
            out[f"{protocol}/{method}"] = q
            print(f"length retrieval {protocol:6s} {method:8s} " + " ".join(f"{k}={v:.3g}" for k, v in q.items()))
    return out


SPLIT = "test"  # set by --split
THREADS = 2  # set by --threads: the torch threads of every unit
SEEDS = None  # set by --seeds: the first N training seeds (None: the profile's)


def bench_experiment(name: str, profile: str, protocol: str, family: str | None = None) -> dict:
    """Run one registered experiment on ``SPLIT`` (on ``family``, a ``module:attr``, when given);
    return its rows, paired comparisons, seeds, per-phase timing and config (which records the
    split and the test seed)."""
    opts = RunOptions(
        profile=profile,
        protocol=protocol,
        out=OUT / "runs",
        progress=True,
        split=SPLIT,
        unit_cpus=THREADS,
        seeds=SEEDS,
        family=family,
    )
    res = run_experiment(name, opts)
    return {key: res[key] for key in ("rows", "comparisons", "seeds", "timing", "config")}


def keep_figures(run: str, profile: str) -> None:
    """Copy a test-split run's PNGs to ``results/figures/<name>-<profile>.png`` (dev runs keep none)."""
    if SPLIT != "test":
        return
    FIGURES.mkdir(exist_ok=True)
    for png in sorted((OUT / "runs" / run / "plots").glob("*.png")):
        shutil.copyfile(png, FIGURES / png.name.replace(".png", f"-{profile}.png"))


def result_path(stem: str) -> Path:
    """Where a benchmark result goes: ``results/<stem>.json``, ``<stem>-dev.json`` on the dev split."""
    return OUT / (f"{stem}-dev.json" if SPLIT == "dev" else f"{stem}.json")


def bench_scoring(n_tasks: int = 4) -> dict:
    """Candidate-scoring throughput of the likelihood search with the default parity model, on
    the authors' candidate space (the headline one) and dev tasks (timing needs no test task)."""
    from taskextrap.llm import parity as P
    from taskextrap.tasks import parity as T
    from taskextrap.llm.pretrain import default_model
    from taskextrap.llm.scorer import completion_nll

    lm = default_model("parity")
    tasks = T.make_test_tasks(0, split="dev")[:n_tasks]
    cands = T.candidates("authors", split="dev")
    pairs = [p for t in tasks for c in cands for p in P.loo_pairs(t, *c)]
    out = {}
    for batch in (16, 64):
        t = time.perf_counter()
        completion_nll(lm, [p for p, _ in pairs], [c for _, c in pairs], batch_size=batch)
        wall = time.perf_counter() - t
        out[f"batch{batch}"] = {
            "pairs_per_s": len(pairs) / wall,
            "candidates_per_s": len(tasks) * len(cands) / wall,
            "wall_s": wall,
            "n_pairs": len(pairs),
        }
    return out


def bench_codeio_scoring(n_tasks: int = 1, n_plain: int = 128, split=None) -> dict:
    """Candidate-scoring throughput of the CodeIO likelihood search with the default codeio model.

    ``n_tasks`` held-out tasks, all 992 candidates (3 leave-one-out prompts each), scored as the
    search does (``search.likelihood.prefix_keys`` by first function: the prompts of one held-out example
    under the candidates with the same first function run the header and that block once); and
    the first ``n_plain`` candidates with no sharing, for the before/after. The base model
    stands in for the extender: same architecture, same cost. The prompts are the ``paper``
    profile's (anchored or not); the tasks are the first of ``split`` (default: the test split
    of the default seeds; ``Split("test", 0, 10_000)`` gives the task of the earlier benchmark).
    ``n_plain=0`` skips the no-sharing run.
    """
    from taskextrap.experiments.codeio import PROFILES as CODEIO_PROFILES
    from taskextrap.sequence_runs.codeio import Split, held_out_tasks
    from taskextrap.llm import codeio as C
    from taskextrap.tasks import strings as S
    from taskextrap.llm.pretrain import default_model
    from taskextrap.search.likelihood import prefix_keys, total_nll

    lm = default_model("codeio")
    tasks = held_out_tasks(n_tasks, split or Split())[0]
    anchored = CODEIO_PROFILES["paper"].anchored
    cands = S.candidates()
    out = {}
    for label, share, n in (("shared-prefix", True, len(cands)), ("no-sharing", False, n_plain))[: 1 + (n_plain > 0)]:
        lists = [C.loo_pairs(c, t.support, t.fillers, anchored) for t in tasks for c in cands[:n]]
        first = lambda c: S.functions_of(c)[0]  # noqa: E731
        keys = prefix_keys(len(tasks), cands[:n], len(tasks[0].support), first) if share else None
        n_tokens = sum(len(lm.prompt_ids(p)) + len(lm.completion_ids(c)) for pairs in lists for p, c in pairs)
        t = time.perf_counter()
        total_nll(lm, lists, batch_size=64, prefix_keys=keys)
        wall = time.perf_counter() - t
        m = n * len(tasks)
        out[label] = {
            "anchored": anchored,
            "candidates_per_s": m / wall,
            "sequences_per_s": 3 * m / wall,
            "tokens_per_s": n_tokens / wall,
            "wall_s": wall,
            "n_candidates": m,
        }
        print(f"codeio scoring {label}: {m / wall:.1f} candidates/s ({wall:.1f} s for {m})")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", nargs="+", default=["quick", "paper"])
    ap.add_argument("--protocols", nargs="+", default=["paper", "strict"])
    ap.add_argument(
        "--split",
        choices=["test", "dev"],
        default="test",
        help="dev: the pseudo-extrapolation inside training, on which choices are made",
    )
    ap.add_argument(
        "--only",
        choices=[
            "nn-index",
            "depth3-search",
            "embeddings",
            "length-embeddings",
            "parameter",
            "projectile",
            "length",
            "composition",
            "ablations",
            "multistep",
            "parameter-ablations",
            "length-ablations",
            "composition-ablations",
            "parameter-multistep",
            "composition-depth3",
            "parity",
            "codeio",
            "executors",
            "unseen",
            "manifolds",
            "composition-em",
            "codeio-em",
            "llm-geometry",
            "speed",
            "kernels",
            "em-estep",
            "codeio-search",
            "scale",
            "stream",
        ],
        default=None,
    )
    ap.add_argument("--seeds", type=int, default=None, help="the first N training seeds of each profile (default: all)")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default 2; speed: 1, the per-unit figure; 1 when two runs share 2 cores)",
    )
    ap.add_argument("--device", default="cpu", help="speed: the device of the timed units (cpu, cuda)")
    ap.add_argument("--label", default="after", help="speed: the column the timed units fill (before, after, gpu)")
    ap.add_argument(
        "--no-throughput",
        action="store_true",
        help="skip the scoring-throughput benchmarks of parity and codeio (they want idle cores)",
    )
    args = ap.parse_args()
    global SPLIT, THREADS, SEEDS
    SPLIT, THREADS, SEEDS = args.split, args.threads or 2, args.seeds
    torch.set_num_threads(THREADS)
    env = environment_info()
    if args.only in (None, "nn-index"):  # nearest-neighbour backends: a minute or so
        nn_index = sibling(__file__, "nn_index")
        write_json_atomic(nn_index.OUT, nn_index.document("python benchmarks/run.py --only nn-index"))
    if args.only in (None, "depth3-search"):  # the depth-3 search against its Python loop: a minute or so
        depth3 = sibling(__file__, "depth3_search")
        write_json_atomic(depth3.OUT, depth3.document("python benchmarks/run.py --only depth3-search"))
    if args.only in (None, "embeddings"):
        t = time.perf_counter()
        emb = bench_embeddings()
        write_json_atomic(OUT / "embeddings.json", {"environment": env, "wall_s": time.perf_counter() - t, **emb})
    if args.only in (None, "projectile"):
        for profile in args.profiles:
            res = bench_experiment("projectile", profile, "paper")
            write_json_atomic(result_path(f"projectile-{profile}"), {"environment": env, **res})
    if args.only in (None, "manifolds"):  # App. H maps; the figures are kept beside the numbers
        for profile in args.profiles:
            res = bench_experiment("manifolds", profile, "paper")
            write_json_atomic(result_path(f"manifolds-{profile}"), {"environment": env, **res})
            keep_figures(f"manifolds-paper-{profile}", profile)
    if args.only in (None, "length-embeddings"):
        t = time.perf_counter()
        res = bench_length_embeddings()
        write_json_atomic(
            OUT / "length-embeddings.json", {"environment": env, "wall_s": time.perf_counter() - t, "retrieval": res}
        )
    for name, group in (
        ("length", "length"),
        ("composition", "composition"),
        ("parameter-ablations", "ablations"),
        ("length-ablations", "ablations"),
        ("composition-ablations", "ablations"),
        ("parameter-multistep", "multistep"),
        ("composition-depth3", "composition-depth3"),
        ("composition-em", "composition-em"),
    ):
        if args.only in (None, group, name):
            for profile in args.profiles:
                for protocol in args.protocols:
                    res = bench_experiment(name, profile, protocol)
                    write_json_atomic(result_path(f"{name}-{protocol}-{profile}"), {"environment": env, **res})
    if args.only in (None, "parity"):
        if not args.no_throughput:
            write_json_atomic(OUT / "parity-scoring.json", {"environment": env, "scoring": bench_scoring()})
        for profile in args.profiles:
            res = bench_experiment("parity", profile, "paper")
            write_json_atomic(result_path(f"parity-paper-{profile}"), {"environment": env, **res})
    if args.only in (None, "codeio"):
        if not args.no_throughput:
            write_json_atomic(OUT / "codeio-scoring.json", {"environment": env, "scoring": bench_codeio_scoring()})
        for profile in args.profiles:
            res = bench_experiment("codeio", profile, "paper")
            write_json_atomic(result_path(f"codeio-paper-{profile}"), {"environment": env, **res})
    if args.only in (None, "codeio-em"):  # after codeio (it reuses its units); the figure is kept
        for profile in args.profiles:
            res = bench_experiment("codeio-em", profile, "paper")
            write_json_atomic(result_path(f"codeio-em-paper-{profile}"), {"environment": env, **res})
            keep_figures(f"codeio-em-paper-{profile}", profile)
    if args.only in (None, "llm-geometry"):  # App. J maps; the figure is kept beside the numbers
        for profile in args.profiles:
            res = bench_experiment("llm-geometry", profile, "paper")
            write_json_atomic(result_path(f"llm-geometry-{profile}"), {"environment": env, **res})
            keep_figures(f"llm-geometry-paper-{profile}", profile)
    if args.only in (None, "executors"):  # serial against Ray on the quick parameter sweep (30 units)
        sibling(__file__, "executors").bench()
    if args.only == "unseen":  # families never designed for (benchmarks/unseen.py), quick profile only
        for name, family in (("parameter", "unseen:logistic"), ("length", "unseen:sine")):
            for protocol in args.protocols:
                res = bench_experiment(name, "quick", protocol, family)
                write_json_atomic(
                    result_path(f"unseen-{name}-{family.split(':')[1]}-{protocol}-quick"), {"environment": env, **res}
                )
    if args.only in (None, "kernels"):  # the kernels behind the speed work, one thread (a minute)
        # kernel_timings.py, not kernels.py: that name shadowed the hub `kernels` package transformers looks for
        sibling(__file__, "kernel_timings").main()
    if args.only in (None, "em-estep"):  # the composition-em E-step's sweep settings (~3 min)
        sibling(__file__, "em_estep").main([])
    if args.only in (None, "codeio-search"):  # the bounded CodeIO search against the full one (~25 min)
        sibling(__file__, "codeio_search").main([])
    if args.only in (None, "scale"):  # fit cost against library size, 200 to 3,200 tasks (scale.py, ~8 min)
        sibling(__file__, "scale").main([])
    if args.only in (None, "stream"):  # taskextrap index, 10,000 to 400,000 tasks, serial and Ray (stream.py, ~6 min)
        sibling(__file__, "stream").main([])
    if args.only in (None, "speed"):  # one paper unit per experiment in its own process (speed.py)
        speed_args = ["--label", args.label, "--device", args.device, "--threads", str(args.threads or 1)]
        sibling(__file__, "speed").main(speed_args)
    if args.only in (None, "parameter"):
        for profile in args.profiles:
            for protocol in args.protocols:
                res = bench_experiment("parameter", profile, protocol)
                write_json_atomic(result_path(f"parameter-{protocol}-{profile}"), {"environment": env, **res})


if __name__ == "__main__":
    main()
