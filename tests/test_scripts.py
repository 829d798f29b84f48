"""The repository's scripts import each other by path (``taskextrap.scripts``), never through
``sys.path``, and none is named like an installed package: once ``benchmarks/kernels.py`` hid the
hub's ``kernels`` package and every language model load after a benchmark's import failed."""

import ast
import importlib.machinery
import re
import sys
from pathlib import Path

import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.scripts import load_script, sibling

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])


def _optional_packages_transformers_probes() -> set[str]:
    """The packages transformers looks for at import (``_is_package_available("name")``): absent
    ones too, which a file of that name on ``sys.path`` would stand in for."""
    import transformers.utils.import_utils as probes

    return set(re.findall(r'_is_package_available\("([A-Za-z0-9_]+)"', Path(probes.__file__).read_text()))


def test_no_script_is_named_like_a_module_it_could_shadow():
    """Run as ``python benchmarks/x.py``, the script's folder is ``sys.path[0]``: a sibling named
    like an installed, standard or probed-for module would stand in for it in that process."""
    folders = {str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "scripts"), "", "."}
    path = [p for p in sys.path if p not in folders]
    probed = _optional_packages_transformers_probes()
    assert "kernels" in probed  # the probe list is read, not empty
    shadowing = [
        str(p.relative_to(ROOT))
        for p in SCRIPTS
        if p.stem in sys.stdlib_module_names
        or p.stem in probed
        or importlib.machinery.PathFinder.find_spec(p.stem, path) is not None
    ]
    assert not shadowing, f"rename these: an installed, standard or probed-for module has their name: {shadowing}"


def test_no_script_changes_sys_path():
    def touches(node) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr in ("insert", "append", "extend")
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "path"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "sys"
        )

    bad = [str(p.relative_to(ROOT)) for p in SCRIPTS if any(touches(n) for n in ast.walk(ast.parse(p.read_text())))]
    assert not bad, f"import siblings with taskextrap.scripts.sibling, not through sys.path: {bad}"


def test_a_script_loads_once_under_its_folder_and_name_and_leaves_sys_path_alone(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "helper.py").write_text("RUNS = []\nRUNS.append(1)\n")
    (tmp_path / "tools" / "user.py").write_text(
        "from taskextrap.scripts import sibling\nhelper = sibling(__file__, 'helper')\n"
    )
    before = list(sys.path)
    try:
        user = load_script(tmp_path / "tools" / "user.py")
        assert sys.modules["tools_user"] is user and sys.modules["tools_helper"] is user.helper
        assert sibling(tmp_path / "tools" / "user.py", "helper") is user.helper  # not executed again
        assert user.helper.RUNS == [1]
        assert load_script(tmp_path / "tools" / "helper.py", fresh=True) is not user.helper
        assert sys.path == before
    finally:
        for name in ("tools_user", "tools_helper"):
            sys.modules.pop(name, None)


def test_a_missing_or_failing_script_is_a_clear_error_and_not_left_half_loaded(tmp_path):
    with pytest.raises(TaskextrapError, match="not a Python file"):
        load_script(tmp_path / "absent.py")
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(RuntimeError, match="boom"):
        load_script(tmp_path / "broken.py")
    assert f"{tmp_path.name}_broken" not in sys.modules
