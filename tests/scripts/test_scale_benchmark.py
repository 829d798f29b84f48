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
