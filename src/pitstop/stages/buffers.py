"""How an aggregating stage's accumulators run in Spark and read back from its state (the Spark
side of :mod:`pitstop.stages.accumulators`), for every aggregating kind.

Each accumulator kind has, per row entering the aggregation, one or two **input columns**, a
**merge** over them, and the **buffers** Spark keeps for that merge in the operator's state
(checked on pyspark 4.3.0 with the state data source):

=======  ===========================  =====================================  =========================
kind     input column(s)              merge                                  Spark's state buffer(s)
=======  ===========================  =====================================  =========================
count    the count (BIGINT)           ``sum``                                 bigint (a DECIMAL: the
sum      the value                    ``sum``                                 sum and an "empty" flag)
min/max  the value (a STRUCT<ord,     ``min`` / ``max`` (a struct orders by   the value's type
         val> for ``MIN_BY`` /        its fields in turn)
         ``MAX_BY``)
set      one element (a seed row's    ``collect_set``                         binary: an UnsafeRow of
         set arrives one element a                                            one ARRAY field (decoded
         row)                                                                 by :func:`decode_set`)
hll      ``acc`` the seed's sketch    ``hll_union(hll_sketch_agg(acc__in),    binary, binary: the two
         (BINARY), ``acc__in`` the    hll_union_agg(acc))``                   sketches (an empty
         live value (STRING)                                                  union is stored as b'')
=======  ===========================  =====================================  =========================

Seeds (the snapshot's rows) are in the state contract's form (``set`` an ARRAY, ``hll`` a
sketch): :func:`seed_inputs` turns them into input rows; a seed row holding sets becomes one row
per element (the other accumulators ride on its first row only, so they are merged once).
"""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pitstop.plan.model import MERGE_FUNCTION, Accumulator, AggregateStage
from pitstop.plan.types import decimal_parts, named

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

SET_ELEMENT_TYPES = (
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "BOOLEAN",
    "DATE",
    "TIMESTAMP",
    "STRING",
)
"""Element types an exact distinct set holds (and DECIMAL up to 18 digits): those whose Spark
buffer :func:`decode_set` reads."""


def element_type(acc: Accumulator) -> str:
    """The element type of a ``set`` accumulator's ARRAY<T>."""
    assert acc.type.startswith("ARRAY<") and acc.type.endswith(">"), acc.type
    return acc.type[len("ARRAY<") : -1]


def input_type(acc: Accumulator) -> str:
    """The type of the accumulator's input column on a live row."""
    if acc.kind == "set":
        return element_type(acc)
    if acc.kind == "hll":
        return "STRING"
    return acc.type


def row_columns(stage: AggregateStage) -> list[str]:
    """The input columns of the stage's accumulators, in order."""
    names: list[str] = []
    for a in stage.accumulators:
        names.append(a.name)
        if a.kind == "hll":
            names.append(f"{a.name}__in")
    return names


def live_inputs(stage: AggregateStage) -> list[str]:
    """A live row's input columns (over the stage's input layer), as ``selectExpr`` SQL."""
    cols: list[str] = []
    for a in stage.accumulators:
        if a.kind == "hll":
            cols.append(named("CAST(NULL AS BINARY)", a.name))
            cols.append(named(f"CAST(({a.input_sql}) AS STRING)", f"{a.name}__in"))
        else:
            cols.append(named(f"CAST(({a.input_sql}) AS {input_type(a)})", a.name))
    return cols


def seed_inputs(seeds: DataFrame, stage: AggregateStage) -> DataFrame:
    """Seed rows (accumulators in the state contract's form, other columns kept) as input rows."""
    from pyspark.sql import functions as F

    names = {a.name for a in stage.accumulators}
    sets = [a for a in stage.accumulators if a.kind == "set"]
    if sets:
        sizes = ", ".join(f"coalesce(size({a.name}), 0)" for a in sets)
        seeds = seeds.withColumn("__i", F.explode(F.expr(f"sequence(0, greatest(1, {sizes}) - 1)")))
    cols: list[Column] = []
    for a in stage.accumulators:
        if a.kind == "set":
            cols.append(F.expr(f"try_element_at({a.name}, __i + 1)").cast(input_type(a)).alias(a.name))
            continue
        value = F.expr(f"IF(__i = 0, {a.name}, NULL)") if sets else F.col(a.name)
        cols.append(value.cast(a.type).alias(a.name))
        if a.kind == "hll":
            cols.append(F.lit(None).cast("STRING").alias(f"{a.name}__in"))
    kept = [F.col(f"`{c}`") for c in seeds.columns if c not in names and c != "__i"]
    return seeds.select(*kept, *cols)


def merge_sql(acc: Accumulator) -> str:
    """The aggregate expression that merges the accumulator's input columns."""
    if acc.kind == "set":
        return f"collect_set({acc.name})"
    if acc.kind == "hll":
        return f"hll_union(hll_sketch_agg({acc.name}__in), hll_union_agg({acc.name}))"
    return f"{MERGE_FUNCTION[acc.kind]}({acc.name})"


def merges(stage: AggregateStage) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.expr(named(merge_sql(a), a.name)) for a in stage.accumulators]


# -- reading state ---------------------------------------------------------------------------------
def expected_buffer(stage: AggregateStage) -> list[tuple[str, str]]:
    """The state value fields Spark keeps for the stage's accumulators: (our name, Spark type)."""
    fields: list[tuple[str, str]] = []
    for a in stage.accumulators:
        parts = decimal_parts(a.type)
        if a.kind in ("sum", "count") and parts is not None:
            fields.append((a.name, f"decimal({min(38, parts[0] + 10)},{parts[1]})"))
            fields.append((f"{a.name}__empty", "boolean"))
        elif a.kind == "set":
            fields.append((a.name, "binary"))
        elif a.kind == "hll":
            fields.append((a.name, "binary"))
            fields.append((f"{a.name}__seeds", "binary"))
        else:
            fields.append((a.name, a.type.lower().replace(" ", "")))
    return fields


def state_columns(stage: AggregateStage, value: str) -> list[Column]:
    """The accumulators in the state contract's form, over the buffers of struct ``value`` (named
    as :func:`expected_buffer` says); a ``set`` is still its binary buffer (:func:`decode_sets`)."""
    from pyspark.sql import functions as F

    cols: list[Column] = []
    for a in stage.accumulators:
        if a.kind == "set":
            cols.append(F.col(f"{value}.{a.name}").alias(a.name))
        elif a.kind == "hll":
            live, seeds = f"{value}.{a.name}", f"{value}.{a.name}__seeds"
            cols.append(
                F.expr(
                    f"CASE WHEN coalesce(length({seeds}), 0) = 0 THEN nullif({live}, X'') "
                    f"WHEN coalesce(length({live}), 0) = 0 THEN {seeds} ELSE hll_union({live}, {seeds}) END"
                ).alias(a.name)
            )
        else:
            cols.append(F.col(f"{value}.{a.name}").cast(a.type).alias(a.name))
    return cols


def decode_sets(table: pa.Table, stage: AggregateStage, schema: pa.Schema) -> pa.Table:
    """``table`` with each ``set`` accumulator's binary buffer decoded into its list of values."""
    import pyarrow as pa

    for a in stage.accumulators:
        if a.kind != "set":
            continue
        i = table.schema.get_field_index(a.name)
        target = schema.field(a.name).type
        values = [None if b is None else decode_set(b, element_type(a)) for b in table.column(i).to_pylist()]
        table = table.set_column(i, a.name, pa.array(values, type=target))
    return table


_FIXED = {
    "BOOLEAN": ("<?", 1),
    "TINYINT": ("<b", 1),
    "SMALLINT": ("<h", 2),
    "INT": ("<i", 4),
    "DATE": ("<i", 4),
    "FLOAT": ("<f", 4),
    "BIGINT": ("<q", 8),
    "TIMESTAMP": ("<q", 8),
    "DOUBLE": ("<d", 8),
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def decode_set(buf: bytes, element: str) -> list[Any]:
    """The values of ``collect_set``'s serialized buffer: an UnsafeRow of one field, an
    UnsafeArrayData (Spark's ``Collect.serialize``), little-endian.

    1. The row: an 8-byte null bitset, then the field's word: offset (high 32 bits) and size.
    2. The array at that offset: its element count (8 bytes), a null bitset of 8 bytes per 64
       elements, then one slot per element: the value itself (fixed width), or for a STRING the
       word of offset (from the array's start) and size of its UTF-8 bytes."""
    # Step 1.
    (word,) = struct.unpack_from("<q", buf, 8)
    start = word >> 32
    # Step 2.
    (n,) = struct.unpack_from("<q", buf, start)
    slots = start + 8 + ((n + 63) // 64) * 8
    out: list[Any] = []
    parts = decimal_parts(element)
    for i in range(n):
        if buf[start + 8 + i // 8] >> (i % 8) & 1:
            out.append(None)
        elif element == "STRING":
            (w,) = struct.unpack_from("<q", buf, slots + 8 * i)
            off, size = w >> 32, w & 0xFFFFFFFF
            out.append(buf[start + off : start + off + size].decode("utf-8"))
        elif parts is not None:
            (unscaled,) = struct.unpack_from("<q", buf, slots + 8 * i)
            out.append(Decimal(unscaled).scaleb(-parts[1]))
        else:
            fmt, width = _FIXED[element]
            (v,) = struct.unpack_from(fmt, buf, slots + width * i)
            if element == "DATE":
                v = date(1970, 1, 1) + timedelta(days=v)
            elif element == "TIMESTAMP":
                v = _EPOCH + timedelta(microseconds=v)
            out.append(v)
    return out
