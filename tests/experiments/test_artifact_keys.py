"""The parameter experiments' shared fits are reused exactly where the fit is the same: a dev
split, another protocol, another seed or another profile is another artifact."""

from __future__ import annotations

import pytest

from taskextrap.experiments import parameter as P
from taskextrap.experiments.artifacts import artifact_path
from taskextrap.experiments.settings import UnitSpec
from taskextrap.tasks import PARAMETER_FAMILIES, get_protocol
from taskextrap.tasks.builtin import MULTISTEP_FAMILIES
from taskextrap.tasks.dev import dev_family


class _Stop(Exception):
    pass


@pytest.fixture
def key_of(monkeypatch, tmp_path):
    """``key_of(family, protocol, seed, profile)``: the artifact folder library_fits would use."""

    def fake(cache_dir, name, config, fit, save, load):
        raise _Stop(artifact_path(cache_dir, name, config))

    monkeypatch.setattr(P, "cached_fit", fake)

    def key(family, protocol="paper", seed=0, profile="tiny"):
        with pytest.raises(_Stop) as stop:
            P.library_fits(UnitSpec(family, get_protocol(protocol), P.PROFILES[profile], seed, "gradient",
                                    cache_dir=tmp_path / "units"))  # fmt: skip
        return stop.value.args[0]

    return key


def test_the_same_fit_has_one_key_and_multistep_shares_it(key_of):
    cubic = PARAMETER_FAMILIES["cubic"]
    assert key_of(cubic) == key_of(cubic)
    assert key_of(MULTISTEP_FAMILIES["cubic"]) == key_of(cubic)  # F3-F5 added: the fit sees F1 only


@pytest.mark.parametrize(
    "other",
    [
        dict(family=dev_family(PARAMETER_FAMILIES["cubic"])),
        dict(protocol="strict"),
        dict(seed=1),
        dict(profile="quick"),
        dict(family=PARAMETER_FAMILIES["exp"]),
    ],
    ids=["dev-vs-test", "strict-vs-paper", "seed1-vs-seed0", "quick-vs-tiny", "exp-vs-cubic"],
)
def test_a_fit_of_other_tasks_or_settings_is_another_artifact(key_of, other):
    base = dict(family=PARAMETER_FAMILIES["cubic"], protocol="paper", seed=0, profile="tiny")
    assert key_of(**{**base, **other}) != key_of(**base)
