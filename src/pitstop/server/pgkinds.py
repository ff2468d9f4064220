"""The types PostgreSQL gives the parts of a client's statement, for :mod:`pgsemantics`.

sqlglot qualifies and annotates a copy of the statement with the sink tables' columns (read from
DuckDB, :func:`schema_of`) and with PostgreSQL's result types where sqlglot's differ: ``int / int``
is an integer, ``int / numeric`` and ``avg(int)`` are numeric, ``sum(int4)`` is int8, ``2.5`` is a
numeric constant. What the rewrite reads of a type is its kind: int, numeric, float, text, time or
unknown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import TypeAnnotator, annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.typing.postgres import EXPRESSION_METADATA

__all__ = [
    "ID",
    "NO_SCHEMA",
    "SMALL_INTS",
    "Schema",
    "aggregated",
    "kind_of",
    "read_schema",
    "removes_duplicates",
    "schema_of",
    "set_branches",
    "types",
]

log = logging.getLogger(__name__)


# -- the schema ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schema:
    """The columns of the sink tables (DuckDB's ``main``, PostgreSQL's ``public``) and their types."""

    tables: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    def mapping(self) -> dict[str, object]:
        return {table: dict(columns) for table, columns in self.tables}


NO_SCHEMA = Schema()
_SIMPLE_TYPES = re.compile(
    r"(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|DOUBLE|"
    r"VARCHAR|BOOLEAN|DATE|TIME|TIMESTAMP|TIMESTAMP_S|TIMESTAMP_MS|TIMESTAMP_NS|INTERVAL|UUID|BLOB|"
    r"DECIMAL\(\d+,\d+\))"
)
_NEEDS_TYPES = re.compile(
    r"/|avg|sum|numeric|decimal|typeof|to_char|extract|date_part|percentile|coalesce|round|sign|bool|stddev|var|text|-|"
    r"greatest|least|format|exp|gcd|lcm|char|null|real|float4|interval|sqrt|ln|log|pow|\^|union|intersect|except|"
    r"\d[eE][+-]?\d",
    re.I,
)


def _sqlglot_type(duckdb_type: str) -> str:
    if duckdb_type == "TIMESTAMP WITH TIME ZONE":
        return "TIMESTAMPTZ"
    if duckdb_type.startswith("TIMESTAMP_"):
        return "TIMESTAMP"
    return duckdb_type if _SIMPLE_TYPES.fullmatch(duckdb_type) else "UNKNOWN"


def schema_of(sql: str, read: Callable[[], Schema]) -> Schema:
    """The sink tables' columns (``read()``, :func:`read_schema`) when ``sql`` has something whose
    meaning depends on types (a division, avg, sum, numeric, to_char); else :data:`NO_SCHEMA`."""
    if not _NEEDS_TYPES.search(sql):
        return NO_SCHEMA
    return read()


def read_schema(cursor: duckdb.DuckDBPyConnection) -> Schema:
    """The sink tables' columns, from DuckDB (~0.5 ms)."""
    rows = cursor.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND database_name = current_database() ORDER BY table_name, column_index"
    ).fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        tables.setdefault(table, []).append((column, _sqlglot_type(data_type)))
    return Schema(tuple((table, tuple(columns)) for table, columns in tables.items()))


# -- kinds -----------------------------------------------------------------------------------------
ID = "pgs_id"
D = exp.DType
_KINDS: dict[Any, str] = {
    **dict.fromkeys((D.TINYINT, D.SMALLINT, D.INT, D.BIGINT, D.UTINYINT, D.USMALLINT, D.UINT), "int"),
    **dict.fromkeys((D.DECIMAL, D.BIGDECIMAL, D.INT128, D.UINT128, D.UBIGINT, D.MONEY), "numeric"),
    **dict.fromkeys((D.DOUBLE, D.FLOAT), "float"),
    **dict.fromkeys((D.TEXT, D.VARCHAR, D.CHAR, D.NCHAR, D.NVARCHAR), "text"),
    **dict.fromkeys(
        (D.DATE, D.DATETIME, D.TIMESTAMP, D.TIMESTAMPTZ, D.TIMESTAMPLTZ, D.TIMESTAMPNTZ, D.INTERVAL), "time"
    ),
}
SMALL_INTS = (D.TINYINT, D.SMALLINT, D.INT, D.UTINYINT, D.USMALLINT)


def kind_of(datatype: exp.DataType | None) -> str:
    if datatype is None:
        return "unknown"
    return _KINDS.get(datatype.this, "unknown")


def _annotate_div(self: Any, e: exp.Div) -> exp.Expr:
    kinds = {kind_of(e.this.type), kind_of(e.expression.type)}
    if kinds == {"int"}:
        return self._annotate_by_args(e, "this", "expression")
    if "unknown" in kinds or "text" in kinds or "time" in kinds:
        return self._set_type(e, D.UNKNOWN)
    return self._set_type(e, D.DOUBLE if "float" in kinds else D.DECIMAL)


def _annotate_avg(self: Any, e: exp.Avg) -> exp.Expr:
    kind = kind_of(aggregated(e).type)
    return self._set_type(e, {"int": D.DECIMAL, "numeric": D.DECIMAL, "float": D.DOUBLE}.get(kind, D.UNKNOWN))


def _annotate_sum(self: Any, e: exp.Sum) -> exp.Expr:
    source = aggregated(e).type
    kind = kind_of(source)
    if kind == "int":
        return self._set_type(e, D.BIGINT if source is not None and source.this in SMALL_INTS else D.DECIMAL)
    return self._set_type(e, {"numeric": D.DECIMAL, "float": D.DOUBLE}.get(kind, D.UNKNOWN))


def _annotate_extract(self: Any, e: exp.Extract) -> exp.Expr:
    return self._set_type(e, D.DECIMAL)  # numeric since PostgreSQL 14


def _annotate_literal(self: Any, e: exp.Literal) -> exp.Expr:
    if e.is_string:
        return self._set_type(e, D.VARCHAR)
    if re.fullmatch(r"\d+", e.this):  # int4, int8, else numeric, as PostgreSQL types a constant
        value = int(e.this)
        return self._set_type(e, D.INT if value < 2**31 else D.BIGINT if value < 2**63 else D.DECIMAL)
    return self._set_type(e, D.DECIMAL)  # 1.5, 1e-10: numeric


_TIMESTAMPS = (D.TIMESTAMP, D.TIMESTAMPTZ, D.DATETIME)


def _annotate_within_group(self: Any, e: exp.WithinGroup) -> exp.Expr:
    """``percentile_cont(f) WITHIN GROUP (ORDER BY x)`` of intervals (``x`` one, or a difference
    of timestamps, which sqlglot types a timestamp) is an interval (an interval[] of an array f)."""
    value = aggregated(e)
    while isinstance(value, exp.Paren):
        value = value.this
    typed = value.type
    interval = typed is not None and typed.this == D.INTERVAL
    if isinstance(value, exp.Sub):
        sides = (value.this.type, value.expression.type)
        interval = interval or all(t is not None and t.this in _TIMESTAMPS for t in sides)
    if not (interval and isinstance(e.this, exp.PercentileCont)):
        return TypeAnnotator._annotate_within_group(self, e)
    if isinstance(e.this.this, exp.Array):
        return self._set_type(e, exp.DataType.build("INTERVAL[]"))
    return self._set_type(e, D.INTERVAL)


_METADATA = {
    **EXPRESSION_METADATA,
    exp.WithinGroup: {"annotator": _annotate_within_group},
    exp.Div: {"annotator": _annotate_div},
    exp.Avg: {"annotator": _annotate_avg},
    exp.Sum: {"annotator": _annotate_sum},
    exp.Literal: {"annotator": _annotate_literal},
    exp.Extract: {"annotator": _annotate_extract},
}


def aggregated(node: exp.Expr) -> exp.Expr:
    """What an aggregate reads: ``x`` of ``avg(x)`` and of ``avg(DISTINCT x)``."""
    this = node.this
    if (
        isinstance(node, exp.WithinGroup)
        and isinstance(node.expression, exp.Order)
        and node.expression.expressions
    ):
        return node.expression.expressions[0].this  # percentile_cont(f) WITHIN GROUP (ORDER BY x): x
    if isinstance(this, exp.Distinct) and this.expressions:
        return this.expressions[0]
    return this


def under_wrappers(node: exp.Expr) -> tuple[exp.Expr, Callable[[exp.Expr], exp.Expr]]:
    """The aggregate call under ``node``'s FILTER and OVER, and a function that puts an
    expression under copies of those same wrappers (an aggregate rewritten into others over the
    same rows and frame)."""
    chain, agg = [], node
    while isinstance(agg, exp.Filter | exp.Window):
        chain.append(agg)
        agg = agg.this

    def rewrap(inner: exp.Expr) -> exp.Expr:
        for wrapper in reversed(chain):
            copy = wrapper.copy()
            copy.set("this", inner)
            inner = copy
        return inner

    return agg, rewrap


def _typed_parameters(tree: exp.Expr, parameters: tuple[str | None, ...]) -> None:
    """Each ``$n`` of a known type as a NULL of that type (keeping its id): typed as it."""
    for parameter in list(tree.find_all(exp.Parameter)):
        number = parameter.this.name if isinstance(parameter.this, exp.Literal) else ""
        index = int(number) - 1 if number.isdigit() else -1
        if 0 <= index < len(parameters) and parameters[index] is not None:
            typed = exp.cast(exp.Null(), exp.DataType.build(str(parameters[index])))
            typed.meta.update(parameter.meta)
            parameter.replace(typed)


def types(
    tree: exp.Expr, schema: Schema, typed: tuple[type[exp.Expr], ...], parameters: tuple[str | None, ...] = ()
) -> dict[int, exp.DataType]:
    """The PostgreSQL types of the nodes the rewrite reads (those of ``typed`` and their operands),
    by the id put in their ``meta``; annotated on a qualified copy, the statement itself unchanged.
    ``parameters``: the type of each ``$n`` the client sent (``DECIMAL`` for psycopg's Decimal)."""
    count = 0
    for node in tree.find_all(*typed):
        reads = aggregated(node) if isinstance(node, exp.Avg | exp.Sum | exp.WithinGroup) else node
        for part in (node, *node.iter_expressions(), reads):
            if ID not in part.meta:
                part.meta[ID] = count = count + 1
    if not count:
        return {}
    copy = tree.copy()
    if parameters:
        _typed_parameters(copy, parameters)
    mapping = schema.mapping()
    try:
        copy = qualify(copy, schema=mapping, dialect="postgres", validate_qualify_columns=False,
                       quote_identifiers=False, identify=False)  # fmt: skip
    except SqlglotError:
        log.debug("not qualified; types of literals and casts only", exc_info=True)
    try:
        annotate_types(copy, schema=mapping, expression_metadata=_METADATA, dialect="postgres")
    except (SqlglotError, ValueError, KeyError, AttributeError):
        log.debug("not annotated", exc_info=True)
        return {}
    return {node.meta[ID]: node.type for node in copy.walk() if ID in node.meta and node.type is not None}


# -- set operations ------------------------------------------------------------------------------
def set_branches(node: exp.Expr) -> list[exp.Select] | None:
    """The SELECTs of a set operation, left to right; None when one is not a SELECT."""
    while isinstance(node, exp.Subquery | exp.Paren):
        node = node.this
    if isinstance(node, exp.SetOperation):
        left, right = set_branches(node.this), set_branches(node.expression)
        return None if left is None or right is None else left + right
    return [node] if isinstance(node, exp.Select) else None


def removes_duplicates(node: exp.Expr) -> bool:
    """Whether a set operation (or one inside it) removes duplicates (UNION, not UNION ALL)."""
    return any(op.args.get("distinct") for op in node.find_all(exp.SetOperation))
