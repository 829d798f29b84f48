"""llm-geometry (App. J): the null task, the Fisher, layer-wise normalisation, the agreement
measures and a tiny end-to-end run."""

import importlib.util
import json
import re

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.experiments import llm_geometry as X
from taskextrap.experiments.registry import RunOptions
from taskextrap.experiments.runner import run_experiment
from taskextrap.llm import geometry as G
from taskextrap.report.schema import validate_results
from taskextrap.tasks import strings as S


def test_scramble_is_a_stable_permutation_without_a_rule():
    s = "abcdefghij"
    assert sorted(G.scramble(s)) == sorted(s) and G.scramble(s) == G.scramble(s)
    assert G.scramble(s) != s  # a rule-free reordering (this string is not left in place)
    assert G.run_task(G.SCRAMBLE, s) == G.scramble(s) and G.run_task("reverse", s) == s[::-1]


def test_task_items_are_few_shot_prompts_of_the_task():
    items = G.task_items(np.random.default_rng(0), ("reverse", "upper_case"), 3)
    for prompt, completion in items:
        q = prompt.rsplit("In: ", 1)[1].split(" Out:")[0]
        assert completion == " " + q[::-1].upper() and prompt.count("In: ") == 4
    assert all(i.task == ("reverse", "upper_case") for i in items)


def test_layerwise_gives_every_layer_unit_norm():
    parts = {
        "base.layers.0.q.lora_A": np.array([3.0, 4.0]),
        "base.layers.0.v.lora_A": np.array([0.0]),
        "base.layers.1.q.lora_A": np.array([10.0, 0.0, 0.0]),
    }
    v = G.layerwise(parts)
    assert (
        v.shape == (6,) and np.linalg.norm(v[:3]) == pytest.approx(1.0) and np.linalg.norm(v[3:]) == pytest.approx(1.0)
    )
    with pytest.raises(TaskextrapError, match="layer index"):
        G.layerwise({"lm_head.weight": np.ones(2)})


def test_fisher_is_the_mean_squared_gradient_of_the_adapters(make_char_model):
    settings = G.FisherSettings(steps=1, batch=2, fisher_items=2)
    lm = G.fit_lora(make_char_model(seed=1), "reverse", settings, seed=0)
    items = G.task_items(np.random.default_rng(1), "reverse", 2)
    f = G.fisher(lm, items)
    assert f and all("lora" in n for n in f) and all((v >= 0).all() for v in f.values())
    one = [G.fisher(lm, [it]) for it in items]
    for n in f:  # the mean over single-item squared gradients
        np.testing.assert_allclose(f[n], (one[0][n] + one[1][n]) / 2, rtol=1e-5, atol=1e-12)
    frozen = make_char_model(seed=1)
    for p in frozen.model.parameters():
        p.requires_grad_(False)
    with pytest.raises(TaskextrapError, match="trainable"):
        G.fisher(frozen, items)


def test_centre_subtracts_the_null_and_normalises():
    raw, null = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 1.0])
    z = G.centre(raw, null)
    np.testing.assert_allclose(z, [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(TaskextrapError, match="null"):
        G.centre(np.array([[1.0, 1.0]]), null)


def test_behavioural_distance_counts_differing_probe_strings():
    d = G.behavioural_distance(["identity", "lower_case", "reverse"])
    assert d[0, 1] == 0.0 and d[0, 2] == pytest.approx(np.mean([s != s[::-1] for s in S.PROBE]))
    np.testing.assert_allclose(d, d.T)
    o = G.output_distance(["identity", "lower_case", "reverse"])
    assert o[0, 1] == 0.0 and 0.0 < o[0, 2] <= 1.0


def test_agreement_is_perfect_for_behaviour_itself_and_near_chance_for_noise():
    names = list(S.NAMES)
    d_b, d_o = G.behavioural_distance(names), G.output_distance(names)
    fine = d_b + 1e-3 * d_o  # the behavioural order itself
    assert G.rank_agreement(d_b, d_b) == pytest.approx(1.0)
    assert G.rank_agreement(fine, d_b) > 0.3  # below 1: most pairs differ on every probe string (one big tie)
    assert G.knn_agreement(fine, d_b, 3, d_o) == pytest.approx(1.0)
    noise = [
        G.knn_agreement(G.cosine_distance(np.random.default_rng(s).standard_normal((31, 50))), d_b, 3, d_o)
        for s in range(20)
    ]
    assert abs(np.mean(noise) - 3 / 30) < 0.05  # chance
    with pytest.raises(TaskextrapError, match="k must"):
        G.knn_agreement(fine, d_b, 31)
    with pytest.raises(TaskextrapError, match="square"):
        G.rank_agreement(fine[:2, :2], d_b)


@pytest.mark.slow
def test_tiny_run_writes_rows_and_the_figure(tmp_path):
    from taskextrap.llm.model import build_char_model, save_model

    model_dir = save_model(build_char_model(d_model=16, n_layers=2, n_heads=2, max_len=1536, seed=0), tmp_path / "m")
    options = RunOptions(profile="tiny", out=tmp_path / "runs", extra={"model": str(model_dir)}, progress=False)
    with audit.spy() as seen:
        res = run_experiment("llm-geometry", options)
    validate_results(res)
    geo = {(r["method"], r["metric"]) for r in res["rows"] if r["group"] == "primitives"}
    assert geo == {(m, k) for m in X.METHODS for k in ("spearman", "fraction")}
    m = X.PROFILES["tiny"].gamma_m
    gammas = [f"rte-gamma-{g}-m{k}" for g in X.GAMMAS for k in m]
    assert {r["method"] for r in res["rows"] if r["group"] == "held-out-pairs"} == {"rte", "exact-search", *gammas}
    assert {r["method"] for r in res["rows"] if r["group"] == "candidate-recall"} == {"rte", *gammas}
    cfg = res["config"]
    assert cfg["embedding_dim"] > 0 and set(cfg["gamma"]["search_s_per_task"]) >= {"exhaustive", f"fisher-m{m[0]}"}
    assert cfg["gamma"]["restricted_search_agrees"] == [1.0]  # the restricted search chooses as the subset of scores
    assert list(tmp_path.glob("runs/*/plots/llm-geometry.png"))
    # every search method's final prompt is written, none shows its query's answer
    records = [json.loads(line) for line in next(tmp_path.glob("runs/*/prompts.jsonl")).read_text().splitlines()]
    assert {r["method"] for r in records} == {"rte", *gammas}
    per_method = {m: sum(r["method"] == m for r in records) for m in ("rte", *gammas)}
    assert len(set(per_method.values())) == 1 and per_method["rte"] > 0  # one record per task and method
    assert not any(r["answer_in_prompt"] for r in records)
    leak = {r["method"]: r["value"] for r in res["rows"] if r["group"] == "answer-in-prompt"}
    assert leak == {"rte": 0.0, **{g: 0.0 for g in gammas}}
    # each fit sees its own task, a training pair (the extender) or a target's own support only
    assert any(isinstance(lab, G.TargetContext) for rec in seen for lab in rec.labels)
    audit.check(seen, gamma_allowed(), required={"sft", "fisher"})


def gamma_allowed(split_seed: int = 1):
    """The leak audit's rule for llm-geometry: a primitive, the null task or a training pair (the
    extender), or a target context whose every example is in one held-out task's support (so
    never a query)."""
    from taskextrap.sequence_runs import codeio as codeio_runs

    train, _ = S.split_pairs(split_seed)
    names = set(S.NAMES) | {G.SCRAMBLE} | set(train)
    tasks, _, _ = codeio_runs.held_out_tasks(None, codeio_runs.Split(split_seed=split_seed))
    supports = [set(map(tuple, t.support)) for t in tasks]

    def allowed(label) -> bool:
        if isinstance(label, G.TargetContext):
            return any(set(label.examples) <= s for s in supports)
        return label in names

    return allowed


def test_a_target_context_embedding_uses_its_support_only():
    support = [("abcdef", "fedcba"), ("ghijkl", "lkjihg"), ("mnopqr", "rqponm")]
    items = G.context_items(support)
    assert len(items) == 6 and all(i.task == G.TargetContext(tuple(support)) for i in items)
    assert all(i.task.check_item(i) for i in items)
    shown = {x for prompt, comp in items for x in prompt.replace("In:", "\n").replace("Out:", "\n").split()} | {
        comp.strip() for _, comp in items
    }
    assert shown <= {s for pair in support for s in pair} | {
        "Perform",
        "the",
        "string",
        "transformation",
        "pattern",
        "seen",
        "below:",
        "###",
        "Query:",
    }
    with pytest.raises(TaskextrapError, match="at least 2"):
        G.context_items(support[:1])


def test_a_gamma_keeps_the_singles_and_pairs_of_its_nearest_primitives():
    lib = np.eye(4)
    order = G.nearest_primitives(np.array([0.1, 0.9, 0.5, 0.0]), lib)
    assert order.tolist()[:3] == [1, 2, 0]
    cands = G.restricted_candidates(order, ["a", "b", "c", "d"], 2)
    assert cands == ["b", "c", ("b", "b"), ("b", "c"), ("c", "b"), ("c", "c")]
    with pytest.raises(TaskextrapError, match="m must"):
        G.restricted_candidates(order, ["a", "b", "c", "d"], 5)


def test_restricted_search_takes_the_allowed_arg_min_of_a_hand_built_score_table():
    """Scores by hand: the overall best candidates lie outside the Gamma's 2 primitives; among
    the allowed ones (b, a) is best, not (a, b) (a pair's order counts); a tie goes to the first
    allowed; a table of the wrong length is refused."""
    cands, names = S.candidates(), list(S.NAMES)
    a, b, c = names[3], names[7], names[11]
    allowed = G.restricted_candidates(np.array([3, 7, 11, 0]), names, 2)
    assert allowed == [a, b, (a, a), (a, b), (b, a), (b, b)]
    scores = np.full(len(cands), 10.0)
    for cand, v in ((c, -5.0), ((c, a), -4.0), ((a, c), -3.0), ((b, a), 1.0), ((a, b), 2.0), (a, 3.0)):
        scores[cands.index(cand)] = v
    assert cands[int(np.argmin(scores))] == c  # the unrestricted search would take c
    assert G.restricted_choice(scores, cands, allowed) == (b, a)
    scores[cands.index((a, a))] = 1.0  # ties with (b, a), listed before it
    assert G.restricted_choice(scores, cands, allowed) == (a, a)
    with pytest.raises(TaskextrapError, match="one value per candidate"):
        G.restricted_choice(scores[:-1], cands, allowed)


def _held_out_task():
    from taskextrap.sequence_runs import codeio as codeio_runs

    return codeio_runs.held_out_tasks(1, codeio_runs.Split(split_seed=1))[0][0]


def test_the_audit_flags_a_query_embedded_into_gamma(make_char_model):
    """A target's Gamma vector (LoRA fit and Fisher) from its support passes the audit; with its
    query among the examples the audit names the leak; and a query item that only carries the
    support's label is caught from its text."""
    from taskextrap.llm.codeio import answer_completion, fewshot_prompt

    task = _held_out_task()
    support, query = [tuple(e) for e in task.support], tuple(task.query)
    settings = G.FisherSettings(steps=1, batch=2, fisher_items=2)

    def load():
        return make_char_model(seed=0)

    with audit.spy() as seen:
        G.embed_items(load, G.context_items(support), settings, seed=0)
    audit.check(seen, gamma_allowed(), required={"sft", "fisher"})
    with audit.spy() as seen:  # the query embedded into Gamma as one more example
        G.embed_items(load, G.context_items([*support, query]), settings, seed=0)
    with pytest.raises(audit.LeakError, match=r"sft \(train\): target-context .*" + re.escape(repr(query[0]))) as e:
        audit.check(seen, gamma_allowed())
    assert "fisher (train)" in str(e.value)
    items = G.context_items(support)
    smuggled = audit.Tagged((fewshot_prompt(support, query[0]), answer_completion(query[1])), items[0].task)
    with audit.spy(), pytest.raises(audit.LeakError, match="consumed an item that its label does not make"):
        G.embed_items(load, [*items, smuggled], settings, seed=0)
