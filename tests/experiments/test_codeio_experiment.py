"""The codeio experiment: search wiring, the vote rule, the base-model row and a tiny end-to-end run."""

import dataclasses
import importlib.util
import json
import re
import threading
from collections import Counter

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import codeio as E
from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap import sharding as SH
from taskextrap.experiments.registry import FRESH_TEST_SEED, RunOptions
from taskextrap.experiments.runner import run_dir_name, run_experiment
from taskextrap.sharding import Shard
from taskextrap.llm import codeio as C
from taskextrap.tasks import strings as S
from taskextrap.llm import pretrain
from taskextrap.search import likelihood as LS
from taskextrap.report.schema import validate_results

BLOCK = re.compile(r"--- Func_(\d\d) ---")
LAST_INPUT = re.compile(r"In: (\S+) Out:$")  # the query line is plain in both formats


def _candidate_of(prompt):
    """The candidate whose reference blocks a prompt shows (masked names back to primitives)."""
    names = tuple(S.NAMES[int(k)] for k in BLOCK.findall(prompt.split(C.TARGET_HEADER)[0]))
    return names[0] if len(names) == 1 else names


def _tiny_model(directory):
    from taskextrap.llm.model import build_char_model, save_model

    # max_len covers the longest codeio prompt; one layer keeps the 992-candidate search short
    return save_model(build_char_model(d_model=16, n_layers=1, n_heads=2, max_len=1536, seed=0), directory)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny run with a saved tiny model passed as --model; spies on the scorer and the base row."""
    root = tmp_path_factory.mktemp("codeio")
    model_dir = _tiny_model(root / "model")
    seen = {"scored": [], "base_lm": []}
    real_nll, real_acc = LS.total_nll, C.primitive_accuracy

    def spy_nll(lm, pair_lists, batch_size=32, progress=None, **kw):
        seen["scored"] += [_candidate_of(pairs[0][0]) for pairs in pair_lists]
        return real_nll(lm, pair_lists, batch_size, progress, **kw)

    def spy_acc(lm, *args, **kwargs):
        seen["base_lm"].append(lm)
        return real_acc(lm, *args, **kwargs)

    options = RunOptions(profile="tiny", out=root / "runs", progress=False, extra={"model": str(model_dir)})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LS, "total_nll", spy_nll)
        mp.setattr(C, "primitive_accuracy", spy_acc)
        res = run_experiment("codeio", options)
    return res, seen, options, model_dir


def test_tiny_run_writes_every_row(tiny_run):
    res, _, options, _ = tiny_run
    validate_results(res)
    got = {(r["group"], r["method"]) for r in res["rows"]}
    want = {(g, m) for g in E.GROUPS for m in codeio_runs.PAIR_METHODS}
    want |= {("decomposition-found", "rte"), ("decomposition-found-novel", "rte"), ("primitives", "base-model")}
    want |= {("answer-in-prompt", m) for m in codeio_runs.PROMPT_METHODS}
    assert got == want  # the one tiny task is novel, so both groups appear
    assert {("held-out-pairs", "exact-search"), ("novel-pairs", "exact-search-tie-vote")} <= got
    assert all(0.0 <= r["value"] <= 1.0 and r["metric"] == "accuracy" for r in res["rows"])
    row = {(r["group"], r["method"]): r for r in res["rows"]}
    assert row[("held-out-pairs", "rte")]["paper_value"] == pytest.approx(0.453)
    assert row[("held-out-pairs", "rte")]["n"] == 1 and row[("primitives", "base-model")]["n"] == 31
    assert all(r["value"] == 0.0 for r in res["rows"] if r["group"] == "answer-in-prompt")
    cfg = res["config"]
    assert cfg["n_candidates"] == 992 and cfg["n_test_pairs"] == 192 and cfg["novel"] == [True]
    assert len(cfg["tasks"]) == 1 and "novel" in cfg["subsample"]
    assert (cfg["split"], cfg["split_seed"], cfg["test_seed"]) == ("test", 1, FRESH_TEST_SEED)
    assert cfg["prompt_format"] == C.PROMPT_FORMAT and cfg["block_rows"] == 6
    assert {"sft_s", "search_s", "base_model_s", "cot-majority_eval_s", "oracle_eval_s"} <= set(res["timing"])
    on_disk = json.loads((run_dir_name("codeio", options) / "results.json").read_text())
    assert on_disk["rows"] == res["rows"]
    (unit,) = (options.out / "units").glob("codeio-seed0-*.json")
    saved = json.loads(unit.read_text())
    extras = saved["extras"]
    assert extras["tasks"] == cfg["tasks"] and len(extras["chosen"]) == 1 and len(extras["voters"]) == 1
    assert set(extras["answers"]) == set(codeio_runs.PAIR_METHODS)
    # the unit's fingerprint covers the prompt format, the split and both seeds
    assert {"prompt_format", "split", "split_seed", "test_seed"} <= set(saved["config"])


def test_tiny_run_keeps_every_final_prompt(tiny_run):
    _res, _, options, _ = tiny_run
    lines = (run_dir_name("codeio", options) / "prompts.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["method"] for r in records] == list(codeio_runs.PROMPT_METHODS)  # one task, one seed
    (task,) = codeio_runs.held_out_tasks(1)[0]
    profile = codeio_runs.for_model(E.PROFILES["tiny"], pretrain.BaseModel("/a/model"))
    for r in records:
        assert {"task", "method", "seed", "prompt", "answer", "predicted", "answer_in_prompt"} <= set(r)
        assert r["task"] == "+".join(task.pair) and r["seed"] == 0 and r["answer"] == task.query[1]
        assert r["answer_in_prompt"] is False and r["prompt"].endswith(f"In: {task.query[0]} Out:")
    by = {r["method"]: r for r in records}
    assert by["oracle"]["prompt"] == codeio_runs.query_prompt("oracle", task, profile)
    assert by["rte"]["prompt"] == codeio_runs.query_prompt(
        "rte", task, profile, codeio_runs.candidate_of(by["rte"]["candidate"])
    )
    assert by["rte-tie-vote"]["prompts"][0] == by["rte"]["prompt"]
    assert by["few-shot"]["prompt"] == C.fewshot_prompt(task.support, task.query[0])


def test_search_scores_every_candidate_never_the_held_out_list(tiny_run):
    _, seen, _, _ = tiny_run
    scored = seen["scored"]  # one entry per leave-one-out pair (three per candidate at most)
    assert set(scored) == set(S.candidates()) and max(Counter(scored).values()) <= 3
    train, test = S.split_pairs(codeio_runs.SPLIT_SEED)
    assert set(train) <= set(scored) and set(test) <= set(scored)


def test_base_model_row_uses_the_base_model(tiny_run):
    from taskextrap.llm.model import load_model

    _, seen, _, model_dir = tiny_run
    (lm,) = seen["base_lm"]
    assert not hasattr(lm.model, "peft_config")  # every fine-tuned model is a peft wrapper
    fresh = load_model(model_dir).model.state_dict()
    assert all(v.equal(fresh[k]) for k, v in lm.model.state_dict().items())


def test_rerun_resumes_from_the_unit_cache(tiny_run, monkeypatch):
    res, _, options, _ = tiny_run
    written = run_dir_name("codeio", options) / "prompts.jsonl"
    before = written.read_text()
    written.unlink()
    monkeypatch.setattr(codeio_runs, "run_seed", lambda *a, **k: pytest.fail("the finished unit was recomputed"))
    assert run_experiment("codeio", options)["rows"] == res["rows"]
    assert written.read_text() == before  # a resumed run rebuilds prompts.jsonl from the unit's extras


def _consistency_scores(lm, pair_lists, batch_size=32, progress=None, **kw):
    """A perfect scorer: 5 nats per leave-one-out example the candidate gets wrong."""
    out = []
    for pairs in pair_lists:
        cand = _candidate_of(pairs[0][0])
        out.append(sum(5.0 * (S.apply(cand, LAST_INPUT.search(p).group(1)) != C.parse_cot(c)) for p, c in pairs))
    return np.array(out)


def _perfect_answers(lm, prompts, max_new_tokens, batch_size):
    """A perfect extender: the candidate of the prompt applied to its query input, written
    " a(q) => b(a(q))" when the prompt's shot lines are anchored."""
    out = []
    for p in prompts:
        cand, q = _candidate_of(p), LAST_INPUT.search(p).group(1)
        anchored = "=>" in p.split(C.TARGET_HEADER)[1]
        out.append(C.target_completion(cand, q, S.apply(cand, q), anchored).strip())
    return out


@pytest.mark.parametrize("anchored", [False, True])
def test_a_perfect_extender_makes_rte_the_consistency_search(monkeypatch, anchored):
    prompts = []

    def spy(lm, pair_lists, *a, **kw):
        prompts.extend(p for pairs in pair_lists for p, _ in pairs)
        return _consistency_scores(lm, pair_lists)

    monkeypatch.setattr(LS, "total_nll", spy)
    monkeypatch.setattr(
        "taskextrap.llm.generate.greedy_once", lambda lm, ps, *a: prompts.extend(ps) or _perfect_answers(lm, ps, *a)
    )
    tasks, _, _ = codeio_runs.held_out_tasks(6)
    profile = dataclasses.replace(E.PROFILES["quick"], anchored=anchored)
    res = codeio_runs.search(None, tasks, profile)
    # scoring and generation prompts of a pair are anchored exactly when the profile says so;
    # the query line is plain either way
    assert all(
        ("=>" in p.split(C.TARGET_HEADER)[1]) == (anchored and not isinstance(_candidate_of(p), str))
        and p.endswith(" Out:")
        for p in prompts
    )
    for i, t in enumerate(tasks):
        fits = [c for c in S.candidates() if all(S.apply(c, s) == y for s, y in t.support)]
        assert t.pair in fits and res["n_tied"][i] == len(fits)
        q, truth = t.query
        assert res["rte"][i] == float(S.apply(fits[0], q) == truth)
        assert res["found"][i] == float(S.behaviour(fits[0]) == S.behaviour(t.pair))
        voted = LS.vote([S.apply(c, q) for c in fits[: profile.max_tied]])
        assert res["rte-tie-vote"][i] == float(voted == truth)


def test_search_scores_resume_from_finished_chunks(tmp_path, monkeypatch):
    calls = []

    def scores(lm, pair_lists, batch_size=32, progress=None, **kw):
        calls.append(len(pair_lists))
        return np.arange(len(pair_lists), dtype=float)

    monkeypatch.setattr(LS, "total_nll", scores)
    tasks, _, _ = codeio_runs.held_out_tasks(codeio_runs.TASKS_PER_CHUNK + 1)
    cands = S.candidates()[:7]
    first = codeio_runs.candidate_scores(None, tasks, cands, E.PROFILES["tiny"], tmp_path, bounded=False)
    assert first.shape == (len(tasks), 7) and calls == [codeio_runs.TASKS_PER_CHUNK * 7 * 3, 7 * 3]  # one list per pair
    again = codeio_runs.candidate_scores(None, tasks, cands, E.PROFILES["tiny"], tmp_path, bounded=False)
    assert len(calls) == 2 and np.array_equal(first, again)
    bounded = codeio_runs.candidate_scores(None, tasks, cands, E.PROFILES["tiny"], tmp_path)
    assert len(calls) == 2 and np.array_equal(bounded, first)  # the full scores answer a bounded search


def test_cot_majority_samples_the_profiles_chains_and_votes(monkeypatch):
    calls = []

    def fake_generate(lm, prompts, **kw):
        calls.append(kw)
        return [["ab => x", "ba => y", "cd => y", "junk"] for _ in prompts]

    monkeypatch.setattr("taskextrap.llm.generate.generate", fake_generate)
    tasks, _, _ = codeio_runs.held_out_tasks(2)
    assert codeio_runs.predict("cot-majority", None, tasks, E.PROFILES["quick"], seed=3) == ["y", "y"]
    assert calls[0]["n_samples"] == 16 and calls[0]["temperature"] == 0.7 and calls[0]["seed"] == 3
    assert calls[0]["max_new_tokens"] == E.PROFILES["quick"].cot_tokens


def test_subsample_is_deterministic_and_holds_novel_pairs():
    train, test = S.split_pairs(codeio_runs.SPLIT_SEED)
    novel = set(S.novel_test_pairs(train, test))
    tasks = S.make_test_tasks(test, FRESH_TEST_SEED)
    for n in (1, 3, 24):
        picked = codeio_runs.subsample(tasks, novel, n)
        assert len(picked) == n and picked == codeio_runs.subsample(tasks, novel, n)
        assert sum(t.pair in novel for t in picked) == -(-n // 2)
        assert [t for t in tasks if t in picked] == picked  # split order kept
    assert codeio_runs.subsample(tasks, novel, None) == tasks and codeio_runs.subsample(tasks, novel, 500) == tasks


def test_missing_default_model_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pretrain, "MODELS_DIR", tmp_path / "no-models")
    with pytest.raises(SystemExit) as e:
        main(["reproduce", "codeio", "--profile", "tiny", "--out", str(tmp_path), "--quiet", "--no-plots"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "train_default_models.py codeio" in err


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_codeio_spec_and_budgets_cover_the_longest_sequences():
    spec = pretrain.get_spec("codeio")
    assert {s.corpus for s in spec.stages} == {"taskextrap.llm.codeio:pretraining_texts"}
    assert len({s.train.seed for s in spec.stages}) == len(spec.stages)  # each stage sees fresh texts
    assert spec.check_fn() is C.pretraining_check and (spec.d_model, spec.n_layers, spec.n_heads) == (128, 4, 4)
    profile = E.PROFILES["paper"]
    inputs = ["abcdefghijklmn", "aaaaaaaaaaaaaa", "zyxwvutsrqponm", "abcabcabcabcab"]  # the longest inputs
    longest_out = max(len(S.apply(c, s)) for c in S.candidates() for s in inputs)
    longest_mid = max(len(S.apply(n, s)) for n in S.NAMES for s in inputs)
    assert longest_out + 2 <= profile.answer_tokens  # leading space and EOS
    assert len(C.cot_completion("x" * longest_mid, "y" * longest_out)) + 1 <= profile.cot_tokens
    fillers = ["abcdefghijklmz", "bbbbbbbbbbbbbb", "abcabcabcabcaa", "zzzzzzzzzzzzzz"]
    support = [(s, None) for s in inputs[:3]]
    # the scorer refuses a sequence longer than the model: BOS + leave-one-out prompt + completion + EOS
    longest_loo = max(
        2 + len(p) + len(c)
        for cand in S.candidates()
        for anchored in (False, True)
        for p, c in C.loo_pairs(cand, [(s, S.apply(cand, s)) for s, _ in support], fillers, anchored)
    )
    assert longest_loo <= spec.max_len
    # generation: BOS + prompt + the completion it needs + EOS, on every real task and candidate
    tasks = (
        codeio_runs.held_out_tasks(None)[0] + codeio_runs.held_out_tasks(None, codeio_runs.Split("test", 0, 10_000))[0]
    )
    longest_gen = max(
        2
        + len(codeio_runs.query_prompt("rte", t, profile, c))
        + len(C.target_completion(c, t.query[0], S.apply(c, t.query[0]), anchored=True))
        for t in tasks[::3]
        for c in S.candidates()
    )
    assert longest_gen <= spec.max_len


def test_sharded_search_equals_the_unsharded_one(tmp_path, monkeypatch):
    def scores(lm, pair_lists, batch_size=32, progress=None, **kw):
        return np.array([float(len(p[0][0]) + len(p[0][1])) for p in pair_lists])  # any deterministic score

    monkeypatch.setattr(LS, "total_nll", scores)
    tasks, _, _ = codeio_runs.held_out_tasks(2 * codeio_runs.TASKS_PER_CHUNK + 1)  # three chunks
    cands, profile = S.candidates()[:5], E.PROFILES["tiny"]
    whole = codeio_runs.candidate_scores(None, tasks, cands, profile, tmp_path / "one")
    worker = codeio_runs.candidate_scores(None, tasks, cands, profile, tmp_path / "two", shard=Shard(1, 2))
    assert worker is None and sorted(p.name for p in (tmp_path / "two").glob("*.npy")) == ["scores-0004-within0.5.npy"]
    lead = codeio_runs.candidate_scores(None, tasks, cands, profile, tmp_path / "two", shard=Shard(0, 2))
    assert np.array_equal(whole, lead)
    full = codeio_runs.candidate_scores(None, tasks, cands, profile, tmp_path / "one", bounded=False)
    kept = np.isfinite(whole)  # the bounded search: the full scores wherever it scored whole
    assert np.array_equal(whole[kept], full[kept]) and (whole.argmin(1) == full.argmin(1)).all()
    with pytest.raises(TaskextrapError, match="shares"):
        codeio_runs.candidate_scores(None, tasks, cands, profile, None, shard=Shard(0, 2))


def test_lead_gives_up_on_a_missing_shard(tmp_path, monkeypatch):
    monkeypatch.setattr(LS, "total_nll", lambda lm, lists, *a, **k: np.zeros(len(lists)))
    monkeypatch.setattr(SH, "WAIT_LIMIT_S", 0.05)
    monkeypatch.setattr(SH, "POLL_S", 0.01)
    tasks, _, _ = codeio_runs.held_out_tasks(codeio_runs.TASKS_PER_CHUNK + 1)
    with pytest.raises(TaskextrapError, match=r"scores-0004-within0.5.npy \(shard 1/2\)"):
        codeio_runs.candidate_scores(None, tasks, S.candidates()[:3], E.PROFILES["tiny"], tmp_path, shard=Shard(0, 2))


@pytest.mark.slow
def test_sharded_tiny_run_equals_the_unsharded_one(tmp_path, monkeypatch):
    """A lead and a worker in two threads, sharing --out, write the unsharded run's rows."""
    model_dir = _tiny_model(tmp_path / "model")
    monkeypatch.setattr(codeio_runs, "TASKS_PER_CHUNK", 1)
    monkeypatch.setitem(E.PROFILES, "tiny", dataclasses.replace(E.PROFILES["tiny"], n_tasks=2))
    monkeypatch.setattr(SH, "POLL_S", 0.05)

    def options(out, shard=Shard()):
        return RunOptions(profile="tiny", out=out, progress=False, extra={"model": str(model_dir)}, shard=shard)

    alone = run_experiment("codeio", options(tmp_path / "alone"))
    failed = []

    def worker():
        try:
            assert run_experiment("codeio", options(tmp_path / "shared", Shard(1, 2))) is None
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failed.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    lead = run_experiment("codeio", options(tmp_path / "shared", Shard(0, 2)))
    thread.join()
    assert not failed
    assert lead["rows"] == alone["rows"]
    search = next((tmp_path / "shared" / "units").glob("codeio-seed0-*/search"))
    assert sorted(p.name for p in search.glob("*.npy")) == ["scores-0000-within0.5.npy", "scores-0001-within0.5.npy"]


def test_default_model_trains_every_parameter_a_user_model_gets_the_papers_lora():
    from taskextrap.llm.sft import CODEIO_LORA

    paper = E.PROFILES["paper"]
    user = codeio_runs.sft_config(paper, 0, pretrain.BaseModel("/some/7b"))
    assert (user.lora, user.lr, user.warmup_steps) == (CODEIO_LORA, paper.sft_lr, paper.warmup)
    default = codeio_runs.sft_config(paper, 0, pretrain.BaseModel())
    assert (default.lora, default.lr, default.warmup_steps) == (None, paper.full_lr, paper.full_warmup)
    assert default.steps == user.steps and default.batch_size == user.batch_size
    assert codeio_runs.sft_config(E.PROFILES["tiny"], 0, pretrain.BaseModel()).lora == CODEIO_LORA  # no full_lr


def test_full_fine_tuning_returns_a_plain_model_with_every_weight_trained(tmp_path, monkeypatch):
    import torch

    start = pretrain.load_base("codeio", pretrain.BaseModel(str(_tiny_model(tmp_path / "model"))))
    before = {k: v.clone() for k, v in start.model.state_dict().items()}
    monkeypatch.setattr(pretrain, "load_base", lambda name, model, device="cpu": start)
    profile = dataclasses.replace(E.PROFILES["tiny"], full_lr=1e-2, full_warmup=0)
    lm = codeio_runs.fine_tune(
        pretrain.BaseModel(), codeio_runs.samplers(S.split_pairs(0)[0])["extender"], profile, 0, tmp_path / "ft"
    )
    assert not hasattr(lm.model, "merge_and_unload")  # no peft wrapper
    after = lm.model.state_dict()
    assert set(after) == set(before)
    assert all(not torch.equal(after[k], before[k]) for k in before if k.endswith("q_proj.weight"))
    assert not torch.equal(after["model.embed_tokens.weight"], before["model.embed_tokens.weight"])


def test_a_user_model_gets_the_papers_recipe():
    paper = dataclasses.replace(E.PROFILES["paper"], score_shots=True, anchored=True)
    assert codeio_runs.for_model(paper, pretrain.BaseModel()) is paper
    user = codeio_runs.for_model(paper, pretrain.BaseModel("/some/7b"))
    assert (user.full_lr, user.score_shots, user.anchored) == (None, False, False)
    assert dataclasses.replace(user, full_lr=paper.full_lr, score_shots=True, anchored=True) == paper


def test_oracle_prompts_and_budgets_follow_the_profile(monkeypatch):
    seen, budgets = [], []

    def fake_greedy(lm, ps, max_new_tokens, batch_size):
        budgets.append(max_new_tokens)
        return seen.extend(ps) or [""] * len(ps)

    monkeypatch.setattr("taskextrap.llm.generate.greedy_once", fake_greedy)
    tasks, _, _ = codeio_runs.held_out_tasks(4)
    profile = dataclasses.replace(E.PROFILES["tiny"], answer_tokens=11, cot_tokens=22)
    for anchored, budget in ((False, 11), (True, 22)):
        seen.clear()
        codeio_runs.predict("oracle", None, tasks, dataclasses.replace(profile, anchored=anchored), 0)
        assert seen == [C.reference_prompt(t.pair, t.support, t.query[0], t.fillers, anchored) for t in tasks]
        assert budgets[-1] == budget  # anchored, the extender writes " a(q) => b(a(q))"
    budgets.clear()
    codeio_runs.predict("few-shot", None, tasks, profile, 0)
    assert budgets == [11]


def test_saved_prompts_are_the_prompts_the_search_answers_from():
    tasks, _, _ = codeio_runs.held_out_tasks(3)
    for anchored in (False, True):
        profile = dataclasses.replace(E.PROFILES["tiny"], anchored=anchored)
        adapter = C.CodeIOAdapter.of(profile)
        assert (adapter.anchored, adapter.answer_tokens, adapter.cot_tokens) == (
            anchored,
            profile.answer_tokens,
            profile.cot_tokens,
        )
        for t in tasks:
            for cand in (t.pair, S.candidates()[5]):
                assert codeio_runs.query_prompt("rte", t, profile, cand) == adapter.query_prompts(t, cand)[0]


def test_shot_answers_are_scored_for_the_default_model_only():
    from taskextrap.llm.sft import ScoredText

    profile = dataclasses.replace(E.PROFILES["tiny"], score_shots=True)
    g = np.random.default_rng(0)
    train = S.split_pairs(0)[0]
    for corpus in ("few-shot", "cot", "extender"):
        assert isinstance(codeio_runs.corpora(profile, pretrain.BaseModel(), train)[corpus](g, 1)[0], ScoredText)
        assert isinstance(codeio_runs.corpora(profile, pretrain.BaseModel("/some/7b"), train)[corpus](g, 1)[0], tuple)
        plain = dataclasses.replace(profile, score_shots=False)
        assert isinstance(codeio_runs.corpora(plain, pretrain.BaseModel(), train)[corpus](g, 1)[0], tuple)


def test_exact_search_is_the_consistency_search_with_no_model():
    tasks, _, _ = codeio_runs.held_out_tasks(12)
    res = codeio_runs.exact_search(tasks)
    for i, t in enumerate(tasks):
        fits = [c for c in S.candidates() if all(S.apply(c, s) == y for s, y in t.support)]
        assert t.pair in fits  # the true pair always fits, so the fewest wrong is zero
        outs = [S.apply(c, t.query[0]) for c in fits]
        assert res["answers"]["exact-search"][i] == outs[0]
        assert res["answers"]["exact-search-tie-vote"][i] == LS.vote(outs)
        assert res["exact-search"][i] == float(outs[0] == t.query[1])
    # one wrong support example: the least-wrong candidate still wins, enumeration order breaking ties
    t = tasks[0]
    noisy = dataclasses.replace(t, support=((*t.support[0][:1], "not-an-output"), *t.support[1:]))
    wrong = [sum(S.apply(c, s) != y for s, y in noisy.support) for c in S.candidates()]
    first = S.candidates()[int(np.argmin(wrong))]
    assert codeio_runs.exact_search([noisy])["answers"]["exact-search"] == [S.apply(first, t.query[0])]


def test_split_options_choose_pairs_and_seeds():
    assert E.split_of(RunOptions()) == codeio_runs.Split("test", 1, FRESH_TEST_SEED)  # fresh defaults
    assert E.split_of(RunOptions(split="dev", split_seed=0, test_seed=10_000)) == codeio_runs.Split("dev", 0, 10_000)
    assert codeio_runs.Split("test", 0).pairs() == S.split_pairs(0) and codeio_runs.Split(
        "dev", 1
    ).pairs() == S.dev_split(1)
    tasks, novel, sizes = codeio_runs.held_out_tasks(None, codeio_runs.Split("dev"))
    dev_train, dev = S.dev_split(1)
    assert [t.pair for t in tasks] == dev and sizes == {
        "n_test_pairs": 153,
        "n_train_pairs": 616,
        "n_novel_pairs": int(novel.sum()),
    }
    assert [t.pair for t, n in zip(tasks, novel, strict=True) if n] == S.novel_test_pairs(dev_train, dev)
    assert not {t.pair for t in tasks} & set(S.split_pairs(1)[1])  # no test pair under dev


def test_a_dev_run_trains_on_dev_training_pairs_and_scores_dev_tasks(tmp_path, monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def spy(run, tasks):
        corpora = codeio_runs.corpora(run.profile, run.model, run.split.pairs()[0])
        seen.update(tasks=tasks, split=run.split, ckpt=run.ckpt_dir, corpora=corpora)
        raise Stop

    monkeypatch.setattr(codeio_runs, "run_seed", spy)
    options = RunOptions(
        profile="tiny", out=tmp_path, progress=False, split="dev", extra={"model": str(_tiny_model(tmp_path / "model"))}
    )
    with pytest.raises(Stop):
        run_experiment("codeio", options)
    dev_train, dev = S.dev_split(1)
    assert seen["split"] == codeio_runs.Split("dev", 1, FRESH_TEST_SEED) and {t.pair for t in seen["tasks"]} <= set(dev)
    assert seen["corpora"]["extender"].keywords["train_pairs"] == dev_train
    test_ckpt = []
    monkeypatch.setattr(
        codeio_runs, "run_seed", lambda run, tasks: test_ckpt.append(run.ckpt_dir) or (_ for _ in ()).throw(Stop)
    )
    with pytest.raises(Stop):
        run_experiment("codeio", dataclasses.replace(options, split="test"))
    with pytest.raises(Stop):
        run_experiment("codeio", dataclasses.replace(options, split="test", split_seed=0))
    assert len({seen["ckpt"], *test_ckpt}) == 3  # split and split seed are in the fingerprint
