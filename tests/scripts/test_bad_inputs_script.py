"""scripts/bad_inputs.py: the catalogue's shape, its classifier, and a few real cases run through it."""

import pytest


@pytest.fixture(scope="module")
def bad(load_script):
    return load_script("scripts/bad_inputs.py")


TRACEBACK = """Traceback (most recent call last):
  File "x.py", line 1, in <module>
    f()
  File "x.py", line 2, in f
    raise ValueError("boom")
ValueError: boom
"""


def test_catalogue_covers_every_surface_with_unique_ids(bad):
    ids = [c.id for c in bad.CASES]
    assert len(ids) == len(set(ids))
    by_surface = {s: sum(c.surface == s for c in bad.CASES) for s in bad.SURFACES}
    assert by_surface["cli"] >= 69 and by_surface["api"] >= 53 and by_surface["damaged"] >= 14
    for c in bad.CASES:
        assert c.how() and c.description
        if c.surface == "cli" and c.run["setup"]:
            assert c.run["setup"] in bad.SETUPS


def test_cli_classifier(bad):
    assert bad.classify_cli(2, "", "error: no such experiment\n", False).outcome == "error"
    tb = bad.classify_cli(1, "", TRACEBACK, False)
    assert tb.outcome == "traceback" and tb.message == "ValueError: boom"
    assert bad.classify_cli(2, "", "error: x\n" + TRACEBACK, False).outcome == "traceback"  # a traceback wins
    assert bad.classify_cli(None, "", "", True).outcome == "hang"
    assert bad.classify_cli(0, "written: x\n", "", False).outcome == "accepted"
    assert bad.classify_cli(2, "", "error: a\nerror: b\n", False).outcome == "unclean"
    assert bad.classify_cli(130, "", "aborted\n", False).outcome == "unclean"
    assert bad.classify_cli(-9, "", "", False).outcome == "unclean"


def test_api_and_damaged_classifiers(bad):
    raised = {"status": "raised", "type": "TaskextrapError", "taskextrap": True, "message": "anchors must be >= 1"}
    assert bad.classify_api(raised, 0, "", False).outcome == "error"
    assert bad.classify_api({**raised, "type": "TypeError", "taskextrap": False}, 0, "", False).outcome == "traceback"
    assert bad.classify_api(None, 1, TRACEBACK, False).outcome == "traceback"  # the worker itself died
    assert bad.classify_api(None, None, "", True).outcome == "hang"
    nan = bad.classify_api({"status": "returned", "summary": "array (4, 8)", "nonfinite": True}, 0, "", False)
    assert nan.outcome == "accepted" and "NaN" in nan.message
    warn = "warning: unit u-1.json is damaged (checksum mismatch); recomputing it\n"
    assert bad.classify_damaged(0, warn, False, "u-1.json", True).outcome == "recovered"
    assert bad.classify_damaged(0, warn, False, "u-1.json", False).outcome == "not recovered"  # other numbers
    assert bad.classify_damaged(0, "", False, "u-1.json", True).outcome == "not recovered"  # silent
    assert bad.classify_damaged(0, warn, False, "u-2.json", True).outcome == "not recovered"  # wrong file named
    assert bad.classify_damaged(1, TRACEBACK, False, "u-1.json", None).outcome == "not recovered"
    assert bad.classify_damaged(None, "", True, "u-1.json", None).outcome == "hang"
    import numpy as np

    assert bad.nonfinite([np.ones(2), {"a": np.array([1.0, np.inf])}]) and not bad.nonfinite(np.ones(3))


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_real_cases_run_through_the_harness(bad):
    ids = ["cli-unknown-experiment", "cli-seeds-text", "cli-report-missing-dir", "api-rte-embedding-unknown"]
    records, _ = bad.run_all([c for c in bad.CASES if c.id in ids], jobs=2, timeout=60, progress=False)
    assert [r["id"] for r in records] == ids
    for r in records:
        assert r["outcome"] == "error", r
        assert r["message"] and r["wall_s"] > 0
    assert records[0]["message"].startswith("error: unknown experiment 'nosuch'")
    assert "unknown embedding 'nope'" in records[3]["message"]
    assert bad.counts(records) == {"cli": {"error": 3}, "api": {"error": 1}}
