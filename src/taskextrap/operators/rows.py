"""Feature rows as the blocks they broadcast from, made into rows where they are used.

A network reads one row per (task, query point): a task's context, anchor and shift are the same
in each of its q rows. :class:`RowBlocks` keeps the rows (n*q, width) as their blocks side by
side, each broadcastable to (n, q, w) and already float32 (each value rounded once, as writing
it into float32 rows rounds it): a per-task block is (n, 1, w), sent once rather than q times. A
block may be a product ``(values, mask)`` whose mask is 0 or 1 (a leave-one-out row hides a
context point): the product is exact in float32, so it can be taken where the rows are made.

:meth:`RowBlocks.numpy` writes the rows on the host (the CPU path: the same bits as before the
blocks existed); :meth:`RowBlocks.torch` sends the blocks to a device and expands them there, so
a GPU receives a few per-task arrays instead of the rows (``operators.streams``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

Block = np.ndarray | tuple[np.ndarray, np.ndarray]  # values, or (values, 0/1 mask) to multiply


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _width(b: Block) -> int:
    return np.broadcast_shapes(b[0].shape, b[1].shape)[-1] if isinstance(b, tuple) else b.shape[-1]


@dataclass(frozen=True)
class RowBlocks:
    """Rows (n*q, width) as float32 blocks broadcastable to (n, q, w_i), in column order; parts
    of several such grids one after another (:meth:`concat`) as ``parts``."""

    parts: tuple[tuple[tuple[Block, ...], int, int], ...]

    @classmethod
    def of(cls, blocks: list, n: int, q: int) -> RowBlocks:
        """One grid of ``n`` tasks by ``q`` queries from ``blocks`` (float64 or float32 arrays, or
        (values, mask) pairs), each cast to float32 once."""
        cast = tuple((_f32(b[0]), _f32(b[1])) if isinstance(b, tuple) else _f32(b) for b in blocks)
        return cls(((cast, n, q),))

    def concat(self, other: RowBlocks) -> RowBlocks:
        """These rows, then ``other``'s (of the same width)."""
        return RowBlocks(self.parts + other.parts)

    @property
    def width(self) -> int:
        """Columns of a row."""
        return sum(_width(b) for b in self.parts[0][0])

    def __len__(self) -> int:
        return sum(n * q for _, n, q in self.parts)

    def numpy(self) -> np.ndarray:
        """The rows (n*q, width), float32, written on the host."""
        out = [_stack_numpy(blocks, n, q) for blocks, n, q in self.parts]
        return out[0] if len(out) == 1 else np.concatenate(out)

    def torch(self, device: torch.device | str, width: int | None = None) -> torch.Tensor:
        """The rows (n*q, ``width`` or more zero columns) made on ``device``: each block is sent
        once (pinned and asynchronous to a GPU) and broadcast there."""
        width = self.width if width is None else width
        out = [_stack_torch(blocks, n, q, torch.device(device), width) for blocks, n, q in self.parts]
        return out[0] if len(out) == 1 else torch.cat(out)


def _stack_numpy(blocks, n: int, q: int) -> np.ndarray:
    widths = [_width(b) for b in blocks]
    out = np.empty((n, q, sum(widths)), np.float32)
    j = 0
    for b, w in zip(blocks, widths, strict=True):
        out[:, :, j : j + w] = b[0] * b[1] if isinstance(b, tuple) else b
        j += w
    return out.reshape(n * q, -1)


def _send(a: np.ndarray, device: torch.device) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else t.to(device)


def _stack_torch(blocks, n: int, q: int, device: torch.device, width: int) -> torch.Tensor:
    out = torch.zeros((n, q, width), dtype=torch.float32, device=device)
    j = 0
    for b in blocks:
        w = _width(b)
        out[:, :, j : j + w] = _send(b[0], device) * _send(b[1], device) if isinstance(b, tuple) else _send(b, device)
        j += w
    return out.reshape(n * q, width)
