"""Tokenizers with one small interface: a local character tokenizer and an adapter for HF ones.

Both expose ``encode`` (no special tokens), ``decode`` (special tokens skipped), ``wrap_prompt``
and the ids ``pad_token_id``, ``bos_token_id`` (may be None), ``eos_token_id`` plus
``vocab_size``. Where special tokens go is decided once, in :class:`taskextrap.llm.model.LanguageModel`,
so training and scoring build the exact same sequences.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from taskextrap.errors import TaskextrapError
from taskextrap.files import read_json, write_text_atomic

TOKENIZER_FILE = "char_tokenizer.json"
TOKENIZER_TYPE = "taskextrap-char"
DEFAULT_ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127)) + "«»"

PAD, BOS, EOS, UNK = 0, 1, 2, 3
N_SPECIAL = 4


class CharTokenizer:
    """One id per character of ``alphabet``, after the specials pad=0, bos=1, eos=2, unk=3.

    Built locally, so tiny test and from-scratch models need nothing from the hub.
    """

    pad_token_id = PAD
    bos_token_id = BOS
    eos_token_id = EOS
    unk_token_id = UNK

    def __init__(self, alphabet: str = DEFAULT_ALPHABET):
        if not alphabet or len(set(alphabet)) != len(alphabet):
            raise TaskextrapError("the tokenizer alphabet must be non-empty and have no repeated characters")
        self.alphabet = alphabet
        self._ids = {ch: N_SPECIAL + i for i, ch in enumerate(alphabet)}

    @property
    def vocab_size(self) -> int:
        """Number of ids, specials included."""
        return N_SPECIAL + len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens; characters outside the alphabet become unk."""
        return [self._ids.get(ch, UNK) for ch in text]

    def decode(self, ids) -> str:
        """Text of ``ids``; specials (and out-of-range ids) are skipped."""
        n = len(self.alphabet)
        return "".join(self.alphabet[i - N_SPECIAL] for i in map(int, ids) if N_SPECIAL <= i < N_SPECIAL + n)

    def wrap_prompt(self, text: str) -> str:
        """The prompt unchanged: a character model has no chat template."""
        return text

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``char_tokenizer.json`` into ``directory`` (created if needed); return its path."""
        # atomic: a reader never sees half a file
        return write_text_atomic(Path(directory) / TOKENIZER_FILE,
                                 json.dumps({"type": TOKENIZER_TYPE, "alphabet": self.alphabet}))

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "CharTokenizer":
        """Read the tokenizer that :meth:`save` wrote into ``directory``."""
        path = Path(directory) / TOKENIZER_FILE
        if not path.is_file():
            raise TaskextrapError(f"no {TOKENIZER_FILE} in {directory}")
        data = read_json(path)  # a one-line error for a missing, unreadable or non-JSON file
        if not isinstance(data, dict) or data.get("type") != TOKENIZER_TYPE:
            raise TaskextrapError(f"{path} is not a {TOKENIZER_TYPE} tokenizer file")
        if not isinstance(data.get("alphabet"), str):
            raise TaskextrapError(f"{path} has no alphabet string: not a {TOKENIZER_TYPE} tokenizer file")
        return cls(data["alphabet"])

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class HFTokenizer:
    """Adapter giving a local ``transformers`` tokenizer the :class:`CharTokenizer` interface.

    ``bos_token_id`` is the tokenizer's BOS only when the tokenizer itself would add it
    (``add_special_tokens=True``), so models that were trained without BOS (GPT-2, Qwen) keep
    their convention; ``add_bos`` overrides that. The pad id falls back to EOS (padding is
    always masked, so its value never matters).

    With ``chat=True``, :meth:`wrap_prompt` renders the prompt as one user turn through the chat
    template, generation prompt included. Templates usually write the BOS token as text; since
    ``encode`` parses special-token text, the ids then already start with BOS and
    :meth:`taskextrap.llm.model.LanguageModel.prompt_ids` does not add a second one.
    """

    def __init__(self, tokenizer, chat: bool = False, add_bos: bool | None = None):
        if chat and not getattr(tokenizer, "chat_template", None):
            raise TaskextrapError("chat=True needs a tokenizer with a chat template")
        if tokenizer.eos_token_id is None:
            raise TaskextrapError("the tokenizer has no EOS token; completions could not end")
        self.tokenizer = tokenizer
        self.chat = chat
        bos = tokenizer.bos_token_id
        if add_bos is None:
            add_bos = bos is not None and _adds_bos(tokenizer)
        self._bos = bos if add_bos else None

    @property
    def pad_token_id(self) -> int:
        """Pad id, EOS when the tokenizer has no pad token."""
        pad = self.tokenizer.pad_token_id
        return self.tokenizer.eos_token_id if pad is None else pad

    @property
    def bos_token_id(self) -> int | None:
        """BOS id to prepend to every prompt, or None."""
        return self._bos

    @property
    def eos_token_id(self) -> int:
        """EOS id appended after completions."""
        return self.tokenizer.eos_token_id

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without added special tokens (special-token text is still parsed)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids) -> str:
        """Text of ``ids`` with special tokens skipped."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def wrap_prompt(self, text: str) -> str:
        """The prompt as one user chat turn plus the generation prompt when ``chat``, else unchanged."""
        if not self.chat:
            return text
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)

    def __repr__(self) -> str:
        return f"HFTokenizer({type(self.tokenizer).__name__}, chat={self.chat}, bos={self._bos})"


def _adds_bos(tokenizer) -> bool:
    """Whether the tokenizer puts its BOS first when asked for special tokens."""
    ids = tokenizer.encode("a", add_special_tokens=True)
    return bool(ids) and ids[0] == tokenizer.bos_token_id
