"""Experiments registered by name (DESIGN.md's list); each returns rows for results.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.sharding import Shard

SPLITS = ("test", "dev")
# The final tables are drawn from this seed, which no development run used. The tables before
# the integrity review used 10_000 (``--test-seed 10000`` reproduces them).
FRESH_TEST_SEED = 31_337


# The options only some experiments take, with the command-line flags that set them. Every
# experiment takes the others (profile, seeds, out, split, plots, progress).
OPTION_FLAGS = {
    "protocol": "--protocol",
    "family": "--family",
    "embedding": "--embedding",
    "anchors": "--anchors",
    "device": "--device",
    "extra": "--model/--dtype/--load-in-4bit",
    "shard": "--shard",
    "test_seed": "--test-seed",
    "split_seed": "--split-seed",
}


@dataclass
class RunOptions:
    """Everything a run needs; the CLI and the Python API both build one."""

    profile: str = "quick"
    protocol: str = "paper"
    family: str | None = None
    seeds: int | None = None
    out: Path = Path("runs")
    device: str = "cpu"
    embedding: str | None = None  # None: the regime's default (see each experiment)
    anchors: int = 2
    plots: bool = True
    progress: bool = True
    extra: dict = field(default_factory=dict)
    shard: Shard = field(default_factory=Shard)  # this process's part of a run split over several
    split: str = "test"  # "test": the real held-out tasks; "dev": a pseudo-extrapolation inside training
    test_seed: int | None = None  # None: FRESH_TEST_SEED; 10_000 is the seed of the runs before it
    split_seed: int | None = None  # codeio: the seed of the pair split (None: the experiment's default)
    run_dir: Path | None = None  # set by the runner: where results.json and run files (prompts.jsonl) go
    seed: int | None = None  # one training seed (a Slurm array task's), instead of the first ``seeds``
    executor: str = "serial"  # where the units run: "serial" (this process) or "ray" (experiments.executors)
    unit_cpus: int = 1  # torch threads of each unit (under Ray also the CPUs its task declares); in its key
    units_per_gpu: int = 1  # Ray tasks sharing one GPU at once (each declares 1/N of a GPU); not in a key
    # {method: scale} chosen on this family's own dev split (reproduce --calibrate): the intervals'
    # coverage rows are read from the raw curve at that scale (search.calibration.recalibrated)
    interval_scales: dict | None = None

    def __post_init__(self):
        if self.split not in SPLITS:
            raise TaskextrapError(f"unknown split {self.split!r}; choose from {', '.join(SPLITS)}")
        from taskextrap.experiments.executors import EXECUTORS

        if self.executor not in EXECUTORS:
            raise TaskextrapError(f"unknown executor {self.executor!r}; choose from {', '.join(EXECUTORS)}")
        if isinstance(self.unit_cpus, bool) or not isinstance(self.unit_cpus, int) or self.unit_cpus < 1:
            raise TaskextrapError(f"unit_cpus must be a whole number >= 1, got {self.unit_cpus!r}")
        if isinstance(self.units_per_gpu, bool) or not isinstance(self.units_per_gpu, int) or self.units_per_gpu < 1:
            raise TaskextrapError(f"units_per_gpu must be a whole number >= 1, got {self.units_per_gpu!r}")
        if self.units_per_gpu > 1 and (self.executor != "ray" or not self.device.startswith("cuda")):
            raise TaskextrapError(
                "--units-per-gpu shares a GPU between units run as Ray tasks: "
                "give it with --executor ray and --device cuda"
            )
        if self.seed is not None and self.seeds is not None:
            raise TaskextrapError("give --seeds N (seeds 0..N-1) or --seed S (that one seed), not both")
        if self.executor == "ray" and self.shard.count > 1:
            raise TaskextrapError(
                "--executor ray does not combine with --shard (or torchrun/Slurm ranks): Ray spreads the units itself"
            )

    def given(self) -> set[str]:
        """The experiment-specific options set to something other than their defaults (see
        :data:`OPTION_FLAGS`): what an experiment that does not take them must refuse."""
        defaults = RunOptions()
        return {name for name in OPTION_FLAGS if getattr(self, name) != getattr(defaults, name)}

    @property
    def seed_of_tests(self) -> int:
        """The seed of the test (or dev) draws: ``test_seed``, else :data:`FRESH_TEST_SEED`."""
        return FRESH_TEST_SEED if self.test_seed is None else int(self.test_seed)


def builtin_spec(options: RunOptions) -> bool:
    """Whether the run's tasks are built-in ones (no ``--family``, or a built-in's name), not a
    user's ``module:attr``: what decides whether a dev-chosen interval scale was chosen for them
    (``search.calibration.scale_source``)."""
    return options.family is None or ":" not in str(options.family)


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``run(options, cache_dir, plot_dir) -> (rows, config, seeds, timing)``;
    one that takes ``shard`` returns None in a non-lead process of ``options.shard``.

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

    def check(self, options: RunOptions) -> None:
        """A one-line error for an option this experiment does not take, a ``--model`` directory
        (or hub model, ``llm.hub.resolve_model``) that fails the cheap checks
        (``llm.modeldir.check_model_dir``), an unknown profile or
        protocol, a dev split it does not have, or a ``--family`` that cannot be loaded or fails
        its check on a small sample; nothing is computed before this passes."""
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
        if options.seeds is not None or options.seed is not None:  # bounded: a typo is refused here
            self.profiles[options.profile].with_seeds(options.seeds, options.seed)
        if self.regime is not None:
            from taskextrap.tasks.observe import get_protocol

            get_protocol(options.protocol, self.regime)
        if options.embedding is not None:
            from taskextrap.embed import check_embedding

            check_embedding(options.embedding)
        if options.family is not None and self.family is not None:
            self.family(options.family)  # imported and evaluated on a small sample, before any work
        if options.split == "dev" and not self.dev:
            raise TaskextrapError(
                f"{self.name} has no dev split yet; dev splits: "
                f"{', '.join(n for n, e in EXPERIMENTS.items() if e.dev) or 'none'}"
            )


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

    def deco(fn):
        EXPERIMENTS[name] = Experiment(name, fn, description, profiles, frozenset(options), regime, in_all, dev, family)
        return fn

    return deco


def get_experiment(name: str) -> Experiment:
    """The experiment ``name`` (importing the built-in experiment modules on first use)."""
    _load_builtin()
    if name not in EXPERIMENTS:
        raise TaskextrapError(
            f"unknown experiment {name!r}; choose from {sorted(EXPERIMENTS)} or 'all'"
            + did_you_mean(name, [*EXPERIMENTS, "all"])
        )
    return EXPERIMENTS[name]


def all_experiments(in_all_only: bool = False) -> list[str]:
    """Names of every registered experiment (only those ``reproduce all`` runs, with ``in_all_only``)."""
    _load_builtin()
    return [n for n, e in EXPERIMENTS.items() if e.in_all or not in_all_only]


# The built-in experiments in the order the paper presents them (`taskextrap list`, the help):
# Fig. 1, Table 1 and its appendices, Table 2, Table 3, Table 4, Table 5, then the appendix-only
# ones. `reproduce all` runs them in _load_builtin's order instead, chosen for cache reuse.
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


def paper_order() -> list[str]:
    """Every registered experiment in the paper's order (:data:`PAPER_ORDER`), then any other in
    the order it registered."""
    names = all_experiments()
    return [n for n in PAPER_ORDER if n in names] + [n for n in names if n not in PAPER_ORDER]


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


def _load_builtin():
    # Imported for their registration side effect, in the order `reproduce all` runs them.
    # llm-geometry registers before codeio: its search is exhaustive (it takes arg-mins over
    # subsets), and the scores it saves in codeio's folder answer codeio's bounded search, so
    # `reproduce all` searches once (codeio first would search twice).
    from taskextrap.experiments import composition, length, multistep, parameter, parity, llm_geometry  # noqa: F401
    from taskextrap.experiments import codeio, projectile  # noqa: F401
    from taskextrap.experiments import codeio_em, composition_depth3, composition_em, manifolds  # noqa: F401
