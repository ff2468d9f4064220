"""Reading a Spark checkpoint's offset and commit logs (plain files; no Spark needed).

``offsets/<n>``: ``v1``, a metadata line (``batchWatermarkMs``), then one offset per source.
``commits/<n>``: ``v1`` and ``{"nextBatchWatermarkMs": ...}``. A batch is committed once its
commit file exists; one with an offsets file and no commit file is in flight (or was interrupted).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pitstop.connectors.positions import parse_offset

CLOCKS_DIR = "pitstop_clocks"
"""pitstop's own folder in a checkpoint: its streams' clocks as of each batch, ``<batch>``
(:mod:`pitstop.engine.clocks`); Spark leaves folders it does not know alone."""


def _batches(folder: Path) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(folder) if n.isdigit())
    except FileNotFoundError:
        return []


def latest_commit(checkpoint: Path) -> int | None:
    ids = _batches(checkpoint / "commits")
    return ids[-1] if ids else None


def latest_planned(checkpoint: Path) -> int | None:
    ids = _batches(checkpoint / "offsets")
    return ids[-1] if ids else None


@dataclass(frozen=True)
class BatchOffsets:
    batch_id: int
    watermark_ms: int  # the watermark the batch ran with
    positions: dict[str, Any]  # pitstop sources only (each as its connector defines)
    lines: int  # number of source lines (pitstop's and Spark's own, e.g. seed files)
    others: int = 0  # source lines of Spark's own sources (a seeded run's seed files)


def read_offsets(checkpoint: Path, batch_id: int) -> BatchOffsets | None:
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().split("\n")
    except FileNotFoundError:
        return None
    meta = json.loads(lines[1])
    positions: dict[str, Any] = {}
    others = 0
    for line in lines[2:]:
        parsed = parse_offset(line)
        if parsed is not None:
            positions[parsed[0]] = parsed[1]
        elif line.strip():
            others += 1
    return BatchOffsets(batch_id, int(meta.get("batchWatermarkMs", 0)), positions, len(lines) - 2, others)


def commit_watermark(checkpoint: Path, batch_id: int) -> int | None:
    try:
        lines = (checkpoint / "commits" / str(batch_id)).read_text().split("\n")
    except FileNotFoundError:
        return None
    return int(json.loads(lines[1]).get("nextBatchWatermarkMs", 0))


@dataclass(frozen=True)
class Progress:
    committed: int | None  # last committed batch id
    positions: dict[str, Any]  # source positions at the last commit
    watermark_ms: int  # watermark after the last commit
    settled: bool  # no batch in flight, and no batch pending for a watermark change


def progress(checkpoint: Path, start_positions: dict[str, Any]) -> Progress:
    committed = latest_commit(checkpoint)
    planned = latest_planned(checkpoint)
    if committed is None:
        return Progress(None, dict(start_positions), 0, planned is None)
    offsets = read_offsets(checkpoint, committed)
    next_wm = commit_watermark(checkpoint, committed) or 0
    assert offsets is not None
    positions = dict(start_positions)
    positions.update(offsets.positions)
    settled = (planned is None or planned <= committed) and offsets.watermark_ms == next_wm
    return Progress(committed, positions, next_wm, settled)


def copy_checkpoint(checkpoint: Path, batch: int, dest: Path) -> int:
    """Copy what Spark needs to go on from ``batch`` of a checkpoint into ``dest``; return the
    number of state partitions.

    Offsets, commits and pitstop's clocks (:data:`CLOCKS_DIR`) up to ``batch`` (Spark reads the
    last two offsets), the source logs, and
    the state files of every version up to ``batch + 1`` (RocksDB's files are written once and
    never changed, so hard links are safe; a copy where links cannot be made). Nothing after the
    cut is copied.
    """
    version = batch + 1
    for root, _dirs, files in os.walk(checkpoint):
        rel = Path(root).relative_to(checkpoint)
        top = rel.parts[0] if rel.parts else ""
        for name in files:
            if top in ("offsets", "commits", CLOCKS_DIR) and (_batch_of(name) or 0) > batch:
                continue
            if top == "state" and (_version_of(name) or 0) > version:
                continue
            if name.endswith(".tmp"):
                continue  # a file Spark is still writing (it renames it into place when done)
            target = dest / rel / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                _link_or_copy(Path(root) / name, target)
            except FileNotFoundError:
                continue  # an old version Spark's maintenance removed meanwhile: not needed
    state = dest / "state" / "0"
    return sum(1 for e in os.scandir(state) if e.is_dir() and e.name.isdigit()) if state.exists() else 0


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except FileNotFoundError:
        raise
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, target)


def _batch_of(name: str) -> int | None:
    """Batch id of an offsets or commits file (``7``, ``.7.crc``)."""
    core = name[1:-4] if name.startswith(".") and name.endswith(".crc") else name
    return int(core) if core.isdigit() else None


def _version_of(name: str) -> int | None:
    """State version of a state store file (``8.zip``, ``8.delta``, ``8.changelog``, ``.8.zip.crc``)."""
    core = name[1:-4] if name.startswith(".") and name.endswith(".crc") else name
    stem, _, ext = core.partition(".")
    return int(stem) if stem.isdigit() and ext in ("zip", "delta", "snapshot", "changelog") else None
