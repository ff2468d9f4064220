"""Steps 1 and 2 for one data file: the fast path, and only if it fails, the file read again record
by record in its format (:mod:`.jsonlines`, :mod:`.csvrows`, :mod:`.parquet`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pitstop.connectors.rejects.csvrows import read_csv
from pitstop.connectors.rejects.jsonlines import read_json
from pitstop.connectors.rejects.parquet import read_parquet
from pitstop.connectors.rejects.records import FileRead, Strict, empty, holds_nul, lacks_event_time

if TYPE_CHECKING:
    import pyarrow as pa


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
        if not (fmt == "csv" and holds_nul(table)) and not lacks_event_time(table, event_time):
            return FileRead(table)
    # Step 2. Record by record.
    data = Path(path).read_bytes()
    if not data.strip():
        return FileRead(empty(schema))  # an empty file holds zero records
    if fmt == "parquet":
        return read_parquet(path, data, schema, event_time)
    if fmt == "json":
        return read_json(path, data, schema, strict, event_time)
    return read_csv(path, data, schema, header, strict, event_time)
