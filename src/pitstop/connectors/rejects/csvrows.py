"""CSV rows read one by one: the line each row starts on, the header's columns, and which column's
value a row's conversion failed on."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pitstop.catalog.rows import Reject
from pitstop.connectors.rejects.records import (
    FileRead,
    Strict,
    accepted,
    binary_file,
    bisect,
    concat,
    empty,
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
class _Row:
    first: int  # the line it starts on
    raw: bytes
    fields: list[str]


def read_csv(
    path: str, data: bytes, schema: pa.Schema, header: bool, strict: Strict, event_time: str | None
) -> FileRead:
    text = data.decode("utf-8", "surrogateescape")  # invalid bytes survive, to be found per row
    physical = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        physical.pop()
    else:
        physical[-1] = physical[-1][:-1]
    rows, rejects = _csv_rows(path, physical)
    names = [f.name for f in schema]
    if header:
        if not rows:
            return FileRead(empty(schema), tuple(rejects))
        head = rows.pop(0)
        names = head.fields
        missing = [n for n in (f.name for f in schema) if n not in names]
        if missing:
            return whole_file(
                path,
                data,
                schema,
                f"the header has no column {', '.join(repr(m) for m in missing)}; "
                f"it has {', '.join(repr(n) for n in names)}",
            )
    good: list[_Row] = []
    for row in rows:
        reason = too_long(row.raw) or nul(row.raw) or not_utf8(row.raw)
        if reason is None and len(row.fields) != len(names):
            of = "the header has" if header else "the mapping has"
            reason = f"the row has {len(row.fields)} field(s); {of} {len(names)}"
        if reason is None:
            good.append(row)
        else:
            rejects.append(reject(path, row.first, row.raw, reason))
    if not good and len(rejects) > 1:
        binary = binary_file(path, data, schema, "CSV", len(rejects))
        if binary is not None:
            return binary

    def encode(fields_of_rows: Sequence[list[str]]) -> io.BytesIO:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if header:
            writer.writerow(names)
        writer.writerows(fields_of_rows)
        return io.BytesIO(out.getvalue().encode("utf-8"))

    def convert(rows: Sequence[list[str]]) -> pa.Table:
        return strict(encode(rows))

    tables, refused = bisect(good, lambda items: convert([r.fields for r in items]))
    for row in refused:
        reason = _csv_type_reason(row.fields, names, schema, convert)
        rejects.append(reject(path, row.first, row.raw, reason))
    table, timeless = without_event_time(concat(tables, schema), accepted(good, refused), event_time)
    rejects += [reject(path, row.first, row.raw, no_event_time(str(event_time))) for row in timeless]
    rejects.sort(key=lambda r: r.line)
    return FileRead(table, tuple(rejects))


def _csv_type_reason(
    fields: list[str], names: list[str], schema: pa.Schema, convert: Callable[[Sequence[list[str]]], object]
) -> str:
    """Which column's value the row's conversion failed on: each value alone in an empty row."""
    for field in schema:
        at = names.index(field.name)
        alone = ["" if i != at else fields[at] for i in range(len(names))]
        if first_error(convert, [alone]) is not None:
            return f"column '{field.name}' is {sql_type(field.type)} but the value is {shown(fields[at])}"
    return f"the row does not fit the mapping's columns ({first_error(convert, [fields])})"


def _csv_rows(path: str, physical: list[str]) -> tuple[list[_Row], list[Reject]]:
    """The file's rows with the line each starts on; rows Python's csv cannot parse are rejects."""
    rows: list[_Row] = []
    rejects: list[Reject] = []
    lines = iter(physical)
    reader = csv.reader(lines)
    done = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raw = "".join(physical[done : reader.line_num]).rstrip("\r\n").encode("utf-8", "surrogateescape")
            rejects.append(reject(path, done + 1, raw, f"the row is not valid CSV ({exc})"))
            done = reader.line_num
            continue
        raw = "".join(physical[done : reader.line_num]).rstrip("\r\n").encode("utf-8", "surrogateescape")
        if fields:
            rows.append(_Row(done + 1, raw, fields))
        done = reader.line_num
    return rows, rejects
