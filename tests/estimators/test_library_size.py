"""The parameter regime at any library size (issue 65): which fits are bounded, and that every
committed parameter run lies below the bounds (so its numbers are the unbounded ones)."""

import numpy as np

from taskextrap import RTE
from taskextrap.embed import estimators as E
from taskextrap.experiments import parameter as X
from taskextrap.search.objective import CANDIDATE_POOL, candidate_plan


def test_the_paper_profiles_parameter_libraries_are_below_every_bound():
    paper, rte = X.PROFILES["paper"], RTE()
    n = paper.n_library * 2  # two training regions
    assert n * 64 <= E.PRETRAIN_POINTS  # Gamma's pre-training grid points
    assert n * rte.library_draws <= E.PCA_ROWS  # the PCA's contexts
    assert n <= rte.reference_library  # the objective's counts as dev chose them


def test_the_parameter_rte_bounds_its_gamma_and_the_discrete_regimes_do_not(fitted_rte):
    import inspect

    assert fitted_rte.embedding_.bounded
    # the discrete regimes fit Gamma through fit_library_embedding's default: unbounded, as before
    assert inspect.signature(E.fit_library_embedding).parameters["bounded"].default is False


def test_a_reference_above_the_pool_never_scores_fewer_than_given():
    counts = [candidate_plan(n, 16, 16, 5000, 0)[:2] for n in (4000, 5000, 5001, 40_000)]
    assert all(c == (16, 16) for c in counts)  # the pool's share of 5,000 is below 1: the counts stay
    assert candidate_plan(2 * CANDIDATE_POOL, 16, 0, 200, 0)[:2] == (16 * CANDIDATE_POOL // 200, 0)


def test_reference_library_is_saved_and_loaded(tmp_path, fitted_rte, quad_library, quad_targets):
    import copy

    model = copy.deepcopy(fitted_rte)
    model.reference_library = 7
    model.save_pretrained(tmp_path / "m", library=False)
    back = RTE.from_pretrained(tmp_path / "m", library=quad_library)
    assert back.reference_library == 7
    _, obs = quad_targets
    np.testing.assert_array_equal(
        back.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    )
