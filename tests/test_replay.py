"""EXPLAIN ANALYZE CREATE JOB (issue 27): the job's input since a snapshot replayed through the new
SQL and the job's own, and their diff per sink, checked against a batch computation; the job,
its sinks and the catalog untouched; ``pitstop test`` exits by the diff. And, without Spark, the
statement's grammar and the diff itself on real DuckDB tables."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from command_helpers import pitstop
from conftest import DELAY, EPOCH, batch_windows, make_orders, orders_mapping, revenue_select, run, settings
from kafka_helpers import Broker, broker  # noqa: F401 - the fixture
from pg_helpers import Postgres, postgres  # noqa: F401 - the fixture
from pitstop.catalog import diffs
from pitstop.catalog.store import Catalog
from pitstop.errors import PlanError, SqlError, UnknownObjectError
from pitstop.executor import changed_names
from pitstop.manager import Manager
from pitstop.replay.capture import Capture
from pitstop.replay.diff import compare
from pitstop.server.auth import allowed
from pitstop.sql import nodes
from pitstop.sql.explain import analyze_statement
from pitstop.sql.parser import parse_statement

DAY, HOUR = timedelta(hours=24), timedelta(hours=1)
DAILY, TWO_DAYS, HOURLY = "'24' HOUR", "'48' HOUR", "'1' HOUR"
STEP = 90  # seconds between orders


def orders(first: int, last: int) -> list[dict[str, object]]:
    return [make_orders.order(i, STEP) for i in range(first, last)]


def watermark(last_id: int) -> datetime:
    return EPOCH + timedelta(seconds=(last_id - 1) * STEP) - DELAY


def closed_between(
    windows: dict[tuple[datetime, str], tuple[Decimal, int]], size: timedelta, after: datetime, upto: datetime
) -> dict[tuple[datetime, str], tuple[Decimal, int]]:
    """The windows a job emits over a span: those whose end the watermark passes in it."""
    return {k: v for k, v in windows.items() if after < k[0] + size <= upto}


def dump(manager: Manager) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the catalog database but the diffs and ``pitstop.metrics`` (the live job's
    samples, taken every few seconds whatever a replay does), whole and sorted."""
    _, tables = manager.catalog.query(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema <> 'diff' AND (table_schema, table_name) <> ('pitstop', 'metrics') ORDER BY ALL"
    )
    out = {}
    for schema, table in tables:
        _, rows = manager.catalog.query(f'SELECT * FROM "{schema}"."{table}" ORDER BY ALL')
        out[f"{schema}.{table}"] = rows
    return out


def diff_rows(manager: Manager, table: str) -> list[dict[str, Any]]:
    columns, rows = manager.catalog.query(f"SELECT * FROM diff.{table}")
    return [dict(zip(columns, r, strict=True)) for r in rows]


@pytest.mark.spark
def test_explain_analyze_diffs_the_new_sql_against_the_job_over_the_same_input(tmp_path: Path) -> None:
    data, home = tmp_path / "orders", tmp_path / "home"
    manager = Manager(settings(home))
    try:
        make_orders.write_orders(data, 0, 2000, files=4)
        run(
            manager,
            orders_mapping(data)
            + f"""
            CREATE MAPPING daily_revenue TYPE DuckDB;
            CREATE MAPPING hourly_revenue TYPE DuckDB;
            CREATE JOB revenue AS INSERT INTO daily_revenue {revenue_select(DAILY)};
            AWAIT JOB revenue;
            CREATE SNAPSHOT s1 FOR JOB revenue;
            """,
        )
        make_orders.write_orders(data, 2000, 4000, files=4, prefix="b")
        run(manager, "AWAIT JOB revenue; CREATE SNAPSHOT s2 FOR JOB revenue;")
        make_orders.write_orders(data, 4000, 5000, files=2, prefix="c")
        run(manager, "AWAIT JOB revenue;")
        before = dump(manager)

        # A filter on the daily windows and a new hourly window, from s1 up to s2.
        changed = run(
            manager,
            f"""EXPLAIN ANALYZE CREATE JOB revenue FROM SNAPSHOT s1 UNTIL SNAPSHOT s2 AS BEGIN
                INSERT INTO daily_revenue {revenue_select(DAILY, "WHERE amount >= 50")};
                INSERT INTO hourly_revenue {revenue_select(HOURLY, "WHERE amount >= 50")};
            END;""",
        )[0]
        assert "2 of 2 sink(s) differ (daily_revenue, hourly_revenue)" in changed.message
        assert "up to snapshot 's2'" in changed.message
        by = {(r[7], r[2] or r[1]): r[8] for r in changed.rows}
        assert by[("replayed", "orders")].startswith("replays 4 files -> 8 files")
        assert by[("restored", "daily_revenue")].endswith("(native)")  # EXPLAIN's verdicts come first
        # The day still open at s2 holds, in the new replay's state, only the orders it keeps.
        states = {r[3]: (r[7], r[8]) for r in changed.rows if r[7].startswith("state")}
        assert list(states) == ["daily_revenue.aggregate"]  # the hourly stage is new: no old state
        assert states["daily_revenue.aggregate"][0] == "state differs"
        assert (
            "0 row(s) identical, 3 changed (COUNT(*), SUM(amount)), 0 only old, 0 only new"
            in states["daily_revenue.aggregate"][1]
        )
        day5 = {
            (r["region"], r["old_COUNT(*)"], r["new_COUNT(*)"])
            for r in diff_rows(manager, '"revenue_1_daily_revenue.aggregate"')
        }
        open_day = [o for o in orders(0, 4000) if str(o["ts"]) >= "2024-01-05"]
        assert {
            (
                region,
                sum(1 for o in open_day if o["region"] == region),
                sum(1 for o in open_day if o["region"] == region and float(str(o["amount"])) >= 50),
            )
            for region in ("eu", "us", "apac")
        } == day5

        # The daily windows the span closes: the job's own SQL sums every order; the new one the
        # orders of the state at the cut (read before it, unfiltered) and the later ones it keeps.
        cut, end = watermark(2000), watermark(4000)
        old = closed_between(batch_windows(orders(0, 4000), DAY), DAY, cut, end)
        kept = [o for o in orders(2000, 4000) if float(str(o["amount"])) >= 50]
        new = closed_between(batch_windows(orders(0, 2000) + kept, DAY), DAY, cut, end)
        assert len(old) == 6 and set(new) == set(old)
        rows = diff_rows(manager, "revenue_1_daily_revenue")
        assert {r["change"] for r in rows} == {"changed"}
        got = {
            (r["window_start"], r["region"]): (
                (r["old_revenue"], r["old_orders"]),
                (r["new_revenue"], r["new_orders"]),
            )
            for r in rows
        }
        assert got == {k: (old[k], new[k]) for k in old}
        assert (
            "0 row(s) identical, 6 changed (orders, revenue), 0 only old, 0 only new"
            in by[("differs", "daily_revenue")]
        )
        # The job's own SQL, replayed, writes what the job wrote over the span (its sink's hashes).
        assert by[("reproduced", "daily_revenue")] == (
            "the job's own SQL, replayed, writes the 6 row(s) the job wrote over the span"
        )
        # Every hourly window is new: the job has no such branch.
        hourly = closed_between(batch_windows(kept, HOUR), HOUR, cut, end)
        hourly_rows = diff_rows(manager, "revenue_1_hourly_revenue")
        assert len(hourly) > 40 and len(hourly_rows) == len(hourly)
        assert {r["change"] for r in hourly_rows} == {"only new"}
        assert {
            (r["window_start"], r["region"]): (r["new_revenue"], r["new_orders"]) for r in hourly_rows
        } == hourly

        # The same SQL, up to where the job stands: nothing differs.
        daily = f"INSERT INTO daily_revenue {revenue_select(DAILY)}"
        same = run(manager, f"EXPLAIN ANALYZE CREATE JOB revenue FROM SNAPSHOT s1 AS {daily};")[0]
        assert "every sink (1) the same" in same.message, same.message
        assert "where job 'revenue' stands" in same.message
        identical = len(closed_between(batch_windows(orders(0, 5000), DAY), DAY, cut, watermark(5000)))
        assert f"{identical} row(s) identical, 0 changed, 0 only old, 0 only new" in same.rows[-2][8]
        assert diff_rows(manager, "revenue_2_daily_revenue") == []
        assert same.rows[-1][7] == "state same" and same.rows[-1][3] == "daily_revenue.aggregate"
        assert same.rows[-3][7] == "reproduced" and f"writes the {identical} row(s)" in same.rows[-3][8]

        # Nothing but the diff tables changed: the job's sinks and the catalog are as they were,
        # the job runs on, and the replays' folders are gone.
        assert dump(manager) == before
        assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("revenue", "RUNNING")]
        assert not any((home / "replays").iterdir())

        # The diffs are kept until dropped.
        assert run(manager, "DROP DIFF revenue_1;")[0].message == "diff 'revenue_1' dropped (3 table(s))"
        _, left = manager.catalog.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'diff'"
        )
        assert sorted(left) == [("revenue_2_daily_revenue",), ("revenue_2_daily_revenue.aggregate",)]
        with pytest.raises(
            UnknownObjectError,
            match=r"unknown diff 'revenue_1' \(did you mean 'revenue_2'\?\); the diffs kept: revenue_2",
        ):
            run(manager, "DROP DIFF revenue_1;")
        assert "does not exist" in run(manager, "DROP DIFF IF EXISTS revenue_1;")[0].message
        with pytest.raises(PlanError, match="UNTIL SNAPSHOT ends the replay of EXPLAIN ANALYZE"):
            run(manager, f"CREATE JOB other FROM SNAPSHOT s1 UNTIL SNAPSHOT s2 AS {daily};")
        with pytest.raises(
            PlanError, match="source 'orders': snapshot 's1' stands at 4 files, before snapshot 's2'"
        ):
            run(manager, f"EXPLAIN ANALYZE CREATE JOB revenue FROM SNAPSHOT s2 UNTIL SNAPSHOT s1 AS {daily};")
    finally:
        manager.close()

    # `pitstop test`: a window twice as long changes the sink, which --expect same calls a failure.
    job = tmp_path / "revenue.sql"
    job.write_text(f"CREATE JOB revenue AS INSERT INTO daily_revenue {revenue_select(TWO_DAYS)};\n")
    done = pitstop("test", str(job), "--snapshot", "s1", "--until", "s2", home=home)
    assert done.returncode == 1, done.stderr
    assert "differs" in done.stdout and "only new" in done.stdout
    done = pitstop("test", str(job), "--snapshot", "s1", "--until", "s2", "--expect", "changes", home=home)
    assert done.returncode == 0, done.stderr


# -- without Spark -------------------------------------------------------------------------------
def test_explain_analyze_reads_and_writes_back() -> None:
    node = parse_statement(
        "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT a UNTIL SNAPSHOT b AS INSERT INTO s SELECT * FROM o"
    )
    assert isinstance(node, nodes.ExplainAnalyze) and node.this.args["until"].name == "b"
    assert changed_names(node) == [("snapshot", "a"), ("snapshot", "b")]  # held while it replays
    explain = parse_statement("EXPLAIN CREATE JOB j FROM SNAPSHOT a AS INSERT INTO s SELECT * FROM o")
    assert allowed("reader", explain) and not allowed("reader", node)  # a replay runs Spark, keeps tables
    text = analyze_statement("CREATE JOB j AS INSERT INTO s SELECT * FROM o;", "j.sql", "a", None)
    assert text.startswith("EXPLAIN ANALYZE ")
    assert text == "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT a AS INSERT INTO s SELECT * FROM o"
    with pytest.raises(SqlError, match="expected CREATE JOB after EXPLAIN ANALYZE"):
        parse_statement("EXPLAIN ANALYZE")
    with pytest.raises(PlanError, match="starts from no snapshot: give --snapshot s"):
        analyze_statement("CREATE JOB j AS INSERT INTO s SELECT * FROM o;", "j.sql", None, None)
    with pytest.raises(PlanError, match="holds 2 CREATE JOB statements; pitstop test replays one"):
        analyze_statement(
            "CREATE JOB j AS INSERT INTO s SELECT * FROM o; CREATE JOB k AS INSERT INTO s SELECT * FROM o;",
            "j.sql",
            "a",
            None,
        )


def _capture(tmp_path: Path, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> Capture:
    capture = Capture(tmp_path / "capture.duckdb")
    for name, rows in (("old", old), ("new", new)):
        if rows:
            table = pa.Table.from_pylist(rows)
            sink = capture.sink(name, ())
            sink.prepare(
                [
                    (f.name, {"int64": "bigint", "double": "double", "string": "string"}[str(f.type)])
                    for f in table.schema
                ]
            )
            sink.write(table, 0)
    return capture


def test_a_keyed_diff_names_the_changed_columns_and_tolerates_float_rounding(tmp_path: Path) -> None:
    old = [{"k": 1, "v": 0.1 + 0.2, "w": "a"}, {"k": 2, "v": 1.0, "w": "b"}, {"k": 3, "v": 5.0, "w": "c"}]
    new = [{"k": 1, "v": 0.3, "w": "a"}, {"k": 2, "v": 1.5, "w": "b"}, {"k": 4, "v": 7.0, "w": "d"}]
    capture = _capture(tmp_path, old, new)
    try:
        d = compare(capture, "s", "old", "new", ("k",))
    finally:
        capture.close()
    assert (d.identical, d.changed, d.only_old, d.only_new) == (1, 1, 1, 1)
    assert d.columns == (("v", 1),) and d.keys == ("k",)
    assert d.table.to_pylist() == [
        {
            "change": "changed",
            "changed_columns": "v",
            "k": 2,
            "old_v": 1.0,
            "new_v": 1.5,
            "old_w": "b",
            "new_w": "b",
        },
        {
            "change": "only new",
            "changed_columns": None,
            "k": 4,
            "old_v": None,
            "new_v": 7.0,
            "old_w": None,
            "new_w": "d",
        },
        {
            "change": "only old",
            "changed_columns": None,
            "k": 3,
            "old_v": 5.0,
            "new_v": None,
            "old_w": "c",
            "new_w": None,
        },
    ]
    assert d.text().startswith("1 row(s) identical, 1 changed (v), 1 only old, 1 only new (matched on k)")


def test_rows_without_a_unique_key_are_compared_as_multisets(tmp_path: Path) -> None:
    old = [{"k": 1, "v": 1.0}, {"k": 1, "v": 1.0}, {"k": 2, "v": 2.0}]
    new = [{"k": 1, "v": 1.0}, {"k": 2, "v": 2.0}, {"k": 2, "v": 2.0}]
    capture = _capture(tmp_path, old, new)
    try:
        d = compare(capture, "s", "old", "new", ("k",))  # k repeats: no key
        gone = compare(capture, "s", "old", "missing", ())  # a sink the new SQL does not write
    finally:
        capture.close()
    assert (d.identical, d.changed, d.only_old, d.only_new, d.keys) == (2, 0, 1, 1, ())
    assert [r["change"] for r in d.table.to_pylist()] == ["only new", "only old"]
    assert (gone.identical, gone.only_old, gone.only_new) == (0, 3, 0)
    assert not gone.same and "3 only old" in gone.text()


def test_diffs_older_than_the_trash_s_retention_are_dropped(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.duckdb")
    try:
        rows = pa.table({"change": ["only new"], "k": [1]})
        assert diffs.keep(catalog, "j", {"s": rows})[1] == "j_1"
        kept, name = diffs.keep(catalog, "j", {"s": rows, "t": rows})
        assert name == "j_2" and kept == {"s": 'diff."j_2_s"', "t": 'diff."j_2_t"'}
        with catalog.transaction() as tx:  # j_1 was made ten days ago
            old = '{"diff": "j_1", "job": "j", "n": 1, "created": "2020-01-01T00:00:00+00:00"}'
            tx.execute(f"""COMMENT ON TABLE diff."j_1_s" IS '{old}'""")
        assert diffs.expire(catalog, None) == []
        assert diffs.expire(catalog, 7) == ["j_1"]
        assert diffs.names(catalog) == ["j_2"]
        assert diffs.keep(catalog, "J", {"s": rows})[1] == "J_3"  # jobs' names are case-insensitive
        with catalog.transaction() as tx:  # a table of the schema that is not a diff's: not taken
            tx.execute('CREATE TABLE diff."j_4_s" AS SELECT 1 AS x')
        assert diffs.keep(catalog, "j", {"s": rows})[1] == "j_5"
        assert diffs.names(catalog) == ["j_2", "J_3", "j_5"]
    finally:
        catalog.close()


@pytest.mark.spark
def test_a_kafka_source_into_a_postgres_sink_is_replayed_from_its_offsets(
    tmp_path: Path,
    broker: Broker,  # noqa: F811
    postgres: Postgres,  # noqa: F811
) -> None:
    """The span of a Kafka source is its partitions' offsets; a PostgreSQL sink is compared as any
    other (the replay writes scratch tables, never the server's)."""
    six = timedelta(hours=6)
    db = postgres.database()
    broker.create_topic("orders", 3)
    broker.produce("orders", [(i % 3, make_orders.order(i, STEP)) for i in range(0, 600)])
    manager = Manager(settings(tmp_path / "home"))
    select = revenue_select("'6' HOUR")
    try:
        run(
            manager,
            f"""CREATE MAPPING orders (
                order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
                WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
            ) TYPE Kafka OPTIONS (
                'bootstrap.servers'='{broker.bootstrap}', 'topic'='orders', 'valueFormat'='json'
            );
            CREATE MAPPING out TYPE Postgres OPTIONS ('dsn'='{postgres.url(db)}', 'table'='public.rev');
            CREATE JOB k AS INSERT INTO out {select};
            AWAIT JOB k; CREATE SNAPSHOT s1 FOR JOB k;""",
        )
        broker.produce("orders", [(i % 3, make_orders.order(i, STEP)) for i in range(600, 1500)])
        run(manager, "AWAIT JOB k;")
        sink = "SELECT * FROM rev ORDER BY 1, 2, 3"
        before = (
            postgres.query(db, sink),
            postgres.query(db, "SELECT * FROM pitstop_sink_batches ORDER BY 1, 2, 3, 4"),
        )
        filtered = revenue_select("'6' HOUR", "WHERE amount >= 50")
        result = run(
            manager, f"EXPLAIN ANALYZE CREATE JOB k FROM SNAPSHOT s1 AS INSERT INTO out {filtered};"
        )[0]
        by = {(r[7], r[2] or r[1]): r[8] for r in result.rows}
        assert by[("replayed", "orders")].startswith(
            "replays 3 partitions, 600 records (next offsets 0:200, 1:200, 2:200) -> "
            "3 partitions, 1,500 records (next offsets 0:500, 1:500, 2:500)"
        )
        cut, end = watermark(600), watermark(1500)
        old = closed_between(batch_windows(orders(0, 1500), six), six, cut, end)
        kept = [o for o in orders(600, 1500) if float(str(o["amount"])) >= 50]
        new = closed_between(batch_windows(orders(0, 600) + kept, six), six, cut, end)
        rows = diff_rows(manager, "k_1_out")
        got = {
            (r["window_start"], r["region"]): (
                (r["old_revenue"], r["old_orders"]),
                (r["new_revenue"], r["new_orders"]),
            )
            for r in rows
        }
        assert len(old) > 10 and got == {k: (old[k], new[k]) for k in old}
        assert f"0 row(s) identical, {len(old)} changed (orders, revenue)" in by[("differs", "out")]
        after = (
            postgres.query(db, sink),
            postgres.query(db, "SELECT * FROM pitstop_sink_batches ORDER BY 1, 2, 3, 4"),
        )
        assert after == before  # the server's table and bookkeeping are as they were
    finally:
        manager.close()
