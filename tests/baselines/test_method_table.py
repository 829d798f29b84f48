"""baselines.method and baselines.table: every baseline and classic follows one contract, and a
method registered in one place is a row of every table of its regimes and of `evaluate`."""

import dataclasses

import numpy as np
import pytest
from sklearn.base import clone

from taskextrap.baselines import table
from taskextrap.baselines.method import Method
from taskextrap.baselines.table import get_method, method_rows, register_method, unregister_method
from taskextrap.errors import TaskextrapError
from taskextrap.operators.jobs import TrainConfig
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol

TRAIN = TrainConfig(steps=6, batch=128, eval_every=3)


@pytest.fixture(scope="module")
def data():
    fam = PARAMETER_FAMILIES["quadratic"]
    library = TaskSet.sample(fam, {"F1_1": 6, "F1_2": 6}, rng(0, "table-library"))
    obs = get_protocol("paper").draw(TaskSet.sample(fam, {"F2": 3}, rng(0, "table-targets")), 1, rng(1))
    return library, obs


def _small(name):
    """The table's method ``name``, with a short training where it trains networks."""
    method = get_method(name).build(seed=0, device="cpu")
    return method.set_params(train=TRAIN) if "train" in method.get_params() else method


@pytest.mark.parametrize("name", method_rows("parameter"))
def test_every_method_of_the_table_follows_the_contract(name, data):
    library, obs = data
    method = _small(name)
    assert isinstance(method, Method)
    params = method.get_params()
    assert params == {f.name: getattr(method, f.name) for f in dataclasses.fields(method)}
    twin = clone(method)
    assert twin is not method and twin == method and twin.get_params() == params
    with pytest.raises(TaskextrapError, match=f"{type(method).__name__} is not fitted"):
        method.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    with pytest.raises(TaskextrapError, match="has no parameter 'nosuch'"):
        method.set_params(nosuch=1)
    assert method.get_params() == params  # a refused set_params changes nothing
    assert method.fit(library) is method
    mean = method.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    assert mean.shape == obs.qry_x.shape and np.isfinite(mean).all()
    if method.interval:
        again, sd = method.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        np.testing.assert_array_equal(again, mean)
        assert sd.shape == mean.shape and (sd >= 0).all()
    else:
        with pytest.raises(TaskextrapError, match="gives no interval"):
            method.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)


def test_a_method_is_the_function_it_wraps(data):
    from taskextrap.baselines.context import ctx_interp, ctx_polyfit, library_best_fit

    library, obs = data
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    np.testing.assert_array_equal(_small("ctx-interp").fit(library).predict(cx, cy, qx), ctx_interp(cx, cy, qx))
    np.testing.assert_array_equal(_small("ctx-polyfit").fit(library).predict(cx, cy, qx), ctx_polyfit(cx, cy, qx))
    best = library_best_fit(cx, cy, qx, lambda i, x: library.values(x, i), len(library))[0]
    np.testing.assert_array_equal(_small("library-best-fit").fit(library).predict(cx, cy, qx), best)


def test_the_table_lists_rows_per_regime_and_dev_variants_apart():
    assert method_rows("parameter")[:3] == ("ctx-interp", "ctx-polyfit", "library-best-fit")
    assert set(method_rows("parameter", dev=True)) >= {"meta-gp-rbf", "cnp-w64"}
    assert {"ctx-gp", "meta-gp", "cnp", "library-knn"} <= set(method_rows("observed"))  # beside a user's model
    assert "library-knn" not in method_rows("parameter") and "meta-gp-rbf" not in method_rows("observed")
    # every regime that trains the classics scores their variants on its own dev split
    variants = method_rows("parameter", dev=True)
    assert method_rows("length", dev=True) == method_rows("composition", dev=True) == variants
    assert method_rows("composition-depth3", dev=True) == variants
    assert method_rows("observed", dev=True) == ()
    with pytest.raises(TaskextrapError, match="unknown regime 'nosuch'"):
        method_rows("nosuch")
    with pytest.raises(TaskextrapError, match=r"unknown method 'ctx-interpp'.*did you mean 'ctx-interp'"):
        get_method("ctx-interpp")


def test_bad_registrations_are_one_line_errors_and_keep_nothing():
    before = dict(table._TABLE)
    with pytest.raises(TaskextrapError, match="already in the table"):
        register_method("ctx-interp", ToyMean)
    with pytest.raises(TaskextrapError, match=r"subclass of baselines\.method\.Method"):
        register_method("toy", object)
    with pytest.raises(TaskextrapError, match="unknown regime 'nosuch'"):
        register_method("toy", ToyMean, regimes=("nosuch",))
    with pytest.raises(TaskextrapError, match="ToyMean has no parameter 'nosuch'"):
        register_method("toy", ToyMean, nosuch=1)
    with pytest.raises(TaskextrapError, match="offset must be a number"):
        register_method("toy", ToyMean, offset="a")
    assert before == table._TABLE


@dataclasses.dataclass(eq=False)
class ToyMean(Method):
    """``toy``: each target's context mean plus ``offset``, everywhere (a test's own method)."""

    offset: float = 0.0

    def _settings(self):
        if not isinstance(self.offset, (int, float)):
            raise TaskextrapError(f"offset must be a number, got {self.offset!r}")
        return {}

    def _predict(self, ctx_x, ctx_y, x_query):
        return np.broadcast_to(ctx_y.mean(axis=1, keepdims=True) + self.offset, x_query.shape).copy(), None


@pytest.fixture
def toy():
    register_method("toy", ToyMean, regimes=("parameter", "observed"), offset=1.0)
    yield
    unregister_method("toy")


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_registered_method_is_a_row_of_a_parameter_table(toy, tmp_path):
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import run_experiment

    opts = RunOptions(profile="tiny", out=tmp_path, family="exp", plots=False, progress=False)
    results = run_experiment("parameter", opts)
    mse = {r["method"]: r for r in results["rows"] if r["metric"] == "mse"}
    assert list(mse)[-1] == "toy" and mse["toy"]["value"] > 0
    assert "toy" in {c["b"] for c in results["comparisons"]} | {c["a"] for c in results["comparisons"]}


def test_a_registered_method_is_a_row_of_evaluate(toy, tmp_path):
    from taskextrap.evaluation import evaluate_observed
    from taskextrap.workflow import Columns, fit_observed

    g = np.random.default_rng(0)
    fam = PARAMETER_FAMILIES["cubic"]
    lib, tgt = TaskSet.sample(fam, {"F1_1": 8, "F1_2": 8}, g), TaskSet.sample(fam, {"F2": 4}, g)
    for name, tasks, m in (("library", lib, 16), ("targets", tgt, 20)):
        x = np.linspace(*fam.domain, m)
        y = tasks.values(np.broadcast_to(x, (len(tasks), m)))
        rows = [f"{name}{i},{float(x[j])!r},{float(y[i, j])!r}" for i in range(len(tasks)) for j in range(m)]
        (tmp_path / f"{name}.csv").write_text("task,x,y\n" + "\n".join(rows) + "\n")

    fit_observed(tmp_path / "library.csv", out=tmp_path / "model", dev=None, verbose=False,
                 settings={"n_pairs": 200, "train": TRAIN})  # fmt: skip
    result = evaluate_observed(tmp_path / "model", tmp_path / "targets.csv", 8, Columns())
    assert list(result["mse"]) == ["rte", *method_rows("observed")] and "toy" in result["mse"]
    assert any(c["b"] == "toy" for c in result["comparisons"])
