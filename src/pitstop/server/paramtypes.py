"""Types of a query's ``$n`` parameters that the client left unspecified.

DuckDB cannot describe the parameter types of a prepared statement (they stay UNKNOWN, measured on
duckdb 2.0), but asyncpg encodes each argument by the type the server describes: told ``text`` for
``$1::int`` or ``orders > $1`` it refuses an int. So, as PostgreSQL resolves them:

1. a parameter cast to a type where it is first used (``$1::int``, ``$2::timestamp``,
   ``$3::oid[]``) has that type, read from the client's own text (:func:`from_casts`), for the
   types Bind can read in both formats (:mod:`~pitstop.server.bindvalues`);
2. a parameter compared with an expression (``col = $1``, ``$1 < col``, ``col IN ($1, $2)``,
   ``col BETWEEN $1 AND $2``) or in arithmetic with one (``orders + $1``) takes that expression's
   type, found by running the same query's FROM with the expression as its only column under
   ``LIMIT 0`` (:func:`infer`); ``LIMIT $n``/``OFFSET $n`` are int8;
3. everything else stays text (clients then send strings, which DuckDB casts where the parameter
   is used).
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pitstop.server.pgcatalog import DIALECT
from pitstop.server.pgtypes import ARRAYS, INT8, OID, TEXT, pg_type_of

log = logging.getLogger(__name__)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod)
D = exp.DType
_CAST_TYPES: dict[exp.DType, int] = {
    D.BOOLEAN: 16, D.VARBINARY: 17, D.NAME: 19, D.BIGINT: 20, D.SMALLINT: 21, D.INT: 23, D.TEXT: 25,
    D.JSON: 114, D.FLOAT: 700, D.DOUBLE: 701, D.CHAR: 1042, D.BPCHAR: 1042, D.VARCHAR: 1043,
    D.DATE: 1082, D.TIME: 1083, D.TIMESTAMP: 1114, D.TIMESTAMPTZ: 1184, D.DECIMAL: 1700,
    D.UUID: 2950, D.JSONB: 3802,
}  # fmt: skip
"""The types a cast gives its parameter: those whose text and binary formats Bind reads (an
interval or a reg* type stays text: its binary format is not read here)."""
_ARRAY_OF = {t.element: t.oid for t in ARRAYS}


def _number(node: exp.Expr) -> int | None:
    try:
        return int(str(node.this))
    except (TypeError, ValueError):
        return None


def _cast_type(to: exp.Expr) -> int | None:
    """The type OID of a cast's target (``int``, ``oid``, ``int4[]``), when it is one of
    :data:`_CAST_TYPES`, ``oid``, or an array of those."""
    if isinstance(to, exp.ObjectIdentifier):
        return OID.oid if str(to.this).lower() == "oid" else None
    if not isinstance(to, exp.DataType):
        return None
    if to.this == D.ARRAY and len(to.expressions) == 1:
        element = _cast_type(to.expressions[0])
        return _ARRAY_OF.get(element) if element is not None else None
    return _CAST_TYPES.get(to.this)


def from_casts(sql: str, declared: list[int]) -> list[int]:
    """``declared`` with its zeros (unspecified) replaced by the type each parameter is cast to
    in the client's PostgreSQL text ``sql`` (``$1::int``). As in PostgreSQL, a parameter's first
    use decides: cast there, it has the cast's type (a later ``$1`` or ``$1::text`` uses it)."""
    types = list(declared)
    if all(types):
        return types
    try:
        tree: exp.Expr = exp.maybe_parse(sql.strip().rstrip(";"), dialect=DIALECT)
    except SqlglotError:
        return types
    seen: set[int] = set()
    for ph in tree.find_all(exp.Parameter, exp.Placeholder, bfs=False):  # PostgreSQL's $1: Parameter
        n = _number(ph)
        if n is None or not 0 < n <= len(types) or n in seen:
            continue
        seen.add(n)
        cast = ph.parent
        while isinstance(cast, exp.Paren):
            cast = cast.parent
        if not types[n - 1] and isinstance(cast, exp.Cast):
            types[n - 1] = _cast_type(cast.to) or 0
    return types


def _partner(ph: exp.Expr) -> exp.Expr | None:
    """The expression a placeholder is compared with, or computed with, if any."""
    parent = ph.parent
    if isinstance(parent, _COMPARISONS + _ARITHMETIC):
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


_BY_OID = {
    16: "BOOLEAN",
    20: "BIGINT",
    21: "SMALLINT",
    23: "INT",
    700: "FLOAT",
    701: "DOUBLE",
    1700: "DECIMAL",
}


def of_oids(oids: list[int]) -> tuple[str | None, ...]:
    """The types :mod:`~pitstop.server.pgsemantics` reads of parameters declared by OID (a
    number's; None for any other: it is not read as a number)."""
    return tuple(_BY_OID.get(oid) for oid in oids)


_INTEGERS = {21: "SMALLINT", 23: "INT", 20: "BIGINT"}


def of_values(values: list[Any]) -> tuple[str | None, ...]:
    """The same, of the values Bind decoded (:mod:`~pitstop.server.bindvalues`): psycopg sends a
    ``Decimal`` as numeric, and ``revenue / %s`` is then PostgreSQL's numeric division; an int as
    the smallest of int2, int4, int8 that holds it, declared so (``Bound.oids``): ``%s / %s`` of
    two small ints is int2."""
    declared = getattr(values, "oids", ())
    return tuple(
        _INTEGERS[oid]
        if isinstance(v, int) and not isinstance(v, bool) and oid in _INTEGERS
        else _of_value(v)
        for v, oid in zip(values, [*declared, *[0] * (len(values) - len(declared))], strict=True)
    )


def _of_value(value: Any) -> str | None:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, Decimal):
        return "DECIMAL"
    return None
