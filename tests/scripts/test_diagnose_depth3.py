"""scripts/diagnose_depth3.py: the depth-3 retrieval diagnosis reads the dev split only, counts
recall by index and by function, and its table renders."""

import json

import numpy as np


def test_slot_recall_counts_index_and_functional_matches(load_script):
    mod = load_script("scripts/diagnose_depth3.py")
    curves = np.array([[0.0, 0.0], [0.1, 0.1], [5.0, 5.0], [9.0, 9.0]])  # 0 and 1 are functionally equal
    family = np.array([0, 0, 1, 1])
    order = np.array(
        [
            [1, 2, 0, 3],  # truth 0: functional match at rank 1, index at rank 3
            [3, 2, 1, 0],
        ]
    )  # truth 2: index at rank 2, family right at rank 1
    r = mod.slot_recall(order, np.array([0, 2]), curves, family)
    assert r["index@1"].tolist() == [False, False] and r["index@10"].tolist() == [True, True]
    assert r["functional@1"].tolist() == [True, False]
    assert r["family@1"].tolist() == [True, True]
    assert r["median functional rank"].tolist() == [0, 1]
    assert r["family-restricted index@10"].tolist() == [True, True]


def test_tiny_diagnosis_reads_the_dev_split_and_renders(tmp_path, monkeypatch, load_script):
    mod = load_script("scripts/diagnose_depth3.py")
    splits = []
    real = mod.D3.make_targets
    monkeypatch.setattr(
        mod.D3, "make_targets", lambda p, pr, n, d, split, seed: splits.append(split) or real(p, pr, n, d, split, seed)
    )
    out = tmp_path / "d.json"
    assert (
        mod.main(
            ["--profile", "tiny", "--targets", "6", "--draws", "1", "--steps", "5", "--threads", "1", "--out", str(out)]
        )
        == 0
    )
    assert splits and all(type(s).__name__ == "DevRecipeSplit" for s in splits)  # never the test recipes
    data = json.loads(out.read_text())
    assert set(data["alternatives"]) == {
        "paper",
        "paper + truth inserted",
        "multistart",
        "curve-mse",
        "gamma-nce",
        "curve-nce",
    }
    inserted = data["alternatives"]["paper + truth inserted"]["search"]
    assert inserted["chain index in candidates"]["mean"] == 1.0
    assert inserted["chain functional top-1"]["mean"] == 1.0  # noise-free context: the truth fits it best
    text = load_script("benchmarks/tables.py").render_depth3_diagnosis(data)
    assert "| `curve-nce` | dev recipes | inner |" in text and "`oracle (the true chain through Psi_chain)`" in text
