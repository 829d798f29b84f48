"""Run folders: named by what distinguishes a run, recording the run in config.yaml (run again
with ``reproduce --from``), refusing a folder of another configuration, keeping only their own
plots."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from taskextrap import __version__
from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap.experiments.registry import RunOptions, all_experiments
from taskextrap.experiments.runner import family_tag, run_dir_name, run_experiment
from taskextrap.provenance import callable_hash, source_hash
from taskextrap.report.schema import validate_results

MODULE = "runfolders_userfam"  # a user's family module, written into a folder on sys.path
SPEC = f"{MODULE}:BUMP"
FOLDER = f"parameter-paper-tiny-{MODULE}.BUMP"


def family_module(scale: str) -> str:
    """A user's family: the built-in quadratic's regions with its own formula and name."""
    return (
        "import dataclasses\n"
        "from taskextrap.tasks import PARAMETER_FAMILIES\n"
        f"BUMP = dataclasses.replace(PARAMETER_FAMILIES['quadratic'], name='bump',\n"
        f"                           fn=lambda x, a, b, c: a * (x - b) ** 2 + {scale} * c)\n"
    )


@pytest.fixture
def user_family(tmp_path, monkeypatch):
    """``write(scale)`` (re)writes the user's family module; it is imported afresh next time."""
    folder = tmp_path / "mods"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))

    def write(scale: str) -> None:
        (folder / f"{MODULE}.py").write_text(family_module(scale))
        sys.modules.pop(MODULE, None)

    write("1")
    yield write
    sys.modules.pop(MODULE, None)


def _opts(out, **kw):
    return RunOptions(**{"profile": "tiny", "out": out, "plots": False, "progress": False, **kw})


def _main(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    captured = capsys.readouterr()
    return e.value.code, captured.out, captured.err


def _mse(results):
    return {(r["group"], r["method"]): r["value"] for r in results["rows"] if r["metric"] == "mse"}


def _run_section(folder):
    return yaml.safe_load((folder / "config.yaml").read_text())["run"]


# --- folder names ----------------------------------------------------------------------------------


def test_default_runs_keep_their_folder_names(tmp_path):
    for name in all_experiments():
        assert run_dir_name(name, RunOptions(out=tmp_path)) == tmp_path / f"{name}-paper-quick"
    seeded = RunOptions(out=tmp_path, profile="tiny", split="dev", test_seed=7, split_seed=2, seed=1)
    assert run_dir_name("codeio", seeded).name == "codeio-paper-tiny-dev-test7-split2-seed1"


def test_a_family_names_its_runs_folder(tmp_path):
    assert (
        run_dir_name("parameter", RunOptions(out=tmp_path, family="quadratic")).name
        == "parameter-paper-quick-quadratic"
    )
    assert (
        run_dir_name("parameter", RunOptions(out=tmp_path, family="myfam:bump", seed=2, split="dev")).name
        == "parameter-paper-quick-myfam.bump-dev-seed2"
    )
    assert run_dir_name("length", RunOptions(out=tmp_path, family="polynomial")).name == "length-paper-quick-polynomial"
    # generic over experiments: whatever takes --family gets it in its folder name
    assert (
        run_dir_name("composition", RunOptions(out=tmp_path, family="mine:SET")).name
        == "composition-paper-quick-mine.SET"
    )


def test_family_tags_are_file_name_safe_and_stay_distinct():
    assert family_tag("pkg.mod:Families.bump") == "pkg.mod.Families.bump"
    assert family_tag("mod:fam ily/../x") == "mod.fam_ily_.._x"
    long_a, long_b = "a" * 80 + ":x", "a" * 80 + ":y"
    assert len(family_tag(long_a)) == 60 and family_tag(long_a) != family_tag(long_b)
    assert "/" not in family_tag("a/b:c") and ":" not in family_tag("a:b")


# --- config.yaml's run section and results.json ------------------------------------------------------


def test_config_records_the_run_and_results_name_the_family_spec(tmp_path, user_family):
    from taskextrap.tasks.registry import load_object

    results = run_experiment("parameter", _opts(tmp_path, family=SPEC, anchors=3))
    folder = tmp_path / FOLDER
    assert json.loads((folder / "results.json").read_text())["config"]["family"] == SPEC
    validate_results(results)
    family_hash = callable_hash(load_object(SPEC, "family"))
    assert results["config"]["family_code_hash"] == family_hash
    assert _run_section(folder) == {
        "experiment": "parameter",
        "profile": "tiny",
        "protocol": "paper",
        "family": SPEC,
        "seeds": None,
        "seed": None,
        "split": "test",
        "test_seed": None,
        "split_seed": None,
        "embedding": None,
        "anchors": 3,
        "device": "cpu",
        "extra": {},
        "executor": "serial",
        "unit_cpus": 1,
        "plots": False,
        "code_hash": source_hash(),
        "family_code_hash": family_hash,
        "taskextrap": __version__,
    }
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert next(iter(config)) == "run" and config["families"] == ["bump"]  # the experiment's own record follows


def test_a_built_in_family_has_no_code_hash_of_its_own(tmp_path):
    results = run_experiment("parameter", _opts(tmp_path, family="quadratic"))
    assert results["config"]["family"] == "quadratic" and results["config"]["family_code_hash"] is None
    section = _run_section(tmp_path / "parameter-paper-tiny-quadratic")
    assert "family_code_hash" not in section and section["code_hash"] == source_hash()


# --- another configuration in the same folder ---------------------------------------------------------


def test_a_folder_of_another_configuration_is_refused_in_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    from taskextrap.experiments import parameter

    run_experiment("parameter", _opts(tmp_path, family="quadratic"))
    results = tmp_path / "parameter-paper-tiny-quadratic" / "results.json"
    before = results.read_bytes()
    with monkeypatch.context() as m:
        m.setattr(parameter, "run_unit", lambda *a, **k: pytest.fail("ran before checking the folder"))
        code, _, err = _main(
            [
                "reproduce",
                "parameter",
                "--profile",
                "tiny",
                "--family",
                "quadratic",
                "--embedding",
                "fisher",
                "--out",
                tmp_path,
                "--quiet",
                "--no-plots",
            ],
            capsys,
        )
        assert code == 2 and err.count("\n") == 1
        assert err.startswith(
            f"error: {tmp_path / 'parameter-paper-tiny-quadratic'} holds the results of a run with "
            "no --embedding, not --embedding 'fisher': run into another --out"
        )
        with pytest.raises(TaskextrapError, match="with --family 'quadratic', not --family 'exp'"):
            run_experiment("parameter", _opts(tmp_path, family="exp"), out_dir=results.parent)
    assert results.read_bytes() == before
    # more seeds, another executor or no plots is the same run: it grows (each seed a cached unit)
    assert run_experiment("parameter", _opts(tmp_path, family="quadratic", seeds=2))["seeds"] == [0, 1]


def test_the_same_spec_under_changed_code_runs_again_with_fresh_numbers(tmp_path, user_family):
    first = run_experiment("parameter", _opts(tmp_path, family=SPEC))
    user_family("10")  # the user edits the formula: same spec, other code
    second = run_experiment("parameter", _opts(tmp_path, family=SPEC))
    assert _mse(second) != _mse(first)
    assert second["config"]["family_code_hash"] != first["config"]["family_code_hash"]
    assert _run_section(tmp_path / FOLDER)["family_code_hash"] == second["config"]["family_code_hash"]


# --- stale plots -------------------------------------------------------------------------------------


def test_plots_of_other_runs_are_removed_and_other_files_kept(tmp_path):
    """A folder written before runs were recorded, holding another family's figures: the run
    keeps its own figures only, and never touches a file the package does not write."""
    folder = tmp_path / "parameter-paper-tiny-quadratic"
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "exp-paper-predictions.png").write_bytes(b"\x89PNG old family")
    (folder / "plots" / "notes.txt").write_text("mine")
    (folder / "my-analysis.png").write_bytes(b"\x89PNG not in plots/")
    (folder / "config.yaml").write_text("families:\n- exp\n")  # no run section: an old run
    opts = _opts(tmp_path, family="quadratic", plots=True)
    run_experiment("parameter", opts)
    pngs = sorted(p.name for p in (folder / "plots").glob("*.png"))
    assert pngs == ["quadratic-paper-embedding.png", "quadratic-paper-predictions.png"]
    assert (folder / "plots" / "notes.txt").read_text() == "mine" and (folder / "my-analysis.png").exists()
    # run again: the unit and its figures are read back, not redrawn, and kept
    (unit,) = (tmp_path / "units").glob("*.json")
    stamps = {p: p.stat().st_mtime_ns for p in [unit, *(folder / "plots").glob("*.png")]}
    run_experiment("parameter", opts)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    # a figure that is gone is drawn again, by recomputing its unit
    (folder / "plots" / "quadratic-paper-embedding.png").unlink()
    run_experiment("parameter", opts)
    assert (folder / "plots" / "quadratic-paper-embedding.png").exists() and unit.stat().st_mtime_ns != stamps[unit]


def test_prune_keeps_the_runs_units_figures_and_what_it_drew_now(tmp_path):
    from taskextrap.experiments import plotfiles

    plotfiles.record(tmp_path, "unit-a", {"a.png": b"1", "a2.png": b"2"})
    plotfiles.record(tmp_path, "unit-b", {"b.png": b"3"})
    (tmp_path / "assembled.png").write_bytes(b"4")
    (tmp_path / "README").write_text("not a plot")
    assert plotfiles.has_plots(tmp_path, "unit-a", "a.png") and not plotfiles.has_plots(tmp_path, "unit-c", None)
    assert plotfiles.prune(tmp_path, ["unit-a"], fresh=["assembled.png"]) == ["b.png"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "README",
        "a.png",
        "a2.png",
        "assembled.png",
    ]
    assert plotfiles.drawn(tmp_path) == {"unit-a": ["a.png", "a2.png"]}


# --- reproduce --from ------------------------------------------------------------------------------------


def test_from_runs_a_saved_run_again_and_refuses_other_options(tmp_path, capsys, user_family):
    first = run_experiment("parameter", _opts(tmp_path, family=SPEC))
    folder = tmp_path / FOLDER
    code, out, err = _main(["reproduce", "--from", folder, "--quiet"], capsys)
    assert code == 0 and err == "" and f"written: {folder}/results.json" in out
    assert _mse(json.loads((folder / "results.json").read_text())) == _mse(first)
    # elsewhere, from scratch (an empty --out: no cached unit), the same numbers
    code, out, err = _main(
        ["reproduce", "--from", folder / "config.yaml", "--out", tmp_path / "again", "--quiet"], capsys
    )
    assert code == 0, err
    assert _mse(json.loads((tmp_path / "again" / FOLDER / "results.json").read_text())) == _mse(first)
    assert list((tmp_path / "again" / "units").glob("*.json"))
    for argv, needle in (
        (["--profile", "quick"], "drop --profile (beside --from give only --out, --quiet or --executor)"),
        (["--family", "quadratic", "--no-plots"], "drop --family, --no-plots"),
        (["--seed", "1"], "drop --seed "),
    ):
        code, _, err = _main(["reproduce", "--from", folder, *argv], capsys)
        assert code == 2 and err.count("\n") == 1 and needle in err, err
    code, _, err = _main(["reproduce", "parameter", "--from", folder], capsys)
    assert code == 2 and "drop EXPERIMENT 'parameter'" in err


@pytest.mark.parametrize(
    "config, needle",
    [
        (None, "no such run folder or config.yaml"),
        ("families:\n- quadratic\n", "it has no 'run' section (written before taskextrap recorded its runs)"),
        ("run: [1, 2]\n", "its 'run' section does not name an experiment"),
        ("run:\n  experiment: parameter\n  anchors: two\n", "run.anchors is 'two'"),
        ("run:\n  experiment: parameter\n  seeds: true\n", "run.seeds is True"),
        ("run:\n  experiment: parameter\n  colour: red\n", "unknown field(s) colour"),
        ("run:\n  experiment: parameter\n  extra: {model: 3}\n", "run.extra.model is 3"),
        ("run:\n  experiment: paramter\n  profile: tiny\n", "unknown experiment 'paramter'"),
        ("run:\n  experiment: parameter\n  profile: huge\n", "unknown profile 'huge'"),
        ("{not: yaml", "not a readable config.yaml"),
    ],
)
def test_from_a_config_it_cannot_run_is_one_line(tmp_path, capsys, config, needle):
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
    code, _, err = _main(["reproduce", "--from", tmp_path if config is not None else tmp_path / "nowhere"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
    assert not (tmp_path / "units").exists()


def test_from_warns_once_when_the_code_changed_and_runs(tmp_path, capsys, user_family):
    run_experiment("parameter", _opts(tmp_path, family=SPEC))
    folder = tmp_path / FOLDER
    saved = _run_section(folder)
    user_family("10")  # the user edits the family's module, then runs the saved run again
    code, _, err = _main(["reproduce", "--from", folder, "--quiet"], capsys)
    assert code == 0, err
    (line,) = err.strip().splitlines()
    assert line.startswith(
        f"warning: the saved run was made by other code (family code {saved['family_code_hash']} -> "
    )
    assert line.endswith("its numbers may differ from this run's")
    assert _run_section(folder)["family_code_hash"] != saved["family_code_hash"]


@pytest.mark.slow
def test_from_in_real_processes_after_an_edit(tmp_path):
    """As a user would, each command a process of its own: run, edit the family's module, run it
    again from its config.yaml: one warning line, then fresh numbers."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / f"{MODULE}.py").write_text(family_module("1"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONPATH=str(mods))

    def taskextrap(*args):
        return subprocess.run(
            [sys.executable, "-m", "taskextrap.cli", *map(str, args)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    first = taskextrap(
        "reproduce",
        "parameter",
        "--profile",
        "tiny",
        "--family",
        SPEC,
        "--out",
        tmp_path / "runs",
        "--quiet",
        "--no-plots",
    )
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / FOLDER
    before = json.loads((folder / "results.json").read_text())
    (mods / f"{MODULE}.py").write_text(family_module("10"))
    again = taskextrap("reproduce", "--from", folder, "--quiet")
    assert again.returncode == 0, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith("warning: the saved run was made by other code (family code ")
    assert _mse(json.loads((folder / "results.json").read_text())) != _mse(before)
