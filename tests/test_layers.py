"""No import points upward: the package's parts form layers in the order data flows
(family -> library -> Gamma -> Psi and language models -> search -> estimator -> baselines ->
results -> experiments -> command line), and a module imports only from its own layer or below.
Imports inside functions count too."""

import ast
from pathlib import Path

import taskextrap

ROOT = Path(taskextrap.__file__).parent

# Lowest first. A name is a subpackage (a folder) or a top-level module.
LAYERS = [
    {"errors", "seeding", "validation", "provenance", "files", "audit", "sharding", "lanes"},  # foundations
    {"tasks"},  # families, libraries, protocols
    {"scaling"},  # scalers fitted on a library
    {"embed"},  # Gamma
    {"operators"},  # Psi networks
    {"llm"},  # language models, prompts, SFT
    {"search"},  # index, decomposer, likelihood search
    {"estimators"},  # the estimator contract
    {"baselines"},  # inductive, oracles, context-only
    {"report"},  # results schema, tables, plots
    {"workflow"},  # fit / predict / evaluate on a user's observed tasks
    {"experiments"},  # registered experiments
    {"cli"},  # the command line
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_parts(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "taskextrap":
            names = node.module.split(".")[1:2] or [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] for a in node.names if a.name.startswith("taskextrap.")]
        else:
            continue
        yield from (n for n in names if n in LEVEL)


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(p) for p in ROOT.rglob("*.py")} - {"__init__", "__main__"}
    assert parts <= set(LEVEL), f"give these a layer in tests/test_layers.py: {sorted(parts - set(LEVEL))}"


def test_no_import_points_upward():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        part = _part(path)
        if part not in LEVEL:
            continue
        upward += [
            f"{path.relative_to(ROOT)} imports {name}" for name in _imported_parts(path) if LEVEL[name] > LEVEL[part]
        ]
    assert not upward, "\n".join(upward)


def test_no_module_is_imported_under_a_one_letter_name():
    """``import ... as X`` hides what a name holds: the package imports modules under their names."""
    import re

    bad = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in sorted(ROOT.rglob("*.py"))
        for m in re.finditer(r"import [a-z_0-9]+ as [A-Za-z]\b", path.read_text())
    ]
    assert not bad, bad
