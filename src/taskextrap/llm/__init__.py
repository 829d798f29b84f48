"""Causal language models for the RTE's LLM regime (paper Algorithm 2).

Relational fine-tuning (:mod:`.sft`; one run of an experiment: :mod:`.finetune`), scoring and
generation (:mod:`.scorer`, :mod:`.generate`) on Hugging Face causal LMs. ``transformers`` and
``peft`` belong to the optional ``[llm]`` extra, so this package imports nothing heavy: each
module checks for them at use and raises a one-line :class:`~taskextrap.errors.TaskextrapError`
when they are missing.
"""

from __future__ import annotations

import importlib.util

from taskextrap.errors import TaskextrapError

MISSING_EXTRA = "the llm extra is not installed: pip install 'taskextrap[llm]'"


def require(*modules: str) -> None:
    """Raise a one-line TaskextrapError unless every named module of the ``[llm]`` extra is importable."""
    for name in modules or ("transformers",):
        if importlib.util.find_spec(name) is None:
            raise TaskextrapError(MISSING_EXTRA)
