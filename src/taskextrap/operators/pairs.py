"""What Psi learns from in the parameter regime: the library's observed draws (Phase 1a) and the
(target draw, anchor) pairs drawn from them every pass, and how Psi reads a context of another
size than it was trained on.

Every array here comes from library tasks only: the draws are library tasks observed through the
protocol, an anchor is a training library task other than the draw's own, and each batch names
the tasks it was made from for the leak audit (``audit.Batch``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from taskextrap import audit
from taskextrap.operators.parameter import sort_context
from taskextrap.seeding import rng
from taskextrap.tasks.observe import Observations

POOL_DISTANCE_ENTRIES = 2**25  # draws x pool distances kept for Psi's pair draws (256 MB at most)
# Beyond the kept distances, a near anchor is one of the draw's nearest among a seeded subset of at
# most this many training tasks: a lookup linear in the library (every draw against a bounded
# set), and the same neighbourhoods as a library of this size, as the objective's candidates
# beyond ``search.objective.CANDIDATE_POOL`` tasks (issue 65).
NEAR_POOL = 3200


@dataclass(frozen=True)
class Draws:
    """The library's observed draws: shared by Psi, the inductive baselines and the embedding."""

    obs: Observations
    z: np.ndarray  # Gamma of each draw's own context (n_draws, dim)
    train: np.ndarray  # boolean mask over draws: tasks used for training
    val: np.ndarray  # boolean mask over draws: held-out *library* tasks for model selection


def observe_library(library, protocol, per_task: int, seed: int, noise_scale: float) -> Observations:
    """``per_task`` draws of every library task through ``protocol`` (the stream ``seed``), the
    context's noise scaled by ``noise_scale``: Phase 1a's observations."""
    return protocol.draw(library, per_task, rng(seed, "library-draws"), noise_scale)


def validation_split(n: int, val_fraction: float, seed: int, task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A ``val_fraction`` of the ``n`` library tasks held out for model selection: (the training
    tasks, sorted; the mask of the draws of held-out tasks, given each draw's ``task``)."""
    val_tasks = rng(seed, "val-split").permutation(n)[: round(val_fraction * n)]
    return np.setdiff1d(np.arange(n), val_tasks), np.isin(task, val_tasks)


@dataclass(eq=False)
class PairSampler:
    """Psi's training pairs: each library draw paired with an anchor, a training library task
    other than its own, near it in proxy space (one of its ``n_near`` nearest) with probability
    ``near_fraction``, else uniform, so both retrieval-like small shifts and region-sized shifts
    are in distribution.

    Attributes:
        library: the library (``values(x, index)``, ``family``, ``params``).
        draws: its observed draws and their proxies.
        z_library: each library task's proxy (n_library, dim).
        pool: the training tasks anchors are drawn from (sorted).
        near_fraction: the share of pairs with a near anchor.
        n_near: how many nearest tasks a near anchor is drawn from.
        noise_sd: the context's noise sd (the leak audit's tolerance).
        loo: add the leave-one-out rows' targets (the noiseless values at the context).
        min_context: the fewest context points Psi learns to read: below the contexts' size, each
            pair hides a random number of its points (:func:`present_masks`).
        seed: the stream of the near anchors' subset of a large pool (:data:`NEAR_POOL`).
    """

    library: Any
    draws: Draws
    z_library: np.ndarray
    pool: np.ndarray
    near_fraction: float
    n_near: int
    noise_sd: float
    loo: bool
    min_context: int
    seed: int = 0
    _distances: np.ndarray | None = field(default=None, repr=False)
    _near: np.ndarray | None = field(default=None, repr=False)

    def batch(self, draw_idx: np.ndarray, g: np.random.Generator) -> audit.Batch:
        """Arrays for Psi from the draws ``draw_idx``, their anchors drawn from ``g``: a batch
        (ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, qry_y[, loo targets][, present masks])
        naming the target draws and the anchors it was made from, for the leak audit."""
        d, pool, n = self.draws, self.pool, len(draw_idx)
        anchor = pool[g.integers(len(pool), size=n)]
        near = g.random(n) < self.near_fraction
        if near.any():
            near_k = self.near_candidates(draw_idx[near])
            anchor[near] = pool[near_k[np.arange(len(near_k)), g.integers(near_k.shape[1], size=len(near_k))]]
        same = anchor == d.obs.task[draw_idx]
        anchor[same] = pool[(np.searchsorted(pool, anchor[same]) + 1) % len(pool)]
        ctx_x, ctx_y = sort_context(d.obs.ctx_x[draw_idx], d.obs.ctx_y[draw_idx])
        qry_x = d.obs.qry_x[draw_idx]
        lib = self.library
        arrays: tuple[np.ndarray, ...] = (
            ctx_x,
            ctx_y,
            lib.values(ctx_x, anchor),
            qry_x,
            lib.values(qry_x, anchor),
            d.z[draw_idx] - self.z_library[anchor],
            d.obs.qry_y[draw_idx],
        )
        target_checks: tuple[tuple[int, int, float], ...] = ((0, 1, 8.0 * self.noise_sd), (3, 6, 0.0))
        if self.loo:  # the leave-one-out rows' targets: the noiseless values at the context
            arrays += (lib.values(ctx_x, d.obs.task[draw_idx]),)
            target_checks += ((0, 7, 0.0),)
        if self.min_context < ctx_x.shape[1]:  # drawn last: the other arrays are those of a full context
            arrays += (present_masks(g, n, ctx_x.shape[1], self.min_context),)
        return audit.Batch(
            arrays,
            [
                audit.Source(lib.family, d.obs.params[draw_idx], target_checks),
                audit.Source(lib.family, lib.params[anchor], ((0, 2, 0.0), (3, 4, 0.0))),
            ],
        )

    def near_candidates(self, draw_idx: np.ndarray) -> np.ndarray:
        """The positions in the pool of each draw's ``n_near`` nearest training tasks (never its
        own), (len(draw_idx), k); a near anchor is a random one of them.

        While all draws' distances to the pool fit in :data:`POOL_DISTANCE_ENTRIES`, they come
        from the kept distance rows in ``argpartition``'s order (the order the random pick
        indexes: the committed runs' anchors). Beyond, each draw's nearest among the pool (or a
        seeded subset of :data:`NEAR_POOL` of its tasks) are looked up once (:func:`k_nearest`)
        and kept, (draws, k) integers: linear memory and time, and no distance row per pass
        (issue 65)."""
        d, pool = self.draws, self.pool
        k = min(self.n_near, len(pool) - 1)
        if len(d.z) * len(pool) <= POOL_DISTANCE_ENTRIES:
            dist = self.pool_distances(draw_idx)
            dist[d.obs.task[draw_idx, None] == pool[None]] = np.inf  # never itself
            return np.argpartition(dist, k - 1, axis=1)[:, :k]
        if self._near is None:
            where = np.arange(len(pool))  # the pool positions near anchors come from
            if len(pool) > NEAR_POOL:
                where = np.sort(rng(self.seed, "near-pool").choice(len(pool), NEAR_POOL, replace=False))
            k = min(k, len(where) - 1)
            idx = where[k_nearest(d.z, self.z_library[pool[where]], k + 1)]
            own = pool[idx] == d.obs.task[:, None]  # a draw's own task, if among its nearest
            self._near = np.take_along_axis(idx, np.argsort(own, axis=1, kind="stable")[:, :k], axis=1)
        return self._near[draw_idx]

    def pool_distances(self, draw_idx: np.ndarray) -> np.ndarray:
        """Proxy distances (len(draw_idx), pool) from library draws to the training pool's
        embeddings. Every pass of Psi's training asks again for the same draws, so all draws'
        rows are computed once (row by row the same numbers; while they fit in
        :data:`POOL_DISTANCE_ENTRIES`) and returned as a copy."""
        z, pool = self.draws.z, self.pool
        rows = lambda idx: np.linalg.norm(z[idx, None] - self.z_library[None, pool], axis=2)  # noqa: E731
        if len(z) * len(pool) > POOL_DISTANCE_ENTRIES:
            return rows(draw_idx)
        if self._distances is None:
            blocks = [rows(np.arange(i, min(i + 1024, len(z)))) for i in range(0, len(z), 1024)]
            self._distances = np.concatenate(blocks)
        return self._distances[draw_idx]


def k_nearest(z: np.ndarray, pool_z: np.ndarray, k: int, chunk: int = 4096) -> np.ndarray:
    """The ``k`` rows of ``pool_z`` nearest each row of ``z`` (Euclidean), nearest first, ties by
    the lowest index (to the proposal's rounding): (len(z), k) indices, ``chunk`` rows of ``z`` at
    a time (memory chunk x pool). A matrix product proposes ``k`` + 8 candidates, whose distances
    are then computed exactly. (The operators sit below ``search``, whose ``index.nearest`` is
    the general form.)"""
    c = min(len(pool_z), k + 8)
    sq = (pool_z**2).sum(1)
    out = []
    for i in range(0, len(z), chunk):
        zc = z[i : i + chunk]
        d2 = sq[None] - 2.0 * zc @ pool_z.T
        cand = np.argpartition(d2, c - 1, axis=1)[:, :c] if c < len(pool_z) else np.broadcast_to(np.arange(c), d2.shape)
        exact = np.linalg.norm(zc[:, None] - pool_z[cand], axis=2)
        order = np.lexsort((cand, exact), axis=1)[:, :k]  # by distance, then by index
        out.append(np.take_along_axis(cand, order, 1))
    return np.concatenate(out) if out else np.zeros((0, k), dtype=int)


def present_masks(g: np.random.Generator, n: int, k: int, low: int) -> np.ndarray:
    """(n, k) masks of the context points Psi sees in training when it learns to read contexts
    of ``low`` to ``k`` points: each row hides a uniform number of its points in [0, k - low],
    chosen uniformly."""
    hidden = g.integers(0, k - low + 1, size=n)
    rank = np.argsort(g.random((n, k)), axis=1).argsort(axis=1)
    return (rank >= hidden[:, None]).astype(float)


def context_views(
    sx: np.ndarray, sy: np.ndarray, n_context: int, domain: tuple[float, float], context_span: tuple[float, float]
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """A sorted context (n, m) as the ``n_context``-point contexts Psi reads, with a mask of the
    points present (None: all): itself when ``m == n_context``; ``ceil(m / n_context)``
    interleaved subsets covering every point when larger (predictions and context losses are
    averaged over them); when smaller, the context padded with hidden points spread over the
    protocol's ``context_span`` of the ``domain`` (their x carries no information about the
    target: only the anchor is read there)."""
    n, m = sx.shape
    k = n_context
    if m == k:
        return [(sx, sy, None)]
    if m > k:
        s = -(-m // k)
        idx = [np.floor((np.arange(k) + j / s) * m / k).astype(int) for j in range(s)]
        return [(sx[:, i], sy[:, i], None) for i in idx]
    lo, hi = domain
    a, b = context_span
    pad = lo + (a + (b - a) * (np.arange(k - m) + 0.5) / (k - m)) * (hi - lo)
    vx = np.concatenate([sx, np.broadcast_to(pad, (n, k - m))], axis=1)
    vy = np.concatenate([sy, np.zeros((n, k - m))], axis=1)
    present = np.concatenate([np.ones((n, m)), np.zeros((n, k - m))], axis=1)
    order = np.argsort(vx, axis=1, kind="stable")
    take = lambda v: np.take_along_axis(v, order, 1)  # noqa: E731
    return [(take(vx), take(vy), take(present))]
