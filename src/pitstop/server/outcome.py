"""What one statement produced, for the connection to send: an :class:`Outcome` (its command
tag; maybe a result set, whose rows are tuples, or for a large query result partly still in
DuckDB, read as tuples or as Arrow batches; a COPY's lines; the parameters it changed) and the
:class:`Notice` messages that go with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pitstop.server import copyout
from pitstop.server.bulk import RowEncoder
from pitstop.server.pgtypes import Column


@dataclass(frozen=True)
class Notice:
    message: str
    severity: str = "NOTICE"  # NOTICE | WARNING | INFO
    code: str = "00000"


@dataclass
class Outcome:
    """What one statement produced: a tag, maybe a result set (streamed), notices."""

    tag: str
    columns: tuple[Column, ...] | None = None
    """None: the statement returns no rows (NoData)."""
    rows: Iterator[tuple[Any, ...]] = field(default_factory=lambda: iter(()))
    notices: list[Notice] = field(default_factory=list)
    more: Callable[[], Iterator[tuple[Any, ...]]] | None = None
    """The rows after ``rows`` of a large query result, still in DuckDB (``rows`` holds its first
    ``FIRST_ROWS``): read as tuples, or with ``use_arrow()`` as Arrow batches."""
    arrow: Callable[[], Iterator[pa.RecordBatch]] | None = None
    """The rows of ``more`` as Arrow batches instead."""
    duckdb_types: tuple[str, ...] = ()
    """The DuckDB types of the columns (a DuckDB query's), which say how Arrow will hold them."""
    batches: Iterator[pa.RecordBatch] | None = None
    """The rows still to send, as Arrow batches, once switched (``rows`` is then empty)."""
    encoder: RowEncoder | None = None
    """How the connection turns ``batches`` into DataRows (kept across a suspended portal)."""
    pending: pa.RecordBatch | None = None
    """The rest of a batch a portal's row limit cut (sent at the next Execute)."""
    count: int = 0
    """Rows sent so far (the tag's count of a result set)."""
    parameter_changes: list[tuple[str, str]] = field(default_factory=list)
    copy: copyout.Lines | None = None
    """The CopyData payloads of a COPY ... TO STDOUT (its rows are read through them)."""
    zone: str = "UTC"
    """The session's ``TimeZone``, in which a time with a zone is printed (text format)."""

    def final_tag(self) -> str:
        if self.copy is not None:
            return f"COPY {self.copy.rows}"
        return f"{self.tag} {self.count}" if self.tag in ("SELECT", "FETCH") else self.tag

    def every_row(self) -> Iterator[tuple[Any, ...]]:
        """``rows``, then the rest of a large result, as tuples."""
        while True:
            yield from self.rows
            if self.more is None:
                return
            self.read_more(None)

    def read_more(self, encoder: RowEncoder | None) -> None:
        """``rows`` are sent: go on with the rest of a large result, as Arrow batches encoded by
        ``encoder`` when there is one, else as tuples."""
        more, arrow, self.more, self.arrow = self.more, self.arrow, None, None
        if encoder is not None and arrow is not None:
            self.batches, self.encoder, self.rows = arrow(), encoder, iter(())
        elif more is not None:
            self.rows = more()
