"""PostgreSQL's answers, not DuckDB's: a client's query, parsed as PostgreSQL, rewritten so that
DuckDB computes what PostgreSQL would.

A BI tool writes PostgreSQL SQL; run as DuckDB reads it, the same text gives other numbers
(``10/4`` was 2.5, ``'3.14159'::numeric`` 3.142, ``1/0`` Infinity). The rewrite runs inside
:func:`pitstop.server.pgcatalog.translate`, on the statement sqlglot parsed, before the catalog's:

1. types: PostgreSQL's, of each part the rewrite reads (:mod:`pitstop.server.pgkinds`: sqlglot
   annotates a qualified copy, given the sink tables' columns);
2. division: integer / integer is DuckDB's ``//``, which truncates toward zero as PostgreSQL does
   (its "Division by zero" error is mapped to 22012 in :mod:`~pitstop.server.sqlstate`); a float
   division checks its divisor (``division by zero``, 22012, as PostgreSQL); numeric / numeric is
   PostgreSQL's numeric division (:func:`pitstop.server.pgnumeric.numeric_div`); interval and date
   divisions are DuckDB's; a division whose operands' types are not known here goes through the
   macro ``pgs_div``, created under DuckDB's ``integer_division`` (:func:`prepare`; the client's
   SQL itself is parsed apart, by ``duckdb.extract_statements``, and does not see it), so that
   integers divide as integers, and that refuses an operand DuckDB types DECIMAL or HUGEINT: an
   error says to cast it, rather than a float where PostgreSQL gives a numeric;
3. ``avg`` of integers or numerics is ``sum / count`` in numeric division (PostgreSQL's
   ``numeric_avg``); ``sum`` of int2/int4 is int8;
4. ``::numeric`` without precision keeps the value's own scale: a literal becomes a DECIMAL of its
   digits, anything else goes through :func:`~pitstop.server.pgnumeric.numeric_in`;
5. ``to_char`` follows PostgreSQL's template patterns (:mod:`pitstop.server.pgtochar`, and
   :func:`~pitstop.server.pgnumeric.to_char_number` for numbers);
6. a list with an empty item (``SELECT region,, revenue``) is a syntax error at the comma's
   position, as PostgreSQL says it (sqlglot would skip it).

Numeric texts. A value whose scale PostgreSQL chooses per row (a quotient, ``text::numeric``) is
computed as PostgreSQL's text. A result column of the outermost SELECT that is such a value is sent
as that text, typed numeric (:attr:`Translation.numeric_columns`); anywhere else it is read as
``DECIMAL(38, 24)`` (the same number; an error, not a rounded one, when it has more than 24
decimals or 14 integer digits). ``+``, ``-`` and ``*`` of such a text and an integer or a numeric
(``avg(x) * 100``) are computed on the texts too, exactly, at PostgreSQL's scale
(:func:`~pitstop.server.pgnumeric.numeric_mul`). Known gaps: the display scale of other
expressions over a quotient (``abs(avg(x))``, ``greatest(avg(x), 0)``) is 24 there,
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
from sqlglot import exp
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokens import TokenType

from pitstop.server import pgfunctions, pgkinds, pgnumeric, pgtochar
from pitstop.server.pgkinds import NO_SCHEMA, Schema, read_schema, schema_of

__all__ = [
    "NO_SCHEMA",
    "PgError",
    "Schema",
    "StrictParser",
    "Translation",
    "apply",
    "prepare",
    "read_schema",
    "schema_of",
]

log = logging.getLogger(__name__)

SYNTAX_ERROR = "42601"
TEXT_SCALE = 24
"""Decimals of a numeric text read inside an expression: DECIMAL(38, 24)."""
_VARCHAR = duckdb.sqltype("VARCHAR")
_BOOLEAN = duckdb.sqltype("BOOLEAN")
_UDFS: tuple[tuple[str, Callable[..., Any], list[Any], Any], ...] = (
    ("pgs_numeric_div", pgnumeric.numeric_div, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_in", pgnumeric.numeric_in, [_VARCHAR], _VARCHAR),
    ("pgs_numeric_mul", pgnumeric.numeric_mul, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_add", pgnumeric.numeric_add, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_numeric_sub", pgnumeric.numeric_sub, [_VARCHAR, _VARCHAR], _VARCHAR),
    ("pgs_float_numeric", pgnumeric.float_numeric, [duckdb.sqltype("DOUBLE")], _VARCHAR),
    ("pgs_float_text", pgnumeric.float_text, [duckdb.sqltype("DOUBLE")], _VARCHAR),
    ("pgs_to_char_number", pgnumeric.to_char_number, [_VARCHAR, _VARCHAR, _BOOLEAN], _VARCHAR),
    ("pgs_tz_abbrev", pgtochar.zone_abbreviation, [duckdb.sqltype("TIMESTAMPTZ"), _VARCHAR], _VARCHAR),
)
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
        try:
            cursor.create_function(name, function, parameters, returns)
        except duckdb.CatalogException:  # registered by an earlier client
            return


_TEXT = "pgs_text"  # meta flag: the node's value is a numeric text
D = exp.DType
_TYPED = (exp.Div, exp.Avg, exp.Sum, exp.Cast, exp.Anonymous, exp.Coalesce, exp.If, exp.Case, exp.Extract,
          exp.WithinGroup, exp.Sub, exp.Add, exp.Mul, exp.Round, exp.Sign, exp.Stddev, exp.StddevPop,
          exp.StddevSamp, exp.Variance, exp.VariancePop)  # fmt: skip


# -- parsing ---------------------------------------------------------------------------------------
class PgError(Exception):
    """A statement pitstop refuses before it runs, as PostgreSQL would say it: SQLSTATE, message
    and 1-based position in the text parsed (0: none)."""

    def __init__(self, code: str, message: str, position: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.position = position


class StrictParser(PostgresParser):
    """PostgreSQL's parser, stricter where sqlglot forgives what PostgreSQL refuses, and with
    ``to_char`` kept as written (sqlglot turns its pattern into strftime's, losing ``Mon``)."""

    FUNCTIONS = {
        **PostgresParser.FUNCTIONS,
        "TO_CHAR": lambda args: exp.Anonymous(this="to_char", expressions=args),
        "DATE_PART": lambda args: exp.Anonymous(this="date_part", expressions=args),  # not extract's type
    }
    FUNCTION_PARSERS = {name: f for name, f in PostgresParser.FUNCTION_PARSERS.items() if name != "DATE_PART"}

    def _parse_csv(self, parse_method: Callable[[], Any], sep: TokenType = TokenType.COMMA) -> list[Any]:
        items = []
        parse_result = parse_method()
        if parse_result is not None:
            items.append(parse_result)
        while self._match(sep):
            if isinstance(parse_result, exp.Expr):
                self._add_comments(parse_result)
            parse_result = parse_method()
            if parse_result is None:  # a, , b or a, FROM: PostgreSQL stops at what follows the comma
                token = self._curr
                if token is None:
                    raise PgError(SYNTAX_ERROR, "syntax error at end of input", len(self.sql) + 1)
                text = self.sql[token.start : token.end + 1]
                raise PgError(SYNTAX_ERROR, f'syntax error at or near "{text}"', token.start + 1)
            items.append(parse_result)
        return items


# -- the rewrite -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Translation:
    """A client's statement as DuckDB SQL, and which of its result columns are numeric texts."""

    sql: str
    numeric_columns: frozenset[int] = field(default_factory=frozenset)
    """0-based indexes of result columns that DuckDB returns as text and the client must be told
    are numeric (PostgreSQL's per-value scale: :mod:`pitstop.server.pgnumeric`)."""


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
        return found

    def kind(self, node: exp.Expr) -> str:
        return "numeric" if node.meta.get(_TEXT) else pgkinds.kind_of(self.type(node))


def _duckdb(sql: str) -> exp.Expr:
    parsed: exp.Expr = exp.maybe_parse(sql, dialect="duckdb")
    return parsed


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _numeric_text(node: exp.Expr) -> exp.Expr:
    node.meta[_TEXT] = True
    return node


def _as_text(node: exp.Expr) -> exp.Expr:
    """A numeric operand as the text the functions of pgnumeric read."""
    return node if node.meta.get(_TEXT) else exp.cast(node, exp.DataType.build("VARCHAR"))


def _fitted(node: exp.Expr) -> exp.Expr:
    """A numeric text, where an expression reads it, as DECIMAL(38, 24); anything else as it is."""
    if not node.meta.get(_TEXT):
        return node
    node.meta.pop(_TEXT)
    return _call("pgs_fit", node)


def _div(node: exp.Div, ctx: _Context) -> exp.Expr | None:
    a, b = node.this, node.expression
    kinds = {ctx.kind(a), ctx.kind(b)}
    if "time" in kinds:  # interval / 2: DuckDB's own
        return None
    if kinds == {"int"}:  # truncates toward zero; DuckDB's "Division by zero" error becomes 22012
        return exp.IntDiv(this=a, expression=b)
    if kinds <= {"int", "numeric"}:
        return _numeric_text(_call("pgs_numeric_div", _as_text(a), _as_text(b)))
    if kinds <= {"int", "numeric", "float"}:
        return exp.Div(this=_fitted(a), expression=_call("pgs_nonzero", _fitted(b)))
    return _call("pgs_div", _fitted(a), _fitted(b))


_ARITHMETIC = {exp.Mul: "pgs_numeric_mul", exp.Add: "pgs_numeric_add", exp.Sub: "pgs_numeric_sub"}


def _arithmetic(node: exp.Mul | exp.Add | exp.Sub, ctx: _Context) -> exp.Expr | None:
    """``avg(x) * 100``, ``sum(a) / sum(b) - 1``: a numeric text with an integer or a numeric is
    PostgreSQL's exact result, at its scale (the sum of the scales for ``*``, the larger for ``+``
    and ``-``), as a numeric text again; ``date - date`` is int4 (pgfunctions)."""
    a, b = node.this, node.expression
    if not (a.meta.get(_TEXT) or b.meta.get(_TEXT)):
        return pgfunctions.date_difference(node, ctx) if isinstance(node, exp.Sub) else None
    if not all(x.meta.get(_TEXT) or ctx.kind(x) in ("int", "numeric") for x in (a, b)):
        return None
    return _numeric_text(_call(_ARITHMETIC[type(node)], _as_text(a), _as_text(b)))


def _aggregate(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``avg`` and ``sum``, bare or under FILTER and OVER (rewritten at the outermost of these)."""
    if isinstance(node.parent, exp.Filter | exp.Window):
        return None
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.Anonymous):
        if str(node.this.this) == "pgs_percentile_cont":  # its filter is inside (pgfunctions)
            return node.this.copy()
    chain, agg = [], node
    while isinstance(agg, exp.Filter | exp.Window):
        chain.append(agg)
        agg = agg.this
    if not isinstance(agg, exp.Avg | exp.Sum):
        return None

    def rewrap(inner: exp.Expr) -> exp.Expr:
        for wrapper in reversed(chain):
            copy = wrapper.copy()
            copy.set("this", inner)
            inner = copy
        return inner

    source = pgkinds.aggregated(agg)
    kind, source_type = ctx.kind(source), ctx.type(source)
    operand = _fitted(agg.this)
    if isinstance(agg, exp.Avg) and kind in ("int", "numeric"):
        total = rewrap(exp.Sum(this=operand.copy()))
        count = rewrap(exp.Count(this=operand.copy()))
        return _numeric_text(_call("pgs_numeric_div", _as_text(total), _as_text(count)))
    small = source_type is not None and source_type.this in pgkinds.SMALL_INTS
    if isinstance(agg, exp.Sum) and kind == "int" and small:
        return exp.cast(rewrap(exp.Sum(this=operand)), exp.DataType.build("BIGINT"))
    return None


_INT_DIGITS = {D.TINYINT: 3, D.SMALLINT: 5, D.INT: 10, D.BIGINT: 19}


def _cast(node: exp.Cast, ctx: _Context) -> exp.Expr | None:
    operand, to = node.this, node.to
    try:
        pgfunctions.check_cast(node, ctx)
    except pgfunctions.Refused as exc:
        raise PgError(exc.code, exc.message) from None
    if operand.meta.get(_TEXT) and to.this in (D.TEXT, D.VARCHAR):
        operand.meta.pop(_TEXT)  # (a / b)::text is PostgreSQL's text of the quotient
        return exp.cast(operand, exp.DataType.build("VARCHAR"))
    operand_type = ctx.type(operand)
    if to.this in (D.TEXT, D.VARCHAR) and not to.expressions and operand_type is not None:
        if operand_type.this == D.DOUBLE:  # PostgreSQL's float8out, not DuckDB's 100.0 and inf
            return _call("pgs_float_text", operand)
    if to.this != D.DECIMAL:
        return None
    if to.expressions:  # numeric(p, s): DuckDB's DECIMAL(p, s) rounds as PostgreSQL does
        return exp.Cast(this=operand, to=to) if operand.meta.get(_TEXT) else None
    if isinstance(operand, exp.Literal):
        return _numeric_literal(operand)
    kind = ctx.kind(operand)
    if kind == "numeric":
        return operand
    if kind == "int":
        operand_type = ctx.type(operand)
        digits = _INT_DIGITS.get(operand_type.this, 38) if operand_type is not None else 38
        return exp.cast(operand, exp.DataType.build(f"DECIMAL({digits}, 0)"))
    if kind == "float":
        return _numeric_text(_call("pgs_float_numeric", operand))
    return _numeric_text(_call("pgs_numeric_in", exp.cast(operand, exp.DataType.build("VARCHAR"))))


def _numeric_literal(literal: exp.Literal) -> exp.Expr:
    """``'3.14159'::numeric``: a DECIMAL of exactly its digits (DuckDB's bare DECIMAL is (18,3))."""
    try:
        text = pgnumeric.numeric_in(literal.name)
    except pgnumeric.NumericError:
        # its error, at run time
        return _numeric_text(_call("pgs_numeric_in", exp.Literal.string(literal.name)))
    whole, _, fraction = text.lstrip("-").partition(".")
    precision = max(len(whole.lstrip("0")) + len(fraction), 1)
    if not text[-1].isdigit() or precision > 38:  # NaN, Infinity, or wider than DuckDB's DECIMAL
        return _numeric_text(exp.Literal.string(text))
    return exp.cast(exp.Literal.string(text), exp.DataType.build(f"DECIMAL({precision}, {len(fraction)})"))


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
        return _call("pgs_to_char_number", _as_text(value), pattern.copy(), is_float)
    return pgtochar.to_char_time(_fitted(value), pattern.name, _duckdb)


def _choice(values: list[exp.Expr], ctx: _Context, result: bool = False) -> list[exp.Expr] | None:
    """The values of a COALESCE or a CASE as numeric texts when one of them is one and the others
    are integers or numerics (``coalesce(sum(a) / nullif(sum(b), 0), 0)``): PostgreSQL's result
    is numeric with each value's own scale. Also, for a ``result`` column, when they are numerics
    of different scales or numerics and integers (``coalesce(revenue, 0)`` is ``0``, not
    ``0.00``). None when they are not."""
    if not any(v.meta.get(_TEXT) for v in values):
        kinds = [ctx.kind(v) for v in values if not isinstance(v, exp.Null)]
        scales = {str(ctx.type(v)) for v in values if not isinstance(v, exp.Null)}
        if not (result and "numeric" in kinds and len(scales) > 1):
            return None
    if not all(isinstance(v, exp.Null) or ctx.kind(v) in ("int", "numeric") for v in values):
        return None
    return [_as_text(v) for v in values]


def _coalesce(node: exp.Coalesce, ctx: _Context) -> exp.Expr | None:
    texts = _choice([node.this, *node.expressions], ctx, result=_is_result(node, ctx))
    if texts is None:
        return None
    return _numeric_text(exp.Coalesce(this=texts[0], expressions=texts[1:]))


def _if(node: exp.If, ctx: _Context) -> exp.Expr | None:
    """A CASE's WHEN: its value is left to the CASE (_case), its condition read as DECIMAL."""
    node.set("this", _fitted(node.this.copy()) if node.this.meta.get(_TEXT) else node.this)
    return node


def _case(node: exp.Case, ctx: _Context) -> exp.Expr | None:
    ifs = node.args.get("ifs") or []
    default = node.args.get("default")
    values = [i.args["true"] for i in ifs] + ([default] if default is not None else [])
    texts = _choice(values, ctx)
    for n, when in enumerate(ifs):
        when.set("true", texts[n] if texts is not None else _fitted(values[n].copy()))
    if default is not None:
        node.set("default", texts[-1] if texts is not None else _fitted(default.copy()))
    operand = node.this
    if isinstance(operand, exp.Expr) and operand.meta.get(_TEXT):
        node.set("this", _fitted(operand.copy()))
    return _numeric_text(node) if texts is not None else node


def _anonymous(node: exp.Anonymous, ctx: _Context) -> exp.Expr | None:
    name = str(node.this).lower()
    if name == "to_char":
        return _to_char(node, ctx)
    if name == "date_part":
        return pgfunctions.date_part(node, ctx)
    return None


def _window(node: exp.Window, ctx: _Context) -> exp.Expr | None:
    return pgfunctions.ntile(node) or _aggregate(node, ctx)


def _refusing(rewrite: Callable[[Any, Any], exp.Expr | None]) -> Callable[[Any, _Context], exp.Expr | None]:
    """A rewrite of :mod:`pgfunctions` whose refusals are PgErrors."""

    def refusing(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
        try:
            return rewrite(node, ctx)
        except pgfunctions.Refused as exc:
            raise PgError(exc.code, exc.message) from None

    return refusing


def _paren(node: exp.Paren, ctx: _Context) -> exp.Expr | None:
    return node.this if node.this.meta.get(_TEXT) else None


_REWRITES: dict[type[exp.Expr], Callable[[Any, _Context], exp.Expr | None]] = {
    exp.Div: _div,
    exp.Avg: _aggregate,
    exp.Sum: _aggregate,
    exp.Filter: _aggregate,
    exp.Window: _window,
    exp.Cast: _cast,
    exp.Anonymous: _anonymous,
    exp.Extract: pgfunctions.extract,
    exp.WithinGroup: pgfunctions.percentile_cont,
    exp.Length: pgfunctions.int4_result,
    exp.StrPosition: pgfunctions.int4_result,
    exp.Sub: _arithmetic,
    exp.Add: _arithmetic,
    exp.Mul: _arithmetic,
    exp.Like: pgfunctions.like,
    exp.ILike: pgfunctions.like,
    exp.Round: _refusing(pgfunctions.round_float),
    exp.Substring: pgfunctions.regex_substring,
    **dict.fromkeys(
        (exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop),
        _refusing(pgfunctions.spread),
    ),
    exp.Sign: pgfunctions.sign,
    exp.Paren: _paren,
    exp.Coalesce: _coalesce,
    exp.If: _if,
    exp.Case: _case,
}


def _is_result(child: exp.Expr, ctx: _Context) -> bool:
    """Whether ``child`` is a result column of the outermost SELECT (kept as numeric text)."""
    parent = child.parent
    if isinstance(parent, exp.Alias):
        child, parent = parent, parent.parent
    return parent is ctx.root and child.arg_key == "expressions"


def _rewrite(node: exp.Expr, ctx: _Context) -> exp.Expr:
    """Bottom-up: a node's children are rewritten before the node is."""
    for child in list(node.iter_expressions()):
        new = _rewrite(child, ctx)
        if new is not child:
            if pgkinds.ID in child.meta and pgkinds.ID not in new.meta:  # typed as the original
                new.meta[pgkinds.ID] = child.meta[pgkinds.ID]
            child.replace(new)
    handler = _REWRITES.get(type(node))
    result = handler(node, ctx) if handler else None
    if result is not None:
        return result
    for child in list(node.iter_expressions()):
        if child.meta.get(_TEXT) and not _is_result(child, ctx):
            child.replace(_fitted(child.copy()))
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
        if target.meta.get(_TEXT):
            if not plain:
                target.replace(_fitted(target.copy()))
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
            key.replace(_fitted(_numeric_text(found[named].copy())))
    return frozenset(found)


def apply(tree: exp.Expr, schema: Schema) -> tuple[exp.Expr, frozenset[int]]:
    """Rewrite a parsed statement to PostgreSQL's semantics; the rewritten tree and its numeric
    text columns (:attr:`Translation.numeric_columns`). Raises PgError for what pitstop refuses."""
    if not any(True for _ in tree.find_all(*_REWRITES)):
        return tree, frozenset()
    types = pgkinds.types(tree, schema, _TYPED)
    columns: dict[str, exp.DataType] = {}
    for column in tree.find_all(exp.Column):
        found = types.get(column.meta.get(pgkinds.ID, -1))
        if found is not None:
            columns.setdefault(column.sql(), found)
    ctx = _Context(types, tree, columns)
    tree = _rewrite(tree, ctx)
    return tree, _numeric_columns(tree)
