"""The paper's values stand only beside the paper's own tasks, never beside a user's look-alike."""

import dataclasses

import pytest

from taskextrap.experiments import length, parameter
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.report.paper_values import paper_value
from taskextrap.report.schema import make_row
from taskextrap.tasks import PARAMETER_FAMILIES
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder


def test_length_group_is_degree9_for_the_built_in_ladder_only():
    assert length.group_name(POLYNOMIAL_LADDER) == "degree9"
    assert paper_value("length", "degree9", "strategy-b")[0] == pytest.approx(0.3712)
    same_name = Ladder("polynomial", basis=POLYNOMIAL_LADDER.basis, domain=(-5.0, 5.0))  # a user's copy
    shorter = dataclasses.replace(POLYNOMIAL_LADDER, train_levels=tuple(range(1, 8)), test_level=8)  # dev-like
    assert length.group_name(same_name) == "polynomial-level9"
    assert length.group_name(shorter) == "polynomial-level8"
    for ladder in (same_name, shorter):
        for experiment in ("length", "length-ablations"):
            assert paper_value(experiment, length.group_name(ladder), "strategy-b") == (None, None)


def test_paper_checked_keeps_the_paper_values_of_built_in_families_only():
    builtin = PARAMETER_FAMILIES["quadratic"]
    row = parameter.paper_checked(make_row("parameter", "quadratic", "strategy-a", "mse", [1.0]), builtin)
    assert row["paper_value"] == pytest.approx(733.0) and row["paper_ci95"] == pytest.approx(11.9)
    lookalike = dataclasses.replace(builtin)  # equal fields, another object: not the paper's family
    row = parameter.paper_checked(make_row("parameter", "quadratic", "rte", "mse", [1.0]), lookalike)
    assert row["paper_value"] is None and row["paper_ci95"] is None


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_user_family_named_quadratic_gets_no_paper_values(tmp_path, monkeypatch):
    (tmp_path / "myfam.py").write_text(
        "import dataclasses\n"
        "from taskextrap.tasks import PARAMETER_FAMILIES\n"
        "QUAD = dataclasses.replace(PARAMETER_FAMILIES['quadratic'], fn=lambda x, a, b, c: a * (x - b) ** 2 + 2 * c)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    res = run_experiment(
        "parameter", RunOptions(profile="tiny", out=tmp_path / "runs", family="myfam:QUAD", progress=False, plots=False)
    )
    assert {r["group"] for r in res["rows"]} == {"quadratic", "quadratic:anchor-retrieved"}
    assert all(r["paper_value"] is None and r["paper_ci95"] is None for r in res["rows"])
