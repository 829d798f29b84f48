"""Every estimator's defaults are its experiment's headline ``rte`` row under the paper profile,
and a fit shows a progress bar (stderr, after a delay) unless ``verbose=False``, which the
experiments set and which no repr shows."""

import time
from dataclasses import replace

import numpy as np
import pytest
from conftest import TINY_TRAIN

from taskextrap.baselines.oracles import ChainedTransductiveOracle, TransductiveOracle
from taskextrap.errors import TaskextrapError
from taskextrap.estimators import progress as P
from taskextrap.estimators.composition_depth3 import Composition3RTE
from taskextrap.estimators.composition import CompositionRTE
from taskextrap.estimators.composition_em import EMCompositionRTE
from taskextrap.estimators.length import LengthRTE
from taskextrap.estimators.multistep import ChainedRTE
from taskextrap.estimators.parameter import RTE
from taskextrap.experiments import composition as C
from taskextrap.experiments import composition_depth3 as D3
from taskextrap.experiments import composition_em as EM
from taskextrap.experiments import length as L
from taskextrap.experiments import parameter as X
from taskextrap.experiments.discrete import DEFAULT_EMBEDDING
from taskextrap.experiments.settings import UnitSpec
from taskextrap.operators.train import TrainConfig
from taskextrap.seeding import rng
from taskextrap.tasks import get_protocol
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet
from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT
from taskextrap.tasks.primitives import PAPER_SPLIT, PrimitiveSet

PROTOCOLS = ("paper", "strict")
TINY_DISCRETE = {
    "n_pairs": 64,
    "embed_dim": 4,
    "library_draws": 1,
    "verbose": False,
    "train": TrainConfig(steps=6, batch=256, eval_every=3),
    "decomposer_train": TrainConfig(steps=6, batch=32, eval_every=3),
}
ALL = (
    RTE,
    ChainedRTE,
    TransductiveOracle,
    ChainedTransductiveOracle,
    LengthRTE,
    CompositionRTE,
    Composition3RTE,
    EMCompositionRTE,
)


# ----------------------------------------------------------------------------- the headline settings


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rte_is_the_parameter_experiments_rte_row_under_the_paper_profile(protocol):
    """RTE() is the objective in the dev-chosen variant (CHOSEN) with the paper profile's sizes:
    the estimator the experiment's ``rte`` row is built as (every setting, the seed 0 unit's)."""
    rte = RTE(protocol=protocol)
    assert (rte.search, rte.resolved("loo")) == ("objective", True)
    variant = X.OBJECTIVE_VARIANTS[X.CHOSEN[protocol]]
    assert {k: getattr(rte, k) for k in variant} == variant
    paper = X.PROFILES["paper"]
    assert (rte.n_pairs, rte.train) == (paper.n_pairs, paper.train)
    assert rte == X.make_rte(UnitSpec(None, get_protocol(protocol), paper, 0, X.DEFAULT_EMBEDDING), search="objective")


def test_strategy_a_is_the_proxy_search_and_ignores_the_objectives_settings(make_rte, quad_library, quad_targets):
    """RTE(search="proxy") is Strategy A (Psi without leave-one-out rows, the nearest anchors,
    equal weights); the objective's settings, which the experiments pin for their fingerprints,
    change none of its numbers."""
    assert (RTE(search="proxy").search, RTE(search="proxy").resolved("loo")) == ("proxy", False)
    _, obs = quad_targets
    pinned = make_rte().fit(quad_library)  # retrieve 8, screen 0, shifts 0.5..2 (the experiments' Strategy A)
    plain = RTE(search="proxy", n_pairs=300, train=TINY_TRAIN, seed=0, verbose=False).fit(quad_library)
    assert (pinned.retrieve, pinned.screen) != (plain.retrieve, plain.screen)
    d = plain.decompose(obs.ctx_x, obs.ctx_y)
    assert d.k == plain.anchors and d.weights is None
    np.testing.assert_array_equal(
        plain.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), pinned.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    )


def test_the_chain_and_the_oracles_default_to_strategy_as_search_with_rtes_sizes():
    paper = X.PROFILES["paper"]
    for cls in (ChainedRTE, TransductiveOracle, ChainedTransductiveOracle):
        model = cls()
        settings = (model.search, model.resolved("loo"), model.n_pairs, model.train)
        assert settings == ("proxy", False, paper.n_pairs, paper.train)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_discrete_estimators_are_their_experiments_rte_rows_under_the_paper_profile(protocol):
    """LengthRTE(), CompositionRTE(), Composition3RTE() and EMCompositionRTE() (the label-free
    arm) equal the estimators the experiments build for the paper profile's seed-0 unit: the same
    dev-chosen inference settings and the paper profiles' sizes."""

    def spec(module, regime, split=None):  # the paper profile's seed-0 unit of a regime
        return UnitSpec(
            None, get_protocol(protocol, regime), module.PROFILES["paper"], 0, DEFAULT_EMBEDDING, split=split
        )

    built = {
        LengthRTE: L.make_rte(spec(L, "length")),
        CompositionRTE: C.make_rte(spec(C, "composition", PAPER_SPLIT)),
        Composition3RTE: D3.make_rte(spec(D3, "composition-depth3", PAPER_RECIPE_SPLIT)),
        EMCompositionRTE: EM.make_em(spec(C, "composition", PAPER_SPLIT), 0.0),
    }
    for cls, experiment in built.items():
        assert cls(protocol=protocol) == experiment, cls.__name__


def test_default_sizes_are_the_paper_profiles():
    for cls, profile in (
        (LengthRTE, L.PROFILES["paper"]),
        (CompositionRTE, C.PROFILES["paper"]),
        (Composition3RTE, D3.PROFILES["paper"]),
        (EMCompositionRTE, C.PROFILES["paper"]),
    ):
        model = cls()
        assert (model.n_pairs, model.train, model.decomposer_train) == (
            profile.n_pairs,
            profile.train,
            profile.decomposer_train,
        ), cls.__name__
    assert (EMCompositionRTE().n_tasks, EMCompositionRTE().em_rounds) == (
        C.PROFILES["paper"].n_pairs,
        EM.EM_ROUNDS,
    )


# ----------------------------------------------------------------------------- verbose


@pytest.mark.parametrize("cls", ALL)
def test_verbose_is_no_setting_repr_and_equality_ignore_it(cls):
    quiet, loud = cls(verbose=False), cls()
    assert loud.verbose is True and repr(quiet) == repr(loud) and "verbose" not in repr(loud)
    assert quiet == loud


@pytest.mark.parametrize("cls", (RTE, LengthRTE, CompositionRTE))
def test_verbose_must_be_a_bool(cls):
    with pytest.raises(TaskextrapError, match="verbose must be True or False"):
        cls(verbose="yes")


def test_the_experiments_build_quiet_estimators():
    def spec(module, regime, split=None):
        return UnitSpec(None, get_protocol("paper", regime), module.PROFILES["tiny"], 0, "adapted", split=split)

    parameter = replace(spec(X, "parameter"), embedding=X.DEFAULT_EMBEDDING)
    built = [X.make_rte(parameter, search=s) for s in ("proxy", "objective")]
    built += [
        L.make_rte(spec(L, "length")),
        C.make_rte(spec(C, "composition", PAPER_SPLIT)),
        D3.make_rte(spec(D3, "composition-depth3", PAPER_RECIPE_SPLIT)),
        EM.make_em(spec(C, "composition", PAPER_SPLIT), 0.25),
    ]
    assert [m.verbose for m in built] == [False] * len(built)
    assert X.common_settings(parameter)["verbose"] is False  # oracle, chained ones


def test_a_chain_adopts_a_fit_whatever_either_verbose(fitted_rte, quad_library):
    settings = {
        k: getattr(fitted_rte, k) for k in ("n_pairs", "train", "seed", "search", "retrieve", "screen", "phi_scales")
    }
    ChainedRTE(**settings, verbose=True).fit(quad_library, fitted=fitted_rte)


@pytest.fixture(scope="module")
def ladder():
    return LadderSet.sample_library(POLYNOMIAL_LADDER, 6, rng(0, "test-defaults-ladder"))


@pytest.fixture(scope="module")
def primitives():
    return PrimitiveSet.sample(n_per_family=8, rng=rng(0, "test-defaults-prims"))


def _fits(quad_library, ladder, primitives):
    """(estimator, library, training steps) of a tiny fit of each kind of fit loop."""
    return {
        "RTE": (RTE(n_pairs=300, train=TINY_TRAIN, seed=0, retrieve=4, screen=0), quad_library, TINY_TRAIN.steps),
        "LengthRTE": (LengthRTE(k=3, **TINY_DISCRETE), ladder, 12),
        "CompositionRTE": (CompositionRTE(k=3, **TINY_DISCRETE), primitives, 12),
        "EMCompositionRTE": (EMCompositionRTE(k=3, n_tasks=40, em_rounds=2, **TINY_DISCRETE), primitives, 12),
    }


@pytest.mark.parametrize("kind", ("RTE", "LengthRTE", "CompositionRTE", "EMCompositionRTE"))
def test_a_verbose_fit_past_the_delay_shows_its_phases_and_loss_on_stderr(
    kind, quad_library, ladder, primitives, monkeypatch, capsys
):
    monkeypatch.setattr(P, "DELAY_S", 0.0)
    model, library, steps = _fits(quad_library, ladder, primitives)[kind]
    model.verbose = True
    calls = []
    model.fit(library, progress=lambda step, loss: calls.append(step))
    out, err = capsys.readouterr()
    assert out == "" and f"{kind}: " in err and "training Psi" in err and "loss=" in err and f"/{steps} " in err
    assert ("training decomposer" in err) == (kind != "RTE")
    assert len(calls) == steps  # the user's callback still gets every step
    assert "\n" not in err and err.endswith("\r")  # the bar is cleared when the fit ends: no line left


def test_fits_in_a_loop_leave_no_line_behind(monkeypatch, capsys):
    monkeypatch.setattr(P, "DELAY_S", 0.0)
    for _ in range(3):
        with P.FitProgress(True, 4, name="RTE") as bar:
            bar.phase("training Psi")
            for step in range(4):
                bar(step, 0.5)
    err = capsys.readouterr().err
    assert "RTE: training Psi" in err and "\n" not in err


def test_a_labelled_fit_names_its_bar_and_the_label_ends_with_its_block(monkeypatch, capsys):
    monkeypatch.setattr(P, "DELAY_S", 0.0)
    with P.labelled("dev fit 1/2"), P.FitProgress(True, 4, name="RTE") as bar:
        bar.phase("training Psi")
        bar(0, 0.5)
    assert "RTE dev fit 1/2: training Psi" in capsys.readouterr().err
    assert P.FitProgress(False, 4, name="RTE").name == "RTE"  # outside the block: no label


def test_a_redraw_between_steps_keeps_the_rate_right(monkeypatch, capsys):
    """The clock's redraw records the step count with the time, as tqdm does: the next rate is
    the steps since the redraw over the time since it (64 steps/s here, on a made-up clock)."""
    monkeypatch.setattr(P, "DELAY_S", 0.0)
    monkeypatch.setattr(P, "REDRAW_S", 3600.0)  # no redraw but the one below
    now = [0.0]
    with P.FitProgress(True, 100, name="RTE") as progress:
        bar = progress.bar
        bar._time = lambda: now[0]
        bar.start_t = bar.last_print_t = 0.0
        for step in range(12):  # 1/64 s per step (exact in binary); tqdm draws every 0.1 s
            now[0] += 1 / 64
            progress(step, 0.5)
            if step == 3:
                progress._draw_if_due()  # the clock's redraw, between two of tqdm's own draws
        assert bar.format_dict["rate"] == pytest.approx(64.0)


@pytest.mark.parametrize("kind", ("RTE", "LengthRTE"))
def test_a_quiet_fit_or_one_shorter_than_the_delay_prints_nothing(
    kind, quad_library, ladder, primitives, monkeypatch, capsys
):
    model, library, steps = _fits(quad_library, ladder, primitives)[kind]
    monkeypatch.setattr(P, "DELAY_S", 0.0)
    model.verbose = False
    calls = []
    model.fit(library, progress=lambda step, loss: calls.append(step))
    assert capsys.readouterr() == ("", "")
    assert len(calls) == steps  # no bar, but the user's callback still gets every step
    monkeypatch.setattr(P, "DELAY_S", 60.0)
    model.verbose = True
    model.fit(library)
    assert capsys.readouterr() == ("", "")


def test_a_phase_without_training_steps_is_shown_once_past_the_delay(make_rte, quad_library, monkeypatch, capsys):
    """The embedding reports no steps: the bar is drawn for it all the same once the delay has passed."""
    monkeypatch.setattr(P, "DELAY_S", 0.05)
    monkeypatch.setattr(P, "REDRAW_S", 0.01)
    fit_embedding = RTE.fit_embedding

    def slow(self, library):
        time.sleep(0.3)
        return fit_embedding(self, library)

    monkeypatch.setattr(RTE, "fit_embedding", slow)
    make_rte(verbose=True).fit(quad_library)
    assert "RTE: embedding library" in capsys.readouterr().err


def test_a_phase_without_steps_shows_its_name_and_clock_not_a_step_count(monkeypatch, capsys):
    monkeypatch.setattr(P, "DELAY_S", 0.0)
    with P.FitProgress(True, 1000, name="RTE") as bar:
        bar.phase("embedding library")
        bar._draw_if_due()
        before = capsys.readouterr().err
        bar.phase("training Psi")
        bar(0, 0.5)
        bar._draw_if_due()
        after = capsys.readouterr().err
    assert "RTE: embedding library [" in before and "/1000" not in before
    assert "RTE: training Psi" in after and "1/1000" in after and "loss=0.5" in after
