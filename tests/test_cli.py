"""The command line: reproduce / report / list, resuming, user families and one-line errors."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap.experiments.parameter import main_methods
from taskextrap.report.schema import validate_results

RUN_DIR = "parameter-paper-tiny-quadratic"  # a run with --family has the family in its folder name
CKPT = "units/parameter-quadratic-paper-seed0-*.json"


def _env(extra_path=None):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def taskextrap(*args, extra_path=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "taskextrap.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(extra_path),
        timeout=timeout,
    )


def _load(run_dir):
    results = json.loads((run_dir / "results.json").read_text())
    validate_results(results)
    return results


def _check_parameter_results(results, group):
    assert results["experiment"] == "parameter" and results["profile"] == "tiny"
    assert results["protocol"] == "paper"
    rows = [r for r in results["rows"] if r["group"] == group and r["metric"] == "mse"]
    assert {r["method"] for r in rows} == set(main_methods())
    assert len(rows) == len(main_methods())
    for r in rows:
        assert r["value"] >= 0
    coverage = [r for r in results["rows"] if r["metric"] == "coverage"]
    classics = {"ctx-gp", "meta-gp", "cnp"}  # calibrated on dev as rte is: a calibrated and a raw row each
    own = {"rte", "strategy-a", "rte-gp"}  # rte-gp: its interval calibrated inside its own dev choice
    assert {r["method"] for r in coverage} == own | {f"{m}-uncalibrated" for m in own} | classics | {
        f"{c}-uncalibrated" for c in classics
    }
    assert all(0.0 <= r["value"] <= 1.0 for r in coverage)
    width = [r for r in results["rows"] if r["metric"] == "interval-width"]  # the calibrated interval's
    assert {r["method"] for r in width} == own | classics and all(r["value"] > 0 for r in width)
    entropy = [r for r in results["rows"] if r["metric"] == "entropy"]  # rte's posterior over decompositions
    assert [(r["group"], r["method"]) for r in entropy] == [(group, "rte")] and entropy[0]["value"] >= 0
    retrieved = [r for r in results["rows"] if r["group"] == f"{group}:anchor-retrieved"]
    assert {r["method"] for r in retrieved} == {"rte", "strategy-a"} and all(
        r["metric"] == "accuracy" for r in retrieved
    )
    assert len(rows) + len(coverage) + len(width) + len(entropy) + len(retrieved) == len(results["rows"])
    assert not any(c["metric"] in ("coverage", "interval-width", "entropy") for c in results["comparisons"])


@pytest.fixture(scope="module")
def quad_run(tmp_path_factory):
    """One fresh tiny run without plots, then the same command again (which should resume)."""
    out = tmp_path_factory.mktemp("cli-noplots")
    args = (
        "reproduce",
        "parameter",
        "--profile",
        "tiny",
        "--family",
        "quadratic",
        "--out",
        out,
        "--quiet",
        "--no-plots",
    )
    first = taskextrap(*args)
    found = list(out.glob(CKPT))
    ckpt = found[0] if found else None
    stamp = ckpt.stat().st_mtime_ns if ckpt else None
    first_results = (out / RUN_DIR / "results.json").read_text() if first.returncode == 0 else None
    second = taskextrap(*args)
    return out, first, second, stamp, first_results


def test_reproduce_parameter_writes_valid_results(quad_run):
    out, first, _, _, first_results = quad_run
    assert first.returncode == 0, first.stderr
    run_dir = out / RUN_DIR
    results = json.loads(first_results)
    validate_results(results)
    _check_parameter_results(results, "quadratic")
    assert (run_dir / "results.md").exists() and (run_dir / "config.yaml").exists()
    assert not list(run_dir.glob("plots/*.png"))
    assert "rte" in first.stdout and "results.json" in first.stdout


def test_rerun_resumes_from_the_checkpoint(quad_run):
    out, first, second, stamp, first_results = quad_run
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    (ckpt,) = out.glob(CKPT)
    assert stamp is not None
    assert ckpt.stat().st_mtime_ns == stamp  # reused, not rewritten
    saved = json.loads(ckpt.read_text())
    assert set(main_methods()) <= set(saved["errors"])
    again = _load(out / RUN_DIR)
    before = {(r["group"], r["method"]): r["value"] for r in json.loads(first_results)["rows"]}
    after = {(r["group"], r["method"]): r["value"] for r in again["rows"]}
    assert after == pytest.approx(before)


@pytest.mark.slow  # a reproduce run with its plots, in a process: half a minute
def test_reproduce_with_plots_writes_pngs(tmp_path):
    res = taskextrap("reproduce", "parameter", "--profile", "tiny", "--family", "exp", "--out", tmp_path, "--quiet")
    assert res.returncode == 0, res.stderr
    run_dir = tmp_path / "parameter-paper-tiny-exp"
    _check_parameter_results(_load(run_dir), "exp")
    pngs = sorted(p.name for p in (run_dir / "plots").glob("*.png"))
    assert "exp-paper-predictions.png" in pngs and "exp-paper-embedding.png" in pngs
    for p in (run_dir / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000


def test_report_prints_a_table(quad_run, capsys):
    out, first, _, _, _ = quad_run
    assert first.returncode == 0
    with pytest.raises(SystemExit) as e:
        main(["report", str(out / RUN_DIR)])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "|" in text and "quadratic" in text and "parameter" in text
    for method in main_methods():
        assert method in text


def test_list_prints_experiments():
    res = taskextrap("list")
    assert res.returncode == 0, res.stderr
    for name in (
        "parameter",
        "parameter-ablations",
        "projectile",
        "length",
        "length-ablations",
        "composition",
        "composition-ablations",
    ):
        assert name in res.stdout.split(), name
    # the choices come from the registries: profiles per experiment, protocols, embeddings
    assert "profiles: quick, paper, tiny; takes: --device --embedding --family --protocol --test-seed" in res.stdout
    assert "embeddings: adapted, gradient, fisher" in res.stdout
    # the built-in task families a --family (or the Python API) can name
    assert (
        "families (parameter, parameter-ablations, parameter-multistep): quadratic, cubic, exp, sin_trend, "
        "tri_trend\n" in res.stdout
    )
    assert "ladders (length, length-ablations): polynomial\n" in res.stdout
    assert (
        "primitive sets (composition, composition-ablations, composition-depth3, composition-em): "
        "poly-sin-tanh (poly/sin/tanh), poly-sin-tanh-rescaled (poly/sin/tanh)"
    ) in res.stdout


def test_list_groups_the_experiments_taking_a_family_by_what_their_resolver_returns(monkeypatch, capsys):
    """The lists of experiments beside each kind of --family come from the registry: a new
    experiment taking a ladder is listed with the ladders, one of a new kind on a line of its own."""
    import dataclasses

    from taskextrap.experiments import catalogue, registry
    from taskextrap.tasks import Ladder

    class Shapes:
        """A new kind of family."""

    def get_shapes(spec: str) -> Shapes:
        return Shapes()

    def get_mystery(spec: str) -> "NoSuchName":  # noqa: F821 - an annotation the registry cannot resolve
        return None

    def get_ladder(spec: str) -> Ladder:
        return None

    catalogue.get_experiment("length")  # the built-ins registered before the stand-ins
    length = registry.EXPERIMENTS["length"]
    for name, resolver in (("ladder-too", get_ladder), ("shapes", get_shapes), ("mystery", get_mystery)):
        monkeypatch.setitem(
            registry.EXPERIMENTS, name, dataclasses.replace(length, name=name, family=resolver, in_all=False)
        )
    assert registry.family_kind(registry.EXPERIMENTS["shapes"]) is Shapes
    assert registry.family_kind(registry.EXPERIMENTS["mystery"]) is None
    assert registry.family_kind(registry.EXPERIMENTS["projectile"]) is None  # takes no --family
    with pytest.raises(SystemExit):
        main(["list"])
    out = capsys.readouterr().out
    assert "  ladders (length, length-ablations, ladder-too): polynomial\n" in out
    assert "  Shapes (shapes): none\n" in out and "  other objects (mystery): none\n" in out


def test_help_lists_every_experiment_and_cuts_nothing_off(capsys):
    from taskextrap.experiments.registry import EXPERIMENTS
    from taskextrap.experiments.catalogue import all_experiments

    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # undo the wrapping
    flat = text.replace("- ", "-")  # a flag or a word may be wrapped at its hyphen
    for name in all_experiments():
        assert f"{name} {EXPERIMENTS[name].description}" in flat, name
    assert "Takes: --anchors, --device, --embedding, --family, --protocol, --test-seed; --split dev." in flat
    assert "tiny: seconds, a plumbing check" in text  # the tests' profile is documented, not hidden
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    commands = top.split("Commands:")[1]
    assert "..." not in commands and all(c in commands for c in ("list", "report", "reproduce"))


def test_reproduce_help_groups_its_options_common_first_with_examples_and_times(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = capsys.readouterr().out
    headings = [
        "Examples:",
        "Profiles (wall times",
        "Common options:",
        "Re-running a saved run:",
        "The synthetic regimes' methods",
        "Language-model experiments",
        "Scaling out",
        "Experiments (EXPERIMENT",
    ]
    where = [text.index(h) for h in headings]
    assert where == sorted(where)
    assert "Other options" not in text  # every option is in a group

    def section(first, last):
        return text[text.index(first) : text.index(last)]

    common = section("Common options:", "Re-running a saved run:")
    for flag in (
        "--profile",
        "--seeds",
        "--seed",
        "--out",
        "--split",
        "--protocol",
        "--family",
        "--quiet",
        "--no-plots",
    ):
        assert f"  {flag} " in common, flag
    assert "--from" in section("Re-running a saved run:", "The synthetic regimes' methods")
    assert all(
        f in section("Language-model experiments", "Scaling out") for f in ("--model", "--dtype", "--load-in-4bit")
    )
    assert all(
        f in section("Scaling out", "Experiments (EXPERIMENT")
        for f in ("--device", "--executor", "--unit-cpus", "--shard")
    )
    assert "taskextrap reproduce parameter --profile tiny" in text and "taskextrap reproduce --from runs/" in text
    for profile in (
        "tiny   seconds per experiment: a plumbing check",
        "quick  1 seed: 1 to 20 min",
        "paper  the paper's sizes and seeds: 25 to 40 min",
    ):
        assert profile in text


def test_list_follows_the_paper_and_reproduce_all_keeps_its_order():
    """In a fresh process, as a user runs it (registration follows the import order, and a test
    process may have imported an experiment module first)."""
    from taskextrap.experiments.registry import EXPERIMENTS
    from taskextrap.experiments.catalogue import paper_order

    res = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        from taskextrap.cli import cli
        from taskextrap.experiments.catalogue import all_experiments
        cli.main(args=["list"], standalone_mode=False)
        print("all:", *all_experiments(in_all_only=True))
    """),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    lines, order = res.stdout.splitlines(), paper_order()  # (paper_order loads every experiment here too)
    listed = [line.split()[0] for line in lines if line[:1].strip() and line.split()[0] in EXPERIMENTS]
    assert listed == order and sorted(listed) == sorted(EXPERIMENTS)
    assert listed[:7] == [
        "projectile",
        "parameter",
        "parameter-ablations",
        "parameter-multistep",
        "length",
        "length-ablations",
        "composition",
    ]  # Fig. 1, Table 1 and its appendices, Table 2, Table 3
    assert listed.index("composition-em") < listed.index("parity") < listed.index("codeio") < listed.index("codeio-em")
    assert listed[-2:] == ["manifolds", "llm-geometry"]  # the appendix-only ones last
    # reproduce all keeps the order chosen for cache reuse (llm-geometry's search answers codeio's)
    assert lines[-1].split()[1:] == [
        "composition",
        "composition-ablations",
        "length",
        "length-ablations",
        "parameter",
        "parameter-ablations",
        "parameter-multistep",
        "parity",
        "llm-geometry",
        "codeio",
        "projectile",
        "composition-depth3",
        "composition-em",
        "manifolds",
    ]


@pytest.mark.slow
def test_reproduce_all_runs_every_experiment(tmp_path):
    res = taskextrap("reproduce", "all", "--profile", "tiny", "--out", tmp_path, "--quiet", "--no-plots", timeout=600)
    assert res.returncode == 0, res.stderr
    runs = sorted(p.parent.name for p in tmp_path.glob("*/results.json"))
    assert runs == sorted(
        f"{n}-paper-tiny"
        for n in (
            "parameter",
            "parameter-ablations",
            "parameter-multistep",
            "projectile",
            "length",
            "length-ablations",
            "composition",
            "composition-ablations",
            "composition-depth3",
            "composition-em",
            "manifolds",
            "parity",
            "codeio",
            "llm-geometry",
        )
    )  # not codeio-em (in_all=False): tests/llm
    for run in runs:
        validate_results(json.loads((tmp_path / run / "results.json").read_text()))
    # llm-geometry runs first and searches exhaustively; its saved scores answer codeio's bounded search
    search = next(tmp_path.glob("units/codeio-seed0-*/search"))
    assert sorted(p.name for p in search.glob("*.npy")) == ["scores-0000.npy"]


def test_reproduce_all_refuses_a_folder_of_another_configuration_before_the_first_experiment(
    tmp_path, capsys, monkeypatch
):
    """A folder of another configuration is refused before anything runs, not when its
    experiment's turn comes (hours into a paper run)."""
    import yaml

    from taskextrap.experiments import runner
    from taskextrap.experiments.catalogue import all_experiments

    last = all_experiments(in_all_only=True)[-1]
    folder = tmp_path / f"{last}-paper-tiny"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"run": {"experiment": last, "profile": "tiny", "anchors": 3}}))
    monkeypatch.setattr(runner, "run_experiment", lambda *a, **k: pytest.fail("an experiment ran first"))
    code, err = _run_main(["reproduce", "all", "--profile", "tiny", "--out", str(tmp_path), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {folder} holds a run with --anchors 3; this run has --anchors 2: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]


def _run_main(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    captured = capsys.readouterr()
    return e.value.code, captured.err


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["reproduce", "parameter", "--profile", "tiny", "--family", "nosuchfamily"], "unknown family"),
        (["reproduce", "nosuchexperiment", "--profile", "tiny"], "unknown experiment"),
        (["reproduce", "parameter", "--profile", "tiny", "--bogus"], "--bogus"),
        (["reproduce", "parameter", "--profile", "tiny", "--family", "nosuchmodule:x"], "nosuchmodule"),
        (["reproduce", "parameter", "--profile", "enormous"], "enormous"),
        # options an experiment does not take are refused, never silently ignored
        (
            ["reproduce", "projectile", "--profile", "tiny", "--protocol", "strict"],
            "projectile does not take --protocol",
        ),
        (["reproduce", "projectile", "--profile", "tiny", "--family", "x"], "projectile does not take --family"),
        (["reproduce", "length", "--profile", "tiny", "--anchors", "3"], "length does not take --anchors"),
        (["reproduce", "parity", "--profile", "tiny", "--embedding", "adapted"], "parity does not take --embedding"),
        (["reproduce", "parity", "--profile", "tiny", "--split-seed", "2"], "parity does not take --split-seed"),
        (["reproduce", "all", "--profile", "tiny", "--embedding", "adapted"], "does not take --embedding"),
        (["reproduce", "length", "--profile", "tiny", "--embedding", "gradiant"], "unknown embedding"),
        (["reproduce", "length", "--profile", "tiny", "--protocol", "lax"], "unknown protocol"),
        (["reproduce", "length", "--profile", "tiny", "--seeds", "10000000000000000000"], "--seeds must be"),
        (["reproduce", "length", "--profile", "tiny", "--seeds", "0"], "--seeds must be"),
        (["report", "/nonexistent/taskextrap-dir"], "not a directory"),
        (["frobnicate"], "frobnicate"),
        (["reproduce", "parity", "--profile", "tiny", "--dtype", "float16"], "--dtype float16 needs --device cuda"),
        (["report", "--", "{deep}"], "nested too deeply"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(argv, needle, capsys, tmp_path):
    if argv[0] == "reproduce":
        argv = [*argv, "--out", str(tmp_path), "--quiet", "--no-plots"]
    if "{deep}" in argv:  # a results file nested deeper than the JSON reader recurses
        deep = tmp_path / "deep.json"
        deep.write_text("[" * 100_000 + "]" * 100_000)
        argv = [str(deep) if a == "{deep}" else a for a in argv]
    code, err = _run_main(argv, capsys)
    assert code not in (0, None)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:") and needle in lines[0]
    assert not list(tmp_path.rglob("results.json"))


def test_an_empty_out_is_refused(capsys):
    code, err = _run_main(["reproduce", "projectile", "--profile", "tiny", "--out", ""], capsys)
    assert (
        code == 2
        and err.strip() == "error: --out is empty: name the folder the run directories go in (e.g. --out runs)"
    )


def test_bad_input_in_a_real_process(tmp_path):
    res = taskextrap("reproduce", "parameter", "--profile", "tiny", "--family", "nosuchmodule:x", "--out", tmp_path)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuchmodule" in lines[0], res.stderr
    assert "Traceback" not in res.stderr


USER_MODULE = textwrap.dedent("""
    import numpy as np
    from taskextrap.tasks import ParametricFamily


    def _wave(x, omega, A, c):
        return A * np.sin(omega * x) + c


    fam = ParametricFamily(
        name="userwave", fn=_wave, domain=(0.0, 10.0), shift="omega",
        fixed={"A": (0.5, 1.0), "c": (-0.5, 0.5)},
        regions={"F1_1": (0.5, 0.8), "F1_2": (0.8, 1.1), "F2": (1.1, 1.4)},
    )
    not_a_family = 3
""")


@pytest.mark.slow  # a user family through the CLI end to end: half a minute
def test_user_defined_family_from_the_command_line(tmp_path):
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    (mod_dir / "mymod_taskextrap_test.py").write_text(USER_MODULE)
    out = tmp_path / "runs"
    res = taskextrap(
        "reproduce",
        "parameter",
        "--profile",
        "tiny",
        "--family",
        "mymod_taskextrap_test:fam",
        "--out",
        out,
        "--quiet",
        "--no-plots",
        extra_path=mod_dir,
    )
    assert res.returncode == 0, res.stderr
    results = _load(out / "parameter-paper-tiny-mymod_taskextrap_test.fam")
    _check_parameter_results(results, "userwave")
    assert results["config"]["families"] == ["userwave"]
    assert results["config"]["family"] == "mymod_taskextrap_test:fam"  # the spec as given, to run it again
    assert list(out.glob("units/parameter-userwave-paper-seed0-*.json"))

    bad = taskextrap(
        "reproduce",
        "parameter",
        "--profile",
        "tiny",
        "--family",
        "mymod_taskextrap_test:not_a_family",
        "--out",
        out,
        "--quiet",
        "--no-plots",
        extra_path=mod_dir,
    )
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1 and "ParametricFamily" in bad.stderr


def test_model_options_reach_the_run_options(monkeypatch, tmp_path, capsys):
    from taskextrap.experiments import runner
    from taskextrap.llm import modeldir

    seen, checked = [], []
    monkeypatch.setattr(
        runner, "run_experiment", lambda name, given, out_dir: seen.append(runner.options_of(given).extra) or 1 / 0
    )
    monkeypatch.setattr(modeldir, "check_model_dir", checked.append)  # the model folder is checked before the run
    with pytest.raises(ZeroDivisionError):
        main(["reproduce", "codeio", "--model", str(tmp_path), "--dtype", "bfloat16", "--load-in-4bit", "--quiet"])
    assert seen == [{"model": str(tmp_path), "dtype": "bfloat16", "load_in_4bit": True}]
    assert [str(p) for p in checked] == [str(tmp_path)]  # resolved (a hub id would be its cache folder)
    with pytest.raises(ZeroDivisionError):
        main(["reproduce", "codeio", "--quiet"])
    assert seen[-1] == {}  # nothing given, nothing recorded: fingerprints stay as they were


def test_split_options_reach_run_options_and_run_dir(tmp_path):
    from taskextrap.experiments.registry import FRESH_TEST_SEED, RunOptions
    from taskextrap.experiments.runner import run_dir_name

    base = RunOptions(out=tmp_path)
    assert base.seed_of_tests == FRESH_TEST_SEED
    assert run_dir_name("parameter", base) == tmp_path / "parameter-paper-quick"
    dev = RunOptions(out=tmp_path, split="dev", test_seed=10_000)
    assert dev.seed_of_tests == 10_000
    assert run_dir_name("parameter", dev) == tmp_path / "parameter-paper-quick-dev-test10000"


def test_runs_of_two_models_into_one_out_get_their_own_directories(tmp_path, monkeypatch):
    from taskextrap.experiments.registry import RunOptions
    from taskextrap.experiments.runner import run_dir_name
    from taskextrap.llm import modeldir

    monkeypatch.setattr(modeldir, "model_fingerprint", lambda path: "ab" * 32 if "one" in str(path) else "cd" * 32)
    one = run_dir_name("parity", RunOptions(out=tmp_path, extra={"model": str(tmp_path / "one")}))
    two = run_dir_name("parity", RunOptions(out=tmp_path, extra={"model": str(tmp_path / "two"), "dtype": "bfloat16"}))
    assert one.name == "parity-paper-quick-modelone.abababab"
    assert two.name == "parity-paper-quick-modeltwo.cdcdcdcd-bfloat16"
    assert run_dir_name("parity", RunOptions(out=tmp_path)).name == "parity-paper-quick"  # default model: as before


def test_unknown_split_is_a_one_line_error():
    from taskextrap.errors import TaskextrapError
    from taskextrap.experiments.registry import RunOptions

    with pytest.raises(TaskextrapError, match="unknown split"):
        RunOptions(split="validation")


def test_an_out_that_cannot_be_written_fails_before_any_work(tmp_path, capsys, monkeypatch):
    from taskextrap.experiments import length

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(length, "run_unit", lambda *a, **k: pytest.fail("ran before checking --out"))
    code, err = _run_main(
        ["reproduce", "length", "--profile", "tiny", "--out", str(blocker / "sub"), "--quiet"], capsys
    )
    assert code == 2 and err.strip().startswith("error: cannot write to") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_an_out_that_is_a_file_says_so_in_one_line(tmp_path, capsys, command):
    blocker = tmp_path / "runs.txt"
    blocker.write_text("keep me")
    code, err = _run_main([command, "length", "--profile", "tiny", "--out", str(blocker), "--quiet"], capsys)
    assert code == 2
    assert err.strip() == f"error: --out {blocker} is a file: --out must be a folder (the run folders go inside it)"
    assert blocker.read_text() == "keep me"


def test_check_writable_names_the_folder_and_the_reason(tmp_path, monkeypatch):
    from taskextrap.experiments.runner import check_writable

    check_writable(tmp_path / "new" / "deep")
    assert (tmp_path / "new" / "deep").is_dir() and not list((tmp_path / "new" / "deep").iterdir())

    def refuse(*a, **k):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    with pytest.raises(TaskextrapError, match=r"cannot write to .*ro: Read-only file system"):
        check_writable(tmp_path / "ro")
