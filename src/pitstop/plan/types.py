"""Types of job expressions, inferred with sqlglot against mapping schemas (no Spark needed)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from pitstop.errors import PlanError
from pitstop.names import quote_ident

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from pitstop.catalog.rows import Mapping

SPARK = "spark"
_INTEGRAL = {"TINYINT", "SMALLINT", "INT", "BIGINT"}
_FLOATING = {"FLOAT", "DOUBLE"}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def named(sql: str, name: str) -> str:
    """``sql AS `name```: a column of a ``selectExpr``. A DataFrame built from SQL text costs one
    JVM round trip per select, where a ``Column`` costs several per column (measured: a running
    aggregate's CREATE JOB made 359 py4j calls, most of them building columns one by one)."""
    return f"{sql} AS {quote_ident(name, SPARK)}"


def spark_type(sql_type: str) -> str:
    """Normalise a declared type (as written in a mapping) to Spark SQL type text."""
    dt = exp.DataType.build(sql_type, dialect=SPARK)
    return normalise(dt.sql(SPARK))


def normalise(text: str) -> str:
    text = text.upper().replace(" ", "")
    return {"INTEGER": "INT", "VARCHAR": "STRING", "TEXT": "STRING", "REAL": "FLOAT"}.get(text, text)


def infer(expression: exp.Expression, table: str, columns: dict[str, str]) -> str:
    """Spark SQL type of ``expression`` evaluated over rows of ``table`` with ``columns``."""
    schema: dict[str, object] = {table: dict(columns)}
    select = exp.select(expression.copy().as_("__x")).from_(exp.to_table(table))
    try:
        qualified = qualify(select, schema=schema, dialect=SPARK, validate_qualify_columns=True)
        annotated = annotate_types(qualified, schema=schema, dialect=SPARK)
    except OptimizeError as exc:
        raise PlanError(f"{exc} (in {expression.sql(SPARK)!s}; known columns: {', '.join(columns)})") from exc
    dtype = annotated.expressions[0].type
    text = normalise(dtype.sql(SPARK)) if dtype is not None else "UNKNOWN"
    if text in ("UNKNOWN", "NULL"):
        raise PlanError(f"cannot tell the type of {expression.sql(SPARK)}; wrap it in CAST(... AS type)")
    return text


def sum_type(input_type: str) -> str | None:
    """Type of SUM over ``input_type`` (Spark's rule), or None when SUM does not apply."""
    if input_type in _INTEGRAL:
        return "BIGINT"
    if input_type in _FLOATING:
        return "DOUBLE"
    m = _DECIMAL.fullmatch(input_type)
    if m:
        return f"DECIMAL({min(38, int(m.group(1)) + 10)},{m.group(2)})"
    return None


def decimal_parts(type_text: str) -> tuple[int, int] | None:
    m = _DECIMAL.fullmatch(type_text)
    return None if m is None else (int(m.group(1)), int(m.group(2)))


def parse_spark(sql: str) -> exp.Expression:
    node = sqlglot.parse_one(sql, dialect=SPARK)
    assert isinstance(node, exp.Expression)
    return node


def ddl(mapping: Mapping) -> str:
    """A mapping's columns as a Spark schema string."""
    return ", ".join(f"{quote_ident(c.name, SPARK)} {spark_type(c.type)}" for c in mapping.columns)


_INTEGRAL_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def widens(old: str, new: str) -> bool:
    """Whether a state column of type ``old`` casts to ``new`` without loss: a longer integer,
    FLOAT to DOUBLE, or a DECIMAL with more digits before the point and the same scale; and a
    STRUCT or ARRAY of such (a ``MIN_BY``'s pair, a ``COUNT(DISTINCT x)``'s set of x, x widened),
    field by field (the same names, in the same order) or element by element."""
    if old == new:
        return True
    if old in _INTEGRAL_ORDER and new in _INTEGRAL_ORDER:
        return _INTEGRAL_ORDER.index(old) < _INTEGRAL_ORDER.index(new)
    if (old, new) == ("FLOAT", "DOUBLE"):
        return True
    was, now = _nested(old), _nested(new)
    if was is not None and now is not None:
        return (
            was[0] == now[0]
            and [n for n, _ in was[1]] == [n for n, _ in now[1]]
            and all(widens(a, b) for (_, a), (_, b) in zip(was[1], now[1], strict=True))
        )
    before, after = decimal_parts(old), decimal_parts(new)
    return before is not None and after is not None and after[1] == before[1] and after[0] > before[0]


_NESTED = re.compile(r"(ARRAY|STRUCT)<(.*)>", re.IGNORECASE | re.DOTALL)


def _nested(type_text: str) -> tuple[str, list[tuple[str, str]]] | None:
    """``ARRAY<t>`` as ("ARRAY", [("", t)]), ``STRUCT<a: t, ...>`` as ("STRUCT", [("a", t), ...]);
    None for any other type."""
    m = _NESTED.fullmatch(type_text.strip())
    if m is None:
        return None
    kind, body = m.group(1).upper(), m.group(2)
    if kind == "ARRAY":
        return kind, [("", body.strip())]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    fields = []
    for item in items:
        name, colon, typ = item.partition(":")
        if not colon:
            return None
        fields.append((name.strip(), typ.strip()))
    return kind, fields


def arrow_schema(schema: StructType) -> pa.Schema:
    """A Spark schema as Arrow's, as pitstop's readers and snapshots write it (UTC timestamps)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
