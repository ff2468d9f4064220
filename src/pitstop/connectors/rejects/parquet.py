"""Parquet rows read one by one: the file's columns matched to the mapping's, and each row whose
value cannot be cast (or has no event time) rejected."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from pitstop.connectors.rejects.records import (
    FileRead,
    bisect,
    fit_columns,
    no_event_time,
    reject,
    shown,
    sql_type,
    whole_file,
)

if TYPE_CHECKING:
    import pyarrow as pa


def read_parquet(path: str, data: bytes, schema: pa.Schema, event_time: str | None) -> FileRead:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any reason it is not Parquet
        return whole_file(path, data, schema, f"the file is not readable Parquet ({exc})")
    present = [f for f in schema if f.name in table.column_names]
    if not present:
        return whole_file(
            path,
            data,
            schema,
            f"the file has none of the mapping's columns: it has {', '.join(table.column_names)}; "
            f"the mapping has {', '.join(schema.names)}",
        )
    bad: dict[int, str] = {}
    for field in present:
        column = table.column(field.name).combine_chunks()
        try:
            pa.array([], column.type).cast(field.type)
        except pa.ArrowNotImplementedError:
            return whole_file(
                path,
                data,
                schema,
                f"column '{field.name}' is {column.type} in the file, which cannot become the "
                f"mapping's {sql_type(field.type)}",
            )
        _, refused = bisect(list(range(len(column))), partial(_take_cast, column, field.type))
        for row in refused:
            bad.setdefault(
                row,
                f"column '{field.name}' is {sql_type(field.type)} but the value is "
                f"{shown(column[row].as_py())}",
            )
    if event_time is not None:
        times = table.column(event_time) if event_time in table.column_names else None
        for row in range(table.num_rows):
            if times is None or not times[row].is_valid:
                bad.setdefault(row, no_event_time(event_time))
    keep = [i for i in range(table.num_rows) if i not in bad]
    rejects = []
    for row, reason in sorted(bad.items()):
        raw = json.dumps(table.slice(row, 1).to_pylist()[0], default=str, ensure_ascii=False).encode()
        rejects.append(reject(path, row + 1, raw, reason, unit="row"))
    return FileRead(fit_columns(table.take(keep), schema), tuple(rejects))


def _take_cast(column: pa.Array, to: pa.DataType, rows: Sequence[int]) -> pa.Array:
    return column.take(rows).cast(to)
