"""Figures for run reports: predictions beside the truth, proxy-space embeddings, curves.

matplotlib is imported lazily inside each function and used through its object API with the
Agg canvas (no pyplot global state, no display needed). Every PNG is written atomically and
parent directories are created.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.files import atomic_path

__all__ = ["plot_predictions", "plot_evaluation", "plot_embedding", "plot_maps", "plot_curves", "pca_2d"]

MAX_PANELS = 4


def _new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | os.PathLike) -> Path:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", bbox_inches="tight")
    return Path(path)


def _finite(name: str, arr: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(arr)):
        raise TaskextrapError(f"{name} contains NaN/inf values")
    return arr


def _per_task(name: str, value: Any, n_tasks: int) -> list[np.ndarray]:
    """Split ``value`` ((n_tasks, k) array, (k,) shared array, or a list of 1-D arrays)."""
    if isinstance(value, (list, tuple)) and len(value) == n_tasks and all(np.ndim(v) == 1 for v in value):
        return [np.asarray(v, dtype=float).ravel() for v in value]
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 1:
        return [arr] * n_tasks
    if arr.ndim == 2 and arr.shape[0] == n_tasks:
        return [arr[i] for i in range(n_tasks)]
    raise TaskextrapError(f"{name} must have shape (n_tasks={n_tasks}, k), got {arr.shape}")


def plot_predictions(
    path: str | os.PathLike,
    x_grid: Any,
    truth: Any,
    preds: Mapping[str, Any],
    ctx_x: Any,
    ctx_y: Any,
    titles: Sequence[str] | None = None,
    qry_x: Any = None,
) -> Path:
    """Plot a row of up to 4 panels, one per task: truth, each method's predictions, context.

    ``truth`` has shape ``(n_tasks, m)`` on ``x_grid`` (shape ``(m,)``, shared, or
    ``(n_tasks, m)``). Each value of ``preds`` (method name -> predictions) is either
    an array of shape ``(n_tasks, m)`` on ``x_grid`` (drawn as a line), an array of shape
    ``(n_tasks, q)`` at the query points ``qry_x`` (shape ``(n_tasks, q)`` or ``(q,)``; drawn
    as a scatter), or an explicit ``(x, y)`` pair of ``(n_tasks, k)`` arrays (scatter). When
    ``q == m`` the array is read as being on ``x_grid``. Context points ``ctx_x``, ``ctx_y``
    (``(n_tasks, k)`` or lists of 1-D arrays) are drawn as black dots. Only the first 4 tasks
    are shown. Writes a PNG atomically and returns its path.
    """
    truth = _finite("truth", np.asarray(truth, dtype=float))
    if truth.ndim == 1:
        truth = truth[None, :]
    if truth.ndim != 2 or truth.shape[0] == 0:
        raise TaskextrapError(f"truth must have shape (n_tasks, m), got {truth.shape}")
    n_tasks, m = truth.shape
    xg = np.asarray(x_grid, dtype=float)
    if xg.shape not in ((m,), (n_tasks, m)):
        raise TaskextrapError(f"x_grid must have shape ({m},) or ({n_tasks}, {m}), got {xg.shape}")
    xg_t = _per_task("x_grid", xg, n_tasks)
    cx = _per_task("ctx_x", ctx_x, n_tasks)
    cy = _per_task("ctx_y", ctx_y, n_tasks)
    for i in range(n_tasks):
        if cx[i].shape != cy[i].shape:
            raise TaskextrapError(f"ctx_x and ctx_y differ in shape for task {i}: {cx[i].shape} vs {cy[i].shape}")
    qx = None if qry_x is None else _per_task("qry_x", qry_x, n_tasks)
    if titles is not None and len(titles) < min(n_tasks, MAX_PANELS):
        raise TaskextrapError(f"titles has {len(titles)} entries for {min(n_tasks, MAX_PANELS)} panels")

    # Resolve each method to ("line" | "scatter", per-task x list, per-task y list).
    series: list[tuple[str, str, list[np.ndarray], list[np.ndarray]]] = []
    for name, value in preds.items():
        if isinstance(value, tuple) and len(value) == 2:
            px = _per_task(f"preds[{name!r}] x", value[0], n_tasks)
            py = _per_task(f"preds[{name!r}] y", value[1], n_tasks)
            series.append((name, "scatter", px, py))
            continue
        arr = _finite(f"preds[{name!r}]", np.asarray(value, dtype=float))
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[0] != n_tasks:
            raise TaskextrapError(f"preds[{name!r}] must have shape ({n_tasks}, m or q), got {arr.shape}")
        if arr.shape[1] == m:
            series.append((name, "line", xg_t, [arr[i] for i in range(n_tasks)]))
        elif qx is not None and all(arr.shape[1] == len(q) for q in qx):
            series.append((name, "scatter", qx, [arr[i] for i in range(n_tasks)]))
        else:
            raise TaskextrapError(
                f"preds[{name!r}] has {arr.shape[1]} points per task: expected {m} (x_grid) or the length of qry_x"
            )

    n_panels = min(n_tasks, MAX_PANELS)
    fig = _new_figure(4.0 * n_panels, 3.4)
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    colors = [f"C{k}" for k in range(10)]
    for i, ax in enumerate(axes):
        ax.plot(xg_t[i], truth[i], color="0.3", lw=2.0, label="truth")
        for k, (name, kind, px, py) in enumerate(series):
            c = colors[(k + 1) % len(colors)]
            if kind == "line":
                ax.plot(px[i], py[i], color=c, lw=1.5, ls="--", label=name)
            else:
                ax.scatter(px[i], py[i], color=c, s=14, marker="x", label=name, zorder=3)
        ax.scatter(cx[i], cy[i], color="black", s=18, label="context", zorder=4)
        if titles is not None:
            ax.set_title(str(titles[i]), fontsize=10)
        ax.set_xlabel("x")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("y")
    axes[0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def plot_evaluation(
    path: str | os.PathLike, panels: Sequence[Mapping[str, Any]], mse: Mapping[str, float], title: str = ""
) -> Path:
    """An evaluation at a glance: one panel per target (up to 4) and the error of every method.

    Each of ``panels`` is a target: ``ctx_x``, ``ctx_y`` (its context, black dots), ``qry_x``,
    ``qry_y`` (its held-out points, grey), ``grid`` (m,) and ``curves`` (method -> its prediction
    on the grid, a line each), and ``band`` (lower, upper) on the grid: the first method's
    interval, shaded. The last panel is each method's MSE over all targets (log scale), lowest
    first. Writes a PNG atomically and returns its path.
    """
    if not panels:
        raise TaskextrapError("plot_evaluation needs at least one target panel")
    shown = list(panels)[:MAX_PANELS]
    fig = _new_figure(4.0 * (len(shown) + 1), 3.4)
    axes = fig.subplots(1, len(shown) + 1, squeeze=False)[0]
    for ax, panel in zip(axes, shown, strict=False):
        grid = np.asarray(panel["grid"], dtype=float)
        lower, upper = panel["band"]
        ax.fill_between(grid, lower, upper, color="C0", alpha=0.15, lw=0, label="90% interval")
        for k, (name, y) in enumerate(panel["curves"].items()):
            ax.plot(grid, y, color=f"C{k % 10}", lw=1.8 if k == 0 else 1.1, ls="-" if k == 0 else "--", label=name)
        ax.scatter(panel["qry_x"], panel["qry_y"], color="0.55", s=10, label="held out", zorder=3)
        ax.scatter(panel["ctx_x"], panel["ctx_y"], color="black", s=18, label="context", zorder=4)
        ax.set_title(str(panel.get("title", "")), fontsize=10)
        ax.set_xlabel("x")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("y")
    axes[0].legend(fontsize=7, loc="best")
    bars = axes[-1]
    order = sorted(mse, key=lambda k: mse[k])
    bars.barh(range(len(order)), [mse[k] for k in order], color=["C0" if k == "rte" else "0.6" for k in order])
    bars.set_yticks(range(len(order)), order, fontsize=8)
    bars.invert_yaxis()
    bars.set_xscale("log")
    bars.set_xlabel("MSE over targets")
    bars.grid(alpha=0.3, axis="x")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def pca_2d(z: Any) -> tuple[np.ndarray, np.ndarray]:
    """Project rows of ``z`` (shape ``(n, d)``) onto their first two principal components.

    Uses a numpy SVD of the centred data. Returns ``(coords (n, 2), explained variance ratio
    (2,))``; missing components (``d < 2`` or ``n < 3``) are zero.
    """
    z = _finite("z", np.asarray(z, dtype=float))
    if z.ndim != 2 or z.shape[0] == 0:
        raise TaskextrapError(f"z must have shape (n, d) with n >= 1, got {z.shape}")
    zc = z - z.mean(axis=0, keepdims=True)
    _, s, vt = np.linalg.svd(zc, full_matrices=False)
    k = min(2, vt.shape[0])
    coords = np.zeros((z.shape[0], 2))
    coords[:, :k] = zc @ vt[:k].T
    var = s**2
    ratio = np.zeros(2)
    if var.sum() > 0:
        ratio[:k] = var[:k] / var.sum()
    return coords, ratio


def plot_embedding(
    path: str | os.PathLike,
    z: Any,
    labels: Iterable[Any],
    title: str,
    target_labels: Iterable[str] | None = None,
) -> Path:
    """Scatter a 2-D PCA of embeddings ``z`` (shape ``(n, d)``) coloured by ``labels``.

    ``labels`` holds one region name per row (e.g. ``F1_1``, ``F1_2``, ``F2``). Target regions
    are drawn with a star marker, training regions with dots; by default every label starting
    with ``"F2"`` is a target, or pass ``target_labels`` explicitly. Writes a PNG atomically and
    returns its path.
    """
    labels = [str(label) for label in labels]
    coords, ratio = pca_2d(z)
    if len(labels) != coords.shape[0]:
        raise TaskextrapError(f"labels has {len(labels)} entries for {coords.shape[0]} embeddings")
    targets = {label for label in labels if label.startswith("F2")} if target_labels is None else set(target_labels)
    fig = _new_figure(5.5, 4.5)
    ax = fig.subplots()
    _scatter_classes(ax, coords, labels, targets)
    ax.set_xlabel(f"PC1 ({100 * ratio[0]:.0f}% var.)")
    ax.set_ylabel(f"PC2 ({100 * ratio[1]:.0f}% var.)")
    ax.set_title(str(title))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def _scatter_classes(ax, coords: np.ndarray, labels: Sequence[str], targets: set) -> None:
    """Scatter ``coords`` (n, 2) one colour per label in order of appearance: targets (held-out
    classes) as outlined stars above dots."""
    order: list[str] = []
    for label in labels:
        if label not in order:
            order.append(label)
    lab = np.asarray(labels)
    for k, name in enumerate(order):
        sel = lab == name
        is_target = name in targets
        ax.scatter(
            coords[sel, 0],
            coords[sel, 1],
            s=60 if is_target else 18,
            marker="*" if is_target else "o",
            color=f"C{k % 10}",
            edgecolors="black" if is_target else "none",
            linewidths=0.5,
            alpha=0.95 if is_target else 0.7,
            label=f"{name} (held out)" if is_target else name,
            zorder=3 if is_target else 2,
        )


def plot_maps(path: str | os.PathLike, panels: Sequence[tuple[str, Any, Sequence[str], Iterable[str]]]) -> Path:
    """Several 2-D maps side by side: ``panels`` holds ``(title, coords (n, 2), labels, held-out
    labels)``; each map is drawn as given (no further projection). Writes a PNG atomically."""
    if not panels:
        raise TaskextrapError("plot_maps needs at least one panel")
    fig = _new_figure(5.0 * len(panels), 4.5)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, coords, labels, held) in zip(axes, panels, strict=True):
        coords = _finite(f"coords of {title!r}", np.asarray(coords, dtype=float))
        labels = [str(label) for label in labels]
        if coords.ndim != 2 or coords.shape[1] != 2 or len(labels) != len(coords):
            raise TaskextrapError(
                f"panel {title!r}: coords must have shape (n, 2) with one label per row, "
                f"got {coords.shape} and {len(labels)} labels"
            )
        _scatter_classes(ax, coords, labels, set(held))
        ax.set_title(str(title), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def plot_curves(
    path: str | os.PathLike,
    x: Any,
    curves: Mapping[str, Any],
    points: Mapping[str, tuple[Any, Any]] | None = None,
    title: str = "",
    xlabel: str = "x",
    ylabel: str = "y",
) -> Path:
    """Plot several named curves over a shared ``x`` (shape ``(m,)``), plus optional named
    point sets ``points[name] = (xs, ys)`` drawn as markers (e.g. the projectile figure's
    observed points). Writes a PNG atomically and returns its path.
    """
    x = _finite("x", np.asarray(x, dtype=float).ravel())
    fig = _new_figure(6.0, 4.0)
    ax = fig.subplots()
    k = 0
    for name, y in curves.items():
        y = _finite(f"curves[{name!r}]", np.asarray(y, dtype=float).ravel())
        if y.shape != x.shape:
            raise TaskextrapError(f"curves[{name!r}] has {y.size} points, x has {x.size}")
        ax.plot(x, y, color=f"C{k % 10}", lw=1.8, label=name)
        k += 1
    for name, (px, py) in (points or {}).items():
        px = np.asarray(px, dtype=float).ravel()
        py = np.asarray(py, dtype=float).ravel()
        if px.shape != py.shape:
            raise TaskextrapError(f"points[{name!r}]: x has {px.size} values, y has {py.size}")
        ax.scatter(px, py, color=f"C{k % 10}", s=22, label=name, zorder=3, edgecolors="black", linewidths=0.4)
        k += 1
    ax.set_title(str(title))
    ax.set_xlabel(str(xlabel))
    ax.set_ylabel(str(ylabel))
    ax.grid(alpha=0.3)
    if k:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def plot_task_geometry(path: str | os.PathLike, names: Sequence[str], z: Any, tsne: Any, title: str) -> Path:
    """Three panels of a task embedding ``z`` (n, d), one row per task in ``names``: its 2-D PCA
    and the given t-SNE coordinates ``tsne`` (n, 2), each point labelled, and the cosine-similarity
    heat map. Writes a PNG atomically."""
    z = _finite("z", np.asarray(z, dtype=float))
    tsne = _finite("tsne", np.asarray(tsne, dtype=float))
    names = [str(n) for n in names]
    if z.ndim != 2 or len(names) != len(z) or tsne.shape != (len(z), 2):
        raise TaskextrapError(
            f"need one name and one t-SNE point per embedding row, got {len(names)} names, "
            f"z {z.shape}, tsne {tsne.shape}"
        )
    coords, ratio = pca_2d(z)
    u = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-300)
    fig = _new_figure(17.0, 5.5)
    axes = fig.subplots(1, 3)
    for ax, xy, sub in ((axes[0], coords, f"PCA ({100 * ratio.sum():.0f}% var.)"), (axes[1], tsne, "t-SNE")):
        ax.scatter(xy[:, 0], xy[:, 1], s=14, color="C0")
        for (x, y), n in zip(xy, names, strict=True):
            ax.annotate(n, (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
        ax.set_title(f"{title}: {sub}", fontsize=9)
        ax.grid(alpha=0.3)
    im = axes[2].imshow(u @ u.T, cmap="viridis", vmin=-1, vmax=1)
    axes[2].set_xticks(range(len(names)), names, rotation=90, fontsize=5)
    axes[2].set_yticks(range(len(names)), names, fontsize=5)
    axes[2].set_title(f"{title}: cosine similarity", fontsize=9)
    fig.colorbar(im, ax=axes[2], fraction=0.046)
    fig.tight_layout()
    return _save(fig, path)
