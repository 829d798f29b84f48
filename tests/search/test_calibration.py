"""search.calibration: the dev-chosen interval scale, the coverage curve it is chosen from, and
estimators that apply it."""

import json

import numpy as np
import pytest
from scipy.stats import norm

from taskextrap.errors import TaskextrapError
from taskextrap.search import calibration as C
from taskextrap.tasks.observe import ObservationProtocol


def test_the_scale_grid_holds_one_and_doubles_every_ten_steps():
    assert C.SCALE_GRID[20] == 1.0 and C.SCALE_GRID[30] == 2.0 and C.SCALE_GRID[0] == 0.25


def test_a_gaussian_with_twice_the_claimed_sd_needs_scale_two():
    g = np.random.default_rng(0)
    truth = g.normal(0.0, 2.0, size=(400, 50))  # the real sd is 2, the interval claims 1
    curve = C.coverage_curve(np.zeros_like(truth), np.ones_like(truth), truth).mean(axis=0)
    assert curve[20] == pytest.approx(2 * norm.cdf(1.645 / 2) - 1, abs=0.01)  # raw coverage ~0.59
    assert C.choose_scale(curve) == pytest.approx(2.0, rel=0.08)  # one grid step either side
    assert np.all(np.diff(curve) >= 0)  # a wider interval never covers less


def test_choose_scale_takes_the_smallest_that_reaches_the_level():
    curve = np.linspace(0.0, 1.0, len(C.SCALE_GRID))
    i = int(np.flatnonzero(curve >= 0.9)[0])
    assert C.choose_scale(curve) == C.SCALE_GRID[i]
    assert C.choose_scale(np.zeros(len(C.SCALE_GRID))) == C.SCALE_GRID[-1]
    with pytest.raises(TaskextrapError, match="one value per grid scale"):
        C.choose_scale([0.5, 0.9])


def test_interval_diagnostics_separate_the_raw_and_the_calibrated_interval():
    mean, truth = np.zeros((2, 4)), np.array([[0.5, 1.0, 2.0, 3.5], [0.1, 0.1, 0.1, 0.1]])
    raw = np.ones((2, 4))
    d = C.interval_diagnostics("rte", mean, 2.0 * raw, truth, scale=2.0)
    assert set(d) == set(C.interval_keys("rte"))
    np.testing.assert_allclose(d["rte_coverage_raw"], [0.5, 1.0])  # |r| <= 1.645
    np.testing.assert_allclose(d["rte_coverage"], [0.75, 1.0])  # |r| <= 3.29
    np.testing.assert_allclose(d["rte_width"], 2 * 1.6449 * 2.0, rtol=1e-4)
    np.testing.assert_allclose(d[C.curve_key("rte", 20)], d["rte_coverage_raw"])  # scale 1 = raw
    np.testing.assert_allclose(d[C.curve_key("rte", 30)], d["rte_coverage"])  # scale 2 = calibrated


def test_scales_are_looked_up_by_regime_and_protocol(monkeypatch, tmp_path):
    path = tmp_path / "scales.json"
    path.write_text(
        json.dumps(
            {
                "scales": {
                    "composition/strict": {"scale": 1.5},
                    "parameter-objective/paper": {"scale": 2},
                    "parameter-objective/paper/exp": {"scale": 4},
                }
            }
        )
    )
    monkeypatch.setattr(C, "SCALES_FILE", path)
    C._scales.cache_clear()
    try:
        strict = ObservationProtocol("strict", n_context=5, n_query=5, noise=0.02)
        mine = ObservationProtocol("mine", n_context=5, n_query=5, noise=0.1)  # noisy: strict's scale
        assert C.interval_scale("composition", strict) == 1.5 == C.interval_scale("composition", mine)
        assert C.interval_scale("length", strict) == 1.0  # none chosen: the raw interval
        paper = ObservationProtocol("paper", n_context=5, n_query=5)
        assert C.interval_scale("parameter-objective", paper, "exp") == 4.0  # the family's own dev split
        assert C.interval_scale("parameter-objective", paper, "myfam") == 2.0  # any other family: the regime's
        assert C.resolved_scale(None, "composition", strict) == 1.5 and C.resolved_scale(3, "x", strict) == 3.0
        with pytest.raises(TaskextrapError, match="interval_scale"):
            C.check_scale(0.0)
    finally:
        C._scales.cache_clear()


def test_a_classics_scale_is_chosen_and_read_like_rtes(monkeypatch, tmp_path):
    """A classic's interval has its own key per regime (``regime:method``), looked up as rte's is
    (the family's own, else the regime's, else 1.0), and its errors are read at that scale."""
    from types import SimpleNamespace

    from taskextrap.experiments.discrete import classic_scale

    path = tmp_path / "scales.json"
    scales = {"parameter:ctx-gp/paper": {"scale": 2.0}, "parameter:ctx-gp/paper/exp": {"scale": 4.0}}
    path.write_text(json.dumps({"scales": scales}))
    monkeypatch.setattr(C, "SCALES_FILE", path)
    C._scales.cache_clear()
    try:
        paper = ObservationProtocol("paper", n_context=5, n_query=5)
        assert C.method_key("parameter", "ctx-gp") == "parameter:ctx-gp"
        assert C.method_scale("parameter", "ctx-gp", paper, "exp")[0] == 4.0
        scale, source = C.method_scale("parameter", "ctx-gp", paper, "cubic")
        assert scale == 2.0 and "parameter:ctx-gp/paper" in source
        assert C.method_scale("parameter", "meta-gp", paper)[0] == 1.0  # none chosen: its raw interval
        with pytest.raises(TaskextrapError, match="interval-scale key"):
            C.interval_scale("nowhere:ctx-gp", paper)
        g = np.random.default_rng(0)
        mean, truth = np.zeros((50, 4)), g.normal(size=(50, 4))
        errors = {k: [v] for k, v in C.interval_diagnostics("ctx-gp", mean, np.full((50, 4), 0.5), truth, 1.0).items()}
        settings = SimpleNamespace(protocol=paper, builtin=True, options=SimpleNamespace(interval_scales=None))
        out, used, _ = classic_scale(settings, errors, "parameter", "ctx-gp", "ctx-gp", "cubic")
        at_two = C.interval_diagnostics("ctx-gp", mean, np.full((50, 4), 1.0), truth, 2.0)
        assert used == 2.0
        np.testing.assert_allclose(out["ctx-gp_coverage"][0], at_two["ctx-gp_coverage"])
        np.testing.assert_allclose(out["ctx-gp_coverage_raw"][0], errors["ctx-gp_coverage_raw"][0])
        np.testing.assert_allclose(out["ctx-gp_width"][0], at_two["ctx-gp_width"])
    finally:
        C._scales.cache_clear()


def test_a_learned_classics_scale_belongs_to_the_variant_behind_its_row(monkeypatch, tmp_path):
    """meta-gp's row reads the scale chosen for today's variant (CHOSEN), not one chosen under the
    row's name for whatever variant it was then."""
    from types import SimpleNamespace

    from taskextrap.baselines.classics import CHOSEN
    from taskextrap.experiments.discrete import classic_scale

    path = tmp_path / "scales.json"
    scales = {"parameter:meta-gp/paper": {"scale": 4.0}, f"parameter:{CHOSEN['meta-gp']}/paper": {"scale": 2.0}}
    path.write_text(json.dumps({"scales": scales}))
    monkeypatch.setattr(C, "SCALES_FILE", path)
    C._scales.cache_clear()
    try:
        paper = ObservationProtocol("paper", n_context=5, n_query=5)
        settings = SimpleNamespace(protocol=paper, builtin=True, options=SimpleNamespace(interval_scales=None))
        g = np.random.default_rng(0)
        mean, sd, truth = np.zeros((50, 4)), np.full((50, 4), 0.5), g.normal(size=(50, 4))
        errors = {k: [v] for k, v in C.interval_diagnostics("meta-gp", mean, sd, truth, 1.0).items()}
        assert classic_scale(settings, errors, "parameter", "meta-gp", "meta-gp")[1] == 2.0
        del scales[f"parameter:{CHOSEN['meta-gp']}/paper"]
        path.write_text(json.dumps({"scales": scales}))
        C._scales.cache_clear()
        assert classic_scale(settings, errors, "parameter", "meta-gp", "meta-gp")[1] == 1.0  # none for it: raw
    finally:
        C._scales.cache_clear()


def test_an_estimator_multiplies_its_predictive_sd_by_its_scale():
    from taskextrap.estimators.composition import CompositionRTE
    from taskextrap.operators.train import TrainConfig
    from taskextrap.seeding import rng
    from taskextrap.tasks.primitives import PrimitiveSet

    prims = PrimitiveSet.sample(n_per_family=6, rng=rng(0, "cal-prims"))
    kw = dict(
        embedding="gradient",
        n_pairs=32,
        k=2,
        embed_dim=4,
        library_draws=1,
        train=TrainConfig(steps=3, batch=64),
        decomposer_train=TrainConfig(steps=3, batch=16),
    )
    one = CompositionRTE(**kw, interval_scale=1.0).fit(prims)
    x = np.linspace(-4, 4, 25)[None].repeat(2, 0)
    y = prims.compose_interp(np.array([[0], [7]]), np.array([[3], [12]]), x[:, None])[:, 0]
    m1, s1 = one.predict(x, y, x[:, :4], return_std=True)
    one.interval_scale = 2.5
    m2, s2 = one.predict(x, y, x[:, :4], return_std=True)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_allclose(s2, 2.5 * s1)


def test_the_batched_curve_is_covered_at_every_grid_scale():
    from taskextrap.search.posterior import covered

    g = np.random.default_rng(1)
    mean, std, truth = g.normal(size=(5, 7)), g.uniform(0.1, 2.0, size=(5, 7)), g.normal(size=(5, 7))
    curve = C.coverage_curve(mean, std, truth)
    want = np.stack([covered(mean, s * std, truth).mean(axis=1) for s in C.SCALE_GRID], axis=1)
    np.testing.assert_array_equal(curve, want)


def _rows(group: str, *cells) -> list[dict]:
    """A test file's rows: (method, metric, value) cells of ``group``, ci95 0.01."""
    return [{"group": group, "method": m, "metric": k, "value": v, "ci95": 0.01} for m, k, v in cells]


def _calibration(key: str, scale: float, dev_raw: float) -> dict:
    """interval-calibration.json with one scale (dev coverage calibrated to 0.9)."""
    entry = {"scale": scale, "dev_coverage_raw": dev_raw, "dev_coverage_calibrated": 0.9}
    return {"grid": "g", "level": 0.9, "split": "dev", "profile": "quick", "command": "c", "scales": {key: entry}}


def test_the_calibration_table_puts_each_scale_beside_its_test_coverage(tmp_path, monkeypatch, load_script):
    tables = load_script("benchmarks/tables.py")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    rows = _rows("g", ("rte-uncalibrated", "coverage", 0.62), ("rte", "coverage", 0.83), ("rte", "interval-width", 2.9))
    (tmp_path / "composition-strict-quick.json").write_text(json.dumps({"rows": rows}))
    data = _calibration("composition/strict", 1.87, 0.68)
    text = tables.render_interval_calibration(data)
    assert (
        "| `composition` | strict | g | 1.87 | 0.680 → 0.900 | 0.620 ± 0.0100 | 0.830 ± 0.0100 | 2.90 ± 0.0100 |"
        in text
    )


def test_a_classics_scale_reads_its_rows_only_from_a_test_file_made_with_its_variant(
    tmp_path, monkeypatch, load_script
):
    # the scale is keyed by the variant (classics.scale_name), the rows by the method's name
    tables = load_script("benchmarks/tables.py")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    rows = _rows(
        "cubic", ("cnp-uncalibrated", "coverage", 0.5), ("cnp", "coverage", 0.91), ("cnp", "interval-width", 2.0)
    )
    data = _calibration("parameter:cnp-w128-x4/paper", 2.5, 0.6)
    path = tmp_path / "parameter-paper-quick.json"
    path.write_text(json.dumps({"rows": rows, "config": {"classic_variants": {"cnp": "cnp-w128-x4"}}}))
    assert "| cubic | 2.5 | 0.600 → 0.900 | 0.500 ± 0.0100 | 0.910 ± 0.0100 | 2.00 ± 0.0100 |" in (
        tables.render_interval_calibration(data)
    )
    path.write_text(json.dumps({"rows": rows, "config": {"classic_variants": {"cnp": "cnp-w128-x2"}}}))
    assert "| - | 2.5 | 0.600 → 0.900 | - | - | - |" in tables.render_interval_calibration(data)


def test_ctx_gps_scale_reads_its_rows_only_from_a_test_file_made_with_its_fit(tmp_path, monkeypatch, load_script):
    # ctx-gp's scale keeps the row's name (regime:ctx-gp) but is its fit's (classics.CTX_GP_VARIANT)
    from taskextrap.baselines.classics import CTX_GP_VARIANT

    tables = load_script("benchmarks/tables.py")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    cells = (("ctx-gp-uncalibrated", "coverage", 0.5), ("ctx-gp", "coverage", 0.91), ("ctx-gp", "interval-width", 2.0))
    rows = _rows("cubic", *cells)
    data = _calibration("parameter:ctx-gp/paper", 2.5, 0.6)
    path = tmp_path / "parameter-paper-quick.json"
    path.write_text(json.dumps({"rows": rows, "config": {"classic_variants": {"ctx-gp": CTX_GP_VARIANT}}}))
    assert "| cubic | 2.5 | 0.600 → 0.900 | 0.500 ± 0.0100 | 0.910 ± 0.0100 | 2.00 ± 0.0100 |" in (
        tables.render_interval_calibration(data)
    )
    for older in ({"cnp": "cnp-w128-x4"}, {"ctx-gp": "ctx-gp-lbfgs-r16"}):  # the older fit, recorded or not
        path.write_text(json.dumps({"rows": rows, "config": {"classic_variants": older}}))
        assert "| - | 2.5 | 0.600 → 0.900 | - | - | - |" in tables.render_interval_calibration(data)


def test_split_method_key_undoes_method_key():
    assert C.split_method_key(C.method_key("length", "cnp-w128-x4")) == ("length", "cnp-w128-x4")
    assert C.split_method_key("parameter-objective") is None
