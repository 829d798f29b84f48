"""Likelihood scoring: the summed negative log-likelihood of each completion given its prompt.

This is the inner loop of the likelihood search in Algorithm 2. Sequences are exactly those of
training (``prompt_ids + completion_ids``); only completion tokens are scored. Batching never
changes a score: padding is masked and positions come from the mask, so a left-padded row sees
the same positions as the row scored alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import torch

from taskextrap.errors import TaskextrapError
from taskextrap.llm.model import LanguageModel


def completion_nll(
    lm: LanguageModel,
    prompts: Sequence[str],
    completions: Sequence[str],
    batch_size: int = 32,
    padding_side: str = "right",
    eos: bool = True,
    share_prefix: bool = True,
    prefix_groups: Sequence[Hashable] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Summed cross-entropy (nats) of ``completions[i]`` given ``prompts[i]``, shape ``(n,)``.

    The scored tokens are ``lm.completion_ids(completion, eos)``: EOS included when ``eos``.
    With ``share_prefix``, pairs of one group run their common prompt prefix once and score the
    rest of each prompt and its completion from that key/value cache; the numbers match
    ``share_prefix=False``. Groups are pairs with an identical prompt, or, with
    ``prefix_groups``, pairs with an equal key there (e.g. the leave-one-out prompts of one
    candidate, which share its reference blocks). The shared part is the longest common prefix
    of the group's prompt *token ids*, so any tokenizer or chat template is handled exactly.
    ``progress`` is called as ``progress(n_scored, n)`` after each batch. An empty completion is
    an error only when ``eos=False`` (with EOS it scores the probability of ending right away).
    """
    prompt_ids, comp_ids = _encode_pairs(lm, prompts, completions, eos)
    if padding_side not in ("left", "right"):
        raise TaskextrapError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    if batch_size < 1:
        raise TaskextrapError(f"batch_size must be positive, got {batch_size}")
    if prefix_groups is not None and len(prefix_groups) != len(prompts):
        raise TaskextrapError(f"{len(prompts)} prompts but {len(prefix_groups)} prefix_groups")
    n = len(prompt_ids)
    out = np.zeros(n, dtype=np.float64)
    keys = prompts if prefix_groups is None else prefix_groups
    groups = _groups(keys) if share_prefix else [[i] for i in range(n)]
    shared, single = [], []
    for g in groups:
        k = _common_prefix(prompt_ids, g)
        # one pair, or too little in common: sharing would cost an extra pass for nothing
        if len(g) > 1 and k >= MIN_SHARED:
            shared.append((g, k))
        else:
            single += g
    done = 0

    def report(k: int) -> None:
        nonlocal done
        done += k
        if progress is not None:
            progress(done, n)

    with torch.inference_mode():
        for rows in _length_batches(single, lambda i: len(prompt_ids[i]) + len(comp_ids[i]), batch_size):
            out[rows] = _score_full(lm, [prompt_ids[i] for i in rows], [comp_ids[i] for i in rows], padding_side)
            report(len(rows))
        # batches of distinct prefixes, longest first; each group brings all its continuations
        for chunk in _length_batches(range(len(shared)), lambda g: shared[g][1], batch_size):
            for rows, scores in _score_shared(
                lm, [shared[g] for g in chunk], prompt_ids, comp_ids, batch_size, padding_side
            ):
                out[rows] = scores
                report(len(rows))
    return out


MIN_SHARED = 8  # tokens: a shorter common prefix is not worth a separate forward pass


def _encode_pairs(lm: LanguageModel, prompts, completions, eos: bool) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of every pair, after checking the input; one-line errors for bad pairs."""
    if isinstance(prompts, str) or isinstance(completions, str):
        raise TaskextrapError("prompts and completions must be sequences of strings, not one string")
    if len(prompts) != len(completions):
        raise TaskextrapError(f"{len(prompts)} prompts but {len(completions)} completions")
    prompt_ids = [lm.prompt_ids(p) for p in prompts]
    comp_ids = [lm.completion_ids(c, eos=eos) for c in completions]
    limit = lm.max_length
    for i, (p, c) in enumerate(zip(prompt_ids, comp_ids, strict=True)):
        if not c:
            raise TaskextrapError(f"completion {i} is empty: there is no token to score (use eos=True)")
        if not p:
            raise TaskextrapError(f"prompt {i} is empty and the tokenizer has no BOS: nothing to condition on")
        if limit is not None and len(p) + len(c) > limit:
            raise TaskextrapError(f"pair {i} has {len(p) + len(c)} tokens, more than the model's {limit}")
    return prompt_ids, comp_ids


def _groups(keys: Sequence[Hashable]) -> list[list[int]]:
    """Indices of the pairs grouped by equal key, in first-seen order."""
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _common_prefix(prompt_ids: list[list[int]], rows: list[int]) -> int:
    """Length of the longest common prefix of the prompts ``rows``, at most the shortest prompt."""
    if not rows:
        return 0
    # what the lexicographically first and last prompts share, every prompt between them shares
    first, last = min(prompt_ids[i] for i in rows), max(prompt_ids[i] for i in rows)
    return next((j for j, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))


def _length_batches(items, length: Callable[[int], int], batch_size: int):
    """Items sorted longest first (the first batch hits memory limits early), cut into batches."""
    order = sorted(items, key=lambda i: -length(i))
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


def _pad(seqs: list[list[int]], pad_id: int, side: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ``seqs`` to one length on ``side``; return (ids, mask) as (B, L) long tensors."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        cols = slice(width - len(s), width) if side == "left" else slice(0, len(s))
        ids[r, cols] = torch.tensor(s, dtype=torch.long)
        mask[r, cols] = 1
    return ids.to(device), mask.to(device)


def _positions(mask: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
    """Position ids counting real tokens only, so padding never shifts a row's positions."""
    pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return pos if offset is None else pos + offset[:, None]


def _token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy in float32 (low-precision logits lose digits in the softmax)."""
    flat = torch.nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    )
    return flat.reshape(targets.shape)


def _score_full(lm: LanguageModel, prompts: list[list[int]], comps: list[list[int]], side: str) -> np.ndarray:
    """Scores from one forward pass over whole (prompt + completion) sequences."""
    seqs = [p + c for p, c in zip(prompts, comps, strict=True)]
    ids, mask = _pad(seqs, lm.tokenizer.pad_token_id, side, lm.device)
    width = ids.shape[1]
    # column of each row's first token, and of the logits predicting its completion tokens
    starts = (width - mask.sum(1)).tolist() if side == "left" else [0] * len(seqs)
    first = min(s + len(p) - 1 for s, p in zip(starts, prompts, strict=True))
    # logits only for the columns that predict some completion token: the vocab projection is big
    keep = torch.arange(first, width - 1, device=lm.device)
    logits = lm.model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask), logits_to_keep=keep).logits
    targets = ids[:, first + 1 :]
    scored = torch.zeros_like(targets, dtype=torch.bool)
    for r, (s, p, c) in enumerate(zip(starts, prompts, comps, strict=True)):
        lo = s + len(p) - first - 1  # completion tokens only: never the prompt, never padding
        scored[r, lo : lo + len(c)] = True
    nll = _token_nll(logits, targets) * scored
    return nll.sum(1).double().cpu().numpy()


def _score_shared(
    lm: LanguageModel, groups: list[tuple[list[int], int]], prompt_ids, comp_ids, batch_size: int, side: str
):
    """Yield (rows, scores): each group's shared prefix (its first ``k`` prompt tokens) runs once;
    the rest of each of its prompts and its completion continue from that cache."""
    prefixes = [prompt_ids[g[0]][:k] for g, k in groups]
    p_ids, p_mask = _pad(prefixes, lm.tokenizer.pad_token_id, side, lm.device)
    lengths = p_mask.sum(1)
    last = (lengths - 1) if side == "right" else torch.full_like(lengths, p_ids.shape[1] - 1)
    first = int(last.min())  # logits only from the earliest last-prefix column on
    keep = torch.arange(first, p_ids.shape[1], device=lm.device)
    out = lm.model(
        input_ids=p_ids, attention_mask=p_mask, position_ids=_positions(p_mask), use_cache=True, logits_to_keep=keep
    )
    cache = out.past_key_values
    # the last prefix position predicts each continuation's first token
    next_logits = out.logits[torch.arange(len(prefixes), device=lm.device), last - first]
    del out
    owner = {i: (r, k) for r, (g, k) in enumerate(groups) for i in g}  # pair -> its prefix row and length
    # continuation: the prompt tokens after the prefix, then the completion; only the latter is scored
    rest = {i: prompt_ids[i][owner[i][1] :] + comp_ids[i] for i in owner}
    skip = {i: len(prompt_ids[i]) - owner[i][1] for i in owner}
    for rows in _length_batches(list(owner), lambda i: len(rest[i]), batch_size):
        src = torch.tensor([owner[i][0] for i in rows], device=lm.device)
        yield (
            rows,
            _score_from_cache(
                lm, cache, src, p_mask, lengths, next_logits, [rest[i] for i in rows], [skip[i] for i in rows]
            ),
        )


def _score_from_cache(
    lm: LanguageModel,
    cache,
    src: torch.Tensor,
    p_mask: torch.Tensor,
    lengths: torch.Tensor,
    next_logits: torch.Tensor,
    conts: list[list[int]],
    skip: list[int],
) -> np.ndarray:
    """Scores of continuations ``conts`` of the cached prefixes ``src`` (one cache row each); the
    first ``skip[r]`` tokens of row r are prompt (conditioned on, not scored)."""
    rows_cache = _cache_rows(cache, src)
    c_ids, c_mask = _pad(conts, lm.tokenizer.pad_token_id, "right", lm.device)
    mask = torch.cat([p_mask[src], c_mask], dim=1)
    logits = lm.model(
        input_ids=c_ids,
        attention_mask=mask,
        position_ids=_positions(c_mask, lengths[src]),
        past_key_values=rows_cache,
        use_cache=True,
    ).logits
    # token j of a continuation is predicted by the prefix's last logits (j = 0) or by token j - 1
    logits = torch.cat([next_logits[src, None], logits[:, :-1]], dim=1)
    cols = torch.arange(c_ids.shape[1], device=lm.device)
    scored = c_mask * (cols[None, :] >= torch.tensor(skip, device=lm.device)[:, None])
    nll = _token_nll(logits, c_ids) * scored
    return nll.sum(1).double().cpu().numpy()


def _cache_rows(cache, src: torch.Tensor):
    """A cache holding rows ``src`` of ``cache`` (repeats allowed); ``cache`` itself is left intact.

    A forward pass appends to its cache, so each completion batch needs its own. Dynamic layers
    only ever rebind their tensors, so shallow copies of the layer objects suffice and the
    prompt cache is not duplicated; any other cache type is deep-copied to be safe.
    """
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    layers = getattr(cache, "layers", None)
    if layers is not None and all(type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) for layer in layers):
        rows = copy.copy(cache)
        rows.layers = [copy.copy(layer) for layer in layers]
    else:
        rows = copy.deepcopy(cache)
    rows.batch_select_indices(src)
    return rows
