"""PostgreSQL's functions and operators where DuckDB's of the same name answer otherwise, for
:mod:`pitstop.server.pgsemantics` (each a rewrite of one node, given the types of its parts):

- ``extract(field FROM x)`` is numeric in PostgreSQL (since 14), with the scale of the field:
  0 for ``year`` ... ``hour``, 6 for ``second`` and ``epoch`` of a timestamp or an interval, 3 for
  ``milliseconds``; DuckDB's is a bigint or a double. ``date_part`` stays a double, seconds with
  their fraction. (``julian`` and the time zone fields are left to DuckDB.)
- ``percentile_cont(f) WITHIN GROUP (ORDER BY x)`` is a double interpolated as PostgreSQL does
  (``lo + (hi - lo) * proportion``, macro ``pgs_percentile_cont``); DuckDB's is of x's type and
  interpolated otherwise (``166.79999999999998`` where PostgreSQL says ``166.8``);
- ``length``, ``strpos``/``position`` and ``ntile`` are int4, ``date - date`` too; DuckDB's bigint;
- ``LIKE`` and ``ILIKE`` without ``ESCAPE`` take ``\\`` as their escape character, as PostgreSQL's
  (``LIKE '%\\_%'`` is an underscore; DuckDB's has no escape character unless told);
- ``round(double)`` rounds half to even (PostgreSQL's ``rint``); ``round(double, n)`` does not
  exist in PostgreSQL: its error (42883), not DuckDB's answer;
- ``sign`` is numeric for a numeric, double for the others; DuckDB's a tinyint;
- ``substring(x from 'regex')`` is a regular expression's match (DuckDB's reads a start position);
- ``stddev``/``variance`` of integers and numerics are refused: PostgreSQL's are numerics;
- casts PostgreSQL has not (``bigint::boolean``) or refuses (``'2.5'::int``) are its errors.
"""

from __future__ import annotations

import re
from typing import Protocol

from sqlglot import exp

__all__ = [
    "PERCENTILE_MACRO",
    "Kinds",
    "Refused",
    "check_cast",
    "check_common_type",
    "date_part",
    "date_difference",
    "exponential",
    "extract",
    "int4_gcd",
    "julian_day",
    "int4_result",
    "interval_times",
    "like",
    "ntile",
    "percentile_cont",
    "regex_substring",
    "round_float",
    "sign",
    "spread",
    "typed_null",
    "widened_real",
]

D = exp.DType
_INTEGER_FIELDS = frozenset(
    "YEAR MONTH DAY HOUR MINUTE DOW ISODOW DOY WEEK QUARTER DECADE CENTURY MILLENNIUM ISOYEAR".split()
)
PERCENTILE_MACRO = """
CREATE OR REPLACE TEMP MACRO pgs_percentile_cont(l, f) AS CASE
    WHEN len(l) = 0 THEN NULL
    WHEN floor(f * (len(l) - 1)) = ceil(f * (len(l) - 1)) THEN l[CAST(floor(f * (len(l) - 1)) AS BIGINT) + 1]
    ELSE l[CAST(floor(f * (len(l) - 1)) AS BIGINT) + 1]
         + (l[CAST(ceil(f * (len(l) - 1)) AS BIGINT) + 1] - l[CAST(floor(f * (len(l) - 1)) AS BIGINT) + 1])
         * (f * (len(l) - 1) - floor(f * (len(l) - 1))) END;
"""
"""PostgreSQL's percentile_cont_final_common over the sorted non-NULL values ``l``: rows
floor(f * (n - 1)) and ceil(f * (n - 1)) (0-based), interpolated in double precision."""


class Kinds(Protocol):
    """What a rewrite reads of a node: its PostgreSQL type and kind (:mod:`pitstop.server.pgkinds`)."""

    def kind(self, node: exp.Expr) -> str: ...

    def type(self, node: exp.Expr) -> exp.DataType | None: ...


class Refused(Exception):
    """What PostgreSQL refuses and DuckDB would answer: PostgreSQL's SQLSTATE and words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_NAMES = {D.SMALLINT: "smallint", D.INT: "integer", D.BIGINT: "bigint", D.DECIMAL: "numeric",
          D.DOUBLE: "double precision", D.FLOAT: "real"}  # fmt: skip
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")


def check_cast(node: exp.Cast, ctx: Kinds) -> None:
    """A cast PostgreSQL refuses: a bigint, smallint, numeric or float to boolean (42846; only an
    integer has one), a text constant that is not an integer to an integer type (22P02: DuckDB
    rounds ``'2.5'::int`` to 3)."""
    to, operand = node.to.this, node.this
    source = ctx.type(operand)
    if to == D.BOOLEAN and source is not None and source.this in _NAMES and source.this != D.INT:
        raise Refused("42846", f"cannot cast type {_NAMES[source.this]} to boolean")
    is_text = isinstance(operand, exp.Literal) and operand.is_string
    if to in (D.SMALLINT, D.INT, D.BIGINT) and is_text and not _INTEGER_TEXT.fullmatch(operand.name):
        raise Refused("22P02", f'invalid input syntax for type {_NAMES[to]}: "{operand.name}"')


_CATEGORIES = {
    **dict.fromkeys((D.SMALLINT, D.INT, D.BIGINT, D.DECIMAL, D.DOUBLE, D.FLOAT), "numeric"),
    **dict.fromkeys((D.TEXT, D.VARCHAR), "string"),
    **dict.fromkeys((D.DATE, D.TIMESTAMP, D.TIMESTAMPTZ), "datetime"),
    D.INTERVAL: "timespan",
    D.BOOLEAN: "boolean",
}
_TYPE_NAMES = {**_NAMES, D.TEXT: "text", D.VARCHAR: "text", D.DATE: "date", D.INTERVAL: "interval",
               D.TIMESTAMP: "timestamp without time zone", D.TIMESTAMPTZ: "timestamp with time zone",
               D.BOOLEAN: "boolean"}  # fmt: skip


def check_common_type(name: str, values: list[exp.Expr], ctx: Kinds) -> None:
    """The values of ``GREATEST``, ``LEAST`` or ``COALESCE`` must have one type: PostgreSQL refuses
    text with a number, a number with a time... (42804, its words); a constant string or a NULL
    takes the others' type. DuckDB's error would be a binder's (42000) or an answer."""
    first: exp.DataType | None = None
    for value in values:
        if isinstance(value, exp.Null) or (isinstance(value, exp.Literal) and value.is_string):
            continue
        datatype = ctx.type(value)
        category = _CATEGORIES.get(datatype.this) if datatype is not None else None
        if datatype is None or category is None:
            return  # a type pitstop does not place: DuckDB decides
        if first is None:
            first = datatype
        elif _CATEGORIES[first.this] != category:
            raise Refused(
                "42804",
                f"{name} types {_TYPE_NAMES[first.this]} and {_TYPE_NAMES[datatype.this]} cannot be matched",
            )


def _cast(node: exp.Expr, to: str) -> exp.Expr:
    return exp.cast(node, exp.DataType.build(to))


def _times(node: exp.Expr, factor: str) -> exp.Expr:
    return exp.Mul(this=node, expression=exp.Literal.number(factor))


def _micros(operand: exp.Expr) -> exp.Expr:
    """Seconds and microseconds of the minute, as DuckDB's ``microsecond`` field (PostgreSQL's)."""
    field = exp.Extract(this=exp.var("MICROSECONDS"), expression=operand.copy())
    return _cast(field, "DECIMAL(18, 0)")


def _numeric_field(field: str, operand: exp.Expr, source: exp.DataType | None) -> exp.Expr | None:
    if source is None:
        return None
    if source.this in (D.TIMESTAMP, D.TIMESTAMPTZ):
        if field in _INTEGER_FIELDS:
            return _cast(exp.Extract(this=exp.var(field), expression=operand.copy()), "DECIMAL(18, 0)")
        if field == "SECOND":
            return _times(_micros(operand), "0.000001")
        if field == "MILLISECONDS":
            return _times(_micros(operand), "0.001")
        if field == "MICROSECONDS":
            return _micros(operand)
        if field == "EPOCH":
            epoch = exp.Anonymous(this="epoch_us", expressions=[operand.copy()])
            return _times(_cast(epoch, "DECIMAL(38, 0)"), "0.000001")
        return None
    if source.this == D.DATE and field == "JULIAN":
        return _cast(julian_day(operand), "DECIMAL(18, 0)")
    if source.this == D.DATE and (field in _INTEGER_FIELDS or field == "EPOCH"):
        function = "epoch" if field == "EPOCH" else None
        value = (
            exp.Anonymous(this=function, expressions=[operand.copy()])
            if function
            else exp.Extract(this=exp.var(field), expression=operand.copy())
        )
        return _cast(value, "DECIMAL(18, 0)")
    if source.this == D.INTERVAL and field == "EPOCH":
        micros = exp.Anonymous(
            this="round",
            expressions=[_times(exp.Anonymous(this="epoch", expressions=[operand.copy()]), "1000000")],
        )
        return _times(_cast(micros, "DECIMAL(38, 0)"), "0.000001")
    return None


def julian_day(operand: exp.Expr) -> exp.Expr:
    """The Julian day number of a date or a timestamp's day (PostgreSQL's date2j)."""
    epoch = _cast(exp.Literal.string("1970-01-01"), "DATE")
    day = exp.Anonymous(
        this="datediff", expressions=[exp.Literal.string("day"), epoch, _cast(operand.copy(), "DATE")]
    )
    return exp.Add(this=day, expression=exp.Literal.number(2440588))


def extract(node: exp.Extract, ctx: Kinds) -> exp.Expr | None:
    field = node.this.name.upper() if isinstance(node.this, exp.Var | exp.Identifier) else ""
    return _numeric_field(field, node.expression, ctx.type(node.expression))


def date_part(node: exp.Anonymous, ctx: Kinds) -> exp.Expr | None:
    """``date_part('hour', x)``: a double (seconds with their fraction)."""
    if len(node.expressions) != 2 or not (
        isinstance(node.expressions[0], exp.Literal) and node.expressions[0].is_string
    ):
        return None
    field, operand = node.expressions[0].name.upper(), node.expressions[1]
    numeric = _numeric_field(field, operand, ctx.type(operand))
    return None if numeric is None else _cast(numeric, "DOUBLE")


def percentile_cont(node: exp.WithinGroup, ctx: Kinds) -> exp.Expr | None:
    """``percentile_cont(f) WITHIN GROUP (ORDER BY x [DESC])`` of numbers (a float8) or intervals
    (an interval, interpolated in interval arithmetic as PostgreSQL's interval_lerp; DuckDB has no
    quantile_cont of intervals), f a constant or an array of constants (``ARRAY[0.25, 0.75]``: a
    float8[] or interval[]). Under OVER, or of a type PostgreSQL has
    no percentile_cont for (a timestamp, a text), PostgreSQL's error; ``percentile_disc`` is
    DuckDB's ``quantile_disc`` (the same row), refused under OVER too."""
    function, order = node.this, node.expression
    if not isinstance(function, exp.PercentileCont | exp.PercentileDisc) or not isinstance(order, exp.Order):
        return None
    name = "percentile_cont" if isinstance(function, exp.PercentileCont) else "percentile_disc"
    if isinstance(node.parent, exp.Window) or (
        isinstance(node.parent, exp.Filter) and isinstance(node.parent.parent, exp.Window)
    ):
        raise Refused("0A000", f"OVER is not supported for ordered-set aggregate {name}")
    if len(order.expressions) != 1 or isinstance(function, exp.PercentileDisc):
        return None
    ordered = order.expressions[0]
    value = ordered.this
    kind, datatype = ctx.kind(value), ctx.type(value)
    plain = isinstance(value, exp.Column | exp.Cast)  # (sqlglot types ts - ts a timestamp)
    if plain and kind in ("text", "time") and datatype is not None and datatype.this != D.INTERVAL:
        fraction = "numeric[]" if isinstance(function.this, exp.Array) else "numeric"
        raise Refused(
            "42883",
            f"function percentile_cont({fraction}, {_TYPE_NAMES.get(datatype.this, 'text')}) does not exist",
        )
    fractions = function.this.expressions if isinstance(function.this, exp.Array) else [function.this]
    if not fractions or not all(isinstance(f, exp.Literal | exp.Neg) for f in fractions):
        return None
    interval = _is_interval(value, ctx)
    if kind not in ("int", "numeric", "float") and not interval:
        return None
    condition: exp.Expr = exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null()))
    if isinstance(node.parent, exp.Filter):  # its FILTER (WHERE c) goes with the list's (pgsemantics)
        condition = exp.and_(condition, exp.Paren(this=node.parent.expression.this.copy()))
    values = exp.Filter(
        this=exp.Anonymous(
            this="list", expressions=[value.copy() if interval else _cast(value.copy(), "DOUBLE")]
        ),
        expression=exp.Where(this=condition),
    )
    sort = "list_reverse_sort" if ordered.args.get("desc") else "list_sort"
    sorted_values = exp.Anonymous(this=sort, expressions=[values])
    found = [
        exp.Anonymous(
            this="pgs_percentile_cont", expressions=[sorted_values.copy(), _cast(f.copy(), "DOUBLE")]
        )
        for f in fractions
    ]
    return exp.Array(expressions=found) if isinstance(function.this, exp.Array) else found[0]


_TIMESTAMPS = (D.TIMESTAMP, D.TIMESTAMPTZ, D.DATETIME)


def _is_interval(value: exp.Expr, ctx: Kinds) -> bool:
    """Whether ``value`` is an interval: typed so, or a difference of two timestamps (which
    sqlglot types a timestamp)."""
    datatype = ctx.type(value)
    if datatype is not None and datatype.this == D.INTERVAL:
        return True
    if isinstance(value, exp.Paren):
        return _is_interval(value.this, ctx)
    if not isinstance(value, exp.Sub):
        return False
    operands = [ctx.type(value.this), ctx.type(value.expression)]
    return all(t is not None and t.this in _TIMESTAMPS for t in operands)


_PG_EPOCH_US = 946_684_800_000_000
"""2000-01-01 in microseconds since 1970: PostgreSQL's timestamps count from it, and round
half away from it."""
_DAY_US = 86_400_000_000
_ROUNDED_TIMES = {
    D.TIMESTAMP: f"make_timestamp({{us}} + {_PG_EPOCH_US})",
    D.TIMESTAMPTZ: f"make_timestamptz({{us}} + {_PG_EPOCH_US})",
    # Rounded up from the day's last instant: PostgreSQL's 24:00:00 (DuckDB's time keeps it; its
    # time + interval wraps to 00:00:00).
    D.TIME: f"CASE WHEN {{us}} >= {_DAY_US} THEN TIME '24:00:00' "
    "ELSE TIME '00:00:00' + to_microseconds({us}) END",
}
_ROUNDED = "sign(pgs_us) * ((abs(pgs_us) + {half}) // {unit} * {unit})"


def time_precision(node: exp.Cast) -> exp.Expr | None:
    """``x::timestamp(p)``, ``x::timestamptz(p)``, ``x::time(p)``, p < 6: rounded to p decimals of
    a second, half away from PostgreSQL's epoch (2000-01-01) or midnight, as PostgreSQL rounds them
    (DuckDB drops the precision of a timestamptz or a time, and rounds a timestamp(1) to
    milliseconds, half away from 1970)."""
    to = node.to
    if to.this not in _ROUNDED_TIMES or len(to.expressions) != 1:
        return None
    param = to.expressions[0]
    literal = param.this if isinstance(param, exp.DataTypeParam) else param
    if not (isinstance(literal, exp.Literal) and literal.is_int) or int(literal.name) >= 6:
        return None
    unit = 10 ** (6 - int(literal.name))
    micros: exp.Expr = exp.Anonymous(this="epoch_us", expressions=[_cast(node.this.copy(), to.this.value)])
    if to.this != D.TIME:
        micros = exp.Paren(this=exp.Sub(this=micros, expression=exp.Literal.number(_PG_EPOCH_US)))
    rounded: exp.Expr = exp.maybe_parse(_ROUNDED.format(half=unit // 2, unit=unit), dialect="duckdb")
    for name in list(rounded.find_all(exp.Column)):
        name.replace(micros.copy())
    made: exp.Expr = exp.maybe_parse(_ROUNDED_TIMES[to.this].format(us="pgs_us"), dialect="duckdb")
    for name in list(made.find_all(exp.Column)):
        name.replace(exp.Paren(this=rounded.copy()))
    return made


def int4_result(node: exp.Expr, ctx: Kinds) -> exp.Expr | None:
    """``length``, ``char_length``, ``strpos``, ``position``: int4."""
    return _cast(node.copy(), "INTEGER")


def ntile(node: exp.Window) -> exp.Expr | None:
    return _cast(node.copy(), "INTEGER") if isinstance(node.this, exp.Ntile) else None


def date_difference(node: exp.Sub, ctx: Kinds) -> exp.Expr | None:
    """``date - date``: days as int4."""
    left, right = ctx.type(node.this), ctx.type(node.expression)
    if left is not None and right is not None and left.this == right.this == D.DATE:
        return _cast(node.copy(), "INTEGER")
    return None


def like(node: exp.Like | exp.ILike, ctx: Kinds) -> exp.Expr | None:
    if isinstance(node.parent, exp.Escape):
        return None
    return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))


def round_float(node: exp.Round, ctx: Kinds) -> exp.Expr | None:
    if ctx.kind(node.this) != "float":
        return None
    if node.args.get("decimals") is not None:
        raise Refused("42883", "function round(double precision, integer) does not exist")
    return exp.Anonymous(this="round_even", expressions=[node.this.copy(), exp.Literal.number(0)])


def regex_substring(node: exp.Substring, ctx: Kinds) -> exp.Expr | None:
    """``substring(x from 'pattern')``: the first parenthesized part of the match, or the match;
    NULL when it does not match (DuckDB would read the pattern as a start position)."""
    pattern = node.args.get("start")
    if not (isinstance(pattern, exp.Literal) and pattern.is_string) or node.args.get("length") is not None:
        return None
    group = exp.Literal.number(1 if "(" in pattern.name else 0)
    found = exp.Anonymous(this="regexp_extract", expressions=[node.this.copy(), pattern.copy(), group])
    matches = exp.Anonymous(this="regexp_matches", expressions=[node.this.copy(), pattern.copy()])
    return exp.Case(ifs=[exp.If(this=matches, true=found)])


def spread(node: exp.Expr, ctx: Kinds) -> exp.Expr | None:
    """``stddev``, ``variance`` and their ``_pop``/``_samp`` of an integer or a numeric are numeric
    in PostgreSQL, computed in its numeric arithmetic; DuckDB's are doubles: refused (0A000)."""
    if ctx.kind(node.this) not in ("int", "numeric"):
        return None
    names: dict[type[exp.Expr], str] = {
        exp.StddevPop: "stddev_pop",
        exp.StddevSamp: "stddev_samp",
        exp.VariancePop: "var_pop",
    }
    name = names.get(type(node), "stddev" if isinstance(node, exp.Stddev) else "variance")
    raise Refused(
        "0A000",
        f"pitstop computes {name} in double precision, where PostgreSQL gives a numeric of an integer "
        f"or numeric column; cast the column to say which you want: {name}(x::float8)",
    )


def sign(node: exp.Sign, ctx: Kinds) -> exp.Expr | None:
    kind = ctx.kind(node.this)
    if kind == "numeric":
        return _cast(node.copy(), "DECIMAL(1, 0)")
    if kind in ("int", "float"):
        return _cast(node.copy(), "DOUBLE")
    return None


def _error(code: str, message: str) -> exp.Expr:
    return exp.Anonymous(this="error", expressions=[exp.Literal.string(f"SQLSTATE {code}: {message}")])


def exponential(node: exp.Exp, ctx: Kinds) -> exp.Expr | None:
    """``exp(float8)`` whose result is out of range is PostgreSQL's error (22003, ``value out of
    range: overflow`` / ``underflow``), not DuckDB's Infinity or 0; ``exp(±Infinity)`` and
    ``exp(NaN)`` are their own answers, as there."""
    operand = node.this
    if ctx.kind(operand) != "float":
        return None
    finite = exp.Anonymous(this="isfinite", expressions=[operand.copy()])
    result = exp.Exp(this=operand.copy())
    overflow = exp.and_(finite, exp.Anonymous(this="isinf", expressions=[result.copy()]))
    underflow = exp.and_(finite.copy(), exp.EQ(this=result.copy(), expression=exp.Literal.number(0)))
    return exp.Case(
        ifs=[
            exp.If(this=overflow, true=_error("22003", "value out of range: overflow")),
            exp.If(this=underflow, true=_error("22003", "value out of range: underflow")),
        ],
        default=result,
    )


def int4_gcd(node: exp.Anonymous, ctx: Kinds) -> exp.Expr | None:
    """``gcd``/``lcm`` of two int4 are int4 in PostgreSQL; DuckDB's are bigint."""
    if str(node.this).lower() not in ("gcd", "lcm") or len(node.expressions) != 2:
        return None
    types = [ctx.type(arg) for arg in node.expressions]
    if all(t is not None and t.this == D.INT for t in types):
        return _cast(node.copy(), "INTEGER")
    return None


def widened_real(node: exp.Binary, ctx: Kinds) -> None:
    """A real (float4) with an integer, a numeric or a double: PostgreSQL computes it in double
    precision (``1.5::float4 * 3`` is a float8; DuckDB's is a real). The real operand is cast."""
    types = [ctx.type(part) for part in (node.this, node.expression)]
    reals = [t is not None and t.this == D.FLOAT for t in types]
    if reals[0] == reals[1]:
        return
    other = node.expression if reals[0] else node.this
    if ctx.kind(other) not in ("int", "numeric", "float"):
        return
    real = node.this if reals[0] else node.expression
    wide = _cast(real.copy(), "DOUBLE")
    wide.meta.update(real.meta)  # typed as a float still
    real.replace(wide)


def typed_null(node: exp.Binary, ctx: Kinds) -> None:
    """``revenue + NULL``: PostgreSQL gives the NULL the other operand's type (the result is a
    numeric); DuckDB types it NULL, which clients are told is text. The NULL is cast."""
    for null, other in ((node.this, node.expression), (node.expression, node.this)):
        datatype = ctx.type(other)
        if (
            isinstance(null, exp.Null)
            and datatype is not None
            and ctx.kind(other) in ("int", "numeric", "float")
        ):
            null.replace(exp.Cast(this=exp.Null(), to=datatype.copy()))
            return


def interval_times(node: exp.Mul, ctx: Kinds) -> exp.Expr | None:
    """``interval * integer`` out of range is PostgreSQL's ``interval out of range`` (22008), not
    DuckDB's (which casts the integer to int4 first: 22003)."""
    types = [ctx.type(part) for part in (node.this, node.expression)]
    is_interval = [t is not None and t.this == D.INTERVAL for t in types]
    kinds = [ctx.kind(part) for part in (node.this, node.expression)]
    if not (is_interval[0] and kinds[1] == "int" or is_interval[1] and kinds[0] == "int"):
        return None
    either_null = exp.or_(
        exp.Is(this=node.this.copy(), expression=exp.Null()),
        exp.Is(this=node.expression.copy(), expression=exp.Null()),
    )
    product = exp.Anonymous(this="try", expressions=[node.copy()])
    checked = exp.Coalesce(this=product, expressions=[_error("22008", "interval out of range")])
    return exp.Case(ifs=[exp.If(this=either_null, true=exp.Null())], default=checked)
