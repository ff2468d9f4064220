"""The PostgreSQL sink: a branch's micro-batches, exactly once, in a table of a PostgreSQL database.

:class:`PostgresSink` is the one object its callers use; its parts are modules of their own:

- :mod:`.options`: the mapping's ``dsn`` and ``table``, checked when the mapping is created;
- :mod:`.table`: the table's column types, the table created or checked, the bookkeeping and an
  upsert's history of before-images beside it;
- :mod:`.writes`: PostgreSQL's steps of the exactly-once write of one micro-batch
  (:mod:`pitstop.connectors.exactly_once`), in one PostgreSQL transaction (the bookkeeping row,
  the rows by ``COPY``, appended or upserted, the commit);
- :mod:`.rollback`: the rows written after a snapshot's cut, counted and taken back.

This module keeps the connection, the check of the table before the first batch, and the wait for
a server that goes away while a job runs: the batch waits and is tried again (0.5 s, doubling up
to 5 s), each try a whole transaction, until the server answers or the run is stopped
(:meth:`PostgresSink.interrupt`); the job stays RUNNING, reads nothing new meanwhile (the batch
in flight holds the query) and logs a warning once per outage. A server that does not answer when
a job is *created* is an error naming its host and port; when a stopped job *resumes*, the check
of the table waits for the first batch.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pitstop import dsn
from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.exactly_once import Batch, write_batch
from pitstop.connectors.postgres import rollback
from pitstop.connectors.postgres.options import parse_dsn, table_ref
from pitstop.connectors.postgres.table import (
    BOOKKEEPING,
    check_history,
    create_or_check,
    pg_type,
    table_schema,
)
from pitstop.connectors.postgres.writes import Target, Writes
from pitstop.connectors.upsert import KEEP, WindowRows
from pitstop.errors import PitstopError, PlanError
from pitstop.plan.model import EARLY
from pitstop.retry import Backoff, retry

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5
RETRY = Backoff(first_s=0.5, max_s=5.0)  # a batch waiting for the server tries again this often


class PostgresSink:
    """One branch's writer to one PostgreSQL table (see the module's protocol)."""

    def __init__(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> None:
        self.catalog = catalog
        self.mapping = mapping
        self.job = job
        self.run_id = run_id
        self.branch = branch
        self.keys = keys  # upsert on these columns; () appends (windows are emitted once)
        self.dsn = mapping.options["dsn"]
        self.params = parse_dsn(mapping.name, self.dsn)
        self.where = dsn.where(self.params)
        self.ref = table_ref(mapping.name, mapping.options.get("table", mapping.name))
        self.schema_name: str | None = None  # resolved at the first connection
        self.columns: list[tuple[str, str]] = []
        self.table_columns: list[str] = []  # an upsert's table, every column (before-images hold them)
        self.windows: WindowRows | None = None  # a window branch's rows (early results)
        self.checked = False
        self.waiting: str | None = None  # why a batch is waiting for the server, while it is
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # -- connecting -------------------------------------------------------------------------------
    def _about(self) -> str:
        return f"mapping '{self.mapping.name}' (PostgreSQL at {self.where}, table '{self.ref.text()}')"

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        extra: dict[str, Any] = {"fallback_application_name": "pitstop"}
        if "connect_timeout" not in self.params:
            extra["connect_timeout"] = CONNECT_TIMEOUT_S
        conn = psycopg.connect(self.dsn, autocommit=True, **extra)
        conn.execute("SET TIME ZONE 'UTC'")  # timestamps are naive UTC
        return conn

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                log.debug("closing a broken PostgreSQL connection", exc_info=True)

    def _unreachable(self, exc: BaseException) -> PlanError:
        said = dsn.mask(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return PlanError(
            f"mapping '{self.mapping.name}': cannot connect to PostgreSQL at {self.where} ({said}); "
            "start the server, or fix the mapping's 'dsn' (CREATE OR REPLACE MAPPING)"
        )

    def _schema(self, conn: psycopg.Connection[Any]) -> str:
        schema = self.schema_name or self.ref.schema
        if schema is None:
            row = conn.execute("SELECT current_schema()").fetchone()
            schema = None if row is None else row[0]
        return str(schema)

    # -- the table ---------------------------------------------------------------------------------
    def prepare(self, schema: list[tuple[str, str]]) -> None:
        """Map the job's columns to PostgreSQL types, then create or check the table. At CREATE
        JOB a server that does not answer is an error; when a run resumes, the check waits for
        the first batch (the job waits for the server, as it would while running)."""
        for name, kind in schema:
            if pg_type(kind) is None:
                raise PlanError(
                    f"{self._about()}: column '{name}' is {kind}, which the Postgres sink cannot write; "
                    "cast it in the job's SELECT (e.g. CAST(x AS VARCHAR))"
                )
        self.columns = list(schema)
        if self.windows is not None:
            self.columns.append((EARLY, "boolean"))
        import psycopg

        try:
            with self._lock:
                self._check_table()
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            with self._lock:
                self._drop_connection()
            if not self._resumed():
                raise self._unreachable(exc) from None
            log.warning(
                "%s: the server does not answer (%s); the job waits for it",
                self._about(),
                dsn.mask(str(exc).strip().splitlines()[0]),
            )

    def _resumed(self) -> bool:
        """This branch ran before (its checkpoint has planned a batch): a resume, not a CREATE."""
        folder = Path(self.catalog.get_run(self.run_id).folder)
        offsets = folder / "branches" / str(self.branch) / "checkpoint" / "offsets"
        return offsets.is_dir() and any(offsets.iterdir())

    def _check_table(self) -> None:
        """Create the table (and the bookkeeping tables, an upsert's history) if missing; else
        check its columns (:mod:`.table`)."""
        conn = self._connection()
        with conn.transaction():
            self.schema_name = table_schema(conn, self.ref, self._about())
            create_or_check(conn, self.schema_name, self.ref, self.columns, self.keys, self._about())
            if self.keys:
                self.table_columns = check_history(conn, self.schema_name, self.ref)
        self.checked = True

    # -- writing -----------------------------------------------------------------------------------
    def last_batch(self) -> int | None:
        """The last batch this sink holds for its run and branch (from the bookkeeping)."""
        from psycopg import sql

        try:
            with self._connect() as conn:
                schema = self.schema_name or self.ref.schema
                if schema is None:
                    row = conn.execute("SELECT current_schema()").fetchone()
                    schema = None if row is None else row[0]
                found = conn.execute(
                    sql.SQL("SELECT max(batch_id) FROM {} WHERE run_id = %s AND branch = %s").format(
                        sql.Identifier(str(schema), BOOKKEEPING)
                    ),
                    [self.run_id, self.branch],
                ).fetchone()
        except Exception as exc:  # noqa: BLE001 - psycopg's errors, said without the password
            raise PitstopError(
                f"{self._about()}: cannot read the sink's bookkeeping ({dsn.mask(str(exc).strip())})"
            ) from None
        return None if found is None or found[0] is None else int(found[0])

    def write(self, table: pa.Table, batch_id: int) -> None:
        """Write one micro-batch exactly once; wait for the server while it does not answer."""
        import psycopg

        # A window's row is early until the watermark passes its end.
        batch = Batch.of(table, batch_id, self.windows, keyed=bool(self.keys))

        def attempt() -> None:
            if self._stop.is_set():
                raise PitstopError(
                    f"{self._about()}: the job stopped before batch {batch_id} was written; "
                    "it is written when the job resumes"
                )
            try:
                with self._lock:
                    self._write_once(batch)
                if self.waiting is not None:
                    log.warning("%s: the server answers again; batch %d written", self._about(), batch_id)
                    self.waiting = None
            finally:
                if self._stop.is_set():  # interrupt() left the connection to the batch being written
                    with self._lock:
                        self._drop_connection()

        def waits(exc: psycopg.Error) -> None:
            with self._lock:
                self._drop_connection()
            said = dsn.mask(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            if self.waiting is None:
                log.warning(
                    "%s: batch %d cannot be written (%s); the job waits and tries again",
                    self._about(),
                    batch_id,
                    said,
                )
            self.waiting = f"waiting for PostgreSQL at {self.where}: {said}"

        retry(
            attempt,
            transient=(psycopg.OperationalError, psycopg.InterfaceError),
            backoff=RETRY,
            on_transient=waits,
            sleep=self._stop.wait,
        )

    def _write_once(self, batch: Batch) -> None:
        """One try at one batch (:func:`pitstop.connectors.exactly_once.write_batch` over
        :class:`.writes.Writes`), the table checked first if it was not."""
        conn = self._connection()
        if not self.checked:
            self._check_table()
        assert self.schema_name is not None
        names = [n for n, _ in self.columns] or [n for n in batch.rows.column_names if n != KEEP]
        target = Target(
            self.schema_name,
            self.ref,
            self.job,
            self.run_id,
            self.branch,
            self.keys,
            self.table_columns,
            self.windows,
            self._about(),
        )
        write_batch(Writes(conn, target, names), batch)

    def interrupt(self) -> None:
        """The run is stopping: a batch waiting for the server stops waiting (it is written when
        the job resumes); the connection is closed once no batch is being written."""
        self._stop.set()
        if self._lock.acquire(blocking=False):
            try:
                self._drop_connection()
            finally:
                self._lock.release()

    # -- rollback to a snapshot's cut (pitstop.connectors.rollback) -------------------------------
    def upsert_keys(self, conn: psycopg.Connection[Any]) -> tuple[str, ...]:
        """The columns an upsert replaces rows by (:func:`.rollback.upsert_keys`); () for a table
        that is appended to."""
        return rollback.upsert_keys(conn, self._schema(conn), self.ref)

    def restore_count(self, spans: list[tuple[str, int, int]]) -> int | None:
        """How many keys of an upsert table (a running aggregate's: it has a history of
        before-images) the spans wrote, each to get its value at the cut back (:meth:`roll_back`);
        None for a table that is appended to."""
        with self._connect() as conn:
            keys = self.upsert_keys(conn)
            if not keys:
                return None
            return rollback.count_restores(conn, self._schema(conn), self.ref, keys, spans)

    def rollback_counts(
        self, spans: list[tuple[str, int, int]]
    ) -> tuple[list[tuple[str, int, int]], int, list[tuple[str, int]]]:
        """``(run_id, batches, rows)`` written in the spans ``(run_id, branch, after)``, oldest first;
        how many of those rows have a hash; and ``(job, rows)`` of the other jobs that wrote the
        table (:func:`.rollback.count_written`)."""
        with self._connect() as conn:
            return rollback.count_written(conn, self._schema(conn), self.ref, self.job, spans)

    def roll_back(self, spans: list[tuple[str, int, int]], restores: int = 0) -> int:
        """Take back what the spans wrote, in one PostgreSQL transaction (:func:`.rollback.roll_back`):
        the rows deleted, or an upsert table's keys restored (the plan counted ``restores``).
        Idempotent: spans already rolled back have no bookkeeping rows left, and nothing is
        deleted."""
        with self._connect() as conn, conn.transaction():
            schema = self._schema(conn)
            keys = self.upsert_keys(conn)
            return rollback.roll_back(conn, schema, self.ref, keys, spans, restores, self._about())
