"""App. H: maps of the proxy space, fitted on training tasks only, with the held-out tasks projected.

Three panels, as the paper's figure (App. H, "The Geometry of Task Manifolds"):

* ``length``: polynomials of degrees 1..9 as the figure draws them (x^p on [-5, 5], coefficients
  U(-1, 1), reference §13), each curve scaled to unit energy over its 20-point grid; Isomap (15
  neighbours) of the gradient embedding. Degrees 1..8 are the training levels, degree 9 is held
  out. ``length-regime`` is the same map of the length regime's own ladder (coefficients scaled by
  5^-p, Appendix F), where the leading term no longer dominates.
* ``composition``: poly, sin and sin o poly (the primitives' ranges, 50-point grid on [-5, 5]);
  Isomap (20 neighbours). ``(sin, poly)`` is a held-out pair of the composition split, so the
  maps are fitted on the poly and sin primitives and the compositions are projected.
* ``parametric``: quadratics with a in F1_1, F1_2 (training) and F2 (held out); PCA to 2-D.

Unlike the authors' script (reference §13, which fits the probe and the PCA with the F2 tasks
included), the probe, the PCA and the manifold learner see training-region tasks only; the
held-out tasks are embedded and projected afterwards (``Isomap.transform``, ``PCA.transform``).
The figure's claims become numbers (all diagnostics, :data:`report.schema.DIAGNOSTIC_METRICS`):

* ``trustworthiness`` of the 2-D map against the gradient space (``sklearn.manifold``; 1 when the
  map's neighbourhoods are neighbourhoods of the gradient space), held-out tasks included;
* ``spearman``: a read-out of the parameter (degree, a) from the 2-D map, quadratic in the
  coordinates and fitted on the training tasks, against the true parameter of every task,
  held-out ones included; for composition, the distance from the sin centroid against the
  caption's order (sin inside, sin o poly, poly outside);
* ``fraction``: the share of held-out tasks whose read-out lies beyond the median read-out of the
  last training level or region, i.e. on the far side along the direction of increasing parameter;
* ``relative-distance`` (parametric): how far the F2 centroid lies from the centroid of F1_2
  moved by the F1_1 -> F1_2 step, in units of that step (the paper's "extrapolating the vector
  lands in F2": 0 is an exact landing);
* ``silhouette`` (composition) of the three classes in the 2-D map.

Each panel (a group of rows) has two methods per measure: ``gradient`` (the probe's gradient,
App. H) and ``curve``, the sanity baseline that maps the scaled curve values with the same
pipeline (Isomap for the length and composition panels, PCA for the parametric one).

Settings are the paper's App. H ones (probe [1, 128, 128, 1], PCA to 50 dimensions before Isomap,
15 and 20 neighbours, 50 tasks per class). The one choice of ours, the read-out's degree
(:data:`READOUT`), is made on the dev split (``--split dev``), a pseudo-extrapolation inside the
training tasks of every panel (:func:`panel_tasks`): degrees 1-7 with degree 8 held out, poly and
sin with poly o sin (a training pair of the composition split, the one ``tasks.dev.dev_pair_split``
holds out) as the composition, F1_1 cut in two halves with F1_2 held out. The dev run reports
every candidate read-out (rows ``<representation>-<degree>-readout``); the rule, fixed before it
ran: the degree with the higher mean ``gradient`` Spearman over the length, length-regime and
parametric panels, the simpler one on a tie.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import numpy as np

from taskextrap import audit
from taskextrap.embed import ProxyEmbedding
from taskextrap.errors import TaskextrapError
from taskextrap.profiles import ManifoldProfile
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, UnitResult, gather, seed_units
from taskextrap.report.schema import make_row
from taskextrap.scaling import FamilyScaler
from taskextrap.seeding import derive_seed, rng
from taskextrap.tasks.builtin import QUADRATIC
from taskextrap.tasks.dev import dev_family, dev_ladder
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder, LadderSet
from taskextrap.tasks.observe import Observations
from taskextrap.tasks.primitives import POLY, SIN
from taskextrap.tasks.taskset import TaskSet

PANELS = ("length", "length-regime", "composition", "parametric")
# The figure's polynomials (reference §13): x^p on [-5, 5] with coefficients U(-1, 1), so the
# leading term dominates each curve. The length regime's own ladder scales the p-th coefficient
# by 5^-p (Appendix F); the ``length-regime`` panel maps that distribution.
FIGURE_LADDER = Ladder("polynomial-figure", basis=lambda x, p: x**p, domain=(-5.0, 5.0), coef_range=(-1.0, 1.0))


PROFILES = {
    "quick": ManifoldProfile(name="quick", seeds=(0,), n_per_class=50, width=128, pretrain_steps=1000, pca_dim=50),
    "paper": ManifoldProfile(name="paper", seeds=(0, 1, 2), n_per_class=50, width=128, pretrain_steps=3000, pca_dim=50),
    "tiny": ManifoldProfile(name="tiny", seeds=(0,), n_per_class=12, width=16, pretrain_steps=20, pca_dim=8),
}


@dataclass(frozen=True)
class UnitEnergy:
    """A family whose every curve is scaled to unit L2 norm over the inputs it is evaluated at
    (App. H, length panel: shape, not magnitude). Delegates grid, domain and audit labels."""

    family: Any  # a ladder (or any family with domain, grid, task_labels and training_labels)

    @property
    def domain(self):
        """The wrapped family's domain."""
        return self.family.domain

    def grid(self, m: int) -> np.ndarray:
        """The wrapped family's ``m``-point grid."""
        return self.family.grid(m)

    def __call__(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of tasks ``params`` at ``x`` (n, m), each row scaled to unit L2 norm."""
        y = self.family(params, x)
        return y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)

    def task_labels(self, params: np.ndarray) -> np.ndarray:
        """The leak audit's name of each task (the wrapped family's)."""
        return self.family.task_labels(params)

    def training_labels(self) -> set[str]:
        """The labels a fit may consume (the wrapped family's)."""
        return self.family.training_labels()


KINDS = ("poly", "sin", "sin∘poly", "poly∘sin")
# The paper's caption, from the centre outwards: sin, then the composition, then poly. The dev
# split's composition (poly o sin) is given the same place, between its two constituents.
RADIAL_RANK = {"sin": 0, "sin∘poly": 1, "poly∘sin": 1, "poly": 2}


@dataclass(frozen=True)
class SinPoly:
    """The composition panel's family: rows ``[kind, sin A, w, phi, poly a, b, c]`` with kind 0
    (poly), 1 (sin), 2 (sin o poly) or 3 (poly o sin). Poly and sin are the training classes;
    sin o poly is a held-out pair of the composition split, poly o sin the dev split's."""

    domain: tuple[float, float] = (-5.0, 5.0)
    name: str = "sin-poly"

    def grid(self, m: int) -> np.ndarray:
        """``m`` evenly spaced inputs over the domain."""
        return np.linspace(*self.domain, m)

    def __call__(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of rows ``params`` (n, 7) at ``x`` (n, m)."""
        params = np.asarray(params, dtype=float)
        kind, s, p = params[:, 0].astype(int)[:, None], params[:, 1:4], params[:, 4:7]
        poly_x, sin_x = POLY(p, x), SIN(s, x)
        return np.select([kind == 0, kind == 1, kind == 2], [poly_x, sin_x, SIN(s, poly_x)], POLY(p, sin_x))

    def task_labels(self, params: np.ndarray) -> np.ndarray:
        """Each task's class name (poly, sin, sin∘poly): the leak audit's labels."""
        return np.array([KINDS[int(k)] for k in np.asarray(params)[:, 0]], dtype=object)

    def training_labels(self) -> set[str]:
        """The classes a fit may consume: the primitives, never the held-out composition."""
        return {"poly", "sin"}

    def sample(self, kind: int, n: int, g: np.random.Generator) -> np.ndarray:
        """``n`` rows of class ``kind`` (both parameter blocks drawn; the unused one is ignored)."""
        return np.concatenate([np.full((n, 1), float(kind)), SIN.sample(n, g), POLY.sample(n, g)], axis=1)


@dataclass(frozen=True)
class PanelTasks:
    """The tasks of one panel as the embedding and the scaler see them (``family``, ``params``,
    ``values``), with each task's class name and its ordinal parameter (degree, a; NaN if none)."""

    family: Any  # a family: UnitEnergy, SinPoly or a ParametricFamily
    params: np.ndarray
    label: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.params)

    def values(self, x: np.ndarray, index=None) -> np.ndarray:
        """Values of the tasks (those at ``index``, default all) at ``x`` (n, m)."""
        return self.family(self.params if index is None else self.params[index], x)


def panel_tasks(panel: str, n: int, seed: int, dev: bool = False) -> tuple[PanelTasks, PanelTasks, int]:
    """(training tasks, held-out tasks, grid points) of ``panel``, drawn from the seed; with
    ``dev``, the panel's dev split (module docstring), whose every task is a training task of the
    real split."""
    g = rng(seed, "manifolds", panel, *(("dev",) if dev else ()))
    if panel.startswith("length"):
        ladder = FIGURE_LADDER if panel == "length" else POLYNOMIAL_LADDER
        ladder = dev_ladder(ladder) if dev else ladder
        lib = LadderSet.sample_library(ladder, n, g)
        held = ladder.sample_coefs(ladder.test_level, n, g)
        fam = UnitEnergy(ladder)
        return (
            PanelTasks(fam, lib.params, lib.region, lib.level.astype(float)),
            PanelTasks(fam, held, ladder.task_labels(held), np.full(n, float(ladder.test_level))),
            20,
        )
    if panel == "composition":
        sin_poly = SinPoly()
        train = np.concatenate([sin_poly.sample(0, n, g), sin_poly.sample(1, n, g)])
        held_rows = sin_poly.sample(3 if dev else 2, n, g)
        return (
            PanelTasks(sin_poly, train, sin_poly.task_labels(train), np.full(len(train), np.nan)),
            PanelTasks(sin_poly, held_rows, sin_poly.task_labels(held_rows), np.full(n, np.nan)),
            50,
        )
    if panel == "parametric":
        family = dev_family(QUADRATIC) if dev else QUADRATIC
        library = TaskSet.sample(family, {r: n for r in family.train_regions}, g)
        held_out = TaskSet.sample(family, {r: n for r in family.regions if r not in family.train_regions}, g)
        return (
            PanelTasks(family, library.params, library.region, library.params[:, 0]),
            PanelTasks(family, held_out.params, held_out.region, held_out.params[:, 0]),
            20,
        )
    raise ValueError(f"unknown panel {panel!r}")


def _observed(tasks: PanelTasks, m: int) -> Observations:
    """Each task observed on the panel's whole grid (App. H embeds a task from its curve)."""
    x = np.broadcast_to(tasks.family.grid(m), (len(tasks), m)).copy()
    y = tasks.values(x)
    # the query is the same curve: a unit-energy family is only defined on the whole grid
    return Observations(np.arange(len(tasks)), tasks.params, x, y, x, y)


def embeddings(
    train: PanelTasks, held: PanelTasks, m: int, profile: ManifoldProfile, seed: int, device: str = "cpu"
) -> dict:
    """Each representation of train + held-out tasks, fitted on ``train`` only, as
    ``{name: (high-dimensional vectors, PCA coordinates)}``:

    * ``gradient``: the probe's loss gradient (App. H), the probe, its PCA and the scaler fitted
      on the training tasks, the held-out tasks embedded afterwards;
    * ``curve``: the sanity baseline, the scaled curve values themselves with a PCA fitted on the
      training curves. The gradient at a fixed probe is an affine map of the curve values (the MSE
      loss's gradient is linear in y), so any structure the gradient map shows is a linear image
      of the curve's; this row says how much the probe adds.
    """
    from sklearn.decomposition import PCA

    scaler = FamilyScaler.fit(train, m=m)
    emb = ProxyEmbedding(
        "gradient",
        dim=min(profile.pca_dim, len(train)),
        width=profile.width,
        pretrain_steps=profile.pretrain_steps,
        seed=derive_seed(seed, "manifolds-probe"),
        device=device,
    )
    emb.fit_observed(scaler, train, _observed(train, m), m=m)
    obs = [_observed(tasks, m) for tasks in (train, held)]
    xy = [(scaler.x(o.ctx_x), scaler.y(o.ctx_y)) for o in obs]
    grads = np.concatenate([emb.raw(x, y) for x, y in xy])
    coords = np.concatenate([emb.project(x, y) for x, y in xy])
    _fit_x, fit_y = audit.consume(
        "curve-pca",
        audit.Batch((obs[0].ctx_x, obs[0].ctx_y), [audit.Source(train.family, train.params, ((0, 1, 0.0),))]),
    )
    pca = PCA(n_components=min(profile.pca_dim, m, len(train)), random_state=0).fit(scaler.y(fit_y))
    curves = np.concatenate([y for _, y in xy])
    return {"gradient": (grads, coords), "curve": (curves, pca.transform(curves))}


def two_d(panel: str, coords: np.ndarray, n_train: int) -> np.ndarray:
    """The 2-D map: Isomap (App. H: 15 neighbours for length, 20 for composition) fitted on the
    training rows and applied to the held-out ones, or the first two PCA components (parametric)."""
    if panel == "parametric":
        return coords[:, :2]
    from sklearn.manifold import Isomap

    iso = Isomap(n_neighbors=min(15 if panel.startswith("length") else 20, n_train - 1), n_components=2)
    iso.fit(coords[:n_train])
    return np.concatenate([iso.embedding_, iso.transform(coords[n_train:])])


# Degrees of the read-out polynomial in the map's two coordinates. Degree 2 makes a radial order
# (the paper's "concentric rings") readable as well as a direction; the dev split chose it
# (module docstring, docs/results.md "Task manifolds").
READOUTS = {"linear": 1, "quadratic": 2}
READOUT = "quadratic"


def readout(z: np.ndarray, order: np.ndarray, n_train: int, degree: int = READOUTS[READOUT]) -> np.ndarray:
    """A least-squares read-out of the parameter from the map, a polynomial of ``degree`` (1 or 2)
    in the two coordinates, fitted on the training rows only."""
    if degree not in READOUTS.values():
        raise TaskextrapError(f"read-out degree must be one of {sorted(READOUTS.values())}, got {degree!r}")
    u, v = (z - z[:n_train].mean(axis=0)).T / z[:n_train].std()
    terms = [np.ones(len(z)), u, v] + ([u * u, v * v, u * v] if degree == 2 else [])
    a = np.column_stack(terms)
    w, *_ = np.linalg.lstsq(a[:n_train], order[:n_train], rcond=None)
    return a @ w


def _ordered_regions(tasks: PanelTasks) -> list[str]:
    """The class names of ``tasks`` in the order of their mean parameter (F1_1 before F1_2)."""
    return sorted(set(tasks.label), key=lambda name: tasks.order[tasks.label == name].mean())


def map_measures(panel: str, raw: np.ndarray, z: np.ndarray, train: PanelTasks, held: PanelTasks) -> dict:
    """The diagnostics of one seed's map that need no read-out (module docstring): {metric: value}."""
    from scipy.stats import spearmanr
    from sklearn.manifold import trustworthiness
    from sklearn.metrics import silhouette_score

    n_train = len(train)
    labels = np.concatenate([train.label, held.label])
    out = {"trustworthiness": float(trustworthiness(raw, z, n_neighbors=min(5, len(z) // 2 - 1)))}
    if panel == "composition":
        # the caption's order: sin at the centre, the composition just outside, poly outside that
        out["silhouette"] = float(silhouette_score(z, labels))
        radius = np.linalg.norm(z - z[:n_train][train.label == "sin"].mean(axis=0), axis=1)
        out["spearman"] = float(spearmanr(radius, [RADIAL_RANK[lab] for lab in labels]).statistic)
    if panel == "parametric":
        (first, last), (far,) = _ordered_regions(train), _ordered_regions(held)
        c = {name: z[labels == name].mean(axis=0) for name in (first, last, far)}
        step = c[last] - c[first]
        out["relative-distance"] = float(np.linalg.norm(c[far] - (c[last] + step)) / np.linalg.norm(step))
    return out


def readout_measures(z: np.ndarray, train: PanelTasks, held: PanelTasks, degree: int) -> dict:
    """Spearman of a ``degree`` read-out against the parameter (held-out tasks included) and the
    share of held-out tasks read beyond the last training level's or region's median."""
    from scipy.stats import spearmanr

    n_train = len(train)
    order = np.concatenate([train.order, held.order])
    r = readout(z, order, n_train, degree)
    last = train.label == _ordered_regions(train)[-1]
    return {
        "spearman": float(spearmanr(r, order).statistic),
        "fraction": float(np.mean(r[n_train:] > np.median(r[:n_train][last]))),
    }


def measures(panel: str, raw: np.ndarray, z: np.ndarray, train: PanelTasks, held: PanelTasks) -> dict:
    """The panel's diagnostics (module docstring) on one seed's map: {metric: value}; the read-out
    measures (all panels but composition) with the chosen read-out, :data:`READOUT`."""
    out = map_measures(panel, raw, z, train, held)
    return out if panel == "composition" else {**readout_measures(z, train, held, READOUTS[READOUT]), **out}


def run_seed(profile: ManifoldProfile, seed: int, dev: bool = False, device: str = "cpu"):
    """Every panel and representation on one seed: {(panel, representation): (2-D map, class
    labels, held-out labels, measures)}. With ``dev``, the dev split's panels, and every other
    read-out's measures under ``<representation>-<name>-readout`` (measures only, no map)."""
    out: dict[tuple[str, str], tuple] = {}
    for panel in PANELS:
        train, held, m = panel_tasks(panel, profile.n_per_class, seed, dev)
        labels, held_labels = np.concatenate([train.label, held.label]), sorted(set(held.label))
        for rep, (high, coords) in embeddings(train, held, m, profile, seed, device).items():
            z = two_d(panel, coords, len(train))
            out[panel, rep] = (z, labels, held_labels, measures(panel, high, z, train, held))
            if dev and panel != "composition":  # the read-outs the dev split did not choose
                for name in READOUTS.keys() - {READOUT}:
                    out[panel, f"{rep}-{name}-readout"] = (
                        None,
                        None,
                        None,
                        readout_measures(z, train, held, READOUTS[name]),
                    )
    return out


MAP_NAMES = {"length": "isomap", "length-regime": "isomap", "composition": "isomap", "parametric": "pca"}
MAP_TITLES = {"isomap": "Isomap", "pca": "PCA"}
FIGURES = {"gradient": "manifolds.png", "curve": "manifolds-curve.png"}


def title(panel: str, labels: np.ndarray, held: list[str]) -> str:
    """A panel's title: its classes in order, the held-out ones marked, and the 2-D map."""
    names = list(dict.fromkeys(labels))  # the training classes first, in the panel's order
    if panel.startswith("length"):
        levels = sorted(int(name.split("-")[1]) for name in names)
        what = f"degrees {levels[0]}-{levels[-1]} ({', '.join(h.split('-')[1] for h in held)} held out)"
        what = ("the regime's ladder: " if panel == "length-regime" else "") + what
    else:
        what = ", ".join(f"{name} (held out)" if name in held else name for name in names)
        what = ("quadratic " if panel == "parametric" else "") + what
    return f"{panel}: {what}, {MAP_TITLES[MAP_NAMES[panel]]}"


@register(
    "manifolds",
    "App. H: 2-D maps of the gradient embedding (length, composition, parametric), fitted on training tasks only",
    PROFILES,
    options=("device",),
    dev=True,
)
def run_manifolds(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """One unit per seed computes the three panels (the dev split's with ``--split dev``); rows are
    their diagnostics (module docstring)."""
    options = settings.options
    profile = settings.profile
    dev = options.split == "dev"

    def compute(seed: int, plots: Path | None) -> UnitResult:
        t = time.perf_counter()
        maps = run_seed(profile, seed, dev, options.device)
        if plots is not None:
            from taskextrap.report.plots import plot_maps

            for rep, name in FIGURES.items():
                plot_maps(
                    plots / name,
                    [
                        (f"{rep}: {title(p, lab, held)}", z, lab, held)
                        for (p, r), (z, lab, held, _) in maps.items()
                        if r == rep
                    ],
                )
        errors = {f"{p}|{rep}|{k}": np.array([v]) for (p, rep), (*_, meas) in maps.items() for k, v in meas.items()}
        return UnitResult(errors, {"total_s": time.perf_counter() - t})

    units = seed_units(
        profile.seeds,
        name=lambda s: f"manifolds-seed{s}",
        config=lambda s: {
            "experiment": "manifolds",
            "profile": profile.to_dict(),
            "seed": s,
            "split": options.split,
            "device": options.device,
        },
        compute=compute,
        plot_dir=plot_dir,
        plot_file="manifolds.png",
    )

    def assemble(results):
        errs, timing = gather(results, units)
        rows = []
        for key, e in errs.items():
            panel, method, metric = key.split("|")
            rows.append(make_row("manifolds", panel, method, metric, np.stack(e, axis=1)))
        config = {
            "profile": profile.to_dict(),
            "panels": list(PANELS),
            "fitted_on": "training tasks only; held-out tasks projected afterwards",
            "maps": MAP_NAMES,
            "isomap_neighbours": {"length": 15, "length-regime": 15, "composition": 20},
            "readout": READOUT,
            "readouts": READOUTS,
        }
        return rows, config, list(profile.seeds), timing

    return Plan(units, assemble)
