"""Clients that broke on pitstop serve (issue 25), each through the real client over a socket:
asyncpg's typed parameters and its type introspection, named cursors (DECLARE / FETCH / CLOSE:
psycopg's server-side cursors, psql), and COPY ... TO STDOUT (psycopg's copy, psql's \\copy).

No Spark here: the tests read a DuckDB table the fixture writes.
"""

from __future__ import annotations

import asyncio
import io
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest

from pitstop.manager import Manager
from server_helpers import Served, psql

OID, OID_ARRAY, INT4_ARRAY = 26, 1028, 1007


def daily_table(manager: Manager) -> None:
    """Three rows of a sink table, one with a NULL and a text that needs quoting."""
    with manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE main.daily (day DATE, region VARCHAR, revenue DECIMAL(12,2), orders BIGINT)")
        tx.execute(
            "INSERT INTO main.daily VALUES ('2024-01-01', 'eu', 17076.00, 320), "
            "('2024-01-02', 'us, east', -14.05, 321), ('2024-01-03', NULL, 0.50, 7)"
        )


pytestmark = pytest.mark.served(catalog=daily_table)


def asyncpg_run(served: Served, work: Any) -> Any:
    """``await work(conn)`` on a fresh asyncpg connection, within 30 s (a client that loops on
    the server's answers fails here instead of hanging the run)."""

    async def go() -> Any:
        conn = await asyncpg.connect(served.url())
        try:
            return await asyncio.wait_for(work(conn), 30)
        finally:
            await conn.close()

    return asyncio.run(go())


# -- 1. asyncpg --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "value", "expected"),
    [
        ("SELECT $1::int + 1", 41, 42),
        ("SELECT $1::float8 * 2", 1.25, 2.5),
        ("SELECT $1::numeric", Decimal("12.50"), Decimal("12.50")),
        ("SELECT $1::timestamp", datetime(2024, 1, 2, 3, 4, 5), datetime(2024, 1, 2, 3, 4, 5)),
        ("SELECT $1::date", date(2024, 2, 29), date(2024, 2, 29)),
        ("SELECT NOT $1::bool", True, False),
        ("SELECT $1::oid", 26, 26),
    ],
    ids=["int", "float8", "numeric", "timestamp", "date", "bool", "oid"],
)
def test_asyncpg_binds_a_parameter_by_the_type_it_is_cast_to(
    served: Served, sql: str, value: object, expected: object
) -> None:
    """asyncpg encodes each argument by the type the server describes: every parameter was
    described as text, so an int for ``$1::int`` was refused before it was sent."""
    assert asyncpg_run(served, lambda conn: conn.fetchval(sql, value)) == expected


def test_asyncpg_describes_cast_and_compared_parameters_with_their_types(served: Served) -> None:
    async def work(conn: asyncpg.Connection) -> tuple[list[int], list[tuple[Any, ...]]]:
        stmt = await conn.prepare(
            "SELECT region FROM daily WHERE orders = $1 AND day < $2::date AND $3 = region"
        )
        rows = await stmt.fetch(320, date(2025, 1, 1), "eu")
        rows.append(await conn.fetchrow("SELECT max(orders) + $1 FROM daily", 1))  # as in arithmetic
        return [t.oid for t in stmt.get_parameters()], [tuple(r) for r in rows]

    types, rows = asyncpg_run(served, work)
    assert types == [20, 1082, 25]  # int8 from orders, date from the cast, text from region
    assert rows == [("eu",), (322,)]


def test_asyncpg_reads_an_int4_array_without_introspecting_forever(served: Served) -> None:
    """An int4[] result makes asyncpg introspect the type; the introspection's own answer typed
    attrtypoids int4[] (1007) instead of oid[] (1028), so asyncpg introspected again, forever."""
    found = asyncpg_run(served, lambda conn: conn.fetchval("SELECT ARRAY[1,2]::int4[]"))
    assert found == [1, 2]


def test_catalog_oid_columns_are_described_as_oid(served: Served) -> None:
    async def work(conn: asyncpg.Connection) -> dict[str, int]:
        stmt = await conn.prepare(
            "SELECT t.oid, t.typelem, a.attrelid, a.atttypid, array_agg(a.atttypid) AS oids, "
            "ARRAY[1]::int4[] AS ints "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid GROUP BY 1, 2, 3, 4"
        )
        return {a.name: a.type.oid for a in stmt.get_attributes()}

    assert asyncpg_run(served, work) == {
        "oid": OID, "typelem": OID, "attrelid": OID, "atttypid": OID, "oids": OID_ARRAY, "ints": INT4_ARRAY
    }  # fmt: skip


def test_array_parameters_bind_in_binary_and_text(served: Served) -> None:
    """A parameter cast to an array is described as that array type: asyncpg then sends a list in
    binary; a client that names the array type may send it in either format. Both are read into
    a list (NULLs and quotes as PostgreSQL reads them); a malformed literal is 22P02."""
    found = asyncpg_run(served, lambda conn: conn.fetchval("SELECT $1::int4[]", [1, None, 3]))
    assert found == [1, None, 3]
    with psycopg.connect(served.url(), autocommit=True) as conn:
        found = conn.execute("SELECT %b::text[]", [["a b", None, 'q"uote']]).fetchone()  # %b: binary
        assert found == (["a b", None, 'q"uote'],)
        for literal, expected in ((b'{1,NULL,"3"}', [1, None, 3]), (b"{}", [])):
            result = conn.pgconn.exec_params(b"SELECT $1::int4[]", [literal], [INT4_ARRAY])
            assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
            assert (
                result.get_value(0, 0)
                == ("{" + ",".join("NULL" if v is None else str(v) for v in expected) + "}").encode()
            )
        result = conn.pgconn.exec_params(b"SELECT $1::int4[]", [b"{1,2"], [INT4_ARRAY])
        assert result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"22P02"
        assert result.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY) == (
            b'malformed array literal in bind parameter 1: "{1,2"'
        )


# -- 2. named cursors --------------------------------------------------------------------------------
ROWS = [(date(2024, 1, 1), "eu", 320), (date(2024, 1, 2), "us, east", 321), (date(2024, 1, 3), None, 7)]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_psycopg_named_cursor_reads_a_query_a_few_rows_at_a_time(served: Served, binary: bool) -> None:
    """psycopg's server-side cursor: DECLARE (with its parameter bound), a Describe of the cursor's
    portal, then FETCH FORWARD n; the cursor ends with the transaction. DECLARE was refused."""
    with psycopg.connect(served.url()) as conn:  # not autocommit: psycopg begins a transaction
        with conn.cursor(name="daily_rows", binary=binary) as cur:
            cur.execute("SELECT day, region, orders FROM daily WHERE orders > %s ORDER BY day", [0])
            assert [d.name for d in cur.description or []] == ["day", "region", "orders"]
            assert cur.fetchone() == ROWS[0]
            assert conn.execute("SELECT count(*) FROM daily").fetchone() == (3,)  # a query beside it
            assert cur.fetchmany(5) == ROWS[1:]
            assert cur.fetchall() == []
        conn.commit()
        with conn.cursor(name="many") as cur:
            cur.itersize = 40  # FETCH FORWARD 40, over and over
            cur.execute("SELECT i, i * 2 AS twice FROM range(250) AS t(i)")
            assert list(cur) == [(i, i * 2) for i in range(250)]
        conn.commit()


def test_psql_declares_fetches_and_closes_a_cursor(served: Served) -> None:
    script = (
        "BEGIN;\n"
        "DECLARE c CURSOR FOR SELECT region, orders FROM daily ORDER BY day;\n"
        "FETCH 1 FROM c;\nMOVE FORWARD 1 IN c;\nFETCH ALL c;\nFETCH NEXT FROM c;\n"
        "CLOSE c;\nCOMMIT;\n"
    )
    done = psql(served, "-A", "-v", "ON_ERROR_STOP=1", stdin=script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "BEGIN", "DECLARE CURSOR", "region|orders", "eu|320", "(1 row)", "MOVE 1",
        "region|orders", "|7", "(1 row)", "region|orders", "(0 rows)", "CLOSE CURSOR", "COMMIT",
    ]  # fmt: skip


def test_a_cursor_with_hold_outlives_its_transaction(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        with conn.cursor(name="held", withhold=True) as cur:  # declared outside a block
            cur.execute("SELECT region FROM daily ORDER BY day")
            assert cur.fetchone() == ("eu",)
            assert cur.fetchall() == [("us, east",), (None,)]
        conn.execute("BEGIN")
        conn.execute("DECLARE kept CURSOR WITH HOLD FOR SELECT orders FROM daily ORDER BY day")
        conn.execute("DECLARE gone CURSOR FOR SELECT 1")
        conn.execute("COMMIT")
        assert conn.execute("FETCH 2 FROM kept").fetchall() == [(320,), (321,)]
        with pytest.raises(psycopg.errors.InvalidCursorName, match='cursor "gone" does not exist'):
            conn.execute("FETCH gone")
        conn.execute("CLOSE ALL")
        with pytest.raises(psycopg.errors.InvalidCursorName, match='cursor "kept" does not exist'):
            conn.execute("FETCH kept")


def test_pg_cursors_lists_the_session_s_own_open_cursors(served: Served) -> None:
    """pg_cursors, as PostgreSQL 15 shows it: the calling session's cursors (another session's
    are not listed), with the DECLARE as written; gone once closed. It was an unknown table."""
    with psycopg.connect(served.url(), autocommit=True) as conn, psycopg.connect(served.url()) as other:
        conn.execute("BEGIN")
        conn.execute("DECLARE a CURSOR FOR SELECT region FROM daily")
        conn.execute("DECLARE b CURSOR WITH HOLD FOR SELECT 1")
        other.execute("BEGIN")
        other.execute("DECLARE theirs CURSOR FOR SELECT 2")
        rows = conn.execute(
            "SELECT name, statement, is_holdable, is_binary, is_scrollable, creation_time <= now() "
            "FROM pg_cursors ORDER BY name"
        ).fetchall()
        assert rows == [
            ("a", "DECLARE a CURSOR FOR SELECT region FROM daily", False, False, False, True),
            ("b", "DECLARE b CURSOR WITH HOLD FOR SELECT 1", True, False, False, True),
        ]
        conn.execute("CLOSE a")
        assert conn.execute("SELECT name FROM pg_catalog.pg_cursors").fetchall() == [("b",)]
        assert other.execute("SELECT name FROM pg_cursors").fetchall() == [("theirs",)]


def test_cursors_refuse_what_they_cannot_do_as_postgresql_says_it(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        with pytest.raises(
            psycopg.errors.NoActiveSqlTransaction,
            match="DECLARE CURSOR can only be used in transaction blocks",
        ):
            conn.execute("DECLARE c CURSOR FOR SELECT 1")
        refusals: list[tuple[str, type[Exception], str]] = [
            ("DECLARE c CURSOR FOR INSERT INTO daily VALUES (NULL)", psycopg.errors.SyntaxError,
             'cursor "c" must be declared FOR a query (SELECT, WITH, VALUES or TABLE), not INSERT INTO'),
            ("DECLARE c CURSOR FOR SHOW JOBS", psycopg.errors.SyntaxError, "not SHOW JOBS"),
            ("DECLARE c SCROLL CURSOR FOR SELECT 1", psycopg.errors.FeatureNotSupported,
             "cannot be declared SCROLL: pitstop's cursors read forward only"),
            ("DECLARE c BINARY CURSOR FOR SELECT 1", psycopg.errors.FeatureNotSupported,
             'cursor "c" cannot be declared BINARY'),
            ("FETCH BACKWARD 1 FROM open_one", psycopg.errors.ObjectNotInPrerequisiteState,
             'FETCH BACKWARD 1 of cursor "open_one": the cursor can only scan forward'),
            ("FETCH ABSOLUTE 1 FROM open_one", psycopg.errors.ObjectNotInPrerequisiteState,
             "can only scan forward"),
            ("FETCH 1 FROM nosuch", psycopg.errors.InvalidCursorName, 'cursor "nosuch" does not exist'),
            ("CLOSE nosuch", psycopg.errors.InvalidCursorName, 'cursor "nosuch" does not exist'),
            ("DECLARE open_one CURSOR FOR SELECT 2", psycopg.errors.DuplicateCursor,
             'cursor "open_one" already exists'),
        ]  # fmt: skip
        for sql, error, message in refusals:
            conn.execute("BEGIN")
            conn.execute("DECLARE open_one CURSOR FOR SELECT 1 AS one")
            with pytest.raises(error, match=re.escape(message)):
                conn.execute(sql)
            conn.execute("ROLLBACK")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on


def test_statement_timeout_cancels_a_cursors_slow_query(served: Served) -> None:
    slow = "SELECT count(*) FROM range(100000000000) AS t(x) WHERE x % 7 = 3"
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute("SET statement_timeout = '300ms'")
        conn.execute("BEGIN")
        with pytest.raises(psycopg.errors.QueryCanceled, match="due to statement timeout"):
            conn.execute(f"DECLARE slow CURSOR FOR {slow}")
            conn.execute("FETCH slow")
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)


# -- 3. COPY ... TO STDOUT -----------------------------------------------------------------------------
def test_psql_copies_a_query_to_a_file_of_its_own(served: Served, tmp_path: Path) -> None:
    """psql's \\copy sends COPY ... TO STDOUT and writes what comes back; COPY was refused."""
    target = tmp_path / "daily.csv"
    done = psql(
        served,
        "-c",
        f"\\copy (SELECT day, region, revenue, orders FROM daily ORDER BY day) TO '{target}' "
        "WITH (FORMAT csv, HEADER)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "COPY 3"
    assert target.read_text() == (
        "day,region,revenue,orders\n"
        "2024-01-01,eu,17076.00,320\n"
        '2024-01-02,"us, east",-14.05,321\n'
        "2024-01-03,,0.50,7\n"
    )
    done = psql(served, "-c", f"\\copy daily (region, orders) TO '{target}'")  # a table, text format
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "eu\t320\nus, east\t321\n\\N\t7\n"


def test_psycopg_and_asyncpg_copy_out_rows(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        cur = conn.cursor()
        with cur.copy("COPY (SELECT region, orders FROM daily ORDER BY day) TO STDOUT") as copy:
            copy.set_types(["text", "int8"])
            assert list(copy.rows()) == [("eu", 320), ("us, east", 321), (None, 7)]
        assert cur.rowcount == 3  # from the tag, COPY 3
        with cur.copy("COPY (SELECT i FROM range(5000) AS t(i)) TO STDOUT (FORMAT csv)") as copy:
            data = b"".join(bytes(block) for block in copy)  # past the rows read at once
        assert data == b"".join(b"%d\n" % i for i in range(5000))

    async def work(conn: asyncpg.Connection) -> tuple[str, bytes]:
        out = io.BytesIO()
        status = await conn.copy_from_query(
            "SELECT region, orders FROM daily ORDER BY day", output=out, format="csv", header=True
        )
        return status, out.getvalue()

    assert asyncpg_run(served, work) == ("COPY 3", b'region,orders\neu,320\n"us, east",321\n,7\n')


def test_copy_writes_values_as_postgresql_does_in_text_and_csv(served: Served) -> None:
    values = (
        "SELECT E'tab\\there' AS a, E'back\\\\slash' AS b, E'two\\nlines' AS c, '' AS d, NULL AS e, "
        "'q\"u' AS f"
    )
    expected = {
        "": b'tab\\there\tback\\\\slash\ttwo\\nlines\t\t\\N\tq"u\n',
        "(FORMAT csv)": b'tab\there,back\\slash,"two\nlines","",,"q""u"\n',
        "(FORMAT csv, DELIMITER ';', NULL 'none', FORCE_QUOTE (a))": (
            b'"tab\there";back\\slash;"two\nlines";;none;"q""u"\n'
        ),
        "WITH CSV QUOTE AS '''' ESCAPE AS '\\' FORCE QUOTE *": (
            b"'tab\there','back\\\\slash','two\nlines','',,'q\"u'\n"
        ),
        "WITH DELIMITER '|' NULL AS 'null'": b'tab\\there|back\\\\slash|two\\nlines||null|q"u\n',
    }
    with psycopg.connect(served.url(), autocommit=True) as conn:
        for options, line in expected.items():
            with conn.cursor().copy(f"COPY ({values}) TO STDOUT {options}") as copy:
                assert b"".join(bytes(block) for block in copy) == line, options


def test_copy_refuses_what_it_cannot_do_and_says_what_to_do(served: Served) -> None:
    refusals: list[tuple[str, type[Exception], str]] = [
        ("COPY daily FROM STDIN", psycopg.errors.ReadOnlySqlTransaction,
         "COPY ... FROM is not accepted: pitstop's tables are written by jobs, not by clients"),
        ("COPY daily TO '/tmp/h25clients-never.csv'", psycopg.errors.InsufficientPrivilege,
         "COPY ... TO '/tmp/h25clients-never.csv' is not accepted: pitstop's server writes no files"),
        ("COPY daily TO PROGRAM 'cat'", psycopg.errors.InsufficientPrivilege, "COPY ... TO PROGRAM"),
        ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", psycopg.errors.FeatureNotSupported,
         "COPY ... TO STDOUT in FORMAT binary is not supported by pitstop"),
        ("COPY (SELECT 1) TO STDOUT (QUOTE '\"')", psycopg.errors.FeatureNotSupported,
         "COPY QUOTE is available only in CSV mode"),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER ';;')", psycopg.errors.InvalidParameterValue,
         "COPY delimiter must be a single one-byte character"),
        ("COPY (SELECT 1) TO STDOUT (SHAPE round)", psycopg.errors.SyntaxError,
         'COPY option "shape" is not recognized'),
        ("COPY (DELETE FROM daily) TO STDOUT", psycopg.errors.SyntaxError,
         "COPY (...) TO STDOUT copies a query (SELECT, WITH, VALUES or TABLE), not DELETE FROM"),
    ]  # fmt: skip
    with psycopg.connect(served.url(), autocommit=True) as conn:
        for sql, error, message in refusals:
            with pytest.raises(error, match=re.escape(message)):
                with conn.cursor().copy(sql) as copy:
                    list(copy)
        assert conn.execute("SELECT count(*) FROM daily").fetchone() == (3,)
    assert not Path("/tmp/h25clients-never.csv").exists()
