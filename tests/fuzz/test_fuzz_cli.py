"""Property-based fuzzing of the command line (Hypothesis).

Random argument lists made from the real options, random and hostile values, are given to the
CLI's entry point with the experiment runner replaced by a stand-in that stops the run where work
would begin. Every outcome must be one of: a help text (exit 0), the stand-in reached (the input
was valid), or one line ``error: ...`` on stderr with exit status 2 — never another exception,
never more than one line, never a hang (Hypothesis' deadline per case).
"""

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from taskextrap.cli import main  # noqa: E402
from taskextrap.experiments import runner  # noqa: E402

EXPERIMENTS = [
    "parameter",
    "parameter-ablations",
    "length",
    "length-ablations",
    "composition",
    "composition-ablations",
    "parity",
    "codeio",
    "projectile",
    "all",
]

# Values that hurt: empty, huge, negative, non-numeric, NaN-like, unicode, paths and separators.
NASTY = st.sampled_from(
    [
        "",
        " ",
        "-1",
        "0",
        "1",
        "2",
        "1.5",
        "nan",
        "inf",
        "-inf",
        "1e309",
        "10000000000000000000",
        "-10000000000000000000",
        "abc",
        "∞",
        "«»",
        "\t",
        "../..",
        "/",
        "0/0",
        "1/1",
        "2/2",
        "-1/2",
        "a/b",
        "3",
        "0/1",
        "1/2",
        "--",
        "-h",
        "None",
        "null",
        "'",
        '"',
        "\\",
        "%s",
        "{}",
    ]
)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
FAMILIES = st.sampled_from(
    [
        "quadratic",
        "cubic",
        "polynomial",
        "nosuch",
        ":quadratic",
        "quadratic:",
        ":",
        "math:sqrt",
        "builtins:input",
        "math:pi",
        "os:getcwd",
        "nosuchmodule_fz:x",
        "taskextrap.tasks.builtin:QUADRATIC",
        "taskextrap.tasks.ladder:POLYNOMIAL_LADDER",
        "taskextrap.tasks.builtin:PERIOD",
        "taskextrap:__version__",
        "a:b:c",
    ]
)

OPTIONS = {
    "--profile": st.one_of(st.sampled_from(["quick", "paper", "tiny", "tiny", "huge"]), NASTY),
    "--protocol": st.one_of(st.sampled_from(["paper", "strict", "lax"]), NASTY),
    "--family": st.one_of(FAMILIES, NASTY),
    "--seeds": st.one_of(NASTY, st.integers(-(10**25), 10**25).map(str)),
    "--embedding": st.one_of(st.sampled_from(["adapted", "gradient", "fisher", "gradiant"]), NASTY),
    "--anchors": st.one_of(NASTY, st.integers(-100, 100).map(str)),
    "--device": st.one_of(st.sampled_from(["cpu", "cuda", "tpu"]), NASTY),
    "--model": NASTY,
    "--dtype": st.one_of(st.sampled_from(["auto", "float32", "bfloat16", "float16", "int8"]), NASTY),
    "--shard": NASTY,
    "--split": st.one_of(st.sampled_from(["test", "dev", "train"]), NASTY),
    "--test-seed": st.one_of(NASTY, st.integers(-(10**25), 10**25).map(str)),
    "--split-seed": st.one_of(NASTY, st.integers(-(10**25), 10**25).map(str)),
}
FLAGS = ["--no-plots", "--quiet", "--load-in-4bit", "--bogus", "-x"]


class Reached(Exception):
    """The stand-in for the runner: the arguments were accepted and work would begin here."""


@st.composite
def reproduce_argv(draw):
    known = st.sampled_from(EXPERIMENTS)
    argv = ["reproduce", draw(st.one_of(known, known, known, NASTY, TEXT))]  # mostly a real experiment
    for name in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=4)):
        argv += [name, draw(OPTIONS[name])]
    argv += draw(st.lists(st.sampled_from(FLAGS), max_size=2))
    return argv[:2] + list(draw(st.permutations(argv[2:])))


WELL_FORMED = {
    "--profile": ["quick", "paper", "tiny"],
    "--protocol": ["paper", "strict"],
    "--family": ["quadratic", "polynomial", "taskextrap.tasks.builtin:QUADRATIC"],
    "--seeds": ["1", "3"],
    "--embedding": ["adapted", "gradient", "fisher"],
    "--anchors": ["1", "4"],
    "--split": ["test", "dev"],
    "--test-seed": ["0", "31337"],
    "--split-seed": ["0", "1"],
    "--shard": ["0/1", "1/2"],
}


@st.composite
def well_formed_argv(draw):
    """Real experiments and option values, in combinations an experiment may or may not take."""
    argv = ["reproduce", draw(st.sampled_from(EXPERIMENTS))]
    for name in draw(st.lists(st.sampled_from(sorted(WELL_FORMED)), max_size=3, unique=True)):
        argv += [name, draw(st.sampled_from(WELL_FORMED[name]))]
    return [*argv, "--quiet"]


ANY_ARGV = st.one_of(
    reproduce_argv(),
    well_formed_argv(),
    st.lists(
        st.one_of(NASTY, TEXT, st.sampled_from(["list", "report", "reproduce", "--version", "--help"])), max_size=4
    ),
    st.tuples(st.just("report"), st.lists(st.one_of(NASTY, TEXT), min_size=0, max_size=3)).map(lambda t: [t[0], *t[1]]),
)


@pytest.fixture
def stand_in_runner(monkeypatch):
    def reached(name, options, out_dir=None):
        raise Reached(name)

    monkeypatch.setattr(runner, "run_experiment", reached)


def outcome(argv, capsys, tmp_path) -> str:
    """Run the CLI on ``argv``; return 'help', 'valid' or 'error', failing the test on anything else."""
    if argv and argv[0] == "reproduce":
        argv = [*argv, "--out", str(tmp_path / "runs")]
    try:
        main(argv)
    except Reached:
        return "valid"
    except SystemExit as exc:
        err = capsys.readouterr().err
        if exc.code in (0, None):
            return "help"
        lines = err.strip().splitlines()
        assert exc.code == 2, (argv, exc.code, err)
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
        assert "Traceback" not in err
        return "error"
    raise AssertionError(f"main returned without exiting: {argv}")


@settings(
    max_examples=400, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True
)
@given(argv=ANY_ARGV)
def test_any_command_line_is_help_valid_or_one_line_error(argv, stand_in_runner, capsys, tmp_path):
    hypothesis.event(outcome(argv, capsys, tmp_path))


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["reproduce", "parameter", "--profile", "tiny"], "valid"),
        (["reproduce", "parameter", "--seeds", "10000000000000000000"], "error"),
        (["reproduce", "parameter", "--family", "builtins:input"], "error"),
        (["reproduce", "length", "--family", ":quadratic"], "error"),
        (["reproduce", "--help"], "help"),
    ],
)
def test_the_fuzz_oracle_can_tell_outcomes_apart(argv, expected, stand_in_runner, capsys, tmp_path):
    assert outcome(argv, capsys, tmp_path) == expected
