"""Task geometry of a language model (paper Appendix J): an empirical-Fisher embedding per task.

A task (a string primitive, a pair, or the null task :data:`SCRAMBLE`) is embedded by fitting a
LoRA adapter of the base model to that task alone (:func:`fit_lora`, few-shot prompts of fresh
strings, loss on the answer) and then taking the diagonal empirical Fisher of the adapter: the
mean squared gradient of each adapter weight over single-prompt batches (:func:`fisher`).
As in the paper, each layer's block is L2-normalised before concatenation (so no layer's
gradient scale dominates, :func:`layerwise`), the null task's vector is subtracted ("scramble
centring": the generic effort of reading and writing strings) and the result is L2-normalised
(:func:`embed_tasks`).

How well the embedding follows behaviour (:func:`rank_agreement`, :func:`knn_agreement`) is
measured against :func:`behavioural_distance`: the share of probe strings on which two tasks'
outputs differ.

Differences from the authors' script (reference 14): the base is the CodeIO default model (or a
``--model``) instead of GPT-2 Large; adapters sit on q/k/v of every layer (the default model has
4 layers, too few for a "logic core" of middle layers); the null task is a seeded permutation
that does not depend on Python's per-process ``hash``; a fixed number of steps replaces their
early stop.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from taskextrap import audit
from taskextrap.audit import Tagged
from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng
from taskextrap.tasks import strings as string_tasks

SCRAMBLE = "scramble"  # the null task of scramble centring
_LAYER = re.compile(r"layers\.(\d+)\.")


def scramble(s: str) -> str:
    """A permutation of ``s`` seeded by ``s`` itself (sha256, stable across processes): no rule."""
    seed = int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "little")
    return "".join(np.random.default_rng(seed).permutation(list(s)))


def run_task(task, s: str) -> str:
    """The output of ``task`` (a primitive, a pair or :data:`SCRAMBLE`) on ``s``."""
    return scramble(s) if task == SCRAMBLE else string_tasks.apply(task, s)


def task_items(g: np.random.Generator, task, n: int, n_shots: int = 3) -> list:
    """``n`` few-shot items of ``task`` on fresh random strings: ``(fewshot_prompt, " answer")``,
    tagged with the task for the leak audit."""
    from taskextrap.llm.codeio import answer_completion, fewshot_prompt

    out = []
    for _ in range(n):
        strings = string_tasks.random_strings(g, n_shots + 1)
        *shots, (q, t) = [(x, run_task(task, x)) for x in strings]
        out.append(Tagged((fewshot_prompt(shots, q), answer_completion(t)), task))
    return out


@dataclass(frozen=True)
class FisherSettings:
    """How one task is embedded: ``steps`` LoRA steps of ``batch`` items at ``lr`` (rank ``r``,
    scale ``alpha``, on ``modules``), then the Fisher over ``fisher_items`` single-prompt batches."""

    steps: int = 30
    batch: int = 8
    lr: float = 1e-3
    r: int = 8
    alpha: float = 16.0
    modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")
    fisher_items: int = 32

    def sft(self, seed: int):
        """The :class:`~taskextrap.llm.sft.SFTConfig` of the LoRA fit."""
        from taskextrap.llm.sft import LoraSettings, SFTConfig

        return SFTConfig(
            steps=self.steps,
            batch_size=self.batch,
            lr=self.lr,
            warmup_steps=min(5, self.steps // 5),
            seed=seed,
            lora=LoraSettings(self.r, self.alpha, 0.0, self.modules),
        )


def fit_lora(base, task, settings: FisherSettings, seed: int):
    """``base`` (a fresh LanguageModel, trained in place) with a LoRA adapter fitted to ``task``."""
    from taskextrap.llm.sft import train

    lm, _ = train(base, lambda g, n: task_items(g, task, n), settings.sft(seed))
    return lm


def fisher(lm, items) -> dict[str, np.ndarray]:
    """Diagonal empirical Fisher of ``lm``'s trainable (adapter) weights: per weight, the mean over
    ``items`` of its squared gradient on one item's answer loss. {parameter name: flat array}."""
    import torch

    from taskextrap.llm.sft import IGNORE, training_batch

    params = {n: p for n, p in lm.model.named_parameters() if p.requires_grad}
    if not params:
        raise TaskextrapError("the model has no trainable (adapter) weights to take a Fisher of")
    items = list(items)
    audit.record_items("fisher", items)  # the embedding is computed from these too, not only the LoRA fit
    total = {n: torch.zeros_like(p) for n, p in params.items()}
    for item in items:
        ids, mask, lab = training_batch(lm, [item])
        logits = lm.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), lab[:, 1:].reshape(-1), ignore_index=IGNORE
        )
        grads = torch.autograd.grad(loss, list(params.values()))
        for (n, _), gr in zip(params.items(), grads, strict=True):
            total[n] += gr.detach() ** 2
    return {n: (t / len(items)).flatten().cpu().numpy().astype(np.float64) for n, t in total.items()}


def layerwise(parts: dict[str, np.ndarray], eps: float = 1e-12) -> np.ndarray:
    """Each layer's weights (grouped by ``layers.<i>.`` in their names) L2-normalised, then
    concatenated in layer order: every layer counts equally (paper App. J, point 3)."""
    layers: dict[int, list[np.ndarray]] = {}
    for name in sorted(parts):
        m = _LAYER.search(name)
        if m is None:
            raise TaskextrapError(f"adapter weight {name!r} has no layer index")
        layers.setdefault(int(m.group(1)), []).append(parts[name])
    blocks = [np.concatenate(layers[k]) for k in sorted(layers)]
    return np.concatenate([b / (np.linalg.norm(b) + eps) for b in blocks])


def embed_task(load, task, settings: FisherSettings, seed: int) -> np.ndarray:
    """The layer-wise normalised Fisher vector of ``task``: a LoRA fit from ``load()`` (a fresh
    base model), then the Fisher over items of a stream no fit draws from."""
    lm = fit_lora(load(), task, settings, seed)
    items = task_items(rng(seed, "geometry", "fisher", str(task)), task, settings.fisher_items)
    return layerwise(fisher(lm, items))


def centre(raw: np.ndarray, null: np.ndarray | None) -> np.ndarray:
    """Rows of ``raw`` minus the null task's vector (none: as they are), each L2-normalised."""
    z = raw - (0.0 if null is None else null[None, :])
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise TaskextrapError("a task's embedding equals the null task's: it cannot be normalised")
    return z / norms


def cosine_distance(z: np.ndarray) -> np.ndarray:
    """1 - cosine similarity of every pair of rows."""
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    return np.clip(1.0 - u @ u.T, 0.0, 2.0)


def behavioural_distance(tasks, probe=None) -> np.ndarray:
    """The share of probe strings (default ``tasks.strings.PROBE``) on which two tasks' outputs differ."""
    probe = string_tasks.PROBE if probe is None else probe
    out = np.array([[run_task(t, s) for s in probe] for t in tasks], dtype=object)
    return np.array([[float(np.mean(out[i] != out[j])) for j in range(len(tasks))] for i in range(len(tasks))])


def _upper(d: np.ndarray) -> np.ndarray:
    return d[np.triu_indices(len(d), 1)]


def rank_agreement(d_embed: np.ndarray, d_behave: np.ndarray) -> float:
    """Spearman correlation of embedding and behavioural distances over every pair of tasks."""
    from scipy.stats import spearmanr

    if d_embed.shape != d_behave.shape or len(d_embed) < 3:
        raise TaskextrapError("need two square distance matrices of the same size, at least 3 tasks")
    return float(spearmanr(_upper(d_embed), _upper(d_behave)).statistic)


def output_distance(tasks, probe=None) -> np.ndarray:
    """How far apart two tasks' outputs are where they differ: the mean over probe strings of
    1 - difflib's similarity ratio of the two outputs (0 where equal). It breaks the many ties of
    :func:`behavioural_distance` (most pairs differ on every probe string)."""
    from difflib import SequenceMatcher

    probe = string_tasks.PROBE if probe is None else probe
    out = [[run_task(t, s) for s in probe] for t in tasks]
    n = len(tasks)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            d[i, j] = d[j, i] = np.mean(
                [
                    1.0 - SequenceMatcher(None, a, b).ratio() if a != b else 0.0
                    for a, b in zip(out[i], out[j], strict=True)
                ]
            )
    return d


def knn_agreement(d_embed: np.ndarray, d_behave: np.ndarray, k: int = 3, tiebreak: np.ndarray | None = None) -> float:
    """The share of each task's ``k`` nearest neighbours in the embedding that are among its ``k``
    nearest in behaviour, averaged over tasks (chance: k / (n - 1)). Behavioural ties are broken
    by ``tiebreak`` (e.g. :func:`output_distance`), then by task order."""
    n = len(d_embed)
    if not 1 <= k < n:
        raise TaskextrapError(f"k must lie in [1, {n - 1}], got {k}")
    tiebreak = np.zeros_like(d_behave) if tiebreak is None else tiebreak
    hits = []
    for i in range(n):
        others = np.delete(np.arange(n), i)
        near_e = set(others[np.argsort(d_embed[i, others], kind="stable")[:k]])
        near_b = set(others[np.lexsort((tiebreak[i, others], d_behave[i, others]))[:k]])
        hits.append(len(near_e & near_b) / k)
    return float(np.mean(hits))


# ------------------------------------------------------------------- the embedding as Gamma


@dataclass(frozen=True)
class TargetContext:
    """The leak-audit label of a target's context items (:func:`context_items`): the examples
    (input, output) they are made from. A fixed label such as "target-context" would let an
    allow-list pass a query's answer embedded into Gamma's fit unseen; this one names every
    example, so an audit rejects any that is a held-out query (its ``allowed`` rule), and
    :meth:`check_item` (called by ``audit.record_items`` while a spy listens) confirms from the
    item's text that it is made from these examples only, not merely labelled so."""

    examples: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return "target-context " + ", ".join(f"{x!r}->{y!r}" for x, y in self.examples)

    def check_item(self, item) -> bool:
        """Whether ``item`` (prompt, completion) is one that :func:`context_items` makes from
        :attr:`examples`."""
        return tuple(item) in {tuple(i) for i in _context_texts(list(self.examples))}


def _context_texts(support: list) -> list[tuple[str, str]]:
    from itertools import permutations

    from taskextrap.llm.codeio import answer_completion, fewshot_prompt

    out = []
    for i, (q, t) in enumerate(support):
        rest = support[:i] + support[i + 1 :]
        out += [(fewshot_prompt(list(shots), q), answer_completion(t)) for shots in permutations(rest)]
    return out


def context_items(support, task=None) -> list:
    """Few-shot items made from a set of examples only (a target's support): each example in turn
    is the query, the others (in every order) its shots. Tagged for the leak audit with ``task``
    (a library task's name), by default with the :class:`TargetContext` of these examples."""
    support = [(str(x), str(y)) for x, y in support]
    if len(support) < 2:
        raise TaskextrapError("a context embedding needs at least 2 support examples")
    label = TargetContext(tuple(support)) if task is None else task
    return [Tagged(item, label) for item in _context_texts(support)]


def embed_items(load, items, settings: FisherSettings, seed: int) -> np.ndarray:
    """The layer-wise normalised Fisher vector of a fixed set of items: a LoRA fit on them
    (each step draws a batch from them), then the Fisher over them."""
    from taskextrap.llm.sft import train

    def sample(g: np.random.Generator, n: int) -> list:
        return [items[int(j)] for j in g.integers(len(items), size=n)]

    lm, _ = train(load(), sample, settings.sft(seed))
    return layerwise(fisher(lm, items))


def embed_like_context(load, task, n_support: int, settings: FisherSettings, seed: int) -> np.ndarray:
    """A library task's vector made the way a target's is (:func:`context_items` of ``n_support``
    fresh examples), so that both sit in the same space."""
    g = rng(seed, "geometry", "library", str(task))
    examples = [(s, run_task(task, s)) for s in string_tasks.random_strings(g, n_support)]
    return embed_items(load, context_items(examples, task), settings, seed)


def nearest_primitives(target: np.ndarray, library: np.ndarray) -> np.ndarray:
    """Library rows (primitives) ordered by cosine similarity to ``target``, nearest first."""
    u = library / np.linalg.norm(library, axis=1, keepdims=True)
    return np.argsort(-(u @ (target / np.linalg.norm(target))), kind="stable")


def restricted_choice(scores: np.ndarray, candidates: list, allowed: list):
    """The restricted search: the candidate of ``allowed`` with the lowest of one task's scores
    ``scores`` (one per entry of ``candidates``, e.g. ``tasks.strings.candidates()``; lower is
    better), the first listed in ``allowed`` on a tie. Candidates outside ``allowed`` never win."""
    scores = np.asarray(scores, dtype=float)
    if scores.shape != (len(candidates),):
        raise TaskextrapError(f"scores must have one value per candidate ({len(candidates)}), got {scores.shape}")
    index = _candidate_index(tuple(candidates))
    cols = [index[string_tasks.as_candidate(c)] for c in allowed]
    return allowed[int(np.argmin(scores[cols]))]


@lru_cache(maxsize=4)
def _candidate_index(candidates: tuple) -> dict:
    return {string_tasks.as_candidate(c): j for j, c in enumerate(candidates)}


def restricted_candidates(order, names, m: int) -> list:
    """The candidates a Gamma of ``m`` primitives allows: the ``m`` nearest singles, then every
    ordered pair of them (m + m^2 candidates, against 992 for the exhaustive search)."""
    if not 1 <= m <= len(order):
        raise TaskextrapError(f"m must lie in [1, {len(order)}], got {m}")
    top = [names[int(i)] for i in order[:m]]
    return top + [(a, b) for a in top for b in top]
