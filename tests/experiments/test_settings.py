"""experiments.settings: a run's options are resolved once, at the edge (issue 46)."""

import textwrap

import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.experiments.catalogue import get_experiment
from taskextrap.experiments.options import RunOptions
from taskextrap.experiments.runner import plan_run
from taskextrap.provenance import callable_hash
from taskextrap.tasks import registry

FAMILY = textwrap.dedent(
    """
    import numpy as np
    from taskextrap.tasks import ParametricFamily

    bump = ParametricFamily(
        name="bump", fn=lambda x, a, w: a * np.exp(-((w * x) ** 2)), domain=(-3.0, 3.0),
        fixed={"a": (0.5, 1.5)}, shift="w", regions={"F1_1": (0.2, 0.4), "F1_2": (0.4, 0.6), "F2": (0.6, 0.8)})
    """
)


def test_check_resolves_the_profile_protocol_and_family(tmp_path, monkeypatch):
    settings = get_experiment("length").check(RunOptions(profile="tiny", protocol="strict", seeds=2))
    assert settings.profile.seeds == (0, 1) and settings.profile.name == "tiny"
    assert settings.protocol.name == "strict" and settings.family is None and settings.family_code_hash is None
    assert settings.device == "cpu" and settings.split == "test" and not settings.dev
    parity = get_experiment("parity").check(RunOptions(profile="tiny", split="dev"))
    assert parity.protocol is None and parity.dev  # an experiment without a protocol
    with pytest.raises(TaskextrapError, match="unknown profile 'huge'"):
        get_experiment("length").check(RunOptions(profile="huge"))


def test_a_user_family_is_loaded_once_per_run_and_its_code_hashed_from_that_object(tmp_path, monkeypatch):
    (tmp_path / "fammod.py").write_text(FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    loads = []
    real = registry.load_object
    monkeypatch.setattr(registry, "load_object", lambda spec, what: loads.append(spec) or real(spec, what))
    options = RunOptions(profile="tiny", family="fammod:bump", out=tmp_path / "runs", progress=False, plots=False)
    settings = get_experiment("parameter").check(options)
    run = plan_run("parameter", settings, make_dirs=False)  # planned from the settings: nothing resolved again
    import fammod

    assert loads == ["fammod:bump"] and settings.family is fammod.bump
    assert run.record["family_code_hash"] == settings.family_code_hash == callable_hash(fammod.bump)
    assert [u.name for u in run.plan.units] == ["parameter-bump-paper-seed0"]
    plan_run("parameter", options, make_dirs=False)  # from options: resolved there, once
    assert loads == ["fammod:bump"] * 2


def test_a_user_spec_is_module_colon_attr_text_only():
    assert registry.is_user_spec("fammod:bump")
    assert not any(registry.is_user_spec(s) for s in ("quadratic", None, object(), ("a:b",)))
