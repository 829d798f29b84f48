"""Leak audit: no fitted component ever sees a task from the held-out F2 region."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.experiments.parameter import METHODS, run_unit
from taskextrap.experiments.profiles import PARAMETER_PROFILES
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol

INDUCTIVE = {"sparse-inductive", "t2v-inductive", "inductive-oracle"}


def test_spy_collects_only_inside_its_block():
    audit.record_fit("outside", np.zeros((1, 1)))
    with audit.spy() as seen:
        audit.record_fit("inside", np.ones((2, 3)))
    audit.record_fit("after", np.zeros((1, 1)))
    assert [c for c, _ in seen] == ["inside"]
    assert seen[0][1].shape == (2, 3)


@pytest.mark.parametrize("protocol", ["paper", "strict"])
def test_parameter_experiment_never_fits_on_f2(protocol):
    fam = PARAMETER_FAMILIES["quadratic"]
    with audit.spy() as seen:
        unit = run_unit(fam, get_protocol(protocol), PARAMETER_PROFILES["tiny"], seed=0, embedding="gradient",
                        anchors=2)
    assert set(unit.errors) == set(METHODS) | {"far-anchors"}
    assert seen, "no component reported its fit to the leak audit"
    components = {c for c, _ in seen}
    assert {"scaler", "embedding", "psi"} <= components
    assert INDUCTIVE <= components
    f2_lo = fam.regions["F2"][0]
    for component, params in seen:
        assert params.ndim == 2 and params.shape[1] == 3 and len(params) > 0, component
        regions = set(fam.region_of(params))
        assert "F2" not in regions, component
        assert regions <= {"F1_1", "F1_2"}, (component, regions)
        assert params[:, 0].max() < f2_lo, component


def test_fit_refuses_a_library_with_held_out_tasks(make_rte):
    fam = PARAMETER_FAMILIES["quadratic"]
    lib = TaskSet.sample(fam, {"F1_1": 5, "F1_2": 5, "F2": 1}, np.random.default_rng(0))
    with audit.spy() as seen, pytest.raises(TaskextrapError, match="held-out") as e:
        make_rte().fit(lib)
    assert "\n" not in str(e.value)
    assert seen == []  # rejected before anything was fitted
