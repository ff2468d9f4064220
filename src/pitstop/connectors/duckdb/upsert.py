"""The DuckDB upsert sink: a running aggregate's rows, replaced by key, exactly once, with the
before-image of every row it changes.

A branch whose stage updates its rows (:attr:`pitstop.stages.base.StageKind.updates`) hands its
sink, in each micro-batch, the groups that batch changed (Spark's update mode), with a column
``__pitstop_keep`` that is false for a group the query no longer keeps (HAVING, or a filter after
the stage, turned false). The sink table's primary key is the group keys as the SELECT names them
(:attr:`pitstop.plan.model.Branch.upsert_keys`); it is created so, and an existing table must
have a primary key or unique constraint on exactly those columns.

Write protocol of one micro-batch (:meth:`UpsertSink.write`), in ONE DuckDB transaction:

1. the batch is looked up in ``pitstop.sink_batches`` by ``(run, branch, batch)``: found, it was
   written before (Spark replayed it) and nothing more is done;
2. the **before-image** of each row the batch writes or removes goes to the history table
   (below): the row's values before the batch, or ``absent`` when the key had no row;
3. the rows no longer kept are deleted;
4. the kept rows are upserted (``INSERT OR REPLACE``: a key's row replaced, a new key inserted);
5. the bookkeeping row ``(job, run, branch, batch, rows)`` goes into ``pitstop.sink_batches``;
   commit. A crash before the commit leaves nothing of the batch; after it, step 1 skips it.

History table (what a rollback to a snapshot's cut reads, issue 13): ``pitstop."<table>__before"``
in the same DuckDB file, one per upsert sink table, created with it::

    job VARCHAR, run_id VARCHAR, branch INTEGER, batch_id BIGINT,   -- the batch that wrote the key
    absent BOOLEAN,              -- true: the key had no row before that batch (it was inserted)
    <every column of the sink table, same names and types>
                                 -- the key's row before the batch (keys always set; the other
                                 -- columns NULL when absent)

One row per key the batch upserted, and per existing row it deleted. A key's value at a cut
(run R, batch B) is therefore its before-image in the first batch after the cut that wrote it
(batches ordered by run, in the order of the job's runs, then ``batch_id``), or its current row
when no batch after the cut wrote it. A column the sink table gains later is added to the history
table too (NULL in the before-images taken before it existed, as in the table).

A window branch with early results (:mod:`pitstop.planner.early`) writes here too, keyed by
``(window_start, window_end, keys...)``, with one more column, ``early``: each batch's rows get
``early = window_end > watermark`` (the watermark the batch ran with), and, after step 4, the
rows still early whose window the batch's watermark closed (no row of the batch) are marked
final, their before-images kept in the history table like any other change (step 4b). A window
job without early results whose table has such a key and history (an early-results job wrote it
before an update turned the option off) writes the same way: its final rows replace the early
ones.

A group key that is NULL cannot be a primary key: the batch fails with a message naming the
column (wrap it: ``COALESCE(k, '')``); nothing of the batch is written.
"""

from __future__ import annotations

import logging
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.duckdb.sink import DuckDBSink, duckdb_type, evolve_table
from pitstop.connectors.upsert import (
    HISTORY_COLUMNS,
    HISTORY_SUFFIX,
    KEEP,
    WindowRows,
    early_rows,
    history_table,
)
from pitstop.connectors.values import naive_utc
from pitstop.errors import PitstopError, PlanError
from pitstop.faults import crash_point
from pitstop.names import quote_ident
from pitstop.plan.model import EARLY

log = logging.getLogger(__name__)


class UpsertSink(DuckDBSink):
    """One updating branch's writer to one DuckDB table, upserting by ``keys``."""

    def __init__(
        self, catalog: Catalog, mapping: Mapping, job: str, run_id: str, branch: int, keys: tuple[str, ...]
    ) -> None:
        super().__init__(catalog, mapping, job, run_id, branch)
        assert keys, "an upsert sink needs keys"
        self.keys = keys
        self.columns: list[str] = []  # the job's columns
        self.table_columns: list[str] = []  # the sink table's, after prepare
        self.defaults: dict[str, str] = {}  # the sink table's column defaults (SQL), after prepare
        self.windows: WindowRows | None = None  # a window branch's rows (early results)

    def _about(self) -> str:
        return f"sink table '{self.table}' (mapping '{self.mapping.name}')"

    def prepare(self, schema: list[tuple[str, str]]) -> None:
        """Create the table with its primary key (or check an existing one's key and give it the
        job's new columns) and its history table, in one transaction."""
        target = f"main.{quote_ident(self.table)}"
        if self.windows is not None:
            schema = [*schema, (EARLY, "boolean")]
        self.columns = [n for n, _ in schema]
        with self.catalog.transaction() as tx:
            cols = [f"{quote_ident(n)} {duckdb_type(t)}" for n, t in schema]
            pk = ", ".join(quote_ident(k) for k in self.keys)
            tx.execute(f"CREATE TABLE IF NOT EXISTS {target} ({', '.join(cols)}, PRIMARY KEY ({pk}))")
            # A window table written before without early results: its rows were final.
            defaults = {EARLY: "false"} if self.windows is not None else None
            for change in evolve_table(tx, self.table, schema, defaults=defaults):
                log.info("%s: %s", self._about(), change)
            keyed = tx.execute(
                "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = 'main' "
                "AND lower(table_name) = lower(?) AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')",
                [self.table],
            ).fetchall()
            wanted = sorted(k.lower() for k in self.keys)
            if not keyed and self.windows is not None:
                self._key_windows(tx, target)
                keyed = [(list(self.keys),)]
            if not any(sorted(c.lower() for c in row[0]) == wanted for row in keyed):
                raise PlanError(
                    f"{self._about()}: the existing table has no primary key on ({', '.join(self.keys)}), "
                    "by which a running aggregate replaces its rows; write to a new mapping (its table "
                    "is created with that key), or drop the table"
                )
            self.table_columns = self._columns(tx, "main", self.table)
            self.defaults = {
                str(name): str(default)
                for name, default in tx.execute(
                    "SELECT column_name, column_default FROM information_schema.columns "
                    "WHERE table_schema = 'main' AND lower(table_name) = lower(?) "
                    "AND column_default IS NOT NULL",
                    [self.table],
                ).fetchall()
            }
            history = history_table(self.table)
            meta = ", ".join(f"NULL::{t} AS {n}" for n, t in HISTORY_COLUMNS)
            tx.execute(f"CREATE TABLE IF NOT EXISTS {history} AS SELECT {meta}, t.* FROM {target} t LIMIT 0")
            have = {c.lower() for c in self._columns(tx, "pitstop", self.table + HISTORY_SUFFIX)}
            types = dict(
                tx.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = 'main' AND lower(table_name) = lower(?)",
                    [self.table],
                ).fetchall()
            )
            widened = dict(
                tx.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = 'pitstop' AND lower(table_name) = lower(?)",
                    [self.table + HISTORY_SUFFIX],
                ).fetchall()
            )
            for name in self.table_columns:
                if name.lower() not in have:
                    tx.execute(f"ALTER TABLE {history} ADD COLUMN {quote_ident(name)} {types[name]}")
                elif widened.get(name, types[name]) != types[name]:  # the table's type was widened
                    tx.execute(f"ALTER TABLE {history} ALTER COLUMN {quote_ident(name)} TYPE {types[name]}")

    def _key_windows(self, tx: duckdb.DuckDBPyConnection, target: str) -> None:
        """Give a window table written without early results (each window once) its primary key
        on the window columns, so that early results can replace rows in it."""
        pk = ", ".join(quote_ident(k) for k in self.keys)
        try:
            tx.execute(f"ALTER TABLE {target} ADD PRIMARY KEY ({pk})")
        except duckdb.Error as exc:
            raise PlanError(
                f"{self._about()}: early results replace a window's row by ({', '.join(self.keys)}), and "
                f"the existing table cannot have that primary key ({str(exc).splitlines()[0]}); write to "
                "a new mapping, or drop the option"
            ) from None
        log.info("%s: primary key (%s) added for early results", self._about(), ", ".join(self.keys))

    @staticmethod
    def _columns(tx: duckdb.DuckDBPyConnection, schema: str, table: str) -> list[str]:
        rows = tx.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
            "AND lower(table_name) = lower(?) ORDER BY ordinal_position",
            [schema, table],
        ).fetchall()
        return [str(r[0]) for r in rows]

    def write(self, table: pa.Table, batch_id: int) -> None:
        target = f"main.{quote_ident(self.table)}"
        batch = naive_utc(table)
        closed: datetime | None = None
        if self.windows is not None:  # Step 0. A window's row is early until the watermark passes its end.
            batch, closed = early_rows(batch, self.windows, batch_id)
        if KEEP not in batch.column_names:  # a batch of rows all kept
            batch = batch.append_column(KEEP, pa.array([True] * batch.num_rows, pa.bool_()))
        for key in self.keys:
            nulls = batch.column(key).null_count
            if nulls:
                raise PitstopError(
                    f"{self._about()}: group key '{key}' is NULL in {nulls} row(s) of batch {batch_id}, "
                    "and a key of the sink's rows cannot be NULL; nothing of the batch was written. "
                    f"Group by COALESCE({key}, ...) AS {key} instead (CREATE JOB ... FROM SNAPSHOT keeps "
                    "the state of the other groups if the stage keeps its name)"
                )
        kept = int(pc.sum(batch.column(KEEP)).as_py() or 0)
        on = " AND ".join(f"t.{quote_ident(k)} = b.{quote_ident(k)}" for k in self.keys)
        with self.catalog.transaction() as tx:
            # Step 1. Already written?
            if self._written(tx, batch_id):
                return
            if batch.num_rows:
                tx.register("__pitstop_batch", batch)
                try:
                    # Step 2. The before-images.
                    first_key = quote_ident(self.keys[0])
                    values = [f"b.{quote_ident(k)} AS {quote_ident(k)}" for k in self.keys]
                    values += [
                        f"t.{quote_ident(c)} AS {quote_ident(c)}"
                        for c in self.table_columns
                        if c.lower() not in {k.lower() for k in self.keys}
                    ]
                    tx.execute(
                        f"INSERT INTO {history_table(self.table)} BY NAME SELECT ? AS job, ? AS run_id, "
                        f"? AS branch, ? AS batch_id, t.{first_key} IS NULL AS absent, {', '.join(values)} "
                        f"FROM __pitstop_batch b LEFT JOIN {target} t ON {on} "
                        f"WHERE b.{KEEP} OR t.{first_key} IS NOT NULL",
                        [self.job, self.run_id, self.branch, batch_id],
                    )
                    # Step 3. Rows no longer kept.
                    tx.execute(f"DELETE FROM {target} t USING __pitstop_batch b WHERE {on} AND NOT b.{KEEP}")
                    # Step 4. The kept rows, replaced by key: whole rows, as an INSERT of the
                    # job's columns makes them (a column the job does not write, e.g. an aggregate
                    # removed at a pit stop, gets its default: NULL, or false for `early`).
                    cols = ", ".join(quote_ident(c) for c in self.table_columns)
                    picked = ", ".join(
                        quote_ident(c)
                        if c in self.columns
                        else f"{self.defaults.get(c) or 'NULL'} AS {quote_ident(c)}"
                        for c in self.table_columns
                    )
                    tx.execute(
                        f"INSERT OR REPLACE INTO {target} ({cols}) SELECT {picked} FROM __pitstop_batch "
                        f"WHERE {KEEP}"
                    )
                    # Step 4b. Windows the batch's watermark closed, final now.
                    if closed is not None:
                        self._finalize(
                            tx, batch_id, closed, f"NOT EXISTS (SELECT 1 FROM __pitstop_batch b WHERE {on})"
                        )
                finally:
                    tx.unregister("__pitstop_batch")
            elif closed is not None:
                self._finalize(tx, batch_id, closed, "true")
            # Step 5. The bookkeeping row.
            self._record(tx, batch_id, kept)
            crash_point("sink.before_commit")
        crash_point("sink.after_commit")

    def _finalize(self, tx: duckdb.DuckDBPyConnection, batch_id: int, closed: datetime, outside: str) -> None:
        """Mark final the early rows whose window ended at or before ``closed`` (and that satisfy
        ``outside``: not rows of this batch), keeping their before-images."""
        assert self.windows is not None
        target = f"main.{quote_ident(self.table)}"
        which = f"t.{quote_ident(EARLY)} AND t.{quote_ident(self.windows.end)} <= ? AND {outside}"
        tx.execute(
            f"INSERT INTO {history_table(self.table)} BY NAME SELECT ? AS job, ? AS run_id, ? AS branch, "
            f"? AS batch_id, false AS absent, t.* FROM {target} t WHERE {which}",
            [self.job, self.run_id, self.branch, batch_id, closed],
        )
        tx.execute(f"UPDATE {target} t SET {quote_ident(EARLY)} = false WHERE {which}", [closed])
