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


def test_fingerprint_changes_with_the_source(tmp_path, monkeypatch):
    from taskextrap.experiments import units

    config = {"experiment": "x", "seed": 0}
    key = units.fingerprint(**config)
    assert key == units.fingerprint(**config) and len(key) == 16
    cached_unit(tmp_path, "x-seed0", config, lambda: UnitResult({"m": np.zeros(2)}, {"t": 1.0}))
    assert unit_done(tmp_path, "x-seed0", config)
    # one changed source byte gives another source hash: another key, and the unit is stale
    monkeypatch.setattr(units, "source_hash", lambda: "0" * 16)
    assert units.fingerprint(**config) != key
    assert not unit_done(tmp_path, "x-seed0", config)
    calls = []
    cached_unit(tmp_path, "x-seed0", config, lambda: calls.append(1) or UnitResult({"m": np.ones(2)}, {}))
    assert calls == [1]  # recomputed, not read back


def test_codeio_checkpoint_folder_follows_the_source_hash(tmp_path, monkeypatch):
    from taskextrap.experiments import codeio, units

    before = codeio._ckpt_root(tmp_path, {"model": "m"}, 0)
    assert before == codeio._ckpt_root(tmp_path, {"model": "m"}, 0)
    monkeypatch.setattr(units, "source_hash", lambda: "f" * 16)
    assert codeio._ckpt_root(tmp_path, {"model": "m"}, 0) != before
