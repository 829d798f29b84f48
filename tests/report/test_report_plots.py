"""Plots write non-empty PNG files atomically."""

import os
from pathlib import Path

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.report.plots import pca_2d, plot_curves, plot_embedding, plot_predictions

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def is_png(path):
    data = Path(path).read_bytes()
    return len(data) > 1000 and data[:8] == PNG_MAGIC


def test_plot_predictions_lines_and_scatter(tmp_path):
    rng = np.random.default_rng(0)
    n_tasks, m, q, k = 5, 50, 7, 4
    x = np.linspace(-1, 1, m)
    truth = np.stack([a * x**2 for a in range(1, n_tasks + 1)])
    qx = rng.uniform(-1, 1, size=(n_tasks, q))
    preds = {
        "rte": truth + 0.1,  # on x_grid
        "sparse-inductive": rng.normal(size=(n_tasks, q)),  # at qry_x
        "explicit": (qx, rng.normal(size=(n_tasks, q))),  # (x, y) pair
    }
    cx = rng.uniform(-1, 1, size=(n_tasks, k))
    cy = rng.normal(size=(n_tasks, k))
    out = plot_predictions(
        tmp_path / "plots" / "pred.png", x, truth, preds, cx, cy, titles=[f"task {i}" for i in range(n_tasks)], qry_x=qx
    )
    assert is_png(out)
    assert os.listdir(tmp_path / "plots") == ["pred.png"]


def test_plot_predictions_shape_errors(tmp_path):
    x = np.linspace(0, 1, 10)
    truth = np.zeros((2, 10))
    with pytest.raises(TaskextrapError):
        plot_predictions(tmp_path / "p.png", x, truth, {"rte": np.zeros((2, 3))}, np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(TaskextrapError):
        plot_predictions(tmp_path / "p.png", np.linspace(0, 1, 9), truth, {}, np.zeros((2, 2)), np.zeros((2, 2)))
    assert not (tmp_path / "p.png").exists()
    assert os.listdir(tmp_path) == []


def test_pca_2d_recovers_dominant_direction():
    rng = np.random.default_rng(0)
    t = rng.normal(size=200)
    z = np.outer(t, [3.0, 0.0, 4.0]) + 0.01 * rng.normal(size=(200, 3))
    coords, ratio = pca_2d(z)
    assert coords.shape == (200, 2)
    assert ratio[0] > 0.99
    assert abs(np.corrcoef(coords[:, 0], t)[0, 1]) > 0.999


def test_plot_embedding(tmp_path):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(30, 6))
    labels = ["F1_1"] * 10 + ["F1_2"] * 10 + ["F2"] * 10
    out = plot_embedding(tmp_path / "emb.png", z, labels, "proxy space")
    assert is_png(out)
    with pytest.raises(TaskextrapError):
        plot_embedding(tmp_path / "bad.png", z, labels[:5], "x")


def test_plot_curves(tmp_path):
    x = np.linspace(0, 2, 40)
    out = plot_curves(
        tmp_path / "a" / "proj.png",
        x,
        {"truth": x * (2 - x), "rte": x * (2.1 - x)},
        {"observed": (x[:5], (x * (2 - x))[:5])},
        "projectile",
        "t",
        "height",
    )
    assert is_png(out)
    with pytest.raises(TaskextrapError):
        plot_curves(tmp_path / "b.png", x, {"bad": x[:3]}, None, "t", "x", "y")
