"""``TYPE File``: a folder of json, csv or parquet files, read as a stream and written per batch.

Source: a file is read once, when first seen; its position is the length of the run's discovery
log (:mod:`pitstop.connectors.positions`). A snapshot keeps the names of the files read up to the
cut (``sources/<source>.files``); a run restored from it starts with that log, so files that
arrive after the cut, and files whose names sort before ones already read, are read exactly once.

Sink: one file per ``(run, branch, batch)``, written to a hidden temp file and renamed. Rolled
back to a snapshot's cut (``'sinkRollback'``) by moving the files of the batches after it into the
home's trash (never deleted here; the trash is emptied after ``PITSTOP_TRASH_DAYS``).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.connectors import positions
from pitstop.connectors.base import Connector, Option
from pitstop.names import inside, safe_path

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource

    from pitstop.catalog.rows import Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.base import Sink
    from pitstop.connectors.rollback import SinkRollback, Span

log = logging.getLogger(__name__)
FORMATS = ("json", "csv", "parquet")
_PART = re.compile(r"^part-(?P<run>.+)-(?P<branch>\d+)-(?P<batch>\d{6,})\.(?P<ext>json|csv|parquet)$")


class FileConnector(Connector):
    type_name = "File"
    summary = "a folder of files: read as they arrive, written one file per batch"
    source = True
    sink = True
    position_unit = "files"
    whole = "files"
    options = (
        Option("path", "the folder (relative to where pitstop runs; stored absolute)", "path", required=True),
        Option("format", "how the files are written", "choice", "json", FORMATS),
        Option("header", "csv: the first line names the columns", "boolean", "true"),
        Option(
            "onError",
            "a malformed record: keep it in pitstop.rejects and go on, count it only (skip), or fail the job",
            "choice",
            "keep",
            ("keep", "skip", "fail"),
        ),
    )

    def cluster_folder(self, mapping: Mapping) -> Path | None:
        return Path(mapping.options["path"]) if "path" in mapping.options else None

    def created(self, mapping: Mapping) -> str | None:
        folder = Path(mapping.options["path"])
        if folder.is_dir():
            return None
        folder.mkdir(parents=True, exist_ok=True)
        # Said, not silent: a misspelt path is an empty folder a job would read nothing from.
        return f"its folder {folder} did not exist and was made, empty (check the path if you meant another)"

    def stream_source(self) -> type[DataSource]:
        from pitstop.connectors.file.source import FileSource

        return FileSource

    def reader_options(self, mapping: Mapping, start: Any) -> dict[str, str]:
        return {
            "path": mapping.options["path"],
            "format": self.option(mapping, "format") or "json",
            "header": self.option(mapping, "header") or "true",
            "on_error": self.option(mapping, "onError") or "keep",
            "start": str(int(start)),
        }

    def available(self, run_dir: Path, mapping: Mapping, start: Any) -> Any:
        return positions.discover(positions.source_dir(run_dir, mapping.name), Path(mapping.options["path"]))

    def save_position(
        self, run_dir: Path, mapping: Mapping, position: Any, snapshot_dir: Path
    ) -> dict[str, Any]:
        names = positions.read_log(positions.source_dir(run_dir, mapping.name))[: int(position)]
        (snapshot_dir / "sources").mkdir(exist_ok=True)
        listing = safe_path(snapshot_dir / "sources", "mapping", mapping.name, suffix=".files")
        listing.write_text("".join(f"{n}\n" for n in names))
        return {"files": f"sources/{listing.name}", "path": mapping.options["path"]}

    def resume_from(self, entry: dict[str, Any], mapping: Mapping) -> tuple[dict[str, Any], str]:
        """A folder that moved is read from its start: its files are not matched by name against
        the files the snapshot read from the old folder (a new folder's 'part-1.json' is not the
        old one's)."""
        old, new = entry.get("path"), mapping.options["path"]
        count = int(entry["pos"])
        if old is not None and old != new:
            fresh = {k: v for k, v in entry.items() if k != "files"}
            fresh["pos"] = 0
            return fresh, (
                f"'path' changed from {old} to {new}: reads every file in {new} from the start "
                f"(the {count:,} files the snapshot read in {old} are not matched by name)"
            )
        return (
            entry,
            f"goes on after the {count:,} files read up to the snapshot; each later file is read once",
        )

    def resume(self, entry: dict[str, Any], snapshot_dir: Path, run_dir: Path, source: str) -> None:
        if entry.get("files"):
            text = inside(snapshot_dir, entry["files"]).read_text()
            positions.write_log(positions.source_dir(run_dir, source), [n for n in text.split("\n") if n])

    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        from pitstop.connectors.file.sink import FileSink

        return FileSink(mapping, run_id, branch)

    # -- rollback: the files of the spans' batches, moved to the trash -----------------------------
    def rollback_plan(
        self, catalog: Catalog, home: Path, mapping: Mapping, spans: tuple[Span, ...], job: str
    ) -> SinkRollback:
        from pitstop.connectors.rollback import RunShare, SinkRollback

        folder = Path(mapping.options["path"])
        parts = _parts(folder)
        files: list[str] = []
        shares: dict[str, list[int]] = {}
        for span in spans:
            for (run, branch, batch), name in sorted(parts.items()):
                if run == span.run_id and branch == span.branch and batch > span.after:
                    files.append(name)
                    share = shares.setdefault(run, [0, 0])
                    share[0] += 1
                    share[1] += _rows(folder / name)
        ours = {s.run_id for s in spans}
        others: dict[str, int] = {}
        for other, run_id, _ in _writers(catalog, folder):
            if other.lower() != job.lower() and run_id not in ours:
                count = sum(_rows(folder / n) for (r, _, _), n in parts.items() if r == run_id)
                others[other] = others.get(other, 0) + count
        runs = tuple(RunShare(r, n, rows) for r, (n, rows) in shares.items())
        return SinkRollback(
            mapping.name,
            self.type_name,
            spans,
            rows=sum(r.rows for r in runs),
            runs=runs,
            files=tuple(files),
            others=tuple(sorted(others.items())),
        )

    def rollback_outside(
        self, catalog: Catalog, home: Path, mapping: Mapping, plan: SinkRollback, trash: Path
    ) -> None:
        folder = Path(mapping.options["path"])
        into = trash / mapping.name
        for name in plan.files:
            source = folder / name
            if not source.exists():
                continue  # moved by an earlier try, or gone
            into.mkdir(parents=True, exist_ok=True)
            os.replace(source, into / name)
            log.warning("sink '%s' rolled back: moved %s to %s", mapping.name, source, into / name)


def _parts(folder: Path) -> dict[tuple[str, int, int], str]:
    """The sink's files by ``(run, branch, batch)``."""
    out: dict[tuple[str, int, int], str] = {}
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return out
    for name in names:
        m = _PART.match(name)
        if m:
            out[(m.group("run"), int(m.group("branch")), int(m.group("batch")))] = name
    return out


def _rows(path: Path) -> int:
    """Rows in one of the sink's files (json: lines; csv: lines less the header; parquet: its
    metadata)."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows)
        with open(path, "rb") as handle:
            lines = sum(1 for line in handle if line.strip())
        return max(0, lines - 1) if path.suffix == ".csv" else lines
    except OSError:
        return 0


def _writers(catalog: Catalog, folder: Path) -> list[tuple[str, str, int]]:
    """``(job, run_id, branch)`` of every run writing a File mapping of this folder."""
    out = []
    for m in catalog.mappings():
        if m.type == "file" and Path(m.options.get("path", "")) == folder:
            out += catalog.runs_writing(m.name)
    return out


CONNECTOR = FileConnector()
