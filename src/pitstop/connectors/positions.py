"""Source positions shared by pitstop's streaming sources.

A source's position is a JSON value its connector defines (:class:`pitstop.connectors.base.Positions`
says how two compare): for files, how many entries of the run's *discovery log* have been read; for
the generator, how many events. Spark stores positions in its offset log as
``{"source": name, "pos": <position>}``. Two files in ``<run>/sources/<name>/`` steer a source:

- ``files.log`` (file sources): every file name once, in the order first seen. A fresh run from a
  snapshot starts with the snapshot's consumed files, so files that arrive after the cut, and
  files whose names sort before ones already read, are all read exactly once.
- ``fence``: when present, no reader reports a position beyond it. ``DROP JOB ... WITH SNAPSHOT``
  sets it so that every branch of a job stops at the same position of every source.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pitstop.names import safe_path

FILES_LOG = "files.log"
FENCE = "fence"


def source_dir(run_dir: str | os.PathLike[str], source: str) -> Path:
    """``<run>/sources/<source>/``: the discovery log and fence of one source of a run."""
    return safe_path(Path(run_dir) / "sources", "mapping", source)


def offset(source: str, pos: Any) -> dict[str, Any]:
    return {"source": source, "pos": pos}


def parse_offset(text: str) -> tuple[str, Any] | None:
    """``(source, pos)`` of one offset-log line written by a pitstop source, else None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and "source" in value and "pos" in value:
        return str(value["source"]), value["pos"]
    return None


def read_fence(directory: Path) -> Any:
    """The fence (a position, as JSON), or None."""
    try:
        return json.loads((directory / FENCE).read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_fence(directory: Path, pos: Any) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{FENCE}.tmp"
    tmp.write_text(json.dumps(pos))
    os.replace(tmp, directory / FENCE)


def bounded(directory: Path, pos: int, start: dict[str, Any] | None) -> int:
    """What a counting reader may report: at most the fence (if set), never less than where it
    stands."""
    fence = read_fence(directory)
    if fence is not None:
        pos = min(pos, int(fence))
    if start is not None:
        pos = max(pos, int(start["pos"]))
    return pos


def clear_fence(directory: Path) -> None:
    try:
        (directory / FENCE).unlink()
    except FileNotFoundError:
        pass


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_log(directory: Path) -> list[str]:
    try:
        text = (directory / FILES_LOG).read_text()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n") if line]


def write_log(directory: Path, names: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{FILES_LOG}.tmp"
    tmp.write_text("".join(f"{n}\n" for n in names))
    os.replace(tmp, directory / FILES_LOG)


def listing(folder: Path) -> list[str]:
    """Data files in ``folder``: hidden and ``_``-prefixed names are skipped, oldest first."""
    try:
        entries = [e for e in os.scandir(folder) if e.is_file() and e.name[0] not in "._"]
    except FileNotFoundError:
        return []
    entries.sort(key=lambda e: (e.stat().st_mtime_ns, e.name))
    return [e.name for e in entries]


def discover(directory: Path, folder: Path) -> int:
    """Append files of ``folder`` not yet in the discovery log; return the log's length."""
    with locked(directory):
        known = read_log(directory)
        seen = set(known)
        new = [n for n in listing(folder) if n not in seen]
        if new:
            with open(directory / FILES_LOG, "a") as handle:
                handle.write("".join(f"{n}\n" for n in new))
                handle.flush()
                os.fsync(handle.fileno())
        return len(known) + len(new)
