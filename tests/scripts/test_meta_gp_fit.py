"""benchmarks/meta_gp_fit.py: full-batch L-BFGS reaches a lower meta-gp objective than the unit's
300 Adam steps, inside the hyper-parameters' bounds."""

import numpy as np


def test_lbfgs_converges_below_the_units_adam_fit(load_script):
    from taskextrap.baselines.gp import HYPER, MetaGP
    from taskextrap.scaling import FamilyScaler

    bench = load_script("benchmarks/meta_gp_fit.py")
    g = np.random.default_rng(0)
    x = g.uniform(-1, 1, (96, 12))
    y = g.uniform(1, 2, (96, 1)) * x**2 + g.uniform(-0.5, 0.5, (96, 1)) * x
    args = (x[:, :6], y[:, :6], x[:, 6:], y[:, 6:], FamilyScaler(0, 1, 0, 1))
    adam = MetaGP(steps=300).fit(*args)
    lbfgs, evaluations = bench.lbfgs_fit(MetaGP(), *args)
    assert bench.mean_nll(lbfgs, *args[:4]) < bench.mean_nll(adam, *args[:4]) and evaluations > 1
    for name, value in lbfgs.hyper_.items():
        lo, hi = HYPER[name][1]
        assert lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9)
