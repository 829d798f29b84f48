"""Many same-architecture networks trained as one stacked model (the GPU path of
``operators.train.train_jobs``).

Networks of one architecture (the same Linear / ReLU sequence and widths; only the first layer's
input width may differ) become one model whose every weight has a leading network axis: a
Linear layer is one ``torch.baddbmm`` over all networks, inputs are zero-padded to the widest
network's width, and the padded input weights start at 0 and stay exactly 0 (their gradient is
0, and so is Adam's step). One Adam (``foreach``) steps every network: Adam is elementwise, so
this is each network's own Adam with its own moments (:class:`StackedAdam`, whose step
reads nothing back from the device). Each network's loss is its own mean
squared error, summed over networks (their parameters are disjoint, so each gradient is its
network's own).

Nothing in the step loop waits for the host: the learning rates are computed before the loop,
each network's loss history stays on the device, and model selection keeps the best weights with
``torch.where`` on the device at every validation step. The history is read once at the end, or
once per validation interval when a progress callback wants it. On a GPU the step is captured
in a CUDA graph after a few eager warm-up steps (fallback: eager steps, with one warning).

A stacked step rounds differently from separate steps (a batched product against single ones):
the same numbers within float tolerance, not the same bits. That is why a CPU trains networks one
after another (``train_jobs``), which also measured faster there (measured: 99 against 59 ms a
step on one thread).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from taskextrap.operators.streams import DEVICE_LOCK, RowStream
from taskextrap.operators.jobs import Job, TrainConfig, train_alone
from taskextrap.operators.mlp import Unrolled

WARMUP_STEPS = 3  # eager steps before a CUDA graph is captured (Adam's state must exist first)
GRAPHS = True  # capture the step in a CUDA graph on a GPU (False: eager steps everywhere)


def layers(net: nn.Module) -> list[nn.Module] | None:
    """The network's leaves in order when it is a chain of Linear and ReLU layers (nested
    ``nn.Sequential`` blocks flattened), else None (it cannot be stacked)."""
    if isinstance(net, (nn.Linear, nn.ReLU)):
        return [net]
    if not isinstance(net, nn.Sequential):
        return None
    out: list[nn.Module] = []
    for child in net:
        sub = layers(child)
        if sub is None:
            return None
        out += sub
    return out if out and isinstance(out[0], nn.Linear) else None


def input_width(net: nn.Module) -> int:
    """The input width of a stackable network (its first Linear layer's; an unrolled network's
    rows: the start, every slot's curve and the context)."""
    if isinstance(net, Unrolled):
        return 1 + net.depth * net.points + (input_width(net.step) - 1 - net.points)
    leaves = layers(net)
    if not leaves or not isinstance(leaves[0], nn.Linear):
        raise ValueError("not a chain of Linear and ReLU layers")
    return leaves[0].in_features


def architecture(net: nn.Module) -> tuple | None:
    """What must agree for networks to stack: each layer's kind and widths, the first layer's
    input width excepted (it is padded); an unrolled network's depth, points and exact widths
    (its rows are sliced by position, so they cannot be padded). None when ``net`` cannot be stacked."""
    if isinstance(net, Unrolled):
        step = architecture(net.step)
        return None if step is None else ("unrolled", net.depth, net.points, input_width(net.step), step)
    leaves = layers(net)
    if leaves is None:
        return None
    return tuple(
        ("relu",) if isinstance(m, nn.ReLU) else ("linear", m.out_features, None if i == 0 else m.in_features)
        for i, m in enumerate(leaves)
    )


def learning_rates(cfg: TrainConfig) -> list[float]:
    """The learning rate of every step, as ``train_regressor``'s cosine schedule sets it (the
    same scheduler run once on a stand-in parameter), so a loop never computes one on the device."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.steps, 1), eta_min=cfg.lr * 0.05)
    out = []
    for _ in range(cfg.steps):
        out.append(float(opt.param_groups[0]["lr"]))
        opt.step()  # a no-op (no gradient), so the scheduler steps after an optimiser step as it expects
        sched.step()
    return out


class StackedMLP:
    """The Linear / ReLU chains of ``nets`` (one :func:`architecture`) as one model over a
    network axis: weights (N, in, out) and biases (N, 1, out), as ``baddbmm`` takes them (no
    transpose in the step), the first layer's input padded to ``width`` with zero weights.
    ``model(x)`` maps (N, rows, width) to (N, rows, out)."""

    def __init__(self, nets: Sequence[nn.Module], width: int):
        chains = [layers(n) for n in nets]
        if any(c is None for c in chains):
            raise ValueError("every network must be a chain of Linear and ReLU layers")
        first = chains[0] or []
        self.width = width
        self.kinds = ["relu" if isinstance(m, nn.ReLU) else "linear" for m in first]
        # each Linear layer of the chain, as the list of that layer in every network
        self.linears: list[list[nn.Linear]] = [
            [cast(nn.Linear, (c or [])[i]) for c in chains] for i, k in enumerate(self.kinds) if k == "linear"
        ]
        self.params: list[torch.Tensor] = []
        with torch.no_grad():  # stored as x @ W + b wants them: (N, in, out) and (N, 1, out)
            for j, lins in enumerate(self.linears):
                w = torch.stack([self._padded(lin.weight, j).T for lin in lins])
                b = torch.stack([lin.bias[None] for lin in lins])
                self.params += [w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()]

    def _padded(self, weight: torch.Tensor, i: int) -> torch.Tensor:
        if i > 0 or weight.shape[1] == self.width:
            return weight
        return nn.functional.pad(weight, (0, self.width - weight.shape[1]))

    def __call__(self, x: torch.Tensor, params: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        p = iter(self.params if params is None else params)
        for kind in self.kinds:
            if kind == "linear":
                w, b = next(p), next(p)
                x = torch.baddbmm(b, x, w)
            else:
                x = torch.relu(x)
        return x

    def write_back(self, params: Sequence[torch.Tensor] | None = None) -> None:
        """Copy the stacked weights (``params``, default the live ones) into the separate networks."""
        p = iter(self.params if params is None else params)
        with torch.no_grad():
            for lins in self.linears:
                w, b = next(p), next(p)
                for n, lin in enumerate(lins):
                    lin.weight.copy_(w[n, : lin.in_features].T)
                    lin.bias.copy_(b[n, 0])


class StackedUnrolled:
    """Unrolled networks (``operators.mlp.Unrolled``: one step network applied ``depth``
    times) of one architecture as one model: their step networks stacked, applied to the rows
    (N, rows, width) as each network applies its own, every state kept (N, rows, depth)."""

    def __init__(self, nets: Sequence[nn.Module], width: int):
        first = cast(Unrolled, nets[0])
        self.depth, self.points = first.depth, first.points
        self.step = StackedMLP([cast(Unrolled, n).step for n in nets], input_width(first.step))
        self.params = self.step.params

    def __call__(self, x: torch.Tensor, params: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        r, d = self.points, self.depth
        s, ctx, states = x[..., :1], x[..., 1 + d * r :], []
        for i in range(d):
            s = self.step(torch.cat([s, x[..., 1 + i * r : 1 + (i + 1) * r], ctx], dim=-1), params)
            states.append(s)
        return torch.cat(states, dim=-1)

    def write_back(self, params: Sequence[torch.Tensor] | None = None) -> None:
        """Copy the stacked step weights into each network's step network."""
        self.step.write_back(params)


def stacked_model(nets: Sequence[nn.Module], width: int) -> StackedMLP | StackedUnrolled:
    """The stacked model of ``nets`` (one :func:`architecture`), inputs ``width`` wide."""
    return StackedUnrolled(nets, width) if isinstance(nets[0], Unrolled) else StackedMLP(nets, width)


class StackedAdam:
    """Adam with L2 weight decay (``torch.optim.Adam``'s arithmetic, foreach form) over the
    stacked tensors, every scalar of a step kept in a device tensor: a step reads nothing from
    the device (``torch.optim.Adam`` keeps its step count in a tensor and reads it back unless
    ``capturable``, which a CPU does not offer), and a CUDA graph of the step replays with the
    step's learning rate and bias corrections filled in before each replay."""

    def __init__(self, params: list[torch.Tensor], weight_decay: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.weight_decay, self.betas, self.eps = params, weight_decay, betas, eps
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        device = params[0].device
        self.neg_step_size = torch.zeros((), device=device)  # -lr / (1 - beta1^t)
        self.inv_bc2_sqrt = torch.zeros((), device=device)  # 1 / sqrt(1 - beta2^t)

    def set_step(self, t: int, lr: float) -> None:
        """The scalars of step ``t`` (from 1) at learning rate ``lr``: host arithmetic, filled in."""
        b1, b2 = self.betas
        self.neg_step_size.fill_(-lr / (1 - b1**t))
        self.inv_bc2_sqrt.fill_(1 / math.sqrt(1 - b2**t))

    @torch.no_grad()
    def step(self) -> None:
        """One update from the parameters' gradients (:meth:`set_step` first)."""
        b1, b2 = self.betas
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        if self.weight_decay:
            grads = list(torch._foreach_add(grads, self.params, alpha=self.weight_decay))
        torch._foreach_lerp_(self.m, grads, 1 - b1)
        torch._foreach_mul_(self.v, b2)
        torch._foreach_addcmul_(self.v, grads, grads, 1 - b2)
        denom = torch._foreach_sqrt(self.v)
        torch._foreach_mul_(denom, self.inv_bc2_sqrt)
        torch._foreach_add_(denom, self.eps)
        update = torch._foreach_div(self.m, denom)
        torch._foreach_mul_(update, self.neg_step_size)
        torch._foreach_add_(self.params, update)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


@dataclass
class _Val:
    """Validation rows of a group: inputs (N, rows, width), targets (N, rows, out) and weights
    (N, rows, 1) that make each network's weighted sum its own mean squared error."""

    x: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor


def _stack_rows(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], width: int) -> _Val:
    """(inputs, targets) of each network, padded to ``width`` columns and to the longest row
    count, with the weights that average each network over its own rows and outputs."""
    rows = max(len(x) for x, _ in pairs)
    xs, ys, ws = [], [], []
    for x, y in pairs:
        pad_rows = rows - len(x)
        xs.append(nn.functional.pad(x, (0, width - x.shape[1], 0, pad_rows)))
        ys.append(nn.functional.pad(y, (0, 0, 0, pad_rows)))
        w = torch.full((rows, 1), 1.0 / (len(x) * y.shape[1]), dtype=y.dtype, device=y.device)
        w[len(x) :] = 0.0
        ws.append(w)
    return _Val(torch.stack(xs), torch.stack(ys), torch.stack(ws))


class _Group:
    """The networks of one architecture and one ``TrainConfig``, trained together."""

    def __init__(self, jobs: Sequence[Job]):
        self.jobs = list(jobs)
        self.cfg = jobs[0].cfg
        self.device = jobs[0].device
        self.width = max(input_width(j.net) for j in jobs)
        for j in self.jobs:  # a stream pads its passes once; other callables are padded per step
            if isinstance(j.batches, RowStream):
                j.batches.pad_to(self.width)
        self.model = stacked_model([j.net for j in jobs], self.width)
        self.graphed = GRAPHS and self.device.type == "cuda"
        self.opt = StackedAdam(self.model.params, self.cfg.weight_decay)
        self.lrs = learning_rates(self.cfg)
        n = len(jobs)
        self.history = torch.zeros(self.cfg.steps, n, device=self.device)
        self.full_w: torch.Tensor | None = None  # the weights of full batches, made at the first step
        vals = [j.val for j in jobs if j.val is not None]
        self.val = _stack_rows(vals, self.width) if len(vals) == len(jobs) else None
        self.best = torch.full((n,), float("inf"), device=self.device)
        self.best_params = [p.detach().clone() for p in self.model.params] if self.val is not None else []
        self.reported = 0  # steps whose losses the progress callbacks have had
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: tuple[torch.Tensor, ...] = ()

    @property
    def steps(self) -> int:
        return self.cfg.steps

    def _batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The step's (inputs (N, rows, width), targets (N, rows, out), weights) of every network:
        a stack of full batches, or rows padded per network when one is short of a full batch
        (its weights then average each network over its own rows)."""
        pairs = [j.batches(step) for j in self.jobs]
        if any(len(x) != self.cfg.batch for x, _ in pairs):
            v = _stack_rows(pairs, self.width)
            return v.x, v.y, v.w
        xs = [x if x.shape[1] == self.width else nn.functional.pad(x, (0, self.width - x.shape[1])) for x, _ in pairs]
        x, y = torch.stack(xs), torch.stack([y for _, y in pairs])
        if self.full_w is None:
            self.full_w = torch.full((len(self.jobs), 1, 1), 1.0 / (self.cfg.batch * y.shape[2]), device=self.device)
        return x, y, self.full_w

    def _loss(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """Each network's mean squared error (N,)."""
        d = self.model(x) - y
        return (d * d * w).sum(dim=(1, 2))

    def _eager_step(self, x, y, w) -> torch.Tensor:
        per = self._loss(x, y, w)
        self.opt.zero_grad()
        per.sum().backward()
        self.opt.step()
        return per.detach()

    def step(self, step: int) -> None:
        """One training step of every network of the group (no host sync)."""
        self.opt.set_step(step + 1, self.lrs[step])
        x, y, w = self._batch(step)
        if self.graphed and step >= WARMUP_STEPS and x.shape[1] == self.cfg.batch:
            per = self._graph_step(x, y)
        else:
            per = self._eager_step(x, y, w)
        self.history[step] = per
        last = step + 1 == self.cfg.steps
        if (step + 1) % self.cfg.eval_every == 0 or last:
            if self.val is not None:
                self._select()
            self._report(step + 1)

    def _select(self) -> None:
        """Keep each network's weights where its validation loss is the lowest so far (on the device)."""
        assert self.val is not None
        with torch.no_grad():
            d = self.model(self.val.x) - self.val.y
            v = (d * d * self.val.w).sum(dim=(1, 2))
            better = v < self.best
            self.best.copy_(torch.where(better, v, self.best))
            for bp, p in zip(self.best_params, self.model.params, strict=True):
                bp.copy_(torch.where(better.view(-1, *([1] * (p.dim() - 1))), p, bp))

    def _report(self, upto: int) -> None:
        """The progress callbacks get every step's loss since the last report (one read of the
        history per validation interval, and none when nobody listens)."""
        if not any(j.progress is not None for j in self.jobs):
            return
        losses = self.history[self.reported : upto].tolist()
        for i, job in enumerate(self.jobs):
            if job.progress is not None:
                for s, row in enumerate(losses, start=self.reported):
                    job.progress(s, row[i])
        self.reported = upto

    def finish(self) -> None:
        """Every network gets its best-validation weights (its last ones when no validation
        step improved on infinity) and its loss history."""
        if self.val is not None:
            with torch.no_grad():
                found = torch.isfinite(self.best)  # some validation loss was kept
                chosen = [
                    torch.where(found.view(-1, *([1] * (p.dim() - 1))), bp, p)
                    for bp, p in zip(self.best_params, self.model.params, strict=True)
                ]
            self.model.write_back(chosen)
        else:
            self.model.write_back()
        history = self.history.T.tolist()
        for job, h in zip(self.jobs, history, strict=True):
            job.history = h

    # ------------------------------------------------------------------------- CUDA graphs
    def _graph_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The step replayed from a CUDA graph (captured on first use; eager steps if capture fails)."""
        if self.graph is None:
            try:
                self._capture(x, y)
            except Exception as e:  # noqa: BLE001 - any capture failure falls back to eager steps
                warnings.warn(f"CUDA graph capture failed ({e}); training with eager steps", stacklevel=2)
                self.graphed = False
                assert self.full_w is not None
                return self._eager_step(x, y, self.full_w)
        sx, sy, loss = self.static
        sx.copy_(x)
        sy.copy_(y)
        assert self.graph is not None
        self.graph.replay()
        return loss

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Record forward, backward and the optimiser step on static inputs (after the eager
        warm-up steps made Adam's state, so the graph replays a steady step)."""
        assert self.full_w is not None
        sx, sy = x.clone(), y.clone()
        self.opt.zero_grad()  # the graph allocates the gradients it writes
        graph = torch.cuda.CUDAGraph()
        # captured on torch's side stream; nothing runs yet. No row stream's producer touches the
        # device meanwhile (DEVICE_LOCK), and work of other threads does not void the capture.
        with DEVICE_LOCK, torch.cuda.graph(graph, capture_error_mode="thread_local"):
            per = self._loss(sx, sy, self.full_w)
            per.sum().backward()
            self.opt.step()
            loss = per.detach()
        self.graph, self.static = graph, (sx, sy, loss)


def stack(jobs: Sequence[Job]) -> tuple[list[_Group], list[Job]]:
    """The stacked groups of ``jobs`` (one per architecture, ``TrainConfig``, device and
    validation presence) and the jobs that cannot be stacked (they train alone)."""
    groups: dict[tuple, list[Job]] = {}
    alone = []
    for job in jobs:
        arch = architecture(job.net)
        if arch is None or job.loss is not None:  # the stacked step minimises the MSE only
            alone.append(job)
        else:
            groups.setdefault((arch, job.cfg, str(job.device), job.val is None), []).append(job)
    return [_Group(g) for g in groups.values()], alone


def step_groups(groups: Sequence[_Group], steps: range) -> None:
    """The groups' ``steps``, side by side: every group steps once per step it has."""
    for step in steps:
        for g in groups:
            if step < g.steps:
                g.step(step)


def train_stacked(jobs: Sequence[Job]) -> None:
    """Train ``jobs``: stacked groups (:func:`stack`) stepping side by side; a network that
    cannot be stacked trains alone (``jobs.train_alone``, as on a CPU)."""
    groups, alone = stack(jobs)
    for job in alone:
        train_alone(job)
    step_groups(groups, range(max((g.steps for g in groups), default=0)))
    for g in groups:
        g.finish()
