"""Snapshots written by an earlier pitstop keep restoring (Flink's savepoint compatibility table is
the model): the snapshot committed in ``tests/data/snapshot_format_1`` is restored by this
pitstop, from Spark's state files and from its rows, and the restored job's output is compared
with a batch computation in DuckDB over the same events."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from conftest import run
from pitstop.catalog.rows import Snapshot
from pitstop.connectors.generator.source import generate
from pitstop.manager import Manager
from pitstop.snapshots.restore import NATIVE, ROWS

DATA = Path(__file__).resolve().parent / "data" / "snapshot_format_1"
STAGES = ("per_minute.aggregate", "sliding.aggregate", "sessions.aggregate")
START = datetime(2024, 1, 1)
CUT = 300  # events the old job read before its snapshot
LAST = 600  # events the restored job reads in all
DELAY = timedelta(seconds=5)

# The mapping and job of tests/data/snapshot_format_1/make.py, as a user would write them again.
MAPPING = """
CREATE OR REPLACE MAPPING events (
    id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) TYPE Generator OPTIONS ('rate'='1000000000000', 'limit'='{limit}', 'keys'='3', 'step_ms'='1000',
                          'start'='2024-01-01 00:00:00');
CREATE MAPPING per_minute TYPE DuckDB;
CREATE MAPPING sliding TYPE DuckDB;
CREATE MAPPING sessions TYPE DuckDB;
"""
JOB = """OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT windows_v1 AS BEGIN
    INSERT INTO per_minute
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, region;
    INSERT INTO sliding
    SELECT window_start, window_end, region, MAX(amount) AS top, COUNT(*) AS n
    FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '2' MINUTE, INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, region;
    INSERT INTO sessions
    SELECT window_start, window_end, region, AVG(amount) AS mean, COUNT(*) AS n
    FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND))
    GROUP BY window_start, window_end, region;
END;"""

# The batch truth, in DuckDB over the events: every window of each kind, as (start, end, region).
TRUTH = {
    "per_minute": """
        SELECT time_bucket(INTERVAL 1 MINUTE, ts) AS ws, ws + INTERVAL 1 MINUTE AS we, region,
               SUM(amount) AS revenue, COUNT(*) AS n
        FROM events GROUP BY ALL""",
    "sliding": """
        SELECT time_bucket(INTERVAL 1 MINUTE, ts) - k * INTERVAL 1 MINUTE AS ws,
               ws + INTERVAL 2 MINUTE AS we, region, MAX(amount) AS top, COUNT(*) AS n
        FROM events, range(2) r(k) GROUP BY ALL""",
    # A session goes on while the next event of its key comes at most the gap after the last
    # (Spark merges [t, t + gap) with an event at t + gap).
    "sessions": """
        WITH marked AS (
            SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY region ORDER BY ts) <= INTERVAL 5 SECOND
                           THEN 0 ELSE 1 END AS first
            FROM events),
        numbered AS (SELECT *, sum(first) OVER (PARTITION BY region ORDER BY ts) AS session FROM marked)
        SELECT min(ts) AS ws, max(ts) + INTERVAL 5 SECOND AS we, region,
               sum(amount) / count(*) AS mean, count(*) AS n
        FROM numbered GROUP BY region, session""",
}


def events(last: int) -> pa.Table:
    """The Generator's events 0..last-1, made by the same pure function of the index."""
    columns = [("id", pa.int64()), ("region", pa.string()), ("amount", pa.decimal128(12, 2))]
    schema = pa.schema([*columns, ("ts", pa.timestamp("us"))])
    options = {"keys": "3", "step_ms": "1000", "start": "2024-01-01 00:00:00", "rate": "1000000000000"}
    return pa.Table.from_batches([generate(schema, 0, last, options)])


def truth(sink: str, after: datetime, until: datetime) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The windows that close after the cut's watermark and by the end's: what the restored job,
    and only it, writes."""
    con = duckdb.connect()
    con.register("events", events(LAST))
    rows = con.execute(f"SELECT * FROM ({TRUTH[sink]}) WHERE we > ? AND we <= ?", [after, until]).fetchall()
    return {tuple(r[:3]): tuple(r[3:]) for r in rows}


def written(manager: Manager, sink: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    columns = {"per_minute": "revenue, n", "sliding": "top, n", "sessions": "mean, n"}[sink]
    _, rows = manager.catalog.query(f"SELECT window_start, window_end, region, {columns} FROM {sink}")
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in rows:
        assert tuple(r[:3]) not in out, f"window {r[:3]} written twice to {sink}"
        out[tuple(r[:3])] = tuple(r[3:])
    return out


def same(got: dict[tuple[Any, ...], tuple[Any, ...]], want: dict[tuple[Any, ...], tuple[Any, ...]]) -> None:
    assert sorted(got) == sorted(want)
    for key, (value, n) in want.items():
        assert got[key][1] == n, key
        error = abs(Decimal(str(got[key][0])) - Decimal(str(value)))
        assert error < Decimal("0.000001"), (key, got[key], value)


def install(manager: Manager) -> Path:
    """Put the committed snapshot into the home, as a copy (a native restore hard-links the
    snapshot's files into its run; they must not be the repository's own)."""
    folder = manager.home / "snapshots" / "windows_v1"
    shutil.copytree(DATA / "windows_v1", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    snap = Snapshot(
        "windows_v1", "windows", datetime.now(UTC), str(folder), int(manifest["bytes"]), 12, manifest
    )
    with manager.catalog.transaction() as tx:
        manager.catalog.add_snapshot(snap, tx)
    return folder


def test_the_committed_snapshot_is_in_the_format_before_stage_kinds() -> None:
    """What the test below restores: a manifest without ``kind`` or ``format_version``."""
    manifest = json.loads((DATA / "windows_v1" / "manifest.json").read_text())
    assert sorted(manifest["stages"]) == sorted(STAGES)
    for entry in manifest["stages"].values():
        assert "kind" not in entry and "format_version" not in entry
        assert entry["native"]["path"].startswith("native/")  # relative: portable
    assert manifest["sources"] == {"events": {"pos": CUT, "type": "generator"}}


def test_describe_snapshot_names_each_stage_kind_and_format(manager: Manager) -> None:
    install(manager)
    described = dict(run(manager, "DESCRIBE SNAPSHOT windows_v1;")[0].rows)
    assert described["stage per_minute.aggregate"].startswith("3 rows (tumble, format 1); TUMBLE(ts, ")
    assert described["stage sliding.aggregate"].startswith("6 rows (hop, format 1); HOP(ts, ")
    assert described["stage sessions.aggregate"].startswith("3 rows (session, format 1); SESSION(ts, ")


@pytest.mark.spark
@pytest.mark.parametrize(("fmt", "how"), [("auto", NATIVE), ("canonical", ROWS)])
def test_a_snapshot_in_the_first_format_restores_every_window_kind(
    manager: Manager, fmt: str, how: str
) -> None:
    run(manager, MAPPING.format(limit=LAST))
    install(manager)
    job = JOB.format(fmt=fmt)
    explained = run(manager, f"EXPLAIN CREATE JOB windows {job}")[0]
    verdicts = {r[3]: (r[7], r[8]) for r in explained.rows if r[3] is not None}
    assert sorted(verdicts) == sorted(STAGES)
    for stage, (outcome, reason) in verdicts.items():
        assert outcome == "restored", (stage, reason)
        assert how in reason, (stage, reason)

    run(manager, f"CREATE JOB windows {job} AWAIT JOB windows;")

    cut_watermark = START + timedelta(seconds=CUT - 1) - DELAY
    end_watermark = START + timedelta(seconds=LAST - 1) - DELAY
    for sink in ("per_minute", "sliding", "sessions"):
        want = truth(sink, cut_watermark, end_watermark)
        assert want, sink  # each kind has windows that close after the cut
        same(written(manager, sink), want)

    # A snapshot written now names each stage's kind and the format of its rows.
    run(manager, "DROP JOB windows WITH SNAPSHOT windows_v2;")
    manifest = json.loads((manager.home / "snapshots" / "windows_v2" / "manifest.json").read_text())
    kinds = {n: (e["kind"], e["format_version"]) for n, e in manifest["stages"].items()}
    assert kinds == dict(zip(STAGES, [("tumble", 1), ("hop", 1), ("session", 1)], strict=True))
