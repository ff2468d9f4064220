"""PostgreSQL's float8 where it overflows: arithmetic (:func:`checked`) and the aggregates ``sum``,
``avg``, ``stddev`` and ``variance`` (and their ``_pop``/``_samp``) of a double precision.

``+``, ``-``, ``*`` and ``/`` of a float8 whose result is infinite when neither operand was is
PostgreSQL's error (22003, ``value out of range: overflow``), and a product or quotient that is 0
of non-zero operands too (``underflow``); DuckDB answers Infinity and 0. The checks are SQL around
the operation where the operands are small, else Arrow functions (:data:`ARITHMETIC`) that read
each operand once.

The aggregates: PostgreSQL adds the rows up one by one, in the order it reads them, and checks
each step: a step whose result is infinite when its inputs were finite is an error (22003, ``value
out of range: overflow``). ``sum`` checks the running sum; ``avg``, ``stddev`` and ``variance`` share one
accumulator (Youngs-Cramer: N, Sx, Sxx) that also squares ``x * N - Sx``, so ``avg`` of 0.1 and
1e300 is an error although the mean is not large. Whether a step overflows depends on the order
of the rows (1e308, 1e308, -1e308 overflows; 1e308, -1e308, 1e308 does not), and once an infinite
input has been added nothing overflows any more. DuckDB sums in an order of its own and answers
Infinity or NaN.

So each such aggregate, given its finite inputs' count N and largest magnitude M, is:

1. DuckDB's number when no order of the rows can overflow: every partial sum is at most N * M,
   every square PostgreSQL takes at most (2 * N * M) ** 2 (:data:`_SUM_SAFE`, :data:`_SPREAD_SAFE`);
2. PostgreSQL's error when every input is finite and DuckDB's result is not (the sum overflows in
   any order);
3. otherwise an error (22003) that says the answer depends on the order the rows are summed, and
   what to write instead -- never a number PostgreSQL might not give.

The aggregate keeps the client's FILTER and OVER (each of the three is computed over the same rows
and frame).

``stddev`` and ``variance`` are also computed as PostgreSQL computes them (:func:`float8_spread`,
Youngs-Cramer over the values in the order DuckDB reads them, sorted for DISTINCT as PostgreSQL
sorts them): DuckDB's own (Welford's) differ in the last digits (``var_samp`` of 1, 2, 4, 4 is
2.2499999999999996 there, 2.25 in PostgreSQL). Where the two read the rows in different orders
(a large table scanned in parallel) the last digits may still differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from pitstop.server import pgfunctions
from pitstop.server.pgkinds import aggregated, under_wrappers
from pitstop.server.pgnumeric import NumericError

__all__ = ["ARITHMETIC", "aggregate", "checked", "float8_spread"]

D = exp.DType
_SUM_SAFE = 1e308
"""N * M at or below which no partial sum of N values of magnitude at most M overflows."""
_SPREAD_SAFE = 1e153
"""N * M at or below which no square PostgreSQL's float8_accum takes, (x * N - Sx) ** 2 with
|x * N - Sx| <= 2 * N * M, overflows (sqrt(DBL_MAX) / 2 is about 6.7e153)."""
_SPREADS: dict[type[exp.Expr], str] = {
    exp.Stddev: "stddev",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "variance",
    exp.VariancePop: "var_pop",
}
_OVERFLOW = "value out of range: overflow"
_FINALS = {"stddev": "stddev_samp", "variance": "var_samp"}


def float8_spread(values: list[float | None] | None, which: str) -> str | None:
    """``var_samp``, ``var_pop``, ``stddev_samp`` or ``stddev_pop`` of ``values`` (in this
    order) as PostgreSQL 15 computes them: float8_accum's Youngs-Cramer N, Sx, Sxx, then
    float8_var_samp's (and the others') final step; as the float's exact text (DuckDB turns a
    NaN a Python function returns into NULL). Overflow is not checked here: the SQL around it
    (:func:`aggregate`) calls it only where none can happen."""
    n = sx = sxx = 0.0
    for x in values or []:
        if x is None:
            continue
        previous = n
        n += 1.0
        sx += x
        if previous > 0.0:
            tmp = x * n - sx
            sxx += tmp * tmp / (n * previous)
            if math.isinf(sx) or math.isinf(sxx):
                sxx = math.nan
        elif math.isnan(x) or math.isinf(x):
            sxx = math.nan
    which = _FINALS.get(which, which)
    sample = which.endswith("_samp")
    if n <= (1.0 if sample else 0.0):
        return None
    if sxx <= 0.0:  # (roundoff: never a negative variance; NaN goes on)
        return "0.0"
    variance = sxx / (n - 1.0 if sample else n)
    return repr(math.sqrt(variance) if which.startswith("stddev") else variance)


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _error(message: str) -> exp.Expr:
    return _call("error", exp.Literal.string(f"SQLSTATE 22003: {message}"))


def _when_finite(value: exp.Expr, then: exp.Expr, finite: bool = True) -> exp.Expr:
    test: exp.Expr = _call("isfinite", value.copy())
    if not finite:
        test = exp.Not(this=test)
    return exp.Case(ifs=[exp.If(this=test, true=then)])


def _raise_if(condition: pa.Array | pa.ChunkedArray, code: str, message: str) -> None:
    if pc.any(condition).as_py():
        raise NumericError(code, message)


def _arithmetic(compute: Callable[..., Any], underflow: str) -> Callable[..., Any]:
    """A vectorised float8 operator (DuckDB calls it with Arrow arrays): PostgreSQL's result, or its
    error for the first row that overflows (an infinite result of finite operands) or underflows
    (``underflow``: "mul", a zero product of non-zero operands; "div", a zero quotient of a
    non-zero dividend by a finite divisor)."""

    def operator(a: pa.Array, b: pa.Array) -> pa.Array:
        if underflow == "div" and pc.any(pc.equal(b, 0.0)).as_py():  # float8div: NaN / 0 is NaN
            _raise_if(pc.and_(pc.equal(b, 0.0), pc.invert(pc.is_nan(a))), "22012", "division by zero")
        result = compute(a, b)
        if pc.any(pc.is_inf(result)).as_py():  # (rare: the checks only then)
            finite = pc.and_(pc.invert(pc.is_inf(a)), pc.invert(pc.is_inf(b)))
            _raise_if(pc.and_(pc.is_inf(result), finite), "22003", _OVERFLOW)
        if underflow and pc.any(pc.equal(result, 0.0)).as_py():
            other = pc.not_equal(b, 0.0) if underflow == "mul" else pc.invert(pc.is_inf(b))
            zero = pc.and_(pc.and_(pc.equal(result, 0.0), pc.not_equal(a, 0.0)), other)
            _raise_if(zero, "22003", "value out of range: underflow")
        return result

    return operator


ARITHMETIC: dict[str, Callable[..., Any]] = {
    "pgs_float8_add": _arithmetic(pc.add, ""),
    "pgs_float8_sub": _arithmetic(pc.subtract, ""),
    "pgs_float8_mul": _arithmetic(pc.multiply, "mul"),
    "pgs_float8_div": _arithmetic(pc.divide, "div"),
}
"""The float8 operators, by the name :mod:`pitstop.server.pgsemantics` registers each under (as
Arrow functions: each operand is read once, and a whole vector at a time)."""
_FUNCTIONS = {exp.Add: "pgs_float8_add", exp.Sub: "pgs_float8_sub", exp.Mul: "pgs_float8_mul",
              exp.Div: "pgs_float8_div"}  # fmt: skip


_INLINE_NODES = 80
"""Operands up to this many syntax nodes (together) are checked inline, in SQL that reads each
several times; larger ones (nested arithmetic, whose inline checks would repeat it fivefold per
level) go through a function of :data:`ARITHMETIC`, which reads them once but costs a call per
vector (~0.2 s per million rows)."""


def _small(a: exp.Expr, b: exp.Expr) -> bool:
    return sum(1 for _ in a.walk()) + sum(1 for _ in b.walk()) <= _INLINE_NODES


def _inline(function: str, a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """What the function of :data:`ARITHMETIC` computes, as SQL, for operands read several times."""
    operation = {"pgs_float8_add": exp.Add, "pgs_float8_sub": exp.Sub, "pgs_float8_mul": exp.Mul,
                 "pgs_float8_div": exp.Div}[function]  # fmt: skip
    zero = exp.Literal.number(0)
    ifs = []
    if operation is exp.Div:  # float8div: a zero divisor first (NaN / 0 is NaN)
        zero_divisor = exp.and_(
            exp.EQ(this=b.copy(), expression=zero.copy()), exp.Not(this=_call("isnan", a.copy()))
        )
        division_by_zero = _call("error", exp.Literal.string("SQLSTATE 22012: division by zero"))
        ifs.append(exp.If(this=zero_divisor, true=division_by_zero))
    result = exp.Paren(this=operation(this=a.copy(), expression=b.copy()))
    finite = exp.and_(exp.Not(this=_call("isinf", a.copy())), exp.Not(this=_call("isinf", b.copy())))
    ifs.append(exp.If(this=exp.and_(_call("isinf", result.copy()), finite), true=_error(_OVERFLOW)))
    if operation in (exp.Mul, exp.Div):
        other = (
            exp.NEQ(this=b.copy(), expression=zero.copy())
            if operation is exp.Mul
            else exp.Not(this=_call("isinf", b.copy()))
        )
        underflow = exp.and_(
            exp.EQ(this=result.copy(), expression=zero.copy()),
            exp.NEQ(this=a.copy(), expression=zero.copy()),
            other,
        )
        ifs.append(exp.If(this=underflow, true=_error("value out of range: underflow")))
    return exp.Case(ifs=ifs, default=result)


def checked(operation: exp.Binary, ctx: pgfunctions.Kinds) -> exp.Expr | None:
    """``a * b`` (``+``, ``-``, ``/``) of which one is a float8 and the other a number, as
    PostgreSQL computes it, its overflow and underflow errors included: inline SQL when the
    operands are small (:data:`_INLINE_NODES`), else a function of :data:`ARITHMETIC`; None for
    anything else."""
    a, b = operation.this, operation.expression
    kinds = {ctx.kind(a), ctx.kind(b)}
    types = [ctx.type(a), ctx.type(b)]
    doubles = any(t is not None and t.this == D.DOUBLE for t in types) or any(
        isinstance(x, exp.Cast) and x.to.this == D.DOUBLE for x in (a, b)
    )
    if "float" not in kinds or not kinds <= {"int", "numeric", "float"} or not doubles:
        return None
    double = exp.DataType.build("DOUBLE")
    left, right = exp.cast(a.copy(), double), exp.cast(b.copy(), double)
    function = _FUNCTIONS[type(operation)]
    if _small(a, b):
        return _inline(function, left, right)
    return _call(function, left, right)


def _advice(agg: exp.Expr, name: str, operand: exp.Expr) -> str:
    text = operand.sql(dialect="postgres")
    if isinstance(agg, exp.Sum | exp.Avg):
        return f"cast the values to numeric for an exact answer: {name}(({text})::numeric)"
    return f"scale the values down first, e.g. {name}(({text}) / 1e150) * 1e150"


_SEQUENTIAL_ROWS = 100_000
"""Rows up to which a spread is computed in PostgreSQL's order (:func:`float8_spread`, ~1.7 s per
million values); beyond, PostgreSQL's own answer depends on how its parallel workers split the
rows, and DuckDB's is used."""


def _spread(agg: exp.Expr, name: str, rewrap: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """``pgs_float8_spread(list(x), 'stddev')``: the values in the order read, sorted when DISTINCT
    (up to :data:`_SEQUENTIAL_ROWS` of them; DuckDB's own beyond)."""
    values: exp.Expr = rewrap(exp.Anonymous(this="list", expressions=[agg.this.copy()]))
    if isinstance(agg.this, exp.Distinct):
        values = _call("list_sort", values)
    spread = exp.cast(
        _call("pgs_float8_spread", values, exp.Literal.string(name)), exp.DataType.build("DOUBLE")
    )
    few = exp.LTE(
        this=rewrap(exp.Count(this=agg.this.copy())), expression=exp.Literal.number(_SEQUENTIAL_ROWS)
    )
    return exp.Case(ifs=[exp.If(this=few, true=spread)], default=rewrap(agg.copy()))


def aggregate(node: exp.Expr, ctx: pgfunctions.Kinds) -> exp.Expr | None:
    """A float8 ``sum``/``avg``/``stddev``/``variance`` as PostgreSQL answers it or an error
    (rewritten at the outermost of its FILTER and OVER); None for anything else."""
    if isinstance(node.parent, exp.Filter | exp.Window):
        return None
    agg, rewrap = under_wrappers(node)
    spread = type(agg) in _SPREADS
    if not (isinstance(agg, exp.Sum | exp.Avg) or spread):
        return None
    operand = aggregated(agg)
    source_type = ctx.type(operand)
    if source_type is None or source_type.this != D.DOUBLE:
        return None

    name = _SPREADS.get(type(agg)) or ("sum" if isinstance(agg, exp.Sum) else "avg")
    largest = rewrap(exp.Max(this=_when_finite(operand, exp.Abs(this=operand.copy()))))
    finite = rewrap(exp.Count(this=_when_finite(operand, exp.Literal.number(1))))
    infinite = rewrap(exp.Count(this=_when_finite(operand, exp.Literal.number(1), finite=False)))
    bound = exp.Literal.number(repr(_SPREAD_SAFE if isinstance(agg, exp.Avg) or spread else _SUM_SAFE))
    safe = exp.LTE(
        this=exp.Coalesce(this=exp.Mul(this=largest, expression=finite), expressions=[exp.Literal.number(0)]),
        expression=bound,
    )
    answer = node.copy() if not spread else _spread(agg, name, rewrap)
    overflowed = exp.and_(
        exp.EQ(this=infinite, expression=exp.Literal.number(0)),
        exp.Not(this=_call("isfinite", answer.copy())),
    )
    order = (
        f"{_OVERFLOW}: PostgreSQL's {name}(float8) of values this large overflows or not depending on "
        f"the order the rows are summed, which pitstop cannot follow; {_advice(agg, name, operand)}"
    )
    return exp.Case(
        ifs=[exp.If(this=safe, true=answer), exp.If(this=overflowed, true=_error(_OVERFLOW))],
        default=_error(order),
    )
