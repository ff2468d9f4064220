"""The scratch tables a replay's branches write instead of their sinks.

One DuckDB file per replay (in its folder, removed with it). A sink's rows go to one table per side
(``old`` / ``new``): appended, or, for a branch whose sink replaces rows by key (running
aggregates, early results), replaced by key as the sink would replace them, so that each table
holds what the sink holds at the end of the span.
"""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from pitstop.connectors.duckdb.sink import duckdb_type
from pitstop.connectors.upsert import KEEP
from pitstop.connectors.values import naive_utc
from pitstop.names import quote_ident


class Capture:
    """The scratch database of one replay. Writes are serialized (two branches may share a table)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = duckdb.connect(str(path))
        self.db.execute("SET GLOBAL TimeZone = 'UTC'")  # as the catalog: not the machine's zone
        self.lock = threading.Lock()

    def sink(self, table: str, keys: tuple[str, ...]) -> CaptureSink:
        return CaptureSink(self, table, keys)

    def columns(self, table: str) -> list[tuple[str, str]]:
        """``(name, DuckDB type)`` of a capture table (none if no branch prepared it)."""
        with self.lock:
            rows = (
                self.db.cursor()
                .execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = ? ORDER BY ordinal_position",
                    [table],
                )
                .fetchall()
            )
        return [(str(n), str(t)) for n, t in rows]

    def put(self, table: str, rows: pa.Table) -> None:
        """A table of these rows (a stage's state at the end of a replay)."""
        with self.lock:
            cur = self.db.cursor()
            cur.register("__replay_rows", naive_utc(rows))
            try:
                cur.execute(f"CREATE OR REPLACE TABLE {quote_ident(table)} AS SELECT * FROM __replay_rows")
            finally:
                cur.unregister("__replay_rows")

    def keep_only(self, table: str, columns: tuple[str, ...]) -> None:
        """Drop every column of ``table`` but ``columns``."""
        cols = ", ".join(quote_ident(c) for c in columns)
        with self.lock:
            self.db.cursor().execute(
                f"CREATE OR REPLACE TABLE {quote_ident(table)} AS SELECT {cols} FROM {quote_ident(table)}"
            )

    def close(self) -> None:
        self.db.close()


class CaptureSink:
    """A branch's sink in a replay (:class:`pitstop.connectors.base.Sink`)."""

    def __init__(self, capture: Capture, table: str, keys: tuple[str, ...]) -> None:
        self.capture, self.table, self.keys = capture, table, keys
        self._written: set[int] = set()
        self._cursor = capture.db.cursor()

    def prepare(self, schema: list[tuple[str, str]]) -> None:
        """The table with the branch's columns (a second branch into the same sink adds its own)."""
        quoted = quote_ident(self.table)
        with self.capture.lock:
            cur = self._cursor
            have = {
                str(n).lower()
                for (n,) in cur.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [self.table]
                ).fetchall()
            }
            if not have:
                cols = ", ".join(f"{quote_ident(n)} {duckdb_type(t)}" for n, t in schema)
                cur.execute(f"CREATE TABLE {quoted} ({cols})")
                return
            for n, t in schema:
                if n.lower() not in have:
                    cur.execute(f"ALTER TABLE {quoted} ADD COLUMN {quote_ident(n)} {duckdb_type(t)}")

    def write(self, table: pa.Table, batch_id: int) -> None:
        """Append the batch, or replace its keys' rows (a row marked not kept removes its key)."""
        if batch_id in self._written:  # Spark ran the batch again after a failure
            return
        batch = naive_utc(table)
        quoted = quote_ident(self.table)
        with self.capture.lock:
            cur = self._cursor
            cur.execute("BEGIN TRANSACTION")
            try:
                if self.keys and batch.num_rows:
                    cur.register("__replay_keys", batch.select(list(self.keys)))
                    on = " AND ".join(
                        f"t.{quote_ident(k)} IS NOT DISTINCT FROM b.{quote_ident(k)}" for k in self.keys
                    )
                    cur.execute(
                        f"DELETE FROM {quoted} t WHERE EXISTS (SELECT 1 FROM __replay_keys b WHERE {on})"
                    )
                    cur.unregister("__replay_keys")
                if KEEP in batch.column_names:
                    batch = batch.filter(pc.equal(batch.column(KEEP), True)).drop_columns([KEEP])
                if batch.num_rows:
                    cur.register("__replay_batch", batch)
                    cur.execute(f"INSERT INTO {quoted} BY NAME SELECT * FROM __replay_batch")
                    cur.unregister("__replay_batch")
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        self._written.add(batch_id)

    def last_batch(self) -> int | None:
        return max(self._written) if self._written else None
