"""Markdown tables of benchmark results; the README's and docs' tables are generated from here.

    python benchmarks/tables.py length-paper-paper composition-paper-paper
    python benchmarks/tables.py --all
    python benchmarks/tables.py --sync README.md docs/results.md     # rewrite every table block
    python benchmarks/tables.py --check README.md docs/results.md    # exit 1 if a block is stale

A table block in a markdown file is the text between ``<!-- table: NAME [metric=M] [groups=A,B]
[methods=A,B] -->`` and ``<!-- /table -->``, each on a line of its own (an empty block is filled by
``--sync``): the tables of ``benchmarks/results/NAME.json`` (``render``), or only its ``metric``
rows, the given groups and the given methods (in that order), each with the paired claims on what it
shows (those metrics, groups and methods: a coverage block under an mse block of the same file
repeats none of the mse block's claims); a ``scripts/dev_choices.py`` or
``scripts/codeio_sft_check.py`` file renders as its table of variants. ``<!-- table: headline
FILE:GROUP+GROUP ... -->`` renders one summary row per (file, group): ``rte`` beside the paper's
main baseline and the paper's RTE, and the methods that clearly beat ``rte`` (``render_headline``);
``<!-- table: versus [before=DIR] [methods=A,B] FILE:GROUP ... -->`` the paired verdicts of ``rte``
against every sanity baseline, or the given methods (``render_versus``); ``<!-- table: coverage
FILE:GROUP ... -->`` the 90% intervals' coverage, raw and calibrated (``render_coverage``);
``<!-- table: rte-gp-goals FILE:GROUP+GROUP ... -->`` and ``<!-- table: rte-gp-shift ... -->``
``rte-gp``'s goals (``render_context_goals``) and its dev split beside its test rows
(``render_context_shift``);
``<!-- table: method-table -->`` the method table (``taskextrap.baselines.table.markdown``). ``--sync`` regenerates the
blocks, ``--check`` (run by the test suite) fails when a block differs from what its committed
results file renders, so no table in the docs can drift from the numbers a committed command wrote.

Each name is a JSON file under benchmarks/results/ written by benchmarks/run.py; for each one the
coverage rows (the share of query points inside a 90% predictive interval) and the accuracy-style
rows (retrieval shares) get tables of their own, and the wall time is printed below.
Cells read ``value ± ci95 (sd S)``: the interval over targets of seed-averaged values, and the
standard deviation across seeds of the per-seed means. Files with paired comparisons list the
clear "A beats B" claims and count the others.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

import numpy as np

from taskextrap.report.tables import caption, format_value_ci, wide_table
from taskextrap.report.tables import format_number as fmt
from taskextrap.baselines.classics import CTX_GP_VARIANT, ctx_gp_variant
from taskextrap.search.calibration import split_method_key

# the ctx-gp fit behind a test file that records the learned classics' variants but not ctx-gp's:
# runs record it since the 1 + 32-start fit was adopted; before, from 9bab9e1, it was 1 + 16
CTX_GP_UNRECORDED = ctx_gp_variant("lbfgs", 16)

RESULTS = Path(__file__).parent / "results"


# report.tables.caption (results.md's diagnostics note reads the same captions) says what a
# diagnostic table shows (an mse or accuracy table's groups say it themselves)
METRIC_ORDER = (
    "mse",
    "coverage",
    "interval-width",
    "entropy",
    "accuracy",
    "trustworthiness",
    "spearman",
    "fraction",
    "silhouette",
    "relative-distance",
)


def wall_note(data: dict, wall: float) -> str:
    """The italic wall-time line under a table: the torch threads of its units too when the file
    records them (config ``threads``, written since 2026-11-28), as they move a float's last digits."""
    threads = (data.get("config") or {}).get("threads")
    per_unit = f", {threads} torch thread{'s' if threads != 1 else ''} per unit" if threads else ""
    return f"_wall {wall / 60:.1f} min on 2 CPU cores{per_unit}._"


def stale_classics(name: str, data: dict) -> str:
    """A line under a test file's table whose classic rows were made with another variant than the
    regime's dev choice today: a learned classic's (``meta-gp``, ``cnp``:
    ``baselines.classics.chosen``) or ``ctx-gp``'s fit (``classics.CTX_GP_VARIANT``; a file that
    records the learned ones but not it was made with the 1 + 16-start fit). The rows are that
    older fit's, held back against the dev-best. Empty when none is."""
    from taskextrap.baselines.classics import chosen

    config = data.get("config") or {}
    made = config.get("classic_variants") or {}
    if config.get("split") == "dev" or not made:
        return ""
    today = chosen(name.rsplit("-", 2)[0]) | {"ctx-gp": CTX_GP_VARIANT}
    made = {"ctx-gp": CTX_GP_UNRECORDED, **made}  # recorded since the 1 + 32-start fit was adopted
    rows = {r["method"] for r in data["rows"]}
    old = [f"`{m}` is `{v}`, not today's `{today[m]}`" for m, v in made.items() if m in rows and today.get(m) != v]
    if not old:
        return ""
    return (
        f"_made before the dev choice changed: {'; '.join(old)}; its rows are the older fit's, held back "
        "(results.md, the dev choice of the classics)._"
    )


def render(
    name: str,
    metrics=METRIC_ORDER,
    groups: list[str] | None = None,
    heading: bool = True,
    data: dict | None = None,
) -> str:
    """The tables of one results file (``metrics``, and only ``groups`` when given), with its
    footnotes: the interval rule, the clear paired claims on those metrics and groups, the split
    and seeds, the wall time. ``data`` is the parsed file when the caller has read it already."""
    data = data if data is not None else json.loads((RESULTS / f"{name}.json").read_text())
    parts = [f"#### {name}"] if heading else []
    for metric in metrics:  # accuracy-only runs (parity, codeio) get no empty MSE table
        rows = [r for r in data["rows"] if r["metric"] == metric and (groups is None or r["group"] in groups)]
        if rows:
            text = caption(metric, name)  # per experiment where it differs: the file is named after it
            note = [f"_{text}_", ""] if text else []
            parts += ["", *note, wide_table(data, metric, groups=list(dict.fromkeys(r["group"] for r in rows)))]
    if data["rows"] and all(r.get("ci_method") == "t-seeds" for r in data["rows"]):  # one target (projectile)
        parts += ["", "_value ± ci95 over seeds (t interval: one target); sd: across seeds._"]
    elif data["rows"] and all("ci_method" in r for r in data["rows"]) and len(data.get("seeds") or []) == 1:
        parts += ["", "_value ± ci95 over targets; one training seed, so no seed sd._"]
    elif data["rows"] and all("ci_method" in r for r in data["rows"]):
        parts += ["", "_value ± ci95 over targets (seed-averaged); sd: across seeds of the per-seed means._"]
    elif data["rows"]:  # written before the intervals were computed over targets
        parts += [
            "",
            "_value ± ci95 by the earlier rule (1.96·sd/√n over all target × seed entries, so "
            "narrower than it should be); sd: across seeds of the per-seed means._",
        ]
    config = data.get("config") or {}
    if "split" in config:
        parts += [
            "",
            f"_split `{config['split']}`, test seed {config.get('test_seed')}, training seeds {data.get('seeds')}._",
        ]
    stale = stale_classics(name, data)
    if stale:
        parts += ["", stale]
    comparisons = [
        c for c in data.get("comparisons") or [] if c["metric"] in metrics and (groups is None or c["group"] in groups)
    ]
    if comparisons:
        clear = grouped_claims(comparisons)
        unclear = sum(not c["clear"] for c in comparisons)
        parts += [
            "",
            f"_clear paired claims (the paired interval excludes 0 and every seed agrees): "
            f"{'; '.join(clear) if clear else 'none'}; {unclear} other comparison(s) not clear._",
        ]
    wall = data.get("timing", {}).get("wall_s")
    if wall is not None and wall >= 5 and not assembled(data):
        parts += ["", wall_note(data, wall)]
    elif wall is not None and "-ablations" in name:  # ablations reuse the main experiment's fits
        parts += ["", "_scored from the main experiment's cached units._"]
    elif wall is not None:  # a run finished over several resumptions: its last call read the cached unit
        parts += ["", "_read from the unit cache; the text says how long computing it took._"]
    return "\n".join(parts).strip("\n")


def assembled(data: dict) -> bool:
    """Whether a results file was assembled from cached units computed elsewhere (one process per
    seed, then ``run.py`` read them): its wall time is under 1% of its units' compute."""
    timing = data.get("timing", {})
    return timing.get("wall_s", 0.0) < 0.01 * timing.get("unit_s", 0.0)


def grouped_claims(comparisons) -> list[str]:
    """The clear claims of ``comparisons``, one sentence per (winner, loser) listing its groups:
    ``"rte beats sparse-inductive (quadratic, cubic)"``; the metric is named when not MSE."""
    by_pair: dict[tuple, list[str]] = {}
    for c in comparisons:
        if c["clear"]:
            loser = c["b"] if c["winner"] == c["a"] else c["a"]
            by_pair.setdefault((c["winner"], loser, c["metric"]), []).append(c["group"])
    return [f"{w} beats {lo}{'' if m == 'mse' else f' ({m})'} ({', '.join(g)})" for (w, lo, m), g in by_pair.items()]


# The body may be empty; it never spans another block's markers (an unclosed block matches nothing).
BLOCK = re.compile(r"(<!-- table: (?P<spec>[^>]*?) -->\n)(?P<body>(?:(?!<!-- /?table)[^\n]*\n)*?)(<!-- /table -->)")


def render_dev_choices(data: dict) -> str:
    """The table of a ``scripts/dev_choices.py`` file: every variant's dev MSE and its paired
    difference to the default of its day (mean ± 95% t half-width over dev targets), and the
    coverage of its 90% predictive interval where the file has it."""
    spread = any("coverage" in v for u in data["units"].values() for r in u["settings"].values() for v in r["variants"])
    head = "| unit | setting | value | dev MSE | paired diff. to the default | clear |"
    rule = "| --- | --- | --- | ---: | ---: | :---: |"
    lines = [head + (" 90% coverage |" if spread else ""), rule + (" ---: |" if spread else "")]
    for unit, u in data["units"].items():
        fixed = ", ".join(f"{k}={v}" for k, v in (u.get("fixed") or {}).items())
        for setting, res in u["settings"].items():
            for v in res["variants"]:
                d = v["vs_default"]
                is_default = v["value"] == u["default"][setting]
                clear = "" if is_default else ("yes" if abs(d["mean"]) > d["ci95"] else "no")
                diff = "(default)" if is_default else f"{fmt(d['mean'])} ± {fmt(d['ci95'])}"
                cover = f" {fmt(v['coverage'])} |" if "coverage" in v else (" |" if spread else "")
                name = f"{unit}{f' ({fixed})' if fixed else ''}"
                lines.append(f"| {name} | `{setting}` | {v['value']} | {fmt(v['mse'])} | {diff} | {clear} |{cover}")
    lines += [
        "",
        f"_`{data.get('command') or 'python scripts/dev_choices.py --profile ' + data['profile']}`: seed "
        f"{data['seed']}, {data['n_targets']} dev targets × {data['n_draws']} draws; "
        f"wall {data['wall_s'] / 60:.0f} min on 2 CPU cores. The default is the one of the day "
        f"the sweep ran._",
    ]
    return "\n".join(lines)


def render_recipes(data: dict) -> str:
    """The table of a ``scripts/codeio_sft_check.py`` file: each recipe's exact match on
    training pairs with fresh strings and on the dev tasks, its final loss and training time,
    then each recorded paired comparison (``--compare``)."""
    lines = [
        "| recipe | training pairs | dev tasks | final loss | fine-tuning |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for recipe, r in sorted(data["runs"].items()):
        lines.append(
            f"| `{recipe}` | {fmt(r['train'])} | {fmt(r['dev'])} | {fmt(r['final_loss'])} | {r['sft_s'] / 60:.1f} min |"
        )
    lines += [
        "",
        "_exact match of `oracle` (extender runs) or `few-shot` (few-shot runs); seed 0; each row's "
        "command is in the results file._",
    ]
    for c in (data.get("comparisons") or {}).values():
        lines += [
            "",
            f"_paired on the {c['n']} dev tasks: `{c['a']}` minus `{c['b']}` = {c['diff']:+.3f} "
            f"[{c['lo']:+.3f}, {c['hi']:+.3f}] ({'clear' if c['clear'] else 'not clear'})._",
        ]
    return "\n".join(lines)


def render_embeddings(data: dict) -> str:
    """``embeddings.json``: Spearman(proxy distance, true parameter distance) per family, or
    ``length-embeddings.json``: predecessor retrieval per estimator; both on held-out training tasks."""
    if "retrieval" in data:
        lines = [
            "| protocol | estimator | median rank | in top k | in screened | library |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for key, r in data["retrieval"].items():
            protocol, method = key.split("/")
            top = r.get("recall_top_k", r.get("recall_top10"))
            k = r.get("k", 10)
            lines.append(
                f"| `{protocol}` | `{method}` | {r['median_rank']:.0f} | {fmt(top)} (k={k}) | "
                f"{fmt(r['recall_screened'])} ({r['screened']}) | {r['library_size']} |"
            )
    else:
        keys = list(data["per_family"])
        families = list(dict.fromkeys(k.split("/")[1] for k in keys))
        lines = [
            "| protocol | estimator | " + " | ".join(families) + " | mean |",
            "| --- | --- |" + " ---: |" * (len(families) + 1),
        ]
        for pm, mean in data["mean_rho_theta"].items():
            protocol, method = pm.split("/")
            cells = [f"{data['per_family'][f'{protocol}/{f}/{method}']['rho_theta']:.2f}" for f in families]
            lines.append(f"| `{protocol}` | `{method}` | " + " | ".join(cells) + f" | {mean:.2f} |")
    lines += [
        "",
        f"_wall {data['wall_s'] / 60:.1f} min on 2 CPU cores; seed 0; commit {data['environment'].get('git') or '?'}._",
    ]
    return "\n".join(lines)


def render_executors(data: dict) -> str:
    """``executors.json``: the wall time of one sweep under each executor, and their ratios."""
    w, u, n = data["wall_s"], data["unit_total_s"], data["threads"]
    what = {
        "serial": "`serial`, one unit at a time",
        "serial-all-cores": "`serial`, one unit at a time",
        "ray": f"`ray`, {data['cores']} units at a time (Ray {data['ray_version']})",
    }
    lines = [
        "| executor | torch threads per unit | wall | units' own time (sum) | per unit |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for k in ("serial", "serial-all-cores", "ray"):
        lines.append(f"| {what[k]} | {n[k]} | {w[k]:.0f} s | {u[k]['sum']:.0f} s | {u[k]['mean']:.1f} s |")
    lines += [
        "",
        f"_{data['what']}: {data['n_units']} units on {data['cores']} CPU cores; serial / ray = "
        f"{data['serial_over_ray']:.2f}, serial on all cores / ray = {data['serial_all_cores_over_ray']:.2f}; "
        f"same rows serially and under Ray (one thread per unit): "
        f"{'yes' if data['identical_rows'] else 'NO'}; commit {data['environment'].get('git') or '?'}; "
        f"`{data['command']}`._",
    ]
    return "\n".join(lines)


def render_nn_index(data: dict) -> str:
    """``nn-index.json``: microseconds per query of ``search.index.nearest`` per backend and
    library size (``-`` where a backend was not timed at that size)."""
    backends = ["numpy", "brute", "kd_tree", "ball_tree", "faiss"]
    lines = [
        "| workload | library | k | " + " | ".join(f"`{b}`" for b in backends) + " |",
        "| --- | ---: | ---: |" + " ---: |" * len(backends),
    ]
    for workload, sizes in data["results"].items():
        for n, r in sizes.items():
            cells = [
                f"{r['backends'][b]['nearest_us']:.0f}" if "nearest_us" in r["backends"].get(b, {}) else "-"
                for b in backends
            ]
            lines.append(f"| {workload} | {int(n):,} | {r['k']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"_µs per query, end to end (the index's candidates re-ranked exactly); width {data['width']}, seed "
        f"{data['seed']}, {data['machine']['cpus']} CPU cores; `auto`: {data['auto_rule']}; "
        f"commit {data['environment'].get('git') or '?'}; "
        f"`{data['command']}`._",
    ]
    return "\n".join(lines)


def render_scale(data: dict) -> str:
    """``scale.json`` / ``scale-dev.json`` (benchmarks/scale.py): fit and predict time, peak
    memory, MSE and coverage per library size, and each size's paired MSE difference against the
    reference size (one seed: a clear difference is this seed's)."""
    if len(data.get("seeds", [])) > 1:
        return _render_scale_seeds(data)
    ref, paired = data["reference"], data.get("paired_vs_reference", {})
    lines = [
        "| tasks | fit s | ms per task | Γ s | Ψ s | predict s | peak MiB | MSE | coverage | MSE − "
        f"{ref:,}'s (95% CI) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in data["records"]:
        ph = r.get("phases_s", {})
        p = paired.get(str(r["tasks"]))
        diff = _scale_diff(p) if p else "reference" if r["tasks"] == ref else "-"
        lines.append(
            f"| {r['tasks']:,} | {r['fit_s']:.1f} | {r['fit_s_per_task_ms']:.1f} | "
            f"{ph.get('embedding_s', float('nan')):.1f} | {ph.get('psi_training_s', float('nan')):.1f} | "
            f"{r['predict_s']:.2f} | {r['peak_rss_mb']:,.0f} | {r['mse']:.4f} | {r['coverage']:.3f} | {diff} |"
        )
    if not data["records"]:
        lines = []
    files = data.get("data_file", [])
    if any("dev_seconds" in f for f in files):  # the command's own split of its time
        lines += ["| tasks (`taskextrap fit`, CSV) | command s | dev RTE s | rte-gp's choice s | peers s | final fit s "
                  "| dev targets |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for f in files:
            d = f.get("dev_seconds", {})
            peers = sum(v for k, v in d.items() if k not in ("rte", "rte-gp"))
            lines.append(f"| {f['tasks']:,} | {f['fit_command_s']:.1f} | {d.get('rte', 0):.1f} | "
                         f"{d.get('rte-gp', 0):.1f} | {peers:.1f} | {f['final_fit_s']:.1f} | "
                         f"{f.get('dev_targets')} |")  # fmt: skip
    else:
        for f in files:
            lines.append(f"| {f['tasks']:,} (`taskextrap fit`, CSV) | {f['fit_command_s']:.1f} | | | | | | | | |")
    lines += [
        "",
        f"_{data['family']} family, {data.get('split', 'test')} split, {data['targets']} targets, seed {data['seed']}, "
        f"{data['threads']} torch thread; commit {data['environment'].get('git') or '?'}; "
        f"{data['wall_s'] / 60:.0f} min; `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_stream(data: dict) -> str:
    """``stream.json`` (benchmarks/stream.py): ``taskextrap index`` per library size and engine,
    the seconds of its two passes, the peak memory of the driver and of a worker, the bytes read
    and written, whether both engines wrote the same index; then a million tasks' cost."""
    lines = [
        "| tasks | row groups | engine | start s | embed s | near anchors s | total s | µs per task | driver peak MiB "
        "| worker peak MiB | input MB | index MB | same index as serial |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in data["records"]:
        for engine in ("serial", "ray", "ray-cluster"):
            if engine not in r:
                continue
            e = r[engine]
            s = e["seconds"]
            label = "two-node cluster" if engine == "ray-cluster" else f"{engine} ({e['workers']})"
            agree = "-" if engine == "serial" else r["cluster_agrees" if engine == "ray-cluster" else "engines_agree"]
            lines.append(
                f"| {r['tasks']:,} | {r['row_groups']} | {label} | {s.get('start', 0):.1f} | {s['embed']:.1f} | "
                f"{s['near']:.1f} | {s['total']:.1f} | {1e6 * s['total'] / r['tasks']:.0f} | "
                f"{e['driver_peak_mib']:,.0f} | {e['worker_peak_mib']:,.0f} | {r['input_bytes'] / 1e6:,.1f} | "
                f"{e['output_bytes'] / 1e6:,.1f} | {agree if agree == '-' else ('yes' if agree else '**no**')} |"
            )
    m = data["per_million"]
    one = len(data["records"]) == 1
    head = "Measured at one size" if one else "A million tasks, from a line through the sizes' totals"
    cost = "; ".join(
        f"{engine}: {m[engine]['seconds_per_million'] / 60:.1f} min a million tasks ({m[engine]['us_per_task']:.0f} µs "
        "a task" + ("" if one else f" beyond {m[engine]['fixed_s']:.0f} s fixed") + ")"
        for engine in ("serial", "ray")
    )
    lines += [
        "",
        f"_{head}: {cost}; "
        f"{m['input_bytes_per_million'] / 1e9:.2f} GB read and {m['serial']['output_bytes_per_million'] / 1e9:.2f} GB "
        f"written a million tasks. {data['family']} family, {data['points_per_task']} points a task, "
        f"{data['tasks_per_group']:,} tasks a row group, RTE fitted on {data['sample']} tasks in "
        f"{data['model_fit_s']:.0f} s; seed {data['seed']}; "
        f"commit {data['environment'].get('git') or '?'}; {data['wall_s'] / 60:.0f} min; `{data['command']}`._",
    ]
    return "\n".join(lines)


def _scale_diff(p: dict) -> str:
    """A size's paired MSE difference against the reference size, its interval, bold when clear."""
    lo, hi = p["interval"]
    return f"{p['mse_minus_reference']:+.4f} ({lo:+.4f}, {hi:+.4f})" + (" **clear**" if p["clear"] else "")


def _render_scale_seeds(data: dict) -> str:
    """:func:`render_scale` of a file of several seeds: per size, the seeds' median fit seconds,
    their mean MSE and coverage, and the paired difference against the reference size over
    targets and seeds, with each seed's own."""
    ref, paired, seeds = data["reference"], data.get("paired_vs_reference", {}), data["seeds"]
    lines = [
        f"| tasks | fit s (median of {len(seeds)}) | MSE (mean of seeds) | coverage | MSE − {ref:,}'s (95% CI) "
        "| each seed's difference |",
        "| ---: | ---: | ---: | ---: | --- | --- |",
    ]
    by: dict[int, list[dict]] = {}
    for r in data["records"]:
        by.setdefault(r["tasks"], []).append(r)
    for n, rs in by.items():
        p = paired.get(str(n))
        diff, each = ("reference", "-") if n == ref else ("-", "-")
        if p:
            diff, each = _scale_diff(p), ", ".join(f"{v:+.4f}" for v in p.get("seed_diffs", []))
        lines.append(
            f"| {n:,} | {statistics.median(r['fit_s'] for r in rs):.1f} | "
            f"{statistics.fmean(r['mse'] for r in rs):.4f} | {statistics.fmean(r['coverage'] for r in rs):.3f} | "
            f"{diff} | {each} |"
        )
    lines += [
        "",
        f"_{data['family']} family, {data.get('split', 'test')} split, {data['targets']} targets, seeds "
        f"{', '.join(map(str, seeds))} (each size's library drawn and RTE trained per seed), {data['threads']} torch "
        f"thread; commit {data['environment'].get('git') or '?'}; {data['wall_s'] / 60:.0f} min; `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_scale_candidates(data: dict) -> str:
    """``scale-candidates.json``: the dev MSE of each candidate count (retrieve = screen = c)
    per family and library size, the prediction seconds of 100 targets beside it."""
    counts = sorted({int(c) for f in data["rows"].values() for r in f.values() for c in r["by_count"]})
    lines = [
        "| family | tasks | " + " | ".join(f"{c} + {c}" for c in counts) + " |",
        "| --- | ---: |" + " ---: |" * len(counts),
    ]
    for fam, sizes in data["rows"].items():
        for n, r in sizes.items():
            best = min(v["mse"] for v in r["by_count"].values())
            cells = []
            for c in counts:
                v = r["by_count"].get(str(c))
                if v is None:
                    cells.append("-")
                    continue
                cell = f"{v['mse']:.4g} ({v['predict_s']:.1f} s)"
                cells.append(f"**{cell}**" if v["mse"] == best else cell)
            lines.append(f"| {fam} | {int(n):,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"_Dev MSE (prediction seconds of the 100 dev targets), the best per row in bold; {data['split']}; "
        f"seed {data['seed']}, {data['threads']} torch thread; commit {data['environment'].get('git') or '?'}; "
        f"`{data['command']}`._",
    ]
    return "\n".join(lines)


def render_bounded_gamma(data: dict) -> str:
    """``bounded-gamma.json``: Γ's ranking quality on dev with the pre-training's sample cap and
    with every point in every step, and the seconds of each."""
    lines = [
        "| family | Spearman (θ) capped | full batch | NN in top 5, capped | full batch | s, capped | full batch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for fam, r in data["rows"].items():
        c, f = r["capped"], r["full-batch"]
        lines.append(
            f"| {fam} | {c['rho_theta']:.3f} | {f['rho_theta']:.3f} | {c['nn_top5']:.3f} | {f['nn_top5']:.3f} | "
            f"{c['fit_and_score_s']:.1f} | {f['fit_and_score_s']:.1f} |"
        )
    lines += [
        "",
        f"_{data['n_library_per_region']} tasks per training region, cap {data['pretrain_points']:,} points a step; "
        f"{data['split']}; seed {data['seed']}, {data['threads']} torch thread; "
        f"commit {data['environment'].get('git') or '?'}; `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_own_tasks(data: dict) -> str:
    """``own-tasks-dev.json`` (benchmarks/own_tasks_dev.py): each classic fitted alone on a dev
    library above ``OWN_TASKS``, with the cap and without it, on the same dev targets: the MSE and
    fit seconds of each and the paired difference capped − uncapped."""
    lines = [
        "| classic | variant | capped MSE | uncapped MSE | capped − uncapped (95% CI) | capped fit s "
        "| uncapped fit s |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for m, r in data["methods"].items():
        c, u, d = r["capped"], r["uncapped"], r["capped_minus_uncapped"]
        lo, hi = d["interval"]
        lines.append(
            f"| `{m}` | `{c['variant']}` | {fmt(c['mse'])} | {fmt(u['mse'])} | {d['diff']:+.3g} ({lo:+.3g}, {hi:+.3g})"
            f"{' **clear**' if d['clear'] else ''} | {c['fit_s']:.1f} | {u['fit_s']:.1f} |"
        )
    lines += [
        "",
        f"_{data['family']} family, {data['split']} split, a library of {data['tasks']:,} tasks (cap "
        f"{data['cap']:,}); seed {data['seed']}, {data['threads']} torch thread; commit "
        f"{data['environment'].get('git') or '?'}; {data['wall_s'] / 60:.0f} min; `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_depth3_search(data: dict) -> str:
    """``depth3-search.json``: milliseconds per target of the batched k^3 verification (1 and 2
    torch threads) and of the Python-loop reference, and their ratio."""
    b, loop = data["batched"], data["loop"]
    lines = [
        "| search | torch threads | targets | ms per target | true chain found |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for threads, r in b.items():
        lines.append(
            f"| batched (`search.chain_search.verify_chains`) | {threads} | {r['n_targets']} | "
            f"{r['ms_per_target']:.1f} | {fmt(r['found_true_chain'])} |"
        )
    lines.append(
        f"| Python loop (`chain_losses_loop`, `np.interp` per chain) | - | {loop['n_targets']} | "
        f"{loop['ms_per_target']:.0f} | {fmt(loop['found_true_chain'])} |"
    )
    load = ", ".join(f"{v:.1f}" for v in data["machine"]["loadavg_before"])
    lines += [
        "",
        f"_k = {data['k']} candidates per slot: {data['chains_per_target']:,} chains per target, library "
        f"{data['library_size']:,} stored curves, {data['n_context']} context points; loop / batched "
        f"(1 thread) = {data['ratio']:.0f}x; the batched losses match the loop's to "
        f"{data['max_abs_diff']:.1e} (float32 outer slot; losses up to {data['max_loss']:.0f}); budget "
        f"{data['target_ms']:.0f} ms per target: {'met' if data['meets_target'] else 'NOT met'}; "
        f"{data['machine']['cpus']} CPU cores, load average {load} at the start; commit "
        f"{data['environment'].get('git') or '?'}; `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_em_estep(data: dict) -> str:
    """``em-estep.json``: seconds and milliseconds per task of one composition E-step in each sweep
    setting, beside the package before the change (``em-estep-before.json``) when that file exists."""
    before_path = RESULTS / "em-estep-before.json"
    before = json.loads(before_path.read_text()) if before_path.exists() else None
    rows = ([("before (`as-is`)", before["settings"]["as-is"], before)] if before else []) + [
        (f"`{name}`", r, data) for name, r in data["settings"].items()
    ]
    base = rows[0][1]["ms_per_task"]
    lines = [
        "| setting | commit | lanes | tasks per sweep | seconds | ms per task | speed-up |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, r, d in rows:
        lines.append(
            f"| {label} | {d['environment'].get('git') or '?'} | {r['lanes']} | {r['tasks_per_sweep']} | "
            f"{r['seconds']:.1f} | {r['ms_per_task']:.1f} | {base / r['ms_per_task']:.2f}x |"
        )
    lines += [
        "",
        f"_{data['n_tasks']} hidden tasks, {data['library']['n_per_family'] * data['library']['families']:,} "
        f"primitives, {data['restarts']} random starts x {data['sweeps']} rounds; the same labels and losses "
        f"in every setting (checked by the script){_same_as_before(data, before)}; load average "
        f"{data['load_average_1min']:.2f} at the start; `{data['command']}`"
        + (f"; `{before['command']}`" if before else "")
        + "._",
    ]
    return "\n".join(lines)


def _same_as_before(data: dict, before: dict | None) -> str:
    """Whether the before file's labels are the same bits (their digests), when both files have one."""
    if not before or "labels_digest" not in before or "labels_digest" not in data:
        return ""
    same = before["labels_digest"] == data["labels_digest"]
    return ", and " + ("the same as before the change" if same else "**not** the same as before the change")


BASELINES = ("sparse-inductive", "few-shot")  # the paper's main baseline of each regime
PAPER_STRATEGIES = ("strategy-a", "strategy-b")  # the paper's own inference, where rte is a dev-chosen other


def _cell(row: dict) -> str:
    """``value ± ci95 (sd S)`` of a row (no sd for one seed)."""
    sd = row.get("seed_sd")
    return format_value_ci(row["value"], row.get("ci95")) + ("" if sd is None else f" (sd {fmt(sd)})")


def render_headline(entries: list[str]) -> str:
    """The README's summary: one row per ``FILE:GROUP`` entry (``+`` joins groups of one file;
    FILE is ``<experiment>-<protocol>-<profile>``): ``rte``, the paper's main baseline
    (``sparse-inductive`` or ``few-shot``) and the verdict of their paired comparison, our run of
    the paper's own inference strategy where ``rte`` is a dev-chosen other one (``strategy-a``,
    ``strategy-b``), the paper's RTE (printed under the paper's own protocol), and every method
    given no ground truth (no oracle) that clearly beats ``rte`` in that group. Only the group's
    main metric counts (``rte``'s metric there: MSE, or accuracy for the sequence-model tables)."""
    lines = [
        "| table | protocol | task | `rte` | baseline | `rte` vs baseline | paper's strategy (ours) | paper's RTE "
        "| clearly better than `rte` (no oracle) |",
        "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for entry in entries:
        name, _, groups = entry.partition(":")
        if name.count("-") < 2 or not groups:
            raise SystemExit(f"headline entry {entry!r}: use <experiment>-<protocol>-<profile>:GROUP[+GROUP]")
        data = json.loads((RESULTS / f"{name}.json").read_text())
        experiment, protocol, _profile = name.rsplit("-", 2)
        for group in groups.split("+"):
            rte = next(
                (r for r in data["rows"] if r["group"] == group and r["method"] == "rte" and r["metric"] != "coverage"),
                None,
            )
            if rte is None:
                raise SystemExit(f"headline entry {entry!r}: no rte row in group {group!r} of {name}")
            rows = {r["method"]: r for r in data["rows"] if r["group"] == group and r["metric"] == rte["metric"]}
            claims = [
                c
                for c in data.get("comparisons") or []
                if c["group"] == group and c["metric"] == rte["metric"] and "rte" in (c["a"], c["b"])
            ]
            base = next((m for m in BASELINES if m in rows), None)
            verdict = VERDICT_WORDS[_verdict(data, group, base, rte["metric"]) if base else None]
            better = sorted(
                c["winner"] for c in claims if c["clear"] and c["winner"] != "rte" and "oracle" not in c["winner"]
            )
            strategy = next((m for m in PAPER_STRATEGIES if m in rows), None)
            paper = (rows[strategy].get("paper_value") if strategy else None) or rte.get("paper_value")
            lines.append(
                f"| {experiment} | `{protocol}` | {group} | {_cell(rte)} | "
                + (f"`{base}` {_cell(rows[base])}" if base else "-")
                + f" | {verdict} | "
                + (f"`{strategy}` {_cell(rows[strategy])}" if strategy else "-")
                + f" | {fmt(paper)} | "
                + (", ".join(f"`{m}`" for m in better) or "none")
                + " |"
            )
    return "\n".join(lines)


VERDICT_WORDS = {"✓": "`rte` better", "✗": "baseline better", "=": "not clear", None: "-"}
SANITY = ("library-best-fit", "sparse-inductive", "ctx-interp", "ctx-polyfit", "verified-composition")


def _verdict(data: dict, group: str, baseline: str, metric: str = "mse") -> str | None:
    """``rte`` against ``baseline`` on ``group``'s ``metric``: ✓ (rte clearly better), ✗
    (baseline clearly better), = (not clear); None where the file has no such comparison."""
    c = next(
        (
            c
            for c in data.get("comparisons") or []
            if c["group"] == group and c["metric"] == metric and {c["a"], c["b"]} == {"rte", baseline}
        ),
        None,
    )
    return None if c is None else "=" if not c["clear"] else "✓" if c["winner"] == "rte" else "✗"


def render_versus(entries: list[str]) -> str:
    """``rte`` against every sanity baseline (:data:`SANITY`; ``methods=A,B``: those methods) per
    ``FILE:GROUP+GROUP`` entry, as paired verdicts; ``before=DIR`` (a folder under
    benchmarks/results holding earlier files of the same names) adds the earlier verdict: ``✗ → ✓``."""
    before = next((e.split("=", 1)[1] for e in entries if e.startswith("before=")), None)
    chosen = next((e.split("=", 1)[1] for e in entries if e.startswith("methods=")), None)
    baselines = SANITY if chosen is None else tuple(chosen.split(","))
    entries = [e for e in entries if not e.startswith(("before=", "methods="))]
    lines = [
        "| file | group | " + " | ".join(f"`{b}`" for b in baselines) + " |",
        "| --- | --- |" + " :---: |" * len(baselines),
    ]
    for entry in entries:
        name, _, groups = entry.partition(":")
        data = json.loads((RESULTS / f"{name}.json").read_text())
        old_path = None if before is None else RESULTS / before / f"{name}.json"
        old = json.loads(old_path.read_text()) if old_path is not None and old_path.exists() else None
        for group in groups.split("+"):
            cells = []
            for b in baselines:
                now = _verdict(data, group, b)
                was = None if old is None else _verdict(old, group, b)
                cells.append("" if now is None else now if old is None else f"{was or '-'} → {now}")
            lines.append(f"| {name} | {group} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "_✓ `rte` clearly better (the paired interval over targets excludes 0 and every seed agrees), "
        "✗ the baseline clearly better, = not clear; empty: the file has no such method"
        + ("; before → after" if before else "")
        + "._",
    ]
    return "\n".join(lines)


def _entry_groups(entries: list[str], method: str, block: str):
    """Each (file name, group, its results, its rows by (method, metric)) of ``FILE:GROUP+GROUP``
    entries; a group without ``method``'s MSE row is a one-line error naming ``block``."""
    for entry in entries:
        name, _, groups = entry.partition(":")
        data = json.loads((RESULTS / f"{name}.json").read_text())
        for group in groups.split("+"):
            rows = {(r["method"], r["metric"]): r for r in data["rows"] if r["group"] == group}
            if (method, "mse") not in rows:
                raise SystemExit(f"{block} entry {entry!r}: no {method} row in group {group!r} of {name}")
            yield name, group, data, rows


COVERAGE_BAND = (0.85, 0.95)  # a calibrated 90% interval's coverage counts as met inside this band


def _in_band(row: dict | None) -> bool:
    """Whether a coverage ``row`` exists and its value lies in :data:`COVERAGE_BAND`."""
    return row is not None and COVERAGE_BAND[0] <= row["value"] <= COVERAGE_BAND[1]


CLASSICS = ("ctx-gp", "meta-gp", "cnp")


def render_coverage(entries: list[str]) -> str:
    """The 90% intervals per ``FILE:GROUP+GROUP`` entry: ``rte``'s raw coverage (the posterior's,
    ``rte-uncalibrated``), its calibrated coverage (the dev-chosen scale), whether that is inside
    :data:`COVERAGE_BAND`, its mean width, and the coverage of each classic's own interval. A file
    written before the calibrated intervals (no ``interval_scale`` in its config) has raw coverage only."""
    lines = [
        f"| file | group | `rte` raw | `rte` calibrated | in {COVERAGE_BAND[0]}-{COVERAGE_BAND[1]} | `rte` width | "
        + " | ".join(f"`{m}`" for m in CLASSICS)
        + " |",
        "| --- | --- | ---: | ---: | :---: | ---: |" + " ---: |" * len(CLASSICS),
    ]
    for name, group, data, rows in _entry_groups(entries, "rte", "coverage"):
        cal = rows.get(("rte", "coverage"))
        if cal is None:  # a file written before the intervals existed
            lines.append(f"| {name} | {group} | - | - | - | - |" + " |" * len(CLASSICS))
            continue
        raw = rows.get(("rte-uncalibrated", "coverage"))
        if raw is None and "interval_scale" not in (data.get("config") or {}):  # before calibration
            raw, cal = cal, None
        width = rows.get(("rte", "interval-width"))
        cells = [
            _cell(raw) if raw else "-",
            _cell(cal) if cal else "-",
            "-" if cal is None else "yes" if _in_band(cal) else "**no**",
            _cell(width) if width else "-",
            *(_classic_coverage(rows, m) for m in CLASSICS),
        ]
        lines.append(f"| {name} | {group} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "_share of query points inside the 90% interval, value ± ci95 over targets (sd across seeds); raw: "
        "the posterior's, calibrated: times the scale chosen on the dev split (`search.calibration`); "
        "the classics' columns: their own interval calibrated the same way, then its raw coverage, where "
        "the file also has its `-uncalibrated` row (every file since issue 63), else raw alone; empty: "
        "the file has no such row._",
    ]
    return "\n".join(lines)


def _classic_coverage(rows: dict, method: str) -> str:
    """A classic's coverage cell: calibrated (value ± ci95, seed sd) then ``raw X`` where the
    file has its ``-uncalibrated`` row (like for like with ``rte``'s two columns), else the one row."""
    if (method, "coverage") not in rows:
        return ""
    raw = rows.get((f"{method}-uncalibrated", "coverage"))
    return _cell(rows[(method, "coverage")]) + ("" if raw is None else f"; raw {fmt(raw['value'])}")


CONTEXT_ONLY = ("ctx-interp", "ctx-polyfit", "library-best-fit")
# Rows that see what no estimator may (the true parameters or constituents): never a yardstick
ORACLE_ROWS = ("oracle", "inductive-oracle", "transductive-oracle")


def _beaten_by(data: dict, group: str, method: str) -> list[str]:
    """The rows that clearly beat ``method`` on ``group``'s MSE (paired, every seed agrees),
    oracles and ``rte`` itself left out (``rte`` is judged on its own column)."""
    out = []
    for c in data.get("comparisons") or []:
        if c["group"] != group or c["metric"] != "mse" or method not in (c["a"], c["b"]) or not c["clear"]:
            continue
        other = c["b"] if c["a"] == method else c["a"]
        if c["winner"] == other and other not in ORACLE_ROWS and other != "rte":
            out.append(other)
    return out


def render_context_dev(data: dict) -> str:
    """``context-posterior-dev*.json`` (benchmarks/context_posterior_dev.py): every design of a
    context posterior scored on dev targets, per protocol: the mean over the cells of log(MSE /
    rte's MSE) (lower is better; -0.69 halves it), the same against ``meta-gp``, the mean
    coverage of its 90% interval (raw for the fixed designs, calibrated for ``chosen-*``), how
    many cells lie in the band, and the interval score against ``chosen-base``'s."""
    protocols = list(data["summary"])
    lines = [
        "| design | " + " | ".join(f"{p}: log MSE / rte | {p}: coverage (in band)" for p in protocols) + " |",
        "| --- |" + " ---: | ---: |" * len(protocols),
    ]
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    for design in dict.fromkeys(d for p in protocols for d in data["summary"][p]):
        cells = []
        for p in protocols:
            v = data["summary"][p].get(design, {})
            band = f" ({v['coverage_in_band']})" if v.get("coverage_in_band") else ""
            cells += [fmt(v.get("log_mse_vs_rte"), "+.3f"), fmt(v.get("coverage"), ".3f") + band]
        lines.append(f"| `{design}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"_dev targets only ({data['suite']} suite, profile {data['profile']}, seed {data['seed']}), every "
        "design scored out of fold (two folds by target); `chosen-*`: the library's whole rule chosen on "
        "one fold and applied to the other, in the cells with at least 4 dev targets (each fold chooses "
        "on two folds of its own; the others have no such row); wall "
        f"{data['wall_s']:.0f} s; `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_context_goals(entries: list[str]) -> str:
    """``rte-gp`` (issue 64) per ``FILE:GROUP+GROUP`` entry: its MSE beside ``rte``'s, the paired
    verdict against ``rte`` (✓ rte-gp clearly better, ✗ clearly worse, = not clear), what else
    clearly beats it (oracles left out), its calibrated 90% coverage and whether that lies in
    :data:`COVERAGE_BAND`; then the counts the issue's goals are stated in."""
    lines = [
        "| file | group | `rte` | `rte-gp` | vs `rte` | clearly beaten by | coverage | in band |",
        "| --- | --- | ---: | ---: | :---: | --- | ---: | :---: |",
    ]
    beaten, in_band, cells, worse, better = 0, 0, 0, 0, 0
    for name, group, data, rows in _entry_groups(entries, "rte-gp", "rte-gp goals"):
        verdict = _verdict(data, group, "rte-gp")
        verdict = {"✓": "✗", "✗": "✓"}.get(verdict, verdict)  # _verdict speaks for rte
        others = _beaten_by(data, group, "rte-gp")
        cov = rows.get(("rte-gp", "coverage"))
        ok = _in_band(cov)
        cells, beaten, in_band = cells + 1, beaten + bool(others), in_band + ok
        worse, better = worse + (verdict == "✗"), better + (verdict == "✓")
        lines.append(
            f"| {name} | {group} | {_cell(rows[('rte', 'mse')])} | {_cell(rows[('rte-gp', 'mse')])} | {verdict} "
            f"| {', '.join(f'`{o}`' for o in others) or '-'} | {_cell(cov) if cov else '-'} "
            f"| {'yes' if ok else '**no**'} |"
        )
    lines += [
        "",
        f"_{cells} cells: `rte-gp` clearly better than `rte` in {better}, clearly worse in {worse}; clearly "
        f"beaten by another row (oracles aside) in {beaten}; calibrated coverage in {COVERAGE_BAND[0]}-"
        f"{COVERAGE_BAND[1]} in {in_band}. MSE value ± ci95 over targets (sd across seeds); paired verdicts "
        "clear only when every seed agrees._",
    ]
    return "\n".join(lines)


def _rte_gp_choices(data: dict, group: str) -> list[dict]:
    """``rte-gp``'s dev choice per training seed for ``group`` of a results file: the parameter
    regime keeps one list per family, the real-data suite one per data set and question, the
    other regimes one list for the file."""
    config = data.get("config") or {}
    choice = config.get("rte-gp_choice")
    if isinstance(choice, dict):
        return choice.get(group) or []
    if isinstance(choice, list):
        return choice
    dataset, _, question = group.partition(":")  # the real-data suite
    return (((config.get(dataset) or {}).get("questions") or {}).get(question) or {}).get("rte-gp_choice") or []


def render_context_shift(entries: list[str]) -> str:
    """Why ``rte-gp``'s calibrated coverage leaves the band (issue 64), per ``FILE:GROUP+GROUP``
    entry: what its dev split saw (targets, out-of-fold MSE and calibrated coverage, the mean over
    training seeds) beside the test rows. The interval's scale is chosen on dev, so where the test
    targets' error is many times the dev targets' the interval is too narrow for them, and where
    it is a fraction, too wide. Nothing here chose anything: it reads the committed files."""
    lines = [
        "| file | group | dev targets | dev MSE | test MSE | test / dev | raw coverage: dev | test "
        "| calibrated: dev | test | in band |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for name, group, data, rows in _entry_groups(entries, "rte-gp", "rte-gp shift"):
        choices = _rte_gp_choices(data, group)
        dev_mse = [c["out_of_fold_mse"] for c in choices if c.get("out_of_fold_mse") is not None]
        dev_cov = [c["out_of_fold_coverage"] for c in choices if c.get("out_of_fold_coverage") is not None]
        dev_raw = [c["out_of_fold_coverage_raw"] for c in choices if c.get("out_of_fold_coverage_raw") is not None]
        dev_n = {c.get("dev_targets") for c in choices} - {None}
        if not dev_n and group.partition(":")[2]:  # the suite records its dev split per seed
            q = data["config"][group.partition(":")[0]]["questions"][group.partition(":")[2]]
            dev_n = {d["targets"] for d in q.get("dev") or []}
        test, cov = rows[("rte-gp", "mse")]["value"], rows.get(("rte-gp", "coverage"))
        raw = rows.get(("rte-gp-uncalibrated", "coverage"))
        dmse = float(np.mean(dev_mse)) if dev_mse else None
        ok = _in_band(cov)
        cells = [
            "/".join(str(n) for n in sorted(dev_n)) or "-",
            "-" if dmse is None else fmt(dmse),
            fmt(test),
            f"{test / dmse:.2g}" if dmse else "-",  # no ratio to a dev MSE of 0 either
            f"{np.mean(dev_raw):.3f}" if dev_raw else "-",
            f"{raw['value']:.3f}" if raw else "-",
            f"{np.mean(dev_cov):.3f}" if dev_cov else "-",
            f"{cov['value']:.3f}" if cov else "-",
            "yes" if ok else "**no**",
        ]
        lines.append(f"| {name} | {group} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "_dev: `rte-gp`'s out-of-fold MSE and 90% coverage, raw and with the scale chosen there, on the "
        "training seeds' dev splits (`config[\"rte-gp_choice\"]`, mean over seeds; '-' where the file "
        "predates their record); test: the file's rows. test / dev: how much larger the test targets' "
        "error is than the dev targets' the scale was chosen on. The scale carries dev's raw coverage to "
        "0.90, so the calibrated test coverage leaves the band where the raw coverage moved from dev to "
        "test._",
    ]
    return "\n".join(lines)


def render_multistep(data: dict) -> str:
    """A ``parameter-multistep`` file. Test split: per family and region, the chained RTEs, the
    one-step RTE, the oracle, ``sparse-inductive`` and the best context-only baseline, then
    RTE's error relative to ``sparse-inductive`` beside the paper's ratio (single draws) and the
    verdict of the paired comparison. Dev split: every candidate's score (``choose_variant``)."""
    from taskextrap.experiments.multistep import DEV_VARIANTS, variant_scores

    rows = {(r["group"], r["method"]): r for r in data["rows"] if r["metric"] == "mse"}
    groups = list(dict.fromkeys(r["group"] for r in data["rows"]))
    config = data.get("config") or {}
    if config.get("split") == "dev":
        scores = variant_scores(data["rows"])
        best = min(scores, key=lambda v: (scores[v], list(DEV_VARIANTS).index(v)))
        regions = list(dict.fromkeys(g.split("/")[1] for g in groups))
        lines = [
            "| variant | steps | quantile | measure | shift split | " + " | ".join(regions) + " | all (score) |",
            "| --- | --- | ---: | --- | --- | " + " | ".join("---:" for _ in regions) + " | ---: |",
        ]
        for v, (steps, q, measure, split) in DEV_VARIANTS.items():
            per = [
                np.exp(
                    np.mean(
                        [
                            np.log(rows[(g, v)]["value"] / rows[(g, "rte")]["value"])
                            for g in groups
                            if g.endswith("/" + reg)
                        ]
                    )
                )
                for reg in regions
            ]
            name = f"**`{v}`** (chosen)" if v == best else f"`{v}`"
            lines.append(
                f"| {name} | {steps} | {'' if q is None else q} | {measure or ''} | {split} | "
                + " | ".join(f"{x:.3f}" for x in per)
                + f" | {np.exp(scores[v]):.3f} ({scores[v]:+.3f}) |"
            )
        lines += [
            "",
            "_geometric mean over families of MSE(variant) / MSE(one-step `rte`) per dev region, and over "
            "every family and region (its log is the score; lower is better). "
            f"Training seeds {data.get('seeds')}, test seed {config.get('test_seed')}._",
        ]
        wall = data.get("timing", {}).get("wall_s")
        return "\n".join(lines + (["", wall_note(data, wall)] if wall else []))
    verdicts = {(c["group"], c["a"], c["b"]): c for c in data.get("comparisons") or []}
    head = [
        "family / region",
        "`rte-chained`",
        "`rte-ghost` (paper's RTE)",
        "`rte` (one step)",
        "`transductive-oracle`",
        "`sparse-inductive` (paper's)",
        "best context-only",
        "rte-chained / sparse",
        "rte-ghost / sparse (paper)",
        "rte-chained vs sparse",
    ]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * 8 + " --- |"]

    def cell(g, m):
        r = rows[(g, m)]
        paper = r.get("paper_value")
        return _cell(r) + (f" (paper {fmt(paper)})" if paper is not None else "")

    for g in groups:
        sparse = rows[(g, "sparse-inductive")]
        ctx = min(CONTEXT_ONLY, key=lambda m: rows[(g, m)]["value"])
        ghost_paper, sparse_paper = rows[(g, "rte-ghost")].get("paper_value"), sparse.get("paper_value")
        paper_ratio = f" ({ghost_paper / sparse_paper:.2f})" if ghost_paper and sparse_paper else ""
        c = verdicts.get((g, "rte-chained", "sparse-inductive"))
        verdict = "-" if c is None else ("not clear" if not c["clear"] else f"`{c['winner']}` better")
        lines.append(
            f"| {g} | {cell(g, 'rte-chained')} | {cell(g, 'rte-ghost')} | {_cell(rows[(g, 'rte')])} | "
            f"{_cell(rows[(g, 'transductive-oracle')])} | {cell(g, 'sparse-inductive')} | "
            f"`{ctx}` {_cell(rows[(g, ctx)])} | {rows[(g, 'rte-chained')]['value'] / sparse['value']:.2f} | "
            f"{rows[(g, 'rte-ghost')]['value'] / sparse['value']:.2f}{paper_ratio} | {verdict} |"
        )
    chained = (config.get("chained") or {}).get("variant")
    lines += [
        "",
        f"_value ± ci95 over targets (seed-averaged); sd: across seeds. `rte-chained` is `{chained}` "
        f"(chosen on the dev split). The paper's values are single draws (one target, one set of points) "
        f"without interval. Training seeds {data.get('seeds')}, test seed {config.get('test_seed')}._",
    ]
    wall = data.get("timing", {}).get("wall_s")
    if wall:
        lines += ["", wall_note(data, wall)]
    return "\n".join(lines)


def render_parameter_dev(data: dict) -> str:
    """A ``parameter`` dev file: each candidate inference of the dev choice (Strategy A, with the
    paper's Psi and with the objective's leave-one-out Psi, and every objective variant) per
    dev family as MSE, its ratio to Strategy A, whether the paired difference to the file's
    ``rte`` (the candidate chosen when it ran) is clear, and the coverage of its 90% interval, then
    the choice's score (``variant_scores``: mean log ratio over families; lower is better)."""
    from taskextrap.experiments.parameter import OBJECTIVE_VARIANTS, choose_variant, variant_scores

    by = {(r["group"], r["method"], r["metric"]): r for r in data["rows"]}
    families = list(dict.fromkeys(r["group"] for r in data["rows"] if r["metric"] == "mse"))
    verdicts = {(c["group"], c["b"]): c for c in data.get("comparisons") or [] if c["metric"] == "mse"}
    scores, chosen = variant_scores(data["rows"]), choose_variant(data["rows"])
    config = data.get("config") or {}
    lines = ["| candidate | " + " | ".join(families) + " | score |", "| --- |" + " ---: |" * (len(families) + 1)]
    for m in ("strategy-a", "strategy-a-loo", *(f"rte-{v}" for v in OBJECTIVE_VARIANTS)):
        name = m.removeprefix("rte-")
        cells = []
        for g in families:
            mse, cov = by[(g, m, "mse")]["value"], by.get((g, m, "coverage"))
            ratio = mse / by[(g, "strategy-a", "mse")]["value"]
            c = verdicts.get((g, m))  # rte (the file's chosen candidate) against m
            mark = "" if c is None or not c["clear"] else (" ✓" if c["winner"] == m else " ✗")
            cells.append(
                f"{fmt(mse)}"
                + (f"{mark.replace(' ', ' (')})" if m == "strategy-a" and mark else "")
                + ("" if m == "strategy-a" else f" ({ratio:.2f}{mark})")
                + ("" if cov is None else f" [{cov['value']:.2f}]")
            )
        score = f"{scores[name]:+.3f}" if name in scores else ""
        label = f"**`{m}`** (chosen)" if name == chosen else f"`{m}`"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {score} |")
    lines += [
        "",
        f"_dev MSE (its ratio to `strategy-a`; ✓/✗: the paired difference to the file's `rte`, the "
        f"`{config.get('objective', {}).get('variant', 'chosen')}` candidate, is clear in its favour/against "
        "it) [coverage of the 90% interval]; score: mean over families of log(MSE / MSE of `strategy-a`). "
        f"Training seeds {data.get('seeds')}, test seed {config.get('test_seed')}._",
    ]
    wall = data.get("timing", {}).get("wall_s")
    return "\n".join(lines + (["", wall_note(data, wall)] if wall else []))


def render_speed(data: dict, unit: str | None = None) -> str:
    """``speed.json``: one ``paper`` unit per experiment, before and after (benchmarks/speed.py);
    with ``unit`` (the option ``unit=parameter``) that experiment's unit under every label."""
    from taskextrap.scripts import sibling

    speed = sibling(__file__, "speed")
    return speed.table(data) if unit is None else speed.unit_table(data, unit)


def render_profile(data: dict, top: int = 24) -> str:
    """``profiles/<experiment>-<profile>.json`` (benchmarks/profile_unit.py): the functions with the
    largest inclusive share of a unit's samples, one column per label (before, after)."""
    labels = list(data)
    first = data[labels[0]]
    harness = (
        "(<frozen",
        "(cli.py)",
        "(core.py)",
        "(runner.py)",
        "(executors.py)",
        "(units.py)",
        "(module.py)",
        "(taskextrap:",
        "<lambda>",
        "run_unit (",
    )  # start-up, the command line and the unit machinery
    own = [[f for f in data[lab]["inclusive_pct"] if not any(h in f for h in harness)] for lab in labels]
    names = list(dict.fromkeys(f for fs in own for f in fs[:top]))
    lines = [
        "| function | " + " | ".join(f"{lab} (% of samples)" for lab in labels) + " |",
        "| --- |" + " ---: |" * len(labels),
    ]
    for f in names:
        cells = [f"{data[lab]['inclusive_pct'][f]:.1f}" if f in data[lab]["inclusive_pct"] else "-" for lab in labels]
        lines.append(f"| `{f}` | " + " | ".join(cells) + " |")
    on = lambda lab: "" if data[lab].get("device", "cpu") == "cpu" else f" on {data[lab]['device']}"  # noqa: E731
    walls = "; ".join(f"{lab}: {data[lab]['wall_s']:.0f} s at {data[lab]['commit']}{on(lab)}" for lab in labels)
    lines += [
        "",
        f"_{first['experiment']} ({first['unit']}, `{first['profile']}` profile, one torch thread) under "
        f"py-spy at {first['rate_hz']} Hz, inclusive shares (a function and what it calls; - : not among the "
        f"60 largest); {walls}; "
        f"`python benchmarks/profile_unit.py {first['experiment']} --profile {first['profile']}`"
        + (
            " (`--device cuda --label gpu` for a GPU's column: the host's share)"
            if any(on(lab) for lab in labels)
            else ""
        )
        + "._",
    ]
    return "\n".join(lines)


def render_codeio_search(data: dict) -> str:
    """``codeio-search.json`` (benchmarks/codeio_search.py): the full and the bounded CodeIO
    search on the same extender and tasks, and whether they agree."""
    lines = [
        "| search | wall (s) | sequences scored | full-search sequences / s | paper search (192 tasks), est. |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for mode, r in data["modes"].items():
        lines.append(
            f"| {mode} | {r['wall_s']:.0f} | {r['sequences_scored']:,} of {data['sequences_full_search']:,} "
            f"| {r['sequences_per_s']:.0f} | {r['paper_search_estimate_s'] / 60:.0f} min |"
        )
    a = data["agreement"]
    yes = {True: "yes", False: "**no**"}
    lines += [
        "",
        f"_{data['n_tasks']} `{data['split']}` tasks, the `{data['profile']}` profile's extender (seed "
        f"{data['seed']}, fine-tuned on the dev split's training pairs), {data['threads']} threads, "
        f"{data['environment'].get('device', 'cpu')}: {data['speed_up']:.2f}x. Same best candidate: "
        f"{yes[a['best']]}; same tied candidates (within {data['tie_tolerance']} nats): {yes[a['tied']]}; "
        f"largest difference of a kept score {a['max_abs_score_difference']:.1e} nats (other batches); "
        f"candidates scored whole {100 * a['candidates_scored_whole']:.1f}%. `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_depth3_diagnosis(data: dict) -> str:
    """``depth3-diagnosis-<protocol>.json`` (scripts/diagnose_depth3.py): each slot's retrieval
    recall on the dev recipes and in distribution, and each search alternative's chains and MSE."""
    pct = lambda v: f"{100 * v['mean']:.1f}"  # noqa: E731
    lines = [
        "| decomposer | targets | slot | index@1 | index@10 | index@60 | functional@1 | functional@10 "
        "| functional@60 | family@1 | index@60 within the true family | median functional rank |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, alt in data["alternatives"].items():
        for part, label in (("retrieval", "dev recipes"), ("retrieval in distribution", "training recipes")):
            for slot, r in alt.get(part, {}).items():
                cells = [pct(r[f"{kind}@{k}"]) for kind in ("index", "functional") for k in (1, 10, 60)]
                lines.append(
                    f"| `{name}` | {label} | {slot} | {' | '.join(cells)} | {pct(r['family@1'])} "
                    f"| {pct(r['family-restricted index@60'])} | {r['median functional rank']:.0f} |"
                )
    lines += [
        "",
        "| search | MSE | verified-composition MSE | chain (functional) in candidates | found chain "
        "(functional) | among the verified | found fits the context as well as the truth | median context "
        "loss found / truth | search (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, alt in data["alternatives"].items():
        r = alt["search"]
        lines.append(
            f"| `{name}` | {format_value_ci(r['mse']['mean'], r['mse']['ci95'])} "
            f"| {fmt(r['verified-composition mse']['mean'])} | {pct(r['chain functional in candidates'])}% "
            f"| {pct(r['chain functional top-1'])}% | {pct(r['chain functional among verified'])}% "
            f"| {pct(r['found fits context at least as well as truth'])}% "
            f"| {fmt(r['median context loss found / truth'])} | {r['search_s']:.0f} |"
        )
    for name, r in {**data["baselines"], "oracle (the true chain through Psi_chain)": data["oracle mse"]}.items():
        lines.append(f"| `{name}` | {format_value_ci(r['mean'], r['ci95'])} | | | | | | | |")
    within = f"median primitives within {data['eps_primitive']}"
    lib = "; ".join(
        f"{f}: nearest neighbour {fmt(v['median nearest-neighbour curve rmse'])}, "
        f"{v[within]:.0f} within {data['eps_primitive']}"
        for f, v in data["library"].items()
    )
    lines += [
        "",
        f"_recall in % of the {data['targets']} dev targets x {data['draws']} draws (`{data['protocol']}` "
        f"protocol, `{data['profile']}` profile, seed {data['seed']}, k = {data['k']}); functional: a "
        f"primitive whose curve is within {data['eps_primitive']} RMSE of the true one's on the domain; a "
        f"chain within {data['eps_chain']}. Library curves (median per family): {lib}. Fit "
        f"{data['fit_s']:.0f} s, wall {data['wall_s'] / 60:.1f} min; `python scripts/diagnose_depth3.py "
        f"--protocol {data['protocol']}`._",
    ]
    return "\n".join(lines)


CALIBRATED = {
    "parameter-objective": ("parameter", "rte"),
    "parameter-proxy": ("parameter", "strategy-a"),
    "composition": ("composition", "rte"),
    "length": ("length", "rte"),
    "composition-depth3": ("composition-depth3", "rte"),
}  # calibration key -> (experiment, method)


def render_interval_calibration(data: dict) -> str:
    """``interval-calibration.json`` (scripts/calibrate_intervals.py): each regime's dev-chosen
    interval scale, its dev coverage before and after, and the coverage and width it gives on the
    test split of the same profile (from those runs' results files)."""
    lines = [
        "| regime | protocol | group | scale | dev coverage (raw → calibrated) | test coverage, raw "
        "| test coverage, calibrated | test width |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    pct = lambda v: f"{v:.3f}"  # noqa: E731
    for key, entry in data["scales"].items():
        regime, protocol, *group = key.split("/")
        if group:
            continue  # a parameter family's own scale: listed under its regime row
        # a classic's own key (search.calibration.method_key): "regime:method", calibrated alike
        experiment, method = split_method_key(regime) or CALIBRATED[regime]
        path = RESULTS / f"{experiment}-{protocol}-{data['profile']}.json"
        test = json.loads(path.read_text()) if path.exists() else {"rows": [], "config": {}}
        # a learned classic's scale is its variant's (ctx-gp's, kept under its own name, its fit's);
        # the test file's rows carry the method's name when that file was made with the variant
        # (its config's classic_variants), else none of them
        rows_of = {v: m for m, v in test.get("config", {}).get("classic_variants", {}).items()}
        variant = CTX_GP_VARIANT if method == "ctx-gp" else method
        method = rows_of.get(variant, variant)
        by = {(r["group"], r["method"], r["metric"]): r for r in test["rows"]}
        groups = [g for g, m, k in by if m == method and k == "interval-width"] or ["-"]
        for g in groups:
            own = data["scales"].get(f"{key}/{g}", entry)  # a family's own dev scale, else the regime's
            dev = own
            raw, cal, width = (
                by.get((g, m, k))
                for m, k in ((f"{method}-uncalibrated", "coverage"), (method, "coverage"), (method, "interval-width"))
            )
            if raw is None:  # a test file made before this method's interval was calibrated: no test cells
                cal = width = None
            cell = lambda r: "-" if r is None else format_value_ci(r["value"], r["ci95"])  # noqa: E731
            lines.append(
                f"| `{regime}` | {protocol} | {g} | {own['scale']:g} | {pct(dev['dev_coverage_raw'])} → "
                f"{pct(dev['dev_coverage_calibrated'])} | {cell(raw)} | {cell(cal)} | {cell(width)} |"
            )
    lines += [
        "",
        f"_scale: the smallest multiplier of the method's raw sd (rte's posterior, a classic's own: "
        f"`regime:method`; grid {data['grid']}) whose interval covers "
        f"{data['level']:.0%} of the `{data['split']}` split's query points, pooled over the dev groups; a "
        f"built-in parameter family uses its own dev split's scale (the dev column is then that family's). "
        f"Test columns: the `{data['profile']}` profile's test runs, which apply the scales; value ± ci95 "
        f"over targets. `{data['command']}`._",
    ]
    return "\n".join(lines)


def render_em_diagnosis(data: dict) -> str:
    """``em-diagnosis-*.json`` (scripts/diagnose_em.py): one E-step on the dev split's hidden
    training tasks under each model, and the pseudo-labels' quality."""
    pct = lambda v: f"{100 * v:.1f}%"  # noqa: E731
    codeio = data["regime"] == "codeio"
    cols = (
        ["exact", "behaves", "median rank of the truth", "truth in the top 10"]
        if codeio
        else ["exact", "behaves", "held_out_pair", "fits at least as well as the truth"]
    )
    head = ["E-step", *(c.replace("held_out_pair", "held-out family pair") for c in cols), "time (s)"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for name, v in data["variants"].items():
        cells = [f"{v[c]:.0f}" if c.startswith("median") else pct(v[c]) for c in cols]
        lines.append(f"| {name} | {' | '.join(cells)} | {v['e_step_s']:.0f} |")
    what = (
        f"{data['tasks']} hidden composite training tasks of the dev split, {data['candidates']} candidates "
        f"(the split's training pairs; chance: exact {pct(data['chance_exact'])}, median rank "
        f"{data['chance_median_rank']:.0f}), {data['n_loo']} held-out support example(s) per task, the "
        f"`{data['profile']}` profile's recipes"
        if codeio
        else f"{data['tasks']} hidden training compositions of the dev split, `{data['protocol']}` protocol, "
        f"`{data['profile']}` profile (chance of the exact pair {data['chance_exact']:.1e})"
    )
    lines += ["", f"_{what}; seed {data['seed']}; wall {data['wall_s'] / 60:.1f} min; `{data['command']}`._"]
    return "\n".join(lines)


def render_interpolants(data: dict) -> str:
    """``observed-interpolants.json`` (benchmarks/observed.py): each interpolant's error reading
    dev-library tasks between their observed points, per family, noise and density, and the choice."""
    kinds = list(data["pooled_nmse"])
    cells = sorted({(r["family"], r["noise"], r["points"]) for r in data["cells"]}, key=lambda c: (c[1], c[0], c[2]))
    err = {(r["family"], r["noise"], r["points"], r["interpolant"]): r["nmse"] for r in data["cells"]}
    lines = ["| family | noise | points | " + " | ".join(kinds) + " |", "|---|---:|---:|" + "---:|" * len(kinds)]
    for f, nz, m in cells:
        best = min(err[(f, nz, m, k)] for k in kinds)
        row = [
            (f"**{fmt(err[(f, nz, m, k)])}**" if err[(f, nz, m, k)] == best else fmt(err[(f, nz, m, k)])) for k in kinds
        ]
        lines.append(f"| {f} | {nz:g} | {m} | " + " | ".join(row) + " |")
    rel = ", ".join(f"{k} {data['relative_to_best'][k]:.3g}" for k in kinds)
    lines.append("")
    lines.append(
        f"Error over the best interpolant of each row, geometric mean: {rel}; chosen: **{data['chosen']}** "
        f"(`{data['command']}`, seed {data['seed']}, {data['wall_s']} s)."
    )
    return "\n".join(lines)


def render_context_sizes(data: dict) -> str:
    """``context-sizes.json`` (benchmarks/observed.py): dev MSE and rte's 90% coverage against the
    number of context points, rte (as fitted, and with ``min_context=4``) beside ``ctx-polyfit``
    and ``library-best-fit``; a paired verdict of rte against each (✓ rte clearly better, ✗ clearly
    worse, · no clear difference)."""

    def mark(p):
        return "·" if not p["clear"] else ("✓" if p["diff"] < 0 else "✗")

    lines = [
        "| family | protocol | rte fit | context | rte | coverage | ctx-polyfit | library-best-fit |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in data["cells"]:
        fitted = "as is" if r["min_context"] is None else f"min_context={r['min_context']}"
        m = r["mse"]
        lines.append(
            f"| {r['family']} | {r['protocol']} | {fitted} | {r['context']} | {fmt(m['rte'])} | {r['coverage']:.3f} | "
            f"{fmt(m['ctx-polyfit'])} {mark(r['rte-ctx-polyfit'])} | "
            f"{fmt(m['library-best-fit'])} {mark(r['rte-library-best-fit'])} |"
        )
    lines.append("")
    lines.append(
        f"{data['targets']} dev targets per family, one seed (`{data['command']}`, seed {data['seed']}, "
        f"{data['wall_s']} s); the mark after a baseline: ✓ rte clearly better, ✗ clearly worse, · no clear "
        "difference (paired over targets)."
    )
    return "\n".join(lines)


def render_elnino(data: dict) -> str:
    """``elnino.json`` (examples/elnino.py): per question, each method's MSE over the targets (mean
    over seeds, with the seeds' sd), rte's paired verdict against it, and rte's interval coverage."""
    out = []
    for question, q in data["questions"].items():
        seeds = ", ".join(str(s) for s in q["seeds"])
        out.append(
            f"**{question}** (protocol `{q['protocol']}`, context: {q['context_size']} {q['context']} months, "
            f"{q['targets']} target years, seeds {seeds}"
            + (f"; left out: {', '.join(f'`{m}`' for m in q['skipped'])}" if q.get("skipped") else "")
            + "):"
        )
        out.append("")
        out.append("| method | MSE | seed sd | rte − method: 95% interval over targets | clear in every seed |")
        out.append("|---|---:|---:|---|---|")
        comps = {c["b"]: c for c in q["comparisons"]}
        for method, mse in q["mse"].items():
            sd = q["mse_seed_sd"][method]
            c = comps.get(method)
            iv = "" if c is None else f"{fmt(c['diff'])} [{fmt(c['lo'])}, {fmt(c['hi'])}]"
            clear = "" if c is None else ("yes: " + c["winner"] + " better" if c["clear"] else "no")
            out.append(f"| `{method}` | {fmt(mse)} | {'-' if sd is None else fmt(sd)} | {iv} | {clear} |")
        cov = ", ".join(f"{v:.3f}" for v in q["coverage"])
        dev = ", ".join(f"{v:.3f}" for v in q["dev_coverage"])
        out.append("")
        out.append(
            f"rte's 90% interval covers {cov} of the target queries by seed (dev split: {dev}; scales "
            f"{', '.join(f'{v:g}' for v in q['interval_scale'])})."
        )
        out.append("")
    out.append(f"`{data['command']}`: {data['wall_s']} s on 2 CPU cores.")
    return "\n".join(out)


def render_own_dev(data: dict) -> str:
    """``own-dev-calibration.json`` (benchmarks/own_dev.py): rte's 90% coverage of a user family's
    test points with the borrowed scale and with the one chosen on its own dev split."""

    def rte_scale(v):  # a number (one group), or {group: {method: scale}} (the parameter regime)
        while isinstance(v, dict):
            v = v["rte"] if "rte" in v else next(iter(v.values()))
        return v

    def only(d: dict) -> float:
        (v,) = d.values()
        return v

    lines = [
        "| case | raw | borrowed scale | its coverage | own-dev scale | its coverage | reached on dev |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case, c in data["cases"].items():
        b, o = c["borrowed"], c["own_dev"]
        lines.append(
            f"| {case} | {only(c['raw_coverage']):.3f} | {rte_scale(b['scale']):g} | {only(b['coverage']):.3f} | "
            f"{rte_scale(o['scale']):g} | {only(o['coverage']):.3f} | {only(o['dev_coverage']):.3f} |"
        )
    lines.append("")
    lines.append(f"`{data['command']}`: {data['profile']} profile, seed {data['seed']}, paper protocol.")
    return "\n".join(lines)


def render_cpu_drift(data: dict) -> str:
    """``cpu-drift.json`` (benchmarks/cpu_drift.py): the README demo re-run on another machine
    against the committed file, per family rte's MSE in both, then how many rows and claims moved."""
    ref, here = data["reference_environment"], data["here_environment"]

    def machine(env):
        cpu = env.get("cpu") or "CPU not recorded"
        libs = env.get("libraries")
        return f"commit {env.get('git')}, {cpu}" + (
            ", " + ", ".join(f"{k} {v}" for k, v in libs.items()) if libs else ", library versions not recorded"
        )

    lines = ["| family | `rte` MSE, committed file | `rte` MSE, this machine | change |", "|---|---:|---:|---:|"]
    for family, v in data["rte_mse"].items():
        lines.append(f"| {family} | {fmt(v['reference'])} | {fmt(v['here'])} | {v['here'] / v['reference'] - 1:+.1%} |")
    m, c = data["mse_relative_change"], data["clear_claims"]
    changed = [f"{k} (vanished)" for k in c["vanished"]] + [f"{k} (appeared)" for k in c["appeared"]]
    changed += [f"{k} (reversed)" for k in c["reversed"]]
    lines += [
        "",
        f"_`{data['command']}`, training seeds {data['seeds']}, {data['wall_s']:.0f} s. Committed file "
        f"(`{data['reference_file']}`): {machine(ref)}. This run: {machine(here)}. "
        f"{data['rows_moved']} of {data['rows']} rows moved; the MSE of the {m['rows']} learned and library rows "
        f"by a median {m['median']:.1%} (largest {m['max']:.1%}, {m['max_row']}). Clear paired claims: "
        f"{c['reference']} in the committed file, {c['here']} here, {c['in_both']} in both"
        + (f"; changed: {'; '.join(changed)}" if changed else "")
        + "._",
    ]
    return "\n".join(lines)


def render_spec(spec: str) -> str:
    """The block body of a spec ``NAME [metric=M] [groups=A,B] [methods=A,B]`` (see the module docstring)."""
    name, *opts = spec.split()
    if name == "method-table" and not opts:
        from taskextrap.baselines.table import markdown

        return markdown()
    if name == "headline":
        return render_headline(opts)
    if name == "versus":
        return render_versus(opts)
    if name == "coverage":
        return render_coverage(opts)
    if name == "rte-gp-goals":
        return render_context_goals(opts)
    if name == "rte-gp-shift":
        return render_context_shift(opts)
    data = json.loads((RESULTS / f"{name}.json").read_text())
    if "units" in data and not opts:
        return render_dev_choices(data)
    if "runs" in data and not opts:
        return render_recipes(data)
    if ("per_family" in data or "retrieval" in data) and not opts:
        return render_embeddings(data)
    if "serial_over_ray" in data and not opts:
        return render_executors(data)
    if "auto_rule" in data and not opts:
        return render_nn_index(data)
    if "paper_steps" in (data.get("config") or {}) and not opts:
        return render_multistep(data)
    if (
        name.startswith("parameter-")
        and name.endswith("-dev")
        and not name.startswith("parameter-multistep")
        and not opts
    ):
        return render_parameter_dev(data)
    if "same_labels_in_every_setting" in data and not opts:
        return render_em_estep(data)
    if "chains_per_target" in data and not opts:
        return render_depth3_search(data)
    if "variants" in data and "chance_exact" in data and not opts:
        return render_em_diagnosis(data)
    if "scales" in data and "grid" in data and not opts:
        return render_interval_calibration(data)
    if "alternatives" in data and "eps_chain" in data and not opts:
        return render_depth3_diagnosis(data)
    if name == "own-dev-calibration" and not opts:
        return render_own_dev(data)
    if name == "elnino" and not opts:
        return render_elnino(data)
    if "relative_to_best" in data and not opts:
        return render_interpolants(data)
    if name == "context-sizes" and not opts:
        return render_context_sizes(data)
    if name.startswith("context-posterior-dev") and not opts:
        return render_context_dev(data)
    if name == "cpu-drift" and not opts:
        return render_cpu_drift(data)
    if name in ("scale", "scale-dev", "scale-before", "scale-fit", "scale-idle", "scale-seeds") and not opts:
        return render_scale(data)
    if name in ("stream", "stream-million") and not opts:
        return render_stream(data)
    if name == "scale-candidates" and not opts:
        return render_scale_candidates(data)
    if name == "bounded-gamma" and not opts:
        return render_bounded_gamma(data)
    if name == "own-tasks-dev" and not opts:
        return render_own_tasks(data)
    if "modes" in data and "agreement" in data and not opts:
        return render_codeio_search(data)
    if "anchor" in data and "labels" in data:
        units = [o.removeprefix("unit=") for o in opts if o.startswith("unit=")]
        if len(units) != len(opts) or len(units) > 1:
            raise SystemExit(f"table block {spec!r}: a speed table takes one option, unit=EXPERIMENT")
        return render_speed(data, *units)
    if data and all(isinstance(v, dict) and "inclusive_pct" in v for v in data.values()) and not opts:
        return render_profile(data)
    kw = dict(o.split("=", 1) for o in opts)
    unknown = set(kw) - {"metric", "groups", "methods"}
    if unknown:
        raise SystemExit(f"table block {spec!r}: unknown option(s) {sorted(unknown)}")
    metrics = (kw["metric"],) if "metric" in kw else METRIC_ORDER
    groups = kw["groups"].split(",") if "groups" in kw else None
    if "methods" in kw:
        data = only_methods(data, kw["methods"].split(","), spec)
    return render(name, metrics, groups, heading=False, data=data)


def only_methods(data: dict, methods: list[str], spec: str) -> dict:
    """``data`` with the rows of ``methods`` only, in that order, and the paired comparisons
    between two of them (a compact table, e.g. the README's); a method without rows is an error."""
    present = {r["method"] for r in data["rows"]}
    missing = [m for m in methods if m not in present]
    if missing:
        raise SystemExit(f"table block {spec!r}: no rows of method(s) {missing}")
    rows = sorted((r for r in data["rows"] if r["method"] in methods), key=lambda r: methods.index(r["method"]))
    comparisons = [c for c in data.get("comparisons") or [] if c["a"] in methods and c["b"] in methods]
    return {**data, "rows": rows, "comparisons": comparisons}


def sync(path: Path, check: bool = False) -> list[str]:
    """Regenerate the table blocks of ``path`` (or, with ``check``, only compare): the specs of
    the stale blocks."""
    text = path.read_text()
    stale = []

    def fill(m):
        body = render_spec(m["spec"]) + "\n"
        if body != m["body"]:
            stale.append(m["spec"])
        return m.group(1) + body + m.group(4)

    new = BLOCK.sub(fill, text)
    if not check and new != text:
        path.write_text(new)
    return stale


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="results files (without .json)")
    ap.add_argument("--all", action="store_true", help="every results file with rows")
    ap.add_argument("--sync", nargs="+", type=Path, metavar="MD", help="rewrite the table blocks of these files")
    ap.add_argument("--check", nargs="+", type=Path, metavar="MD", help="exit 1 if a table block is stale")
    args = ap.parse_args()
    if args.sync or args.check:
        stale = {str(p): sync(p, check=bool(args.check)) for p in (args.sync or args.check)}
        for p, specs in stale.items():
            for spec in specs:
                print(f"{p}: {'stale' if args.check else 'rewrote'} table block {spec!r}")
        raise SystemExit(1 if args.check and any(stale.values()) else 0)
    names = args.names
    if args.all:
        names = sorted(p.stem for p in RESULTS.glob("*.json") if "rows" in json.loads(p.read_text()))
    print("\n\n".join(render(n) for n in names))


if __name__ == "__main__":
    main()
