"""Tokenizers with one small interface: the character tokenizer and an adapter for HF ones.

Both expose ``encode`` (no special tokens), ``decode`` (special tokens skipped), ``wrap_prompt``
and the ids ``pad_token_id``, ``bos_token_id`` (may be None), ``eos_token_id`` plus
``vocab_size``. Where special tokens go is decided once, in :class:`taskextrap.llm.model.LanguageModel`,
so training and scoring build the exact same sequences.

The character tokenizer is an ordinary ``transformers`` fast tokenizer
(:func:`char_tokenizer_hf`: a ``tokenizers`` WordLevel model over single characters), saved as
``tokenizer.json`` and ``tokenizer_config.json``, so ``AutoTokenizer.from_pretrained`` loads a
character model's directory with no taskextrap code. :class:`CharTokenizer` wraps it with the
same ids computed by a dictionary lookup (many times faster on long prompts; the tests check
that both give the same ids for any text; the one exception is a lone surrogate, which is not
Unicode text and which the transformers tokenizer refuses). Directories saved before hold the older
``char_tokenizer.json`` (``{"type": "taskextrap-char", "alphabet": ...}``) and still load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from taskextrap.errors import TaskextrapError
from taskextrap.files import read_json, write_text_atomic

TOKENIZER_FILE = "tokenizer.json"  # the tokenizer itself, as the ``tokenizers`` library writes it
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # transformers' settings: special tokens, class
CHAR_TOKENIZER_FILE = "char_tokenizer.json"  # the older format of the character tokenizer: such directories still load
CHAR_TOKENIZER_TYPE = "taskextrap-char"
DEFAULT_ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127)) + "«»"

PAD, BOS, EOS, UNK = 0, 1, 2, 3
N_SPECIAL = 4
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # the texts of ids 0..3
# Oniguruma syntax (the ``tokenizers`` regex engine): (?m) lets '.' match a newline too, so every
# character, newline and space included, is its own piece
_ONE_CHARACTER = "(?m)."
# transformers' name for a plain fast tokenizer, understood by transformers 4 and 5 alike (5
# writes its own alias, TokenizersBackend, which 4 does not know)
_PORTABLE_CLASS = "PreTrainedTokenizerFast"


def _check_alphabet(alphabet) -> None:
    """A one-line error unless ``alphabet`` is a non-empty string without repeated characters."""
    if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(alphabet):
        raise TaskextrapError("the tokenizer alphabet must be a non-empty string with no repeated characters")


def char_tokenizer_hf(alphabet: str = DEFAULT_ALPHABET):
    """The character tokenizer as a ``transformers.PreTrainedTokenizerFast``.

    Ids: ``<pad>`` 0, ``<s>`` (BOS) 1, ``</s>`` (EOS) 2, ``<unk>`` 3, then one id per character
    of ``alphabet`` in order; a character outside it is ``<unk>``. A ``tokenizers`` WordLevel
    model over single characters: the pre-tokenizer isolates every character (newline and
    space too), the Fuse decoder joins them back without spaces, and special-token text in the
    input (``"<s>"``) is read as plain characters (``split_special_tokens``), so every string
    has the same ids as under the character scheme. Called with special tokens
    (``tokenizer(text)``), BOS is put first, as :meth:`taskextrap.llm.model.LanguageModel.prompt_ids`
    does for every prompt.
    """
    _check_alphabet(alphabet)
    from taskextrap.llm import require

    require("transformers", "tokenizers")
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update((ch, N_SPECIAL + i) for i, ch in enumerate(alphabet))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS[UNK]))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(_ONE_CHARACTER), behavior="isolated")
    backend.decoder = decoders.Fuse()
    bos = SPECIAL_TOKENS[BOS]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, BOS)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=SPECIAL_TOKENS[PAD],
        bos_token=bos,
        eos_token=SPECIAL_TOKENS[EOS],
        unk_token=SPECIAL_TOKENS[UNK],
        split_special_tokens=True,
        clean_up_tokenization_spaces=False,
    )


def char_alphabet(tokenizer) -> str | None:
    """The alphabet of ``tokenizer`` when it is exactly the character tokenizer
    :func:`char_tokenizer_hf` builds for that alphabet (same vocabulary, pipeline and special
    tokens, e.g. after a save and a load), else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    order = sorted(backend.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    if [i for _, i in order] != list(range(len(order))) or tuple(t for t, _ in order[:N_SPECIAL]) != SPECIAL_TOKENS:
        return None
    alphabet = "".join(t for t, _ in order[N_SPECIAL:])
    if len(alphabet) != len(order) - N_SPECIAL:  # a token of several characters: not a character tokenizer
        return None
    try:
        expected = char_tokenizer_hf(alphabet)
    except TaskextrapError:
        return None
    same_ids = [tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id]
    if (
        same_ids != [PAD, BOS, EOS, UNK]
        or not getattr(tokenizer, "split_special_tokens", False)
        or getattr(tokenizer, "clean_up_tokenization_spaces", True)
    ):
        return None
    return alphabet if _pipeline(backend) == _pipeline(expected.backend_tokenizer) else None


def _pipeline(backend) -> dict:
    """A ``tokenizers.Tokenizer``'s serialised pipeline, less its padding and truncation (which
    transformers sets per call)."""
    data = json.loads(backend.to_str())
    return {k: v for k, v in data.items() if k not in ("padding", "truncation")}


class HFTokenizer:
    """Adapter giving a local ``transformers`` tokenizer the interface of this module.

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
        """Ids of ``text`` without added special tokens (special-token text is still parsed,
        unless the tokenizer has ``split_special_tokens``)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids) -> str:
        """Text of ``ids`` with special tokens skipped."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def wrap_prompt(self, text: str) -> str:
        """The prompt as one user chat turn plus the generation prompt when ``chat``, else unchanged."""
        if not self.chat:
            return text
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the tokenizer's files into ``directory`` (``save_pretrained``); return the folder."""
        self.tokenizer.save_pretrained(directory)
        return Path(directory)

    def __repr__(self) -> str:
        return f"HFTokenizer({type(self.tokenizer).__name__}, chat={self.chat}, bos={self._bos})"


class CharTokenizer(HFTokenizer):
    """The character tokenizer: one id per character of ``alphabet``, after the specials pad=0,
    bos=1, eos=2, unk=3; BOS starts every prompt.

    ``tokenizer`` is the ``transformers`` tokenizer it saves and that other libraries use
    (:func:`char_tokenizer_hf`); ``encode`` and ``decode`` give the same results through a
    dictionary. Built locally, so tiny test and from-scratch models need nothing from the hub.
    """

    def __init__(self, alphabet: str = DEFAULT_ALPHABET, tokenizer=None):
        _check_alphabet(alphabet)
        if tokenizer is not None and char_alphabet(tokenizer) != alphabet:
            raise TaskextrapError("the transformers tokenizer given is not the character tokenizer of this alphabet")
        self.alphabet = alphabet
        self._ids = {ch: N_SPECIAL + i for i, ch in enumerate(alphabet)}
        super().__init__(char_tokenizer_hf(alphabet) if tokenizer is None else tokenizer, add_bos=True)

    @classmethod
    def from_hf(cls, tokenizer) -> CharTokenizer | None:
        """``tokenizer`` (a loaded ``transformers`` tokenizer) as a CharTokenizer when it is one
        (:func:`char_alphabet`), else None."""
        alphabet = char_alphabet(tokenizer)
        return None if alphabet is None else cls(alphabet, tokenizer)

    @property
    def unk_token_id(self) -> int:
        """Id of characters outside the alphabet."""
        return UNK

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens; characters outside the alphabet become unk."""
        return [self._ids.get(ch, UNK) for ch in text]

    def decode(self, ids) -> str:
        """Text of ``ids``; specials (and out-of-range ids) are skipped."""
        n = len(self.alphabet)
        return "".join(self.alphabet[i - N_SPECIAL] for i in map(int, ids) if N_SPECIAL <= i < N_SPECIAL + n)

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory`` (created if
        needed), loadable by ``AutoTokenizer.from_pretrained``; return the folder.

        The config names the class ``PreTrainedTokenizerFast``, which transformers 4 and 5 both
        load (5 would write its own alias, unknown to 4).
        """
        out = Path(directory)
        self.tokenizer.save_pretrained(out)
        config = read_json(out / TOKENIZER_CONFIG_FILE)
        config["tokenizer_class"] = _PORTABLE_CLASS
        write_text_atomic(out / TOKENIZER_CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True) + "\n")
        return out

    @classmethod
    def load(cls, directory: str | os.PathLike) -> CharTokenizer:
        """The character tokenizer saved in ``directory``: its ``tokenizer.json`` (what
        :meth:`save` writes), else the older ``char_tokenizer.json``."""
        root = Path(directory)
        if (root / TOKENIZER_FILE).is_file():
            from transformers import AutoTokenizer

            try:
                tok = AutoTokenizer.from_pretrained(root, local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - whatever transformers raises, one line
                raise TaskextrapError(f"cannot load the tokenizer in {root} ({type(exc).__name__})") from None
            found = cls.from_hf(tok)
            if found is None:
                raise TaskextrapError(f"{root / TOKENIZER_FILE} is not a character tokenizer")
            return found
        return cls.load_legacy(root)

    @classmethod
    def load_legacy(cls, directory: str | os.PathLike) -> CharTokenizer:
        """Read the ``char_tokenizer.json`` of a directory saved by earlier versions."""
        path = Path(directory) / CHAR_TOKENIZER_FILE
        if not path.is_file():
            raise TaskextrapError(f"no {TOKENIZER_FILE} or {CHAR_TOKENIZER_FILE} in {directory}")
        data = read_json(path)  # a one-line error for a missing, unreadable or non-JSON file
        if not isinstance(data, dict) or data.get("type") != CHAR_TOKENIZER_TYPE:
            raise TaskextrapError(f"{path} is not a {CHAR_TOKENIZER_TYPE} tokenizer file")
        if not isinstance(data.get("alphabet"), str):
            raise TaskextrapError(f"{path} has no alphabet string: not a {CHAR_TOKENIZER_TYPE} tokenizer file")
        return cls(data["alphabet"])

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def upgrade_legacy_directory(directory: str | os.PathLike) -> Path:
    """Replace the ``char_tokenizer.json`` of a model directory saved by earlier versions with
    the same tokenizer in transformers' files (:meth:`CharTokenizer.save`), so that
    ``AutoTokenizer.from_pretrained`` loads it; return the folder. The ids stay the same, so
    the model's numbers do too. A one-line error when there is no such file."""
    root = Path(directory)
    tok = CharTokenizer.load_legacy(root)
    tok.save(root)
    (root / CHAR_TOKENIZER_FILE).unlink()  # last: the folder always holds a tokenizer
    return root


def _adds_bos(tokenizer) -> bool:
    """Whether the tokenizer puts its BOS first when asked for special tokens."""
    ids = tokenizer.encode("a", add_special_tokens=True)
    return bool(ids) and ids[0] == tokenizer.bos_token_id
