"""The decomposer g (paper Appendix G.2): a sorted context -> the latent parts of the target.

The context is sorted by x (the sorting trick, so g is invariant to point order), scaled, and
passed through an MLP [2k, 256, 128, 64] with one linear head per part (for example the
predecessor's proxy embedding and the new coefficient, or the outer and inner constituents'
embeddings). Trained by MSE against the parts' true values on training relations only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from taskextrap import audit
from taskextrap.operators.mlp import mlp
from taskextrap.operators.param import sort_context
from taskextrap.operators.train import TrainConfig, train_regressor
from taskextrap.scaling import FamilyScaler

DECOMPOSER_HIDDEN = (256, 128, 64)


class Decomposer:
    """g(context) -> parts; ``part_dims`` gives each head's width, e.g. (16, 1)."""

    def __init__(self, scaler: FamilyScaler, n_context: int, part_dims: tuple[int, ...], seed: int, cfg: TrainConfig):
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):  # initialised on the CPU (:meth:`to` moves it)
            torch.manual_seed(seed % 2**31)
            self.net = nn.Sequential(
                mlp([2 * n_context, *DECOMPOSER_HIDDEN]), nn.ReLU(), nn.Linear(DECOMPOSER_HIDDEN[-1], sum(part_dims))
            )
        self.scaler, self.part_dims, self.cfg = scaler, tuple(part_dims), cfg
        self.history: list[float] = []
        self.device = torch.device("cpu")

    def to(self, device) -> Decomposer:
        """Run the network on ``device``; returns self."""
        self.device = torch.device(device)
        self.net.to(self.device)
        return self

    def inputs(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> torch.Tensor:
        """Sorted, scaled context rows (n, 2k)."""
        sx, sy = sort_context(ctx_x, ctx_y)
        rows = np.concatenate([self.scaler.x(sx), self.scaler.y(sy)], axis=1).astype(np.float32)
        return torch.from_numpy(rows).to(self.device)

    def fit(
        self,
        make_arrays: Callable[[np.random.Generator], tuple],
        val_arrays: tuple,
        rng: np.random.Generator,
        progress=None,
    ) -> Decomposer:
        """Train on (ctx_x, ctx_y, parts (n, sum(part_dims))) from ``make_arrays(rng)``; one call per batch.

        Every batch and ``val_arrays`` are reported to the leak audit (``audit.consume``) as they
        become the tensors the optimiser and the model selection see.
        """

        def to_tensors(a, stage):
            ctx_x, ctx_y, parts = audit.consume("decomposer", a, stage)
            return self.inputs(ctx_x, ctx_y), torch.from_numpy(np.asarray(parts, dtype=np.float32)).to(self.device)

        self.net.train()
        self.history = train_regressor(
            self.net,
            lambda _s: to_tensors(make_arrays(rng), "train"),
            to_tensors(val_arrays, "val"),
            self.cfg,
            progress,
        )
        self.net.eval()
        return self

    def predict(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> list[np.ndarray]:
        """The predicted parts, one (n, dim) array per head."""
        with torch.no_grad():
            out = self.net(self.inputs(ctx_x, ctx_y)).cpu().numpy().astype(float)
        return np.split(out, np.cumsum(self.part_dims)[:-1], axis=1)
