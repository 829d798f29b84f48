"""scripts/same_results.py: two runs have the same numbers, or every difference is named."""

import json
import subprocess
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "same_results.py"


ROW = {
    "group": "g",
    "method": "rte",
    "metric": "mse",
    "value": 0.5,
    "ci95": 0.1,
    "n": 3,
    "seed_sd": None,
    "paper_value": 0.7,
    "errors": [[0.4], [0.5], [float("nan")]],
}
COMP = {
    "group": "g",
    "metric": "mse",
    "a": "rte",
    "b": "x",
    "diff": -0.1,
    "lo": -0.2,
    "hi": 0.0,
    "n": 3,
    "clear": False,
    "winner": None,
}


def test_only_numbers_count_and_every_difference_is_named(load_script):
    mod = load_script("scripts/same_results.py")
    old = {"rows": [ROW], "comparisons": [COMP], "environment": {"git": "a"}, "timing": {"wall_s": 1}}
    same = {**old, "environment": {"git": "b"}, "timing": {"wall_s": 9}}  # provenance and time may differ
    assert mod.differences(old, json.loads(json.dumps(same))) == []  # NaN survives JSON and equals itself
    changed = {"rows": [{**ROW, "value": 0.51}, {**ROW, "method": "new"}], "comparisons": [{**COMP, "clear": True}]}
    diffs = mod.differences(old, changed)
    assert "row g/rte/mse: value 0.5 -> 0.51" in diffs
    assert "row g/new/mse only in the new run" in diffs
    assert "comparison g/mse/rte/x: clear False -> True" in diffs and len(diffs) == 3


def test_folders_are_compared_file_by_file_with_a_nonzero_exit_on_any_difference(tmp_path):
    for side, value in (("a", 0.5), ("b", 0.5)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "x.json").write_text(json.dumps({"rows": [{**ROW, "value": value}]}))
        (tmp_path / side / "notes.json").write_text(json.dumps({"no": "rows"}))  # not a results file
    run = lambda *p: subprocess.run([sys.executable, str(_PATH), *map(str, p)], capture_output=True, text=True)  # noqa: E731
    done = run(tmp_path / "a", tmp_path / "b")
    assert done.returncode == 0 and "same numbers in 1 results file(s)" in done.stdout
    (tmp_path / "b" / "x.json").write_text(json.dumps({"rows": [{**ROW, "value": 0.6}]}))
    (tmp_path / "b" / "y.json").write_text(json.dumps({"rows": []}))
    done = run(tmp_path / "a", tmp_path / "b")
    assert done.returncode == 1 and "x.json: row g/rte/mse: value 0.5 -> 0.6" in done.stdout
    assert "y.json: only in" in done.stdout
    assert run(tmp_path / "a" / "x.json", tmp_path / "b" / "x.json").returncode == 1
    bad = run(tmp_path / "nope", tmp_path / "b")
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error:")
