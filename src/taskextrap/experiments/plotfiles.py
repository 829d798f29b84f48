"""Which plot files of a run folder belong to which unit, so that a run keeps the plots of its
own units (drawn now, or by an earlier run of the same units) and removes the others.

A unit that draws does so into a fresh temporary folder (:func:`drawing`); its files are then
written into ``plots/`` and listed under the unit's id (its name and fingerprint) in
``plots/.plots.json``, both while the manifest's lock is held, so a prune by another process
sharing the folder never removes a figure between its write and its listing. A unit read back
from the cache draws nothing, and the list says which files are still its own. Once the run's
results are written, :func:`prune` removes every ``*.png`` of ``plots/`` that is neither one of
this run's units' nor drawn during this run (a figure drawn from the assembled results): a run
with another family into the same folder leaves no figure of the old family behind. Only
``*.png`` files are ever removed (the package writes nothing else there), and the
``.drawing-*`` folders that units drew into inside ``plots/`` before they drew into a temporary
folder, left behind by a killed process, once an hour old; other files are left as they are.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterable, Iterator

from taskextrap.experiments.locks import Lock
from taskextrap.errors import TaskextrapError
from taskextrap.files import read_json, write_json_atomic

MANIFEST = ".plots.json"  # unit id -> the files it drew
_LOCK = ".plots.lock"  # held while the manifest is read and rewritten (two processes may share a run)
PLOT_GLOB = "*.png"  # what the package writes into plots/ (report.plots); nothing else is ever removed


def drawn(plot_dir: Path) -> dict[str, list[str]]:
    """The manifest of ``plot_dir``: unit id -> the files that unit drew (empty when there is
    none, or it cannot be read: then every drawing unit draws again)."""
    try:
        data = read_json(Path(plot_dir) / MANIFEST)
    except TaskextrapError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, list) and all(isinstance(f, str) for f in v)}


def has_plots(plot_dir: Path, unit_id: str, plot_file: str | None) -> bool:
    """Whether the unit ``unit_id`` drew into ``plot_dir`` and every file it drew (``plot_file``
    among them) is still there."""
    files = drawn(plot_dir).get(unit_id)
    if files is None or (plot_file is not None and plot_file not in files):
        return False
    return all((Path(plot_dir) / f).is_file() for f in files)


def _manifest_lock(plot_dir: Path) -> Lock:
    return Lock(Path(plot_dir) / _LOCK)


def _write(plot_dir: Path, manifest: dict[str, list[str]]) -> None:
    write_json_atomic(Path(plot_dir) / MANIFEST, dict(sorted(manifest.items())))


@contextmanager
def drawing(plot_dir: Path, unit_id: str) -> Iterator[Path]:
    """A fresh temporary folder (outside the run folder, so a killed process leaves nothing in
    it) for unit ``unit_id`` to draw into; when the block ends without an error its files are
    written into ``plot_dir`` (replacing those of the same name) and listed as the unit's."""
    with tempfile.TemporaryDirectory(prefix="taskextrap-drawing-") as tmp:
        yield Path(tmp)
        record(plot_dir, unit_id, {f.name: f.read_bytes() for f in sorted(Path(tmp).iterdir()) if f.is_file()})


def record(plot_dir: Path, unit_id: str, files: dict[str, bytes]) -> None:
    """Write ``files`` (name -> bytes) into ``plot_dir`` and list them as unit ``unit_id``'s, both
    under the manifest's lock (a concurrent :func:`prune` sees the files with their listing)."""
    from taskextrap.files import write_bytes_atomic

    plot_dir = Path(plot_dir)
    with _manifest_lock(plot_dir):
        for name, data in files.items():
            write_bytes_atomic(plot_dir / name, data)
        _write(plot_dir, {**drawn(plot_dir), unit_id: sorted(files)})


def stamps(plot_dir: Path) -> dict[str, tuple[int, int]]:
    """The plot files of ``plot_dir`` with their inode and modification time (:func:`prune`
    keeps the ones that change from one call to the next: drawn during this run)."""
    folder = Path(plot_dir)
    if not folder.is_dir():
        return {}
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob(PLOT_GLOB) if p.is_file()}


def prune(plot_dir: Path, unit_ids: Iterable[str], fresh: Iterable[str] = ()) -> list[str]:
    """Remove from ``plot_dir`` every plot file that is not one of ``unit_ids``' (by the
    manifest) nor in ``fresh`` (drawn during this run), and keep only those units in the
    manifest; returns the names removed. Nothing but ``*.png`` files is removed, besides the
    stale drawing folders of :func:`_remove_stale_drawings`."""
    plot_dir = Path(plot_dir)
    if not plot_dir.is_dir():
        return []
    ours = set(unit_ids)
    _remove_stale_drawings(plot_dir)
    with _manifest_lock(plot_dir):
        manifest = {k: v for k, v in drawn(plot_dir).items() if k in ours}
        keep = set(fresh).union(*manifest.values())
        removed = sorted(p.name for p in plot_dir.glob(PLOT_GLOB) if p.is_file() and p.name not in keep)
        for name in removed:
            os.unlink(plot_dir / name)
        if manifest or (plot_dir / MANIFEST).exists():
            _write(plot_dir, manifest)
    return removed


_STALE_S = 3600.0  # a drawing folder this old was left by a killed process, not one still drawing


def _remove_stale_drawings(plot_dir: Path) -> None:
    """Remove the ``.drawing-*`` folders inside ``plot_dir`` untouched for :data:`_STALE_S`
    seconds: units drew into them there before they drew into a temporary folder, and a killed
    process left them behind."""
    now = time.time()
    for folder in plot_dir.glob(".drawing-*"):
        if folder.is_dir() and not folder.is_symlink() and now - folder.stat().st_mtime > _STALE_S:
            shutil.rmtree(folder, ignore_errors=True)
