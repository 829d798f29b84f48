"""The package's import graph, summarised: modules, import edges (top-level and inside
functions, and imports for annotations only), import circles, upward imports between
layers, and the edges between the package's parts (tests/test_layers.py's layers, lowest first).

    python scripts/import_graph.py            # this checkout
    python scripts/import_graph.py OTHER_REPO  # another checkout, e.g. a git worktree of an old commit

The layers and the graph are read with tests/test_layers.py's own functions, so this prints what
that test checks.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def _test_layers(root: Path) -> dict:
    """tests/test_layers.py's namespace, pointed at ``root``'s package."""
    ns: dict = {}
    exec(compile((HERE / "tests" / "test_layers.py").read_text(), "test_layers", "exec"), ns)
    ns["ROOT"] = root / "src" / "taskextrap"
    return ns


def summary(repo: Path) -> str:
    """The text this script prints for the checkout at ``repo``."""
    ns = _test_layers(repo)
    graph, level = ns["_import_graph"](), ns["LEVEL"]
    circles = ns["_circles"](graph)
    part = lambda m: m.split(".")[1] if "." in m else m  # noqa: E731
    lines = [f"{repo}: {len(graph)} modules, {sum(map(len, graph.values()))} import edges, {len(circles)} circle(s)"]
    lines += ["  circle: " + ", ".join(sorted(m.removeprefix("taskextrap.") for m in c)) for c in circles]
    between = Counter((part(a), part(b)) for a, bs in graph.items() for b in bs if part(a) != part(b))
    up = [(a, b, n) for (a, b), n in between.items() if level.get(b, -1) > level.get(a, -1) and a in level]
    lines.append(f"  upward imports between layers: {sum(n for *_, n in up)}")
    order = sorted({p for pair in between for p in pair if p in level}, key=lambda p: (level[p], p))
    for a in order:
        outs = ", ".join(f"{b} {between[a, b]}" for b in order if (a, b) in between)
        if outs:
            lines.append(f"  {a} -> {outs}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE))
