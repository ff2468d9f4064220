"""pitstop's shell, scripts and ``pitstop check`` as clients of a ``pitstop serve``.

A server holds its home (DuckDB lets one process open the catalog), so the command-line front
ends reach it over the PostgreSQL protocol instead — with ``--connect URL``, or by themselves when
``<home>/server.json`` names a running server. Three small adapters keep the front ends as they
are:

- :class:`RemoteExecutor` runs a statement on the server; the server's notices become the
  result's message (the same lines the local executor prints), its rows the result's rows, and
  its errors pitstop's errors, positioned at the script's line and column (carets stay right);
  the front end's cancel (Ctrl-C) becomes a real CancelRequest;
- :class:`RemoteCatalog` answers what the shell's completion, ``\\d`` and ``pitstop check`` read
  from a catalog, from the server's ``pitstop`` schema, read-only;
- :class:`RemoteManager` is what the shell's toolbar asks a manager.

``pitstop check`` through a server plans locally against the :class:`RemoteCatalog` (the
executor's check mode), so it still never changes anything.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from pitstop.catalog.rows import Job, Mapping, Run, Snapshot, View
from pitstop.errors import CatalogError, PitstopError, all_errors
from pitstop.executor import Result
from pitstop.sql.parser import ParsedStatement

log = logging.getLogger(__name__)

# A server's SQLSTATE back to pitstop's error class: the classes declare their codes.
_ERRORS: dict[str, type[PitstopError]] = {}
for _cls in all_errors():
    _ERRORS.setdefault(_cls.sqlstate, _cls)


def connect(url: str, prompt: bool) -> psycopg.Connection[Any]:
    """An autocommit connection; on a terminal, asks for the password when the server wants one
    that neither the URL, ``PGPASSWORD`` nor ``~/.pgpass`` gave."""
    try:
        return psycopg.connect(url, autocommit=True, application_name="pitstop")
    except psycopg.OperationalError as exc:
        if not (prompt and "no password supplied" in str(exc) and sys.stdin.isatty()):
            raise PitstopError(f"cannot connect to {_safe(url)}: {_first_line(exc)}") from None
    import getpass

    password = getpass.getpass(f"Password for {_safe(url)}: ")
    try:
        return psycopg.connect(url, password=password, autocommit=True, application_name="pitstop")
    except psycopg.OperationalError as exc:
        raise PitstopError(f"cannot connect to {_safe(url)}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n")[0]
    return text.split("failed: ", 1)[-1] if "failed: " in text else text


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the server"
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}"


class RemoteExecutor:
    """Runs statements on a server; the same ``execute`` as :class:`pitstop.executor.Executor`."""

    def __init__(self, conn: psycopg.Connection[Any], catalog: RemoteCatalog | None = None) -> None:
        self.conn = conn
        self.catalog = catalog
        self.cancelled: Callable[[], bool] | None = None

    def execute(self, stmt: ParsedStatement) -> Result:
        notices: list[str] = []
        warnings: list[str] = []

        def on_notice(diag: psycopg.errors.Diagnostic) -> None:
            notices.append(diag.message_primary or "")
            if diag.severity_nonlocalized == "WARNING":
                warnings.append(notices[-1])

        done = threading.Event()
        watcher = None
        if self.cancelled is not None:
            watcher = threading.Thread(target=self._watch, args=(done,), daemon=True)
            watcher.start()
        self.conn.add_notice_handler(on_notice)
        try:
            cur = self.conn.execute(stmt.text)
            rows = cur.fetchall() if cur.description else []
        except psycopg.Error as exc:
            raise _error(exc, stmt) from None
        finally:
            done.set()
            self.conn.remove_notice_handler(on_notice)
        message = "\n".join(notices) if notices else (cur.statusmessage or "OK")
        if cur.description is None:
            return Result(message, warnings=tuple(warnings))
        columns = tuple(d.name for d in cur.description)
        return Result(message, columns, tuple(tuple(r) for r in rows), tuple(warnings))

    def _watch(self, done: threading.Event) -> None:
        """Turn the front end's cancel (Ctrl-C) into a CancelRequest to the server."""
        while not done.wait(0.1):
            if self.cancelled is not None and self.cancelled():
                self.conn.cancel_safe()
                return


def _error(exc: psycopg.Error, stmt: ParsedStatement) -> PitstopError:
    diag = exc.diag
    message = diag.message_primary or str(exc).strip()
    cls = _ERRORS.get(exc.sqlstate or "", PitstopError)
    err = cls(message)
    position = diag.statement_position
    if position and position.isdigit():
        offset = int(position) - 1
        before = stmt.text[:offset]
        lines = stmt.text.split("\n")
        line_index = before.count("\n")
        if line_index == 0:
            col = stmt.col + offset
            source = lines[0]
            err.at(stmt.line, col, " " * (stmt.col - 1) + source)
        else:
            col = offset - before.rfind("\n")
            err.at(stmt.line + line_index, col, lines[line_index])
    return err


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class RemoteCatalog:
    """What the front ends read from a catalog, from the server's ``pitstop`` schema."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def _rows(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    # mappings and views
    def mappings(self) -> list[Mapping]:
        return [
            Mapping.from_json(_json(r[0]))
            for r in self._rows("SELECT definition FROM pitstop.mappings ORDER BY name")
        ]

    def get_mapping(self, name: str) -> Mapping | None:
        rows = self._rows("SELECT definition FROM pitstop.mappings WHERE lower(name) = lower(%s)", [name])
        return Mapping.from_json(_json(rows[0][0])) if rows else None

    def views(self) -> list[View]:
        return [View(*r) for r in self._rows("SELECT name, sql, created FROM pitstop.views ORDER BY name")]

    def get_view(self, name: str) -> View | None:
        sql = "SELECT name, sql, created FROM pitstop.views WHERE lower(name) = lower(%s)"
        rows = self._rows(sql, [name])
        return View(*rows[0]) if rows else None

    # jobs and runs
    _JOBS = "SELECT name, sql, status, detail, run_id, snapshot, created, updated, options FROM pitstop.jobs"

    def jobs(self) -> list[Job]:
        return [_job(r) for r in self._rows(self._JOBS + " ORDER BY created, name")]

    def get_job(self, name: str) -> Job | None:
        rows = self._rows(self._JOBS + " WHERE lower(name) = lower(%s)", [name])
        return _job(rows[0]) if rows else None

    def get_run(self, run_id: str) -> Run:
        rows = self._rows(
            "SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs WHERE run_id = %s", [run_id]
        )
        if not rows:
            raise CatalogError(f"run '{run_id}' is missing from the server's catalog")
        r = rows[0]
        return Run(r[0], r[1], r[2], _json(r[3]), None if r[4] is None else _json(r[4]), r[5])

    # snapshots
    _SNAPSHOTS = "SELECT name, job, created, path, size_bytes, rows, manifest FROM pitstop.snapshots"

    def get_snapshot(self, name: str) -> Snapshot | None:
        rows = self._rows(self._SNAPSHOTS + " WHERE lower(name) = lower(%s)", [name])
        if not rows:
            return None
        r = rows[0]
        return Snapshot(r[0], r[1], r[2], r[3], int(r[4]), int(r[5]), _json(r[6]))

    def snapshot_listing(self) -> list[tuple[Any, ...]]:
        return self._rows(
            "SELECT created, size_bytes, job, name, rows FROM pitstop.snapshots ORDER BY created, name"
        )

    def snapshot_names(self) -> list[str]:
        return [r[3] for r in self.snapshot_listing()]

    def snapshot_stages(self) -> dict[str, tuple[str, ...]]:
        """Each snapshot's stage names (as :meth:`pitstop.catalog.store.Catalog.snapshot_stages`)."""
        rows = self._rows("SELECT name, manifest FROM pitstop.snapshots")
        return {str(n).lower(): tuple(sorted((_json(m).get("stages") or {}).keys())) for n, m in rows}

    def close(self) -> None:
        self.conn.close()


def _job(row: tuple[Any, ...]) -> Job:
    name, sql, status, detail, run_id, snapshot, created, updated, options = row
    return Job(name, sql, status, detail, run_id, snapshot, created, updated, _json(options or "{}"))


class RemoteManager:
    """The little a shell asks of a manager, answered by a server."""

    spark_started = True

    def __init__(self, url: str, prompt: bool) -> None:
        self.url = url
        self.conn = connect(url, prompt)
        info = self.conn.info
        self.home = f"{info.user}@{info.host}:{info.port} (pitstop serve)"
        # A second connection for completion and the toolbar: they refresh in the background and
        # must not wait for a statement (an AWAIT JOB) on the first.
        second = psycopg.connect(url, password=info.password, autocommit=True, application_name="pitstop")
        self.catalog = RemoteCatalog(second)

    def executor(self) -> RemoteExecutor:
        return RemoteExecutor(self.conn, self.catalog)

    def spark(self) -> None:
        """Spark runs in the server."""

    def live_status(self) -> list[tuple[str, str, float]]:
        return [(j.name, j.status, 0.0) for j in self.catalog.jobs()]

    def close(self) -> None:
        """Jobs run on in the server; only the connections close."""
        for conn in (self.conn, self.catalog.conn):
            try:
                conn.close()
            except psycopg.Error:
                log.debug("closing a connection", exc_info=True)


__all__ = ["RemoteCatalog", "RemoteExecutor", "RemoteManager", "connect"]
