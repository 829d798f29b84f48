"""Where a result came from: the git commit, whether the tree was dirty, and a hash of the code.

``results.json`` records all three under ``environment`` (:func:`taskextrap.report.schema.
environment_info`), and every cached unit's fingerprint includes :func:`source_hash`
(:func:`taskextrap.experiments.units.fingerprint`), so a change to any source byte or shipped
model file never reuses a unit computed by other code.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from pathlib import Path

__all__ = ["package_dir", "source_files", "source_hash", "git_commit", "git_dirty"]

# Besides every ``*.py`` file, the shipped data that can change numbers (pyproject's package-data).
_DATA_GLOBS = ("report/*.json", "llm/models/*/*")


def package_dir() -> Path:
    """The directory of the installed ``taskextrap`` package."""
    return Path(__file__).resolve().parent


def source_files(root: str | os.PathLike | None = None) -> list[Path]:
    """The files :func:`source_hash` reads under ``root`` (default: the package), sorted by their
    POSIX path relative to ``root``: every ``*.py`` file outside ``__pycache__`` and the shipped
    data (``report/*.json``, the model files under ``llm/models/``)."""
    root = Path(root) if root is not None else package_dir()
    files = {p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in _DATA_GLOBS:
        files.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _hash_files(root: Path) -> str:
    h = hashlib.sha256()
    for path in source_files(root):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        data = path.read_bytes()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _cached_hash(root: str) -> str:
    return _hash_files(Path(root))


def source_hash(root: str | os.PathLike | None = None) -> str:
    """A short (16 hex digit) sha256 of the package's source: each file of :func:`source_files`
    contributes its relative path, its length and its bytes, in a stable order.

    Computed once per process and per ``root`` (a source edit in a running process is not seen).
    """
    root = Path(root) if root is not None else package_dir()
    return _cached_hash(str(root.resolve()))


def _git(directory: Path, *args: str) -> str | None:
    """stdout of ``git ARGS`` run in ``directory``, or None when git or the repository is unavailable."""
    try:
        proc = subprocess.run(
            ["git", *args], cwd=directory, capture_output=True, text=True, timeout=10,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"},
        )
    except Exception:
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_commit(directory: str | os.PathLike | None = None) -> str | None:
    """The short commit hash of HEAD of the repository holding ``directory`` (default: the
    package); None when git or the repository is unavailable."""
    out = _git(Path(directory) if directory is not None else package_dir(), "rev-parse", "--short", "HEAD")
    out = out.strip() if out is not None else ""
    return out or None


def git_dirty(directory: str | os.PathLike | None = None) -> bool | None:
    """Whether the working tree of the repository holding ``directory`` (default: the package)
    has uncommitted changes: modified or staged tracked files, or untracked files that git does
    not ignore. None when git or the repository is unavailable."""
    out = _git(Path(directory) if directory is not None else package_dir(), "status", "--porcelain")
    return None if out is None else bool(out.strip())
