"""TaskSet's batched evaluation of every task."""

import numpy as np

from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet


def test_curves_are_every_task_at_every_row():
    lib = TaskSet.sample(PARAMETER_FAMILIES["exp"], {"F1_1": 3, "F1_2": 2}, rng(0, "curves"))
    x = np.array([[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]])
    out = lib.curves(x)
    assert out.shape == (2, 5, 3)
    for t in range(5):
        np.testing.assert_allclose(out[:, t], lib.values(x, np.full(2, t)))
