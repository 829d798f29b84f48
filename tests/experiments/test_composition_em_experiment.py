"""composition-em: every arm's row on the held-out pairs, pseudo-label rows per E-step, dev split."""

from taskextrap.experiments import composition_em as CE
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.report.schema import validate_results


def test_run_scores_every_arm_and_reports_pseudo_labels(tmp_path):
    res = run_experiment("composition-em", RunOptions(profile="tiny", out=tmp_path, progress=False))
    validate_results(res)
    mse = [r["method"] for r in res["rows"] if r["metric"] == "mse"]
    assert mse == list(CE.METHODS)
    labels = {r["method"] for r in res["rows"] if r["group"] == "pseudo-labels"}
    assert labels == {f"rte-em-warmup:e{i}" for i in (1, 2, 3)} | {f"rte-em-semi25:e{i}" for i in (1, 2)}
    assert all(0 <= r["value"] <= 1 and r["paper_value"] is None for r in res["rows"] if r["metric"] == "fraction")
    assert {(c["a"], c["b"]) for c in res["comparisons"]} >= {("rte", "rte-em-warmup"), ("rte", "rte-em-semi25")}
    assert res["config"]["label_shares"] == CE.ARMS


def test_dev_split_holds_out_a_training_pair(tmp_path):
    res = run_experiment("composition-em", RunOptions(profile="tiny", out=tmp_path, progress=False, split="dev"))
    validate_results(res)
    test_pairs = [tuple(p) for p in res["config"]["pairs"]["test"]]
    assert len(test_pairs) == 1 and test_pairs[0] not in {("sin", "poly"), ("tanh", "sin"), ("poly", "tanh")}
