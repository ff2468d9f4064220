"""Step 3 and after: a file's rejects kept in the run folder by the workers (or the job failed,
``'onError'='fail'``), and collected from there by the manager into ``pitstop.rejects``."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from pitstop.catalog.rows import Reject
from pitstop.connectors import positions
from pitstop.errors import RejectedRecordError

ON_ERROR = "onError"
REJECTS_DIR = "rejects"


def rejects_dir(run_dir: str | os.PathLike[str], source: str) -> Path:
    return positions.source_dir(run_dir, source) / REJECTS_DIR


def record(directory: Path, source: str, path: str, found: Sequence[Reject], on_error: str) -> None:
    """Step 3: keep a file's rejects (``keep``, ``skip``) or fail the job (``fail``)."""
    if not found:
        return
    if on_error == "fail":
        first = found[0]
        raise RejectedRecordError(
            f"mapping '{source}' met a malformed record in {first.where()}: {first.reason}; "
            f"its OPTIONS ('{ON_ERROR}'='fail') stop the job ('keep' would record the record in "
            "pitstop.rejects and go on)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{Path(path).name}.jsonl"
    tmp = directory / f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        for reject in found:
            row = reject.to_json()
            if on_error == "skip":
                row["raw"] = None
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, directory / name)


def collect(directory: Path, seen: dict[str, tuple[int, int]]) -> list[Reject]:
    """Rejects in the files of ``directory`` that are new or changed since ``seen`` (which is
    updated); a file being written is a hidden temp file until it is complete."""
    out: list[Reject] = []
    try:
        entries = [e for e in os.scandir(directory) if e.is_file() and not e.name.startswith(".")]
    except FileNotFoundError:
        return out
    for entry in sorted(entries, key=lambda e: e.name):
        stat = entry.stat()
        signature = (stat.st_mtime_ns, stat.st_size)
        if seen.get(entry.name) == signature:
            continue
        try:
            text = Path(entry.path).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        out.extend(Reject.from_json(json.loads(line)) for line in text.splitlines() if line)
        seen[entry.name] = signature
    return out
