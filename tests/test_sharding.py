"""Shards of a run: parsing, torchrun's environment, chunk ownership, waiting for other processes."""

import pytest

from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap import sharding as SH
from taskextrap.sharding import Shard, wait_for


def test_parse_and_ownership():
    s = Shard.parse("1/3")
    assert (s.index, s.count, s.is_lead) == (1, 3, False)
    assert [k for k in range(7) if s.owns(k)] == [1, 4]
    assert Shard().is_lead and all(Shard().owns(k) for k in range(5))


@pytest.mark.parametrize("text", ["3/3", "-1/2", "0/0", "a/b", "1", "1/2/3"])
def test_bad_shards_are_one_line_errors(text):
    with pytest.raises(TaskextrapError, match="I/N"):
        Shard.parse(text)


def test_torchrun_environment():
    assert Shard.from_env({}) == Shard()
    env = {"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}
    s = Shard.from_env(env)
    assert s == Shard(2, 4)
    assert s.device("cuda", env) == "cuda:1" and s.device("cpu", env) == "cpu"
    assert Shard().device("cuda", env) == "cuda"  # one process keeps the device it was given
    with pytest.raises(TaskextrapError, match="integers"):
        Shard.from_env({"RANK": "x", "WORLD_SIZE": "2"})


def test_wait_for_returns_the_first_ready_value(capsys):
    calls = iter([None, None, "done"])
    assert wait_for(lambda: next(calls), "the thing", limit_s=5, poll_s=0) == "done"
    assert "waiting for the thing" in capsys.readouterr().err


def test_wait_for_gives_up_with_one_line(monkeypatch):
    monkeypatch.setattr(SH, "POLL_S", 0.0)
    with pytest.raises(TaskextrapError, match="gave up after 0 s waiting for chunk 3") as err:
        wait_for(lambda: None, "chunk 3", limit_s=0.01)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "args, message",
    [
        (["reproduce", "parameter", "--shard", "0/2"], "parameter does not take --shard"),
        (["reproduce", "all", "--shard", "1/2"], "name it instead of 'all'"),
        (["reproduce", "codeio", "--shard", "2/2"], "0 <= I < N"),
    ],
)
def test_cli_rejects_bad_shards(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as code:
        main([*args, "--out", str(tmp_path), "--quiet", "--no-plots", "--profile", "tiny"])
    assert code.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # nothing written
