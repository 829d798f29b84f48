"""Proxy embedding Gamma: unit vectors of the requested dimension, deterministic, per-context."""

import numpy as np
import pytest

from taskextrap.embed import EMBEDDINGS, ProxyEmbedding, mean_per_task
from taskextrap.errors import TaskextrapError
from taskextrap.scaling import FamilyScaler
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol

FAST = dict(width=16, pretrain_steps=30, adapt_steps=5)


@pytest.fixture(scope="module")
def data():
    """Scaled library contexts (paper protocol) of a small quadratic library."""
    fam = PARAMETER_FAMILIES["quadratic"]
    lib = TaskSet.sample(fam, {"F1_1": 15, "F1_2": 15}, np.random.default_rng(0))
    obs = get_protocol("paper").draw(lib, 2, np.random.default_rng(1))
    sc = FamilyScaler.fit(lib)
    return sc.x(obs.ctx_x), sc.y(obs.ctx_y), obs.params


def test_three_estimators_are_offered():
    assert set(EMBEDDINGS) == {"gradient", "adapted", "fisher"}


@pytest.mark.parametrize("method", ["gradient", "adapted", "fisher"])
def test_embedding_is_unit_norm_dim16_and_deterministic(method, data):
    x, y, params = data
    emb = ProxyEmbedding(method, dim=16, seed=3, **FAST).fit(x, y, params)
    z = emb.transform(x, y)
    assert z.shape == (len(x), 16)
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-9)
    # same seed, same data -> the same numbers
    z2 = ProxyEmbedding(method, dim=16, seed=3, **FAST).fit(x, y, params).transform(x, y)
    np.testing.assert_array_equal(z, z2)
    # transform is a pure function of its input
    np.testing.assert_array_equal(emb.transform(x, y), z)
    # different tasks get different embeddings
    assert np.linalg.norm(z[0] - z[-1]) > 1e-3


@pytest.mark.parametrize("method", ["gradient", "adapted", "fisher"])
def test_embedding_dim_is_capped_by_the_number_of_samples(method, data):
    x, y, params = data
    emb = ProxyEmbedding(method, dim=16, seed=0, **FAST).fit(x[:6], y[:6], params[:6])
    z = emb.transform(x, y)
    assert z.shape == (len(x), 6)
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-9)


@pytest.mark.parametrize("method", ["gradient", "adapted", "fisher"])
def test_embedding_of_a_context_does_not_depend_on_the_rest_of_the_batch(method, data):
    x, y, params = data
    emb = ProxyEmbedding(method, dim=16, seed=0, **FAST).fit(x, y, params)
    z_batch = emb.transform(x, y)
    z_alone = emb.transform(x[5:6], y[5:6])
    np.testing.assert_allclose(z_alone[0], z_batch[5], atol=1e-5)
    # changing one context value changes that embedding only
    y2 = y.copy()
    y2[5, 3] += 2.0
    z2 = emb.transform(x, y2)
    assert np.linalg.norm(z2[5] - z_batch[5]) > 1e-4
    np.testing.assert_allclose(np.delete(z2, 5, axis=0), np.delete(z_batch, 5, axis=0), atol=1e-5)


def test_different_seeds_give_different_gradient_embeddings(data):
    x, y, params = data
    a = ProxyEmbedding("gradient", seed=0, **FAST).fit(x, y, params).transform(x, y)
    b = ProxyEmbedding("gradient", seed=1, **FAST).fit(x, y, params).transform(x, y)
    assert not np.allclose(a, b)


def test_unknown_method_and_unfitted_use_raise(data):
    x, y, _ = data
    with pytest.raises(TaskextrapError, match="unknown embedding"):
        ProxyEmbedding("task2vec")
    with pytest.raises(TaskextrapError, match="not fitted"):
        ProxyEmbedding("gradient").transform(x, y)


def test_mean_per_task_averages_draws_and_renormalises():
    z = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]])
    out = mean_per_task(z, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(out, [[np.sqrt(0.5), np.sqrt(0.5)], [0.6, 0.8]])


def test_check_embedding():
    from taskextrap.embed import check_embedding
    from taskextrap.errors import TaskextrapError

    assert check_embedding("adapted") == "adapted"
    with pytest.raises(TaskextrapError, match="unknown embedding 'pca'"):
        check_embedding("pca")
