"""Numeric texts: PostgreSQL's numeric values whose scale it chooses per row, for
:mod:`pitstop.server.pgsemantics`.

A value whose scale PostgreSQL chooses per row (a quotient, ``text::numeric``) is computed as
PostgreSQL's text (:mod:`pitstop.server.pgnumeric`), flagged :data:`TEXT` in its node's meta. A
result column of the outermost SELECT that is such a value is sent as that text, typed numeric;
anywhere else it is read as ``DECIMAL(38, 24)`` (:func:`fitted`: the same number; an error, not a
rounded one, when it has more than 24 decimals or 14 integer digits). The rewrites here:

- division: integer / integer is DuckDB's ``//``, which truncates toward zero as PostgreSQL does
  (its "Division by zero" error is mapped to 22012 in :mod:`~pitstop.server.sqlstate`); a float
  division checks its divisor (``division by zero``, 22012, as PostgreSQL); numeric / numeric is
  PostgreSQL's numeric division (``pgs_numeric_div``); interval and date divisions are DuckDB's; a
  division whose operands' types are not known here goes through the macro ``pgs_div``
  (:mod:`pitstop.server.pgsemantics`), which refuses an operand DuckDB types DECIMAL or HUGEINT;
- ``avg`` of integers or numerics is ``sum / count`` in numeric division (PostgreSQL's
  ``numeric_avg``); ``sum`` of int2/int4 is int8;
- ``+``, ``-`` and ``*`` of a numeric text and an integer or a numeric (``avg(x) * 100``) are
  computed on the texts, exactly, at PostgreSQL's scale (``pgs_numeric_mul``...);
- ``::numeric`` without precision keeps the value's own scale: a literal becomes a DECIMAL of its
  digits, anything else goes through ``pgs_numeric_in``;
- ``coalesce``, ``CASE``, ``greatest`` and ``least`` whose values are numerics of different
  scales, or numeric texts, give each value's own scale (``coalesce(revenue, 0)`` is ``0``);
- a ``VALUES`` column of numeric constants of different scales (``(1.5), (2)``) keeps each one's
  (``2``, not DuckDB's common ``2.0``): its cells are numeric texts (:func:`values_texts`); so
  does such a column of a ``UNION ALL`` of SELECTs of constants (:func:`union_texts`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from sqlglot import exp

from pitstop.server import pgfunctions, pgkinds, pgnumeric
from pitstop.server.pgparser import PgError

__all__ = [
    "TEXT",
    "TEXT_SCALE",
    "Context",
    "aggregate",
    "arithmetic",
    "as_text",
    "call",
    "case",
    "cast",
    "coalesce",
    "div",
    "extreme",
    "fitted",
    "julian",
    "math",
    "numeric_text",
    "paren",
    "union_texts",
    "values_texts",
    "when",
]

TEXT = "pgs_text"
"""A node's meta flag: its value is a numeric text."""
TEXT_SCALE = 24
"""Decimals of a numeric text read inside an expression: DECIMAL(38, 24)."""
D = exp.DType


class Context(pgfunctions.Kinds, Protocol):
    """What a rewrite reads of its statement: a node's type and kind, and whether it is a result
    column of the outermost SELECT (kept as numeric text)."""

    def is_result(self, node: exp.Expr) -> bool: ...


def call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def numeric_text(node: exp.Expr) -> exp.Expr:
    node.meta[TEXT] = True
    return node


def as_text(node: exp.Expr) -> exp.Expr:
    """A numeric operand as the text the functions of pgnumeric read."""
    return node if node.meta.get(TEXT) else exp.cast(node, exp.DataType.build("VARCHAR"))


def fitted(node: exp.Expr) -> exp.Expr:
    """A numeric text, where an expression reads it, as DECIMAL(38, 24); anything else as it is."""
    if not node.meta.get(TEXT):
        return node
    node.meta.pop(TEXT)
    return call("pgs_fit", node)


def _mixed_scales(column: list[exp.Expr]) -> list[tuple[exp.Literal, str]] | None:
    """A column's numeric constants and their texts, when every value is one (or NULL) and they
    have different scales (a constant with a decimal point among them); None otherwise."""
    numbers = [c for c in column if isinstance(c, exp.Literal) and not c.is_string]
    if not numbers or len(numbers) + sum(isinstance(c, exp.Null) for c in column) < len(column):
        return None
    try:
        texts = [pgnumeric.numeric_in(n.name) for n in numbers]
    except pgnumeric.NumericError:
        return None
    if len({len(t.partition(".")[2]) for t in texts}) < 2 or not any("." in t for t in texts):
        return None  # one scale (or integers): DuckDB's type says it
    return list(zip(numbers, texts, strict=True))


def union_texts(tree: exp.Expr) -> frozenset[int]:
    """``SELECT 1.5 UNION ALL SELECT 2``: each result column whose values are numeric constants of
    different scales becomes numeric texts (each keeps its own scale, as PostgreSQL's numeric
    does); their 0-based indexes. An ORDER BY that names one (or its position) sorts by its
    number; a UNION that removes duplicates is left to DuckDB where two of the constants are one
    number written with different scales (PostgreSQL keeps one of them)."""
    branches = pgkinds.set_branches(tree) if isinstance(tree, exp.Union) else None
    if not branches or any(isinstance(p, exp.Star) for b in branches for p in b.expressions):
        return frozenset()
    distinct = pgkinds.removes_duplicates(tree)
    found: dict[int, int] = {}  # index -> greatest scale
    for index in range(min(len(b.expressions) for b in branches)):
        column = [b.expressions[index] for b in branches]
        column = [c.this if isinstance(c, exp.Alias) else c for c in column]
        mixed = _mixed_scales(column)
        if mixed is None:
            continue
        if distinct and len({t for _, t in mixed}) != len({Decimal(t) for _, t in mixed}):
            continue
        for number, text in mixed:
            number.replace(exp.Literal.string(text))
        found[index] = max(len(text.partition(".")[2]) for _, text in mixed)
    order = tree.args.get("order")
    if found and isinstance(order, exp.Order):
        names = [p.alias_or_name for p in branches[0].expressions]
        for ordered in order.expressions:
            key = ordered.this
            at: int | None = None
            if isinstance(key, exp.Column) and not key.table and key.name in names:
                at = names.index(key.name)
            elif isinstance(key, exp.Literal) and key.is_int:
                at = int(key.name) - 1
            if at is not None and at in found:
                key.replace(exp.cast(exp.column(names[at], quoted=True), f"DECIMAL(38, {found[at]})"))
    return frozenset(found)


def values_texts(tree: exp.Expr) -> bool:
    """A SELECT from ``VALUES`` (``SELECT x FROM (VALUES (1.5), (2)) v(x)``; a bare ``VALUES`` is
    one, :func:`pitstop.server.pgcatalog.naming.values_names`): each column of numeric constants
    of different scales becomes numeric texts, and the SELECT's references to it are flagged
    :data:`TEXT`, so that each value keeps its own scale, as PostgreSQL's numeric does. Whether
    it changed anything."""
    if not isinstance(tree, exp.Select) or tree.args.get("joins"):
        return False
    source = tree.args.get("from_")
    rows = source.this if source is not None else None
    alias = rows.args.get("alias") if isinstance(rows, exp.Values | exp.Subquery) else None
    if isinstance(rows, exp.Subquery):
        rows = rows.this
    if not isinstance(rows, exp.Values) or alias is None or not alias.columns:
        return False
    table = alias.name
    cells = [row.expressions if isinstance(row, exp.Tuple) else [row] for row in rows.expressions]
    changed = False
    for index, name in enumerate(alias.columns):
        mixed = _mixed_scales([row[index] for row in cells if len(row) > index])
        if mixed is None:
            continue
        for number, text in mixed:
            number.replace(exp.Literal.string(text))
        scale = max(len(text.partition(".")[2]) for _, text in mixed)
        for ref in list(tree.find_all(exp.Column)):
            if ref.name != name.name or ref.table not in ("", table) or isinstance(ref.this, exp.Star):
                continue
            if ref.find_ancestor(exp.Group) is not None:
                continue  # grouped by its text, which the result column then is
            if ref.find_ancestor(exp.AggFunc) is not None:  # summed at the greatest scale, as PostgreSQL
                ref.replace(exp.cast(ref.copy(), exp.DataType.build(f"DECIMAL(38, {scale})")))
            else:
                numeric_text(ref)
        changed = True
    return changed


def div(node: exp.Div, ctx: Context) -> exp.Expr | None:
    a, b = node.this, node.expression
    kinds = {ctx.kind(a), ctx.kind(b)}
    if "time" in kinds:  # interval / 2: DuckDB's own
        return None
    if kinds == {"int"}:  # truncates toward zero; DuckDB's "Division by zero" error becomes 22012
        return exp.IntDiv(this=a, expression=b)
    if kinds <= {"int", "numeric"}:
        return numeric_text(call("pgs_numeric_div", as_text(a), as_text(b)))
    if kinds <= {"int", "numeric", "float"}:
        return exp.Div(this=fitted(a), expression=call("pgs_nonzero", fitted(b)))
    return call("pgs_div", fitted(a), fitted(b))


_ARITHMETIC = {exp.Mul: "pgs_numeric_mul", exp.Add: "pgs_numeric_add", exp.Sub: "pgs_numeric_sub"}


def arithmetic(node: exp.Mul | exp.Add | exp.Sub, ctx: Context) -> exp.Expr | None:
    """``avg(x) * 100``, ``sum(a) / sum(b) - 1``: a numeric text with an integer or a numeric is
    PostgreSQL's exact result, at its scale (the sum of the scales for ``*``, the larger for ``+``
    and ``-``), as a numeric text again; ``date - date`` is int4 (pgfunctions)."""
    a, b = node.this, node.expression
    if not (a.meta.get(TEXT) or b.meta.get(TEXT)):
        return pgfunctions.date_difference(node, ctx) if isinstance(node, exp.Sub) else None
    if not all(x.meta.get(TEXT) or ctx.kind(x) in ("int", "numeric") for x in (a, b)):
        return None
    return numeric_text(call(_ARITHMETIC[type(node)], as_text(a), as_text(b)))


def _percentiles(node: exp.Expr) -> bool:
    """Whether ``node`` is pgfunctions' percentile_cont: one, or an ARRAY of them."""
    calls = node.expressions if isinstance(node, exp.Array) else [node]
    return bool(calls) and all(
        isinstance(c, exp.Anonymous) and str(c.this) == "pgs_percentile_cont" for c in calls
    )


def aggregate(node: exp.Expr, ctx: Context) -> exp.Expr | None:
    """``avg`` and ``sum``, bare or under FILTER and OVER (rewritten at the outermost of these)."""
    if isinstance(node.parent, exp.Filter | exp.Window):
        return None
    if isinstance(node, exp.Filter) and _percentiles(node.this):  # its filter is inside (pgfunctions)
        return node.this.copy()
    agg, rewrap = pgkinds.under_wrappers(node)
    if not isinstance(agg, exp.Avg | exp.Sum):
        return None

    source = pgkinds.aggregated(agg)
    kind, source_type = ctx.kind(source), ctx.type(source)
    operand = fitted(agg.this)
    if isinstance(agg, exp.Avg) and kind in ("int", "numeric"):
        total = rewrap(exp.Sum(this=operand.copy()))
        count = rewrap(exp.Count(this=operand.copy()))
        return numeric_text(call("pgs_numeric_div", as_text(total), as_text(count)))
    small = source_type is not None and source_type.this in pgkinds.SMALL_INTS
    if isinstance(agg, exp.Sum) and kind == "int" and small:
        return exp.cast(rewrap(exp.Sum(this=operand)), exp.DataType.build("BIGINT"))
    return None


_INT_DIGITS = {D.TINYINT: 3, D.SMALLINT: 5, D.INT: 10, D.BIGINT: 19}


def cast(node: exp.Cast, ctx: Context) -> exp.Expr | None:
    operand, to = node.this, node.to
    try:
        pgfunctions.check_cast(node, ctx)
    except pgfunctions.Refused as exc:
        raise PgError(exc.code, exc.message) from None
    if operand.meta.get(TEXT) and to.this in (D.TEXT, D.VARCHAR):
        operand.meta.pop(TEXT)  # (a / b)::text is PostgreSQL's text of the quotient
        return exp.cast(operand, exp.DataType.build("VARCHAR"))
    operand_type = ctx.type(operand)
    if to.this in (D.TEXT, D.VARCHAR) and not to.expressions and operand_type is not None:
        if operand_type.this == D.DOUBLE:  # PostgreSQL's float8out, not DuckDB's 100.0 and inf
            return call("pgs_float_text", operand)
    if to.this != D.DECIMAL:
        return None
    if to.expressions:  # numeric(p, s): DuckDB's DECIMAL(p, s) rounds as PostgreSQL does
        return exp.Cast(this=operand, to=to) if operand.meta.get(TEXT) else None
    if isinstance(operand, exp.Literal):
        return _numeric_literal(operand)
    kind = ctx.kind(operand)
    if kind == "numeric" and not isinstance(operand, exp.Parameter):  # ($1: DuckDB must be told)
        return operand
    if kind == "int":
        operand_type = ctx.type(operand)
        digits = _INT_DIGITS.get(operand_type.this, 38) if operand_type is not None else 38
        return exp.cast(operand, exp.DataType.build(f"DECIMAL({digits}, 0)"))
    if kind == "float":
        return numeric_text(call("pgs_float_numeric", operand))
    return numeric_text(call("pgs_numeric_in", exp.cast(operand, exp.DataType.build("VARCHAR"))))


def exponent_literal(literal: exp.Literal, ctx: Context) -> exp.Expr | None:
    """``1e-10``, ``1.5e3``: numeric constants in PostgreSQL (DuckDB's are doubles), as a DECIMAL
    of exactly their digits. One wider than DuckDB's DECIMAL (``1e300``) is a numeric text (a
    result column's value; inside an expression, :func:`fitted` refuses it, saying why), except
    where PostgreSQL makes it a float8 anyway: compared with a value, or with a float8 operand.
    A constant under a cast is the cast's."""
    parent = literal.parent
    if literal.is_string or "e" not in literal.name.lower() or isinstance(parent, exp.Cast):
        return None
    value = _numeric_literal(literal)
    if value.meta.get(TEXT) and isinstance(parent, exp.Binary):
        other = parent.expression if literal is parent.this else parent.this
        if isinstance(parent, exp.Predicate) or ctx.kind(other) == "float":
            return None
    return value


def _numeric_literal(literal: exp.Literal) -> exp.Expr:
    """``'3.14159'::numeric``: a DECIMAL of exactly its digits (DuckDB's bare DECIMAL is (18,3))."""
    try:
        text = pgnumeric.numeric_in(literal.name)
    except pgnumeric.NumericError:
        # its error, at run time
        return numeric_text(call("pgs_numeric_in", exp.Literal.string(literal.name)))
    whole, _, fraction = text.lstrip("-").partition(".")
    precision = max(len(whole.lstrip("0")) + len(fraction), 1)
    if not text[-1].isdigit() or precision > 38:  # NaN, Infinity, or wider than DuckDB's DECIMAL
        return numeric_text(exp.Literal.string(text))
    return exp.cast(exp.Literal.string(text), exp.DataType.build(f"DECIMAL({precision}, {len(fraction)})"))


def _choice(values: list[exp.Expr], ctx: Context, result: bool = False) -> list[exp.Expr] | None:
    """The values of a COALESCE or a CASE as numeric texts when one of them is one and the others
    are integers or numerics (``coalesce(sum(a) / nullif(sum(b), 0), 0)``): PostgreSQL's result
    is numeric with each value's own scale. Also, for a ``result`` column, when they are numerics
    of different scales or numerics and integers (``coalesce(revenue, 0)`` is ``0``, not
    ``0.00``). None when they are not."""
    if not any(v.meta.get(TEXT) for v in values):
        kinds = [ctx.kind(v) for v in values if not isinstance(v, exp.Null)]
        scales = {_scale(v, ctx) for v in values if not isinstance(v, exp.Null)}
        if not (result and "numeric" in kinds and len(scales) > 1):
            return None
    if not all(isinstance(v, exp.Null) or ctx.kind(v) in ("int", "numeric") for v in values):
        return None
    return [as_text(v) for v in values]


def _scale(value: exp.Expr, ctx: Context) -> str:
    """What tells numerics of different scales apart: a column's type, a constant's digits."""
    if isinstance(value, exp.Literal) and not value.is_string:
        return f"constant {len(value.name.partition('.')[2])}"
    return str(ctx.type(value))


def coalesce(node: exp.Coalesce, ctx: Context) -> exp.Expr | None:
    pgfunctions.check_common_type("COALESCE", [node.this, *node.expressions], ctx)
    texts = _choice([node.this, *node.expressions], ctx, result=ctx.is_result(node))
    if texts is None:
        return None
    return numeric_text(exp.Coalesce(this=texts[0], expressions=texts[1:]))


def when(node: exp.If, ctx: Context) -> exp.Expr | None:
    """A CASE's WHEN: its value is left to the CASE (case), its condition read as DECIMAL."""
    node.set("this", fitted(node.this.copy()) if node.this.meta.get(TEXT) else node.this)
    return node


def case(node: exp.Case, ctx: Context) -> exp.Expr | None:
    ifs = node.args.get("ifs") or []
    default = node.args.get("default")
    values = [i.args["true"] for i in ifs] + ([default] if default is not None else [])
    texts = _choice(values, ctx)
    for n, when in enumerate(ifs):
        when.set("true", texts[n] if texts is not None else fitted(values[n].copy()))
    if default is not None:
        node.set("default", texts[-1] if texts is not None else fitted(default.copy()))
    operand = node.this
    if isinstance(operand, exp.Expr) and operand.meta.get(TEXT):
        node.set("this", fitted(operand.copy()))
    return numeric_text(node) if texts is not None else node


def paren(node: exp.Paren, ctx: Context) -> exp.Expr | None:
    return node.this if node.this.meta.get(TEXT) else None


def extreme(node: exp.Greatest | exp.Least, ctx: Context) -> exp.Expr | None:
    """``greatest``/``least`` of numerics of different scales, or of a numeric text, for a result
    column: the first value equal to the extreme, at its own scale (``greatest(revenue, 0)`` is
    ``0``, not ``0.00``), as PostgreSQL keeps the value it chose. NULLs are skipped, as there."""
    values = [node.this, *node.expressions]
    name = "GREATEST" if isinstance(node, exp.Greatest) else "LEAST"
    pgfunctions.check_common_type(name, values, ctx)
    present = [v for v in values if not isinstance(v, exp.Null)]
    numbers = [fitted(v.copy()) for v in present]
    texts = _choice(present, ctx, result=ctx.is_result(node))
    if texts is None or not present:
        return None
    chosen = node.copy()  # (keeps ignore_nulls: PostgreSQL's greatest skips NULLs)
    chosen.set("this", numbers[0].copy())
    chosen.set("expressions", [n.copy() for n in numbers[1:]])
    ifs = [
        exp.If(this=exp.EQ(this=n, expression=chosen.copy()), true=t)
        for n, t in zip(numbers, texts, strict=True)
    ]
    return numeric_text(exp.Case(ifs=ifs))


def julian(node: exp.Extract, ctx: Context) -> exp.Expr | None:
    """``extract(julian FROM timestamp)``: the Julian day plus the fraction of the day gone, in
    PostgreSQL's numeric division (``2460361.30208333333333333333``; DuckDB's is a double)."""
    field = node.this.name.upper() if isinstance(node.this, exp.Var | exp.Identifier) else ""
    source = ctx.type(node.expression)
    if field != "JULIAN" or source is None or source.this not in (D.TIMESTAMP, D.TIMESTAMPTZ):
        return None
    value = node.expression
    micros = exp.Sub(
        this=call("epoch_us", value.copy()),
        expression=call("epoch_us", call("date_trunc", exp.Literal.string("day"), value.copy())),
    )
    fraction = call("pgs_numeric_div", as_text(micros), exp.Literal.string("86400000000"))
    return numeric_text(call("pgs_numeric_add", as_text(pgfunctions.julian_day(value)), fraction))


_MATH = {exp.Sqrt: "pgs_numeric_sqrt", exp.Exp: "pgs_numeric_exp", exp.Ln: "pgs_numeric_ln"}


def math(node: exp.Sqrt | exp.Exp | exp.Ln | exp.Log | exp.Pow, ctx: Context) -> exp.Expr | None:
    """``sqrt``, ``exp``, ``ln``, ``log`` and ``power`` of a numeric are numerics in PostgreSQL, of
    a scale it chooses (:mod:`pitstop.server.pgmath`); DuckDB's are doubles. ``log(b, x)`` exists
    for numerics only: of two integers it is a numeric too. Of integers and floats (but ``log``'s
    two), PostgreSQL computes in double precision, as DuckDB does."""
    if isinstance(node, exp.Log):
        base, value = (node.this, node.expression) if node.expression is not None else (None, node.this)
        kinds = {ctx.kind(value)} | ({ctx.kind(base)} if base is not None else set())
        if not kinds <= {"int", "numeric"} or (base is None and kinds == {"int"}):
            return None
        base_text = as_text(base) if base is not None else exp.Literal.string("10")
        return numeric_text(call("pgs_numeric_log", base_text, as_text(value)))
    if isinstance(node, exp.Pow):
        kinds = {ctx.kind(node.this), ctx.kind(node.expression)}
        if "numeric" not in kinds or not kinds <= {"int", "numeric"}:
            return None
        return numeric_text(call("pgs_numeric_power", as_text(node.this), as_text(node.expression)))
    if ctx.kind(node.this) != "numeric":
        return None
    return numeric_text(call(_MATH[type(node)], as_text(node.this)))
