"""Mid-training checkpoints (``operators.checkpoints``): a network stopped part-way and run again
ends with the same weights and loss history, to the bit, as one that never stopped; so does a
stopped unit of an experiment, whose checkpoints go once it is saved."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from taskextrap.operators import checkpoints
from taskextrap.operators.checkpoints import Checkpoint, checkpointing
from taskextrap.operators.jobs import Job, TrainConfig
from taskextrap.operators.streams import RowStream
from taskextrap.operators.train import train_jobs

CFG = TrainConfig(steps=60, batch=48, lr=3e-3, eval_every=7)


class _Stop(Exception):
    pass


def _rows(g):  # a fresh pass of 100 rows: two batches of 48 each, the rest unused
    x = g.uniform(-1, 1, (100, 3)).astype(np.float32)
    return x, (x**2).sum(1).astype(np.float32)


def _stream(prefetch=True, batch=48, group=1, steps=60):
    return RowStream(_rows, np.random.default_rng(5), batch, steps, prefetch=prefetch, group=group)


def _job(prefetch=True) -> Job:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    g = np.random.default_rng(9)
    xv = torch.from_numpy(g.uniform(-1, 1, (32, 3)).astype(np.float32))
    return Job(net, _stream(prefetch), (xv, (xv**2).sum(1, keepdim=True)), CFG, name="net")


def _stop_after_a_save_at(monkeypatch, step: int) -> None:
    """Saves as usual (one every step), then stop the run once the save after ``step`` steps is written."""
    real = Checkpoint.save

    def save(self, at, *args):
        real(self, at, *args)
        if at >= step:
            raise _Stop

    monkeypatch.setattr(Checkpoint, "save", save)


def _weights(job: Job) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in job.net.parameters()]


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize(("batch", "group"), [(48, 1), (None, 1), (48, 4)])
def test_a_stream_restored_from_its_state_serves_the_same_batches(prefetch, batch, group):
    whole = _stream(prefetch, batch, group)
    expected = [whole(s) for s in range(30)]
    first = _stream(prefetch, batch, group)
    for s in range(13):
        first(s)
    state = first.state()
    again = _stream(prefetch, batch, group)
    again.restore(state)
    for s in range(13, 30):
        x, y = again(s)
        assert torch.equal(x, expected[s][0]) and torch.equal(y, expected[s][1])
    for st in (whole, first, again):
        st.close()


def test_a_stream_is_restored_only_before_its_first_batch():
    s = _stream(prefetch=False)
    s(0)
    with pytest.raises(RuntimeError, match="before the first batch"):
        s.restore(s.state())


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_stopped_network_trains_on_from_its_checkpoint_to_the_same_bits(tmp_path, monkeypatch, prefetch):
    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)
    whole = _job(prefetch)
    train_jobs([whole])
    stopped = _job(prefetch)
    with monkeypatch.context() as m:
        _stop_after_a_save_at(m, 23)
        with checkpointing(tmp_path), pytest.raises(_Stop):
            train_jobs([stopped])
    assert [p.name for p in tmp_path.iterdir()] == ["net-0.safetensors"]
    resumed, trained = _job(prefetch), []
    resumed.progress = lambda step, loss: trained.append(step)
    with checkpointing(tmp_path):
        train_jobs([resumed])
    assert trained == list(range(23, CFG.steps))  # it trained on from its checkpoint, not over
    assert resumed.history == whole.history and len(resumed.history) == CFG.steps
    assert all(np.array_equal(a, b) for a, b in zip(_weights(resumed), _weights(whole), strict=True))


def test_another_networks_checkpoint_is_not_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)
    with monkeypatch.context() as m:
        _stop_after_a_save_at(m, 5)
        with checkpointing(tmp_path), pytest.raises(_Stop):
            train_jobs([_job()])
    other = _job()
    other.net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    with checkpointing(tmp_path):
        train_jobs([other])
    assert "is another network's checkpoint" in capsys.readouterr().err
    assert len(other.history) == CFG.steps


def _stopped_at_5(tmp_path, monkeypatch, **job) -> None:
    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)
    with monkeypatch.context() as m:
        _stop_after_a_save_at(m, 5)
        with checkpointing(tmp_path), pytest.raises(_Stop):
            train_jobs([_job(**job)])


def test_the_same_network_from_other_initial_weights_or_on_another_machine_starts_over(tmp_path, monkeypatch, capsys):
    _stopped_at_5(tmp_path, monkeypatch)
    other = _job()
    with torch.no_grad():
        other.net[0].weight.add_(1.0)  # the same shapes and settings, another start
    with checkpointing(tmp_path):
        train_jobs([other])
    assert "another network's checkpoint, or from another machine" in capsys.readouterr().err
    assert len(other.history) == CFG.steps
    _stopped_at_5(tmp_path, monkeypatch)
    monkeypatch.setattr(checkpoints, "cpu_info", lambda: "Another CPU (AVX512)")
    moved = _job()
    with checkpointing(tmp_path):
        train_jobs([moved])
    assert "from another machine" in capsys.readouterr().err and len(moved.history) == CFG.steps


def test_a_resumed_network_counts_the_seconds_it_trained_before(tmp_path, monkeypatch):
    _stopped_at_5(tmp_path, monkeypatch)
    from taskextrap.files import read_state

    _, meta = read_state(tmp_path / "net-0.safetensors")
    resumed = _job()
    with checkpointing(tmp_path):
        train_jobs([resumed])
    assert meta["seconds"] > 0 and resumed.seconds > meta["seconds"]


def test_a_failing_save_is_one_line_and_training_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)
    calls = []

    def full_disk(*args):
        calls.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints, "write_state_atomic", full_disk)
    job = _job()
    with checkpointing(tmp_path):
        train_jobs([job])
    err = capsys.readouterr().err
    assert err.count("checkpoints of net stopped") == 1 and "No space left" in err
    assert len(calls) == 1 and len(job.history) == CFG.steps


def test_a_checkpoint_missing_a_field_leaves_the_network_fresh(tmp_path, monkeypatch, capsys):
    from taskextrap.files import read_state, write_state_atomic

    _stopped_at_5(tmp_path, monkeypatch)
    path = tmp_path / "net-0.safetensors"
    arrays, meta = read_state(path)
    del meta["sched"]
    write_state_atomic(path, arrays, meta)
    whole, again = _job(), _job()
    train_jobs([whole])
    with checkpointing(tmp_path):
        train_jobs([again])
    assert "is damaged" in capsys.readouterr().err
    assert again.history == whole.history  # trained from its own start, nothing half loaded


def test_a_damaged_checkpoint_is_one_line_and_training_starts_over(tmp_path, monkeypatch, capsys):
    (tmp_path / "net-0.safetensors").write_bytes(b"not a checkpoint")
    job = _job()
    with checkpointing(tmp_path):
        train_jobs([job])
    err = capsys.readouterr().err
    assert "starting over: cannot read" in err and len(job.history) == CFG.steps


def test_outside_a_checkpointing_block_nothing_is_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)
    monkeypatch.chdir(tmp_path)
    job = _job()
    train_jobs([job])
    assert job.checkpoint is None and not any(tmp_path.iterdir())


def test_a_stopped_unit_resumes_inside_its_training_and_its_checkpoints_go_once_saved(tmp_path, monkeypatch, capsys):
    from taskextrap.experiments.units import UnitResult, cached_unit, fingerprint, training_path

    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)

    def compute():
        job = train_jobs([_job()])[0]
        return UnitResult({"net": np.asarray(job.history[-5:])}, {})

    whole = compute()
    config = {"unit": "checkpointed"}
    folder = training_path(tmp_path, "u", fingerprint(**config))
    with monkeypatch.context() as m:
        _stop_after_a_save_at(m, 31)
        with pytest.raises(_Stop):
            cached_unit(tmp_path, "u", config, compute)
    assert (folder / "net-0.safetensors").is_file()
    done = cached_unit(tmp_path, "u", config, compute)
    assert "resuming net at step 31 of 60" in capsys.readouterr().err
    assert np.array_equal(done.errors["net"], whole.errors["net"])
    assert not folder.exists()
    (folder / "net-0.safetensors").parent.mkdir()  # a copy brings a finished unit's checkpoints back
    (folder / "net-0.safetensors").write_bytes(b"stale")
    assert np.array_equal(cached_unit(tmp_path, "u", config, compute).errors["net"], whole.errors["net"])
    assert not folder.exists()


def test_the_cnp_stopped_on_a_fresh_stream_resumes_to_the_same_predictions(tmp_path, monkeypatch, capsys):
    """The network checkpointing is for: the ``cnp``, trained alone under the subnormal flush on
    fresh library draws each pass (whole tasks a batch)."""
    from taskextrap import audit
    from taskextrap.baselines.method import SharedDraws
    from taskextrap.baselines.table import begin_methods
    from taskextrap.estimators.base import fit_together
    from taskextrap.scaling import FamilyScaler

    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)

    def draws(g, n=64):
        x = g.uniform(-1, 1, (n, 9))
        y = g.uniform(1, 2, (n, 1)) * x
        return audit.Batch((x[:, :5], y[:, :5], x[:, 5:], y[:, 5:], np.zeros((n, 0))))

    def fitted():
        shared = SharedDraws(FamilyScaler(0.0, 1.0, 0.0, 1.0), 5, TrainConfig(steps=1, batch=64, eval_every=10),
                             draws, draws(np.random.default_rng(1)))  # fmt: skip
        methods, pending, _ = begin_methods(("cnp",), None, shared, seed=0, device="cpu")
        fit_together(list(pending.values()))
        cx, cy, qx, _, _ = draws(np.random.default_rng(2), 4)
        return methods["cnp"].predict(cx, cy, qx)

    whole = fitted()
    with monkeypatch.context() as m:
        _stop_after_a_save_at(m, 17)
        with checkpointing(tmp_path), pytest.raises(_Stop):
            fitted()
    with checkpointing(tmp_path):
        resumed = fitted()
    assert "resuming cnp at step 17 of " in capsys.readouterr().err
    assert all(np.array_equal(a, b) for a, b in zip(resumed, whole, strict=True))


@pytest.mark.slow  # three tiny parameter runs (a minute): make test-slow
def test_a_run_stopped_inside_a_units_cnp_training_gives_the_same_table_when_run_again(tmp_path, monkeypatch, capsys):
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import run_experiment

    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)

    def run(out):
        opts = RunOptions(profile="tiny", out=out, family="quadratic", plots=False, progress=False)
        return {(r["method"], r["metric"], r["group"]): r["value"] for r in run_experiment("parameter", opts)["rows"]}

    whole = run(tmp_path / "whole")
    real = Checkpoint.save

    def save(self, at, *args):
        real(self, at, *args)
        if self.path.name == "cnp-0.safetensors" and at >= 3:
            raise _Stop

    with monkeypatch.context() as m:
        m.setattr(Checkpoint, "save", save)
        with pytest.raises(_Stop):
            run(tmp_path / "stopped")
    assert len(list((tmp_path / "stopped" / "units").glob("*.training/cnp-0.safetensors"))) == 1
    assert run(tmp_path / "stopped") == whole
    assert "resuming cnp at step 3 of" in capsys.readouterr().err
    assert not list((tmp_path / "stopped" / "units").glob("*.training"))
