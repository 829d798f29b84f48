"""Experiments registered by name (DESIGN.md's list); each returns rows for results.json."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.tasks.regimes import get_regime

from taskextrap.experiments.options import (  # noqa: F401 - the run's options, read here and re-exported
    FRESH_TEST_SEED,
    OPTION_FLAGS,
    SPLITS,
    RunOptions,
)
from taskextrap.experiments.settings import Settings, resolve_family


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``run(settings, cache_dir, plot_dir)`` returns the
    :class:`~taskextrap.experiments.units.Plan` of its units (``settings``: what :meth:`check`
    resolved); one that takes ``shard`` returns None in a non-lead process of ``options.shard``.

    ``profiles`` is its profile table (name -> profile); ``options`` the names of the
    :data:`OPTION_FLAGS` it takes (any other one set is refused before anything runs);
    ``regime`` the protocol table its ``--protocol`` is looked up in.
    """

    name: str
    run: Callable
    description: str
    profiles: dict
    options: frozenset = frozenset()
    regime: str | None = None
    in_all: bool = True
    dev: bool = False  # has a dev split (--split dev)
    family: Callable | None = None  # resolves and checks a --family spec (raises TaskextrapError)

    def check(self, options: RunOptions) -> Settings:
        """``options`` resolved once (:class:`~taskextrap.experiments.settings.Settings`: the
        profile with the run's seeds, the protocol, the ``--family`` object), or a one-line error
        for an option this experiment does not take, a ``--model`` directory (or hub model,
        ``llm.hub.resolve_model``) that fails the cheap checks (``llm.modeldir.check_model_dir``),
        an unknown profile or protocol, a dev split it does not have, or a ``--family`` that
        cannot be loaded or fails its check on a small sample; nothing is computed before this
        passes.

        Returns:
            The :class:`~taskextrap.experiments.settings.Settings` every part of the run reads.
        """
        refused = sorted(options.given() - self.options)
        if refused:
            takes = ", ".join(OPTION_FLAGS[o] for o in sorted(self.options))
            raise TaskextrapError(
                f"{self.name} does not take {', '.join(OPTION_FLAGS[o] for o in refused)}; "
                + (
                    f"of the experiment-specific options it takes {takes}"
                    if takes
                    else "it takes no experiment-specific option"
                )
            )
        if options.extra.get("model") is not None:  # a bad --model fails now, not after minutes of work
            from taskextrap.llm.hub import resolve_model
            from taskextrap.llm.modeldir import check_model_dir

            check_model_dir(resolve_model(options.extra["model"]))  # a hub id is fetched (or found cached) here
        if options.profile not in self.profiles:
            raise TaskextrapError(
                f"unknown profile {options.profile!r} for {self.name}; choose from "
                f"{', '.join(sorted(self.profiles))}" + did_you_mean(options.profile, self.profiles)
            )
        profile = self.profiles[options.profile]
        if options.seeds is not None or options.seed is not None:  # bounded: a typo is refused here
            profile = profile.with_seeds(options.seeds, options.seed)
        protocol = None
        if self.regime is not None:
            from taskextrap.tasks.regimes import get_protocol

            protocol = get_protocol(options.protocol, self.regime)
        if options.embedding is not None:
            from taskextrap.embed import check_embedding

            check_embedding(options.embedding)
        # imported and evaluated on a small sample, before any work
        family, family_hash = resolve_family(options.family, self.family)
        if options.split == "dev" and not self.dev:
            raise TaskextrapError(
                f"{self.name} has no dev split yet; dev splits: "
                f"{', '.join(n for n, e in EXPERIMENTS.items() if e.dev) or 'none'}"
            )
        return Settings(options, profile, protocol, family, family_hash)


EXPERIMENTS: dict[str, Experiment] = {}


def register(
    name: str,
    description: str,
    profiles: dict,
    options=(),
    regime: str | None = None,
    in_all: bool = True,
    dev: bool = False,
    family: Callable | None = None,
):
    """Decorator that registers an experiment function under ``name`` (see :class:`Experiment`).

    ``in_all=False`` keeps it out of ``reproduce all`` (e.g. while its default model is not shipped);
    ``options`` with ``"shard"`` says it can split its work over processes (``taskextrap.sharding``);
    ``dev=True`` says it honours ``RunOptions.split == "dev"``; ``family`` resolves and checks its
    ``--family`` option before the run starts.
    """
    unknown = set(options) - set(OPTION_FLAGS)
    if unknown:
        raise ValueError(f"unknown experiment options {sorted(unknown)}")
    if regime is not None:
        get_regime(regime)  # a registered regime (tasks.regimes), or one line naming those there are

    if name in EXPERIMENTS:  # a second experiment of one name would replace the first without a word
        raise TaskextrapError(
            f"an experiment named {name!r} is registered already (by {EXPERIMENTS[name].run.__module__})"
        )

    def deco(fn):
        EXPERIMENTS[name] = Experiment(name, fn, description, profiles, frozenset(options), regime, in_all, dev, family)
        return fn

    return deco


# The built-in experiments in the order the paper presents them (`taskextrap list`, the help):
# Fig. 1, Table 1 and its appendices, Table 2, Table 3, Table 4, Table 5, then the appendix-only
# ones. `reproduce all` runs them in experiments.catalogue's import order instead, chosen for cache reuse.
PAPER_ORDER = (
    "projectile",
    "parameter",
    "parameter-ablations",
    "parameter-multistep",
    "length",
    "length-ablations",
    "composition",
    "composition-ablations",
    "composition-depth3",
    "composition-em",
    "parity",
    "codeio",
    "codeio-em",
    "manifolds",
    "llm-geometry",
)


def family_kind(experiment: Experiment) -> type | None:
    """The kind of object ``experiment``'s ``--family`` names: the class its resolver returns
    (``ParametricFamily``, ``Ladder``, ``CompositionFamily``, read off the resolver's return
    annotation), or None when it takes no ``--family`` or its resolver does not say."""
    import typing

    if experiment.family is None:
        return None
    try:
        kind = typing.get_type_hints(experiment.family).get("return")
    except (NameError, TypeError):  # an annotation naming what the resolver's module cannot see
        return None
    return kind if isinstance(kind, type) else None
