"""rte-gp, the estimator (posterior.estimator, issue 64): its dev split, its contract."""

import subprocess
import sys

import numpy as np
import pytest

from taskextrap import RTE
from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.posterior.context import ContextPosterior, ResidualPrior
from taskextrap.posterior.estimator import RTEGP, library_dev_split
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
from taskextrap.tasks.dev import DEV_REGION

FAMILY = PARAMETER_FAMILIES["quadratic"]


def test_the_dev_split_holds_out_the_last_training_region():
    library = TaskSet.sample(FAMILY, {"F1_1": 10, "F1_2": 6}, np.random.default_rng(0))
    dev_library, dev_targets = library_dev_split(library)
    assert len(dev_library) == 10 and len(dev_targets) == 6
    assert set(dev_targets.region) == {DEV_REGION} and DEV_REGION not in set(dev_library.region)
    assert set(dev_library.region) == set(dev_library.family.train_regions)  # the two halves of F1_1
    with pytest.raises(TaskextrapError, match="dev split"):
        library_dev_split(library.subset(np.flatnonzero(library.region == "F1_1")))


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(TaskextrapError, match="rte"):
        RTEGP(rte="paper")
    with pytest.raises(TaskextrapError, match="kernel"):
        RTEGP(kernels=("cosine",))
    with pytest.raises(TaskextrapError, match=r"not fitted|fit"):
        RTEGP().predict(np.zeros((1, 8)), np.zeros((1, 8)), np.zeros((1, 8)))


class _LineRTE:
    """A fitted stand-in for RTE: predicts 2x at any inputs, and records what it was asked."""

    device = "cpu"

    def __init__(self):
        self.asked: list[np.ndarray] = []

    def check_is_fitted(self):
        return None

    def predict(self, ctx_x, ctx_y, x_query, decomposition=None):
        self.asked.append(np.asarray(x_query))
        return 2.0 * np.asarray(x_query)


def test_at_query_passes_only_the_context_through_rte():
    """An experiment's unit hands over its rte row at the queries (``at_query``): RTE is asked at
    the context inputs only, and the posterior corrects that row, not a prediction of its own."""
    rte = _LineRTE()
    prior = ResidualPrior("rbf", (0.0, 0.0, np.log(1e-2)), 0.0, 0.0, 1.0, 1.0)
    model = RTEGP.from_parts(rte, ContextPosterior(prior, 1.0, 1.0))
    g = np.random.default_rng(0)
    cx, qx = g.uniform(0, 1, (3, 5)), g.uniform(1, 2, (3, 4))
    cy = 2.0 * cx + 0.1
    joint = model.predict(cx, cy, qx)
    assert rte.asked[-1].shape == (3, 9)  # without at_query: one pass at the context and queries
    given = model.predict(cx, cy, qx, decomposition="d", at_query=2.0 * qx)
    assert rte.asked[-1].shape == (3, 5) and np.allclose(given, joint, rtol=0, atol=1e-12)
    shifted = model.predict(cx, cy, qx, decomposition="d", at_query=2.0 * qx + 1.0)
    assert np.allclose(shifted, joint + 1.0, atol=1e-12)  # the posterior corrects the row it is given
    with pytest.raises(TaskextrapError, match="decomposition"):
        model.predict(cx, cy, qx, at_query=2.0 * qx)
    for bad in (2.0 * qx[:1], 2.0 * qx[:, :2], 2.0 * qx[0]):  # one row is never broadcast
        with pytest.raises(TaskextrapError, match="shape"):
            model.predict(cx, cy, qx, decomposition="d", at_query=bad)


@pytest.mark.slow
def test_fit_chooses_on_dev_and_predicts_from_the_context_only(tmp_path):
    library = TaskSet.sample(FAMILY, {"F1_1": 24, "F1_2": 12}, np.random.default_rng(0))
    small = RTE(n_pairs=200, train=TrainConfig(steps=5, batch=64), verbose=False)
    model = RTEGP(small, kernels=("rbf",)).fit(library)
    assert model.dev_record_["dev_targets"] == 12 and model.dev_record_["kernel"] == "rbf"
    targets = TaskSet.sample(FAMILY, {"F2": 4}, np.random.default_rng(1))
    obs = get_protocol("paper").draw(targets, 1, np.random.default_rng(2))
    mean, sd = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    assert mean.shape == sd.shape == obs.qry_x.shape and (sd > 0).all()
    # a target's prediction depends on its own context only: predicted alone, the same bits
    alone = model.predict(obs.ctx_x[:1], obs.ctx_y[:1], obs.qry_x[:1])
    assert np.allclose(alone, mean[:1], rtol=0, atol=1e-9)
    # the paper's rte inside is RTE's own fit: rte-gp with no correction and no library GP is rte
    flat = ResidualPrior("rbf", (np.log(1e-3), 0.0, 0.0), 0.0, 0.0, 1.0, 1.0)  # amplitude 1e-3, noise 1
    same = RTEGP.from_parts(model.rte_, ContextPosterior(flat, 1.0, 1.0))
    plain = model.rte_.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    assert np.allclose(same.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), plain, rtol=1e-3)
    with pytest.raises(TaskextrapError, match="library_gp"):
        RTEGP.from_parts(model.rte_, ContextPosterior(flat, 0.5, 1.0))

    # saved and loaded in a fresh process: the same predictions and intervals, to the bit
    model.save_pretrained(tmp_path / "model")
    np.savez(tmp_path / "obs.npz", ctx_x=obs.ctx_x, ctx_y=obs.ctx_y, qry_x=obs.qry_x)
    code = (
        "import sys, numpy as np; from taskextrap.posterior.estimator import RTEGP; "
        "m = RTEGP.from_pretrained(sys.argv[1]); o = np.load(sys.argv[2]); "
        "mean, sd = m.predict(o['ctx_x'], o['ctx_y'], o['qry_x'], return_std=True); "
        "np.savez(sys.argv[3], mean=mean, sd=sd)"
    )
    args = [str(tmp_path / "model"), str(tmp_path / "obs.npz"), str(tmp_path / "out.npz")]
    subprocess.run([sys.executable, "-c", code, *args], check=True)
    back = np.load(tmp_path / "out.npz")
    assert np.array_equal(back["mean"], mean) and np.array_equal(back["sd"], sd)
    (tmp_path / "model" / "rte-gp.json").write_text("{}")
    with pytest.raises(TaskextrapError, match="rte-gp folder"):
        RTEGP.from_pretrained(tmp_path / "model")


@pytest.mark.slow
def test_a_length_rte_gp_is_saved_and_loaded_with_its_regime(tmp_path):
    """Any regime's rte-gp keeps its RTE's class and its regime: a length unit's, loaded back,
    predicts the same bits; a folder naming an unknown RTE class is refused in one line."""
    from taskextrap.experiments import length
    from taskextrap.experiments.settings import UnitSpec
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER
    from taskextrap.tasks.regimes import get_protocol as regime_protocol

    spec = UnitSpec(POLYNOMIAL_LADDER, regime_protocol("paper", "length"), length.PROFILES["tiny"], 0, "gradient")
    library = length.make_library(POLYNOMIAL_LADDER, 4)
    rte = length.make_rte(spec).fit(library)
    _, obs = length.make_targets(library, spec.protocol, 3, 1)
    prior = ResidualPrior("rbf", (0.0, 0.0, np.log(1e-2)), 0.0, 0.0, 1.0, 1.0)
    model = RTEGP.from_parts(rte, ContextPosterior(prior, 1.0, 1.5), regime="length")
    mean, sd = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    # an experiment's unit hands over its rte row at the queries: the same prediction up to the
    # rounding of the row blocks; whatever RTE would predict there is what it corrects
    d = rte.decompose(obs.ctx_x, obs.ctx_y)
    row = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d)
    given, sd_given = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, True, d, at_query=row)
    assert np.allclose(given, mean, rtol=1e-5, atol=1e-6) and np.allclose(sd_given, sd, rtol=1e-5)
    shifted = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, decomposition=d, at_query=row + 1.0)
    assert not np.allclose(shifted, given)
    with pytest.raises(TaskextrapError, match="decomposition"):
        model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, at_query=row)
    with pytest.raises(TaskextrapError, match="shape"):
        model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, decomposition=d, at_query=row[:, :2])
    back = RTEGP.from_pretrained(model.save_pretrained(tmp_path / "m"))
    assert back.regime == "length" and type(back.rte_) is type(rte)
    again, sd_again = back.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    assert np.array_equal(again, mean) and np.array_equal(sd_again, sd)
    config = tmp_path / "m" / "rte-gp.json"
    config.write_text(config.read_text().replace('"LengthRTE"', '"NoSuchRTE"'))
    with pytest.raises(TaskextrapError, match="NoSuchRTE"):
        RTEGP.from_pretrained(tmp_path / "m")


@pytest.mark.slow
def test_a_fitted_meta_gp_of_the_same_arguments_is_not_fitted_again(monkeypatch):
    """``taskextrap fit`` fits meta-gp on the dev library as a peer; rte-gp's choice reuses that
    fit when it is the very GP it would fit (the same arguments): the same choice, one fit."""
    from taskextrap.baselines.classics import LibraryGP
    from taskextrap.baselines.table import get_method
    from taskextrap.workflow import peer_unit

    library = TaskSet.sample(FAMILY, {"F1_1": 16, "F1_2": 8}, np.random.default_rng(0))
    dev_library, dev_targets = library_dev_split(library)
    dev_rte = RTE(n_pairs=200, train=TrainConfig(steps=3, batch=64), verbose=False).fit(dev_library)
    draws = dev_rte.protocol_.draw(dev_targets, 1, np.random.default_rng(3))
    peer = get_method("meta-gp").build(**peer_unit(dev_rte)).fit(dev_library)
    fits = []
    real = LibraryGP.begin_fit
    monkeypatch.setattr(LibraryGP, "begin_fit", lambda self, *a, **k: (fits.append(1), real(self, *a, **k))[1])
    model = RTEGP(kernels=("rbf",))
    shared, record = model.choose_with(dev_rte, dev_library, draws, peer)
    assert fits == []  # reused
    own, own_record = model.choose_with(dev_rte, dev_library, draws)
    assert len(fits) == 1 and shared.to_dict() == own.to_dict() and record == own_record
    other = get_method("meta-gp").build(**peer_unit(dev_rte) | {"seed": 7})  # another GP: fitted anew
    model.choose_with(dev_rte, dev_library, draws, other)
    assert len(fits) == 2
