"""A library streamed from Parquet row groups (``taskextrap.streaming``): the index holds each
task's Γ of its own points and its nearest reference tasks, whatever the row groups and engine."""

from __future__ import annotations

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.search.index import nearest_exact
from taskextrap.streaming import Engine, NearAnchors, read_index, row_groups, stream_index, write_library
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet
from taskextrap.tasks.observed import read_tasks

pytest.importorskip("pyarrow")
FAMILY = PARAMETER_FAMILIES["cubic"]
NEAR = NearAnchors(k=4, reference=20)


def _observed(n: int, seed: int = 0):
    """``n`` cubic tasks of 12 to 16 points each at their own inputs (two point counts)."""
    g = np.random.default_rng(seed)
    tasks = TaskSet.sample(FAMILY, {"F1_1": n // 2, "F1_2": n - n // 2}, g)
    cols: dict[str, list] = {"task": [], "x": [], "y": []}
    for i in range(n):
        m = 12 if i % 3 == 0 else 16
        x = np.sort(g.uniform(*FAMILY.domain, m))
        cols["task"] += [f"t{i:03d}"] * m
        cols["x"] += x.tolist()
        cols["y"] += tasks.values(x[None], [i])[0].tolist()
    return read_tasks({k: np.asarray(v) for k, v in cols.items()})


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny RTE fitted on 40 observed tasks and saved; the tasks as a Parquet file of row groups
    of 15 tasks (15, 15, 10)."""
    from tests.conftest import tiny_rte

    d = tmp_path_factory.mktemp("stream")
    observed = _observed(40)
    rte = tiny_rte(min_context=8).fit(observed.library())
    rte.save_pretrained(d / "model")
    write_library(observed, d / "library.parquet", tasks_per_group=15)
    return d, observed, rte


def _brute_near(z, ref, k):
    """Each task's ``k`` nearest reference tasks, itself excluded, by brute force."""
    out = []
    for i in range(len(z)):
        others = ref[ref != i]
        idx, _ = nearest_exact(z[i : i + 1], z[others], k)
        out.append(others[idx[0]])
    return np.array(out)


def test_the_index_is_each_tasks_embedding_and_its_nearest_reference_tasks(setup, tmp_path):
    d, observed, rte = setup
    record = stream_index(d / "model", d / "library.parquet", tmp_path / "index", near=NEAR, progress=False)
    assert record["complete"] and record["tasks"] == 40 and record["row_groups"] == [15, 15, 10]
    index = read_index(tmp_path / "index")
    assert index["task"].tolist() == observed.ids.astype(str).tolist()
    assert index["position"].tolist() == list(range(40))
    counts = observed.counts()
    for m in np.unique(counts):  # Γ of each task's own points, as RTE.embed reads a context
        idx = np.flatnonzero(counts == m)
        rows = observed.offsets[idx][:, None] + np.arange(m)
        np.testing.assert_allclose(index["z"][idx], rte.embed(observed.x[rows], observed.y[rows]), rtol=1e-6, atol=1e-9)
    ref = np.asarray(record["reference"])
    assert len(ref) == 20 and len(set(ref.tolist())) == 20
    np.testing.assert_array_equal(index["near"], _brute_near(index["z"], ref, 4))
    assert not (index["near"] == index["position"][:, None]).any()  # never itself
    assert (np.diff(index["distance"], axis=1) >= 0).all()


def test_row_groups_do_not_change_the_index(setup, tmp_path):
    d, observed, _ = setup
    write_library(observed, tmp_path / "seven.parquet", tasks_per_group=7)
    assert row_groups(tmp_path / "seven.parquet").counts == (7, 7, 7, 7, 7, 5)
    a = stream_index(d / "model", d / "library.parquet", tmp_path / "a", near=NEAR, progress=False)
    b = stream_index(d / "model", tmp_path / "seven.parquet", tmp_path / "b", near=NEAR, progress=False)
    assert a["reference"] == b["reference"]
    ia, ib = read_index(tmp_path / "a"), read_index(tmp_path / "b")
    np.testing.assert_allclose(ia["z"], ib["z"], rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(ia["near"], ib["near"])


def test_a_stopped_index_resumes_from_its_parts_and_another_plan_is_refused(setup, tmp_path, monkeypatch):
    from taskextrap import streaming

    d, _, _ = setup
    out = tmp_path / "index"
    first = stream_index(d / "model", d / "library.parquet", out, near=NEAR, progress=False)
    before = read_index(out)
    assert stream_index(d / "model", d / "library.parquet", out, near=NEAR, progress=False) == first  # done: kept
    (out / "part-00001.parquet").unlink()
    again = stream_index(d / "model", d / "library.parquet", out, near=NEAR, progress=False)
    assert again["groups_done"] == 1  # only the missing row group
    for k in before:
        np.testing.assert_array_equal(before[k], read_index(out)[k])

    calls = []  # a run stopped in the second pass, after one part: every part and embed part is finished
    near = streaming.Worker.near

    def stop_after_one(self, *args):
        if calls:
            raise KeyboardInterrupt
        calls.append(args[0])
        return near(self, *args)

    monkeypatch.setattr(streaming.Worker, "near", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        stream_index(d / "model", d / "library.parquet", tmp_path / "stopped", near=NEAR, progress=False)
    monkeypatch.setattr(streaming.Worker, "near", near)
    names = sorted(p.name for p in (tmp_path / "stopped").glob("*.parquet"))
    assert names == ["embed-00001.parquet", "embed-00002.parquet", "part-00000.parquet"]
    resumed = stream_index(d / "model", d / "library.parquet", tmp_path / "stopped", near=NEAR, progress=False)
    assert resumed["groups_done"] == 2 and not list((tmp_path / "stopped").glob("embed-*"))
    for k in before:
        np.testing.assert_array_equal(before[k], read_index(tmp_path / "stopped")[k])
    with pytest.raises(TaskextrapError, match="holds the index of another library, model or setting"):
        stream_index(d / "model", d / "library.parquet", out, near=NearAnchors(3, 20), progress=False)
    assert (out / "part-00000.parquet").is_file()  # nothing of it was overwritten


def test_bad_layouts_and_arguments_are_one_line_errors(setup, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d, _, _ = setup
    split = tmp_path / "split.parquet"  # task b's rows in two row groups
    with pq.ParquetWriter(split, pa.schema([("task", pa.string()), ("x", pa.float64()), ("y", pa.float64())])) as w:
        w.write_table(pa.table({"task": ["a", "a", "b"], "x": [0.0, 1.0, 0.0], "y": [0.0, 1.0, 2.0]}))
        w.write_table(pa.table({"task": ["b", "c"], "x": [1.0, 0.0], "y": [3.0, 4.0]}))
    with pytest.raises(TaskextrapError, match=r"task 'b' has rows apart in row groups 0 and 1"):
        row_groups(split)
    apart = tmp_path / "apart.parquet"  # task a in row groups 0 and 2, not next to each other
    with pq.ParquetWriter(apart, pa.schema([("task", pa.string()), ("x", pa.float64()), ("y", pa.float64())])) as w:
        for t in ("a", "b", "a"):
            w.write_table(pa.table({"task": [t], "x": [0.0], "y": [0.0]}))
    with pytest.raises(TaskextrapError, match=r"task 'a' has rows apart in row groups 0 and 2"):
        row_groups(apart)
    scattered = tmp_path / "scattered.parquet"
    pq.write_table(pa.table({"task": ["a", "b", "a"], "x": [0.0, 0.0, 1.0], "y": [0.0, 1.0, 2.0]}), scattered)
    with pytest.raises(TaskextrapError, match=r"task 'a' has rows apart in row group 0;"):
        row_groups(scattered)
    with pytest.raises(TaskextrapError, match=r"no column 'value' \(columns: \['task', 'x', 'y'\]\)"):
        row_groups(scattered, ("task", "x", "value"))
    with pytest.raises(TaskextrapError, match="engine must be one of"):
        stream_index(d / "model", d / "library.parquet", tmp_path / "x", engine=Engine("spark"))
    with pytest.raises(TaskextrapError, match="workers must be"):
        Engine("ray", 0)
    with pytest.raises(TaskextrapError, match="not a saved model folder"):
        stream_index(tmp_path, d / "library.parquet", tmp_path / "x")
    with pytest.raises(TaskextrapError, match="no such Parquet file"):
        row_groups(tmp_path / "missing.parquet")
    with pytest.raises(TaskextrapError, match="not a complete streamed index"):
        read_index(tmp_path)
    short = tmp_path / "short.parquet"  # a task of 5 points, below the model's 8
    pq.write_table(pa.table({"task": ["a"] * 8 + ["b"] * 5, "x": [*range(8), *range(5)], "y": [0.0] * 13}), short)
    with pytest.raises(TaskextrapError, match=r"row group 0: task 'b' has 5 point\(s\); this model reads at least 8"):
        stream_index(d / "model", short, tmp_path / "x")
    assert not (tmp_path / "x").exists()  # refused before anything was written


@pytest.mark.slow
def test_two_ray_workers_write_the_serial_index_to_the_bit(setup, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_worker_niceness", "0")  # Ray's 15 leaves its workers waiting on a busy machine
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    d, _, _ = setup
    serial = stream_index(d / "model", d / "library.parquet", tmp_path / "serial", near=NEAR, progress=False)
    ray = stream_index(
        d / "model", d / "library.parquet", tmp_path / "ray", engine=Engine("ray", 2), near=NEAR,
        progress=False,
    )  # fmt: skip
    assert ray["workers"] == 2 and ray["reference"] == serial["reference"]
    a, b = read_index(tmp_path / "serial"), read_index(tmp_path / "ray")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_the_command_line_writes_the_same_index(setup, tmp_path, capsys):
    from taskextrap.cli import cli, main
    from taskextrap.operators.pairs import NEAR_POOL

    assert {p.name: p.default for p in cli.commands["index"].params}["reference"] == NEAR_POOL

    d, _, _ = setup
    args = ["--model", str(d / "model"), "--data", str(d / "library.parquet"), "--near", "4", "--reference", "20"]
    with pytest.raises(SystemExit) as done:
        main(["index", *args, "--out", str(tmp_path / "cli"), "--quiet"])
    assert done.value.code == 0
    assert "indexed 40 tasks in 3 row groups on serial (1 worker(s))" in capsys.readouterr().out
    stream_index(d / "model", d / "library.parquet", tmp_path / "py", near=NEAR, progress=False)
    a, b = read_index(tmp_path / "cli"), read_index(tmp_path / "py")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    with pytest.raises(SystemExit) as bad:
        main(["index", *args, "--out", str(tmp_path / "x"), "--engine", "spark"])
    assert bad.value.code == 2 and "'spark' is not one of 'serial', 'ray'" in capsys.readouterr().err


def test_contiguous_columns_read_as_read_tasks_reads_them():
    from taskextrap.streaming import contiguous_tasks

    g = np.random.default_rng(3)
    counts = g.integers(3, 9, size=30)
    task = np.repeat([f"k{i}" for i in range(30)], counts)
    x, y = g.uniform(0, 1, len(task)), g.normal(size=len(task))  # unsorted within each task
    fast, slow = contiguous_tasks(task, x, y), read_tasks({"task": task, "x": x, "y": y}, min_points=1)
    assert fast.ids.tolist() == slow.ids.tolist() and fast.split.tolist() == slow.split.tolist()
    for a, b in ((fast.x, slow.x), (fast.y, slow.y), (fast.offsets, slow.offsets), (fast.params, slow.params)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TaskextrapError, match=r"task 'k0' has x=0.5 twice"):
        contiguous_tasks(np.array(["k0", "k0"]), np.array([0.5, 0.5]), np.zeros(2))
    with pytest.raises(TaskextrapError, match=r"y value nan at row 2 is not finite"):
        contiguous_tasks(np.array(["k0", "k0"]), np.array([0.1, 0.5]), np.array([0.0, np.nan]))


def test_the_serial_engine_computes_on_one_thread_in_every_pool_and_restores_them(setup, tmp_path, monkeypatch):
    # Ray's actors compute on one thread in torch and in the BLAS; the serial engine's worker must
    # too, or the two engines' sums could round differently
    import torch
    from threadpoolctl import threadpool_info

    from taskextrap.streaming import Worker, _Pool

    d, _, _ = setup
    seen = lambda self: (torch.get_num_threads(), {p["num_threads"] for p in threadpool_info()})  # noqa: E731
    monkeypatch.setattr(Worker, "threads_now", seen, raising=False)
    torch_before, pools_before = seen(None)
    args = (str(d / "model"), str(d / "library.parquet"), str(tmp_path), ("task", "x", "y"))
    with _Pool(Engine("serial", 1), args) as run:
        assert run("threads_now", [()], progress=False) == [(1, {1})]
    assert seen(None) == (torch_before, pools_before)


def test_index_refuses_a_model_naming_user_code_without_trust_code(setup, tmp_path, capsys):
    """A model folder is data for `index` as for predict and evaluate: a config naming a module is
    refused in one line before any worker starts, and `--trust-code` imports it."""
    import json
    import shutil

    from taskextrap.cli import main

    d, _, _ = setup
    folder = tmp_path / "user-model"
    shutil.copytree(d / "model", folder)
    config = json.loads((folder / "config.json").read_text())
    config["library"]["family"] = {"module_attr": "nosuchmodule:fam", "code_hash": "0" * 16}
    (folder / "config.json").write_text(json.dumps(config))
    argv = ["index", "--model", str(folder), "--data", str(d / "library.parquet"), "--out", str(tmp_path / "i")]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "user code (nosuchmodule:fam)" in err and "--trust-code" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "i").exists()
    with pytest.raises(SystemExit) as e:
        main([*argv, "--quiet", "--trust-code"])  # trusted: the module is imported, and is not there
    assert e.value.code == 2 and "cannot import module 'nosuchmodule'" in capsys.readouterr().err
