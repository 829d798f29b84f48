"""``meta-gp``'s hand-written marginal likelihood against gpytorch's (issue 63, item 5).

``baselines/gp.py`` writes the GP's negative log marginal likelihood and its backward by hand
(``gp_nll``, a custom autograd function) and fits ``meta-gp`` with torch's L-BFGS on it
(``MetaGP._fit_lbfgs``); gpytorch's exact GP fitted by BoTorch's ``fit_gpytorch_mll`` (scipy's
L-BFGS-B) is the field's well-kept version. Side by side on one objective: the kernel
``rbf+linear`` that ``meta-gp`` uses in the parameter regime (gpytorch: a scaled RBF plus a linear
and a constant kernel, the same family), a Legendre prior mean of degree 3 and one set of
hyper-parameters shared by every draw, white noise on **every** point (gpytorch's Gaussian
likelihood has one noise for all points, where ``meta-gp``'s own fit puts it on the context
points only; both sides here use all points, so they minimise the same function):

1. **One evaluation** (the objective and its gradient) at the draws' shapes of the parameter
   (8 + 8 points), composition (25 + 25) and depth-3 (50 + 50) units, ``--draws`` draws each
   (256: Adam's batch): median, min and max of ``--repeats`` after two warm-ups, and the two
   values' relative difference at the same hyper-parameters (they must agree).
2. **The whole fit** on each family's parameter dev library (``meta_gp_fit.dev_draws``: the draws
   ``meta-gp`` learns from, 8 of each task of the library's learning split; no test task):
   ``MetaGP._fit_lbfgs`` (torch's L-BFGS, strong Wolfe, 20 curvature pairs, stopping on an
   absolute change of 1e-10 in the mean objective) against one attempt of what
   ``fit_gpytorch_mll`` runs for an exact GP, ``fit_gpytorch_mll_scipy`` (scipy's L-BFGS-B with
   its defaults on the summed per-point objective; ``fit_gpytorch_mll`` would retry a failed
   attempt up to five times, which would hide in its seconds), from the same start. Per fit: the
   objective reached (``gp_nll`` at its hyper-parameters, mean per draw), the largest entry of
   that objective's gradient there (in the log hyper-parameters not held at a bound and the mean's
   coefficients: how converged each is, on one scale), its evaluations, why it stopped, its hyper-parameters and
   whether any lies outside ``baselines.gp.HYPER``'s bounds (``meta-gp`` keeps them inside;
   gpytorch keeps them positive), the dev targets' MSE with them (``MetaGP.predict``), and the
   seconds of ``--fit-repeats`` fits (min / median / max; the two fits alternate).

One torch thread. Writes ``benchmarks/results/meta-gp-gpytorch.json``.

    python benchmarks/meta_gp_gpytorch.py --seed 0
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL, DEGREE = "rbf+linear", 3
SHAPES = (("parameter", 8, 8), ("composition", 25, 25), ("composition-depth3", 50, 50))
FAMILIES = ("quadratic", "cubic", "exp", "sin_trend", "tri_trend")


def start_theta(like):
    """``meta-gp``'s starting log hyper-parameters (1, P) (``baselines.gp.HYPER``)."""
    from taskextrap.baselines.gp import HYPER, hyper_names

    return like.new_tensor([[math.log(HYPER[k][0]) for k in hyper_names(KERNEL)]])


def gpytorch_model(x, y, theta):
    """gpytorch's exact GP on draws ``x``, ``y`` (B, n), one set of hyper-parameters for all of
    them, started at the log hyper-parameters ``theta`` (1, P); returns (model, mll, forwards),
    ``forwards[0]`` counting the model's forward passes (the objective's evaluations)."""
    import gpytorch
    import torch
    from botorch.models.gpytorch import GPyTorchModel
    from gpytorch.constraints import GreaterThan

    from taskextrap.baselines.gp import legendre_basis

    forwards = [0]

    class Legendre(gpytorch.means.Mean):
        def __init__(self):
            super().__init__()
            self.register_parameter("coef", torch.nn.Parameter(torch.zeros(DEGREE + 1, dtype=x.dtype)))

        def forward(self, t):
            return (self.coef[:, None] * legendre_basis(t[..., 0], DEGREE)).sum(-2)

    class Shared(gpytorch.models.ExactGP, GPyTorchModel):
        _num_outputs = 1

        def __init__(self, lik):
            super().__init__(x[..., None], y, lik)
            self.mean = Legendre()
            self.rbf = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
            self.linear, self.constant = gpytorch.kernels.LinearKernel(), gpytorch.kernels.ConstantKernel()

        def forward(self, t):
            forwards[0] += 1
            return gpytorch.distributions.MultivariateNormal(
                self.mean(t), self.rbf(t) + self.linear(t) + self.constant(t)
            )

    lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=GreaterThan(1e-6)).double()
    model = Shared(lik).double()
    amplitude, length, noise, linear, offset = theta[0].exp().tolist()
    model.rbf.outputscale, model.rbf.base_kernel.lengthscale, lik.noise = amplitude, length, noise
    model.linear.variance, model.constant.constant = linear, torch.tensor(linear * offset**2, dtype=x.dtype)
    return model, gpytorch.mlls.ExactMarginalLogLikelihood(lik, model), forwards


def gpytorch_theta(model) -> tuple:
    """A fitted gpytorch model's hyper-parameters as ``meta-gp``'s log theta (1, P) and its mean's
    coefficients."""
    import torch

    linear = float(model.linear.variance.detach())
    h = [float(model.rbf.outputscale.detach()), float(model.rbf.base_kernel.lengthscale.detach()),
         float(model.likelihood.noise.detach()),
         linear, math.sqrt(float(model.constant.constant.detach()) / linear)]  # fmt: skip
    return torch.tensor([h], dtype=torch.float64).log(), model.mean.coef.detach().clone()


def ours_nll(x, y, theta, coef):
    """The objective by ``gp_nll``: the mean per draw of the negative log marginal likelihood."""
    from taskextrap.baselines.gp import gp_nll, legendre_basis

    mean = (coef[:, None] * legendre_basis(x, DEGREE)).sum(-2)
    return gp_nll(KERNEL, theta.expand(len(x), -1), x, y - mean).mean()


def gpytorch_nll(model, mll):
    """The same objective by gpytorch: its marginal log likelihood is per point, so times n."""
    x, y = model.train_inputs[0], model.train_targets
    return -mll(model(x), y).mean() * y.shape[-1]


def one_evaluation(name: str, k: int, q: int, draws: int, repeats: int, g) -> dict:
    """One evaluation of the objective and its gradient, both ways, at one unit's draw shape."""
    import torch

    from taskextrap.scripts import sibling

    time_ms = sibling(__file__, "gp_step").time_ms

    x = (2 * torch.rand(draws, k + q, generator=g, dtype=torch.float64) - 1).sort(1).values
    y = torch.sin(3 * x) + 0.1 * torch.randn(draws, k + q, generator=g, dtype=torch.float64)
    theta = start_theta(x).requires_grad_(True)
    coef = torch.zeros(DEGREE + 1, dtype=torch.float64, requires_grad=True)
    model, mll, _ = gpytorch_model(x, y, theta.detach())
    model.train()

    def ours():
        theta.grad = coef.grad = None
        ours_nll(x, y, theta, coef).backward()

    def theirs():
        model.zero_grad()
        gpytorch_nll(model, mll).backward()

    with torch.no_grad():
        a, b = float(ours_nll(x, y, theta, coef)), float(gpytorch_nll(model, mll))
    cell = {"unit": name, "points_per_draw": k + q, "draws": draws, "value_rel_diff": abs(a - b) / abs(a)}
    for label, step in (("ours", ours), ("gpytorch", theirs)):
        ms = time_ms(step, repeats)
        cell[label] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}
    cell["gpytorch_over_ours"] = cell["gpytorch"]["median_ms"] / cell["ours"]["median_ms"]
    print(f"{name:18s} ours {cell['ours']['median_ms']:7.1f} ms  gpytorch {cell['gpytorch']['median_ms']:7.1f} ms  "
          f"values differ by {cell['value_rel_diff']:.1e}", flush=True)  # fmt: skip
    return cell


def dev_mse(theta, coef, scaler, obs) -> float:
    """The dev targets' MSE of ``meta-gp``'s prediction with these hyper-parameters."""
    from taskextrap.baselines.gp import MetaGP

    gp = MetaGP(kernel=KERNEL, mean_degree=DEGREE)
    gp.scaler_, gp.log_theta_, gp.mean_ = scaler, theta, coef
    mean, _ = gp.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    return float(((mean - obs.qry_y) ** 2).mean())


def at_bounds(theta) -> list[bool]:
    """Whether each log hyper-parameter lies at (within 1e-4 of) a bound of ``HYPER``."""
    from taskextrap.baselines.gp import HYPER, hyper_names

    return [
        min(abs(t - math.log(b)) for b in HYPER[k][1]) < 1e-4
        for k, t in zip(hyper_names(KERNEL), theta[0].tolist(), strict=True)
    ]


def converged(x, y, theta, coef) -> float:
    """The largest entry of the mean objective's gradient at (``theta``, ``coef``) over the
    coordinates not held at a bound (:func:`at_bounds`): 0 at a stationary point, on the same
    scale for both fits."""
    import torch

    free = torch.tensor([not b for b in at_bounds(theta)])
    theta, coef = theta.clone().requires_grad_(True), coef.clone().requires_grad_(True)
    ours_nll(x, y, theta, coef).backward()
    return float(torch.cat([theta.grad[0][free], coef.grad]).abs().max())


def hyper_record(theta) -> dict:
    """Log hyper-parameters (1, P) as {name: value}, those at a bound of ``HYPER``, and those
    outside its bounds (by more than rounding)."""
    from taskextrap.baselines.gp import HYPER, hyper_names

    names = hyper_names(KERNEL)
    h = dict(zip(names, theta[0].exp().tolist(), strict=True))
    out = [k for k, v in h.items() if not HYPER[k][1][0] * (1 - 1e-6) <= v <= HYPER[k][1][1] * (1 + 1e-6)]
    held = [k for k, b in zip(names, at_bounds(theta), strict=True) if b]
    return {"hyper": h, "at_bounds": held, "outside_bounds": out}


def fit_ours(x, y):
    """``MetaGP._fit_lbfgs`` from ``meta-gp``'s start, every point noisy: (fitted MetaGP, stop)."""
    import torch

    from taskextrap.baselines.gp import MetaGP, _log_bounds, hyper_names

    gp = MetaGP(kernel=KERNEL, mean_degree=DEGREE, optimizer="lbfgs", steps=1000)
    lo, hi = _log_bounds(hyper_names(KERNEL), x)
    gp.mean_ = torch.zeros(DEGREE + 1, dtype=torch.float64, requires_grad=True)
    gp._fit_lbfgs(x, y, torch.ones_like(x), start_theta(x), lo, hi, hyper_names(KERNEL))
    capped = gp.evaluations_ >= int(gp.steps * 1.25)  # torch's LBFGS: max_eval = 1.25 max_iter
    return gp, "evaluation cap" if capped else "change or gradient below tolerance"


def fit_gpytorch(x, y):
    """One ``fit_gpytorch_mll_scipy`` attempt from ``meta-gp``'s start: (model, evaluations, stop)."""
    from botorch.optim.fit import fit_gpytorch_mll_scipy

    model, mll, forwards = gpytorch_model(x, y, start_theta(x))
    mll.train()
    result = fit_gpytorch_mll_scipy(mll)
    return model, forwards[0], f"{result.status.name}: {result.message}"


def whole_fit(family_name: str, repeats: int) -> dict:
    """Both fits of one family's dev library, from the same start, ``repeats`` times each."""
    import torch

    from taskextrap.baselines.gp import MetaGP
    from taskextrap.scripts import sibling

    fit = sibling(__file__, "meta_gp_fit")
    _arrays, dev_draws = fit._arrays, fit.dev_draws

    cx, cy, qx, qy, scaler, obs = dev_draws(family_name)
    probe = MetaGP(kernel=KERNEL, mean_degree=DEGREE)
    probe.scaler_ = scaler
    x, y, _ = _arrays(probe, cx, cy, qx, qy)
    seconds: dict[str, list[float]] = {"ours": [], "gpytorch_botorch": []}
    for _ in range(repeats):
        t = time.perf_counter()
        gp, stop = fit_ours(x, y)
        seconds["ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        model, evaluations, their_stop = fit_gpytorch(x, y)
        seconds["gpytorch_botorch"].append(time.perf_counter() - t)
    theta, coef = gpytorch_theta(model)
    fitted = {"ours": (gp.log_theta_, gp.mean_, gp.evaluations_, stop),
              "gpytorch_botorch": (theta, coef, evaluations, their_stop)}  # fmt: skip
    row: dict = {"family": family_name, "draws": len(x), "points_per_draw": x.shape[1]}
    for side, (th, c, n_eval, why) in fitted.items():
        with torch.no_grad():
            nll = float(ours_nll(x, y, th, c))
        s = seconds[side]
        row[side] = {"seconds": {"min": min(s), "median": statistics.median(s), "max": max(s)},
                     "evaluations": n_eval, "stopped": why, "nll": nll, "grad_max": converged(x, y, th, c),
                     "dev_mse": dev_mse(th, c, scaler, obs), **hyper_record(th)}  # fmt: skip
    o, b = row["ours"], row["gpytorch_botorch"]
    print(f"{family_name:10s} ours nll {o['nll']:9.4f} |g| {o['grad_max']:.1e} {o['seconds']['median']:6.1f} s "
          f"({o['evaluations']} evals) mse {o['dev_mse']:.4g} | gpytorch nll {b['nll']:9.4f} |g| {b['grad_max']:.1e} "
          f"{b['seconds']['median']:6.1f} s ({b['evaluations']} evals; {b['stopped']}) mse {b['dev_mse']:.4g} "
          f"outside bounds {b['outside_bounds']}", flush=True)  # fmt: skip
    return row


def main(argv=None) -> None:
    import torch

    from taskextrap.files import write_json_atomic
    from taskextrap.provenance import source_hash
    from taskextrap.report.schema import environment_info

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", default=list(FAMILIES))
    ap.add_argument("--draws", type=int, default=256, help="draws per timed evaluation")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--fit-repeats", type=int, default=3, help="timed fits of each side per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "meta-gp-gpytorch.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(a.seed)
    cells = [one_evaluation(name, k, q, a.draws, a.repeats, g) for name, k, q in SHAPES]
    fits = [whole_fit(f, a.fit_repeats) for f in a.families]
    command = (
        f"python benchmarks/meta_gp_gpytorch.py --seed {a.seed} --draws {a.draws} --repeats {a.repeats} "
        f"--fit-repeats {a.fit_repeats}"
    )
    if tuple(a.families) != FAMILIES:
        command += " --families " + " ".join(a.families)
    write_json_atomic(a.out, {"evaluations": cells, "fits": fits, "split": "dev", "threads": 1, "seed": a.seed,
                              "command": command, "environment": environment_info("cpu"),
                              "source_hash": source_hash()})  # fmt: skip
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
