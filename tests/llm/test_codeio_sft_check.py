"""scripts/codeio_sft_check.py: one short run of the default model on the dev split and its two accuracies."""

import importlib.util
from pathlib import Path

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "codeio_sft_check.py"


@pytest.mark.parametrize(
    "corpus,full",
    [pytest.param("extender", True, marks=pytest.mark.slow), ("few-shot", False)],  # the full check: 8 s, slow set
)
def test_check_trains_what_it_is_asked_and_reports_what_was_predicted(corpus, full, monkeypatch, load_script):
    import numpy as np
    import torch

    mod = load_script("scripts/codeio_sft_check.py")
    seen = {"predict": []}
    real_train, real_predict = mod.train, mod.codeio_runs.predict

    def spy_train(lm, sampler, cfg, *a, **kw):
        seen["before"] = {k: v.detach().clone() for k, v in lm.model.state_dict().items()}
        out_lm, log = real_train(lm, sampler, cfg, *a, **kw)
        seen.update(cfg=cfg, log=log)
        return out_lm, log

    def spy_predict(method, lm, tasks, *a, **kw):
        real_predict(method, lm, tasks, *a, **kw)  # the real scoring path runs
        seen["predict"].append((method, lm, len(tasks)))
        # controlled answers: the first task right, every other wrong, so the check must report 1/n
        return [t.query[1] if i == 0 else t.query[1] + "#" for i, t in enumerate(tasks)]

    monkeypatch.setattr(mod, "train", spy_train)
    monkeypatch.setattr(mod.codeio_runs, "predict", spy_predict)
    out = mod.check(corpus, steps=2, lr=1e-4, full=full, warmup=0, train_every=300, dev_every=96)
    assert set(out) == {"sft_s", "final_loss", "train", "dev", "dev_hits"}
    # it trains what it was asked to: 2 steps at lr 1e-4, full fine-tuning or LoRA
    cfg, log = seen["cfg"], seen["log"]
    assert cfg.steps == 2 and cfg.lr == 1e-4 and cfg.warmup_steps == 0 and (cfg.lora is None) == full
    assert len(log["loss"]) == 2 and all(np.isfinite(v) and v > 0 for v in log["loss"])
    assert out["final_loss"] == pytest.approx(float(np.mean(log["loss"][-50:]))) and out["sft_s"] > 0
    # the model it scores is the trained one (LoRA merged): its weights moved from the base model's
    methods = {m for m, _, _ in seen["predict"]}
    assert methods == {"oracle" if corpus == "extender" else "few-shot"}
    for _, lm, _ in seen["predict"]:
        after = lm.model.state_dict()
        assert set(after) == set(seen["before"])
        assert any(not torch.equal(after[k], seen["before"][k]) for k in after)
    # it reports the exact match of what was predicted, set by set, in order
    accs = [out["train"], out["dev"]]
    assert out["dev_hits"] == [1] + [0] * (len(out["dev_hits"]) - 1)
    assert [n for _, _, n in seen["predict"]] and all(n >= 2 for _, _, n in seen["predict"])
    assert accs == pytest.approx([1.0 / n for _, _, n in seen["predict"]])


@pytest.mark.parametrize(
    "corpus,full",
    [pytest.param("extender", True, marks=pytest.mark.slow), ("few-shot", False)],  # the full check: 8 s, slow set
)
def test_check_trains_on_dev_training_pairs_and_never_sees_a_test_pair(corpus, full, monkeypatch, load_script):
    from taskextrap.llm import codeio as C
    from taskextrap.tasks import strings as S

    script, used = load_script("scripts/codeio_sft_check.py"), []
    real_tasks, real_apply = S.make_test_tasks, S.apply
    monkeypatch.setattr(S, "make_test_tasks", lambda pairs, *a, **k: used.extend(pairs) or real_tasks(pairs, *a, **k))
    for module in (C, S):  # prompts apply primitives in llm.codeio, examples are drawn in tasks.strings
        monkeypatch.setattr(module, "apply", lambda c, s: used.append(c) or real_apply(c, s))
    out = script.check(corpus, steps=2, lr=1e-4, full=full, warmup=0, train_every=300, dev_every=96)
    assert set(out) == {"sft_s", "final_loss", "train", "dev", "dev_hits"}
    assert out["final_loss"] > 0 and out["sft_s"] > 0
    assert 0.0 <= out["train"] <= 1.0 and 0.0 <= out["dev"] <= 1.0
    pairs = {tuple(c) for c in used if not isinstance(c, str)}
    dev_train, dev = S.dev_split(1)
    assert pairs and pairs <= set(dev_train) | set(dev)  # trained and evaluated inside the training pairs
    assert not pairs & set(S.split_pairs(1)[1])


def test_compare_is_paired_over_the_dev_tasks_and_refuses_runs_it_cannot_pair(load_script):
    from taskextrap.errors import TaskextrapError

    mod = load_script("scripts/codeio_sft_check.py")
    # a is right on b's 45 tasks and 5 more: 0.50 against 0.45. Unpaired, that difference is
    # far inside the noise (two proportions over 100 tasks); paired, only 5 tasks differ and all
    # favour a, so the interval excludes 0.
    runs = {
        "a": {"dev_hits": [1] * 50 + [0] * 50, "split_seed": 1},
        "b": {"dev_hits": [1] * 45 + [0] * 55, "split_seed": 1},
        "c": {"dev_hits": [0] * 45 + [1] * 45 + [0] * 10, "split_seed": 1},
        "old": {"dev": 0.3, "split_seed": 1},
        "other-split": {"dev_hits": [0] * 100, "split_seed": 2},
        "short": {"dev_hits": [0] * 99, "split_seed": 1},
    }
    cmp = mod.compare({"runs": runs}, "a", "b")
    assert cmp["diff"] == pytest.approx(0.05) and cmp["n"] == 100 and cmp["clear"] and cmp["lo"] > 0
    # the same means on other tasks: b and c disagree on 90 tasks, nothing is clear
    cmp = mod.compare({"runs": runs}, "b", "c")
    assert cmp["diff"] == pytest.approx(0.0) and not cmp["clear"] and cmp["lo"] < 0 < cmp["hi"]
    with pytest.raises(TaskextrapError, match="no per-task dev hits"):
        mod.compare({"runs": runs}, "a", "old")
    with pytest.raises(TaskextrapError, match="no recorded recipe 'zzz'"):
        mod.compare({"runs": runs}, "a", "zzz")
    for other in ("other-split", "short"):
        with pytest.raises(TaskextrapError, match="different dev tasks"):
            mod.compare({"runs": runs}, "a", other)


@pytest.mark.slow  # two SFT checks and the compare command, in a process: end to end, run by make test-slow
def test_compare_cli_records_the_comparison_and_errors_in_one_line(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "recipes.json"
    out.write_text(
        json.dumps(
            {"runs": {"a": {"dev_hits": [1, 1, 0], "split_seed": 1}, "b": {"dev_hits": [0, 1, 0], "split_seed": 1}}}
        )
    )

    def run(*args):
        return subprocess.run([sys.executable, str(_PATH), *args, "--out", str(out)], capture_output=True, text=True)

    done = run("--compare", "a", "b")
    assert done.returncode == 0 and "over 3 dev tasks" in done.stdout
    assert json.loads(out.read_text())["comparisons"]["a vs b"]["diff"] == pytest.approx(1 / 3)
    bad = run("--compare", "a", "zzz")
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error: no recorded recipe 'zzz'")
    assert len(bad.stderr.strip().splitlines()) == 1
    assert run().returncode == 2  # neither a corpus nor --compare


def test_recording_a_run_again_drops_the_comparisons_that_name_it(load_script):
    mod = load_script("scripts/codeio_sft_check.py")
    results = {
        "runs": {"a": {"dev": 0.1}, "b": {"dev": 0.2}, "c": {"dev": 0.3}},
        "comparisons": {"a vs b": {"a": "a", "b": "b"}, "b vs c": {"a": "b", "b": "c"}},
    }
    new = mod.record(results, "a", {"dev": 0.5})
    assert new["runs"]["a"] == {"dev": 0.5} and new["runs"]["c"] == {"dev": 0.3}
    assert list(new["comparisons"]) == ["b vs c"]
    assert list(results["comparisons"]) == ["a vs b", "b vs c"]  # the input is not changed


def test_recipe_name_spells_every_setting_that_changes_the_run(load_script):
    import argparse

    mod = load_script("scripts/codeio_sft_check.py")
    base = dict(
        corpus="extender",
        full=True,
        lr=5e-4,
        warmup=50,
        steps=1150,
        score_shots=True,
        anchored=False,
        split_seed=mod.codeio_runs.SPLIT_SEED,
    )
    assert mod.recipe_name(argparse.Namespace(**base)) == "extender full lr0.0005 warmup50 steps1150 score-shots"
    anchored = mod.recipe_name(argparse.Namespace(**{**base, "anchored": True, "full": False}))
    assert anchored == "extender lora lr0.0005 warmup50 steps1150 score-shots anchored"
    other_split = mod.recipe_name(argparse.Namespace(**{**base, "split_seed": mod.codeio_runs.SPLIT_SEED + 1}))
    assert other_split.endswith(f" split{mod.codeio_runs.SPLIT_SEED + 1}")
    # every setting gives a different key, so no run overwrites another's record
    names = {
        mod.recipe_name(argparse.Namespace(**{**base, k: v}))
        for k, v in [("lr", 2e-4), ("warmup", 5), ("steps", 10), ("score_shots", False), ("corpus", "few-shot")]
    }
    assert len(names) == 5 and mod.recipe_name(argparse.Namespace(**base)) not in names
