"""What a killed pitstop process leaves in its home, put right when the next manager opens it.

A process can die at any step of a protocol (the crash matrix, :mod:`pitstop.faults`, kills it
at each). The catalog is the truth, since every protocol commits its catalog row last; the disk
is brought back in line with it here:

1. A snapshot export's temp folder (``snapshots/.<name>.<id>.tmp``): the export never finished.
2. A replaced snapshot's old folder (``snapshots/.<name>.replaced-<id>``): if the catalog still
   describes the old snapshot, ``CREATE OR REPLACE SNAPSHOT`` died before its catalog row, so the
   old folder goes back into place (and the unfinished new one goes); otherwise the replace was
   recorded and the old folder is left over.
3. A snapshot folder without a catalog row: the export finished, its row was never committed.
4. A run folder that no job uses: a ``CREATE JOB`` that died before its catalog row, or a
   ``DROP JOB`` that died after it.
5. A replay's folder (``replays/<job>-<id>``): an ``EXPLAIN ANALYZE`` whose process was killed.
6. Jobs the catalog says are RUNNING: one process owns a home at a time (DuckDB's lock), so the
   process that ran them is gone. They are marked STOPPED, and resume like any stopped job when
   this process starts Spark.

Nothing is deleted there: what is not needed is moved into ``<home>/trash/<time>-<id>/`` and
logged, so that a person can look at it. The trash is emptied by age (:func:`empty_trash`): each
open removes the entries moved there more than ``PITSTOP_TRASH_DAYS`` days ago (7 by default),
never a younger one.

A folder that holds a listed snapshot's or a job's run folder further down (an older pitstop
made ``snapshots/a/b`` of a snapshot named ``a/b``) is in use, not left over.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pitstop.catalog.clock import now
from pitstop.catalog.rows import RUNNING, STOPPED
from pitstop.catalog.store import Catalog

log = logging.getLogger(__name__)
TRASH = "trash"


def tidy_home(home: Path, catalog: Catalog) -> list[Path]:
    """Bring the home's folders in line with its catalog; returns what was moved to the trash."""
    trash = _Trash(home)
    snapshots = {Path(s.path).resolve(): s for s in catalog.snapshots()}
    by_name = {s.name.lower(): s for s in snapshots.values()}
    folder = home / "snapshots"
    entries = sorted(os.scandir(folder), key=lambda e: e.name) if folder.is_dir() else []
    # Steps 1 and 2. Hidden folders: export temp folders, replaced snapshots.
    for entry in entries:
        path = Path(entry.path)
        if not entry.name.startswith(".") or not entry.is_dir():
            continue
        name, replaced, _ = entry.name[1:].rpartition(".replaced-")
        snap = by_name.get(name.lower()) if replaced else None
        if snap is not None and _manifest(Path(snap.path)) != snap.manifest == _manifest(path):
            if Path(snap.path).exists():
                trash.move(Path(snap.path), f"snapshot '{snap.name}': a replacement never recorded")
            os.replace(path, snap.path)
            log.warning("snapshot '%s': its folder is back in place (a replace did not finish)", snap.name)
            continue
        trash.move(path, "left by a snapshot export or replace that did not finish")
    # Step 3. Snapshot folders without a catalog row.
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(".") or not entry.is_dir() or _holds(path, snapshots):
            continue
        trash.move(path, f"snapshot folder '{entry.name}' has no catalog row (its export did not finish)")
    # Step 4. Run folders no job uses.
    jobs = catalog.jobs()
    used = {Path(catalog.get_run(j.run_id).folder).resolve() for j in jobs}
    runs = home / "runs"
    for entry in sorted(os.scandir(runs), key=lambda e: e.name) if runs.is_dir() else []:
        if entry.is_dir() and not _holds(Path(entry.path), used):
            trash.move(Path(entry.path), "run folder of no job (a CREATE or DROP JOB that did not finish)")
    # Step 5. Replays a process was killed in (EXPLAIN ANALYZE removes its own folder otherwise).
    replays = home / "replays"
    for entry in sorted(os.scandir(replays), key=lambda e: e.name) if replays.is_dir() else []:
        trash.move(Path(entry.path), "left by an EXPLAIN ANALYZE replay that did not finish")
    # Step 6. Jobs whose process is gone.
    for job in jobs:
        if job.status == RUNNING:
            log.warning("job '%s' was RUNNING in a pitstop process that ended without stopping it", job.name)
            catalog.set_job_status(
                job.name,
                STOPPED,
                f"its pitstop process ended without stopping it (killed?) at or before "
                f"{now():%Y-%m-%d %H:%M:%S} UTC; resumes from its checkpoints when pitstop next starts "
                "Spark on this home",
            )
    return trash.moved


def _holds(path: Path, known: Iterable[Path]) -> bool:
    """Whether ``path`` is one of the ``known`` (resolved) folders, or holds one further down."""
    here = path.resolve()
    return any(k == here or k.is_relative_to(here) for k in known)


def empty_trash(home: Path, days: float | None) -> list[Path]:
    """Remove the entries of ``<home>/trash/`` moved there more than ``days`` days ago (None:
    none); returns them. An entry's age is the newest change of its folder and of the folders
    directly in it, which :class:`_Trash` made when it moved something in: anything moved in
    (or changed there) within ``days`` keeps its entry. The caller owns the home (the catalog's
    lock), so no other pitstop is moving things into the trash meanwhile."""
    trash = home / TRASH
    if days is None or not trash.is_dir():
        return []
    oldest = time.time() - days * 86400
    removed = []
    for entry in sorted(os.scandir(trash), key=lambda e: e.name):
        path = Path(entry.path)
        try:
            changed = [entry.stat(follow_symlinks=False).st_mtime]
            if entry.is_dir(follow_symlinks=False):
                changed += [e.stat(follow_symlinks=False).st_mtime for e in os.scandir(path)]
        except OSError:
            continue
        if max(changed) >= oldest:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as exc:
            log.warning("could not remove %s from the trash: %s", path, exc)
            continue
        log.info("removed %s from the trash: moved there more than %g day(s) ago", path, days)
        removed.append(path)
    return removed


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((folder / "manifest.json").read_text()))
    except (OSError, ValueError):
        return None


class _Trash:
    def __init__(self, home: Path) -> None:
        self.folder = home / TRASH / f"{now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.moved: list[Path] = []

    def move(self, path: Path, why: str) -> None:
        dest = self.folder / path.parent.name / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
        self.moved.append(dest)
        log.warning("%s: moved %s to %s", why, path, dest)
