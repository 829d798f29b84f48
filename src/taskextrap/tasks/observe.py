"""Observation protocols: how a task's context and query points are drawn.

``paper``: 16 inputs uniform on the domain, the first 8 are context and the last 8 queries,
interleaved over the same interval (the authors' convention; it rewards interpolation).
``strict``: a few noisy context points in the first part of the domain, queries in the rest,
so interpolation cannot reach the queries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.taskset import TaskSet
from taskextrap.validation import check_int, check_range, check_real, check_rng, check_str


@dataclass(frozen=True)
class Observations:
    """Context and query draws of some tasks, flattened task-major (draw j of task i at i*d + j).

    ``task`` indexes the TaskSet the draws came from; ``params`` is the truth, used only by the
    leak audit, the oracles and the metrics.

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
        >>> tasks = TaskSet.sample(PARAMETER_FAMILIES["exp"], {"F2": 2}, np.random.default_rng(0))
        >>> obs = get_protocol("paper").draw(tasks, 2, np.random.default_rng(1))
        >>> obs.task.tolist()  # draw j of task i is row i * 2 + j
        [0, 0, 1, 1]
    """

    task: np.ndarray
    params: np.ndarray
    ctx_x: np.ndarray
    ctx_y: np.ndarray
    qry_x: np.ndarray
    qry_y: np.ndarray

    def __len__(self) -> int:
        return len(self.task)

    def subset(self, index) -> Observations:
        """The draws at ``index``."""
        return Observations(*(getattr(self, f)[index] for f in ("task", "params", "ctx_x", "ctx_y", "qry_x", "qry_y")))


@dataclass(frozen=True)
class ObservationProtocol:
    """Where context and query inputs fall and how noisy the context is.

    Args:
        name: recorded in results ("paper" or "strict", or a user's own).
        n_context: context points per draw.
        n_query: query points per draw.
        context_span: fraction (lo, hi) of the domain the context points are drawn from.
        query_span: fraction (lo, hi) of the domain the query points are drawn from.
        noise: context noise standard deviation as a fraction of the family's output range
            (measured on training-region tasks only).

    Examples:
        >>> import numpy as np
        >>> from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
        >>> tasks = TaskSet.sample(PARAMETER_FAMILIES["cubic"], {"F2": 2}, np.random.default_rng(0))
        >>> from taskextrap.tasks.observe import noise_scale
        >>> strict = get_protocol("strict")  # noisy contexts inside the training range
        >>> obs = strict.draw(tasks, 3, np.random.default_rng(1), noise_scale(PARAMETER_FAMILIES["cubic"]))
        >>> obs.ctx_x.shape, obs.qry_x.shape  # 3 draws per task: 5 context points, 8 queries each
        ((6, 5), (6, 8))
    """

    name: str
    n_context: int
    n_query: int
    context_span: tuple[float, float] = (0.0, 1.0)
    query_span: tuple[float, float] = (0.0, 1.0)
    noise: float = 0.0

    def __post_init__(self):
        check_str("protocol name", self.name)
        check_int("n_context", self.n_context, 2)
        check_int("n_query", self.n_query, 1)
        for name, span in (("context_span", self.context_span), ("query_span", self.query_span)):
            lo, hi = check_range(name, span)
            if not 0.0 <= lo < hi <= 1.0:
                raise TaskextrapError(f"{name} must be fractions 0 <= lo < hi <= 1 of the domain, got {span}")
        check_real("protocol noise", self.noise, 0.0)

    def _uniform(self, family, span, shape, rng):
        lo, hi = family.domain
        a, b = lo + span[0] * (hi - lo), lo + span[1] * (hi - lo)
        return rng.uniform(a, b, size=shape)

    def draw(
        self, tasks: TaskSet, n_draws: int, rng: np.random.Generator, noise_scale: float | None = None
    ) -> Observations:
        """``n_draws`` independent context/query draws of every task in ``tasks``.

        ``noise_scale`` is the family's output range; it is required when ``noise > 0``.

        Returns:
            An :class:`Observations`: ``n_draws`` context and query draws per task,
                task-major.
        """
        if not all(hasattr(tasks, a) for a in ("family", "params", "__len__")):
            raise TaskextrapError(
                f"tasks must be a task set (TaskSet, LadderSet, CompositionSet), got {type(tasks).__name__}"
            )
        check_int("n_draws", n_draws, 1)
        check_rng("rng", rng)
        if noise_scale is not None:
            check_real("noise_scale", noise_scale, 0.0)
        n = len(tasks) * n_draws
        task = np.repeat(np.arange(len(tasks)), n_draws)
        params = tasks.params[task]
        ctx_x = self._uniform(tasks.family, self.context_span, (n, self.n_context), rng)
        qry_x = self._uniform(tasks.family, self.query_span, (n, self.n_query), rng)
        ctx_y = tasks.family(params, ctx_x)
        if self.noise > 0:
            if noise_scale is None:
                raise TaskextrapError(f"protocol {self.name!r} adds noise and needs the family's output range")
            ctx_y = ctx_y + rng.normal(0.0, self.noise * noise_scale, size=ctx_y.shape)
        qry_y = tasks.family(params, qry_x)
        return Observations(task, params, ctx_x, ctx_y, qry_x, qry_y)


PROTOCOLS = {
    # 16 uniform points, 8 context + 8 queries, interleaved (the authors' convention).
    "paper": ObservationProtocol("paper", n_context=8, n_query=8),
    # 5 noisy context points in the first half, queries in the second half.
    "strict": ObservationProtocol(
        "strict", n_context=5, n_query=8, context_span=(0.0, 0.5), query_span=(0.5, 1.0), noise=0.02
    ),
}


def noise_scale(family) -> float:
    """The family's output range used to scale protocol noise: training-region tasks, fixed stream."""
    from taskextrap.seeding import rng

    return family.output_range(rng(0, family.name, "output-range"))
