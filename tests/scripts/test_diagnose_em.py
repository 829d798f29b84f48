"""scripts/diagnose_em.py: one E-step on the dev split's hidden training tasks under several
models; restricted labels stay among the training pairs; the true pair's rank is counted right."""

import json

import numpy as np


def test_composition_e_steps_read_the_dev_split_and_restrict_labels(tmp_path, load_script):
    mod = load_script("scripts/diagnose_em.py")
    out = tmp_path / "c.json"
    assert mod.main(["composition", "--profile", "tiny", "--tasks", "40", "--threads", "1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    from taskextrap.tasks.dev import dev_pair_split
    from taskextrap.tasks.primitives import PAPER_SPLIT

    assert data["split"] == repr(dev_pair_split(PAPER_SPLIT)) != repr(PAPER_SPLIT)  # never the test pairs
    v = data["variants"]
    assert len(v) == 4
    for name, q in v.items():
        assert 0 <= q["exact"] <= q["behaves"] <= 1
        if name.endswith("train pairs"):
            assert q["held_out_pair"] == 0.0  # a pseudo-label is never a held-out family pair
    text = load_script("benchmarks/tables.py").render_em_diagnosis(data)
    assert "| held-out family pair |" in text and "labels: any pairs" in text


def test_codeio_counts_the_true_pairs_rank_among_the_candidates(tmp_path, monkeypatch, load_script):
    mod = load_script("scripts/diagnose_em.py")
    from taskextrap.estimators import sequence_em
    from taskextrap.sequence_runs import codeio as codeio_runs
    from taskextrap.experiments import codeio_em as X
    from taskextrap.llm import pretrain

    monkeypatch.setattr(pretrain, "load_base", lambda *a, **k: "base")
    monkeypatch.setattr(X, "_tune", lambda *a, **k: "warm")
    monkeypatch.setattr(codeio_runs, "fine_tune", lambda *a, **k: "sup")
    place = {"base": 5, "warm": 1, "sup": 0}  # how many candidates score below the truth, per model

    def fake_e_step(lm, tasks, adapter, cands, *a, **k):
        scores = np.tile(np.arange(len(cands), dtype=float), (len(tasks), 1))
        for r, t in enumerate(tasks):
            j = cands.index(t.pair)
            scores[r, j] = place[lm] - 0.5
        return [cands[int(j)] for j in scores.argmin(1)], scores

    monkeypatch.setattr(sequence_em, "e_step", fake_e_step)
    out = mod.codeio("tiny", 3, 1, tmp_path)
    ranks = [v["median rank of the truth"] for v in out["variants"].values()]
    assert ranks == [5, 1, 0]
    assert [v["exact"] for v in out["variants"].values()] == [0.0, 0.0, 1.0]
    assert out["candidates"] < len(__import__("taskextrap.llm.codeio_em", fromlist=["x"]).em_candidates())
