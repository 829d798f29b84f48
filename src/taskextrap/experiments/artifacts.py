"""Fitted models cached beside the units, so that experiments that fit the same models share them.

``parameter`` and ``parameter-multistep`` fit the same Strategy A RTE, transductive oracle and
inductive baselines on the same F1 library for each family, protocol and seed; whichever runs
first saves them here and the other loads them. An artifact is one safetensors file (weights and
arrays, plus plain JSON meta: never a pickle) under ``<--out>/artifacts/<name>-<key>.safetensors``,
keyed like a unit (:func:`taskextrap.experiments.units.fingerprint`: every setting that
determines the fit, the package's source hash and the torch threads it is computed with), so a
loaded fit is the fit that would have been computed, to the bit. A file that cannot be read is
a one-line warning and a refit, never an error.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TypeVar
from collections.abc import Callable

import torch

from taskextrap.errors import TaskextrapError, TaskextrapWarning
from taskextrap.experiments.units import fingerprint
from taskextrap.files import read_state, write_state_atomic

T = TypeVar("T")


def artifact_path(cache_dir: Path | None, name: str, config: dict) -> Path | None:
    """Where artifact ``name`` of ``config`` lives: beside the unit cache ``cache_dir``
    (``<--out>/units``) in ``<--out>/artifacts`` (None without a cache)."""
    if cache_dir is None:
        return None
    key = fingerprint(**config, threads=torch.get_num_threads())
    return Path(cache_dir).parent / "artifacts" / f"{name}-{key}.safetensors"


def cached_fit(
    cache_dir: Path | None,
    name: str,
    config: dict,
    fit: Callable[[], T],
    save: Callable[[T], tuple[dict, dict]],
    load: Callable[[dict, dict], T],
) -> tuple[T, bool]:
    """``fit()``, or the fit saved under ``name`` and ``config``: ``load(arrays, meta)`` of the
    file ``save(fitted)`` wrote. Returns (the fitted object, whether it was loaded)."""
    path = artifact_path(cache_dir, name, config)
    if path is not None and path.exists():
        try:
            return load(*read_state(path)), True
        except (TaskextrapError, KeyError, ValueError, RuntimeError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            warnings.warn(
                f"fitted models {path.name} cannot be used ({reason}); fitting them again",
                TaskextrapWarning,
                stacklevel=2,
            )
    fitted = fit()
    if path is not None:
        write_state_atomic(path, *save(fitted))
    return fitted, False
