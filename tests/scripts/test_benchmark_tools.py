"""benchmarks/paired.py and benchmarks/tables.py: paired differences from unit files; README tables."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "paired.py"


def _load(filename: str):
    """A fresh copy of the benchmarks/ script ``filename`` as a module (each test may patch it)."""
    spec = importlib.util.spec_from_file_location(f"bench_{filename.removesuffix('.py')}", _PATH.with_name(filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def paired_mod():
    return _load("paired.py")


def test_paired_differences_over_seeds(tmp_path, paired_mod):
    for seed, (a, b) in enumerate([([1.0, 2.0], [2.0, 2.5]), ([1.0, 1.0], [1.5, 0.5])]):
        (tmp_path / f"parameter-exp-strict-seed{seed}-abc123.json").write_text(
            json.dumps({"errors": {"rte": a, "random-anchors": b}})
        )
    (tmp_path / "parameter-exp-paper-seed0-abc123.json").write_text(
        json.dumps({"errors": {"rte": [9], "random-anchors": [0]}})
    )
    res = paired_mod.paired(tmp_path, "parameter", "strict", "rte", "random-anchors")
    d = np.array([[1.0, 0.5], [0.5, -0.5]])  # (other - first) per (target, seed)
    per_target = d.mean(axis=1)  # [0.75, 0.0]
    assert set(res) == {"exp"}
    r = res["exp"]
    assert r["n"] == 2 and r["diff"] == pytest.approx(d.mean()) and r["seeds"] == [0, 1]
    assert r["ci95"] == pytest.approx(12.706204736174707 * per_target.std(ddof=1) / np.sqrt(2))
    assert r["seed_diffs"] == pytest.approx([0.75, 0.0])
    assert r["clear"] is False  # the interval covers 0 (and seed 1 shows no difference)
    assert r["first_better"] == pytest.approx(0.5)


def test_paired_filters_by_saved_profile_and_takes_the_newest_file(tmp_path, paired_mod, capsys):
    import os

    for name, prof in (("quick", [1.0]), ("paper", [2.0, 4.0])):
        (tmp_path / f"length-poly-paper-seed0-{len(prof):x}ab.json").write_text(
            json.dumps(
                {"config": {"profile": {"name": name}}, "errors": {"rte": [0.0] * len(prof), "sparse-inductive": prof}}
            )
        )
    res = paired_mod.paired(tmp_path, "length", "paper", "rte", "sparse-inductive", profile="paper")
    assert res["poly"]["n"] == 2 and res["poly"]["diff"] == pytest.approx(3.0)
    os.utime(tmp_path / "length-poly-paper-seed0-1ab.json", (2e9, 2e9))  # the quick file is newest
    res = paired_mod.paired(tmp_path, "length", "paper", "rte", "sparse-inductive")
    assert res["poly"]["n"] == 1 and res["poly"]["diff"] == pytest.approx(1.0) and res["poly"]["lo"] is None
    assert "2 unit files" in capsys.readouterr().err


def test_paired_main_prints_the_fields(tmp_path, paired_mod, monkeypatch, capsys):
    for seed in range(3):
        (tmp_path / f"parameter-exp-paper-seed{seed}-abc.json").write_text(
            json.dumps({"errors": {"rte": [1.0, 2.0, 3.0, 4.0], "ctx-polyfit": [3.0, 4.1, 5.0, 6.2]}})
        )
    monkeypatch.setattr("sys.argv", ["paired.py", str(tmp_path), "parameter", "paper", "rte", "ctx-polyfit"])
    paired_mod.main()
    out = capsys.readouterr().out
    assert "ctx-polyfit - rte: 2.075 [" in out and "(n=4 targets)" in out
    assert "per seed seed 0: 2.075, seed 1: 2.075, seed 2: 2.075" in out and "clear: yes" in out


def test_tables_render_mse_and_accuracy_rows_with_wall_time(tmp_path, monkeypatch):
    mod = _load("tables.py")
    rows = [
        {"group": "g", "method": "rte", "metric": "mse", "value": 0.5, "ci95": 0.1, "n": 3, "paper_value": 0.7},
        {"group": "found", "method": "rte", "metric": "accuracy", "value": 0.25, "ci95": None, "n": 3},
    ]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 90.0}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    text = mod.render("x")
    assert "| `rte` | 0.500 ± 0.100 (paper 0.700) |" in text
    assert "| `rte` | 0.250 |" in text and "_wall 1.5 min" in text
    for name, says in (("x-ablations", "main experiment's cached units"), ("y", "read from the unit cache")):
        (tmp_path / f"{name}.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 1.0}}))
        assert says in mod.render(name) and "_wall" not in mod.render(name)
    # assembled from units computed by one process per seed: its wall is a second or so of reading
    (tmp_path / "z.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 7.0, "unit_s": 5000.0}}))
    assert "read from the unit cache" in mod.render("z") and "_wall" not in mod.render("z")
    assert "on 2 CPU cores._" in text and "thread" not in text  # an older file records no threads
    (tmp_path / "t.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 90.0}, "config": {"threads": 2}}))
    assert "_wall 1.5 min on 2 CPU cores, 2 torch threads per unit._" in mod.render("t")
    assert mod.wall_note({"config": {"threads": 1}}, 60.0) == "_wall 1.0 min on 2 CPU cores, 1 torch thread per unit._"


def test_tables_print_seed_sd_and_clear_claims(tmp_path, monkeypatch):
    mod = _load("tables.py")
    rows = [
        {
            "group": "g",
            "method": "rte",
            "metric": "mse",
            "value": 0.101,
            "ci95": 0.0125,
            "n": 30,
            "seed_sd": 0.004,
            "ci_method": "t-targets",
            "paper_value": None,
        }
    ]
    comps = [
        {
            "group": "g",
            "metric": "mse",
            "a": "rte",
            "b": "ctx-polyfit",
            "diff": -1.0,
            "lo": -1.2,
            "hi": -0.8,
            "seed_diffs": [-1.0, -1.1],
            "n": 30,
            "clear": True,
            "winner": "rte",
        },
        {
            "group": "g",
            "metric": "mse",
            "a": "rte",
            "b": "oracle",
            "diff": 0.1,
            "lo": -0.2,
            "hi": 0.4,
            "seed_diffs": [0.1, 0.1],
            "n": 30,
            "clear": False,
            "winner": None,
        },
    ]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "comparisons": comps, "timing": {"wall_s": 1.0}}))
    (tmp_path / "old.json").write_text(json.dumps({"rows": [{k: v for k, v in rows[0].items() if k != "ci_method"}]}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    text = mod.render("x")
    assert "| `rte` | 0.101 ± 0.0125 (sd 0.00400) |" in text
    assert "rte beats ctx-polyfit (g); 1 other comparison(s) not clear" in text
    assert "earlier rule" in mod.render("old")
    assert "over targets (seed-averaged)" in text
    # one target (projectile): the interval runs over seeds, and the footnote says so
    seeds_only = {"rows": [{**rows[0], "ci_method": "t-seeds", "n": 3}]}
    assert "over seeds (t interval: one target)" in mod.render("y", data=seeds_only)


def test_table_blocks_sync_and_check(tmp_path, monkeypatch):
    mod = _load("tables.py")
    rows = [
        {"group": "g", "method": "rte", "metric": "mse", "value": 0.5, "ci95": 0.1, "n": 3},
        {"group": "h", "method": "rte", "metric": "mse", "value": 0.9, "ci95": 0.1, "n": 3},
    ]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 90.0}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    md = tmp_path / "doc.md"
    md.write_text("intro\n<!-- table: x groups=g -->\nold numbers\n<!-- /table -->\nend\n")
    assert mod.sync(md, check=True) == ["x groups=g"] and "old numbers" in md.read_text()
    assert mod.sync(md) == ["x groups=g"]
    text = md.read_text()
    assert "0.500 ± 0.100" in text and "0.900" not in text and text.endswith("<!-- /table -->\nend\n")
    assert mod.sync(md, check=True) == []


def test_a_table_blocks_claims_are_on_its_own_metric_so_a_file_prints_each_claim_once(tmp_path, monkeypatch):
    mod = _load("tables.py")
    rows = [
        {"group": "g", "method": m, "metric": metric, "value": v, "ci95": 0.1, "n": 3}
        for m, v in (("rte", 0.5), ("ctx-polyfit", 0.9))
        for metric in ("mse", "coverage", "accuracy")
    ]
    comps = [
        {
            "group": "g",
            "metric": metric,
            "a": "rte",
            "b": "ctx-polyfit",
            "diff": -0.4,
            "lo": -0.5,
            "hi": -0.3,
            "seed_diffs": [-0.4],
            "n": 3,
            "clear": True,
            "winner": "rte",
        }
        for metric in ("mse", "accuracy")
    ]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "comparisons": comps, "timing": {"wall_s": 90.0}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    md = tmp_path / "doc.md"
    md.write_text("<!-- table: x metric=mse -->\n<!-- /table -->\n<!-- table: x metric=coverage -->\n<!-- /table -->\n")
    mod.sync(md)
    text = md.read_text()
    assert text.count("rte beats ctx-polyfit (g)") == 1 and text.count("_wall 1.5 min") == 2
    assert text.index("rte beats ctx-polyfit") < text.index("metric=coverage")  # under the mse table only
    assert "(accuracy)" not in text  # the accuracy claim is not the mse table's
    assert "rte beats ctx-polyfit (accuracy) (g)" in mod.render_spec("x metric=accuracy")
    whole = mod.render_spec("x")
    assert "rte beats ctx-polyfit (g)" in whole and "rte beats ctx-polyfit (accuracy) (g)" in whole
    with pytest.raises(SystemExit, match="unknown option"):
        mod.render_spec("x claims=no")


def test_committed_docs_tables_match_their_results_files():
    mod = _load("tables.py")
    root = _PATH.parent.parent
    docs = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    stale = {str(p.relative_to(root)): mod.sync(p, check=True) for p in docs if p.exists()}
    assert not any(stale.values()), f"stale table blocks (run benchmarks/tables.py --sync): {stale}"


def test_old_vs_new_matches_renamed_groups_and_marks_missing_rows():
    mod = _load("old_vs_new.py")
    row = lambda g, m, v, **kw: {"group": g, "method": m, "metric": "accuracy", "value": v, "ci95": 0.1, **kw}  # noqa: E731
    old = {"rows": [row("size6", "rte", 0.5)], "environment": {"git": "aaa"}}
    new = {
        "rows": [row("size6-frontier", "rte", 0.6, seed_sd=0.02, paper_value=0.66), row("size6-authors", "rte", 0.7)],
        "config": {"test_seed": 31337},
        "environment": {"git": "bbb"},
    }
    text = mod.compare("parity-paper-paper", old, new)
    lines = text.splitlines()
    assert "test seed 10000, commit aaa" in lines[2] and "test seed 31337, commit bbb" in lines[2]
    assert "| size6-frontier | `rte` | accuracy | 0.500 ± 0.100 | 0.600 ± 0.100 (sd 0.0200) | 0.660 |" in lines
    assert "| size6-authors | `rte` | accuracy | — | 0.700 ± 0.100 |  |" in lines


def test_tables_render_dev_choices_recipes_and_embeddings(tmp_path, monkeypatch):
    mod = _load("tables.py")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    variants = [
        {"value": 10, "mse": 0.1, "vs_default": {"mean": 0.0, "ci95": 0.0}},
        {"value": 20, "mse": 0.09, "vs_default": {"mean": -0.01, "ci95": 0.004}},
        {"value": 5, "mse": 0.105, "vs_default": {"mean": 0.005, "ci95": 0.006}},
    ]
    (tmp_path / "dev.json").write_text(
        json.dumps(
            {
                "profile": "paper",
                "seed": 0,
                "n_targets": 200,
                "n_draws": 4,
                "wall_s": 600,
                "units": {"length-paper": {"default": {"k": 10}, "settings": {"k": {"variants": variants}}}},
            }
        )
    )
    text = mod.render_spec("dev")
    assert "| length-paper | `k` | 10 | 0.100 | (default) |  |" in text
    assert (
        "| length-paper | `k` | 20 | 0.0900 | -0.0100 ± 0.00400 | yes |" in text
        and "| 5 | 0.105 | 0.00500 ± 0.00600 | no |" in text
    )
    (tmp_path / "rec.json").write_text(
        json.dumps({"runs": {"extender full": {"train": 0.5, "dev": 0.25, "final_loss": 0.4, "sft_s": 120.0}}})
    )
    assert "| `extender full` | 0.500 | 0.250 | 0.400 | 2.0 min |" in mod.render_spec("rec")
    emb = {
        "environment": {"git": "abc"},
        "wall_s": 60.0,
        "mean_rho_theta": {"paper/gradient": 0.45},
        "per_family": {"paper/quadratic/gradient": {"rho_theta": 0.4}, "paper/cubic/gradient": {"rho_theta": 0.5}},
    }
    (tmp_path / "emb.json").write_text(json.dumps(emb))
    assert "| `paper` | `gradient` | 0.40 | 0.50 | 0.45 |" in mod.render_spec("emb")


def test_an_empty_table_block_is_filled_and_never_swallows_the_text_after_it(tmp_path, monkeypatch):
    mod = _load("tables.py")
    rows = [{"group": "g", "method": "rte", "metric": "mse", "value": 0.5, "ci95": 0.1, "n": 3}]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "timing": {"wall_s": 1.0}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    md = tmp_path / "doc.md"
    md.write_text("a\n<!-- table: x -->\n<!-- /table -->\nkeep me\n<!-- table: x -->\nold\n<!-- /table -->\nz\n")
    assert mod.sync(md) == ["x", "x"]
    text = md.read_text()
    assert "keep me" in text and text.count("0.500 ± 0.100") == 2 and "old" not in text and text.endswith("-->\nz\n")
    assert mod.sync(md, check=True) == []


def test_headline_rows_show_rte_its_baseline_verdict_and_every_non_oracle_winner(tmp_path, monkeypatch):
    mod = _load("tables.py")
    row = lambda g, m, v, **kw: {"group": g, "method": m, "metric": "mse", "value": v, "ci95": 0.1, "n": 9, **kw}  # noqa: E731

    def comp(g, a, b, winner):
        return {
            "group": g,
            "metric": "mse",
            "a": a,
            "b": b,
            "diff": 0,
            "lo": 0,
            "hi": 0,
            "seed_diffs": [],
            "n": 9,
            "clear": winner is not None,
            "winner": winner,
        }

    rows = [
        row("g", "rte", 1.0, seed_sd=0.01, paper_value=2.0),
        row("g", "sparse-inductive", 3.0, seed_sd=0.02),
        row("g", "oracle", 0.1),
        row("g", "ctx-interp", 0.5),
        row("h", "rte", 4.0),
        row("h", "sparse-inductive", 3.0),
    ]
    comps = [
        comp("g", "rte", "sparse-inductive", "rte"),
        comp("g", "rte", "oracle", "oracle"),
        comp("g", "rte", "ctx-interp", "ctx-interp"),
        comp("h", "rte", "sparse-inductive", None),
    ]
    (tmp_path / "length-strict-paper.json").write_text(json.dumps({"rows": rows, "comparisons": comps}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    out = mod.render_spec("headline length-strict-paper:g+h").splitlines()
    assert out[2] == (
        "| length | `strict` | g | 1.00 ± 0.100 (sd 0.0100) | `sparse-inductive` 3.00 ± 0.100 (sd 0.0200) "
        "| `rte` better | - | 2.00 | `ctx-interp` |"
    )  # the oracle's win is not listed
    assert (
        out[3]
        == "| length | `strict` | h | 4.00 ± 0.100 | `sparse-inductive` 3.00 ± 0.100 | not clear | - | - | none |"
    )
    rows.append(row("h", "strategy-b", 5.0, paper_value=6.0))  # our run of the paper's own strategy, its value
    (tmp_path / "length-strict-paper.json").write_text(json.dumps({"rows": rows, "comparisons": comps}))
    assert mod.render_spec("headline length-strict-paper:h").splitlines()[2] == (
        "| length | `strict` | h | 4.00 ± 0.100 | `sparse-inductive` 3.00 ± 0.100 | not clear "
        "| `strategy-b` 5.00 ± 0.100 | 6.00 | none |"
    )
    with pytest.raises(SystemExit, match="no rte row in group 'zz'"):
        mod.render_spec("headline length-strict-paper:zz")
    with pytest.raises(SystemExit, match="use <experiment>-<protocol>-<profile>:GROUP"):
        mod.render_spec("headline parity:g")
    # another metric in the same group (a retrieval share) neither fills a cell nor a verdict
    acc = {**comp("g", "rte", "ctx-interp", "ctx-interp"), "metric": "accuracy"}
    rows_acc = [row("g", "rte", 0.3, metric="accuracy"), row("g", "ctx-interp", 0.9, metric="accuracy")]
    (tmp_path / "length-paper-paper.json").write_text(json.dumps({"rows": rows[:2] + rows_acc, "comparisons": [acc]}))
    assert mod.render_spec("headline length-paper-paper:g").splitlines()[2].endswith("| - | 2.00 | none |")


def test_recipe_table_lists_paired_comparisons():
    mod = _load("tables.py")
    runs = {"a": {"train": 0.5, "dev": 0.4, "final_loss": 0.3, "sft_s": 120.0}}
    cmp = {"a vs b": {"a": "a", "b": "b", "diff": 0.039, "lo": -0.026, "hi": 0.105, "n": 153, "clear": False}}
    text = mod.render_recipes({"runs": runs, "comparisons": cmp})
    assert "| `a` | 0.500 | 0.400 | 0.300 | 2.0 min |" in text
    assert "paired on the 153 dev tasks: `a` minus `b` = +0.039 [-0.026, +0.105] (not clear)" in text


def test_spearman_rows_is_scipy_spearman_with_averaged_ties():
    from scipy import stats

    quality = _load("quality.py")
    g = np.random.default_rng(0)
    a = g.integers(0, 4, size=(20, 15)).astype(float)  # many ties in both
    b = g.integers(0, 3, size=(20, 15)).astype(float) + 0.1 * a
    rho = quality.spearman_rows(a, b)
    np.testing.assert_allclose(rho, [stats.spearmanr(x, y).statistic for x, y in zip(a, b, strict=True)], rtol=1e-12)
    ordinal = np.array(
        [np.corrcoef(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))[0, 1] for x, y in zip(a, b, strict=True)]
    )
    assert not np.allclose(rho, ordinal)  # ties averaged, not broken by position


def test_dev_choices_table_gets_a_coverage_column_only_when_the_file_has_one(tmp_path, monkeypatch):
    mod = _load("tables.py")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    variants = [
        {"value": ["relative", 1.0], "mse": 0.1, "coverage": 0.8, "vs_default": {"mean": 0.0, "ci95": 0.0}},
        {"value": ["likelihood", 2.0], "mse": 0.09, "coverage": 0.9, "vs_default": {"mean": -0.01, "ci95": 0.004}},
    ]
    unit = {
        "default": {"weighting+temperature": ["relative", 1.0]},
        "settings": {"weighting+temperature": {"variants": variants}},
    }
    (tmp_path / "dev.json").write_text(
        json.dumps(
            {
                "profile": "quick",
                "seed": 0,
                "n_targets": 200,
                "n_draws": 4,
                "wall_s": 600,
                "units": {"length-paper": unit},
            }
        )
    )
    text = mod.render_spec("dev")
    assert "| clear | 90% coverage |" in text
    assert "| ['likelihood', 2.0] | 0.0900 | -0.0100 ± 0.00400 | yes | 0.900 |" in text


def test_parameter_dev_table_marks_the_chosen_variant_and_clear_losses():
    mod = _load("tables.py")
    from taskextrap.experiments.parameter import OBJECTIVE_VARIANTS, choose_variant

    rows, comparisons = [], []
    for g, (a, b) in {"f": (1.0, 0.5), "h": (1.0, 2.0)}.items():
        for m, v in (("strategy-a", a), ("strategy-a-loo", a), *((f"rte-{k}", b) for k in OBJECTIVE_VARIANTS)):
            rows.append({"group": g, "method": m, "metric": "mse", "value": v})
        comparisons += [
            {
                "group": g,
                "metric": "mse",
                "a": "rte",
                "b": f"rte-{k}",
                "clear": True,
                "winner": f"rte-{k}" if b < a else "rte",
            }
            for k in OBJECTIVE_VARIANTS
        ]
    text = mod.render_parameter_dev({"rows": rows, "comparisons": comparisons, "seeds": [0], "config": {}})
    chosen = choose_variant(rows)  # log(0.5) + log(2) = 0: a tie, so Strategy A stays
    assert chosen == "strategy-a" and "| **`strategy-a`** (chosen) |" in text
    assert "| `rte-objective-r8` | 0.500 (0.50 ✓) | 2.00 (2.00 ✗) | +0.000 |" in text


def test_versus_table_gives_paired_verdicts_before_and_after(tmp_path, monkeypatch):
    mod = _load("tables.py")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)

    def comp(b, clear, winner):
        return {"group": "g", "metric": "mse", "a": "rte", "b": b, "clear": clear, "winner": winner}

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "x-paper-paper.json").write_text(
        json.dumps(
            {"comparisons": [comp("library-best-fit", True, "library-best-fit"), comp("ctx-interp", False, None)]}
        )
    )
    (tmp_path / "x-paper-paper.json").write_text(
        json.dumps(
            {
                "comparisons": [
                    comp("library-best-fit", True, "rte"),
                    comp("ctx-interp", True, "ctx-interp"),
                    comp("sparse-inductive", True, "rte"),
                ]
            }
        )
    )
    row = mod.render_spec("versus before=old x-paper-paper:g").splitlines()[2]
    assert row == "| x-paper-paper | g | ✗ → ✓ | - → ✓ | = → ✗ |  |  |"
    assert mod.render_spec("versus x-paper-paper:g").splitlines()[2] == "| x-paper-paper | g | ✓ | ✓ | ✗ |  |  |"
    chosen = mod.render_spec("versus methods=ctx-interp,cnp x-paper-paper:g").splitlines()
    assert chosen[0] == "| file | group | `ctx-interp` | `cnp` |" and chosen[2] == "| x-paper-paper | g | ✗ |  |"


def test_rte_gp_goals_table_counts_verdicts_winners_and_coverage(tmp_path, monkeypatch):
    mod = _load("tables.py")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)

    def comp(g, a, b, winner):
        return {"group": g, "metric": "mse", "a": a, "b": b, "clear": winner is not None, "winner": winner}

    def row(g, m, metric, v):
        return {"group": g, "method": m, "metric": metric, "value": v, "ci95": None, "n": 3}

    rows = [row(g, m, "mse", v) for g in ("g", "h") for m, v in (("rte", 2.0), ("rte-gp", 1.0))]
    rows += [row("g", "rte-gp", "coverage", 0.9), row("h", "rte-gp", "coverage", 0.7)]
    comps = [comp("g", "rte", "rte-gp", "rte-gp"), comp("g", "rte-gp", "ctx-polyfit", "ctx-polyfit"),
             comp("g", "rte-gp", "oracle", "oracle"), comp("h", "rte", "rte-gp", None),
             comp("h", "rte-gp", "cnp", "rte-gp")]  # fmt: skip
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "comparisons": comps}))
    lines = mod.render_spec("rte-gp-goals x:g+h").splitlines()
    assert lines[2] == "| x | g | 2.00 | 1.00 | ✓ | `ctx-polyfit` | 0.900 | yes |"  # an oracle never counts
    assert lines[3] == "| x | h | 2.00 | 1.00 | = | - | 0.700 | **no** |"
    assert "2 cells: `rte-gp` clearly better than `rte` in 1, clearly worse in 0" in lines[-1]
    assert "beaten by another row (oracles aside) in 1" in lines[-1] and "0.85-0.95 in 1." in lines[-1]
    with pytest.raises(SystemExit, match="no rte-gp row"):
        mod.render_spec("rte-gp-goals x:nosuch")


def test_rte_gp_shift_table_reads_each_files_dev_record_beside_its_test_rows(tmp_path, monkeypatch):
    mod = _load("tables.py")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)

    def row(g, m, metric, v):
        return {"group": g, "method": m, "metric": metric, "value": v, "ci95": None, "n": 3}

    def choice(mse, raw, cov, n=None):
        return {"out_of_fold_mse": mse, "out_of_fold_coverage_raw": raw, "out_of_fold_coverage": cov, "dev_targets": n}

    rows = [row("g", "rte-gp", "mse", 4.0), row("g", "rte-gp", "coverage", 0.7),
            row("g", "rte-gp-uncalibrated", "coverage", 0.6)]  # fmt: skip
    per_file = {"rows": rows, "config": {"rte-gp_choice": [choice(1.0, 0.8, 0.9, 50), choice(3.0, 0.8, 0.92, 50)]}}
    per_family = {"rows": rows, "config": {"rte-gp_choice": {"g": [{"out_of_fold_coverage": 0.9}]}}}
    suite_rows = [dict(r, group="d:q") for r in rows]
    suite = {"rows": suite_rows, "config": {"d": {"questions": {"q": {"rte-gp_choice": [choice(2.0, 0.9, 0.9)],
                                                                      "dev": [{"targets": 3}]}}}}}  # fmt: skip
    for name, data in (("a", per_file), ("b", per_family), ("c", suite)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    lines = mod.render_spec("rte-gp-shift a:g b:g c:d:q").splitlines()
    assert lines[2] == "| a | g | 50 | 2.00 | 4.00 | 2 | 0.800 | 0.600 | 0.910 | 0.700 | **no** |"  # seeds averaged
    assert lines[3] == "| b | g | - | - | 4.00 | - | - | 0.600 | 0.900 | 0.700 | **no** |"  # no dev MSE recorded
    assert lines[4] == "| c | d:q | 3 | 2.00 | 4.00 | 2 | 0.900 | 0.600 | 0.900 | 0.700 | **no** |"
    with pytest.raises(SystemExit, match="no rte-gp row"):
        mod.render_spec("rte-gp-shift a:nosuch")


def test_table_block_methods_keeps_those_rows_in_order_and_the_claims_between_them(tmp_path, monkeypatch):
    mod = _load("tables.py")
    methods = ("rte", "ctx-polyfit", "library-best-fit")
    rows = [
        {"group": "g", "method": m, "metric": "mse", "value": v, "ci95": 0.1, "n": 3}
        for m, v in zip(methods, (0.5, 0.9, 0.7), strict=True)
    ]
    comps = [
        {
            "group": "g",
            "metric": "mse",
            "a": "rte",
            "b": b,
            "diff": -0.3,
            "lo": -0.4,
            "hi": -0.2,
            "seed_diffs": [-0.3],
            "n": 3,
            "clear": True,
            "winner": "rte",
        }
        for b in methods[1:]
    ]
    (tmp_path / "x.json").write_text(json.dumps({"rows": rows, "comparisons": comps, "timing": {"wall_s": 90.0}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    md = tmp_path / "doc.md"
    md.write_text("<!-- table: x metric=mse methods=library-best-fit,rte -->\n<!-- /table -->\n")
    mod.sync(md)
    text = md.read_text()
    assert text.index("`library-best-fit`") < text.index("`rte`") and "ctx-polyfit" not in text
    assert "rte beats library-best-fit (g)" in text
    md.write_text("<!-- table: x methods=rte,nope -->\n<!-- /table -->\n")
    with pytest.raises(SystemExit, match="no rows of method"):
        mod.sync(md)


def test_the_cnp_step_benchmark_writes_both_encodings_per_shape(tmp_path, monkeypatch):
    mod = _load("cnp_step.py")
    monkeypatch.setattr(mod, "SHAPES", (("tiny", 3, 4, 16),))
    mod.main(["--repeats", "1", "--threads", "1", "--out", str(tmp_path / "c.json")])
    (cell,) = json.loads((tmp_path / "c.json").read_text())["cells"]
    assert cell["unit"] == "tiny" and cell["per_row"]["median_ms"] > 0 and cell["per_task"]["min_ms"] > 0
    assert cell["speedup_median"] == cell["per_row"]["median_ms"] / cell["per_task"]["median_ms"]


def test_the_gp_step_benchmark_times_both_gradients_and_checks_they_agree(tmp_path, monkeypatch):
    mod = _load("gp_step.py")
    monkeypatch.setattr(mod, "SHAPES", (("tiny", 3, 4),))
    mod.main(["--repeats", "1", "--threads", "1", "--out", str(tmp_path / "g.json")])
    (cell,) = json.loads((tmp_path / "g.json").read_text())["cells"]
    assert cell["unit"] == "tiny" and cell["points_per_draw"] == 7 and cell["closed_form"]["min_ms"] > 0
    assert cell["gradient_max_rel_diff"] < 1e-6  # to rounding (noiseless queries: an ill-conditioned Gram)
    assert cell["speedup_median"] == cell["autograd"]["median_ms"] / cell["closed_form"]["median_ms"]


def test_the_gp_chunks_benchmark_times_each_chunk_size_and_checks_its_bits(tmp_path, monkeypatch):
    mod = _load("gp_chunks.py")
    monkeypatch.setattr(mod, "CONTEXTS", 20)  # 340 problems
    mod.main(["--chunks", "64", "1000", "--repeats", "1", "--out", str(tmp_path / "g.json")])
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["problems"] == 340 and [c["chunk"] for c in doc["cells"]] == ["all", 64, 1000]
    assert all(c["same_bits"] and c["min_ms"] > 0 for c in doc["cells"][1:])


def test_the_cnp_steps_benchmark_scores_each_scale_on_dev_by_the_dev_rule(tmp_path):
    mod = _load("cnp_steps_dev.py")
    args = ["--profile", "tiny", "--families", "cubic", "--scales", "0.5", "1", "--lr-scales", "1", "4"]
    mod.main([*args, "--out", str(tmp_path / "c.json"), "--checkpoints", str(tmp_path / "ck")])
    doc = json.loads((tmp_path / "c.json").read_text())
    assert [(c["family"], c["protocol"]) for c in doc["cells"]] == [("cubic", "paper"), ("cubic", "strict")]
    # the dev rows' names (a learning-rate scale other than 1 named after them); the score is their mean log MSE
    assert set(doc["scores"]) == {"cnp-w128-x0.5", "cnp-w128", "cnp-w128-x0.5-lr4", "cnp-w128-lr4"}
    for v in doc["scores"]:
        assert doc["scores"][v] == pytest.approx(np.mean([np.log(c["mse"][v]) for c in doc["cells"]]))
    for c in doc["cells"]:  # the same seeds and batches, another rate: another fit
        assert c["mse"]["cnp-w128-lr4"] != c["mse"]["cnp-w128"]
    assert doc["command"].startswith(
        "python benchmarks/cnp_steps_dev.py --scales 0.5 1 --lr-scales 1 4 --families cubic --profile tiny --out "
    )
    with pytest.raises(SystemExit):  # a discrete regime has no families to name
        mod.main(["--regime", "length", "--families", "cubic"])


@pytest.mark.slow  # three tiny runs of the benchmark: make test-slow
def test_the_cnp_steps_benchmark_stopped_part_way_trains_on_to_the_same_scores(tmp_path, monkeypatch):
    from taskextrap.operators import checkpoints

    mod = _load("cnp_steps_dev.py")
    monkeypatch.setattr(checkpoints, "EVERY_S", 0.0)
    args = ["--profile", "tiny", "--families", "cubic", "--scales", "1", "--checkpoints", str(tmp_path / "ck")]
    mod.main([*args, "--out", str(tmp_path / "whole.json")])
    assert not any((tmp_path / "ck").iterdir())  # the cells' folders go with the file written
    real = checkpoints.Checkpoint.save

    def save(self, at, *rest):
        real(self, at, *rest)
        if at >= 3:
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(checkpoints.Checkpoint, "save", save)
        with pytest.raises(KeyboardInterrupt):
            mod.main([*args, "--out", str(tmp_path / "again.json")])
    assert len(list((tmp_path / "ck").glob("*/cnp-0.safetensors"))) >= 1
    mod.main([*args, "--out", str(tmp_path / "again.json")])
    whole, again = (json.loads((tmp_path / f).read_text()) for f in ("whole.json", "again.json"))
    assert again["scores"] == whole["scores"]
    assert [c["mse"] for c in again["cells"]] == [c["mse"] for c in whole["cells"]]


def test_the_ctx_gp_once_benchmark_times_a_fit_and_a_look_up_and_counts_the_fits_saved(tmp_path, monkeypatch):
    from dataclasses import replace

    from taskextrap.experiments import composition

    mod = _load("ctx_gp_once.py")
    tiny = replace(composition.PROFILES["paper"], n_targets=3, n_draws=2)
    monkeypatch.setitem(composition.PROFILES, "paper", tiny)
    from taskextrap.baselines import classics
    import dataclasses

    from taskextrap.tasks.regimes import REGIMES

    table = REGIMES["composition"].protocols
    same = dataclasses.replace(REGIMES["composition"], protocols=dict(table, strict=table["paper"]))
    monkeypatch.setitem(REGIMES, "composition", same)  # two protocols of one shape: two fits
    fits = []
    real = classics.ctx_gp
    monkeypatch.setattr(classics, "ctx_gp", lambda *a, **k: fits.append(1) or real(*a, **k))
    mod.main(["--threads", "1", "--only", "composition", "--out", str(tmp_path / "o.json")])
    doc = json.loads((tmp_path / "o.json").read_text())
    assert [r["protocol"] for r in doc["cells"]] == ["paper", "strict"]
    for r in doc["cells"]:
        assert r["contexts"] == 6 and r["same_bits"] and r["repeat_s"] < r["fit_s"]
        assert (r["fits_before"], r["fits_after"]) == (3, 1) and r["saved_s"] == 2 * r["fit_s"]
    assert doc["saved_s"] == sum(r["saved_s"] for r in doc["cells"]) and len(fits) == 2


def test_coverage_rows_show_raw_and_calibrated_rte_the_band_and_the_classics_intervals(tmp_path, monkeypatch):
    mod = _load("tables.py")
    row = lambda g, m, v, metric="coverage": {"group": g, "method": m, "metric": metric, "value": v, "ci95": 0.01}  # noqa: E731
    rows = [
        row("g", "rte", 0.91),
        row("g", "rte-uncalibrated", 0.7),
        row("g", "rte", 2.0, "interval-width"),
        row("g", "cnp", 0.5),
        row("g", "cnp-uncalibrated", 0.25),
        row("h", "meta-gp", 0.8),
        row("h", "rte", 0.97),
        row("h", "rte", 1.0, "mse"),
        row("k", "rte", 1.0, "mse"),  # a file without intervals
        row("g", "rte", 1.0, "mse"),
    ]
    (tmp_path / "x-paper-paper.json").write_text(json.dumps({"rows": rows, "config": {"interval_scale": 1.5}}))
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    out = mod.render_spec("coverage x-paper-paper:g+h+k").splitlines()
    assert out[2] == (
        "| x-paper-paper | g | 0.700 ± 0.0100 | 0.910 ± 0.0100 | yes | 2.00 ± 0.0100 |  |  | "
        "0.500 ± 0.0100; raw 0.250 |"
    )  # a classic with its -uncalibrated row shows both; without one, the one row
    assert out[3] == "| x-paper-paper | h | - | 0.970 ± 0.0100 | **no** | - |  | 0.800 ± 0.0100 |  |"
    assert out[4] == "| x-paper-paper | k | - | - | - | - | | | |"
    with pytest.raises(SystemExit, match="no rte row in group 'zz'"):
        mod.render_spec("coverage x-paper-paper:zz")
    (tmp_path / "x-paper-paper.json").write_text(json.dumps({"rows": rows}))  # before the calibrated intervals
    assert mod.render_spec("coverage x-paper-paper:h").splitlines()[2] == (
        "| x-paper-paper | h | 0.970 ± 0.0100 | - | - | - |  | 0.800 ± 0.0100 |  |"
    )


def test_cpu_drift_counts_moved_rows_and_changed_claims():
    mod = _load("cpu_drift.py")

    def results(rte, clear):
        rows = [
            {"group": "g", "method": "rte", "metric": "mse", "value": rte},
            {"group": "g", "method": "ctx-polyfit", "metric": "mse", "value": 1e-25},
            {"group": "g", "method": "b", "metric": "mse", "value": 2.0},
        ]
        comps = [{"group": "g", "metric": "mse", "a": "rte", "b": "b", "clear": clear, "winner": "rte"}]
        return {"rows": rows, "comparisons": comps}

    same = mod.drift(results(1.0, True), results(1.0, True))
    assert same["rows_moved"] == 0 and same["mse_relative_change"]["max"] == 0.0
    assert same["clear_claims"] == {
        "reference": 1,
        "here": 1,
        "in_both": 1,
        "vanished": [],
        "appeared": [],
        "reversed": [],
    }
    moved = mod.drift(results(1.0, True), results(1.1, False))
    assert moved["rows_moved"] == 1 and abs(moved["mse_relative_change"]["max"] - 0.1) < 1e-12
    assert moved["mse_relative_change"]["rows"] == 2  # ctx-polyfit's exact ~0 is left out of the ratios
    assert moved["clear_claims"]["vanished"] == ["g mse: rte vs b"] and moved["rte_mse"]["g"]["here"] == 1.1


def test_the_em_estep_benchmark_times_every_setting_with_the_same_labels_and_its_table(tmp_path, monkeypatch):
    mod = _load("em_estep.py")
    monkeypatch.setattr(mod, "N_PER_FAMILY", 12)
    mod.main(["--tasks", "6", "--out", str(tmp_path / "e.json")])
    doc = json.loads((tmp_path / "e.json").read_text())
    assert set(doc["settings"]) == {"chunk32-1lane", "chunked-1lane", "chunked-lanes"}
    assert doc["same_labels_in_every_setting"] and all(r["seconds"] > 0 for r in doc["settings"].values())
    sizes = {name: r["tasks_per_sweep"] for name, r in doc["settings"].items()}
    lanes = doc["settings"]["chunked-lanes"]["lanes"]
    # 32 per sweep caps at the 6 tasks; the values allow all 6, but the lanes get a chunk each
    assert sizes == {"chunk32-1lane": 6, "chunked-1lane": 6, "chunked-lanes": -(-6 // lanes)}
    assert len(doc["labels_digest"]) == 64
    tables = _load("tables.py")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    (tmp_path / "em-estep.json").write_text(json.dumps(doc))
    text = tables.render_spec("em-estep")
    assert "`chunked-lanes`" in text and "1.00x" in text and "6 hidden tasks" in text


def test_context_posterior_dev_table_has_every_design_per_protocol():
    mod = _load("tables.py")
    data = json.loads((mod.RESULTS / "context-posterior-dev.json").read_text())
    lines = mod.render_spec("context-posterior-dev").splitlines()
    designs = [line.split("|")[1].strip().strip("`") for line in lines[2:] if line.startswith("| `")]
    assert designs == list(data["summary"]["paper"]) and "chosen-base" in designs
    assert lines[0].startswith("| design | paper: log MSE / rte |") and "strict: coverage (in band)" in lines[0]
    assert "at least 4 dev targets" in lines[-1] and data["command"] in lines[-1]


def _stream_record(n: int, agree: bool = True) -> dict:
    engine = lambda w, total: {  # noqa: E731
        "workers": w, "seconds": {"start": 1.0, "embed": total - 2.0, "near": 1.0, "total": total},
        "driver_peak_mib": 1800.0, "worker_peak_mib": 1200.0, "output_bytes": 270 * n,
    }  # fmt: skip
    return {"tasks": n, "row_groups": n // 10_000, "input_bytes": 160 * n, "serial": engine(1, n / 5000),
            "ray": engine(2, n / 6000 + 8.0), "engines_agree": agree}  # fmt: skip


def test_stream_table_says_whether_a_million_was_projected_or_measured():
    mod = _load("tables.py")
    env = {"environment": {"git": "abc1234"}, "family": "cubic", "points_per_task": 16, "tasks_per_group": 10_000,
           "sample": 800, "model_fit_s": 40.0, "seed": 0, "wall_s": 120.0,
           "command": "python benchmarks/stream.py"}  # fmt: skip
    two = [_stream_record(10_000), _stream_record(100_000, agree=False)]
    cost = lambda s, f, us: {"seconds_per_million": s, "fixed_s": f, "us_per_task": us,  # noqa: E731
                             "output_bytes_per_million": 2.7e8}  # fmt: skip
    per = {"serial": cost(200.0, 0.0, 200.0), "ray": cost(175.0, 8.0, 167.0), "input_bytes_per_million": 1.6e8}
    text = mod.render_stream(env | {"records": two, "per_million": per})
    assert "A million tasks, from a line through the sizes' totals" in text and "beyond 8 s fixed" in text
    assert "| 100,000 | 10 | ray (2) |" in text and text.count("**no**") == 1  # the engines disagreed there
    one = mod.render_stream(env | {"records": two[:1], "per_million": per})
    assert "Measured at one size" in one and "fixed" not in one


def test_own_tasks_table_shows_each_classic_capped_and_uncapped_with_the_paired_difference(tmp_path, monkeypatch):
    mod = _load("tables.py")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)

    def fit(mse, s):
        return {"variant": "meta-gp-x", "mse": mse, "fit_s": s}

    diff = {"diff": 0.25, "interval": [0.1, 0.4], "clear": True}
    doc = {"methods": {"meta-gp": {"capped": fit(0.5, 2.0), "uncapped": fit(0.25, 9.0), "capped_minus_uncapped": diff}}}
    doc |= {"family": "cubic", "split": "dev", "tasks": 3072, "cap": 1024, "seed": 0, "threads": 1}
    doc |= {"environment": {"git": "abc"}, "wall_s": 120.0, "command": "python benchmarks/own_tasks_dev.py"}
    (tmp_path / "own-tasks-dev.json").write_text(json.dumps(doc))
    lines = mod.render_spec("own-tasks-dev").splitlines()
    assert lines[2] == "| `meta-gp` | `meta-gp-x` | 0.500 | 0.250 | +0.25 (+0.1, +0.4) **clear** | 2.0 | 9.0 |"
    assert "a library of 3,072 tasks (cap 1,024)" in lines[-1] and "2 min" in lines[-1]


@pytest.mark.slow
def test_predict_subnormals_times_both_passes_and_compares_their_bits(tmp_path):
    """benchmarks/predict_subnormals.py at the tiny profile: a record of both passes' seconds,
    the trained network's subnormal weights and whether the passes agree to the bit."""
    out = tmp_path / "p.json"
    _load("predict_subnormals.py").main(["--profile", "tiny", "--targets", "5", "--repeats", "2", "--out", str(out)])
    rec = json.loads(out.read_text())
    assert rec["profile"] == "tiny" and rec["rows"] == 5 * 100 and rec["same_bits"] is True
    assert rec["plain_s"]["min"] <= rec["plain_s"]["median"] <= rec["plain_s"]["max"]
    assert rec["lanes"] == 1 and rec["weights"] > 0 and "--profile tiny" in rec["command"]


@pytest.mark.slow  # a tiny dev unit and the benchmark's cell: about 15 s
def test_the_cnp_steps_benchmark_scores_the_dev_units_own_cnp_row(tmp_path):
    # the benchmark's cell and a dev unit learn from the same draws (experiments.parameter.shared_draws):
    # at the chosen variant's scale its MSE is the unit's cnp row, to the bit
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.executors import run_units
    from taskextrap.experiments.options import RunOptions
    from taskextrap.experiments.parameter import family_units
    from taskextrap.tasks.builtin import PARAMETER_FAMILIES
    from taskextrap.tasks.dev import dev_family

    mod = _load("cnp_steps_dev.py")
    settings = get_experiment("parameter").check(RunOptions(profile="tiny", protocol="paper", split="dev"))
    (unit,) = family_units(dev_family(PARAMETER_FAMILIES["cubic"]), settings, None)
    errors = run_units([unit], tmp_path, progress=False)[(unit.name, unit.key)].errors
    from taskextrap.baselines.classics import CHOSEN

    scale = float(CHOSEN["cnp"].rsplit("-x", 1)[1])  # the unit's cnp row is the chosen variant
    cell = mod.cell("cubic", "paper", (scale,), "tiny", 0)
    assert cell["mse"][CHOSEN["cnp"]] == float(errors["cnp"].mean())
    # and its raw interval's coverage at every grid scale is the curve a dev run's config records
    from taskextrap.experiments.parameter import interval_prefix
    from taskextrap.search.calibration import SCALE_GRID, curve_key, pooled_curve

    prefix = interval_prefix("cnp")
    unit_curve = pooled_curve(
        {curve_key(prefix, i): [errors[curve_key(prefix, i)]] for i in range(len(SCALE_GRID))}, prefix
    )
    assert cell["coverage_by_scale"][CHOSEN["cnp"]] == unit_curve and 0.0 < unit_curve[40] < 1.0


@pytest.mark.slow  # a tiny dev unit and the benchmark's cell: about 20-40 s each
@pytest.mark.parametrize("regime", ["length", "composition"])
def test_the_cnp_steps_benchmark_scores_a_discrete_regimes_dev_unit_cnp_row(regime):
    # the cell runs the regime's own unit up to its Phase 1a and scores the cnp on its draws
    # (experiments.discrete.shared_draws): at the regime's chosen scale, the dev unit's cnp row to the bit
    import importlib

    from taskextrap.baselines.classics import chosen

    mod = _load("cnp_steps_dev.py")
    scale = float(chosen(regime)["cnp"].rsplit("-x", 1)[1])
    module = importlib.import_module(f"taskextrap.experiments.{regime}")
    errors = module.run_unit(mod.dev_spec(regime, "strict", "tiny", 0)).errors
    cell = mod.regime_cell(regime, "strict", (scale,), "tiny", 0)
    assert (cell["family"], cell["protocol"]) == (regime, "strict")
    assert cell["mse"][chosen(regime)["cnp"]] == float(errors["cnp"].mean())
    from taskextrap.search.calibration import SCALE_GRID, curve_key, pooled_curve

    unit_curve = pooled_curve(
        {curve_key("cnp", i): [errors[curve_key("cnp", i)]] for i in range(len(SCALE_GRID))}, "cnp"
    )
    assert cell["coverage_by_scale"][chosen(regime)["cnp"]] == unit_curve


def test_the_committed_cnp_step_scores_are_their_cells_and_agree_with_the_dev_files_at_four_times():
    from taskextrap.baselines.classics import variant_scores

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    for path in sorted(results.glob("cnp-steps-dev*.json")):
        doc = json.loads(path.read_text())
        for v, score in doc["scores"].items():  # the dev rule's score of its own cells
            assert score == pytest.approx(np.mean([np.log(c["mse"][v]) for c in doc["cells"]])), (path.name, v)
    for regime in ("length", "composition"):  # the harness's four times is the dev files' row (another machine)
        rows = [
            r
            for p in ("paper", "strict")
            for r in json.loads((results / f"{regime}-{p}-quick-dev.json").read_text())["rows"]
        ]
        here = json.loads((results / f"cnp-steps-dev-{regime}.json").read_text())["scores"]["cnp-w128-x4"]
        assert here == pytest.approx(variant_scores(rows)["cnp-w128-x4"], abs=0.01), regime


def test_the_profile_table_names_a_gpu_labels_device_and_its_command():
    mod = _load("tables.py")
    one = lambda device: {  # noqa: E731
        "experiment": "parameter",
        "unit": "cubic, seed 0",
        "profile": "paper",
        "rate_hz": 50,
        "wall_s": 60.8,
        "commit": "abc1234",
        "inclusive_pct": {"train (train.py)": 40.0},
        **({} if device is None else {"device": device}),
    }
    cpu_only = mod.render_profile({"after": one(None)})
    assert "after: 61 s at abc1234;" in cpu_only and "--device cuda" not in cpu_only
    both = mod.render_profile({"after": one("cpu"), "gpu": one("cuda")})
    assert "gpu: 61 s at abc1234 on cuda" in both and "after: 61 s at abc1234;" in both
    assert "`--device cuda --label gpu`" in both and "| `train (train.py)` | 40.0 | 40.0 |" in both


def test_a_test_file_made_with_an_older_classic_variant_says_so_under_its_table():
    from taskextrap.baselines.classics import CTX_GP_VARIANT, chosen

    mod = _load("tables.py")
    today = chosen("length") | {"ctx-gp": CTX_GP_VARIANT}
    rows = [{"group": "g", "method": m, "metric": "mse", "value": 1.0} for m in ("rte", "cnp", "meta-gp")]
    data = {"rows": rows, "config": {"split": "test", "classic_variants": {**today, "cnp": "cnp-w128-x0.5"}}}
    line = mod.stale_classics("length-paper-paper", data)
    assert f"`cnp` is `cnp-w128-x0.5`, not today's `{today['cnp']}`" in line and "meta-gp" not in line
    assert (
        mod.stale_classics("length-paper-paper", {**data, "config": {"split": "test", "classic_variants": today}}) == ""
    )
    dev = {**data, "config": {**data["config"], "split": "dev"}}  # a dev file scores the variants: no line
    assert mod.stale_classics("length-paper-quick-dev", dev) == ""
    no_cnp = {**data, "rows": rows[:1]}  # a file without the row says nothing of it
    assert mod.stale_classics("length-paper-paper", no_cnp) == ""
    # ctx-gp's fit: a file that records the learned classics' variants but not it was made with
    # the 1 + 16-start fit, and says so under a ctx-gp row
    gp_rows = [*rows, {"group": "g", "method": "ctx-gp", "metric": "mse", "value": 1.0}]
    older = {"rows": gp_rows, "config": {"split": "test", "classic_variants": chosen("length")}}
    line = mod.stale_classics("length-paper-paper", older)
    assert f"`ctx-gp` is `ctx-gp-lbfgs-r16`, not today's `{CTX_GP_VARIANT}`" in line and "cnp" not in line
    assert (
        mod.stale_classics("length-paper-paper", {**older, "config": {"split": "test", "classic_variants": today}})
        == ""
    )
