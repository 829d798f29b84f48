"""A run's options resolved once, at the edge: :class:`Settings`.

The command line (and ``--from``) builds a :class:`~taskextrap.experiments.options.RunOptions`
of plain values; :meth:`Experiment.check <taskextrap.experiments.registry.Experiment.check>`
turns it into the objects a run needs (the profile with the run's seeds, the observation
protocol, the ``--family`` object, checked) exactly once, and every experiment, its units and
the run record read them from here instead of resolving the text again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskextrap.experiments.options import RunOptions
from taskextrap.seeding import FRESH_TEST_SEED


@dataclass(frozen=True)
class Settings:
    """What a run reads: its ``options`` as given, and what they resolve to.

    Attributes:
        options: the run's options as given (out, shard, model, executor, ...).
        profile: the experiment's profile with ``--seeds`` / ``--seed`` applied.
        protocol: the observation protocol of ``--protocol`` in the experiment's regime (None
            for an experiment without one).
        family: the object ``--family`` names, loaded and checked (None when not given: the
            experiment's default).
        family_code_hash: for a user's ``module:attr`` family, the hash of its code
            (:func:`taskextrap.provenance.callable_hash`), recorded in the run's config.yaml.
    """

    options: RunOptions
    profile: Any
    protocol: Any = None
    family: Any = None
    family_code_hash: str | None = None

    @property
    def device(self) -> str:
        """Where the run's networks and models run ("cpu", "cuda", "cuda:N")."""
        return self.options.device

    @property
    def split(self) -> str:
        """``test`` (the real held-out tasks) or ``dev`` (a pseudo-extrapolation inside training)."""
        return self.options.split

    @property
    def dev(self) -> bool:
        """Whether this is a dev-split run."""
        return self.options.split == "dev"

    @property
    def test_seed(self) -> int:
        """The seed of the test (or dev) draws (``RunOptions.seed_of_tests``)."""
        return self.options.seed_of_tests

    @property
    def family_spec(self) -> str | None:
        """``--family`` as given (a built-in name or ``module:attr``), for labels and records;
        what it names is :attr:`family`."""
        return self.options.family

    @property
    def builtin(self) -> bool:
        """Whether the run's tasks are built-in ones (no ``--family``, or a built-in's name), not a
        user's ``module:attr`` (whose code is hashed): what decides whether a dev-chosen interval
        scale was chosen for them (``search.calibration.scale_source``)."""
        return self.family_code_hash is None


@dataclass(frozen=True)
class UnitSpec:
    """One unit of work as every function of it reads it: the run's :class:`Settings` resolved
    for one training seed and one family (or ladder, or primitive set). Frozen; a variant is
    ``dataclasses.replace(spec, ...)``.

    Attributes:
        family: the family, ladder or primitive set the unit is about (resolved, a dev split's
            where the run is one).
        protocol: the observation protocol (an ``ObservationProtocol``).
        profile: the experiment's profile.
        seed: the training seed.
        embedding: the name of Gamma's estimator.
        test_seed: the seed of the test (or dev) draws.
        device: where networks and models run.
        anchors: nearest anchors averaged (the parameter regime's).
        split: the held-out split of a discrete regime (a pair or recipe split), else None.
        cache_dir: the unit cache, beside which shared fits are saved (None: nothing saved).
        dev: whether the run is a dev split's (which scores the method table's dev variants too).
    """

    family: Any
    protocol: Any
    profile: Any
    seed: int
    embedding: str
    test_seed: int = FRESH_TEST_SEED
    device: str = "cpu"
    anchors: int = 2
    split: Any = None
    cache_dir: Path | None = field(default=None, compare=False)
    dev: bool = False

    @classmethod
    def of(cls, settings: Settings, seed: int, family, embedding: str, **more) -> UnitSpec:
        """The unit of ``family`` at training ``seed`` in the run ``settings`` (its protocol,
        profile, test seed, device and anchors); ``more``: the split, the cache, a test seed."""
        base = dict(
            protocol=settings.protocol,
            profile=settings.profile,
            test_seed=settings.test_seed,
            device=settings.device,
            anchors=settings.options.anchors,
            dev=settings.dev,
        )
        return cls(family=family, seed=seed, embedding=embedding, **{**base, **more})


def resolve_family(spec: str | None, resolver) -> tuple[Any, str | None]:
    """(the object ``spec`` names under ``resolver``, the hash of its code when it is a user's
    ``module:attr``); (None, None) for no spec or no resolver."""
    if spec is None or resolver is None:
        return None, None
    from taskextrap.provenance import callable_hash
    from taskextrap.tasks.registry import is_user_spec

    family = resolver(spec)
    if not is_user_spec(spec):
        return family, None

    return family, callable_hash(family)
