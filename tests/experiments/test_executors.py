"""Executors: units listed up front run serially or as Ray tasks with the same results; sweeps,
one-seed runs (Slurm arrays) and the launchers' ranks."""

import json
import sys
import textwrap
import time

import numpy as np
import pytest

from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import executors
from taskextrap.experiments.executors import compute_unit, options_from_dict, options_to_dict, run_units
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import plan_run
from taskextrap.experiments.sweep import sweep_runs
from taskextrap.sharding import Shard


def _cli(*args) -> int:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    return e.value.code


def _rows(path):
    return json.loads(path.read_text())["rows"]


# --- options and plans ---------------------------------------------------------------------------


def test_options_round_trip_as_plain_data(tmp_path):
    o = RunOptions(
        profile="tiny",
        out=tmp_path,
        family="quadratic",
        seed=3,
        extra={"model": "m"},
        shard=Shard(1, 2),
        run_dir=tmp_path / "r",
        unit_cpus=2,
    )
    d = options_to_dict(o)
    assert json.loads(json.dumps(d)) == d  # plain JSON data: nothing pickled crosses to a worker
    assert options_from_dict(d) == o


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(executor="dask"), "unknown executor 'dask'"),
        (dict(unit_cpus=0), "unit_cpus must be a whole number >= 1"),
        (dict(seeds=2, seed=1), "--seeds N (seeds 0..N-1) or --seed S"),
        (dict(executor="ray", shard=Shard(0, 2)), "--executor ray does not combine with --shard"),
    ],
)
def test_bad_run_options_are_one_line_errors(kw, message):
    with pytest.raises(TaskextrapError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        RunOptions(**kw)


def test_a_seed_is_one_seed_and_bounded():
    from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES

    assert PARAMETER_PROFILES["paper"].with_seeds(None, 2).seeds == (2,)
    for bad in (-1, 1000, True, 1.5):
        with pytest.raises(TaskextrapError, match="--seed must be a whole number"):
            PARAMETER_PROFILES["paper"].with_seeds(None, bad)


def test_sweep_runs_cover_protocols_and_splits_an_experiment_has():
    runs = sweep_runs(
        ["parameter", "projectile", "parity"], ["paper", "strict"], ["test", "dev"], RunOptions(profile="tiny")
    )
    got = [(n, o.protocol, o.split) for n, o, _ in runs]
    assert got == [
        ("parameter", "paper", "test"),
        ("parameter", "paper", "dev"),
        ("parameter", "strict", "test"),
        ("parameter", "strict", "dev"),
        ("projectile", "paper", "test"),
        ("projectile", "paper", "dev"),
        ("parity", "paper", "test"),
        ("parity", "paper", "dev"),
    ]
    with pytest.raises(TaskextrapError, match="unknown split 'train'"):
        sweep_runs(["parameter"], ["paper"], ["train"], RunOptions())


def test_sweep_list_names_every_unit_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    assert (
        _cli(
            "sweep",
            "parameter",
            "parameter-ablations",
            "length",
            "--protocols",
            "paper,strict",
            "--profile",
            "tiny",
            "--seeds",
            "2",
            "--out",
            str(out),
            "--list",
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    # 5 families x 2 protocols x 2 seeds + length 2 protocols x 2 seeds; the ablations share parameter's units
    assert lines[-1] == "24 units, 24 to run" and len(lines) == 25
    assert "parameter-quadratic-strict-seed1" in "\n".join(lines)
    assert not out.exists()


# --- serial --------------------------------------------------------------------------------------


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_unit_shared_by_two_runs_runs_once(tmp_path):
    runs = [
        (n, RunOptions(profile="tiny", out=tmp_path, family="quadratic", plots=False, progress=False), None)
        for n in ("parameter", "parameter-ablations")
    ]
    planned = [plan_run(n, o) for n, o, _ in runs]
    assert planned[0].plan.units[0].key == planned[1].plan.units[0].key
    calls = []
    original = planned[0].plan.units[0].compute
    unit = planned[0].plan.units[0]
    unit.compute = lambda plots: calls.append(1) or original(plots)
    results = run_units(planned[0].plan.units + planned[1].plan.units, tmp_path / "units", progress=False)
    assert len(results) == 1 and calls == [1]


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_one_seed_runs_assemble_into_a_full_run(tmp_path):
    """A Slurm array's tasks (--seed S each) fill the unit cache; --seeds N then computes nothing."""
    common = ("--profile", "tiny", "--family", "quadratic", "--out", str(tmp_path), "--quiet", "--no-plots")
    for s in ("1", "0"):
        assert _cli("reproduce", "parameter", "--seed", s, *common) == 0
    assert (tmp_path / "parameter-paper-tiny-quadratic-seed1" / "results.json").exists()
    units = sorted((tmp_path / "units").glob("*.json"))
    stamps = [u.stat().st_mtime_ns for u in units]
    assert _cli("reproduce", "parameter", "--seeds", "2", *common) == 0
    assert [u.stat().st_mtime_ns for u in sorted((tmp_path / "units").glob("*.json"))] == stamps
    full = json.loads((tmp_path / "parameter-paper-tiny-quadratic" / "results.json").read_text())
    assert full["seeds"] == [0, 1]
    per_seed = [
        next(
            r["value"]
            for r in _rows(tmp_path / f"parameter-paper-tiny-quadratic-seed{s}" / "results.json")
            if r["method"] == "rte"
        )
        for s in (0, 1)
    ]
    rte = next(r for r in full["rows"] if r["method"] == "rte")
    assert rte["value"] == pytest.approx(np.mean(per_seed), rel=1e-12) and rte["seed_sd"] > 0


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_the_worker_function_gives_the_serial_record_and_plots(tmp_path):
    """compute_unit (what a Ray task runs) rebuilds the unit from plain data: same numbers and
    the figure as bytes."""
    from taskextrap.experiments.units import unit_record

    options = RunOptions(profile="tiny", out=tmp_path, family="quadratic", progress=False)
    run = plan_run("parameter", options)
    unit = run.plan.units[0]
    spec = executors._spec(unit, 1)
    record = compute_unit(json.loads(json.dumps(spec)))
    assert sorted(record["plots"]) == ["quadratic-paper-embedding.png", "quadratic-paper-predictions.png"]
    assert record["plots"]["quadratic-paper-predictions.png"][:4] == b"\x89PNG"
    serial = unit_record(unit.config, unit.compute(None))
    assert record["errors"] == serial["errors"] and record["fingerprint"] == serial["fingerprint"] == unit.key


# --- launchers -----------------------------------------------------------------------------------


def test_slurm_ranks_and_local_ids():
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"}
    s = Shard.from_env(env)
    assert s == Shard(2, 4) and s.device("cuda", env) == "cuda:1" and s.device("cpu", env) == "cpu"
    assert Shard.from_env({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) == Shard()  # an array task: one task
    assert Shard.from_env({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) == Shard(1, 2)
    with pytest.raises(TaskextrapError, match="SLURM_PROCID and SLURM_NTASKS must be integers"):
        Shard.from_env({"SLURM_PROCID": "x", "SLURM_NTASKS": "2"})


def test_srun_ranks_on_a_one_process_experiment_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert _cli("reproduce", "parameter", "--profile", "tiny", "--out", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: SLURM_NTASKS=2 makes this process 0 of 2") and "\n" not in err
    assert not any(tmp_path.iterdir())


# --- Ray -----------------------------------------------------------------------------------------


def test_ray_missing_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    run = plan_run("parameter", RunOptions(profile="tiny", out=tmp_path, family="quadratic", plots=False))
    with pytest.raises(TaskextrapError, match=r"--executor ray needs Ray: pip install 'taskextrap\[ray\]'"):
        run_units(run.plan.units, run.cache_dir, "ray", progress=False)


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_ray_is_not_started_when_every_unit_is_cached(monkeypatch, tmp_path):
    run = plan_run("parameter", RunOptions(profile="tiny", out=tmp_path, family="quadratic", plots=False))
    first = run_units(run.plan.units, run.cache_dir, progress=False)
    monkeypatch.setattr(executors, "_connect", lambda: pytest.fail("Ray started with nothing to run"))
    again = run_units(run.plan.units, run.cache_dir, "ray", progress=False)
    for k in first:
        for m in first[k].errors:
            np.testing.assert_array_equal(again[k].errors[m], first[k].errors[m])


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_a_sweep_under_ray_matches_serial(local_ray, tmp_path, capsys):
    """Five families, the ablations sharing parameter's units, and projectile: the same rows,
    comparisons and config, and the plots the workers drew land in the run folders."""
    args = ("sweep", "parameter", "parameter-ablations", "projectile", "--profile", "tiny", "--quiet")
    for executor in ("serial", "ray"):
        assert _cli(*args, "--executor", executor, "--out", str(tmp_path / executor)) == 0
    capsys.readouterr()
    folders = sorted(p.name for p in (tmp_path / "serial").iterdir() if p.name not in ("units", "artifacts"))
    assert folders == ["parameter-ablations-paper-tiny", "parameter-paper-tiny", "projectile-paper-tiny"]
    for name in folders:
        a = json.loads((tmp_path / "serial" / name / "results.json").read_text())
        b = json.loads((tmp_path / "ray" / name / "results.json").read_text())
        assert a["rows"] == b["rows"] and a["comparisons"] == b["comparisons"] and a["config"] == b["config"]
        assert sorted(p.name for p in (tmp_path / "serial" / name / "plots").glob("*")) == sorted(
            p.name for p in (tmp_path / "ray" / name / "plots").glob("*")
        )
    assert len(list((tmp_path / "ray" / "units").glob("*.json"))) == len(
        list((tmp_path / "serial" / "units").glob("*.json"))
    )
    # the fits parameter shares are saved once per family, by whichever process computed them
    assert sorted(p.name for p in (tmp_path / "ray" / "artifacts").iterdir()) == sorted(
        p.name for p in (tmp_path / "serial" / "artifacts").iterdir()
    )


@pytest.mark.slow  # a local Ray cluster and three units: about a minute
def test_a_unit_failing_on_ray_is_one_line_and_the_others_are_saved(local_ray, tmp_path, monkeypatch):
    """A user's family (imported in the workers through the driver's sys.path) whose formula
    raises once the run has started."""
    (tmp_path / "fails_later.py").write_text(
        textwrap.dedent(f"""
        import os
        import numpy as np
        from taskextrap.tasks import ParametricFamily

        def fn(x, a):
            if os.path.exists({str(tmp_path / "FAIL")!r}):
                raise RuntimeError("boom in the formula")
            return np.sin(x) * a

        FAM = ParametricFamily("fails_later", fn, (-3.0, 3.0), {{}}, "a",
                               {{"F1_1": (0.5, 1.0), "F1_2": (1.0, 1.5), "F2": (2.0, 2.5)}})
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    options = RunOptions(
        profile="tiny", out=tmp_path / "runs", family="fails_later:FAM", plots=False, progress=False, seeds=1
    )
    failing = plan_run("parameter", options)
    fine = plan_run("parameter", RunOptions(profile="tiny", out=tmp_path / "runs", family="quadratic", plots=False))
    (tmp_path / "FAIL").write_text("")
    with pytest.raises(TaskextrapError) as e:
        run_units(failing.plan.units + fine.plan.units, failing.cache_dir, "ray", progress=False)
    msg = str(e.value)
    assert msg.startswith("unit parameter-fails_later-paper-seed0 failed on Ray:") and "boom" in msg
    assert "\n" not in msg
    assert [p.name.split("-")[1] for p in (tmp_path / "runs" / "units").glob("*.json")] == ["quadratic"]


@pytest.mark.slow  # a local Ray cluster beside a second process
def test_the_ray_driver_waits_for_a_unit_another_process_computes_and_reads_it(local_ray, tmp_path, capfd):
    """The driver takes each unit's lock before handing it to Ray: a unit locked by another
    process (here: one that saves the unit after a while) is waited for and read back, not
    computed again."""
    import subprocess

    def planned(out):
        return plan_run("parameter", RunOptions(profile="tiny", out=out, family="quadratic", plots=False))

    done = planned(tmp_path / "a")
    first = run_units(done.plan.units, done.cache_dir, progress=False)
    (unit_file,) = done.cache_dir.glob("*.json")
    run = planned(tmp_path / "b")
    (unit,) = run.plan.units
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import shutil, sys, time
        from taskextrap.experiments.units import unit_lock

        cache, name, key, saved = sys.argv[1:]
        with unit_lock(cache, name, key):
            print("locked", flush=True)
            time.sleep(2)
            shutil.copy(saved, cache)  # the other process's result, saved under its lock
    """),
            str(run.cache_dir),
            unit.name,
            unit.key,
            str(unit_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    got = run_units(run.plan.units, run.cache_dir, "ray", progress=False)
    assert holder.wait(timeout=60) == 0
    (result,) = got.values()
    assert result.extras.get("resumed")  # read back from the cache, not computed on Ray
    np.testing.assert_array_equal(result.errors["rte"], next(iter(first.values())).errors["rte"])
    assert "waiting for unit parameter-quadratic-paper-seed0, computed by another process" in capfd.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (("sweep", "nope"), "error: unknown experiment 'nope'"),
        (("sweep", "parameter", "--splits", "train"), "error: unknown split 'train'"),
        (("sweep", "parameter", "--protocols", "paper,bogus"), "error: unknown protocol 'bogus'"),
        (("sweep", "parameter", "--seed", "1", "--seeds", "2"), "error: give --seeds N (seeds 0..N-1) or --seed S"),
        (("sweep", "parameter", "--unit-cpus", "0"), "error: Invalid value for '--unit-cpus'"),
        (("sweep", "parameter", "--executor", "dask"), "error: Invalid value for '--executor'"),
        (("reproduce", "parameter", "--seed", "-1"), "error: --seed must be a whole number from 0 to 999"),
        (("sweep", "projectile", "--splits", "dev", "--profile", "tiny", "--seeds", "0"), "error: --seeds must be"),
    ],
)
def test_bad_sweep_input_is_one_line(tmp_path, capsys, args, message):
    assert _cli(*args, "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err
    assert not (tmp_path / "o").exists()


# --- the Ray driver's locks, with Ray's driver API stood in for ----------------------------------


class FakeRay:
    """Ray's driver API as the executor uses it: a task runs its unit here when it is fetched;
    ``ready[name]()`` says whether the task of unit ``name`` has finished (default: at once)."""

    def __init__(self, units, ready=None):
        self.units = {u.name: u for u in units}
        self.ready = ready or {}
        self.started = []  # the units handed to "Ray"

    def remote(self, fn_or_spec):
        """``ray.remote(fn)`` (then ``.options(...)``), and ``.remote(spec)``: a task, named by its unit."""
        if callable(fn_or_spec):
            return self
        self.started.append(fn_or_spec["unit"])
        return fn_or_spec["unit"]

    def options(self, **kwargs):
        return self

    def wait(self, refs, num_returns=1, timeout=None):
        give_up = time.monotonic() + (20.0 if timeout is None else timeout)
        while time.monotonic() < give_up:
            done = [r for r in refs if self.ready.get(r, lambda: True)()]
            if done:
                return done[:num_returns], [r for r in refs if r not in done[:num_returns]]
            time.sleep(0.02)
        assert timeout is not None, f"the driver waits for {refs}, which never finish"
        return [], refs

    def get(self, name):
        from taskextrap.experiments.units import unit_record

        unit = self.units[name]
        return {**unit_record(unit.config, unit.compute(None)), "plots": {}}

    def shutdown(self):
        pass


def _stand_in_units(tmp_path, n=2):
    from taskextrap.experiments.units import Unit, UnitResult

    return [
        Unit(
            f"stand-in-seed{s}",
            {"experiment": "stand-in", "seed": s},
            lambda plots, s=s: UnitResult({"m": np.array([0.5 + s])}, {"t": 1.0}),
            origin=("stand-in", RunOptions(out=tmp_path)),
        )
        for s in range(n)
    ]


@pytest.fixture
def fake_ray(monkeypatch):
    """``install(ray)``: the executor connects to ``ray`` (a :class:`FakeRay`) instead of Ray;
    ``on_connect`` runs first (what another process does while Ray starts)."""

    def install(ray, on_connect=lambda: None):
        def connect():
            on_connect()
            return ray, True

        monkeypatch.setattr(executors, "_connect", connect)
        return ray

    return install


def _lock_is_free(cache, unit) -> bool:
    from filelock import FileLock, Timeout

    from taskextrap.experiments.units import lock_path

    lock = FileLock(str(lock_path(cache, unit.name, unit.key)))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    lock.release()
    return True


def test_the_ray_driver_releases_a_units_lock_once_it_is_saved(tmp_path, fake_ray):
    """A process waiting for a unit the Ray driver finished reads it at once, not after the
    whole Ray run: the second unit's task finishes only once the first unit's lock is free."""
    cache = tmp_path / "units"
    first, second = units = _stand_in_units(tmp_path)
    ray = fake_ray(FakeRay(units, ready={second.name: lambda: _lock_is_free(cache, first)}))
    results = run_units(units, cache, "ray", progress=False)
    assert ray.started == [first.name, second.name] and len(results) == 2
    assert _lock_is_free(cache, first) and _lock_is_free(cache, second)


# Another process holding the second unit while it waits for the first: once the driver saved
# the first, it takes the first unit's lock (with a time limit, so a driver that holds the first
# while it waits for the second fails the test instead of hanging it), then saves the second
# unit with numbers of its own.
HOLDS_THE_SECOND = textwrap.dedent("""
    import sys, time
    import numpy as np
    from filelock import FileLock, Timeout
    from taskextrap.experiments.units import UnitResult, lock_path, save_unit, unit_lock, unit_record, fingerprint

    cache = sys.argv[1]
    first, second = ({"experiment": "stand-in", "seed": s} for s in (0, 1))
    first_key = fingerprint(**first)
    with unit_lock(cache, "stand-in-seed1", fingerprint(**second)):
        print("locked", flush=True)
        give_up = time.monotonic() + 30
        while not (lock_path(cache, "stand-in-seed0", first_key).with_suffix(".json")).exists():
            if time.monotonic() > give_up:
                sys.exit(4)
            time.sleep(0.02)
        try:
            FileLock(str(lock_path(cache, "stand-in-seed0", first_key))).acquire(timeout=15)
        except Timeout:
            sys.exit(3)
        save_unit(cache, "stand-in-seed1", unit_record(second, UnitResult({"m": np.array([7.0])}, {"t": 1.0})))
""")


def test_two_drivers_that_split_the_units_do_not_wait_for_each_other(tmp_path, fake_ray, capfd):
    import subprocess

    cache = tmp_path / "units"
    first, second = units = _stand_in_units(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", HOLDS_THE_SECOND, str(cache)], stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "locked"
    ray = fake_ray(FakeRay(units))
    results = run_units(units, cache, "ray", progress=False)
    assert other.wait(timeout=60) == 0  # it got the first unit's lock while this driver waited for the second
    got = results[(second.name, second.key)]
    assert got.extras.get("resumed") and got.errors["m"].tolist() == [7.0]  # read back, not computed here
    assert ray.started == [first.name]
    lock = cache / f"{second.name}-{second.key}.lock"
    assert f"waiting for unit {second.name}, computed by another process (it holds {lock})" in capfd.readouterr().err


def test_a_unit_saved_while_ray_starts_is_read_back_not_computed(tmp_path, fake_ray):
    from taskextrap.experiments.units import UnitResult, save_unit, unit_record

    cache = tmp_path / "units"
    first, second = units = _stand_in_units(tmp_path)

    def another_process_saves_the_first():
        save_unit(cache, first.name, unit_record(first.config, UnitResult({"m": np.array([9.0])}, {"t": 1.0})))

    ray = fake_ray(FakeRay(units), on_connect=another_process_saves_the_first)
    results = run_units(units, cache, "ray", progress=False)
    assert ray.started == [second.name]
    assert results[(first.name, first.key)].errors["m"].tolist() == [9.0]


class _OptionsRay(FakeRay):
    """FakeRay that records the resources each task declares."""

    def __init__(self, units):
        super().__init__(units)
        self.declared = []

    def options(self, **kwargs):
        self.declared.append(kwargs)
        return self


@pytest.mark.parametrize(("device", "per_gpu", "gpus"), [("cpu", 1, 0), ("cuda", 1, 1.0), ("cuda:0", 4, 0.25)])
def test_ray_tasks_declare_a_share_of_a_gpu(tmp_path, fake_ray, device, per_gpu, gpus):
    units = _stand_in_units(tmp_path)
    ray = fake_ray(_OptionsRay(units))
    run_units(units, tmp_path / "units", "ray", progress=False, unit_cpus=2, device=device, units_per_gpu=per_gpu)
    assert ray.declared == [{"num_cpus": 2, "num_gpus": gpus, "max_retries": 0}]


def test_units_per_gpu_is_refused_without_ray_and_a_gpu():
    from taskextrap.errors import TaskextrapError
    from taskextrap.experiments.registry import RunOptions

    RunOptions(executor="ray", device="cuda", units_per_gpu=4)
    for bad in (dict(units_per_gpu=4), dict(executor="ray", units_per_gpu=4), dict(units_per_gpu=0)):
        with pytest.raises(TaskextrapError, match=r"units.per.gpu"):
            RunOptions(**bad)
