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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from taskextrap.experiments.profiles import SeededProfile, get_profile
from taskextrap.experiments.registry import RunOptions, register
from taskextrap.experiments.units import Plan, UnitResult, gather, seed_units
from taskextrap.llm.geometry import FisherSettings
from taskextrap.report.schema import make_row
from taskextrap.seeding import derive_seed, rng

GROUP = "primitives"
METHODS = ("fisher", "fisher-uncentred", "random")
FIGURE = "llm-geometry.png"


@dataclass(frozen=True)
class GeometryProfile(SeededProfile):
    """Seeds, the per-task embedding settings and the k of the neighbour agreement."""

    name: str
    seeds: tuple[int, ...]
    fit: FisherSettings
    k: int = 3


PROFILES = {
    # quick: 30 LoRA steps and 32 Fisher prompts per task, one seed (about 3 min on 2 CPU cores)
    "quick": GeometryProfile("quick", (0,), FisherSettings(steps=30, fisher_items=32)),
    # paper: 200 steps of 8 (the authors stop a task once its epoch loss is below 0.02, within 50
    # epochs of 25 batches), the authors' 30 single-prompt Fisher batches, three seeds
    "paper": GeometryProfile("paper", (0, 1, 2), FisherSettings(steps=200, fisher_items=30)),
    "tiny": GeometryProfile("tiny", (0,), FisherSettings(steps=1, batch=2, fisher_items=2)),
}


def embed_all(load, fit: FisherSettings, seed: int, progress: bool = False) -> tuple[list, np.ndarray, np.ndarray]:
    """(primitive names, their raw Fisher vectors (31, d), the null task's vector (d,)), each task
    fitted from a fresh base with its own seed."""
    from tqdm import tqdm

    from taskextrap.llm.geometry import SCRAMBLE, embed_task
    from taskextrap.tasks.strings import NAMES

    tasks = [*NAMES, SCRAMBLE]
    vecs = [embed_task(load, t, fit, derive_seed(seed, "geometry", t))
            for t in tqdm(tasks, desc="llm-geometry", unit="task", disable=not progress)]
    return list(NAMES), np.stack(vecs[:-1]), vecs[-1]


def measures(z: np.ndarray, d_behave: np.ndarray, d_out: np.ndarray, k: int) -> dict[str, float]:
    """``spearman`` and ``fraction`` (kNN agreement, ties broken by ``d_out``) of an embedding
    against behaviour."""
    from taskextrap.llm.geometry import cosine_distance, knn_agreement, rank_agreement

    d = cosine_distance(z)
    return {"spearman": rank_agreement(d, d_behave), "fraction": knn_agreement(d, d_behave, k, d_out)}


def run_seed(load, profile: GeometryProfile, seed: int, plots: Path | None = None,
             progress: bool = False) -> UnitResult:
    """Every task's embedding for one seed, the measures of each method, and the figure."""
    from taskextrap.llm.geometry import behavioural_distance, centre, output_distance, rank_agreement

    t = time.perf_counter()
    names, raw, null = embed_all(load, profile.fit, seed, progress)
    maps = {"fisher": centre(raw, null), "fisher-uncentred": centre(raw, None),
            "random": rng(seed, "geometry", "random").standard_normal(raw.shape)}
    d_behave, d_out = behavioural_distance(names), output_distance(names)
    values = {f"{m}|{k}": np.array([v]) for m, z in maps.items()
              for k, v in measures(z, d_behave, d_out, profile.k).items()}
    if plots is not None:
        from sklearn.manifold import TSNE

        from taskextrap.report.plots import plot_task_geometry

        z = maps["fisher"]
        tsne = TSNE(2, perplexity=min(15.0, (len(z) - 1) / 3), init="pca", random_state=seed).fit_transform(z)
        plot_task_geometry(Path(plots) / FIGURE, names, z, tsne, "Fisher embedding (scramble-centred)")
    # the Spearman a perfect embedding reaches: most pairs differ on every probe string, one big tie
    ceiling = rank_agreement(d_behave + 1e-6 * d_out, d_behave)
    return UnitResult(values, {"total_s": time.perf_counter() - t}, {"dim": int(raw.shape[1]), "ceiling": ceiling})


@register("llm-geometry", "App. J: empirical-Fisher task embedding of the CodeIO model's string primitives "
          "(PCA, t-SNE, cosine map; agreement with behaviour)", PROFILES, options=("device", "extra"))
def run_llm_geometry(options: RunOptions, cache_dir: Path | None, plot_dir: Path | None):
    """One unit per seed; rows are the agreement of each embedding with behaviour."""
    from taskextrap.llm.pretrain import BaseModel, load_base

    model = BaseModel.from_extra(options.extra)
    profile = get_profile(PROFILES, options.profile).with_seeds(options.seeds, options.seed)

    def load():
        return load_base("codeio", model, options.device)

    base = {"experiment": "llm-geometry", "profile": profile.to_dict(), "model": model.label("codeio")}
    units = seed_units(profile.seeds, name=lambda s: f"llm-geometry-seed{s}", config=lambda s: {**base, "seed": s},
                       compute=lambda s, plots: run_seed(load, profile, s, plots, options.progress),
                       plot_dir=plot_dir, plot_file=FIGURE)

    def assemble(results):
        values, timing = gather(results, units)
        rows = []
        for method in METHODS:
            for metric in ("spearman", "fraction"):
                rows.append(make_row("llm-geometry", GROUP, method, metric, np.stack(values[f"{method}|{metric}"], axis=1)))
        config = {**base, "fit": dataclasses.asdict(profile.fit), "k": profile.k, "tasks": "31 primitives + scramble",
                  "embedding_dim": results[units[0].name].extras["dim"],
                  "spearman_ceiling": results[units[0].name].extras["ceiling"],
                  "behavioural_distance": "share of tasks.strings.PROBE (200 strings) where outputs differ"}
        return rows, config, list(profile.seeds), timing

    return Plan(units, assemble, reference="fisher")
