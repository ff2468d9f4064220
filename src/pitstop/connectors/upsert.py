"""What the upsert sinks (DuckDB's and PostgreSQL's) share: the keep column, the history table of
before-images that a rollback reads, the check of a batch's keys, the rows of windows with early
results, and the keys a window branch's final rows replace early ones by. The sinks:
:mod:`pitstop.connectors.duckdb.upsert`, :mod:`pitstop.connectors.postgres.writes`; the write
protocol they follow, :mod:`pitstop.connectors.exactly_once`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.errors import PitstopError
from pitstop.names import quote_ident
from pitstop.plan.model import EARLY, window_keys

if TYPE_CHECKING:
    from pitstop.connectors.base import Connector
    from pitstop.plan.model import Branch


log = logging.getLogger(__name__)


KEEP = "__pitstop_keep"


HISTORY_SUFFIX = "__before"


HISTORY_COLUMNS = (
    ("job", "VARCHAR"),
    ("run_id", "VARCHAR"),
    ("branch", "INTEGER"),
    ("batch_id", "BIGINT"),
    ("absent", "BOOLEAN"),
)


def history_table(table: str) -> str:
    """The history table of an upsert sink table, quoted, in the catalog's schema."""
    return f"pitstop.{quote_ident(table + HISTORY_SUFFIX)}"


def check_keys(batch: pa.Table, keys: tuple[str, ...], batch_id: int, about: str, hint: str = "") -> None:
    """PitstopError naming the column if a group key is NULL in a row of the batch: a key of an
    upsert table's rows cannot be NULL (``hint``: more advice, after the message's)."""
    for key in keys:
        nulls = batch.column(key).null_count
        if nulls:
            raise PitstopError(
                f"{about}: group key '{key}' is NULL in {nulls} row(s) of batch {batch_id}, and a key of "
                "the sink's rows cannot be NULL; nothing of the batch was written. Group by "
                f"COALESCE({key}, ...) AS {key} instead{hint}"
            )


@dataclass(frozen=True)
class WindowRows:
    """A window branch's rows in an upsert sink: the column holding each window's end, and the
    watermark (ms) each batch runs with."""

    end: str
    watermark_ms: Callable[[int], int]


def window_rows(sink: Any, end: str, watermark_ms: Callable[[int], int]) -> None:
    """Tell an upsert sink (DuckDB or PostgreSQL) that it writes a window branch's rows."""
    if hasattr(sink, "windows"):
        sink.windows = WindowRows(end, watermark_ms)


def finishing_keys(
    catalog: Catalog, mapping: Mapping, connector: Connector, branch: Branch, ask_server: bool = True
) -> tuple[str, ...]:
    """The window columns of a window branch without early results whose DuckDB or PostgreSQL sink
    table an early-results job wrote (a primary key on them and a history table): its final rows must
    replace that job's early ones. () otherwise (rows are appended). ``ask_server`` False: a
    PostgreSQL table is not asked (a run not restored from a snapshot, whose start must not wait
    for a server that may be down). ``connector``: the mapping's."""
    keys = window_keys(branch)
    if keys is None:
        return ()
    have = connector.sink_keys(catalog, mapping, ask_server)
    if have is None:
        return ()
    return keys if sorted(k.lower() for k in have) == sorted(k.lower() for k in keys) else ()


def closing_time(watermark_ms: int) -> datetime:
    """A watermark as the naive UTC timestamp sink tables hold."""
    return datetime(1970, 1, 1) + timedelta(milliseconds=watermark_ms)


def early_rows(batch: pa.Table, windows: WindowRows, batch_id: int) -> tuple[pa.Table, datetime | None]:
    """The batch with its ``early`` column (true where the window ends after the watermark the
    batch ran with), and that watermark as a timestamp (None before the first watermark: nothing
    has closed)."""
    watermark = windows.watermark_ms(batch_id)
    closed = closing_time(watermark) if watermark > 0 else None
    end = batch.column(windows.end).cast(pa.timestamp("us"))
    if closed is None:
        flags = pa.array([True] * batch.num_rows, pa.bool_())
    else:
        flags = pc.greater(end, pa.scalar(closed, pa.timestamp("us")))
    return batch.append_column(EARLY, flags), closed
