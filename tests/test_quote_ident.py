"""One way to write a name into SQL: :func:`pitstop.names.quote_ident`.

Every hostile name (quotes, spaces, unicode, reserved words, SQL in a name) goes through a real
DuckDB and a real PostgreSQL as a table and a column name and comes back as it was; Spark's
backtick form is checked through sqlglot's Spark reader (no Spark needed).
"""

from __future__ import annotations

import duckdb
import psycopg
import pytest
import sqlglot
from sqlglot import exp

from pg_helpers import Postgres, postgres  # noqa: F401 - the fixture
from pitstop.names import quote_ident

HOSTILE = [
    'a"b',
    '"',
    '""',
    'x"; DROP TABLE t; --',
    "it's",
    "two words",
    " leading and trailing ",
    "a.b",
    "a`b",
    "back\\slash",
    "Umsätze",
    "日本語",
    "emoji 🚀",
    "select",
    "FROM",
    "Order",
    "window_end",
    "1st",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_duckdb_and_postgres_quote_by_doubling_the_double_quote(name: str) -> None:
    expected = '"' + name.replace('"', '""') + '"'
    assert quote_ident(name) == expected
    assert quote_ident(name, "duckdb") == expected
    assert quote_ident(name, "postgres") == expected


@pytest.mark.parametrize("name", HOSTILE)
def test_spark_quotes_by_doubling_the_backtick(name: str) -> None:
    quoted = quote_ident(name, "spark")
    assert quoted == "`" + name.replace("`", "``") + "`"
    alias = sqlglot.parse_one(f"SELECT 1 AS {quoted}", read="spark").expressions[0]
    assert isinstance(alias, exp.Alias) and alias.alias == name


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_round_trips_through_duckdb(name: str) -> None:
    with duckdb.connect() as db:
        table, column = quote_ident(name), quote_ident(name + " col")
        db.execute(f"CREATE TABLE {table} ({column} VARCHAR, {quote_ident(name)} INTEGER)")
        db.execute(f"INSERT INTO main.{table} ({column}, {quote_ident(name)}) VALUES (?, 7)", [name])
        assert db.execute(f"SELECT {column}, {table}.{quote_ident(name)} FROM {table}").fetchall() == [
            (name, 7)
        ]
        assert db.execute("SELECT table_name FROM information_schema.tables").fetchall() == [(name,)]
        assert [r[0] for r in db.execute(f"SELECT * FROM {table}").description] == [name + " col", name]


def test_every_hostile_name_round_trips_through_postgresql(postgres: Postgres) -> None:  # noqa: F811
    with psycopg.connect(postgres.url(postgres.database()), autocommit=True) as conn:
        for name in HOSTILE:
            table, column = quote_ident(name, "postgres"), quote_ident(name + " col", "postgres")
            conn.execute(f"CREATE TABLE {table} ({column} TEXT)")
            conn.execute(f"INSERT INTO public.{table} ({column}) VALUES (%s)", [name])
            cur = conn.execute(f"SELECT {table}.{column} FROM {table}")
            assert cur.fetchall() == [(name,)], name
            assert cur.description is not None and cur.description[0].name == name + " col"
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
        assert sorted(t for (t,) in tables) == sorted(HOSTILE)


def test_the_case_of_a_name_is_kept() -> None:
    with duckdb.connect() as db:
        db.execute(f"CREATE TABLE t ({quote_ident('MixedCase')} INTEGER)")
        assert [r[0] for r in db.execute("SELECT * FROM t").description] == ["MixedCase"]
