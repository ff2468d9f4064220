"""One micro-batch written exactly once into a PostgreSQL table, in one PostgreSQL transaction
(:func:`write_batch`):

1. insert the bookkeeping row ``(job, run, branch, batch, table, rows)`` into
   ``pitstop_sink_batches`` (beside the table, in its schema) with ``ON CONFLICT DO NOTHING``: no
   row inserted means the batch is already there (Spark replayed it after a crash, a restart or
   a failed commit) and nothing more is written. Two writers of one batch meet on the primary key:
   the second waits for the first and then finds its row;
2. the rows, by ``COPY`` into a temporary table, then appended by ``INSERT ... SELECT``, which also
   records each row's hash (``md5`` of the row's text as the table holds it) in
   ``pitstop_sink_rows`` beside the bookkeeping: what rolls the sink back to a snapshot's cut finds
   the rows of the batches after it by these (:mod:`pitstop.connectors.postgres.rollback`). A
   running aggregate's rows are upserted by its group keys
   (the table's primary key): ``COPY`` into a temporary table; the before-image of each row the
   batch changes into the history table ``<schema>."<table>__before"`` (the same columns and
   meaning as the DuckDB sink's, :mod:`pitstop.connectors.upsert`); the rows the query no longer
   keeps deleted; ``INSERT ... ON CONFLICT (keys) DO UPDATE`` for the rest; a window's early rows
   whose window the batch's watermark closed are marked final (step 2b);
3. commit. A process killed before the commit leaves nothing (PostgreSQL rolls the transaction
   back when the connection drops); killed after it, the replayed batch is skipped in step 1.

A fresh run (``CREATE JOB``, with or without ``FROM SNAPSHOT``) has a new run id, so its batch 0
is not mistaken for an earlier run's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pitstop.connectors.postgres.options import TableRef
from pitstop.connectors.postgres.table import BOOKKEEPING, ROW_HASH, ROW_HASHES
from pitstop.connectors.upsert import HISTORY_COLUMNS, HISTORY_SUFFIX, KEEP, WindowRows
from pitstop.errors import PitstopError
from pitstop.faults import crash_point
from pitstop.plan.model import EARLY

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """Where one branch's batches go, and whose they are."""

    schema: str
    ref: TableRef
    job: str
    run_id: str
    branch: int
    keys: tuple[str, ...]  # upsert on these columns; () appends
    table_columns: list[str]  # an upsert's table, every column (before-images hold them)
    windows: WindowRows | None  # a window branch's rows (early results)
    about: str  # the mapping, its server and table, as messages name them


def write_batch(
    conn: psycopg.Connection[Any],
    to: Target,
    names: list[str],
    batch: pa.Table,
    batch_id: int,
    closed: datetime | None = None,
) -> None:
    """Steps 1-3 (see the module's protocol); ``closed``: the watermark of a window branch's batch."""
    from psycopg import sql

    target = sql.Identifier(to.schema, to.ref.name)
    with conn.transaction():
        # Step 1. The bookkeeping row; none inserted: the batch is already written.
        fresh = conn.execute(
            sql.SQL(
                "INSERT INTO {} (job, run_id, branch, batch_id, sink_table, rows) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING batch_id"
            ).format(sql.Identifier(to.schema, BOOKKEEPING)),
            [to.job, to.run_id, to.branch, batch_id, to.ref.text(), batch.num_rows],
        ).fetchone()
        if fresh is None:
            log.info("%s: batch %s of run %s already written; skipped", to.about, batch_id, to.run_id)
            return
        # Step 2. The rows, by COPY (into a temporary table first for an upsert).
        if batch.num_rows and not to.keys:
            _append(conn, to, target, names, batch, batch_id)
        elif batch.num_rows:
            _upsert(conn, to, target, names, batch, batch_id)
        if closed is not None:  # Step 2b. Windows this batch's watermark closed, final now.
            _finalize(conn, to, target, batch_id, closed, in_batch=bool(batch.num_rows))
        crash_point("sink.before_commit")
    # Step 3. Committed (leaving the block).
    crash_point("sink.after_commit")


def _append(
    conn: psycopg.Connection[Any], to: Target, target: Any, names: list[str], batch: pa.Table, batch_id: int
) -> None:
    """Step 2 of an append: the batch into a temporary table, then into the table, each row's
    hash beside it (what a rollback to a snapshot's cut finds the rows by)."""
    from psycopg import sql

    cols = sql.SQL(", ").join(map(sql.Identifier, names))
    conn.execute(
        sql.SQL("CREATE TEMP TABLE pitstop_batch ON COMMIT DROP AS SELECT {} FROM {} LIMIT 0").format(
            cols, target
        )
    )
    _copy(conn, sql.Identifier("pitstop_batch"), names, batch)
    conn.execute(
        sql.SQL(
            "WITH ins AS (INSERT INTO {} ({}) SELECT {} FROM pitstop_batch RETURNING *) "
            "INSERT INTO {} SELECT %s, %s, %s, " + ROW_HASH.format("ins") + " FROM ins"
        ).format(target, cols, cols, sql.Identifier(to.schema, ROW_HASHES)),
        [to.run_id, to.branch, batch_id],
    )


def _copy(conn: psycopg.Connection[Any], into: Any, names: list[str], batch: pa.Table) -> None:
    from psycopg import sql

    cols = sql.SQL(", ").join(map(sql.Identifier, names))
    values = [batch.column(n).to_pylist() for n in names]
    with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(into, cols)) as copy:
        for row in zip(*values, strict=True):
            copy.write_row(row)


def _upsert(
    conn: psycopg.Connection[Any], to: Target, target: Any, names: list[str], batch: pa.Table, batch_id: int
) -> None:
    """Step 2 of an upsert: the batch into a temporary table, each changed row's before-image
    into the history table, rows no longer kept deleted, the kept ones upserted by key."""
    from psycopg import sql

    if KEEP not in batch.column_names:
        batch = batch.append_column(KEEP, pa.array([True] * batch.num_rows, pa.bool_()))
    for key in to.keys:
        if batch.column(key).null_count:
            raise PitstopError(
                f"{to.about}: group key '{key}' is NULL in {batch.column(key).null_count} row(s) "
                f"of batch {batch_id}, and a key of the sink's rows cannot be NULL; nothing of the "
                f"batch was written. Group by COALESCE({key}, ...) AS {key} instead"
            )
    temp = sql.Identifier("pitstop_batch")
    cols = sql.SQL(", ").join(map(sql.Identifier, names))
    conn.execute(
        sql.SQL("CREATE TEMP TABLE pitstop_batch ON COMMIT DROP AS SELECT {} FROM {} LIMIT 0").format(
            cols, target
        )
    )
    conn.execute(sql.SQL("ALTER TABLE pitstop_batch ADD COLUMN {} boolean").format(sql.Identifier(KEEP)))
    _copy(conn, temp, [*names, KEEP], batch)
    keep = sql.SQL("b.{}").format(sql.Identifier(KEEP))
    on = sql.SQL(" AND ").join(
        sql.SQL("t.{} = b.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in to.keys
    )
    first = sql.Identifier(to.keys[0])
    image = [
        sql.SQL("{}.{}").format(sql.Identifier("b" if c in to.keys else "t"), sql.Identifier(c))
        for c in to.table_columns
    ]
    history = sql.Identifier(to.schema, to.ref.name + HISTORY_SUFFIX)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} ({}) SELECT %s, %s, %s, %s, t.{} IS NULL, {} FROM pitstop_batch b "
            "LEFT JOIN {} t ON {} WHERE {} OR t.{} IS NOT NULL"
        ).format(
            history,
            sql.SQL(", ").join(map(sql.Identifier, [n for n, _ in HISTORY_COLUMNS] + to.table_columns)),
            first,
            sql.SQL(", ").join(image),
            target,
            on,
            keep,
            first,
        ),
        [to.job, to.run_id, to.branch, batch_id],
    )
    conn.execute(
        sql.SQL("DELETE FROM {} t USING pitstop_batch b WHERE {} AND NOT {}").format(target, on, keep)
    )
    rest = [n for n in names if n not in to.keys]
    # Whole rows, as an INSERT of the job's columns makes them: a column of the table the job
    # does not write (an aggregate removed at a pit stop) gets its default, NULL unless the
    # table says otherwise, in every row the job writes.
    unwritten = [c for c in to.table_columns if c not in names and c not in to.keys]
    sets = [sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(n), sql.Identifier(n)) for n in rest]
    sets += [sql.SQL("{} = DEFAULT").format(sql.Identifier(c)) for c in unwritten]
    update = sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(sets)) if sets else sql.SQL("DO NOTHING")
    conn.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM pitstop_batch WHERE {} ON CONFLICT ({}) {}").format(
            target,
            cols,
            cols,
            sql.Identifier(KEEP),
            sql.SQL(", ").join(map(sql.Identifier, to.keys)),
            update,
        )
    )


def _finalize(
    conn: psycopg.Connection[Any], to: Target, target: Any, batch_id: int, closed: datetime, in_batch: bool
) -> None:
    """Step 2b: mark final the early rows whose window ended at or before ``closed`` and that are
    not rows of this batch, keeping their before-images (as :mod:`pitstop.connectors.upsert`)."""
    from psycopg import sql

    assert to.windows is not None
    outside = (
        sql.SQL("NOT EXISTS (SELECT 1 FROM pitstop_batch b WHERE {})").format(
            sql.SQL(" AND ").join(
                sql.SQL("t.{} = b.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in to.keys
            )
        )
        if in_batch
        else sql.SQL("true")
    )
    which = sql.SQL("t.{} AND t.{} <= %s AND {}").format(
        sql.Identifier(EARLY), sql.Identifier(to.windows.end), outside
    )
    history = sql.Identifier(to.schema, to.ref.name + HISTORY_SUFFIX)
    conn.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT %s, %s, %s, %s, false, {} FROM {} t WHERE {}").format(
            history,
            sql.SQL(", ").join(map(sql.Identifier, [n for n, _ in HISTORY_COLUMNS] + to.table_columns)),
            sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in to.table_columns),
            target,
            which,
        ),
        [to.job, to.run_id, to.branch, batch_id, closed],
    )
    finalize = sql.SQL("UPDATE {} t SET {} = false WHERE {}")
    conn.execute(finalize.format(target, sql.Identifier(EARLY), which), [closed])
