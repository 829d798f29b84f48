"""What a restructuring is judged on, counted from the source alone: the functions with 9 or more
parameters (click commands told apart) and the largest classes.

    python scripts/structure_counts.py              # this checkout's src/
    python scripts/structure_counts.py OTHER_REPO   # another checkout, e.g. a git worktree of an old commit
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
MANY = 9  # parameters from which a function counts as a positional relay (self and cls not counted)


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return n - 1 if a.args and a.args[0].arg in ("self", "cls") else n


def _is_click(node) -> bool:
    return any("click" in ast.unparse(d) or "command" in ast.unparse(d) for d in node.decorator_list)


def counts(repo: Path) -> dict:
    """``many``: (parameters, place, click) of every function with :data:`MANY` or more;
    ``classes``: (lines, place) of the five largest classes."""
    many, classes = [], []
    for path in sorted((repo / "src").rglob("*.py")):
        where = path.relative_to(repo / "src")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _parameters(node) >= MANY:
                many.append((_parameters(node), f"{where}:{node.lineno} {node.name}", _is_click(node)))
            elif isinstance(node, ast.ClassDef):
                classes.append((node.end_lineno - node.lineno + 1, f"{where}:{node.lineno} {node.name}"))
    return {"many": sorted(many, reverse=True), "classes": sorted(classes, reverse=True)[:5]}


def main() -> None:
    """Print the counts of the checkout given (default: this one)."""
    repo = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE
    c = counts(repo)
    plain = [m for m in c["many"] if not m[2]]
    print(f"{repo}: {len(c['many'])} functions with >= {MANY} parameters, {len(plain)} of them not click commands")
    for n, where, click in c["many"]:
        print(f"  {n:3d} {where}{' (click)' if click else ''}")
    print("largest classes:")
    for n, where in c["classes"]:
        print(f"  {n:4d} lines {where}")


if __name__ == "__main__":
    main()
