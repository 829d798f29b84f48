"""manifolds (App. H): maps fitted on training tasks only, their measures, rows and figures."""

import numpy as np
import pytest

from taskextrap import audit
from taskextrap.experiments import manifolds as M
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.report.schema import DIAGNOSTIC_METRICS, validate_results

TINY = M.PROFILES["tiny"]
TRAINING = {f"level-{d}" for d in range(1, 9)} | {"poly", "sin", "F1_1", "F1_2"}


def test_run_writes_schema_valid_diagnostics_and_both_figures(tmp_path):
    res = run_experiment("manifolds", RunOptions(profile="tiny", out=tmp_path, progress=False))
    validate_results(res)
    keys = {(r["group"], r["method"], r["metric"]) for r in res["rows"]}
    for rep in ("gradient", "curve"):
        assert ("parametric", rep, "relative-distance") in keys and ("composition", rep, "silhouette") in keys
        for panel in ("length", "length-regime"):
            assert {(panel, rep, m) for m in ("trustworthiness", "spearman", "fraction")} <= keys
    assert all(r["metric"] in DIAGNOSTIC_METRICS and r["paper_value"] is None for r in res["rows"])
    assert res["comparisons"] == []
    plots = tmp_path / "manifolds-paper-tiny" / "plots"
    assert (plots / "manifolds.png").stat().st_size > 0 and (plots / "manifolds-curve.png").stat().st_size > 0


def test_no_fit_sees_a_held_out_task():
    with audit.spy() as seen:
        M.run_seed(TINY, 0)
    audit.check(seen, TRAINING, required={"scaler", "probe", "pca", "curve-pca"})


@pytest.mark.parametrize("panel", M.PANELS)
def test_the_audit_names_a_held_out_task_fitted_into_the_map(panel):
    train, held, m = M.panel_tasks(panel, TINY.n_per_class, 0)
    leaky = M.PanelTasks(
        train.family, *(np.concatenate([getattr(train, f), getattr(held, f)]) for f in ("params", "label", "order"))
    )
    with audit.spy() as seen:
        M.embeddings(leaky, held, m, TINY, 0)
    with pytest.raises(audit.LeakError, match="|".join(sorted(set(held.label)))):
        audit.check(seen, TRAINING)


def test_panels_hold_the_classes_of_the_figure():
    train, held, _ = M.panel_tasks("length", 5, 0)
    assert set(train.order) == set(range(1, 9)) and set(held.order) == {9.0}
    x = np.broadcast_to(train.family.grid(20), (len(train), 20))
    assert np.allclose(np.linalg.norm(train.values(x), axis=1), 1.0)  # unit energy
    train, held, _ = M.panel_tasks("composition", 4, 0)
    assert list(train.label) == ["poly"] * 4 + ["sin"] * 4 and set(held.label) == {"sin∘poly"}
    x = np.broadcast_to(np.linspace(-5, 5, 7), (4, 7))
    inner = M.POLY(held.params[:, 4:7], x)
    assert np.allclose(held.values(x), M.SIN(held.params[:, 1:4], inner))
    train, held, _ = M.panel_tasks("parametric", 3, 0)
    assert set(train.label) == {"F1_1", "F1_2"} and set(held.label) == {"F2"}
    assert held.order.min() >= 2.5 and train.order.max() <= 2.5


def test_measures_score_a_perfect_line_and_a_scrambled_one():
    g = np.random.default_rng(0)
    a = np.concatenate([g.uniform(0.5, 2.5, 40), g.uniform(2.5, 3.5, 20)])
    labels = np.where(a < 1.5, "F1_1", np.where(a < 2.5, "F1_2", "F2"))
    train = M.PanelTasks(None, a[:40, None], labels[:40], a[:40])
    held = M.PanelTasks(None, a[40:, None], labels[40:], a[40:])
    line = np.column_stack([a, np.zeros_like(a)])  # a map that is the parameter axis itself
    good = M.measures("parametric", line, line, train, held)
    assert good["spearman"] == pytest.approx(1.0) and good["fraction"] == 1.0
    assert good["relative-distance"] < 0.2 and good["trustworthiness"] == pytest.approx(1.0)
    noise = g.normal(size=line.shape)
    bad = M.measures("parametric", line, noise, train, held)
    assert abs(bad["spearman"]) < 0.5 and bad["trustworthiness"] < 0.8 and bad["relative-distance"] > 1


def test_readout_is_fitted_on_training_rows_only():
    z = np.column_stack([np.arange(10.0), np.zeros(10)])
    order = np.arange(10.0)
    order[8:] = 100.0  # held-out values the fit must not see
    r = M.readout(z, order, 8)
    assert np.allclose(r[:8], np.arange(8.0)) and np.allclose(r[8:], [8.0, 9.0])


def test_dev_panels_hold_training_tasks_of_the_real_split_only():
    train, held, _ = M.panel_tasks("length", 5, 0, dev=True)
    assert set(train.order) == set(range(1, 8)) and set(held.order) == {8.0}
    train, held, _ = M.panel_tasks("composition", 4, 0, dev=True)
    assert set(train.label) == {"poly", "sin"} and set(held.label) == {"poly∘sin"}
    x = np.broadcast_to(np.linspace(-5, 5, 7), (4, 7))
    assert np.allclose(held.values(x), M.POLY(held.params[:, 4:7], M.SIN(held.params[:, 1:4], x)))
    train, held, _ = M.panel_tasks("parametric", 6, 0, dev=True)
    assert set(train.label) == {"F1_1_a", "F1_1_b"} and set(held.label) == {"dev"}
    real, _, _ = M.panel_tasks("parametric", 200, 0)
    # every dev task lies inside the real training span: F1_2 is the dev held-out region
    assert real.order.min() <= train.order.min() and held.order.max() <= real.order.max()
    assert train.order.max() <= held.order.min()


def test_no_dev_fit_sees_a_dev_held_out_task():
    training = {f"level-{d}" for d in range(1, 8)} | {"poly", "sin", "F1_1_a", "F1_1_b"}
    with audit.spy() as seen:
        maps = M.run_seed(TINY, 0, dev=True)
    audit.check(seen, training, required={"scaler", "probe", "pca", "curve-pca"})
    other = next(name for name in M.READOUTS if name != M.READOUT)
    assert set(maps["length", f"gradient-{other}-readout"][3]) == {"spearman", "fraction"}
    assert ("composition", f"gradient-{other}-readout") not in maps  # its order needs no read-out


def test_the_dev_run_reports_every_read_out_and_the_test_run_the_chosen_one(tmp_path):
    res = run_experiment("manifolds", RunOptions(profile="tiny", out=tmp_path, progress=False, split="dev"))
    validate_results(res)
    methods = {r["method"] for r in res["rows"]}
    other = next(name for name in M.READOUTS if name != M.READOUT)
    assert {f"gradient-{other}-readout", f"curve-{other}-readout"} <= methods
    assert res["config"]["split"] == "dev" and res["config"]["readout"] == M.READOUT
    test = M.run_seed(TINY, 0)
    assert {rep for _, rep in test} == {"gradient", "curve"}


def test_a_linear_readout_reads_a_line_and_cannot_read_a_ring():
    t = np.tile(np.linspace(0, 2 * np.pi, 20, endpoint=False), 2)  # two full circles
    ring = np.column_stack([np.cos(t), np.sin(t)]) * np.repeat([1.0, 2.0], 20)[:, None]
    order = np.repeat([0.0, 1.0], 20)  # inner ring 0, outer ring 1
    assert np.corrcoef(M.readout(ring, order, 40, degree=2), order)[0, 1] > 0.99
    assert abs(np.corrcoef(M.readout(ring, order, 40, degree=1), order)[0, 1]) < 0.1


def test_a_read_out_of_another_degree_is_refused():
    from taskextrap.errors import TaskextrapError

    with pytest.raises(TaskextrapError, match="degree"):
        M.readout(np.zeros((4, 2)), np.arange(4.0), 3, degree=3)
