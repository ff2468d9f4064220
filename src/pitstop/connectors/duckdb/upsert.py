"""The DuckDB upsert sink: a running aggregate's rows, replaced by key, exactly once, with the
before-image of every row it changes.

A branch whose stage updates its rows (:attr:`pitstop.stages.base.StageKind.updates`) hands its
sink, in each micro-batch, the groups that batch changed (Spark's update mode), with a column
``__pitstop_keep`` that is false for a group the query no longer keeps (HAVING, or a filter after
the stage, turned false). The sink table's primary key is the group keys as the SELECT names them
(:attr:`pitstop.plan.model.Branch.upsert_keys`); it is created so, and an existing table must
have a primary key or unique constraint on exactly those columns.

Write protocol of one micro-batch (:meth:`UpsertSink.write`): the exactly-once protocol of
:mod:`pitstop.connectors.exactly_once`, in ONE DuckDB transaction, as the append sink's
(:class:`~pitstop.connectors.duckdb.sink.DuckDBSink`: the bookkeeping in ``pitstop.sink_batches``)
but for its rows (step 2a): the **before-image** of each row the batch writes or removes goes to
the history table (below): the row's values before the batch, or ``absent`` when the key had no
row; the rows no longer kept are deleted; the kept rows are upserted (``INSERT OR REPLACE``: a
key's row replaced, a new key inserted). The bookkeeping row counts the rows kept.

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
``early = window_end > watermark`` (the watermark the batch ran with), and, after the upsert, the
rows still early whose window the batch's watermark closed (no row of the batch) are marked
final, their before-images kept in the history table like any other change (step 2b). A window
job without early results whose table has such a key and history (an early-results job wrote it
before an update turned the option off) writes the same way: its final rows replace the early
ones.

A group key that is NULL cannot be a primary key: the batch fails with a message naming the
column (wrap it: ``COALESCE(k, '')``); nothing of the batch is written.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.duckdb.sink import DuckDBSink, column_defaults, duckdb_type, evolve_table
from pitstop.connectors.exactly_once import Batch, write_batch
from pitstop.connectors.upsert import (
    HISTORY_COLUMNS,
    HISTORY_SUFFIX,
    KEEP,
    WindowRows,
    check_keys,
    history_table,
)
from pitstop.errors import PlanError
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
            self.defaults = column_defaults(tx, self.table)
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
        """Write one micro-batch exactly once (:func:`pitstop.connectors.exactly_once.write_batch`);
        a NULL group key fails it before anything is written. Its bookkeeping row counts the
        rows kept."""
        batch = Batch.of(table, batch_id, self.windows, keyed=True)
        check_keys(
            batch.rows,
            self.keys,
            batch_id,
            self._about(),
            " (CREATE JOB ... FROM SNAPSHOT keeps the state of the other groups if the stage keeps its name)",
        )
        write_batch(self, replace(batch, counted=int(pc.sum(batch.rows.column(KEEP)).as_py() or 0)))

    # -- the exactly-once protocol's steps 2a and 2b (pitstop.connectors.exactly_once.Database) ---
    def upsert(self, tx: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        """Step 2a: the before-images, the rows no longer kept deleted, the kept ones replaced."""
        target = f"main.{quote_ident(self.table)}"
        on = self._on()
        # The before-images.
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
            [self.job, self.run_id, self.branch, batch.batch_id],
        )
        # Rows no longer kept.
        tx.execute(f"DELETE FROM {target} t USING __pitstop_batch b WHERE {on} AND NOT b.{KEEP}")
        # The kept rows, replaced by key: whole rows, as an INSERT of the job's columns makes
        # them (a column the job does not write, e.g. an aggregate removed at a pit stop, gets
        # its default: NULL, or false for `early`).
        cols = ", ".join(quote_ident(c) for c in self.table_columns)
        picked = ", ".join(
            quote_ident(c) if c in self.columns else f"{self.defaults.get(c) or 'NULL'} AS {quote_ident(c)}"
            for c in self.table_columns
        )
        tx.execute(
            f"INSERT OR REPLACE INTO {target} ({cols}) SELECT {picked} FROM __pitstop_batch WHERE {KEEP}"
        )

    def finalize(self, tx: duckdb.DuckDBPyConnection, batch: Batch, in_batch: bool) -> None:
        """Step 2b: mark final the early rows whose window ended at or before ``batch.closed``
        (and, ``in_batch``, that are not rows of this batch), keeping their before-images."""
        assert self.windows is not None and batch.closed is not None
        target = f"main.{quote_ident(self.table)}"
        outside = f"NOT EXISTS (SELECT 1 FROM __pitstop_batch b WHERE {self._on()})" if in_batch else "true"
        which = f"t.{quote_ident(EARLY)} AND t.{quote_ident(self.windows.end)} <= ? AND {outside}"
        tx.execute(
            f"INSERT INTO {history_table(self.table)} BY NAME SELECT ? AS job, ? AS run_id, ? AS branch, "
            f"? AS batch_id, false AS absent, t.* FROM {target} t WHERE {which}",
            [self.job, self.run_id, self.branch, batch.batch_id, batch.closed],
        )
        tx.execute(f"UPDATE {target} t SET {quote_ident(EARLY)} = false WHERE {which}", [batch.closed])

    def _on(self) -> str:
        """A table row ``t`` and a batch row ``b`` of the same key."""
        return " AND ".join(f"t.{quote_ident(k)} = b.{quote_ident(k)}" for k in self.keys)
