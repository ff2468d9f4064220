"""The DuckDB catalog of a pitstop home: mappings, jobs, runs, snapshots and sink bookkeeping.

Catalog tables live in the ``pitstop`` schema of ``<home>/catalog.duckdb``; DuckDB sink tables live
in its ``main`` schema, so that a sink's rows and its bookkeeping commit in one transaction.
One DuckDB database object is shared by the process; each thread works through its own cursor.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from pitstop.catalog import secrets
from pitstop.catalog.rows import (
    Job,
    LateCount,
    LateRecord,
    LateSummary,
    Mapping,
    MetricSample,
    Reject,
    RejectSummary,
    Run,
    Snapshot,
    View,
    dumps,
)
from pitstop.errors import CatalogError

log = logging.getLogger(__name__)

SCHEMA_VERSION = 7

_LATE_LINEAGE = """WITH RECURSIVE lineage(job, run_id, cut, depth) AS (
        SELECT lower(name), run_id, CAST(NULL AS JSON), 0 FROM pitstop.jobs
        UNION ALL
        SELECT l.job,
               coalesce(json_extract_string(r.restore, '$.from_run'),
                        json_extract_string(s.manifest, '$.run_id')),
               coalesce(json_extract(r.restore, '$.from_cut'), json_extract(s.manifest, '$.cut.batches')),
               l.depth + 1
        FROM lineage l JOIN pitstop.runs r ON r.run_id = l.run_id
        LEFT JOIN pitstop.snapshots s
          ON lower(s.name) = lower(json_extract_string(r.restore, '$.snapshot'))
        WHERE r.restore IS NOT NULL AND l.depth < 1000
    ), owned AS (
        SELECT l.job, c.* FROM lineage l JOIN pitstop.late_counts c ON c.run_id = l.run_id
        WHERE l.cut IS NULL
           OR c.batch_id <= CAST(json_extract_string(l.cut, '$."' || c.branch || '"') AS BIGINT)
    )"""
"""Each job (lower-case name) with the late counts that are its own (``owned``): its run's, and
for a run restored from a snapshot, the counts of the run the snapshot was taken of up to the
snapshot's cut (``from_cut``, the cut's last batch per branch, recorded when the job is created;
for a run recorded before that, the snapshot's manifest if it is still listed), and so on back.
Batches of the old run after the cut are not the restored job's: it read that input again."""


def _late_rows() -> str:
    return f"""{_LATE_LINEAGE}
        SELECT j.name AS job, o.stage, o.source, sum(o.rows) AS rows,
               min(o.seen_at) AS first_seen, max(o.seen_at) AS last_seen
        FROM owned o JOIN pitstop.jobs j ON lower(j.name) = o.job
        WHERE o.rows > 0
        GROUP BY ALL"""


_MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE SCHEMA IF NOT EXISTS pitstop",
        "CREATE TABLE pitstop.meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
        """CREATE TABLE pitstop.mappings (
            name VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, definition JSON NOT NULL,
            created TIMESTAMP NOT NULL)""",
        """CREATE TABLE pitstop.jobs (
            name VARCHAR PRIMARY KEY, sql VARCHAR NOT NULL, status VARCHAR NOT NULL,
            detail VARCHAR NOT NULL, run_id VARCHAR NOT NULL, snapshot VARCHAR,
            created TIMESTAMP NOT NULL, updated TIMESTAMP NOT NULL)""",
        """CREATE TABLE pitstop.runs (
            run_id VARCHAR PRIMARY KEY, job VARCHAR NOT NULL, folder VARCHAR NOT NULL,
            plan JSON NOT NULL, restore JSON, started TIMESTAMP NOT NULL)""",
        """CREATE TABLE pitstop.snapshots (
            name VARCHAR PRIMARY KEY, job VARCHAR NOT NULL, created TIMESTAMP NOT NULL,
            path VARCHAR NOT NULL, size_bytes BIGINT NOT NULL, rows BIGINT NOT NULL,
            manifest JSON NOT NULL)""",
        """CREATE TABLE pitstop.sink_batches (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, rows BIGINT NOT NULL, committed TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, branch, batch_id))""",
    ],
    2: [
        "ALTER TABLE pitstop.jobs ADD COLUMN options JSON DEFAULT '{}'",
        """CREATE TABLE pitstop.views (
            name VARCHAR PRIMARY KEY, sql VARCHAR NOT NULL, created TIMESTAMP NOT NULL)""",
    ],
    3: [
        # Malformed records kept out of jobs (pitstop.connectors.rejects). The key makes ingesting
        # a source's rejects file twice harmless; line 0 (WHOLE_FILE) is a reject of a whole file
        # (DuckDB key columns cannot be NULL).
        """CREATE TABLE pitstop.rejects (
            job VARCHAR NOT NULL, source VARCHAR NOT NULL, file VARCHAR NOT NULL, line BIGINT NOT NULL,
            raw VARCHAR, raw_bytes BIGINT NOT NULL, reason VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL, PRIMARY KEY (job, source, file, line))""",
        "COMMENT ON TABLE pitstop.rejects IS 'malformed records that File sources kept out of jobs'",
        "COMMENT ON COLUMN pitstop.rejects.line IS "
        "'line of the record (CSV: where its row starts; Parquet: row number); 0: the whole file'",
        "COMMENT ON COLUMN pitstop.rejects.raw IS "
        "'the record''s text, its first 4 KB; NULL for a mapping with onError = skip'",
        "COMMENT ON COLUMN pitstop.rejects.raw_bytes IS 'the record''s full length in bytes'",
    ],
    4: [
        # Rejects outlive DROP JOB (input records are never lost), and a job created again under
        # the same name reads the same files again: a reject is keyed by the run that read it,
        # not by the job's name, so the new job's rejects are kept beside the old ones.
        """CREATE TABLE pitstop.rejects_v4 (
            job VARCHAR NOT NULL, source VARCHAR NOT NULL, file VARCHAR NOT NULL, line BIGINT NOT NULL,
            raw VARCHAR, raw_bytes BIGINT NOT NULL, reason VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL, PRIMARY KEY (run_id, source, file, line))""",
        "INSERT INTO pitstop.rejects_v4 SELECT * FROM pitstop.rejects",
        "DROP TABLE pitstop.rejects",
        "ALTER TABLE pitstop.rejects_v4 RENAME TO rejects",
        "COMMENT ON TABLE pitstop.rejects IS 'malformed records that sources kept out of jobs; "
        "kept after their job is dropped'",
        "COMMENT ON COLUMN pitstop.rejects.job IS 'the job whose run read the record (its name then)'",
        "COMMENT ON COLUMN pitstop.rejects.line IS "
        "'line of the record (CSV: where its row starts; Parquet: row number); 0: the whole file'",
        "COMMENT ON COLUMN pitstop.rejects.raw IS "
        "'the record''s text, its first 4 KB; NULL for a mapping with onError = skip'",
        "COMMENT ON COLUMN pitstop.rejects.raw_bytes IS 'the record''s full length in bytes'",
        "COMMENT ON COLUMN pitstop.rejects.run_id IS 'the run that read the record (pitstop.runs)'",
    ],
    5: [
        # What each batch of a DuckDB sink wrote, row by row (a hash of the row as the table holds
        # it), in the batch's own transaction: what rolls the sink back to a snapshot's cut
        # (pitstop.connectors.rollback) finds and removes exactly the rows of the batches after it.
        """CREATE TABLE IF NOT EXISTS pitstop.sink_rows (
            run_id VARCHAR NOT NULL, branch INTEGER NOT NULL, batch_id BIGINT NOT NULL,
            row_hash UBIGINT NOT NULL)""",
        # The last batch each branch of a run committed, recorded when its folder (and checkpoints)
        # goes: how far a job ran past a snapshot (SHOW SNAPSHOTS) whatever its sinks are.
        """CREATE TABLE IF NOT EXISTS pitstop.run_ends (
            run_id VARCHAR PRIMARY KEY, batches JSON NOT NULL, ended TIMESTAMP NOT NULL)""",
        "COMMENT ON TABLE pitstop.sink_rows IS 'per row a DuckDB sink wrote: its run, branch, batch and "
        "hash(columns in table order); rows of batches written before pitstop kept them are absent'",
    ],
    6: [
        # Rows that stateful stages dropped because they were behind the watermark
        # (pitstop.engine.late): counted per run, branch, micro-batch, stage and source, and with
        # 'lateRows'='keep' kept one by one. Like rejects, they outlive DROP JOB.
        """CREATE TABLE IF NOT EXISTS pitstop.late_counts (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, stage VARCHAR NOT NULL, source VARCHAR NOT NULL,
            rows BIGINT NOT NULL, seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, branch, batch_id, stage, source))""",
        "COMMENT ON TABLE pitstop.late_counts IS 'rows each stage dropped as late (behind the "
        "watermark), per run, branch, micro-batch and source; kept after their job is dropped'",
        """CREATE TABLE IF NOT EXISTS pitstop.late_records (
            job VARCHAR NOT NULL, run_id VARCHAR NOT NULL, branch INTEGER NOT NULL,
            batch_id BIGINT NOT NULL, stage VARCHAR NOT NULL, source VARCHAR NOT NULL,
            part INTEGER NOT NULL, line INTEGER NOT NULL, window_start TIMESTAMP, window_end TIMESTAMP,
            event_time TIMESTAMP, watermark TIMESTAMP NOT NULL, record JSON NOT NULL,
            seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, branch, batch_id, stage, source, part, line))""",
        "COMMENT ON TABLE pitstop.late_records IS 'rows stages dropped as late, kept by jobs with "
        "OPTIONS (''lateRows''=''keep''): one per window missed; kept after their job is dropped'",
        "COMMENT ON COLUMN pitstop.late_records.record IS 'the stage''s input row, as JSON'",
        "COMMENT ON COLUMN pitstop.late_records.watermark IS 'the watermark that made the row late'",
        f"CREATE OR REPLACE VIEW pitstop.late_rows AS {_late_rows()}",
        "COMMENT ON VIEW pitstop.late_rows IS 'per existing job, stage and source: the rows dropped "
        "as late by the job and the runs it was restored from (as SHOW JOBS counts them)'",
    ],
    7: [
        # What the manager samples of its running jobs every metrics_s seconds
        # (pitstop.engine.metrics): one row per job, branch and stateful stage and round; only the
        # last metrics_keep rounds are kept (Catalog.add_metrics).
        """CREATE TABLE IF NOT EXISTS pitstop.metrics (
            sampled TIMESTAMP NOT NULL, job VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            branch INTEGER NOT NULL, sink VARCHAR NOT NULL, stage VARCHAR, batch_id BIGINT,
            input_rows BIGINT, input_rows_per_s DOUBLE, processed_rows_per_s DOUBLE, batch_ms BIGINT,
            watermark TIMESTAMP, state_rows BIGINT, state_bytes BIGINT, late_rows BIGINT,
            lag_records BIGINT, lag JSON, restarts INTEGER NOT NULL)""",
        "COMMENT ON TABLE pitstop.metrics IS 'running jobs sampled every PITSTOP_METRICS_S seconds: one "
        "row per job, branch, stateful stage and sample; the last PITSTOP_METRICS_KEEP samples are kept'",
        "COMMENT ON COLUMN pitstop.metrics.sampled IS 'when the sample was taken (UTC)'",
        "COMMENT ON COLUMN pitstop.metrics.stage IS 'the stateful stage; NULL for a branch without one'",
        "COMMENT ON COLUMN pitstop.metrics.batch_id IS 'the last micro-batch Spark reported on'",
        "COMMENT ON COLUMN pitstop.metrics.input_rows IS 'rows that micro-batch read'",
        "COMMENT ON COLUMN pitstop.metrics.batch_ms IS 'how long that micro-batch took, in ms'",
        "COMMENT ON COLUMN pitstop.metrics.watermark IS 'the branch''s event-time watermark'",
        "COMMENT ON COLUMN pitstop.metrics.state_rows IS 'rows in the stage''s state; NULL where Spark "
        "does not count them (its RocksDB state store, as pitstop runs it)'",
        "COMMENT ON COLUMN pitstop.metrics.state_bytes IS 'memory the stage''s state store uses, in bytes'",
        "COMMENT ON COLUMN pitstop.metrics.late_rows IS 'rows the stage dropped as late (as SHOW JOBS "
        "counts them)'",
        "COMMENT ON COLUMN pitstop.metrics.lag_records IS 'records behind the end of the branch''s "
        "sources (Kafka); NULL where no source tells'",
        "COMMENT ON COLUMN pitstop.metrics.lag IS 'records behind, per source and partition (JSON)'",
        "COMMENT ON COLUMN pitstop.metrics.restarts IS 'restarts of the branch from its checkpoint "
        "since this pitstop process started'",
    ],
}

_LINEAGE = """WITH RECURSIVE lineage(job, run_id, depth) AS (
        SELECT lower(name), run_id, 0 FROM pitstop.jobs
        UNION ALL
        SELECT l.job,
               coalesce(json_extract_string(r.restore, '$.from_run'),
                        json_extract_string(s.manifest, '$.run_id')),
               l.depth + 1
        FROM lineage l JOIN pitstop.runs r ON r.run_id = l.run_id
        LEFT JOIN pitstop.snapshots s
          ON lower(s.name) = lower(json_extract_string(r.restore, '$.snapshot'))
        WHERE r.restore IS NOT NULL AND l.depth < 1000
    )"""
"""Each job (lower-case name) with the runs whose rejects are its own: its run, and for a run
restored from a snapshot, the run the snapshot was taken of (``from_run``, recorded when the job
is created; for a run recorded before that, the snapshot's manifest if it is still listed), and
so on back. A job created again under an old name, not from a snapshot, has none of the old
job's runs."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Catalog:
    """Typed access to ``catalog.duckdb``. Safe to use from several threads."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        """Open (and create or upgrade) the catalog at ``path``.

        ``read_only=True`` is for ``pitstop check``: the file must exist; nothing is created,
        migrated or written, and a catalog at another schema version is refused (see
        :meth:`_require_current`). Measured on DuckDB 2.0.0: a read-only open beside a process
        that holds the file read-write fails ("Conflicting lock is held"), so does a read-write
        open beside a read-only holder; read-only opens share the file with each other; a WAL
        left by a killed writer is replayed in memory, and the file and the WAL stay byte-identical.
        """
        self.path = path
        self.read_only = read_only
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if read_only:
                raise CatalogError(
                    f"cannot read the catalog of the pitstop home {path.parent}: {exc}. Another "
                    "pitstop process holds it (DuckDB allows no reader beside a writer in another "
                    "process); check again when that process has finished, or run it as "
                    "`pitstop serve`, which check then goes through."
                ) from exc
            raise CatalogError(
                f"cannot open the pitstop home {path.parent}: {exc}. Another pitstop process may "
                "be using it; stop that process or choose another home with --home."
            ) from exc
        self._local = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._write_lock = threading.RLock()
        self._generation = 0
        """Bumped by every commit: a cached read (``_cached``) older than it is read again."""
        self._reads: dict[str, tuple[int, Any]] = {}
        self._after_commit: list[Callable[[], None]] = []
        """Called after every commit, on the committing thread, under the write lock (a job's
        static join re-publishes its DuckDB table: pitstop.connectors.tables)."""
        self.secrets = secrets.Secrets(path.parent)
        """Mapping secrets, kept beside the catalog instead of in it (catalog/secrets.py)."""
        try:
            if read_only:
                self._require_current()
            else:
                self._migrate()
                self._move_secrets()
        except BaseException:
            self._db.close()
            raise

    # -- connections ---------------------------------------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._db.cursor()
            self._local.cursor = cur
            with self._write_lock:
                self._cursors.append(cur)
        return cur

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One DuckDB transaction on this thread's cursor; rolled back on any exception."""
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            try:
                cur.execute("COMMIT")
            finally:
                self._generation += 1
            for hook in list(self._after_commit):
                try:
                    hook()
                except Exception:  # noqa: BLE001 - the transaction is committed whatever a hook does
                    log.exception("catalog: a hook after a commit failed")

    def add_commit_hook(self, hook: Callable[[], None]) -> None:
        with self._write_lock:
            self._after_commit.append(hook)

    def remove_commit_hook(self, hook: Callable[[], None]) -> None:
        with self._write_lock:
            if hook in self._after_commit:
                self._after_commit.remove(hook)

    @property
    def generation(self) -> int:
        """How many commits this process has made (bumped after each COMMIT returns): a read
        made in a transaction begun after reading ``g`` holds every write up to ``g``."""
        return self._generation

    def _cached(self, key: str, read: Callable[[], Any]) -> Any:
        """``read()``, kept until the next commit. Every write to the catalog goes through
        ``transaction()`` in this process (the home's lock keeps other processes out), so a listing
        that many clients ask for at once (SHOW JOBS, SHOW SNAPSHOTS from a server's clients) is
        read once per change instead of once per statement. A commit during ``read()`` leaves its
        result filed under the older generation: the next call reads again."""
        generation = self._generation
        hit = self._reads.get(key)
        if hit is not None and hit[0] == generation:
            return hit[1]
        value = read()
        self._reads[key] = (generation, value)
        return value

    def cached_for(self, key: str, read: Callable[[], Any], max_age_s: float) -> Any:
        """``read()``, kept until the next commit and at most ``max_age_s`` seconds: for what also
        depends on files the catalog does not see change (a running job's checkpoints)."""
        import time

        generation, clock = self._generation, time.monotonic()
        hit = self._reads.get(key)
        if hit is not None and hit[0] == generation and clock - hit[1][0] <= max_age_s:
            return hit[1][1]
        value = read()
        self._reads[key] = (generation, (clock, value))
        return value

    def close(self) -> None:
        with self._write_lock:
            for cur in self._cursors:
                try:
                    cur.close()
                except duckdb.Error:  # a cursor still busy in another thread: the database goes anyway
                    log.warning("a catalog connection was still busy at close", exc_info=True)
            self._cursors.clear()
        self._db.close()

    def schema_version(self) -> int:
        """The version the catalog's tables are at (0: no pitstop tables yet)."""
        cur = self.cursor()
        exists = cur.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = 'pitstop' AND table_name = 'meta'"
        ).fetchone()
        if not (exists and exists[0]):
            return 0
        row = cur.execute("SELECT value FROM pitstop.meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise CatalogError(
                f"{self.path} was written by a newer pitstop (catalog version {version}); "
                "upgrade pitstop to open it."
            )

    def _require_current(self) -> None:
        """A read-only catalog is read with this version's queries, so it must be at this version:
        an older one lacks columns and tables they name (version 1 has no jobs.options, no views),
        and upgrading it would be a write."""
        version = self.schema_version()
        self._refuse_newer(version)
        if version < SCHEMA_VERSION:
            raise CatalogError(
                f"the catalog of the pitstop home {self.path.parent} is at schema version {version}; "
                f"this pitstop reads version {SCHEMA_VERSION} and does not upgrade a home it only "
                f"checks. Run pitstop once on it (pitstop --home {self.path.parent} run -c 'SHOW JOBS') "
                "to upgrade it, then check again."
            )

    def _migrate(self) -> None:
        version = self.schema_version()
        self._refuse_newer(version)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction() as tx:
                for statement in _MIGRATIONS[target]:
                    tx.execute(statement)
                tx.execute("INSERT OR REPLACE INTO pitstop.meta VALUES ('schema_version', ?)", [str(target)])

    def _move_secrets(self) -> None:
        """Secrets that a mapping kept in the catalog (written by pitstop before they moved out,
        or left by a crash between the two writes) go to the secrets file; secrets of mappings
        that are gone are forgotten."""
        rows = self.cursor().execute("SELECT definition FROM pitstop.mappings").fetchall()
        stored = [Mapping.from_json(json.loads(r[0])) for r in rows]
        for mapping in stored:
            shown, hidden = secrets.split(mapping)
            if hidden:
                self.secrets.put(mapping.name, hidden)
                with self.transaction() as tx:
                    tx.execute(
                        "UPDATE pitstop.mappings SET definition = ? WHERE lower(name) = lower(?)",
                        [dumps(shown.to_json()), mapping.name],
                    )
                log.info("mapping '%s': its secrets moved out of the catalog", mapping.name)
        self.secrets.keep_only({m.name for m in stored})

    # -- mappings ------------------------------------------------------------------------------
    def get_mapping(self, name: str) -> Mapping | None:
        # fetchall, not fetchone: a result left open on the thread's cursor makes DuckDB refuse
        # register() on it (a sink's batch) until the cursor runs something else.
        rows = (
            self.cursor()
            .execute("SELECT definition FROM pitstop.mappings WHERE lower(name) = lower(?)", [name])
            .fetchall()
        )
        row = rows[0] if rows else None
        return None if row is None else self.secrets.join(Mapping.from_json(json.loads(row[0])))

    def mappings(self) -> list[Mapping]:
        return list(self._cached("mappings", self._read_mappings))

    def _read_mappings(self) -> tuple[Mapping, ...]:
        rows = self.cursor().execute("SELECT definition FROM pitstop.mappings ORDER BY name").fetchall()
        return tuple(self.secrets.join(Mapping.from_json(json.loads(r[0]))) for r in rows)

    def put_mapping(self, mapping: Mapping, replace: bool = False) -> None:
        """Store a mapping: its options masked in the catalog, the values the mask hid in the
        secrets file (written first: a crash between the two leaves a secret that the next open
        forgets, never a mapping without its password)."""
        shown, hidden = secrets.split(mapping)
        if hidden:
            self.secrets.put(mapping.name, hidden)
        with self.transaction() as tx:
            if replace:
                tx.execute("DELETE FROM pitstop.mappings WHERE lower(name) = lower(?)", [mapping.name])
            tx.execute(
                "INSERT INTO pitstop.mappings VALUES (?, ?, ?, ?)",
                [shown.name, shown.type, dumps(shown.to_json()), _now()],
            )
        if not hidden:
            self.secrets.put(mapping.name, {})

    def drop_mapping(self, name: str) -> None:
        with self.transaction() as tx:
            tx.execute("DELETE FROM pitstop.mappings WHERE lower(name) = lower(?)", [name])
        self.secrets.put(name, {})

    # -- jobs and runs ---------------------------------------------------------------------------
    _JOB_COLUMNS = "name, sql, status, detail, run_id, snapshot, created, updated, options"

    def get_job(self, name: str) -> Job | None:
        row = (
            self.cursor()
            .execute(f"SELECT {self._JOB_COLUMNS} FROM pitstop.jobs WHERE lower(name) = lower(?)", [name])
            .fetchone()
        )
        return None if row is None else _job(row)

    def jobs(self) -> list[Job]:
        return list(self._cached("jobs", self._read_jobs))

    def _read_jobs(self) -> tuple[Job, ...]:
        rows = (
            self.cursor()
            .execute(f"SELECT {self._JOB_COLUMNS} FROM pitstop.jobs ORDER BY created, name")
            .fetchall()
        )
        return tuple(_job(r) for r in rows)

    def create_job(
        self, job: Job, run: Run, also: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    ) -> None:
        """Record a job and its run in one transaction, with ``also`` (a sink rollback) in it."""
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO pitstop.runs VALUES (?, ?, ?, ?, ?, ?)",
                [
                    run.run_id,
                    run.job,
                    run.folder,
                    dumps(run.plan),
                    None if run.restore is None else dumps(run.restore),
                    run.started,
                ],
            )
            tx.execute(
                f"INSERT INTO pitstop.jobs ({self._JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    job.name,
                    job.sql,
                    job.status,
                    job.detail,
                    job.run_id,
                    job.snapshot,
                    job.created,
                    job.updated,
                    dumps(job.options),
                ],
            )
            if also is not None:
                also(tx)

    def set_job_status(self, name: str, status: str, detail: str = "") -> None:
        with self.transaction() as tx:
            tx.execute(
                "UPDATE pitstop.jobs SET status = ?, detail = ?, updated = ? WHERE lower(name) = lower(?)",
                [status, detail, _now(), name],
            )

    def set_job_options(self, name: str, options: dict[str, str]) -> None:
        with self.transaction() as tx:
            tx.execute(
                "UPDATE pitstop.jobs SET options = ?, updated = ? WHERE lower(name) = lower(?)",
                [dumps(options), _now(), name],
            )

    def delete_job(self, name: str, tx: duckdb.DuckDBPyConnection | None = None) -> None:
        if tx is not None:
            tx.execute("DELETE FROM pitstop.jobs WHERE lower(name) = lower(?)", [name])
            return
        with self.transaction() as own:
            own.execute("DELETE FROM pitstop.jobs WHERE lower(name) = lower(?)", [name])

    def get_run(self, run_id: str) -> Run:
        row = (
            self.cursor()
            .execute(
                "SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs WHERE run_id = ?",
                [run_id],
            )
            .fetchone()
        )
        if row is None:
            raise CatalogError(f"run '{run_id}' is missing from the catalog {self.path}")
        return Run(
            row[0], row[1], row[2], json.loads(row[3]), None if row[4] is None else json.loads(row[4]), row[5]
        )

    def all_runs(self) -> list[Run]:
        """Every run of every job, oldest first."""
        rows = (
            self.cursor()
            .execute("SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs ORDER BY started")
            .fetchall()
        )
        return [
            Run(r[0], r[1], r[2], json.loads(r[3]), None if r[4] is None else json.loads(r[4]), r[5])
            for r in rows
        ]

    def runs_after(self, job: str, run_id: str) -> list[Run]:
        """The runs of ``job`` (any case) started after run ``run_id``, oldest first."""
        rows = (
            self.cursor()
            .execute(
                "SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs "
                "WHERE lower(job) = lower(?) AND run_id <> ? "
                "AND started > (SELECT started FROM pitstop.runs WHERE run_id = ?) ORDER BY started",
                [job, run_id, run_id],
            )
            .fetchall()
        )
        return [
            Run(r[0], r[1], r[2], json.loads(r[3]), None if r[4] is None else json.loads(r[4]), r[5])
            for r in rows
        ]

    def end_run(self, run_id: str, batches: dict[int, int | None], tx: duckdb.DuckDBPyConnection) -> None:
        """Record the last batch each branch of a run committed (its folder is about to go)."""
        tx.execute(
            "INSERT OR REPLACE INTO pitstop.run_ends VALUES (?, ?, ?)",
            [run_id, dumps({str(k): v for k, v in batches.items()}), _now()],
        )

    def run_end(self, run_id: str) -> dict[int, int | None] | None:
        """What :meth:`end_run` recorded for a run, or None."""
        row = (
            self.cursor()
            .execute("SELECT batches FROM pitstop.run_ends WHERE run_id = ?", [run_id])
            .fetchall()
        )
        if not row:
            return None
        return {int(k): (None if v is None else int(v)) for k, v in json.loads(row[0][0]).items()}

    def run_ends(self) -> dict[str, dict[int, int | None]]:
        """:meth:`run_end` of every run that has one."""
        rows = self.cursor().execute("SELECT run_id, batches FROM pitstop.run_ends").fetchall()
        return {
            r[0]: {int(k): (None if v is None else int(v)) for k, v in json.loads(r[1]).items()} for r in rows
        }

    def runs_writing(self, sink: str) -> list[tuple[str, str, int]]:
        """``(job, run_id, branch)`` of every run's branch whose plan writes the sink mapping."""
        rows = self.cursor().execute("SELECT job, run_id, plan FROM pitstop.runs").fetchall()
        out = []
        for job, run_id, plan in rows:
            for b in json.loads(plan).get("branches", []):
                if str(b.get("sink", "")).lower() == sink.lower():
                    out.append((str(job), str(run_id), int(b["index"])))
        return out

    # -- views -----------------------------------------------------------------------------------
    def get_view(self, name: str) -> View | None:
        row = (
            self.cursor()
            .execute("SELECT name, sql, created FROM pitstop.views WHERE lower(name) = lower(?)", [name])
            .fetchone()
        )
        return None if row is None else View(*row)

    def views(self) -> list[View]:
        rows = self.cursor().execute("SELECT name, sql, created FROM pitstop.views ORDER BY name").fetchall()
        return [View(*r) for r in rows]

    def put_view(self, view: View, replace: bool = False) -> None:
        with self.transaction() as tx:
            if replace:
                tx.execute("DELETE FROM pitstop.views WHERE lower(name) = lower(?)", [view.name])
            tx.execute("INSERT INTO pitstop.views VALUES (?, ?, ?)", [view.name, view.sql, view.created])

    def drop_view(self, name: str) -> None:
        with self.transaction() as tx:
            tx.execute("DELETE FROM pitstop.views WHERE lower(name) = lower(?)", [name])

    # -- snapshots -------------------------------------------------------------------------------
    _SNAPSHOT_COLUMNS = "name, job, created, path, size_bytes, rows, manifest"

    def get_snapshot(self, name: str) -> Snapshot | None:
        row = (
            self.cursor()
            .execute(
                f"SELECT {self._SNAPSHOT_COLUMNS} FROM pitstop.snapshots WHERE lower(name) = lower(?)",
                [name],
            )
            .fetchone()
        )
        return None if row is None else _snapshot(row)

    def snapshots(self) -> list[Snapshot]:
        rows = (
            self.cursor()
            .execute(f"SELECT {self._SNAPSHOT_COLUMNS} FROM pitstop.snapshots ORDER BY created, name")
            .fetchall()
        )
        return [_snapshot(r) for r in rows]

    def snapshot_names(self) -> list[str]:
        """Snapshot names only (for completion and suggestions; no manifest is read)."""
        return [row[3] for row in self.snapshot_listing()]

    def snapshot_stages(self) -> dict[str, tuple[str, ...]]:
        """Each snapshot's stage names (snapshot name, lower-case -> stages), for completion of
        ``snapshot_state('s', 'stage')``; only the manifests' stage keys are read."""
        rows = (
            self.cursor()
            .execute("SELECT name, json_keys(manifest, '$.stages') FROM pitstop.snapshots")
            .fetchall()
        )
        return {str(n).lower(): tuple(sorted(k or ())) for n, k in rows}

    def snapshot_listing(self) -> list[tuple[Any, ...]]:
        """``(created, size_bytes, job, name, rows)`` of every snapshot, without the manifests
        (what SHOW SNAPSHOTS prints; parsing 1,000 manifests would cost more than the query)."""
        return list(self._cached("snapshot_listing", self._read_snapshot_listing))

    def _read_snapshot_listing(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(
            self.cursor()
            .execute(
                "SELECT created, size_bytes, job, name, rows FROM pitstop.snapshots ORDER BY created, name"
            )
            .fetchall()
        )

    def add_snapshot(self, snap: Snapshot, tx: duckdb.DuckDBPyConnection) -> None:
        tx.execute(
            f"INSERT INTO pitstop.snapshots ({self._SNAPSHOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [snap.name, snap.job, snap.created, snap.path, snap.size_bytes, snap.rows, dumps(snap.manifest)],
        )

    def drop_snapshot(self, name: str, tx: duckdb.DuckDBPyConnection | None = None) -> None:
        if tx is not None:
            tx.execute("DELETE FROM pitstop.snapshots WHERE lower(name) = lower(?)", [name])
            return
        with self.transaction() as own:
            own.execute("DELETE FROM pitstop.snapshots WHERE lower(name) = lower(?)", [name])

    # -- sink bookkeeping ------------------------------------------------------------------------
    def last_sink_batch(self, run_id: str, branch: int) -> int | None:
        row = (
            self.cursor()
            .execute(
                "SELECT max(batch_id) FROM pitstop.sink_batches WHERE run_id = ? AND branch = ?",
                [run_id, branch],
            )
            .fetchone()
        )
        return None if row is None or row[0] is None else int(row[0])

    # -- rejects -------------------------------------------------------------------------------
    def add_rejects(self, job: str, source: str, run_id: str, rejects: list[Reject]) -> None:
        """Record a source's rejects; one already recorded (same run, source, file, line) is left
        as it is, so a rejects file ingested again changes nothing."""
        if not rejects:
            return
        seen = _now()
        rows = [[job, source, r.file, r.line, r.raw, r.raw_bytes, r.reason, run_id, seen] for r in rejects]
        with self.transaction() as tx:
            tx.executemany("INSERT OR IGNORE INTO pitstop.rejects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def reject_counts(self) -> dict[str, int]:
        """Rejects per existing job (lower-case job name): of its runs and of those it was restored
        from (:data:`_LINEAGE`), each record once."""
        return dict(self._cached("reject_counts", self._read_reject_counts))

    def _read_reject_counts(self) -> dict[str, int]:
        rows = (
            self.cursor()
            .execute(
                f"""{_LINEAGE}
                SELECT l.job, count(DISTINCT (x.source, x.file, x.line))
                FROM (SELECT DISTINCT job, run_id FROM lineage) l
                JOIN pitstop.rejects x ON x.run_id = l.run_id GROUP BY 1"""
            )
            .fetchall()
        )
        return {str(job): int(n) for job, n in rows}

    def reject_summary(self, job: str) -> list[RejectSummary]:
        """Per source of ``job``: how many rejects (counted as :meth:`reject_counts` does), and
        the latest one."""
        rows = (
            self.cursor()
            .execute(
                f"""{_LINEAGE}, own AS (
                    SELECT DISTINCT ON (x.source, x.file, x.line) x.*
                    FROM pitstop.rejects x
                    JOIN (SELECT DISTINCT run_id FROM lineage WHERE job = lower(?)) l ON x.run_id = l.run_id
                    ORDER BY x.source, x.file, x.line, x.seen_at DESC)
                SELECT source, count(*) OVER (PARTITION BY source), file, line, raw, raw_bytes, reason
                FROM own
                QUALIFY row_number() OVER (
                    PARTITION BY source ORDER BY seen_at DESC, file DESC, line DESC) = 1
                ORDER BY source""",
                [job],
            )
            .fetchall()
        )
        return [
            RejectSummary(source, int(n), Reject(file, int(line), raw, int(size), reason))
            for source, n, file, line, raw, size, reason in rows
        ]

    # -- late rows -----------------------------------------------------------------------------
    def add_late(self, job: str, run_id: str, counts: list[LateCount], records: list[LateRecord]) -> None:
        """Record late counts (a micro-batch counted again replaces its count: the same number)
        and kept late rows (one already recorded is left as it is), in one transaction."""
        if not counts and not records:
            return
        seen = _now()
        with self.transaction() as tx:
            if counts:
                tx.executemany(
                    "INSERT OR REPLACE INTO pitstop.late_counts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [[job, run_id, c.branch, c.batch_id, c.stage, c.source, c.rows, seen] for c in counts],
                )
            if records:
                tx.executemany(
                    "INSERT OR IGNORE INTO pitstop.late_records "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        [
                            job,
                            run_id,
                            r.branch,
                            r.batch_id,
                            r.stage,
                            r.source,
                            r.part,
                            r.line,
                            r.window_start,
                            r.window_end,
                            r.event_time,
                            r.watermark,
                            dumps(r.record),
                            seen,
                        ]
                        for r in records
                    ],
                )

    def late_counts(self) -> dict[str, int]:
        """Late rows per existing job (lower-case job name): of its runs and, up to each
        snapshot's cut, of the runs it was restored from (:data:`_LATE_LINEAGE`)."""
        return dict(self._cached("late_counts", self._read_late_counts))

    def _read_late_counts(self) -> dict[str, int]:
        rows = (
            self.cursor().execute(f"{_LATE_LINEAGE} SELECT job, sum(rows) FROM owned GROUP BY 1").fetchall()
        )
        return {str(job): int(n or 0) for job, n in rows}

    def late_summary(self, job: str) -> list[LateSummary]:
        """Per stage and source of ``job``: its late rows (counted as :meth:`late_counts` does)
        and when the first and the last were seen."""
        rows = (
            self.cursor()
            .execute(
                f"""{_LATE_LINEAGE}
                SELECT stage, source, sum(rows), min(seen_at), max(seen_at) FROM owned
                WHERE job = lower(?) AND rows > 0 GROUP BY ALL ORDER BY stage, source""",
                [job],
            )
            .fetchall()
        )
        return [LateSummary(stage, source, int(n), first, last) for stage, source, n, first, last in rows]

    def late_by_stage(self) -> dict[tuple[str, str], int]:
        """Late rows per existing job (lower-case name) and stage, counted as :meth:`late_counts`
        does (what ``pitstop.metrics`` and the metrics endpoint show)."""
        return dict(self._cached("late_by_stage", self._read_late_by_stage))

    def _read_late_by_stage(self) -> dict[tuple[str, str], int]:
        rows = (
            self.cursor()
            .execute(f"{_LATE_LINEAGE} SELECT job, stage, sum(rows) FROM owned GROUP BY ALL")
            .fetchall()
        )
        return {(str(job), str(stage)): int(n or 0) for job, stage, n in rows}

    # -- metrics -------------------------------------------------------------------------------
    def add_metrics(self, samples: list[MetricSample], keep: int) -> None:
        """Record one sampling round and forget all but the last ``keep`` rounds, in one
        transaction: the table stays bounded however long jobs run (or jobs come and go)."""
        with self.transaction() as tx:
            if samples:
                tx.executemany(
                    f"INSERT INTO pitstop.metrics VALUES ({', '.join('?' * 18)})",
                    [
                        [
                            s.sampled,
                            s.job,
                            s.run_id,
                            s.branch,
                            s.sink,
                            s.stage,
                            s.batch_id,
                            s.input_rows,
                            s.input_rows_per_s,
                            s.processed_rows_per_s,
                            s.batch_ms,
                            s.watermark,
                            s.state_rows,
                            s.state_bytes,
                            s.late_rows,
                            s.lag_records,
                            None if s.lag is None else dumps(s.lag),
                            s.restarts,
                        ]
                        for s in samples
                    ],
                )
            tx.execute(
                """DELETE FROM pitstop.metrics WHERE sampled < (
                    SELECT min(sampled) FROM (
                        SELECT DISTINCT sampled FROM pitstop.metrics ORDER BY sampled DESC LIMIT ?))""",
                [keep],
            )

    def query(
        self, sql: str, tables: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run an ad-hoc query in a read-only transaction; returns column names and rows.
        ``tables``: Arrow tables the query reads by name (registered for it alone).

        Whatever the text holds, it cannot write: DuckDB refuses every write in a transaction
        begun READ ONLY, and the transaction is rolled back afterwards.
        """
        cur = self.cursor()
        cur.execute("BEGIN TRANSACTION READ ONLY")
        for name, table in (tables or {}).items():
            cur.register(name, table)
        try:
            rel = cur.execute(sql)
            columns = [d[0] for d in rel.description] if rel.description else []
            return columns, rel.fetchall()
        finally:
            cur.execute("ROLLBACK")
            for name in tables or {}:
                cur.unregister(name)

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own (a server client's), closed with the catalog."""
        cur = self._db.cursor()
        with self._write_lock:
            self._cursors.append(cur)
        return cur

    def disconnect(self, cur: duckdb.DuckDBPyConnection) -> None:
        with self._write_lock:
            if cur in self._cursors:
                self._cursors.remove(cur)
        cur.close()


def _job(row: tuple[Any, ...]) -> Job:
    name, sql, status, detail, run_id, snapshot, created, updated, options = row
    return Job(name, sql, status, detail, run_id, snapshot, created, updated, json.loads(options or "{}"))


def _snapshot(row: tuple[Any, ...]) -> Snapshot:
    return Snapshot(row[0], row[1], row[2], row[3], int(row[4]), int(row[5]), json.loads(row[6]))


def now() -> datetime:
    """The catalog's clock: naive UTC."""
    return _now()
