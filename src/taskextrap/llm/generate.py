"""Batched decoding with a key/value cache: greedy, or seeded sampling.

Our own loop rather than ``model.generate``: it needs no generation config from the hub and
uses the same left padding, attention mask and mask-derived positions as the scorer, so a
batched greedy decode equals the one-by-one decode.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from taskextrap.errors import TaskextrapError
from taskextrap.llm.model import LanguageModel
from taskextrap.llm.scorer import _pad, _positions
from taskextrap.seeding import torch_generator


def generate(
    lm: LanguageModel,
    prompts: Sequence[str],
    max_new_tokens: int = 64,
    batch_size: int = 32,
    temperature: float = 0.0,
    n_samples: int = 1,
    seed: int = 0,
    stop: str | None = "\n",
) -> list[list[str]]:
    """For each prompt, ``n_samples`` completions, each cut at the first ``stop`` and stripped.

    Greedy when ``temperature == 0`` (then the samples are identical), else sampling from the
    softmax at that temperature with a generator seeded by ``seed``: the same call gives the
    same text (the draws depend on ``batch_size``, which sets which rows share a step).
    Decoding of a row ends at EOS, at ``stop`` or after ``max_new_tokens``.
    """
    if isinstance(prompts, str):
        raise TaskextrapError("prompts must be a sequence of strings, not one string")
    if temperature < 0 or n_samples < 1 or batch_size < 1 or max_new_tokens < 0:
        raise TaskextrapError("need temperature >= 0, n_samples >= 1, batch_size >= 1 and max_new_tokens >= 0")
    # every sample is its own row, rows of one prompt adjacent; greedy samples are all equal
    reps = n_samples if temperature > 0 else 1
    rows = [lm.prompt_ids(p) for p in prompts for _ in range(reps)]
    if any(not r for r in rows):
        raise TaskextrapError("an empty prompt needs a tokenizer with a BOS token")
    gen = torch_generator(seed, "generate") if temperature > 0 else None
    texts: list[str] = []
    with torch.inference_mode():
        for k in range(0, len(rows), batch_size):
            ids = _decode_batch(lm, rows[k : k + batch_size], max_new_tokens, temperature, gen, stop)
            texts += [_cut(lm.tokenizer.decode(t), stop) for t in ids]
    return [texts[i * reps : (i + 1) * reps] * (n_samples // reps) for i in range(len(prompts))]


def greedy_once(lm: LanguageModel, prompts: Sequence[str], max_new_tokens: int = 64, batch_size: int = 32) -> list[str]:
    """The greedy completion of each prompt (as ``generate``), decoding each distinct prompt once.

    Searches ask for the same prompt many times (tied candidates, repeated queries); the
    duplicates reuse the first decoding instead of running the model again.
    """
    distinct = list(dict.fromkeys(prompts))
    outputs = generate(lm, distinct, max_new_tokens=max_new_tokens, batch_size=batch_size)
    got = {p: o[0] for p, o in zip(distinct, outputs, strict=True)}
    return [got[p] for p in prompts]


def _cut(text: str, stop: str | None) -> str:
    """``text`` up to the first ``stop`` (excluded), stripped."""
    if stop:
        text = text.split(stop, 1)[0]
    return text.strip()


def _decode_batch(
    lm: LanguageModel,
    prompts: list[list[int]],
    max_new_tokens: int,
    temperature: float,
    gen: torch.Generator | None,
    stop: str | None,
) -> list[list[int]]:
    """New token ids of each left-padded prompt (EOS excluded), decoded together with one cache."""
    tok = lm.tokenizer
    ids, mask = _pad(prompts, tok.pad_token_id, "left", lm.device)
    pos = _positions(mask)
    out_ids: list[list[int]] = [[] for _ in prompts]
    done = [False] * len(prompts)
    cache = None
    for _ in range(max_new_tokens):
        out = lm.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        cache = out.past_key_values
        nxt = _next_tokens(out.logits[:, -1], temperature, gen)
        for r, t in enumerate(nxt.tolist()):
            if done[r]:
                continue
            if t == tok.eos_token_id:
                done[r] = True
            else:
                out_ids[r].append(t)
                # stop text may span tokens: check the decoded tail, not the token
                done[r] = bool(stop and stop in tok.decode(out_ids[r][-len(stop) - 8 :]))
        if all(done):
            break
        # finished rows keep decoding (their tokens are dropped) so the batch stays rectangular
        ids = nxt[:, None].to(lm.device)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        pos = pos[:, -1:] + 1
    return out_ids


def _next_tokens(logits: torch.Tensor, temperature: float, gen: torch.Generator | None) -> torch.Tensor:
    """Argmax, or a draw from softmax(logits / temperature) with the CPU generator ``gen``."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float().cpu() / temperature, dim=-1)  # gen is a CPU generator
    return torch.multinomial(probs, 1, generator=gen)[:, 0].to(logits.device)
