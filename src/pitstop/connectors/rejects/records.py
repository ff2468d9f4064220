"""What reading a file record by record uses in every format: the result (:class:`FileRead`), the
bisection that accepts a record exactly when the fast path does, the checks of a raw record (too
long, a NUL byte, not UTF-8, no event time), and how a reject and its reason are written."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pitstop.catalog.rows import WHOLE_FILE, Reject

if TYPE_CHECKING:
    import pyarrow as pa

RAW_LIMIT = 4096
"""Bytes of a rejected record's text that are kept (its full length is kept too)."""
MAX_RECORD_BYTES = 1 << 20
"""A longer record is rejected: it is pyarrow's JSON block size, which no record may exceed."""

Strict = Callable[[Any], "pa.Table"]
"""The fast path's reader: a path or a file object in, a table in the mapping's schema out."""
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class FileRead:
    """One data file's good records (in the mapping's schema) and its rejects, in line order."""

    table: pa.Table
    rejects: tuple[Reject, ...] = ()


def no_event_time(column: str) -> str:
    """Why a record without its event time is malformed. A mapping with a WATERMARK declares its
    event-time column; Spark's windows and watermark drop a row without one in silence (a NULL
    window is never closed), so such a record is a reject, kept, skipped or failed by
    ``'onError'`` (Flink fails a job on a NULL rowtime)."""
    return f"the record has no event time: column '{column}' (the mapping's WATERMARK) is missing or null"


def lacks_event_time(table: pa.Table, event_time: str | None) -> bool:
    return event_time is not None and table.column(event_time).null_count > 0


def accepted(items: Sequence[T], refused: Sequence[T]) -> list[T]:
    """The items :func:`bisect` accepted, in order: one per row of its tables, concatenated."""
    out = {id(item) for item in refused}
    return [item for item in items if id(item) not in out]


def without_event_time(
    table: pa.Table, items: Sequence[T], event_time: str | None
) -> tuple[pa.Table, list[T]]:
    """``table`` (one row per item of ``items``) without the rows whose event time is NULL, and
    those rows' items. After the values' own checks: a record with a malformed value is rejected
    for that value, which says more than a missing event time."""
    if not lacks_event_time(table, event_time):
        return table, []
    import pyarrow.compute as pc

    assert event_time is not None and table.num_rows == len(items)
    valid = pc.is_valid(table.column(event_time))
    return table.filter(valid), [item for item, ok in zip(items, valid.to_pylist(), strict=True) if not ok]


def holds_nul(table: pa.Table) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    return any(
        pc.any(pc.match_substring(table.column(f.name), "\0")).as_py()
        for f in table.schema
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
    )


def empty(schema: pa.Schema) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def fit_columns(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns matched to ``schema`` by name and cast; absent columns are null."""
    import pyarrow as pa

    columns = []
    for field in schema:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def reject(path: str, line: int, raw: bytes, reason: str, unit: str = "line") -> Reject:
    text = raw[:RAW_LIMIT].decode("utf-8", "backslashreplace")
    return Reject(path, line, text, len(raw), reason, unit)


def whole_file(path: str, data: bytes, schema: pa.Schema, reason: str) -> FileRead:
    return FileRead(empty(schema), (reject(path, WHOLE_FILE, data, reason),))


def bisect(items: Sequence[T], accept: Callable[[Sequence[T]], R]) -> tuple[list[R], list[T]]:
    """Split ``items`` into runs that ``accept`` takes (its results, in order) and single items
    it refuses. Costs about log2(n) extra calls per refused item."""
    if not items:
        return [], []
    try:
        return [accept(items)], []
    except Exception:  # noqa: BLE001 - a refusal, whatever its type
        if len(items) == 1:
            return [], [items[0]]
    mid = len(items) // 2
    left, left_bad = bisect(items[:mid], accept)
    right, right_bad = bisect(items[mid:], accept)
    return left + right, left_bad + right_bad


def concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    import pyarrow as pa

    return pa.concat_tables(tables) if tables else empty(schema)


def sql_type(t: pa.DataType) -> str:
    """A mapping column's type as the mapping declared it (near enough: for messages)."""
    import pyarrow as pa

    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    names = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.string(): "VARCHAR",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
        pa.binary(): "BINARY",
    }
    return names.get(t, str(t).upper())


def shown(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def first_error(probe: Callable[[T], object], arg: T) -> str | None:
    """The first line of what ``probe(arg)`` raises, or None if it succeeds."""
    try:
        probe(arg)
    except Exception as exc:  # noqa: BLE001 - the message is all we want
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def too_long(raw: bytes) -> str | None:
    if len(raw) > MAX_RECORD_BYTES:
        return (
            f"the record is {len(raw):,} bytes long, over the limit of {MAX_RECORD_BYTES:,} bytes "
            "for one record"
        )
    return None


def nul(raw: bytes) -> str | None:
    """A NUL byte is binary data in a text record: that record is rejected, not its file (a file
    whose every record is garbage is one reject, :func:`binary_file`)."""
    at = raw.find(b"\0")
    return None if at < 0 else f"the record holds a NUL byte (at byte {at + 1}): binary data, not text"


def binary_file(path: str, data: bytes, schema: pa.Schema, kind: str, count: int) -> FileRead | None:
    """One reject for a file none of whose ``count`` records is good and that holds NUL bytes:
    a binary file (an image, a gzip) dropped in the folder, not text with a bad line."""
    if b"\0" not in data:
        return None
    return whole_file(
        path,
        data,
        schema,
        f"the file is binary, not {kind}: it holds NUL bytes and none of its {count:,} records is good",
    )


def not_utf8(raw: bytes) -> str | None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the record is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1})"
    return None
