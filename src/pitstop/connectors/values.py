"""Values of a batch as sinks write them: Arrow timestamps as the naive UTC that sink tables hold,
and a row's values as JSON (the File and Console sinks, and Kafka records).
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa


def naive_utc(table: pa.Table) -> pa.Table:
    """Spark timestamps arrive as UTC instants; sinks store them as naive UTC timestamps."""
    columns = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type) and col.type.tz is not None:
            col = col.cast(pa.timestamp(col.type.unit))
        columns.append(col)
    return pa.Table.from_arrays(columns, names=table.column_names)


def json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    return str(value)
