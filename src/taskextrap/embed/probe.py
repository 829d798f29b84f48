"""The universal probe: a small MLP [1, h, h, 1] written functionally so torch.func can batch it."""

from __future__ import annotations

import math

import torch

Params = dict[str, torch.Tensor]


def init_probe(width: int, generator: torch.Generator, xavier: bool = True) -> Params:
    """Parameters of a [1, width, width, 1] ReLU MLP (Xavier-uniform or PyTorch-default init)."""

    def weight(fan_out, fan_in):
        bound = math.sqrt(6.0 / (fan_in + fan_out)) if xavier else 1.0 / math.sqrt(fan_in)
        return (torch.rand(fan_out, fan_in, generator=generator, device="cpu") * 2 - 1) * bound

    def bias(fan_out, fan_in):
        if xavier:
            return torch.zeros(fan_out, device="cpu")
        return (torch.rand(fan_out, generator=generator, device="cpu") * 2 - 1) / math.sqrt(fan_in)

    return {
        "w1": weight(width, 1),
        "b1": bias(width, 1),
        "w2": weight(width, width),
        "b2": bias(width, width),
        "w3": weight(1, width),
        "b3": bias(1, width),
    }


def probe_forward(p: Params, x: torch.Tensor) -> torch.Tensor:
    """Probe outputs at inputs ``x`` of shape (k,) -> (k,)."""
    h = torch.relu(x[:, None] @ p["w1"].T + p["b1"])
    h = torch.relu(h @ p["w2"].T + p["b2"])
    return (h @ p["w3"].T + p["b3"])[:, 0]


def probe_loss(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the probe on one task's points."""
    return ((probe_forward(p, x) - y) ** 2).mean()


def flatten(p: Params) -> torch.Tensor:
    """Concatenate a (possibly batched) parameter dict along its last axes -> (..., n_params)."""
    lead = next(iter(p.values())).shape[:-2] if p["w1"].dim() > 2 else ()
    return torch.cat([v.reshape(*lead, -1) for v in p.values()], dim=-1)
