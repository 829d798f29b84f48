"""The parity experiment: wiring of the search, the exact baseline, and a tiny end-to-end run."""

import importlib.util
import json

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap import audit
from taskextrap.experiments import parity as E
from taskextrap.sequence_runs import parity as parity_runs
from taskextrap.experiments.registry import FRESH_TEST_SEED, RunOptions
from taskextrap.experiments.catalogue import get_experiment
from taskextrap.experiments.runner import run_experiment
from taskextrap.errors import TaskextrapError
from taskextrap.tasks import parity as T
from taskextrap.report.schema import validate_results


def _rows(prompt):
    # (anchor, bit) of the query: the last "Anchor:" and "Bit:" lines of an extender prompt
    lines = prompt.splitlines()
    return int(lines[-3].split()[-1]), int(lines[-2].split()[-1])


@pytest.mark.parametrize("space,split", [("authors", "test"), ("frontier", "test"), ("authors", "dev")])
def test_a_perfect_extender_makes_rte_the_exact_search(monkeypatch, space, split):
    """With a scorer that charges only inconsistent labels and an exact XOR, rte == exact-search."""

    def scores(lm, pair_lists, batch_size=32, progress=None, prefix_keys=None):
        out = []
        for pairs in pair_lists:
            out.append(sum(5.0 * (a ^ b != int(c)) for p, c in pairs for a, b in [_rows(p)]))
        return np.array(out)

    monkeypatch.setattr("taskextrap.search.likelihood.total_nll", scores)
    monkeypatch.setattr(
        "taskextrap.llm.generate.greedy_once",  # an extender that XORs exactly
        lambda lm, prompts, *args: [f" {x ^ y}" for x, y in map(_rows, prompts)],
    )
    tasks = T.make_test_tasks(FRESH_TEST_SEED, split=split)[:6]
    res = parity_runs.search_space(None, tasks, space, 64, split)
    for m in ("rte", "rte-tie-vote"):
        expect = [
            np.mean(T.exact_search(t, space, tie_vote=m.endswith("vote"), split=split)[0] == t.query_y) for t in tasks
        ]
        np.testing.assert_allclose(res[f"{space}/{m}"], expect)
    consistent = [T.consistent_candidates(t, space, split) for t in tasks]
    np.testing.assert_array_equal(res[f"{space}/n_tied"], [len(c) for c in consistent])
    np.testing.assert_array_equal(
        res[f"{space}/found"], [T.implied_mask(*c[0]) == t.mask for c, t in zip(consistent, tasks, strict=True)]
    )


def test_spaces_groups_and_registration():
    assert parity_runs.SPACES == T.SPACES and parity_runs.SPACES[0] == "authors"
    assert [E.group_of(s) for s in parity_runs.SPACES] == ["size6-authors", "size6-frontier", "size6-all"]
    assert E.group_of("all", "dev") == "size5-all"
    assert parity_runs.base_model_name("dev") == "parity-dev" and parity_runs.base_model_name("test") == "parity"
    assert get_experiment("parity").dev
    with pytest.raises(TaskextrapError):
        E.group_of("everything")


def _tiny_base(monkeypatch):
    """A tiny random model for every base-model load; returns the names asked for."""
    from taskextrap.llm.model import build_char_model

    asked = []

    def load(name, model=None, device="cpu"):
        asked.append(name)
        return build_char_model(d_model=32, n_layers=2, n_heads=2, max_len=512, seed=0)

    monkeypatch.setattr("taskextrap.llm.pretrain.load_base", load)
    return asked


@pytest.mark.slow
def test_tiny_run_writes_every_method(tmp_path, monkeypatch):
    asked = _tiny_base(monkeypatch)
    with audit.spy() as seen:
        res = run_experiment("parity", RunOptions(profile="tiny", out=tmp_path, progress=False))
    validate_results(res)
    assert set(asked) == {"parity"}
    audit.check(seen, lambda mask: len(mask) in (2, 3, 4, 5), required={"sft"})
    rows = [(r["group"], r["method"]) for r in res["rows"]]
    methods = ["few-shot", *parity_runs.SEARCH_METHODS, "oracle"]
    assert rows[:6] == [("size6-authors", m) for m in methods]
    for space in ("frontier", "all"):
        assert [m for g, m in rows if g == f"size6-{space}"] == methods
    for m in ("few-shot", "oracle"):  # no candidate space: the same values in every group
        assert len({r["value"] for r in res["rows"] if r["method"] == m}) == 1
    compared = {(c["group"], c["a"], c["b"]) for c in res["comparisons"]}
    assert {(f"size6-{s}", "rte", "few-shot") for s in parity_runs.SPACES} <= compared
    assert {(f"decomposition-found-{s}", "rte") for s in parity_runs.SPACES} <= set(rows)
    assert all(0.0 <= r["value"] <= 1.0 and r["metric"] == "accuracy" for r in res["rows"])
    with_paper = {(r["group"], r["method"]): r["paper_value"] for r in res["rows"] if r["paper_value"] is not None}
    assert with_paper == pytest.approx(
        {("size6-authors", "few-shot"): 0.5286, ("size6-authors", "rte"): 0.6607, ("size6-authors", "oracle"): 1.0}
    )
    cfg = res["config"]
    assert cfg["split"] == "test" and cfg["test_seed"] == FRESH_TEST_SEED == 31_337
    assert [cfg["spaces"][s]["n_candidates"] for s in parity_runs.SPACES] == [448, 168, 1680]
    assert "authors' code" in cfg["spaces"]["authors"]["assumes"]
    assert "frontier" in cfg["spaces"]["frontier"]["assumes"] and "paper" in cfg["spaces"]["all"]["assumes"]
    on_disk = json.loads((tmp_path / "parity-paper-tiny" / "results.json").read_text())
    assert on_disk["rows"] == res["rows"]
    unit_file = next((tmp_path / "units").glob("parity-seed0-*.json"))
    unit = json.loads(unit_file.read_text())
    assert unit["config"]["split"] == "test" and unit["config"]["test_seed"] == FRESH_TEST_SEED
    # the fine-tuning checkpoints carry the unit's fingerprint: other settings or code never resume them
    key = unit_file.stem.rsplit("-", 1)[1]
    assert [p.name for p in (tmp_path / "units").glob("parity-sft-seed0-*")] == [f"parity-sft-seed0-{key}"]


@pytest.mark.slow
def test_tiny_dev_run_never_fits_a_size5_or_size6_mask(tmp_path, monkeypatch):
    asked = _tiny_base(monkeypatch)
    with audit.spy() as seen:
        res = run_experiment(
            "parity", RunOptions(profile="tiny", out=tmp_path, progress=False, split="dev", test_seed=7)
        )
    assert set(asked) == {"parity-dev"}
    audit.check(seen, lambda mask: len(mask) in (2, 3, 4), required={"sft"})
    assert {len(m) for r in seen for m in r.labels} == {2, 3, 4}
    with pytest.raises(audit.LeakError):  # the same records fail once size 4 counts as held out
        audit.check(seen, lambda mask: len(mask) in (2, 3))
    assert {r["group"] for r in res["rows"]} >= {"size5-authors", "size5-frontier", "size5-all"}
    assert all(r["paper_value"] is None for r in res["rows"])
    cfg = res["config"]
    assert (cfg["split"], cfg["test_seed"], cfg["target_size"]) == ("dev", 7, 5)
    assert [cfg["spaces"][s]["n_candidates"] for s in parity_runs.SPACES] == [560, 280, 1232]
    assert (tmp_path / "parity-paper-tiny-dev-test7" / "results.json").exists()
    unit = json.loads(next((tmp_path / "units").glob("parity-dev-seed0-*.json")).read_text())
    assert unit["config"]["split"] == "dev" and unit["config"]["test_seed"] == 7


def test_label_of_reads_the_first_bit_or_says_missing():
    from taskextrap.llm.parity import ParityAdapter, label_of

    assert [label_of(t) for t in (" 1", " 0\n1", "x1", "", "none")] == [1, 0, 1, -1, -1]
    assert ParityAdapter("authors").parse(" 1") == 1
