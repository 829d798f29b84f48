"""mkdocs hook: the repository files that docs/ pages show but that live outside docs/.

The benchmark figures stay in ``benchmarks/results/figures/``, where the benchmarks write them, and
the pages link them as ``../benchmarks/results/figures/NAME.png`` so that the link works on GitHub.
This hook adds each of them to the site under ``assets/figures/`` and registers it under the
``../benchmarks/...`` path that the links name, so that mkdocs resolves (and checks) those links
as it does links inside docs/.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

FIGURES = "benchmarks/results/figures"  # relative to the repository root, one level above docs/


def on_files(files, config):
    """Add every figure under :data:`FIGURES` as ``../FIGURES/NAME`` (copied to ``assets/figures/``)."""
    root = Path(config["docs_dir"]).resolve().parent
    for path in sorted((root / FIGURES).glob("*.png")):
        figure = File.generated(
            config, f"../{FIGURES}/{path.name}", abs_src_path=str(path), inclusion=InclusionLevel.INCLUDED
        )
        figure.dest_uri = f"assets/figures/{path.name}"
        files.append(figure)
    return files
