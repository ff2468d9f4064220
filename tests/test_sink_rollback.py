"""Restoring an older snapshot rolls the sinks back to its cut (issue 13).

A job runs, a snapshot is taken while it keeps running, more input arrives, the job is dropped,
and it is created again from the older snapshot with a fixed query. With ``'sinkRollback'='true'``
the sinks end as if the job had stopped at the snapshot and restarted there with the new query;
without it, EXPLAIN says how many windows will be written twice, and they are.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from command_helpers import pitstop
from conftest import (
    batch_windows,
    closed,
    make_orders,
    orders_mapping,
    revenue_select,
    run,
    settings,
    sink_windows,
)
from pitstop import faults
from pitstop.errors import PlanError
from pitstop.manager import Manager
from pitstop.snapshots.rollback import refuse_if_blocked

HOUR = timedelta(hours=1)
OLD_WHERE, NEW_WHERE = "WHERE amount >= 5", "WHERE amount >= 1"  # the fix: small orders count too


def hourly(sink: str, where: str) -> str:
    return f"INSERT INTO {sink} {revenue_select(chr(39) + '1' + chr(39) + ' HOUR', where)}"


def body(where: str) -> str:
    return f"BEGIN {hourly('revenue', where)}; {hourly('revenue_files', where)}; END"


def hourly_rows(manager: Manager) -> dict:
    """Job j's rows of the shared table (job k writes daily windows into it)."""
    _, rows = manager.catalog.query(
        "SELECT window_start, region, revenue, orders FROM revenue "
        "WHERE window_end - window_start = INTERVAL 1 HOUR"
    )
    out: dict = {}
    for start, region, revenue, count in rows:
        assert (start, region) not in out, f"window {start} {region} written twice"
        out[(start, region)] = (Decimal(revenue), int(count))
    return out


def daily_rows(manager: Manager) -> list:
    _, rows = manager.catalog.query(
        "SELECT * FROM revenue WHERE window_end - window_start = INTERVAL 1 DAY ORDER BY ALL"
    )
    return rows


def file_rows(folder: Path) -> dict:
    out: dict = {}
    for path in sorted(folder.glob("part-*.json")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            key = (make_orders.EPOCH.fromisoformat(r["window_start"]), r["region"])
            assert key not in out, f"window {key} written twice to {folder}"
            out[key] = (Decimal(str(r["revenue"])).quantize(Decimal("0.01")), int(r["orders"]))
    return out


def reference(cut: int, last: int) -> dict:
    """A batch computation: the old query over the orders read up to the cut, the new one after."""
    old = [o for o in map(make_orders.order, range(cut)) if float(str(o["amount"])) >= 5]
    new = [o for o in map(make_orders.order, range(cut, last)) if float(str(o["amount"])) >= 1]
    watermark = make_orders.EPOCH + timedelta(seconds=(last - 1) * 90) - timedelta(minutes=5)
    return closed(batch_windows(old + new, HOUR), HOUR, watermark)


def explained(manager: Manager, sql: str) -> dict[tuple[str, str], list[str]]:
    """EXPLAIN's sink rows: (sink, outcome) -> reasons."""
    out: dict[tuple[str, str], list[str]] = {}
    for row in run(manager, f"EXPLAIN {sql}")[0].rows:
        if row[0] is None and row[1] is None and row[2] is not None:
            out.setdefault((row[2], row[7]), []).append(row[8])
    return out


@pytest.mark.spark
def test_restore_from_an_older_snapshot_rolls_duckdb_and_file_sinks_back_to_its_cut(
    manager: Manager, tmp_path: Path
) -> None:
    data, files, home = tmp_path / "orders", tmp_path / "revenue_files", tmp_path / "home"
    make_orders.write_orders(data, 0, 1000, files=2)
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING revenue TYPE DuckDB;
        CREATE MAPPING revenue_files TYPE File OPTIONS ('path'='{files}', 'format'='json');
        CREATE JOB k AS INSERT INTO revenue {revenue_select("'24' HOUR")};
        CREATE JOB j AS {body(OLD_WHERE)};
        AWAIT JOB j; AWAIT JOB k;
        CREATE SNAPSHOT s1 FOR JOB j;
    """,
    )
    at_cut, files_at_cut = hourly_rows(manager), set(p.name for p in files.iterdir())
    assert at_cut and file_rows(files) == at_cut
    for first in (1000, 1500):  # two batches after the cut, a file each
        make_orders.write_orders(data, first, first + 500, files=1)
        run(manager, "AWAIT JOB j; AWAIT JOB k;")
    run(manager, "DROP JOB j WITH SNAPSHOT s2;")
    before = hourly_rows(manager)
    after_cut = {k: v for k, v in before.items() if k not in at_cut}
    moved = sorted(set(p.name for p in files.iterdir()) - files_at_cut)
    assert after_cut and len(moved) == 2
    k_rows = daily_rows(manager)
    assert k_rows

    # SHOW SNAPSHOTS / DESCRIBE SNAPSHOT: s2 is the job's latest cut, s1 an older one.
    cuts = {r[3]: r[5] for r in run(manager, "SHOW SNAPSHOTS;")[0].rows}
    assert cuts["s2"] == "latest: job 'j' ran no batch past it"
    assert cuts["s1"].startswith("older: job 'j' ran ") and cuts["s1"].endswith(" batch(es) past it")
    assert dict(run(manager, "DESCRIBE SNAPSHOT s1;")[0].rows)["cut"] == cuts["s1"]

    create = f"CREATE JOB j FROM SNAPSHOT s1 OPTIONS ('sinkRollback'='true') AS {body(NEW_WHERE)};"
    sinks = explained(manager, create)
    n = len(after_cut)
    [removes] = sinks[("revenue", "rollback")]
    assert removes.startswith(f"removes {n} windows written after snapshot 's1' (run j-")
    [trashes] = sinks[("revenue_files", "rollback")]
    assert trashes.startswith(
        f"moves to the trash {len(moved)} files ({n} windows) written after snapshot 's1'"
    )
    [shared] = sinks[("revenue", "shared")]
    assert shared == (
        f"job 'k' also writes revenue ({len(k_rows)} row(s)): a rollback touches only the rows of this "
        "job's runs, never these"
    )
    assert hourly_rows(manager) == before  # EXPLAIN changed nothing
    assert sorted(p.name for p in files.iterdir()) == sorted(files_at_cut | set(moved))

    started = run(manager, create)[0].message
    assert f"sink 'revenue' rolled back to the cut: {n} windows removed" in started
    assert f"sink 'revenue_files' rolled back to the cut: {len(moved)} files ({n} windows) moved" in started
    # The files after the cut are in the home's trash, whole, not deleted.
    [trash] = [p for p in (home / "trash").iterdir() if "-rollback-j-" in p.name]
    assert sorted(p.name for p in (trash / "revenue_files").iterdir()) == moved
    run(manager, "AWAIT JOB j;")

    expected = reference(1000, 2000)
    assert hourly_rows(manager) == expected  # no window twice, none of the old query after the cut
    assert file_rows(files) == expected
    assert {k: v for k, v in hourly_rows(manager).items() if k in at_cut} == at_cut  # kept as emitted
    assert daily_rows(manager) == k_rows  # the other job's rows are untouched
    # The restored job's own bookkeeping and rows: a second look finds nothing after s1 to roll
    # back but what the new run wrote.
    again = explained(manager, create.replace("CREATE JOB j", "CREATE JOB j2"))
    assert again[("", "refused")] == [
        "job 'j', which snapshot 's1' was taken of, still runs; DROP JOB j first"
    ]

    # s2 was taken past s1's cut, which the sinks were just rolled back to: a job restored from
    # it would never write the windows between the two cuts again, so it is refused (EXPLAIN
    # says why) unless the gap is accepted; nothing is touched either way.
    run(manager, "DROP JOB j;")
    from_s2 = f"CREATE JOB j FROM SNAPSHOT s2 AS {body(NEW_WHERE)};"
    [gap] = explained(manager, from_s2)[("", "refused")]
    assert gap.startswith(
        "snapshot 's2' was taken past the cut of snapshot 's1', to which job 'j' rolled sink 'revenue' "
        "back on "
    )
    assert gap.endswith(
        "Restore from 's1' or an older snapshot; to restore from 's2' all the same, add "
        "'acceptSinkGap'='true'"
    )
    with pytest.raises(PlanError, match=r"job 'j' was not created: snapshot 's2' was taken past the cut"):
        run(manager, from_s2)
    accepted = from_s2.replace(" AS BEGIN", " OPTIONS ('acceptSinkGap'='true') AS BEGIN")
    assert ("", "refused") not in explained(manager, accepted)
    assert "j" not in {r[0] for r in run(manager, "SHOW JOBS;")[0].rows}
    assert hourly_rows(manager) == expected and file_rows(files) == expected


@pytest.mark.spark
def test_restore_without_rollback_writes_again_exactly_the_windows_explain_names(
    manager: Manager, tmp_path: Path
) -> None:
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 600, files=1)
    same = f"INSERT INTO revenue {revenue_select(chr(39) + '1' + chr(39) + ' HOUR')}"
    with pytest.raises(PlanError, match="add FROM SNAPSHOT name"):
        run(manager, f"EXPLAIN CREATE JOB x OPTIONS ('sinkRollback'='true') AS {same};")
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING revenue TYPE DuckDB;
        CREATE JOB j AS {same};
        AWAIT JOB j;
        CREATE SNAPSHOT s1 FOR JOB j;
    """,
    )
    at_cut = sink_windows(manager, "revenue")
    make_orders.write_orders(data, 600, 1200, files=1)
    run(manager, "AWAIT JOB j; DROP JOB j;")
    written = sink_windows(manager, "revenue")
    n = len(written) - len(at_cut)
    assert n > 0
    described = dict(run(manager, "DESCRIBE SNAPSHOT s1;")[0].rows)
    assert described["cut"].startswith("older: job 'j' ran ")

    create = f"CREATE JOB j FROM SNAPSHOT s1 AS {same};"
    [warning] = explained(manager, create)[("revenue", "warning")]
    assert warning.startswith(
        f"{n} windows of revenue were written after snapshot 's1'; they will be written again: "
        "add 'sinkRollback'='true' to replace them (run j-"
    )
    run(manager, create + " AWAIT JOB j;")
    _, rows = manager.catalog.query("SELECT window_start, region, revenue, orders FROM revenue")
    counted = Counter((start, region) for start, region, _, _ in rows)
    twice = {k for k, c in counted.items() if c == 2}
    assert set(counted.values()) == {1, 2}
    assert twice == set(written) - set(at_cut)  # exactly the windows EXPLAIN counted
    assert len(twice) == n
    everything = [make_orders.order(i) for i in range(1200)]
    last = make_orders.EPOCH + timedelta(seconds=1199 * 90) - timedelta(minutes=5)
    distinct = {(s, r): (Decimal(v), int(c)) for s, r, v, c in rows}
    assert distinct == closed(batch_windows(everything, HOUR), HOUR, last)


@pytest.mark.spark
def test_kill_during_the_rollback_leaves_all_or_nothing(tmp_path: Path) -> None:
    """kill -9 inside the rollback's transaction: nothing rolled back, no job; kill -9 right after
    its commit: the next open finishes it (files to the trash) and the job runs on the sinks at
    the cut."""
    data, files, home = tmp_path / "orders", tmp_path / "revenue_files", tmp_path / "home"
    make_orders.write_orders(data, 0, 600, files=1)
    manager = Manager(settings(home))
    try:
        run(
            manager,
            orders_mapping(data)
            + f"""
            CREATE MAPPING revenue TYPE DuckDB;
            CREATE MAPPING revenue_files TYPE File OPTIONS ('path'='{files}', 'format'='json');
            CREATE JOB j AS {body(OLD_WHERE)};
            AWAIT JOB j;
            CREATE SNAPSHOT s1 FOR JOB j;
        """,
        )
        at_cut, files_at_cut = hourly_rows(manager), sorted(p.name for p in files.iterdir())
        make_orders.write_orders(data, 600, 1200, files=1)
        run(manager, "AWAIT JOB j; DROP JOB j;")
        before, files_before = hourly_rows(manager), sorted(p.name for p in files.iterdir())
        assert len(before) > len(at_cut) and len(files_before) > len(files_at_cut)
    finally:
        manager.close()
    create = f"CREATE JOB j FROM SNAPSHOT s1 OPTIONS ('sinkRollback'='true') AS {body(NEW_WHERE)};"

    # Killed inside the transaction: after restart, nothing was rolled back and there is no job.
    done = pitstop("run", "-c", create, home=home, env={faults.CRASH_ENV: "rollback.deleted"}, process=True)
    assert done.returncode == -signal.SIGKILL and "crash point rollback.deleted" in done.stderr
    manager = Manager(settings(home))
    try:
        assert run(manager, "SHOW JOBS;")[0].rows == ()
        assert hourly_rows(manager) == before
        assert sorted(p.name for p in files.iterdir()) == files_before
        assert not (home / "trash").exists() or not list((home / "trash").glob("*-rollback-*"))
    finally:
        manager.close()

    # Killed right after the commit, before the files were moved: the next open finishes it, and
    # the job runs from the cut.
    done = pitstop("run", "-c", create, home=home, env={faults.CRASH_ENV: "rollback.committed"}, process=True)
    assert done.returncode == -signal.SIGKILL and "crash point rollback.committed" in done.stderr
    manager = Manager(settings(home))
    try:
        assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("j", "STOPPED")]
        assert hourly_rows(manager) == at_cut
        assert sorted(p.name for p in files.iterdir()) == files_at_cut
        [trash] = list((home / "trash").glob("*-rollback-*"))
        assert sorted(p.name for p in (trash / "revenue_files").iterdir()) == sorted(
            set(files_before) - set(files_at_cut)
        )
        run(manager, "AWAIT JOB j;")  # resumes the job (Spark starts here)
        expected = reference(600, 1200)
        assert hourly_rows(manager) == expected
        assert file_rows(files) == expected
    finally:
        manager.close()


def test_explain_says_a_kafka_topic_is_not_rolled_back_and_what_its_consumer_sees(manager: Manager) -> None:
    """Without a broker: a Kafka sink's rollback plan is a refusal to delete, said in EXPLAIN's
    words, which never blocks the restore (the other sinks are still rolled back)."""
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.kafka.connector import CONNECTOR
    from pitstop.connectors.rollback import Span
    from pitstop.describe import rollback_rows
    from pitstop.plan.model import JobPlan

    topic = Mapping("alerts", "kafka", (), None, {"bootstrap.servers": "127.0.0.1:1", "topic": "alerts"})
    plan = CONNECTOR.rollback_plan(manager.catalog, manager.home, topic, (Span("j-1", 0, 4),), "j")
    assert not plan.possible and not plan.anything
    refuse_if_blocked("s1", (plan,), None)  # does not refuse
    [row] = rollback_rows("s1", (plan,), True, JobPlan("j", ()), None)
    said = (
        "a Kafka topic cannot be rolled back (its records cannot be deleted): what run(s) j-1 wrote after "
        "the cut stays in the topic, and the restored job writes those windows again, so a consumer reads "
        "them twice; the headers pitstop.run and pitstop.batch tell the copies apart (keep the latest "
        "run's record per key)"
    )
    assert row == (None, None, "alerts", None, None, None, None, "no rollback", said)


def test_rows_written_without_row_hashes_refuse_the_rollback_naming_the_sink(manager: Manager) -> None:
    """Batches an older pitstop wrote (bookkeeping rows, no row hashes) cannot be found row by
    row: the rollback is refused, naming the sink and why, and nothing is done."""
    from pitstop.catalog.clock import now
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.duckdb.connector import CONNECTOR
    from pitstop.connectors.rollback import Span
    from pitstop.errors import PitstopError

    with manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE main.old_sink (x INTEGER)")
        tx.execute("INSERT INTO main.old_sink VALUES (1), (2), (3)")
        for batch, rows in ((0, 1), (1, 2)):
            tx.execute(
                "INSERT INTO pitstop.sink_batches VALUES ('j', 'j-0', 0, ?, ?, ?)", [batch, rows, now()]
            )
    sink = Mapping("old_sink", "duckdb", (), None, {})
    plan = CONNECTOR.rollback_plan(manager.catalog, manager.home, sink, (Span("j-0", 0, 0),), "j")
    assert (plan.possible, plan.rows, plan.what()) == (False, 2, "2 rows")
    with pytest.raises(PitstopError) as refused:
        refuse_if_blocked("s1", (plan,), None)
    assert str(refused.value) == (
        "'sinkRollback'='true' cannot roll back every sink to snapshot 's1': sink 'old_sink': 2 of the rows "
        "written after the cut were written by a pitstop that kept no row hashes (pitstop.sink_rows), so "
        "they cannot be found. Nothing was started; without 'sinkRollback' the restored job writes again "
        "what was written after the cut"
    )
    assert manager.catalog.query("SELECT count(*) FROM old_sink")[1] == [(3,)]


@pytest.mark.spark
def test_rollback_restores_a_running_aggregates_keys_to_their_values_at_the_cut(
    manager: Manager, tmp_path: Path
) -> None:
    """An upsert sink (running aggregate): each key written after the cut gets its value at the cut
    back from the table's before-images, and a key first written after the cut goes. The fixed
    query no longer counts regions 'mars' and 'eu' after the cut: without the rollback, 'mars'
    would stay and 'eu' would keep the old run's later total; with it, 'eu' is back at its value
    at the cut and 'mars' is gone."""
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 300, files=1)
    totals = "SELECT region, COUNT(*) AS n, SUM(amount) AS total FROM orders {where} GROUP BY region"
    old, new = totals.format(where=""), totals.format(where="WHERE region NOT IN ('mars', 'eu')")
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING totals TYPE DuckDB;
        CREATE JOB r AS INSERT INTO totals {old};
        AWAIT JOB r;
        CREATE SNAPSHOT s1 FOR JOB r;
    """,
    )
    table = "SELECT region, n, total FROM totals ORDER BY region"
    at_cut = manager.catalog.query(table)[1]
    assert [r[0] for r in at_cut] == ["apac", "eu", "us"]
    make_orders.write_orders(data, 300, 600, files=1)
    mars = [{**make_orders.order(i), "region": "mars"} for i in range(600, 603)]
    (data / "mars.json").write_text("".join(json.dumps(o) + "\n" for o in mars))
    run(manager, "AWAIT JOB r; DROP JOB r;")
    assert [r[0] for r in manager.catalog.query(table)[1]] == ["apac", "eu", "mars", "us"]

    create = f"CREATE JOB r FROM SNAPSHOT s1 OPTIONS ('sinkRollback'='true') AS INSERT INTO totals {new};"
    [restores] = explained(manager, create)[("totals", "rollback")]
    assert restores.startswith(
        "restores 4 key(s) written after snapshot 's1' to their value at the cut, from the table's "
        "before-images (run r-"
    )
    started = run(manager, create + " AWAIT JOB r;")[0].message
    assert "sink 'totals' rolled back to the cut: 4 key(s) restored to their value at the cut" in started
    orders = [make_orders.order(i) for i in range(600)] + mars
    expected: dict[str, tuple[int, Decimal]] = {}
    for i, o in enumerate(orders):
        if i >= 300 and o["region"] in ("mars", "eu"):
            continue
        n, total = expected.get(str(o["region"]), (0, Decimal("0")))
        expected[str(o["region"])] = (n + 1, total + Decimal(str(o["amount"])).quantize(Decimal("0.01")))
    got = {region: (int(n), Decimal(total)) for region, n, total in manager.catalog.query(table)[1]}
    assert got == expected  # no 'mars': it had no row at the cut, and the fixed query drops it
    assert got["eu"] == {r[0]: (int(r[1]), Decimal(r[2])) for r in at_cut}["eu"]  # its value at the cut


def test_a_duckdb_sink_table_gains_added_columns_and_widened_types_and_rollback_still_finds_its_rows(
    manager: Manager,
) -> None:
    """A restored windowed job whose aggregates were added and widened writes the same DuckDB
    table (issue 11, section 3): the table gains the new column (NULL in the rows written before)
    and the wider types, and the row hashes rollback finds rows by follow, so rolling back the
    rows written before still finds every one of them."""
    import pyarrow as pa

    from pitstop.catalog.clock import now
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.duckdb.connector import CONNECTOR
    from pitstop.connectors.duckdb.sink import DuckDBSink
    from pitstop.connectors.rollback import Span

    sink = Mapping("windows", "duckdb", (), None, {})
    with manager.catalog.transaction() as tx:  # the job's earlier run, whose plan writes the sink
        tx.execute(
            "INSERT INTO pitstop.runs VALUES ('j-0', 'j', ?, ?, NULL, ?)",
            [
                str(manager.home / "runs" / "j-0"),
                json.dumps({"branches": [{"index": 0, "sink": "windows"}]}),
                now(),
            ],
        )
    old = DuckDBSink(manager.catalog, sink, "j", "j-0", 0)
    old.prepare([("region", "string"), ("n", "int"), ("price", "float"), ("total", "decimal(12,2)")])
    rows = {"region": ["eu", "us"], "n": [1, 2], "price": [1.5, 2.5], "total": [Decimal("1.10"), None]}
    old.write(pa.table(rows), 0)
    new = DuckDBSink(manager.catalog, sink, "j", "j-1", 0)
    new.prepare(
        [
            ("region", "string"),
            ("n", "bigint"),
            ("price", "double"),
            ("total", "decimal(18,2)"),
            ("top", "int"),
        ]
    )
    columns = manager.catalog.query(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'windows' "
        "ORDER BY ordinal_position"
    )[1]
    assert columns == [
        ("region", "VARCHAR"),
        ("n", "BIGINT"),
        ("price", "DOUBLE"),
        ("total", "DECIMAL(18,2)"),
        ("top", "INTEGER"),
    ]
    new.write(
        pa.table({**rows, "n": [2**40, 3], "total": [Decimal("1234567890123.45"), None], "top": [7, 8]}), 0
    )
    table = "SELECT region, n, total, top FROM windows ORDER BY n"
    assert manager.catalog.query(table)[1] == [
        ("eu", 1, Decimal("1.10"), None),
        ("us", 2, None, None),
        ("us", 3, None, 8),
        ("eu", 2**40, Decimal("1234567890123.45"), 7),
    ]
    plan = CONNECTOR.rollback_plan(manager.catalog, manager.home, sink, (Span("j-0", 0, -1),), "j")
    assert (plan.possible, plan.rows) == (True, 2)
    with manager.catalog.transaction() as tx:
        CONNECTOR.rollback_in_catalog(manager.catalog, sink, plan, tx)
    assert [r[1] for r in manager.catalog.query(table)[1]] == [3, 2**40]


def test_rows_appended_to_a_table_whose_unwritten_column_has_a_default_are_found_by_rollback(
    manager: Manager,
) -> None:
    """A DuckDB table made by hand with a column the job does not write, which has a default: the
    rows hold the default, and the hashes rollback finds them by are of the rows as the table holds
    them (as the PostgreSQL sink's, hashed from the inserted rows), so rolling back finds them."""
    import pyarrow as pa

    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.duckdb.connector import CONNECTOR
    from pitstop.connectors.duckdb.sink import DuckDBSink
    from pitstop.connectors.rollback import Span

    with manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE main.alerts (x INTEGER, note VARCHAR DEFAULT 'new', seen INTEGER)")
        tx.execute("INSERT INTO main.alerts VALUES (0, 'kept', NULL)")
    sink = Mapping("alerts", "duckdb", (), None, {})
    out = DuckDBSink(manager.catalog, sink, "j", "j-0", 0)
    out.prepare([("x", "int")])
    out.write(pa.table({"x": pa.array([1, 2], pa.int32())}), 0)
    table = "SELECT x, note, seen FROM alerts ORDER BY x"
    assert manager.catalog.query(table)[1] == [(0, "kept", None), (1, "new", None), (2, "new", None)]
    plan = CONNECTOR.rollback_plan(manager.catalog, manager.home, sink, (Span("j-0", 0, -1),), "j")
    assert (plan.possible, plan.rows) == (True, 2)
    with manager.catalog.transaction() as tx:
        CONNECTOR.rollback_in_catalog(manager.catalog, sink, plan, tx)
    assert manager.catalog.query(table)[1] == [(0, "kept", None)]
