"""Write small fitted models of every library type with this checkout's taskextrap, and what
they predict, so that a later taskextrap can be checked to load them and predict the same.

    PYTHONPATH=OLD_CHECKOUT/src python scripts/saved_fixtures.py tests/data/saved-models

Each model goes to ``OUT/<name>/`` (``config.json`` and ``model.safetensors``, as
``save_pretrained`` writes them) beside ``expected.safetensors``: a context, its queries and the
predicted mean and standard deviation. The models (tiny fits, seed 0):

- ``rte``: ``RTE`` on a built-in family's ``TaskSet``;
- ``rte-observed``: ``RTE`` on an observed library (its points saved with it);
- ``length``: ``LengthRTE`` on a ``LadderSet``;
- ``composition``: ``CompositionRTE`` on a ``PrimitiveSet`` of the built-in families;
- ``composition-curves``: ``CompositionRTE`` on a ``PrimitiveSet`` known by its curves alone.

tests/estimators/test_saving.py loads the committed ones (written at 2d7ed56, before library
types saved themselves) and asks for the same numbers to the bit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from taskextrap.estimators.composition import CompositionRTE
from taskextrap.estimators.length import LengthRTE
from taskextrap.estimators.parameter import RTE
from taskextrap.files import write_state_atomic
from taskextrap.operators.train import TrainConfig
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet
from taskextrap.tasks.observed import ObservedTasks
from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PrimitiveSet

TRAIN = TrainConfig(steps=8, batch=256, eval_every=4)
DECOMPOSER = TrainConfig(steps=8, batch=64, eval_every=4)


def _parameter(observed: bool):
    fam = PARAMETER_FAMILIES["quadratic"]
    library = TaskSet.sample(fam, {"F1_1": 8, "F1_2": 8}, rng(0, "fixture-library"))
    if observed:
        x = np.sort(np.random.default_rng(0).uniform(*fam.domain, size=(len(library), 12)), axis=1)
        x[:, 0], x[:, -1] = fam.domain
        data = ObservedTasks.from_columns(
            {"task": np.repeat(np.arange(len(library)), 12), "x": x.reshape(-1), "y": library.values(x).reshape(-1)}
        )
        library = data.library(interpolant="linear")
    model = RTE(n_pairs=200, train=TRAIN, seed=0, verbose=False).fit(library)
    obs = get_protocol("paper").draw(TaskSet.sample(fam, {"F2": 4}, rng(0, "fixture-targets")), 1, rng(1))
    return model, obs


def _length():
    library = LadderSet.sample_library(POLYNOMIAL_LADDER, 6, rng(0, "fixture-ladder"))
    g = np.random.default_rng(5)
    targets = LadderSet.extend(library, np.flatnonzero(library.level == 8)[:3], g)
    model = LengthRTE(n_pairs=200, k=4, train=TRAIN, decomposer_train=DECOMPOSER, seed=0, verbose=False)
    model.fit(library)
    return model, model.protocol_.draw(targets, 2, g)


def _composition(by_curves: bool):
    prims = PrimitiveSet.sample(n_per_family=8, rng=rng(0, "fixture-prims"))
    if by_curves:
        prims = PrimitiveSet.from_curves(["poly", "sin", "tanh"], prims.family, prims.grid, prims.curves)
    model = CompositionRTE(n_pairs=150, k=3, train=TRAIN, decomposer_train=DECOMPOSER, seed=0, verbose=False)
    model.fit(prims)
    targets = CompositionSet.sample(prims, PAPER_SPLIT.test, 4, np.random.default_rng(3))
    return model, model.protocol_.draw(targets, 1, np.random.default_rng(4))


MODELS = {
    "rte": lambda: _parameter(observed=False),
    "rte-observed": lambda: _parameter(observed=True),
    "length": _length,
    "composition": lambda: _composition(by_curves=False),
    "composition-curves": lambda: _composition(by_curves=True),
}


def main(out: Path) -> None:
    """Fit, save and predict every model of :data:`MODELS` into ``out``."""
    for name, make in MODELS.items():
        model, obs = make()
        folder = model.save_pretrained(out / name)
        mean, std = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        arrays = {"ctx_x": obs.ctx_x, "ctx_y": obs.ctx_y, "qry_x": obs.qry_x, "mean": mean, "std": std}
        write_state_atomic(folder / "expected.safetensors", arrays, {"class": type(model).__name__})
        print(f"{folder}: {type(model).__name__}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
