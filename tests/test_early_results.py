"""Early results for windows (issue 11, section 2.2): ``OPTIONS ('earlyResultsMillis'='n')`` upserts
each TUMBLE / HOP window's row as it changes, with ``early`` true until the watermark passes the
window's end; turning the option on or off across a pit stop keeps the windows' state. Planning
without Spark; the sink's rows at every batch and the pit stops both ways on real Spark, checked
against a batch computation in DuckDB."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from conftest import run
from pg_helpers import Postgres, postgres  # noqa: F401 - the fixture
from pitstop.connectors import registry
from pitstop.connectors.duckdb.connector import DuckDBConnector
from pitstop.connectors.duckdb.upsert import UpsertSink
from pitstop.connectors.generator.source import generate
from pitstop.connectors.rollback import Span
from pitstop.connectors.upsert import finishing_keys, window_rows
from pitstop.engine import checkpoint
from pitstop.errors import PlanError
from pitstop.executor import JOB_OPTIONS, mapping_from_node
from pitstop.manager import Manager
from pitstop.plan.model import EARLY
from pitstop.planner.early import with_early_results
from pitstop.snapshots.restore import NATIVE, ROWS
from pitstop.sql.parser import parse_statement
from test_planner import MAPPINGS, plan
from test_postgres_sink import sink as pg_sink
from test_running import duck_rows, table_at

Row = tuple[Any, ...]
TUMBLE = (
    "INSERT INTO {sink} SELECT window_start, window_end, region, COUNT(*) AS n, SUM(amount) AS total "
    "FROM TABLE({fn}(TABLE orders, DESCRIPTOR(ts), {size})) GROUP BY window_start, window_end, region"
)


def early_plan(body: str, millis: int = 5000) -> Any:
    return with_early_results(plan(body), millis, lambda name: MAPPINGS.get(name.lower()))


# -- planning, no Spark ---------------------------------------------------------------------------------
def test_early_results_key_tumble_and_hop_rows_by_window_and_keys_as_the_select_names_them() -> None:
    tumble = early_plan(TUMBLE.format(sink="daily_revenue", fn="TUMBLE", size="INTERVAL '1' HOUR"))
    (branch,) = tumble.branches
    assert (branch.upsert_keys, branch.early_results_ms) == (("window_start", "window_end", "region"), 5000)
    renamed = early_plan(
        "INSERT INTO daily_revenue WITH w AS (SELECT window_start, window_end, region, SUM(amount) AS total "
        "FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '10' MINUTE)) "
        "GROUP BY window_start, window_end, region) SELECT window_start AS s, window_end AS e, region AS r, "
        "total FROM w"
    )
    assert renamed.branches[0].upsert_keys == ("s", "e", "r")
    assert type(renamed).from_json(renamed.to_json()) == renamed
    # Without the option nothing changes: windows are appended once.
    assert (
        plan(TUMBLE.format(sink="daily_revenue", fn="TUMBLE", size="INTERVAL '1' HOUR"))
        .branches[0]
        .upsert_keys
        == ()
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            TUMBLE.format(sink="daily_revenue", fn="SESSION", size="INTERVAL '5' MINUTE"),
            "a SESSION window's bounds move as it grows",
        ),
        (
            "INSERT INTO daily_revenue SELECT window_end, region, SUM(amount) AS total FROM "
            "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY window_start, "
            "window_end, region",
            "must write window_start, window_end and each group key as columns",
        ),
        (
            "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS early FROM "
            "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY window_start, "
            "window_end, region",
            f"has a column '{EARLY}'",
        ),
        (
            "INSERT INTO daily_revenue SELECT region, amount FROM orders",
            "the job aggregates in none; drop the option",
        ),
    ],
)
def test_early_results_refuse_what_they_cannot_replace_saying_what_to_do(body: str, said: str) -> None:
    with pytest.raises(PlanError) as caught:
        early_plan(body)
    assert said in caught.value.message


def test_early_results_refuse_an_appending_sink_and_alter_job_and_are_documented(
    manager: Manager, tmp_path: Path
) -> None:
    run(
        manager,
        f"""CREATE MAPPING orders (region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
            WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) TYPE File OPTIONS ('path'='{tmp_path / "in"}');
        CREATE MAPPING archive TYPE File OPTIONS ('path'='{tmp_path / "out"}');
        CREATE MAPPING topic TYPE Kafka OPTIONS ('bootstrap.servers'='127.0.0.1:1', 'topic'='t');""",
    )
    for sink, type_ in (("archive", "File"), ("topic", "Kafka")):
        body = "j OPTIONS ('earlyResultsMillis'='1000') AS " + TUMBLE.format(
            sink=sink, fn="TUMBLE", size="INTERVAL '1' MINUTE"
        )
        for statement in (f"EXPLAIN CREATE JOB {body}", f"CREATE JOB {body}"):
            with pytest.raises(PlanError) as caught:
                run(manager, statement)
            assert f"mapping '{sink}' is of type {type_}, which only appends" in caught.value.message
            assert "write to a TYPE DuckDB or TYPE Postgres mapping" in caught.value.message
    with pytest.raises(PlanError, match="give a whole positive number of milliseconds"):
        run(
            manager,
            "CREATE JOB j OPTIONS ('earlyResultsMillis'='soon') AS "
            + TUMBLE.format(sink="archive", fn="TUMBLE", size="INTERVAL '1' MINUTE"),
        )
    assert not run(manager, "SHOW JOBS")[0].rows
    assert "earlyResultsMillis" in JOB_OPTIONS


# -- the DuckDB and PostgreSQL upsert sinks with window rows, no Spark ---------------------------------
HOUR_MS = 3_600_000
WATERMARKS = {0: 0, 1: HOUR_MS * 3 // 2, 2: 2 * HOUR_MS}  # batch -> the watermark it ran with
KEYS = ("window_start", "window_end", "region")
WINDOW_SCHEMA = [
    ("window_start", "timestamp"),
    ("window_end", "timestamp"),
    ("region", "string"),
    ("n", "bigint"),
]


def window_batch(*items: tuple[int, str, int]) -> pa.Table:
    """(hour, region, n) -> one window row of [hour, hour + 1)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return pa.table(
        {
            "window_start": pa.array(
                [epoch + timedelta(hours=h) for h, _, _ in items], pa.timestamp("us", "UTC")
            ),
            "window_end": pa.array(
                [epoch + timedelta(hours=h + 1) for h, _, _ in items], pa.timestamp("us", "UTC")
            ),
            "region": pa.array([r for _, r, _ in items], pa.string()),
            "n": pa.array([n for _, _, n in items], pa.int64()),
        }
    )


def hour(h: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(hours=h)


def write_windows(out: Any) -> None:
    """Batch 0 (no watermark yet): two open windows. Batch 1 (watermark 1:30): the second grows;
    the first, closed, is marked final though the batch has no row of it. Batch 2 (watermark
    2:00, no rows): the second is final."""
    window_rows(out, "window_end", WATERMARKS.__getitem__)
    out.prepare(WINDOW_SCHEMA)
    out.write(window_batch((0, "eu", 1), (1, "eu", 2)), 0)
    out.write(window_batch((1, "eu", 5)), 1)
    out.write(window_batch((1, "eu", 9)), 1)  # replayed: skipped
    out.write(window_batch(), 2)


FINAL = [(hour(0), "eu", 1, False), (hour(1), "eu", 5, False)]
BEFORE = [  # batch, absent, window_start, n, early
    (0, True, hour(0), None, None),
    (0, True, hour(1), None, None),
    (1, False, hour(0), 1, True),  # marked final by batch 1's watermark
    (1, False, hour(1), 2, True),
    (2, False, hour(1), 5, True),  # marked final by batch 2's watermark
]


def test_duckdb_window_rows_are_early_until_the_watermark_passes_and_keep_their_before_images(
    manager: Manager,
) -> None:
    mapping = mapping_from_node(parse_statement("CREATE MAPPING wins TYPE DuckDB"), "")
    write_windows(UpsertSink(manager.catalog, mapping, "j", "r1", 0, KEYS))
    assert duck_rows(manager, f"SELECT window_start, region, n, {EARLY} FROM wins ORDER BY 1") == FINAL
    assert (
        duck_rows(
            manager,
            f'SELECT batch_id, absent, window_start, n, {EARLY} FROM pitstop."wins__before" ORDER BY 1, 3',
        )
        == BEFORE
    )
    # 'sinkRollback' to a cut after batch 0 gives each window its row at the cut back, early flag
    # included (the before-images of the batches after it).
    duckdb_type = registry.connector("duckdb")
    assert isinstance(duckdb_type, DuckDBConnector)
    spans = (Span("r1", 0, 0),)
    rollback = duckdb_type.rollback_plan(manager.catalog, manager.home, mapping, spans, "j")
    assert rollback.possible and rollback.restores == 2
    with manager.catalog.transaction() as tx:
        duckdb_type.rollback_in_catalog(manager.catalog, mapping, rollback, tx)
    at_cut = duck_rows(manager, f"SELECT window_start, region, n, {EARLY} FROM wins ORDER BY 1")
    assert at_cut == [(hour(0), "eu", 1, True), (hour(1), "eu", 2, True)]

    # A window job without early results writing this table later replaces rows by these keys;
    # writing a table no early-results job wrote, it appends.
    body = TUMBLE.format(sink="daily_revenue", fn="TUMBLE", size="INTERVAL '1' HOUR")
    branch = plan(body).branches[0]
    assert finishing_keys(manager.catalog, mapping, registry.connector(mapping.type), branch) == KEYS
    other = mapping_from_node(parse_statement("CREATE MAPPING other TYPE DuckDB"), "")
    assert finishing_keys(manager.catalog, other, registry.connector(other.type), branch) == ()

    # A window table written without early results gets the key and the column (its rows final).
    with manager.catalog.transaction() as tx:
        tx.execute(
            "CREATE TABLE main.flat (window_start TIMESTAMP, window_end TIMESTAMP, region VARCHAR, n BIGINT)"
        )
        tx.execute("INSERT INTO main.flat VALUES ('1970-01-01 00:00', '1970-01-01 01:00', 'us', 7)")
    flat = UpsertSink(
        manager.catalog,
        mapping_from_node(parse_statement("CREATE MAPPING flat TYPE DuckDB"), ""),
        "j",
        "r2",
        0,
        KEYS,
    )
    window_rows(flat, "window_end", WATERMARKS.__getitem__)
    flat.prepare(WINDOW_SCHEMA)
    flat.write(window_batch((1, "us", 3)), 0)
    assert duck_rows(manager, f"SELECT window_start, region, n, {EARLY} FROM flat ORDER BY 1") == [
        (hour(0), "us", 7, False),
        (hour(1), "us", 3, True),
    ]


def test_postgres_window_rows_are_early_until_the_watermark_passes_and_keep_their_before_images(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
) -> None:
    db = postgres.database()
    out = pg_sink(manager, postgres, db, "wins", keys=KEYS)
    write_windows(out)
    out.interrupt()
    assert postgres.query(db, f"SELECT window_start, region, n, {EARLY} FROM wins ORDER BY 1") == FINAL
    assert (
        postgres.query(
            db, f'SELECT batch_id, absent, window_start, n, {EARLY} FROM "wins__before" ORDER BY 1, 3'
        )
        == BEFORE
    )


# -- on real Spark ---------------------------------------------------------------------------------------
START = datetime(2024, 1, 1)
START_S = int(START.replace(tzinfo=UTC).timestamp())
CLICKS = """CREATE OR REPLACE MAPPING clicks (id BIGINT, page VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) TYPE Generator OPTIONS ('rate'='1000000000000',
'limit'='{limit}', 'keys'='4', 'step_ms'='1000', 'max_per_batch'='125');
"""
WINDOWS = """INSERT INTO wins SELECT /*+ STAGE(per_minute) */ window_start, window_end, page, COUNT(*) AS n,
    SUM(amount) AS total FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, page"""
EARLY_ON = "OPTIONS ('earlyResultsMillis'='300')"


def truth(upto: int, watermark_s: int) -> dict[Row, Row]:
    """(window_start, page) -> (n, total, early) over events 0..upto-1 (event i at START + i s), by
    DuckDB; a window is early while its end is after the watermark (seconds after START)."""
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("page", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("ts", pa.timestamp("us")),
        ]
    )
    con = duckdb.connect()
    options = {"keys": "4", "step_ms": "1000", "rate": "1000000000000"}
    con.register("clicks", pa.Table.from_batches([generate(schema, 0, upto, options)]))
    rows = con.execute(
        "SELECT time_bucket(INTERVAL 1 MINUTE, ts) AS s, page, count(*), sum(amount), "
        "time_bucket(INTERVAL 1 MINUTE, ts) + INTERVAL 1 MINUTE > ? FROM clicks GROUP BY ALL",
        [START + timedelta(seconds=watermark_s)],
    ).fetchall()
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}


def sink_rows(manager: Manager) -> dict[Row, Row]:
    rows = duck_rows(manager, f"SELECT window_start, window_end, page, n, total, {EARLY} FROM wins")
    assert all(r[1] - r[0] == timedelta(minutes=1) for r in rows)
    assert len({(r[0], r[2]) for r in rows}) == len(rows)  # each window and key once
    return {(r[0], r[2]): (r[3], r[4], r[5]) for r in rows}


def batches(manager: Manager) -> tuple[str, dict[int, tuple[int, int]]]:
    """The job's run id and, per batch its checkpoint committed: where it ended in the source and
    the watermark (s after START) it ran with."""
    run_id = manager.catalog.get_job("wins_job").run_id  # type: ignore[union-attr]
    ckpt = Path(manager.catalog.get_run(run_id).folder) / "branches" / "0" / "checkpoint"
    last = checkpoint.latest_commit(ckpt)
    assert last is not None
    out = {}
    for b in range(last + 1):
        o = checkpoint.read_offsets(ckpt, b)
        assert o is not None
        wm = 0 if o.watermark_ms == 0 else o.watermark_ms // 1000 - START_S
        out[b] = (int(o.positions["clicks"]), wm)
    return run_id, out


def batch_starts(manager: Manager) -> list[int]:
    """When each batch of the job's current run started (ms; Spark's ``batchTimestampMs``)."""
    run_id = manager.catalog.get_job("wins_job").run_id  # type: ignore[union-attr]
    offsets = Path(manager.catalog.get_run(run_id).folder) / "branches" / "0" / "checkpoint" / "offsets"
    ids = sorted(int(n.name) for n in offsets.iterdir() if n.name.isdigit())
    return [json.loads((offsets / str(i)).read_text().split("\n")[1])["batchTimestampMs"] for i in ids]


@pytest.mark.spark
def test_early_window_rows_are_partial_then_final_and_survive_turning_the_option_off_and_on(
    manager: Manager,
) -> None:
    # Run 1: early results on. Events 0..249, one a second; windows of a minute.
    run(
        manager,
        CLICKS.format(limit=250)
        + "CREATE MAPPING wins TYPE DuckDB;"
        + f"CREATE JOB wins_job OPTIONS ('earlyResultsMillis'='1000') AS {WINDOWS}; AWAIT JOB wins_job;",
    )
    described = dict(run(manager, "DESCRIBE JOB wins_job")[0].rows)
    assert described["branch 1"].endswith(
        "-> wins (rows replaced by window_start, window_end, page) with early results (at most every "
        "1000 ms; column 'early' true until the window closes)"
    )
    # Micro-batches (and so early rows) start at most once per 'earlyResultsMillis' (the session's
    # trigger interval is 200 ms). Spark's processing-time trigger schedules a batch at the next
    # multiple of its interval, and a batch may start a little after that instant (two starts were
    # seen 846 ms apart), so the rule is one batch per 1000 ms slot, not 1000 ms between starts.
    starts = batch_starts(manager)
    assert len(starts) >= 3 and len({t // 1000 for t in starts}) == len(starts), starts
    # The last window (4 min..5 min) holds 10 s of events and is open: partial and early.
    at_cut = sink_rows(manager)
    assert at_cut == truth(250, 248)
    assert {k for k, v in at_cut.items() if v[2]} == {
        k for k in at_cut if k[0] == START + timedelta(minutes=4)
    }
    assert all(v[0] < 15 for k, v in at_cut.items() if v[2])  # partial: 10 events over 4 pages

    # The before-images give the table after every batch: each window's row as far as the batch
    # had read, early exactly while the watermark that batch ran with was before its end.
    first_run, ends = batches(manager)
    assert [e for e, _ in ends.values()][:3] == [125, 250, 250]
    history = [
        ((1, r[0]), r[1], (r[2], r[3]), (r[4], r[5], r[6]))
        for r in duck_rows(
            manager,
            f'SELECT batch_id, absent, window_start, page, n, total, {EARLY} FROM pitstop."wins__before" '
            f"WHERE run_id = '{first_run}'",
        )
    ]
    partial_seen = False
    for batch, (end, wm) in ends.items():
        expected = truth(end, wm)
        assert table_at(at_cut, history, (1, batch)) == expected, batch
        partial_seen |= any(v[2] and v[0] != truth(250, 248)[k][0] for k, v in expected.items())
    assert partial_seen  # some window was written early with part of its events, then grew
    assert any(not absent and row[2] for at, absent, key, row in history)  # an early row replaced

    # Pit stop 1: early results turned off. Spark's own state files go on in append mode; the
    # window open at the cut gets its final row in place of its early one.
    run(manager, "DROP JOB wins_job WITH SNAPSHOT wins_v1;" + CLICKS.format(limit=450))
    off = f"wins_job FROM SNAPSHOT wins_v1 AS {WINDOWS}"
    (row,) = [r for r in run(manager, f"EXPLAIN CREATE JOB {off}")[0].rows if r[3] == "per_minute"]
    assert row[7] == "restored" and NATIVE in row[8] and "early results turned off" in row[8]
    run(manager, f"CREATE JOB {off}; AWAIT JOB wins_job;")
    after_off = sink_rows(manager)
    closed = {k: v for k, v in truth(450, 448).items() if not v[2]}
    assert after_off == closed  # appended windows only when final; the early row replaced

    # Pit stop 2: early results turned on again: restored from the snapshot's rows (EXPLAIN says why).
    run(manager, "DROP JOB wins_job WITH SNAPSHOT wins_v2;" + CLICKS.format(limit=600))
    on = f"wins_job {EARLY_ON} FROM SNAPSHOT wins_v2 AS {WINDOWS}"
    (row,) = [r for r in run(manager, f"EXPLAIN CREATE JOB {on}")[0].rows if r[3] == "per_minute"]
    assert row[7] == "restored" and ROWS in row[8] and "early results turned on" in row[8]
    assert "with early results" in row[4]
    run(manager, f"CREATE JOB {on}; AWAIT JOB wins_job;")

    # The same as one uninterrupted run over events 0..599: every closed window final and once,
    # the window the watermark has not passed yet early, with every event so far.
    final = sink_rows(manager)
    assert final == truth(600, 598)
    assert sum(v[0] for v in final.values()) == 600
    assert [k for k, v in final.items() if v[2]] and all(
        k[0] == START + timedelta(minutes=9) for k, v in final.items() if v[2]
    )
    assert Decimal(sum(v[1] for v in final.values())) > 0
    run(manager, "DROP JOB wins_job;")
