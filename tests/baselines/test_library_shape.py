"""The library-shape peers: the library's mean curve plus an offset, the k nearest curves plus
their offsets, and a functional-PCA regression on the library's principal curves."""

import numpy as np
import pytest

from taskextrap.baselines.context import LibraryBestFit
from taskextrap.baselines.library_shape import LibraryFPCA, LibraryMean, LibraryNearest
from taskextrap.errors import TaskextrapError
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol

FAM = PARAMETER_FAMILIES["quadratic"]  # linear in its three parameters: three principal curves span it


@pytest.fixture(scope="module")
def library():
    return TaskSet.sample(FAM, {"F1_1": 30, "F1_2": 30}, np.random.default_rng(0))


@pytest.fixture(scope="module")
def far():
    """Targets of the held-out region, observed by the paper protocol."""
    g = np.random.default_rng(1)
    return get_protocol("paper").draw(TaskSet.sample(FAM, {"F2": 12}, g), 1, g)


def test_the_nearest_curve_alone_is_library_best_fit(library, far):
    one = LibraryNearest(k=1).fit(library).predict(far.ctx_x, far.ctx_y, far.qry_x)
    np.testing.assert_array_equal(one, LibraryBestFit().fit(library).predict(far.ctx_x, far.ctx_y, far.qry_x))
    five = LibraryNearest(k=5).fit(library).predict(far.ctx_x, far.ctx_y, far.qry_x)
    assert not np.array_equal(one, five)


def test_a_shifted_mean_curve_is_predicted_exactly(library):
    x = np.tile(np.linspace(*FAM.domain, 12), (3, 1))
    mean = library.values(np.repeat(x[:1], len(library), axis=0)).mean(axis=0)
    y = mean[None, :] + np.array([[-3.0], [0.0], [7.5]])
    pred = LibraryMean().fit(library).predict(x[:, :6], y[:, :6], x[:, 6:])
    np.testing.assert_allclose(pred, y[:, 6:], rtol=1e-10, atol=1e-9)


def test_fpca_recovers_a_far_task_of_a_family_its_principal_curves_span(library, far):
    mse = lambda m: float(((m.fit(library).predict(far.ctx_x, far.ctx_y, far.qry_x) - far.qry_y) ** 2).mean())  # noqa: E731
    assert mse(LibraryFPCA(n_components=3)) < 1e-3 * mse(LibraryFPCA(n_components=1))
    assert mse(LibraryFPCA(n_components=3)) < 1e-3 * mse(LibraryNearest())


@pytest.mark.parametrize("method", [LibraryMean(), LibraryNearest(), LibraryFPCA()], ids=repr)
def test_the_order_of_the_context_points_does_not_matter(library, far, method):
    order = np.random.default_rng(2).permutation(far.ctx_x.shape[1])
    method.fit(library)
    np.testing.assert_allclose(
        method.predict(far.ctx_x[:, order], far.ctx_y[:, order], far.qry_x),
        method.predict(far.ctx_x, far.ctx_y, far.qry_x),
        rtol=1e-9,
        atol=1e-9,
    )


@pytest.mark.parametrize(
    "cls,kwargs,match",
    [
        (LibraryNearest, {"k": 0}, "k must be"),
        (LibraryMean, {"chunk": 0}, "chunk must be"),
        (LibraryFPCA, {"n_components": 0}, "n_components must be"),
        (LibraryFPCA, {"ridge": -1.0}, "ridge must be"),
        (LibraryFPCA, {"grid": 2}, "grid must be"),
    ],
)
def test_bad_arguments_are_one_line(cls, kwargs, match):
    with pytest.raises(TaskextrapError, match=match) as e:
        cls(**kwargs)
    assert "\n" not in str(e.value)


def test_every_k_of_a_dev_grid_from_one_ordering_is_a_fit_per_k(library, far):
    """library-knn's grid_predictions gives every k the numbers of its own fit, to the bit, from
    one fit and one ordering of the library; a grid of other settings falls back to a fit each."""
    settings = [{"k": k} for k in LibraryNearest.dev_grid["k"]] + [{"k": 500}]
    grid = LibraryNearest.grid_predictions(LibraryNearest, settings, library, far.ctx_x, far.ctx_y, far.qry_x)
    for p, pred in zip(settings, grid, strict=True):
        alone = LibraryNearest(**p).fit(library).predict(far.ctx_x, far.ctx_y, far.qry_x)
        np.testing.assert_array_equal(pred, alone)
    chunked = [{"k": 3, "chunk": 5}]
    (pred,) = LibraryNearest.grid_predictions(LibraryNearest, chunked, library, far.ctx_x, far.ctx_y, far.qry_x)
    np.testing.assert_array_equal(pred, grid[2])
    with pytest.raises(TaskextrapError, match="k"):
        LibraryNearest.grid_predictions(LibraryNearest, [{"k": 0}], library, far.ctx_x, far.ctx_y, far.qry_x)
