"""baselines.classics: ctx-gp, meta-gp and cnp as methods, fitted on a unit's library draws or alone."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.baselines.classics import CHOSEN, VARIANTS, LibraryGP, NeuralProcess, variant_settings
from taskextrap.baselines.method import SharedDraws
from taskextrap.baselines.table import begin_methods
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import fit_together
from taskextrap.operators.jobs import TrainConfig
from taskextrap.scaling import FamilyScaler

CFG = TrainConfig(steps=30, batch=256, eval_every=10)
CLASSICS = ("ctx-gp", "meta-gp", "cnp")


def _batch(n, g):
    x = g.uniform(-1, 1, (n, 9))
    y = g.uniform(1, 2, (n, 1)) * x
    return audit.Batch((x[:, :5], y[:, :5], x[:, 5:], y[:, 5:], np.zeros((n, 0))))


def _shared(train=None):
    g = np.random.default_rng(0)
    draws = train if train is not None else _batch(128, g)
    return SharedDraws(FamilyScaler(0.0, 1.0, 0.0, 1.0), 5, CFG, draws, _batch(64, g))


def _fitted(names, train=None):
    methods, pending, timing = begin_methods(names, None, _shared(train), seed=0, device="cpu")
    fit_together(list(pending.values()))
    return methods, pending, timing


def test_every_classic_predicts_a_mean_and_an_sd():
    methods, pending, timing = _fitted(CLASSICS)
    # meta-gp's fit is work beside cnp's training, its seconds added to its row's once it has run
    assert list(pending) == ["meta-gp", "cnp"] and not pending["meta-gp"].jobs and len(pending["meta-gp"].work) == 1
    assert timing["meta-gp_fit_s"] >= methods["meta-gp"].timing_["fit_s"] > 0
    cx, cy, qx, _, _ = _batch(4, np.random.default_rng(1))
    for m in CLASSICS:
        mean, sd = methods[m].predict(cx, cy, qx, return_std=True)
        assert mean.shape == sd.shape == (4, 4) and (sd >= 0).all(), m


def test_a_row_is_its_chosen_variants_fit_and_each_variant_fits_once():
    # the dev rows and the chosen variants (one may be scored after the dev files: not a dev row)
    variants = list(dict.fromkeys([*VARIANTS, *CHOSEN.values()]))
    methods, pending, _ = _fitted((*CLASSICS, *variants))
    assert len({id(m) for m in methods.values()}) == 1 + len(variants)  # ctx-gp and each variant once
    assert len(pending) == len(variants)  # a network or a GP fit each
    for row, variant in CHOSEN.items():
        assert methods[row] is methods[variant]


def test_a_regimes_own_choice_builds_its_row_as_that_variant_sharing_its_fit():
    variants = {"meta-gp": "meta-gp-matern52", "cnp": "cnp-w64"}
    methods, pending, _ = begin_methods(("meta-gp", "cnp", "meta-gp-matern52", "cnp-w64"), None, _shared(None),
                                        variants, seed=0, device="cpu")  # fmt: skip
    assert methods["meta-gp"] is methods["meta-gp-matern52"] and methods["meta-gp"].kernel == "matern52"
    assert methods["cnp"] is methods["cnp-w64"] and methods["cnp"].width == 64 and list(pending) == ["meta-gp", "cnp"]


def test_a_step_variant_trains_for_its_share_of_the_units_steps():
    methods, _, _ = _fitted(("meta-gp-rbf+linear-x0.5", "cnp-w128-x4", "cnp", "cnp-w128"))
    assert methods["meta-gp-rbf+linear-x0.5"].gp_.steps == 15
    assert methods["cnp-w128-x4"].net_.cfg.steps == 120
    assert methods["cnp-w128"].net_.cfg == CFG  # the plain variant: the unit's
    assert methods["cnp"].net_.cfg.steps == round(CFG.steps * variant_settings(CHOSEN["cnp"])["step_scale"])  # dev's
    assert VARIANTS["meta-gp-rbf+linear-x0.5"]["kernel"] == "rbf+linear" and VARIANTS["cnp-w128-x4"]["width"] == 128
    assert methods["cnp-w128-x4"].variant == "cnp-w128-x4" and methods["cnp"].variant == CHOSEN["cnp"]


def test_a_fresh_stream_trains_the_cnp_and_one_draw_of_it_fits_meta_gp():
    drawn = []

    def stream(g):
        drawn.append(g)
        return _batch(64, g)

    _fitted(CLASSICS, stream)
    assert len(drawn) >= 2  # one for meta-gp, then the cnp's passes


def test_bad_arguments_and_unfitted_classics_are_one_line_errors():
    with pytest.raises(TaskextrapError, match="unknown GP kernel 'gp'"):
        LibraryGP(kernel="gp")
    with pytest.raises(TaskextrapError, match="step_scale"):
        NeuralProcess(step_scale=0)
    cx, cy, qx, _, _ = _batch(2, np.random.default_rng(1))
    with pytest.raises(TaskextrapError, match="NeuralProcess is not fitted"):
        NeuralProcess().predict(cx, cy, qx)


def test_a_classic_fitted_alone_draws_its_own_library_draws():
    """fit(library) with no unit beside it: the classic observes the library through its protocol."""
    from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol

    fam = PARAMETER_FAMILIES["quadratic"]
    library = TaskSet.sample(fam, {"F1_1": 6, "F1_2": 6}, np.random.default_rng(0))
    targets = TaskSet.sample(fam, {"F2": 3}, np.random.default_rng(1))
    obs = get_protocol("paper").draw(targets, 1, np.random.default_rng(2))
    for method in (LibraryGP(train=CFG), NeuralProcess(train=CFG, width=16)):
        mean, sd = method.fit(library).predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        assert mean.shape == sd.shape == obs.qry_x.shape and np.isfinite(mean).all()


def _scored_after(load_script, regime: str, profile: str) -> dict[str, float]:
    """The dev rule's scores of the variants benchmarks/cnp_steps_dev.py scored after the dev
    files on ``regime``'s dev split at ``profile`` (its committed files, both protocols), read as
    scripts/calibrate_intervals.py reads them."""
    from pathlib import Path

    mod = load_script("scripts/calibrate_intervals.py")
    return mod.after_scores(Path(__file__).resolve().parents[2] / "benchmarks" / "results", regime, profile)


def test_the_chosen_variants_are_the_dev_runs_choice(load_script):
    """CHOSEN is what choose_classics reads from the committed dev runs of the parameter regime
    (both protocols) and the variants scored after them on the same dev cells
    (benchmarks/cnp_steps_dev.py at the same profile)."""
    import json
    from pathlib import Path

    from taskextrap.baselines.classics import choose_classics

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = [
        r
        for p in ("paper", "strict")
        for r in json.loads((results / f"parameter-{p}-paper-dev.json").read_text())["rows"]
    ]
    assert choose_classics(rows, _scored_after(load_script, "parameter", "paper")) == CHOSEN


@pytest.mark.parametrize("regime", ["length", "composition", "composition-depth3"])
def test_each_discrete_regimes_variants_are_its_own_dev_runs_choice(regime, load_script):
    """chosen(regime) is what choose_classics reads from the committed quick dev runs of that
    regime (both protocols; they score every variant) and the variants scored after them on the
    same dev cells (benchmarks/cnp_steps_dev.py --regime REGIME)."""
    import json
    from pathlib import Path

    from taskextrap.baselines.classics import choose_classics, chosen

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = [
        r
        for p in ("paper", "strict")
        for r in json.loads((results / f"{regime}-{p}-quick-dev.json").read_text())["rows"]
    ]
    assert choose_classics(rows, _scored_after(load_script, regime, "quick")) == chosen(regime)


def test_the_choice_is_scale_free_and_ties_go_to_the_first_variant():
    from taskextrap.baselines.classics import choose_classics, variant_scores

    def rows(values):
        return [{"group": g, "method": m, "metric": "mse", "value": v} for (g, m), v in values.items()]

    same = {(g, v): 1.0 for g in ("a", "b") for v in VARIANTS}
    assert choose_classics(rows(same)) == {"meta-gp": "meta-gp-rbf", "cnp": "cnp-w64"}
    better = same | {("a", "cnp-w128"): 1e-4, ("b", "cnp-w128"): 1e4 * 0.5}  # 1e-4 x 5e3 < 1 x 1
    assert variant_scores(rows(better))["cnp-w128"] < 0 and choose_classics(rows(better))["cnp"] == "cnp-w128"
    with pytest.raises(TaskextrapError, match="no dev rows"):
        choose_classics(rows({("a", "meta-gp-rbf"): 1.0}))


def test_the_dev_best_variant_is_chosen_whatever_it_costs():
    """No cap ties a classic to RTE's budget: a variant that trains longer, or meta-gp's converged
    fit, is chosen when dev scores it best."""
    from taskextrap.baselines.classics import choose_classics

    values = {("a", v): 1.0 for v in VARIANTS} | {("a", "cnp-w128-x4"): 1e-3, ("a", "cnp-w128-x0.5"): 0.5}
    values |= {("a", "meta-gp-rbf+linear-lbfgs-deg0"): 0.1}
    rows = [{"group": g, "method": m, "metric": "mse", "value": v} for (g, m), v in values.items()]
    assert choose_classics(rows) == {"meta-gp": "meta-gp-rbf+linear-lbfgs-deg0", "cnp": "cnp-w128-x4"}


def test_ctx_gp_fit_is_the_dev_benchmarks_choice():
    """CTX_GP_CHOSEN is the dev benchmark's choice: the first grid's (ctx-gp-fit.json), unless the
    grid's next doubling, scored after it beside that choice on the same dev contexts
    (ctx-gp-fit-r32.json), won; the grid is extended once, as the cnp's was."""
    import json
    from pathlib import Path

    from taskextrap.baselines.classics import CTX_GP_CHOSEN, CTX_GP_VARIANT

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    first = json.loads((results / "ctx-gp-fit.json").read_text())
    after = json.loads((results / "ctx-gp-fit-r32.json").read_text())
    assert first["split"] == after["split"] == "dev"
    assert first["chosen"] in after["relative_mse"]  # scored beside the first choice
    chosen = (
        after["chosen"]
        if after["relative_mse"][after["chosen"]] < after["relative_mse"][first["chosen"]]
        else first["chosen"]
    )
    assert chosen == f"{CTX_GP_CHOSEN['optimizer']}-r{CTX_GP_CHOSEN['restarts']}"
    assert f"ctx-gp-{chosen}" == CTX_GP_VARIANT


def test_ctx_gp_dev_coverage_scores_the_dev_units_own_targets():
    """benchmarks/ctx_gp_dev_coverage.py's file scores the quick dev units' targets: its
    1 + 16-start fit (the dev files' ctx-gp) gives each dev file's ctx-gp MSE and raw coverage
    curve, to the bit where the dev file was made at today's GP code (depth 3), within the
    rounding of the code since otherwise (a few targets' best start moved: MSE within 0.5%,
    coverage within 0.005)."""
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    doc = json.loads((results / "ctx-gp-dev-coverage.json").read_text())
    assert doc["profile"] == "quick" and {"lbfgs-r16", "lbfgs-r32"} <= set(doc["fits"])
    seen = set()
    for c in doc["cells"]:
        dev = json.loads((results / f"{c['regime']}-{c['protocol']}-quick-dev.json").read_text())
        groups = list(dev["config"]["coverage_by_scale"])
        group = c["family"] if c["regime"] == "parameter" else groups[0]
        curve = dev["config"]["coverage_by_scale"][group]["ctx-gp"]
        (mse,) = [r["value"] for r in dev["rows"] if (r["group"], r["method"], r["metric"]) == (group, "ctx-gp", "mse")]
        mine = c["coverage_by_scale"]["lbfgs-r16"]
        if c["regime"] == "composition-depth3":
            assert (c["mse"]["lbfgs-r16"], mine) == (mse, curve), c["protocol"]
        else:
            assert c["mse"]["lbfgs-r16"] == pytest.approx(mse, rel=5e-3), (c["regime"], c["protocol"], group)
            assert np.abs(np.subtract(mine, curve)).max() <= 5e-3
        seen.add((c["regime"], c["protocol"]))
    assert seen == {
        (r, p) for r in ("parameter", "length", "composition", "composition-depth3") for p in ("paper", "strict")
    }


def test_a_variant_row_builds_the_method_it_names():
    """Each dev variant's name is its method's own: the table builds what the name says."""
    from taskextrap.baselines.table import get_method

    for name in VARIANTS:
        assert get_method(name).build().variant == name
    gp = get_method("meta-gp-rbf+linear-lbfgs-deg1").build()
    assert (gp.optimizer, gp.mean_degree) == ("lbfgs", 1)
    with pytest.raises(TaskextrapError, match="optimizer"):
        LibraryGP(optimizer="sgd")
    with pytest.raises(TaskextrapError, match="mean_degree"):
        LibraryGP(mean_degree=-1)


def test_ctx_gp_is_fitted_once_per_set_of_contexts_whatever_the_seed(monkeypatch):
    """Every seed's ctx-gp scores the same targets: one fit, the same numbers to the bit, copies
    handed out; other contexts are a new fit, and only the last few are kept."""
    from taskextrap.baselines import classics
    from taskextrap.baselines.gp import ctx_gp

    calls = []
    monkeypatch.setattr(classics, "ctx_gp", lambda *a, **k: calls.append(1) or ctx_gp(*a, **k))
    monkeypatch.setattr(classics, "_ctx_gp_fits", type(classics._ctx_gp_fits)())
    cx, cy, qx, _, _ = _batch(6, np.random.default_rng(2))
    expected = ctx_gp(cx, cy, qx, **classics.CTX_GP_CHOSEN)
    seeds = [_fitted(("ctx-gp",))[0]["ctx-gp"] for _ in (0, 1, 2)]
    first = seeds[0].predict(cx, cy, qx, return_std=True)
    first[0][:] = np.nan  # a caller writing into its copy changes nothing kept
    for c in seeds[1:]:
        for got, want in zip(c.predict(cx, cy, qx, return_std=True), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    assert len(calls) == 1
    seeds[0].predict(cx, cy + 1.0, qx)
    assert len(calls) == 2
    for k in range(classics.CTX_GP_KEPT):
        classics.ctx_gp_once(cx, cy + 2.0 + k, qx)
    seeds[0].predict(cx, cy, qx)  # pushed out by the later fits: fitted again
    assert len(calls) == 3 + classics.CTX_GP_KEPT


def test_a_classic_fitted_alone_draws_from_a_bounded_subset_of_a_large_library(monkeypatch):
    """Beyond OWN_TASKS library tasks, a classic fitted alone draws from a seeded subset of that
    many (its scaler still reads every task): its fit costs the same for any larger library."""
    import taskextrap.baselines.method as method
    from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol

    family = PARAMETER_FAMILIES["quadratic"]
    library = TaskSet.sample(family, {"F1_1": 12}, np.random.default_rng(0))
    protocol = get_protocol("paper")
    full = method.own_draws(library, protocol, 2, 0, CFG)
    monkeypatch.setattr(method, "OWN_TASKS", 5)
    bounded = method.own_draws(library, protocol, 2, 0, CFG)
    drawn = lambda s: len(s.draws[0]) + len(s.val[0])  # noqa: E731
    assert drawn(full) == 2 * 12 and drawn(bounded) == 2 * 5
    assert bounded.scaler == full.scaler == FamilyScaler.fit(library)
    again = method.own_draws(library, protocol, 2, 0, CFG)
    assert np.array_equal(again.draws[0], bounded.draws[0])


def test_a_variant_scored_after_the_dev_files_can_be_chosen_and_built():
    from taskextrap.baselines.classics import SCORED_AFTER, choose_classics, variant_settings
    from taskextrap.baselines.table import get_method, markdown, method_rows
    from taskextrap.errors import TaskextrapError

    rows = [{"metric": "mse", "method": v, "value": x} for v, x in [("cnp-w128-x4", 2.0), ("meta-gp-rbf", 1.0)]]
    assert choose_classics(rows)["cnp"] == "cnp-w128-x4"
    # the same rule's scores of variants scored outside the dev units; names it does not know are ignored
    assert choose_classics(rows, {"cnp-w128-x32": np.log(1.5), "cnp-w128-x4-lr3": -9.0})["cnp"] == "cnp-w128-x32"
    assert choose_classics(rows, {"cnp-w128-x32": np.log(3.0)})["cnp"] == "cnp-w128-x4"
    for name in SCORED_AFTER:  # built by name, never a row of any regime's table
        assert get_method(name).build(seed=0).variant == name == f"cnp-w128-x{variant_settings(name)['step_scale']:g}"
        assert all(name not in method_rows(r, dev) for r in ("parameter", "length") for dev in (False, True))
        assert f"| `{name}` |" in markdown() and "scored after the dev files" in markdown()
    with pytest.raises(TaskextrapError, match="unknown classic variant 'cnp-w7'"):
        variant_settings("cnp-w7")
