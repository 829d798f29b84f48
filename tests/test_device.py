"""``device`` plumbing, proven on a machine without a GPU.

While an estimator asked for ``device="cpu"`` explicitly fits and predicts, torch's *default*
device is "meta" (tensors without data) and a function mode records the device of every tensor
any torch function returns. Code that creates a tensor without naming its device gets a meta
tensor: the recorder names it (or the first computation with it fails). So a forgotten device
anywhere in fitting, embedding, prediction or search fails here, as it would put a tensor on
the wrong device of a GPU machine.
"""

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.validation import check_device

TINY = TrainConfig(steps=4, batch=64, eval_every=2)


class DeviceRecorder(TorchFunctionMode):
    """Records ``device.type`` of every tensor a torch function returns."""

    def __init__(self):
        super().__init__()
        self.devices: dict[str, str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "cpu":
                self.devices.setdefault(t.device.type, getattr(func, "__name__", str(func)))
        return out


def _on_meta_default(run):
    """``run()`` with torch's default device "meta" and every returned tensor's device recorded."""
    recorder = DeviceRecorder()
    with torch.device("meta"), recorder:
        out = run()
    assert recorder.devices == {}, f"tensors created off the asked-for device: {recorder.devices}"
    return out


def test_the_recorder_catches_a_tensor_made_without_its_device():
    recorder = DeviceRecorder()
    with torch.device("meta"), recorder:
        torch.zeros(3)  # no device named: lands on the default
    assert recorder.devices == {"meta": "zeros"}


def _parameter_models(quad_library, quad_targets):
    from taskextrap.baselines.inductive import INDUCTIVE_KINDS, InductiveBaseline
    from taskextrap.baselines.oracles import TransductiveOracle
    from taskextrap.estimators.parameter import RTE

    _, obs = quad_targets
    common = dict(n_pairs=200, train=TINY, seed=0, device="cpu")
    rte = RTE(search="proxy", **common).fit(quad_library)  # Strategy A, which the inductive baselines read
    objective = RTE(search="objective", retrieve=2, **common).fit(quad_library, embedded=rte)
    oracle = TransductiveOracle(**common).fit(quad_library)
    out = [
        rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x),
        objective.predict(obs.ctx_x, obs.ctx_y, obs.qry_x),
        oracle.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, oracle.decompose_truth(obs.ctx_x, obs.ctx_y, obs.params)),
    ]
    for kind in INDUCTIVE_KINDS:
        out.append(InductiveBaseline(kind, rte).fit().predict(obs.ctx_x, obs.ctx_y, obs.qry_x, theta=obs.params))
    return out


def test_parameter_regime_creates_every_tensor_on_the_asked_device(quad_library, quad_targets):
    on_meta = _on_meta_default(lambda: _parameter_models(quad_library, quad_targets))
    plain = _parameter_models(quad_library, quad_targets)
    for a, b in zip(on_meta, plain, strict=True):
        np.testing.assert_array_equal(a, b)  # the device plumbing changes nothing on the CPU


@pytest.mark.parametrize("embedding", ["adapted", "fisher"])
def test_length_regime_creates_every_tensor_on_the_asked_device(embedding):
    from taskextrap.baselines.discrete import DiscreteInductive
    from taskextrap.experiments.length import make_library, make_targets
    from taskextrap.estimators.length import LengthRTE
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER
    from taskextrap.tasks.regimes import get_protocol

    library = make_library(POLYNOMIAL_LADDER, 6)
    protocol = get_protocol("paper", "length")
    _, obs = make_targets(library, protocol, 3, 1, 0)

    def run():
        rte = LengthRTE(
            protocol=protocol, embedding=embedding, n_pairs=64, train=TINY, decomposer_train=TINY, seed=0, device="cpu"
        ).fit(library)
        return rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), DiscreteInductive(rte).fit().predict(
            obs.ctx_x, obs.ctx_y, obs.qry_x
        )

    _on_meta_default(run)


def test_depth3_composition_and_its_search_create_every_tensor_on_the_asked_device():
    from taskextrap.experiments.composition_depth3 import make_library, make_targets
    from taskextrap.estimators.composition_depth3 import Composition3RTE
    from taskextrap.tasks.regimes import get_protocol

    primitives = make_library(4)
    protocol = get_protocol("paper", "composition")
    rte_kw = dict(protocol=protocol, n_pairs=64, train=TINY, decomposer_train=TINY, seed=0, device="cpu")
    _, obs = make_targets(primitives, protocol, 2, 1, test_seed=0)

    def run():
        rte = Composition3RTE(**rte_kw).fit(primitives)
        return rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)

    _on_meta_default(run)


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", 3, "cpu:1"])
def test_a_bad_device_is_one_line(bad):
    with pytest.raises(TaskextrapError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
        check_device(bad)


def test_a_missing_gpu_is_one_line_from_the_estimator_and_the_command_line(make_rte, capsys, tmp_path):
    from taskextrap.cli import main

    with pytest.raises(TaskextrapError, match="no such CUDA device"):
        make_rte(device=f"cuda:{torch.cuda.device_count()}")  # one past the last (every machine lacks it)
    with pytest.raises(SystemExit) as e:
        main(
            [
                "reproduce",
                "parameter",
                "--profile",
                "tiny",
                "--out",
                str(tmp_path),
                "--device",
                f"cuda:{torch.cuda.device_count()}",
            ]
        )
    err = capsys.readouterr().err.strip()
    assert e.value.code != 0 and len(err.splitlines()) == 1 and "--device" in err and "no such CUDA device" in err


def test_every_experiment_takes_device_and_keys_its_units_by_it(tmp_path):
    from taskextrap.experiments.registry import EXPERIMENTS, RunOptions
    from taskextrap.experiments.catalogue import all_experiments
    from taskextrap.experiments.runner import plan_run

    assert all("device" in EXPERIMENTS[name].options for name in all_experiments())
    for name in (
        "parameter",
        "parameter-ablations",
        "parameter-multistep",
        "length",
        "composition",
        "composition-depth3",
        "composition-em",
        "projectile",
        "manifolds",
    ):
        family = {"parameter": "exp", "parameter-ablations": "exp", "parameter-multistep": "exp"}.get(name)
        run = plan_run(name, RunOptions(profile="tiny", out=tmp_path, family=family, device="cpu"), make_dirs=False)
        for unit in run.plan.units:  # the device is in the key: a GPU's units are never a CPU's
            assert unit.config.get("device") == "cpu" or "device='cpu'" in unit.config.get("estimator", ""), name


def test_composition_and_projectile_create_every_tensor_on_the_asked_device():
    from taskextrap.estimators.composition import CompositionRTE
    from taskextrap.experiments.composition import make_library, make_targets
    from taskextrap.experiments.projectile import run_seed
    from taskextrap.tasks.regimes import get_protocol

    primitives = make_library(4)
    protocol = get_protocol("paper", "composition")
    _, obs = make_targets(primitives, protocol, 2, 1, test_seed=0)

    def run():
        rte = CompositionRTE(
            protocol=protocol, n_pairs=64, train=TINY, decomposer_train=TINY, seed=0, device="cpu"
        ).fit(primitives)
        return rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), run_seed(3, 0, device="cpu")

    _on_meta_default(run)
