"""benchmarks/meta_gp_gpytorch.py: gpytorch's model is the same objective as ``gp_nll`` (so the
side by side times one function written two ways), its hyper-parameters map back to meta-gp's,
and the committed file is a dev run with every shape and family."""

import json
import math
from pathlib import Path

import pytest


def test_gpytorch_and_the_hand_written_objective_agree_and_map_back(load_script):
    pytest.importorskip("gpytorch")
    pytest.importorskip("botorch")
    import torch

    bench = load_script("benchmarks/meta_gp_gpytorch.py")
    g = torch.Generator().manual_seed(0)
    x = (2 * torch.rand(12, 10, generator=g, dtype=torch.float64) - 1).sort(1).values
    y = x**2 + 0.1 * torch.randn(12, 10, generator=g, dtype=torch.float64)
    theta = bench.start_theta(x) + torch.tensor([[0.3, -0.2, 0.5, 0.1, -0.4]], dtype=torch.float64)
    model, mll, forwards = bench.gpytorch_model(x, y, theta)
    with torch.no_grad():
        model.mean.coef.copy_(torch.tensor([0.1, -0.2, 0.3, 0.05]))
        back, coef = bench.gpytorch_theta(model)
        assert torch.allclose(back, theta, rtol=0, atol=1e-5)  # gpytorch's softplus round trip
        ours, theirs = bench.ours_nll(x, y, theta, coef), bench.gpytorch_nll(model, mll)
    assert forwards[0] == 1
    assert math.isclose(float(ours), float(theirs), rel_tol=1e-5)
    # a different mean is a different objective: the check above is not vacuous
    with torch.no_grad():
        assert not math.isclose(float(bench.ours_nll(x, y, theta, 0 * coef)), float(theirs), rel_tol=1e-3)


def test_the_committed_file_is_a_dev_run_with_every_shape_and_family():
    bench_file = Path(__file__).resolve().parents[2] / "benchmarks/results/meta-gp-gpytorch.json"
    data = json.loads(bench_file.read_text())
    assert data["split"] == "dev" and data["threads"] == 1 and "seed" in data
    assert [c["unit"] for c in data["evaluations"]] == ["parameter", "composition", "composition-depth3"]
    assert all(c["value_rel_diff"] < 1e-4 for c in data["evaluations"])
    assert {r["family"] for r in data["fits"]} == {"quadratic", "cubic", "exp", "sin_trend", "tri_trend"}
    for r in data["fits"]:
        for side in ("ours", "gpytorch_botorch"):
            assert {"seconds", "evaluations", "stopped", "nll", "grad_max", "dev_mse", "hyper"} <= set(r[side])
            assert r[side]["evaluations"] > 1 and r[side]["seconds"]["min"] <= r[side]["seconds"]["median"]


def test_a_hyper_parameter_at_a_bound_is_named_and_left_out_of_the_gradient_check(load_script):
    import torch

    from taskextrap.baselines.gp import HYPER

    bench = load_script("benchmarks/meta_gp_gpytorch.py")
    theta = bench.start_theta(torch.zeros(1, dtype=torch.float64))
    theta[0, 2] = math.log(HYPER["noise"][1][0])  # the noise at its lower bound
    rec = bench.hyper_record(theta)
    assert rec["at_bounds"] == ["noise"] and rec["outside_bounds"] == []
    theta[0, 0] = math.log(2 * HYPER["amplitude"][1][1])  # gpytorch keeps no upper bound
    assert bench.hyper_record(theta)["outside_bounds"] == ["amplitude"]
