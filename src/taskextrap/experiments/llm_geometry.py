"""llm-geometry: the task geometry of the CodeIO language model (paper Appendix J).

Per training seed, every one of the 31 string primitives and the null task ``scramble`` is
embedded by a LoRA fit of the base model (the shipped CodeIO default model, or ``--model``) on
that task alone and the empirical Fisher of the adapter (``llm.geometry``). The paper shows the
t-SNE map only; here the map's claim ("clusters of semantically similar tasks") becomes numbers
against behaviour (the share of the 200 probe strings on which two primitives differ):

* ``spearman``: rank correlation of the embedding's cosine distances with the behavioural
  distances, over all 465 pairs of primitives (most pairs differ on every probe string, a tie that
  caps what any embedding reaches: ``spearman_ceiling`` in the config is the value of the
  behavioural order itself, its ties broken by ``llm.geometry.output_distance``);
* ``fraction``: k-nearest-neighbour agreement (k = 3): the share of each primitive's three
  nearest neighbours in the embedding that are among its three nearest in behaviour (ties of
  the behavioural distance broken by how different the outputs are, ``llm.geometry.output_distance``;
  chance is 3/30 = 0.1).

Methods (group ``primitives``): ``fisher`` (scramble-centred, as the paper), ``fisher-uncentred``
(the same without the centring) and ``random`` (seeded Gaussian vectors of the same size: the
null, whose expected Spearman is 0). Nothing was tuned: the settings are the paper's (LoRA rank 8,
scale 16, lr 1e-3, batches of 8, 30 single-prompt Fisher batches) with a fixed number of steps.
The first seed draws ``llm-geometry.png`` (PCA, t-SNE and the cosine heat map of ``fisher``).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from taskextrap.profiles import GeometryProfile
from taskextrap.experiments.settings import Settings
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import Plan, UnitResult, gather, seed_units
from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap.llm.geometry import FisherSettings
from taskextrap.report.schema import make_row
from taskextrap.seeding import derive_seed, rng

GROUP = "primitives"
GAMMAS = ("fisher", "random")  # the embedding's nearest primitives, and m random ones (the sanity null)
METHODS = ("fisher", "fisher-uncentred", "random")
FIGURE = "llm-geometry.png"


PROFILES = {
    # quick: 30 LoRA steps and 32 Fisher prompts per task, one seed (about 3 min on 2 CPU cores)
    "quick": GeometryProfile(name="quick", seeds=(0,), fit=FisherSettings(steps=30, fisher_items=32)),
    # paper: 200 steps of 8 (the authors stop a task once its epoch loss is below 0.02, within 50
    # epochs of 25 batches), the authors' 30 single-prompt Fisher batches, three seeds
    "paper": GeometryProfile(name="paper", seeds=(0, 1, 2), fit=FisherSettings(steps=200, fisher_items=30)),
    "tiny": GeometryProfile(
        name="tiny", seeds=(0,), fit=FisherSettings(steps=1, batch=2, fisher_items=2), gamma_m=(2, 3)
    ),
}


def embed_all(load, fit: FisherSettings, seed: int, progress: bool = False) -> tuple[list, np.ndarray, np.ndarray]:
    """(primitive names, their raw Fisher vectors (31, d), the null task's vector (d,)), each task
    fitted from a fresh base with its own seed."""
    from tqdm import tqdm

    from taskextrap.llm.geometry import SCRAMBLE, embed_task
    from taskextrap.tasks.strings import NAMES

    tasks = [*NAMES, SCRAMBLE]
    vecs = [
        embed_task(load, t, fit, derive_seed(seed, "geometry", t))
        for t in tqdm(tasks, desc="llm-geometry", unit="task", disable=not progress)
    ]
    return list(NAMES), np.stack(vecs[:-1]), vecs[-1]


def measures(z: np.ndarray, d_behave: np.ndarray, d_out: np.ndarray, k: int) -> dict[str, float]:
    """``spearman`` and ``fraction`` (kNN agreement, ties broken by ``d_out``) of an embedding
    against behaviour."""
    from taskextrap.llm.geometry import cosine_distance, knn_agreement, rank_agreement

    d = cosine_distance(z)
    return {"spearman": rank_agreement(d, d_behave), "fraction": knn_agreement(d, d_behave, k, d_out)}


def run_seed(
    load, profile: GeometryProfile, seed: int, plots: Path | None = None, progress: bool = False
) -> UnitResult:
    """Every task's embedding for one seed, the measures of each method, and the figure."""
    from taskextrap.llm.geometry import behavioural_distance, centre, output_distance, rank_agreement

    t = time.perf_counter()
    names, raw, null = embed_all(load, profile.fit, seed, progress)
    maps = {
        "fisher": centre(raw, null),
        "fisher-uncentred": centre(raw, None),
        "random": rng(seed, "geometry", "random").standard_normal(raw.shape),
    }
    d_behave, d_out = behavioural_distance(names), output_distance(names)
    values = {
        f"{m}|{k}": np.array([v]) for m, z in maps.items() for k, v in measures(z, d_behave, d_out, profile.k).items()
    }
    if plots is not None:
        from sklearn.manifold import TSNE

        from taskextrap.report.plots import plot_task_geometry

        z = maps["fisher"]
        tsne = TSNE(2, perplexity=min(15.0, (len(z) - 1) / 3), init="pca", random_state=seed).fit_transform(z)
        plot_task_geometry(Path(plots) / FIGURE, names, z, tsne, "Fisher embedding (scramble-centred)")
    # the Spearman a perfect embedding reaches: most pairs differ on every probe string, one big tie
    ceiling = rank_agreement(d_behave + 1e-6 * d_out, d_behave)
    return UnitResult(values, {"total_s": time.perf_counter() - t}, {"dim": int(raw.shape[1]), "ceiling": ceiling})


# ------------------------------------------------------------------ the embedding as Gamma


def gamma_unit(run: codeio_runs.SeedRun, profile: GeometryProfile, tasks) -> UnitResult:
    """The Fisher embedding as Gamma for the CodeIO search, on ``tasks`` of ``run.split``.

    The supervised extender of ``codeio`` (same recipe and seed) and its exhaustive search give
    ``rte`` (``run`` is codeio's seed, its checkpoint folder codeio's of these settings: a finished codeio run is
    resumed, not repeated); every library primitive and the null task are embedded the way a target is (a LoRA
    fit and Fisher on the items of 3 examples, ``llm.geometry.context_items``); each target is
    embedded from its own support only, and a Gamma of ``m`` primitives keeps the singles and
    pairs of its ``m`` nearest primitives (``fisher``) or of ``m`` random ones (``random``). A
    restricted search chooses the arg-min of the same leave-one-out scores over its candidates;
    the Fisher Gamma's search is also run on its own, for its time.
    """
    from taskextrap.llm import geometry as geometry
    from taskextrap.llm.codeio import CodeIOAdapter
    from taskextrap.llm.pretrain import load_base
    from taskextrap.search.likelihood import candidate_scores
    from taskextrap.tasks import strings as string_tasks

    model, codeio_profile, seed, device = run.model, run.profile, run.seed, run.device
    timing, values = {}, {}
    t = time.perf_counter()
    lm = run.fine_tune(codeio_runs.corpora(codeio_profile, model, run.split.pairs()[0])["extender"], "extender")
    timing["sft_s"] = time.perf_counter() - t
    t = time.perf_counter()
    full = codeio_runs.search(
        lm, tasks, codeio_profile, run.sub("search"), run.progress, bounded=False
    )  # subsets' arg-mins
    timing["exhaustive_search_s"] = time.perf_counter() - t
    cands, scores = string_tasks.candidates(), full["scores"]

    def load():
        return load_base("codeio", model, device)

    t = time.perf_counter()
    names = list(string_tasks.NAMES)
    lib = np.stack([geometry.embed_like_context(load, n, 3, profile.fit, derive_seed(seed, "gamma", n)) for n in names])
    null = geometry.embed_like_context(
        load, geometry.SCRAMBLE, 3, profile.fit, derive_seed(seed, "gamma", geometry.SCRAMBLE)
    )
    timing["gamma_library_s"] = time.perf_counter() - t
    adapter = CodeIOAdapter.of(codeio_profile)
    chosen: dict[tuple[str, int], list] = {(g, m): [] for g in GAMMAS for m in profile.gamma_m}
    recall: dict[tuple[str, int], list[float]] = {(g, m): [] for g in GAMMAS for m in profile.gamma_m}
    agree, timing["gamma_embed_s"] = [], 0.0
    for i, task in enumerate(tasks):
        t = time.perf_counter()
        # labelled with the support's examples (geometry.TargetContext): the leak audit rejects a query among them
        v = geometry.embed_items(
            load, geometry.context_items(task.support), profile.fit, derive_seed(seed, "gamma-target", i)
        )
        order = {
            "fisher": geometry.nearest_primitives(v - null, lib - null[None, :]),
            "random": rng(seed, "geometry", "gamma-random", i).permutation(len(names)),
        }
        timing["gamma_embed_s"] += time.perf_counter() - t
        truth = string_tasks.behaviour(task.pair)
        for g in GAMMAS:
            for m in profile.gamma_m:
                allowed = geometry.restricted_candidates(order[g], names, m)
                best = geometry.restricted_choice(scores[i], cands, allowed)
                chosen[(g, m)].append(best)
                recall[(g, m)].append(float(any(string_tasks.behaviour(c) == truth for c in allowed)))
                if g == "fisher":  # the restricted search on its own: its time, and the same choice
                    t = time.perf_counter()
                    own = candidate_scores(
                        lm, [task], allowed, adapter.loo_pairs, codeio_profile.score_batch, prefix_of=adapter.prefix_of
                    )
                    assert own is not None  # an unsharded search always returns them
                    timing[f"fisher_m{m}_search_s"] = timing.get(f"fisher_m{m}_search_s", 0.0) + time.perf_counter() - t
                    agree.append(allowed[int(np.argmin(own[0]))] == best)
    t = time.perf_counter()
    keys = sorted(
        {(i, string_tasks.as_candidate(c)) for (g, m), cs in chosen.items() for i, c in enumerate(cs)}, key=str
    )
    _, said = codeio_runs.extender_outputs(
        lm, [codeio_runs.query_prompt("rte", tasks[i], codeio_profile, c) for i, c in keys], codeio_profile
    )
    answer = dict(zip(keys, said, strict=True))
    timing["gamma_answer_s"] = time.perf_counter() - t
    values["rte"] = full["rte"]
    values["exact-search"] = codeio_runs.exact_search(tasks)["exact-search"]
    # each method's chosen candidate and answer per task: enough to rebuild its final prompts
    chosen_names = {"rte": full["chosen"]}
    said_of = {"rte": full["answers"]["rte"]}
    for (g, m), cs in chosen.items():
        said_of[f"rte-gamma-{g}-m{m}"] = [answer[(i, string_tasks.as_candidate(c))] for i, c in enumerate(cs)]
        chosen_names[f"rte-gamma-{g}-m{m}"] = [codeio_runs.candidate_name(string_tasks.as_candidate(c)) for c in cs]
        values[f"rte-gamma-{g}-m{m}"] = np.array(
            [float(a == t.query[1]) for a, t in zip(said_of[f"rte-gamma-{g}-m{m}"], tasks, strict=True)]
        )
        values[f"recall|rte-gamma-{g}-m{m}"] = np.array(recall[(g, m)])
    values["recall|rte"] = np.ones(len(tasks))  # the exhaustive search keeps every candidate
    return UnitResult(
        values,
        timing,
        {"restricted_agrees": float(np.mean(agree)) if agree else 1.0, "chosen": chosen_names, "answers": said_of},
    )


def prompt_records(tasks, codeio_profile, seed: int, extras: dict) -> list[dict]:
    """Every final prompt of one Gamma unit (as ``codeio.prompt_records``): one record per (task,
    search method) with keys task, method, seed, candidate, prompt, answer, predicted and
    answer_in_prompt (``llm.codeio.answer_in_prompt``)."""
    from taskextrap.llm import codeio as codeio_llm

    out = []
    for method, names in extras["chosen"].items():
        for i, (t, name) in enumerate(zip(tasks, names, strict=True)):
            q, answer = t.query
            prompt = codeio_runs.query_prompt("rte", t, codeio_profile, codeio_runs.candidate_of(name))
            out.append(
                {
                    "task": "+".join(t.pair),
                    "method": method,
                    "seed": seed,
                    "candidate": name,
                    "prompt": prompt,
                    "answer": answer,
                    "predicted": extras["answers"][method][i],
                    "answer_in_prompt": codeio_llm.answer_in_prompt(prompt, answer, q),
                }
            )
    return out


def _gamma_rows(values: dict, profile: GeometryProfile) -> list[dict]:
    from taskextrap.report.schema import accuracy_row

    methods = ["rte", *(f"rte-gamma-{g}-m{m}" for g in GAMMAS for m in profile.gamma_m)]
    rows: list[dict] = [
        accuracy_row("llm-geometry", values[m], "held-out-pairs", m) for m in [*methods, "exact-search"]
    ]
    rows += [accuracy_row("llm-geometry", values[f"recall|{m}"], "candidate-recall", m) for m in methods]
    rows += [accuracy_row("llm-geometry", values[f"answer-in-prompt/{m}"], "answer-in-prompt", m) for m in methods]
    return rows


@register(
    "llm-geometry",
    "App. J: empirical-Fisher task embedding of the CodeIO model's string primitives "
    "(PCA, t-SNE, cosine map; agreement with behaviour), and as Gamma for the CodeIO search",
    PROFILES,
    options=("device", "extra", "test_seed", "split_seed"),
    dev=True,
)
def run_llm_geometry(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """Per seed, the geometry unit (rows of group ``primitives``) and the Gamma unit (accuracy on
    the codeio tasks of ``options.split`` and candidate recall of each Gamma)."""
    options = settings.options
    from taskextrap.experiments import codeio as codeio_exp
    from taskextrap.llm.pretrain import BaseModel, load_base

    model = BaseModel.from_extra(options.extra)
    profile = settings.profile
    codeio_profile = codeio_runs.for_model(codeio_exp.PROFILES[options.profile], model)
    split = codeio_exp.split_of(options)
    tasks, _, sizes = codeio_runs.held_out_tasks(codeio_profile.n_tasks, split)

    def load():
        return load_base("codeio", model, options.device)

    base = {"experiment": "llm-geometry", "profile": profile.to_dict(), "model": model.label("codeio")}
    units = seed_units(
        profile.seeds,
        name=lambda s: f"llm-geometry-seed{s}",
        config=lambda s: {**base, "seed": s},
        compute=lambda s, plots: run_seed(load, profile, s, plots, options.progress),
        plot_dir=plot_dir,
        plot_file=FIGURE,
    )
    codeio_base = codeio_exp.codeio_base(options, model, codeio_profile, split, tasks)
    gbase = {**base, "codeio": codeio_base}

    def ckpt(s: int) -> Path | None:  # codeio's extender and search of the same settings
        return codeio_exp.ckpt_root(cache_dir, codeio_base, s)

    gamma = seed_units(
        profile.seeds,
        name=lambda s: f"llm-geometry-gamma-seed{s}",
        config=lambda s: {**gbase, "seed": s},
        compute=lambda s, _: gamma_unit(
            codeio_exp.seed_run(options, model, codeio_profile, s, ckpt(s), split), profile, tasks
        ),
    )

    def assemble(results):
        values, timing = gather(results, units)
        rows: list[dict] = []
        for method in METHODS:
            for metric in ("spearman", "fraction"):
                rows.append(
                    make_row("llm-geometry", GROUP, method, metric, np.stack(values[f"{method}|{metric}"], axis=1))
                )
        gvalues, gtiming = gather(results, gamma)
        records = [
            r
            for s, u in zip(profile.seeds, gamma, strict=True)
            for r in prompt_records(tasks, codeio_profile, s, results[u.name].extras)
        ]
        codeio_runs.write_prompts(options.run_dir, records)
        gvalues.update(codeio_runs.answer_in_prompt_values(records, profile.seeds, {r["method"] for r in records}))
        rows += _gamma_rows(gvalues, profile)
        n = len(tasks) * len(profile.seeds)
        per_task = {
            "exhaustive": gtiming["exhaustive_search_s"] / n,
            **{f"fisher-m{m}": gtiming[f"fisher_m{m}_search_s"] / n for m in profile.gamma_m},
            "gamma_embedding": gtiming["gamma_embed_s"] / n,
        }
        config = {
            **base,
            "fit": dataclasses.asdict(profile.fit),
            "k": profile.k,
            "tasks": "31 primitives + scramble",
            "embedding_dim": results[units[0].name].extras["dim"],
            "spearman_ceiling": results[units[0].name].extras["ceiling"],
            "behavioural_distance": "share of tasks.strings.PROBE (200 strings) where outputs differ",
            "gamma": {
                **{k: codeio_base[k] for k in ("split", "test_seed", "split_seed", "tasks", "profile")},
                **sizes,
                "m": list(profile.gamma_m),
                "search_s_per_task": per_task,
                "library_embedding_s": gtiming["gamma_library_s"],
                "restricted_search_agrees": [results[u.name].extras["restricted_agrees"] for u in gamma],
            },
        }
        return rows, config, list(profile.seeds), {**timing, **gtiming}

    return Plan(units + gamma, assemble, reference="rte")
