"""A model directory (``--model DIR``) checked before use, and its identity for cache keys.

Nothing here imports torch, so an experiment's ``check`` step can refuse a bad directory in a
moment, before any work. :func:`check_model_dir` reads only small files and the weights'
headers: a damaged directory fails with one line ("cannot load model at DIR: <reason>"), and
what only a full load can tell (shapes against the config) is checked by
:func:`taskextrap.llm.model.load_model` with the same message.

:func:`model_fingerprint` hashes the files a load reads, so a run's units and fine-tuning
checkpoints are keyed by the model's contents, not only by its path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from taskextrap.errors import TaskextrapError

CONFIG_FILE = "config.json"
# the character tokenizer of directories saved by earlier versions (now saved as tokenizer.json);
# the same names as taskextrap.llm.tokenizer's (no import: keep this light)
CHAR_TOKENIZER_FILE = "char_tokenizer.json"
CHAR_TOKENIZER_TYPE = "taskextrap-char"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".ckpt", ".gguf", ".onnx")
# files a load reads that must be JSON objects when present
JSON_OBJECTS = (
    CONFIG_FILE,
    CHAR_TOKENIZER_FILE,
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "generation_config.json",
)
# any one of these is enough for transformers' AutoTokenizer to find a tokenizer
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "tokenizer_config.json")
_MAX_HEADER = 100 * 2**20  # the safetensors library's own limit on a header's size
_HASH_CHUNK = 16 * 2**20


def model_error(path, reason: str) -> TaskextrapError:
    """The one-line error of a model directory that cannot be loaded."""
    return TaskextrapError(f"cannot load model at {path}: {reason}")


def check_model_dir(path: str | os.PathLike) -> Path:
    """``path`` as a Path after the cheap checks of a model directory; else a one-line
    :class:`TaskextrapError` "cannot load model at PATH: <reason>".

    Checked: it is a directory; ``config.json`` is a JSON object with a ``model_type`` (one
    transformers knows, when it is installed); the other JSON files a load reads parse as
    objects; there are weights, and every ``*.safetensors`` file's header is readable and
    accounts for the file's size exactly (random bytes and truncation fail here); there is a
    tokenizer: transformers' files, or else (a directory saved by earlier versions) a
    ``char_tokenizer.json`` that is one.
    """
    root = Path(path)
    reason = _problem(root)
    if reason is not None:
        raise model_error(path, reason)
    return root


def _problem(root: Path) -> str | None:
    """Why ``root`` is not a loadable model directory (None when the cheap checks pass)."""
    if not root.exists():
        return "no such directory (give a local Hugging Face model directory, or a hub id owner/name)"
    if not root.is_dir():
        return "not a directory (give the folder that holds config.json and the weights)"
    if not (root / CONFIG_FILE).is_file():
        return f"no {CONFIG_FILE} (not a saved Hugging Face model directory)"
    parsed = {}
    for name in JSON_OBJECTS:
        if (root / name).is_file():
            data, why = _json_object(root / name)
            if data is None:
                return why
            parsed[name] = data
    why = _config_problem(parsed[CONFIG_FILE])
    if why is not None:
        return why
    safetensors = sorted(root.glob("*.safetensors"))
    if not safetensors and not any((root / n).is_file() for n in ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        return "no weights (model.safetensors or pytorch_model.bin)"
    for f in safetensors:
        try:
            why = _safetensors_problem(f)
        except OSError as exc:
            why = f"cannot read {f.name} ({exc.strerror or type(exc).__name__})"
        if why is not None:
            return why
    if any((root / n).is_file() for n in HF_TOKENIZER_FILES):
        return None  # transformers' tokenizer, which a load prefers
    if CHAR_TOKENIZER_FILE in parsed:
        return _char_tokenizer_problem(parsed[CHAR_TOKENIZER_FILE])
    return f"no tokenizer (one of {', '.join(HF_TOKENIZER_FILES)}, or an earlier version's {CHAR_TOKENIZER_FILE})"


def _json_object(path: Path) -> tuple[dict | None, str | None]:
    """(the JSON object in ``path``, None) or (None, why it is not one)."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        return None, f"cannot read {path.name} ({exc.strerror or type(exc).__name__})"
    except UnicodeDecodeError:
        return None, f"{path.name} is not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"{path.name} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(data, dict):
        return None, f"{path.name} is a JSON {type(data).__name__}, not an object"
    return data, None


def _config_problem(config: dict) -> str | None:
    """Why ``config.json``'s contents cannot describe a model (None when they can)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        return f"{CONFIG_FILE} has no model_type"
    if importlib.util.find_spec("transformers") is not None:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

        if model_type not in CONFIG_MAPPING_NAMES:
            return f"{CONFIG_FILE} has model_type {model_type!r}, which this transformers does not know"
    return None


def _safetensors_problem(path: Path) -> str | None:
    """Why ``path`` is not a whole safetensors file, from its header alone (None when it is).

    The format: 8 bytes giving the header's length, the JSON header whose ``data_offsets`` place
    each tensor in the data, then the data, which must end where the last tensor ends.
    """
    name, size = path.name, path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else None
        if n is None or n > _MAX_HEADER:
            return f"{name} is not a safetensors file (unreadable header)"
        if 8 + n > size:
            return f"{name} is truncated (its header is cut off at {size} bytes)"
        try:
            header = json.loads(fh.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return f"{name} is not a safetensors file (unreadable header)"
    end = 0
    for key, entry in header.items() if isinstance(header, dict) else [(None, None)]:
        if key == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            return f"{name} is not a safetensors file (malformed header)"
        end = max(end, offsets[1])
    if 8 + n + end != size:
        return f"{name} is truncated or damaged (its header accounts for {8 + n + end} bytes, the file has {size})"
    return None


def _char_tokenizer_problem(data: dict) -> str | None:
    """Why a parsed ``char_tokenizer.json`` is not a character tokenizer (None when it is)."""
    alphabet = data.get("alphabet")
    if data.get("type") != CHAR_TOKENIZER_TYPE or not isinstance(alphabet, str):
        return f"{CHAR_TOKENIZER_FILE} is not a {CHAR_TOKENIZER_TYPE} tokenizer (type or alphabet missing)"
    if not alphabet or len(set(alphabet)) != len(alphabet):
        return f"{CHAR_TOKENIZER_FILE}'s alphabet is empty or repeats a character"
    return None


# ---------------------------------------------------------------------------- identity

_FINGERPRINTS: dict[tuple, str] = {}  # (resolved dir, each file's name, size, mtime) -> hash


def fingerprinted_files(path: str | os.PathLike) -> list[Path]:
    """The files of model directory ``path`` that :func:`model_fingerprint` hashes, sorted by
    name: every regular file at its top level, except hidden ones, documentation (README,
    LICENSE, NOTICE, ``*.md``) and, when there are safetensors weights, weights in other formats
    (a load reads only the safetensors ones then)."""
    root = Path(path)
    files = [p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")]
    has_safetensors = any(p.suffix == ".safetensors" for p in files)

    def kept(p: Path) -> bool:
        if p.suffix.lower() == ".md" or p.name.upper().startswith(("README", "LICENSE", "NOTICE")):
            return False
        return not (has_safetensors and p.suffix in WEIGHT_SUFFIXES and p.suffix != ".safetensors")

    return sorted((p for p in files if kept(p)), key=lambda p: p.name)


def model_fingerprint(path: str | os.PathLike) -> str:
    """The sha256 (hex) of model directory ``path``'s contents: each of
    :func:`fingerprinted_files` contributes its name, its length and its bytes.

    One changed byte of the weights, config or tokenizer gives another hash; the directory's own
    path is not in it (same files elsewhere, same hash). Computed once per process for a given
    state of the files (their names, sizes and modification times), so large weights are read
    once. A directory that fails :func:`check_model_dir` raises its one-line error.
    """
    root = check_model_dir(path)
    files = fingerprinted_files(root)
    state = tuple((p.name, st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()])
    key = (str(root.resolve()), state)
    if key not in _FINGERPRINTS:
        digest = hashlib.sha256()
        for p in files:
            digest.update(p.name.encode() + b"\0")
            digest.update(p.stat().st_size.to_bytes(8, "little"))
            with open(p, "rb") as fh:
                while chunk := fh.read(_HASH_CHUNK):
                    digest.update(chunk)
        _FINGERPRINTS[key] = digest.hexdigest()
    return _FINGERPRINTS[key]
