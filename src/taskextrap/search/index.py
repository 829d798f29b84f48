"""Nearest-neighbour retrieval in proxy space (Euclidean), batched over queries."""

from __future__ import annotations

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.validation import as_2d_float, check_int

def nearest(z: np.ndarray, library_z: np.ndarray, k: int, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` library rows nearest each row of ``z``: (indices (n, k), distances (n, k)), nearest first."""
    z, library_z = as_2d_float("z", z), as_2d_float("library_z", library_z)
    if z.shape[1] != library_z.shape[1]:
        raise TaskextrapError(f"z and library_z must have the same width, got {z.shape[1]} and {library_z.shape[1]}")
    check_int("k", k, 1, len(library_z))  # at most the library size
    check_int("chunk", chunk, 1)
    idx, dist = [], []
    sq_lib = (library_z**2).sum(1)
    for i in range(0, len(z), chunk):
        zc = z[i:i + chunk]
        d2 = np.maximum((zc**2).sum(1)[:, None] - 2 * zc @ library_z.T + sq_lib[None], 0.0)
        part = np.argpartition(d2, k - 1, axis=1)[:, :k] if k < len(library_z) else np.tile(
            np.arange(len(library_z)), (len(zc), 1))
        order = np.argsort(np.take_along_axis(d2, part, 1), axis=1, kind="stable")
        top = np.take_along_axis(part, order, 1)
        idx.append(top)
        dist.append(np.sqrt(np.take_along_axis(d2, top, 1)))
    return np.concatenate(idx), np.concatenate(dist)
