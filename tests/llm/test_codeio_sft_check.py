"""scripts/codeio_sft_check.py: one short run of the default model and its two accuracies."""

import importlib.util
from pathlib import Path

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "codeio_sft_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("codeio_sft_check", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("corpus,full", [("extender", True), ("few-shot", False)])
def test_check_trains_and_scores_train_and_held_out_tasks(corpus, full):
    out = _script().check(corpus, steps=2, lr=1e-4, full=full, warmup=0, train_every=300, held_every=96)
    assert set(out) == {"sft_s", "final_loss", "train", "held"}
    assert out["final_loss"] > 0 and out["sft_s"] > 0
    assert 0.0 <= out["train"] <= 1.0 and 0.0 <= out["held"] <= 1.0
