"""The sink's tables in a PostgreSQL schema: the target table (created, or checked against the
job's columns), the bookkeeping beside it (``pitstop_sink_batches``, ``pitstop_sink_rows``) and an
upsert's history of before-images (``<table>__before``).

Column types: PostgreSQL types are mapped from the job's (Spark) column types by :data:`PG_TYPES`;
an existing table must have, for every column of the job, a column of the same name whose type
holds it (:func:`fits`), and no other column that is NOT NULL without a default. An upsert's table
(a running aggregate's) gains a job's column it lacks, and needs a unique index on the keys.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from pitstop.connectors.postgres.options import TableRef
from pitstop.connectors.upsert import HISTORY_COLUMNS, HISTORY_SUFFIX
from pitstop.errors import PlanError

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

BOOKKEEPING = "pitstop_sink_batches"
ROW_HASHES = "pitstop_sink_rows"
ROW_HASH = "md5(ROW({0}.*)::text)"
"""A row's hash as the table holds it (every column, in the table's order); ``{0}`` its alias."""

PG_TYPES = {
    "string": "text",
    "boolean": "boolean",
    "tinyint": "smallint",
    "smallint": "smallint",
    "int": "integer",
    "bigint": "bigint",
    "float": "real",
    "double": "double precision",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "binary": "bytea",
}
"""Spark ``simpleString`` type -> the PostgreSQL type of a created table (``decimal(p,s)`` ->
``numeric(p,s)``)."""

_ACCEPTS = {
    "string": ("text", "character varying"),
    "boolean": ("boolean",),
    "tinyint": ("smallint", "integer", "bigint", "numeric"),
    "smallint": ("smallint", "integer", "bigint", "numeric"),
    "int": ("integer", "bigint", "numeric"),
    "bigint": ("bigint", "numeric"),
    "float": ("real", "double precision", "numeric"),
    "double": ("double precision", "numeric"),
    "date": ("date", "timestamp without time zone", "timestamp with time zone"),
    "timestamp": ("timestamp without time zone", "timestamp with time zone"),
    "timestamp_ntz": ("timestamp without time zone", "timestamp with time zone"),
    "binary": ("bytea",),
}
"""The existing column types (``format_type`` without modifiers) that hold a Spark type's values."""

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")


def pg_type(spark_simple: str) -> str | None:
    """The PostgreSQL type a created table gives a Spark type; None if pitstop has none for it."""
    t = spark_simple.lower()
    decimal = _DECIMAL.fullmatch(t)
    if decimal:
        return f"numeric({decimal.group(1)},{decimal.group(2)})"
    return PG_TYPES.get(t)


def fits(spark_simple: str, existing: str) -> bool:
    """An existing column of type ``existing`` (``format_type``) holds the Spark type's values."""
    t, have = spark_simple.lower(), existing.lower()
    decimal = _DECIMAL.fullmatch(t)
    if decimal:
        if have == "numeric":
            return True
        numeric = _NUMERIC.fullmatch(have.replace(" ", ""))
        if numeric is None:
            return False
        p, s, p2, s2 = (int(x) for x in (*decimal.groups(), *numeric.groups()))
        return s2 >= s and p2 - s2 >= p - s
    if have.startswith("character varying("):  # a length limit may not hold a value
        return False
    base = have.split("(")[0].strip()
    return base in _ACCEPTS.get(t, ())


def table_schema(conn: psycopg.Connection[Any], ref: TableRef, about: str) -> str:
    """The schema the table is in: the mapping's (which must exist), else the connection's
    ``current_schema()``; PlanError naming the mapping (``about``) otherwise."""
    schema = ref.schema
    if schema is None:
        row = conn.execute("SELECT current_schema()").fetchone()
        if row is None or row[0] is None:
            raise PlanError(f"{about}: the connection has no current schema; write 'schema.table'")
        schema = str(row[0])
    elif not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone():
        raise PlanError(f"{about}: schema '{schema}' does not exist; create it first")
    return schema


def create_or_check(
    conn: psycopg.Connection[Any],
    schema: str,
    ref: TableRef,
    columns: list[tuple[str, str]],
    keys: tuple[str, ...],
    about: str,
) -> None:
    """Create the table (with ``keys`` its primary key) if missing, else check its columns; then
    the bookkeeping tables, if missing. In the caller's transaction."""
    from psycopg import sql

    target = sql.Identifier(schema, ref.name)
    found = conn.execute("SELECT to_regclass(%s)", [target.as_string(conn)]).fetchone()
    if found is None or found[0] is None:
        cols = [sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(pg_type(t) or "")) for n, t in columns]
        if keys:
            cols.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, keys))))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(target, sql.SQL(", ").join(cols)))
        log.info("%s: table created", about)
    else:
        _check_columns(conn, schema, ref, target.as_string(conn), columns, keys, about)
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (job text NOT NULL, run_id text NOT NULL, "
            "branch integer NOT NULL, batch_id bigint NOT NULL, sink_table text NOT NULL, "
            "rows bigint NOT NULL, committed timestamptz NOT NULL DEFAULT now(), "
            "PRIMARY KEY (run_id, branch, batch_id))"
        ).format(sql.Identifier(schema, BOOKKEEPING))
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (run_id text NOT NULL, branch integer NOT NULL, "
            "batch_id bigint NOT NULL, row_hash text NOT NULL)"
        ).format(sql.Identifier(schema, ROW_HASHES))
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (run_id, branch, batch_id)").format(
            sql.Identifier(f"{ROW_HASHES}_batch"), sql.Identifier(schema, ROW_HASHES)
        )
    )


def check_history(conn: psycopg.Connection[Any], schema: str, ref: TableRef) -> list[str]:
    """Create the table's history of before-images if missing (an upsert's; see
    :mod:`pitstop.connectors.postgres.writes`), and return the table's columns, which a
    before-image holds. In the caller's transaction."""
    from psycopg import sql

    target = sql.Identifier(schema, ref.name)
    meta = sql.SQL(", ").join(sql.SQL(f"NULL::{t} AS {n}") for n, t in HISTORY_COLUMNS)
    conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} AS SELECT {}, t.* FROM {} t WITH NO DATA").format(
            sql.Identifier(schema, ref.name + HISTORY_SUFFIX), meta, target
        )
    )
    history = sql.Identifier(schema, ref.name + HISTORY_SUFFIX)

    def columns(table: Any) -> list[tuple[str, str]]:
        rows = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
            "%s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            [table.as_string(conn)],
        ).fetchall()
        return [(str(n), str(t)) for n, t in rows]

    table = columns(target)
    kept = {n for n, _ in columns(history)}
    for name, kind in table:  # a column the table gained since the history was made
        if name not in kept:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                    history, sql.Identifier(name), sql.SQL(kind)
                )
            )
    return [n for n, _ in table]


def _check_columns(
    conn: psycopg.Connection[Any],
    schema: str,
    ref: TableRef,
    regclass: str,
    columns: list[tuple[str, str]],
    keys: tuple[str, ...],
    about: str,
) -> None:
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef "
        "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        [regclass],
    ).fetchall()
    existing = {str(name): (str(kind), bool(notnull), bool(default)) for name, kind, notnull, default in rows}
    where = f"{about}: the existing table"
    for name, kind in columns:
        if name not in existing and keys:  # a running aggregate's table gains the column
            from psycopg import sql

            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                    sql.Identifier(schema, ref.name),
                    sql.Identifier(name),
                    sql.SQL(pg_type(kind) or ""),
                )
            )
            log.info("%s: column '%s' added (NULL in the rows written before)", about, name)
            existing[name] = (pg_type(kind) or "", False, False)
        if name not in existing:
            raise PlanError(
                f"{where} has no column '{name}' (it has {', '.join(existing) or 'none'}); alias the "
                "job's column to one of the table's, or write to another table"
            )
        have = existing[name][0]
        if not fits(kind, have):
            raise PlanError(
                f"{where} has column '{name}' of type {have}, which does not hold the job's "
                f"{kind} ({pg_type(kind)}); change the column, or write to another table"
            )
    ours = {n for n, _ in columns}
    for name, (have, notnull, default) in existing.items():
        if name not in ours and notnull and not default:
            raise PlanError(
                f"{where} has column '{name}' ({have}) NOT NULL without a default, which the job "
                "does not write; give it a default, or write to another table"
            )
    if keys:
        unique = conn.execute(
            "SELECT 1 FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indisunique AND "
            "(SELECT array_agg(attname::text ORDER BY attname) FROM pg_attribute "
            " WHERE attrelid = i.indrelid AND attnum = ANY(i.indkey)) = %s",
            [regclass, sorted(keys)],
        ).fetchone()
        if unique is None:
            raise PlanError(f"{where} has no unique index on ({', '.join(keys)}), which an upsert needs")
