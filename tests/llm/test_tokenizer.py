"""CharTokenizer (a transformers fast tokenizer with the character scheme's ids) and the HFTokenizer adapter."""

import importlib.util
import json

import pytest

if importlib.util.find_spec("transformers") is None:  # skip only when it is absent, never on a broken import
    pytest.skip("transformers is not installed: pip install 'taskextrap[llm]'", allow_module_level=True)

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskextrap.errors import TaskextrapError
from taskextrap.llm.tokenizer import (
    DEFAULT_ALPHABET,
    CHAR_TOKENIZER_FILE,
    TOKENIZER_FILE,
    CharTokenizer,
    HFTokenizer,
    char_alphabet,
    char_tokenizer_hf,
    upgrade_legacy_directory,
)


def scheme_ids(text: str, alphabet: str = DEFAULT_ALPHABET) -> list[int]:
    """The character scheme written out independently: pad 0, bos 1, eos 2, unk 3, then the alphabet."""
    return [4 + alphabet.index(ch) if ch in alphabet else 3 for ch in text]


def scheme_text(text: str, alphabet: str = DEFAULT_ALPHABET) -> str:
    """What decoding the ids of ``text`` gives back: unknown characters are dropped."""
    return "".join(ch for ch in text if ch in alphabet)


# newline, space, «», unknowns, special-token texts (plain characters here), a long text
CASES = [
    "",
    "f(x) = 3*x + 1\n«done»",
    "\n",
    " ",
    "  a  b ",
    "aéb",
    "\t",
    "a\tb\r\nc",
    "«»",
    "é\u2028😀",
    "<s>",
    "</s><pad><unk>",
    "a . b , c ' s n't ?",
    "x" * 5000,
    ("abc def\n" * 400) + "é",
]


@pytest.fixture(scope="module")
def hf():
    return char_tokenizer_hf()


def test_round_trip_and_specials():
    tok = CharTokenizer()
    text = "f(x) = 3*x + 1\n«done»"
    ids = tok.encode(text)
    assert all(i >= 4 for i in ids) and len(ids) == len(text)
    assert tok.decode(ids) == text
    assert tok.decode([tok.bos_token_id, *ids, tok.eos_token_id, tok.pad_token_id]) == text
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok.vocab_size == 4 + 1 + 95 + 2


def test_unknown_characters_map_to_unk():
    tok = CharTokenizer()
    assert tok.encode("aéb") == [tok.encode("a")[0], 3, tok.encode("b")[0]]
    assert tok.decode(tok.encode("aéb")) == "ab"


@pytest.mark.parametrize("text", CASES, ids=range(len(CASES)))
def test_the_transformers_tokenizer_has_the_scheme_ids(text, hf):
    ids = scheme_ids(text)
    assert hf.encode(text, add_special_tokens=False) == ids
    assert hf(text)["input_ids"] == [1, *ids]  # BOS first, as prompt_ids puts it
    assert CharTokenizer().encode(text) == ids
    assert hf.decode(ids, skip_special_tokens=True) == scheme_text(text) == CharTokenizer().decode(ids)


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(
        alphabet=st.one_of(st.sampled_from(DEFAULT_ALPHABET), st.characters(exclude_categories=["Cs"])), max_size=300
    )
)
def test_any_text_has_the_same_ids_under_both(text, hf):
    ids = scheme_ids(text)
    assert hf.encode(text, add_special_tokens=False) == ids == CharTokenizer().encode(text)
    assert hf.decode(ids, skip_special_tokens=True) == scheme_text(text) == CharTokenizer().decode(ids)


def test_a_lone_surrogate_is_unk_here_and_refused_by_transformers(hf):
    # the one difference: not Unicode text (it has no UTF-8 form), which the Rust tokenizer cannot take
    assert CharTokenizer().encode("a\ud800") == [70, 3]
    with pytest.raises(TypeError):
        hf.encode("a\ud800", add_special_tokens=False)


def test_decode_skips_specials_and_ids_out_of_range(hf):
    ids = [0, 1, 70, 2, 3, 5, 500, 71]
    assert CharTokenizer().decode(ids) == hf.decode(ids, skip_special_tokens=True) == "a b"


def test_save_load(tmp_path):
    from transformers import AutoTokenizer

    tok = CharTokenizer("xyz\n")
    tok.save(tmp_path)
    assert (tmp_path / TOKENIZER_FILE).is_file() and not (tmp_path / CHAR_TOKENIZER_FILE).exists()
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    back = CharTokenizer.load(tmp_path)
    assert back.alphabet == "xyz\n" and back.encode("zy?") == tok.encode("zy?") == [6, 5, 3]
    plain = AutoTokenizer.from_pretrained(tmp_path)  # no taskextrap code in the way
    assert (
        plain("zy\n")["input_ids"] == [1, 6, 5, 7] and plain.decode([1, 6, 5, 7, 2], skip_special_tokens=True) == "zy\n"
    )
    with pytest.raises(TaskextrapError, match=r"no tokenizer\.json or char_tokenizer\.json"):
        CharTokenizer.load(tmp_path / "missing")


def test_directories_of_earlier_versions_still_load_and_upgrade(tmp_path):
    (tmp_path / CHAR_TOKENIZER_FILE).write_text(json.dumps({"type": "taskextrap-char", "alphabet": "ab\n"}))
    old = CharTokenizer.load(tmp_path)
    assert old.alphabet == "ab\n" and old.encode("ba\nc") == [5, 4, 6, 3]
    upgrade_legacy_directory(tmp_path)
    assert not (tmp_path / CHAR_TOKENIZER_FILE).exists()
    new = CharTokenizer.load(tmp_path)
    assert new.alphabet == "ab\n" and new.encode("ba\nc") == old.encode("ba\nc")
    with pytest.raises(TaskextrapError, match=r"no tokenizer\.json or char_tokenizer\.json"):
        upgrade_legacy_directory(tmp_path)  # nothing left to upgrade


def test_bad_alphabet():
    for alphabet in ("aa", "", 7):
        with pytest.raises(TaskextrapError, match="alphabet"):
            CharTokenizer(alphabet)


def test_only_the_exact_character_tokenizer_is_recognised(hf, make_hf_tokenizer, tmp_path):
    assert char_alphabet(hf) == DEFAULT_ALPHABET
    assert char_alphabet(make_hf_tokenizer()) is None  # same ids, but a BPE model that parses "<s>"
    other = char_tokenizer_hf("abc")
    assert char_alphabet(other) == "abc"
    other.add_tokens(["abc"])
    assert char_alphabet(other) is None
    with pytest.raises(TaskextrapError, match="not the character tokenizer of this alphabet"):
        CharTokenizer("abd", char_tokenizer_hf("abc"))
    make_hf_tokenizer().save_pretrained(tmp_path)
    with pytest.raises(TaskextrapError, match="is not a character tokenizer"):
        CharTokenizer.load(tmp_path)


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
