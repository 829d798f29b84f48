"""The unit cache: a finished unit is found by its configuration's fingerprint."""

import numpy as np
import pytest

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

    before = codeio.ckpt_root(tmp_path, {"model": "m"}, 0)
    assert before == codeio.ckpt_root(tmp_path, {"model": "m"}, 0)
    monkeypatch.setattr(units, "source_hash", lambda: "f" * 16)
    assert codeio.ckpt_root(tmp_path, {"model": "m"}, 0) != before


def _unit_file(tmp_path):
    (path,) = tmp_path.glob("x-seed0-*.json")
    return path


def _damages():
    """Ways a unit file gets damaged: each must be a miss, never used."""
    import json

    def edit(f):
        def apply(path):
            data = json.loads(path.read_text())
            f(data)
            path.write_text(json.dumps(data))

        return apply

    def first(d):
        return next(iter(d["errors"]))  # the first method's errors ("rte" in a real unit)

    return {
        "truncated": lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]),
        "empty": lambda p: p.write_text(""),
        "garbled": lambda p: p.write_bytes(b"\xff\xfe not json"),
        "errors-not-a-dict": edit(lambda d: d.update(errors=[1, 2])),
        "errors-of-strings": edit(lambda d: d["errors"].update({first(d): ["a", "b"]})),
        "timing-missing": edit(lambda d: d.pop("timing")),
        "number-edited": edit(lambda d: d["errors"][first(d)].__setitem__(0, 1189.0)),
        "errors-zeroed": edit(lambda d: d["errors"].update({first(d): [0.0] * len(d["errors"][first(d)])})),
        "list-cut-short": edit(lambda d: d["errors"].update({first(d): d["errors"][first(d)][:1]})),
        "checksum-missing": edit(lambda d: d.pop("checksum")),
    }


def test_a_damaged_unit_is_recomputed_with_one_warning_never_used(tmp_path):
    import pytest

    from taskextrap.errors import TaskextrapWarning

    config = {"experiment": "x", "seed": 0}
    first = cached_unit(tmp_path, "x-seed0", config, lambda: UnitResult({"m": np.array([0.5, 2.0])}, {"t": 1.0}))
    original = _unit_file(tmp_path).read_bytes()
    calls = []

    def compute():
        calls.append(1)
        return UnitResult({"m": np.array([0.5, 2.0])}, {"t": 1.0})

    for how, damage in _damages().items():
        _unit_file(tmp_path).write_bytes(original)
        damage(_unit_file(tmp_path))
        calls.clear()
        with pytest.warns(TaskextrapWarning, match="x-seed0.*recomputing") as caught:
            again = cached_unit(tmp_path, "x-seed0", config, compute)
        assert calls == [1], how
        assert len(caught) == 1 and "\n" not in str(caught[0].message), how
        assert np.array_equal(again.errors["m"], first.errors["m"]), how
        assert _unit_file(tmp_path).read_bytes() == original, how  # replaced by an intact unit


def test_an_intact_unit_is_read_back_without_a_warning(tmp_path, recwarn):
    config = {"experiment": "x", "seed": 0}
    cached_unit(
        tmp_path,
        "x-seed0",
        config,
        lambda: UnitResult({"m": np.float32([0.1, 0.2])}, {"t": 1.0}, {"note": np.int64(3)}),
    )
    again = cached_unit(tmp_path, "x-seed0", config, lambda: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert again.extras["note"] == 3 and again.extras["resumed"] and not recwarn.list


def test_a_unit_file_records_the_cpu_outside_its_key(tmp_path, monkeypatch):
    """The CPU is provenance (another instruction set moves a float's last digits), not part of
    the key: a cache computed on one node of a cluster is read on another."""
    import json

    from taskextrap.experiments import units

    config = {"experiment": "x", "seed": 0}
    monkeypatch.setattr(units, "cpu_info", lambda: "Test CPU (AVX2)")
    cached_unit(tmp_path, "x-seed0", config, lambda: UnitResult({"m": np.zeros(2)}, {}))
    saved = json.loads(_unit_file(tmp_path).read_text())
    assert saved["cpu"] == "Test CPU (AVX2)" and saved["libraries"]["numpy"] == np.__version__
    monkeypatch.setattr(units, "cpu_info", lambda: "Other CPU (AVX512)")
    again = cached_unit(tmp_path, "x-seed0", config, lambda: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert again.extras["resumed"]  # read back, not recomputed, on another CPU


def test_the_list_of_seeds_is_not_in_a_units_key():
    from taskextrap.experiments import units

    one = units.fingerprint(experiment="x", profile={"name": "tiny", "seeds": [0]}, seed=0)
    two = units.fingerprint(experiment="x", profile={"name": "tiny", "seeds": [0, 1]}, seed=0)
    assert one == two
    assert one != units.fingerprint(experiment="x", profile={"name": "tiny", "seeds": [0]}, seed=1)
    assert one != units.fingerprint(experiment="x", profile={"name": "quick", "seeds": [0]}, seed=0)


def test_unit_files_are_readable_by_others(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        cached_unit(tmp_path, "x-seed0", {"experiment": "x", "seed": 0}, lambda: UnitResult({"m": np.zeros(2)}, {}))
    finally:
        os.umask(old)
    assert stat.S_IMODE(_unit_file(tmp_path).stat().st_mode) == 0o644


@pytest.mark.slow  # three CLI processes end to end: about a minute
def test_a_run_reuses_seed_zero_for_more_seeds_and_repairs_damaged_units(tmp_path):
    """End to end: ``--seeds 2`` after ``--seeds 1`` computes seed 1 only; every unit damaged
    afterwards is recomputed with a one-line warning and gives the same numbers."""
    import json
    import subprocess
    import sys

    def run(seeds):
        cmd = [
            sys.executable,
            "-m",
            "taskextrap.cli",
            "reproduce",
            "length",
            "--profile",
            "tiny",
            "--seeds",
            str(seeds),
            "--out",
            str(tmp_path),
            "--no-plots",
        ]
        return subprocess.run(cmd, capture_output=True, text=True, check=True)

    run(1)
    (seed0,) = (tmp_path / "units").glob("*.json")
    stamp = seed0.stat().st_mtime_ns
    run(2)
    units = sorted((tmp_path / "units").glob("*.json"))
    assert len(units) == 2 and seed0.stat().st_mtime_ns == stamp  # seed 0 read back, not recomputed
    before = json.loads((tmp_path / "length-paper-tiny" / "results.json").read_text())["rows"]
    for u in units:
        u.write_text(u.read_text()[:100])  # truncated
    out = run(2)
    warned = [line for line in out.stderr.splitlines() if line.startswith("warning: unit")]
    assert len(warned) == 2 and all("recomputing" in w for w in warned)
    assert json.loads((tmp_path / "length-paper-tiny" / "results.json").read_text())["rows"] == before


@pytest.mark.slow  # every unit of a run, damaged each way, recomputed: half a minute
def test_every_unit_of_a_run_damaged_every_way_is_recomputed_to_the_same_numbers(tmp_path):
    """End to end, in one process: each kind of damage applied to every unit of a tiny parameter
    run; the rerun warns once per unit, recomputes, and its rows equal the original run's."""
    import json
    import warnings

    from taskextrap.errors import TaskextrapWarning
    from taskextrap.experiments import units as units_mod
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import run_experiment

    opts = RunOptions(profile="tiny", family="quadratic", seeds=2, out=tmp_path, plots=False, progress=False)
    before = run_experiment("parameter", opts)["rows"]
    units = sorted((tmp_path / "units").glob("parameter-*.json"))
    originals = {u: u.read_bytes() for u in units}
    assert len(units) == 2
    for how, damage in _damages().items():
        for u in units:
            damage(u)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = run_experiment("parameter", opts)["rows"]
        warned = [str(w.message) for w in caught if issubclass(w.category, TaskextrapWarning)]
        assert len(warned) == len(units) and all("recomputing" in w for w in warned), (how, warned)
        assert [r["value"] for r in rows] == [r["value"] for r in before], how
        for u in units:  # replaced by an intact unit with the same numbers (its timings are new)
            saved, original = json.loads(u.read_text()), json.loads(originals[u])
            assert saved["errors"] == original["errors"] and units_mod._damage(saved, saved["fingerprint"]) is None, how


def test_a_directory_in_a_units_place_is_one_line_before_any_work(tmp_path):
    import pytest

    from taskextrap.errors import TaskextrapError
    from taskextrap.experiments import units

    config = {"experiment": "x", "seed": 0}
    (tmp_path / f"x-seed0-{units.fingerprint(**config)}.json").mkdir()
    with pytest.raises(TaskextrapError, match="a directory of that name is in the way"):
        cached_unit(tmp_path, "x-seed0", config, lambda: (_ for _ in ()).throw(AssertionError("computed")))
