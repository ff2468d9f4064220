"""Deterministic benchmark data: folders of JSON event files, cached under ``bench/.data``.

Every event is ``{"k": key, "v": value, "ts": "YYYY-MM-DDTHH:MM:SS"}`` (UTC). Files are written to a
hidden temp name and renamed, and a ``.done`` marker is written last, so an interrupted generation
is redone rather than reused.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path

DATA = Path(__file__).resolve().parent / ".data"
EPOCH = datetime(2024, 1, 1)
FILE_EVENTS = 50_000
THROUGHPUT_KEYS = 10_000
THROUGHPUT_HOURS = 24  # the events of a throughput data set span one day: 24 one-hour windows


def _write_files(folder: Path, rows_of_file: list[list[str]]) -> None:
    for i, lines in enumerate(rows_of_file):
        tmp = folder / f".part-{i:05d}.json.tmp"
        tmp.write_text("".join(lines))
        os.replace(tmp, folder / f"part-{i:05d}.json")


def _cached(folder: Path) -> bool:
    return (folder / ".done").exists()


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def events(n: int) -> Path:
    """``n`` events over ``THROUGHPUT_KEYS`` keys, in time order across one day (the throughput input)."""
    folder = DATA / f"events-{n}"
    if _cached(folder):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    span_s = THROUGHPUT_HOURS * 3600
    files: list[list[str]] = []
    for start in range(0, n, FILE_EVENTS):
        lines = []
        for i in range(start, min(n, start + FILE_EVENTS)):
            key = (i * 7919) % THROUGHPUT_KEYS  # every key once per 10k consecutive events
            ts = EPOCH + timedelta(seconds=i * span_s // n)
            lines.append(f'{{"k": {key}, "v": {(i * 31) % 1000}, "ts": "{_ts(ts)}"}}\n')
        files.append(lines)
    _write_files(folder, files)
    (folder / ".done").write_text(str(n))
    return folder


STATE_HOUR = datetime(2024, 1, 2, 10)


def state_events(keys: int) -> Path:
    """One event per key, all inside the one-hour window that starts at ``STATE_HOUR``: a job with
    a 1 h tumbling window and a 1 minute watermark delay holds exactly ``keys`` rows of state."""
    folder = DATA / f"state-{keys}"
    if _cached(folder):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    files: list[list[str]] = []
    for start in range(0, keys, FILE_EVENTS):
        lines = []
        for k in range(start, min(keys, start + FILE_EVENTS)):
            ts = STATE_HOUR + timedelta(seconds=(k * 1800) // keys)  # first half hour only
            lines.append(f'{{"k": {k}, "v": {k % 1000}, "ts": "{_ts(ts)}"}}\n')
        files.append(lines)
    _write_files(folder, files)
    (folder / ".done").write_text(str(keys))
    return folder


def after_cut_lines(count: int = 1000) -> str:
    """Events that arrive after the cut: ``count`` keys, later in the same open window."""
    ts = _ts(STATE_HOUR + timedelta(minutes=45))
    return "".join(f'{{"k": {k}, "v": 1, "ts": "{ts}"}}\n' for k in range(count))


def drop_in(folder: Path, name: str, text: str) -> None:
    """Write a file the way a producer should: hidden temp name, then rename."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, folder / name)
