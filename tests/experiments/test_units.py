"""The unit cache: a finished unit is found by its configuration's fingerprint."""

import numpy as np

from taskextrap.experiments.units import UnitResult, cached_unit, unit_done


def test_unit_done_follows_the_cache(tmp_path):
    config = {"experiment": "x", "seed": 0}
    assert not unit_done(tmp_path, "x-seed0", config)
    cached_unit(tmp_path, "x-seed0", config, lambda: UnitResult({"m": np.zeros(2)}, {"t": 1.0}))
    assert unit_done(tmp_path, "x-seed0", config)
    assert not unit_done(tmp_path, "x-seed0", {**config, "seed": 1})
    assert not unit_done(None, "x-seed0", config)
