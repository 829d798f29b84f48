"""Input checks at the API boundary; each failure is a one-line TaskextrapError naming the argument.

Every public entry point validates its arguments here, once, before any work, so a bad input
never surfaces later as a numpy, torch or scikit-learn exception, or as NaN output.

Decisions every check shares:

* Arrays of numbers must have an integer, unsigned or float dtype (float16 to float64; they
  are computed on as float64). Boolean arrays are refused: a mask passed where values are
  expected is a more likely mistake than 0/1 data, and ``x.astype(float)`` says so explicitly.
  Complex arrays are refused (``np.asarray(z, dtype=float)`` would drop the imaginary part with
  only a warning), and so are object, string, bytes and datetime arrays.
* Values are finite and at most :data:`MAX_ABS` = 1e150 in magnitude: the square or the product
  of any two accepted values is at most 1e300, below float64's largest 1.8e308, so the squared
  errors, differences and scalings computed on them stay finite.
* Counts and sizes are Python or numpy integers (``True`` and ``2.0`` are not counts); real
  parameters are finite Python or numpy reals, never ``bool``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from taskextrap.errors import TaskextrapError

MAX_ABS = 1e150  # squares and products of two accepted values stay finite in float64 (1e300 < 1.8e308)
# The estimators' networks compute in float32 on values mapped to library units (x: the domain
# is [-1, 1]; y: the library's spread is 1). Bounded by 1e9 there, a square (1e18) is 20 orders of
# magnitude below float32's largest value (3.4e38), room for the networks' sums and products.
MAX_SCALED = 1e9


def describe(value) -> str:
    """``value`` for a one-line message: an array's dtype and shape, else its repr on one line
    (whitespace collapsed, cut at 40 characters) and its type."""
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    try:
        text = " ".join(repr(value).split())
    except Exception:  # noqa: BLE001 - a user object whose repr fails must not hide the real error
        text = "<unprintable>"
    text = text if len(text) <= 40 else text[:37] + "..."
    # A builtin scalar's repr says what it is (2.5, '2', True); other objects get their type too.
    plain = type(value) in (str, bytes, int, float, bool, complex, type(None))
    return text if plain else f"{text} ({type(value).__name__})"


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int: a Python or numpy integer (not a bool, not a float) in [minimum, maximum]."""
    bounds = _bounds(minimum, maximum)
    if not _is_int(value):
        raise TaskextrapError(f"{name} must be an integer{bounds}, got {describe(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise TaskextrapError(f"{name} must be an integer{bounds}, got {value}")
    return int(value)


def check_optional_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int | None:
    """``value`` as an int (see :func:`check_int`), or None."""
    return None if value is None else check_int(name, value, minimum, maximum)


def check_real(
    name: str,
    value,
    minimum: float | None = None,
    maximum: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """``value`` as a float: a finite Python or numpy real (not a bool) within the bounds
    (``min_open`` / ``max_open`` exclude the bound itself)."""
    lo = "" if minimum is None else f"{'>' if min_open else '>='} {minimum}"
    hi = "" if maximum is None else f"{'<' if max_open else '<='} {maximum}"
    want = " and ".join(b for b in (lo, hi) if b)
    want = f"a finite number{' ' + want if want else ''}"
    if not _is_real(value) or not math.isfinite(value):
        raise TaskextrapError(f"{name} must be {want}, got {describe(value)}")
    if minimum is not None and (value <= minimum if min_open else value < minimum):
        raise TaskextrapError(f"{name} must be {want}, got {value}")
    if maximum is not None and (value >= maximum if max_open else value > maximum):
        raise TaskextrapError(f"{name} must be {want}, got {value}")
    return float(value)


def check_str(name: str, value, allow_empty: bool = False) -> str:
    """``value`` if it is a string (non-empty unless ``allow_empty``)."""
    if not isinstance(value, str) or (not allow_empty and not value):
        raise TaskextrapError(f"{name} must be a{'' if allow_empty else ' non-empty'} string, got {describe(value)}")
    return value


def check_callable(name: str, value, how: str = "") -> None:
    """A one-line error unless ``value`` is callable (``how`` shows the expected call)."""
    if not callable(value):
        raise TaskextrapError(f"{name} must be callable{' as ' + how if how else ''}, got {describe(value)}")


def check_instance(name: str, value, cls, what: str) -> None:
    """A one-line error unless ``value`` is a ``cls``; ``what`` says what is expected and where
    it comes from (e.g. "a TaskSet (see taskextrap.tasks)")."""
    if not isinstance(value, cls):
        raise TaskextrapError(f"{name} must be {what}, got {describe(value)}")


def check_rng(name: str, value) -> np.random.Generator:
    """``value`` if it is a numpy Generator (``np.random.default_rng(seed)``)."""
    if not isinstance(value, np.random.Generator):
        raise TaskextrapError(f"{name} must be a numpy Generator (np.random.default_rng(seed)), got {describe(value)}")
    return value


def check_range(name: str, value, strict: bool = True) -> tuple[float, float]:
    """``value`` as (low, high): two finite reals with low < high (low <= high if not ``strict``)."""
    want = f"(low, high) with low {'<' if strict else '<='} high"
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) != 2:
        raise TaskextrapError(f"{name} must be a pair {want}, got {describe(value)}")
    lo, hi = value
    if not (_is_real(lo) and _is_real(hi) and math.isfinite(lo) and math.isfinite(hi)):
        raise TaskextrapError(f"{name} must be a pair of finite numbers {want}, got {describe(value)}")
    if lo > hi or (strict and lo == hi):
        raise TaskextrapError(f"{name} must be a pair {want}, got {tuple(value)}")
    return float(lo), float(hi)


def _bounds(minimum, maximum) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    return "" if maximum is None else f" <= {maximum}"


def as_float_array(name: str, a) -> np.ndarray:
    """``a`` as a float64 array of any shape: numeric dtype, finite, |values| <= MAX_ABS."""
    if a is None or isinstance(a, (str, bytes)):
        raise TaskextrapError(f"{name} must be a numeric array, got {describe(a)}")
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError):  # ragged nested lists, objects numpy cannot hold
        raise TaskextrapError(f"{name} must be a numeric array (a rectangular nested list or ndarray)") from None
    if arr.dtype.kind == "b":
        raise TaskextrapError(f"{name} must be numeric, got a boolean array (pass x.astype(float) for 0/1 values)")
    if arr.dtype.kind == "c":
        raise TaskextrapError(f"{name} must be real, got a complex array (pass its .real explicitly)")
    if arr.dtype.kind not in "iuf":
        raise TaskextrapError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    arr = np.asarray(arr, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise TaskextrapError(f"{name} contains NaN or inf")
    if arr.size and np.max(np.abs(arr)) > MAX_ABS:
        raise TaskextrapError(
            f"{name} has values beyond +-{MAX_ABS:.0e}: too large to compute with (their squares would overflow)"
        )
    return arr


def check_output(out, shape: tuple, what: str, x_word: str = "x", hint: str = "numpy-vectorised over x") -> np.ndarray:
    """``out``, what a user's formula (``what``: "family 'f': fn", ...) returned for inputs of
    ``shape``, as an array; a one-line error if it is not real numbers or not exactly that shape
    (a broadcast (n, 1) or scalar would hide a formula that ignores x). ``x_word`` names the
    inputs in the message and ``hint`` says how to return x's shape."""
    out = np.asarray(out)
    if out.dtype.kind not in "biuf":
        raise TaskextrapError(f"{what} returned {out.dtype} values; it must return real numbers")
    if out.shape != tuple(shape):
        raise TaskextrapError(
            f"{what} returned shape {out.shape} for {x_word} of shape {tuple(shape)}; "
            f"it must return exactly x's shape ({hint})"
        )
    return out


def as_2d_float(name: str, a, width: int | None = None) -> np.ndarray:
    """``a`` as a finite float array of shape (n, m), n >= 1 and m >= 1; a 1-D array is one row."""
    arr = as_float_array(name, a)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise TaskextrapError(f"{name} must have shape (n_tasks, n_points), got {arr.shape}")
    if arr.shape[1] == 0:
        raise TaskextrapError(f"{name} is empty: at least one point is needed")
    if arr.shape[0] == 0:
        raise TaskextrapError(f"{name} has no rows: at least one task is needed")
    if width is not None and arr.shape[1] != width:
        raise TaskextrapError(f"{name} must have {width} points per task, got {arr.shape[1]}")
    return arr


def check_context(ctx_x, ctx_y, n_context: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Validate a context set: matching (n, k) shapes, finite values, k == n_context if given."""
    x = as_2d_float("ctx_x", ctx_x, n_context)
    y = as_2d_float("ctx_y", ctx_y, n_context)
    if x.shape != y.shape:
        raise TaskextrapError(f"ctx_x and ctx_y must have the same shape, got {x.shape} and {y.shape}")
    return x, y


def check_query(qry_x, n_tasks: int, name: str = "x_query") -> np.ndarray:
    """Validate query inputs: (n_tasks, q) or one row shared by every task."""
    q = as_2d_float(name, qry_x)
    if q.shape[0] == 1 and n_tasks > 1:
        q = np.repeat(q, n_tasks, axis=0)
    if q.shape[0] != n_tasks:
        raise TaskextrapError(f"{name} has {q.shape[0]} rows for {n_tasks} tasks")
    return q


def as_rows(name: str, a, n: int, width: int, what: str = "") -> np.ndarray:
    """``a`` as a finite float array (n, width), from any shape holding n * width values (a flat
    array for width 1, say); ``what`` says what a row holds."""
    arr = as_float_array(name, a)
    if arr.size != n * width:
        raise TaskextrapError(f"{name} must have shape ({n}, {width}){': ' + what if what else ''}, got {arr.shape}")
    return arr.reshape(n, width)


def check_scaled(name: str, scaled: np.ndarray) -> None:
    """A one-line error if ``scaled`` (values in library units) exceeds :data:`MAX_SCALED`."""
    if scaled.size and np.max(np.abs(scaled)) > MAX_SCALED:
        raise TaskextrapError(
            f"{name} is too far outside the library's range (beyond {MAX_SCALED:.0e} times its "
            "spread) for the float32 networks"
        )


def check_finite_result(
    name: str, result: np.ndarray, culprit: str, why: str = "too far outside the library's range"
) -> np.ndarray:
    """``result`` if every value is finite; else a one-line error blaming ``culprit`` (the
    arguments whose values overflowed downstream) for ``why``. The last guard of the rule: a
    right-shaped finite result or a TaskextrapError, never NaN output."""
    if not np.all(np.isfinite(result)):
        raise TaskextrapError(f"{name} overflowed to NaN or inf: {culprit} {why}")
    return result


def as_index_array(name: str, a, size: int | None, what: str = "library indices") -> np.ndarray:
    """``a`` as an int64 array of indices into something of ``size`` items (``what`` names them
    in a message): integer dtype (or floats with integral values), every value in [0, size) (not
    checked when ``size`` is None), at least one value."""
    if a is None or isinstance(a, (str, bytes)):
        raise TaskextrapError(f"{name} must be an array of integer indices, got {describe(a)}")
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError):
        raise TaskextrapError(f"{name} must be an array of integer indices (a rectangular nested list)") from None
    if arr.dtype.kind == "f":  # np.zeros((n, 2)) is a natural way to write indices; 2.5 is not an index
        if not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise TaskextrapError(f"{name} must hold integer indices, got non-integer values")
    elif arr.dtype.kind not in "iu":
        raise TaskextrapError(f"{name} must be an array of integer indices, got dtype {arr.dtype}")
    if arr.size == 0:
        raise TaskextrapError(f"{name} is empty: at least one index is needed")
    if size is None:  # the range is checked where the indices are used
        if np.max(np.abs(arr)) >= 2**62:
            raise TaskextrapError(f"{name} holds values too large to be indices")
        return arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= size:
        raise TaskextrapError(f"{name} must be {what} in [0, {size}), got values in [{arr.min():.0f}, {arr.max():.0f}]")
    return arr.astype(np.int64)


def check_device(device) -> str:
    """``device`` as torch names it ("cpu", "cuda", "cuda:N"), checked: a one-line error for
    anything else, or for a CUDA device this machine does not have."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise TaskextrapError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {describe(device)}") from None
    if dev.type not in ("cpu", "cuda") or (dev.type == "cpu" and dev.index not in (None, 0)):
        raise TaskextrapError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {describe(device)}")
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise TaskextrapError(f"device {str(dev)!r} was asked for but this machine has no such CUDA device")
    return str(device)
