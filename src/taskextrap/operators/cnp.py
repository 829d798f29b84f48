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
from taskextrap.operators.mlp import PREDICT_CHUNK, mlp
from taskextrap.operators.parameter import InductiveRegressor

SD_FLOOR = 1e-3  # the smallest predictive sd (scaled outputs): keeps the likelihood finite


class CNPNet(nn.Module):
    """Rows (B, 1 + 2k [+ extra, ignored]) -> (B, 2): the predictive mean and sd at each row's query.

    The rows come in whole tasks: ``group`` consecutive rows share one context (the streams serve
    them so: ``operators.streams.RowStream``'s ``group``), and each task's context is encoded once,
    not once per query row, as a CNP reads a batch of tasks."""

    def __init__(self, n_context: int, width: int, seed: int):
        super().__init__()
        self.k = n_context
        self.group = 1  # rows per task in a batch (set by CNPRegressor from its training draws)
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):
            torch.manual_seed(seed % 2**31)
            self.encoder = mlp([2, width, width, width])
            self.decoder = mlp([width + 1, width, width, 2])

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        k, g = self.k, self.group
        if rows.shape[0] % g:
            raise ValueError(f"{rows.shape[0]} rows are not whole tasks of {g} rows")
        t = rows.reshape(-1, g, rows.shape[1])
        pairs = torch.stack([t[:, 0, 1 : 1 + k], t[:, 0, 1 + k : 1 + 2 * k]], dim=-1)  # (T, k, 2)
        return self.tasks(pairs, t[:, :, :1]).reshape(-1, 2)

    def tasks(self, pairs: torch.Tensor, qry_x: torch.Tensor) -> torch.Tensor:
        """Context pairs (T, k, 2) and queries (T, q, 1) -> the predictive (mean, sd) (T, q, 2)."""
        r = self.encoder(pairs).mean(1)  # the mean of the codes: the order of the pairs cannot matter
        out = self.decoder(torch.cat([r[:, None, :].expand(-1, qry_x.shape[1], -1), qry_x], dim=-1))
        return torch.cat([out[..., :1], SD_FLOOR + nn.functional.softplus(out[..., 1:])], dim=-1)


def gaussian_nll(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean Gaussian negative log-likelihood (without its constant) of targets ``y`` (B, 1)
    under the predictive (mean, sd) ``out`` (B, 2)."""
    mean, sd = out[:, :1], out[:, 1:]
    return (torch.log(sd) + 0.5 * ((y - mean) / sd) ** 2).mean()


class CNPRegressor(InductiveRegressor):
    """An :class:`InductiveRegressor` whose network is a :class:`CNPNet` trained by the Gaussian
    likelihood: the same rows, served a task at a time, and a predictive sd beside the mean."""

    def __init__(self, scaler, n_context: int, seed: int, cfg, width: int = 128, component: str = "cnp"):
        super().__init__(scaler, n_context, 0, seed, cfg, component=component)
        self.cnp = CNPNet(n_context, width, seed)
        self.net = self.cnp  # the network the shared plumbing trains, moves and saves

    def fit_job(self, train: tuple, val: tuple, rng, progress=None) -> Job:
        """:meth:`InductiveRegressor.fit_job`, served whole tasks (their queries per task)."""
        self.cnp.group = np.shape(val[2])[1]
        return super().fit_job(train, val, rng, progress)

    def fit_stream_job(self, make_arrays, val, rng, progress=None) -> Job:
        """:meth:`InductiveRegressor.fit_stream_job`, served whole tasks (their queries per task)."""
        self.cnp.group = np.shape(val[2])[1]
        return super().fit_stream_job(make_arrays, val, rng, progress)

    def _rows(self, batch: tuple):
        if np.shape(batch[2])[1] != self.cnp.group:
            raise ValueError(f"cnp draws must all have {self.cnp.group} queries, got {np.shape(batch[2])[1]}")
        return super()._rows(batch)

    def _rows_per_task(self) -> int:
        return self.cnp.group

    def _job(self, make_rows, val_rows, rng, progress=None) -> Job:
        job = super()._job(make_rows, val_rows, rng, progress)
        job.loss = gaussian_nll
        job.flush_subnormals = True  # its long training carries subnormals: 14x slower without
        return job

    def predict_with_sd(self, ctx_x, ctx_y, qry_x) -> tuple[np.ndarray, np.ndarray]:
        """The predictive mean and sd (n, q) of targets with contexts (n, k) and queries (n, q),
        each context encoded once (in any order: the CNP reads it as a set)."""
        s, chunk = self.scaler, max(1, PREDICT_CHUNK // max(1, np.shape(qry_x)[1]))
        pairs = np.stack([s.x(ctx_x), s.y(ctx_y)], axis=-1).astype(np.float32)
        qx = s.x(qry_x)[..., None].astype(np.float32)
        with torch.no_grad():
            out = torch.cat([
                self.cnp.tasks(torch.from_numpy(pairs[i : i + chunk]).to(self.device),
                               torch.from_numpy(qx[i : i + chunk]).to(self.device)).cpu()
                for i in range(0, len(pairs), chunk)
            ]).numpy().astype(float)  # fmt: skip
        return s.y_inv(out[..., 0]), s.dy_inv(out[..., 1])
