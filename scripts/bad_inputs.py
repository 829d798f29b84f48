"""A re-runnable catalogue of bad inputs (issue 16, "Nothing bad gets through"): what each one does.

    python scripts/bad_inputs.py --out benchmarks/results/bad-inputs.json --markdown docs/bad-inputs.md
    python scripts/bad_inputs.py --only cli-seeds --jobs 2 --timeout 60     # a few cases, table on stdout
    python scripts/bad_inputs.py --list                                      # the catalogue, nothing run
    python scripts/bad_inputs.py --render benchmarks/results/bad-inputs-before.json   # its table again

Three surfaces:

* ``cli``: a command line (``python -m taskextrap.cli ...``) run as a subprocess in a fresh
  temporary folder, with stdin closed (``/dev/null``) and a timeout. Files a case needs (a
  damaged copy of the shipped model, a results.json, user modules for ``--family``) are written
  there first; the folder ``mods/`` of user modules is on ``PYTHONPATH``.
* ``api``: a small Python snippet that starts from a valid call and breaks one argument, run
  in a fresh subprocess (``--api-worker ID``) after :data:`API_PRELUDE` (tiny libraries and
  estimators).
* ``damaged``: a finished tiny CLI run whose unit cache file is damaged, then re-run into a copy
  of the same ``--out``; or an SFT fine-tuning run interrupted after a checkpoint whose
  checkpoint files are damaged, then resumed (``--ckpt-worker ID``).

Outcomes:

* ``error``: refused cleanly. CLI: a non-zero exit with exactly one line on stderr, starting
  with ``error:``, and no traceback. API: a ``TaskextrapError``.
* ``traceback``: a traceback on stderr, or (API) any exception that is not a ``TaskextrapError``.
* ``unclean``: a non-zero exit without a traceback whose stderr is not one ``error:`` line
  (extra lines, another message, killed by a signal).
* ``hang``: no exit within the timeout (``--timeout``; twice it for a checkpoint case, which trains
  three times, and four times it for the two cases that run a whole parity experiment on a slow
  path when they are accepted).
* ``accepted``: exit 0 (API: no exception) for an input that should have been refused; an API
  result containing NaN or inf says so in its message.
* ``recovered`` / ``not recovered`` (damaged files): recovered means exit 0 (no exception), exactly
  one one-line warning (stderr ``warning: ...``) naming the damaged file, and numbers identical
  to the undamaged run's; the message of ``not recovered`` says which part failed.
* ``skipped (root)``: a permission case while running as root (permissions do not apply).

Every case records its message (first 200 characters) and wall seconds. ``--out`` writes JSON
atomically with the git commit, the date, the counts per surface and outcome and every case.
"""

import argparse
import concurrent.futures
import contextlib
import datetime
import json
import math
import os
import random
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SHIPPED_MODEL = SRC / "taskextrap" / "llm" / "models" / "parity"
OTHER_MODEL = SRC / "taskextrap" / "llm" / "models" / "codeio"
MARKER = "@@BAD-INPUT-RESULT@@"
MESSAGE_CHARS = 200
OUTCOMES = ("error", "traceback", "unclean", "hang", "accepted", "recovered", "not recovered", "skipped (root)")
SURFACES = ("cli", "api", "damaged")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class Case:
    """One bad input. ``run`` says how: cli ``{"args", "setup", "env"}``; api ``{"code"}``; damaged
    ``{"kind": "unit", "experiment", "damage"}`` or ``{"kind": "checkpoint", "damage"}``."""

    id: str
    surface: str
    description: str
    run: dict
    needs_permissions: bool = False  # a chmod case: meaningless as root
    timeout_factor: float = 1.0  # a case that runs a whole slow experiment when it is accepted gets longer

    def how(self) -> str:
        """How to run it, for people: the command line, the snippet or the damage and rerun."""
        r = self.run
        if self.surface == "cli":
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in r.get("env", {}).items())
            line = " ".join(x for x in (env, "taskextrap", shlex.join(r["args"])) if x)
            return line + (f"  [setup: {SETUPS[r['setup']][0]}]" if r.get("setup") else "")
        if self.surface == "api":
            return r["code"]
        if r["kind"] == "unit":
            return (
                f"unit of 'taskextrap {shlex.join(BASELINES[r['experiment']])}' "
                f"damaged: {UNIT_DAMAGES[r['damage']][0]}; rerun into a copy of its --out"
            )
        return f"SFT checkpoint ckpt-4 of a 6-step run damaged: {CKPT_DAMAGES[r['damage']][0]}; train resumed"


@dataclass
class Outcome:
    outcome: str
    message: str
    wall_s: float = 0.0
    detail: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- classification


def first_chars(text: str, n: int = MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _lines(text: str) -> list[str]:
    return [line for line in (text or "").splitlines() if line.strip()]


def _last_traceback_line(stderr: str) -> str:
    """The exception line of the last traceback on stderr (the type and the message)."""
    lines = _lines(stderr)
    idx = max(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    frames = [i for i in range(idx, len(lines)) if lines[i].startswith("  File ")]
    after = lines[(frames[-1] if frames else idx) + 1 :]
    rest = [i for i, line in enumerate(after) if not line.startswith(" ")]
    return " ".join(after[rest[0] :]) if rest else lines[-1]


def classify_cli(rc: int | None, stdout: str, stderr: str, timed_out: bool) -> Outcome:
    """The outcome of a command line that should have been refused."""
    if timed_out:
        return Outcome("hang", "no exit before the timeout")
    lines = _lines(stderr)
    if "Traceback (most recent call last)" in (stderr or ""):
        return Outcome("traceback", first_chars(_last_traceback_line(stderr)))
    if rc == 0:
        out = _lines(stdout)
        return Outcome(
            "accepted",
            first_chars(
                "exit 0" + (f"; stdout ends: {out[-1]}" if out else "") + (f"; stderr: {lines[-1]}" if lines else "")
            ),
        )
    if len(lines) == 1 and lines[0].startswith("error:"):
        return Outcome("error", first_chars(lines[0]))
    if rc is not None and rc < 0:
        return Outcome("unclean", first_chars(f"killed by signal {-rc}" + (f": {lines[-1]}" if lines else "")))
    return Outcome("unclean", first_chars(f"exit {rc}, {len(lines)} stderr lines: " + " / ".join(lines[-3:])))


def classify_api(report: dict | None, rc: int | None, stderr: str, timed_out: bool) -> Outcome:
    """The outcome of an API snippet from its worker's report (None: the worker died)."""
    if timed_out:
        return Outcome("hang", "no return before the timeout")
    if report is None:
        if "Traceback (most recent call last)" in (stderr or ""):
            return Outcome("traceback", first_chars("worker died: " + _last_traceback_line(stderr)))
        return Outcome("traceback", first_chars(f"worker died (exit {rc}): " + " / ".join(_lines(stderr)[-2:])))
    if report["status"] == "raised":
        text = f"{report['type']}: {report['message']}"
        if report["taskextrap"]:
            return Outcome(
                "error",
                first_chars(report["message"]),
                detail={} if "\n" not in report["message"].strip() else {"multi_line_message": True},
            )
        return Outcome("traceback", first_chars(text))
    note = "returned " + report.get("summary", "")
    if report.get("nonfinite"):
        note += "; contains NaN or inf"
    return Outcome("accepted", first_chars(note))


def classify_damaged(
    rc: int | None, stderr: str, timed_out: bool, name: str, same_numbers: bool | None, diff: str = ""
) -> Outcome:
    """Recovered when exit 0, stderr is one ``warning:`` line naming ``name`` and the numbers are
    the undamaged run's."""
    if timed_out:
        return Outcome("hang", "no exit before the timeout")
    lines = _lines(stderr)
    if "Traceback (most recent call last)" in (stderr or ""):
        return Outcome("not recovered", first_chars("traceback: " + _last_traceback_line(stderr)))
    if rc != 0:
        return Outcome("not recovered", first_chars(f"exit {rc}: " + " / ".join(lines[-2:])))
    problems = []
    if len(lines) != 1 or not lines[0].startswith("warning:"):
        problems.append(
            f"{len(lines)} stderr lines, expected one 'warning:' line"
            + (f" ({' / '.join(lines[:2])})" if lines else "")
        )
    elif name not in lines[0]:
        problems.append(f"the warning does not name {name}")
    if not same_numbers:
        problems.append("numbers differ from the undamaged run" + (f": {diff}" if diff else ""))
    if problems:
        return Outcome("not recovered", first_chars("; ".join(problems)))
    return Outcome("recovered", first_chars(lines[0]))


def nonfinite(value) -> bool:
    """Whether a returned value holds NaN or inf (arrays, numbers, lists, tuples, dicts)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fc" and not np.all(np.isfinite(value))
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return not np.isfinite(value)
    if isinstance(value, (list, tuple)):
        return any(nonfinite(v) for v in value)
    if isinstance(value, dict):
        return any(nonfinite(v) for v in value.values())
    return False


def summary(value) -> str:
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"array {value.shape} {value.dtype}"
    return first_chars(f"{type(value).__name__} {value!r}", 80)


# ----------------------------------------------------------------------------- CLI catalogue


def R(experiment: str, *extra: str, profile: str | None = "tiny", out: str | None = "{tmp}/out") -> list[str]:
    """``reproduce EXPERIMENT`` with the fast test profile, quietly, into the case's folder."""
    args = ["reproduce", experiment]
    if profile is not None:
        args += ["--profile", profile]
    args += ["--quiet", "--no-plots"]
    if out is not None:
        args += ["--out", out]
    return args + list(extra)


PQ = ("--family", "quadratic")  # the parameter experiment on one family: the cheapest run of it

USER_MODULES = {
    "bimods.py": '''
        """User modules for the --family cases of scripts/bad_inputs.py."""
        import numpy as np

        from taskextrap.tasks.family import ParametricFamily
        from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, Ladder

        REGIONS = {"F1_1": (0.5, 1.5), "F1_2": (1.5, 2.5), "F2": (2.5, 3.5)}
        AN_INT = 42
        A_STRING = "quadratic"
        A_LADDER = POLYNOMIAL_LADDER
        NAN_FAMILY = ParametricFamily("nanfam", lambda x, a, b: a * x + b + np.nan, (0.0, 20.0), {"b": (-1.0, 1.0)},
                                      "a", REGIONS)
        INF_FAMILY = ParametricFamily("inffam", lambda x, a, b: np.where(x > 10.0, np.inf, a * x + b), (0.0, 20.0),
                                      {"b": (-1.0, 1.0)}, "a", REGIONS)
        SHAPE_FAMILY = ParametricFamily("shapefam", lambda x, a, b: np.zeros((x.shape[0], x.shape[1] + 1)),
                                        (0.0, 20.0), {"b": (-1.0, 1.0)}, "a", REGIONS)
        CONSTANT_FAMILY = ParametricFamily("constfam", lambda x, a, b: 0.0 * x, (0.0, 20.0), {"b": (-1.0, 1.0)},
                                           "a", REGIONS)
        NO_F2 = ParametricFamily("nof2", lambda x, a, b: a * x + b, (0.0, 20.0), {"b": (-1.0, 1.0)}, "a",
                                 {"F1_1": (0.5, 1.5), "F1_2": (1.5, 2.5), "F3": (2.5, 3.5)})


        def FACTORY_RAISES():
            raise RuntimeError("the user's factory failed")


        NAN_LADDER = Ladder("nanladder", lambda x, p: np.full_like(x, np.nan) if p == 3 else (x / 5.0) ** p,
                            (-5.0, 5.0))
        SHAPE_LADDER = Ladder("shapeladder", lambda x, p: np.zeros(3), (-5.0, 5.0))
        NOSTEP_LADDER = Ladder("nostep", lambda x, p: (x / 5.0) ** p, (-5.0, 5.0), train_levels=(1, 3, 5),
                               test_level=6)
        ''',
    "bimods_raises.py": 'raise RuntimeError("this user module fails at import")\n',
    "bimods_syntax.py": "def broken(:\n    pass\n",
}


def _write_user_modules(tmp: Path) -> None:
    mods = tmp / "mods"
    mods.mkdir(exist_ok=True)
    for name, text in USER_MODULES.items():
        (mods / name).write_text(textwrap.dedent(text).lstrip())


def _model_copy(tmp: Path) -> Path:
    dst = tmp / "model"
    shutil.copytree(SHIPPED_MODEL, dst)
    return dst


def _setup_model_random_weights(tmp):
    m = _model_copy(tmp)
    size = (m / "model.safetensors").stat().st_size
    (m / "model.safetensors").write_bytes(random.Random(0).randbytes(size))


def _setup_model_truncated(tmp):
    m = _model_copy(tmp)
    data = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(data[: len(data) // 2])


def _setup_model_empty_weights(tmp):
    (_model_copy(tmp) / "model.safetensors").write_bytes(b"")


def _setup_model_only_config(tmp):
    (tmp / "model").mkdir()
    shutil.copy(SHIPPED_MODEL / "config.json", tmp / "model" / "config.json")


def _setup_model_garbage_config(tmp):
    (_model_copy(tmp) / "config.json").write_text("{this is not json")


def _setup_model_config_list(tmp):
    (_model_copy(tmp) / "config.json").write_text("[1, 2, 3]")


def _setup_model_wrong_vocab(tmp):
    m = _model_copy(tmp)
    cfg = json.loads((m / "config.json").read_text())
    cfg["vocab_size"] = 50
    (m / "config.json").write_text(json.dumps(cfg))


def _setup_model_other_weights(tmp):
    shutil.copy(OTHER_MODEL / "model.safetensors", _model_copy(tmp) / "model.safetensors")


def _setup_model_missing_tensors(tmp):
    from safetensors.numpy import load_file, save_file

    m = _model_copy(tmp)
    tensors = load_file(str(m / "model.safetensors"))
    keep = sorted(tensors)[0]
    save_file({keep: tensors[keep]}, str(m / "model.safetensors"), metadata={"format": "pt"})


HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # what the shipped models hold


def _setup_model_garbage_tokenizer(tmp):
    (_model_copy(tmp) / "tokenizer.json").write_text("garbage, not a tokenizer")


def _setup_model_tokenizer_wrong_alphabet(tmp):
    m = _model_copy(tmp)
    for name in HF_TOKENIZER_FILES:  # the layout of earlier versions: char_tokenizer.json only
        (m / name).unlink()
    (m / "char_tokenizer.json").write_text(json.dumps({"type": "taskextrap-char", "alphabet": 7}))


def _setup_model_no_tokenizer(tmp):
    m = _model_copy(tmp)
    for name in HF_TOKENIZER_FILES:
        (m / name).unlink()


def _setup_model_empty_dir(tmp):
    (tmp / "model").mkdir()


def _setup_file(tmp):
    (tmp / "afile").write_text("a file, not a folder\n")


def _setup_readonly(tmp):
    (tmp / "ro").mkdir()
    os.chmod(tmp / "ro", 0o555)


def _results(tmp, content, name="results.json"):
    (tmp / "run").mkdir(exist_ok=True)
    path = tmp / "run" / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


SETUPS = {
    "model_random_weights": (
        "{tmp}/model: the shipped parity model with random bytes as model.safetensors",
        _setup_model_random_weights,
    ),
    "model_truncated": ("{tmp}/model: the shipped model with model.safetensors cut to half", _setup_model_truncated),
    "model_empty_weights": (
        "{tmp}/model: the shipped model with an empty model.safetensors",
        _setup_model_empty_weights,
    ),
    "model_only_config": ("{tmp}/model: only the shipped config.json", _setup_model_only_config),
    "model_garbage_config": (
        "{tmp}/model: the shipped model with a config.json that is not JSON",
        _setup_model_garbage_config,
    ),
    "model_config_list": (
        "{tmp}/model: the shipped model with a config.json that is a JSON list",
        _setup_model_config_list,
    ),
    "model_wrong_vocab": (
        "{tmp}/model: the shipped model with vocab_size 50 in config.json (weights have 102)",
        _setup_model_wrong_vocab,
    ),
    "model_other_weights": (
        "{tmp}/model: the parity model's config with the codeio model's weights",
        _setup_model_other_weights,
    ),
    "model_missing_tensors": (
        "{tmp}/model: the shipped model whose model.safetensors holds one tensor",
        _setup_model_missing_tensors,
    ),
    "model_garbage_tokenizer": (
        "{tmp}/model: the shipped model with a garbage tokenizer.json",
        _setup_model_garbage_tokenizer,
    ),
    "model_tokenizer_wrong_alphabet": (
        "{tmp}/model: an earlier version's layout, char_tokenizer.json only, whose alphabet is the number 7",
        _setup_model_tokenizer_wrong_alphabet,
    ),
    "model_no_tokenizer": (
        "{tmp}/model: the shipped model without its tokenizer files (and no other tokenizer)",
        _setup_model_no_tokenizer,
    ),
    "model_empty_dir": ("{tmp}/model: an empty folder", _setup_model_empty_dir),
    "model": ("{tmp}/model: a copy of the shipped parity model (valid)", _model_copy),
    "file": ("{tmp}/afile: a plain file", _setup_file),
    "readonly": ("{tmp}/ro: a folder with mode 0555", _setup_readonly),
    "run_empty": ("{tmp}/run: an empty folder", lambda tmp: (tmp / "run").mkdir()),
    "results_garbage": ("{tmp}/run/results.json: not JSON", lambda tmp: _results(tmp, "{not json at all")),
    "results_empty": ("{tmp}/run/results.json: an empty file", lambda tmp: _results(tmp, "")),
    "results_binary": (
        "{tmp}/run/results.json: random bytes",
        lambda tmp: _results(tmp, random.Random(1).randbytes(512)),
    ),
    "results_no_rows": (
        "{tmp}/run/results.json: a results file with no rows",
        lambda tmp: _results(
            tmp, json.dumps({"experiment": "length", "protocol": "paper", "profile": "tiny", "seeds": [0], "rows": []})
        ),
    ),
    "results_list": ("{tmp}/run/results.json: a JSON list", lambda tmp: _results(tmp, "[1, 2, 3]")),
    "results_rows_string": (
        "{tmp}/run/results.json: rows is a string",
        lambda tmp: _results(tmp, json.dumps({"experiment": "length", "rows": "abc"})),
    ),
    "results_bad_row": (
        "{tmp}/run/results.json: one row with a text value and no group/method",
        lambda tmp: _results(tmp, json.dumps({"experiment": "length", "rows": [{"value": "abc"}]})),
    ),
    "results_other_json": (
        "{tmp}/run/other.json: a JSON file that is not a results file",
        lambda tmp: _results(tmp, json.dumps({"name": "pkg", "version": "1.0"}), "other.json"),
    ),
    "results_deep": ("{tmp}/run/results.json: 100000 nested '['", lambda tmp: _results(tmp, "[" * 100_000)),
}


def _cli(id, description, args, setup=None, env=None, needs_permissions=False, timeout_factor=1.0) -> Case:
    return Case(
        id,
        "cli",
        description,
        {"args": list(args), "setup": setup, "env": env or {}},
        needs_permissions,
        timeout_factor,
    )


CLI_CASES = [
    # -- commands, experiments and options
    _cli("cli-unknown-experiment", "unknown experiment", R("nosuch")),
    _cli("cli-empty-experiment", "empty experiment name", R("")),
    _cli("cli-missing-experiment", "reproduce without an experiment", ["reproduce"]),
    _cli("cli-unknown-command", "unknown command", ["frobnicate"]),
    _cli("cli-unknown-option", "unknown option", R("length", "--bogus", "1")),
    _cli("cli-option-missing-value", "an option without its value", R("length", "--seeds")),
    _cli("cli-list-extra-args", "list with extra arguments", ["list", "extra", "args"]),
    _cli("cli-profile-unknown", "unknown --profile", R("length", profile="huge")),
    _cli("cli-profile-empty", "empty --profile", R("length", profile="")),
    _cli("cli-protocol-unknown", "unknown --protocol", R("parameter", *PQ, "--protocol", "lenient")),
    _cli("cli-protocol-empty", "empty --protocol", R("parameter", *PQ, "--protocol", "")),
    _cli(
        "cli-protocol-not-taken",
        "--protocol for an experiment without a protocol table",
        R("projectile", "--protocol", "strict"),
    ),
    _cli("cli-embedding-unknown", "unknown --embedding", R("parameter", *PQ, "--embedding", "nope")),
    _cli("cli-embedding-empty", "empty --embedding", R("parameter", *PQ, "--embedding", "")),
    _cli("cli-embedding-not-taken", "--embedding for parity (takes none)", R("parity", "--embedding", "gradient")),
    _cli("cli-split-unknown", "unknown --split", R("length", "--split", "train")),
    _cli("cli-device-unknown", "unknown --device", R("parity", "--device", "tpu")),
    _cli("cli-device-cuda-without-cuda", "--device cuda on a machine without CUDA", R("parity", "--device", "cuda")),
    _cli("cli-device-bad-index", "--device with a malformed GPU index", R("parameter", *PQ, "--device", "cuda:x")),
    _cli("cli-device-missing-gpu", "--device for a GPU past the last one", R("length", "--device", "cuda:7")),
    _cli("cli-seeds-zero", "--seeds 0", R("projectile", "--seeds", "0")),
    _cli("cli-seeds-negative", "--seeds -1", R("projectile", "--seeds", "-1")),
    _cli("cli-seeds-huge", "--seeds 10000000000000000000", R("projectile", "--seeds", "10000000000000000000")),
    _cli("cli-seeds-over-bound", "--seeds 1001 (one over the bound)", R("projectile", "--seeds", "1001")),
    _cli("cli-seeds-text", "--seeds abc", R("projectile", "--seeds", "abc")),
    _cli("cli-seeds-float", "--seeds 1.5", R("projectile", "--seeds", "1.5")),
    _cli("cli-seeds-empty", "--seeds ''", R("projectile", "--seeds", "")),
    _cli("cli-anchors-zero", "--anchors 0", R("parameter", *PQ, "--anchors", "0")),
    _cli("cli-anchors-17", "--anchors 17 (over 16)", R("parameter", *PQ, "--anchors", "17")),
    _cli("cli-anchors-text", "--anchors x", R("parameter", *PQ, "--anchors", "x")),
    _cli("cli-anchors-negative", "--anchors -1", R("parameter", *PQ, "--anchors", "-1")),
    _cli("cli-anchors-not-taken", "--anchors for length (not taken)", R("length", "--anchors", "3")),
    _cli("cli-shard-no-slash", "--shard 3", R("codeio", "--shard", "3")),
    _cli("cli-shard-index-too-big", "--shard 2/2", R("codeio", "--shard", "2/2")),
    _cli("cli-shard-negative", "--shard -1/2", R("codeio", "--shard", "-1/2")),
    _cli("cli-shard-text", "--shard a/b", R("codeio", "--shard", "a/b")),
    _cli("cli-shard-zero-count", "--shard 0/0", R("codeio", "--shard", "0/0")),
    _cli("cli-shard-three-parts", "--shard 1/2/3", R("codeio", "--shard", "1/2/3")),
    _cli("cli-shard-empty", "--shard ''", R("codeio", "--shard", "")),
    _cli("cli-shard-with-all", "--shard 0/2 with 'all'", R("all", "--shard", "0/2")),
    _cli("cli-shard-not-taken", "--shard 0/2 for length (not taken)", R("length", "--shard", "0/2")),
    _cli("cli-env-world-size-text", "WORLD_SIZE=abc in the environment", R("codeio"), env={"WORLD_SIZE": "abc"}),
    _cli(
        "cli-env-rank-too-big",
        "RANK=5 WORLD_SIZE=2 in the environment",
        R("codeio"),
        env={"RANK": "5", "WORLD_SIZE": "2"},
    ),
    _cli(
        "cli-env-slurm-ntasks-text",
        "SLURM_NTASKS=x in the environment",
        R("codeio"),
        env={"SLURM_PROCID": "0", "SLURM_NTASKS": "x"},
    ),
    _cli(
        "cli-env-slurm-tasks-on-parameter",
        "srun -n 2 (SLURM_PROCID=1 SLURM_NTASKS=2) on parameter, which runs in one process",
        R("parameter", *PQ),
        env={"SLURM_PROCID": "1", "SLURM_NTASKS": "2"},
    ),
    # -- executors, one seed, sweeps
    _cli("cli-seed-negative", "--seed -1", R("parameter", *PQ, "--seed", "-1")),
    _cli("cli-seed-huge", "--seed 1000", R("parameter", *PQ, "--seed", "1000")),
    _cli("cli-seed-and-seeds", "--seed 1 with --seeds 2", R("parameter", *PQ, "--seed", "1", "--seeds", "2")),
    _cli("cli-executor-unknown", "--executor dask", R("parameter", *PQ, "--executor", "dask")),
    _cli(
        "cli-executor-ray-with-shard",
        "--executor ray with --shard 0/2",
        R("codeio", "--executor", "ray", "--shard", "0/2"),
    ),
    _cli("cli-unit-cpus-zero", "--unit-cpus 0", R("parameter", *PQ, "--unit-cpus", "0")),
    _cli(
        "cli-sweep-unknown-experiment",
        "sweep of an unknown experiment",
        ["sweep", "nosuch", "--profile", "tiny", "--out", "{tmp}/out"],
    ),
    _cli(
        "cli-sweep-unknown-split",
        "sweep --splits train",
        ["sweep", "parameter", "--splits", "test,train", "--profile", "tiny", "--out", "{tmp}/out"],
    ),
    _cli(
        "cli-sweep-unknown-protocol",
        "sweep --protocols paper,bogus",
        ["sweep", "parameter", "--protocols", "paper,bogus", "--profile", "tiny", "--out", "{tmp}/out"],
    ),
    _cli("cli-sweep-no-experiment", "sweep with no experiment", ["sweep", "--profile", "tiny", "--out", "{tmp}/out"]),
    _cli(
        "cli-model-hub-offline",
        "--model owner/name (a hub id) not in the cache, HF_HUB_OFFLINE=1",
        R("parity", "--model", "nosuch-owner/nosuch-model"),
        env={"HF_HUB_CACHE": "/nonexistent/hf-cache"},
    ),
    _cli("cli-model-hub-bad-id", "--model a/b/c/d", R("parity", "--model", "a/b/c/d")),
    _cli("cli-test-seed-text", "--test-seed abc", R("length", "--test-seed", "abc")),
    _cli("cli-test-seed-float", "--test-seed 1.5", R("length", "--test-seed", "1.5")),
    _cli("cli-test-seed-not-taken", "--test-seed for projectile (not taken)", R("projectile", "--test-seed", "5")),
    _cli("cli-split-seed-text", "--split-seed x", R("codeio", "--split-seed", "x")),
    _cli("cli-split-seed-float", "--split-seed 0.5", R("codeio", "--split-seed", "0.5")),
    _cli("cli-split-seed-not-taken", "--split-seed for length (not taken)", R("length", "--split-seed", "3")),
    # -- --out
    _cli("cli-out-is-file", "--out is a file", R("projectile", out="{tmp}/afile"), setup="file"),
    _cli("cli-out-under-file", "--out under a file", R("projectile", out="{tmp}/afile/sub"), setup="file"),
    _cli(
        "cli-out-readonly",
        "--out under a read-only folder",
        R("projectile", out="{tmp}/ro/out"),
        setup="readonly",
        needs_permissions=True,
    ),
    _cli("cli-out-dev-null", "--out /dev/null", R("projectile", out="/dev/null")),
    _cli("cli-out-empty", "--out '' (the current folder)", R("projectile", out="")),
    # -- --family
    _cli("cli-family-unknown", "--family with an unknown name", R("parameter", "--family", "nosuch")),
    _cli("cli-family-empty-module", "--family :quadratic (empty module)", R("parameter", "--family", ":quadratic")),
    _cli("cli-family-empty-attr", "--family math: (empty attribute)", R("parameter", "--family", "math:")),
    _cli("cli-family-no-module", "--family nosuchmodule:x", R("parameter", "--family", "nosuchmodule:x")),
    _cli("cli-family-no-attr", "--family math:nosuch", R("parameter", "--family", "math:nosuch")),
    _cli(
        "cli-family-callable-sqrt",
        "--family math:sqrt (a callable that must never be called)",
        R("parameter", "--family", "math:sqrt"),
    ),
    _cli(
        "cli-family-input",
        "--family builtins:input (would wait on stdin)",
        R("parameter", "--family", "builtins:input"),
    ),
    _cli(
        "cli-family-exit", "--family builtins:exit (a callable that exits)", R("parameter", "--family", "builtins:exit")
    ),
    _cli(
        "cli-family-getpid", "--family os:getpid (a callable returning an int)", R("parameter", "--family", "os:getpid")
    ),
    _cli(
        "cli-family-import-raises",
        "--family of a module that raises at import",
        R("parameter", "--family", "bimods_raises:FAM"),
    ),
    _cli(
        "cli-family-syntax-error",
        "--family of a module with a syntax error",
        R("parameter", "--family", "bimods_syntax:FAM"),
    ),
    _cli("cli-family-int", "--family module:attr that is an int", R("parameter", "--family", "bimods:AN_INT")),
    _cli("cli-family-string", "--family module:attr that is a string", R("parameter", "--family", "bimods:A_STRING")),
    _cli(
        "cli-family-ladder-to-parameter",
        "--family a Ladder given to parameter",
        R("parameter", "--family", "bimods:A_LADDER"),
    ),
    _cli(
        "cli-family-factory-raises",
        "--family a factory that raises",
        R("parameter", "--family", "bimods:FACTORY_RAISES"),
    ),
    _cli("cli-family-nan", "--family whose formula returns NaN", R("parameter", "--family", "bimods:NAN_FAMILY")),
    _cli(
        "cli-family-inf",
        "--family whose formula returns inf on half the domain",
        R("parameter", "--family", "bimods:INF_FAMILY"),
    ),
    _cli(
        "cli-family-wrong-shape",
        "--family whose formula returns the wrong shape",
        R("parameter", "--family", "bimods:SHAPE_FAMILY"),
    ),
    _cli(
        "cli-family-constant",
        "--family whose outputs are all 0 (no spread)",
        R("parameter", "--family", "bimods:CONSTANT_FAMILY"),
    ),
    _cli("cli-family-no-f2", "--family without an F2 region", R("parameter", "--family", "bimods:NO_F2")),
    _cli("cli-family-not-taken", "--family for projectile (not taken)", R("projectile", "--family", "quadratic")),
    _cli(
        "cli-composition-family-parametric",
        "composition --family quadratic (a parameter family)",
        R("composition", "--family", "quadratic"),
    ),
    _cli("cli-family-with-all", "--family quadratic with 'all'", R("all", "--family", "quadratic")),
    _cli(
        "cli-length-family-builtin-name",
        "length --family quadratic (a parameter family)",
        R("length", "--family", "quadratic"),
    ),
    _cli(
        "cli-length-family-not-ladder",
        "length --family module:attr that is a ParametricFamily",
        R("length", "--family", "bimods:NAN_FAMILY"),
    ),
    _cli(
        "cli-length-ladder-nan",
        "length with a Ladder whose basis returns NaN",
        R("length", "--family", "bimods:NAN_LADDER"),
    ),
    _cli(
        "cli-length-ladder-shape",
        "length with a Ladder whose basis has the wrong shape",
        R("length", "--family", "bimods:SHAPE_LADDER"),
    ),
    _cli(
        "cli-length-ladder-no-step",
        "length with a Ladder without an extension step in training",
        R("length", "--family", "bimods:NOSTEP_LADDER"),
    ),
    # -- --model, --dtype, --load-in-4bit
    _cli("cli-model-missing", "--model a folder that does not exist", R("parity", "--model", "{tmp}/nosuch")),
    _cli("cli-model-file", "--model a file", R("parity", "--model", "{tmp}/afile"), setup="file"),
    _cli(
        "cli-model-empty-dir", "--model an empty folder", R("parity", "--model", "{tmp}/model"), setup="model_empty_dir"
    ),
    _cli(
        "cli-model-random-weights",
        "--model with random bytes as model.safetensors",
        R("parity", "--model", "{tmp}/model"),
        setup="model_random_weights",
    ),
    _cli(
        "cli-model-truncated-weights",
        "--model with truncated weights",
        R("parity", "--model", "{tmp}/model"),
        setup="model_truncated",
    ),
    _cli(
        "cli-model-empty-weights",
        "--model with an empty model.safetensors",
        R("parity", "--model", "{tmp}/model"),
        setup="model_empty_weights",
    ),
    _cli(
        "cli-model-only-config",
        "--model with only config.json",
        R("parity", "--model", "{tmp}/model"),
        setup="model_only_config",
    ),
    _cli(
        "cli-model-garbage-config",
        "--model with a garbage config.json",
        R("parity", "--model", "{tmp}/model"),
        setup="model_garbage_config",
    ),
    _cli(
        "cli-model-config-list",
        "--model whose config.json is a list",
        R("parity", "--model", "{tmp}/model"),
        setup="model_config_list",
    ),
    _cli(
        "cli-model-wrong-vocab",
        "--model whose config disagrees with its weights",
        R("parity", "--model", "{tmp}/model"),
        setup="model_wrong_vocab",
    ),
    _cli(
        "cli-model-other-weights",
        "--model with another model's weights",
        R("parity", "--model", "{tmp}/model"),
        setup="model_other_weights",
    ),
    _cli(
        "cli-model-missing-tensors",
        "--model whose weights file lacks most tensors",
        R("parity", "--model", "{tmp}/model"),
        setup="model_missing_tensors",
        timeout_factor=4.0,
    ),
    _cli(
        "cli-model-garbage-tokenizer",
        "--model with a garbage tokenizer file",
        R("parity", "--model", "{tmp}/model"),
        setup="model_garbage_tokenizer",
    ),
    _cli(
        "cli-model-tokenizer-bad-alphabet",
        "--model whose tokenizer alphabet is a number",
        R("parity", "--model", "{tmp}/model"),
        setup="model_tokenizer_wrong_alphabet",
    ),
    _cli(
        "cli-model-no-tokenizer",
        "--model without any tokenizer file",
        R("parity", "--model", "{tmp}/model"),
        setup="model_no_tokenizer",
    ),
    _cli(
        "cli-model-not-taken",
        "--model for length (not an LLM experiment)",
        R("length", "--model", "{tmp}/model"),
        setup="model",
    ),
    _cli("cli-dtype-unknown", "--dtype int8 (not a choice)", R("parity", "--dtype", "int8")),
    _cli(
        "cli-dtype-float16-cpu", "--dtype float16 without CUDA", R("parity", "--dtype", "float16"), timeout_factor=4.0
    ),
    _cli("cli-load-in-4bit-cpu", "--load-in-4bit without CUDA", R("parity", "--load-in-4bit")),
    _cli("cli-dtype-not-taken", "--dtype for length (not taken)", R("length", "--dtype", "float32")),
    # -- report
    _cli("cli-report-no-args", "report without a folder", ["report"]),
    _cli("cli-report-missing-dir", "report a folder that does not exist", ["report", "{tmp}/nosuch"]),
    _cli("cli-report-no-results", "report a folder without results.json", ["report", "{tmp}/run"], setup="run_empty"),
    _cli(
        "cli-report-garbage", "report a results.json that is not JSON", ["report", "{tmp}/run"], setup="results_garbage"
    ),
    _cli("cli-report-empty-file", "report an empty results.json", ["report", "{tmp}/run"], setup="results_empty"),
    _cli("cli-report-binary", "report a results.json of random bytes", ["report", "{tmp}/run"], setup="results_binary"),
    _cli("cli-report-no-rows", "report a results.json with no rows", ["report", "{tmp}/run"], setup="results_no_rows"),
    _cli("cli-report-list", "report a results.json that is a list", ["report", "{tmp}/run"], setup="results_list"),
    _cli(
        "cli-report-rows-string",
        "report a results.json whose rows is a string",
        ["report", "{tmp}/run"],
        setup="results_rows_string",
    ),
    _cli(
        "cli-report-bad-row",
        "report a results.json with a malformed row",
        ["report", "{tmp}/run"],
        setup="results_bad_row",
    ),
    _cli(
        "cli-report-other-json",
        "report a JSON file that is not a results file",
        ["report", "{tmp}/run/other.json"],
        setup="results_other_json",
    ),
    _cli(
        "cli-report-deep-json",
        "report a results.json nested 100000 deep",
        ["report", "{tmp}/run"],
        setup="results_deep",
    ),
    _cli("cli-report-a-file", "report a plain text file", ["report", "{tmp}/afile"], setup="file"),
]


# ----------------------------------------------------------------------------- API catalogue

API_PRELUDE = '''
import numpy as np

from taskextrap import CompositionRTE, Ladder, LadderSet, LengthRTE, ParametricFamily, PrimitiveSet, RTE
from taskextrap.operators.train import TrainConfig
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, ObservationProtocol, TaskSet, get_protocol
from taskextrap.tasks.ladder import POLYNOMIAL_LADDER
from taskextrap.tasks.primitives import PAPER_SPLIT, CompositionSet, PairSplit

QUAD = PARAMETER_FAMILIES["quadratic"]
REGIONS = {"F1_1": (0.5, 1.5), "F1_2": (1.5, 2.5), "F2": (2.5, 3.5)}
TINY = TrainConfig(steps=8, batch=256, eval_every=4)
TINY_DEC = TrainConfig(steps=8, batch=64, eval_every=4)


def quad_library(n=8, family=QUAD):
    return TaskSet.sample(family, {r: n for r in family.train_regions}, rng(0, "bad-inputs-library"))


def quad_targets(n=4, family=QUAD, protocol="paper"):
    targets = TaskSet.sample(family, {"F2": n}, rng(0, "bad-inputs-targets"))
    return get_protocol(protocol).draw(targets, 1, rng(1, "bad-inputs-draws"))


def tiny_rte(**kw):  # Strategy A, as the catalogue's cases were written (RTE's default is the objective)
    return RTE(**{"n_pairs": 200, "train": TINY, "seed": 0, "search": "proxy", "verbose": False, **kw})


def fitted_rte(**kw):
    return tiny_rte(**kw).fit(quad_library())


def run_parameter(model, library=None, obs=None):
    """What a user does: fit on a library, predict the targets' queries from their contexts."""
    library = quad_library() if library is None else library
    obs = quad_targets() if obs is None else obs
    return model.fit(library).predict(obs.ctx_x, obs.ctx_y, obs.qry_x)


def ladder_library(n=6, ladder=POLYNOMIAL_LADDER):
    return LadderSet.sample_library(ladder, n, rng(0, "bad-inputs-ladder"))


def tiny_length(**kw):
    return LengthRTE(
        **{"n_pairs": 200, "k": 4, "train": TINY, "decomposer_train": TINY_DEC, "seed": 0, "verbose": False, **kw}
    )


def length_targets(model, library):
    g = np.random.default_rng(5)
    top = np.flatnonzero(library.level == library.level.max())[:3]
    return model.resolved("protocol").draw(LadderSet.extend(library, top, g), 2, g)


def run_length(model, library=None):
    library = ladder_library() if library is None else library
    obs = length_targets(model, library)
    return model.fit(library).predict(obs.ctx_x, obs.ctx_y, obs.qry_x)


def primitives(n=8):
    return PrimitiveSet.sample(n_per_family=n, rng=rng(0, "bad-inputs-prims"))


def tiny_composition(**kw):
    return CompositionRTE(
        **{"n_pairs": 150, "k": 3, "train": TINY, "decomposer_train": TINY_DEC, "seed": 0, "verbose": False, **kw}
    )


def composition_targets(model, prims):
    targets = CompositionSet.sample(prims, PAPER_SPLIT.test, 4, np.random.default_rng(3))
    return model.resolved("protocol").draw(targets, 1, np.random.default_rng(4))


def run_composition(model, prims=None):
    prims = primitives() if prims is None else prims
    obs = composition_targets(model, prims)
    return model.fit(prims).predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
'''


def _api(id, description, code) -> Case:
    return Case(id, "api", description, {"code": textwrap.dedent(code).strip()})


API_CASES = [
    # -- RTE (parameter regime): constructor arguments
    _api("api-rte-anchors-float", "RTE(anchors=2.5)", "result = run_parameter(tiny_rte(anchors=2.5))"),
    _api("api-rte-anchors-list", "RTE(anchors=[2])", "result = run_parameter(tiny_rte(anchors=[2]))"),
    _api("api-rte-anchors-text", "RTE(anchors='2')", "result = run_parameter(tiny_rte(anchors='2'))"),
    _api(
        "api-rte-anchors-over-library",
        "RTE(anchors=1000) on a 16-task library",
        "result = run_parameter(tiny_rte(anchors=1000))",
    ),
    _api("api-rte-n-pairs-negative", "RTE(n_pairs=-5)", "result = run_parameter(tiny_rte(n_pairs=-5))"),
    _api("api-rte-n-pairs-zero", "RTE(n_pairs=0)", "result = run_parameter(tiny_rte(n_pairs=0))"),
    _api("api-rte-library-draws-zero", "RTE(library_draws=0)", "result = run_parameter(tiny_rte(library_draws=0))"),
    _api(
        "api-rte-library-draws-negative", "RTE(library_draws=-1)", "result = run_parameter(tiny_rte(library_draws=-1))"
    ),
    _api("api-rte-embedding-unknown", "RTE(embedding='nope')", "result = run_parameter(tiny_rte(embedding='nope'))"),
    _api("api-rte-embedding-none", "RTE(embedding=None)", "result = run_parameter(tiny_rte(embedding=None))"),
    _api("api-rte-protocol-int", "RTE(protocol=42)", "result = run_parameter(tiny_rte(protocol=42))"),
    _api(
        "api-rte-val-fraction-above-one", "RTE(val_fraction=1.5)", "result = run_parameter(tiny_rte(val_fraction=1.5))"
    ),
    _api(
        "api-rte-val-fraction-negative", "RTE(val_fraction=-0.1)", "result = run_parameter(tiny_rte(val_fraction=-0.1))"
    ),
    _api("api-rte-embed-dim-zero", "RTE(embed_dim=0)", "result = run_parameter(tiny_rte(embed_dim=0))"),
    _api("api-rte-n-near-zero", "RTE(n_near=0)", "result = run_parameter(tiny_rte(n_near=0))"),
    _api(
        "api-rte-near-fraction-nan",
        "RTE(near_fraction=nan)",
        "result = run_parameter(tiny_rte(near_fraction=float('nan')))",
    ),
    _api("api-rte-seed-text", "RTE(seed='abc')", "result = run_parameter(tiny_rte(seed='abc'))"),
    _api("api-rte-seed-float", "RTE(seed=0.5)", "result = run_parameter(tiny_rte(seed=0.5))"),
    # -- TrainConfig
    _api(
        "api-train-batch-zero",
        "TrainConfig(batch=0)",
        "result = run_parameter(tiny_rte(train=TrainConfig(steps=8, batch=0, eval_every=4)))",
    ),
    _api(
        "api-train-steps-zero",
        "TrainConfig(steps=0)",
        "result = run_parameter(tiny_rte(train=TrainConfig(steps=0, batch=256, eval_every=4)))",
    ),
    _api(
        "api-train-steps-negative",
        "TrainConfig(steps=-3)",
        "result = run_parameter(tiny_rte(train=TrainConfig(steps=-3, batch=256, eval_every=4)))",
    ),
    _api(
        "api-train-lr-nan",
        "TrainConfig(lr=nan)",
        "result = run_parameter(tiny_rte(train=TrainConfig(steps=8, batch=256, lr=float('nan'), eval_every=4)))",
    ),
    _api(
        "api-train-lr-negative",
        "TrainConfig(lr=-1)",
        "result = run_parameter(tiny_rte(train=TrainConfig(steps=8, batch=256, lr=-1.0, eval_every=4)))",
    ),
    _api(
        "api-train-eval-every-zero",
        "TrainConfig(eval_every=0)",
        "result = run_parameter(tiny_rte(train=TrainConfig(steps=8, batch=256, eval_every=0)))",
    ),
    _api(
        "api-train-dict",
        "RTE(train={'steps': 5}) (a dict, not a TrainConfig)",
        "result = run_parameter(tiny_rte(train={'steps': 5}))",
    ),
    # -- fit: the library
    _api("api-fit-list", "RTE.fit([1, 2, 3]) (a list instead of a library)", "result = tiny_rte().fit([1, 2, 3])"),
    _api("api-fit-none", "RTE.fit(None)", "result = tiny_rte().fit(None)"),
    _api(
        "api-fit-empty-library",
        "RTE.fit on a library of zero tasks",
        "result = run_parameter(tiny_rte(), quad_library().subset(np.array([], dtype=int)))",
    ),
    _api(
        "api-fit-one-task",
        "RTE.fit on a one-task library",
        "result = run_parameter(tiny_rte(), quad_library().subset(np.array([0])))",
    ),
    _api(
        "api-fit-two-tasks",
        "RTE.fit on a two-task library",
        "result = run_parameter(tiny_rte(), quad_library().subset(np.array([0, 8])))",
    ),
    _api(
        "api-fit-held-out-tasks",
        "RTE.fit on a library holding F2 (held-out) tasks",
        "result = run_parameter(tiny_rte(), TaskSet.sample(QUAD, {'F1_1': 8, 'F2': 8}, rng(0)))",
    ),
    _api(
        "api-fit-nan-params",
        "RTE.fit on a library whose parameters are NaN",
        """
         lib = quad_library()
         params = lib.params.copy()
         params[3, 1] = np.nan
         result = run_parameter(tiny_rte(), TaskSet(QUAD, params, lib.region))
         """,
    ),
    _api("api-fit-ladderset", "RTE.fit on a LadderSet", "result = run_parameter(tiny_rte(), ladder_library())"),
    # -- predict, decompose and embed on a fitted RTE
    _api(
        "api-predict-before-fit",
        "RTE.predict before fit",
        "obs = quad_targets()\nresult = tiny_rte().predict(obs.ctx_x, obs.ctx_y, obs.qry_x)",
    ),
    _api(
        "api-predict-zero-rows",
        "predict with zero-row contexts",
        "z = np.zeros((0, 8))\nresult = fitted_rte().predict(z, z, z)",
    ),
    _api(
        "api-predict-complex",
        "predict with complex contexts",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x + 1j, obs.ctx_y + 1j, obs.qry_x)",
    ),
    _api(
        "api-predict-context-1e300",
        "predict with contexts of 1e300",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x, obs.ctx_y * 1e300, obs.qry_x)",
    ),
    _api(
        "api-predict-inputs-1e300",
        "predict with context inputs of 1e300",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x * 1e300, obs.ctx_y, obs.qry_x)",
    ),
    _api(
        "api-predict-query-1e300",
        "predict at queries of 1e300",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x, obs.ctx_y, obs.qry_x * 1e300)",
    ),
    _api(
        "api-predict-mismatched-rows",
        "predict with 4 context x rows and 3 context y rows",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x, obs.ctx_y[:3], obs.qry_x)",
    ),
    _api(
        "api-predict-query-3d",
        "predict with 3-D queries",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x, obs.ctx_y, obs.qry_x[None])",
    ),
    _api(
        "api-predict-query-nan",
        "predict at NaN queries",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x, obs.ctx_y, np.full_like(obs.qry_x, np.nan))",
    ),
    _api(
        "api-predict-context-dict",
        "predict with a dict as the context",
        "obs = quad_targets()\nresult = fitted_rte().predict({'x': 1}, obs.ctx_y, obs.qry_x)",
    ),
    _api(
        "api-decompose-k-zero",
        "decompose(k=0)",
        "obs = quad_targets()\nresult = fitted_rte().decompose(obs.ctx_x, obs.ctx_y, k=0).phi",
    ),
    _api(
        "api-decompose-k-float",
        "decompose(k=2.5)",
        "obs = quad_targets()\nresult = fitted_rte().decompose(obs.ctx_x, obs.ctx_y, k=2.5).phi",
    ),
    _api(
        "api-decomposition-float-anchors",
        "decomposition_for with anchors 2.5",
        """
         obs, rte = quad_targets(), fitted_rte()
         d = rte.decomposition_for(obs.ctx_x, obs.ctx_y, np.full((4, 2), 2.5))
         result = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d)
         """,
    ),
    _api(
        "api-decomposition-phi-misshaped",
        "decomposition_for with phi of shape (4, 2, 3)",
        """
         obs, rte = quad_targets(), fitted_rte()
         d = rte.decomposition_for(obs.ctx_x, obs.ctx_y, np.zeros((4, 2), dtype=int), np.zeros((4, 2, 3)))
         result = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d)
         """,
    ),
    _api(
        "api-decomposition-phi-nan",
        "decomposition_for with NaN phi",
        """
         obs, rte = quad_targets(), fitted_rte()
         d = rte.decomposition_for(obs.ctx_x, obs.ctx_y, np.zeros((4, 2), dtype=int), np.full((4, 2, 16), np.nan))
         result = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d)
         """,
    ),
    _api(
        "api-decomposition-negative-anchors",
        "decomposition_for with anchor -1",
        """
         obs, rte = quad_targets(), fitted_rte()
         result = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, rte.decomposition_for(obs.ctx_x, obs.ctx_y, -np.ones((4, 2))))
         """,  # noqa: E501 - the snippet is quoted as it is in docs/bad-inputs.md
    ),
    _api(
        "api-predict-foreign-decomposition",
        "predict 4 targets with a decomposition of 2",
        """
         obs, rte = quad_targets(), fitted_rte()
         d = rte.decompose(obs.ctx_x[:2], obs.ctx_y[:2])
         result = rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, d)
         """,
    ),
    _api(
        "api-predict-decomposition-text",
        "predict with decomposition='abc'",
        "obs = quad_targets()\nresult = fitted_rte().predict(obs.ctx_x, obs.ctx_y, obs.qry_x, 'abc')",
    ),
    # -- ParametricFamily, TaskSet, protocols
    _api(
        "api-family-fn-int",
        "ParametricFamily(fn=42)",
        """
         fam = ParametricFamily("f", 42, (0.0, 20.0), {"b": (-1.0, 1.0)}, "a", REGIONS)
         result = run_parameter(tiny_rte(), quad_library(family=fam), quad_targets(family=fam))
         """,
    ),
    _api(
        "api-family-domain-nan",
        "ParametricFamily(domain=(0, nan))",
        "result = ParametricFamily('f', lambda x, a, b: a * x + b, (0.0, float('nan')), {'b': (-1.0, 1.0)}, "
        "'a', REGIONS)",
    ),
    _api(
        "api-family-domain-text",
        "ParametricFamily(domain='ab')",
        "result = ParametricFamily('f', lambda x, a, b: a * x + b, 'ab', {'b': (-1.0, 1.0)}, 'a', REGIONS)",
    ),
    _api(
        "api-family-fixed-none",
        "ParametricFamily(fixed=None)",
        "result = ParametricFamily('f', lambda x, a: a * x, (0.0, 20.0), None, 'a', REGIONS)",
    ),
    _api(
        "api-family-regions-empty",
        "ParametricFamily(regions={})",
        "result = ParametricFamily('f', lambda x, a, b: a * x + b, (0.0, 20.0), {'b': (-1.0, 1.0)}, 'a', {})",
    ),
    _api(
        "api-family-region-reversed",
        "ParametricFamily with a region (3, 1)",
        "result = ParametricFamily('f', lambda x, a, b: a * x + b, (0.0, 20.0), {'b': (-1.0, 1.0)}, 'a', "
        "{'F1_1': (3.0, 1.0), 'F1_2': (3.5, 4.0), 'F2': (4.5, 5.0)})",
    ),
    _api(
        "api-family-nan-formula",
        "RTE on a family whose formula returns NaN",
        """
         fam = ParametricFamily("f", lambda x, a, b: a * x + b + np.nan, (0.0, 20.0), {"b": (-1.0, 1.0)}, "a", REGIONS)
         result = run_parameter(tiny_rte(), quad_library(family=fam), quad_targets(family=fam))
         """,
    ),
    _api(
        "api-family-wrong-shape",
        "RTE on a family whose formula returns the wrong shape",
        """
         fam = ParametricFamily("f", lambda x, a, b: np.zeros((len(x), x.shape[1] + 1)), (0.0, 20.0),
                                {"b": (-1.0, 1.0)}, "a", REGIONS)
         result = run_parameter(tiny_rte(), quad_library(family=fam), quad_targets(family=fam))
         """,
    ),
    _api(
        "api-taskset-negative-count",
        "TaskSet.sample with a count of -3",
        "result = TaskSet.sample(QUAD, {'F1_1': -3, 'F1_2': 8}, rng(0)).params",
    ),
    _api(
        "api-taskset-float-count",
        "TaskSet.sample with a count of 2.5",
        "result = TaskSet.sample(QUAD, {'F1_1': 2.5, 'F1_2': 8}, rng(0)).params",
    ),
    _api(
        "api-taskset-unknown-region",
        "TaskSet.sample from a region that does not exist",
        "result = TaskSet.sample(QUAD, {'nope': 3}, rng(0)).params",
    ),
    _api(
        "api-protocol-noise-nan",
        "RTE with a protocol of NaN noise",
        "result = run_parameter(tiny_rte(protocol=ObservationProtocol('p', 8, 8, noise=float('nan'))))",
    ),
    _api(
        "api-protocol-float-points",
        "ObservationProtocol(n_context=8.5)",
        "result = run_parameter(tiny_rte(protocol=ObservationProtocol('p', 8.5, 8)))",
    ),
    _api(
        "api-protocol-draw-negative",
        "protocol.draw with -1 draws per task",
        "result = get_protocol('paper').draw(quad_library(), -1, rng(0)).ctx_x",
    ),
    # -- LengthRTE and ladders
    _api(
        "api-ladder-basis-int",
        "Ladder(basis=42)",
        "result = run_length(tiny_length(), ladder_library(ladder=Ladder('l', 42, (-5.0, 5.0))))",
    ),
    _api(
        "api-ladder-domain-nan",
        "Ladder(domain=(nan, 1))",
        "result = Ladder('l', lambda x, p: x ** p, (float('nan'), 1.0))",
    ),
    _api(
        "api-ladder-float-level",
        "Ladder(train_levels=(1, 2.5))",
        "result = run_length(tiny_length(), ladder_library(ladder=Ladder('l', lambda x, p: (x / 5) ** p, (-5.0, 5.0), "
        "train_levels=(1, 2.5), test_level=3)))",
    ),
    _api(
        "api-ladder-coef-range-reversed",
        "Ladder(coef_range=(2, -2))",
        "result = run_length(tiny_length(), ladder_library(ladder=Ladder('l', lambda x, p: (x / 5) ** p, (-5.0, 5.0), "
        "coef_range=(2.0, -2.0))))",
    ),
    _api(
        "api-ladderset-negative-count",
        "LadderSet.sample_library with -2 tasks per level",
        "result = run_length(tiny_length(), ladder_library(n=-2))",
    ),
    _api(
        "api-ladderset-zero-count",
        "LengthRTE.fit on a library of 0 tasks per level",
        "result = run_length(tiny_length(), ladder_library(n=0))",
    ),
    _api("api-length-k-zero", "LengthRTE(k=0)", "result = run_length(tiny_length(k=0))"),
    _api("api-length-k-float", "LengthRTE(k=2.5)", "result = run_length(tiny_length(k=2.5))"),
    _api("api-length-c-grid-one", "LengthRTE(c_grid=1)", "result = run_length(tiny_length(c_grid=1))"),
    _api(
        "api-length-screen-nan",
        "LengthRTE(screen_fraction=nan)",
        "result = run_length(tiny_length(screen_fraction=float('nan')))",
    ),
    _api(
        "api-length-temperature-negative",
        "LengthRTE(temperature=-1)",
        "result = run_length(tiny_length(temperature=-1.0))",
    ),
    _api("api-length-n-average-zero", "LengthRTE(n_average=0)", "result = run_length(tiny_length(n_average=0))"),
    _api(
        "api-length-fit-taskset", "LengthRTE.fit on a parameter TaskSet", "result = tiny_length().fit(quad_library())"
    ),
    _api(
        "api-length-one-level",
        "LengthRTE on a ladder with one training level",
        "result = run_length(tiny_length(), ladder_library(ladder=Ladder('l', lambda x, p: (x / 5) ** p, (-5.0, 5.0), "
        "train_levels=(1,), test_level=2)))",
    ),
    _api(
        "api-length-predict-before-fit",
        "LengthRTE.predict before fit",
        """
         model = tiny_length()
         obs = length_targets(model, ladder_library())
         result = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x)
         """,
    ),
    _api(
        "api-length-context-1e300",
        "LengthRTE.predict with contexts of 1e300",
        """
         lib = ladder_library()
         model = tiny_length().fit(lib)
         obs = length_targets(model, lib)
         result = model.predict(obs.ctx_x, obs.ctx_y * 1e300, obs.qry_x)
         """,
    ),
    # -- CompositionRTE and primitives
    _api(
        "api-prims-zero",
        "CompositionRTE.fit on 0 primitives per family",
        "result = run_composition(tiny_composition(), primitives(0))",
    ),
    _api(
        "api-prims-negative",
        "PrimitiveSet.sample(n_per_family=-1)",
        "result = run_composition(tiny_composition(), primitives(-1))",
    ),
    _api("api-composition-k-zero", "CompositionRTE(k=0)", "result = run_composition(tiny_composition(k=0))"),
    _api("api-composition-fit-list", "CompositionRTE.fit([1, 2])", "result = tiny_composition().fit([1, 2])"),
    _api(
        "api-composition-nan-curves",
        "CompositionRTE.fit on primitives with NaN curves",
        """
         p = primitives()
         curves = p.curves.copy()
         curves[2, 10:20] = np.nan
         prims = PrimitiveSet(p.families, p.family, None, p.grid, curves, p.domain)
         result = run_composition(tiny_composition(), prims)
         """,
    ),
    _api(
        "api-composition-n-average-zero",
        "CompositionRTE(n_average=0)",
        "result = run_composition(tiny_composition(n_average=0))",
    ),
    _api(
        "api-composition-refine-float",
        "CompositionRTE(refine_rounds=1.5)",
        "result = run_composition(tiny_composition(refine_rounds=1.5))",
    ),
    _api(
        "api-composition-temperature-nan",
        "CompositionRTE(temperature=nan)",
        "result = run_composition(tiny_composition(temperature=float('nan')))",
    ),
    _api(
        "api-composition-split-unknown-family",
        "CompositionRTE with a pair split naming an unknown family",
        "result = run_composition(tiny_composition(split=PairSplit(train=(('poly', 'nope'),), "
        "test=(('sin', 'poly'),))))",
    ),
    _api(
        "api-composition-wrong-points",
        "CompositionRTE.predict with 3 context points instead of 25",
        """
         prims = primitives()
         model = tiny_composition().fit(prims)
         obs = composition_targets(model, prims)
         result = model.predict(obs.ctx_x[:, :3], obs.ctx_y[:, :3], obs.qry_x)
         """,
    ),
    _api(
        "api-composition-curves-misshaped",
        "PrimitiveSet.from_curves with curves of the wrong width",
        "result = PrimitiveSet.from_curves(['a'], np.zeros(3, dtype=int), np.linspace(-10, 10, 5), np.zeros((3, 4)))",
    ),
]


# ----------------------------------------------------------------------------- damaged files

BASELINES = {  # the undamaged runs (two seeds: the undamaged seed's unit is reused, the damaged one recomputed)
    "parameter": [
        "reproduce",
        "parameter",
        "--profile",
        "tiny",
        "--family",
        "quadratic",
        "--seeds",
        "2",
        "--quiet",
        "--no-plots",
        "--out",
        "{out}",
    ],
    "length": ["reproduce", "length", "--profile", "tiny", "--seeds", "2", "--quiet", "--no-plots", "--out", "{out}"],
}
RUN_DIRS = {"parameter": "parameter-paper-tiny-quadratic", "length": "length-paper-tiny"}  # --family in the name


def _rechecksum(d: dict) -> dict:
    """The unit with its checksum recomputed by the package's own function, so only the other
    checks can catch the damage."""
    from taskextrap.experiments.units import checksum

    d["checksum"] = checksum(d["errors"], d["timing"], d.get("extras", {}))
    return d


def _edit(fn, rechecksum=False):
    def damage(path: Path):
        d = json.loads(path.read_text())
        fn(d)
        if rechecksum:
            _rechecksum(d)
        path.write_text(json.dumps(d))

    return damage


def _first(d: dict) -> str:
    return sorted(d["errors"])[0]


def _zero(d):
    m = _first(d)
    d["errors"][m] = [0.0] * len(d["errors"][m])


def _cut(d):
    m = _first(d)
    d["errors"][m] = d["errors"][m][:-1]


def _nudge(d):
    m = _first(d)
    d["errors"][m][0] = d["errors"][m][0] * 1.0001 + 1e-9


def _set_first(value):
    def fn(d):
        d["errors"][_first(d)][0] = value

    return fn


def _nest(d):
    m = _first(d)
    d["errors"][m] = [[v] for v in d["errors"][m]]


def _bools(d):
    m = _first(d)
    d["errors"][m] = [True] * len(d["errors"][m])


def _garble(path: Path):
    s = path.read_text()
    i = len(s) // 2
    path.write_text(s[:i] + '"}{]' + s[i + 4 :])


def _to_directory(path: Path):
    path.unlink()
    path.mkdir()
    (path / "inside.txt").write_text("a folder where the unit file was\n")


UNIT_DAMAGES = {  # name -> (description, damage(path))
    "truncated": ("cut to half its bytes", lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])),
    "empty": ("emptied (0 bytes)", lambda p: p.write_bytes(b"")),
    "garbled": ("4 characters in the middle replaced by '\"}{]'", _garble),
    "binary": ("replaced by random bytes", lambda p: p.write_bytes(random.Random(2).randbytes(p.stat().st_size))),
    "null": ("replaced by the JSON null", lambda p: p.write_text("null")),
    "list": (
        "wrapped in a list (a list instead of a dict)",
        lambda p: p.write_text(json.dumps([json.loads(p.read_text())])),
    ),
    "no-errors": ("'errors' removed", _edit(lambda d: d.pop("errors"))),
    "errors-string": ("'errors' is a string", _edit(lambda d: d.__setitem__("errors", "oops"))),
    "errors-empty": ("'errors' is an empty dict", _edit(lambda d: d.__setitem__("errors", {}))),
    "zeroed": ("a method's errors set to 0, checksum not updated", _edit(_zero)),
    "cut-short": ("a method's list of errors one short, checksum not updated", _edit(_cut)),
    "one-number": ("one number edited by 0.01%, checksum not updated", _edit(_nudge)),
    "nan-checksummed": ("one error set to NaN, checksum recomputed to match", _edit(_set_first(float("nan")), True)),
    "inf-checksummed": (
        "one error set to Infinity, checksum recomputed to match",
        _edit(_set_first(float("inf")), True),
    ),
    "text-number-checksummed": (
        "one error written as a string, checksum recomputed to match",
        _edit(lambda d: _set_first(str(d["errors"][_first(d)][0]))(d), True),
    ),
    "nested-checksummed": ("a method's errors as a list of lists, checksum recomputed to match", _edit(_nest, True)),
    "bools-checksummed": ("a method's errors as booleans, checksum recomputed to match", _edit(_bools, True)),
    "fingerprint": ("fingerprint of other settings", _edit(lambda d: d.__setitem__("fingerprint", "0" * 16))),
    "no-checksum": ("'checksum' removed", _edit(lambda d: d.pop("checksum"))),
    "timing-list": ("'timing' is a list", _edit(lambda d: d.__setitem__("timing", []))),
    "extras-string": ("'extras' is a string", _edit(lambda d: d.__setitem__("extras", "x"))),
    "trailing-garbage": ("text appended after the JSON", lambda p: p.write_text(p.read_text() + "\ngarbage")),
    "bom": ("a UTF-8 byte order mark prepended", lambda p: p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())),
    "deep-nesting": ("replaced by 100000 nested '['", lambda p: p.write_text("[" * 100_000)),
    "directory": ("replaced by a folder of the same name", _to_directory),
    "unreadable": ("mode 0000 (unreadable)", lambda p: os.chmod(p, 0)),
}
PERMISSION_DAMAGES = {"unreadable"}


def _ckpt_truncate(name):
    return lambda f: (f / name).write_bytes((f / name).read_bytes()[: (f / name).stat().st_size // 2])


def _ckpt_json(fn):
    def damage(folder: Path):
        meta = json.loads((folder / "checkpoint.json").read_text())
        fn(meta)
        (folder / "checkpoint.json").write_text(json.dumps(meta))

    return damage


CKPT_DAMAGES = {  # name -> (description, damage(checkpoint folder))
    "weights-truncated": ("trainable.safetensors cut to half", _ckpt_truncate("trainable.safetensors")),
    "weights-random": (
        "trainable.safetensors replaced by random bytes",
        lambda f: (f / "trainable.safetensors").write_bytes(
            random.Random(3).randbytes((f / "trainable.safetensors").stat().st_size)
        ),
    ),
    "weights-missing": ("trainable.safetensors deleted", lambda f: (f / "trainable.safetensors").unlink()),
    "json-empty": ("checkpoint.json emptied", lambda f: (f / "checkpoint.json").write_text("")),
    "json-garbled": (
        "checkpoint.json is not JSON",
        lambda f: (f / "checkpoint.json").write_text('{"step": 4, "loss": ['),
    ),
    "json-list": ("checkpoint.json is a list", lambda f: (f / "checkpoint.json").write_text("[4]")),
    "json-loss-cut": (
        "checkpoint.json's loss history one short",
        _ckpt_json(lambda m: m.__setitem__("loss", m["loss"][:-1])),
    ),
    "json-step-edited": (
        "checkpoint.json's step set to 99 (beyond the run's 6 steps)",
        _ckpt_json(lambda m: m.__setitem__("step", 99)),
    ),
    "optimizer-garbage": (
        "optimizer.pt replaced by garbage",
        lambda f: (f / "optimizer.pt").write_bytes(b"garbage" * 100),
    ),
    "optimizer-empty": ("optimizer.pt emptied", lambda f: (f / "optimizer.pt").write_bytes(b"")),
    "optimizer-truncated": ("optimizer.pt cut to half", _ckpt_truncate("optimizer.pt")),
}


def _damaged_cases() -> list[Case]:
    cases = []
    for i, (name, (desc, _)) in enumerate(UNIT_DAMAGES.items()):
        experiment = ("parameter", "length")[i % 2]
        cases.append(
            Case(
                f"damaged-unit-{name}",
                "damaged",
                f"{experiment} unit {desc}",
                {"kind": "unit", "experiment": experiment, "damage": name},
                needs_permissions=name in PERMISSION_DAMAGES,
            )
        )
    for name, (desc, _) in CKPT_DAMAGES.items():
        cases.append(
            Case(f"damaged-ckpt-{name}", "damaged", f"SFT checkpoint: {desc}", {"kind": "checkpoint", "damage": name})
        )
    return cases


CASES = CLI_CASES + API_CASES + _damaged_cases()


# ----------------------------------------------------------------------------- running


def _env(tmp: Path | None = None, extra: dict | None = None) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "PYTHONPATH")
        and not k.startswith("SLURM_")
        and k != "RAY_ADDRESS"
    }
    paths = ([str(tmp / "mods")] if tmp is not None else []) + [str(SRC)]
    env.update(PYTHONPATH=os.pathsep.join(paths), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(extra or {})
    return env


def run_process(
    cmd: list[str], cwd: Path, env: dict, timeout: float, tmp: Path | None = None
) -> tuple[int | None, str, str, bool, float]:
    """(exit status, stdout, stderr, timed out, wall seconds) of ``cmd`` with stdin closed; on a
    timeout the process group it started is killed. The case folder ``tmp`` reads ``{tmp}`` in
    the output, so messages do not depend on where the temporary folder was."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        rc, timed_out = proc.returncode, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc, timed_out = None, True
    wall = time.perf_counter() - t
    if tmp is not None:
        out, err = (text.replace(str(tmp), "{tmp}") for text in (out, err))
    return rc, out, err, timed_out, wall


def _fill(args: list[str], tmp: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in args]


def _cli_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "taskextrap.cli", *args]


def run_cli_case(case: Case, tmp: Path, timeout: float) -> Outcome:
    _write_user_modules(tmp)
    if case.run.get("setup"):
        SETUPS[case.run["setup"]][1](tmp)
    rc, out, err, timed_out, wall = run_process(
        _cli_command(_fill(case.run["args"], tmp)), tmp, _env(tmp, case.run.get("env")), timeout, tmp
    )
    o = classify_cli(rc, out, err, timed_out)
    o.wall_s = wall
    return o


def _worker_report(stdout: str) -> dict | None:
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :])
    return None


def run_api_case(case: Case, tmp: Path, timeout: float) -> Outcome:
    rc, out, err, timed_out, wall = run_process(
        [sys.executable, str(Path(__file__).resolve()), "--api-worker", case.id], tmp, _env(), timeout, tmp
    )
    o = classify_api(_worker_report(out), rc, err, timed_out)
    o.wall_s = wall
    return o


def api_worker(case_id: str) -> None:
    """Run one API snippet after the prelude; print a one-line JSON report after MARKER."""
    import traceback

    case = next(c for c in CASES if c.id == case_id)
    namespace: dict = {"__name__": "__bad_input__"}
    exec(compile(API_PRELUDE, "<prelude>", "exec"), namespace)
    from taskextrap.errors import TaskextrapError

    try:
        exec(compile(case.run["code"], f"<{case.id}>", "exec"), namespace)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: the snippet must not exit
        traceback.print_exc()
        report = {
            "status": "raised",
            "type": type(exc).__name__,
            "taskextrap": isinstance(exc, TaskextrapError),
            "message": str(exc),
        }
    else:
        value = namespace.get("result")
        report = {"status": "returned", "summary": summary(value), "nonfinite": bool(nonfinite(value))}
    sys.stdout.flush()
    print(MARKER + json.dumps(report), flush=True)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def numbers(results: dict) -> dict:
    """What a rerun must reproduce exactly: the rows and the paired comparisons."""
    return {"rows": results.get("rows"), "comparisons": results.get("comparisons")}


def first_difference(a: dict, b: dict) -> str:
    for kind in ("rows", "comparisons"):
        for x, y in zip(a.get(kind) or [], b.get(kind) or [], strict=False):  # unequal lengths: reported below
            if not _same(x, y):
                keys = [k for k in x if not _same(x.get(k), y.get(k))]
                label = "/".join(str(x.get(k)) for k in ("group", "method", "a", "b", "metric") if k in x)
                return f"{kind[:-1]} {label}: {', '.join(keys)}"
        if len(a.get(kind) or []) != len(b.get(kind) or []):
            return f"{kind}: {len(a.get(kind) or [])} vs {len(b.get(kind) or [])}"
    return ""


class Baselines:
    """The undamaged tiny runs, made once per session (lazily, one per experiment)."""

    def __init__(self, root: Path, timeout: float):
        self.root, self.timeout = root, timeout
        self.done: dict[str, dict] = {}
        self.info: dict[str, dict] = {}
        self._locks: dict[str, object] = {}
        import threading

        self._guard = threading.Lock()

    def get(self, experiment: str) -> dict:
        import threading

        with self._guard:
            lock = self._locks.setdefault(experiment, threading.Lock())
        with lock:
            if experiment not in self.done:
                out = self.root / f"baseline-{experiment}"
                args = [a.replace("{out}", str(out)) for a in BASELINES[experiment]]
                rc, _, err, _timed_out, wall = run_process(_cli_command(args), self.root, _env(), 4 * self.timeout)
                if rc != 0:
                    raise RuntimeError(f"the undamaged {experiment} run failed (exit {rc}): {err[-500:]}")
                results = json.loads((out / RUN_DIRS[experiment] / "results.json").read_text())
                units = sorted((out / "units").glob("*.json"))
                self.done[experiment] = {"out": out, "numbers": numbers(results), "units": units}
                rte = next((r for r in results["rows"] if r["method"] == "rte"), results["rows"][0])
                self.info[experiment] = {
                    "command": "taskextrap " + shlex.join(BASELINES[experiment]),
                    "wall_s": round(wall, 2),
                    "units": [u.name for u in units],
                    "first_row": {k: rte[k] for k in ("group", "method", "metric", "value", "ci95")},
                }
            return self.done[experiment]


def run_unit_case(case: Case, tmp: Path, timeout: float, baselines: Baselines) -> Outcome:
    base = baselines.get(case.run["experiment"])
    out = tmp / "out"
    shutil.copytree(base["out"] / "units", out / "units")
    target = out / "units" / next(u.name for u in base["units"] if "seed0" in u.name)
    UNIT_DAMAGES[case.run["damage"]][1](target)
    args = [a.replace("{out}", str(out)) for a in BASELINES[case.run["experiment"]]]
    rc, _, err, timed_out, wall = run_process(_cli_command(args), tmp, _env(), timeout, tmp)
    same, diff = None, ""
    results_file = out / RUN_DIRS[case.run["experiment"]] / "results.json"
    if rc == 0 and results_file.is_file():
        new = numbers(json.loads(results_file.read_text()))
        same = _same(new, base["numbers"])
        diff = "" if same else first_difference(base["numbers"], new)
    o = classify_damaged(rc, err, timed_out, target.name, same, diff)
    o.wall_s = wall
    return o


CKPT_PRELUDE = '''
import numpy as np
import torch

from taskextrap.llm.model import build_char_model
from taskextrap.llm.sft import SFTConfig, latest_checkpoint, train


def pairs(g, n):
    """Prompt: a few letters and '='; completion: its last letter."""
    out = []
    for _ in range(n):
        s = "".join(g.choice(list("abcdef"), size=int(g.integers(2, 6))))
        out.append((s + "=", s[-1]))
    return out


def model():
    return build_char_model(seed=0, max_len=64, d_model=32, n_layers=2, n_heads=2)


CFG = SFTConfig(steps=6, batch_size=4, lr=3e-3, checkpoint_every=2)


class Interrupted(Exception):
    pass


def stop_after_step_4(step, loss):
    if step == 3:  # step 4's checkpoint is written: the run is killed now
        raise Interrupted
'''


def ckpt_worker(case_id: str, tmp: str) -> None:
    """Train 6 steps uninterrupted; train again, interrupted after the step-4 checkpoint; damage
    it; resume; report the warnings and whether loss history and weights match."""
    import traceback
    import warnings

    case = next(c for c in CASES if c.id == case_id)
    tmp = Path(tmp)
    ns: dict = {"__name__": "__bad_input__"}
    exec(compile(CKPT_PRELUDE, "<ckpt-prelude>", "exec"), ns)
    from taskextrap.errors import TaskextrapError, TaskextrapWarning

    ref, ref_log = ns["train"](ns["model"](), ns["pairs"], ns["CFG"], out_dir=tmp / "reference")
    try:
        ns["train"](ns["model"](), ns["pairs"], ns["CFG"], out_dir=tmp / "run", progress=ns["stop_after_step_4"])
    except ns["Interrupted"]:
        pass
    folder = ns["latest_checkpoint"](tmp / "run")
    CKPT_DAMAGES[case.run["damage"]][1](folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            lm, log = ns["train"](ns["model"](), ns["pairs"], ns["CFG"], out_dir=tmp / "run")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            traceback.print_exc()
            report = {
                "status": "raised",
                "type": type(exc).__name__,
                "taskextrap": isinstance(exc, TaskextrapError),
                "message": str(exc),
            }
        else:
            import torch

            same = log["loss"] == ref_log["loss"] and all(
                torch.equal(p, q)
                for p, q in zip(lm.model.state_dict().values(), ref.model.state_dict().values(), strict=True)
            )
            report = {"status": "returned", "same": bool(same), "resumed_from": log["resumed_from"]}
    report["warnings"] = [str(w.message) for w in caught if issubclass(w.category, TaskextrapWarning)]
    report["folder"] = folder.name
    print(MARKER + json.dumps(report), flush=True)


def classify_ckpt(report: dict | None, rc, stderr: str, timed_out: bool) -> Outcome:
    if timed_out:
        return Outcome("hang", "no return before the timeout")
    if report is None:
        tail = _last_traceback_line(stderr) if "Traceback" in (stderr or "") else " / ".join(_lines(stderr)[-2:])
        return Outcome("not recovered", first_chars(f"worker died (exit {rc}): {tail}"))
    if report["status"] == "raised":
        kind = "error" if report["taskextrap"] else "traceback"
        return Outcome("not recovered", first_chars(f"{kind}: {report['type']}: {report['message']}"))
    problems = []
    warns = report["warnings"]
    if len(warns) != 1 or "\n" in warns[0].strip():
        problems.append(f"{len(warns)} one-line warnings, expected one")
    elif report["folder"] not in warns[0]:
        problems.append(f"the warning does not name {report['folder']}")
    if not report["same"]:
        problems.append(
            f"loss history or weights differ from the uninterrupted run (resumed from step {report['resumed_from']})"
        )
    if problems:
        return Outcome("not recovered", first_chars("; ".join(problems)))
    return Outcome("recovered", first_chars("warning: " + warns[0]))


def run_ckpt_case(case: Case, tmp: Path, timeout: float) -> Outcome:
    rc, out, err, timed_out, wall = run_process(
        [sys.executable, str(Path(__file__).resolve()), "--ckpt-worker", case.id, str(tmp)], tmp, _env(), timeout, tmp
    )
    o = classify_ckpt(_worker_report(out), rc, err, timed_out)
    o.wall_s = wall
    return o


def _rmtree(path: Path) -> None:
    def unlock(func, p, _):
        os.chmod(p, stat.S_IRWXU)
        os.chmod(os.path.dirname(p), stat.S_IRWXU)
        func(p)

    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, n), stat.S_IRWXU, follow_symlinks=False)
    shutil.rmtree(path, onerror=unlock)


def case_timeout(case: Case, timeout: float) -> float:
    """The case's own limit: ``timeout`` times its factor; twice that for a checkpoint case (three
    trainings in one worker)."""
    ckpt = case.surface == "damaged" and case.run["kind"] == "checkpoint"
    return timeout * case.timeout_factor * (2 if ckpt else 1)


def run_case(case: Case, timeout: float, baselines: Baselines | None = None, work: Path | None = None) -> Outcome:
    """Run one case in a fresh temporary folder (removed afterwards) and classify it."""
    if case.needs_permissions and IS_ROOT:
        return Outcome("skipped (root)", "running as root: file permissions do not apply")
    tmp = Path(tempfile.mkdtemp(prefix=f"{case.id}-", dir=work))
    timeout = case_timeout(case, timeout)
    try:
        if case.surface == "cli":
            return run_cli_case(case, tmp, timeout)
        if case.surface == "api":
            return run_api_case(case, tmp, timeout)
        if case.run["kind"] == "unit":
            return run_unit_case(case, tmp, timeout, baselines)
        return run_ckpt_case(case, tmp, timeout)
    except Exception as exc:  # noqa: BLE001 - the harness itself failed: say so, keep going
        return Outcome(
            "not recovered" if case.surface == "damaged" else "traceback",
            first_chars(f"harness failure: {type(exc).__name__}: {exc}"),
        )
    finally:
        _rmtree(tmp)


def run_all(cases: list[Case], jobs: int, timeout: float, progress=True) -> tuple[list[dict], dict]:
    """Run ``cases`` with ``jobs`` subprocesses at a time; return (records, baseline info)."""
    work = Path(tempfile.mkdtemp(prefix="bad-inputs-"))
    baselines = Baselines(work, timeout)
    records: dict[str, dict] = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(run_case, c, timeout, baselines, work): c for c in cases}
            for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                case, o = futures[fut], fut.result()
                records[case.id] = {
                    "id": case.id,
                    "surface": case.surface,
                    "description": case.description,
                    "input": case.how(),
                    "outcome": o.outcome,
                    "message": o.message,
                    "wall_s": round(o.wall_s, 2),
                    "timeout_s": case_timeout(case, timeout),
                    **({"detail": o.detail} if o.detail else {}),
                }
                if progress:
                    print(
                        f"[{i}/{len(cases)}] {case.id}: {o.outcome} ({o.wall_s:.1f} s) {o.message[:100]}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        _rmtree(work)
    return [records[c.id] for c in cases], baselines.info


def counts(records: list[dict]) -> dict:
    table = {s: {} for s in SURFACES}
    for r in records:
        table[r["surface"]][r["outcome"]] = table[r["surface"]].get(r["outcome"], 0) + 1
    return {s: dict(sorted(v.items(), key=lambda kv: OUTCOMES.index(kv[0]))) for s, v in table.items() if v}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ⏎ ")


def markdown(records: list[dict], meta: dict) -> str:
    lines = [
        "# Bad inputs: what each one does",
        "",
        f"`python scripts/bad_inputs.py` on commit `{meta['commit'][:12]}`{' (dirty)' if meta['dirty'] else ''}, "
        f"{meta['date']}; timeout {meta['timeout_s']} s, {meta['jobs']} jobs, wall {meta['wall_s']:.0f} s.",
        "",
        "| surface | " + " | ".join(OUTCOMES) + " |",
        "|---|" + "---|" * len(OUTCOMES),
    ]
    for s, c in meta["counts"].items():
        lines.append(f"| {s} | " + " | ".join(str(c.get(o, 0)) for o in OUTCOMES) + " |")
    lines += ["", "| id | surface | input | outcome | message |", "|---|---|---|---|---|"]
    for r in records:
        code = first_chars(r["input"].replace("\n", "; "), 160).replace("`", "'")
        lines.append(
            f"| {r['id']} | {r['surface']} | {_cell(r['description'])}<br>`{_cell(code)}` "
            f"| {r['outcome']} | {_cell(r['message'])} |"
        )
    return "\n".join(lines) + "\n"


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def write_atomic(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, help="write the JSON record here (atomically)")
    p.add_argument("--markdown", type=Path, help="write the markdown table here (else it is printed)")
    p.add_argument("--only", default=None, help="run only the cases whose id contains SUBSTRING")
    p.add_argument("--jobs", type=int, default=2, help="subprocesses at a time (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang (default 60)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--render", type=Path, metavar="JSON", help="only render the markdown table of a JSON record")
    p.add_argument("--api-worker", metavar="ID", help=argparse.SUPPRESS)
    p.add_argument("--ckpt-worker", nargs=2, metavar=("ID", "DIR"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.api_worker:
        api_worker(a.api_worker)
        return 0
    if a.ckpt_worker:
        ckpt_worker(*a.ckpt_worker)
        return 0
    if a.render:
        record = json.loads(a.render.read_text())
        table = markdown(record["cases"], record)
        write_atomic(a.markdown, table) if a.markdown else print(table, end="")
        return 0
    cases = [c for c in CASES if a.only is None or a.only in c.id]
    if a.list:
        for c in cases:
            print(f"{c.id:42s} {c.surface:8s} {c.description}")
        print(f"{len(cases)} cases: " + ", ".join(f"{s} {sum(c.surface == s for c in cases)}" for s in SURFACES))
        return 0
    if not cases:
        print(f"error: no case id contains {a.only!r}", file=sys.stderr)
        return 2
    t = time.perf_counter()
    records, baseline_info = run_all(cases, a.jobs, a.timeout)
    commit = _git("rev-parse", "HEAD")
    meta = {
        "script": "scripts/bad_inputs.py",
        "commit": commit,
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", "src")),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python scripts/bad_inputs.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "python": sys.version.split()[0],
        "root": IS_ROOT,
        "timeout_s": a.timeout,
        "jobs": a.jobs,
        "only": a.only,
        "wall_s": round(time.perf_counter() - t, 1),
        "n_cases": len(records),
        "counts": counts(records),
        "totals": {
            o: sum(r["outcome"] == o for r in records) for o in OUTCOMES if any(r["outcome"] == o for r in records)
        },
        "damaged_baselines": baseline_info,
        "api_prelude": API_PRELUDE.strip(),
        "checkpoint_prelude": CKPT_PRELUDE.strip(),
    }
    if a.out:
        write_atomic(a.out, json.dumps({**meta, "cases": records}, indent=1) + "\n")
    table = markdown(records, meta)
    if a.markdown:
        write_atomic(a.markdown, table)
    else:
        print(table)
    print("counts: " + json.dumps(meta["counts"]) + f"; wall {meta['wall_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
