"""The regimes of task extrapolation, each one registered object: its observation protocols, its
library type (which saves itself), the modules of its saveable estimators, its default Gamma, its keys among the
dev-chosen interval scales and whether ``reproduce --calibrate`` serves its experiment.

What reads a regime reads it here: ``get_protocol`` (its protocols), ``estimators.saving`` (the
estimator modules it imports to find a saved class), the method table (``baselines.table``: its
rows' regimes), the experiment registry (an experiment's ``regime``), the experiments' default
embedding and the runner's ``--calibrate``. The estimators sit above this layer, so they are
named by module, never imported here.

    >>> get_regime("length").protocols["strict"].n_context
    8
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.tasks.ladder import LadderSet
from taskextrap.tasks.observe import PROTOCOLS, ObservationProtocol
from taskextrap.tasks.primitives import PrimitiveSet
from taskextrap.tasks.specs import Stateful
from taskextrap.tasks.taskset import TaskSet


@dataclass(frozen=True)
class Regime:
    """One regime.

    Attributes:
        name: its name (an experiment's ``regime``, a method table row's regime).
        protocols: its observation protocols by name (the point counts differ between regimes).
        library: its library type (``TaskSet``, ``LadderSet``, ``PrimitiveSet``): a class with
            ``state(prefix)`` and ``from_state(arrays, desc, prefix)``, which saving reads.
        estimators: the modules that hold its saveable estimators (imported by name when a
            saved model is read).
        embedding: its default Gamma (measured: benchmarks/run.py and docs/results.md).
        scale_keys: its keys in ``search/interval_scales.json`` (the dev-chosen interval scales).
        calibrated: ``reproduce --calibrate`` serves its experiment of the same name.
    """

    name: str
    protocols: Mapping[str, ObservationProtocol]
    library: type[Stateful]
    estimators: tuple[str, ...]
    embedding: str
    scale_keys: tuple[str, ...] = ()
    calibrated: bool = False


REGIMES: dict[str, Regime] = {}


def register_regime(regime: Regime) -> Regime:
    """Add ``regime`` (a one-line error for a second one of its name) and return it."""
    if regime.name in REGIMES:
        raise TaskextrapError(f"a regime named {regime.name!r} is registered already")
    REGIMES[regime.name] = regime
    return regime


def get_regime(name: str) -> Regime:
    """The regime ``name`` (a one-line error naming the registered ones otherwise)."""
    if not isinstance(name, str) or name not in REGIMES:
        raise TaskextrapError(
            f"unknown regime {name!r}; choose from {sorted(REGIMES)}" + did_you_mean(str(name), REGIMES)
        )
    return REGIMES[name]


def get_protocol(spec: str | ObservationProtocol, regime: str = "parameter") -> ObservationProtocol:
    """A protocol by name (from ``regime``'s table), or the protocol itself."""
    if isinstance(spec, ObservationProtocol):
        return spec
    if not isinstance(spec, str):
        raise TaskextrapError(f"protocol must be a protocol name or an ObservationProtocol, got {type(spec).__name__}")
    table = get_regime(regime).protocols
    if spec not in table:
        raise TaskextrapError(f"unknown protocol {spec!r}; choose from {sorted(table)}" + did_you_mean(spec, table))
    return table[spec]


def _strict(n_context: int, n_query: int) -> ObservationProtocol:
    """``strict`` of a regime: ``n_context`` noisy context points in the first half of the
    domain, ``n_query`` queries in the second."""
    return ObservationProtocol(
        "strict", n_context=n_context, n_query=n_query, context_span=(0.0, 0.5), query_span=(0.5, 1.0), noise=0.02
    )


# The paper's point counts differ between regimes (reference §5.1, §7.1, §8.1).
register_regime(
    Regime(
        "parameter",
        PROTOCOLS,
        TaskSet,
        ("taskextrap.estimators.parameter", "taskextrap.estimators.multistep"),
        "gradient",
        ("parameter-objective", "parameter-proxy", "parameter-multistep"),  # the chained RTE: none chosen
        calibrated=True,
    )
)
register_regime(
    Regime(
        "length",
        # 16 uniform points: 8 context + 8 queries (the authors' head/tail convention); strict: 8
        # noisy context points (a degree-9 polynomial has 10 coefficients: the context alone cannot pin it)
        {"paper": ObservationProtocol("paper", n_context=8, n_query=8), "strict": _strict(8, 8)},
        LadderSet,
        ("taskextrap.estimators.length",),
        "adapted",
        ("length",),
        calibrated=True,
    )
)
register_regime(
    Regime(
        "composition",
        # 50 uniform points: 25 context + 25 queries; strict: 12 noisy context points
        {"paper": ObservationProtocol("paper", n_context=25, n_query=25), "strict": _strict(12, 25)},
        PrimitiveSet,
        ("taskextrap.estimators.composition", "taskextrap.estimators.composition_em"),
        "adapted",
        ("composition",),
        calibrated=True,
    )
)
register_regime(
    Regime(
        "composition-depth3",
        # 100 uniform points: 50 context + 50 queries; strict: 25 noisy context points
        {"paper": ObservationProtocol("paper", n_context=50, n_query=50), "strict": _strict(25, 50)},
        PrimitiveSet,
        ("taskextrap.estimators.composition_depth3",),
        "adapted",
        ("composition-depth3",),
        calibrated=True,
    )
)
# A user's observed curves (``taskextrap fit`` / ``evaluate``): the parameter regime's estimator on
# a library read from data files; its interval scale is chosen on the data's own dev split.
register_regime(Regime("observed", PROTOCOLS, TaskSet, ("taskextrap.estimators.parameter",), "gradient"))
