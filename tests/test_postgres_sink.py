"""The Postgres sink on a real PostgreSQL server (Debian's package, started by ``pg_helpers``).

Without Spark: passwords masked wherever a mapping is shown; the write protocol (each batch once,
upsert on keys), types of a created table, an existing table that does not fit, a server that
cannot be reached, and a server that goes away while a batch is written. With Spark: the pit stop
into a Postgres sink against a batch computation by DuckDB over the input files; ``kill -9`` of
``pitstop run`` inside and after a batch's transaction, then every row exactly once; CREATE JOB
refused for an unreachable server and for a table that does not fit.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from conftest import EPOCH, make_orders, orders_mapping, revenue_select, run, wait_until_gone, write_outcome
from pg_helpers import Postgres, free_port, postgres  # noqa: F401 - the fixture
from pitstop import dsn, faults
from pitstop.catalog.clock import now
from pitstop.catalog.rows import Mapping
from pitstop.connectors.postgres.sink import PostgresSink
from pitstop.connectors.postgres.table import BOOKKEEPING
from pitstop.errors import PitstopError, PlanError
from pitstop.manager import Manager

STEP = 90  # seconds between orders
SECRET = "s3cr3t-pw"
ROOT = Path(__file__).resolve().parent.parent
HOURLY = revenue_select("'1' HOUR")


# -- passwords ------------------------------------------------------------------------------------
def test_dsn_passwords_are_masked_in_urls_key_value_pairs_and_error_lines() -> None:
    assert dsn.mask("postgresql://ana:s3cr3t@db:5432/x?sslmode=require") == (
        "postgresql://ana:***@db:5432/x?sslmode=require"
    )
    assert dsn.mask("host=db password=s3cr3t user=ana") == "host=db password=*** user=ana"
    assert dsn.mask("host=db password='a b\\' c' user=ana") == "host=db password=*** user=ana"
    assert dsn.mask("postgres://ana@db/x?password=s3cr3t&sslmode=disable") == (
        "postgres://ana@db/x?password=***&sslmode=disable"
    )
    assert dsn.mask("postgresql://ana@db/x") == "postgresql://ana@db/x"  # nothing to hide
    assert dsn.mask_options({"dsn": "postgresql://a:b@h/d", "sasl.password": "p", "table": "t"}) == {
        "dsn": "postgresql://a:***@h/d",
        "sasl.password": "***",
        "table": "t",
    }
    statement = "CREATE MAPPING m TYPE Postgres OPTIONS ('dsn'='postgresql://a:s3cr3t@h/d', 'tabel'='t')"
    text = str(PlanError("unknown option 'tabel'").at(1, statement.index("'tabel'") + 1, statement))
    assert "s3cr3t" not in text
    line, caret = text.splitlines()[1:]
    assert line[caret.index("^") :].startswith("'tabel'")  # the caret still under the mistake


def test_postgres_mapping_never_shows_its_password(
    manager: Manager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://ana:{SECRET}@127.0.0.1:{free_port()}/db"
    created = run(manager, f"CREATE MAPPING out TYPE Postgres OPTIONS ('dsn'='{url}', 'table'='public.rev');")
    assert created[0].message == "mapping 'out' created"
    shown = run(manager, "SHOW MAPPINGS;")[0]
    assert shown.rows[0][1] == "Postgres"
    assert "dsn=postgresql://ana:***@127.0.0.1" in shown.rows[0][3] and SECRET not in str(shown.rows)
    stored = manager.catalog.get_mapping("out")
    assert stored is not None and SECRET not in stored.sql and "ana:***@" in stored.sql
    assert stored.options["dsn"] == url  # the sink still needs it
    # ... but the catalog's tables do not hold it (a server's clients may SELECT them): it is in
    # <home>/secrets.json, readable by its owner only, and goes with the mapping.
    definitions = manager.catalog.cursor().execute("SELECT definition FROM pitstop.mappings").fetchall()
    assert "ana:***@127.0.0.1" in str(definitions) and SECRET not in str(definitions)
    kept = manager.home / "secrets.json"
    assert SECRET in kept.read_text() and kept.stat().st_mode & 0o777 == 0o600
    run(manager, "DROP MAPPING out;")
    assert SECRET not in kept.read_text()
    run(manager, f"CREATE MAPPING out TYPE Postgres OPTIONS ('dsn'='{url}', 'table'='public.rev');")
    for bad, said in (
        (f"postgresql://ana:{SECRET}@[::1:5/db", "not a PostgreSQL connection string"),
        (f"host=h port=x password={SECRET}", "port 'x'"),
        (f"postgresql://ana:{SECRET}@h/db?bogus=1", "invalid URI query parameter"),
    ):
        with pytest.raises(PlanError, match=said) as refused:
            run(manager, f"CREATE MAPPING bad TYPE Postgres OPTIONS ('dsn'='{bad}');")
        assert SECRET not in str(refused.value)
    with pytest.raises(PlanError, match=r"TYPE Postgres needs OPTIONS \('dsn'="):
        run(manager, "CREATE MAPPING bad TYPE Postgres OPTIONS ('table'='t');")
    with pytest.raises(PlanError, match="write 'name' or 'schema.name'"):
        run(manager, f"CREATE MAPPING bad TYPE Postgres OPTIONS ('dsn'='{url}', 'table'='a.b.c');")
    assert SECRET not in caplog.text


def test_a_password_kept_in_the_catalog_by_an_older_pitstop_moves_out_when_the_home_opens(
    tmp_path: Path,
) -> None:
    from conftest import settings
    from pitstop.catalog.store import Catalog

    url = f"postgresql://ana:{SECRET}@127.0.0.1:5/db"
    old = Mapping("out", "postgres", (), None, {"dsn": url, "table": "rev", "sasl.password": SECRET})
    home = settings(tmp_path / "home").home
    home.mkdir(parents=True)
    catalog = Catalog(home / "catalog.duckdb")
    with catalog.transaction() as tx:  # what pitstop wrote before secrets moved out
        tx.execute(
            "INSERT INTO pitstop.mappings VALUES ('out', 'postgres', ?, ?)",
            [json.dumps(old.to_json()), now()],
        )
    catalog.close()
    catalog = Catalog(home / "catalog.duckdb")
    try:
        definitions = str(catalog.cursor().execute("SELECT definition FROM pitstop.mappings").fetchall())
        assert SECRET not in definitions and "ana:***@" in definitions
        assert catalog.get_mapping("out") == old and catalog.mappings() == [old]
    finally:
        catalog.close()
    checking = Catalog(home / "catalog.duckdb", read_only=True)  # pitstop check reads them too
    try:
        assert checking.get_mapping("out") == old
    finally:
        checking.close()


# -- the write protocol, without Spark --------------------------------------------------------------
def sink(
    manager: Manager, pg: Postgres, database: str, table: str = "rev", keys: tuple[str, ...] = ()
) -> PostgresSink:
    url = pg.url(database, SECRET)
    mapping = Mapping("rev", "postgres", (), None, {"dsn": url, "table": table})
    folder = manager.home / "runs" / "j-0"
    with manager.catalog.transaction() as tx:
        tx.execute(
            "INSERT OR IGNORE INTO pitstop.runs VALUES (?, ?, ?, '{}', NULL, ?)",
            ["j-0", "j", str(folder), now()],
        )
    return PostgresSink(manager.catalog, mapping, "j", "j-0", 0, keys)


SCHEMA = [
    ("window_start", "timestamp"),
    ("region", "string"),
    ("revenue", "decimal(22,2)"),
    ("orders", "bigint"),
]


def rows(*items: tuple[int, str, str, int]) -> pa.Table:
    return pa.table(
        {
            "window_start": pa.array(
                [EPOCH + timedelta(hours=h) for h, *_ in items], pa.timestamp("us", "UTC")
            ),
            "region": [r for _, r, _, _ in items],
            "revenue": pa.array([Decimal(v) for *_, v, _ in items], pa.decimal128(22, 2)),
            "orders": pa.array([n for *_, n in items], pa.int64()),
        }
    )


def test_each_batch_is_written_once_with_its_bookkeeping_row(manager: Manager, postgres: Postgres) -> None:  # noqa: F811
    db = postgres.database()
    out = sink(manager, postgres, db)
    out.prepare(SCHEMA)
    types = postgres.query(
        db,
        "SELECT column_name, data_type, numeric_precision, numeric_scale FROM information_schema.columns "
        "WHERE table_name = 'rev' ORDER BY ordinal_position",
    )
    assert types == [
        ("window_start", "timestamp without time zone", None, None),
        ("region", "text", None, None),
        ("revenue", "numeric", 22, 2),
        ("orders", "bigint", 64, 0),
    ]
    out.write(rows((0, "eu", "10.50", 2), (0, "us", "3.25", 1)), 0)
    out.write(rows((0, "eu", "10.50", 2), (0, "us", "3.25", 1)), 0)  # replayed: skipped
    out.write(rows(), 1)  # an empty batch is recorded too
    out.write(rows((1, "eu", "1.00", 1)), 2)
    assert postgres.query(db, "SELECT window_start, region, revenue, orders FROM rev ORDER BY 1, 2") == [
        (EPOCH, "eu", Decimal("10.50"), 2),
        (EPOCH, "us", Decimal("3.25"), 1),
        (EPOCH + timedelta(hours=1), "eu", Decimal("1.00"), 1),
    ]
    book = f"SELECT job, run_id, branch, batch_id, sink_table, rows FROM {BOOKKEEPING} ORDER BY batch_id"
    assert postgres.query(db, book) == [
        ("j", "j-0", 0, 0, "rev", 2),
        ("j", "j-0", 0, 1, "rev", 0),
        ("j", "j-0", 0, 2, "rev", 1),
    ]
    assert out.last_batch() == 2
    out.interrupt()


def test_upsert_on_key_columns_replaces_rows_in_place(manager: Manager, postgres: Postgres) -> None:  # noqa: F811
    """The write path's upsert (a running aggregate's group keys): COPY into a temporary table,
    the before-images into the history table, then INSERT ... ON CONFLICT (keys) DO UPDATE."""
    db = postgres.database()
    postgres.query(db, "CREATE SCHEMA agg")
    out = sink(manager, postgres, db, "agg.totals", keys=("window_start", "region"))
    out.prepare(SCHEMA)
    out.write(rows((0, "eu", "1.00", 1), (0, "us", "2.00", 1)), 0)
    out.write(rows((0, "eu", "5.00", 3)), 1)
    out.write(rows((0, "eu", "9.99", 9)), 1)  # replayed batch 1 (other values): skipped
    assert postgres.query(db, "SELECT region, revenue, orders FROM agg.totals ORDER BY 1") == [
        ("eu", Decimal("5.00"), 3),
        ("us", Decimal("2.00"), 1),
    ]
    assert postgres.query(db, f"SELECT count(*) FROM agg.{BOOKKEEPING}") == [(2,)]
    assert postgres.query(
        db, 'SELECT batch_id, absent, region, revenue, orders FROM agg."totals__before" ORDER BY 1, 3'
    ) == [
        (0, True, "eu", None, None),
        (0, True, "us", None, None),
        (1, False, "eu", Decimal("1.00"), 1),
    ]
    # An updated job adds an aggregate: the table and its history gain the column.
    wider = sink(manager, postgres, db, "agg.totals", keys=("window_start", "region"))
    wider.prepare([*SCHEMA, ("top", "decimal(12,2)")])
    wider.write(
        rows((0, "us", "4.00", 2)).append_column("top", pa.array([Decimal("3.00")], pa.decimal128(12, 2))), 2
    )
    assert postgres.query(db, "SELECT region, orders, top FROM agg.totals ORDER BY 1") == [
        ("eu", 3, None),
        ("us", 2, Decimal("3.00")),
    ]
    assert postgres.query(
        db, 'SELECT absent, region, orders, top FROM agg."totals__before" WHERE batch_id = 2'
    ) == [(False, "us", 1, None)]
    wider.interrupt()
    postgres.query(
        db, "CREATE TABLE agg.nokey (window_start timestamp, region text, revenue numeric, orders bigint)"
    )
    with pytest.raises(PlanError, match=r"no unique index on \(window_start, region\)"):
        sink(manager, postgres, db, "agg.nokey", keys=("window_start", "region")).prepare(SCHEMA)


@pytest.mark.parametrize(
    ("ddl", "said"),
    [
        ("window_start timestamp, region text, revenue numeric(22,2)", "has no column 'orders'"),
        (
            "window_start timestamp, region text, revenue numeric(10,2), orders bigint",
            "column 'revenue' of type numeric\\(10,2\\), which does not hold the job's decimal\\(22,2\\)",
        ),
        ("window_start timestamp, region varchar(3), revenue numeric, orders bigint", "column 'region'"),
        ("window_start date, region text, revenue numeric, orders integer", "column 'window_start'"),
        (
            "window_start timestamptz, region text, revenue numeric, orders bigint, note text NOT NULL",
            "column 'note' \\(text\\) NOT NULL without a default",
        ),
    ],
)
def test_existing_table_that_does_not_fit_is_refused_naming_the_column(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
    ddl: str,
    said: str,
) -> None:
    db = postgres.database()
    postgres.query(db, f"CREATE TABLE rev ({ddl})")
    with pytest.raises(PlanError, match=said) as refused:
        sink(manager, postgres, db).prepare(SCHEMA)
    assert "mapping 'rev'" in str(refused.value) and SECRET not in str(refused.value)


def test_a_fitting_table_is_written_and_unsupported_types_are_refused(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
) -> None:
    db = postgres.database()
    postgres.query(
        db,
        "CREATE TABLE rev (id serial, window_start timestamptz, region varchar, revenue numeric(30,4), "
        "orders numeric, note text NOT NULL DEFAULT 'x')",
    )
    out = sink(manager, postgres, db)
    out.prepare(SCHEMA)
    out.write(rows((2, "apac", "7.10", 4)), 0)
    assert postgres.query(
        db, "SELECT id, window_start AT TIME ZONE 'UTC', revenue, orders, note FROM rev"
    ) == [(1, EPOCH + timedelta(hours=2), Decimal("7.1000"), Decimal(4), "x")]
    with pytest.raises(
        PlanError, match="column 'tags' is array<string>, which the Postgres sink cannot write"
    ):
        sink(manager, postgres, db, "other").prepare([("tags", "array<string>")])


def test_unreachable_server_is_named_by_host_and_port_without_the_password(manager: Manager) -> None:
    port = free_port()
    mapping = Mapping("rev", "postgres", (), None, {"dsn": f"postgresql://ana:{SECRET}@127.0.0.1:{port}/db"})
    with manager.catalog.transaction() as tx:
        tx.execute(
            "INSERT INTO pitstop.runs VALUES ('j-1', 'j', ?, '{}', NULL, ?)", [str(manager.home), now()]
        )
    with pytest.raises(PlanError, match=f"cannot connect to PostgreSQL at 127.0.0.1:{port}") as refused:
        PostgresSink(manager.catalog, mapping, "j", "j-1", 0).prepare(SCHEMA)
    assert SECRET not in str(refused.value)


def test_batch_waits_while_the_server_is_down_and_is_written_once_when_it_is_back(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = postgres.database()
    out = sink(manager, postgres, db)
    out.prepare(SCHEMA)
    out.write(rows((0, "eu", "1.00", 1)), 0)
    postgres.stop()
    done: list[BaseException | None] = []
    writer = threading.Thread(target=lambda: done.append(write_outcome(out, rows((1, "us", "2.00", 2)), 1)))
    try:
        writer.start()
        waited = threading.Event()
        while not waited.wait(0.05):  # the sink says it waits (an event, not a sleep)
            if out.waiting is not None:
                waited.set()
        assert writer.is_alive() and f"127.0.0.1:{postgres.port}" in (out.waiting or "")
    finally:
        postgres.start()
    writer.join(30)
    assert done == [None]
    assert postgres.query(db, "SELECT region, orders FROM rev ORDER BY 1") == [("eu", 1), ("us", 2)]
    assert postgres.query(db, f"SELECT batch_id FROM {BOOKKEEPING} ORDER BY 1") == [(0,), (1,)]
    assert "the job waits and tries again" in caplog.text and SECRET not in caplog.text
    # A run that stops while a batch waits: the batch gives up, unwritten (the job resumes it).
    postgres.stop()
    try:
        batch = rows((2, "eu", "3.00", 3))
        writer = threading.Thread(target=lambda: done.append(write_outcome(out, batch, 2)))
        writer.start()
        out.interrupt()
        writer.join(30)
        assert isinstance(done[-1], PitstopError) and "written when the job resumes" in str(done[-1])
    finally:
        postgres.start()
    assert postgres.query(db, "SELECT count(*) FROM rev") == [(2,)]


# -- with Spark ------------------------------------------------------------------------------------
def pg_mapping(pg: Postgres, database: str, name: str = "revenue", table: str = "revenue") -> str:
    url = pg.url(database, SECRET)
    return f"CREATE MAPPING {name} TYPE Postgres OPTIONS ('dsn'='{url}', 'table'='{table}');\n"


def duckdb_windows(
    folder: Path, hours: int, where: str = "true"
) -> dict[tuple[datetime, str], tuple[Decimal, int]]:
    """The reference: a batch computation by DuckDB over the input files, windows closed at the
    last order's watermark (5 minutes behind the last order)."""
    con = duckdb.connect()
    got = con.execute(
        f"""
        WITH o AS (
            SELECT region, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts
            FROM read_json('{folder}/*.json', columns = {{order_id: 'BIGINT', region: 'VARCHAR',
                amount: 'DOUBLE', ts: 'VARCHAR'}})),
        w AS (SELECT time_bucket(INTERVAL '{hours} hours', ts, TIMESTAMP '2024-01-01') AS ws, * FROM o)
        SELECT ws, region, SUM(amount), COUNT(*) FROM w
        WHERE {where}
          AND ws + INTERVAL '{hours} hours' <= (SELECT max(ts) FROM o) - INTERVAL '5 minutes'
        GROUP BY ws, region"""
    ).fetchall()
    return {(ws, region): (Decimal(total), int(n)) for ws, region, total, n in got}


def pg_windows(pg: Postgres, database: str, table: str) -> dict[tuple[datetime, str], tuple[Decimal, int]]:
    out: dict[tuple[datetime, str], tuple[Decimal, int]] = {}
    for start, region, revenue, count in pg.query(
        database, f"SELECT window_start, region, revenue, orders FROM {table}"
    ):
        assert (start, region) not in out, f"window {start} {region} written twice to {table}"
        out[(start, region)] = (Decimal(revenue), int(count))
    return out


@pytest.mark.spark
def test_pit_stop_into_postgres_equals_a_batch_computation(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = postgres.database()
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 800, files=2, step_seconds=STEP)
    run(
        manager,
        orders_mapping(data)
        + pg_mapping(postgres, db)
        + pg_mapping(postgres, db, "hourly", "hourly")
        + f"""CREATE JOB rev AS INSERT INTO revenue {revenue_select("'4' HOUR")};
        AWAIT JOB rev;""",
    )
    assert pg_windows(postgres, db, "revenue") == duckdb_windows(data, 4)
    # PostgreSQL stops under the running job: the job waits, says so, and catches up once it is back.
    postgres.stop()
    try:
        make_orders.write_orders(data, 800, 1000, files=1, step_seconds=STEP, prefix="while-down")
        deadline = time.monotonic() + 120
        while True:  # polled: SHOW JOBS is what a user looks at
            [jobs] = run(manager, "SHOW JOBS;")
            [(status, detail)] = [(r[1], r[jobs.columns.index("detail")]) for r in jobs.rows if r[0] == "rev"]
            if detail and "waiting for PostgreSQL" in detail:
                break
            assert time.monotonic() < deadline, f"SHOW JOBS never said the sink waits: {detail}"
            time.sleep(0.2)
        assert (
            status == "RUNNING"
            and f"sink 'revenue' waiting for PostgreSQL at 127.0.0.1:{postgres.port}" in detail
        )
        assert SECRET not in detail
    finally:
        postgres.start()
    run(manager, "AWAIT JOB rev;")
    assert pg_windows(postgres, db, "revenue") == duckdb_windows(data, 4)
    [jobs] = run(manager, "SHOW JOBS;")
    assert [r[jobs.columns.index("detail")] for r in jobs.rows if r[0] == "rev"] == [None]
    run(manager, "DROP JOB rev WITH SNAPSHOT rev_v1;")
    make_orders.write_orders(data, 1000, 1600, files=2, step_seconds=STEP, prefix="later")
    explained = run(
        manager,
        f"""EXPLAIN CREATE JOB rev FROM SNAPSHOT rev_v1 AS BEGIN
            INSERT INTO revenue {revenue_select("'4' HOUR")};
            INSERT INTO hourly {revenue_select("'1' HOUR", "WHERE amount > 10")};
        END;""",
    )[0]
    assert SECRET not in str(explained.rows)
    run(
        manager,
        f"""CREATE JOB rev FROM SNAPSHOT rev_v1 AS BEGIN
            INSERT INTO revenue {revenue_select("'4' HOUR")};
            INSERT INTO hourly {revenue_select("'1' HOUR", "WHERE amount > 10")};
        END;
        AWAIT JOB rev;""",
    )
    # Every 4-hour window exactly once across both runs, the one open at the cut included.
    assert pg_windows(postgres, db, "revenue") == duckdb_windows(data, 4)
    # The new hourly stage started empty at the snapshot's positions: order 1000, at 01:00 exactly.
    cut = EPOCH + timedelta(seconds=1000 * STEP)
    hourly = duckdb_windows(data, 1, "amount > 10")
    assert pg_windows(postgres, db, "hourly") == {k: v for k, v in hourly.items() if k[0] >= cut}
    described = str([r.rows for r in run(manager, "DESCRIBE JOB rev; SHOW JOBS;")])
    assert SECRET not in described and SECRET not in caplog.text
    run(manager, "DROP JOB rev;")


@pytest.mark.spark
def test_create_job_refuses_an_unreachable_server_and_a_table_that_does_not_fit(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    db = postgres.database()
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1, step_seconds=STEP)
    port = free_port()
    run(
        manager,
        orders_mapping(data)
        + f"CREATE MAPPING gone TYPE Postgres OPTIONS ('dsn'='postgresql://ana:{SECRET}@127.0.0.1:{port}/x');\n"
        + pg_mapping(postgres, db, "narrow", "narrow"),
    )
    with pytest.raises(
        PlanError, match=f"mapping 'gone': cannot connect to PostgreSQL at 127.0.0.1:{port}"
    ) as e:
        run(manager, f"CREATE JOB j AS INSERT INTO gone {HOURLY};")
    assert SECRET not in str(e.value)
    postgres.query(
        db,
        "CREATE TABLE narrow (window_start timestamp, window_end timestamp, region text, revenue real, "
        "orders bigint)",
    )
    with pytest.raises(
        PlanError, match="column 'revenue' of type real, which does not hold the job's decimal"
    ):
        run(manager, f"CREATE JOB j AS INSERT INTO narrow {HOURLY};")
    assert run(manager, "SHOW JOBS;")[0].rows == ()
    assert postgres.query(db, "SELECT count(*) FROM narrow") == [(0,)]


CHILD = """
import sys
from pathlib import Path
import pyarrow as pa
from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.postgres.sink import PostgresSink
home, url = Path(sys.argv[1]), sys.argv[2]
home.mkdir(parents=True, exist_ok=True)
mapping = Mapping("rev", "postgres", (), None, {"dsn": url})
out = PostgresSink(Catalog(home / "catalog.duckdb"), mapping, "j", "j-9", 0)
out.prepare([("region", "string"), ("orders", "bigint")])
out.write(pa.table({"region": ["eu", "us"], "orders": pa.array([1, 2], pa.int64())}), 0)
"""


def test_kill_9_inside_a_batch_transaction_leaves_nothing_and_the_batch_is_written_once_again(
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A real process killed (SIGKILL, ``PITSTOP_CRASH_AT=sink.before_commit``) with the batch's
    rows and bookkeeping row sent but not committed: PostgreSQL rolls them back; the next process
    writes the batch, once. (Spark-free: the Spark test below kills after the commit.)"""
    db = postgres.database()
    args = [sys.executable, "-c", CHILD, str(tmp_path / "home"), postgres.url(db, SECRET)]
    env = {k: v for k, v in os.environ.items() if k not in (faults.CRASH_ENV, faults.FAULT_ENV)}
    killed = subprocess.run(args, env={**env, faults.CRASH_ENV: "sink.before_commit"}, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert postgres.query(db, "SELECT count(*) FROM rev") == [(0,)]
    assert postgres.query(db, f"SELECT count(*) FROM {BOOKKEEPING}") == [(0,)]
    for _ in range(2):  # written, then found in the bookkeeping
        again = subprocess.run(args, env=env, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
    assert postgres.query(db, "SELECT region, orders FROM rev ORDER BY 1") == [("eu", 1), ("us", 2)]
    assert postgres.query(db, f"SELECT run_id, batch_id, rows FROM {BOOKKEEPING}") == [("j-9", 0, 2)]


@pytest.mark.spark
def test_kill_9_after_a_batch_commits_in_postgres_then_every_row_exactly_once(
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two real ``pitstop run`` processes on one home: the first dies (SIGKILL) once the batch
    that emits the first windows has committed in PostgreSQL, before Spark commits it; the second
    replays that batch, finds it in the bookkeeping, and catches up with more input. Every window
    exactly once, equal to DuckDB over the input files."""
    db = postgres.database()
    data, home = tmp_path / "orders", tmp_path / "home"
    make_orders.write_orders(data, 0, 400, files=2, step_seconds=STEP)
    env = {
        **{k: v for k, v in os.environ.items() if k not in (faults.CRASH_ENV, faults.FAULT_ENV)},
        "PITSTOP_TRIGGER_MS": "200",
        "PITSTOP_SPARK_MASTER": "local[2]",
        "PITSTOP_SHUFFLE_PARTITIONS": "2",
    }
    awaited = "AWAIT JOB j TIMEOUT INTERVAL '240' SECOND;"

    def pitstop_run(sql: str, crash_at: str | None) -> subprocess.CompletedProcess[str]:
        """``pitstop -V run -c sql`` in a session of its own; returns once every process of it
        (Spark's JVM, Python workers) is gone."""
        args = [sys.executable, "-m", "pitstop.cli", "-V", "--home", str(home), "run", "-c", sql]
        extra = {faults.CRASH_ENV: crash_at} if crash_at else {}
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, **extra},
            cwd=ROOT,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=300)
        finally:
            wait_until_gone(proc.pid)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    setup = orders_mapping(data) + pg_mapping(postgres, db) + f"CREATE JOB j AS INSERT INTO revenue {HOURLY};"
    # Batch 0 reads the input (no window closes at watermark 0); batch 1 emits the windows.
    first = pitstop_run(setup + awaited, "sink.after_commit:2")
    assert first.returncode == -9, first.stderr[-3000:]
    assert "crash point sink.after_commit " in first.stderr
    written = pg_windows(postgres, db, "revenue")
    assert written and postgres.query(db, f"SELECT max(batch_id) FROM {BOOKKEEPING}") == [(1,)]

    make_orders.write_orders(data, 400, 600, files=1, step_seconds=STEP, prefix="more")
    second = pitstop_run(awaited + "SHOW JOBS;", None)
    assert second.returncode == 0, second.stderr[-3000:]
    assert pg_windows(postgres, db, "revenue") == duckdb_windows(data, 1)
    assert "batch 1 of run j-" in second.stderr and "already written; skipped" in second.stderr
    assert SECRET not in first.stderr + second.stdout + second.stderr
    batches = [b for (b,) in postgres.query(db, f"SELECT batch_id FROM {BOOKKEEPING} ORDER BY 1")]
    assert batches == list(range(len(batches)))  # one bookkeeping row per batch


def test_rollback_removes_exactly_the_rows_of_the_batches_after_the_cut(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
) -> None:
    """The Postgres sink's rollback (CREATE JOB ... FROM SNAPSHOT with 'sinkRollback'): the rows of
    run j-0's batches after batch 1 go, found by their hashes, identical rows of other batches
    and of another job stay; a second try deletes nothing (it is idempotent)."""
    from pitstop.connectors.postgres.connector import CONNECTOR
    from pitstop.connectors.rollback import Span

    db = postgres.database()
    out = sink(manager, postgres, db)
    out.prepare(SCHEMA)
    out.write(rows((0, "eu", "1.00", 1), (0, "us", "2.00", 1)), 0)
    out.write(rows((1, "eu", "3.00", 1)), 1)
    out.write(rows((1, "eu", "3.00", 1), (2, "us", "4.00", 2)), 2)  # after the cut; one row twice
    out.write(rows((3, "eu", "5.00", 1)), 3)  # after the cut
    other = PostgresSink(manager.catalog, out.mapping, "k", "k-0", 0)
    other.prepare(SCHEMA)
    other.write(rows((2, "us", "4.00", 2)), 0)  # the same row as one of j's after the cut
    spans = (Span("j-0", 0, 1),)
    plan = CONNECTOR.rollback_plan(manager.catalog, manager.home, out.mapping, spans, "j")
    assert plan.note == ""
    assert (plan.possible, plan.rows, [(r.run_id, r.batches, r.rows) for r in plan.runs]) == (
        True,
        3,
        [("j-0", 2, 3)],
    )
    assert plan.others == (("k", 1),)
    CONNECTOR.rollback_outside(manager.catalog, manager.home, out.mapping, plan, manager.home / "trash")
    table = "SELECT window_start, region, revenue, orders FROM rev ORDER BY 1, 2"
    assert postgres.query(db, table) == [
        (EPOCH, "eu", Decimal("1.00"), 1),
        (EPOCH, "us", Decimal("2.00"), 1),
        (EPOCH + timedelta(hours=1), "eu", Decimal("3.00"), 1),
        (EPOCH + timedelta(hours=2), "us", Decimal("4.00"), 2),  # job k's
    ]
    book = f"SELECT run_id, batch_id FROM {BOOKKEEPING} ORDER BY 1, 2"
    assert postgres.query(db, book) == [("j-0", 0), ("j-0", 1), ("k-0", 0)]
    CONNECTOR.rollback_outside(manager.catalog, manager.home, out.mapping, plan, manager.home / "trash")
    assert len(postgres.query(db, table)) == 4  # again: nothing more
    assert CONNECTOR.rollback_plan(manager.catalog, manager.home, out.mapping, spans, "j").rows == 0
    out.interrupt()
    other.interrupt()


def test_rollback_gives_a_running_aggregates_keys_their_values_at_the_cut(
    manager: Manager,
    postgres: Postgres,  # noqa: F811
) -> None:
    """An upsert table (a running aggregate's): each key written after the cut gets its value at
    the cut back from the history of before-images (the first before-image after the cut, over
    the snapshot's run and then a later run), a key first written after the cut is deleted, a key
    the query stopped keeping comes back; another job's keys stay; a second try does nothing."""
    from pitstop.connectors.postgres.connector import CONNECTOR
    from pitstop.connectors.rollback import Span

    db = postgres.database()
    keys = ("window_start", "region")
    out = sink(manager, postgres, db, "totals", keys=keys)
    out.prepare(SCHEMA)

    def gone(*items: tuple[int, str, str, int]) -> pa.Table:  # rows the query no longer keeps
        batch = rows(*items)
        return batch.append_column("__pitstop_keep", pa.array([False] * batch.num_rows, pa.bool_()))

    out.write(rows((0, "eu", "1.00", 1), (0, "us", "2.00", 1)), 0)
    out.write(rows((0, "eu", "5.00", 3)), 1)  # the cut: after batch 1
    out.write(rows((0, "eu", "7.00", 4), (0, "fr", "1.00", 1)), 2)
    out.write(gone((0, "us", "2.00", 1)), 3)
    with manager.catalog.transaction() as tx:
        tx.execute(
            "INSERT OR IGNORE INTO pitstop.runs VALUES ('j-1', 'j', ?, '{}', NULL, ?)",
            [str(manager.home / "runs" / "j-1"), now()],
        )
    later = PostgresSink(manager.catalog, out.mapping, "j", "j-1", 0, keys)
    later.prepare(SCHEMA)
    later.write(rows((0, "eu", "9.00", 5), (0, "de", "4.00", 1)), 0)
    other = PostgresSink(manager.catalog, out.mapping, "k", "k-0", 0, keys)
    other.prepare(SCHEMA)
    other.write(rows((5, "eu", "8.00", 2)), 0)
    table = "SELECT extract(hour FROM window_start)::int, region, revenue, orders FROM totals ORDER BY 1, 2"
    assert postgres.query(db, table) == [
        (0, "de", Decimal("4.00"), 1),
        (0, "eu", Decimal("9.00"), 5),
        (0, "fr", Decimal("1.00"), 1),
        (5, "eu", Decimal("8.00"), 2),
    ]
    spans = (Span("j-0", 0, 1), Span("j-1", 0, -1))
    plan = CONNECTOR.rollback_plan(manager.catalog, manager.home, out.mapping, spans, "j")
    assert (plan.possible, plan.note, plan.restores) == (True, "", 4)  # eu, fr, us, de
    assert [(r.run_id, r.batches) for r in plan.runs] == [("j-0", 2), ("j-1", 1)]
    assert plan.others == (("k", 1),)
    CONNECTOR.rollback_outside(manager.catalog, manager.home, out.mapping, plan, manager.home / "trash")
    at_cut = [
        (0, "eu", Decimal("5.00"), 3),  # its value after batch 1
        (0, "us", Decimal("2.00"), 1),  # removed after the cut: back
        (5, "eu", Decimal("8.00"), 2),  # job k's
    ]
    assert postgres.query(db, table) == at_cut
    assert postgres.query(db, f"SELECT run_id, batch_id FROM {BOOKKEEPING} ORDER BY 1, 2") == [
        ("j-0", 0),
        ("j-0", 1),
        ("k-0", 0),
    ]
    assert postgres.query(db, 'SELECT DISTINCT run_id, batch_id FROM "totals__before" ORDER BY 1, 2') == [
        ("j-0", 0),
        ("j-0", 1),
        ("k-0", 0),
    ]
    CONNECTOR.rollback_outside(manager.catalog, manager.home, out.mapping, plan, manager.home / "trash")
    assert postgres.query(db, table) == at_cut  # again: nothing more
    assert CONNECTOR.rollback_plan(manager.catalog, manager.home, out.mapping, spans, "j").restores == 0
    for writer in (out, later, other):
        writer.interrupt()
