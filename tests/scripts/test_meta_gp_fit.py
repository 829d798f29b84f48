"""MetaGP(optimizer="lbfgs") (benchmarks/meta_gp_fit.py): full-batch L-BFGS reaches a lower
meta-gp objective than the unit's 300 Adam steps, inside the hyper-parameters' bounds."""

import numpy as np
import pytest


def test_lbfgs_converges_below_the_units_adam_fit(load_script):
    from taskextrap.baselines.gp import HYPER, MetaGP
    from taskextrap.scaling import FamilyScaler

    bench = load_script("benchmarks/meta_gp_fit.py")
    g = np.random.default_rng(0)
    x = g.uniform(-1, 1, (96, 12))
    y = g.uniform(1, 2, (96, 1)) * x**2 + g.uniform(-0.5, 0.5, (96, 1)) * x
    args = (x[:, :6], y[:, :6], x[:, 6:], y[:, 6:], FamilyScaler(0, 1, 0, 1))
    adam = MetaGP(steps=300).fit(*args)
    lbfgs = MetaGP(optimizer="lbfgs", steps=1000).fit(*args)
    assert bench.mean_nll(lbfgs, *args[:4]) < bench.mean_nll(adam, *args[:4])
    assert 1 < lbfgs.evaluations_ < 1000 and adam.evaluations_ == 300  # it stopped by its rule, not its cap
    for name, value in lbfgs.hyper_.items():
        lo, hi = HYPER[name][1]
        assert lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9)


def test_an_unknown_optimizer_is_one_line():
    from taskextrap.baselines.gp import MetaGP
    from taskextrap.errors import TaskextrapError

    with pytest.raises(TaskextrapError, match=r"optimizer must be one of \['adam', 'lbfgs'\], got 'sgd'"):
        MetaGP(optimizer="sgd")
