"""The paper's block MLPs (Appendix E): blocks of Linear+ReLU chained with no ReLU between blocks."""

from __future__ import annotations

import itertools
from typing import Protocol

import numpy as np
import torch
from torch import nn

from taskextrap.lanes import map_lanes
from taskextrap.operators.jobs import subnormals_flushed

# Parameter-extrapolation backbone: [D_in, 64, 64, 16] -> [16, 64, 64, 16] -> [16, 128, D_out].
PARAMETER_BLOCKS = ((64, 64, 16), (64, 64, 16), (128,))
# Length and composition backbone: [D_in, 256, 256, 128] -> [128, 128, 64] -> [64, 64, D_out].
DISCRETE_BLOCKS = ((256, 256, 128), (128, 128, 64), (64, 64))
# A narrower backbone with the same shape, for pointwise networks (one row per query point).
POINTWISE_BLOCKS = ((128, 128, 64), (64, 64, 32), (64,))


# Rows per forward pass at prediction: 4096 keep the activations in cache (faster than 65536
# rows on one CPU thread: benchmarks/results/kernels.json). A CPU matrix product rounds the
# last (row count mod 8) rows of a pass with another kernel; 4096 divides 65536, the size before,
# so the same rows come last and every prediction keeps its bits (tests/test_speed.py).
PREDICT_CHUNK = 4096
# On a GPU a pass is one kernel launch per layer whatever its rows: few large passes keep it busy
# (a GPU rounds differently from a CPU anyway, so its pass size changes no CPU number).
GPU_PREDICT_CHUNK = 1 << 18


class SlicedRows(Protocol):
    """Rows a pass at a time: an array, or rows made when a pass asks for them
    (``operators.extension.LooGridRows``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, sl: slice, /) -> np.ndarray: ...


def predict_rows(net, rows: SlicedRows, device: torch.device | str = "cpu", chunk: int | None = None) -> torch.Tensor:
    """``net`` (any callable on a batch of rows) on feature ``rows`` (n, d; an array or any
    :class:`SlicedRows`) without gradients,
    ``chunk`` rows at a time (default :data:`PREDICT_CHUNK` on a CPU, :data:`GPU_PREDICT_CHUNK`
    elsewhere) moved to ``device`` (the network's); the outputs (n, out) come back on the CPU.
    On a CPU the chunks run in lanes (``taskextrap.lanes``): each chunk is the same pass
    whichever lane runs it, so the outputs keep their bits; and at one torch thread each pass
    flushes subnormal numbers to zero (``operators.jobs.subnormals_flushed``): a network trained
    thousands of steps carries subnormal weights, with which an x86 CPU multiplies many times
    slower (a ``paper``-trained depth-3 Psi_chain 15.5 times: benchmarks/predict_subnormals.py).
    An output moves only where a value below 1.2e-38 would have moved a float32 result (an output
    or activation that small itself); on that network every bit was kept
    (tests/operators/test_predict_rows.py checks the flush and the bits)."""
    on_cpu = torch.device(device).type == "cpu"
    chunk = chunk or (PREDICT_CHUNK if on_cpu else GPU_PREDICT_CHUNK)

    def one(i: int) -> torch.Tensor:
        with torch.no_grad(), subnormals_flushed(on_cpu):
            return net(torch.from_numpy(rows[i : i + chunk]).to(device))

    return torch.cat(map_lanes(one, range(0, len(rows), chunk), device)).cpu()


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers with ReLU between them and a linear output."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def block_mlp(d_in: int, d_out: int, seed: int, blocks=PARAMETER_BLOCKS) -> nn.Sequential:
    """Chain of MLP blocks; the last block ends in ``d_out`` outputs. Initialised from ``seed`` on
    the CPU (the same weights whatever device the network is moved to afterwards)."""
    with torch.random.fork_rng(devices=[]), torch.device("cpu"):
        torch.manual_seed(seed % 2**31)
        return _blocks(d_in, d_out, blocks)


def _blocks(d_in: int, d_out: int, blocks) -> nn.Sequential:
    sizes_in, modules = d_in, []
    for i, block in enumerate(blocks):
        sizes = [sizes_in, *block] + ([d_out] if i == len(blocks) - 1 else [])
        modules.append(mlp(sizes))
        sizes_in = sizes[-1]
    return nn.Sequential(*modules)


def network_state(net: nn.Module, history: list[float], prefix: str) -> dict[str, np.ndarray]:
    """A trained network's weights and loss history as named arrays under ``prefix``."""
    arrays = {f"{prefix}.net.{k}": v.detach().cpu().numpy() for k, v in net.state_dict().items()}
    return arrays | {f"{prefix}.history": np.asarray(history, dtype=np.float64)}


def load_network_state(net: nn.Module, arrays: dict, prefix: str, device) -> list[float]:
    """Load :func:`network_state`'s weights into ``net`` (same shape; evaluation mode); returns
    the loss history."""
    weights = {
        k.removeprefix(f"{prefix}.net."): torch.from_numpy(v.copy()).to(device)
        for k, v in arrays.items()
        if k.startswith(f"{prefix}.net.")
    }
    net.load_state_dict(weights)
    net.eval()
    return arrays[f"{prefix}.history"].tolist()


class Unrolled(nn.Module):
    """Rows [s_0, the curve of each slot innermost first (depth x R), the context (maybe none)]
    -> the depth states; every step reads [state, its slot's curve, the context]."""

    def __init__(self, step: nn.Module, depth: int, points: int):
        super().__init__()
        self.step, self.depth, self.points = step, depth, points

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        r, d = self.points, self.depth
        s, ctx, states = rows[:, :1], rows[:, 1 + d * r :], []
        for i in range(d):
            s = self.step(torch.cat([s, rows[:, 1 + i * r : 1 + (i + 1) * r], ctx], dim=1))
            states.append(s)
        return torch.cat(states, dim=1)
