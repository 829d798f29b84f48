"""The Relational Task Extrapolator with a language model (Algorithm 2; paper Section 4).

Phase 1 fine-tunes an extender on relational prompts of training tasks (a task shown with its
anchor and transformation). Phase 2 ranks every candidate decomposition of a target by the
extender's leave-one-out likelihood of the target's support examples
(:func:`taskextrap.search.likelihood.candidate_scores`), keeps the best (and every candidate
within a tie tolerance of it), and answers the target's queries from the prompts of those
candidates: the best one's answer (``rte``) and the per-query vote of the tied ones
(``rte-tie-vote``).

What is specific to a task (its candidates, prompts and answer format) comes from a
:class:`TaskAdapter`; the parity and CodeIO adapters live beside their prompts
(``llm.parity.ParityAdapter``, ``llm.codeio.CodeIOAdapter``). A target is
a task object (its support examples and queries, as the adapter reads them), not arrays: the
contexts of these regimes are strings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.estimators.base import Decomposition, Fittable
from taskextrap.sharding import Shard


class TaskAdapter(Protocol):
    """What a language-model task supplies to :class:`SequenceRTE`.

    ``candidates()``: the search space (decompositions: an anchor and a transformation), in a
    fixed order; ``loo_pairs(task, candidate)``: the (prompt, completion) pairs that hold out each
    support example in turn; ``query_prompts(task, candidate)``: one prompt per query of the
    task; ``parse(completion)``: the answer a completion gives; ``max_new_tokens``: the
    generation budget of an answer; ``prefix_of(candidate)`` (or None): candidates with an equal
    key share their prompts' beginning, which the scorer then runs once.
    """

    @property
    def max_new_tokens(self) -> int: ...

    @property
    def prefix_of(self) -> Callable[[object], Hashable] | None: ...

    def candidates(self) -> Sequence: ...

    def loo_pairs(self, task, candidate) -> list[tuple[str, str]]: ...

    def query_prompts(self, task, candidate) -> list[str]: ...

    def parse(self, completion: str): ...


@dataclass
class Answers:
    """What :meth:`SequenceRTE.answer` gives per task: the best candidate's answers (one per
    query) and raw completions, the voted answers, and the candidates that voted (best first)."""

    best: list[list]
    voted: list[list]
    completions: list[list[str]]
    voters: list[list[int]]


@dataclass(eq=False)
class SequenceRTE(Fittable):
    """RTE for language models: ``SequenceRTE(adapter, tune).fit(corpus)``, then
    ``decompose(tasks)`` and ``predict(tasks)``.

    Args:
        adapter: the task's candidates, prompts and answer format (:class:`TaskAdapter`).
        tune: ``tune(corpus) -> language model``: Phase 1's relational fine-tuning on a training
            corpus (a sampler of training-task prompts); None for :meth:`from_extender`.
        batch_size: sequences per scoring and generation pass.
        tie_tol: candidates within this many nats of the best vote (``search.likelihood``).
        max_tied: at most this many of them (best first); None: all.
        tasks_per_chunk: targets scored per saved chunk of the search (None: all at once).
        bounded: score exactly only the candidates that can be within ``tie_tol`` of the best
            (``candidate_scores``'s branch and bound, which needs non-negative NLLs): the full
            search's best and tied candidates with its scores up to batch rounding (a pair's NLL
            moves by up to ~6e-05 nats with its batch, so a candidate that close to the tie
            boundary can fall either way), the others ``inf``. False scores every candidate (what
            a posterior over all candidates, or an arg-min over a subset of them, needs).

    Examples:
        A task adapter names the candidates and writes the prompts. The extender here is a tiny
        untrained character model, so the ranking means nothing; a fine-tuned one answers for real:

        >>> from taskextrap.estimators.sequence import SequenceRTE
        >>> from taskextrap.llm.model import build_char_model
        >>> class Rules:  # which rule maps each shot's input to its output
        ...     max_new_tokens, prefix_of = 3, None
        ...     def candidates(self):
        ...         return ["copy", "swap"]
        ...     def loo_pairs(self, task, rule):
        ...         return [(f"{rule} {x} =>", f" {y}") for x, y in task["shots"]]
        ...     def query_prompts(self, task, rule):
        ...         return [f"{rule} {task['query']} =>"]
        ...     def parse(self, completion):
        ...         return completion.strip()
        >>> lm = build_char_model(d_model=16, n_layers=1, n_heads=2, seed=0)
        >>> rte = SequenceRTE.from_extender(Rules(), lm)
        >>> tasks = [{"shots": [("ab", "ba"), ("cd", "dc")], "query": "ef"}]
        >>> d = rte.decompose(tasks)  # every candidate's leave-one-out NLL, best first
        >>> d.anchors.shape
        (1, 2)
        >>> len(rte.answer(tasks, d).best[0])  # one answer per query
        1
    """

    adapter: TaskAdapter
    tune: Callable | None = None
    batch_size: int = 64
    tie_tol: float | None = None
    max_tied: int | None = None
    tasks_per_chunk: int | None = None
    bounded: bool = True

    fitted_attribute = "extender_"  # the fine-tuned model, set by fit (or from_extender)
    library_kind = "corpus"

    @classmethod
    def from_extender(cls, adapter: TaskAdapter, extender, **kwargs) -> SequenceRTE:
        """An estimator whose Phase 1 is done: ``extender`` is the fine-tuned model."""
        rte = cls(adapter, **kwargs)
        rte.extender_ = extender
        return rte

    SAVED_ARGUMENTS = ("batch_size", "tie_tol", "max_tied", "tasks_per_chunk", "bounded")
    EXTENDER = "extender"  # the fine-tuned model's folder inside a saved estimator's

    def save_pretrained(self, folder, library: bool = True) -> Path:
        """Write this fitted estimator into ``folder``: ``config.json`` (its arguments but the
        adapter and ``tune``, which are code; the taskextrap version and source hash) and the
        fine-tuned extender in ``folder/extender`` (``llm.model.save_model``: transformers'
        formats, safetensors weights). ``library`` is accepted for the common signature (the
        training corpus is not needed to predict). Returns the folder."""
        from taskextrap import __version__
        from taskextrap.estimators.saving import FORMAT, encode
        from taskextrap.files import write_json_atomic
        from taskextrap.llm.model import save_model
        from taskextrap.provenance import source_hash

        self.check_is_fitted()
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise TaskextrapError(f"cannot save into {folder}: it is a file, not a folder")
        save_model(self.extender_, folder / self.EXTENDER)
        config = {
            "format": FORMAT,
            "class": type(self).__name__,
            "params": {k: encode(getattr(self, k), f"SequenceRTE({k}=...)") for k in self.SAVED_ARGUMENTS},
            "adapter": type(self.adapter).__name__,
            "taskextrap": __version__,
            "source_hash": source_hash(),
        }
        write_json_atomic(folder / "config.json", config)
        return folder

    @classmethod
    def from_pretrained(
        cls, folder, library=None, trust_code: bool = False, adapter: TaskAdapter | None = None
    ) -> SequenceRTE:
        """The estimator :meth:`save_pretrained` wrote into ``folder``, with its task ``adapter``
        (code, so given again: the same class as saved); ``tune`` is None (it is fitted).
        ``trust_code`` is accepted for the contract: nothing here is imported by name."""
        from taskextrap.estimators.saving import FORMAT, decode
        from taskextrap.files import read_json
        from taskextrap.llm.model import load_model
        from taskextrap.provenance import source_hash

        folder = Path(folder)
        if adapter is None:
            raise TaskextrapError(
                "SequenceRTE.from_pretrained needs the task adapter: from_pretrained(folder, adapter=...)"
            )
        if not (folder / "config.json").is_file():
            raise TaskextrapError(
                f"{folder} holds no saved model: config.json is missing (save one with save_pretrained)"
            )
        config = read_json(folder / "config.json")
        if not isinstance(config, dict) or config.get("format") != FORMAT or config.get("class") != cls.__name__:
            raise TaskextrapError(f"{folder / 'config.json'} is not a saved {cls.__name__} of format {FORMAT}")
        if config.get("adapter") != type(adapter).__name__:
            raise TaskextrapError(
                f"{folder} was saved with a {config.get('adapter')} adapter, not a {type(adapter).__name__}"
            )
        if config.get("source_hash") != source_hash():
            warnings.warn(
                f"{folder} was saved by other taskextrap code (source {config.get('source_hash')}; this is "
                f"{source_hash()}): its predictions may differ",
                TaskextrapWarning,
                stacklevel=2,
            )
        params = {k: decode(v) for k, v in config["params"].items()}
        return cls.from_extender(adapter, load_model(folder / cls.EXTENDER), **params)

    def fit(self, library, progress=None) -> SequenceRTE:
        """Phase 1: the extender fine-tuned on ``library`` (a training corpus) by ``tune``.

        Returns:
            The estimator itself, with ``extender_`` the fine-tuned model.
        """
        if self.tune is None:
            raise TaskextrapError(
                "fit needs tune (corpus -> language model); an estimator made by from_extender is fitted already"
            )
        self.extender_ = self.tune(library)
        return self

    def decompose(
        self, tasks, cache_dir: Path | None = None, shard: Shard = Shard(), progress: str | None = None
    ) -> Decomposition | None:
        """Phase 2's likelihood search: every candidate of each task ranked by its summed
        leave-one-out NLL (anchors (n, C) candidate indices, best first; score (n, C), ``inf``
        past the tie tolerance when ``bounded``; phi (n, C, 0)). ``cache_dir``, ``shard`` and
        ``progress`` are the search's (resumable chunks, a share of the work; None from a non-lead
        process of a shard).

        Returns:
            A :class:`~taskextrap.estimators.base.Decomposition`: ``anchors`` (n, c)
                candidate indices best first, ``score`` (n, c) their summed leave-one-out
                NLL in nats, ``extras['scores']`` every candidate's score in candidate
                order.
        """
        from taskextrap.search.likelihood import candidate_scores

        self.check_is_fitted()
        cands = self.adapter.candidates()
        scores = candidate_scores(
            self.extender_,
            tasks,
            cands,
            self.adapter.loo_pairs,
            self.batch_size,
            cache_dir,
            self.tasks_per_chunk,
            self.adapter.prefix_of,
            shard,
            progress,
            self.tolerance() if self.bounded else None,
        )
        if scores is None:
            return None
        order = np.argsort(scores, axis=1, kind="stable")  # best first; exact ties in enumeration order
        return Decomposition(
            order, np.zeros((*order.shape, 0)), np.take_along_axis(scores, order, 1), {"scores": scores}
        )

    def voters(self, decomposition: Decomposition) -> list[np.ndarray]:
        """The candidates of each task within ``tie_tol`` of its best (at most ``max_tied``), best first."""
        from taskextrap.search.likelihood import tied

        return [tied(s, self.tolerance())[: self.max_tied] for s in decomposition.extras["scores"]]

    def tolerance(self) -> float:
        """The tie tolerance in nats: ``tie_tol``, or the search's default."""
        from taskextrap.search.likelihood import DEFAULT_TIE_TOL

        return DEFAULT_TIE_TOL if self.tie_tol is None else self.tie_tol

    def answer(self, tasks, decomposition: Decomposition | None = None) -> Answers:
        """Answers of each task's queries from its best candidate and the vote of its tied
        candidates, every needed prompt generated in one batched greedy pass.

        Returns:
            An :class:`Answers`: per task, the best candidate's answers and completions,
                the voted answers and the voting candidates.
        """
        from taskextrap.llm.generate import greedy_once
        from taskextrap.search.likelihood import vote

        self.check_is_fitted()
        d = self.decompose(tasks) if decomposition is None else decomposition
        assert d is not None  # an unsharded search always returns it
        cands = self.adapter.candidates()
        voters = self.voters(d)
        needed = sorted({(i, int(j)) for i, v in enumerate(voters) for j in v})
        prompts = [self.adapter.query_prompts(tasks[i], cands[j]) for i, j in needed]
        flat = greedy_once(
            self.extender_, [p for ps in prompts for p in ps], self.adapter.max_new_tokens, self.batch_size
        )
        raw, at = {}, 0
        for key, ps in zip(needed, prompts, strict=True):
            raw[key], at = flat[at : at + len(ps)], at + len(ps)
        said = {key: [self.adapter.parse(c) for c in outs] for key, outs in raw.items()}
        best = [int(v[0]) for v in voters]
        voted = [
            [vote([said[(i, int(j))][q] for j in v]) for q in range(len(said[(i, best[i])]))]
            for i, v in enumerate(voters)
        ]
        return Answers(
            [said[(i, b)] for i, b in enumerate(best)],
            voted,
            [raw[(i, b)] for i, b in enumerate(best)],
            [[int(j) for j in v] for v in voters],
        )

    def predict(self, tasks, decomposition: Decomposition | None = None) -> list[list]:
        """The best candidate's answer to each query of each task.

        Returns:
            Per task, the list of the best candidate's answers (one per query).
        """
        return self.answer(tasks, decomposition).best
