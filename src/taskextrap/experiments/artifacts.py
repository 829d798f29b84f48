"""Fitted models cached beside the units, so that experiments that fit the same models share them.

``parameter`` and ``parameter-multistep`` fit the same Strategy A RTE, transductive oracle and
inductive baselines on the same F1 library for each family, protocol and seed; whichever runs
first saves them here and the other loads them. An artifact is a folder
``<--out>/artifacts/<name>-<key>/`` holding each fitted estimator as ``save_pretrained`` writes it
(``config.json`` and ``model.safetensors``, with the library's fingerprint instead of the library:
the experiment has the library at hand) and other fitted arrays as safetensors files: one format
for a user's saved model and the experiments' shared fits, never a pickle. It is keyed like a unit
(:func:`taskextrap.experiments.units.fingerprint`: every setting that determines the fit, the
package's source hash and the torch threads it is computed with), so a loaded fit is the fit that
would have been computed, to the bit. A folder that cannot be read is a one-line warning and a
refit, never an error.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.experiments.units import fingerprint

T = TypeVar("T")
COMPLETE = "complete"  # written last into an artifact's folder: the folder is whole


def artifact_path(cache_dir: Path | None, name: str, config: dict) -> Path | None:
    """The folder of artifact ``name`` of ``config``: beside the unit cache ``cache_dir``
    (``<--out>/units``) in ``<--out>/artifacts`` (None without a cache)."""
    if cache_dir is None:
        return None
    key = fingerprint(**config, threads=torch.get_num_threads())
    return Path(cache_dir).parent / "artifacts" / f"{name}-{key}"


def cached_fit(
    cache_dir: Path | None,
    name: str,
    config: dict,
    fit: Callable[[], T],
    save: Callable[[T, Path], None],
    load: Callable[[Path], T],
) -> tuple[T, bool]:
    """``fit()``, or the fit saved under ``name`` and ``config``: ``load(folder)`` of the folder
    ``save(fitted, folder)`` wrote (into a temporary folder, renamed once complete, so a reader
    never sees half an artifact). Returns (the fitted object, whether it was loaded)."""
    path = artifact_path(cache_dir, name, config)
    if path is not None and (path / COMPLETE).exists():
        try:
            return load(path), True
        except (TaskextrapError, KeyError, ValueError, RuntimeError, OSError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            warnings.warn(
                f"fitted models {path.name} cannot be used ({reason}); fitting them again",
                TaskextrapWarning,
                stacklevel=2,
            )
            shutil.rmtree(path, ignore_errors=True)
    fitted = fit()
    if path is not None:
        _write_folder(path, lambda tmp: save(fitted, tmp))
    return fitted, False


def _write_folder(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` into a fresh temporary folder beside ``path``, then the folder renamed to
    ``path``; if another process got there first, its folder is kept (the same fit)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write(tmp)
        (tmp / COMPLETE).write_text("")
        try:
            os.rename(tmp, path)
        except OSError:  # another writer's folder is there (a directory rename does not replace it)
            if not (path / COMPLETE).exists():
                shutil.rmtree(path, ignore_errors=True)
                os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
