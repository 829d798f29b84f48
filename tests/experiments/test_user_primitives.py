"""A user's primitive set from the command line: ``--family module:attr`` for composition,
composition-ablations, composition-em and composition-depth3, checked before any work; each refusal
is one line; the default run computes what it computed before (library, targets, units)."""

import dataclasses
import json
import sys
import textwrap

import numpy as np
import pytest

from taskextrap.cli import main
from taskextrap.experiments import composition, composition_depth3 as D3, composition_em
from taskextrap.experiments.discrete import LIBRARY_SEED, set_streams
from taskextrap.experiments.registry import FRESH_TEST_SEED, RunOptions
from taskextrap.experiments.runner import plan_run
from taskextrap.report.schema import validate_results
from taskextrap.seeding import rng
from taskextrap.tasks.builtin import POLY_SIN_TANH, POLY_SIN_TANH_RESCALED
from taskextrap.tasks.chains import DEPTH3_FAMILIES, DEPTH3_GRID, PAPER_RECIPE_SPLIT, ChainSet, recipe_name
from taskextrap.tasks.dev import dev_pair_split
from taskextrap.tasks.observe import noise_scale
from taskextrap.tasks.regimes import get_protocol
from taskextrap.tasks.primitives import (
    PAPER_SPLIT,
    PRIMITIVE_FAMILIES,
    CompositionFamily,
    CompositionSet,
    PairSplit,
    PrimitiveSet,
)

# The README's "your own primitive set": two families, one held-out pair, a depth-3 recipe split.
USER_SET = textwrap.dedent("""
    import numpy as np
    from taskextrap.tasks import CompositionFamily, PairSplit, PrimitiveFamily
    from taskextrap.tasks.chains import RecipeSplit

    sin = PrimitiveFamily("sin", lambda x, A, w: A * np.sin(w * x), {"A": (0.5, 2.0), "w": (0.5, 1.5)})
    bump = PrimitiveFamily("bump", lambda x, a, w: a * np.exp(-(w * x) ** 2), {"a": (0.5, 2.0), "w": (0.2, 1.0)})
    waves = CompositionFamily("waves", (sin, bump),
                              PairSplit(train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump")),
                                        test=(("bump", "sin"),)),
                              recipe_split=RecipeSplit(("sin", "bump"), 3, held_out=(("bump", "sin"),)))
""")


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write ``name.py`` with ``body`` into a folder on sys.path; forget it again afterwards."""
    folder = tmp_path / "mods"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    written = []

    def write(name: str, body: str):
        (folder / f"{name}.py").write_text(body)
        sys.modules.pop(name, None)
        written.append(name)

    yield write
    for name in written:
        sys.modules.pop(name, None)


def run_cli(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


def results_of(out, experiment: str) -> dict:
    (path,) = out.glob(f"{experiment}-paper-tiny*/results.json")  # the folder's name is the runner's
    results = json.loads(path.read_text())
    validate_results(results)
    return results


# --- end to end from the command line ------------------------------------------------------------


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_composition_on_a_users_set_from_the_command_line(user_module, tmp_path, capsys, monkeypatch):
    user_module("usermod", USER_SET)
    out = tmp_path / "runs"
    args = ["--family", "usermod:waves", "--profile", "tiny", "--no-plots", "--out", str(out), "--quiet"]
    code, err = run_cli(["reproduce", "composition", *args], capsys)
    assert code == 0, err
    res = results_of(out, "composition")
    groups = {r["group"] for r in res["rows"]}
    assert groups == {"waves:unseen-pairs", "waves:pair-retrieved"}  # one held-out pair: no per-pair groups
    main_rows = [r["method"] for r in res["rows"] if r["group"] == "waves:unseen-pairs" and r["metric"] == "mse"]
    assert main_rows == list(composition.main_methods())
    assert all(r["paper_value"] is None for r in res["rows"])  # the paper's numbers are for its own set only
    recorded = res["config"]["primitive_set"]
    assert recorded["spec"] == "usermod:waves" and recorded["name"] == "waves"
    assert list(recorded["families"]) == ["sin", "bump"] and recorded["pairs"]["test"] == [["bump", "sin"]]
    assert res["config"]["pairs"]["test"] == [["bump", "sin"]]
    assert list(out.glob("units/composition-waves-paper-seed0-*.json"))

    # the ablations share the user's units, as they share the built-in set's
    monkeypatch.setattr(composition, "run_unit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refit")))
    code, err = run_cli(["reproduce", "composition-ablations", *args], capsys)
    assert code == 0, err
    abl = results_of(out, "composition-ablations")
    assert [r["method"] for r in abl["rows"] if r["group"] == "waves:unseen-pairs"] == list(
        composition.ABLATION_METHODS
    )


# slow: a whole tiny depth-3 run with the dev-best classics (meta-gp's L-BFGS to convergence)
@pytest.mark.slow
def test_composition_depth3_on_a_users_set_from_the_command_line(user_module, tmp_path, capsys):
    user_module("usermod", USER_SET)
    out = tmp_path / "runs"
    code, err = run_cli(
        [
            "reproduce",
            "composition-depth3",
            "--family",
            "usermod:waves",
            "--profile",
            "tiny",
            "--no-plots",
            "--out",
            str(out),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    res = results_of(out, "composition-depth3")
    main_rows = [r["method"] for r in res["rows"] if r["group"] == "waves:unseen-recipes" and r["metric"] == "mse"]
    assert main_rows == list(D3.main_methods()) and all(r["paper_value"] is None for r in res["rows"])
    assert res["config"]["recipes"]["held_out_relations"] == ["bump o sin"]
    assert res["config"]["primitive_set"]["spec"] == "usermod:waves"
    assert {r["group"] for r in res["rows"]} >= {"waves:chain-retrieved"}
    assert list(out.glob("units/composition-depth3-waves-paper-seed0-*.json"))


def test_composition_em_on_a_users_set_from_the_command_line(user_module, tmp_path, capsys):
    user_module("usermod", USER_SET)
    out = tmp_path / "runs"
    code, err = run_cli(
        [
            "reproduce",
            "composition-em",
            "--family",
            "usermod:waves",
            "--profile",
            "tiny",
            "--no-plots",
            "--out",
            str(out),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    res = results_of(out, "composition-em")
    assert [r["method"] for r in res["rows"] if r["group"] == "waves:unseen-pairs"] == list(composition_em.METHODS)
    assert {r["group"] for r in res["rows"]} >= {"waves:pseudo-labels", "waves:pseudo-labels-exact"}
    assert res["config"]["primitive_set"]["spec"] == "usermod:waves"


# --- refusals: one line, exit status 2, nothing computed -----------------------------------------

BROKEN = {  # module name -> the bump family's formula, or a whole body
    "colmod": "a * w",  # (n, 1): ignores x
    "scalarmod": "np.float64(1.0)",
    "constmod": "a + 0.0 * x",  # x's shape, constant in x
    "nanmod": "a * np.log(x)",  # NaN on the grid's negative half
}


def _broken(formula: str) -> str:
    return USER_SET.replace("a * np.exp(-(w * x) ** 2)", formula)


@pytest.mark.parametrize(
    "experiment, spec, needle",
    [
        (
            "composition",
            "nosuchset",
            (
                "unknown primitive set 'nosuchset'; choose from ['poly-sin-tanh', "
                "'poly-sin-tanh-rescaled'] or module:attr"
            ),
        ),
        ("composition", "poly-sin-tanhh", "did you mean"),
        ("composition", "quadratic", "unknown primitive set 'quadratic'"),
        (
            "composition",
            "usermod:sin",
            ("'usermod:sin' is a PrimitiveFamily, not a taskextrap.tasks.primitives.CompositionFamily"),
        ),
        ("composition", "nosuchmodule_xyz:waves", "cannot import module 'nosuchmodule_xyz'"),
        (
            "composition",
            "colmod:waves",
            (
                "primitive set 'colmod:waves', primitive family 'bump': its fn returned shape "
                "(8, 1) for inputs x of shape (8, 16); it must return exactly x's shape"
            ),
        ),
        ("composition-ablations", "scalarmod:waves", "primitive family 'bump': its fn returned shape ()"),
        ("composition-em", "constmod:waves", "primitive family 'bump': its fn does not depend on x"),
        ("composition-depth3", "nanmod:waves", "primitive family 'bump': its fn returned NaN or inf"),
        ("composition", "onemod:waves", "primitive set 'waves': needs at least 2 primitive families"),
        ("composition", "strangermod:waves", "its pair split names ['cos'], not families of the set ['sin', 'bump']"),
        (
            "composition-depth3",
            "norecipemod:waves",
            ("primitive set 'norecipemod:waves': composition-depth3 needs its recipe_split"),
        ),
    ],
)
def test_a_set_that_cannot_work_is_refused_in_one_line_before_any_work(
    user_module, tmp_path, capsys, experiment, spec, needle
):
    user_module("usermod", USER_SET)
    for name, formula in BROKEN.items():
        user_module(name, _broken(formula))
    user_module("onemod", USER_SET.replace("(sin, bump),", "(sin,),"))
    user_module("strangermod", USER_SET.replace('test=(("bump", "sin"),)', 'test=(("cos", "sin"),)'))
    user_module("norecipemod", USER_SET + "import dataclasses\nwaves = dataclasses.replace(waves, recipe_split=None)\n")
    out = tmp_path / "runs"
    code, err = run_cli(
        ["reproduce", experiment, "--family", spec, "--profile", "tiny", "--no-plots", "--out", str(out), "--quiet"],
        capsys,
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0]
    assert not out.exists()  # refused before any folder or unit


def test_a_dev_split_that_cannot_be_built_is_one_line(user_module, tmp_path, capsys):
    user_module(
        "onetrain",
        USER_SET.replace('train=(("sin", "sin"), ("bump", "bump"), ("sin", "bump"))', 'train=(("sin", "bump"),)'),
    )
    code, err = run_cli(
        [
            "reproduce",
            "composition",
            "--family",
            "onetrain:waves",
            "--split",
            "dev",
            "--profile",
            "tiny",
            "--no-plots",
            "--out",
            str(tmp_path / "runs"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert (
        "error: primitive set 'onetrain:waves': a dev split holds out a training pair of two different "
        "families and trains on the others, but it trains on ['sin o bump']: no other training pair to train on"
    ) in err
    assert not list((tmp_path / "runs").rglob("results.json"))


def test_a_dev_recipe_split_that_cannot_be_built_is_one_line_naming_the_set(user_module, tmp_path, capsys):
    user_module(
        "bothheld", USER_SET.replace('held_out=(("bump", "sin"),)', 'held_out=(("bump", "sin"), ("sin", "bump"))')
    )
    out = tmp_path / "runs"
    args = ["--family", "bothheld:waves", "--split", "dev", "--profile", "tiny", "--no-plots", "--out", str(out)]
    code, err = run_cli(["reproduce", "composition-depth3", *args, "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: primitive set 'bothheld:waves': a dev split holds out one more cross-family relation")
    assert "every cross-family relation is held out already" in err
    assert not list(out.rglob("results.json"))


# --- plans: the user's split, dev split and code key the units; the default is unchanged ---------


def _plan(experiment: str, tmp_path, **options):
    return plan_run(
        experiment, RunOptions(profile="tiny", out=tmp_path, progress=False, plots=False, **options), make_dirs=False
    ).plan.units


def test_a_users_dev_split_and_code_key_its_units(user_module, tmp_path):
    user_module("usermod", USER_SET)
    (unit,) = _plan("composition", tmp_path, family="usermod:waves", split="dev")
    assert unit.name == "composition-waves-paper-dev-seed0"
    from usermod import waves

    assert unit.config["split"] == dev_pair_split(waves.split) and unit.config["primitives"]["name"] == "waves"
    (deep,) = _plan("composition-depth3", tmp_path, family="usermod:waves", split="dev")
    assert deep.name == "composition-depth3-waves-paper-dev-seed0" and "RecipeSplit" in deep.config["split"]
    user_module("usermod", USER_SET.replace("A * np.sin(w * x)", "A * np.sin(w * x + 0.1)"))
    (edited,) = _plan("composition", tmp_path, family="usermod:waves", split="dev")
    assert (
        edited.config["primitives"]["families"]["sin"]["fn_code"]
        != unit.config["primitives"]["families"]["sin"]["fn_code"]
        and edited.key != unit.key
    )


def test_a_non_default_built_in_set_gets_its_own_units_and_groups(tmp_path):
    (unit,) = _plan("composition-depth3", tmp_path, family="poly-sin-tanh")
    assert unit.name == "composition-depth3-poly-sin-tanh-paper-seed0" and unit.config["primitives"]["name"] == (
        "poly-sin-tanh"
    )
    assert [u.name for u in _plan("composition", tmp_path, family="poly-sin-tanh-rescaled")] == [
        "composition-poly-sin-tanh-rescaled-paper-seed0"
    ]


@pytest.mark.parametrize(
    "experiment, stem",
    [
        ("composition", "composition"),
        ("composition-ablations", "composition"),
        ("composition-em", "composition-em"),
        ("composition-depth3", "composition-depth3"),
    ],
)
def test_the_default_plan_is_the_one_before_family_existed(tmp_path, experiment, stem):
    default = _plan(experiment, tmp_path)
    assert [u.name for u in default] == [f"{stem}-paper-seed0"]
    assert "primitives" not in default[0].config  # the default units' keys are unchanged
    split = default[0].config["split"]
    assert split == (PAPER_SPLIT if experiment != "composition-depth3" else repr(PAPER_RECIPE_SPLIT))
    builtin = "poly-sin-tanh-rescaled" if experiment == "composition-depth3" else "poly-sin-tanh"
    named = _plan(experiment, tmp_path, family=builtin)  # the default named explicitly: the same units
    assert [(u.name, u.config) for u in named] == [(u.name, u.config) for u in default]


def test_the_default_library_and_targets_come_from_the_streams_they_came_from_before():
    protocol = get_protocol("paper", "composition")
    lib = composition.make_library(7)
    legacy = PrimitiveSet.sample(PRIMITIVE_FAMILIES, 7, rng(LIBRARY_SEED, "primitives", "library"))
    assert np.array_equal(lib.curves, legacy.curves) and np.array_equal(lib.params, legacy.params)
    targets, obs = composition.make_targets(lib, protocol, 5, 2)
    held = [f"{o}-{i}" for o, i in PAPER_SPLIT.test]
    old = CompositionSet.sample(
        legacy,
        PAPER_SPLIT.test,
        5,
        rng(FRESH_TEST_SEED, "composition", *held, "targets"),
        train_pairs=PAPER_SPLIT.train,
    )
    old_obs = protocol.draw(
        old, 2, rng(FRESH_TEST_SEED, "composition", *held, protocol.name, "draws"), noise_scale(old.family)
    )
    assert np.array_equal(targets.params, old.params) and np.array_equal(obs.qry_y, old_obs.qry_y)

    protocol3 = get_protocol("paper", "composition-depth3")
    lib3 = D3.make_library(4)
    legacy3 = PrimitiveSet.sample(
        DEPTH3_FAMILIES, 4, rng(LIBRARY_SEED, "primitives-depth3", "library"), grid=DEPTH3_GRID
    )
    assert np.array_equal(lib3.curves, legacy3.curves) and np.array_equal(lib3.grid, legacy3.grid)
    chains, _ = D3.make_targets(lib3, protocol3, 5, 1)
    held3 = sorted(recipe_name(r) for r in PAPER_RECIPE_SPLIT.test)
    old3 = ChainSet.sample(
        legacy3,
        PAPER_RECIPE_SPLIT.test,
        5,
        rng(FRESH_TEST_SEED, D3.EXPERIMENT, *held3, "targets"),
        train_recipes=PAPER_RECIPE_SPLIT.train,
    )
    assert np.array_equal(chains.params, old3.params)


def test_another_set_draws_its_own_library_and_targets(user_module):
    user_module("usermod", USER_SET)
    from usermod import waves

    lib = composition.make_library(5, waves)
    assert list(dict.fromkeys(lib.family_names)) == ["sin", "bump"]
    lookalike = composition.make_library(5, dataclasses.replace(POLY_SIN_TANH))  # equal fields, another object
    assert not np.array_equal(lookalike.curves, composition.make_library(5).curves)


# --- a set of several held-out pairs: every pair of a tiny run has targets or no row --------------

THREE_FAMILIES = textwrap.dedent("""
    import numpy as np
    from taskextrap.tasks import CompositionFamily, PairSplit, PrimitiveFamily

    sin = PrimitiveFamily("sin", lambda x, A, w: A * np.sin(w * x), {"A": (0.5, 2.0), "w": (0.5, 1.5)})
    bump = PrimitiveFamily("bump", lambda x, a, w: a * np.exp(-(w * x) ** 2), {"a": (0.5, 2.0), "w": (0.2, 1.0)})
    ramp = PrimitiveFamily("ramp", lambda x, a, b: a * x + b, {"a": (0.2, 1.0), "b": (-1.0, 1.0)})
    waves = CompositionFamily("waves", (sin, bump, ramp), PairSplit(train=TRAIN, test=TEST))
""")
FAMILIES = ("sin", "bump", "ramp")


def _per_pair_groups(user_module, tmp_path, capsys, train, test) -> set[str]:
    """The per-pair groups of a tiny composition run on a three-family set split into ``train``
    and ``test`` pairs (test seed 1: the old uniform draws missed a pair of four there)."""
    user_module("threefam", THREE_FAMILIES.replace("TRAIN", repr(train)).replace("TEST", repr(test)))
    out = tmp_path / "runs"
    args = ["--family", "threefam:waves", "--profile", "tiny", "--no-plots", "--out", str(out), "--quiet"]
    code, err = run_cli(["reproduce", "composition", *args, "--test-seed", "1"], capsys)
    assert code == 0, err
    rows = results_of(out, "composition")["rows"]
    return {r["group"] for r in rows if r["method"] == "rte" and r["metric"] == "mse"} - {"waves:unseen-pairs"}


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_a_users_set_of_several_held_out_pairs_scores_every_pair_in_a_tiny_run(user_module, tmp_path, capsys):
    """A user's set draws the tiny profile's 6 targets evenly over its 4 held-out pairs (the
    built-in sets keep their uniform draws), so every pair has a row of its own."""
    train = (("sin", "sin"), ("bump", "bump"), ("ramp", "ramp"), ("sin", "bump"), ("bump", "ramp"))
    test = (("bump", "sin"), ("ramp", "bump"), ("sin", "ramp"), ("ramp", "sin"))
    assert _per_pair_groups(user_module, tmp_path, capsys, train, test) == {f"waves:{o} o {i}" for o, i in test}


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_a_held_out_pair_without_a_target_has_no_row(user_module, tmp_path, capsys):
    """7 held-out pairs, 6 targets: the pair left without one is left out of the breakdown."""
    train = (("sin", "sin"), ("bump", "ramp"))
    test = tuple((o, i) for o in FAMILIES for i in FAMILIES if (o, i) not in train)
    groups = _per_pair_groups(user_module, tmp_path, capsys, train, test)
    assert len(groups) == 6 and groups < {f"waves:{o} o {i}" for o, i in test}


def test_a_users_set_never_draws_the_default_sets_streams():
    """A user's set named like a held-out pair of the default, whose own held-out pairs are the
    default's others, would name exactly the default's target and draw streams without its tag."""
    lookalike = CompositionFamily(
        "sin-poly",
        PRIMITIVE_FAMILIES,
        PairSplit(train=(*PAPER_SPLIT.train, ("sin", "poly")), test=(("tanh", "sin"), ("poly", "tanh"))),
    )
    assert set_streams(lookalike, POLY_SIN_TANH) == ("set=sin-poly",)
    protocol = get_protocol("paper", "composition")
    lib = composition.make_library(6)
    tiny = composition.PROFILES["tiny"]
    _, mine = composition.make_set_targets(lib, protocol, tiny, lookalike.split, FRESH_TEST_SEED, lookalike)
    _, default = composition.make_set_targets(lib, protocol, tiny, PAPER_SPLIT, FRESH_TEST_SEED, POLY_SIN_TANH)
    assert not np.array_equal(mine.ctx_x, default.ctx_x)  # the same stream would place the same context points
    builtin = POLY_SIN_TANH_RESCALED  # another built-in set keeps its plain name in its streams
    assert set_streams(builtin, POLY_SIN_TANH) == (builtin.name,)
    assert set_streams(dataclasses.replace(builtin), POLY_SIN_TANH) == (f"set={builtin.name}",)
