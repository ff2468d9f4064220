"""Clients that broke on pitstop serve (issue 25), each through the real client over a socket:
asyncpg's typed parameters and its type introspection, named cursors (DECLARE / FETCH / CLOSE:
psycopg's server-side cursors, psql), and COPY ... TO STDOUT (psycopg's copy, psql's \\copy).

No Spark here: the tests read a DuckDB table the fixture writes.
"""

from __future__ import annotations

import asyncio
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import asyncpg
import psycopg
import pytest

from pitstop.manager import Manager
from server_helpers import Served

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
    ],
    ids=["int", "float8", "numeric", "timestamp", "date", "bool"],
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
