"""A library from observed data (tasks.observed): reading, one-line errors, interpolants, the family."""

from __future__ import annotations

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.observed import INTERPOLANTS, ObservedTasks, read_tasks


def _columns(n_tasks=4, m=6, seed=0):
    """Tasks y = a sin(x) + x observed at m random points each (the ends 0 and 3 included)."""
    g = np.random.default_rng(seed)
    task, xs, ys = [], [], []
    for t in range(n_tasks):
        x = np.sort(g.uniform(0, 3, m))
        x[0], x[-1] = 0.0, 3.0
        task += [f"t{t}"] * m
        xs += list(x)
        ys += list((1 + t) * np.sin(x) + x)
    return {"task": np.array(task), "x": np.array(xs), "y": np.array(ys)}


def _write_csv(path, cols, header=None):
    names = header or list(cols)
    lines = [",".join(names)] + [",".join(str(cols[k][i]) for k in cols) for i in range(len(cols["task"]))]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_csv_reads_back_every_task_with_its_points_sorted(tmp_path):
    cols = _columns()
    order = np.random.default_rng(1).permutation(len(cols["task"]))  # rows in any order
    data = read_tasks(_write_csv(tmp_path / "lib.csv", {k: v[order] for k, v in cols.items()}))
    assert len(data) == 4 and sorted(data.ids) == ["t0", "t1", "t2", "t3"]
    i = list(data.ids).index("t2")
    x, y = data.points(i)
    assert np.all(np.diff(x) > 0)
    np.testing.assert_allclose(y, 3 * np.sin(x) + x)


def test_tasks_may_have_different_numbers_of_points(tmp_path):
    a, b = _columns(1, 5, 0), _columns(1, 9, 1)
    b["task"] = np.array(["u"] * 9)
    both = {k: np.concatenate([a[k], b[k]]) for k in a}
    data = ObservedTasks.from_columns(both)
    assert data.counts().tolist() == [5, 9]


def test_parquet_npz_dataframe_and_arrays_read_the_same_tasks(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    cols = _columns()
    frame = pd.DataFrame(cols)
    frame.to_parquet(tmp_path / "lib.parquet")
    np.savez(tmp_path / "lib.npz", **cols)
    ref = ObservedTasks.from_columns(cols)
    for source in (tmp_path / "lib.parquet", tmp_path / "lib.npz", frame, [tmp_path / "lib.npz"]):
        got = read_tasks(source)
        assert got.ids.tolist() == ref.ids.tolist()
        np.testing.assert_array_equal(got.x, ref.x)
        np.testing.assert_array_equal(got.y, ref.y)


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda c: c["y"].__setitem__(7, np.nan), r"lib\.csv row 9: y column 'y' is nan"),
        (lambda c: c["x"].__setitem__(3, np.inf), r"lib\.csv row 5: x column 'x' is inf"),
        (lambda c: c["x"].__setitem__(2, c["x"][1]), r"lib\.csv row 3 and row 4: task 't0' has x=.* twice"),
    ],
)
def test_bad_values_name_the_file_and_row(tmp_path, edit, match):
    cols = {k: v.astype(float) if k != "task" else v for k, v in _columns().items()}
    edit(cols)
    with pytest.raises(TaskextrapError, match=match):
        read_tasks(_write_csv(tmp_path / "lib.csv", cols))


def test_a_task_with_too_few_points_is_named(tmp_path):
    cols = _columns(2, 6)
    keep = np.r_[0:6, 6:8]  # t1 keeps 2 points
    with pytest.raises(TaskextrapError, match=r"row 8: task 't1' has 2 point\(s\); a task needs at least 3"):
        read_tasks(_write_csv(tmp_path / "lib.csv", {k: v[keep] for k, v in cols.items()}))


def test_empty_files_and_files_without_rows_are_one_line(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("task,x,y\n")
    with pytest.raises(TaskextrapError, match=r"empty\.csv: the file is empty"):
        read_tasks(tmp_path / "empty.csv")
    with pytest.raises(TaskextrapError, match=r"header\.csv: the file has a header but no observations"):
        read_tasks(tmp_path / "header.csv")


def test_files_whose_columns_differ_are_refused(tmp_path):
    cols = _columns()
    a = _write_csv(tmp_path / "a.csv", cols)
    b = _write_csv(tmp_path / "b.csv", cols, header=["task", "time", "y"])
    with pytest.raises(TaskextrapError, match=r"columns differ: .*a\.csv has .*'x'.*b\.csv has .*'time'"):
        read_tasks([a, b])


def test_a_missing_column_suggests_the_close_one_and_text_is_not_a_number(tmp_path):
    cols = _columns()
    with pytest.raises(TaskextrapError, match=r"no y column 'yy'.*did you mean 'y'"):
        read_tasks(_write_csv(tmp_path / "lib.csv", cols), y="yy")
    cols["y"] = cols["y"].astype(object)
    cols["y"][4] = "n/a"
    with pytest.raises(TaskextrapError, match=r"row 6: y column 'y' holds 'n/a', not a number"):
        read_tasks(_write_csv(tmp_path / "lib.csv", cols))


def test_a_split_label_must_be_constant_within_a_task_and_selects_the_library():
    cols = _columns(4, 6)
    cols["split"] = np.array(["train"] * 18 + ["test"] * 6)
    data = ObservedTasks.from_columns(cols, split="split")
    assert len(data.library()) == 3 and data.with_split("test").ids.tolist() == ["t3"]
    with pytest.raises(TaskextrapError, match="no task is labelled 'dev'"):
        data.with_split("dev")
    cols["split"][3] = "test"
    with pytest.raises(TaskextrapError, match=r"the arrays row 4: task 't0' changes its split"):
        ObservedTasks.from_columns(cols, split="split")


def test_the_parameter_regime_reads_one_x_column():
    with pytest.raises(TaskextrapError, match="one x column, got 2"):
        read_tasks(_columns(), x=["x", "y"])


@pytest.mark.parametrize("kind", INTERPOLANTS)
def test_every_interpolant_passes_through_the_points_and_matches_scipy(kind):
    from scipy.interpolate import CubicSpline, PchipInterpolator

    data = ObservedTasks.from_columns(_columns(3, 8))
    lib = data.library(interpolant=kind)
    q = np.random.default_rng(2).uniform(0, 3, size=(3, 40))
    got = lib.values(q)
    for i in range(3):
        x, y = data.points(i)
        np.testing.assert_array_equal(lib.values(x[None], [i])[0], y)
        ref = {"linear": lambda a, x=x, y=y: np.interp(a, x, y), "pchip": PchipInterpolator(x, y),
               "cubic": CubicSpline(x, y, bc_type="natural")}[kind](q[i])  # fmt: skip
        np.testing.assert_allclose(got[i], ref, rtol=1e-12, atol=1e-12)


def test_a_read_outside_a_task_is_an_error_or_held_when_asked():
    cols = _columns(3, 6)
    data = ObservedTasks.from_columns(cols)
    with pytest.raises(TaskextrapError, match=r"task 't1' was observed on x in \[0, 3\] and was read at x=3.5"):
        data.library().values(np.array([[1.0, 3.5]]), [1])
    held = data.library(outside="hold").values(np.array([[3.5, -1.0]]), [1])
    _, y = data.points(1)
    np.testing.assert_array_equal(held[0], [y[-1], y[0]])


def test_the_library_domain_is_the_range_every_task_covers():
    cols = _columns(3, 6)
    cols["x"] = cols["x"] + np.repeat([0.0, 0.5, -0.5], 6)
    fam = ObservedTasks.from_columns(cols).library().family
    assert fam.domain == (0.5, 2.5)
    cols["x"] = cols["x"] + np.repeat([0.0, 10.0, 0.0], 6)
    with pytest.raises(TaskextrapError, match="share no x range"):
        ObservedTasks.from_columns(cols).library()


def test_an_observed_family_draws_no_new_tasks_and_spreads_its_values():
    data = ObservedTasks.from_columns(_columns())
    fam = data.library().family
    with pytest.raises(TaskextrapError, match="observed data: it has no formula"):
        fam.sample_params("train", 2, np.random.default_rng(0))
    assert fam.output_range(np.random.default_rng(0)) == pytest.approx(data.y.max() - data.y.min())
    with pytest.raises(TaskextrapError, match="integer"):
        fam(np.array([[0.5]]), np.array([[1.0]]))


def test_observed_primitives_make_a_composition_library_that_fits_and_saves(tmp_path):
    from taskextrap.estimators.composition import CompositionRTE
    from taskextrap.errors import TaskextrapWarning
    from taskextrap.operators.train import TrainConfig
    from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PrimitiveSet

    truth = PrimitiveSet.sample(n_per_family=6, rng=np.random.default_rng(0))
    g = np.random.default_rng(1)
    cols = {"task": [], "x": [], "y": [], "family": []}
    for i in range(len(truth)):
        x = np.sort(g.uniform(-5, 5, 40))
        x[0], x[-1] = -5.0, 5.0
        cols["task"] += [f"p{i}"] * 40
        cols["x"] += list(x)
        cols["y"] += list(truth.exact(x[None], np.array([i]))[0])
        cols["family"] += [truth.families[truth.family[i]].name] * 40
    data = ObservedTasks.from_columns({k: np.array(v) for k, v in cols.items()}, group="family")
    with pytest.warns(TaskextrapWarning, match="beyond their common observed x range"):
        prims = data.primitives(points=120)
    assert list(prims.family_names) == list(truth.family_names) and prims.domain == (-5.0, 5.0)
    np.testing.assert_allclose(prims.curves[:, [0, -1]], truth.exact(np.broadcast_to([[-5.0, 5.0]], (18, 2))))
    dec = TrainConfig(steps=4, batch=64, eval_every=2)
    model = CompositionRTE(n_pairs=120, k=3, train=TrainConfig(steps=4, batch=256, eval_every=2),
                           decomposer_train=dec, seed=0, verbose=False).fit(prims)  # fmt: skip
    obs = model.protocol_.draw(CompositionSet.sample(prims, PAPER_SPLIT.test, 3, np.random.default_rng(3)), 1,
                               np.random.default_rng(4))  # fmt: skip
    loaded = CompositionRTE.from_pretrained(model.save_pretrained(tmp_path / "comp"))
    np.testing.assert_array_equal(loaded.primitives_.curves, prims.curves)
    np.testing.assert_array_equal(
        loaded.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    )
    with pytest.raises(TaskextrapError, match="needs each task's family"):
        ObservedTasks.from_columns(_columns()).primitives()
