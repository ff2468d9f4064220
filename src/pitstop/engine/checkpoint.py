"""Reading a Spark checkpoint's offset and commit logs (plain files; no Spark needed).

``offsets/<n>``: ``v1``, a metadata line (``batchWatermarkMs``), then one offset per source.
``commits/<n>``: ``v1`` and ``{"nextBatchWatermarkMs": ...}``. A batch is committed once its
commit file exists; one with an offsets file and no commit file is in flight (or was interrupted).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pitstop.connectors.positions import parse_offset


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
    positions: dict[str, int]  # pitstop sources only
    lines: int  # number of source lines (pitstop's and Spark's own, e.g. seed files)


def read_offsets(checkpoint: Path, batch_id: int) -> BatchOffsets | None:
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().split("\n")
    except FileNotFoundError:
        return None
    meta = json.loads(lines[1])
    positions: dict[str, int] = {}
    for line in lines[2:]:
        parsed = parse_offset(line)
        if parsed is not None:
            positions[parsed[0]] = parsed[1]
    return BatchOffsets(batch_id, int(meta.get("batchWatermarkMs", 0)), positions, len(lines) - 2)


def commit_watermark(checkpoint: Path, batch_id: int) -> int | None:
    try:
        lines = (checkpoint / "commits" / str(batch_id)).read_text().split("\n")
    except FileNotFoundError:
        return None
    return int(json.loads(lines[1]).get("nextBatchWatermarkMs", 0))


@dataclass(frozen=True)
class Progress:
    committed: int | None  # last committed batch id
    positions: dict[str, int]  # source positions at the last commit
    watermark_ms: int  # watermark after the last commit
    settled: bool  # no batch in flight, and no batch pending for a watermark change


def progress(checkpoint: Path, start_positions: dict[str, int]) -> Progress:
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
