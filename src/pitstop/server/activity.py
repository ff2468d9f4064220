"""``pg_stat_activity``, ``pg_cancel_backend`` and ``pg_terminate_backend``: what a DBA sees of a
server's sessions, and how one is stopped.

1. Each connection keeps an :class:`Activity`, written by the connection's own thread: who is
   connected from where since when, and what it runs now (``active``) or ran last (``idle``,
   ``idle in transaction``), as PostgreSQL's ``pg_stat_activity`` shows it.
2. The server installs three DuckDB functions on its database once (:meth:`Backends.install`;
   DuckDB's Python functions are the database's, not one connection's): ``pgc_activity(key)``
   lists the sessions, ``pgc_signal_backend(key, pid, terminate)`` cancels a session's statement
   or ends the session. The emulated catalog (:mod:`pitstop.server.pgcatalog`) turns
   ``pg_stat_activity`` and the two PostgreSQL functions into calls of them.
3. A call says who calls by its session's key, ``pgc_backend_key()``: a macro on the session's
   own DuckDB connection holding ``<pid>:<HMAC of pid with the server's secret>``. Another
   session's key cannot be read nor made up, so a client cannot act as another session.
4. As in PostgreSQL, an admin sees and may signal every session; any other user sees what its own
   sessions run (other sessions' rows say ``<insufficient privilege>``) and may signal only its
   own sessions: signalling another user's session is refused with 42501.

A signal is what a cancel request or the server's shutdown does: cancel interrupts the statement
in progress (57014 ``canceling statement due to user request``; the session goes on); terminate
ends the session (FATAL 57P01 ``terminating connection due to administrator command``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import duckdb

from pitstop.server import sqlstate

log = logging.getLogger(__name__)

ACTIVE = "active"
IDLE = "idle"
IDLE_IN_TRANSACTION = "idle in transaction"
IDLE_IN_FAILED_TRANSACTION = "idle in transaction (aborted)"
HIDDEN = "<insufficient privilege>"
"""The query of a session its viewer may not see (PostgreSQL's words)."""

_STATE_OF_TRANSACTION = {"I": IDLE, "T": IDLE_IN_TRANSACTION, "E": IDLE_IN_FAILED_TRANSACTION}

# The row ``pgc_activity`` returns for each session; times are seconds since the epoch.
ROW_COLUMNS: tuple[tuple[str, str], ...] = (
    ("pid", "INTEGER"),
    ("usename", "VARCHAR"),
    ("application_name", "VARCHAR"),
    ("client_addr", "VARCHAR"),
    ("client_port", "INTEGER"),
    ("backend_start", "DOUBLE"),
    ("xact_start", "DOUBLE"),
    ("query_start", "DOUBLE"),
    ("state_change", "DOUBLE"),
    ("state", "VARCHAR"),
    ("query", "VARCHAR"),
)
ROW_TYPE = "STRUCT(" + ", ".join(f"{name} {kind}" for name, kind in ROW_COLUMNS) + ")[]"


CURSOR_TYPE = "STRUCT(name VARCHAR, statement VARCHAR, is_holdable BOOLEAN, creation_time DOUBLE)[]"
CURSORS_SQL = """
SELECT c.name, c.statement, c.is_holdable, false AS is_binary, false AS is_scrollable,
  to_timestamp(c.creation_time) AS creation_time
FROM (SELECT unnest(pgc_cursors(pgc_backend_key()), recursive := true)) AS c"""
"""``pg_cursors``: the calling session's open cursors (PostgreSQL's columns; pitstop's cursors are
never binary nor scrollable, :mod:`pitstop.server.cursors`)."""


def view_sql(datid: int, database: str, usesysid: Callable[[str], str]) -> str:
    """The DuckDB query that answers ``pg_stat_activity`` (PostgreSQL 15's columns, in its order);
    ``usesysid`` makes the role OID expression of a user name expression, as ``pg_roles`` has it."""
    seconds = ("backend_start", "xact_start", "query_start", "state_change")
    times = ", ".join(f"to_timestamp(a.{name}) AS {name}" for name in seconds)
    return f"""
SELECT CAST({int(datid)} AS BIGINT) AS datid, '{database}' AS datname, a.pid,
  CAST(NULL AS INTEGER) AS leader_pid, {usesysid("a.usename")} AS usesysid, a.usename,
  a.application_name, a.client_addr, CAST(NULL AS VARCHAR) AS client_hostname, a.client_port,
  {times}, CAST(NULL AS VARCHAR) AS wait_event_type, CAST(NULL AS VARCHAR) AS wait_event, a.state,
  CAST(NULL AS BIGINT) AS backend_xid, CAST(NULL AS BIGINT) AS backend_xmin,
  CAST(NULL AS BIGINT) AS query_id, a.query, 'client backend' AS backend_type
FROM (SELECT unnest(pgc_activity(pgc_backend_key()), recursive := true)) AS a"""


FUNCTIONS: dict[str, str] = {
    "pg_cancel_backend": "pgc_signal_backend(pgc_backend_key(), {0}, false)",
    "pg_terminate_backend": "pgc_signal_backend(pgc_backend_key(), {0}, true)",
    "pg_blocking_pids": "CAST([] AS INTEGER[])",  # nothing in pitstop waits for a lock (pgAdmin asks)
}
"""PostgreSQL's functions, as templates of :data:`pitstop.server.pgcatalog.functions.FUNCTIONS`."""


@dataclass(frozen=True)
class Doing:
    """What a session does now: one value, replaced whole, so that a reader on another thread
    never sees half of a change."""

    state: str
    query: str = ""
    query_start: float | None = None
    state_change: float | None = None
    xact_start: float | None = None


class Activity:
    """One session as ``pg_stat_activity`` shows it; written by its connection's thread only."""

    def __init__(self, peer: tuple[Any, ...]) -> None:
        self.client_addr = str(peer[0]).split("%")[0] if peer else None
        self.client_port = int(peer[1]) if len(peer) > 1 else None
        self.backend_start = time.time()
        self.user = ""
        self.role = ""
        self.parameters: Mapping[str, str] = {}
        self.doing = Doing("starting")

    def started(self, user: str, role: str, parameters: Mapping[str, str]) -> None:
        """Authenticated: ``parameters`` are the session's, read live (``SET application_name``)."""
        self.user, self.role, self.parameters = user, role, parameters
        self.doing = Doing(IDLE, state_change=time.time())

    def running(self, query: str) -> None:
        """A statement of ``query`` (the client's text) starts, or goes on sending rows."""
        now, doing = time.time(), self.doing
        if doing.state == ACTIVE and doing.query == query:
            return
        xact_start = doing.xact_start if doing.xact_start is not None else now
        self.doing = Doing(ACTIVE, query, now, now, xact_start)

    def ready(self, transaction: str) -> None:
        """The session waits for the client again; ``transaction`` is ReadyForQuery's letter."""
        state = _STATE_OF_TRANSACTION.get(transaction, IDLE)
        doing = self.doing
        xact_start = doing.xact_start if state != IDLE else None
        if doing.state != state or doing.xact_start != xact_start:
            self.doing = replace(doing, state=state, state_change=time.time(), xact_start=xact_start)

    def row(self, pid: int, visible: bool) -> dict[str, Any]:
        """This session's row of ``pgc_activity``; one its viewer may not see keeps only who."""
        doing = self.doing
        row: dict[str, Any] = {
            "pid": pid,
            "usename": self.user,
            "application_name": self.parameters.get("application_name", ""),
        }
        if not visible:
            return row | dict.fromkeys(name for name, _ in ROW_COLUMNS if name not in row) | {"query": HIDDEN}
        return row | {
            "client_addr": self.client_addr,
            "client_port": self.client_port,
            "backend_start": self.backend_start,
            "xact_start": doing.xact_start,
            "query_start": doing.query_start,
            "state_change": doing.state_change,
            "state": doing.state,
            "query": doing.query,
        }


class Backend(Protocol):
    """A session that can be listed and signalled (:class:`pitstop.server.connection.Connection`)."""

    process_id: int
    activity: Activity

    def open_cursors(self) -> list[Any]: ...

    def cancel_statement(self) -> None: ...

    def terminate(self) -> None: ...


class Directory(Protocol):
    """The sessions of a server by backend id (:class:`pitstop.server.app.Server`)."""

    def backend(self, process_id: int) -> Backend | None: ...

    def connected(self) -> Sequence[Backend]: ...


class Refused(Exception):
    """A signal the caller may not send; its text carries the SQLSTATE for :mod:`sqlstate`."""


class Backends:
    """The DBA's view of one server's sessions (see the module's steps)."""

    def __init__(self, directory: Directory, secret: bytes) -> None:
        self.directory = directory
        self._secret = hashlib.sha256(secret + b"pitstop backend keys").digest()

    # -- step 3: who calls ---------------------------------------------------------------------------
    def key(self, process_id: int) -> str:
        """The key of session ``process_id`` (its ``pgc_backend_key()``)."""
        mac = hmac.new(self._secret, str(process_id).encode(), hashlib.sha256).hexdigest()[:32]
        return f"{process_id}:{mac}"

    def caller(self, key: str | None) -> Backend | None:
        pid, _, _ = (key or "").partition(":")
        if not pid.isdigit() or not hmac.compare_digest(self.key(int(pid)), key or ""):
            return None
        return self.directory.backend(int(pid))

    # -- step 2: the functions ----------------------------------------------------------------------
    def install(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """Create ``pgc_activity`` and ``pgc_signal_backend`` in ``cursor``'s database (once per
        database: they serve every connection to it)."""
        cursor.create_function("pgc_activity", self.rows, ["VARCHAR"], ROW_TYPE, side_effects=True)
        cursor.create_function("pgc_cursors", self.cursors, ["VARCHAR"], CURSOR_TYPE, side_effects=True)
        cursor.create_function(
            "pgc_signal_backend", self.signal, ["VARCHAR", "BIGINT", "BOOLEAN"], "BOOLEAN", side_effects=True
        )

    def rows(self, key: str | None) -> list[dict[str, Any]]:
        """``pg_stat_activity``: one row per connected session, by backend id (step 4)."""
        caller = self.caller(key)
        admin = caller is not None and caller.activity.role == "admin"
        user = caller.activity.user if caller is not None else None
        sessions = sorted(self.directory.connected(), key=lambda b: b.process_id)
        return [b.activity.row(b.process_id, admin or b.activity.user == user) for b in sessions]

    def cursors(self, key: str | None) -> list[dict[str, Any]]:
        """``pg_cursors``: the calling session's cursors, oldest first (none for an unknown key)."""
        caller = self.caller(key)
        found = caller.open_cursors() if caller is not None else []
        return [
            {"name": c.name, "statement": c.statement, "is_holdable": c.hold, "creation_time": c.created}
            for c in sorted(found, key=lambda c: c.created)
        ]

    def signal(self, key: str | None, process_id: int, terminate: bool) -> bool:
        """``pg_cancel_backend`` / ``pg_terminate_backend``: whether session ``process_id`` was
        signalled (False: no such session, as PostgreSQL answers for a process that is not one)."""
        what = "terminate" if terminate else "cancel"
        function = f"pg_{what}_backend({process_id})"
        caller = self.caller(key)
        if caller is None:
            raise Refused(
                f"SQLSTATE {sqlstate.INSUFFICIENT_PRIVILEGE}: {function}: the calling session is not "
                f"known by this key; call pg_{what}_backend(pid) itself, not pgc_signal_backend"
            )
        target = self.directory.backend(process_id)
        if target is None:
            log.info("%s: no session has backend id %s", function, process_id)
            return False
        who, whose = caller.activity, target.activity
        if who.role != "admin" and who.user != whose.user:
            raise Refused(
                f"SQLSTATE {sqlstate.INSUFFICIENT_PRIVILEGE}: permission denied to {what} session "
                f"{process_id}: it belongs to user '{whose.user}', and user '{who.user}' has the role "
                f"'{who.role}', which may {what} only its own sessions; ask an admin to run {function}"
            )
        log.info("%s by user '%s' (session %s)", function, who.user, caller.process_id)
        if terminate:
            target.terminate()
        else:
            target.cancel_statement()
        return True
