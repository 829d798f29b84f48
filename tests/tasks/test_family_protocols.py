"""Every built-in family and task collection has what tasks.protocols says the package reads."""

import numpy as np
import pytest

from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, PROJECTILE, TaskSet
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet
from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PrimitiveSet, PrimitiveTasks
from taskextrap.tasks.protocols import TaskCollection, TaskFamily


def _collections():
    prims = PrimitiveSet.sample(n_per_family=4, rng=rng(0, "protocols"))
    quad = PARAMETER_FAMILIES["quadratic"]
    return {
        "parametric": TaskSet.sample(quad, {"F1_1": 3}, rng(0, "protocols")),
        "projectile": TaskSet.sample(PROJECTILE, {"train": 3}, rng(0, "protocols")),
        "ladder": LadderSet.sample_library(POLYNOMIAL_LADDER, 2, rng(0, "protocols")),
        "composition": CompositionSet.sample(prims, PAPER_SPLIT.train, 3, np.random.default_rng(0)),
        "primitives": PrimitiveTasks.of(prims),
    }


@pytest.mark.parametrize("kind", ["parametric", "projectile", "ladder", "composition", "primitives"])
def test_builtin_collections_and_families_follow_the_protocols(kind):
    tasks = _collections()[kind]
    assert isinstance(tasks, TaskCollection) and isinstance(tasks.family, TaskFamily)
    fam = tasks.family
    x = np.broadcast_to(fam.grid(7), (len(tasks), 7))
    assert fam.grid(7).shape == (7,) and fam.domain[0] < fam.domain[1]
    np.testing.assert_allclose(tasks.values(x), fam(tasks.params, x))
    assert tasks.values(x[:1], np.array([0])).shape == (1, 7)
    assert fam.output_range(rng(0, "range")) > 0
    assert len(fam.task_labels(tasks.params)) == len(tasks)


def test_an_object_without_the_members_is_not_a_family():
    assert not isinstance(object(), TaskFamily) and not isinstance([1, 2], TaskCollection)
