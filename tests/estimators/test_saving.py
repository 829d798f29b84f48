"""save_pretrained / from_pretrained: a fitted estimator from its folder alone, the same numbers."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from taskextrap.baselines.oracles import TransductiveOracle
from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.estimators.composition_depth3 import Composition3RTE
from taskextrap.estimators.composition import CompositionRTE
from taskextrap.estimators.composition_em import EMCompositionRTE
from taskextrap.estimators.length import LengthRTE
from taskextrap.estimators.multistep import ChainedRTE
from taskextrap.estimators.parameter import RTE
from taskextrap.estimators.saving import CONFIG, WEIGHTS, decode, encode
from taskextrap.files import read_state, write_state_atomic
from taskextrap.operators.train import TrainConfig
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, ObservationProtocol, TaskSet, get_protocol

TRAIN = TrainConfig(steps=8, batch=256, eval_every=4)
FAM = PARAMETER_FAMILIES["quadratic"]


@pytest.fixture(scope="module")
def library():
    return TaskSet.sample(FAM, {"F1_1": 8, "F1_2": 8}, rng(0, "saving-library"))


@pytest.fixture(scope="module")
def obs():
    return get_protocol("paper").draw(TaskSet.sample(FAM, {"F2": 4}, rng(0, "saving-targets")), 1, rng(1))


@pytest.fixture(scope="module")
def fitted(library):
    return RTE(n_pairs=200, train=TRAIN, seed=0, phi_scales=(1.0, 2.0), verbose=False).fit(library)


def _one_line(excinfo):
    assert "\n" not in str(excinfo.value)


def _numbers(model, obs):
    mean, std = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    d = model.decompose(obs.ctx_x, obs.ctx_y)
    return mean, std, d.anchors, d.phi, d.score


def test_a_saved_rte_loads_with_the_same_predictions_intervals_and_decompositions(fitted, obs, tmp_path):
    folder = fitted.save_pretrained(tmp_path / "model")
    assert sorted(p.name for p in folder.iterdir()) == [CONFIG, WEIGHTS]
    config = json.loads((folder / CONFIG).read_text())
    assert config["class"] == "RTE" and config["library"]["family"] == {"builtin": "quadratic", "table": "parameter"}
    assert config["params"]["phi_scales"] == {"tuple": [1.0, 2.0]}
    loaded = RTE.from_pretrained(folder)
    assert loaded == fitted and repr(loaded) == repr(fitted) and loaded.calibrated_scale() == fitted.calibrated_scale()
    for a, b in zip(_numbers(loaded, obs), _numbers(fitted, obs), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.library_.params, fitted.library_.params)


@pytest.mark.slow  # a fresh interpreter loads the saved folder: end to end, run by make test-slow
def test_a_fresh_process_loads_the_folder_alone(fitted, obs, tmp_path):
    folder = fitted.save_pretrained(tmp_path / "model")
    np.savez(tmp_path / "ctx.npz", x=obs.ctx_x, y=obs.ctx_y, q=obs.qry_x)
    script = textwrap.dedent(
        f"""
        import numpy as np
        from taskextrap import RTE
        d = np.load({str(tmp_path / "ctx.npz")!r})
        model = RTE.from_pretrained({str(folder)!r})
        mean, std = model.predict(d["x"], d["y"], d["q"], return_std=True)
        np.savez({str(tmp_path / "out.npz")!r}, mean=mean, std=std)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    out = np.load(tmp_path / "out.npz")
    mean, std = fitted.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    np.testing.assert_array_equal(out["mean"], mean)
    np.testing.assert_array_equal(out["std"], std)


def test_a_chained_rte_keeps_its_step_measures(library, obs, tmp_path):
    chained = ChainedRTE(n_pairs=200, train=TRAIN, seed=0, steps=2, verbose=False).fit(library)
    loaded = ChainedRTE.from_pretrained(chained.save_pretrained(tmp_path / "chain"))
    for key, value in chained.step_measures_.items():
        np.testing.assert_array_equal(loaded.step_measures_[key], value)
    np.testing.assert_array_equal(
        loaded.predict(obs.ctx_x, obs.ctx_y, obs.qry_x), chained.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
    )
    with pytest.raises(TaskextrapError, match="holds a ChainedRTE, not a TransductiveOracle") as e:
        TransductiveOracle.from_pretrained(tmp_path / "chain")
    _one_line(e)
    assert type(RTE.from_pretrained(tmp_path / "chain")) is ChainedRTE  # a subclass loads through its base


def test_a_user_family_is_found_again_by_module_attr_and_a_changed_one_warns(tmp_path, monkeypatch, obs):
    module = tmp_path / "savedfam.py"
    source = """
        import numpy as np
        from taskextrap.tasks import ParametricFamily
        bump = ParametricFamily(
            name="bump", fn=lambda x, A, w: A * np.exp(-((w * x) ** 2)) + {c} * x, domain=(-3.0, 3.0),
            fixed={{"A": (0.5, 1.5)}}, shift="w", regions={{"F1_1": (0.5, 0.8), "F1_2": (0.8, 1.1), "F2": (1.1, 1.4)}})
        """
    module.write_text(textwrap.dedent(source.format(c="0.1")))
    monkeypatch.syspath_prepend(str(tmp_path))
    import savedfam

    library = TaskSet.sample(savedfam.bump, {"F1_1": 8, "F1_2": 8}, rng(0, "saving-user"))
    model = RTE(n_pairs=200, train=TRAIN, seed=0, verbose=False).fit(library)
    folder = model.save_pretrained(tmp_path / "user")
    spec = json.loads((folder / CONFIG).read_text())["library"]["family"]
    assert spec["module_attr"] == "savedfam:bump" and len(spec["code_hash"]) == 16
    targets = get_protocol("paper").draw(TaskSet.sample(savedfam.bump, {"F2": 3}, rng(0, "saving-user-t")), 1, rng(1))
    loaded = RTE.from_pretrained(folder, trust_code=True)
    np.testing.assert_array_equal(
        loaded.predict(targets.ctx_x, targets.ctx_y, targets.qry_x),
        model.predict(targets.ctx_x, targets.ctx_y, targets.qry_x),
    )
    module.write_text(textwrap.dedent(source.format(c="0.2")))  # the user edits the formula
    monkeypatch.delitem(sys.modules, "savedfam")
    with pytest.warns(TaskextrapWarning, match="savedfam:bump changed since the model was saved"):
        RTE.from_pretrained(folder, trust_code=True)


def test_a_folder_naming_user_code_imports_nothing_without_trust_code(fitted, tmp_path, monkeypatch):
    """A model folder is data: a config naming a module (here one beside the folder, on the path as
    the README suggests) is refused in one line before anything is imported, and loads with
    ``trust_code=True``."""
    folder = fitted.save_pretrained(tmp_path / "model")
    (tmp_path / "sidecar.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('ran').write_text('imported')\n"
        "from taskextrap.tasks import PARAMETER_FAMILIES\nfam = PARAMETER_FAMILIES['quadratic']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _edit_config(folder, library={**json.loads((folder / CONFIG).read_text())["library"],
                                  "family": {"module_attr": "sidecar:fam", "code_hash": "0" * 16}})  # fmt: skip
    for load in (lambda: RTE.from_pretrained(folder), lambda: RTE.from_pretrained(folder, library=fitted.library_)):
        with pytest.raises(TaskextrapError, match=r"library is user code \(sidecar:fam\).*trust_code=True") as e:
            load()
        _one_line(e)
        assert "sidecar" not in sys.modules and not (tmp_path / "ran").exists()
    with pytest.warns(TaskextrapWarning, match="sidecar:fam changed since the model was saved"):
        assert RTE.from_pretrained(folder, trust_code=True).library_.family is fitted.library_.family
    assert (tmp_path / "ran").exists()  # trusted: imported, and its code ran


def test_what_cannot_be_saved_or_loaded_is_one_line(fitted, library, tmp_path):
    cases = [
        (lambda: RTE(n_pairs=200).save_pretrained(tmp_path / "x"), "RTE is not fitted"),
        (lambda: Composition3RTE().save_pretrained(tmp_path / "x"), "Composition3RTE is not fitted"),
        (lambda: RTE.from_pretrained(tmp_path / "nothing"), "holds no saved model: config.json is missing"),
    ]
    (tmp_path / "file").write_text("x")
    cases.append((lambda: fitted.save_pretrained(tmp_path / "file"), "it is a file, not a folder"))
    for call, match in cases:
        with pytest.raises(TaskextrapError, match=match) as e:
            call()
        _one_line(e)


def _saved(fitted, tmp_path, name):
    return fitted.save_pretrained(tmp_path / name)


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda f: (f / WEIGHTS).write_bytes((f / WEIGHTS).read_bytes()[:1000]), "not a readable state file"),
        (lambda f: (f / WEIGHTS).unlink(), "file not found"),
        (lambda f: (f / CONFIG).write_text("{not json"), "invalid JSON"),
        (lambda f: _edit_config(f, format=2), "of format 2; this taskextrap reads format 1"),
        (lambda f: _edit_config(f, **{"class": "Pickle"}), "class 'Pickle' cannot be loaded"),
        (lambda f: _edit_config(f, params={"nope": 1}), "does not fit RTE"),
        (lambda f: _drop_array(f, "psi.net.0.0.weight"), "is incomplete or damaged: .*0.0.weight"),
        (lambda f: _drop_array(f, "library.params"), "is incomplete: 'library.params' is missing"),
    ],
)
def test_a_damaged_folder_is_one_line(fitted, tmp_path, damage, match):
    folder = _saved(fitted, tmp_path, "model")
    damage(folder)
    with pytest.raises(TaskextrapError, match=match) as e:
        RTE.from_pretrained(folder)
    _one_line(e)


def _edit_config(folder, **changes):
    config = json.loads((folder / CONFIG).read_text())
    (folder / CONFIG).write_text(json.dumps({**config, **changes}))


def _drop_array(folder, key):
    arrays, meta = read_state(folder / WEIGHTS)
    del arrays[key]
    write_state_atomic(folder / WEIGHTS, arrays, meta)


def test_other_taskextrap_code_warns_once(fitted, tmp_path, monkeypatch):
    folder = _saved(fitted, tmp_path, "model")
    monkeypatch.setattr("taskextrap.provenance.source_hash", lambda: "0000000000000000")
    with pytest.warns(TaskextrapWarning, match="saved by other taskextrap code") as record:
        RTE.from_pretrained(folder)
    assert len(record) == 1 and "\n" not in str(record[0].message)


def test_arguments_keep_their_types_through_json():
    values = [
        None,
        3,
        0.5,
        "paper",
        (0.5, 1.0),
        [1, (2, 3)],
        {"a": (1,)},
        TrainConfig(steps=5),
        ObservationProtocol("mine", 6, 10, (0.0, 0.5), (0.5, 1.0), 0.01),
        np.float64(2.5),
    ]
    for value in values:
        back = decode(json.loads(json.dumps(encode(value))))
        assert back == value and type(back) is (float if isinstance(value, np.floating) else type(value))
    with pytest.raises(TaskextrapError, match="which a saved config cannot hold") as e:
        encode(object(), "RTE(x=...)")
    _one_line(e)
    with pytest.raises(TaskextrapError, match="not one this taskextrap writes"):
        decode({"type": "os.system", "fields": {}})


@pytest.mark.slow  # a fresh interpreter loads the saved folder: end to end, run by make test-slow
def test_a_saved_length_rte_loads_with_the_same_numbers_in_a_fresh_process(tmp_path):
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet

    library = LadderSet.sample_library(POLYNOMIAL_LADDER, 6, rng(0, "saving-ladder"))
    g = np.random.default_rng(5)
    targets = LadderSet.extend(library, np.flatnonzero(library.level == 8)[:3], g)
    dec = TrainConfig(steps=8, batch=64, eval_every=4)
    model = LengthRTE(n_pairs=200, k=4, train=TRAIN, decomposer_train=dec, seed=0, verbose=False).fit(library)
    obs = model.protocol_.draw(targets, 2, g)
    folder = model.save_pretrained(tmp_path / "length")
    assert json.loads((folder / CONFIG).read_text())["library"]["family"] == {
        "builtin": "polynomial",
        "table": "ladder",
    }
    np.savez(tmp_path / "ctx.npz", x=obs.ctx_x, y=obs.ctx_y, q=obs.qry_x)
    script = textwrap.dedent(
        f"""
        import numpy as np
        from taskextrap import LengthRTE
        d = np.load({str(tmp_path / "ctx.npz")!r})
        model = LengthRTE.from_pretrained({str(folder)!r})
        mean, std = model.predict(d["x"], d["y"], d["q"], return_std=True)
        dec = model.decompose(d["x"], d["y"])
        np.savez({str(tmp_path / "out.npz")!r}, mean=mean, std=std, anchors=dec.anchors, phi=dec.phi)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    out = np.load(tmp_path / "out.npz")
    mean, std = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
    d = model.decompose(obs.ctx_x, obs.ctx_y)
    for key, value in (("mean", mean), ("std", std), ("anchors", d.anchors), ("phi", d.phi)):
        np.testing.assert_array_equal(out[key], value)
    other = LadderSet.sample_library(POLYNOMIAL_LADDER, 7, rng(1, "saving-ladder"))
    arrays, meta = model.fitted_state()
    with pytest.raises(TaskextrapError, match="fitted on another library") as e:
        LengthRTE(n_pairs=200, k=4, train=TRAIN, decomposer_train=dec, seed=0, verbose=False).restore(
            other, arrays, meta
        )
    _one_line(e)


def test_a_saved_composition_rte_loads_its_primitives_and_the_same_numbers(tmp_path):
    from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PrimitiveSet

    prims = PrimitiveSet.sample(n_per_family=8, rng=rng(0, "saving-prims"))
    dec = TrainConfig(steps=8, batch=64, eval_every=4)
    model = CompositionRTE(n_pairs=150, k=3, train=TRAIN, decomposer_train=dec, seed=0, verbose=False).fit(prims)
    targets = CompositionSet.sample(prims, PAPER_SPLIT.test, 4, np.random.default_rng(3))
    obs = model.protocol_.draw(targets, 1, np.random.default_rng(4))
    folder = model.save_pretrained(tmp_path / "composition")
    families = json.loads((folder / CONFIG).read_text())["library"]["families"]
    assert [f["builtin"] for f in families] == ["poly", "sin", "tanh"]
    loaded = CompositionRTE.from_pretrained(folder)
    np.testing.assert_array_equal(loaded.primitives_.curves, prims.curves)
    for a, b in zip(_numbers(loaded, obs), _numbers(model, obs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_saved_composition3_rte_keeps_the_primitives_as_given_and_the_same_numbers(tmp_path):
    from taskextrap.estimators.composition_depth3 import Composition3RTE
    from taskextrap.tasks.chains import DEPTH3_FAMILIES, DEPTH3_GRID, PAPER_RECIPE_SPLIT, ChainSet
    from taskextrap.tasks.primitives import PrimitiveSet

    prims = PrimitiveSet.sample(DEPTH3_FAMILIES, 6, rng(0, "saving-depth3"), grid=DEPTH3_GRID)
    dec = TrainConfig(steps=6, batch=64, eval_every=3)
    model = Composition3RTE(n_pairs=80, k=3, keep=8, train=TrainConfig(steps=6, batch=256, eval_every=3),
                            decomposer_train=dec, seed=0, verbose=False).fit(prims)  # fmt: skip
    obs = model.protocol_.draw(ChainSet.sample(prims, PAPER_RECIPE_SPLIT.test, 3, np.random.default_rng(3)), 1,
                               np.random.default_rng(4))  # fmt: skip
    folder = model.save_pretrained(tmp_path / "depth3")
    loaded = Composition3RTE.from_pretrained(folder)
    assert "identity" not in loaded.library_.family_names  # saved as given, added again on load
    assert len(loaded.primitives_) == len(model.primitives_) == len(prims) + 1
    for a, b in zip(_numbers(loaded, obs), _numbers(model, obs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_saved_em_composition_rte_keeps_its_labels_history_and_numbers(tmp_path):
    from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PrimitiveSet

    prims = PrimitiveSet.sample(n_per_family=8, rng=rng(0, "saving-em"))
    dec = TrainConfig(steps=4, batch=64, eval_every=2)
    model = EMCompositionRTE(n_pairs=150, n_tasks=80, em_rounds=2, k=3, train=TRAIN, decomposer_train=dec,
                             seed=0, verbose=False).fit(prims)  # fmt: skip
    obs = model.protocol_.draw(CompositionSet.sample(prims, PAPER_SPLIT.test, 4, np.random.default_rng(3)), 1,
                               np.random.default_rng(4))  # fmt: skip
    loaded = EMCompositionRTE.from_pretrained(model.save_pretrained(tmp_path / "em"))
    for name in ("train", "val"):
        np.testing.assert_array_equal(loaded.sets_[name].labels, model.sets_[name].labels)
        np.testing.assert_array_equal(loaded.sets_[name].obs.ctx_x, model.sets_[name].obs.ctx_x)
    assert loaded.steps_ == model.steps_ and len(loaded.history_) == len(model.history_) == 2
    np.testing.assert_array_equal(loaded.history_[1]["exact"], model.history_[1]["exact"])
    for a, b in zip(_numbers(loaded, obs), _numbers(model, obs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_fit_saved_without_its_library_loads_onto_the_same_library_only(fitted, library, obs, tmp_path):
    from taskextrap.tasks.dev import dev_family

    folder = fitted.save_pretrained(tmp_path / "bare", library=False)
    config = json.loads((folder / CONFIG).read_text())
    assert config["library"]["kind"] == "supplied" and "library.params" not in read_state(folder / WEIGHTS)[0]
    with pytest.raises(TaskextrapError, match="saved without its library: pass from_pretrained"):
        RTE.from_pretrained(folder)
    loaded = RTE.from_pretrained(folder, library=library)
    assert loaded.library_ is library
    for a, b in zip(_numbers(loaded, obs), _numbers(fitted, obs), strict=True):
        np.testing.assert_array_equal(a, b)
    other = TaskSet(library.family, library.params[::-1], library.region[::-1])
    for f in (folder, fitted.save_pretrained(tmp_path / "whole")):
        with pytest.raises(TaskextrapError, match="library given is not the one"):
            RTE.from_pretrained(f, library=other)
    # a family no name finds again (a dev split's) can still be saved for a loader that has it
    dev = dev_family(library.family)
    dev_lib = TaskSet.sample(dev, {r: 8 for r in dev.train_regions}, rng(0, "saving-dev"))
    model = RTE(n_pairs=200, train=TRAIN, seed=0, verbose=False).fit(dev_lib)
    assert (
        RTE.from_pretrained(model.save_pretrained(tmp_path / "dev", library=False), library=dev_lib).library_ is dev_lib
    )


def test_an_observed_library_is_saved_with_its_points_and_read_the_same(tmp_path, obs):
    from taskextrap.tasks.observed import ObservedTasks

    fam = PARAMETER_FAMILIES["quadratic"]
    tasks = TaskSet.sample(fam, {"F1_1": 8, "F1_2": 8}, rng(0, "saving-observed"))
    x = np.sort(np.random.default_rng(0).uniform(*fam.domain, size=(len(tasks), 12)), axis=1)
    x[:, 0], x[:, -1] = fam.domain
    data = ObservedTasks.from_columns(
        {"task": np.repeat(np.arange(len(tasks)), 12), "x": x.reshape(-1), "y": tasks.values(x).reshape(-1)}
    )
    model = RTE(n_pairs=200, train=TRAIN, seed=0, verbose=False).fit(data.library(interpolant="linear"))
    loaded = RTE.from_pretrained(model.save_pretrained(tmp_path / "observed"))
    assert loaded.library_.family.interpolants.kind == "linear"
    np.testing.assert_array_equal(loaded.library_.family.tasks.y, data.y)
    for a, b in zip(_numbers(loaded, obs), _numbers(model, obs), strict=True):
        np.testing.assert_array_equal(a, b)


SAVED_BEFORE = Path(__file__).resolve().parents[1] / "data" / "saved-models"  # scripts/saved_fixtures.py at 2d7ed56


@pytest.mark.parametrize("name", ["rte", "rte-observed", "length", "composition", "composition-curves"])
def test_models_saved_before_libraries_saved_themselves_load_with_the_same_numbers(name):
    """Folders written at 2d7ed56 (saving then wrote each library type itself) load through the
    library types' own ``from_state`` and predict what they predicted then, to float32 rounding:
    the fixtures were written on another CPU, whose kernels may round a last bit differently (an
    AVX-512 machine differs from them by a few float32 ulps); a save and load on one machine is
    bit-identical (the tests above)."""
    from taskextrap.estimators.saving import load_pretrained

    folder = SAVED_BEFORE / name
    expected, meta = read_state(folder / "expected.safetensors")
    kind = {"RTE": RTE, "LengthRTE": LengthRTE, "CompositionRTE": CompositionRTE}[meta["class"]]
    with pytest.warns(TaskextrapWarning, match="saved by other taskextrap code"):
        model = load_pretrained(folder, kind)
    mean, std = model.predict(expected["ctx_x"], expected["ctx_y"], expected["qry_x"], return_std=True)
    np.testing.assert_allclose(mean, expected["mean"], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(std, expected["std"], rtol=1e-5, atol=1e-12)
