"""The pointwise network every relational operator is: a block MLP from one feature row per
query point to its output, with the plumbing they share (training as a job on streamed rows,
the leak audit's view of each batch, device placement, saving, batched prediction).

Each operator (``operators.parameter``'s Psi and inductive regressors, ``operators.extension``,
``operators.composition``, ``operators.chain``) defines its features and ``fit_job``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Self

import numpy as np
import torch

from taskextrap import audit
from taskextrap.operators.mlp import (
    PARAMETER_BLOCKS,
    SlicedRows,
    block_mlp,
    load_network_state,
    network_state,
    predict_rows,
)
from taskextrap.operators.streams import Rows, RowStream, as_tensor, column
from taskextrap.operators.jobs import Job, TrainConfig
from taskextrap.operators.train import train_jobs


class PointwiseNet:
    """Shared fit/predict plumbing: a block MLP from feature rows to one output per row."""

    component = "psi"  # the name this network reports to the leak audit

    def __init__(self, n_features: int, seed: int, cfg: TrainConfig, blocks=PARAMETER_BLOCKS):
        self.net: torch.nn.Module = block_mlp(n_features, 1, seed, blocks)  # ChainOperator unrolls it
        self.device = torch.device("cpu")  # where the network runs (:meth:`to`): rows are moved there
        self.cfg = cfg
        self.history: list[float] = []

    def to(self, device) -> Self:
        """Run the network on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``); returns self."""
        self.device = torch.device(device)
        self.net.to(self.device)
        return self

    def fit(self, *args, **kwargs) -> Self:
        """Train the network alone: :meth:`fit_job`'s job, run (its arguments are ``fit_job``'s)."""
        train_jobs([self.fit_job(*args, **kwargs)])
        return self

    def fit_job(self, *args, **kwargs) -> Job:  # pragma: no cover - every network defines it
        """The network's training as a job, to run alone (:meth:`fit`) or beside other networks
        (``operators.train.train_jobs``)."""
        raise NotImplementedError

    def _batch_job(
        self,
        make_batch: Callable[[np.random.Generator], tuple],
        val_batch: tuple | None,
        to_rows: Callable[[tuple], Rows],
        rng: np.random.Generator,
        progress=None,
    ) -> Job:
        """The training job on rows of batches from ``make_batch(rng)`` (a fresh one whenever a
        pass is used up), selecting on ``val_batch``; every batch is reported to the leak audit
        (``audit.consume``) as it is turned into the rows the optimiser or the model selection sees."""

        def rows(batch, stage):
            return to_rows(audit.consume(self.component, batch, stage))

        return self._job(
            lambda r: rows(make_batch(r), "train"), None if val_batch is None else rows(val_batch, "val"), rng, progress
        )

    def _job(
        self,
        make_rows: Callable[[np.random.Generator], Rows],
        val_rows: Rows | None,
        rng: np.random.Generator,
        progress=None,
    ) -> Job:
        """The training job on rows from ``make_rows`` (called again for a fresh pass when one is
        used up; ``operators.streams.RowStream``, whose batches hold whole tasks of
        :meth:`_rows_per_task` rows);
        targets are (rows,) or (rows, outputs). Train it alone (``train_jobs([job])``) or beside
        other networks (``operators.train.train_jobs``)."""
        val = None
        if val_rows is not None:
            val = (as_tensor(val_rows[0], self.device), as_tensor(column(val_rows[1]), self.device))
        self.net.train()
        group = self._rows_per_task()
        stream = RowStream(make_rows, rng, self.cfg.batch, self.cfg.steps, self.device, group=group)
        name = "Psi" if self.component == "psi" else self.component
        return Job(self.net, stream, val, self.cfg, progress, name, done=self._trained)

    def _rows_per_task(self) -> int:
        """Rows a batch keeps together (a task's query rows, for a network that reads a batch as
        tasks); 1: rows are independent."""
        return 1

    def _trained(self, job: Job) -> None:
        self.history = job.history
        self.net.eval()

    def state(self, prefix: str) -> dict:
        """The trained network's weights and loss history as named arrays under ``prefix``."""
        return network_state(self.net, self.history, prefix)

    def load_state(self, arrays: dict, prefix: str) -> None:
        """Weights and history from :meth:`state`'s arrays, into this (same-shaped) network."""
        self.history = load_network_state(self.net, arrays, prefix, self.device)

    def _predict_rows(self, rows: SlicedRows, n: int) -> np.ndarray:
        return predict_rows(self.net, rows, self.device).numpy().astype(float).reshape(n, -1)
