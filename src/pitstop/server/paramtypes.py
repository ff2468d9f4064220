"""Types of a query's ``$n`` parameters that the client left unspecified.

DuckDB cannot describe the parameter types of a prepared statement (they stay UNKNOWN, measured on
duckdb 2.0), but asyncpg encodes each argument by the type the server describes: told ``text`` for
``orders > $1`` it refuses an int. So a parameter compared with an expression (``col = $1``,
``$1 < col``, ``col IN ($1, $2)``, ``col BETWEEN $1 AND $2``) takes that expression's type, found
by running the same query's FROM with the expression as its only column under ``LIMIT 0``;
``LIMIT $n``/``OFFSET $n`` are int8; everything else stays text (clients then send strings, which
DuckDB casts where the parameter is used).
"""

from __future__ import annotations

import logging

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pitstop.server.pgtypes import INT8, TEXT, pg_type_of

log = logging.getLogger(__name__)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)


def _number(node: exp.Expr) -> int | None:
    try:
        return int(str(node.this))
    except (TypeError, ValueError):
        return None


def _partner(ph: exp.Expr) -> exp.Expr | None:
    """The expression a placeholder is compared with, if any."""
    parent = ph.parent
    if isinstance(parent, _COMPARISONS):
        other = parent.right if parent.left is ph else parent.left
        return None if isinstance(other, exp.Placeholder) else other
    if isinstance(parent, exp.In) and ph is not parent.this:
        return parent.this
    if isinstance(parent, exp.Between) and ph is not parent.this:
        return parent.this
    return None


def _type_of(cursor: duckdb.DuckDBPyConnection, select: exp.Select, other: exp.Expr) -> int | None:
    probe = select.copy()
    probe.set("expressions", [other.copy()])
    for arg in ("order", "limit", "offset", "group", "having", "qualify", "distinct"):
        probe.set(arg, None)
    for ph in list(probe.find_all(exp.Placeholder)):
        ph.replace(exp.Null())
    # Each probe in a read-only transaction of its own: a failed probe (a FROM that is not
    # valid on its own, such as a recursive CTE's) must not abort the caller's.
    cursor.execute("BEGIN TRANSACTION READ ONLY")
    try:
        rel = cursor.execute(f"SELECT * FROM ({probe.sql('duckdb')}) AS q LIMIT 0")
        description = rel.description or []
    except duckdb.Error:
        return None
    finally:
        cursor.execute("ROLLBACK")
    return pg_type_of(str(description[0][1])).oid if description else None


def infer(cursor: duckdb.DuckDBPyConnection, sql: str, declared: list[int]) -> list[int]:
    """``declared`` with its zeros (unspecified) replaced by the best type found; runs only
    ``LIMIT 0`` probes, each in a read-only transaction (the caller must not hold one open)."""
    types = list(declared)
    if all(types):
        return types
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError:
        return [t or TEXT.oid for t in types]
    for ph in tree.find_all(exp.Placeholder):
        n = _number(ph)
        if n is None or not 0 < n <= len(types) or types[n - 1]:
            continue
        if isinstance(ph.parent, exp.Limit | exp.Offset):
            types[n - 1] = INT8.oid
            continue
        other = _partner(ph)
        select = ph.find_ancestor(exp.Select)
        if other is not None and select is not None:
            found = _type_of(cursor, select, other)
            if found is not None:
                types[n - 1] = found
    return [t or TEXT.oid for t in types]
