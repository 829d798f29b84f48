"""The speed work keeps every number: shared Phase 1a, memoised embeddings, chunked passes and
float32 rows give the same values as the straightforward computation; and benchmarks/speed.py."""

import json
import os
import time

import numpy as np
import pytest
import torch

from taskextrap.embed import estimators as E
from taskextrap.embed.probe import init_probe
from taskextrap.errors import TaskextrapError
from taskextrap.operators.mlp import block_mlp, predict_rows
from taskextrap.operators.parameter import _rows
from taskextrap.operators.rows import RowBlocks
from taskextrap.seeding import torch_generator


def _tasks(n=40, k=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, k, generator=g) * 2 - 1
    return x, torch.sin(3 * x) + 0.1 * torch.randn(n, k, generator=g)


def test_flat_adam_adaptation_is_bit_identical_to_the_textbook_form(load_script):
    textbook = load_script("benchmarks/kernel_timings.py").textbook_adapted  # the form before the rewrite
    p0 = init_probe(16, torch_generator(0, "probe"), xavier=True)
    x, y = _tasks()
    assert torch.equal(E._per_task_adapted(p0, x, y, 7, 1e-2), textbook(p0, x, y, 7, 1e-2))


@pytest.mark.parametrize("method", E.EMBEDDINGS)
def test_a_task_embeds_the_same_whatever_chunk_it_is_in(method, monkeypatch):
    x, y = _tasks(n=50)
    emb = E.ProxyEmbedding(method, dim=4, width=16, pretrain_steps=5, adapt_steps=3).fit(x.numpy(), y.numpy())
    whole = emb.raw(x.numpy(), y.numpy())
    monkeypatch.setattr(E, "CHUNK", 7)
    np.testing.assert_array_equal(emb.raw(x.numpy(), y.numpy()), whole)


def test_the_embedding_memo_returns_the_same_numbers_as_copies_and_forgets_on_refit(monkeypatch):
    x, y = _tasks(n=30)
    emb = E.ProxyEmbedding("gradient", dim=4, width=16, pretrain_steps=5).fit(x.numpy(), y.numpy())
    calls = []
    project = emb.project
    monkeypatch.setattr(emb, "project", lambda a, b: calls.append(1) or project(a, b))
    first = emb.transform(x.numpy(), y.numpy())
    first[:] = 0.0  # a caller scribbling on its copy changes nothing remembered
    again = emb.transform(x.numpy().copy(), y.numpy().copy())  # equal bytes, other arrays: one computation
    assert len(calls) == 1 and not np.allclose(again, 0.0)
    y2 = y.numpy().copy()
    y2[0, 0] = np.nextafter(y2[0, 0], np.inf)  # one changed bit is another context
    emb.transform(x.numpy(), y2)
    assert len(calls) == 2
    for i in range(E.MEMO_SIZE + 1):  # bounded: the oldest is forgotten
        emb.transform(x.numpy()[: i + 1], y.numpy()[: i + 1])
    assert len(emb._memo) == E.MEMO_SIZE
    emb.fit(x.numpy(), -y.numpy())  # a refit forgets everything
    assert not emb._memo


def test_rows_are_written_in_float32_with_the_values_of_a_float64_concatenation():
    g = np.random.default_rng(0)
    per_query = [g.normal(size=(5, 3)) * 1e3, g.normal(size=(5, 3))]
    per_task = [g.normal(size=(5, 4)), g.normal(size=(5, 2)).astype(np.float32)]
    n, q = 5, 3
    cols = [c.reshape(n, q, 1) for c in per_query] + [
        np.broadcast_to(b[:, None, :], (n, q, b.shape[1])) for b in per_task
    ]
    expected = np.concatenate(cols, axis=2).reshape(n * q, -1).astype(np.float32)
    out = _rows(per_query, per_task)
    assert out.dtype == np.float32 and np.array_equal(out, expected)
    blocks = RowBlocks.of([per_query[0][..., None], per_task[0][:, None]], n, q)
    assert np.array_equal(blocks.numpy(), expected[:, [0, 2, 3, 4, 5]])
    # a masked block (values, 0/1 mask) multiplied in float32 is the float64 product cast once,
    # signed zeros included
    resid, mask = g.normal(size=(n, 1, 4)), (g.random((1, q, 4)) < 0.5).astype(float)
    masked = RowBlocks.of([(resid, mask)], n, q).numpy()
    want = np.broadcast_to(resid * mask, (n, q, 4)).reshape(n * q, 4).astype(np.float32)
    assert np.array_equal(masked, want) and np.array_equal(np.signbit(masked), np.signbit(want))


def test_predicting_in_chunks_of_a_few_hundred_rows_or_more_gives_the_rows_of_one_pass():
    """A matrix product rounds a pass's last few rows (its row count mod 8) with another kernel,
    so chunk sizes that divide one another leave the same rows last: 4096-row chunks give the
    bits of 65536-row ones (the size before), on a row count that is no multiple of anything.
    Passes of only 8 rows may take yet another kernel (on an AMD EPYC, 2 of 70,003 rows differ
    by one ulp), so the property is claimed for chunks of 512 rows and more, which is all
    prediction uses (PREDICT_CHUNK)."""
    net = block_mlp(6, 1, seed=0).eval()
    rows = np.random.default_rng(0).normal(size=(70003, 6)).astype(np.float32)
    before = predict_rows(net, rows, chunk=65536)
    for chunk in (512, 4096):
        assert torch.equal(predict_rows(net, rows, chunk=chunk), before)


def test_objective_rte_adopting_phase1a_predicts_exactly_as_one_fitted_alone(make_rte, quad_library, quad_targets):
    _, obs = quad_targets
    strategy_a = make_rte().fit(quad_library)
    settings = dict(search="objective", retrieve=3, phi_scales=(0.5, 1.0))
    alone = make_rte(**settings).fit(quad_library)
    shared = make_rte(**settings).fit(quad_library, embedded=strategy_a)
    assert shared.embedding_ is strategy_a.embedding_ and shared.timing_["embedding_s"] == 0.0
    np.testing.assert_array_equal(shared.z_library_, alone.z_library_)
    np.testing.assert_array_equal(
        shared.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), alone.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    )


def test_adopting_phase1a_is_refused_across_libraries_settings_or_kinds(
    make_rte, make_library, quad_library, fitted_rte
):
    from taskextrap.baselines.oracles import TransductiveOracle

    with pytest.raises(TaskextrapError, match="same library"):
        make_rte().fit(make_library(1), embedded=fitted_rte)
    with pytest.raises(TaskextrapError, match="differs: library_draws"):
        make_rte(library_draws=2).fit(quad_library, embedded=fitted_rte)
    with pytest.raises(TaskextrapError, match="same kind"):
        TransductiveOracle(n_pairs=300, train=fitted_rte.train, seed=0).fit(quad_library, embedded=fitted_rte)
    with pytest.raises(TaskextrapError, match=r"not fitted|fit"):
        make_rte().fit(quad_library, embedded=make_rte())


def test_pool_distances_are_the_rows_computed_directly(fitted_rte, monkeypatch):
    from taskextrap.operators import pairs as P

    d, pool = fitted_rte.draws_, fitted_rte.train_tasks_
    idx = np.array([5, 0, 5, len(d.z) - 1])
    direct = np.linalg.norm(d.z[idx, None] - fitted_rte.z_library_[None, pool], axis=2)
    cached = fitted_rte._pool_distances(idx)
    np.testing.assert_array_equal(cached, direct)
    cached[:] = -1.0  # a copy: the caller marks its own rows
    np.testing.assert_array_equal(fitted_rte._pool_distances(idx), direct)
    monkeypatch.setattr(P, "POOL_DISTANCE_ENTRIES", 1)  # too large to keep: computed per call, same rows
    np.testing.assert_array_equal(fitted_rte._pool_distances(idx), direct)


@pytest.mark.slow
def test_speed_benchmark_times_a_unit_and_renders_its_table(load_script, tmp_path):
    speed = load_script("benchmarks/speed.py")
    record = speed.time_unit("parameter", threads=1, profile="tiny")
    assert record["wall_s"] > 0 and record["peak_rss_mb"] > 0 and record["threads"] == 1
    assert {"training_s", "embedding_s", "evaluation_s"} <= set(record["timing"])
    assert "--profile tiny" in record["command"] and "--family cubic" in record["command"]
    # the unit's six MSE networks stacked (few operators, no host read) and the cnp alone: its own
    # likelihood loss is not a stacked step, so its loop reads the host (loss and Adam's step counts)
    counters = record["counters"]
    assert counters["networks"] == 7 and counters["stacked_groups"] == 1 and counters["trained_alone"] == 1
    assert counters["stacked_host_reads_per_step"] == 0 and counters["host_reads_per_step"] > 0
    assert 0 < counters["ops_per_step"] <= 450 and "gpu_util" not in record  # a CPU run
    doc = {
        "anchor": speed.ANCHOR,
        "labels": {
            "before": {"parameter": {**record, "wall_s": 30.0}},
            "after": {"parameter": {**record, "wall_s": 10.0}},
        },
    }
    table = speed.table(doc)
    assert "| `parameter` | cubic, seed 0 | 30 | 10 | 3.0x |" in table and "223 s per family-seed" in table
    assert f"| {counters['ops_per_step']:.0f} (7, 1 alone) | {counters['host_reads_per_step']:.0f} |" in table
    shared = speed.time_unit("parameter-multistep:after-parameter", threads=1, profile="tiny")
    assert "fits_loaded_s" in shared["timing"] and "embedding_s" not in shared["timing"]
    out = tmp_path / "speed.json"
    out.write_text(json.dumps(doc))
    assert speed.load(out)["labels"]["after"]["parameter"]["wall_s"] == 10.0


@pytest.mark.parametrize("method", E.EMBEDDINGS)
def test_an_embedding_saved_and_restored_transforms_to_the_same_bits(method, tmp_path):
    from taskextrap.files import read_state, write_state_atomic

    x, y = _tasks(n=30)
    emb = E.ProxyEmbedding(method, dim=4, width=16, pretrain_steps=5, adapt_steps=3).fit(x.numpy(), y.numpy())
    write_state_atomic(tmp_path / "emb.safetensors", *emb.state())
    again = E.ProxyEmbedding.from_state(*read_state(tmp_path / "emb.safetensors"))
    np.testing.assert_array_equal(again.transform(x.numpy(), y.numpy()), emb.transform(x.numpy(), y.numpy()))


@pytest.mark.parametrize("kind", ["strategy-a", "objective", "oracle"])
def test_a_fitted_rte_saved_and_restored_predicts_the_same_bits(kind, make_rte, quad_library, quad_targets, tmp_path):
    from taskextrap.baselines.oracles import TransductiveOracle
    from taskextrap.files import read_state, write_state_atomic

    _, obs = quad_targets
    make = {
        "strategy-a": lambda: make_rte(),
        "objective": lambda: make_rte(search="objective", retrieve=3),
        "oracle": lambda: TransductiveOracle(n_pairs=300, train=make_rte().train, seed=0),
    }[kind]
    fitted = make().fit(quad_library)
    write_state_atomic(tmp_path / "rte.safetensors", *fitted.fitted_state())
    restored = make().restore(quad_library, *read_state(tmp_path / "rte.safetensors"))
    if kind == "oracle":
        d = fitted.decompose_truth(obs.ctx_x, obs.ctx_y, obs.params)
        assert np.array_equal(
            restored.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d), fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d)
        )
    else:
        assert np.array_equal(
            restored.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)[1],
            fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)[1],
        )
        assert np.array_equal(
            restored.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
        )
    with pytest.raises(TaskextrapError, match="another estimator or settings"):
        make_rte(seed=1).restore(quad_library, *read_state(tmp_path / "rte.safetensors"))


def test_a_damaged_artifact_is_refitted_with_a_warning_and_a_good_one_is_loaded(tmp_path):
    from taskextrap.errors import TaskextrapWarning
    from taskextrap.experiments.artifacts import artifact_path, cached_fit
    from taskextrap.files import read_state, write_state_atomic

    calls = []

    def fit():
        calls.append(1)
        return np.arange(3.0)

    def save(v, folder):
        write_state_atomic(folder / "v.safetensors", {"v": v}, {})

    args = (
        tmp_path / "units",
        "thing",
        {"a": 1},
        fit,
        save,
        lambda folder: read_state(folder / "v.safetensors")[0]["v"],
    )
    value, loaded = cached_fit(*args)
    assert not loaded and calls == [1]
    folder = artifact_path(tmp_path / "units", "thing", {"a": 1})
    assert sorted(p.name for p in folder.iterdir()) == ["complete", "v.safetensors"]
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left
    value, loaded = cached_fit(*args)
    assert loaded and calls == [1] and np.array_equal(value, np.arange(3.0))
    (folder / "v.safetensors").write_bytes(b"\x00garbage")
    with pytest.warns(TaskextrapWarning, match="cannot be used"):
        value, loaded = cached_fit(*args)
    assert not loaded and calls == [1, 1] and np.array_equal(value, np.arange(3.0))
    value, loaded = cached_fit(None, "thing", {"a": 1}, fit, args[4], args[5])  # no cache: always a fit
    assert not loaded and calls == [1, 1, 1]


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_multistep_loads_the_parameter_experiments_fits_and_scores_the_same(tmp_path):
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import run_experiment

    def run(name, out):
        res = run_experiment(name, RunOptions(profile="tiny", out=out, family="exp", plots=False, progress=False))
        return res, {(r["group"], r["method"], r["metric"]): r["value"] for r in res["rows"]}

    _, alone = run("parameter-multistep", tmp_path / "alone")
    run("parameter", tmp_path / "shared")
    res, shared = run("parameter-multistep", tmp_path / "shared")
    assert "fits_loaded_s" in res["timing"] and "embedding_s" not in res["timing"]
    assert shared == alone


def test_the_fits_own_contexts_are_projected_from_the_raw_outputs_it_already_computed(monkeypatch):
    x, y = _tasks(n=30)
    emb = E.ProxyEmbedding("adapted", dim=4, width=16, adapt_steps=3).fit(x.numpy(), y.numpy())
    calls = []
    raw = emb.raw
    monkeypatch.setattr(emb, "raw", lambda a, b: calls.append(len(a)) or raw(a, b))
    first = emb.project(x.numpy(), y.numpy())  # the fit's contexts: no second adaptation
    assert calls == []
    again = emb.project(x.numpy(), y.numpy())  # kept for one projection only
    assert calls == [30] and np.array_equal(first, again)


def test_the_profile_summary_counts_inclusive_and_own_samples(load_script):
    profile = load_script("benchmarks/profile_unit.py")
    lines = [
        "main (cli.py:1);fit (train.py:10);backward (graph.py:5) 6",
        "main (cli.py:1);fit (train.py:10) 2",
        "main (cli.py:1);predict (param.py:3) 2",
        "",
    ]
    s = profile.summarise(lines)
    assert s["samples"] == 10
    assert s["inclusive_pct"] == {
        "main (cli.py)": 100.0,
        "fit (train.py)": 80.0,
        "backward (graph.py)": 60.0,
        "predict (param.py)": 20.0,
    }
    assert s["self_pct"]["backward (graph.py)"] == 60.0 and s["self_pct"]["fit (train.py)"] == 20.0


DMON = """# gpu    sm   mem   enc   dec   jpg   ofa
# Idx     %     %     %     %     %     %
    0    40    10     0     0     0     0
    0    60    12     0     0     0     0
    0     -     -     -     -     -     -
"""


def test_dmon_output_gives_the_mean_sm_utilisation(load_script):
    speed = load_script("benchmarks/speed.py")
    assert speed.parse_dmon(DMON) == {"sm_mean_pct": 50.0, "samples": 2}
    assert speed.parse_dmon("no header") == {} and speed.parse_dmon("# gpu sm\n") == {}


def test_gpu_utilisation_samples_nvidia_smi_only_on_a_cuda_device(load_script, tmp_path, monkeypatch):
    speed = load_script("benchmarks/speed.py")
    fake = tmp_path / "nvidia-smi"  # prints dmon's lines, then samples until it is stopped
    fake.write_text("#!/bin/sh\nprintf '%s' '" + DMON + "'\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with speed.gpu_utilisation("cuda:0") as util:
        time.sleep(0.3)
    assert util == {"sm_mean_pct": 50.0, "samples": 2}
    with speed.gpu_utilisation("cpu") as util:
        pass
    assert util == {}


def test_near_anchors_beyond_the_distance_cap_come_from_a_kept_nearest_table(fitted_rte, monkeypatch):
    """Beyond POOL_DISTANCE_ENTRIES a draw's near anchors are its k nearest pool tasks
    (``pairs.k_nearest``), looked up once: the same set as the distance rows' (never the draw's
    own task)."""
    from taskextrap.operators import pairs as P

    d, pool = fitted_rte.draws_, fitted_rte.train_tasks_
    idx = np.arange(len(d.z))
    sampler = fitted_rte._sampler()
    below = sampler.near_candidates(idx)
    calls, real = [], P.k_nearest
    monkeypatch.setattr(P, "k_nearest", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    monkeypatch.setattr(P, "POOL_DISTANCE_ENTRIES", 1)
    beyond = sampler.near_candidates(idx)
    np.testing.assert_array_equal(sampler.near_candidates(idx[::-1]), beyond[::-1])
    assert len(calls) == 1  # looked up once, then kept
    assert beyond.shape == below.shape
    assert not (pool[beyond] == d.obs.task[:, None]).any()
    dist = np.linalg.norm(d.z[:, None] - fitted_rte.z_library_[None, pool], axis=2)
    dist[d.obs.task[:, None] == pool[None]] = np.inf
    kth = np.sort(dist, axis=1)[:, below.shape[1] - 1]
    assert (np.take_along_axis(dist, beyond, 1) <= kth[:, None] + 1e-12).all()  # the k nearest
    np.testing.assert_array_equal(np.sort(beyond, 1), np.sort(below, 1))


def test_near_anchors_of_a_pool_beyond_near_pool_come_from_a_seeded_subset(fitted_rte, monkeypatch):
    from taskextrap.operators import pairs as P

    d, pool = fitted_rte.draws_, fitted_rte.train_tasks_
    monkeypatch.setattr(P, "POOL_DISTANCE_ENTRIES", 1)
    monkeypatch.setattr(P, "NEAR_POOL", len(pool) // 2)
    fitted_rte._pair_sampler = None  # a fresh sampler: its table is made under these caps
    try:
        near = fitted_rte._sampler().near_candidates(np.arange(len(d.z)))
        used = np.unique(near)
        assert len(used) <= len(pool) // 2 and not (pool[near] == d.obs.task[:, None]).any()
        fitted_rte._pair_sampler = None
        np.testing.assert_array_equal(fitted_rte._sampler().near_candidates(np.arange(len(d.z))), near)  # seeded
    finally:
        fitted_rte._pair_sampler = None  # the shared fixture's sampler is made again as it was


def test_k_nearest_is_the_brute_force_rule():
    from taskextrap.operators.pairs import k_nearest
    from taskextrap.search.index import nearest_exact

    g = np.random.default_rng(0)
    z, pool = g.normal(size=(300, 5)), g.normal(size=(70, 5))
    for k in (1, 9, 70):
        np.testing.assert_array_equal(k_nearest(z, pool, k, chunk=64), nearest_exact(z, pool, k)[0])


def test_a_label_of_one_experiment_is_a_row_of_its_unit_table_not_a_column(load_script):
    speed = load_script("benchmarks/speed.py")

    def rec(wall, commit, **timing):
        return {"unit": "cubic, seed 0", "wall_s": wall, "cpu_s": 2 * wall, "peak_rss_mb": 100.0, "threads": 1,
                "device": "cpu", "commit": commit, "timing": {"training_s": wall / 2, **timing}}  # fmt: skip

    labels = {"before": {"parameter": rec(30, "a"), "length": rec(40, "a")},
              "after": {"parameter": rec(10, "b"), "length": rec(20, "b")},
              "gpu": {"parameter": rec(5, "c"), "length": rec(6, "c")},
              "one experiment": {"parameter": rec(12, "d", **{"cnp_training_s": 4.0})}}  # fmt: skip
    doc = {"anchor": speed.ANCHOR, "labels": labels}
    table = speed.table(doc)
    assert "gpu (s)" in table and "one experiment" not in table
    rows = speed.unit_table(doc, "parameter").splitlines()
    assert [r.split(" | ")[0] for r in rows[2:6]] == ["| before", "| after", "| gpu", "| one experiment"]
    assert (
        rows[5].startswith("| one experiment | cpu | d | 12 | 24 | 100 |") and "|  |  | 6 | 4 |  |" in rows[5]
    )  # training, then cnp_training
    assert "length" not in "\n".join(rows)


def test_a_named_commit_is_recorded_as_git_would_shorten_it(load_script, monkeypatch):
    speed = load_script("benchmarks/speed.py")
    monkeypatch.setenv("TASKEXTRAP_COMMIT", "aaec0e589d608c4a080848af7328a24cef198c2c")
    assert speed.commit() == "aaec0e5"
    monkeypatch.setenv("TASKEXTRAP_COMMIT", "4bfbf23")
    assert speed.commit() == "4bfbf23"
