"""The log-log picture of issue 65: fit and index seconds against library size, from committed files.

``python benchmarks/plot_scale.py`` reads ``benchmarks/results/scale-before.json`` (the parameter
fit before the size bounds), ``scale-idle.json`` and ``scale-seeds.json`` (after, one seed on idle
cores and three seeds' medians) and ``stream.json`` with ``stream-million.json`` (the library
indexed a Parquet row group at a time, serially and on two Ray workers), and draws both on
log-log axes beside a line of slope one (time linear in the tasks) and the issue's goals.
Writes ``docs/scale.png``; nothing is measured here.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "scale.png"
GOALS = ((10_000, 120.0), (51_200, 600.0))  # issue 65: tasks fitted within seconds, on 2 cores


def fit_series(data: dict) -> tuple[list[int], list[float]]:
    """(tasks, fit seconds) of a scale file, the median over its seeds at each size."""
    by: dict[int, list[float]] = {}
    for r in data["records"]:
        by.setdefault(r["tasks"], []).append(r["fit_s"])
    sizes = sorted(by)
    return sizes, [statistics.median(by[n]) for n in sizes]


def index_series(files: list[dict], engine: str) -> tuple[list[int], list[float]]:
    """(tasks, total seconds) of one engine's streamed index over the stream files' sizes."""
    points = sorted((r["tasks"], r[engine]["seconds"]["total"]) for d in files for r in d["records"] if engine in r)
    return [n for n, _ in points], [s for _, s in points]


def draw(results: Path, out: Path) -> Path:
    """Draw the figure from the files in ``results`` into ``out``; returns ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    read = lambda name: json.loads((results / f"{name}.json").read_text())  # noqa: E731
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, label, style in (
        ("scale-before", "before the bounds", "o--"),
        ("scale-idle", "after, seed 0, idle cores", "s-"),
        ("scale-seeds", "after, median of 3 seeds, beside a unit", "^-"),
    ):
        data = read(name)
        sizes, seconds = fit_series(data)
        left.loglog(sizes, seconds, style, label=f"{label} ({data['environment'].get('git') or '?'})")
    for n, s in GOALS:
        left.plot([n], [s], "r*", markersize=10)
    left.plot([], [], "r*", label="issue 65's goals")
    _slope_one(left, 800, 22.5, 51_200)
    left.set(xlabel="library tasks", ylabel="RTE(protocol='paper').fit s", title="parameter fit (cubic, one thread)")
    left.legend(fontsize=8)
    stream = [read("stream"), read("stream-million")]
    for engine, label in (("serial", "this process"), ("ray", "two Ray workers")):
        sizes, seconds = index_series(stream, engine)
        right.loglog(sizes, seconds, "o-", label=label)
    _slope_one(right, 100_000, 18.7, 1_000_000)
    right.set(xlabel="library tasks", ylabel="taskextrap index s", title="streamed index (Parquet row groups)")
    right.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _slope_one(ax, n0: int, s0: float, n1: int) -> None:
    """A grey line of slope one through (n0, s0): time proportional to the tasks."""
    ax.loglog([n0, n1], [s0, s0 * n1 / n0], color="grey", linestyle=":", label="linear in the tasks")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    print(f"written: {draw(a.results, a.out)}")


if __name__ == "__main__":
    main()
