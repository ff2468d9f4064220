"""PostgreSQL's answers, not DuckDB's: a client's query, parsed as PostgreSQL, rewritten so that
DuckDB computes what PostgreSQL would.

A BI tool writes PostgreSQL SQL; run as DuckDB reads it, the same text gives other numbers
(``10/4`` was 2.5, ``'3.14159'::numeric`` 3.142, ``1/0`` Infinity). The rewrite runs inside
:func:`pitstop.server.pgcatalog.translate`, on the statement sqlglot parsed, before the catalog's:

1. types: PostgreSQL's, of each part the rewrite reads (:mod:`pitstop.server.pgkinds`: sqlglot
   annotates a qualified copy, given the sink tables' columns);
2. numbers whose scale PostgreSQL chooses per row (quotients, ``avg``, ``::numeric``,
   ``coalesce``/``greatest`` of numerics) are computed as PostgreSQL's text
   (:mod:`pitstop.server.pgnumtext`); a result column of the outermost SELECT that is such a
   value is sent as that text, typed numeric (:attr:`Translation.numeric_columns`);
3. functions and operators whose DuckDB namesakes answer otherwise (:mod:`pitstop.server.pgfunctions`),
   casts to character types and ``format`` (:mod:`pitstop.server.pgtext`), float8 aggregates that
   may overflow (:mod:`pitstop.server.pgfloat8`);
4. ``to_char`` follows PostgreSQL's template patterns (:mod:`pitstop.server.pgtochar`, and
   :func:`~pitstop.server.pgnumeric.to_char_number` for numbers);
5. the parser is PostgreSQL's, stricter than sqlglot's (:mod:`pitstop.server.pgparser`).

A division whose operands' types are not known here goes through the macro ``pgs_div``, created
under DuckDB's ``integer_division`` (:func:`prepare`; the client's SQL itself is parsed apart, by
``duckdb.extract_statements``, and does not see it), so that integers divide as integers, and that
refuses an operand DuckDB types DECIMAL or HUGEINT: an error says to cast it, rather than a float
where PostgreSQL gives a numeric.

Known gaps: the display scale of other expressions over a quotient (``abs(avg(x))``) is 24 there,
PostgreSQL's varies per row; a volatile divisor (``random()``) is evaluated twice; an operand of
unknown type that is an interval (``age(ts) / 2``) is refused by DuckDB's binder (no ``//`` for
intervals).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
from duckdb.func import FunctionNullHandling, PythonUDFType
from sqlglot import exp

from pitstop.server import (
    pgfloat8,
    pgfunctions,
    pgkinds,
    pgmath,
    pgmodifiers,
    pgnumeric,
    pgnumtext,
    pgtext,
    pgtochar,
    pgtypes,
)
from pitstop.server.pgkinds import NO_SCHEMA, Schema, read_schema, schema_of
from pitstop.server.pgnumtext import TEXT, TEXT_SCALE, as_text, call, fitted, numeric_text
from pitstop.server.pgparser import PgError, StrictParser
from pitstop.server.pgtypes import PgType

__all__ = [
    "NO_SCHEMA",
    "PgError",
    "Schema",
    "StrictParser",
    "Translation",
    "Applied",
    "apply",
    "prepare",
    "read_schema",
    "schema_of",
]

log = logging.getLogger(__name__)

_VARCHAR = duckdb.sqltype("VARCHAR")
_BOOLEAN = duckdb.sqltype("BOOLEAN")
_DOUBLE = duckdb.sqltype("DOUBLE")
_UDFS: tuple[tuple[str, Callable[..., Any], list[Any], Any], ...] = (
    ("pgs_numeric_div", pgnumeric.numeric_div, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_in", pgnumeric.numeric_in, [_VARCHAR], _VARCHAR),
    ("pgs_numeric_mul", pgnumeric.numeric_mul, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_add", pgnumeric.numeric_add, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_sub", pgnumeric.numeric_sub, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_sqrt", pgmath.numeric_sqrt, [_VARCHAR], _VARCHAR),
    ("pgs_numeric_exp", pgmath.numeric_exp, [_VARCHAR], _VARCHAR),
    ("pgs_numeric_ln", pgmath.numeric_ln, [_VARCHAR], _VARCHAR),
    ("pgs_numeric_log", pgmath.numeric_log, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_power", pgmath.numeric_power, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_float_numeric", pgnumeric.float_numeric, [duckdb.sqltype("DOUBLE")], _VARCHAR),
    ("pgs_float_text", pgnumeric.float_text, [duckdb.sqltype("DOUBLE")], _VARCHAR),
    (
        "pgs_float8_spread",
        pgfloat8.float8_spread,
        [duckdb.list_type(duckdb.sqltype("DOUBLE")), _VARCHAR],
        _VARCHAR,
    ),
    ("pgs_to_char_number", pgnumeric.to_char_number, [_VARCHAR, _VARCHAR, _BOOLEAN], _VARCHAR),
    ("pgs_tz_abbrev", pgtochar.zone_abbreviation, [duckdb.sqltype("TIMESTAMPTZ"), _VARCHAR], _VARCHAR),
)
_RETURNS_NULL = frozenset({"pgs_float8_spread"})
"""Functions that may return NULL (DuckDB refuses a NULL from a function of default null handling)."""
_MACROS = f"""
SET integer_division = true;
CREATE OR REPLACE TEMP MACRO pgs_nonzero(b) AS
    CASE WHEN b = 0 THEN error('SQLSTATE 22012: division by zero') ELSE b END;
CREATE OR REPLACE TEMP MACRO pgs_div(a, b) AS CASE
    WHEN regexp_matches(typeof(a) || ' ' || typeof(b), 'DECIMAL|HUGEINT|UBIGINT|BIGNUM|VARINT')
    THEN error('SQLSTATE 0A000: pitstop cannot tell the type of ' || typeof(a) || ' / ' || typeof(b)
               || ' here, and DuckDB would divide it as float where PostgreSQL gives numeric; cast '
               || 'the operands (::numeric or ::float8)')
    ELSE a / pgs_nonzero(b) END;
CREATE OR REPLACE TEMP MACRO pgs_fit(t) AS CASE
    WHEN length(split_part(t, '.', 2)) > {TEXT_SCALE}
         OR length(ltrim(split_part(t, '.', 1), '-')) > {38 - TEXT_SCALE}
    THEN error('SQLSTATE 22003: the numeric ' || t || ' is used in an expression, where pitstop holds '
               || 'numeric(38,{TEXT_SCALE}); round it (round(x, n)) or cast it (::float8)')
    ELSE CAST(t AS DECIMAL(38, {TEXT_SCALE})) END;
{pgfunctions.PERCENTILE_MACRO}"""


def prepare(cursor: duckdb.DuckDBPyConnection) -> None:
    """Set up a client's DuckDB connection: integer division, the macros the rewrite calls, and
    (once per database: DuckDB keeps Python functions database-wide) the functions of
    :mod:`pitstop.server.pgnumeric`."""
    cursor.execute(_MACROS)
    for name, function, parameters, returns in _UDFS:
        nulls = FunctionNullHandling.SPECIAL if name in _RETURNS_NULL else FunctionNullHandling.DEFAULT
        try:
            cursor.create_function(name, function, parameters, returns, null_handling=nulls)
        except duckdb.CatalogException:  # registered by an earlier client
            return
    for name, function in pgfloat8.ARITHMETIC.items():
        cursor.create_function(name, function, [_DOUBLE, _DOUBLE], _DOUBLE, type=PythonUDFType.ARROW)


D = exp.DType
_TYPED = (exp.Div, exp.Avg, exp.Sum, exp.Cast, exp.Anonymous, exp.Coalesce, exp.If, exp.Case, exp.Extract,
          exp.WithinGroup, exp.Sub, exp.Add, exp.Mul, exp.Round, exp.Sign, exp.Stddev, exp.StddevPop,
          exp.StddevSamp, exp.Variance, exp.VariancePop, exp.Greatest, exp.Least, exp.Format,
          exp.Exp, exp.Sqrt, exp.Ln, exp.Log, exp.Pow)  # fmt: skip


# -- the rewrite -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Translation:
    """A client's statement as DuckDB SQL, and which of its result columns are numeric texts."""

    sql: str
    numeric_columns: frozenset[int] = field(default_factory=frozenset)
    """0-based indexes of result columns that DuckDB returns as text and the client must be told
    are numeric (PostgreSQL's per-value scale: :mod:`pitstop.server.pgnumeric`)."""
    column_types: dict[int, PgType] = field(default_factory=dict)
    """Result columns that DuckDB returns as text and the client must be told are of another
    PostgreSQL type, by 0-based index: ``varchar(n)``, ``bpchar`` (:mod:`pitstop.server.pgtext`);
    and columns DuckDB types right that have a type modifier it has not: ``timestamp(0)``
    (:mod:`pitstop.server.pgmodifiers`)."""
    declared: frozenset[int] | None = None
    """0-based indexes of the result columns that keep the precision and scale of DuckDB's
    DECIMAL(p,s) (a table's column, a cast to numeric(p,s)); the others are described as an
    unconstrained numeric, as PostgreSQL describes them (:mod:`pitstop.server.pgmodifiers`).
    None: not known, every column keeps DuckDB's."""


@dataclass(frozen=True)
class Applied:
    """What :func:`apply` gives: the rewritten statement and what its result columns are."""

    tree: exp.Expr
    numeric_columns: frozenset[int] = frozenset()
    column_types: dict[int, PgType] = field(default_factory=dict)
    declared: frozenset[int] | None = None


@dataclass(frozen=True)
class _Context:
    types: dict[int, exp.DataType]
    root: exp.Expr
    columns: dict[str, exp.DataType] = field(default_factory=dict)
    """The types of the statement's columns by their text: a column sqlglot left untyped (one the
    qualified copy replaced, in an ORDER BY that repeats a result column) is typed as the same
    column elsewhere."""

    def type(self, node: exp.Expr) -> exp.DataType | None:
        found = self.types.get(node.meta.get(pgkinds.ID, -1))
        if found is None and isinstance(node, exp.Column):
            return self.columns.get(node.sql())
        if found is None and isinstance(node, exp.Cast):  # one the rewrite made: its type
            return node.to
        return found

    def kind(self, node: exp.Expr) -> str:
        return "numeric" if node.meta.get(TEXT) else pgkinds.kind_of(self.type(node))

    def is_result(self, node: exp.Expr) -> bool:
        """Whether ``node`` is a result column of the outermost SELECT (kept as numeric text)."""
        parent = node.parent
        if isinstance(parent, exp.Alias):
            node, parent = parent, parent.parent
        return parent is self.root and node.arg_key == "expressions"


def _duckdb(sql: str) -> exp.Expr:
    parsed: exp.Expr = exp.maybe_parse(sql, dialect="duckdb")
    return parsed


def _to_char(node: exp.Anonymous, ctx: _Context) -> exp.Expr | None:
    if str(node.this).lower() != "to_char" or len(node.expressions) != 2:
        return None
    value, pattern = node.expressions
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise PgError(
            "0A000", "pitstop's to_char needs its pattern as a literal ('YYYY-MM-DD', 'FM999G999D99')"
        )
    kind = ctx.kind(value)
    number = pgnumeric.is_number_pattern(pattern.name)
    if kind in ("int", "numeric", "float") or (kind == "unknown" and number):
        if not number:
            raise PgError(
                "0A000",
                f'pitstop\'s to_char of a number does not know the pattern "{pattern.name}": '
                f"it formats {pgnumeric.NUMBER_PATTERN_HELP}",
            )
        is_float = exp.Boolean(this=kind == "float")
        return call("pgs_to_char_number", as_text(value), pattern.copy(), is_float)
    return pgtochar.to_char_time(fitted(value), pattern.name, _duckdb)


def _anonymous(node: exp.Anonymous, ctx: _Context) -> exp.Expr | None:
    name = str(node.this).lower()
    if name == "to_char":
        return _to_char(node, ctx)
    if name == "date_part":
        return pgfunctions.date_part(node, ctx)
    if name == "pg_typeof" and len(node.expressions) == 1:
        return _pg_typeof(node.expressions[0], ctx)
    if name == "log10" and len(node.expressions) == 1 and ctx.kind(node.expressions[0]) == "numeric":
        ten = exp.Literal.string("10")  # log10(numeric) is log(10, x), a numeric (pgmath)
        return numeric_text(call("pgs_numeric_log", ten, as_text(node.expressions[0])))
    return pgfunctions.int4_gcd(node, ctx)


_DESCRIBED_AS = {"INT": "INTEGER", "TEXT": "VARCHAR", "DECIMAL": "DECIMAL(18,3)", "REAL": "FLOAT",
                 "TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE"}  # fmt: skip
"""sqlglot's DuckDB type names that DuckDB's result descriptions write otherwise."""


def _pg_typeof(value: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``pg_typeof(x)``: PostgreSQL's name of x's type (``numeric``, not DuckDB's ``decimal(2,1)``),
    a ``regtype``."""
    datatype = ctx.type(value)
    if value.meta.get(TEXT):  # a numeric held as its text
        datatype = exp.DataType.build("DECIMAL")
    elif isinstance(value, exp.CurrentTimestamp):  # now(): sqlglot types it as a timestamp
        datatype = exp.DataType.build("TIMESTAMPTZ")
    if datatype is None:
        return None
    written = datatype.sql(dialect="duckdb").upper()
    pgtype = pgtypes.pg_type_by_oid(pgtypes.pg_type_of(_DESCRIBED_AS.get(written, written)).oid)
    named = exp.Literal.string(pgtype.format_type)
    named.meta[pgtext.DESCRIBED] = pgtypes.REGTYPE
    return named


def _values_as_select(tree: exp.Expr) -> exp.Expr:
    """``SELECT * FROM (VALUES ...) v(a, b)`` as the SELECT of ``a, b``: its columns are then typed
    and written as any SELECT's (a numeric column of ``(1.5), (2)`` is 1.5 and 2)."""
    if (
        isinstance(tree, exp.Select)
        and len(tree.expressions) == 1
        and isinstance(tree.expressions[0], exp.Star)
    ):
        source = tree.args.get("from_")
        rows = source.this if source is not None else None
        alias = rows.args.get("alias") if isinstance(rows, exp.Values) else None
        if alias is not None and alias.columns and not tree.args.get("joins"):
            tree.set("expressions", [exp.column(c.copy()) for c in alias.columns])
    return tree


def _window(node: exp.Window, ctx: _Context) -> exp.Expr | None:
    return pgfunctions.ntile(node) or _aggregate(node, ctx)


def _aggregate(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    return pgnumtext.aggregate(node, ctx) or pgfloat8.aggregate(node, ctx)


def _spread(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    return pgfunctions.spread(node, ctx) or pgfloat8.aggregate(node, ctx)


def _cast(node: exp.Cast, ctx: _Context) -> exp.Expr | None:
    result = ctx.is_result(node) or bool(node.meta.get(pgtext.PADDED))
    return (
        pgtext.char_cast(node, ctx, result) or pgnumtext.cast(node, ctx) or pgfunctions.time_precision(node)
    )


def _arithmetic(node: exp.Add | exp.Sub | exp.Mul, ctx: _Context) -> exp.Expr | None:
    pgfunctions.typed_null(node, ctx)
    pgfunctions.widened_real(node, ctx)
    if isinstance(node, exp.Mul):
        times = pgfunctions.interval_times(node, ctx)
        if times is not None:
            return times
    return pgnumtext.arithmetic(node, ctx) or pgfloat8.checked(node, ctx)


def _div(node: exp.Div, ctx: _Context) -> exp.Expr | None:
    pgfunctions.typed_null(node, ctx)
    pgfunctions.widened_real(node, ctx)
    return pgfloat8.checked(node, ctx) or pgnumtext.div(node, ctx)


_REWRITES: dict[type[exp.Expr], Callable[[Any, _Context], exp.Expr | None]] = {
    exp.Div: _div,
    exp.Avg: _aggregate,
    exp.Sum: _aggregate,
    exp.Filter: _aggregate,
    exp.Window: _window,
    exp.Cast: _cast,
    exp.Literal: pgnumtext.exponent_literal,
    exp.Anonymous: _anonymous,
    exp.Extract: lambda node, ctx: pgnumtext.julian(node, ctx) or pgfunctions.extract(node, ctx),
    exp.WithinGroup: pgfunctions.percentile_cont,
    exp.Length: pgfunctions.int4_result,
    exp.StrPosition: pgfunctions.int4_result,
    exp.Sub: _arithmetic,
    exp.Add: _arithmetic,
    exp.Mul: _arithmetic,
    exp.Like: pgfunctions.like,
    exp.ILike: pgfunctions.like,
    exp.Round: pgfunctions.round_float,
    exp.Substring: pgfunctions.regex_substring,
    **dict.fromkeys(
        (exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop),
        _spread,
    ),
    exp.Sign: pgfunctions.sign,
    exp.Paren: pgnumtext.paren,
    exp.Coalesce: pgnumtext.coalesce,
    exp.If: pgnumtext.when,
    exp.Case: pgnumtext.case,
    exp.Greatest: pgnumtext.extreme,
    exp.Least: pgnumtext.extreme,
    exp.Format: pgtext.format_text,
    exp.Exp: lambda node, ctx: pgfunctions.exponential(node, ctx) or pgnumtext.math(node, ctx),
    **dict.fromkeys((exp.Sqrt, exp.Ln, exp.Log, exp.Pow), pgnumtext.math),
}


def _rewrite(node: exp.Expr, ctx: _Context) -> exp.Expr:
    """Bottom-up: a node's children are rewritten before the node is."""
    for child in list(node.iter_expressions()):
        new = _rewrite(child, ctx)
        if new is not child:
            if pgkinds.ID in child.meta and pgkinds.ID not in new.meta:  # typed as the original
                new.meta[pgkinds.ID] = child.meta[pgkinds.ID]
            child.replace(new)
    handler = _REWRITES.get(type(node))
    try:
        result = handler(node, ctx) if handler else None
    except pgfunctions.Refused as exc:
        raise PgError(exc.code, exc.message) from None
    if result is not None:
        return result
    for child in list(node.iter_expressions()):
        if child.meta.get(TEXT) and not ctx.is_result(child):
            child.replace(fitted(child.copy()))
    return node


def _numeric_columns(tree: exp.Expr) -> frozenset[int]:
    """The outermost SELECT's result columns that stay numeric texts; an ORDER BY that names one
    (by alias or position) sorts by its value."""
    if not isinstance(tree, exp.Select):
        return frozenset()
    found: dict[int, exp.Expr] = {}
    names: dict[str, int] = {}
    order = tree.args.get("order")
    ordered_by = order.expressions if isinstance(order, exp.Order) else []
    plain = not (tree.args.get("distinct") and ordered_by)  # (DISTINCT sorts by its columns only)
    for index, projection in enumerate(tree.expressions):
        if isinstance(projection, exp.Star) or isinstance(projection.this, exp.Star):
            plain = False  # the columns' positions are not known here
        target = projection.this if isinstance(projection, exp.Alias) else projection
        if target.meta.get(TEXT):
            if not plain:
                target.replace(fitted(target.copy()))
                continue
            found[index] = target
            names[projection.alias_or_name.lower()] = index
    for ordered in ordered_by:
        key = ordered.this
        named: int | None = None
        if isinstance(key, exp.Column) and not key.table:
            named = names.get(key.name.lower())
        elif isinstance(key, exp.Literal) and key.is_int:
            named = int(key.name) - 1
        if named is not None and named in found:
            key.replace(fitted(numeric_text(found[named].copy())))
    return frozenset(found)


def _column_types(tree: exp.Expr) -> dict[int, PgType]:
    """The outermost SELECT's result columns described otherwise than DuckDB's type says
    (:data:`pitstop.server.pgtext.DESCRIBED`)."""
    if not isinstance(tree, exp.Select):
        return {}
    found: dict[int, PgType] = {}
    for index, projection in enumerate(tree.expressions):
        if isinstance(projection, exp.Star) or isinstance(projection.this, exp.Star):
            return {}  # the columns' positions are not known here
        target = projection.this if isinstance(projection, exp.Alias) else projection
        described = target.meta.get(pgtext.DESCRIBED)
        if described is not None:
            found[index] = described
    return found


_FALLIBLE = (D.TINYINT, D.SMALLINT, D.INT, D.BIGINT, D.DECIMAL, D.DOUBLE, D.FLOAT, D.DATE, D.TIMESTAMP,
             D.TIMESTAMPTZ, D.BOOLEAN)  # fmt: skip
_CLIENT_CAST = "pgs_client_cast"  # meta flag: a cast the client wrote, that can fail


def _client_casts(tree: exp.Expr) -> bool:
    """Flag the casts that can fail in the outermost SELECT's result columns (before the rewrite,
    which makes casts of its own); whether there are any."""
    if not isinstance(tree, exp.Select):
        return False
    found = False
    for projection in tree.expressions:
        for cast in projection.find_all(exp.Cast):
            if cast.to.this in _FALLIBLE and not isinstance(cast.this, exp.Literal | exp.Null):
                if cast.find_ancestor(exp.Select) is tree:  # (not a subquery's)
                    cast.meta[_CLIENT_CAST] = found = True
    return found


def _casts_before_limit(tree: exp.Expr) -> None:
    """``SELECT revenue::int ... ORDER BY ts LIMIT 12``: PostgreSQL computes the result columns of
    every row (every group) before it sorts, and fails on a value out of range in any; DuckDB
    computes them for the rows it returns only, and answers. A result column with a cast the
    client wrote that can fail (:func:`_client_casts`) is made a last sort key that sorts nothing
    (``hash(column) * 0``): DuckDB then computes it on every row, as PostgreSQL does."""
    order, limit = tree.args.get("order"), tree.args.get("limit") or tree.args.get("fetch")
    if not isinstance(tree, exp.Select) or not isinstance(order, exp.Order) or limit is None:
        return
    if tree.args.get("distinct"):  # (DISTINCT sorts by its result columns only)
        return
    for projection in tree.expressions:
        target = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(projection, exp.Subquery) or not any(
            c.meta.get(_CLIENT_CAST) and c.find_ancestor(exp.Select) is tree
            for c in target.find_all(exp.Cast)
        ):
            continue
        key = exp.Mul(this=call("hash", target.copy()), expression=exp.Literal.number(0))
        order.append("expressions", exp.Ordered(this=key))


def _small_parameters(tree: exp.Expr, parameters: tuple[str | None, ...]) -> None:
    """A ``$n`` the client declared int2 (psycopg declares a small int so) is a SMALLINT for
    DuckDB too, which would make it an INTEGER: ``$1 / $2`` is int2, ``$1 * $2`` of 30000 and
    30000 out of its range, as PostgreSQL computes them."""
    for parameter in list(tree.find_all(exp.Parameter)):
        number = parameter.this.name if isinstance(parameter.this, exp.Literal) else ""
        index = int(number) - 1 if number.isdigit() else -1
        if 0 <= index < len(parameters) and parameters[index] == "SMALLINT":
            if not isinstance(parameter.parent, exp.Cast):
                parameter.replace(exp.cast(parameter.copy(), exp.DataType.build("SMALLINT")))


def _rewritten(node: exp.Expr) -> bool:
    """Whether the rewrite may change ``node`` (a constant only when it has an exponent: most
    statements have constants, and most need no types)."""
    return not isinstance(node, exp.Literal) or (not node.is_string and "e" in node.name.lower())


def apply(tree: exp.Expr, schema: Schema, parameters: tuple[str | None, ...] = ()) -> Applied:
    """Rewrite a parsed statement to PostgreSQL's semantics: the rewritten tree and what its result
    columns are. ``parameters``: the type of each ``$n`` (``DECIMAL``, ``BIGINT``...; None: not
    known). Raises PgError for what pitstop refuses."""
    tree = _values_as_select(tree)
    _small_parameters(tree, parameters)
    declared = pgmodifiers.declared_columns(tree, {t: dict(c) for t, c in schema.tables})
    try:
        times = {
            **pgmodifiers.time_precisions(tree),
            **pgtext.set_operation_chars(tree),
            **pgtext.referenced_chars(tree),
        }
    except pgfunctions.Refused as exc:
        raise PgError(exc.code, exc.message) from None
    texts = pgnumtext.values_texts(tree)
    union = pgnumtext.union_texts(tree)
    if not texts and not any(_rewritten(node) for node in tree.find_all(*_REWRITES)):
        return Applied(tree, union, column_types=times, declared=declared)
    types = pgkinds.types(tree, schema, _TYPED, parameters)
    columns: dict[str, exp.DataType] = {}
    for column in tree.find_all(exp.Column):
        found = types.get(column.meta.get(pgkinds.ID, -1))
        if found is not None:
            columns.setdefault(column.sql(), found)
    ctx = _Context(types, tree, columns)
    may_fail = _client_casts(tree)
    tree = _rewrite(tree, ctx)
    numeric = _numeric_columns(tree) | union
    if may_fail:
        _casts_before_limit(tree)
    return Applied(tree, numeric, {**times, **_column_types(tree)}, declared)
