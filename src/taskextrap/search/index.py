"""Nearest-neighbour retrieval in proxy space (Euclidean), batched over queries.

Every k-nearest-neighbour lookup of the package goes through :func:`nearest`. A library index
(scikit-learn's ``NearestNeighbors``, or faiss's ``IndexFlatL2`` when the optional ``faiss``
extra is installed) proposes a few more candidates than asked for; their distances are then
recomputed exactly, as ``np.linalg.norm(z - library_z[j])``, and ordered nearest first, ties by
the lowest library index. A row is accepted only when the index's own distances, widened by a
bound on their rounding error, prove that no library row outside the candidates is nearer than
the ``k``-th; any other row (exact ties at the boundary, a float32 index too coarse to separate
near-equal distances) is recomputed against the whole library. So every backend returns the same
indices and distances, bit for bit, as the exact brute-force rule; only the time differs.

``backend="auto"`` follows ``benchmarks/nn_index.py`` (``benchmarks/results/nn-index.json``,
run on 2 idle cores): with a small ``k`` (parameter anchors, composition candidates) at the
paper's library sizes and at 10x and 100x them, scikit-learn's brute-force ``NearestNeighbors``
(a chunked k-smallest reduction) was as fast as numpy at 200 rows and 2 to 8 times faster from
2,000 rows on (composition at 9,000 rows: 19 against 148 microseconds per query); when ``k`` is a
large share of the library (the length RTE screens 40% of it) the plain numpy search (one matrix
product and a partial sort) was the fastest at every size. So ``auto`` takes scikit-learn unless
``k`` is more than an eighth of the library. The k-d and ball trees were slower than both; faiss
(float32) was about as fast as scikit-learn but stays an optional extra. (Runs on cores shared
with other work were erratic for scikit-learn with few queries per call.)
"""

from __future__ import annotations

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.validation import as_2d_float, check_int

__all__ = ["nearest", "nearest_exact", "auto_backend", "BACKENDS", "AUTO_RULE"]

BACKENDS = ("auto", "numpy", "brute", "kd_tree", "ball_tree", "faiss")
# Relative bound on a backend's squared-distance rounding error, times (|z| + max |library_z|)^2:
# float64 indices are far inside 1e-10 (a few machine epsilons per coordinate), faiss works in float32.
_TOL = {"numpy": 1e-10, "brute": 1e-10, "kd_tree": 1e-10, "ball_tree": 1e-10, "faiss": 1e-5}
AUTO_RULE = "numpy when k > library rows / 8, else scikit-learn brute force"  # recorded by the benchmark


def auto_backend(n_library: int, k: int) -> str:
    """The backend ``"auto"`` uses for ``k`` neighbours in a library of ``n_library`` rows: numpy
    when ``k`` is more than an eighth of the library, scikit-learn's brute force otherwise (the
    benchmark in the module docstring)."""
    return "numpy" if 8 * k > n_library else "brute"


def _extra(k: int) -> int:
    """Candidates asked for beyond ``k``, so that a near tie at the boundary rarely forces a recomputation."""
    return max(8, k // 8)


def nearest(
    z: np.ndarray, library_z: np.ndarray, k: int, chunk: int = 4096, backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` library rows nearest each row of ``z``: (indices (n, k), distances (n, k)).

    Nearest first; equal distances in the order of the library index (lowest first). Distances
    are ``np.linalg.norm(z[i] - library_z[j])``. ``chunk`` queries are handled at a time (bounded
    memory). ``backend`` names the index that proposes candidates (``"auto"``: the benchmark's
    choice, :func:`auto_backend`; ``"numpy"``: a matrix product and a partial sort;
    ``"brute"``, ``"kd_tree"``, ``"ball_tree"``: scikit-learn's ``NearestNeighbors``;
    ``"faiss"``: ``faiss.IndexFlatL2``, needs the ``faiss`` extra); the result is the same for
    every backend (module docstring).
    """
    z, library_z = as_2d_float("z", z), as_2d_float("library_z", library_z)
    if z.shape[1] != library_z.shape[1]:
        raise TaskextrapError(f"z and library_z must have the same width, got {z.shape[1]} and {library_z.shape[1]}")
    check_int("k", k, 1, len(library_z))  # at most the library size
    check_int("chunk", chunk, 1)
    if backend not in BACKENDS:
        raise TaskextrapError(f"unknown nearest-neighbour backend {backend!r}; use one of {', '.join(BACKENDS)}")
    backend = auto_backend(len(library_z), k) if backend == "auto" else backend
    n_lib = len(library_z)
    k_c = min(n_lib, k + _extra(k))
    search = _index(backend, library_z)
    lib_norm = float(np.sqrt((library_z**2).sum(1)).max())
    idx, dist = [], []
    for i in range(0, len(z), chunk):
        zc = z[i : i + chunk]
        cand, approx_d2 = search(zc, k_c)
        top, d = _rerank(zc, library_z, cand, k)
        if k_c < n_lib:
            scale = (np.sqrt((zc**2).sum(1)) + lib_norm) ** 2
            bound = (
                approx_d2.max(axis=1) - _TOL[backend] * scale
            )  # every non-candidate's squared distance is above this
            redo = ~(d[:, -1] ** 2 * (1 + 1e-12) < bound)
            if redo.any():
                top[redo], d[redo] = nearest_exact(zc[redo], library_z, k)
        idx.append(top)
        dist.append(d)
    return np.concatenate(idx), np.concatenate(dist)


BUDGET = 1 << 23  # differences (floats) held at a time by the exact step: 64 MiB


def _rerank(z: np.ndarray, library_z: np.ndarray, cand: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` of the candidates ``cand`` (n, c) nearest each row of ``z`` by exact distance, ties by index."""
    step = max(1, BUDGET // max(1, cand.shape[1] * library_z.shape[1]))
    idx, dist = [], []
    for i in range(0, len(z), step):
        c = cand[i : i + step]
        d = np.linalg.norm(z[i : i + step, None] - library_z[c], axis=2)
        order = np.lexsort((c, d), axis=-1)[:, :k]
        idx.append(np.take_along_axis(c, order, 1))
        dist.append(np.take_along_axis(d, order, 1))
    if not idx:
        return np.zeros((0, k), dtype=np.intp), np.zeros((0, k))
    return np.concatenate(idx), np.concatenate(dist)


def nearest_exact(z: np.ndarray, library_z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference rule of :func:`nearest` by brute force, without an index or checks on its
    inputs (``z`` (n, m) and ``library_z`` (N, m) float arrays, 1 <= k <= N): exact distances
    ``np.linalg.norm(z[i] - library_z[j])`` to every library row, nearest first, ties by the
    lowest index; (indices (n, k), distances (n, k))."""
    return _rerank(z, library_z, np.broadcast_to(np.arange(len(library_z)), (len(z), len(library_z))), k)


def _index(backend: str, library_z: np.ndarray):
    """A function ``(z, c) -> (candidate indices (n, c), their squared distances by the index)``."""
    if backend == "numpy":
        sq_lib = (library_z**2).sum(1)

        def numpy_search(zc, c):
            d2 = np.maximum((zc**2).sum(1)[:, None] - 2 * zc @ library_z.T + sq_lib[None], 0.0)
            part = (
                np.argpartition(d2, c - 1, axis=1)[:, :c]
                if c < len(library_z)
                else np.broadcast_to(np.arange(len(library_z)), d2.shape)
            )
            return part, np.take_along_axis(d2, part, 1)

        return numpy_search
    if backend == "faiss":
        try:
            import faiss
        except ImportError:
            raise TaskextrapError("backend 'faiss' needs the faiss extra: pip install 'taskextrap[faiss]'") from None
        index = faiss.IndexFlatL2(library_z.shape[1])
        index.add(np.ascontiguousarray(library_z, dtype=np.float32))

        def faiss_search(zc, c):
            d2, part = index.search(np.ascontiguousarray(zc, dtype=np.float32), c)
            return part.astype(np.intp), d2.astype(float)

        return faiss_search
    from sklearn.neighbors import NearestNeighbors

    index = NearestNeighbors(algorithm=backend).fit(library_z)

    def sklearn_search(zc, c):
        d, part = index.kneighbors(zc, c)
        return part, d**2

    return sklearn_search
