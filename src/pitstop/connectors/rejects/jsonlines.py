"""JSON records read one by one: the lines of a JSON-lines file, and Kafka values that each hold one
JSON value (:func:`json_values`)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pitstop.catalog.rows import Reject
from pitstop.connectors.rejects.records import (
    MAX_RECORD_BYTES,
    FileRead,
    Strict,
    accepted,
    binary_file,
    bisect,
    concat,
    first_error,
    no_event_time,
    not_utf8,
    nul,
    reject,
    shown,
    sql_type,
    too_long,
    whole_file,
    without_event_time,
)

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class _Line:
    number: int
    raw: bytes
    value: Any = None


def read_json(path: str, data: bytes, schema: pa.Schema, strict: Strict, event_time: str | None) -> FileRead:
    lines = data.split(b"\n")
    open_end = not data.endswith(b"\n")
    rejects: list[Reject] = []
    records: list[_Line] = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix(b"\r")
        if not line.strip():
            continue
        reason, value = _json_record(line, last=open_end and number == len(lines))
        if reason is None:
            records.append(_Line(number, line, value))
        else:
            rejects.append(reject(path, number, line, reason))
    if not records and len(rejects) > 1 and not any(r.raw_bytes > MAX_RECORD_BYTES for r in rejects):
        binary = binary_file(path, data, schema, "JSON lines", len(rejects))
        if binary is not None:
            return binary
        first = rejects[0]
        return whole_file(
            path,
            data,
            schema,
            f"the file is not JSON lines: none of its {len(rejects):,} lines is a JSON object "
            f"(line {first.line}: {first.reason})",
        )

    def convert(items: Sequence[_Line]) -> pa.Table:
        return strict(io.BytesIO(b"\n".join(item.raw for item in items)))

    tables, refused = bisect(records, convert)
    for item in refused:
        rejects.append(reject(path, item.number, item.raw, _json_type_reason(item, schema, strict)))
    table, timeless = without_event_time(concat(tables, schema), accepted(records, refused), event_time)
    rejects += [reject(path, item.number, item.raw, no_event_time(str(event_time))) for item in timeless]
    rejects.sort(key=lambda r: r.line)
    return FileRead(table, tuple(rejects))


def json_values(
    raws: Sequence[bytes], schema: pa.Schema, strict: Strict, event_time: str | None = None
) -> tuple[pa.Table, list[tuple[int, str]]]:
    """Records that each hold one JSON value (Kafka values, not lines of a file): the good ones
    as a table in ``schema``, in order, and ``(index, reason)`` for each malformed one. Step 2 of
    the module's protocol, without the whole-file verdict (every record stands alone)."""
    bad: list[tuple[int, str]] = []
    records: list[_Line] = []
    for index, raw in enumerate(raws):
        reason, value = _json_record(raw, last=False)
        if reason is None:
            one_line = raw if b"\n" not in raw else json.dumps(value).encode()
            records.append(_Line(index, one_line, value))
        else:
            bad.append((index, reason.replace("the line is", "the value is")))

    def convert(items: Sequence[_Line]) -> pa.Table:
        return strict(io.BytesIO(b"\n".join(item.raw for item in items)))

    tables, refused = bisect(records, convert)
    bad += [(item.number, _json_type_reason(item, schema, strict)) for item in refused]
    table, timeless = without_event_time(concat(tables, schema), accepted(records, refused), event_time)
    bad += [(item.number, no_event_time(str(event_time))) for item in timeless]
    bad.sort()
    return table, bad


def _json_record(line: bytes, last: bool) -> tuple[str | None, Any]:
    """``(reason, None)`` if the line is no JSON object, else ``(None, the object)``."""
    reason = too_long(line) or nul(line) or not_utf8(line)
    if reason is not None:
        return reason, None
    try:
        value = json.loads(line)
    except ValueError as exc:
        detail = f"{getattr(exc, 'msg', str(exc)).lower()} at column {getattr(exc, 'colno', '?')}"
        if last:
            return f"the file's last line is cut short ({detail}); it has no newline at its end", None
        return f"the line is not valid JSON ({detail})", None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")
        return f"the line is {kind}, not a JSON object" if value is not None else "the line is null", None
    return None, value


def _json_type_reason(item: _Line, schema: pa.Schema, strict: Strict) -> str:
    for field in schema:
        if field.name in item.value:
            value = item.value[field.name]
            one = json.dumps({field.name: value}).encode()
            if first_error(strict, io.BytesIO(one)) is not None:
                return f"column '{field.name}' is {sql_type(field.type)} but the value is {shown(value)}"
    error = first_error(strict, io.BytesIO(item.raw))
    return f"the record does not fit the mapping's columns ({error})"
