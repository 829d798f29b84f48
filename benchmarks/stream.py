"""A library streamed from Parquet row groups through an engine (issue 65, item 4): what
``taskextrap index`` costs at growing library sizes, in this process (``serial``) and on a local
Ray instance of two workers (``ray``), up to a million tasks.

One RTE (``RTE(protocol="paper")``, the paper's settings) is fitted on 800 cubic tasks observed
on a 16-point grid, as ``taskextrap fit`` reads a sample of a large library, and saved. For every
size n a library of n cubic tasks (spread over the training regions, 16 grid points each, 10,000
tasks a row group, each group its own seeded draw) is written to Parquet a group at a time, and
indexed by each engine in a fresh process (``streaming.stream_index``: Γ of every task, its 8
nearest among 3,200 seeded reference tasks); at the smallest size also through a Ray cluster of
two nodes started here with ``ray start`` (a head and a worker node, one CPU each, ``RAY_ADDRESS``).
Recorded per size and engine: the seconds of each
pass, the driver's and the workers' peak resident memory, the input and output bytes; and that
both engines wrote the same index (every part's arrays compared, to the bit).

    python benchmarks/stream.py                                   # 10,000 to 400,000 tasks (make bench)
    python benchmarks/stream.py --sizes 1000000 --no-cluster --out benchmarks/results/stream-million.json
    python benchmarks/stream.py --sizes 20000 --out /tmp/s.json   # a plumbing check

Writes ``benchmarks/results/stream.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from taskextrap.scripts import sibling

_scale = sibling(__file__, "scale")
one_thread_env, library_of = _scale._env, _scale.library_of
peak_rss_mb, write_result = _scale.peak_rss_mb, _scale.write_result

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10_000, 100_000, 400_000)
PER_GROUP = 10_000  # tasks a row group
POINTS = 16  # grid points a task
SAMPLE = 800  # tasks the model is fitted on
ENGINES = ("serial", "ray")
WORKERS = 2


def _env() -> dict:
    """One OpenMP thread, and Ray's workers at niceness 0 (Ray starts them at 15, so beside other
    work on the same cores they would wait rather than share; on idle cores it changes nothing)."""
    return one_thread_env() | {"RAY_worker_niceness": "0"}


def grid_observations(tasks):
    """``tasks`` observed on one POINTS-point grid of the domain: (ids offset, x, y) columns."""
    lo, hi = tasks.family.domain
    x = np.broadcast_to(np.linspace(lo, hi, POINTS), (len(tasks), POINTS))
    return x, tasks.values(x)


def fit_model(folder: Path, seed: int) -> float:
    """Fit and save the RTE the index embeds with (800 observed tasks); returns its seconds."""
    import torch

    from taskextrap import RTE
    from taskextrap.tasks.observed import read_tasks

    torch.set_num_threads(1)
    tasks = library_of(SAMPLE, seed)
    x, y = grid_observations(tasks)
    ids = np.repeat([f"s{i}" for i in range(SAMPLE)], POINTS)
    observed = read_tasks({"task": ids, "x": x.ravel(), "y": y.ravel()})
    t = time.perf_counter()
    RTE(protocol="paper", seed=seed, verbose=False).fit(observed.library()).save_pretrained(folder)
    return time.perf_counter() - t


def write_library(n: int, path: Path, seed: int) -> float:
    """Write ``n`` tasks to Parquet, PER_GROUP tasks a row group, each group drawn on its own (the
    whole library never in memory); returns the seconds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = time.perf_counter()
    with pq.ParquetWriter(path, pa.schema([("task", pa.string()), ("x", pa.float64()), ("y", pa.float64())])) as w:
        for first in range(0, n, PER_GROUP):
            m = min(PER_GROUP, n - first)
            x, y = grid_observations(library_of(m, seed + first, "test"))
            ids = np.repeat([f"t{first + i:07d}" for i in range(m)], POINTS)
            w.write_table(pa.table({"task": ids, "x": x.ravel(), "y": y.ravel()}), row_group_size=len(ids))
    return time.perf_counter() - t


def index_one(model: Path, data: Path, out: Path, engine: str) -> dict:
    """Index ``data`` in this process (a fresh one: the driver's peak memory is its own)."""
    import torch

    from taskextrap.streaming import Engine, stream_index

    torch.set_num_threads(1)
    record = stream_index(model, data, out, Engine(engine, WORKERS), progress=False)
    keep = ("tasks", "engine", "workers", "seconds", "worker_peak_mib", "dim", "n_near")
    return {k: record[k] for k in keep} | {"driver_peak_mib": round(peak_rss_mb(), 1)}


def cluster_index(model: Path, data: Path, out: Path, one: Path) -> dict:
    """The index through a Ray cluster of two nodes started on this machine with ``ray start`` (a
    head and a worker node of one CPU each, reached through ``RAY_ADDRESS``), stopped after."""
    ray = str(Path(sys.executable).parent / "ray")
    address = "127.0.0.1:6391"
    env = _env() | {"RAY_AUTH_MODE": "token"}  # Ray 2.60's clusters want a token (~/.ray/auth_token)
    quiet = {"check": True, "capture_output": True, "env": env}
    subprocess.run([ray, "start", "--head", "--num-cpus=1", "--port=6391", "--disable-usage-stats",
                    "--include-dashboard=false"], **quiet)  # fmt: skip
    try:
        subprocess.run([ray, "start", f"--address={address}", "--num-cpus=1", "--disable-usage-stats"], **quiet)
        cmd = [sys.executable, __file__, "--one", str(model), str(data), str(out), "ray", "--out", str(one)]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, env=env | {"RAY_ADDRESS": address})
        rec = json.loads(one.read_text()) | {"command_s": round(time.perf_counter() - t, 2), "nodes": 2}
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=_env())
    return rec


def same_index(a: Path, b: Path) -> bool:
    """Whether two index folders hold the same arrays, part by part (never the whole in memory)."""
    import pyarrow.parquet as pq

    parts = sorted(p.name for p in a.glob("part-*.parquet"))
    if parts != sorted(p.name for p in b.glob("part-*.parquet")):
        return False
    for name in parts:
        ta, tb = pq.read_table(a / name), pq.read_table(b / name)
        if ta.column_names != tb.column_names:
            return False
        arrays = lambda t: [c.to_numpy(zero_copy_only=False) for c in t.columns]  # noqa: E731
        if not all(np.array_equal(x, y) for x, y in zip(arrays(ta), arrays(tb), strict=True)):
            return False
    return True


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*") if p.is_file())


def run(sizes, seed: int, cluster: bool = True) -> dict:
    """The model, then every size: written, indexed by each engine in a fresh process, compared."""
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        fit_s = fit_model(tmp_path / "model", seed)
        print(f"model fitted on {SAMPLE} tasks: {fit_s:.1f} s", file=sys.stderr)
        for n in sizes:
            data = tmp_path / f"library-{n}.parquet"
            write_s = write_library(n, data, seed)
            rec: dict = {"tasks": n, "row_groups": -(-n // PER_GROUP), "write_s": round(write_s, 2)}
            rec["input_bytes"] = data.stat().st_size
            for engine in ENGINES:
                out = tmp_path / f"index-{n}-{engine}"
                one = tmp_path / f"one-{n}-{engine}.json"
                cmd = [sys.executable, __file__, "--one", str(tmp_path / "model"), str(data), str(out), engine,
                       "--out", str(one)]  # fmt: skip
                t = time.perf_counter()
                subprocess.run(cmd, check=True, env=_env())
                rec[engine] = json.loads(one.read_text()) | {"command_s": round(time.perf_counter() - t, 2)}
                rec[engine]["output_bytes"] = folder_bytes(out)
                print(f"{n} tasks, {engine}: {rec[engine]['seconds']['total']:.1f} s", file=sys.stderr)
            rec["engines_agree"] = same_index(tmp_path / f"index-{n}-serial", tmp_path / f"index-{n}-ray")
            if cluster and n == min(sizes):  # the same through a two-node cluster, at the smallest size
                out = tmp_path / f"index-{n}-cluster"
                rec["ray-cluster"] = cluster_index(tmp_path / "model", data, out, tmp_path / "one-cluster.json")
                rec["ray-cluster"]["output_bytes"] = folder_bytes(out)
                rec["cluster_agrees"] = same_index(tmp_path / f"index-{n}-serial", out)
                print(f"{n} tasks, two-node cluster: {rec['ray-cluster']['seconds']['total']:.1f} s", file=sys.stderr)
            for engine in (*ENGINES, "cluster"):  # the next size needs the disk
                for p in (tmp_path / f"index-{n}-{engine}").glob("*"):
                    p.unlink()
            data.unlink()
            records.append(rec)
    return {"model_fit_s": round(fit_s, 2), "records": records, "per_million": per_million(records)}


def per_million(records: list[dict]) -> dict:
    """Each engine's seconds for a million tasks from a straight line through the sizes' totals
    (what a larger size would add beyond the fixed start-up), and the bytes a million tasks read
    and write, from the largest size's per-task bytes."""
    out: dict = {}
    n = np.array([r["tasks"] for r in records], dtype=float)
    big = max(records, key=lambda r: r["tasks"])
    for engine in ENGINES:
        total = np.array([r[engine]["seconds"]["total"] for r in records])
        slope, start = np.polyfit(n, total, 1) if len(n) > 1 else (total[0] / n[0], 0.0)
        out[engine] = {
            "seconds_per_million": round(float(slope * 1e6 + start), 1),
            "fixed_s": round(float(start), 1),
            "us_per_task": round(float(slope * 1e6), 2),
            "output_bytes_per_million": round(big[engine]["output_bytes"] / big["tasks"] * 1e6),
        }
    out["input_bytes_per_million"] = round(big["input_bytes"] / big["tasks"] * 1e6)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cluster", action="store_true", help="skip the two-node `ray start` cluster")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stream.json")
    ap.add_argument("--one", nargs=4, default=None, help=argparse.SUPPRESS)  # a child: model data out engine
    a = ap.parse_args(argv)
    if a.one is not None:
        model, data, out, engine = a.one
        a.out.write_text(json.dumps(index_one(Path(model), Path(data), Path(out), engine)))
        return
    t = time.perf_counter()
    doc = run(a.sizes, a.seed, not a.no_cluster)
    doc |= {"family": "cubic", "points_per_task": POINTS, "tasks_per_group": PER_GROUP, "sample": SAMPLE,
            "workers": WORKERS, "seed": a.seed}  # fmt: skip
    write_result(a.out, "stream.py", argv, t, doc)


if __name__ == "__main__":
    main()
