"""Tables of our results beside the paper's numbers: markdown for files, plain text for terminals."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from taskextrap.errors import TaskextrapError
from taskextrap.files import read_json
from taskextrap.report.schema import validate_results

__all__ = [
    "format_number",
    "format_value_ci",
    "format_seed_sd",
    "comparisons_markdown",
    "results_markdown",
    "comparison_table",
    "render_report",
    "console_table",
    "load_results",
    "CAPTIONS",
    "DIAGNOSTIC_GROUPS",
    "caption",
    "diagnostic_definitions",
]

MISSING = "-"

CI_FOOTNOTE = (
    "ours: mean ± ci95 over the n test targets, each target's value first averaged over the "
    "training seeds (mse: Student-t interval; accuracy: 95% bootstrap resampling targets; "
    "one target: t interval over the n seeds); seed sd: standard deviation across seeds of the "
    "per-seed means (- for one seed; 'seed-free': the method gives the same numbers under every "
    "seed and is counted once); paper: the number the paper prints, ± its printed interval "
    "(- where it prints none)."
)

COMPARISON_FOOTNOTE = (
    "a − b: mean paired difference on the same targets, with its 95% interval over targets of "
    "the seed-averaged differences; per seed: each seed's mean difference; clear: the interval "
    "excludes 0 and every seed agrees in sign (then 'winner' is the better method)."
)


# What each diagnostic metric means: a caption for benchmarks/tables.py's tables and the
# Diagnostics note of results.md (:func:`diagnostic_definitions`). A dict value holds one text per
# experiment (the first whose name starts the run's or file's name).
CAPTIONS: dict[str, str | dict[str, str]] = {
    "coverage": "coverage: the share of query points inside the 90% predictive interval (0.9 when "
    "calibrated); `-uncalibrated`: the method's raw interval (rte's posterior, a classic's own), "
    "before the scale chosen for it on the same dev split (search.calibration)",
    "interval-width": "mean width of the 90% predictive interval, in the target's units",
    "entropy": "entropy (nats) of the posterior over candidate decompositions: 0 when one candidate "
    "holds all the weight, log k when k share it",
    "trustworthiness": "trustworthiness of the 2-D map (1: its neighbourhoods are neighbourhoods of the "
    "high-dimensional space; about 0.5 for a random map)",
    "spearman": {
        "manifolds": "Spearman correlation of the map's read-out with the true parameter, held-out "
        "tasks included (composition: distance from the sin centroid against "
        "sin < sin∘poly < poly; on the dev split poly∘sin takes sin∘poly's place). "
        "`-linear-readout` rows (dev split only): a linear read-out in place of "
        "the quadratic one",
        "llm-geometry": "Spearman correlation of the embedding's cosine distances with the "
        "behavioural distances (share of probe strings where two primitives "
        "differ) over all 465 pairs; 0 for a random embedding",
    },
    "fraction": {
        "manifolds": "share of held-out tasks whose read-out lies beyond the last training level or region",
        "composition-em": "share of the unlabelled training tasks whose pseudo-label, after E-step N "
        "(ARM:eN), behaves like the true pair (pseudo-labels), is it "
        "(pseudo-labels-exact) or has a held-out family pair "
        "(pseudo-labels-held-out-pair, reported by the runs that restrict "
        "pseudo-labels to training pairs, as every run since issue 36 does)",
        "codeio-em": "share of the unlabelled training composites whose pseudo-label, after E-step N "
        "(ARM:eN), behaves like the true pair on the probe strings (pseudo-labels) or "
        "is it (pseudo-labels-exact)",
        "llm-geometry": "k-nearest-neighbour agreement (k = 3): share of each primitive's 3 nearest "
        "neighbours in the embedding that are among its 3 nearest in behaviour "
        "(chance 0.1)",
    },
    "silhouette": "silhouette of the three classes in the map (1: separate, 0: overlapping)",
    "relative-distance": "distance of the held-out centroid from F1_2 + (F1_2 − F1_1), in units of that "
    "step (0: the step lands exactly on F2; on the dev split the halves of F1_1 "
    "step to F1_2, twice as wide, where an exact linear map gives 0.5)",
}

# The accuracy-style diagnostic groups (what the search found, not what it scored), by the group's
# name after any "<family>:" or "<set>:" prefix; a name that starts with a key counts as that key
# (``decomposition-found-novel``). The other accuracy groups are results (parity, codeio).
DIAGNOSTIC_GROUPS = {
    "anchor-retrieved": "share of targets whose highest-weighted anchor is among the library tasks nearest the "
    "target in true parameters: how often the search found a right anchor",
    "predecessor-retrieved": "share of targets whose chosen anchor is the target's true predecessor one level down "
    "(`top-k-candidates`: the predecessor is among the k candidates)",
    "pair-retrieved": "share of targets whose chosen decomposition is the true (outer, inner) pair "
    "(`no-refinement`: before refinement; `top-k-candidates`: the true pair is among the candidates)",
    "chain-retrieved": "share of targets whose chosen depth-3 chain is the true one (`top-k-candidates`: the true "
    "chain is among the candidates; `top-k-SLOT`: that slot's true primitive is)",
    "decomposition-found": "share of tasks whose chosen candidate behaves like the true decomposition on the probe "
    "inputs (`-novel`: the novel pairs only; parity: per candidate space)",
    "answer-in-prompt": "share of tasks whose final prompt shows the query's answer: 0 by construction (a leak check)",
    "candidate-recall": "share of tasks whose true pair (by behaviour) is among the candidates the embedding keeps",
    "primitives": "the base model, before any fine-tuning, executing each single primitive from 3 shots on fresh "
    "strings",
}

TINY_NOTE = (
    "profile tiny: a plumbing check (seconds-sized fits on a few tasks), not results; its numbers say that "
    "the pipeline runs, nothing about the methods."
)


def caption(metric: str, experiment: str) -> str | None:
    """What the diagnostic ``metric`` of ``experiment`` (a run's or results file's name) means
    (:data:`CAPTIONS`); None for a metric without one (mse, accuracy)."""
    text = CAPTIONS.get(metric)
    if isinstance(text, dict):  # one text per experiment
        return next((t for exp, t in text.items() if experiment.startswith(exp)), None)
    return text


def diagnostic_group(group: str) -> str | None:
    """The :data:`DIAGNOSTIC_GROUPS` key of an accuracy row's ``group`` (``quadratic:anchor-retrieved``
    -> ``anchor-retrieved``), or None for a group of results."""
    base = group.rsplit(":", 1)[-1]
    return next((k for k in DIAGNOSTIC_GROUPS if base == k or base.startswith(f"{k}-")), None)


def diagnostic_definitions(results: dict) -> list[str]:
    """``name: definition`` of every diagnostic among a run's rows, in their order: each metric
    other than mse and accuracy (:func:`caption`), and each accuracy-style diagnostic group
    (:func:`diagnostic_group`)."""
    experiment, lines, seen = str(results.get("experiment", "")), [], set()
    for row in results.get("rows", []):
        if row["metric"] == "accuracy":
            name = diagnostic_group(str(row["group"]))
            text = DIAGNOSTIC_GROUPS.get(name) if name else None
            label = f"{name} (accuracy)"
        else:
            name = label = row["metric"]
            text = caption(name, experiment)
        if text and name not in seen:
            seen.add(name)
            lines.append(f"{label}: {text.removeprefix(f'{name}: ')}")
    return lines


def format_number(v: float | int | None) -> str:
    """Format a number compactly with 3 significant digits.

    Scientific notation (``"1.20e+05"``, ``"7.33e-04"``) is used for ``|v| >= 1e4`` and for
    ``0 < |v| < 1e-3``; otherwise fixed notation with 3 significant digits (``"1.53"``,
    ``"0.0510"``), except that numbers ``>= 100`` keep all their integer digits (``"733"``,
    ``"1097"``). ``None`` gives ``"-"``; NaN and infinities give ``"nan"``, ``"inf"``, ``"-inf"``.
    """
    if v is None:
        return MISSING
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4 or a < 1e-3:
        return f"{v:.2e}"
    decimals = max(0, 2 - math.floor(math.log10(a)))
    return f"{v:.{decimals}f}"


def format_value_ci(value: float | None, ci95: float | None) -> str:
    """Format ``value ± ci95`` with :func:`format_number`; just the value if ``ci95`` is None."""
    if value is None:
        return MISSING
    if ci95 is None:
        return format_number(value)
    return f"{format_number(value)} ± {format_number(ci95)}"


def format_seed_sd(row: dict) -> str:
    """The ``seed sd`` cell of a row: ``-`` without one (a single seed), ``0 (seed-free)`` for a
    seed-independent method, otherwise :func:`format_number` of ``row["seed_sd"]``."""
    if row.get("seed_independent"):
        return "0 (seed-free)"
    return format_number(row.get("seed_sd"))


def _md_escape(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(headers: list[str], rows: list[list[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    aligns = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _text_table(headers: list[str], rows: list[list[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(str(c))) for w, c in zip(widths, r, strict=True)]

    def fmt(cells: list[str]) -> str:
        out = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def _title(results: dict) -> str:
    seeds = ", ".join(str(s) for s in results.get("seeds", []))
    return (
        f"{results.get('experiment', '?')} — protocol {results.get('protocol', '?')}, "
        f"profile {results.get('profile', '?')}, seeds [{seeds}]"
    )


def _run_line(results: dict) -> str | None:
    parts = []
    wall = results.get("timing", {}).get("wall_s")
    computed = results.get("timing", {}).get("unit_s")  # the units' own compute time, cached or not
    if wall is not None:
        # units read back from the cache (or run side by side): their own compute time too
        resumed = computed is not None and computed > 1.5 * wall
        parts.append(
            f"wall time {wall:.1f} s" + (f" (its units took {computed:.1f} s when computed)" if resumed else "")
        )
    env = results.get("environment") or {}
    for key in ("taskextrap", "torch", "device", "git"):
        if env.get(key) is not None:
            parts.append(f"{key} {env[key]}" + (" (dirty)" if key == "git" and env.get("dirty") else ""))
    if env.get("source_hash") is not None:
        parts.append(f"source {env['source_hash']}")
    return "; ".join(parts) if parts else None


def scale_notes(results: dict) -> list[str]:
    """One line per distinct borrowed interval scale of the run (``config["interval_scale_source"]``,
    ``search.calibration.scale_source``): a user's tasks whose 90% intervals use a scale chosen on
    other tasks' dev splits, said where the tables are read."""
    found: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, str) and value.startswith("borrowed") and value not in found:
            found.append(value)

    walk((results.get("config") or {}).get("interval_scale_source"))
    return [f"interval scale {s}" for s in found]


def _metrics_in_order(rows: list[dict]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r["metric"] not in seen:
            seen.append(r["metric"])
    return seen


_RESULT_HEADERS = ["group", "method", "ours (value ± ci95)", "seed sd", "paper (value ± ci)", "n"]


def _result_cells(row: dict) -> list[str]:
    return [
        str(row["group"]),
        str(row["method"]),
        format_value_ci(row["value"], row.get("ci95")),
        format_seed_sd(row),
        format_value_ci(row.get("paper_value"), row.get("paper_ci95")),
        str(row["n"]),
    ]


_COMPARE_HEADERS = ["group", "metric", "a", "b", "a − b [95% interval]", "per seed", "n", "clear", "winner"]


def _comparison_cells(c: dict) -> list[str]:
    interval = "" if c.get("lo") is None else f" [{format_number(c['lo'])}, {format_number(c['hi'])}]"
    return [
        str(c["group"]),
        str(c["metric"]),
        str(c["a"]),
        str(c["b"]),
        format_number(c["diff"]) + interval,
        ", ".join(format_number(v) for v in c["seed_diffs"]),
        str(c["n"]),
        "yes" if c["clear"] else "no",
        c.get("winner") or MISSING,
    ]


def comparisons_markdown(comparisons: list[dict]) -> str:
    """A markdown table of paired comparisons (``results["comparisons"]``): group, metric, a, b,
    the mean difference a − b with its 95% interval, the per-seed mean differences, n, whether
    the claim is clear and the winner; then a footnote."""
    table = _md_table(_COMPARE_HEADERS, [_comparison_cells(c) for c in comparisons], right=(4, 5, 6))
    return f"{table}\n\n_{COMPARISON_FOOTNOTE}_"


def _notes(rows: list[dict]) -> list[str]:
    return [f"{r['group']} / {r['method']}: {r['note']}" for r in rows if r.get("note")]


def verdict_lines(results: dict, method: str = "rte") -> list[str]:
    """What a reader looks for first, one line per group and metric: the methods ``method``
    clearly beats and those that clearly beat it (paired comparisons, ``report.compare``: the
    interval over targets excludes 0 and every seed agrees), each with both methods' values, and
    how many comparisons are not clear. Empty when ``method`` has no paired comparison."""
    values = {(r["group"], r["metric"], r["method"]): r.get("value") for r in results.get("rows", [])}
    cells: dict[tuple[str, str], dict[str, list[str]]] = {}
    for c in results.get("comparisons") or []:
        if c.get("a") != method:
            continue
        key = (c["group"], c["metric"])
        kind = "unclear" if not c.get("clear") else ("beats" if c.get("winner") == method else "loses")
        other = values.get((*key, c["b"]))
        cells.setdefault(key, {"beats": [], "loses": [], "unclear": []})[kind].append(
            f"{c['b']} {format_number(other)}"
        )
    lines = []
    for (group, metric), kinds in cells.items():
        parts = [f"{group} ({metric}): {method} {format_number(values.get((group, metric, method)))}"]
        if kinds["beats"]:
            parts.append(f"clearly beats {', '.join(kinds['beats'])}")
        if kinds["loses"]:
            parts.append(f"is clearly beaten by {', '.join(kinds['loses'])}")
        if kinds["unclear"]:
            parts.append(f"not clear against {len(kinds['unclear'])}")
        lines.append("; ".join(parts))
    return lines


def results_markdown(results: dict) -> str:
    """Render one run's results as markdown: our numbers beside the paper's.

    A title line names experiment, protocol, profile and seeds (a ``tiny`` run is marked as a
    plumbing check, :data:`TINY_NOTE`); the verdict, one line per group (:func:`verdict_lines`);
    then one table per metric
    (``group | method | ours (value ± ci95) | seed sd | paper (value ± ci) | n``) with rows in
    the order given, any row notes, the definition of every diagnostic the rows hold
    (:func:`diagnostic_definitions`), a footnote explaining the intervals, and the paired
    comparisons (:func:`comparisons_markdown`) when the results have any.
    """
    rows = results.get("rows", [])
    out = [f"# {_title(results)}", ""]
    if results.get("profile") == "tiny":
        out += [f"**{TINY_NOTE}**", ""]
    run = _run_line(results)
    if run:
        out += [run, ""]
    notes = scale_notes(results)
    out += [f"**{_md_escape(n)}**" for n in notes] + ([""] if notes else [])
    verdict = verdict_lines(results)
    if verdict:
        out += ["## verdict", ""] + [f"- {_md_escape(v)}" for v in verdict] + [""]
    if not rows:
        out += ["(no result rows)", ""]
    for metric in _metrics_in_order(rows):
        sel = [r for r in rows if r["metric"] == metric]
        out += [f"## {metric}", ""]
        out += [_md_table(_RESULT_HEADERS, [_result_cells(r) for r in sel], right=(2, 3, 4, 5)), ""]
    notes = _notes(rows)
    if notes:
        out += ["Notes:", ""] + [f"- {_md_escape(n)}" for n in notes] + [""]
    diagnostics = diagnostic_definitions(results)
    if diagnostics:
        out += ["## diagnostics", ""] + [f"- {d}" for d in diagnostics] + [""]
    out += [f"_{CI_FOOTNOTE}_", ""]
    if results.get("comparisons"):
        out += ["## paired comparisons", "", comparisons_markdown(results["comparisons"]), ""]
    return "\n".join(out)


def console_table(results: dict) -> str:
    """Render one run's results as a plain-text aligned table for a terminal.

    Same content as :func:`results_markdown` (title, the tiny profile's note, the verdict, one table per
    metric, notes, diagnostics, footnote, paired comparisons) without markdown syntax.
    """
    rows = results.get("rows", [])
    out = [_title(results)]
    if results.get("profile") == "tiny":
        out.append(TINY_NOTE)
    run = _run_line(results)
    if run:
        out.append(run)
    out.append("")
    notes = scale_notes(results)
    out += notes + ([""] if notes else [])
    verdict = verdict_lines(results)
    if verdict:
        out += ["verdict:"] + [f"  {v}" for v in verdict] + [""]
    if not rows:
        out += ["(no result rows)", ""]
    for metric in _metrics_in_order(rows):
        sel = [r for r in rows if r["metric"] == metric]
        out += [f"[{metric}]"]
        out += [_text_table(_RESULT_HEADERS, [_result_cells(r) for r in sel], right=(2, 3, 4, 5)), ""]
    notes = _notes(rows)
    if notes:
        out += ["notes:"] + [f"  {n}" for n in notes] + [""]
    diagnostics = diagnostic_definitions(results)
    if diagnostics:
        out += ["diagnostics:"] + [f"  {d}" for d in diagnostics] + [""]
    out.append(CI_FOOTNOTE)
    if results.get("comparisons"):
        out += ["", "[paired comparisons]"]
        out.append(
            _text_table(_COMPARE_HEADERS, [_comparison_cells(c) for c in results["comparisons"]], right=(4, 5, 6))
        )
        out.append(COMPARISON_FOOTNOTE)
    return "\n".join(out)


_COMPARISON_HEADERS = ["experiment", "protocol", "profile", "group", "method", "metric", "ours", "seed sd", "paper"]


def comparison_table(results_list: list[dict]) -> str:
    """One markdown table comparing several runs with the paper.

    Columns: experiment, protocol, profile, group, method, metric, ours (value ± ci95), seed sd,
    paper (value ± ci); runs and rows in the order given, followed by the ci95 footnote.
    """
    cells = []
    for res in results_list:
        for r in res.get("rows", []):
            cells.append(
                [
                    str(res.get("experiment", "?")),
                    str(res.get("protocol", "?")),
                    str(res.get("profile", "?")),
                    str(r["group"]),
                    str(r["method"]),
                    str(r["metric"]),
                    format_value_ci(r["value"], r.get("ci95")),
                    format_seed_sd(r),
                    format_value_ci(r.get("paper_value"), r.get("paper_ci95")),
                ]
            )
    table = _md_table(_COMPARISON_HEADERS, cells, right=(6, 7, 8))
    return f"{table}\n\n_{CI_FOOTNOTE}_\n"


def load_results(directory: str | os.PathLike) -> dict:
    """Load and validate a run's results: ``DIRECTORY/results.json``, or a results file given
    directly.

    Raises :class:`TaskextrapError` with a one-line message if the path or file is missing, the
    JSON is invalid, the contents do not match the results schema or hold no rows.
    """
    d = Path(directory)
    if d.is_file():
        path = d
    elif not d.is_dir():
        raise TaskextrapError(f"not a directory or results file: {d}")
    else:
        path = d / "results.json"
    if not path.is_file():
        runs = sorted(p.parent.name for p in d.glob("*/results.json"))
        hint = (
            f"its run directories: {', '.join(runs[:5])}"
            if runs
            else "a run directory is OUT/<experiment>-<protocol>-<profile> of `taskextrap reproduce ... --out OUT`"
        )
        raise TaskextrapError(f"no results.json in {d} ({hint})")
    obj = read_json(path)
    try:
        validate_results(obj)
    except TaskextrapError as exc:
        raise TaskextrapError(f"{path}: {exc}") from None
    if not obj["rows"]:
        raise TaskextrapError(f"{path} has no rows: nothing to report")
    return obj


def render_report(dirs: list[str]) -> str:
    """Load ``DIR/results.json`` from each directory (or each results file), validate it, and return a markdown
    :func:`comparison_table` of all runs.

    Raises :class:`TaskextrapError` (one line) if no directory is given or any results file is
    missing or invalid.
    """
    if not dirs:
        raise TaskextrapError("no result directories given")
    return comparison_table([load_results(d) for d in dirs])


def wide_table(results: dict, metric: str = "mse", groups: list[str] | None = None) -> str:
    """A markdown table of one run with methods as rows and groups (families, pairs...) as columns.

    Each cell is ``value ± ci95``, then ``(sd S)`` with the seed sd (``(sd 0, seed-free)`` for a
    seed-independent method; nothing for one seed), then ``(paper X)`` where the paper prints a
    number.
    Only rows with ``metric`` are used; ``groups`` picks and orders the columns (default: all, in
    order of appearance).
    """
    rows = [r for r in results.get("rows", []) if r["metric"] == metric]
    groups = groups or list(dict.fromkeys(r["group"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows if r["group"] in groups))
    by = {(r["group"], r["method"]): r for r in rows}
    cells = []
    for m in methods:
        line = [f"`{m}`"]
        for g in groups:
            r = by.get((g, m))
            if r is None:
                line.append(MISSING)
                continue
            text = format_value_ci(r["value"], r.get("ci95"))
            if r.get("seed_independent"):
                text += " (sd 0, seed-free)"
            elif r.get("seed_sd") is not None:
                text += f" (sd {format_number(r['seed_sd'])})"
            if r.get("paper_value") is not None:
                text += f" (paper {format_number(r['paper_value'])})"
            line.append(text)
        cells.append(line)
    return _md_table(["method", *groups], cells, right=range(1, len(groups) + 1))
