"""The paper's parameter-extrapolation families (Appendix F; reference section 2.1), Fig. 1's
projectile, and the paper's primitive sets of the composition regime (Section 3.3, App. B.1.2)."""

from __future__ import annotations

import dataclasses

import numpy as np

from taskextrap.tasks.chains import DEPTH3_FAMILIES, PAPER_RECIPE_SPLIT
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.primitives import PAPER_SPLIT, PRIMITIVE_FAMILIES, CompositionFamily
from taskextrap.tasks.specs import register_builtins

PERIOD = 20.0 / 7.0
G = 9.81


def _quadratic(x, a, b, c):
    return a * x**2 + b * x + c


def _cubic(x, a3, b3, c3):
    return a3 / 400.0 * (x - 10.0) ** 3 + b3 / 10.0 * (x - 10.0) + c3


def _exp(x, beta, alpha, c0):
    return alpha * (np.exp(beta * (x - 10.0)) - 1.0) + c0


def _sin_trend(x, s, A):
    return s * x + A * 0.5 * np.sin(2.0 * np.pi * x / PERIOD)


def _tri_trend(x, s, A):
    frac = x / PERIOD - np.floor(x / PERIOD)
    return s * x + A * (2.0 * np.abs(2.0 * frac - 1.0) - 0.5)


def _projectile(x, v, theta):
    t = np.deg2rad(theta)
    return x * np.tan(t) - G * x**2 / (2.0 * v**2 * np.cos(t) ** 2)


def _three_regions(lo: float, width: float) -> dict[str, tuple[float, float]]:
    return {
        "F1_1": (lo, lo + width),
        "F1_2": (lo + width, lo + 2 * width),
        "F2": (lo + 2 * width, lo + 3 * width),
    }


QUADRATIC = ParametricFamily(
    name="quadratic",
    fn=_quadratic,
    domain=(0.0, 20.0),
    shift="a",
    fixed={"b": (-2.0, 2.0), "c": (-2.0, 2.0)},
    regions=_three_regions(0.5, 1.0),
    description="a x^2 + b x + c",
)
CUBIC = ParametricFamily(
    name="cubic",
    fn=_cubic,
    domain=(0.0, 20.0),
    shift="a3",
    fixed={"b3": (2.0, 4.0), "c3": (-2.0, 2.0)},
    regions=_three_regions(0.5, 1.0),
    description="(a3/400)(x-10)^3 + (b3/10)(x-10) + c3",
)
EXP = ParametricFamily(
    name="exp",
    fn=_exp,
    domain=(0.0, 20.0),
    shift="beta",
    fixed={"alpha": (1.0, 2.0), "c0": (-1.0, 1.0)},
    regions=_three_regions(0.05, 0.05),
    description="alpha (exp(beta (x-10)) - 1) + c0",
)
SIN_TREND = ParametricFamily(
    name="sin_trend",
    fn=_sin_trend,
    domain=(0.0, 20.0),
    shift="s",
    fixed={"A": (0.5, 1.0)},
    regions=_three_regions(0.1, 0.1),
    description="s x + 0.5 A sin(2 pi x / P), P = 20/7",
)
TRI_TREND = ParametricFamily(
    name="tri_trend",
    fn=_tri_trend,
    domain=(0.0, 20.0),
    shift="s",
    fixed={"A": (0.5, 1.0)},
    regions=_three_regions(0.1, 0.1),
    description="s x + A (tri(x) - 0.5), tri(u) = 2|2 frac(u/P) - 1|, P = 20/7",
)
PROJECTILE = ParametricFamily(
    name="projectile",
    fn=_projectile,
    domain=(0.0, 450.0),
    shift="v",
    fixed={"theta": (40.0, 50.0)},
    regions={"train": (30.0, 60.0), "target": (65.0, 65.0)},
    train_regions=("train",),
    description="x tan(theta) - g x^2 / (2 v^2 cos^2 theta), g = 9.81 (theta in degrees)",
)

PARAMETER_FAMILIES = {f.name: f for f in (QUADRATIC, CUBIC, EXP, SIN_TREND, TRI_TREND)}

# App. B.1.1: regions beyond F2, each one F2-width further out (quadratic a: F3 = [3.5, 4.5],
# F4 = [4.5, 5.5], F5 = [5.5, 6.5]); they exist only in the multi-step families below, so the
# Table-1 families (and the cache keys of their runs) are unchanged.
FAR_REGIONS = ("F3", "F4", "F5")


def with_far_regions(family: ParametricFamily, names: tuple[str, ...] = FAR_REGIONS) -> ParametricFamily:
    """``family`` with regions ``names`` appended beyond F2, each as wide as F2 (held out: no
    fit ever sees them)."""
    lo, hi = family.regions["F2"]
    width = hi - lo
    far = {name: (round(hi + i * width, 12), round(hi + (i + 1) * width, 12)) for i, name in enumerate(names)}
    return dataclasses.replace(family, regions={**family.regions, **far})


MULTISTEP_FAMILIES = {name: with_far_regions(f) for name, f in PARAMETER_FAMILIES.items()}
register_builtins("parameter", PARAMETER_FAMILIES)  # a saved library names them by table (tasks.specs)
register_builtins("multistep", MULTISTEP_FAMILIES)


# The composition regime's primitive sets (``--family`` of the composition experiments). Both
# carry the paper's pair split (Table 3: train P o S etc., test S o P, T o S, P o T) and its
# depth-3 recipe split (App. B.1.2: no recipe applies tanh directly to a sin output).
# poly-sin-tanh: the authors' composition primitives (reference §7.1), the default of
# composition, composition-ablations and composition-em; poly-sin-tanh-rescaled: the authors'
# depth-3 primitives, each rescaled to [-5, 5] on the domain (reference §8.1), the default of
# composition-depth3.
POLY_SIN_TANH = CompositionFamily(
    "poly-sin-tanh",
    PRIMITIVE_FAMILIES,
    PAPER_SPLIT,
    recipe_split=PAPER_RECIPE_SPLIT,
    description="a x^2 + b x + c, A sin(w x + phi), A tanh(w (x - c)) on [-5, 5]",
)
POLY_SIN_TANH_RESCALED = CompositionFamily(
    "poly-sin-tanh-rescaled",
    DEPTH3_FAMILIES,
    PAPER_SPLIT,
    grid=(-6.0, 6.0, 601),
    recipe_split=PAPER_RECIPE_SPLIT,  # the curves of DEPTH3_GRID
    description="poly, sin, tanh each rescaled to [-5, 5] on [-5, 5] (the depth-3 primitives)",
)

PRIMITIVE_SETS = {s.name: s for s in (POLY_SIN_TANH, POLY_SIN_TANH_RESCALED)}
