"""The parameter regime's decomposition objective (paper Eq. 3; ``RTE(search="objective")``),
the posterior it returns and the predictive spread."""

import copy

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.search.posterior import covered, entropy, likelihood_weights, mixture
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
from taskextrap.seeding import rng


@pytest.fixture(scope="module")
def objective_rte(quad_library, make_rte):
    """A tiny RTE fitted with leave-one-out rows, searching the objective."""
    return make_rte(search="objective", retrieve=4, n_average=3).fit(quad_library)


class AnchorPsi:
    """A stand-in Psi that predicts the anchor itself (no transformation): its leave-one-out
    context loss is the anchor curve's own context MSE, so the objective must pick the library
    task whose curve is the target's."""

    loo = True

    def predict(self, ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask=None):
        return np.asarray(anc_q, dtype=float)

    def loo_loss(self, ctx_x, ctx_y, anc_ctx, shift):
        return np.mean((anc_ctx - ctx_y) ** 2, axis=1)


def test_objective_finds_the_anchor_strategy_a_misses(objective_rte, quad_library):
    """A target whose proxy neighbour is wrong: Strategy A takes the wrong anchor, the objective
    (with the whole library screened by context fit) takes the right one."""
    rte = copy.deepcopy(objective_rte)
    rte.psi_ = AnchorPsi()
    true, decoy = 3, 15
    obs = get_protocol("paper").draw(quad_library.subset([true]), 1, rng(5, "objective-target"))
    z = rte.embed(obs.ctx_x, obs.ctx_y)
    # the decoy sits exactly on the target in proxy space, the true task far away
    rte.z_library_ = rte.z_library_.copy()
    rte.z_library_[decoy] = z[0]
    rte.z_library_[true] = z[0] + 100.0
    assert rte.decompose(obs.ctx_x, obs.ctx_y, search="proxy").anchors[0, 0] == decoy
    rte.retrieve, rte.screen = 2, 3
    d = rte.decompose(obs.ctx_x, obs.ctx_y)
    assert d.anchors[0, 0] == true and d.score[0, 0] == pytest.approx(0.0, abs=1e-9)
    # the posterior is sure (this Psi ignores phi: the true anchor's every shift fits equally)
    assert d.weights[0, d.anchors[0] == true].sum() > 0.99
    rte.screen = 0  # without the screen the true task is not among the candidates
    assert true not in rte.decompose(obs.ctx_x, obs.ctx_y).anchors[0]


def test_objective_decomposition_shapes_order_and_posterior(objective_rte, quad_targets):
    _, obs = quad_targets
    rte = objective_rte
    d = rte.decompose(obs.ctx_x, obs.ctx_y)
    n, k = len(obs), rte.retrieve * len(rte.phi_scales)
    assert d.anchors.shape == (n, k) and d.phi.shape == (n, k, rte.embed_dim) and d.score.shape == (n, k)
    assert np.all(np.diff(d.score, axis=1) >= 0)  # best first
    assert np.allclose(d.weights.sum(axis=1), 1.0) and np.all(d.weights[:, rte.n_average :] == 0)
    # the Gaussian likelihood by hand: w_j / w_0 = exp(-m (L_j - L_0) / (2 s)), m context points,
    # s the calibrated residual variance (temperature 1)
    m, loss = obs.ctx_x.shape[1], d.score[:, : rte.n_average]
    log_ratio = np.log(d.weights[:, : rte.n_average] / d.weights[:, :1])
    np.testing.assert_allclose(log_ratio, -m * (loss - loss[:, :1]) / (2.0 * rte.loss_scale_), atol=1e-9)
    # phi is a scale of the proxy difference from the candidate's anchor
    proxy = rte.embed(obs.ctx_x, obs.ctx_y)[:, None] - rte.z_library_[d.anchors]
    np.testing.assert_allclose(d.phi, proxy * d.extras["phi_scale"][..., None], rtol=1e-6, atol=1e-9)
    assert set(np.unique(d.extras["phi_scale"])) <= set(rte.phi_scales)


def test_objective_prediction_is_the_posterior_mixture(objective_rte, quad_targets):
    _, obs = quad_targets
    rte = objective_rte
    d = rte.decompose(obs.ctx_x, obs.ctx_y)
    mean, std = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    np.testing.assert_allclose(mean, rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d))
    singles = np.stack([rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in range(rte.n_average)])
    w = d.weights[:, : rte.n_average]
    # the mixture by hand: the weighted mean, and the weighted spread plus Psi's own variance
    want_mean = sum(w[:, j, None] * singles[j] for j in range(rte.n_average))
    want_var = sum(w[:, j, None] * (singles[j] - want_mean) ** 2 for j in range(rte.n_average)) + rte.query_var_
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)
    scale = rte.calibrated_scale()  # the dev-chosen interval scale (search.calibration)
    np.testing.assert_allclose(std, scale * np.sqrt(want_var), rtol=1e-6)
    assert np.all(std >= scale * np.sqrt(rte.query_var_) - 1e-12)
    assert covered(mean, std, obs.qry_y).shape == obs.qry_y.shape


def test_strategy_a_std_is_the_anchors_spread_plus_psi_error(fitted_rte, quad_targets):
    _, obs = quad_targets
    d = fitted_rte.decompose(obs.ctx_x, obs.ctx_y)
    assert d.weights is None  # Strategy A averages equally
    mean, std = fitted_rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d, return_std=True)
    singles = np.stack([fitted_rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d.columns(j)) for j in range(d.k)])
    np.testing.assert_allclose(mean, singles.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(
        std, fitted_rte.calibrated_scale() * np.sqrt(singles.var(axis=0) + fitted_rte.query_var_), rtol=1e-6
    )


def quadratic_through(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Each row's quadratic through its points (x, y), evaluated at ``at`` (the quadratic family
    is exactly this, so from a noise-free context it is the target's true curve)."""
    return np.stack([np.polyval(np.polyfit(xr, yr, 2), ar) for xr, yr, ar in zip(x, y, at, strict=True)])


class KnownErrorPsi:
    """A stand-in Psi whose error is known: the target's true curve (the quadratic through the
    noise-free context) plus N(0, sd^2) noise at every query and every left-out context point,
    whatever the anchor. Calibrated on any pairs, Psi's error variance is sd^2. It records the
    pairs it trains on (``fit``) and the ones it is asked to predict."""

    def __init__(self, sd: float, loo: bool):
        self.sd, self.loo, self.g = sd, loo, np.random.default_rng(123)
        self.trained, self.predicted = [], []

    def to(self, device):
        return self

    def fit_job(self, batches, val, g, progress=None):
        """Records one pass of training pairs; the job it returns trains a stand-in network one step."""
        import torch

        from taskextrap.operators.train import Job, TrainConfig

        self.trained.append(batches(g))
        one = (torch.zeros(1, 1), torch.zeros(1, 1))
        return Job(torch.nn.Linear(1, 1), lambda step: one, None, TrainConfig(steps=1))

    def predict(self, ctx_x, ctx_y, anc_ctx, qry_x, anc_q, shift, mask=None):
        self.predicted.append((ctx_x, ctx_y, anc_ctx))
        exact = quadratic_through(ctx_x, ctx_y, qry_x)
        return exact + self.g.normal(0.0, self.sd, exact.shape)

    def loo_loss(self, ctx_x, ctx_y, anc_ctx, shift):
        # each left-out point predicted exactly by the others (8 points, a quadratic), plus the noise
        return np.mean(self.g.normal(0.0, self.sd, ctx_y.shape) ** 2, axis=1)


def which_task(library: TaskSet, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The library task whose noise-free curve passes through each row's points (x, y)."""
    curves = np.stack([library.values(x, np.full(len(x), i)) for i in range(len(library))], axis=1)
    gap = np.abs(curves - y[:, None]).max(axis=2)  # (rows, tasks)
    assert np.all(np.sort(gap, axis=1)[:, 0] < 1e-6), "a row is no library task's curve"
    return np.argmin(gap, axis=1)


def test_calibration_is_psis_error_on_held_out_library_pairs(monkeypatch, quad_library, make_rte):
    """query_var_ and loss_scale_ are Psi's error variance, measured on pairs whose targets are
    the library tasks held out of Psi's training (anchors from the training pool): with a Psi of
    known error sd both come out near sd^2 (a closed form), and the 90% interval built from
    them covers about 90% of fresh targets' query points."""
    import taskextrap.estimators.parameter as parameter_module

    sd, made = 3.0, []

    def stand_in(scaler, n_context, shift_dim, seed, cfg, loo=False):
        made.append(KnownErrorPsi(sd, loo))
        return made[-1]

    monkeypatch.setattr(parameter_module, "RelationalOperator", stand_in)
    # 2,000 pairs: 100 draws of each task, 200 calibration rows (1,600 query values)
    rte = make_rte(search="objective", n_pairs=2000).fit(quad_library)
    psi = made[0]
    assert rte.psi_ is psi and len(psi.predicted) == 1  # calibration is fit's only prediction
    # the calibration pairs: targets are held-out library tasks, never a training pair's target
    cal_x, cal_y, cal_anchor_y = psi.predicted[0]
    cal_targets, cal_anchors = which_task(quad_library, cal_x, cal_y), which_task(quad_library, cal_x, cal_anchor_y)
    train = psi.trained[0]
    train_targets = which_task(quad_library, train[0], train[1])
    assert len(set(cal_targets)) == round(0.1 * len(quad_library))  # val_fraction of the library
    assert set(cal_targets).isdisjoint(train_targets)
    assert set(cal_targets) | set(train_targets) == set(range(len(quad_library)))
    assert set(cal_anchors) <= set(train_targets) and not np.any(cal_anchors == cal_targets)
    # the closed form: a chi-square mean over 1,600 values is within 15% of sd^2 (4 of its sds)
    assert rte.query_var_ == pytest.approx(sd**2, rel=0.15)
    assert rte.loss_scale_ == pytest.approx(sd**2, rel=0.15)
    # the calibrated 90% interval of one anchor's prediction covers ~90% of fresh F2 queries
    fam = PARAMETER_FAMILIES["quadratic"]
    targets = TaskSet.sample(fam, {"F2": 200}, rng(7, "calibration-targets"))
    obs = get_protocol("paper").draw(targets, 1, rng(7, "calibration-draws"))
    d = rte.decompose(obs.ctx_x, obs.ctx_y, k=1, search="proxy")
    rte.interval_scale = 1.0  # the raw interval: Psi's error alone, before any dev-chosen scale
    mean, std = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d, return_std=True)
    np.testing.assert_allclose(std, np.sqrt(rte.query_var_))  # one candidate: no spread
    assert 0.86 <= covered(mean, std, obs.qry_y).mean() <= 0.94  # binomial sd 0.0075 over 1,600


def test_calibration_of_a_psi_without_loo_rows(objective_rte, fitted_rte):
    assert fitted_rte.loss_scale_ is None  # no leave-one-out rows, no context loss
    assert not fitted_rte.psi_.loo and objective_rte.psi_.loo


def test_loo_psi_leaves_the_point_out(objective_rte, quad_targets):
    """A leave-one-out prediction at a context point does not change with that point's value."""
    _, obs = quad_targets
    rte = objective_rte
    d = rte.decompose(obs.ctx_x, obs.ctx_y, search="proxy")
    order = np.argsort(obs.ctx_x, axis=1)
    sx, sy = np.take_along_axis(obs.ctx_x, order, 1), np.take_along_axis(obs.ctx_y, order, 1)
    anc = quad_library_values(rte, sx, d.anchors[:, 0])
    k = sx.shape[1]
    masks = np.broadcast_to(1.0 - np.eye(k), (len(sx), k, k))
    base = rte.psi_.predict(sx, sy, anc, sx, anc, d.phi[:, 0], masks)
    moved = sy.copy()
    moved[:, 2] += 50.0
    again = rte.psi_.predict(sx, moved, anc, sx, anc, d.phi[:, 0], masks)
    np.testing.assert_allclose(again[:, 2], base[:, 2], rtol=1e-5)
    assert not np.allclose(again[:, 3], base[:, 3])


def quad_library_values(rte, x, anchors):
    return rte.library_.values(x, anchors)


def test_objective_needs_a_loo_psi(fitted_rte, quad_targets):
    _, obs = quad_targets
    with pytest.raises(TaskextrapError, match="loo=True"):
        fitted_rte.decompose(obs.ctx_x, obs.ctx_y, search="objective")
    with pytest.raises(TaskextrapError, match="leave-one-out"):
        fitted_rte.psi_.loo_loss(obs.ctx_x, obs.ctx_y, obs.ctx_y, np.zeros((len(obs), 16)))
    with pytest.raises(TaskextrapError, match="search must be one of"):
        fitted_rte.decompose(obs.ctx_x, obs.ctx_y, search="bayes")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"search": "grid"}, "search must be one of"),
        ({"search": "objective", "loo": False}, "needs loo=True"),
        ({"loo": "yes"}, "loo must be"),
        ({"retrieve": 0}, "retrieve"),
        ({"screen": -1}, "screen"),
        ({"phi_scales": ()}, "phi_scales"),
        ({"phi_scales": (1.0, float("nan"))}, "phi_scales"),
        ({"weighting": "softmax"}, "weighting must be one of"),
        ({"temperature": 0.0}, "temperature"),
        ({"n_average": 0}, "n_average"),
    ],
)
def test_bad_objective_settings(make_rte, kwargs, match):
    with pytest.raises(TaskextrapError, match=match):
        make_rte(**kwargs)


def test_decomposition_weights_are_checked_and_sliced():
    anchors, phi, score = np.zeros((2, 3), int), np.zeros((2, 3, 1)), np.zeros((2, 3))
    w = np.array([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])
    d = Decomposition(anchors, phi, score, weights=w)
    np.testing.assert_allclose(d.columns([0, 1]).weights, [[2 / 3, 1 / 3], [0.5, 0.5]])  # renormalised
    np.testing.assert_allclose(d.columns(2).weights, [[1.0], [1.0]])
    for bad in (np.ones((2, 2)) / 2, -w, w * 2, np.full((2, 3), np.nan)):
        with pytest.raises(TaskextrapError, match="weights"):
            Decomposition(anchors, phi, score, weights=bad)


def test_likelihood_weights_sharpen_with_less_noise():
    loss = np.array([[1.0, 1.1, 2.0]])
    wide, sharp = likelihood_weights(loss, 8, 1.0), likelihood_weights(loss, 8, 0.1)
    assert sharp[0, 0] > wide[0, 0] and np.allclose(wide.sum(), 1.0)
    # by hand: exp(-8 (L - 1) / 2) = 1, e^-0.4, e^-4, normalised
    np.testing.assert_allclose(wide, [np.array([1.0, np.exp(-0.4), np.exp(-4.0)]) / (1 + np.exp(-0.4) + np.exp(-4.0))])
    np.testing.assert_allclose(likelihood_weights(loss, 8, 1.0, None), [[1.0, 0.0, 0.0]])
    np.testing.assert_allclose(likelihood_weights(np.array([[0.5, np.inf]]), 8, 1.0), [[1.0, 0.0]])
    with pytest.raises(TaskextrapError, match="scale"):
        likelihood_weights(loss, 8, 0.0)


def test_entropy_of_the_posterior():
    w = np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0.0, 0.0]])
    np.testing.assert_allclose(entropy(w), [0.0, np.log(4), np.log(2)])
    with pytest.raises(TaskextrapError, match="shape"):
        entropy(np.ones(3))


def test_mixture_and_coverage_formulas():
    preds = np.array([[[0.0, 2.0]], [[2.0, 2.0]]])  # two candidates, one target, two queries
    mean, std = mixture(preds, np.array([[0.5, 0.5]]), 1.0)
    np.testing.assert_allclose(mean, [[1.0, 2.0]])
    np.testing.assert_allclose(std, [[np.sqrt(2.0), 1.0]])
    inside = covered(mean, std, np.array([[1.0 + 1.6 * np.sqrt(2.0), 2.0 + 1.7]]))
    assert inside.tolist() == [[True, False]]  # z(0.95) = 1.645
    with pytest.raises(TaskextrapError, match="level"):
        covered(mean, std, mean, level=1.0)


def test_k_is_refused_by_the_objective_search_and_kept_by_the_proxy_search(objective_rte, quad_targets):
    """``k`` sets Strategy A's candidates; the objective's come from retrieve and screen, so a
    ``k`` given to it would be ignored: one line says so instead."""
    _, obs = quad_targets
    with pytest.raises(TaskextrapError, match=r"k sets the candidates of search='proxy'.*retrieve and screen"):
        objective_rte.decompose(obs.ctx_x, obs.ctx_y, k=3)
    assert objective_rte.decompose(obs.ctx_x, obs.ctx_y, k=3, search="proxy").k == 3


def test_the_screen_in_small_chunks_gives_the_same_candidates(objective_rte, quad_targets, monkeypatch):
    """A large library screens fewer targets per chunk (bounded memory); each target's
    candidates and scores are its own, whatever its chunk."""
    from taskextrap.search import objective as O

    _, obs = quad_targets
    whole = objective_rte.decompose(obs.ctx_x, obs.ctx_y)
    monkeypatch.setattr(O, "SCREEN_ENTRIES", 1)  # one target a chunk
    small = objective_rte.decompose(obs.ctx_x, obs.ctx_y)
    np.testing.assert_array_equal(small.anchors, whole.anchors)
    np.testing.assert_array_equal(small.score, whole.score)


def test_the_candidate_plan_keeps_the_counts_up_to_the_reference_and_then_their_share():
    from taskextrap.search.objective import CANDIDATE_POOL, candidate_plan

    assert candidate_plan(150, 16, 16, 200, 0) == (16, 16, None)
    assert candidate_plan(200, 16, 16, 200, 0) == (16, 16, None)  # the paper's library: as dev chose
    assert candidate_plan(800, 16, 8, 200, 0)[:2] == (64, 32) and candidate_plan(800, 16, 8, 200, 0)[2] is None
    assert candidate_plan(50_000, 16, 16, None, 0) == (16, 16, None)  # None: the counts at every size
    r, s, pool = candidate_plan(4 * CANDIDATE_POOL, 16, 16, 200, 3)
    assert (r, s) == (16 * CANDIDATE_POOL // 200, 16 * CANDIDATE_POOL // 200)  # the pool's share, no more
    assert len(pool) == CANDIDATE_POOL and (np.diff(pool) > 0).all() and pool[-1] < 4 * CANDIDATE_POOL
    np.testing.assert_array_equal(pool, candidate_plan(4 * CANDIDATE_POOL, 16, 16, 200, 3)[2])  # seeded


def test_a_library_beyond_the_pool_draws_its_candidates_from_the_pool(objective_rte, quad_targets, monkeypatch):
    from taskextrap.search import objective as O

    _, obs = quad_targets
    rte = copy.deepcopy(objective_rte)
    n = len(rte.z_library_)
    rte.reference_library = n // 4  # this library is four times the reference: four times the candidates
    plan = lambda: O.candidate_plan(n, rte.retrieve, rte.screen, rte.reference_library, rte.seed)  # noqa: E731
    r, s, pool = plan()
    assert (r, s) == (4 * rte.retrieve, 4 * rte.screen) and pool is None
    d = rte.decompose(obs.ctx_x, obs.ctx_y)
    assert d.anchors.shape[1] == min(n, r + s) * len(rte.phi_scales)
    monkeypatch.setattr(O, "CANDIDATE_POOL", n // 2)  # beyond the pool: a seeded half of the library
    r, s, pool = plan()
    assert len(pool) == n // 2 and (r, s) == (2 * rte.retrieve, 2 * rte.screen)
    d = rte.decompose(obs.ctx_x, obs.ctx_y)
    assert np.isin(d.anchors, pool).all()
    mean = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    assert np.isfinite(mean).all()


def test_a_model_saved_before_the_reference_library_keeps_its_counts():
    """A folder saved without ``reference_library`` scored ``retrieve`` + ``screen`` at every
    library size: it loads with None (``saving.SAVED_BEFORE``), a new RTE defaults to 200."""
    import warnings
    from pathlib import Path

    from taskextrap.estimators.parameter import RTE

    folder = Path(__file__).resolve().parents[1] / "data" / "saved-models" / "rte"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RTE.from_pretrained(folder)
    assert model.reference_library is None and RTE().reference_library == 200
