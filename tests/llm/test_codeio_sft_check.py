"""scripts/codeio_sft_check.py: one short run of the default model on the dev split and its two accuracies."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers")

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "codeio_sft_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("codeio_sft_check", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("corpus,full", [("extender", True), ("few-shot", False)])
def test_check_trains_on_dev_training_pairs_and_never_sees_a_test_pair(corpus, full, monkeypatch):
    from taskextrap.llm import codeio as C

    script, used = _script(), []
    real_tasks, real_apply = C.make_test_tasks, C.apply
    monkeypatch.setattr(C, "make_test_tasks", lambda pairs, *a, **k: used.extend(pairs) or real_tasks(pairs, *a, **k))
    monkeypatch.setattr(C, "apply", lambda c, s: used.append(c) or real_apply(c, s))
    out = script.check(corpus, steps=2, lr=1e-4, full=full, warmup=0, train_every=300, dev_every=96)
    assert set(out) == {"sft_s", "final_loss", "train", "dev"}
    assert out["final_loss"] > 0 and out["sft_s"] > 0
    assert 0.0 <= out["train"] <= 1.0 and 0.0 <= out["dev"] <= 1.0
    pairs = {tuple(c) for c in used if not isinstance(c, str)}
    dev_train, dev = C.dev_split(1)
    assert pairs and pairs <= set(dev_train) | set(dev)  # trained and evaluated inside the training pairs
    assert not pairs & set(C.split_pairs(1)[1])
