"""Atomic IO, markdown/console tables and the multi-run report."""

import json
import os

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.files import read_json, write_json_atomic, write_text_atomic
from taskextrap.report.schema import environment_info, make_row
from taskextrap.report.tables import (
    CAPTIONS,
    DIAGNOSTIC_GROUPS,
    TINY_NOTE,
    caption,
    comparison_table,
    console_table,
    diagnostic_definitions,
    diagnostic_group,
    format_number,
    render_report,
    results_markdown,
)


def run_results(experiment="parameter", value=12.5):
    rows = [
        make_row(experiment, "quadratic", "strategy-a", "mse", np.full((3, 2), value)),
        make_row(
            experiment,
            "quadratic",
            "ctx-polyfit",
            "mse",
            np.array([[1.0, 2.0], [3.0, 4.0]]),
            note="context-only baseline",
        ),
        make_row("parity", "size6-authors", "rte", "accuracy", np.array([[0.5], [0.75]])),
    ]
    return {
        "experiment": experiment,
        "protocol": "paper",
        "profile": "quick",
        "seeds": [0, 1],
        "rows": rows,
        "timing": {"wall_s": 1.5},
        "environment": environment_info(),
        "config": {},
    }


def test_write_json_atomic_roundtrip_and_no_temp_files(tmp_path):
    target = tmp_path / "a" / "b" / "results.json"
    obj = {"x": np.float64(1.5), "y": np.arange(3), "z": [np.int64(2)]}
    write_json_atomic(target, obj)
    assert read_json(target) == {"x": 1.5, "y": [0, 1, 2], "z": [2]}
    write_json_atomic(target, {"x": 2})  # overwrite
    assert read_json(target) == {"x": 2}
    assert sorted(os.listdir(target.parent)) == ["results.json"]


def test_write_json_atomic_refuses_nan_and_leaves_nothing(tmp_path):
    target = tmp_path / "r.json"
    with pytest.raises(TaskextrapError):
        write_json_atomic(target, {"x": float("nan")})
    with pytest.raises(TaskextrapError):
        write_json_atomic(target, {"x": object()})
    assert os.listdir(tmp_path) == []


def test_write_text_atomic(tmp_path):
    p = write_text_atomic(tmp_path / "sub" / "t.md", "héllo\n")
    assert p.read_text(encoding="utf-8") == "héllo\n"
    assert os.listdir(tmp_path / "sub") == ["t.md"]


def test_read_json_errors_are_one_line(tmp_path):
    with pytest.raises(TaskextrapError, match="not found"):
        read_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TaskextrapError, match="invalid JSON") as info:
        read_json(bad)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "v, s",
    [
        (733.0, "733"),
        (1.2e5, "1.20e+05"),
        (1.53, "1.53"),
        (0.051, "0.0510"),
        (7.33e-4, "7.33e-04"),
        (0.0, "0"),
        (None, "-"),
        (-2.5, "-2.50"),
        (1096.9, "1097"),
    ],
)
def test_format_number(v, s):
    assert format_number(v) == s


def test_results_markdown_has_ours_and_paper():
    res = run_results(value=12.5)
    md = results_markdown(res)
    assert md.startswith("# parameter")
    assert "protocol paper" in md and "profile quick" in md and "seeds [0, 1]" in md
    assert "12.5 ± 0" in md  # ours
    assert "733 ± 11.9" in md  # paper, Table 1 quadratic RTE
    assert "0.661" in md  # paper parity RTE 66.07%
    assert "## mse" in md and "## accuracy" in md
    assert "averaged over the training seeds" in md and "Student-t" in md  # ci footnote
    assert "| 0 (seed-free) |" in md  # rte's seed columns are equal: counted once
    assert "## paired comparisons" not in md  # none given
    assert "context-only baseline" in md
    # rows in the order given
    assert md.index("| quadratic | strategy-a |") < md.index("| quadratic | ctx-polyfit |")


def test_console_table_same_content_no_pipes():
    res = run_results()
    txt = console_table(res)
    assert "|" not in txt
    assert "733 ± 11.9" in txt and "12.5" in txt and "ctx-polyfit" in txt
    lines = [line for line in txt.splitlines() if line.startswith("quadratic")]
    assert len(lines) == 2
    # aligned columns: the "ours" cell ends in the same column on both rows
    header = next(line for line in txt.splitlines() if line.startswith("group"))
    end = header.index("ours (value ± ci95)") + len("ours (value ± ci95)")
    assert all(line[:end].rstrip() == line[:end] for line in lines)


def test_comparison_table_and_render_report(tmp_path):
    a, b = tmp_path / "run_a", tmp_path / "run_b"
    write_json_atomic(a / "results.json", run_results("parameter", 5.0))
    write_json_atomic(b / "results.json", run_results("parameter-ablations", 7.0))
    out = render_report([str(a), str(b)])
    assert out == comparison_table([read_json(a / "results.json"), read_json(b / "results.json")])
    lines = [line for line in out.splitlines() if line.startswith("| parameter")]
    assert len(lines) == 6
    assert "| parameter | paper | quick | quadratic | strategy-a | mse | 5.00 ± 0 | 0 (seed-free) | 733 ± 11.9 |" in out
    assert (
        "| parameter-ablations | paper | quick | quadratic | strategy-a | mse | 7.00 ± 0 | 0 (seed-free) | 1097 ± 169 |"
        in out
    )
    assert "| parameter | paper | quick | quadratic | ctx-polyfit | mse | 2.50 ± 12.7 | 0.707 | - |" in out


def test_render_report_errors(tmp_path):
    with pytest.raises(TaskextrapError, match=r"no results\.json"):
        render_report([str(tmp_path)])
    with pytest.raises(TaskextrapError, match="not a directory"):
        render_report([str(tmp_path / "nope")])
    with pytest.raises(TaskextrapError):
        render_report([])
    bad = run_results()
    bad["rows"][2]["value"] = 1.5  # accuracy out of [0, 1]
    (tmp_path / "results.json").write_text(json.dumps(bad))
    with pytest.raises(TaskextrapError, match=r"results\.json") as info:
        render_report([str(tmp_path)])
    assert "\n" not in str(info.value)


def test_wide_table_methods_by_groups():
    from taskextrap.report.tables import wide_table

    res = {
        "rows": [
            {"group": "a", "method": "rte", "metric": "mse", "value": 1.0, "ci95": 0.1, "paper_value": 2.0},
            {"group": "b", "method": "rte", "metric": "mse", "value": 3.0, "ci95": None, "paper_value": None},
            {"group": "a", "method": "base", "metric": "mse", "value": 5.0, "ci95": 0.5, "paper_value": None},
            {"group": "acc", "method": "rte", "metric": "accuracy", "value": 0.5, "ci95": 0.1, "paper_value": None},
        ]
    }
    text = wide_table(res)
    lines = text.splitlines()
    assert lines[0].split("|")[1:4] == [" method ", " a ", " b "]
    assert "`rte` | 1.00 ± 0.100 (paper 2.00) | 3.00 |" in text
    assert "`base` | 5.00 ± 0.500 | - |" in text
    assert "acc" not in text


def test_wide_table_prints_seed_sd():
    from taskextrap.report.tables import wide_table

    res = {
        "rows": [
            {
                "group": "a",
                "method": "rte",
                "metric": "mse",
                "value": 0.101,
                "ci95": 0.0125,
                "seed_sd": 0.004,
                "paper_value": None,
            },
            {
                "group": "a",
                "method": "ctx-polyfit",
                "metric": "mse",
                "value": 2.0,
                "ci95": 0.5,
                "seed_sd": 0.0,
                "seed_independent": True,
                "paper_value": 3.0,
            },
        ]
    }
    text = wide_table(res)
    assert "`rte` | 0.101 ± 0.0125 (sd 0.00400) |" in text
    assert "`ctx-polyfit` | 2.00 ± 0.500 (sd 0, seed-free) (paper 3.00) |" in text


def test_results_markdown_and_console_show_paired_comparisons():
    from taskextrap.report.compare import compare_rows

    res = run_results()
    res["rows"][0] = make_row("parameter", "quadratic", "rte", "mse", np.array([[0.5, 1.0], [1.0, 2.0]]))
    res["comparisons"] = compare_rows(res["rows"])
    assert [(c["a"], c["b"]) for c in res["comparisons"]] == [("rte", "ctx-polyfit")]
    md = results_markdown(res)
    assert "## paired comparisons" in md and "| quadratic | mse | rte | ctx-polyfit |" in md
    assert "every seed agrees in sign" in md
    txt = console_table(res)
    assert "[paired comparisons]" in txt and "|" not in txt


def test_run_line_shows_provenance():
    res = run_results()
    res["environment"] = {
        "taskextrap": "0.1.0",
        "torch": "2",
        "device": "cpu",
        "git": "abc1234",
        "dirty": True,
        "source_hash": "0123456789abcdef",
    }
    md = results_markdown(res)
    assert "git abc1234 (dirty)" in md and "source 0123456789abcdef" in md


def test_render_report_takes_a_results_file_names_run_dirs_and_refuses_no_rows(tmp_path):
    run = tmp_path / "out" / "parameter-paper-quick"
    write_json_atomic(run / "results.json", run_results("parameter", 5.0))
    assert render_report([str(run / "results.json")]) == render_report([str(run)])
    # the --out folder itself: the hint names its run directories
    with pytest.raises(TaskextrapError, match="its run directories: parameter-paper-quick"):
        render_report([str(tmp_path / "out")])
    with pytest.raises(TaskextrapError, match="OUT/<experiment>-<protocol>-<profile>"):
        render_report([str(tmp_path)])
    empty = run_results("parameter", 5.0)
    empty["rows"], empty["comparisons"] = [], []
    write_json_atomic(tmp_path / "empty" / "results.json", empty)
    with pytest.raises(TaskextrapError, match="has no rows"):
        render_report([str(tmp_path / "empty")])


def test_tiny_numbers_are_marked_as_a_plumbing_check():
    tiny = {**run_results(), "profile": "tiny"}
    md, text = results_markdown(tiny), console_table(tiny)
    assert md.splitlines()[2] == f"**{TINY_NOTE}**"  # under the title, before any number
    assert text.splitlines()[1] == TINY_NOTE
    assert "plumbing check" in TINY_NOTE and "not results" in TINY_NOTE
    for profile in ("quick", "paper"):
        other = {**run_results(), "profile": profile}
        assert TINY_NOTE not in results_markdown(other) and TINY_NOTE not in console_table(other)


def _diagnostic_results():
    errors = np.array([[0.5, 1.0], [1.0, 0.0]])
    rows = [
        make_row("parameter", "quadratic", "rte", "mse", np.full((2, 2), 3.0)),
        make_row("parameter", "quadratic", "rte", "coverage", errors),
        make_row("parameter", "quadratic", "rte", "interval-width", np.full((2, 2), 2.0)),
        make_row("parameter", "quadratic", "rte", "entropy", errors),
        make_row("parameter", "quadratic:anchor-retrieved", "rte", "accuracy", errors),
        make_row("parameter", "quadratic:anchor-retrieved", "strategy-a", "accuracy", errors),
        make_row("parity", "size6-authors", "rte", "accuracy", errors),
    ]  # a result, not a diagnostic
    return {**run_results(), "rows": rows}


def test_every_diagnostic_in_a_run_is_defined_once_and_results_are_not():
    results = _diagnostic_results()
    assert diagnostic_definitions(results) == [
        f"coverage: {CAPTIONS['coverage'].removeprefix('coverage: ')}",
        f"interval-width: {CAPTIONS['interval-width']}",
        f"entropy: {CAPTIONS['entropy']}",
        f"anchor-retrieved (accuracy): {DIAGNOSTIC_GROUPS['anchor-retrieved']}",
    ]
    md, text = results_markdown(results), console_table(results)
    notes = md[md.index("## diagnostics") : md.index("_ours: mean")]
    assert notes.count("\n- ") == 4 and "entropy (nats) of the posterior" in notes and "size6" not in notes
    assert "diagnostics:\n  coverage: the share of query points" in text
    assert "## diagnostics" not in results_markdown({**results, "rows": results["rows"][:1]})  # mse only: none


def test_captions_are_the_ones_the_benchmark_tables_print(load_script):
    tables = load_script("benchmarks/tables.py")
    assert tables.caption is caption  # one source: benchmarks/tables.py imports report.tables'
    assert caption("spearman", "llm-geometry").startswith("Spearman correlation of the embedding")
    assert caption("spearman", "manifolds").startswith("Spearman correlation of the map")
    assert caption("mse", "parameter") is None


def test_every_diagnostic_the_committed_results_hold_has_a_definition():
    """Each metric besides mse and accuracy, and each accuracy group besides the paper's result
    groups (parity's size-k spaces, codeio's pairs), in every committed results file."""
    from pathlib import Path

    results_groups = ("size6-", "size5-", "held-out-pairs", "novel-pairs")
    files = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "results").glob("*.json"))
    seen = set()
    for path in files:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            continue
        for row in data["rows"]:
            if row["metric"] == "accuracy":
                assert diagnostic_group(row["group"]) or row["group"].startswith(results_groups), (path.name, row)
            elif row["metric"] != "mse":
                assert caption(row["metric"], path.stem), (path.name, row["metric"])
            seen.add(row["metric"])
    assert {"coverage", "entropy", "interval-width", "accuracy", "spearman", "fraction"} <= seen


def test_the_verdict_opens_the_tables_with_what_rte_clearly_beats_and_loses_to():
    from taskextrap.report.tables import verdict_lines

    rows = [
        make_row("parameter", "quadratic", m, "mse", np.full((3, 2), v))
        for m, v in (("rte", 0.5), ("ctx-polyfit", 2.0), ("library-best-fit", 0.25), ("strategy-a", 0.6))
    ]

    def pair(a, b, winner):  # a paired comparison as report.compare writes it (clear when it has a winner)
        paired = {"diff": 0.1, "lo": 0.05, "hi": 0.2, "seed_diffs": [0.1, 0.1], "n": 3}
        return {
            "group": "quadratic",
            "metric": "mse",
            "a": a,
            "b": b,
            "clear": winner is not None,
            "winner": winner,
            **paired,
        }

    comparisons = [
        pair("rte", "ctx-polyfit", "rte"),
        pair("rte", "library-best-fit", "library-best-fit"),
        pair("rte", "strategy-a", None),
        pair("strategy-a", "ctx-polyfit", "strategy-a"),
    ]
    results = {**run_results(), "rows": rows, "comparisons": comparisons}
    (line,) = verdict_lines(results)
    assert line == (
        "quadratic (mse): rte 0.500; clearly beats ctx-polyfit 2.00; "
        "is clearly beaten by library-best-fit 0.250; not clear against 1"
    )
    md, text = results_markdown(results), console_table(results)
    assert md.index("## verdict") < md.index("## mse") and f"- {line}" in md
    assert text.index("verdict:") < text.index("[mse]") and f"  {line}" in text
    assert verdict_lines({**results, "comparisons": comparisons[3:]}) == []  # no comparison of rte: no verdict
    assert "verdict" not in results_markdown(run_results())


def test_a_state_file_gives_every_array_back_in_its_memory_layout(tmp_path):
    """A matrix product rounds by memory layout: C, column-major and a view into a larger
    column-major matrix (a PCA's components) come back as they were; a view pointing outside
    its array (a damaged header) is a one-line error."""
    import json as _json

    from taskextrap.files import read_state, write_state_atomic

    g = np.random.default_rng(0)
    big = np.asfortranarray(g.normal(size=(26, 40)))
    arrays = {"c": g.normal(size=(3, 5)), "f": np.asfortranarray(g.normal(size=(4, 6))), "view": big[:16]}
    assert not (arrays["view"].flags.c_contiguous or arrays["view"].flags.f_contiguous)
    write_state_atomic(tmp_path / "s.safetensors", arrays, {"note": 1})
    back, meta = read_state(tmp_path / "s.safetensors")
    assert meta == {"note": 1}
    for k, v in arrays.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].strides == v.strides, k
    x = g.normal(size=(7, 40))
    np.testing.assert_array_equal(x @ back["view"].T, x @ arrays["view"].T)
    # a header whose view reaches past its array
    from safetensors.numpy import load_file, save_file

    from safetensors import safe_open

    with safe_open(str(tmp_path / "s.safetensors"), framework="numpy") as f:
        header = dict(f.metadata())
    views = _json.loads(header["views"])
    views["view"]["shape"] = [16, 400]
    header["views"] = _json.dumps(views)
    save_file(load_file(tmp_path / "s.safetensors"), tmp_path / "bad.safetensors", metadata=header)
    with pytest.raises(TaskextrapError, match="not a readable state file") as e:
        read_state(tmp_path / "bad.safetensors")
    assert "\n" not in str(e.value)
