"""An estimator checks its arguments once: at construction, and again only after one changes
(``set_params`` or an assignment); ``fit``, ``resolved``, equality and prediction read the
settings kept since."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.estimators.parameter import RTE
from taskextrap.operators.train import TrainConfig
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol


class CountingRTE(RTE):
    """An RTE that counts its argument checks."""

    checks = 0

    def _settings(self):
        type(self).checks += 1
        return super()._settings()


def test_a_fit_and_its_predictions_check_the_arguments_once():
    fam = PARAMETER_FAMILIES["quadratic"]
    library = TaskSet.sample(fam, {"F1_1": 8, "F1_2": 8}, rng(0, "once-library"))
    obs = get_protocol("paper").draw(TaskSet.sample(fam, {"F2": 3}, rng(0, "once-targets")), 1, rng(1))
    CountingRTE.checks = 0
    rte = CountingRTE(n_pairs=200, train=TrainConfig(steps=4, batch=128, eval_every=2), verbose=False)
    assert CountingRTE.checks == 1
    rte.fit(library)
    rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    assert rte.resolved("loo") is True and rte == rte
    assert CountingRTE.checks == 1  # fit, decompose, predict, resolved and equality read the kept settings


def test_a_changed_argument_is_checked_again_and_a_refused_one_changes_nothing():
    CountingRTE.checks = 0
    rte = CountingRTE(verbose=False)
    rte.set_params(phi_scales=(1.0, 2.0))
    assert rte.resolved("phi_scales") == (1.0, 2.0) and CountingRTE.checks == 2
    rte.phi_scales = [0.5]  # an assignment (the experiments' inference variants) counts too
    assert rte.resolved("phi_scales") == (0.5,) and CountingRTE.checks == 3
    with pytest.raises(TaskextrapError, match="retrieve"):
        rte.set_params(retrieve=0)
    assert rte.retrieve == 16 and rte.resolved("phi_scales") == (0.5,)
    assert rte.resolved("protocol") is get_protocol("paper") and np.isfinite(rte.temperature)
