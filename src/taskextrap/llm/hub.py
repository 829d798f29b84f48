"""``--model`` as a Hugging Face hub id (``owner/name``, optionally ``owner/name@revision``).

:func:`resolve_model` turns a ``--model`` value into a local model directory. An existing local
path is used as it is. Anything else that looks like a hub id is fetched with
``huggingface_hub.snapshot_download`` into the ordinary Hugging Face cache (``HF_HUB_CACHE``,
default ``~/.cache/huggingface/hub``), restricted to what a load reads: ``config.json``,
``generation_config.json``, the safetensors weights (and their index) and the tokenizer files,
at the repository's top level only. No pickled weights (``.bin``, ``.pt``) are downloaded, and
a repository that has no safetensors weights is refused. The snapshot folder then goes through
the same checks and fingerprint as any local directory.

The network is used only here, and only when a hub id is named. With ``HF_HUB_OFFLINE=1`` a
model already in the cache is used without any request; one that is not, or one that cannot be
fetched, is a one-line :class:`~taskextrap.errors.TaskextrapError` saying what to do. Nothing
here imports torch.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from taskextrap.errors import TaskextrapError

# what a load reads, at the top level of the repository (see taskextrap.llm.modeldir)
ALLOW_PATTERNS = [
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "*.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "char_tokenizer.json",
]
IGNORE_PATTERNS = ["*/*"]  # sub-folders (other formats, original checkpoints) are not what a load reads
# owner/name as the hub spells repositories: letters, digits, '-', '_', '.'; a revision after '@'
_HUB_ID = re.compile(
    r"(?P<repo>[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})"
    r"(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9_./-]{0,199}))?"
)
_RESOLVED: dict[tuple, Path] = {}  # (spec, cache, offline, endpoint) -> snapshot folder, once per process


def parse_hub_id(spec: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` of a hub id ``owner/name[@revision]``, else None (not a hub id)."""
    m = _HUB_ID.fullmatch(spec)
    if m is None or ".." in m["repo"] or "--" in m["repo"] or m["repo"].endswith((".", "-")):
        return None
    return m["repo"], m["revision"]


def is_hub_id(spec: str | os.PathLike) -> bool:
    """Whether ``--model`` value ``spec`` names a hub model: not an existing local path, and
    of the form ``owner/name`` or ``owner/name@revision``."""
    return _hub_id(os.fspath(spec)) is not None


def _hub_id(text: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` when ``text`` names a hub model (:func:`is_hub_id`), else None."""
    return None if Path(text).exists() else parse_hub_id(text)


def resolve_model(spec: str | os.PathLike) -> Path:
    """The local directory of ``--model`` value ``spec``: ``spec`` itself when it is not a hub
    id (:func:`is_hub_id`; :func:`taskextrap.llm.modeldir.check_model_dir` then says what is
    wrong with a bad path), else the snapshot folder of the hub model in the local cache,
    downloaded first when needed and allowed. Resolved once per process."""
    text = os.fspath(spec)
    if not text.strip():
        raise TaskextrapError("--model is empty: give a local model directory or a Hugging Face hub id owner/name")
    hub_id = _hub_id(text)
    if hub_id is None:
        return Path(text)
    key = (text, str(cache_dir()), offline(), os.environ.get("HF_ENDPOINT"))
    if key not in _RESOLVED:
        _RESOLVED[key] = _download(text, *hub_id)
    return _RESOLVED[key]


def cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now: ``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value now."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


def _download(spec: str, repo_id: str, revision: str | None) -> Path:
    """The snapshot folder of ``repo_id`` at ``revision``; a one-line error naming ``spec``
    and what to do when it cannot be had."""
    if importlib.util.find_spec("huggingface_hub") is None:
        raise TaskextrapError(
            f"cannot load model {spec}: a hub id needs huggingface_hub: pip install 'taskextrap[llm]'"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = cache_dir()
    is_offline = offline()
    try:
        folder = Path(
            snapshot_download(
                repo_id,
                revision=revision,
                cache_dir=where,
                local_files_only=is_offline,
                allow_patterns=ALLOW_PATTERNS,
                ignore_patterns=IGNORE_PATTERNS,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
            )
        )
    except GatedRepoError:
        reason = (
            "it is a gated repository: accept its terms on huggingface.co and log in "
            "(hf auth login), or pass a local directory"
        )
    except RevisionNotFoundError:
        reason = f"the repository has no revision {revision!r}"
    except RepositoryNotFoundError:
        reason = (
            "no such repository on the Hugging Face hub (or it is private: log in with hf auth login); "
            "a local directory must exist"
        )
    except IncompleteSnapshotError:
        reason = (
            f"its copy in the local Hugging Face cache ({where}) is incomplete (an interrupted download?) and "
            "the hub was not reached; download it again with network access"
        )
    except LocalEntryNotFoundError as exc:  # not in the cache, and the hub was not asked or not reached
        if is_offline:
            reason = (
                f"it is neither a local directory nor in the local Hugging Face cache ({where}), and "
                "HF_HUB_OFFLINE=1 is set; download it once with network access (unset HF_HUB_OFFLINE) "
                "or pass a local directory"
            )
        else:
            cause = exc.__cause__
            why = f" ({type(cause).__name__})" if cause is not None else ""
            reason = (
                f"it is neither a local directory nor in the local Hugging Face cache ({where}), and the hub "
                f"cannot be reached{why}; connect to the network once or pass a local directory"
            )
    except Exception as exc:  # noqa: BLE001 - an HTTP error, a full disk, a proxy...: one line all the same
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        reason = f"the download failed ({type(exc).__name__}{': ' + first if first else ''})"
    else:
        if not any(folder.glob("*.safetensors")):
            raise TaskextrapError(
                f"cannot load model {spec}: the repository has no safetensors weights at its "
                "top level, and taskextrap loads no pickled weights (.bin, .pt); pick a "
                "repository with model.safetensors or convert it"
            ) from None
        return folder
    raise TaskextrapError(f"cannot load model {spec}: {reason}") from None


def model_tag(spec: str | os.PathLike) -> str:
    """A file-name-safe name of ``--model`` value ``spec``: a local directory's own folder name,
    or the hub id (``Qwen/Qwen2.5-0.5B`` gives ``Qwen_Qwen2.5_0.5B``); characters other than
    letters, digits, '_' and '.' become '_'."""
    text = os.fspath(spec)
    name = text if is_hub_id(text) else Path(text).resolve().name
    return re.sub(r"[^A-Za-z0-9_.]+", "_", name) or "model"
