"""The parity experiment: wiring of the search, the exact baseline, and a tiny end-to-end run."""

import importlib.util
import json

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.experiments import parity as E  # noqa: E402
from taskextrap.experiments.registry import RunOptions  # noqa: E402
from taskextrap.experiments.runner import run_experiment  # noqa: E402
from taskextrap.llm import parity as P  # noqa: E402
from taskextrap.report.schema import validate_results  # noqa: E402


def _rows(prompt):
    # (anchor, bit) of the query: the last "Anchor:" and "Bit:" lines of an extender prompt
    lines = prompt.splitlines()
    return int(lines[-3].split()[-1]), int(lines[-2].split()[-1])


def test_a_perfect_extender_makes_rte_the_exact_search(monkeypatch):
    """With a scorer that charges only inconsistent labels and an exact XOR, rte == exact-search."""
    def scores(lm, pair_lists, batch_size=32, progress=None):
        out = []
        for pairs in pair_lists:
            out.append(sum(5.0 * (a ^ b != int(c)) for p, c in pairs for a, b in [_rows(p)]))
        return np.array(out)

    monkeypatch.setattr("taskextrap.llm.search.total_nll", scores)
    monkeypatch.setattr(E, "predict_labels",
                        lambda lm, prompts, bs: np.array([a ^ b for a, b in map(_rows, prompts)]))
    tasks = P.make_test_tasks(E.TEST_SEED)[:6]
    res = E.search_space(None, tasks, "frontier", 64)
    for m in ("rte", "rte-tie-vote"):
        expect = [np.mean(P.exact_search(t, "frontier", tie_vote=m.endswith("vote"))[0] == t.query_y) for t in tasks]
        np.testing.assert_allclose(res[f"frontier/{m}"], expect)
    n_consistent = [len(P.consistent_candidates(t, "frontier")) for t in tasks]
    np.testing.assert_array_equal(res["frontier/n_tied"], n_consistent)
    first = [P.consistent_candidates(t, "frontier")[0] for t in tasks]
    np.testing.assert_array_equal(res["frontier/found"], [P.implied_mask(*c) == t.mask for c, t in zip(first, tasks)])


def test_tiny_run_writes_every_method(tmp_path, monkeypatch):
    from taskextrap.llm.model import build_char_model

    monkeypatch.setattr("taskextrap.llm.pretrain.load_base",
                        lambda name, model=None, device="cpu": build_char_model(d_model=32, n_layers=2, n_heads=2,
                                                                                max_len=512, seed=0))
    res = run_experiment("parity", RunOptions(profile="tiny", out=tmp_path, progress=False))
    validate_results(res)
    got = {(r["group"], r["method"]) for r in res["rows"]}
    assert {("size6", "few-shot"), ("size6", "oracle"), ("size6", "rte"), ("size6", "exact-search"),
            ("size6-all-candidates", "rte-tie-vote"), ("decomposition-found-frontier", "rte")} <= got
    assert all(0.0 <= r["value"] <= 1.0 and r["metric"] == "accuracy" for r in res["rows"])
    row = next(r for r in res["rows"] if (r["group"], r["method"]) == ("size6", "rte"))
    assert row["paper_value"] == pytest.approx(0.6607) and row["n"] == 1
    on_disk = json.loads((tmp_path / "parity-paper-tiny" / "results.json").read_text())
    assert on_disk["rows"] == res["rows"]
