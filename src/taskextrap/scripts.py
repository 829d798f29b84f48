"""How the repository's scripts (``benchmarks/x.py``, ``scripts/x.py``: folders, not packages)
import each other and how the tests import them: by path, under the name ``<folder>_<stem>``.

Why not put the folder on ``sys.path``: for the rest of the process every script's file name
then shadows an installed package of that name. ``benchmarks/kernels.py`` once hid the hub's
``kernels`` package from transformers, and every language model loaded after a test had
imported a benchmark failed (``cannot import name 'Mode' from 'kernels'``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from taskextrap.errors import TaskextrapError

__all__ = ["load_script", "sibling"]


def load_script(path: str | os.PathLike, fresh: bool = False) -> ModuleType:
    """The module of the Python file ``path``, kept in ``sys.modules`` as ``<folder>_<stem>``
    (a dataclass of the script looks its module up there) and executed once per process.

    Args:
        path: the script's file.
        fresh: execute it again even when it is loaded (a test that changes a module's globals
            starts from a clean copy).
    """
    path = Path(path).resolve()
    name = f"{path.parent.name}_{path.stem}"
    known = sys.modules.get(name)
    if known is not None and not fresh and getattr(known, "__file__", None) == str(path):
        return known
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise TaskextrapError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def sibling(anchor: str | os.PathLike, name: str) -> ModuleType:
    """The script ``name``.py in the folder of the file ``anchor`` (the caller's ``__file__``),
    by :func:`load_script`: ``sibling(__file__, "scale").write_result(...)``."""
    return load_script(Path(anchor).resolve().parent / f"{name}.py")
