"""pitstop serve over real sockets with real clients (psycopg 3, asyncpg, psql): the protocol,
types, errors, read-only queries, cancel, transactions, TLS and concurrent statements.

No Spark here: catalog statements and queries never start it (the Spark tests of the server are
in test_server_jobs.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import time
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import duckdb
import psycopg
import pytest

from pitstop.manager import Manager
from pitstop.server import sqlstate
from pitstop.server.queries import one_query
from pitstop.server.sqlstate import WireError
from server_helpers import Served, cancelling, psql, race, serve_process

INT8, INT4, NUMERIC, FLOAT8, TEXT, TIMESTAMP, BOOL, DATE, TIMESTAMPTZ = (
    20,
    23,
    1700,
    701,
    25,
    1114,
    16,
    1082,
    1184,
)


def daily_table(manager: Manager) -> None:
    """The sink table and sequence the tests query (one row of each type in each region)."""
    with manager.catalog.transaction() as tx:
        tx.execute(
            "CREATE TABLE main.daily (window_start TIMESTAMP, region VARCHAR, revenue DECIMAL(22,2), "
            "orders BIGINT, share DOUBLE, open BOOLEAN, day DATE, seen TIMESTAMPTZ, n INTEGER)"
        )
        tx.execute(
            "INSERT INTO main.daily VALUES "
            "('2024-01-01 00:00:00', 'eu', 17076.00, 320, 0.25, true, '2024-01-01', "
            "'2024-01-01 10:00:00+00', 7), "
            "('2024-01-01 00:00:00', 'us', -14760.05, 321, 1e-7, false, '2024-01-02', NULL, NULL)"
        )
        tx.execute("CREATE SEQUENCE main.counter START 1")


pytestmark = pytest.mark.served(catalog=daily_table)

EXPECTED = [
    (datetime(2024, 1, 1), "eu", Decimal("17076.00"), 320, 0.25, True, date(2024, 1, 1), 7),
    (datetime(2024, 1, 1), "us", Decimal("-14760.05"), 321, 1e-7, False, date(2024, 1, 2), None),
]
QUERY = "SELECT window_start, region, revenue, orders, share, open, day, n FROM daily ORDER BY region"


def test_parameters_on_connect_tell_clients_what_server_this_is(served: Served) -> None:
    with psycopg.connect(served.url(application_name="probe")) as conn:
        status = conn.info.parameter_status
        assert status("server_version") == "15.0"
        assert status("standard_conforming_strings") == "on"
        assert status("integer_datetimes") == "on"
        assert status("client_encoding") == "UTF8"
        assert status("TimeZone") == "UTC"
        assert status("application_name") == "probe"
        assert conn.info.server_version == 150000
        assert conn.info.backend_pid > 0


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_result_columns_carry_postgres_types_in_both_formats(served: Served, binary: bool) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        cur.execute(QUERY)
        assert [d.type_code for d in cur.description or []] == [
            TIMESTAMP, TEXT, NUMERIC, INT8, FLOAT8, BOOL, DATE, INT4
        ]  # fmt: skip
        assert cur.description is not None and cur.description[2].precision == 22
        assert cur.description[2].scale == 2
        assert cur.fetchall() == EXPECTED
        cur.execute("SELECT seen FROM daily ORDER BY region")
        assert cur.description is not None and cur.description[0].type_code == TIMESTAMPTZ
        rows = cur.fetchall()
        assert rows[0][0] is not None and rows[0][0].timestamp() == datetime(2024, 1, 1, 10).timestamp() + 0
        assert rows[1][0] is None


def test_asyncpg_reads_binary_rows_and_binds_parameters(served: Served) -> None:
    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(served.url())
        try:
            return await conn.fetch(
                "SELECT region, revenue, orders FROM daily WHERE region = $1 AND orders > $2", "eu", 300
            )
        finally:
            await conn.close()

    rows = asyncio.run(go())
    assert [tuple(r) for r in rows] == [("eu", Decimal("17076.00"), 320)]


def test_asyncpg_binds_time_and_gets_an_error_for_infinity_on_the_same_connection(served: Served) -> None:
    """asyncpg sends parameters in binary by the type the server describes, and ``date.max`` and
    ``datetime.max`` as PostgreSQL's infinity, which pitstop cannot hold: an error (22008), and
    the connection goes on. A binary time was read as UTF-8 text."""

    async def go() -> None:
        conn = await asyncpg.connect(served.url())
        try:
            for sql, value in (
                ("SELECT region FROM daily WHERE window_start < $1", datetime.max),
                ("SELECT region FROM daily WHERE day < $1", date.max),
            ):
                with pytest.raises(
                    asyncpg.DatetimeFieldOverflowError, match="out of range in bind parameter 1"
                ):
                    await asyncio.wait_for(conn.fetch(sql, value), 20)
                assert await conn.fetchval("SELECT 1") == 1
            found = await conn.fetch(
                "SELECT t FROM (SELECT TIME '12:34:56' AS t) AS q WHERE t = $1", dt_time(12, 34, 56)
            )
            assert [tuple(r) for r in found] == [(dt_time(12, 34, 56),)]
        finally:
            await conn.close()

    asyncio.run(go())


def test_asyncpg_gets_an_error_while_preparing_at_once(served: Served) -> None:
    """asyncpg prepares with Parse, Describe, Flush (no Sync) and waits: an error found while
    describing must reach it then, not at the next Sync that never comes."""

    async def go() -> str:
        conn = await asyncpg.connect(served.url())
        try:
            with pytest.raises(asyncpg.UndefinedObjectError) as shown:
                await asyncio.wait_for(conn.fetch("SHOW nosuch_parameter"), 20)
            with pytest.raises(asyncpg.UndefinedTableError):
                await asyncio.wait_for(conn.fetch("SELECT * FROM no_such_table"), 20)
            return str(shown.value)
        finally:
            await conn.close()

    assert asyncio.run(go()) == 'unrecognized configuration parameter "nosuch_parameter"'


def test_parameters_bind_in_text_and_binary(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            cur.execute(
                "SELECT region FROM daily WHERE revenue > %s AND day >= %s AND window_start = %s ORDER BY 1",
                [Decimal("-20000.5"), date(2024, 1, 1), datetime(2024, 1, 1)],
                binary=binary,
            )
            assert cur.fetchall() == [("eu",), ("us",)]
        cur = conn.cursor()
        cur.execute("SELECT region FROM daily WHERE orders = %s", [321], prepare=True)
        cur.execute("SELECT region FROM daily WHERE orders = %s", [320], prepare=True)
        assert cur.fetchall() == [("eu",)]


def test_pitstop_statements_answer_with_rows_notices_and_tags(served: Served) -> None:
    notices: list[str] = []
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(f"{d.severity}: {d.message_primary}"))
        cur = conn.execute("CREATE MAPPING revenue_sink TYPE DuckDB")
        assert cur.statusmessage == "CREATE MAPPING"
        assert notices == ["NOTICE: mapping 'revenue_sink' created"]
        cur = conn.execute("SHOW MAPPINGS")
        assert [d.name for d in cur.description or []] == ["name", "type", "columns", "options"]
        assert cur.fetchall() == [("revenue_sink", "DuckDB", "", "")]
        assert conn.execute("SHOW JOBS").fetchall() == []


def test_errors_carry_sqlstate_and_the_position_of_the_statement(served: Served) -> None:
    query = "SHOW JOBS;\n  DROP JOB revenu"
    with psycopg.connect(served.url(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedObject) as info:
            conn.execute(query)
        assert info.value.sqlstate == "42704"
        assert info.value.diag.message_primary == "unknown job 'revenu'; SHOW JOBS lists the jobs"
        assert info.value.diag.statement_position == str(query.index("revenu") + 1)  # the name
        with pytest.raises(psycopg.errors.SyntaxError) as syntax:
            conn.execute("CREATE MAPPING m (a BIGINT) TYPE File OPTIONS ('path'=)")
        assert syntax.value.sqlstate == "42601"
        conn.execute("CREATE MAPPING m TYPE DuckDB")
        with pytest.raises(psycopg.errors.DuplicateObject):
            conn.execute("CREATE MAPPING m TYPE DuckDB")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on


def test_psql_draws_its_caret_under_the_mistake(served: Served) -> None:
    script = "CREATE MAPPING m (\n    a BIGINT,\n    b VARCHR\n) TYPE DuckDB;\n"
    done = psql(served, stdin=script)
    lines = done.stderr.splitlines()
    assert lines[0].startswith("ERROR:  "), done.stderr
    caret_line = next(i for i, line in enumerate(lines) if line.strip() == "^")
    source, caret = lines[caret_line - 1], lines[caret_line]
    assert source[caret.index("^") :].startswith("VARCHR"), done.stderr


def test_a_query_cannot_write_whatever_it_holds(served: Served) -> None:
    attempts = [
        "DELETE FROM daily",
        "INSERT INTO daily (region) VALUES ('x')",
        "UPDATE daily SET orders = 0",
        "SELECT 1; DROP TABLE daily",
        "SELECT nextval('counter')",
        "WITH gone AS (SELECT * FROM daily) SELECT * FROM gone; TRUNCATE daily",
        "COPY daily TO '/tmp/pitstop-leak.csv'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "CREATE TABLE main.x AS SELECT 1",
    ]
    with psycopg.connect(served.url(), autocommit=True) as conn:
        for sql in attempts:
            with pytest.raises(psycopg.Error) as info:
                conn.execute(sql)
            assert info.value.sqlstate not in (None, "XX000"), sql
        assert conn.execute("SELECT count(*), sum(orders) FROM daily").fetchone() == (2, 641)
    assert not Path("/tmp/pitstop-leak.csv").exists()
    _, rows = served.manager.catalog.query("SELECT count(*) FROM daily")
    assert rows == [(2,)]


BIG = 70_000  # past the first rows sent value by value, and more than one Arrow batch


def _big_rows(n: int) -> list[tuple[object, ...]]:
    epoch = datetime(2024, 1, 1)
    return [
        (
            i,
            f"r{i % 7}" if i % 11 else None,
            Decimal(i * 37 % 100_000) / 100 * (-1 if i % 3 == 0 else 1),
            epoch + timedelta(seconds=90 * i, microseconds=i % 1000),
            i % 2 == 0,
            i / 8,
        )
        for i in range(n)
    ]


# (PostgreSQL's division: an integer divided by an integer is an integer, so the cents are scaled by
# a numeric constant and the eighths divided as float8)
BIG_QUERY = (
    f"SELECT range AS id, CASE WHEN range % 11 <> 0 THEN 'r' || (range % 7) END AS region, "
    "CAST((range * 37) % 100000 * (CASE WHEN range % 3 = 0 THEN -1 ELSE 1 END) * 0.01 AS DECIMAL(12,2)) "
    "AS amount, TIMESTAMP '2024-01-01' + to_microseconds(range * 90000000 + range % 1000) AS ts, "
    f"range % 2 = 0 AS even, range / 8::float8 AS eighth FROM range({BIG})"
)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_large_result_streams_every_row_once(served: Served, binary: bool) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        cur.execute(BIG_QUERY)
        rows = cur.fetchall()
    assert rows == _big_rows(BIG)


def test_a_portal_read_a_few_rows_at_a_time_gets_every_row_once(served: Served) -> None:
    # asyncpg's cursor executes a portal with a row limit, as JDBC's fetch size does: the server
    # suspends it after each limit, across the value-by-value rows and the Arrow batches.
    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(served.url())
        try:
            async with conn.transaction():
                out = []
                async for record in conn.cursor(BIG_QUERY, prefetch=30_001):
                    out.append(record)
                return out
        finally:
            await conn.close()

    records = asyncio.run(go())
    assert [r["id"] for r in records] == list(range(BIG))
    assert [r["ts"] for r in records] == [r[3] for r in _big_rows(BIG)]


def test_a_portal_left_half_read_frees_the_session_for_the_next_query(served: Served) -> None:
    # A cursor read in part, then the transaction ends: DuckDB's half-read result is closed before
    # the read-only transaction is rolled back, and the connection goes on.
    async def go() -> tuple[int, int, int]:
        conn = await asyncpg.connect(served.url())
        try:
            async with conn.transaction():
                cursor = await conn.cursor(BIG_QUERY)
                first = await cursor.fetch(250)  # 100 value by value, then into the Arrow batches
            after = await conn.fetchval("SELECT count(*) FROM daily")
            again = await conn.fetch(BIG_QUERY)
            return len(first), int(after), len(again)
        finally:
            await conn.close()

    assert asyncio.run(go()) == (250, 2, BIG)


def test_only_a_single_select_reaches_duckdb() -> None:
    # DuckDB's parser decides where a statement ends: what pitstop's splitter passed as one query
    # must be one SELECT to DuckDB too, or a COMMIT inside it would end the read-only transaction.
    for sql in [
        "SELECT 1; DROP TABLE daily",
        "SELECT 1; COMMIT; DROP TABLE daily",
        "SELECT 1;; SELECT 2",
        "DROP TABLE daily",
        "PRAGMA version",
        "SELECT ((",
    ]:
        with pytest.raises(WireError) as info:
            one_query(sql)
        assert info.value.code == sqlstate.SYNTAX_ERROR, sql
    for sql in ["WITH a AS (SELECT 1) SELECT * FROM a", "VALUES (1), (2)", "FROM range(3)", "SELECT $1::int"]:
        assert one_query(sql).type == duckdb.StatementType.SELECT, sql


NEVER_ENDS = (
    "SELECT count(*) FROM generate_series(1, 100000000000) AS a(x), "
    "generate_series(1, 1000) AS b(y) WHERE a.x % 7 = b.y"
)


def test_cancel_interrupts_a_long_query_and_the_session_goes_on(served: Served) -> None:
    # How soon a cancel takes effect is measured in bench/server.py (section 4).
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute("SET statement_timeout = '300s'")  # an ignored cancel fails, not hangs
        with cancelling(conn), pytest.raises(psycopg.errors.QueryCanceled, match="due to user request"):
            conn.execute(NEVER_ENDS)
        assert conn.execute("SELECT count(*) FROM daily").fetchone() == (2,)


def test_transactions_behave_as_in_postgres(served: Served) -> None:
    notices: list[str] = []
    with psycopg.connect(served.url()) as conn:  # psycopg begins a transaction itself
        conn.add_notice_handler(lambda d: notices.append(d.sqlstate or ""))
        assert conn.execute("SELECT count(*) FROM daily").fetchone() == (2,)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM nosuch")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.commit()
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.sqlstate or ""))
        conn.execute("COMMIT")
    assert notices == ["25P01"]


def test_set_and_show_session_parameters(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute("SET application_name = 'dashboards'")
        assert conn.info.parameter_status("application_name") == "dashboards"
        assert conn.execute("SHOW application_name").fetchone() == ("dashboards",)
        assert conn.execute("SHOW TRANSACTION ISOLATION LEVEL").fetchone() == ("read committed",)
        assert conn.execute("show time zone").fetchone() == ("UTC",)
        conn.execute("SET extra_float_digits = 3")
        conn.execute("SET search_path TO public, pitstop")
        assert conn.execute("SHOW search_path").fetchone() == ("public, pitstop",)
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute("SHOW no_such_parameter")
        conn.execute("SET 'await_timeout_s' = '5'")  # pitstop's own session setting
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute("SET 'no_such_setting' = '5'")


def test_without_a_certificate_tls_is_refused_plainly(served: Served) -> None:
    with pytest.raises(psycopg.OperationalError, match="does not support SSL"):
        psycopg.connect(served.url(sslmode="require"))
    with psycopg.connect(served.url(sslmode="prefer")) as conn:
        assert not conn.info.pgconn.ssl_in_use


@pytest.mark.served(tls=True)
def test_with_a_certificate_clients_speak_tls(served: Served) -> None:
    with psycopg.connect(served.url(sslmode="require")) as conn:
        assert conn.info.pgconn.ssl_in_use
        assert conn.execute("SHOW ssl").fetchone() == ("on",)
    done = psql(served, "-c", "SELECT 41 + 1 AS answer")
    assert done.returncode == 0 and "42" in done.stdout, done.stderr
    with psycopg.connect(served.url(sslmode="require"), autocommit=True) as conn:  # told, over TLS
        served.server.shutdown()
        with pytest.raises(psycopg.errors.AdminShutdown):
            conn.execute("SELECT 2")


def test_concurrent_creates_of_one_name_end_with_one_winner(served: Served) -> None:
    assert race(served, "CREATE MAPPING contested TYPE DuckDB", 6) == ["created"] + ["refused"] * 5
    assert [m.name for m in served.manager.catalog.mappings()] == ["contested"]


def unread(conn: psycopg.Connection[Any]) -> bytes:
    """The start of what the server has sent that waits, unread, in the client's socket (peeked:
    it stays there)."""
    with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        try:
            return sock.recv(65536, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return b""


def test_a_client_that_stops_reading_does_not_stall_others(served: Served) -> None:
    # How long the others take meanwhile is measured in bench/server.py (section 4).
    with served.manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE main.big AS SELECT range AS id, repeat('x', 200) AS pad FROM range(300000)")
    slow = psycopg.connect(served.url(), autocommit=True)
    try:
        slow.pgconn.send_query(b"SELECT * FROM big")  # tens of MB; never read
        deadline = time.monotonic() + 60
        while not unread(slow).startswith(b"T"):  # its RowDescription, then rows, are on their way
            assert time.monotonic() < deadline, f"no result for the slow client: {unread(slow)[:200]!r}"
            time.sleep(0.05)
        for _ in range(20):
            with psycopg.connect(served.url(), autocommit=True) as conn:
                assert conn.execute("SELECT count(*) FROM big").fetchone() == (300000,)
                conn.execute("SHOW JOBS")
        # The others were served while the slow client's result (more than its socket holds)
        # waited for it, unread.
        assert unread(slow).startswith(b"T")
    finally:
        slow.close()


def test_writes_are_refused_with_what_to_do(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as info:
            conn.execute("INSERT INTO daily (region) VALUES ('x')")
        assert "written by jobs" in str(info.value)
        assert info.value.diag.message_hint and "CREATE JOB" in info.value.diag.message_hint


def test_sigterm_is_a_clean_stop_with_exit_zero(tmp_path: Path) -> None:
    import signal

    home = tmp_path / "home"
    proc, port = serve_process(home)
    try:
        with psycopg.connect(f"postgresql://me@127.0.0.1:{port}/pitstop", autocommit=True) as conn:
            conn.execute("CREATE MAPPING kept TYPE DuckDB")
        assert (home / "server.json").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (home / "server.json").exists()
    assert "listening on" in (home / "logs" / "pitstop.log").read_text()


def test_current_setting_follows_set_and_reset(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("",)
        conn.execute("SET application_name TO 'grafana'")
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("grafana",)
        conn.execute("RESET ALL")
        assert conn.info.parameter_status("application_name") == ""
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("",)
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == (conn.info.backend_pid,)


def test_asyncpg_introspects_an_unknown_type(served: Served) -> None:
    """asyncpg meets a type it has no codec for (here int2vector) and asks the server about it
    with a recursive query over pg_type and pg_range, typed parameters left to the server."""

    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(served.url())
        try:
            return await conn.fetch("SELECT attname, atttypid FROM pg_attribute LIMIT 0")
        finally:
            await conn.close()

    assert asyncio.run(go()) == []


def test_deallocate_and_discard_all_forget_prepared_statements_as_postgresql_does(served: Served) -> None:
    """psqlODBC (default settings) failed from the 4th statement of every session: DEALLOCATE and
    DISCARD ALL only returned their tag, so its next prepare of the same name got 42P05; and
    DEALLOCATE of a name never prepared succeeded (PostgreSQL: 26000). psycopg prepares
    server-side statements by name and DEALLOCATEs them when its cache is full (prepared_max)."""
    with psycopg.connect(served.url(), autocommit=True, prepare_threshold=0) as conn:
        conn.prepared_max = 2
        for i in range(6):  # each new query is prepared; the cache's oldest is DEALLOCATEd
            assert conn.execute(f"SELECT {i} AS n, %s::int AS p", [i]).fetchone() == (i, i)
        with pytest.raises(psycopg.errors.InvalidSqlStatementName, match='prepared statement "nope"'):
            conn.execute("DEALLOCATE nope")
        assert conn.execute("DEALLOCATE ALL").statusmessage == "DEALLOCATE ALL"
        conn.execute("SET application_name = 'before'")
        assert conn.execute("DISCARD ALL").statusmessage == "DISCARD ALL"
        assert conn.execute("SHOW application_name").fetchone() == ("",)
    with psycopg.connect(served.url(), autocommit=True) as raw:  # the same name prepared again
        assert raw.pgconn.prepare(b"s1", b"SELECT 1").status == psycopg.pq.ExecStatus.COMMAND_OK
        again = raw.pgconn.prepare(b"s1", b"SELECT 2")
        assert again.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert again.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"42P05"
        raw.execute('DEALLOCATE "s1"')
        assert raw.pgconn.prepare(b"s1", b"SELECT 2").status == psycopg.pq.ExecStatus.COMMAND_OK


def test_psqlodbc_with_its_default_settings_runs_every_statement_of_a_session(served: Served) -> None:
    """The real psqlODBC driver (isql, installed by tests/tools/install.sh): with server-side
    prepare, its default, it DEALLOCATEs and re-prepares its plans; from the 4th statement each
    prepare failed with 42P05."""
    isql = shutil.which("isql")
    assert isql, "isql is missing: run `bash tests/tools/install.sh` (make test does)"
    statements = [f"SELECT {i} * 7 AS n" for i in range(1, 9)] + ["SHOW JOBS"]
    done = subprocess.run(
        [isql, "-v", "-b", "-k", f"Driver=PostgreSQL Unicode;Server={served.host};Port={served.port};"
         "Database=pitstop;Uid=tester;"],
        input="\n".join(statements) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ISQL]ERROR" not in done.stdout and "42P05" not in done.stdout, done.stdout
    found = [int(x) for x in re.findall(r"^\| (\d+)\s+\|$", done.stdout, re.M)]
    assert found == [i * 7 for i in range(1, 9)], done.stdout


def test_a_client_is_told_the_server_is_going_away(served: Served) -> None:
    """On shutdown (SIGTERM) each client gets FATAL 57P01, as from PostgreSQL; the socket was shut
    before the message could be sent, so clients saw only a connection that broke."""
    with psycopg.connect(served.url(), autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        served.server.shutdown()
        with pytest.raises(psycopg.errors.AdminShutdown, match="terminating connection due to administrator"):
            conn.execute("SELECT 2")


def test_statement_timeout_cancels_a_query_that_runs_longer(served: Served) -> None:
    """SET statement_timeout was accepted and shown but never enforced (a query ran 95 s)."""
    slow = "SELECT count(*) FROM range(100000000000) AS t(x) WHERE x % 7 = 3"
    with psycopg.connect(served.url(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match='"statement_timeout": "soon"'):
            conn.execute("SET statement_timeout = 'soon'")
        conn.execute("SET statement_timeout = '300ms'")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("300ms",)
        with pytest.raises(
            psycopg.errors.QueryCanceled, match="canceling statement due to statement timeout"
        ):
            conn.execute(slow)
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)  # the session goes on
        conn.execute("SET statement_timeout = 0")
        with cancelling(conn), pytest.raises(psycopg.errors.QueryCanceled, match="due to user request"):
            conn.execute(slow)
