"""Malformed records: good records go on, bad ones never stop a job and are never dropped silently.

A File mapping's ``'onError'`` option says what a malformed record does (Spark's ``mode``,
Flink's ``ignore-parse-errors``):

- ``keep`` (the default): it goes to ``pitstop.rejects`` with its file, line, raw text (the first
  4 KB, and its full length) and the reason, and the job goes on;
- ``skip``: the same row without the raw text (still keyed by file and line: counts are exact);
- ``fail``: the job fails, with the file, the line and the reason in its status.

Reading one file (in Spark's Python workers, which cannot write the catalog):

1. Read the whole file with the fast path (pyarrow's reader and the mapping's schema). Most
   files end here, at pyarrow's speed.
2. Only if that fails, read it again record by record: split it into lines (CSV: rows), reject
   what is not a record at all (invalid UTF-8, not JSON, a wrong number of fields, over
   ``MAX_RECORD_BYTES``), and convert the rest with the fast path's own reader, halving the set
   around each failure, so that a record is accepted exactly when the fast path accepts it.
3. Write the file's rejects to ``<run>/sources/<source>/rejects/<file name>.jsonl`` (temp file +
   rename) before its records go on. A file's rejects are a pure function of its bytes, so a
   file read again after a crash or a replayed batch rewrites the same file.

The manager, the only writer of the catalog, ingests those files into ``pitstop.rejects``, whose
primary key ``(job, source, file, line)`` makes ingesting a file twice harmless. It does so every
second while a job runs, at ``AWAIT JOB``, and when a run stops, fails or is dropped. A job
restored from a snapshot does not read again the files consumed before the cut, so it never
rejects a record twice.
"""

from __future__ import annotations

import csv
import io
import json
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pitstop.catalog.rows import WHOLE_FILE, Reject
from pitstop.connectors import positions
from pitstop.errors import RejectedRecordError

if TYPE_CHECKING:
    import pyarrow as pa

ON_ERROR = "onError"
RAW_LIMIT = 4096
"""Bytes of a rejected record's text that are kept (its full length is kept too)."""
MAX_RECORD_BYTES = 1 << 20
"""A longer record is rejected: it is pyarrow's JSON block size, which no record may exceed."""
REJECTS_DIR = "rejects"

Strict = Callable[[Any], "pa.Table"]
"""The fast path's reader: a path or a file object in, a table in the mapping's schema out."""
T = TypeVar("T")
R = TypeVar("R")


# -- reading a file ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileRead:
    """One data file's good records (in the mapping's schema) and its rejects, in line order."""

    table: pa.Table
    rejects: tuple[Reject, ...] = ()


def read_file(
    path: str, fmt: str, schema: pa.Schema, header: bool, strict: Strict, event_time: str | None = None
) -> FileRead:
    """Steps 1 and 2 of the module's protocol. Errors reading the file itself (missing, no
    permission) are raised, not rejected: they are not the records' fault. ``event_time``: the
    mapping's WATERMARK column, which a record must hold (:func:`no_event_time`)."""
    # Step 1. The fast path. (pyarrow's CSV reader takes a NUL byte into a string, where its JSON
    # reader refuses it: such a CSV file is read record by record too, and the row rejected.)
    try:
        table = strict(path)
    except Exception:  # noqa: BLE001 - whatever pyarrow refused, look at the records one by one
        pass
    else:
        if not (fmt == "csv" and _holds_nul(table)) and not _timeless(table, event_time):
            return FileRead(table)
    # Step 2. Record by record.
    data = Path(path).read_bytes()
    if not data.strip():
        return FileRead(empty(schema))  # an empty file holds zero records
    if fmt == "parquet":
        return _parquet(path, data, schema, event_time)
    if fmt == "json":
        return _json(path, data, schema, strict, event_time)
    return _csv(path, data, schema, header, strict, event_time)


def no_event_time(column: str) -> str:
    """Why a record without its event time is malformed. A mapping with a WATERMARK declares its
    event-time column; Spark's windows and watermark drop a row without one in silence (a NULL
    window is never closed), so such a record is a reject, kept, skipped or failed by
    ``'onError'`` (Flink fails a job on a NULL rowtime)."""
    return f"the record has no event time: column '{column}' (the mapping's WATERMARK) is missing or null"


def _timeless(table: pa.Table, event_time: str | None) -> bool:
    return event_time is not None and table.column(event_time).null_count > 0


def _accepted(items: Sequence[T], refused: Sequence[T]) -> list[T]:
    """The items :func:`_bisect` accepted, in order: one per row of its tables, concatenated."""
    out = {id(item) for item in refused}
    return [item for item in items if id(item) not in out]


def _without_event_time(
    table: pa.Table, items: Sequence[T], event_time: str | None
) -> tuple[pa.Table, list[T]]:
    """``table`` (one row per item of ``items``) without the rows whose event time is NULL, and
    those rows' items. After the values' own checks: a record with a malformed value is rejected
    for that value, which says more than a missing event time."""
    if not _timeless(table, event_time):
        return table, []
    import pyarrow.compute as pc

    assert event_time is not None and table.num_rows == len(items)
    valid = pc.is_valid(table.column(event_time))
    return table.filter(valid), [item for item, ok in zip(items, valid.to_pylist(), strict=True) if not ok]


def _holds_nul(table: pa.Table) -> bool:
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


def _reject(path: str, line: int, raw: bytes, reason: str, unit: str = "line") -> Reject:
    text = raw[:RAW_LIMIT].decode("utf-8", "backslashreplace")
    return Reject(path, line, text, len(raw), reason, unit)


def _whole_file(path: str, data: bytes, schema: pa.Schema, reason: str) -> FileRead:
    return FileRead(empty(schema), (_reject(path, WHOLE_FILE, data, reason),))


def _bisect(items: Sequence[T], accept: Callable[[Sequence[T]], R]) -> tuple[list[R], list[T]]:
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
    left, left_bad = _bisect(items[:mid], accept)
    right, right_bad = _bisect(items[mid:], accept)
    return left + right, left_bad + right_bad


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
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


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_error(probe: Callable[[T], object], arg: T) -> str | None:
    """The first line of what ``probe(arg)`` raises, or None if it succeeds."""
    try:
        probe(arg)
    except Exception as exc:  # noqa: BLE001 - the message is all we want
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def _too_long(raw: bytes) -> str | None:
    if len(raw) > MAX_RECORD_BYTES:
        return (
            f"the record is {len(raw):,} bytes long, over the limit of {MAX_RECORD_BYTES:,} bytes "
            "for one record"
        )
    return None


def _nul(raw: bytes) -> str | None:
    """A NUL byte is binary data in a text record: that record is rejected, not its file (a file
    whose every record is garbage is one reject, :func:`_binary`)."""
    at = raw.find(b"\0")
    return None if at < 0 else f"the record holds a NUL byte (at byte {at + 1}): binary data, not text"


def _binary(path: str, data: bytes, schema: pa.Schema, kind: str, count: int) -> FileRead | None:
    """One reject for a file none of whose ``count`` records is good and that holds NUL bytes:
    a binary file (an image, a gzip) dropped in the folder, not text with a bad line."""
    if b"\0" not in data:
        return None
    return _whole_file(
        path,
        data,
        schema,
        f"the file is binary, not {kind}: it holds NUL bytes and none of its {count:,} records is good",
    )


def _not_utf8(raw: bytes) -> str | None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the record is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1})"
    return None


# -- JSON lines --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Line:
    number: int
    raw: bytes
    value: Any = None


def _json(path: str, data: bytes, schema: pa.Schema, strict: Strict, event_time: str | None) -> FileRead:
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
            rejects.append(_reject(path, number, line, reason))
    if not records and len(rejects) > 1 and not any(r.raw_bytes > MAX_RECORD_BYTES for r in rejects):
        binary = _binary(path, data, schema, "JSON lines", len(rejects))
        if binary is not None:
            return binary
        first = rejects[0]
        return _whole_file(
            path,
            data,
            schema,
            f"the file is not JSON lines: none of its {len(rejects):,} lines is a JSON object "
            f"(line {first.line}: {first.reason})",
        )

    def convert(items: Sequence[_Line]) -> pa.Table:
        return strict(io.BytesIO(b"\n".join(item.raw for item in items)))

    tables, refused = _bisect(records, convert)
    for item in refused:
        rejects.append(_reject(path, item.number, item.raw, _json_type_reason(item, schema, strict)))
    table, timeless = _without_event_time(_concat(tables, schema), _accepted(records, refused), event_time)
    rejects += [_reject(path, item.number, item.raw, no_event_time(str(event_time))) for item in timeless]
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

    tables, refused = _bisect(records, convert)
    bad += [(item.number, _json_type_reason(item, schema, strict)) for item in refused]
    table, timeless = _without_event_time(_concat(tables, schema), _accepted(records, refused), event_time)
    bad += [(item.number, no_event_time(str(event_time))) for item in timeless]
    bad.sort()
    return table, bad


def _json_record(line: bytes, last: bool) -> tuple[str | None, Any]:
    """``(reason, None)`` if the line is no JSON object, else ``(None, the object)``."""
    reason = _too_long(line) or _nul(line) or _not_utf8(line)
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
            if _first_error(strict, io.BytesIO(one)) is not None:
                return f"column '{field.name}' is {sql_type(field.type)} but the value is {_shown(value)}"
    error = _first_error(strict, io.BytesIO(item.raw))
    return f"the record does not fit the mapping's columns ({error})"


# -- CSV ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Row:
    first: int  # the line it starts on
    raw: bytes
    fields: list[str]


def _csv(
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
            return _whole_file(
                path,
                data,
                schema,
                f"the header has no column {', '.join(repr(m) for m in missing)}; "
                f"it has {', '.join(repr(n) for n in names)}",
            )
    good: list[_Row] = []
    for row in rows:
        reason = _too_long(row.raw) or _nul(row.raw) or _not_utf8(row.raw)
        if reason is None and len(row.fields) != len(names):
            of = "the header has" if header else "the mapping has"
            reason = f"the row has {len(row.fields)} field(s); {of} {len(names)}"
        if reason is None:
            good.append(row)
        else:
            rejects.append(_reject(path, row.first, row.raw, reason))
    if not good and len(rejects) > 1:
        binary = _binary(path, data, schema, "CSV", len(rejects))
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

    tables, refused = _bisect(good, lambda items: convert([r.fields for r in items]))
    for row in refused:
        reason = _csv_type_reason(row.fields, names, schema, convert)
        rejects.append(_reject(path, row.first, row.raw, reason))
    table, timeless = _without_event_time(_concat(tables, schema), _accepted(good, refused), event_time)
    rejects += [_reject(path, row.first, row.raw, no_event_time(str(event_time))) for row in timeless]
    rejects.sort(key=lambda r: r.line)
    return FileRead(table, tuple(rejects))


def _csv_type_reason(
    fields: list[str], names: list[str], schema: pa.Schema, convert: Callable[[Sequence[list[str]]], object]
) -> str:
    """Which column's value the row's conversion failed on: each value alone in an empty row."""
    for field in schema:
        at = names.index(field.name)
        alone = ["" if i != at else fields[at] for i in range(len(names))]
        if _first_error(convert, [alone]) is not None:
            return f"column '{field.name}' is {sql_type(field.type)} but the value is {_shown(fields[at])}"
    return f"the row does not fit the mapping's columns ({_first_error(convert, [fields])})"


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
            rejects.append(_reject(path, done + 1, raw, f"the row is not valid CSV ({exc})"))
            done = reader.line_num
            continue
        raw = "".join(physical[done : reader.line_num]).rstrip("\r\n").encode("utf-8", "surrogateescape")
        if fields:
            rows.append(_Row(done + 1, raw, fields))
        done = reader.line_num
    return rows, rejects


# -- Parquet -----------------------------------------------------------------------------------------
def _parquet(path: str, data: bytes, schema: pa.Schema, event_time: str | None) -> FileRead:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any reason it is not Parquet
        return _whole_file(path, data, schema, f"the file is not readable Parquet ({exc})")
    present = [f for f in schema if f.name in table.column_names]
    if not present:
        return _whole_file(
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
            return _whole_file(
                path,
                data,
                schema,
                f"column '{field.name}' is {column.type} in the file, which cannot become the "
                f"mapping's {sql_type(field.type)}",
            )
        _, refused = _bisect(list(range(len(column))), partial(_take_cast, column, field.type))
        for row in refused:
            bad.setdefault(
                row,
                f"column '{field.name}' is {sql_type(field.type)} but the value is "
                f"{_shown(column[row].as_py())}",
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
        rejects.append(_reject(path, row + 1, raw, reason, unit="row"))
    return FileRead(fit_columns(table.take(keep), schema), tuple(rejects))


def _take_cast(column: pa.Array, to: pa.DataType, rows: Sequence[int]) -> pa.Array:
    return column.take(rows).cast(to)


# -- keeping rejects (workers) -------------------------------------------------------------------------
def rejects_dir(run_dir: str | os.PathLike[str], source: str) -> Path:
    return positions.source_dir(run_dir, source) / REJECTS_DIR


def record(directory: Path, source: str, path: str, found: Sequence[Reject], on_error: str) -> None:
    """Step 3: keep a file's rejects (``keep``, ``skip``) or fail the job (``fail``)."""
    if not found:
        return
    if on_error == "fail":
        first = found[0]
        raise RejectedRecordError(
            f"mapping '{source}' met a malformed record in {first.where()}: {first.reason}; "
            f"its OPTIONS ('{ON_ERROR}'='fail') stop the job ('keep' would record the record in "
            "pitstop.rejects and go on)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{Path(path).name}.jsonl"
    tmp = directory / f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        for reject in found:
            row = reject.to_json()
            if on_error == "skip":
                row["raw"] = None
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, directory / name)


# -- collecting rejects (the manager) -----------------------------------------------------------------
def collect(directory: Path, seen: dict[str, tuple[int, int]]) -> list[Reject]:
    """Rejects in the files of ``directory`` that are new or changed since ``seen`` (which is
    updated); a file being written is a hidden temp file until it is complete."""
    out: list[Reject] = []
    try:
        entries = [e for e in os.scandir(directory) if e.is_file() and not e.name.startswith(".")]
    except FileNotFoundError:
        return out
    for entry in sorted(entries, key=lambda e: e.name):
        stat = entry.stat()
        signature = (stat.st_mtime_ns, stat.st_size)
        if seen.get(entry.name) == signature:
            continue
        try:
            text = Path(entry.path).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        out.extend(Reject.from_json(json.loads(line)) for line in text.splitlines() if line)
        seen[entry.name] = signature
    return out
