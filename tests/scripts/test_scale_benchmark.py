"""benchmarks/scale.py (issue 65): its libraries, targets and paired comparison (the fits are
the benchmark's, not a test's)."""

import numpy as np


def test_libraries_spread_over_the_training_regions_and_targets_stay_fixed(load_script):
    mod = load_script("benchmarks/scale.py")
    lib = mod.library_of(101)
    regions = lib.family.train_regions
    counts = [int((lib.region == r).sum()) for r in regions]
    assert sum(counts) == 101 and max(counts) - min(counts) <= 1 and set(lib.region) == set(regions)
    a, b = mod.targets_and_draws(), mod.targets_and_draws()
    assert a.ctx_y.shape[0] == mod.N_TARGETS and np.array_equal(a.qry_y, b.qry_y)  # the same at every size


def test_sizes_are_paired_against_the_reference_on_the_same_targets(load_script):
    mod = load_script("benchmarks/scale.py")
    g = np.random.default_rng(0)
    base = g.uniform(1.0, 2.0, 50)
    records = [
        {"tasks": 800, "per_target_mse": base.tolist()},
        {"tasks": 3200, "per_target_mse": (base + 0.5).tolist()},  # worse on every target
        {"tasks": 200, "per_target_mse": (base + g.normal(0, 0.01, 50)).tolist()},
    ]
    out = mod.paired_against(records)
    assert set(out) == {"3200", "200"}
    assert out["3200"]["clear"] and abs(out["3200"]["mse_minus_reference"] - 0.5) < 1e-12
    assert mod.paired_against(records[1:]) == {}  # no reference size, no comparison


def test_the_dev_split_holds_out_a_training_region_and_never_draws_f2(load_script):
    mod = load_script("benchmarks/scale.py")
    lib, obs = mod.library_of(40, split="dev"), mod.targets_and_draws("dev")
    assert "F2" not in lib.family.regions and "F1_2" not in set(lib.region)
    lo, hi = lib.family.regions["dev"]
    assert obs.params.shape[0] == mod.N_TARGETS and not np.array_equal(obs.qry_y, mod.targets_and_draws().qry_y)
    assert (lo <= obs.params[:, 0]).all() and (obs.params[:, 0] <= hi).all()  # the region's shifted parameter


def test_several_seeds_are_paired_over_targets_and_seeds(load_script):
    """With --seeds, a size is clearly worse only when every seed says so: a difference that one
    seed reverses is not clear, however wide its mean."""
    mod = load_script("benchmarks/scale.py")
    g = np.random.default_rng(1)
    base = {s: g.uniform(1.0, 2.0, 40) for s in (0, 1, 2)}
    records = [{"tasks": 800, "seed": s, "per_target_mse": b.tolist()} for s, b in base.items()]
    records += [{"tasks": 3200, "seed": s, "per_target_mse": (b + 0.3).tolist()} for s, b in base.items()]
    shifts = {0: 0.6, 1: 0.6, 2: -0.2}  # one seed the other way
    records += [{"tasks": 51200, "seed": s, "per_target_mse": (b + shifts[s]).tolist()} for s, b in base.items()]
    out = mod.paired_against(records)
    assert out["3200"]["clear"] and np.allclose(out["3200"]["seed_diffs"], 0.3)
    assert not out["51200"]["clear"] and np.allclose(out["51200"]["seed_diffs"], [0.6, 0.6, -0.2])
    assert "2" not in mod.paired_against([*records, {"tasks": 2, "seed": 0, "per_target_mse": [1.0] * 40}])


def test_a_file_of_several_seeds_renders_a_row_per_size(load_script):
    tables = load_script("benchmarks/tables.py")
    rec = lambda n, s, mse: {"tasks": n, "seed": s, "fit_s": 10.0 + s, "mse": mse, "coverage": 0.9}  # noqa: E731
    data = {
        "records": [rec(800, 0, 0.04), rec(800, 1, 0.06), rec(3200, 0, 0.05), rec(3200, 1, 0.05)],
        "paired_vs_reference": {
            "3200": {"mse_minus_reference": 0.0, "interval": [-0.01, 0.01], "clear": False, "seed_diffs": [0.01, -0.01]}
        },
        "reference": 800, "seeds": [0, 1], "family": "cubic", "targets": 40, "threads": 1, "wall_s": 120.0,
        "environment": {"git": "abc"}, "command": "python benchmarks/scale.py --seeds 0 1",
    }  # fmt: skip
    text = tables.render_scale(data)
    assert "| 800 | 10.5 | 0.0500 | 0.900 | reference | - |" in text
    assert "| 3,200 | 10.5 | 0.0500 | 0.900 | +0.0000 (-0.0100, +0.0100) | +0.0100, -0.0100 |" in text
    assert "seeds 0, 1" in text


def test_the_scale_plot_is_drawn_from_the_committed_files(load_script, tmp_path):
    """benchmarks/plot_scale.py: medians over seeds per size, each engine's index times, a PNG."""
    mod = load_script("benchmarks/plot_scale.py")
    data = {"records": [{"tasks": 800, "fit_s": 3.0}, {"tasks": 800, "fit_s": 1.0}, {"tasks": 200, "fit_s": 5.0},
                        {"tasks": 800, "fit_s": 2.0}]}  # fmt: skip
    assert mod.fit_series(data) == ([200, 800], [5.0, 2.0])
    both = {"serial": {"seconds": {"total": 0.5}}, "ray": {"seconds": {"total": 2.0}}}
    stream = [{"records": [{"tasks": 10, "serial": {"seconds": {"total": 1.0}}}]}, {"records": [{"tasks": 5, **both}]}]
    assert mod.index_series(stream, "serial") == ([5, 10], [0.5, 1.0])
    assert mod.index_series(stream, "ray") == ([5], [2.0])
    out = mod.draw(mod.RESULTS, tmp_path / "scale.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
