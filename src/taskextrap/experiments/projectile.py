"""Fig. 1: the cannon. Inductive (x, v, theta) -> y versus transductive (x, y_anchor(x), dv, dtheta) -> y.

Both MLPs are trained on trajectories with v in [30, 60] and theta in [40, 50] degrees (paper
Appendix E.1), then asked for the out-of-support target v = 65, theta = 45. The transductive model
anchors to the library trajectory nearest the target in (v, theta) and applies the shift.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch

from taskextrap.profiles import ProjectileProfile
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, UnitResult, gather, seed_units
from taskextrap.operators.mlp import mlp
from taskextrap.report.schema import make_row
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.builtin import PROJECTILE
from taskextrap.tasks.taskset import TaskSet

TARGET = np.array([[65.0, 45.0]])
# The dev split: train on v in [30, 55], extrapolate to v = 60 (inside the real training range).
DEV_SPEEDS, DEV_TARGET = (30.0, 55.0), np.array([[60.0, 45.0]])
PROFILES = {
    "quick": ProjectileProfile(name="quick", seeds=(0,), steps=3000),
    "paper": ProjectileProfile(name="paper", seeds=(0, 1, 2), steps=10000),
    "tiny": ProjectileProfile(name="tiny", seeds=(0,), steps=50),
}
X_SCALE, Y_SCALE = 450.0, 100.0


def landing(params: np.ndarray) -> np.ndarray:
    """Horizontal distance where each trajectory returns to height 0."""
    v, t = params[:, 0], np.deg2rad(params[:, 1])
    return v**2 * np.sin(2 * t) / 9.81


def _norm_theta(params):
    return (params - np.array([45.0, 45.0])) / np.array([15.0, 5.0])


def _train(net, batch_fn, steps: int, seed: int, device: str = "cpu"):
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    g = rng(seed, "batches")
    for _ in range(steps):
        x, y = batch_fn(g)
        loss = torch.nn.functional.mse_loss(net(torch.from_numpy(x).to(device)), torch.from_numpy(y).to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


def run_seed(steps: int, seed: int, dev: bool = False, device: str = "cpu"):
    """Train both models on one seed; return (x, truth, anchor curve, inductive, transductive, anchor).

    ``dev``: the dev split (library speeds in ``DEV_SPEEDS``, target ``DEV_TARGET``); ``device``:
    where the two networks train (initialised on the CPU)."""
    fam = dataclasses.replace(PROJECTILE, regions={"train": DEV_SPEEDS}) if dev else PROJECTILE
    target = DEV_TARGET if dev else TARGET
    library = TaskSet.sample(fam, {"train": 200}, rng(seed, "projectile", "library"))

    def inductive_batch(g):
        i = g.integers(len(library), size=64)
        x = g.uniform(*fam.domain, size=(64, 16))
        y = library.values(x, i)
        feats = np.concatenate(
            [x[..., None] / X_SCALE, np.broadcast_to(_norm_theta(library.params[i])[:, None], (64, 16, 2))], axis=2
        )
        return feats.reshape(-1, 3).astype(np.float32), (y / Y_SCALE).reshape(-1, 1).astype(np.float32)

    def transductive_batch(g):
        a, t = g.integers(len(library), size=(2, 64))
        x = g.uniform(*fam.domain, size=(64, 16))
        dtheta = _norm_theta(library.params[t]) - _norm_theta(library.params[a])
        feats = np.concatenate(
            [
                x[..., None] / X_SCALE,
                library.values(x, a)[..., None] / Y_SCALE,
                np.broadcast_to(dtheta[:, None], (64, 16, 2)),
            ],
            axis=2,
        )
        # As Psi everywhere in taskextrap, the transductive net predicts target - anchor.
        resid = (library.values(x, t) - library.values(x, a)) / Y_SCALE
        return feats.reshape(-1, 4).astype(np.float32), resid.reshape(-1, 1).astype(np.float32)

    with torch.random.fork_rng(devices=[]), torch.device("cpu"):
        torch.manual_seed(derive_seed(seed, "projectile-nets") % 2**31)
        inductive, transductive = mlp([3, 64, 64, 1]).to(device), mlp([4, 64, 64, 1]).to(device)
    _train(inductive, inductive_batch, steps, derive_seed(seed, "inductive"), device)
    _train(transductive, transductive_batch, steps, derive_seed(seed, "transductive"), device)

    anchor = int(np.argmin(np.linalg.norm(_norm_theta(library.params) - _norm_theta(target), axis=1)))
    x = np.linspace(0.0, float(landing(target)[0]), 200)[None]
    truth = fam(target, x)[0]
    y_anchor = library.values(x, np.array([anchor]))[0]
    with torch.no_grad():
        f_ind = np.concatenate([x.T / X_SCALE, np.broadcast_to(_norm_theta(target), (200, 2))], axis=1)
        dtheta = _norm_theta(target) - _norm_theta(library.params[anchor : anchor + 1])
        f_tr = np.concatenate([x.T / X_SCALE, y_anchor[:, None] / Y_SCALE, np.broadcast_to(dtheta, (200, 2))], axis=1)
        ind = inductive(torch.from_numpy(f_ind.astype(np.float32)).to(device))[:, 0].cpu().numpy() * Y_SCALE
        tr = y_anchor + transductive(torch.from_numpy(f_tr.astype(np.float32)).to(device))[:, 0].cpu().numpy() * Y_SCALE
    return x[0], truth, y_anchor, ind, tr, library.params[anchor]


@register(
    "projectile",
    "Fig. 1: inductive vs transductive extrapolation of a cannon trajectory to v = 65",
    PROFILES,
    options=("device",),
    dev=True,
)
def run_projectile(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """Train both Fig. 1 models per seed (one unit each); rows are the MSE on the target trajectory."""
    options = settings.options
    profile = settings.profile
    seeds, steps = profile.seeds, profile.steps
    dev = options.split == "dev"
    (v, theta), (v_lo, v_hi) = (DEV_TARGET if dev else TARGET)[0], (DEV_SPEEDS if dev else PROJECTILE.regions["train"])

    def compute(seed: int, plots: Path | None) -> UnitResult:
        t = time.perf_counter()
        x, truth, y_anchor, ind, tr, anchor = run_seed(steps, seed, dev, options.device)
        errors = {
            "inductive-oracle": np.array([np.mean((ind - truth) ** 2)]),
            "transductive-oracle": np.array([np.mean((tr - truth) ** 2)]),
        }
        if plots is not None:
            from taskextrap.report.plots import plot_curves

            plot_curves(
                plots / "projectile.png",
                x,
                {
                    f"target v={v:g} (truth)": truth,
                    f"anchor v={anchor[0]:.1f}, theta={anchor[1]:.1f}": y_anchor,
                    "inductive (x, v, theta)": ind,
                    "transductive (x, y_anchor, dv, dtheta)": tr,
                },
                title=f"Fig. 1: extrapolating to v = {v:g}, theta = {theta:g} (trained on v in [{v_lo:g}, {v_hi:g}])",
                xlabel="distance x (m)",
                ylabel="height y (m)",
            )
        return UnitResult(errors, {"total_s": time.perf_counter() - t})

    units = seed_units(
        seeds,
        name=lambda s: "projectile" + ("-dev" if dev else "") + f"-seed{s}",
        config=lambda s: {"experiment": "projectile", "steps": steps, "seed": s, "dev": dev, "device": options.device},
        compute=compute,
        plot_dir=plot_dir,
        plot_file="projectile.png",
    )

    def assemble(results):
        errs, timing = gather(results, units)
        notes = {
            "inductive-oracle": "Fig. 1 (A) inductive MLP on (x, v, theta)",
            "transductive-oracle": "Fig. 1 (B) transductive MLP on (x, y_anchor, dv, dtheta)",
        }
        rows = [
            make_row("projectile", f"v={v:g},theta={theta:g}", m, "mse", np.stack(e, axis=1), note=notes[m])
            for m, e in errs.items()
        ]
        config = {
            "library": f"200 tasks, v ~ U({v_lo:g}, {v_hi:g}), theta ~ U(40, 50)",
            "steps": steps,
            "batch": "64 x 16 points",
            "lr": 5e-3,
            "target": [float(v), float(theta)],
        }
        return rows, config, list(seeds), timing

    return Plan(units, assemble)
