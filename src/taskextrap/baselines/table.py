"""The method table: every baseline and classic an experiment shows as a row, by name.

An entry is a method class (``baselines.method.Method``) with its constructor arguments, the
regimes whose tables show it and whether it is a dev variant (a row of the ``dev`` split only,
scored there so a setting can be chosen). Every experiment with array targets reads its rows
from here (:func:`method_rows`), fits them beside its estimator (:func:`begin_methods`), and
``taskextrap evaluate`` compares a user's model with the entries of the ``observed`` regime; the
docs' method list is rendered from it. A new method is one class and one :func:`register_method`
call: a user's module may register its own before a run.

    >>> from taskextrap.baselines.table import method_rows
    >>> method_rows("parameter")
    ('ctx-interp', 'ctx-polyfit', 'library-best-fit', 'ctx-gp', 'meta-gp', 'cnp')
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskextrap.baselines.classics import (
    CHOSEN,
    SCORED_AFTER,
    VARIANTS,
    CtxGP,
    LibraryGP,
    NeuralProcess,
    variant_settings,
)
from taskextrap.baselines.context import CtxInterp, CtxPolyfit, LibraryBestFit
from taskextrap.baselines.library_shape import LibraryFPCA, LibraryMean, LibraryNearest
from taskextrap.baselines.method import Method, SharedDraws
from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.estimators.base import PendingFit
from taskextrap.tasks.regimes import REGIMES as ALL_REGIMES

# The regimes whose targets are arrays (ctx_x, ctx_y) -> (n, q): the experiments' and `evaluate`'s
# (tasks.regimes; the language-model regimes have no method table).
REGIMES = tuple(ALL_REGIMES)


@dataclass(frozen=True)
class MethodEntry:
    """One row of the table: ``name`` is ``cls(**params)``, shown in ``regimes`` (on the dev split
    only where ``dev``)."""

    name: str
    cls: type[Method]
    params: tuple[tuple[str, Any], ...] = ()
    regimes: tuple[str, ...] = REGIMES
    dev: bool = False

    @property
    def interval(self) -> bool:
        """Whether the method gives its own predictive interval (coverage and width rows)."""
        return self.cls.interval

    @property
    def summary(self) -> str:
        """The first sentence of the class's docstring, in markdown (the docs' method list)."""
        paragraph = " ".join((self.cls.__doc__ or "").strip().split("\n\n")[0].split())
        sentence = paragraph.split(". ")[0].rstrip(".")
        sentence = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", sentence)  # a Sphinx role as code
        return sentence.replace("``", "`")

    def build(self, **unit) -> Method:
        """The unfitted method: its arguments, plus those of ``unit`` (a unit's ``seed`` and
        ``device``) that the class takes and the entry does not fix."""
        params = dict(self.params)
        fields = {f.name for f in dataclasses.fields(self.cls) if f.init}  # type: ignore[arg-type]
        return self.cls(**params, **{k: v for k, v in unit.items() if k in fields and k not in params})


_TABLE: dict[str, MethodEntry] = {}


def register_method(
    name: str, cls: type[Method], *, regimes: Sequence[str] = REGIMES, dev: bool = False, **params
) -> MethodEntry:
    """Add ``name`` to the table as ``cls(**params)``, a row of ``regimes`` (of their dev split
    only where ``dev``). A name already in the table, a class that is not a ``Method`` or an
    argument it does not take is a one-line error.

    Returns:
        MethodEntry: the new entry.
    """
    if not isinstance(name, str) or not name:
        raise TaskextrapError(f"a method's name must be a non-empty string, got {name!r}")
    if name in _TABLE:
        raise TaskextrapError(f"method {name!r} is already in the table")
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise TaskextrapError(f"method {name!r}: cls must be a subclass of baselines.method.Method")
    unknown = sorted(set(regimes) - set(ALL_REGIMES))
    if unknown:
        raise TaskextrapError(f"method {name!r}: unknown regime {unknown[0]!r}; choose from {list(ALL_REGIMES)}")
    fields = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise TaskextrapError(
            f"method {name!r}: {cls.__name__} has no parameter {unknown[0]!r}; its parameters: {', '.join(fields)}"
        )
    entry = MethodEntry(name, cls, tuple(params.items()), tuple(regimes), bool(dev))
    entry.build()  # a bad argument fails here, in one line, before the entry is kept
    _TABLE[name] = entry
    return entry


def unregister_method(name: str) -> None:
    """Remove ``name`` from the table (a user's or a test's own method)."""
    get_method(name)
    del _TABLE[name]


def get_method(name: str) -> MethodEntry:
    """The entry of ``name`` (a one-line error naming the table's methods otherwise)."""
    if name not in _TABLE:
        raise TaskextrapError(
            f"unknown method {name!r}; the table has {', '.join(_TABLE)}" + did_you_mean(name, _TABLE)
        )
    return _TABLE[name]


def method_rows(regime: str, dev: bool = False) -> tuple[str, ...]:
    """The table's rows of ``regime``, in the table's order: its plain methods, or with ``dev``
    its dev variants (the rows a ``dev`` split adds)."""
    if regime not in ALL_REGIMES:
        raise TaskextrapError(f"unknown regime {regime!r}; choose from {list(ALL_REGIMES)}")
    return tuple(e.name for e in _TABLE.values() if regime in e.regimes and e.dev == dev)


def is_method(name: str) -> bool:
    """Whether ``name`` is a row of the table."""
    return name in _TABLE


def is_dev_row(name: str) -> bool:
    """Whether ``name`` is a dev variant of the table (a row only a ``dev`` split adds)."""
    return name in _TABLE and _TABLE[name].dev


def has_own_interval(name: str) -> bool:
    """Whether ``name`` is a row of the table whose method gives its own interval: its coverage
    and width rows, calibrated on the dev split as rte's are, beside a ``-uncalibrated`` row of the
    raw interval (``experiments.discrete.interval_rows``)."""
    return name in _TABLE and _TABLE[name].interval


def begin_methods(
    names: Sequence[str], library, shared: SharedDraws, variants: dict[str, str] | None = None, **unit
) -> tuple[dict[str, Method], dict[str, PendingFit], dict[str, float]]:
    """The table's methods ``names`` begun on ``library`` beside a unit's estimator (its
    ``shared`` draws; ``unit``: the unit's ``seed`` and ``device``), for their networks to train
    with the estimator's (``estimators.base.fit_together``). A row named in ``variants`` is built
    as the variant it maps to (a regime's own dev choice: ``classics.chosen``). Rows that are the
    same method (``meta-gp`` and its dev variant ``meta-gp-rbf+linear``) share one fit.

    Returns:
        (the method of each name; the pending fit of each distinct method with networks to
        train or work to run beside them, by the first name it has (the others are fitted now);
        the seconds each distinct method's fit took without its networks, as ``<name>_fit_s``:
        its work beside adds its own seconds to this dict when it has run)
    """
    built: dict[str, Method] = {}
    first: dict[str, str] = {}  # a method's repr -> the first name it was begun under
    pending: dict[str, PendingFit] = {}
    timing: dict[str, float] = {}
    for name in names:
        method = get_method((variants or {}).get(name, name)).build(**unit)
        key = repr(method)
        if key not in first:
            t = time.perf_counter()
            begun = method.begin_fit(library, shared)
            seconds = f"{name}_fit_s"
            if begun.jobs or begun.work:
                begun.work = [_timed(work, timing, seconds) for work in begun.work]
                pending[name] = begun
            else:  # nothing to train: done now
                begun.finish()
            timing[seconds] = time.perf_counter() - t
            first[key], built[name] = name, method
        else:
            built[name] = built[first[key]]
    return built, pending, timing


def _timed(work, timing: dict[str, float], key: str):
    """``work`` that adds its seconds to ``timing[key]`` when it has run."""

    def run() -> None:
        t = time.perf_counter()
        work()
        timing[key] += time.perf_counter() - t

    return run


def markdown() -> str:
    """The table as markdown (the docs' method list, docs/methods.md): each row's name, class and
    arguments, regimes, whether it gives its own interval, and what it is."""
    lines = ["| method | class (arguments) | regimes | own interval | what it is |", "|---|---|---|:---:|---|"]
    for e in _TABLE.values():
        args = ", ".join(f"{k}={v!r}" for k, v in e.params)
        regimes = ", ".join(e.regimes)
        if e.dev:  # a dev row, or (in no regime's table) a variant scored after the dev files
            regimes = f"dev split of {regimes}" if regimes else "scored after the dev files"
        summary, own = e.summary.replace("|", "\\|"), "yes" if e.interval else ""
        lines.append(f"| `{e.name}` | `{e.cls.__name__}({args})` | {regimes} | {own} | {summary} |")
    return "\n".join(lines)


# The regimes whose dev split scores the classics' variants (each chooses its own: classics.chosen)
VARIANT_REGIMES = ("parameter", "length", "composition", "composition-depth3")


def _builtin() -> None:
    register_method("ctx-interp", CtxInterp)
    register_method("ctx-polyfit", CtxPolyfit)
    register_method("library-best-fit", LibraryBestFit)
    register_method("ctx-gp", CtxGP)
    # the library-shape peers (baselines.library_shape): for a user's library (fit / evaluate)
    register_method("library-mean", LibraryMean, regimes=("observed",))
    register_method("library-knn", LibraryNearest, regimes=("observed",))
    register_method("library-fpca", LibraryFPCA, regimes=("observed",))
    # the classics fitted on the library: in every experiment's table and beside a user's model
    # (fit / evaluate train them with the model's protocol and optimiser settings: workflow.peer_unit)
    register_method("meta-gp", LibraryGP, **variant_settings(CHOSEN["meta-gp"]))
    register_method("cnp", NeuralProcess, **variant_settings(CHOSEN["cnp"]))
    for name, params in VARIANTS.items():  # scored on the dev split of each regime that trains them
        cls = LibraryGP if name.startswith("meta-gp") else NeuralProcess
        register_method(name, cls, regimes=VARIANT_REGIMES, dev=True, **params)
    for name, params in SCORED_AFTER.items():  # no table's row: built by name when a regime chooses one
        register_method(name, NeuralProcess, regimes=(), dev=True, **params)


_builtin()
