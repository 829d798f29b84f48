"""Verification of deep compositions: every ordered chain of retrieved candidates, composed from
stored library curves at the context inputs and scored by its context MSE (the paper's
multi-step decomposition search, App. B.1.2).

For one target with candidates ``k_1, ..., k_d`` per slot (outermost first) there are
k_1 x ... x k_d chains (216,000 for k = 60 at depth 3). :func:`verify_chains` scores them all in
one batched evaluation per target: the inner slots are composed by broadcasting (k_2 ... k_d
values per context point, float64), then the outer slot reads all k_1 outer curves at once
from a grid-major float32 table (one row gather per inner value, a contiguous vector over the
outer candidates), in chunks of at most ``max_floats`` values so memory stays bounded and the
working set stays in cache. The best ``keep`` chains are re-scored exactly in float64 and
returned best first. :func:`chain_losses_loop` is the plain Python-loop reference of the same
search (``np.interp`` chain by chain); tests check that both agree and the depth-3 benchmark
(``benchmarks/depth3_search.py``) times one against the other.

:func:`refine_chains` sweeps the whole library for one slot at a time, the others fixed (the
depth-2 regime's coordinate refinement, at any depth).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from taskextrap.errors import TaskextrapError
from taskextrap.lanes import lanes, map_lanes
from taskextrap.tasks.primitives import PrimitiveSet
from taskextrap.validation import check_int

T = TypeVar("T")

MAX_FLOATS = 1 << 19  # outer-slot values per chunk of the batched verification (2 MiB of float32)
# Values (targets x context points x library) one refinement sweep holds at once. Kept near 8 MB
# per array: above glibc's largest mmap threshold (32 MB) every numpy temporary is fresh pages,
# and their page faults cost more than the sweep's arithmetic (1.7x on 9,000 primitives, benchmarks/em_estep.py).
REFINE_VALUES = 1_000_000


def refine_chunk(n_targets: int, n_context: int, n_library: int) -> int:
    """Targets per refinement sweep: as many as keep a sweep within ``REFINE_VALUES`` values, but
    few enough that every lane gets a chunk (at least 1). Targets are refined independently, so
    the chunk changes the wall time, never a number."""
    by_values = REFINE_VALUES // max(1, n_context * n_library)
    per_lane = -(-n_targets // lanes())
    return max(1, min(by_values, per_lane))


def map_target_chunks(fn: Callable[[slice], T], n_targets: int, n_context: int, n_library: int) -> list[T]:
    """``fn(s)`` for consecutive slices ``s`` of the ``n_targets`` targets, :func:`refine_chunk`
    targets each, run on the lanes; the results in target order. Each chunk computes the same
    numbers in any lane, so the results never depend on the chunk size or the lane count."""
    step = refine_chunk(n_targets, n_context, n_library)
    return map_lanes(lambda i: fn(slice(i, i + step)), range(0, n_targets, step))


def chain_values(primitives: PrimitiveSet, x: np.ndarray, chains: np.ndarray) -> np.ndarray:
    """h(x) from stored curves for chains (..., d) of library indices, outermost first, at ``x``
    of shape chains.shape[:-1] + (m,): the innermost primitive is applied first."""
    v = np.asarray(x, dtype=float)
    chains = np.asarray(chains)
    for j in range(chains.shape[-1] - 1, -1, -1):
        v = primitives.interp(v, chains[..., j])
    return v


def context_losses(primitives: PrimitiveSet, ctx_x: np.ndarray, ctx_y: np.ndarray, chains: np.ndarray) -> np.ndarray:
    """Context MSE (n, c) of chains (n, c, d) composed from stored curves, float64."""
    n, c = chains.shape[:2]
    v = chain_values(primitives, np.broadcast_to(ctx_x[:, None, :], (n, c, ctx_x.shape[1])), chains)
    return ((v - ctx_y[:, None, :]) ** 2).mean(axis=2)


def _inner_values(primitives: PrimitiveSet, x: np.ndarray, inner: list[np.ndarray]) -> np.ndarray:
    """Values (k_2 * ... * k_d, m) at ``x`` (m,) of every combination of the ``inner`` slots'
    candidates (outermost first), rows in C order over the slots."""
    v = x[None, :]
    for cand in reversed(inner):
        p, m = v.shape
        v = primitives.interp(
            np.broadcast_to(v[None], (len(cand), p, m)), np.broadcast_to(cand[:, None], (len(cand), p))
        ).reshape(len(cand) * p, m)
    return v


def _outer_losses(
    primitives: PrimitiveSet, v: np.ndarray, y: np.ndarray, outer: np.ndarray, max_floats: int, device: str = "cpu"
) -> torch.Tensor:
    """Context MSE (k_1, p) of every outer candidate applied to every row of ``v`` (p, m), on ``device``."""
    p, m = v.shape
    k = len(outer)
    table = torch.from_numpy(primitives.curves[outer].T.astype(np.float32)).to(device)  # (G, k) grid-major
    lerp = torch.cat([table[:-1], table[1:] - table[:-1]], dim=1).contiguous()  # (G-1, 2k): value, slope
    where, frac = primitives.locate(v)
    pos, t = torch.from_numpy(where).to(device), torch.from_numpy(frac.astype(np.float32)).to(device)
    target = torch.from_numpy(np.asarray(y, dtype=np.float32)).to(device)[:, None]
    out = torch.empty((p, k), dtype=torch.float32, device=device)
    rows = max(1, max_floats // (m * k))
    for a in range(0, p, rows):
        g = torch.index_select(lerp, 0, pos[a : a + rows].reshape(-1))  # (r*m, 2k)
        f = torch.addcmul(g[:, :k], t[a : a + rows].reshape(-1, 1), g[:, k:]).view(-1, m, k)
        f.sub_(target).square_()
        out[a : a + rows] = f.sum(dim=1).div_(m)
    return out.T


def _check(primitives: PrimitiveSet, ctx_x, ctx_y, candidates) -> list[np.ndarray]:
    if not isinstance(candidates, (list, tuple)) or len(candidates) < 1:
        raise TaskextrapError("candidates must be a list of (n, k) index arrays, one per slot, outermost first")
    cands = [np.asarray(c) for c in candidates]
    n = len(ctx_x)
    for c in cands:
        if c.ndim != 2 or len(c) != n or c.shape[1] < 1 or c.dtype.kind not in "iu":
            raise TaskextrapError(f"each slot's candidates must be an integer array ({n}, k), got {c.dtype} {c.shape}")
        if c.min() < 0 or c.max() >= len(primitives):
            raise TaskextrapError(f"candidates must be library indices in [0, {len(primitives)})")
    return cands


def chain_losses(
    primitives: PrimitiveSet,
    ctx_x: np.ndarray,
    ctx_y: np.ndarray,
    candidates,
    max_floats: int = MAX_FLOATS,
    device: str = "cpu",
) -> np.ndarray:
    """Context MSE (n, k_1 * ... * k_d) of every chain of the slots' ``candidates`` ((n, k_j)
    each, outermost first), C order over the slots; batched (float32 outer slot, on ``device``)."""
    cands = _check(primitives, ctx_x, ctx_y, candidates)

    def losses(i: int) -> np.ndarray:  # one target: the same numbers in any lane
        inner = _inner_values(primitives, ctx_x[i], [c[i] for c in cands[1:]])
        return _outer_losses(primitives, inner, ctx_y[i], cands[0][i], max_floats, device).reshape(-1).cpu().numpy()

    return np.stack(map_lanes(losses, range(len(ctx_x)), device)).astype(float)


def chain_losses_loop(primitives: PrimitiveSet, ctx_x: np.ndarray, ctx_y: np.ndarray, candidates) -> np.ndarray:
    """The reference: :func:`chain_losses` one chain at a time in Python, with ``np.interp``."""
    cands = _check(primitives, ctx_x, ctx_y, candidates)
    grid, curves = primitives.grid, primitives.curves
    out = np.empty((len(ctx_x), math.prod(c.shape[1] for c in cands)))
    for i in range(len(ctx_x)):
        for j, chain in enumerate(itertools.product(*[c[i] for c in cands])):
            v = ctx_x[i]
            for idx in reversed(chain):
                v = np.interp(v, grid, curves[idx])
            out[i, j] = np.mean((v - ctx_y[i]) ** 2)
    return out


def verify_chains(
    primitives: PrimitiveSet,
    ctx_x: np.ndarray,
    ctx_y: np.ndarray,
    candidates,
    keep: int,
    max_floats: int = MAX_FLOATS,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``keep`` chains of every target among all chains of the slots' ``candidates``
    ((n, k_j) each, outermost first): (chains (n, keep, d) outermost first, context MSE (n, keep)
    in float64), best first. Each target's chains are scored in one batched evaluation on ``device``."""
    cands = _check(primitives, ctx_x, ctx_y, candidates)
    check_int("keep", keep, 1)
    check_int("max_floats", max_floats, 1)
    shape = tuple(c.shape[1] for c in cands)
    keep = min(keep, math.prod(shape))

    def best(i: int) -> torch.Tensor:  # one target's best chains (keep,), on the device; the same in any lane
        loss = _outer_losses(
            primitives,
            _inner_values(primitives, ctx_x[i], [c[i] for c in cands[1:]]),
            ctx_y[i],
            cands[0][i],
            max_floats,
            device,
        ).reshape(-1)
        return torch.topk(loss, keep, largest=False, sorted=True).indices

    n = len(ctx_x)
    if n == 0:
        return _ranked(primitives, ctx_x, ctx_y, np.empty((0, keep, len(cands)), dtype=np.int64))
    # every target's indices come back in one transfer (on a GPU, no sync per target)
    index = torch.stack(map_lanes(best, range(n), device)).cpu().numpy()  # (n, keep)
    slots = np.unravel_index(index, shape)
    chains = np.stack([np.take_along_axis(c, s, 1) for c, s in zip(cands, slots, strict=True)], axis=2)
    return _ranked(primitives, ctx_x, ctx_y, chains.astype(np.int64, copy=False))


def _ranked(primitives, ctx_x, ctx_y, chains) -> tuple[np.ndarray, np.ndarray]:
    """``chains`` (n, c, d) re-scored exactly (float64) and sorted best first (stable)."""
    loss = context_losses(primitives, ctx_x, ctx_y, chains)
    order = np.argsort(loss, axis=1, kind="stable")
    return np.take_along_axis(chains, order[..., None], 1), np.take_along_axis(loss, order, 1)


def _sweep(primitives: PrimitiveSet, ctx_x, ctx_y, chains: np.ndarray, slot: int) -> np.ndarray:
    """Context MSE (n, L) of ``chains`` (n, d) with slot ``slot`` replaced by every library primitive."""
    n, _m = ctx_x.shape
    size = len(primitives)
    inner = chain_values(primitives, ctx_x, chains[:, slot + 1 :])  # (n, m)
    v = np.moveaxis(primitives.interp_all(inner), 2, 1)  # (n, L, m)
    for j in range(slot - 1, -1, -1):
        v = primitives.interp(v, np.broadcast_to(chains[:, j : j + 1], (n, size)))
    return ((v - ctx_y[:, None, :]) ** 2).mean(axis=2)


def refine_chains(
    primitives: PrimitiveSet,
    ctx_x: np.ndarray,
    ctx_y: np.ndarray,
    chains: np.ndarray,
    loss: np.ndarray,
    rounds: int,
    keep: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Coordinate refinement of each target's best chain over the whole library, then re-ranking.

    Each round re-chooses every slot in turn (outermost first) with the others fixed, by context
    MSE, so the best chain's loss never rises. The chains of the last round's sweeps join the
    ranked ``chains`` (n, c, d) with their losses (n, c); the best ``keep`` (default c) distinct
    chains are returned best first. Targets are swept :func:`refine_chunk` at a time, on the lanes.
    """
    check_int("rounds", rounds, 0)
    keep = chains.shape[1] if keep is None else check_int("keep", keep, 1)
    if rounds == 0:
        return chains[:, :keep], loss[:, :keep]

    parts = map_target_chunks(
        lambda s: _refine(primitives, ctx_x[s], ctx_y[s], chains[s], loss[s], rounds, keep),
        len(ctx_x),
        ctx_x.shape[1],
        len(primitives),
    )
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _refine(primitives, ctx_x, ctx_y, chains, loss, rounds, keep):
    _n, _, d = chains.shape
    size = len(primitives)
    best = chains[:, 0].copy()
    found_c, found_l = [], []
    for r in range(rounds):
        for slot in range(d):
            sweep = _sweep(primitives, ctx_x, ctx_y, best, slot)  # (n, L)
            if r == rounds - 1:
                alt = np.repeat(best[:, None, :], size, axis=1)
                alt[:, :, slot] = np.arange(size)
                found_c.append(alt)
                found_l.append(sweep)
            best[:, slot] = sweep.argmin(axis=1)
    all_c = np.concatenate([chains, *found_c], axis=1)
    all_l = np.concatenate([loss, *found_l], axis=1)
    # The same chain can come from several sources (with the same loss): keep one copy.
    ids = np.zeros(all_c.shape[:2], dtype=np.int64)
    for j in range(d):
        ids = ids * size + all_c[..., j]
    by_id = np.argsort(ids, axis=1, kind="stable")
    sorted_ids = np.take_along_axis(ids, by_id, 1)
    dup = np.zeros_like(ids, dtype=bool)
    dup[:, 1:] = sorted_ids[:, 1:] == sorted_ids[:, :-1]
    np.put_along_axis(all_l, by_id, np.where(dup, np.inf, np.take_along_axis(all_l, by_id, 1)), 1)
    order = np.argsort(all_l, axis=1, kind="stable")[:, :keep]
    return np.take_along_axis(all_c, order[..., None], 1), np.take_along_axis(all_l, order, 1)
