"""One micro-batch written exactly once into a PostgreSQL table, in one PostgreSQL transaction: the
steps of :mod:`pitstop.connectors.exactly_once`'s protocol, done in PostgreSQL by :class:`Writes`:

1. the batch is claimed by inserting its bookkeeping row ``(job, run, branch, batch, table, rows)``
   into ``pitstop_sink_batches`` (beside the table, in its schema) with ``ON CONFLICT DO NOTHING``:
   no row inserted means the batch is already there and nothing more is written. Two writers of
   one batch meet on the primary key: the second waits for the first and then finds its row;
2. the rows, by ``COPY`` into a temporary table, then appended by ``INSERT ... SELECT``, which also
   records each row's hash (``md5`` of the row's text as the table holds it) in
   ``pitstop_sink_rows`` beside the bookkeeping: what rolls the sink back to a snapshot's cut finds
   the rows of the batches after it by these (:mod:`pitstop.connectors.postgres.rollback`). A
   running aggregate's rows are upserted by its group keys (the table's primary key): the
   before-image of each row the batch changes into the history table ``<schema>."<table>__before"``
   (the same columns and meaning as the DuckDB sink's, :mod:`pitstop.connectors.upsert`); the rows
   the query no longer keeps deleted; ``INSERT ... ON CONFLICT (keys) DO UPDATE`` for the rest; a
   window's early rows whose window the batch's watermark closed are marked final (step 2b);
3. commit (the bookkeeping row is in since step 1). A process killed before the commit leaves
   nothing: PostgreSQL rolls the transaction back when the connection drops.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pitstop.connectors.exactly_once import Batch
from pitstop.connectors.postgres.options import TableRef
from pitstop.connectors.postgres.table import BOOKKEEPING, ROW_HASH, ROW_HASHES
from pitstop.connectors.upsert import HISTORY_COLUMNS, HISTORY_SUFFIX, KEEP, WindowRows, check_keys
from pitstop.plan.model import EARLY

if TYPE_CHECKING:
    import psycopg


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


class Writes:
    """One try at one batch on one connection: PostgreSQL's side of the exactly-once protocol
    (:class:`pitstop.connectors.exactly_once.Database`); ``names``: the job's columns."""

    def __init__(self, conn: psycopg.Connection[Any], to: Target, names: list[str]) -> None:
        from psycopg import sql

        self.conn = conn
        self.to = to
        self.names = names
        self.target = sql.Identifier(to.schema, to.ref.name)

    @property
    def run_id(self) -> str:
        return self.to.run_id

    @property
    def keys(self) -> tuple[str, ...]:
        return self.to.keys

    @property
    def sink_name(self) -> str:
        return self.to.about

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self.conn.transaction():
            yield self.conn

    def claim(self, conn: psycopg.Connection[Any], batch: Batch) -> bool:
        """Step 1: the bookkeeping row, inserted; none inserted: the batch is already written."""
        from psycopg import sql

        to = self.to
        fresh = conn.execute(
            sql.SQL(
                "INSERT INTO {} (job, run_id, branch, batch_id, sink_table, rows) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING batch_id"
            ).format(sql.Identifier(to.schema, BOOKKEEPING)),
            [to.job, to.run_id, to.branch, batch.batch_id, to.ref.text(), batch.counted],
        ).fetchone()
        return fresh is not None

    @contextmanager
    def staged(self, conn: psycopg.Connection[Any], batch: Batch) -> Iterator[None]:
        """Step 2: the batch by ``COPY`` into the temporary table ``pitstop_batch`` (dropped at the
        commit), an upsert's with its keep column, after the check of its keys."""
        from psycopg import sql

        upsert = bool(self.keys)
        if upsert:
            check_keys(batch.rows, self.keys, batch.batch_id, self.to.about)
        cols = sql.SQL(", ").join(map(sql.Identifier, self.names))
        conn.execute(
            sql.SQL("CREATE TEMP TABLE pitstop_batch ON COMMIT DROP AS SELECT {} FROM {} LIMIT 0").format(
                cols, self.target
            )
        )
        if upsert:
            conn.execute(
                sql.SQL("ALTER TABLE pitstop_batch ADD COLUMN {} boolean").format(sql.Identifier(KEEP))
            )
        names = [*self.names, KEEP] if upsert else self.names
        values = [batch.rows.column(n).to_pylist() for n in names]
        copying = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier("pitstop_batch"), sql.SQL(", ").join(map(sql.Identifier, names))
        )
        with conn.cursor().copy(copying) as copy:
            for row in zip(*values, strict=True):
                copy.write_row(row)
        yield

    def append(self, conn: psycopg.Connection[Any], batch: Batch) -> None:
        """Step 2a of an append: the rows into the table, each row's hash beside it (what a
        rollback to a snapshot's cut finds the rows by)."""
        from psycopg import sql

        cols = sql.SQL(", ").join(map(sql.Identifier, self.names))
        conn.execute(
            sql.SQL(
                "WITH ins AS (INSERT INTO {} ({}) SELECT {} FROM pitstop_batch RETURNING *) "
                "INSERT INTO {} SELECT %s, %s, %s, " + ROW_HASH.format("ins") + " FROM ins"
            ).format(self.target, cols, cols, sql.Identifier(self.to.schema, ROW_HASHES)),
            [self.to.run_id, self.to.branch, batch.batch_id],
        )

    def upsert(self, conn: psycopg.Connection[Any], batch: Batch) -> None:
        """Step 2a of an upsert: each changed row's before-image into the history table, rows no
        longer kept deleted, the kept ones upserted by key."""
        from psycopg import sql

        to, target, names = self.to, self.target, self.names
        keep = sql.SQL("b.{}").format(sql.Identifier(KEEP))
        on = self._on()
        first = sql.Identifier(to.keys[0])
        image = [
            sql.SQL("{}.{}").format(sql.Identifier("b" if c in to.keys else "t"), sql.Identifier(c))
            for c in to.table_columns
        ]
        conn.execute(
            sql.SQL(
                "INSERT INTO {} ({}) SELECT %s, %s, %s, %s, t.{} IS NULL, {} FROM pitstop_batch b "
                "LEFT JOIN {} t ON {} WHERE {} OR t.{} IS NOT NULL"
            ).format(
                self._history(),
                self._history_columns(),
                first,
                sql.SQL(", ").join(image),
                target,
                on,
                keep,
                first,
            ),
            [to.job, to.run_id, to.branch, batch.batch_id],
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
        update = (
            sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(sets)) if sets else sql.SQL("DO NOTHING")
        )
        cols = sql.SQL(", ").join(map(sql.Identifier, names))
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

    def finalize(self, conn: psycopg.Connection[Any], batch: Batch, in_batch: bool) -> None:
        """Step 2b: mark final the early rows whose window ended at or before ``batch.closed``
        and, ``in_batch``, that are not rows of this batch, keeping their before-images (as
        :mod:`pitstop.connectors.upsert`)."""
        from psycopg import sql

        to = self.to
        assert to.windows is not None
        outside = (
            sql.SQL("NOT EXISTS (SELECT 1 FROM pitstop_batch b WHERE {})").format(self._on())
            if in_batch
            else sql.SQL("true")
        )
        which = sql.SQL("t.{} AND t.{} <= %s AND {}").format(
            sql.Identifier(EARLY), sql.Identifier(to.windows.end), outside
        )
        conn.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT %s, %s, %s, %s, false, {} FROM {} t WHERE {}").format(
                self._history(),
                self._history_columns(),
                sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in to.table_columns),
                self.target,
                which,
            ),
            [to.job, to.run_id, to.branch, batch.batch_id, batch.closed],
        )
        finalize = sql.SQL("UPDATE {} t SET {} = false WHERE {}")
        conn.execute(finalize.format(self.target, sql.Identifier(EARLY), which), [batch.closed])

    def record(self, conn: psycopg.Connection[Any], batch: Batch) -> None:
        """Step 3: nothing more; the bookkeeping row is in since step 1 (:meth:`claim`)."""

    def _on(self) -> Any:
        """A table row ``t`` and a batch row ``b`` of the same key."""
        from psycopg import sql

        return sql.SQL(" AND ").join(
            sql.SQL("t.{} = b.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in self.to.keys
        )

    def _history(self) -> Any:
        from psycopg import sql

        return sql.Identifier(self.to.schema, self.to.ref.name + HISTORY_SUFFIX)

    def _history_columns(self) -> Any:
        from psycopg import sql

        names = [n for n, _ in HISTORY_COLUMNS] + self.to.table_columns
        return sql.SQL(", ").join(map(sql.Identifier, names))
