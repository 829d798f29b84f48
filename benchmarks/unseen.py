"""Task families the project never designed for, to check that RTE's edge over a plain library
lookup is not an artefact of the five built-in families and the polynomial ladder.

Neither family was looked at before its runs: every setting is the one the dev split chose for
the built-ins. ``python benchmarks/run.py --only unseen`` runs ``parameter`` on :data:`logistic`
and ``length`` on :data:`sine`, quick profile, both protocols (``unseen-*.json``).
"""

import numpy as np

from taskextrap.tasks import ParametricFamily
from taskextrap.tasks.ladder import Ladder

# a sigmoid whose steepness k is extrapolated: gentle in training, steep in F2
logistic = ParametricFamily(
    name="logistic",
    fn=lambda x, A, c, k: A / (1.0 + np.exp(-k * (x - c))),
    domain=(-5.0, 5.0),
    fixed={"A": (0.5, 1.5), "c": (-1.0, 1.0)},
    shift="k",
    regions={"F1_1": (0.5, 1.0), "F1_2": (1.0, 1.5), "F2": (1.5, 2.0)},
)


def _sine_basis(x, p):
    """Term p of the sine ladder: a constant, then sin(p x)."""
    return np.ones_like(x) if p == 0 else np.sin(p * x)


# a trigonometric ladder: levels 1-5 in the library, level 6 (one more frequency) held out
sine = Ladder("sine", basis=_sine_basis, domain=(-np.pi, np.pi), train_levels=(1, 2, 3, 4, 5), test_level=6)


def _chebyshev_basis(x, p):
    """Term p of the Chebyshev ladder: T_p(x)."""
    return np.cos(p * np.arccos(np.clip(x, -1.0, 1.0)))


# the ladder of the interval-calibration finding (issue 45): levels 1-4 in the library, 5 held out
chebyshev = Ladder("chebyshev", basis=_chebyshev_basis, domain=(-1.0, 1.0), train_levels=(1, 2, 3, 4), test_level=5)
