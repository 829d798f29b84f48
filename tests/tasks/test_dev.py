"""Dev splits: pseudo-extrapolations built from training tasks only."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import composition, length
from taskextrap.experiments.parameter import run_unit
from taskextrap.experiments.settings import UnitSpec
from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_dir_name, run_experiment
from taskextrap.tasks import PARAMETER_FAMILIES, ParametricFamily, get_protocol
from taskextrap.tasks.dev import DEV_REGION, dev_family, dev_ladder, dev_pair_split
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER
from taskextrap.tasks.primitives import PAPER_SPLIT


@pytest.mark.parametrize("name", sorted(PARAMETER_FAMILIES))
def test_dev_family_holds_out_f1_2_and_trains_on_halves_of_f1_1(name):
    fam = PARAMETER_FAMILIES[name]
    dev = dev_family(fam)
    lo, hi = fam.regions["F1_1"]
    assert dev.regions[DEV_REGION] == fam.regions["F1_2"]
    assert dev.train_regions == ("F1_1_a", "F1_1_b")
    assert dev.regions["F1_1_a"] == (lo, (lo + hi) / 2) and dev.regions["F1_1_b"] == ((lo + hi) / 2, hi)
    assert "F2" not in dev.regions
    assert max(b for _, b in dev.regions.values()) <= fam.regions["F2"][0]


def test_dev_family_of_a_single_training_region_uses_thirds():
    fam = ParametricFamily(
        "one",
        lambda x, a: a * x,
        (0.0, 1.0),
        {},
        "a",
        {"train": (0.0, 3.0), "far": (4.0, 5.0)},
        train_regions=("train",),
    )
    dev = dev_family(fam)
    assert dev.regions == {"train_a": (0.0, 1.0), "train_b": (1.0, 2.0), DEV_REGION: (2.0, 3.0)}


def test_dev_ladder_and_pair_split():
    d = dev_ladder(POLYNOMIAL_LADDER)
    assert d.train_levels == tuple(range(1, 8)) and d.test_level == 8
    s = dev_pair_split(PAPER_SPLIT)
    assert len(s.test) == 1 and s.test[0] in PAPER_SPLIT.train and s.test[0][0] != s.test[0][1]
    assert set(s.train) == set(PAPER_SPLIT.train) - set(s.test)
    assert not (set(s.train) | set(s.test)) & set(PAPER_SPLIT.test)
    with pytest.raises(TaskextrapError, match="two training levels"):
        dev_ladder(d.__class__("l", POLYNOMIAL_LADDER.basis, (-1.0, 1.0), train_levels=(1,), test_level=2))


@pytest.mark.slow  # end to end, run by .ci/run's slow set (make test stays under 5 minutes)
def test_parameter_dev_unit_never_fits_outside_f1_1():
    fam = PARAMETER_FAMILIES["quadratic"]
    with audit.spy() as seen:
        unit = run_unit(
            UnitSpec(dev_family(fam), get_protocol("paper"), PARAMETER_PROFILES["tiny"], 0, "gradient", test_seed=1)
        )
    assert seen and np.isfinite(unit.errors["rte"]).all()
    f1_1_hi = fam.regions["F1_1"][1]
    for component, params in seen:
        assert params[:, 0].max() <= f1_1_hi, component


# composition's whole tiny dev run (25 s) runs under the slow marker, which CI also runs: make test
# was 296 s of its 5 minutes once every parameter unit chose rte-gp's posterior
@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
@pytest.mark.parametrize("experiment", ["parameter", "length", pytest.param("composition", marks=pytest.mark.slow)])
def test_dev_runs_write_results_without_paper_values(tmp_path, experiment):
    family = "quadratic" if experiment == "parameter" else None
    options = RunOptions(profile="tiny", out=tmp_path, family=family, split="dev", plots=False, progress=False)
    res = run_experiment(experiment, options)
    assert res["config"]["split"] == "dev"
    assert all(r["paper_value"] is None for r in res["rows"])
    assert run_dir_name(experiment, options).name.endswith("-dev")
    assert (run_dir_name(experiment, options) / "results.json").exists()


def test_dev_targets_come_from_the_dev_level_and_pair():
    lib = length.make_library(dev_ladder(POLYNOMIAL_LADDER), 3)
    targets, _ = length.make_targets(lib, get_protocol("paper", "length"), 4, 1, test_seed=1)
    assert set(targets.level) == {8}
    prims = composition.make_library(3)
    split = dev_pair_split(PAPER_SPLIT)
    targets, _ = composition.make_targets(prims, get_protocol("paper", "composition"), 4, 1, split, 1)
    assert {tuple(p) for p in targets.pair} == set(split.test)


def test_projectile_dev_split_extrapolates_to_v60(tmp_path):
    res = run_experiment(
        "projectile", RunOptions(profile="tiny", out=tmp_path, split="dev", plots=False, progress=False)
    )
    assert {r["group"] for r in res["rows"]} == {"v=60,theta=45"}


def test_multistep_dev_family_cuts_the_training_span_into_equal_slices():
    from taskextrap.tasks.builtin import MULTISTEP_FAMILIES
    from taskextrap.tasks.dev import dev_multistep_family

    real = MULTISTEP_FAMILIES["exp"]
    dev = dev_multistep_family(real)
    names = ["dev-F1_1", "dev-F1_2", "dev-F2", "dev-F3", "dev-F4", "dev-F5"]
    assert list(dev.regions) == names and dev.train_regions == ("dev-F1_1", "dev-F1_2")
    spans = [dev.regions[n] for n in names]
    widths = [b - a for a, b in spans]
    assert np.allclose(widths, widths[0]) and all(spans[i][1] == spans[i + 1][0] for i in range(5))
    assert spans[0][0] == real.regions["F1_1"][0] and np.isclose(spans[-1][1], real.regions["F1_2"][1])
    assert not any(r in dev.regions for r in ("F2", "F3", "F4", "F5"))
