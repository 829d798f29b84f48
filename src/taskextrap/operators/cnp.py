"""The conditional neural process (Garnelo et al., 2018) of the ``cnp`` baseline: every context
pair (x, y) encoded by one MLP, the codes averaged into a task representation r (so the context
is read as a set), and a decoder from (r, x_query) to a predictive mean and sd, trained by the
Gaussian negative log-likelihood of the query values.

It reads the rows the inductive regressors read (``operators.parameter.InductiveRegressor``:
the query input, then the context's inputs and outputs, scaled), so it trains on exactly their
library draws through the project's own training loop (``operators.jobs``), on a CPU or a GPU.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from taskextrap.operators.jobs import Job
from taskextrap.operators.mlp import mlp, predict_rows
from taskextrap.operators.parameter import InductiveRegressor

SD_FLOOR = 1e-3  # the smallest predictive sd (scaled outputs): keeps the likelihood finite


class CNPNet(nn.Module):
    """Rows (B, 1 + 2k [+ extra, ignored]) -> (B, 2): the predictive mean and sd at the row's query."""

    def __init__(self, n_context: int, width: int, seed: int):
        super().__init__()
        self.k = n_context
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):
            torch.manual_seed(seed % 2**31)
            self.encoder = mlp([2, width, width, width])
            self.decoder = mlp([width + 1, width, width, 2])

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        k = self.k
        pairs = torch.stack([rows[:, 1 : 1 + k], rows[:, 1 + k : 1 + 2 * k]], dim=-1)  # (B, k, 2)
        r = self.encoder(pairs).mean(1)  # the mean of the codes: the order of the pairs cannot matter
        out = self.decoder(torch.cat([r, rows[:, :1]], dim=1))
        return torch.cat([out[:, :1], SD_FLOOR + nn.functional.softplus(out[:, 1:])], dim=1)


def gaussian_nll(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean Gaussian negative log-likelihood (without its constant) of targets ``y`` (B, 1)
    under the predictive (mean, sd) ``out`` (B, 2)."""
    mean, sd = out[:, :1], out[:, 1:]
    return (torch.log(sd) + 0.5 * ((y - mean) / sd) ** 2).mean()


class CNPRegressor(InductiveRegressor):
    """An :class:`InductiveRegressor` whose network is a :class:`CNPNet` trained by the Gaussian
    likelihood: the same rows, a predictive sd beside the mean."""

    def __init__(self, scaler, n_context: int, seed: int, cfg, width: int = 128, component: str = "cnp"):
        super().__init__(scaler, n_context, 0, seed, cfg, component=component)
        self.net = CNPNet(n_context, width, seed)

    def _job(self, make_rows, val_rows, rng, progress=None) -> Job:
        job = super()._job(make_rows, val_rows, rng, progress)
        job.loss = gaussian_nll
        return job

    def predict_with_sd(self, ctx_x, ctx_y, qry_x) -> tuple[np.ndarray, np.ndarray]:
        """The predictive mean and sd (n, q) for sorted contexts."""
        rows = self.features(ctx_x, ctx_y, qry_x, np.zeros((len(ctx_x), 0)))
        out = predict_rows(self.net, rows, self.device).numpy().astype(float)
        n = len(qry_x)
        return self.scaler.y_inv(out[:, 0].reshape(n, -1)), self.scaler.dy_inv(out[:, 1].reshape(n, -1))
