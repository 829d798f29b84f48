"""A run's options resolved once, at the edge: :class:`Settings`.

The command line (and ``--from``) builds a :class:`~taskextrap.experiments.options.RunOptions`
of plain values; :meth:`Experiment.check <taskextrap.experiments.registry.Experiment.check>`
turns it into the objects a run needs (the profile with the run's seeds, the observation
protocol, the ``--family`` object, checked) exactly once, and every experiment, its units and
the run record read them from here instead of resolving the text again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskextrap.experiments.options import RunOptions


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
