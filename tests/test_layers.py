"""No import points upward: the package's parts form layers in the order data flows
(family -> library -> Gamma -> Psi and language models -> search -> estimator -> baselines ->
results -> experiments -> command line), and a module imports only from its own layer or below.
Imports inside functions count too, and so do imports for annotations only (under ``if
TYPE_CHECKING:``): a lower layer is typed by lower layers' classes, so reading it never needs an
upper one."""

import ast
from pathlib import Path

import taskextrap

ROOT = Path(taskextrap.__file__).parent

# Lowest first. A name is a subpackage (a folder) or a top-level module. The first layer: foundations.
LAYERS = [
    {"errors", "seeding", "validation", "provenance", "files", "audit", "sharding", "lanes", "engines", "scripts"},
    {"tasks"},  # families, libraries, protocols
    {"scaling"},  # scalers fitted on a library
    {"embed"},  # Gamma
    {"operators"},  # Psi networks
    {"llm"},  # language models, prompts, SFT
    {"profiles"},  # every experiment's sizes and settings, as plain frozen data
    {"search"},  # index, decomposer, likelihood search
    {"estimators"},  # the estimator contract
    {"baselines"},  # inductive, oracles, context-only
    {"posterior"},  # context posteriors on an estimator's prediction
    {"sequence_runs"},  # a sequence-model experiment's seed: fine-tuning runs, methods, prompt records
    {"report"},  # results schema, tables, plots
    {"workflow", "streaming"},  # fit / predict on a user's observed tasks; a large library indexed from Parquet
    {"evaluation"},  # evaluate a saved model on a user's held-out targets
    {"experiments"},  # registered experiments
    {"cli"},  # the command line
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_parts(path: Path):
    for node in _runtime_nodes(ast.parse(path.read_text())):
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


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at the top or inside a function)."""
    mods = {
        ".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in ROOT.rglob("*.py")
    }
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in _runtime_nodes(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("taskextrap"):
                for a in node.names:
                    name = f"{node.module}.{a.name}"
                    graph[m].add(name if name in mods else node.module)
            elif isinstance(node, ast.Import):
                graph[m].update(a.name for a in node.names if a.name.startswith("taskextrap"))
    return {m: {t for t in ts if t in mods and t != m} for m, ts in graph.items()}


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree``, those under ``if TYPE_CHECKING:`` (imports for annotations only)
    included: an annotation that names an upper layer's class ties the layers as an import does."""
    yield from ast.walk(tree)


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_circle():
    """No module of the package imports, through any chain of imports, a module that imports it
    back (issue 46). The registry and the run's options import no experiment; the catalogue,
    above them all, imports every one. A family checks itself through tasks.checks and a
    primitive set its recipe split through tasks.recipes. A job and its optimiser settings live
    in operators.jobs, below both the serial trainer and the stacked one; the unrolled chain
    network in operators.mlp. The estimators' saving module imports no estimator: it imports the
    regimes' modules by name when it reads a config."""
    found = _circles(_import_graph())
    assert not found, found


def test_a_second_experiment_of_one_name_is_refused():
    import pytest

    from taskextrap.errors import TaskextrapError
    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.registry import register

    get_experiment("length")
    with pytest.raises(TaskextrapError, match="an experiment named 'length' is registered already"):
        register("length", "again", {})(lambda options, cache_dir, plot_dir: None)


def test_the_import_graph_script_reports_what_this_test_checks():
    """scripts/import_graph.py (the closing note's before / after) reads the same graph: no circle
    and no upward import here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT.parents[1] / "scripts" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = mod.summary(ROOT.parents[1])
    assert " 0 circle(s)" in text and "upward imports between layers: 0" in text
    assert f"{len(_import_graph())} modules" in text


def test_the_sequence_model_experiments_stay_thin_glue():
    """experiments/codeio.py and parity.py keep the profiles, units, rows and config only (issue
    46: at most 400 lines together); what a seed runs lives in sequence_runs/."""
    lines = sum(len((ROOT / "experiments" / f).read_text().splitlines()) for f in ("codeio.py", "parity.py"))
    assert lines <= 400, (
        f"experiments/codeio.py + parity.py have {lines} lines: move what a seed runs to sequence_runs/"
    )


def test_the_tests_are_laid_out_as_the_package():
    """A test folder is a part of the package (its tests), or one of the few that test what is not
    in it: the scripts, the docs, the fuzzing of every public entry point and the test data."""
    tests = Path(__file__).parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    outside = {"scripts", "docs", "fuzz", "data"}
    assert folders - outside <= set(LEVEL), f"no package part is named {sorted(folders - outside - set(LEVEL))}"
    top = sorted(p.stem.removeprefix("test_") for p in tests.glob("test_*.py"))
    whole = {"api_errors", "claims_hold", "determinism", "device", "layers", "leakage", "speed", "own_data"}
    assert set(top) - whole <= {p for p in LEVEL if (ROOT / f"{p}.py").is_file()}, (
        "a top-level test file tests a top-level module or the whole package; move the others into its part's folder"
    )
