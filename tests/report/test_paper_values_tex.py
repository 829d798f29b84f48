"""PAPER_VALUES against the paper itself: every number is read back from the LaTeX tables.

The source is ``<repo>/../shared/paper/rte-paper.tex`` (the layout CI checks out); the test skips,
saying so, when it is absent. Each table is located by its \\label, each row by its printed method
name; the cell is parsed from its LaTeX (``7.33 \\times 10^2``, ``1.05 \\text{e}5``, ``52.86\\%``,
``\\mathbf{...}``) and must equal the stored value and interval. Every mapped row of those tables
must have an entry, so a row added to the table or dropped from PAPER_VALUES fails too.
"""

import re
from pathlib import Path

import pytest

from taskextrap.report.paper_values import PAPER_VALUES

TEX = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "rte-paper.tex"

# (table label, experiment, group): the printed row name -> method, and how cells are laid out:
# "pm" = one "value \pm ci" cell per method column; "cols" = value and CI in two columns ("$\pm$ ci"
# allowed in the CI column); "pct" = a percentage without interval.
FAMILIES = {
    "Quadratic": "quadratic",
    "Cubic": "cubic",
    "Sin Trend": "sin_trend",
    "Tri Trend": "tri_trend",
    "Exp": "exp",
}
PARAM_COLUMNS = (
    "t2v-inductive",
    "inductive-oracle",
    "strategy-a",
    "transductive-oracle",
)  # the paper's RTE: Strategy A
# App. B.1.1's table: family rows of two methods, columns F4 (3-step) and F5 (4-step), no interval.
MULTISTEP_FAMILIES = {
    "Quadratic": "quadratic",
    "Cubic": "cubic",
    "Exp": "exp",
    "Tri-Trend": "tri_trend",
    "Sin-Trend": "sin_trend",
}
MULTISTEP_METHODS = {"Inductive Baseline": "sparse-inductive", "RTE": "rte-ghost"}
TABLES = [
    (
        "tab:length_results",
        "length",
        "degree9",
        "pm",
        {"Naive Baseline": "sparse-inductive", "RTE": "strategy-b", "Oracle": "oracle"},
    ),
    (
        "tab:comp_aggregate",
        "composition",
        "unseen-pairs",
        "pm",
        {"Naive Baseline": "sparse-inductive", "RTE": "strategy-b", "Composition Oracle": "oracle"},
    ),
    (
        "tab:parity_results",
        "parity",
        "size6-authors",
        "pct",
        {"Baseline": "few-shot", "RTE": "rte", "Oracle (Known Parent)": "oracle"},
    ),
    (
        "tab:codeio_results",
        "codeio",
        "held-out-pairs",
        "pct",
        {
            "Few-Shot Baseline": "few-shot",
            "CoT + Majority Vote (N=16)": "cot-majority",
            "RTE": "rte",
            "Oracle": "oracle",
        },
    ),
    (
        "tab:param_ablation",
        "parameter-ablations",
        "quadratic",
        "cols",
        {
            "Inductive Baseline": "sparse-inductive",
            "Standard Transductive (Near)": "strategy-a",
            "Far Anchors (F1_1)": "far-anchors",
            "Random Anchors": "random-anchors",
            "Zero Shift": "zero-shift",
        },
    ),
    (
        "tab:length_ablations",
        "length-ablations",
        "degree9",
        "pm",
        {
            "Inductive Baseline": "sparse-inductive",
            "Transductive (Standard)": "strategy-b",
            "Rank-3 Anchor": "rank3-anchor",
            "Random Anchor": "random-anchors",
            "Zero Shift (Neural)": "zero-shift",
            "Upper Bound: Oracle": "oracle",
        },
    ),
    (
        "tab:comp_ablation",
        "composition-ablations",
        "unseen-pairs",
        "cols",
        {
            "Inductive Baseline": "sparse-inductive",
            "Standard Transductive": "strategy-b",
            "No Verification (Top-1)": "no-verification",
            "Random Constituents": "random-constituents",
            "Oracle (Ground Truth)": "oracle",
        },
    ),
    (
        "tab:comp_extrap_multistep",
        "composition-depth3",
        "unseen-recipes",
        "cols",
        {"Inductive (Base)": "sparse-inductive", "RTE (Recursive)": "rte"},
    ),
]


@pytest.fixture(scope="module")
def tex() -> str:
    if not TEX.is_file():
        pytest.skip(f"the paper's LaTeX source is not at {TEX} (shared/ is checked out beside the repo in CI)")
    return TEX.read_text(encoding="utf-8")


def _rows(tex: str, label: str) -> dict[str, list[str]]:
    """The table with ``\\label{label}`` (before or after its tabular, inside the table
    environment): printed row name -> its other cells (LaTeX)."""
    at = tex.index(f"\\label{{{label}}}")
    start, end = tex.rindex("\\begin{table", 0, at), tex.index("\\end{table", at)
    body = tex[tex.index("\\midrule", start, end) : tex.index("\\end{tabular}", start, end)]
    rows = {}
    for line in re.split(r"\\\\", body):
        cells = [c.strip() for c in line.replace("\\midrule", "").replace("\\bottomrule", "").split("&")]
        name = _plain(cells[0])
        if name and len(cells) > 1 and any(c for c in cells[1:]):
            rows[name] = cells[1:]
    return rows


def _plain(cell: str) -> str:
    """A row name without LaTeX markup: ``\\textbf{RTE}`` -> ``RTE``, ``$F1_1$`` -> ``F1_1``."""
    cell = re.sub(r"\\multirow\{[^{}]*\}\{[^{}]*\}\{([^{}]*)\}", r"\1", cell)
    s = re.sub(r"\\(textbf|textit|mathbf|text)\{([^{}]*)\}", r"\2", cell)
    return " ".join(s.replace("$", "").replace("~", " ").split())


def _number(latex: str) -> float:
    """A printed number: ``7.33 \\times 10^2``, ``1.05 \\text{e}5``, ``52.86\\%`` (-> 0.5286), ``6.88``."""
    s = _plain(latex).replace("\\%", "%").replace(" ", "")
    m = re.fullmatch(r"([0-9.]+)(?:\\times10\^\{?(-?\d+)\}?|e(-?\d+))?(%)?", s)
    assert m, f"cannot parse {latex!r}"
    value = float(m.group(1)) * 10.0 ** int(m.group(2) or m.group(3) or 0)
    return value / 100.0 if m.group(4) else value


def _value_ci(cells: list[str], layout: str) -> tuple[float, float | None]:
    if layout == "pct":
        return _number(cells[0]), None
    if layout == "cols":
        return _number(cells[0]), _number(cells[1].replace("$\\pm$", ""))
    value, ci = _plain(cells[0]).split("\\pm")
    return _number(value), _number(ci)


def _printed(tex: str) -> dict[tuple[str, str, str], tuple[float, float | None]]:
    """Every number of the mapped tables, keyed like PAPER_VALUES."""
    out = {}
    rows = _rows(tex, "tab:param_results")
    assert set(rows) == set(FAMILIES), sorted(rows)
    for name, family in FAMILIES.items():
        for method, cell in zip(PARAM_COLUMNS, rows[name], strict=True):
            out[("parameter", family, method)] = _value_ci([cell], "pm")
    out.update(_multistep(tex))
    for label, experiment, group, layout, methods in TABLES:
        rows = _rows(tex, label)
        assert set(rows) == set(methods), (label, sorted(rows))  # no row of the table is left unmapped
        for name, method in methods.items():
            out[(experiment, group, method)] = _value_ci(rows[name], layout)
    out.update(_em_paragraph(tex))
    for method in ("few-shot", "rte", "oracle"):  # codeio-em's supervised rows are Table 5's runs
        out[("codeio-em", "held-out-pairs", method)] = out[("codeio", "held-out-pairs", method)]
    return out


EM_SENTENCES = {  # App. B.2, "Experiments and Results": the printed sentence of each number
    "rte-em-warmup": r"Primitive Warm-up EM strategy, RTE achieved an accuracy of ([0-9.]+)\\%",
    "cot-majority": r"Chain-of-Thought with Majority Voting baseline \(([0-9.]+)\\%\)",
    "rte-em-semi25": r"25\\% of the ground-truth labels\) successfully reconstructed the missing task graph to "
    r"achieve ([0-9.]+)\\% accuracy",
}


def _em_paragraph(tex: str) -> dict:
    """App. B.2's EM numbers, read from the sentences that print them."""
    start = tex.index("\\textbf{Experiments and Results.}")
    text = " ".join(tex[start : tex.index("\\section", start)].split())
    out = {}
    for method, pattern in EM_SENTENCES.items():
        m = re.search(pattern, text)
        assert m, (method, pattern)
        out[("codeio-em", "held-out-pairs", method)] = (float(m.group(1)) / 100.0, None)
    return out


def _multistep(tex: str) -> dict:
    """tab:multi_step_results: a family cell (\\multirow) heads two method rows of F4, F5 values."""
    start = tex.index("\\label{tab:multi_step_results}")
    body = tex[tex.index("\\midrule", start) : tex.index("\\end{tabular}", start)]
    out, family, seen = {}, None, set()
    for line in re.split(r"\\\\", body):
        cells = [c.strip() for c in line.replace("\\midrule", "").replace("\\bottomrule", "").split("&")]
        if len(cells) != 4:
            continue
        family = MULTISTEP_FAMILIES[_plain(cells[0])] if _plain(cells[0]) else family
        method = MULTISTEP_METHODS[_plain(cells[1])]
        seen.add((family, method))
        for region, cell in zip(("F4", "F5"), cells[2:], strict=True):
            out[("parameter-multistep", f"{family}/{region}", method)] = (_number(cell), None)
    assert len(seen) == len(MULTISTEP_FAMILIES) * len(MULTISTEP_METHODS), sorted(seen)
    return out


def test_number_parser():
    assert _number("7.33 \\times 10^2") == pytest.approx(733.0)
    assert _number("\\mathbf{1.19 \\times 10^1}") == pytest.approx(11.9)
    assert _number("1.05 \\text{e}5") == pytest.approx(1.05e5)
    assert _number("\\textbf{66.07\\%}") == pytest.approx(0.6607)
    assert _value_ci(["$\\mathbf{0.051 \\pm 0.002}$"], "pm") == pytest.approx((0.051, 0.002))
    with pytest.raises(AssertionError):
        _number("n/a")


def test_every_paper_value_is_the_number_the_paper_prints(tex):
    printed = _printed(tex)
    assert set(printed) == set(PAPER_VALUES), sorted(set(printed) ^ set(PAPER_VALUES))
    for key, (value, ci, _source) in PAPER_VALUES.items():
        want_value, want_ci = printed[key]
        assert value == pytest.approx(want_value, rel=1e-12), key
        assert (ci is None) == (want_ci is None), key
        if ci is not None:
            assert ci == pytest.approx(want_ci, rel=1e-12), key


def test_every_source_names_the_table_it_was_read_from(tex):
    labels = {(e, g): label for label, e, g, _, _ in TABLES} | {
        ("parameter", g): "tab:param_results" for g in FAMILIES.values()
    }
    labels |= {
        ("parameter-multistep", f"{g}/{r}"): "tab:multi_step_results"
        for g in MULTISTEP_FAMILIES.values()
        for r in ("F4", "F5")
    }
    labels[("codeio-em", "held-out-pairs")] = "tab:codeio_results"
    for (experiment, group, method), (_v, _ci, source) in PAPER_VALUES.items():
        if (experiment, method) in {("codeio-em", m) for m in EM_SENTENCES}:
            assert source.startswith("App. B.2"), (method, source)
            continue
        assert labels[(experiment, group)] in source, (experiment, group, method, source)
