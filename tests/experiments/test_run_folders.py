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
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.catalogue import all_experiments
from taskextrap.experiments.runner import family_tag, run_dir_name, run_experiment, run_experiments
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
    import hashlib

    def hex8(spec):
        return hashlib.sha256(spec.encode()).hexdigest()[:8]

    # kept as they are: built-in names (with their '-') and a module:attr of plain names
    for name in ("quadratic", "sin_trend", "polynomial", "poly-sin-tanh", "poly-sin-tanh-rescaled"):
        assert family_tag(name) == name
    assert family_tag("myfam:bump") == "myfam.bump" and family_tag("my-fam:bump_2") == "my-fam.bump_2"
    # made safe, which loses information: the spec's hash keeps them apart
    assert family_tag("pkg.mod:Families.bump") == f"pkg.mod.Families.bump.{hex8('pkg.mod:Families.bump')}"
    assert family_tag("mod:fam ily/../x") == f"mod.fam_ily_.._x.{hex8('mod:fam ily/../x')}"
    specs = ("a.b:c", "a:b.c", "a.b.c", "a:b", "a.b", "a-b", "a_b", "a b", "a/b", "a:b:c")
    assert len({family_tag(s) for s in specs}) == len(specs)
    long_a, long_b = "a" * 80 + ":x", "a" * 80 + ":y"
    assert len(family_tag(long_a)) == 60 and family_tag(long_a) != family_tag(long_b)
    assert "/" not in family_tag("a/b:c") and ":" not in family_tag("a:b")


# --- config.yaml's run section and results.json ------------------------------------------------------


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
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
        "units_per_gpu": 1,
        "plots": False,
        "interval_scales": None,
        "code_hash": source_hash(),
        "family_code_hash": family_hash,
        "taskextrap": __version__,
    }
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert next(iter(config)) == "run" and config["families"] == ["bump"]  # the experiment's own record follows
    # a user family's 90% intervals use a scale chosen on the built-in families' dev splits: said so
    sources = _calibrated(results["config"]["interval_scale_source"]["bump"])
    assert sources and all(
        s.startswith("borrowed: chosen on the built-in dev splits of quadratic") for s in sources.values()
    )
    md = (folder / "results.md").read_text()
    assert "**interval scale borrowed: chosen on the built-in dev splits" in md and "not on bump" in md


def _calibrated(sources: dict) -> dict:
    """The interval sources of the methods a scale was chosen for: a learned classic's row has
    none until the dev runs of its variant are calibrated (its interval is then raw, and says so)."""
    from taskextrap.baselines.classics import CHOSEN

    for m in CHOSEN:
        assert m not in sources or sources[m].startswith(("none chosen", "borrowed", "chosen on")), sources[m]
    return {m: s for m, s in sources.items() if not (m in CHOSEN and s.startswith("none chosen"))}


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_built_in_family_has_no_code_hash_of_its_own(tmp_path):
    results = run_experiment("parameter", _opts(tmp_path, family="quadratic"))
    assert results["config"]["family"] == "quadratic" and results["config"]["family_code_hash"] is None
    assert results["config"]["threads"] == 1  # the units' torch threads: they move a float's last digits
    sources = _calibrated(results["config"]["interval_scale_source"]["quadratic"])
    assert sources and all(s.startswith("chosen on quadratic's own dev split") for s in sources.values()), sources
    assert "interval scale borrowed" not in (tmp_path / "parameter-paper-tiny-quadratic" / "results.md").read_text()
    section = _run_section(tmp_path / "parameter-paper-tiny-quadratic")
    assert "family_code_hash" not in section and section["code_hash"] == source_hash()


@pytest.mark.slow  # units at 2 torch threads beside another test worker: minutes on 2 cores
def test_a_run_records_its_units_torch_threads(tmp_path):
    results = run_experiment("parameter", _opts(tmp_path, family="quadratic", unit_cpus=2))
    assert results["config"]["threads"] == 2
    written = json.loads((tmp_path / "parameter-paper-tiny-quadratic" / "results.json").read_text())
    assert written["config"]["threads"] == 2


# --- another configuration in the same folder ---------------------------------------------------------


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
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
        assert err == (
            f"error: {tmp_path / 'parameter-paper-tiny-quadratic'} holds a run with no --embedding; this run "
            "has --embedding 'fisher': run into another --out, or remove that folder\n"
        )
        with pytest.raises(TaskextrapError, match="with --family 'quadratic'; this run has --family 'exp'"):
            run_experiment("parameter", _opts(tmp_path, family="exp"), out_dir=results.parent)
    assert results.read_bytes() == before
    # more seeds, another executor or no plots is the same run: it grows (each seed a cached unit)
    assert run_experiment("parameter", _opts(tmp_path, family="quadratic", seeds=2))["seeds"] == [0, 1]


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_the_same_spec_under_changed_code_is_refused_and_runs_elsewhere(tmp_path, user_family):
    """An edited family (same module:attr, other code) does not replace the run of the code before
    (a one-line refusal naming both code hashes); into another --out it runs, with fresh numbers."""
    first = run_experiment("parameter", _opts(tmp_path, family=SPEC))
    results = tmp_path / FOLDER / "results.json"
    before = results.read_bytes()
    user_family("10")  # the user edits the formula: same spec, other code
    with pytest.raises(TaskextrapError, match=r"of code [0-9a-f]+; this run has its code changed to [0-9a-f]+") as e:
        run_experiment("parameter", _opts(tmp_path, family=SPEC))
    assert "\n" not in str(e.value) and "another --out" in str(e.value)
    assert results.read_bytes() == before
    second = run_experiment("parameter", _opts(tmp_path / "edited", family=SPEC))
    assert _mse(second) != _mse(first)
    assert second["config"]["family_code_hash"] != first["config"]["family_code_hash"]


@pytest.mark.slow  # two tiny runs into one folder (make test stays under 5 minutes)
def test_fewer_seeds_into_a_folder_of_more_are_refused(tmp_path):
    run_experiment("parameter", _opts(tmp_path, family="quadratic", seeds=2))
    results = tmp_path / "parameter-paper-tiny-quadratic" / "results.json"
    before = results.read_bytes()
    for fewer in ({"seeds": 1}, {}):  # --seeds 1, and the profile's own seeds (tiny: seed 0)
        with pytest.raises(TaskextrapError) as e:
            run_experiment("parameter", _opts(tmp_path, family="quadratic", **fewer))
        assert str(e.value) == (
            f"{results.parent} holds a run with seeds 0, 1; this run has seeds 0, which would drop some "
            "(give --seeds 2 or more): run into another --out, or remove that folder"
        )
    assert results.read_bytes() == before


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_run_is_recorded_before_its_units_run_and_refuses_others_meanwhile(tmp_path, monkeypatch):
    """config.yaml's run section is written when the run is planned: a run of another
    configuration, started while this one runs or after it was killed, is refused too."""
    from taskextrap.experiments import parameter

    folder = tmp_path / "parameter-paper-tiny-quadratic"
    seen = []

    def killed(*args, **kwargs):  # the run is stopped while its first unit runs
        seen.append(_run_section(folder))
        raise RuntimeError("killed")

    with monkeypatch.context() as m:
        m.setattr(parameter, "run_unit", killed)
        with pytest.raises(RuntimeError, match="killed"):
            run_experiment("parameter", _opts(tmp_path, family="quadratic"))
    assert seen and seen[0]["family"] == "quadratic" and seen[0]["code_hash"] == source_hash()
    assert not (folder / "results.json").exists()
    with pytest.raises(TaskextrapError, match="holds a run with no --embedding; this run has --embedding 'fisher'"):
        run_experiment("parameter", _opts(tmp_path, family="quadratic", embedding="fisher"))
    # the same run, started again, finishes there; config.yaml then has the experiment's own record too
    run_experiment("parameter", _opts(tmp_path, family="quadratic"))
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["run"]["family"] == "quadratic" and config["families"] == ["quadratic"]


def test_a_run_refused_while_planning_leaves_no_folder_behind(tmp_path, monkeypatch):
    import dataclasses

    from taskextrap.experiments import catalogue, registry

    def refuse(options, cache_dir, plot_dir):  # e.g. a dev split the user's family cannot make
        raise TaskextrapError("no dev split can be made of this family")

    parameter = catalogue.get_experiment("parameter")
    monkeypatch.setitem(registry.EXPERIMENTS, "parameter", dataclasses.replace(parameter, run=refuse))
    with pytest.raises(TaskextrapError, match="no dev split can be made"):
        run_experiment("parameter", _opts(tmp_path / "runs", family="quadratic"))
    assert not (tmp_path / "runs").exists()
    # runs planned together (a sweep): the runs planned before the refused one leave none either
    runs = [(n, _opts(tmp_path / "runs", family="quadratic"), None) for n in ("parameter-ablations", "parameter")]
    with pytest.raises(TaskextrapError, match="no dev split can be made"):
        run_experiments(runs)
    assert not (tmp_path / "runs").exists()


# --- stale plots -------------------------------------------------------------------------------------


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
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


@pytest.mark.slow  # two tiny runs into one folder (make test stays under 5 minutes)
def test_a_run_without_plots_leaves_the_folders_figures_alone(tmp_path):
    folder = tmp_path / "parameter-paper-tiny-quadratic"
    run_experiment("parameter", _opts(tmp_path, family="quadratic", plots=True))
    (folder / "plots" / "assembled.png").write_bytes(b"\x89PNG a figure drawn from assembled results")
    pngs = {p.name: p.read_bytes() for p in (folder / "plots").glob("*.png")}
    run_experiment("parameter", _opts(tmp_path, family="quadratic", plots=False))
    assert {p.name: p.read_bytes() for p in (folder / "plots").glob("*.png")} == pngs


def test_figures_are_written_and_listed_under_the_manifest_lock(tmp_path, monkeypatch):
    """A prune in another process takes the same lock: it never sees a figure written but not
    listed yet (and removes it)."""
    from filelock import FileLock, Timeout

    from taskextrap import files
    from taskextrap.experiments import plotfiles

    locked, write = {}, files.write_bytes_atomic

    def write_and_look(path, data):
        probe = FileLock(str(tmp_path / ".plots.lock"))
        try:
            probe.acquire(timeout=0)
        except Timeout:
            locked[path.name] = True
        else:
            probe.release()
            locked[path.name] = False
        return write(path, data)

    monkeypatch.setattr(files, "write_bytes_atomic", write_and_look)
    plotfiles.record(tmp_path, "unit-a", {"a.png": b"1", "b.png": b"2"})
    assert locked["a.png"] and locked["b.png"]
    assert plotfiles.drawn(tmp_path) == {"unit-a": ["a.png", "b.png"]}


def test_a_unit_draws_outside_the_run_folder_and_prune_removes_stale_drawing_folders(tmp_path):
    import time

    from taskextrap.experiments import plotfiles

    plots = tmp_path / "plots"
    with plotfiles.drawing(plots, "unit-a") as folder:
        assert plots not in folder.parents
        (folder / "a.png").write_bytes(b"1")
    assert not folder.exists() and (plots / "a.png").read_bytes() == b"1"
    assert plotfiles.drawn(plots) == {"unit-a": ["a.png"]}
    left, recent = plots / ".drawing-left", plots / ".drawing-recent"  # by killed processes of older code
    for stale in (left, recent):
        stale.mkdir()
        (stale / "half.png").write_bytes(b"2")
    two_hours_ago = time.time() - 7200
    os.utime(left, (two_hours_ago, two_hours_ago))
    assert plotfiles.prune(plots, ["unit-a"]) == []
    assert not left.exists() and recent.exists() and (plots / "a.png").exists()


# --- reproduce --from ------------------------------------------------------------------------------------


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
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
        (
            ["--profile", "quick"],
            "drop --profile (beside --from give only --out, --quiet, --executor or --units-per-gpu)",
        ),
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


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_from_warns_once_when_the_code_changed_and_runs(tmp_path, capsys, user_family):
    run_experiment("parameter", _opts(tmp_path, family=SPEC))
    folder = tmp_path / FOLDER
    saved = _run_section(folder)
    user_family("10")  # the user edits the family's module, then runs the saved run again
    code, _, err = _main(["reproduce", "--from", folder, "--quiet"], capsys)  # into its own folder: refused
    assert code == 2 and err.count("\n") == 1 and "the family's code changed since this run" in err
    assert "give --out" in err and _run_section(folder) == saved
    code, _, err = _main(["reproduce", "--from", folder, "--out", tmp_path / "edited", "--quiet"], capsys)
    assert code == 0, err
    (line,) = err.strip().splitlines()
    assert line.startswith(
        f"warning: the saved run was made by other code (family code {saved['family_code_hash']} -> "
    )
    assert line.endswith("its numbers may differ from this run's")
    assert _run_section(tmp_path / "edited" / FOLDER)["family_code_hash"] != saved["family_code_hash"]


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
    refused = taskextrap("reproduce", "--from", folder, "--quiet")
    assert refused.returncode == 2 and "give --out" in refused.stderr
    again = taskextrap("reproduce", "--from", folder, "--out", tmp_path / "edited", "--quiet")
    assert again.returncode == 0, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith("warning: the saved run was made by other code (family code ")
    assert _mse(json.loads((tmp_path / "edited" / FOLDER / "results.json").read_text())) != _mse(before)
    assert json.loads((folder / "results.json").read_text()) == before


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_cached_rerun_reports_the_units_compute_time_beside_its_own(tmp_path, capsys):
    from taskextrap.report.tables import console_table

    first = run_experiment("parameter", _opts(tmp_path, family="exp"))
    again = run_experiment("parameter", _opts(tmp_path, family="exp"))
    computed = first["timing"]["unit_s"]
    assert again["timing"]["unit_s"] == computed  # read back with the units
    again["timing"]["wall_s"] = computed / 10  # a re-run reading every unit back is this much faster
    assert f"(its units took {computed:.1f} s when computed)" in console_table(again)
    assert "when computed" not in console_table(first)
