"""Gamma at any library size (issue 65): a ``bounded`` Gamma (the parameter regime's) pre-trains
on a bounded sample of points per step and fits its PCA on a bounded sample of contexts beyond
their caps; below them, and for an unbounded Gamma (the discrete regimes') at any size, the
full-batch probe and the full PCA, bit for bit."""

import numpy as np
import pytest
import torch

from taskextrap.embed import ProxyEmbedding
from taskextrap.embed import estimators as E
from taskextrap.embed.probe import init_probe, probe_loss
from taskextrap.seeding import torch_generator


def _points(n=600, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g) * 2 - 1
    return x, torch.sin(3 * x)


def _full_batch(x, y, width, steps, seed):
    """The pre-training as it was before the cap: every point, every step."""
    p = {k: v.requires_grad_() for k, v in init_probe(width, torch_generator(seed, "probe"), xavier=True).items()}
    opt = torch.optim.Adam(p.values(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        probe_loss(p, x, y).backward()
        opt.step()
    return {k: v.detach() for k, v in p.items()}


def test_pretraining_below_the_cap_is_the_full_batch_fit_bit_for_bit():
    x, y = _points()
    ref = _full_batch(x, y, 8, 6, 3)
    for most in (None, len(x), 10 * len(x)):  # unbounded, or a cap at or above the points
        got = E._pretrain(x, y, 8, 6, 3, most)
        assert all(torch.equal(got[k], ref[k]) for k in ref)


def test_pretraining_beyond_the_cap_reads_a_sample_per_step(monkeypatch):
    x, y = _points()
    seen = []
    real = E.probe_loss
    monkeypatch.setattr(E, "probe_loss", lambda p, a, b: (seen.append(len(a)), real(p, a, b))[1])
    a = E._pretrain(x, y, 8, 20, 3, 64)  # 20 steps: more than one block of sampled batches
    assert seen == [64] * 20
    b = E._pretrain(x, y, 8, 20, 3, 64)
    assert all(torch.equal(a[k], b[k]) for k in a)  # seeded: the same probe again
    full = _full_batch(x, y, 8, 20, 3)
    assert not all(torch.equal(a[k], full[k]) for k in a)  # not the full batch


@pytest.fixture(scope="module")
def contexts():
    g = np.random.default_rng(0)
    x = np.sort(g.uniform(-1, 1, (90, 6)), axis=1)
    return x, np.sin(3 * x + g.uniform(0, 3, (90, 1)))


def test_pca_beyond_the_cap_is_fitted_on_a_sample_and_projects_in_blocks(contexts, monkeypatch):
    x, y = contexts
    full = ProxyEmbedding("gradient", dim=4, width=8, pretrain_steps=3, bounded=True).fit(x, y)
    monkeypatch.setattr(E, "PCA_ROWS", 32)
    capped = ProxyEmbedding("gradient", dim=4, width=8, pretrain_steps=3, bounded=True).fit(x, y)
    unbounded = ProxyEmbedding("gradient", dim=4, width=8, pretrain_steps=3).fit(x, y)  # the discrete regimes'
    assert capped.pca_.n_samples_ == 32 and full.pca_.n_samples_ == 90 and unbounded.pca_.n_samples_ == 90
    # the projection in blocks of 32 is the one-call projection, row for row (to rounding)
    whole = capped.pca_.transform(capped.raw(x, y))
    np.testing.assert_allclose(capped.project(x, y), whole, rtol=1e-10, atol=1e-12)
    # a sample of the contexts spans nearly the same leading directions as all of them
    cos = np.abs(np.sum(capped.pca_.components_[0] * full.pca_.components_[0]))
    assert cos > 0.9


def test_a_bounded_gamma_below_the_caps_is_the_unbounded_one(contexts, monkeypatch):
    from sklearn.decomposition import PCA

    x, y = contexts
    plain = ProxyEmbedding("fisher", dim=4, width=8, pretrain_steps=3).fit(x, y)
    monkeypatch.setattr(E, "PCA_ROWS", 90)  # exactly at the cap: all rows, one call
    bounded = ProxyEmbedding("fisher", dim=4, width=8, pretrain_steps=3, bounded=True).fit(x, y)
    np.testing.assert_array_equal(bounded.transform(x, y), plain.transform(x, y))
    direct = PCA(n_components=4, random_state=0).fit(bounded.raw(x, y))  # the PCA as it was always fitted
    np.testing.assert_array_equal(bounded.pca_.components_, direct.components_)
