"""codeio-em (App. B.2): candidates, training tasks, samplers, the E-step, equal steps, a tiny
end-to-end run and the leak test (no E-step or evaluation call ever receives a held-out answer)."""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import codeio as E
from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap.experiments import codeio_em as X
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.llm import codeio as C
from taskextrap.llm import codeio_em as M
from taskextrap.estimators import sequence_em as SE
from taskextrap.llm import generate as G
from taskextrap.report.schema import validate_results
from taskextrap.search import likelihood as LS
from taskextrap.tasks import strings as S

TRAIN, HELD = S.split_pairs(codeio_runs.SPLIT_SEED)


def test_candidates_exclude_singles_and_identity_like_constituents():
    trivial = M.trivial_primitives()
    assert {"identity", "lower_case"} <= set(trivial)
    assert all(S.behaviour(n) == S.behaviour("identity") for n in trivial)
    cands = M.em_candidates()
    assert all(isinstance(c, tuple) and len(c) == 2 for c in cands)  # no single
    assert not any(set(c) & set(trivial) for c in cands)
    assert len(cands) == (len(S.NAMES) - len(trivial)) ** 2


def test_candidates_restricted_to_training_pairs_hold_no_held_out_pair():
    every, restricted = M.em_candidates(), M.em_candidates(TRAIN)
    assert set(restricted) == set(every) & set(TRAIN) and not set(restricted) & set(HELD)
    assert len(restricted) < len(every) and restricted == [c for c in every if c in restricted]  # enumeration order


def test_every_e_step_of_an_arm_scores_only_the_candidates_it_is_given(monkeypatch):
    from taskextrap.estimators import sequence_em
    from taskextrap.experiments import codeio_em as X
    from taskextrap.llm.pretrain import BaseModel

    seen = []
    monkeypatch.setattr(X, "_tune", lambda lm, *a, **k: lm)
    monkeypatch.setattr("taskextrap.llm.pretrain.load_base", lambda *a, **k: "lm")
    monkeypatch.setattr(
        sequence_em,
        "e_step",
        lambda lm, tasks, adapter, cands, *a, **k: seen.append(list(cands)) or ([cands[0]] * len(tasks), None),
    )
    profile = X.PROFILES["tiny"]
    tasks = M.em_tasks(TRAIN, 4, seed=0)
    restricted = M.em_candidates(TRAIN)
    X.run_arm(codeio_runs.SeedRun(BaseModel(), profile, 0), 0.0, tasks, candidates=restricted)
    assert seen and all(c == restricted for c in seen)


@pytest.mark.slow  # an end-to-end run: make test-slow (CI runs it too)
def test_training_tasks_are_distinct_composites_of_training_pairs():
    tasks = M.em_tasks(TRAIN, 12, seed=0)
    pairs = [t.pair for t in tasks]
    assert len(set(pairs)) == 12 and set(pairs) <= set(TRAIN)
    singles = {S.behaviour(n) for n in S.NAMES}
    assert all(S.behaviour(p) not in singles for p in pairs)
    assert pairs == [t.pair for t in M.em_tasks(TRAIN, 12, seed=0)]  # seeded
    assert pairs != [t.pair for t in M.em_tasks(TRAIN, 12, seed=1)]
    with pytest.raises(TaskextrapError, match="em_tasks"):
        M.em_tasks(TRAIN, 0, seed=0)
    with pytest.raises(TaskextrapError, match="em_tasks"):
        M.em_tasks(TRAIN, 10_000, seed=0)


def test_known_mask_keeps_the_ceiling_of_the_share():
    assert M.known_mask(8, 0.25, 0).sum() == 2 and M.known_mask(9, 0.25, 0).sum() == 3
    assert M.known_mask(8, 0.0, 0).sum() == 0 and M.known_mask(8, 1.0, 0).all()
    with pytest.raises(TaskextrapError, match="share"):
        M.known_mask(8, 1.5, 0)


def test_pseudo_items_show_the_label_blocks_and_the_task_own_data():
    task = M.em_tasks(TRAIN, 1, seed=0)[0]
    _a, _b = task.pair
    label = next(c for c in M.em_candidates() if S.behaviour(c) != S.behaviour(task.pair))
    items = M.pseudo_sampler([task], [label], anchored=False)(np.random.default_rng(0), 6)
    for prompt, completion in items:
        assert prompt.count("--- Func_") == 2
        assert f"--- {S.masked_name(label[0])} ---" in prompt and f"--- {S.masked_name(label[1])} ---" in prompt
        query = prompt.rsplit("In: ", 1)[1].split(" Out:")[0]
        assert completion == f" {S.apply(task.pair, query)}"  # the answer comes from the task, not the label
    assert all(item.task == task.pair for item in items)  # the audit sees the task the data came from
    anchored = M.pseudo_sampler([task], [label], anchored=True)(np.random.default_rng(0), 1)[0]
    query = anchored[0].rsplit("In: ", 1)[1].split(" Out:")[0]
    assert anchored[1] == f" {S.apply(label[0], query)} => {S.apply(task.pair, query)}"
    singles = M.pseudo_sampler([task], [label], p_single=1.0)(np.random.default_rng(0), 4)
    assert all(isinstance(item.task, str) and item[0].count("--- Func_") == 1 for item in singles)
    with pytest.raises(TaskextrapError, match="one label per task"):
        M.pseudo_sampler([task], [label, label])


def test_label_quality_counts_behaviour_and_exact_matches():
    tasks = M.em_tasks(TRAIN, 3, seed=0)
    same = next(c for c in S.all_pairs() if c != tasks[1].pair and S.behaviour(c) == S.behaviour(tasks[1].pair))
    wrong = next(c for c in M.em_candidates() if S.behaviour(c) != S.behaviour(tasks[2].pair))
    q = M.label_quality(tasks, [tasks[0].pair, same, wrong])
    assert q["behaves"].tolist() == [1.0, 1.0, 0.0] and q["exact"].tolist() == [1.0, 0.0, 0.0]
    q = M.label_quality(tasks, [tasks[0].pair, same, wrong], keep=np.array([False, True, True]))
    assert q["behaves"].tolist() == [1.0, 0.0]


def test_e_step_takes_the_arg_min_of_support_scores_only(monkeypatch, char_lm):
    tasks = M.em_tasks(TRAIN, 2, seed=0)
    cands = M.em_candidates()
    target = {0: cands[17], 1: cands[-3]}
    seen = []

    def fake_scores(lm, tasks_, cands_, loo_pairs, *args, **kwargs):
        for t in tasks_:
            for pr, comp in loo_pairs(t, cands_[0]):
                seen.append((t, pr, comp))
        out = np.ones((len(tasks_), len(cands_)))
        for i in range(len(tasks_)):
            out[i, cands_.index(target[i])] = 0.0
        return out

    monkeypatch.setattr(LS, "candidate_scores", fake_scores)
    labels, scores = SE.e_step(char_lm, tasks, C.CodeIOAdapter(anchored=True), cands, 2, 8)
    assert labels == [target[0], target[1]] and scores.shape == (2, len(cands))
    for t, prompt, completion in seen:  # the last two support examples, each held out in turn
        assert t.query[0] not in prompt and t.query[1] not in completion.split("=>")[-1].split()
    assert len(seen) == 4
    with pytest.raises(TaskextrapError, match="n_loo"):
        SE.e_step(char_lm, tasks, C.CodeIOAdapter(), cands, 4, 8)


def test_phases_sum_to_the_supervised_steps():
    for total, rounds in ((150, 2), (1150, 4), (2, 1), (7, 3)):
        start, m = X.phase_steps(total, rounds)
        assert start + rounds * m == total and m >= 1 and start >= m
    with pytest.raises(TaskextrapError, match="em_rounds"):
        X.phase_steps(2, 2)


def test_profiles_reuse_codeio_sizes():
    for name, p in X.PROFILES.items():
        assert p.codeio() == E.PROFILES[name]  # the supervised rows are codeio's own units
        assert p.em_tasks >= 1 and p.em_rounds >= 1 and 1 <= p.em_loo <= 3


# ------------------------------------------------------------------------ end to end


def _tiny_model(directory):
    from taskextrap.llm.model import build_char_model, save_model

    return save_model(build_char_model(d_model=16, n_layers=1, n_heads=2, max_len=1536, seed=0), directory)


@pytest.fixture(scope="module")
def tiny_em(tmp_path_factory):
    """One tiny codeio-em run (a tiny --model), with spies on every scored and generated text and
    the leak audit on."""
    root = tmp_path_factory.mktemp("codeio-em")
    model_dir = _tiny_model(root / "model")
    calls = {"scored": [], "generated": [], "e_tasks": []}
    real_nll, real_generate, real_e = LS.completion_nll, G.generate, SE.e_step

    def spy_nll(lm, prompts, completions, *args, **kwargs):
        calls["scored"] += list(zip(prompts, completions, strict=True))
        return real_nll(lm, prompts, completions, *args, **kwargs)

    def spy_generate(lm, prompts, *args, **kwargs):
        calls["generated"] += list(prompts)
        return real_generate(lm, prompts, *args, **kwargs)

    def spy_e(lm, tasks, *args, **kwargs):
        calls["e_tasks"] += [t.pair for t in tasks]
        return real_e(lm, tasks, *args, **kwargs)

    options = RunOptions(profile="tiny", out=root / "runs", progress=False, extra={"model": str(model_dir)})
    with pytest.MonkeyPatch.context() as mp, audit.spy() as seen:
        mp.setattr(LS, "completion_nll", spy_nll)
        mp.setattr(G, "generate", spy_generate)
        mp.setattr(SE, "e_step", spy_e)
        res = run_experiment("codeio-em", options)
    return res, calls, list(seen), root


@pytest.mark.slow
def test_tiny_run_writes_every_row(tiny_em):
    res, _, _, _ = tiny_em
    validate_results(res)
    rows = {(r["group"], r["method"]): r for r in res["rows"]}
    for m in (*X.CODEIO_METHODS, *X.ARMS):
        assert ("held-out-pairs", m) in rows
    assert {("answer-in-prompt", a) for a in X.ARMS} <= set(rows)
    assert ("pseudo-labels", "rte-em-warmup:e1") in rows and ("pseudo-labels-exact", "rte-em-warmup:e1") in rows
    assert rows[("held-out-pairs", "rte-em-warmup")]["paper_value"] == pytest.approx(0.40625)
    assert rows[("held-out-pairs", "rte-em-semi25")]["paper_value"] == pytest.approx(0.4167)
    assert all(r["value"] == 0.0 for (g, _), r in rows.items() if g == "answer-in-prompt")
    assert res["config"]["steps_taken"] == {a: X.PROFILES["tiny"].sft_steps for a in X.ARMS}  # equal steps
    (prompts,) = [p.read_text() for p in tiny_em[3].glob("runs/*/prompts.jsonl")]
    assert list(tiny_em[3].glob(f"runs/*/plots/{X.FIGURE}"))  # the pseudo-label figure
    assert '"method": "rte-em-warmup"' in prompts and '"method": "few-shot"' in prompts


@pytest.mark.slow
def test_no_e_step_or_evaluation_call_receives_a_held_out_answer(tiny_em):
    _res, calls, _, _ = tiny_em
    tasks, _, _ = codeio_runs.held_out_tasks(X.PROFILES["tiny"].n_tasks)
    assert calls["e_tasks"] and set(calls["e_tasks"]) <= set(TRAIN)  # the E-step scores training tasks only
    assert not set(calls["e_tasks"]) & set(HELD)
    assert calls["scored"] and calls["generated"]
    for t in tasks:
        q, answer = t.query
        support_out = {y for _, y in t.support}
        for prompt, completion in calls["scored"]:
            assert not C.answer_in_prompt(prompt, answer, q)
            if answer not in support_out:  # a scored completion is a support answer, never the query's
                assert C.parse_cot(completion) != answer
        for prompt in calls["generated"]:
            assert not C.answer_in_prompt(prompt, answer, q)


@pytest.mark.slow
def test_every_fine_tuning_item_and_e_step_task_is_a_training_task(tiny_em):
    _, _, seen, _ = tiny_em
    allowed = set(TRAIN) | set(S.NAMES)
    audit.check(seen, allowed, required={"sft", "e-step"})


def test_the_audit_names_a_held_out_pair_injected_into_the_em_tasks(tmp_path):
    from taskextrap.llm.pretrain import BaseModel

    model = BaseModel(path=str(_tiny_model(tmp_path / "model")))
    profile = codeio_runs.for_model(X.PROFILES["tiny"], model)
    leaky = S.make_test_tasks([HELD[0]], 0, stream="em-train")  # a held-out pair among the EM tasks
    with audit.spy() as seen:
        X.run_arm(codeio_runs.SeedRun(model, profile, 0), 0.0, leaky)
    with pytest.raises(audit.LeakError, match="e-step"):
        audit.check(seen, set(TRAIN) | set(S.NAMES))


def test_the_figure_is_skipped_without_an_e_step(tmp_path):
    assert X.plot_pseudo_labels(tmp_path / "f.png", {}, 2) is None and not (tmp_path / "f.png").exists()
    values = {f"rte-em-warmup|e{r}|{k}": [np.array([0.0, 1.0])] for r in (1, 2) for k in ("behaves", "exact")}
    assert X.plot_pseudo_labels(tmp_path / "f.png", values, 2).exists()


def test_codeio_em_is_run_by_name_not_by_reproduce_all():
    from taskextrap.experiments.catalogue import all_experiments

    assert "codeio-em" in all_experiments() and "codeio-em" not in all_experiments(in_all_only=True)


def test_a_four_bit_base_is_refused(tmp_path):
    from taskextrap.llm.pretrain import BaseModel

    model = BaseModel(path=str(tmp_path), load_in_4bit=True)
    with pytest.raises(TaskextrapError, match="4-bit"):
        X.run_arm(codeio_runs.SeedRun(model, X.PROFILES["tiny"], 0), 0.0, M.em_tasks(TRAIN, 1, 0))


def test_an_em_unit_hands_its_e_steps_only_training_pairs_and_records_what_ran(monkeypatch):
    """Fast (no model): run_unit's arms get the split's training pairs as candidates, the unit
    records the list that ran, and the results record is derived from that list, so an E-step
    over every pair (held-out ones included) shows as label_pairs "any"."""
    given = []

    def fake_arm(run, share, train_tasks, candidates):
        given.append(list(candidates))
        return object(), [], 0

    found = {"rte": np.zeros(2), "found": np.zeros(2), "answers": {"rte": []}, "completions": {"rte": []}, "chosen": []}
    monkeypatch.setattr(X, "run_arm", fake_arm)
    monkeypatch.setattr(codeio_runs, "search", lambda *a, **k: found)
    split = codeio_runs.Split()
    train, _ = split.pairs()
    profile = X.PROFILES["tiny"]
    unit = X.run_unit(codeio_runs.SeedRun(None, profile, 0, split=split), [])
    assert len(given) == len(X.ARMS) and all(set(c) <= set(map(tuple, train)) for c in given)
    record = X.label_record(unit.extras["candidates"], train)
    assert record == {"candidates": len(given[0]), "label_pairs": "train", "held_out_candidates": 0}
    every = ["+".join(p) for p in M.em_candidates()]  # what an E-step over every pair would have run
    assert X.label_record(every, train)["label_pairs"] == "any"
