"""The catalog's database: opening (and upgrading) ``catalog.duckdb``, one cursor per thread,
transactions with hooks after each commit, reads cached until the next commit, and ad-hoc read-only
queries. The rows of each kind of object are a mixin over :class:`CatalogBase` (:mod:`.mappings`,
:mod:`.jobs`, ...), and :class:`~pitstop.catalog.store.Catalog` is all of them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from pitstop.catalog import secrets
from pitstop.catalog.rows import Mapping, dumps
from pitstop.catalog.schema import MIGRATIONS, SCHEMA_VERSION
from pitstop.errors import CatalogError

log = logging.getLogger(__name__)


class CatalogBase:
    """The database under a :class:`~pitstop.catalog.store.Catalog`: its connections,
    transactions, cache and schema; the mixins of rows derive from it."""

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
        # Times with a zone are UTC in every cursor, whatever the machine's zone (DuckDB takes the
        # machine's by default): pitstop keeps UTC, and the server's TimeZone says so.
        self._db.execute("SET GLOBAL TimeZone = 'UTC'")
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
                for statement in MIGRATIONS[target]:
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
