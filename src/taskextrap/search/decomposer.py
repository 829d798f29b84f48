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
from taskextrap.operators.mlp import load_network_state, mlp, network_state
from taskextrap.operators.parameter import sort_context
from taskextrap.operators.streams import RowStream
from taskextrap.operators.jobs import Job, TrainConfig
from taskextrap.operators.train import train_jobs
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

    def state(self, prefix: str) -> dict:
        """The trained network's weights and loss history as named arrays under ``prefix``."""
        return network_state(self.net, self.history, prefix)

    def load_state(self, arrays: dict, prefix: str) -> None:
        """Weights and history from :meth:`state`'s arrays, into this (same-shaped) network."""
        self.history = load_network_state(self.net, arrays, prefix, self.device)

    def to(self, device) -> Decomposer:
        """Run the network on ``device``; returns self."""
        self.device = torch.device(device)
        self.net.to(self.device)
        return self

    def rows(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> np.ndarray:
        """Sorted, scaled context rows (n, 2k), float32."""
        sx, sy = sort_context(ctx_x, ctx_y)
        return np.concatenate([self.scaler.x(sx), self.scaler.y(sy)], axis=1).astype(np.float32)

    def inputs(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> torch.Tensor:
        """:meth:`rows` on the network's device."""
        return torch.from_numpy(self.rows(ctx_x, ctx_y)).to(self.device)

    def fit(
        self,
        make_arrays: Callable[[np.random.Generator], tuple],
        val_arrays: tuple,
        rng: np.random.Generator,
        progress=None,
    ) -> Decomposer:
        """Train alone: :meth:`fit_job`'s job, run."""
        train_jobs([self.fit_job(make_arrays, val_arrays, rng, progress)])
        return self

    def fit_job(
        self,
        make_arrays: Callable[[np.random.Generator], tuple],
        val_arrays: tuple,
        rng: np.random.Generator,
        progress=None,
    ) -> Job:
        """Training on (ctx_x, ctx_y, parts (n, sum(part_dims))) from ``make_arrays(rng)``, one
        call per step, selected on ``val_arrays``: a job to run alone or beside other networks
        (``operators.train.train_jobs``).

        Every batch and ``val_arrays`` are reported to the leak audit (``audit.consume``) as they
        become the rows the optimiser and the model selection see.
        """

        def to_rows(a, stage):
            ctx_x, ctx_y, parts = audit.consume("decomposer", a, stage)
            return self.rows(ctx_x, ctx_y), np.asarray(parts, dtype=np.float32)

        vx, vy = to_rows(val_arrays, "val")
        val = (torch.from_numpy(vx).to(self.device), torch.from_numpy(vy).to(self.device))
        stream = RowStream(lambda g: to_rows(make_arrays(g), "train"), rng, None, self.cfg.steps, self.device)
        self.net.train()
        return Job(self.net, stream, val, self.cfg, progress, "decomposer", done=self._trained)

    def _trained(self, job: Job) -> None:
        self.history = job.history
        self.net.eval()

    def predict(self, ctx_x: np.ndarray, ctx_y: np.ndarray) -> list[np.ndarray]:
        """The predicted parts, one (n, dim) array per head."""
        with torch.no_grad():
            out = self.net(self.inputs(ctx_x, ctx_y)).cpu().numpy().astype(float)
        return np.split(out, np.cumsum(self.part_dims)[:-1], axis=1)
