"""The shipped models are ordinary Hugging Face models: ``AutoTokenizer`` and
``AutoModelForCausalLM`` alone load them, in a process that never imports taskextrap, and score
a prompt exactly as taskextrap does."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

import numpy as np
import torch

from taskextrap.llm.model import load_model, save_model
from taskextrap.llm.pretrain import MODELS_DIR, SPECS
from taskextrap.llm.scorer import completion_nll
from taskextrap.llm.tokenizer import CharTokenizer

PROMPT, COMPLETION = "x = 1011\n«anchor» 1\n y = 0é1\t\n", "0 1\n"

# Runs in a fresh interpreter: transformers only. For each directory: the prompt's ids with BOS
# (the tokenizer's own post-processor), the completion's ids plus EOS, the logits of the whole
# sequence and the completion's summed negative log-likelihood.
PLAIN_HF = textwrap.dedent("""
    import json, sys
    import numpy as np, torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    out = {}
    for name, path in json.loads(sys.argv[1]).items():
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        prompt = tok(sys.argv[2])["input_ids"]
        completion = tok(sys.argv[3], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(ids).logits[0].float()
        logp = torch.log_softmax(logits[:-1], -1)[torch.arange(len(prompt) - 1, ids.shape[1] - 1), ids[0, len(prompt):]]
        np.save(f"{sys.argv[4]}/{name}.npy", logits.numpy())
        out[name] = {"prompt": prompt, "completion": completion, "nll": -float(logp.sum()),
                     "tokenizer": type(tok).__name__, "decoded": tok.decode(ids[0], skip_special_tokens=True)}
    out["taskextrap imported"] = any(m == "taskextrap" or m.startswith("taskextrap.") for m in sys.modules)
    print(json.dumps(out))
""")


def _plain_hf(dirs: dict, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # taskextrap's source is not on the path
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN_HF,
            json.dumps({k: str(v) for k, v in dirs.items()}),
            PROMPT,
            COMPLETION,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # fresh interpreters with transformers alone: end to end, run by make test-slow
def test_shipped_and_saved_models_load_and_score_with_transformers_alone(noisy_lm, tmp_path):
    save_model(noisy_lm, tmp_path / "saved")  # a model taskextrap trains and saves
    assert not (tmp_path / "saved" / "char_tokenizer.json").exists()
    dirs = {**{name: MODELS_DIR / name for name in SPECS}, "saved": tmp_path / "saved"}
    plain = _plain_hf(dirs, tmp_path)  # one interpreter for all: starting one costs seconds
    assert plain.pop("taskextrap imported") is False
    for name, path in dirs.items():
        lm = load_model(path)
        assert isinstance(lm.tokenizer, CharTokenizer)
        got = plain[name]
        assert got["tokenizer"] in ("PreTrainedTokenizerFast", "TokenizersBackend")  # transformers 4 / 5 names
        assert got["prompt"] == lm.prompt_ids(PROMPT) and got["completion"] == lm.completion_ids(COMPLETION)
        assert got["decoded"] == (PROMPT + COMPLETION).replace("é", "").replace("\t", "")
        with torch.no_grad():
            ours = lm.model(torch.tensor([got["prompt"] + got["completion"]])).logits[0].float().numpy()
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), ours, rtol=0, atol=1e-5)
        assert got["nll"] == pytest.approx(float(completion_nll(lm, [PROMPT], [COMPLETION])[0]), abs=1e-4)
