"""Catalog rows: what the catalog stores about mappings, jobs, runs and snapshots."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: str  # Spark SQL type text, e.g. "DECIMAL(12,2)", "TIMESTAMP"


@dataclass(frozen=True)
class WatermarkDef:
    column: str
    delay_micros: int


@dataclass(frozen=True)
class Mapping:
    name: str
    type: str  # file | duckdb | generator | console (lower case)
    columns: tuple[ColumnDef, ...]
    watermark: WatermarkDef | None
    options: dict[str, str] = field(default_factory=dict)
    sql: str = ""

    def column(self, name: str) -> ColumnDef | None:
        for c in self.columns:
            if c.name.lower() == name.lower():
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "columns": [[c.name, c.type] for c in self.columns],
            "watermark": None
            if self.watermark is None
            else [self.watermark.column, self.watermark.delay_micros],
            "options": self.options,
            "sql": self.sql,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Mapping:
        wm = d.get("watermark")
        return cls(
            name=d["name"],
            type=d["type"],
            columns=tuple(ColumnDef(n, t) for n, t in d["columns"]),
            watermark=None if wm is None else WatermarkDef(wm[0], int(wm[1])),
            options=dict(d.get("options") or {}),
            sql=d.get("sql", ""),
        )


# Job status values shown by SHOW JOBS.
RUNNING = "RUNNING"
STOPPED = "STOPPED"  # the pitstop process that ran it exited; resumes from its checkpoints
FAILED = "FAILED"
SUSPENDED = "SUSPENDED"  # by ALTER JOB ... SUSPEND; resumes only with ALTER JOB ... RESUME


@dataclass(frozen=True)
class Job:
    name: str
    sql: str
    status: str
    detail: str
    run_id: str
    snapshot: str | None
    created: datetime
    updated: datetime
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class View:
    name: str
    sql: str  # the whole CREATE VIEW statement
    created: datetime


@dataclass(frozen=True)
class Run:
    run_id: str
    job: str
    folder: str
    plan: dict[str, Any]  # JobPlan.to_json()
    restore: dict[str, Any] | None  # what this run restored: snapshot name, positions, seeds
    started: datetime


@dataclass(frozen=True)
class Snapshot:
    name: str
    job: str
    created: datetime
    path: str
    size_bytes: int
    rows: int
    manifest: dict[str, Any]


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


WHOLE_FILE = 0
"""The ``line`` of a reject about a whole file (lines and Parquet rows count from 1)."""


@dataclass(frozen=True)
class Reject:
    """A malformed record a source kept out of a job (see :mod:`pitstop.connectors.rejects`)."""

    file: str  # the data file's full path
    line: int  # 1-based line (CSV: the line its row starts on); Parquet: row number; WHOLE_FILE
    raw: str | None  # the record's text, first RAW_LIMIT bytes; None with 'onError'='skip'
    raw_bytes: int  # the record's full length in bytes
    reason: str
    unit: str = "line"  # what ``line`` counts: "line", "row", or "offset" (Kafka: ``file`` names
    # the topic and partition, ``line`` is the record's offset)

    def where(self) -> str:
        """``file /data/a.json, line 3`` (``row 3`` for Parquet; the file alone for the whole file;
        ``topic 'clicks' partition 2, offset 17`` for a Kafka record)."""
        if self.unit == "offset":
            return f"{self.file}, offset {self.line}"
        if self.line == WHOLE_FILE:
            return f"file {self.file}"
        return f"file {self.file}, {self.unit} {self.line}"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "raw": self.raw,
            "raw_bytes": self.raw_bytes,
            "reason": self.reason,
            "unit": self.unit,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Reject:
        return cls(
            d["file"], int(d["line"]), d.get("raw"), int(d["raw_bytes"]), d["reason"], d.get("unit", "line")
        )


@dataclass(frozen=True)
class RejectSummary:
    """What DESCRIBE JOB shows of one source's rejects: how many, and the latest one."""

    source: str
    count: int
    latest: Reject


@dataclass(frozen=True)
class LateCount:
    """How many rows one stage dropped as late in one micro-batch of a run's branch, from one
    source and, for a source with partitions, one of its partitions (see :mod:`pitstop.engine.late`)."""

    branch: int
    batch_id: int
    stage: str
    source: str
    rows: int
    partition: int | None = None  # None: the source has no partitions, or it was not told


@dataclass(frozen=True)
class LateRecord:
    """A row a stage dropped as late, kept with ``'lateRows'='keep'``: one per window it missed
    (a HOP row late for two of its windows is two records)."""

    branch: int
    batch_id: int
    part: int  # the Spark partition that read it
    line: int  # its line in the partition's file of late rows (1-based)
    stage: str
    source: str
    window_start: datetime | None  # None: the stage has no windows (a deduplication, a join)
    window_end: datetime | None
    event_time: datetime | None
    watermark: datetime  # the watermark that made it late
    record: dict[str, Any]  # the stage's input row, as JSON values
    partition: int | None = None  # the source's partition it was read from (Kafka); None: none


@dataclass(frozen=True)
class LateSummary:
    """What DESCRIBE JOB shows of one stage's late rows from one source: all of them and, for a
    source with partitions, per partition (those counted without one, before pitstop counted
    partitions, are not listed there)."""

    stage: str
    source: str
    rows: int
    first_seen: datetime
    last_seen: datetime
    partitions: tuple[tuple[int, int], ...] = ()  # (partition, rows), by partition


@dataclass(frozen=True)
class MetricSample:
    """One row of ``pitstop.metrics``: what one branch of a running job, and one of its stateful
    stages, looked like at one sampling round (:mod:`pitstop.engine.metrics`). The branch's own
    figures (batch, rates, watermark, lag, restarts) repeat on each of its stages' rows; a branch
    without a stateful stage has one row whose ``stage`` and state figures are None."""

    sampled: datetime  # the round's time (naive UTC), the same for every row of the round
    job: str
    run_id: str
    branch: int
    sink: str
    stage: str | None
    batch_id: int | None  # the last micro-batch Spark reported on; None: none yet
    input_rows: int | None  # rows that batch read
    input_rows_per_s: float | None  # Spark's inputRowsPerSecond of that batch
    processed_rows_per_s: float | None  # Spark's processedRowsPerSecond of that batch
    batch_ms: int | None  # how long that batch took (Spark's durationMs.triggerExecution)
    watermark: datetime | None  # the branch's event-time watermark; None: it has none (yet)
    state_rows: int | None  # rows in the stage's state; None: Spark does not count them
    state_bytes: int | None  # memory the stage's state store uses (Spark's memoryUsedBytes)
    late_rows: int | None  # rows the stage dropped as late, as SHOW JOBS counts them
    lag_records: int | None  # records behind the end of the branch's sources; None: no source tells
    lag: dict[str, dict[str, int]] | None  # per source, per partition: records behind
    restarts: int  # times the branch was restarted from its checkpoint in this process
