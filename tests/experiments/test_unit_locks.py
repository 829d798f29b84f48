"""One lock per unit: two processes sharing ``--out`` compute a unit once, and a killed holder's
lock does not block the next run."""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from taskextrap.experiments.units import fingerprint, lock_path

CONFIG = {"experiment": "stand-in", "seed": 0}

# A process computing (or reading back) one stand-in unit: its compute writes its pid into the
# counter file, then waits a little, so that a second process started meanwhile finds it locked.
WORKER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from taskextrap.experiments.units import UnitResult, cached_unit

    cache, counter = sys.argv[1], sys.argv[2]

    def compute():
        with open(counter, "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(2.0)
        return UnitResult({"m": np.array([0.25, float(os.getpid() % 7)])}, {"t": 1.0})

    unit = cached_unit(cache, "stand-in-seed0", {"experiment": "stand-in", "seed": 0}, compute)
    print(json.dumps({m: e.tolist() for m, e in unit.errors.items()}))
""")

# A process that takes a unit's lock and holds it until it is killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from taskextrap.experiments.units import unit_lock

    with unit_lock(sys.argv[1], "stand-in-seed0", sys.argv[2]):
        print("locked", flush=True)
        time.sleep(600)
""")


def _python(script, *args, **kw):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


def _wait_for(condition, limit_s=60.0):
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < limit_s, "timed out"
        time.sleep(0.05)


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_two_processes_compute_a_unit_once_and_get_the_same_result(tmp_path):
    cache, counter = tmp_path / "units", tmp_path / "computed"
    first = _python(WORKER, cache, counter)
    _wait_for(lambda: counter.exists() and counter.read_text())  # the first is computing, lock held
    second = _python(WORKER, cache, counter)
    out = [p.communicate(timeout=120) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, out
    assert len(counter.read_text().splitlines()) == 1  # computed once
    assert json.loads(out[0][0]) == json.loads(out[1][0])  # the second read the first one's result
    (lock,) = cache.glob("stand-in-seed0-*.lock")
    assert out[1][1].strip() == f"waiting for unit stand-in-seed0, computed by another process (it holds {lock})"
    assert len(list(cache.glob("stand-in-seed0-*.json"))) == 1


def test_a_lock_left_by_a_killed_process_is_taken_at_once(tmp_path):
    from filelock import FileLock

    key = fingerprint(**CONFIG)
    holder = _python(HOLDER, tmp_path, key, start_new_session=True)
    assert holder.stdout.readline().strip() == "locked"
    lock = FileLock(str(lock_path(tmp_path, "stand-in-seed0", key)))
    with pytest.raises(TimeoutError):  # held: filelock's Timeout is a TimeoutError
        lock.acquire(timeout=0.2)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert lock_path(tmp_path, "stand-in-seed0", key).exists()  # the file stays; the kernel dropped the lock
    start = time.monotonic()
    lock.acquire(timeout=5)
    assert time.monotonic() - start < 1.0
    lock.release()


@pytest.mark.slow
def test_two_runs_of_an_experiment_into_one_out_compute_each_unit_once(tmp_path):
    """Two ``taskextrap reproduce`` processes started together on the same experiment and
    ``--out``: each unit's computation (parameter.run_unit, counted) happens once, both succeed
    and their tables are the same."""
    counter = tmp_path / "computed"
    script = textwrap.dedent(f"""
        import sys
        from taskextrap.experiments import parameter
        from taskextrap.cli import main

        honest = parameter.run_unit

        def counted(spec, *args, **kwargs):
            with open({str(counter)!r}, "a") as fh:
                fh.write(f"{{spec.family.name}}-seed{{spec.seed}}\\n")
            return honest(spec, *args, **kwargs)

        parameter.run_unit = counted
        main(sys.argv[1:])
    """)
    args = (
        "reproduce",
        "parameter",
        "--profile",
        "tiny",
        "--family",
        "quadratic",
        "--seeds",
        "2",
        "--out",
        tmp_path / "runs",
        "--quiet",
        "--no-plots",
    )
    runs = [_python(script, *args) for _ in range(2)]
    out = [p.communicate(timeout=300) for p in runs]
    assert all(p.returncode == 0 for p in runs), out
    assert sorted(counter.read_text().splitlines()) == ["quadratic-seed0", "quadratic-seed1"]

    def table(stdout):  # the console table without its wall-time line
        return [line for line in stdout.splitlines() if not line.startswith(("wall time", "written:"))]

    assert table(out[0][0]) == table(out[1][0])
    results = json.loads((tmp_path / "runs" / "parameter-paper-tiny-quadratic" / "results.json").read_text())
    assert results["seeds"] == [0, 1]


# --- file systems without flock -----------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        NotImplementedError("FileSystem does not appear to support flock; use SoftFileLock instead"),
        OSError(errno.ENOLCK, "No locks available"),  # NFS without a lock manager
    ],
)
def test_without_file_locks_units_and_plots_are_written_unlocked_after_one_warning(tmp_path, monkeypatch, failure):
    import filelock

    from taskextrap.errors import TaskextrapWarning
    from taskextrap.experiments import locks, plotfiles
    from taskextrap.experiments.units import UnitResult, cached_unit, load_unit

    class NoFlock:
        def __init__(self, path, *args, **kwargs):
            pass

        def acquire(self, *args, **kwargs):
            raise failure

        def release(self):
            pytest.fail("released a lock that was never taken")

    monkeypatch.setattr(filelock, "FileLock", NoFlock)
    monkeypatch.setattr(locks, "_warned", set())
    with pytest.warns(TaskextrapWarning) as caught:
        for seed in (0, 1):
            config = {**CONFIG, "seed": seed}
            cached_unit(tmp_path / "units", f"stand-in-seed{seed}", config, lambda: UnitResult({"m": [1.0]}, {}))
            assert load_unit(tmp_path / "units", f"stand-in-seed{seed}", fingerprint(**config)) is not None
        plotfiles.record(tmp_path / "plots", "unit-a", {"a.png": b"1"})
        assert plotfiles.prune(tmp_path / "plots", ["unit-a"]) == []
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'units'} is on a file system without file locks (flock): running without them, so two "
        "processes sharing this --out may compute a unit twice"
    ]  # one line, not one per lock or folder


def test_another_lock_failure_is_not_taken_for_a_file_system_without_locks(tmp_path, monkeypatch):
    import filelock

    from taskextrap.experiments.units import unit_lock

    class Broken:
        def __init__(self, path, *args, **kwargs):
            pass

        def acquire(self, *args, **kwargs):
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(filelock, "FileLock", Broken)
    with pytest.raises(OSError, match="Input/output error"), unit_lock(tmp_path, "stand-in-seed0", "k"):
        pytest.fail("ran without its lock")


def test_a_saved_unit_is_read_without_taking_its_lock(tmp_path, monkeypatch):
    """A finished unit is read back as it is: no lock file, no wait behind a process holding it."""
    import numpy as np

    from taskextrap.experiments import units

    cache = tmp_path / "units"
    result = units.UnitResult({"m": np.array([0.25])}, {"t": 1.0})
    units.cached_unit(cache, "stand-in-seed0", CONFIG, lambda: result)
    for lock in cache.glob("*.lock"):
        lock.unlink()

    def no_lock(*args):
        raise AssertionError("a saved unit took its lock")

    monkeypatch.setattr(units, "unit_lock", no_lock)
    again = units.cached_unit(cache, "stand-in-seed0", CONFIG, lambda: pytest.fail("recomputed"))
    assert again.errors["m"].tolist() == [0.25] and not list(cache.glob("*.lock"))
