"""The exactly-once write of one micro-batch: the protocol every transactional sink of pitstop
follows, written once (:func:`write_batch`) over what each sink's database does
(:class:`Database`). Its users: the DuckDB sink, appending (:mod:`pitstop.connectors.duckdb.sink`)
or upserting (:mod:`pitstop.connectors.duckdb.upsert`), and the PostgreSQL sink
(:mod:`pitstop.connectors.postgres.writes`). The Kafka sink has a protocol of its own (a Kafka
transaction and a ledger, :mod:`pitstop.connectors.kafka.sink`).

One micro-batch, in ONE transaction of the sink's database:

1. **Claim** the batch by its bookkeeping row ``(job, run, branch, batch)``: a batch whose row is
   there was committed before (Spark replays a batch whose sink write committed but whose
   checkpoint did not: after a failure, a restart, a kill -9), and nothing more is done (logged,
   ``already written; skipped``). DuckDB looks the row up; PostgreSQL inserts it at once (``ON
   CONFLICT DO NOTHING``), so that two writers of one batch meet on its primary key: the second
   waits for the first and then finds the row.
2. **The rows**, staged where the database's SQL reads them (DuckDB: the Arrow table registered;
   PostgreSQL: a temporary table filled by ``COPY``):

   a. appended, each row's hash kept beside the bookkeeping (what a rollback to a snapshot's cut
      finds the rows by); or, for an updating branch (``keys``), upserted: the **before-image**
      of each row the batch changes into the history table (:mod:`pitstop.connectors.upsert`),
      the rows no longer kept deleted, the kept ones inserted or replaced by key;
   b. a window branch with early results: the early rows whose window the batch's watermark
      closed (``closed``) and that the batch does not write are marked final, their before-images
      kept. A batch without rows does this step alone.
3. **The bookkeeping row**, with the batch's row count (where step 1 did not insert it); crash
   point ``sink.before_commit``; commit; crash point ``sink.after_commit``.

A process killed before the commit leaves nothing of the batch (the database rolls the
transaction back); killed after it, the replayed batch is skipped in step 1. A fresh run has a
new run id, so its batch 0 is not mistaken for an earlier run's.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

import pyarrow as pa

from pitstop.connectors.upsert import KEEP, WindowRows, early_rows
from pitstop.connectors.values import naive_utc
from pitstop.faults import crash_point

log = logging.getLogger(__name__)

Tx = TypeVar("Tx")


@dataclass(frozen=True)
class Batch:
    """One micro-batch as the protocol writes it."""

    batch_id: int
    rows: pa.Table  # naive UTC; an upsert's with its keep column, a window branch's with `early`
    counted: int  # the rows its bookkeeping row records
    closed: datetime | None = None  # a window branch's: the watermark the batch ran with (step 2b)

    @classmethod
    def of(
        cls, table: pa.Table, batch_id: int, windows: WindowRows | None = None, keyed: bool = False
    ) -> Batch:
        """The batch Spark handed the sink, its times as naive UTC; a window branch's rows with
        their ``early`` column (:func:`pitstop.connectors.upsert.early_rows`); an upsert's with its
        keep column (all kept unless the query said otherwise). ``counted``: every row."""
        rows = naive_utc(table)
        closed = None
        if windows is not None:
            rows, closed = early_rows(rows, windows, batch_id)
        if keyed and KEEP not in rows.column_names:  # a batch of rows all kept
            rows = rows.append_column(KEEP, pa.array([True] * rows.num_rows, pa.bool_()))
        return cls(batch_id, rows, table.num_rows, closed)


class Database(Protocol[Tx]):
    """What one sink's database does for :func:`write_batch`, inside its transaction ``Tx``."""

    @property
    def run_id(self) -> str: ...

    @property
    def keys(self) -> tuple[str, ...]:
        """An upsert's keys; () appends."""
        ...

    @property
    def sink_name(self) -> str:
        """How the log names the sink when it skips a batch."""
        ...

    def transaction(self) -> AbstractContextManager[Tx]:
        """One transaction: committed when the block ends, rolled back on an exception."""
        ...

    def claim(self, tx: Tx, batch: Batch) -> bool:
        """Step 1: False when the batch's bookkeeping row is there (committed before)."""
        ...

    def staged(self, tx: Tx, batch: Batch) -> AbstractContextManager[None]:
        """Step 2: the batch's rows where the SQL of :meth:`append`, :meth:`upsert` and
        :meth:`finalize` reads them, for the block."""
        ...

    def append(self, tx: Tx, batch: Batch) -> None:
        """Step 2a of an appending sink: the rows, and each row's hash."""
        ...

    def upsert(self, tx: Tx, batch: Batch) -> None:
        """Step 2a of an upserting sink: before-images, rows no longer kept deleted, the kept
        ones upserted by key."""
        ...

    def finalize(self, tx: Tx, batch: Batch, in_batch: bool) -> None:
        """Step 2b: early rows whose window ``batch.closed`` closed marked final, their
        before-images kept; ``in_batch``: not the batch's own rows (staged)."""
        ...

    def record(self, tx: Tx, batch: Batch) -> None:
        """Step 3: the bookkeeping row, unless :meth:`claim` inserted it."""
        ...


def write_batch(db: Database[Tx], batch: Batch) -> None:
    """Write one micro-batch exactly once (steps 1-3, see the module's protocol)."""
    with db.transaction() as tx:
        # Step 1. Claim the batch; committed before: skipped.
        if not db.claim(tx, batch):
            log.info(
                "%s: batch %s of run %s already written; skipped", db.sink_name, batch.batch_id, db.run_id
            )
            return
        # Step 2. The rows.
        if batch.rows.num_rows:
            with db.staged(tx, batch):
                if db.keys:  # Step 2a.
                    db.upsert(tx, batch)
                else:
                    db.append(tx, batch)
                if batch.closed is not None:  # Step 2b. Windows the batch's watermark closed, final now.
                    db.finalize(tx, batch, in_batch=True)
        elif batch.closed is not None:
            db.finalize(tx, batch, in_batch=False)
        # Step 3. The bookkeeping row; committed when the block ends.
        db.record(tx, batch)
        crash_point("sink.before_commit")
    crash_point("sink.after_commit")
