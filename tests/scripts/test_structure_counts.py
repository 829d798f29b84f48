"""scripts/structure_counts.py: the functions with many parameters (click commands told apart)
and the largest classes of a checkout."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("structure_counts", ROOT / "scripts" / "structure_counts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_it_counts_many_parameters_and_large_classes(tmp_path):
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "a.py").write_text(
        "import click\n"
        "def relay(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "def few(a, b):\n    pass\n"
        "@click.command()\n"
        "def cmd(a, b, c, d, e, f, g, h, i, j):\n    pass\n"
        "class Big:\n    def method(self, a, b, c, d, e, f, g, h):\n        pass\n"
    )
    c = _load().counts(tmp_path)
    assert [(n, where.split()[-1], click) for n, where, click in c["many"]] == [(10, "cmd", True), (9, "relay", False)]
    assert c["classes"] == [(3, "pkg/a.py:9 Big")]  # a method's self is not a parameter


def test_this_checkout_has_at_most_five_relays_and_no_class_over_400_lines():
    c = _load().counts(ROOT)
    assert len([m for m in c["many"] if not m[2]]) <= 5, c["many"]
    assert c["classes"][0][0] <= 400, c["classes"][0]
