"""llm-geometry (App. J): the null task, the Fisher, layer-wise normalisation, the agreement
measures and a tiny end-to-end run."""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap import audit  # noqa: E402
from taskextrap.errors import TaskextrapError  # noqa: E402
from taskextrap.experiments import llm_geometry as X  # noqa: E402
from taskextrap.experiments.registry import RunOptions  # noqa: E402
from taskextrap.experiments.runner import run_experiment  # noqa: E402
from taskextrap.llm import geometry as G  # noqa: E402
from taskextrap.report.schema import validate_results  # noqa: E402
from taskextrap.tasks import strings as S  # noqa: E402


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
    parts = {"base.layers.0.q.lora_A": np.array([3.0, 4.0]), "base.layers.0.v.lora_A": np.array([0.0]),
             "base.layers.1.q.lora_A": np.array([10.0, 0.0, 0.0])}
    v = G.layerwise(parts)
    assert v.shape == (6,) and np.linalg.norm(v[:3]) == pytest.approx(1.0) and np.linalg.norm(v[3:]) == pytest.approx(1.0)
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
    noise = [G.knn_agreement(G.cosine_distance(np.random.default_rng(s).standard_normal((31, 50))), d_b, 3, d_o)
             for s in range(20)]
    assert abs(np.mean(noise) - 3 / 30) < 0.05  # chance
    with pytest.raises(TaskextrapError, match="k must"):
        G.knn_agreement(fine, d_b, 31)
    with pytest.raises(TaskextrapError, match="square"):
        G.rank_agreement(fine[:2, :2], d_b)


def test_tiny_run_writes_rows_and_the_figure(tmp_path):
    from taskextrap.llm.model import build_char_model, save_model

    model_dir = save_model(build_char_model(d_model=16, n_layers=2, n_heads=2, max_len=256, seed=0), tmp_path / "m")
    options = RunOptions(profile="tiny", out=tmp_path / "runs", extra={"model": str(model_dir)}, progress=False)
    with audit.spy() as seen:
        res = run_experiment("llm-geometry", options)
    validate_results(res)
    got = {(r["method"], r["metric"]) for r in res["rows"]}
    assert got == {(m, k) for m in X.METHODS for k in ("spearman", "fraction")}
    assert all(r["group"] == "primitives" for r in res["rows"])
    assert res["config"]["embedding_dim"] > 0
    assert list(tmp_path.glob("runs/*/plots/llm-geometry.png"))
    audit.check(seen, set(S.NAMES) | {G.SCRAMBLE}, required={"sft"})  # each fit sees its own task only
