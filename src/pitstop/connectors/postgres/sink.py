"""The PostgreSQL sink: a branch's micro-batches, exactly once, in a table of a PostgreSQL database.

Write protocol of one micro-batch (:meth:`PostgresSink.write`), in one PostgreSQL transaction:

1. insert the bookkeeping row ``(job, run, branch, batch, table, rows)`` into
   ``pitstop_sink_batches`` (beside the table, in its schema) with ``ON CONFLICT DO NOTHING``: no
   row inserted means the batch is already there (Spark replayed it after a crash, a restart or
   a failed commit) and nothing more is written. Two writers of one batch meet on the primary key:
   the second waits for the first and then finds its row;
2. the rows, by ``COPY`` into a temporary table, then appended by ``INSERT ... SELECT``, which also
   records each row's hash (``md5`` of the row's text as the table holds it) in
   ``pitstop_sink_rows`` beside the bookkeeping: what rolls the sink back to a snapshot's cut finds
   the rows of the batches after it by these (:meth:`PostgresSink.roll_back`). A running
   aggregate's rows are upserted by its group keys
   (the table's primary key): ``COPY`` into a temporary table; the before-image of each row the
   batch changes into the history table ``<schema>."<table>__before"`` (the same columns and
   meaning as the DuckDB sink's, :mod:`pitstop.connectors.upsert`); the rows the query no longer
   keeps deleted; ``INSERT ... ON CONFLICT (keys) DO UPDATE`` for the rest;
3. commit. A process killed before the commit leaves nothing (PostgreSQL rolls the transaction
   back when the connection drops); killed after it, the replayed batch is skipped in step 1.

A fresh run (``CREATE JOB``, with or without ``FROM SNAPSHOT``) has a new run id, so its batch 0
is not mistaken for an earlier run's.

A server that goes away while a job runs: the batch waits and is tried again (0.5 s, doubling up
to 5 s), each try a whole transaction, until the server answers or the run is stopped
(:meth:`PostgresSink.interrupt`); the job stays RUNNING, reads nothing new meanwhile (the batch
in flight holds the query) and logs a warning once per outage. A server that does not answer when
a job is *created* is an error naming its host and port; when a stopped job *resumes*, the check
of the table waits for the first batch.

Column types: PostgreSQL types are mapped from the job's (Spark) column types by :data:`PG_TYPES`;
an existing table must have, for every column of the job, a column of the same name whose type
holds it (:func:`fits`), and no other column that is NOT NULL without a default.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pitstop import dsn
from pitstop.catalog.rows import Mapping
from pitstop.catalog.store import Catalog
from pitstop.connectors.upsert import HISTORY_COLUMNS, HISTORY_SUFFIX, KEEP, WindowRows, early_rows
from pitstop.errors import PitstopError, PlanError
from pitstop.faults import crash_point
from pitstop.names import check_name
from pitstop.plan.model import EARLY
from pitstop.retry import Backoff, retry

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

BOOKKEEPING = "pitstop_sink_batches"
ROW_HASHES = "pitstop_sink_rows"
ROW_HASH = "md5(ROW({0}.*)::text)"
"""A row's hash as the table holds it (every column, in the table's order); ``{0}`` its alias."""
CONNECT_TIMEOUT_S = 5
RETRY = Backoff(first_s=0.5, max_s=5.0)  # a batch waiting for the server tries again this often

PG_TYPES = {
    "string": "text",
    "boolean": "boolean",
    "tinyint": "smallint",
    "smallint": "smallint",
    "int": "integer",
    "bigint": "bigint",
    "float": "real",
    "double": "double precision",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "binary": "bytea",
}
"""Spark ``simpleString`` type -> the PostgreSQL type of a created table (``decimal(p,s)`` ->
``numeric(p,s)``)."""

_ACCEPTS = {
    "string": ("text", "character varying"),
    "boolean": ("boolean",),
    "tinyint": ("smallint", "integer", "bigint", "numeric"),
    "smallint": ("smallint", "integer", "bigint", "numeric"),
    "int": ("integer", "bigint", "numeric"),
    "bigint": ("bigint", "numeric"),
    "float": ("real", "double precision", "numeric"),
    "double": ("double precision", "numeric"),
    "date": ("date", "timestamp without time zone", "timestamp with time zone"),
    "timestamp": ("timestamp without time zone", "timestamp with time zone"),
    "timestamp_ntz": ("timestamp without time zone", "timestamp with time zone"),
    "binary": ("bytea",),
}
"""The existing column types (``format_type`` without modifiers) that hold a Spark type's values."""

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")


@dataclass(frozen=True)
class TableRef:
    """``[schema.]name`` of the sink table; no schema: the connection's ``current_schema()``."""

    schema: str | None
    name: str

    def text(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


def parse_dsn(mapping: str, text: str) -> dict[str, str]:
    """The connection parameters of a DSN, or PlanError (masked) naming the mapping."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(text).items() if v is not None}
    except Exception as exc:  # noqa: BLE001 - psycopg.ProgrammingError, but any parse failure
        raise PlanError(
            f"mapping '{mapping}': option 'dsn' is not a PostgreSQL connection string "
            f"({dsn.mask(str(exc).strip())}); write postgresql://user@host:port/database"
        ) from None
    port = params.get("port", "5432")
    if not all(p.isdigit() for p in port.split(",")):
        raise PlanError(f"mapping '{mapping}': option 'dsn' has port '{port}'; a port is a number")
    return params


def table_ref(mapping: str, text: str) -> TableRef:
    """``'schema.name'`` or ``'name'``, each part a valid name (PlanError otherwise)."""
    parts = text.split(".")
    if len(parts) > 2:
        raise PlanError(f"mapping '{mapping}': option 'table' is '{text}'; write 'name' or 'schema.name'")
    for part in parts:
        check_name("sink table", part)
    return TableRef(parts[0], parts[1]) if len(parts) == 2 else TableRef(None, parts[0])


def pg_type(spark_simple: str) -> str | None:
    """The PostgreSQL type a created table gives a Spark type; None if pitstop has none for it."""
    t = spark_simple.lower()
    decimal = _DECIMAL.fullmatch(t)
    if decimal:
        return f"numeric({decimal.group(1)},{decimal.group(2)})"
    return PG_TYPES.get(t)


def fits(spark_simple: str, existing: str) -> bool:
    """An existing column of type ``existing`` (``format_type``) holds the Spark type's values."""
    t, have = spark_simple.lower(), existing.lower()
    decimal = _DECIMAL.fullmatch(t)
    if decimal:
        if have == "numeric":
            return True
        numeric = _NUMERIC.fullmatch(have.replace(" ", ""))
        if numeric is None:
            return False
        p, s, p2, s2 = (int(x) for x in (*decimal.groups(), *numeric.groups()))
        return s2 >= s and p2 - s2 >= p - s
    if have.startswith("character varying("):  # a length limit may not hold a value
        return False
    base = have.split("(")[0].strip()
    return base in _ACCEPTS.get(t, ())


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
        """Create the table (and the bookkeeping table) if missing; else check its columns."""
        from psycopg import sql

        conn = self._connection()
        with conn.transaction():
            schema = self.ref.schema
            if schema is None:
                row = conn.execute("SELECT current_schema()").fetchone()
                if row is None or row[0] is None:
                    raise PlanError(
                        f"{self._about()}: the connection has no current schema; write 'schema.table'"
                    )
                schema = str(row[0])
            elif not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone():
                raise PlanError(f"{self._about()}: schema '{schema}' does not exist; create it first")
            self.schema_name = schema
            target = sql.Identifier(schema, self.ref.name)
            found = conn.execute("SELECT to_regclass(%s)", [target.as_string(conn)]).fetchone()
            if found is None or found[0] is None:
                cols = [
                    sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(pg_type(t) or ""))
                    for n, t in self.columns
                ]
                if self.keys:
                    cols.append(
                        sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, self.keys)))
                    )
                conn.execute(sql.SQL("CREATE TABLE {} ({})").format(target, sql.SQL(", ").join(cols)))
                log.info("%s: table created", self._about())
            else:
                self._check_columns(conn, target.as_string(conn))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (job text NOT NULL, run_id text NOT NULL, "
                    "branch integer NOT NULL, batch_id bigint NOT NULL, sink_table text NOT NULL, "
                    "rows bigint NOT NULL, committed timestamptz NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (run_id, branch, batch_id))"
                ).format(sql.Identifier(schema, BOOKKEEPING))
            )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (run_id text NOT NULL, branch integer NOT NULL, "
                    "batch_id bigint NOT NULL, row_hash text NOT NULL)"
                ).format(sql.Identifier(schema, ROW_HASHES))
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (run_id, branch, batch_id)").format(
                    sql.Identifier(f"{ROW_HASHES}_batch"), sql.Identifier(schema, ROW_HASHES)
                )
            )
            if self.keys:
                self._check_history(conn, target)
        self.checked = True

    def _check_history(self, conn: psycopg.Connection[Any], target: Any) -> None:
        """Create the table's history of before-images if missing (an upsert's; see the module's
        protocol), and learn the table's columns, which a before-image holds."""
        from psycopg import sql

        assert self.schema_name is not None
        meta = sql.SQL(", ").join(sql.SQL(f"NULL::{t} AS {n}") for n, t in HISTORY_COLUMNS)
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} AS SELECT {}, t.* FROM {} t WITH NO DATA").format(
                sql.Identifier(self.schema_name, self.ref.name + HISTORY_SUFFIX), meta, target
            )
        )
        history = sql.Identifier(self.schema_name, self.ref.name + HISTORY_SUFFIX)

        def columns(table: Any) -> list[tuple[str, str]]:
            rows = conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                "%s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                [table.as_string(conn)],
            ).fetchall()
            return [(str(n), str(t)) for n, t in rows]

        table = columns(target)
        kept = {n for n, _ in columns(history)}
        for name, kind in table:  # a column the table gained since the history was made
            if name not in kept:
                conn.execute(
                    sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                        history, sql.Identifier(name), sql.SQL(kind)
                    )
                )
        self.table_columns = [n for n, _ in table]

    def _check_columns(self, conn: psycopg.Connection[Any], regclass: str) -> None:
        rows = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef "
            "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [regclass],
        ).fetchall()
        existing = {
            str(name): (str(kind), bool(notnull), bool(default)) for name, kind, notnull, default in rows
        }
        where = f"{self._about()}: the existing table"
        for name, kind in self.columns:
            if name not in existing and self.keys:  # a running aggregate's table gains the column
                from psycopg import sql

                assert self.schema_name is not None
                conn.execute(
                    sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                        sql.Identifier(self.schema_name, self.ref.name),
                        sql.Identifier(name),
                        sql.SQL(pg_type(kind) or ""),
                    )
                )
                log.info("%s: column '%s' added (NULL in the rows written before)", self._about(), name)
                existing[name] = (pg_type(kind) or "", False, False)
            if name not in existing:
                raise PlanError(
                    f"{where} has no column '{name}' (it has {', '.join(existing) or 'none'}); alias the "
                    "job's column to one of the table's, or write to another table"
                )
            have = existing[name][0]
            if not fits(kind, have):
                raise PlanError(
                    f"{where} has column '{name}' of type {have}, which does not hold the job's "
                    f"{kind} ({pg_type(kind)}); change the column, or write to another table"
                )
        ours = {n for n, _ in self.columns}
        for name, (have, notnull, default) in existing.items():
            if name not in ours and notnull and not default:
                raise PlanError(
                    f"{where} has column '{name}' ({have}) NOT NULL without a default, which the job "
                    "does not write; give it a default, or write to another table"
                )
        if self.keys:
            unique = conn.execute(
                "SELECT 1 FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indisunique AND "
                "(SELECT array_agg(attname::text ORDER BY attname) FROM pg_attribute "
                " WHERE attrelid = i.indrelid AND attnum = ANY(i.indkey)) = %s",
                [regclass, sorted(self.keys)],
            ).fetchone()
            if unique is None:
                raise PlanError(
                    f"{where} has no unique index on ({', '.join(self.keys)}), which an upsert needs"
                )

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

        from pitstop.connectors.values import naive_utc

        batch = naive_utc(table)
        closed = None
        if self.windows is not None:  # a window's row is early until the watermark passes its end
            batch, closed = early_rows(batch, self.windows, batch_id)

        def attempt() -> None:
            if self._stop.is_set():
                raise PitstopError(
                    f"{self._about()}: the job stopped before batch {batch_id} was written; "
                    "it is written when the job resumes"
                )
            try:
                with self._lock:
                    self._write_once(batch, batch_id, closed)
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

    def _write_once(self, batch: pa.Table, batch_id: int, closed: datetime | None = None) -> None:
        from psycopg import sql

        conn = self._connection()
        if not self.checked:
            self._check_table()
        assert self.schema_name is not None
        target = sql.Identifier(self.schema_name, self.ref.name)
        names = [n for n, _ in self.columns] or [n for n in batch.column_names if n != KEEP]
        with conn.transaction():
            # Step 1. The bookkeeping row; none inserted: the batch is already written.
            fresh = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (job, run_id, branch, batch_id, sink_table, rows) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING batch_id"
                ).format(sql.Identifier(self.schema_name, BOOKKEEPING)),
                [self.job, self.run_id, self.branch, batch_id, self.ref.text(), batch.num_rows],
            ).fetchone()
            if fresh is None:
                log.info(
                    "%s: batch %s of run %s already written; skipped", self._about(), batch_id, self.run_id
                )
                return
            # Step 2. The rows, by COPY (into a temporary table first for an upsert).
            if batch.num_rows and not self.keys:
                self._append(conn, target, names, batch, batch_id)
            elif batch.num_rows:
                self._upsert(conn, target, names, batch, batch_id)
            if closed is not None:  # Step 2b. Windows this batch's watermark closed, final now.
                self._finalize(conn, target, batch_id, closed, in_batch=bool(batch.num_rows))
            crash_point("sink.before_commit")
        # Step 3. Committed (leaving the block).
        crash_point("sink.after_commit")

    # -- rollback to a snapshot's cut (pitstop.connectors.rollback) -------------------------------
    def upsert_keys(self, conn: psycopg.Connection[Any]) -> tuple[str, ...]:
        """The columns an upsert replaces rows by: the table's primary key (else its narrowest
        unique index); () when the table has no history of before-images (it is appended to)."""
        from psycopg import sql

        schema = self._schema(conn)
        history = sql.Identifier(schema, self.ref.name + HISTORY_SUFFIX)
        if conn.execute("SELECT to_regclass(%s)", [history.as_string(conn)]).fetchone() in (None, (None,)):
            return ()
        row = conn.execute(
            "SELECT (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(i.indkey) WITH ORDINALITY "
            "k(attnum, ord) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum) "
            "FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indisunique "
            "ORDER BY i.indisprimary DESC, i.indnatts LIMIT 1",
            [sql.Identifier(schema, self.ref.name).as_string(conn)],
        ).fetchone()
        return () if row is None or row[0] is None else tuple(str(c) for c in row[0])

    def restore_count(self, spans: list[tuple[str, int, int]]) -> int | None:
        """How many keys of an upsert table (a running aggregate's: it has a history of
        before-images) the spans wrote, each to get its value at the cut back (:meth:`roll_back`);
        None for a table that is appended to."""
        from psycopg import sql

        with self._connect() as conn:
            keys = self.upsert_keys(conn)
            if not keys:
                return None
            within, params = _spans(spans)
            history = sql.Identifier(self._schema(conn), self.ref.name + HISTORY_SUFFIX)
            by_key = sql.SQL(", ").join(sql.SQL("x.{}").format(sql.Identifier(k)) for k in keys)
            query = "SELECT count(*) FROM (SELECT DISTINCT {} FROM {} x JOIN {} ON " + _ON + ") d"
            found = conn.execute(sql.SQL(query).format(by_key, history, within), params).fetchone()
        return int(found[0]) if found else 0

    def rollback_counts(
        self, spans: list[tuple[str, int, int]]
    ) -> tuple[list[tuple[str, int, int]], int, list[tuple[str, int]]]:
        """``(run_id, batches, rows)`` written in the spans ``(run_id, branch, after)``, oldest first;
        how many of those rows have a hash (rows written before pitstop kept them have none); and
        ``(job, rows)`` of the other jobs that wrote the table (never touched)."""
        from psycopg import sql

        with self._connect() as conn:
            schema = self._schema(conn)
            within, params = _spans(spans)
            book = sql.Identifier(schema, BOOKKEEPING)
            if conn.execute("SELECT to_regclass(%s)", [book.as_string(conn)]).fetchone() in (None, (None,)):
                return [], 0, []
            others = conn.execute(
                sql.SQL(
                    "SELECT job, sum(rows) FROM {} WHERE sink_table = %s AND lower(job) <> lower(%s) "
                    "GROUP BY job ORDER BY job"
                ).format(book),
                [self.ref.text(), self.job],
            ).fetchall()
            per_run = conn.execute(
                sql.SQL(
                    "SELECT x.run_id, count(*), sum(x.rows) FROM {} x JOIN {} ON " + _ON + " "
                    "WHERE x.sink_table = %s GROUP BY x.run_id ORDER BY min(x.committed)"
                ).format(book, within),
                [*params, self.ref.text()],
            ).fetchall()
            hashes = sql.Identifier(schema, ROW_HASHES)
            hashed = 0
            if conn.execute("SELECT to_regclass(%s)", [hashes.as_string(conn)]).fetchone() not in (
                None,
                (None,),
            ):
                found = conn.execute(
                    sql.SQL("SELECT count(*) FROM {} x JOIN {} ON " + _ON).format(hashes, within), params
                ).fetchone()
                hashed = int(found[0]) if found else 0
        return (
            [(str(r), int(n), int(rows or 0)) for r, n, rows in per_run],
            hashed,
            [(str(j), int(n or 0)) for j, n in others],
        )

    def roll_back(self, spans: list[tuple[str, int, int]], restores: int = 0) -> int:
        """Delete the rows the spans wrote (found by hash, as many of each as they wrote), their
        hashes and bookkeeping rows, in one PostgreSQL transaction; returns the rows deleted. An
        upsert table instead gets each key's value at the cut back (:meth:`_restore_keys`; the
        plan counted ``restores`` keys). Idempotent: spans already rolled back have no
        bookkeeping rows left, and nothing is deleted. PitstopError (nothing deleted) if the
        table holds fewer rows than the bookkeeping counts."""
        from psycopg import sql

        with self._connect() as conn, conn.transaction():
            schema = self._schema(conn)
            within, params = _spans(spans)
            book, hashes = sql.Identifier(schema, BOOKKEEPING), sql.Identifier(schema, ROW_HASHES)
            target = sql.Identifier(schema, self.ref.name)
            keys = self.upsert_keys(conn)
            if keys:
                return self._restore_keys(conn, schema, keys, within, params, restores)
            found = conn.execute(
                sql.SQL(
                    "SELECT coalesce(sum(x.rows), 0) FROM {} x JOIN {} ON " + _ON + " WHERE x.sink_table = %s"
                ).format(book, within),
                [*params, self.ref.text()],
            ).fetchone()
            expected = int(found[0]) if found else 0
            if expected == 0:
                deleted = 0
            else:
                cur = conn.execute(
                    sql.SQL(
                        "WITH gone AS (SELECT x.row_hash AS h, count(*) AS n FROM {} x JOIN {} ON "
                        + _ON
                        + " "
                        "GROUP BY 1), ranked AS (SELECT t.ctid AS tid, t.h, row_number() OVER "
                        "(PARTITION BY t.h ORDER BY t.ctid DESC) AS k FROM (SELECT ctid, "
                        + ROW_HASH.format("t")
                        + " AS h "
                        "FROM {} t) t "
                        "WHERE t.h IN (SELECT h FROM gone)) "
                        "DELETE FROM {} WHERE ctid IN (SELECT r.tid FROM ranked r JOIN gone g ON r.h = g.h "
                        "WHERE r.k <= g.n)"
                    ).format(hashes, within, target, target),
                    params,
                )
                deleted = cur.rowcount
                if deleted != expected:
                    raise PitstopError(
                        f"{self._about()}: the table holds {deleted:,} of the {expected:,} rows its "
                        "bookkeeping says the job wrote after the cut; nothing was rolled back there"
                    )
            for table in (hashes, book):
                conn.execute(sql.SQL("DELETE FROM {} x USING {} WHERE " + _ON).format(table, within), params)
        return deleted

    def _restore_keys(
        self,
        conn: psycopg.Connection[Any],
        schema: str,
        keys: tuple[str, ...],
        within: Any,
        params: list[Any],
        restores: int,
    ) -> int:
        """An upsert table back at the cut, inside :meth:`roll_back`'s transaction (the DuckDB
        sink's rule, :mod:`pitstop.connectors.duckdb.connector`): each key the spans wrote gets its
        before-image from the first batch after the cut that wrote it (spans in the order of the
        job's history, then batch), or is deleted if it had no row then; the spans' before-images
        and bookkeeping rows go. Returns the keys restored; PitstopError (nothing done) if the
        history holds another number of keys than the plan counted."""
        from psycopg import sql

        target = sql.Identifier(schema, self.ref.name)
        history = sql.Identifier(schema, self.ref.name + HISTORY_SUFFIX)
        table = [
            str(n)
            for (n,) in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                "AND NOT attisdropped ORDER BY attnum",
                [target.as_string(conn)],
            ).fetchall()
        ]
        by_key = sql.SQL(", ").join(sql.SQL("x.{}").format(sql.Identifier(k)) for k in keys)
        conn.execute(
            sql.SQL(
                "CREATE TEMP TABLE pitstop_at_cut ON COMMIT DROP AS SELECT DISTINCT ON ({}) x.* "
                "FROM {} x JOIN {} ON " + _ON + " ORDER BY {}, s.ord, x.batch_id"
            ).format(by_key, history, within, by_key),
            params,
        )
        found = conn.execute("SELECT count(*) FROM pitstop_at_cut").fetchone()
        restored = int(found[0]) if found else 0
        if restored == 0:  # rolled back already (or nothing written after the cut)
            return 0
        if restores and restored != restores:
            raise PitstopError(
                f"{self._about()}: its history holds {restored:,} keys written after the cut, not the "
                f"{restores:,} counted; nothing was rolled back there"
            )
        on = sql.SQL(" AND ").join(
            sql.SQL("t.{} = f.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in keys
        )
        names = sql.SQL(", ").join(map(sql.Identifier, table))
        conn.execute(sql.SQL("DELETE FROM {} t USING pitstop_at_cut f WHERE {}").format(target, on))
        conn.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM pitstop_at_cut WHERE NOT absent").format(
                target, names, names
            )
        )
        for kept in (history, sql.Identifier(schema, BOOKKEEPING)):
            conn.execute(sql.SQL("DELETE FROM {} x USING {} WHERE " + _ON).format(kept, within), params)
        return restored

    def _schema(self, conn: psycopg.Connection[Any]) -> str:
        schema = self.schema_name or self.ref.schema
        if schema is None:
            row = conn.execute("SELECT current_schema()").fetchone()
            schema = None if row is None else row[0]
        return str(schema)

    def _append(
        self, conn: psycopg.Connection[Any], target: Any, names: list[str], batch: pa.Table, batch_id: int
    ) -> None:
        """Step 2 of an append: the batch into a temporary table, then into the table, each row's
        hash beside it (what a rollback to a snapshot's cut finds the rows by)."""
        from psycopg import sql

        assert self.schema_name is not None
        cols = sql.SQL(", ").join(map(sql.Identifier, names))
        conn.execute(
            sql.SQL("CREATE TEMP TABLE pitstop_batch ON COMMIT DROP AS SELECT {} FROM {} LIMIT 0").format(
                cols, target
            )
        )
        self._copy(conn, sql.Identifier("pitstop_batch"), names, batch)
        conn.execute(
            sql.SQL(
                "WITH ins AS (INSERT INTO {} ({}) SELECT {} FROM pitstop_batch RETURNING *) "
                "INSERT INTO {} SELECT %s, %s, %s, " + ROW_HASH.format("ins") + " FROM ins"
            ).format(target, cols, cols, sql.Identifier(self.schema_name, ROW_HASHES)),
            [self.run_id, self.branch, batch_id],
        )

    def _copy(self, conn: psycopg.Connection[Any], into: Any, names: list[str], batch: pa.Table) -> None:
        from psycopg import sql

        cols = sql.SQL(", ").join(map(sql.Identifier, names))
        values = [batch.column(n).to_pylist() for n in names]
        with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(into, cols)) as copy:
            for row in zip(*values, strict=True):
                copy.write_row(row)

    def _upsert(
        self, conn: psycopg.Connection[Any], target: Any, names: list[str], batch: pa.Table, batch_id: int
    ) -> None:
        """Step 2 of an upsert: the batch into a temporary table, each changed row's before-image
        into the history table, rows no longer kept deleted, the kept ones upserted by key."""
        from psycopg import sql

        if KEEP not in batch.column_names:
            batch = batch.append_column(KEEP, pa.array([True] * batch.num_rows, pa.bool_()))
        for key in self.keys:
            if batch.column(key).null_count:
                raise PitstopError(
                    f"{self._about()}: group key '{key}' is NULL in {batch.column(key).null_count} row(s) "
                    f"of batch {batch_id}, and a key of the sink's rows cannot be NULL; nothing of the "
                    f"batch was written. Group by COALESCE({key}, ...) AS {key} instead"
                )
        assert self.schema_name is not None
        temp = sql.Identifier("pitstop_batch")
        cols = sql.SQL(", ").join(map(sql.Identifier, names))
        conn.execute(
            sql.SQL("CREATE TEMP TABLE pitstop_batch ON COMMIT DROP AS SELECT {} FROM {} LIMIT 0").format(
                cols, target
            )
        )
        conn.execute(sql.SQL("ALTER TABLE pitstop_batch ADD COLUMN {} boolean").format(sql.Identifier(KEEP)))
        self._copy(conn, temp, [*names, KEEP], batch)
        keep = sql.SQL("b.{}").format(sql.Identifier(KEEP))
        on = sql.SQL(" AND ").join(
            sql.SQL("t.{} = b.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in self.keys
        )
        first = sql.Identifier(self.keys[0])
        image = [
            sql.SQL("{}.{}").format(sql.Identifier("b" if c in self.keys else "t"), sql.Identifier(c))
            for c in self.table_columns
        ]
        history = sql.Identifier(self.schema_name, self.ref.name + HISTORY_SUFFIX)
        conn.execute(
            sql.SQL(
                "INSERT INTO {} ({}) SELECT %s, %s, %s, %s, t.{} IS NULL, {} FROM pitstop_batch b "
                "LEFT JOIN {} t ON {} WHERE {} OR t.{} IS NOT NULL"
            ).format(
                history,
                sql.SQL(", ").join(map(sql.Identifier, [n for n, _ in HISTORY_COLUMNS] + self.table_columns)),
                first,
                sql.SQL(", ").join(image),
                target,
                on,
                keep,
                first,
            ),
            [self.job, self.run_id, self.branch, batch_id],
        )
        conn.execute(
            sql.SQL("DELETE FROM {} t USING pitstop_batch b WHERE {} AND NOT {}").format(target, on, keep)
        )
        rest = [n for n in names if n not in self.keys]
        # Whole rows, as an INSERT of the job's columns makes them: a column of the table the job
        # does not write (an aggregate removed at a pit stop) gets its default, NULL unless the
        # table says otherwise, in every row the job writes.
        unwritten = [c for c in self.table_columns if c not in names and c not in self.keys]
        sets = [sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(n), sql.Identifier(n)) for n in rest]
        sets += [sql.SQL("{} = DEFAULT").format(sql.Identifier(c)) for c in unwritten]
        update = (
            sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(sets)) if sets else sql.SQL("DO NOTHING")
        )
        conn.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM pitstop_batch WHERE {} ON CONFLICT ({}) {}").format(
                target,
                cols,
                cols,
                sql.Identifier(KEEP),
                sql.SQL(", ").join(map(sql.Identifier, self.keys)),
                update,
            )
        )

    def _finalize(
        self, conn: psycopg.Connection[Any], target: Any, batch_id: int, closed: datetime, in_batch: bool
    ) -> None:
        """Mark final the early rows whose window ended at or before ``closed`` and that are not
        rows of this batch, keeping their before-images (as :mod:`pitstop.connectors.upsert`)."""
        from psycopg import sql

        assert self.windows is not None and self.schema_name is not None
        outside = (
            sql.SQL("NOT EXISTS (SELECT 1 FROM pitstop_batch b WHERE {})").format(
                sql.SQL(" AND ").join(
                    sql.SQL("t.{} = b.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in self.keys
                )
            )
            if in_batch
            else sql.SQL("true")
        )
        which = sql.SQL("t.{} AND t.{} <= %s AND {}").format(
            sql.Identifier(EARLY), sql.Identifier(self.windows.end), outside
        )
        history = sql.Identifier(self.schema_name, self.ref.name + HISTORY_SUFFIX)
        conn.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT %s, %s, %s, %s, false, {} FROM {} t WHERE {}").format(
                history,
                sql.SQL(", ").join(map(sql.Identifier, [n for n, _ in HISTORY_COLUMNS] + self.table_columns)),
                sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in self.table_columns),
                target,
                which,
            ),
            [self.job, self.run_id, self.branch, batch_id, closed],
        )
        finalize = sql.SQL("UPDATE {} t SET {} = false WHERE {}")
        conn.execute(finalize.format(target, sql.Identifier(EARLY), which), [closed])

    def interrupt(self) -> None:
        """The run is stopping: a batch waiting for the server stops waiting (it is written when
        the job resumes); the connection is closed once no batch is being written."""
        self._stop.set()
        if self._lock.acquire(blocking=False):
            try:
                self._drop_connection()
            finally:
                self._lock.release()


_ON = "x.run_id = s.run_id AND x.branch = s.branch AND x.batch_id > s.after"


def _spans(spans: list[tuple[str, int, int]]) -> tuple[Any, list[Any]]:
    """The spans ``(run_id, branch, after)`` as an inline table, and its parameters; ``ord`` is a
    span's place in the job's history (the snapshot's run first, then later runs)."""
    from psycopg import sql

    rows = ", ".join("(%s::text, %s::integer, %s::bigint, %s::integer)" for _ in spans)
    return (
        sql.SQL(f"(VALUES {rows or '(NULL, NULL, NULL, NULL)'}) AS s(run_id, branch, after, ord)"),
        [v for i, span in enumerate(spans) for v in (*span, i)],
    )
