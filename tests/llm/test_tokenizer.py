"""CharTokenizer and the HFTokenizer adapter."""

import importlib.util

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from taskextrap.errors import TaskextrapError  # noqa: E402
from taskextrap.llm.tokenizer import TOKENIZER_FILE, CharTokenizer, HFTokenizer  # noqa: E402


def test_round_trip_and_specials():
    tok = CharTokenizer()
    text = "f(x) = 3*x + 1\n«done»"
    ids = tok.encode(text)
    assert all(i >= 4 for i in ids) and len(ids) == len(text)
    assert tok.decode(ids) == text
    assert tok.decode([tok.bos_token_id, *ids, tok.eos_token_id, tok.pad_token_id]) == text
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    assert tok.vocab_size == 4 + 1 + 95 + 2


def test_unknown_characters_map_to_unk():
    tok = CharTokenizer()
    assert tok.encode("aéb") == [tok.encode("a")[0], 3, tok.encode("b")[0]]
    assert tok.decode(tok.encode("aéb")) == "ab"


def test_save_load(tmp_path):
    tok = CharTokenizer("xyz\n")
    tok.save(tmp_path)
    assert (tmp_path / TOKENIZER_FILE).is_file()
    back = CharTokenizer.load(tmp_path)
    assert back.alphabet == "xyz\n" and back.encode("zy") == tok.encode("zy")
    with pytest.raises(TaskextrapError):
        CharTokenizer.load(tmp_path / "missing")


def test_bad_alphabet():
    with pytest.raises(TaskextrapError):
        CharTokenizer("aa")


def test_hf_adapter_matches_char_ids(make_hf_tokenizer):
    hf = HFTokenizer(make_hf_tokenizer())
    char = CharTokenizer()
    text = "hi there\n«"
    assert hf.encode(text) == char.encode(text)  # no BOS from encode
    assert hf.decode([1, *hf.encode(text), 2]) == text
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (1, 2, 0)
    assert hf.wrap_prompt("ab") == "ab"


def test_hf_chat_template_and_pad_fallback(make_hf_tokenizer):
    raw = make_hf_tokenizer()
    chat = HFTokenizer(raw, chat=True)
    assert chat.wrap_prompt("ab") == "<s>[user]ab[bot]"
    raw.pad_token = None
    assert HFTokenizer(raw).pad_token_id == raw.eos_token_id
    raw.chat_template = None
    with pytest.raises(TaskextrapError):
        HFTokenizer(raw, chat=True)
