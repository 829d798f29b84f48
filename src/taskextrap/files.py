"""Atomic file writes and checked JSON reads for run outputs."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError

__all__ = [
    "write_json_atomic",
    "write_text_atomic",
    "write_bytes_atomic",
    "read_json",
    "atomic_path",
    "json_default",
    "write_state_atomic",
    "read_state",
]


_FILE_MODE = 0o666  # what open() would give a new file, before the umask


def _umask() -> int:
    """The process's umask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


class atomic_path:
    """Context manager yielding a temporary path next to ``path``; on a clean exit the
    temporary file is moved onto ``path`` with ``os.replace``, otherwise it is deleted.

    Parent directories are created. Use it for writers that want a file name (e.g. matplotlib's
    ``savefig``)::

        with atomic_path("out/plot.png") as tmp:
            fig.savefig(tmp, format="png")
    """

    def __init__(self, path: str | os.PathLike, suffix: str = ".tmp"):
        self.path = Path(path)
        self.suffix = suffix
        self.tmp: str | None = None

    def __enter__(self) -> str:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=self.suffix)
        os.close(fd)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self.tmp is not None
        if exc_type is None:
            os.chmod(self.tmp, _FILE_MODE & ~_umask())  # mkstemp makes 0600: a shared --out needs 0644
            os.replace(self.tmp, self.path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, then
    ``os.replace``), creating parent directories. Returns the path."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return Path(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically, creating parent directories.

    A reader never sees a half-written file: the text goes to a temporary file in the same
    directory which then replaces ``path`` in one ``os.replace``. Returns the path.
    """
    return write_bytes_atomic(path, text.encode("utf-8"))


def json_default(obj: Any) -> Any:
    """Convert numpy scalars/arrays and paths so that ``json.dumps`` accepts them."""
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serializable")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Serialise ``obj`` as indented JSON and write it to ``path`` atomically.

    numpy scalars and arrays are converted to plain Python numbers and lists. NaN and
    infinity are refused (they are not valid JSON) with a :class:`TaskextrapError`.
    Returns the path.
    """
    try:
        text = json.dumps(obj, indent=2, default=json_default, allow_nan=False)
    except ValueError as exc:
        raise TaskextrapError(f"cannot write {path}: {exc} (NaN/inf is not valid JSON)") from None
    except TypeError as exc:
        raise TaskextrapError(f"cannot write {path}: {exc}") from None
    return write_text_atomic(path, text + "\n")


def read_json(path: str | os.PathLike) -> Any:
    """Read and parse the JSON file at ``path``.

    Raises :class:`TaskextrapError` with a one-line message if the file is missing,
    unreadable or not valid JSON.
    """
    p = Path(path)
    if not p.is_file():
        raise TaskextrapError(f"file not found: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskextrapError(f"cannot read {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TaskextrapError(f"cannot read {p}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskextrapError(f"invalid JSON in {p}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # nested thousands deep: no file this package writes
        raise TaskextrapError(f"invalid JSON in {p}: nested too deeply to be read") from None


def write_state_atomic(path: str | os.PathLike, arrays: dict, meta: dict) -> Path:
    """Write named numpy ``arrays`` and JSON-able ``meta`` as one safetensors file, atomically
    (a fitted model's state: weights, never pickles). Each array comes back in its memory layout
    (:func:`read_state`): a matrix product rounds by layout, so the layout is part of getting the
    same numbers back."""
    from safetensors.numpy import save

    try:
        header = json.dumps(meta, default=json_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TaskextrapError(f"cannot write {path}: {exc}") from None
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    # A view into a larger array (scikit-learn's PCA components are rows of a column-major
    # matrix) is saved as that array and re-made as the same view of it.
    views = {}
    for k, v in arrays.items():
        base = v.base if isinstance(v.base, np.ndarray) else None
        contiguous = v.flags.c_contiguous or v.flags.f_contiguous
        if v.ndim > 1 and not contiguous and base is not None and (base.flags.c_contiguous or base.flags.f_contiguous):
            offset = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            views[k] = {"shape": list(v.shape), "strides": list(v.strides), "offset": offset}
            arrays[k] = base
    # Column-major arrays come back column-major.
    fortran = [k for k, v in arrays.items() if v.ndim > 1 and v.flags.f_contiguous and not v.flags.c_contiguous]
    data = save(
        {k: np.ascontiguousarray(v) for k, v in arrays.items()},
        metadata={"meta": header, "fortran": json.dumps(fortran), "views": json.dumps(views)},
    )
    return write_bytes_atomic(path, data)


def read_state(path: str | os.PathLike) -> tuple[dict, dict]:
    """The arrays and meta of a :func:`write_state_atomic` file, each array in the layout it was
    written from; a one-line :class:`TaskextrapError` when it is missing, truncated or not such
    a file."""
    from safetensors import safe_open

    p = Path(path)
    if not p.is_file():
        raise TaskextrapError(f"file not found: {p}")
    try:
        with safe_open(str(p), framework="numpy") as f:
            header = f.metadata() or {}
            meta, fortran = json.loads(header["meta"]), set(json.loads(header.get("fortran", "[]")))
            views = json.loads(header.get("views", "{}"))
            arrays = {k: np.asfortranarray(f.get_tensor(k)) if k in fortran else f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has keys() but is not iterable
        for k, view in views.items():
            arrays[k] = _view(arrays[k], view)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for a damaged file
        raise TaskextrapError(f"cannot read {p}: not a readable state file ({type(exc).__name__})") from None
    return arrays, meta


def _view(base: np.ndarray, view: dict) -> np.ndarray:
    """The view ``{"shape", "strides", "offset"}`` of ``base`` (checked to lie inside it)."""
    shape, strides, offset = tuple(view["shape"]), tuple(view["strides"]), int(view["offset"])
    last = offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + base.itemsize
    if offset < 0 or min(strides) <= 0 or min(shape) < 1 or last > base.nbytes:
        raise ValueError("a view outside its array")
    return np.ndarray(shape, base.dtype, buffer=base, offset=offset, strides=strides)
