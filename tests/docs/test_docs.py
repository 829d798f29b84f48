"""The documentation site: mkdocs.yml builds with ``mkdocs build --strict`` (every link, anchor and
API-reference docstring resolves), and no page points to files a user of the repository does not have."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the design notes and the reference outside the repository (../shared/...), which users never get
OUTSIDE = re.compile(r"(\.\./)?shared/(reference|paper)|DESIGN\.md")


@pytest.mark.slow  # a strict mkdocs build of the whole site: end to end, run by make test-slow
def test_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    reference = (site / "reference" / "estimators" / "index.html").read_text()
    assert "phi_scales" in reference and "return_std" in (site / "python-api" / "index.html").read_text()


def test_no_page_points_outside_the_repository():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    hits = [
        f"{page.relative_to(ROOT)}:{i}: {line.strip()[:120]}"
        for page in pages
        for i, line in enumerate(page.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, (
        "pointers to files outside the repository (link docs/results-schema.md or docs/design.md):\n" + "\n".join(hits)
    )


def test_the_readme_is_a_front_door():
    """At most 150 lines, the two commands first, and every repository link in it resolves
    (GitHub renders the README, which the site's strict build does not check)."""
    from pymdownx.slugs import slugify

    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    first_block = text.split("```")[1]
    assert first_block.splitlines()[1].startswith("make demo") and first_block.splitlines()[2].startswith("make test")
    slug = slugify(case="lower")
    broken = []
    for target in re.findall(r"\]\(([^)#]+)(?:#([^)]+))?\)", text):
        path, anchor = ROOT / target[0], target[1]
        if not path.exists():
            broken.append(target[0])
        elif anchor and anchor not in {slug(h.strip(), "-") for h in re.findall(r"^#+ (.*)$", path.read_text(), re.M)}:
            broken.append(f"{target[0]}#{anchor}")
    assert not broken, f"README links that do not resolve: {broken}"


def _readme_block(heading: str) -> str:
    """The first python block under the README's ``## heading``."""
    section = (ROOT / "README.md").read_text().split(f"## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_own_tasks_module_builds_what_the_command_line_takes(tmp_path, monkeypatch):
    """The README's "Your own tasks" module, as written there: each object passes the checks its
    ``--family`` passes on the command line (the experiments' own resolvers)."""
    from taskextrap.experiments.composition import get_set
    from taskextrap.experiments.parameter import families_for

    (tmp_path / "mymodule.py").write_text(_readme_block("Your own tasks"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mymodule

    from taskextrap.experiments.catalogue import get_experiment
    from taskextrap.experiments.options import RunOptions

    settings = get_experiment("parameter").check(RunOptions(profile="tiny", family="mymodule:damped"))
    assert settings.family is mymodule.damped and families_for(settings.family) == [mymodule.damped]
    waves = get_set("mymodule:waves")
    assert waves is mymodule.waves and waves.split.test == (("bump", "sin"),)


@pytest.mark.slow
def test_the_readmes_python_example_runs(tmp_path):
    """The README's "Python in a minute" block, as written there, in a fresh process."""
    script = tmp_path / "example.py"
    script.write_text(_readme_block("Python in a minute"))
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("anchors: [") and "MSE: " in done.stdout
