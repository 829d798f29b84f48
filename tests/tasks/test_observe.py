"""Observation protocols: the paper's interleaved draws and the strict sparse/noisy protocol."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.tasks import PARAMETER_FAMILIES, PROTOCOLS, ObservationProtocol, TaskSet, get_protocol
from taskextrap.tasks.observe import noise_scale


@pytest.fixture(scope="module")
def tasks():
    fam = PARAMETER_FAMILIES["quadratic"]
    return TaskSet.sample(fam, {"F1_1": 50, "F1_2": 50, "F2": 50}, np.random.default_rng(3))


def test_registered_protocols():
    assert set(PROTOCOLS) == {"paper", "strict"}
    assert get_protocol("paper") is PROTOCOLS["paper"]
    assert get_protocol(PROTOCOLS["strict"]) is PROTOCOLS["strict"]
    with pytest.raises(TaskextrapError, match="unknown protocol"):
        get_protocol("lenient")


def test_paper_protocol_is_8_plus_8_uniform_noise_free(tasks):
    p = get_protocol("paper")
    assert (p.n_context, p.n_query, p.noise) == (8, 8, 0.0)
    obs = p.draw(tasks, 20, np.random.default_rng(0))  # no noise scale needed: noise-free
    n = len(tasks) * 20
    assert len(obs) == n
    for a in (obs.ctx_x, obs.ctx_y, obs.qry_x, obs.qry_y):
        assert a.shape == (n, 8)
    # task-major layout: draw j of task i at i * 20 + j
    np.testing.assert_array_equal(obs.task, np.repeat(np.arange(len(tasks)), 20))
    np.testing.assert_array_equal(obs.params, tasks.params[obs.task])
    # noise-free context and queries
    np.testing.assert_array_equal(obs.ctx_y, tasks.family(obs.params, obs.ctx_x))
    np.testing.assert_array_equal(obs.qry_y, tasks.family(obs.params, obs.qry_x))
    # both context and queries uniform over the whole domain [0, 20] (interleaved)
    for x in (obs.ctx_x, obs.qry_x):
        assert x.min() >= 0.0 and x.max() <= 20.0
        assert x.min() < 0.1 and x.max() > 19.9
        assert x.mean() == pytest.approx(10.0, abs=0.2)
        assert np.mean(x < 10.0) == pytest.approx(0.5, abs=0.02)


def test_strict_protocol_is_sparse_noisy_context_first_half_queries_second_half(tasks):
    p = get_protocol("strict")
    fam = tasks.family
    scale = noise_scale(fam)
    obs = p.draw(tasks, 20, np.random.default_rng(1), scale)
    n = len(tasks) * 20
    assert obs.ctx_x.shape == (n, 5) and obs.ctx_y.shape == (n, 5)
    assert obs.qry_x.shape == (n, 8) and obs.qry_y.shape == (n, 8)
    assert obs.ctx_x.min() >= 0.0 and obs.ctx_x.max() <= 10.0
    assert obs.ctx_x.max() > 9.9
    assert obs.qry_x.min() >= 10.0 and obs.qry_x.max() <= 20.0
    # queries are noise-free
    np.testing.assert_array_equal(obs.qry_y, fam(obs.params, obs.qry_x))
    # context noise: zero-mean Gaussian with std 0.02 x the family's output range
    resid = obs.ctx_y - fam(obs.params, obs.ctx_x)
    assert np.all(resid != 0.0)
    assert resid.std() == pytest.approx(0.02 * scale, rel=0.05)
    assert abs(resid.mean()) < 0.1 * 0.02 * scale


def test_noisy_protocol_requires_a_noise_scale(tasks):
    with pytest.raises(TaskextrapError, match="output range"):
        get_protocol("strict").draw(tasks, 1, np.random.default_rng(0))


def test_noise_scale_is_the_training_region_output_range():
    fam = PARAMETER_FAMILIES["quadratic"]
    s = noise_scale(fam)
    assert s == noise_scale(fam)  # fixed stream: deterministic
    # max over F1 tasks is close to 2.5 * 400 + 2 * 20 + 2 = 1042; F2 (a up to 3.5) never enters
    assert 900.0 < s < 1045.0


def test_same_rng_seed_gives_same_draws(tasks):
    p = get_protocol("strict")
    a = p.draw(tasks, 3, np.random.default_rng(42), 1.0)
    b = p.draw(tasks, 3, np.random.default_rng(42), 1.0)
    c = p.draw(tasks, 3, np.random.default_rng(43), 1.0)
    for f in ("ctx_x", "ctx_y", "qry_x", "qry_y"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        assert not np.array_equal(getattr(a, f), getattr(c, f))


def test_observation_subset(tasks):
    obs = get_protocol("paper").draw(tasks, 2, np.random.default_rng(0))
    sub = obs.subset(np.array([1, 4]))
    assert len(sub) == 2
    np.testing.assert_array_equal(sub.ctx_x, obs.ctx_x[[1, 4]])
    np.testing.assert_array_equal(sub.task, [0, 2])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_context=1, n_query=4),
        dict(n_context=4, n_query=0),
        dict(n_context=4, n_query=4, context_span=(0.5, 0.5)),
        dict(n_context=4, n_query=4, query_span=(0.2, 1.2)),
        dict(n_context=4, n_query=4, noise=-0.1),
    ],
)
def test_invalid_protocols_are_rejected(kwargs):
    with pytest.raises(TaskextrapError):
        ObservationProtocol("bad", **kwargs)
