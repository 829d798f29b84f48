"""Where a result came from: the git commit, whether the tree was dirty, a hash of the code and
the CPU that computed it.

``results.json`` records them all under ``environment`` (:func:`taskextrap.report.schema.
environment_info`), and every cached unit's fingerprint includes :func:`source_hash`
(:func:`taskextrap.experiments.units.fingerprint`), so a change to any source byte or shipped
model file never reuses a unit computed by other code.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
import types
from pathlib import Path

__all__ = [
    "package_dir",
    "source_files",
    "source_hash",
    "callable_hash",
    "git_commit",
    "git_dirty",
    "cpu_info",
    "library_versions",
]

# Besides every ``*.py`` file, the shipped data that can change numbers (pyproject's package-data).
_DATA_GLOBS = ("report/*.json", "search/*.json", "llm/models/*/*")


def package_dir() -> Path:
    """The directory of the installed ``taskextrap`` package."""
    return Path(__file__).resolve().parent


def source_files(root: str | os.PathLike | None = None) -> list[Path]:
    """The files :func:`source_hash` reads under ``root`` (default: the package), sorted by their
    POSIX path relative to ``root``: every ``*.py`` file outside ``__pycache__`` and the shipped
    data (``report/*.json``, ``search/*.json``, the model files under ``llm/models/``)."""
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


@functools.cache
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
            ["git", *args],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"},
        )
    except Exception:  # noqa: BLE001 - no git, a timeout, an undecodable output: no provenance, never a failed run
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


@functools.cache
def cpu_info() -> str | None:
    """The processor's model name and the instruction set torch's CPU kernels use (e.g.
    ``"Intel(R) Xeon(R) Processor (AVX512)"``); None when neither can be read.

    Recorded because it moves numbers: the same code and seeds on a CPU with another instruction
    set (AVX2 against AVX512) take other kernels, whose float roundings a network's training
    amplifies into visibly different results (docs/results.md, "Same code, another CPU")."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:  # not Linux
        pass
    if not model:
        import platform

        model = platform.processor() or None
    try:
        import torch

        capability = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - provenance is best effort, never a failed run
        capability = None
    if model is None and capability is None:
        return None
    return f"{model or 'unknown CPU'}" + (f" ({capability})" if capability else "")


# The libraries whose kernels compute results besides torch (recorded with it: pyproject does not pin them).
NUMERIC_LIBRARIES = ("numpy", "scipy", "scikit-learn")


def library_versions() -> dict[str, str | None]:
    """The installed versions of :data:`NUMERIC_LIBRARIES` (None for one that is not installed):
    a newer numpy or scipy, like another CPU, can move a result's last digits. A new dict each
    call (the look-up is made once per process)."""
    return dict(_library_versions())


@functools.cache
def _library_versions() -> tuple[tuple[str, str | None], ...]:
    from importlib import metadata

    out: list[tuple[str, str | None]] = []
    for name in NUMERIC_LIBRARIES:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((name, None))
    return tuple(out)


# --- the code of a user's callable ---------------------------------------------------------------


def callable_hash(fn) -> str:
    """A short (16 hex digit) sha256 of what a user's callable computes, for cache keys: a family's
    formula or a ladder's basis given as ``module:attr`` is not package source, so
    :func:`source_hash` does not see it change.

    It covers the callable's bytecode and constants (nested functions and lambdas included, line
    numbers not: moving code does not change it), its defaults, the values in its closure, the
    global names it reads (numbers, strings, arrays and other functions by value, modules by name)
    and the bytes of the file of every user module involved (a module outside the standard
    library, site-packages and taskextrap), so a changed helper or constant in the user's file
    changes the hash too. ``functools.partial`` objects and instances of classes with ``__call__``
    are followed; builtins and numpy ufuncs (``np.sin``) count by their qualified name.
    """
    h = hashlib.sha256()
    _feed(h, fn, set(), 0)
    return h.hexdigest()[:16]


_MAX_DEPTH = 12  # how deep referenced functions are followed (a cycle is cut earlier by ``seen``)


def _feed(h, obj, seen: set, depth: int) -> None:
    """Add ``obj`` (a value a callable depends on) to ``h``."""
    if isinstance(obj, (type(None), bool, int, float, complex, str, bytes)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if id(obj) in seen or depth > _MAX_DEPTH:
        h.update(b"<seen>;")
        return
    seen.add(id(obj))
    if isinstance(obj, (tuple, list, frozenset, set)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        h.update(f"{type(obj).__name__}[{len(items)}](".encode())
        for item in items:
            _feed(h, item, seen, depth + 1)
        h.update(b");")
    elif isinstance(obj, dict):
        h.update(f"dict[{len(obj)}](".encode())
        for k in sorted(obj, key=repr):
            _feed(h, k, seen, depth + 1)
            _feed(h, obj[k], seen, depth + 1)
        h.update(b");")
    elif type(obj).__module__ == "numpy" and hasattr(obj, "tobytes") and hasattr(obj, "dtype"):
        h.update(f"ndarray{getattr(obj, 'shape', ())}{obj.dtype};".encode())  # arrays and numpy scalars
        h.update(obj.tobytes())
    elif isinstance(obj, types.ModuleType):
        h.update(f"module:{obj.__name__};".encode())
        _feed_user_file(h, obj)
    elif isinstance(obj, functools.partial):
        h.update(b"partial(")
        for part in (obj.func, obj.args, obj.keywords):
            _feed(h, part, seen, depth + 1)
        h.update(b");")
    elif isinstance(obj, types.MethodType):
        _feed(h, obj.__func__, seen, depth + 1)
        _feed(h, obj.__self__, seen, depth + 1)
    elif isinstance(obj, types.FunctionType):
        _feed_function(h, obj, seen, depth)
    elif isinstance(obj, type) or (callable(obj) and not hasattr(obj, "__dict__")):
        # classes, builtins, ufuncs: their name (a user class's file is hashed below)
        h.update(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(type(obj)))};".encode())
        module = sys.modules.get(getattr(obj, "__module__", "") or "")
        if module is not None:
            _feed_user_file(h, module)
    else:  # an instance (e.g. of a class with __call__): its class and its attributes
        _feed(h, type(obj), seen, depth + 1)
        _feed(h, getattr(obj, "__dict__", {}), seen, depth + 1)


def _feed_function(h, fn: types.FunctionType, seen: set, depth: int) -> None:
    """A Python function: its code, defaults, closure, the globals it reads and its user file."""
    h.update(f"function:{fn.__module__}.{fn.__qualname__};".encode())
    names = _feed_code(h, fn.__code__)
    _feed(h, fn.__defaults__, seen, depth + 1)
    _feed(h, fn.__kwdefaults__, seen, depth + 1)
    for cell in fn.__closure__ or ():
        try:
            _feed(h, cell.cell_contents, seen, depth + 1)
        except ValueError:  # an empty cell (a name not bound yet)
            h.update(b"<empty cell>;")
    for name in sorted(names):
        if name in fn.__globals__:
            h.update(f"global {name}=".encode())
            _feed(h, fn.__globals__[name], seen, depth + 1)
    module = sys.modules.get(fn.__module__ or "")
    if module is not None:
        _feed_user_file(h, module)


def _feed_code(h, code: types.CodeType) -> set[str]:
    """Bytecode, constants and names of ``code`` and of the code objects nested in it; returns
    every name the code reads (candidate globals)."""
    h.update(code.co_code)
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _feed_code(h, const)
        else:
            h.update(f"{type(const).__name__}:{const!r};".encode())
    h.update(repr(code.co_names).encode())
    return names


def _feed_user_file(h, module: types.ModuleType) -> None:
    """The bytes of ``module``'s file when it is the user's own code (not the standard library,
    an installed package or taskextrap, whose changes :func:`source_hash` or the environment
    cover)."""
    path = getattr(module, "__file__", None)
    if not path or not _is_user_file(path):
        return
    try:
        h.update(Path(path).read_bytes())
    except OSError:
        h.update(f"<unreadable {path}>;".encode())


@functools.cache
def _is_user_file(path: str) -> bool:
    resolved = Path(path).resolve()
    if package_dir() in resolved.parents:
        return False
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(p in resolved.parents for p in prefixes):
        return False
    return "site-packages" not in resolved.parts and "dist-packages" not in resolved.parts
