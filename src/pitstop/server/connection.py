"""One client connection: the PostgreSQL v3 messages in and out, on the connection's own thread.

The sequence follows PostgreSQL's ``postgres.c``:

1. Startup and authentication (:mod:`pitstop.server.startup`): SSLRequest, GSSENCRequest,
   CancelRequest, StartupMessage, then SCRAM-SHA-256 or md5 against pitstop's users.
2. The session: BackendKeyData, ParameterStatus of every reported parameter, ReadyForQuery.
3. Statements, each message to its handler: simple query (Query: each statement's
   RowDescription, DataRows, CommandComplete, :mod:`pitstop.server.replies`; one ReadyForQuery at
   the end) and extended query (Parse, Bind, Describe, Execute, Close, :mod:`pitstop.server.extended`;
   Flush, Sync; after an error every message up to Sync is discarded).
4. The end: Terminate, the client gone, or the session ended from elsewhere (a cancel, the
   server's shutdown, ``pg_terminate_backend``: 57P01 to the client if it can still hear).

The socket, the decoding of messages and the buffer they are sent through are the
:class:`~pitstop.server.wire.Wire`'s.
"""

from __future__ import annotations

import logging
import math
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from pygwire import PygwireError, TransactionStatus
from pygwire.messages import (
    AuthenticationOk,
    BackendKeyData,
    Bind,
    Close,
    Describe,
    EmptyQueryResponse,
    Execute,
    Flush,
    ParameterStatus,
    Parse,
    Query,
    ReadyForQuery,
    Sync,
    Terminate,
)
from pygwire.messages import (
    FunctionCall as FunctionCallMessage,
)

from pitstop.server import sqlstate
from pitstop.server.activity import ACTIVE, Activity
from pitstop.server.cursors import SqlCursor
from pitstop.server.extended import ExtendedQuery
from pitstop.server.outcome import Notice
from pitstop.server.params import InvalidValue, SessionParameters
from pitstop.server.replies import send_outcome
from pitstop.server.routing import split
from pitstop.server.session import Session
from pitstop.server.sqlstate import WireError
from pitstop.server.startup import STARTUP_TIMEOUT_S, Admitted, Doorway, admit
from pitstop.server.wire import ClientGone, Wire
from pitstop.sql.parser import in_job_block


class Server(Doorway, Protocol):
    """What a connection uses of the server that accepted it (:class:`pitstop.server.app.Server`)."""

    def new_session(self, user: str, role: str, parameters: SessionParameters) -> Session: ...

    def register(self, conn: Connection) -> int: ...

    def forget(self, conn: Connection) -> None: ...


log = logging.getLogger(__name__)

TERMINATE_WAIT_S = 10.0


class Connection:
    """Serves one client socket until it leaves; ``serve()`` never raises."""

    def __init__(self, server: Server, sock: socket.socket, peer: tuple[Any, ...]) -> None:
        self.server = server
        self.wire = Wire(sock)
        self.peer = peer
        self.session: Session | None = None
        self.extended: ExtendedQuery | None = None  # the session's prepared statements and portals
        self.process_id = 0
        self.secret = secrets.token_bytes(4)
        self.user = ""
        self.skip_to_sync = False
        self.pending_block: str | None = None
        self.activity = Activity(peer)
        """What ``pg_stat_activity`` shows of this session (:mod:`pitstop.server.activity`)."""

    @property
    def sock(self) -> socket.socket:
        """The client's socket (TLS's, once wrapped)."""
        return self.wire.sock

    # -- signals from other threads -------------------------------------------------------------------
    def go_away(self) -> None:
        """The server is shutting down, or the session is terminated: wake the connection's thread,
        which tells the client (57P01) and closes."""
        self.wire.go_away()

    def open_cursors(self) -> list[SqlCursor]:
        """The session's open SQL cursors (``pg_cursors``; read on the session's own thread)."""
        session = self.session
        return list(session.sql_cursors.open.values()) if session is not None else []

    def cancel_statement(self) -> None:
        """A cancel request or ``pg_cancel_backend``, from another thread: the statement in
        progress is cancelled (57014); a session that waits for its client has none, and the
        cancel is dropped, as PostgreSQL drops it.

        A statement already received whose DuckDB query has not begun would drop a single cancel
        too: the cancel is repeated every 0.1 s for as long as that statement runs."""
        session, doing = self.session, self.activity.doing
        if session is None:
            return
        session.cancel()
        if doing.state == ACTIVE:
            again = threading.Thread(
                target=self._cancel_while, args=(lambda: self.activity.doing is doing,), daemon=True
            )
            again.start()

    def terminate(self) -> None:
        """``pg_terminate_backend`` and the server's shutdown: the statement in progress stops
        (cancelled every 0.1 s until the connection closes), and the client is told 57P01
        and disconnected. A connection still open after ``TERMINATE_WAIT_S`` (a send blocked on a
        client that does not read) has its socket shut."""
        self.go_away()
        session = self.session
        if session is not None:
            session.cancel()
        threading.Thread(
            target=self._cancel_while, args=(lambda: True, TERMINATE_WAIT_S), daemon=True
        ).start()

    def _cancel_while(self, running: Callable[[], bool], shut_after_s: float = math.inf) -> None:
        deadline = time.monotonic() + shut_after_s
        while not self.wire.ending.wait(0.1) and running():
            session = self.session
            if session is not None:
                session.cancel()
            if time.monotonic() > deadline:
                self.wire.shut()
                deadline = math.inf

    # -- the connection's life ---------------------------------------------------------------------------
    def serve(self) -> None:
        try:
            self.wire.sock.settimeout(STARTUP_TIMEOUT_S)
            admitted = admit(self.wire, self.server, self.peer)
            if admitted is None:
                return
            self._start(admitted)
            self.wire.sock.settimeout(None)
            self._loop()
        except ClientGone:
            pass
        except WireError as err:
            self._fatal(err)
        except (PygwireError, ValueError, UnicodeDecodeError, struct.error) as exc:
            self._fatal(WireError(sqlstate.PROTOCOL_VIOLATION, f"invalid message: {exc}"))
        except TimeoutError:
            self._fatal(WireError(sqlstate.PROTOCOL_VIOLATION, "canceling authentication due to timeout"))
        except Exception:  # a bug must cost one connection, never the server
            log.exception("connection from %s failed", self.peer)
            self._fatal(WireError(sqlstate.INTERNAL_ERROR, "internal error; see the server's log"))
        finally:
            self._close()

    def _fatal(self, err: WireError) -> None:
        try:
            self.wire.error(WireError(err.code, err.message, err.position, err.hint, "FATAL"))
            self.wire.flush()
        except (ClientGone, OSError):
            pass

    def _close(self) -> None:
        self.wire.ending.set()
        if self.wire.going_away:
            self._fatal(
                WireError(sqlstate.ADMIN_SHUTDOWN, "terminating connection due to administrator command")
            )
        if self.session is not None:
            self.session.close()
        self.server.forget(self)
        self.wire.close()

    # -- 2. the session ----------------------------------------------------------------------------------
    def _start(self, admitted: Admitted) -> None:
        """The session of an authenticated client, its key and parameters told, ReadyForQuery."""
        self.user, role = admitted.user, admitted.role
        try:
            parameters = SessionParameters(
                self.user, role == "admin", self.wire.tls, admitted.params, admitted.settings
            )
        except InvalidValue as exc:  # PostgreSQL refuses the connection too
            raise WireError(sqlstate.INVALID_PARAMETER_VALUE, str(exc)) from None
        self.session = self.server.new_session(self.user, role, parameters)
        self.extended = ExtendedQuery(self.wire, self.session, self.activity)
        self.session.client_gone = self.wire.client_gone
        self.session.deallocate = self.extended.deallocate
        self.process_id = self.server.register(self)
        self.session.backend_pid = self.process_id
        self.activity.started(self.user, role, parameters.values)
        self.wire.send(AuthenticationOk())
        self.wire.send(BackendKeyData(process_id=self.process_id, secret_key=self.secret))
        for name, value in parameters.reported():
            self.wire.send(ParameterStatus(name=name, value=value))
        log.info("client %s connected as '%s' (%s)", self.peer[0], self.user, role)
        self._ready()

    # -- 3. statements ---------------------------------------------------------------------------------
    def _ready(self) -> None:
        assert self.session is not None
        self.activity.ready(self.session.transaction)
        self.wire.send(ReadyForQuery(status=TransactionStatus(self.session.transaction)))
        self.wire.flush()

    def _loop(self) -> None:
        extended = self.extended
        assert extended is not None
        handlers: dict[type, Callable[[Any], None]] = {
            Query: self._simple,
            Parse: extended.parse,
            Bind: extended.bind,
            Describe: extended.describe,
            Execute: extended.execute,
            Close: extended.close,
            Sync: self._sync,
            Flush: lambda m: self.wire.flush(),
            FunctionCallMessage: self._function_call,
        }
        while True:
            message = self.wire.next()
            if isinstance(message, Terminate):
                raise ClientGone
            handler = handlers.get(type(message))
            if handler is None:
                raise WireError(sqlstate.PROTOCOL_VIOLATION, f"unexpected message {type(message).__name__}")
            if self.skip_to_sync and not isinstance(message, Sync | Query):
                continue
            try:
                handler(message)
            except WireError as err:  # extended protocol (a Query reports its own errors)
                self.wire.error(err)
                self.skip_to_sync = True

    def _function_call(self, message: Any) -> None:
        raise WireError(sqlstate.FEATURE_NOT_SUPPORTED, "the function call protocol is not supported")

    def _sync(self, message: Sync) -> None:
        self.skip_to_sync = False
        self._close_unnamed()
        self._ready()

    def _close_unnamed(self) -> None:
        assert self.extended is not None
        self.extended.close_unnamed()

    # simple query ----------------------------------------------------------------------------------
    def _simple(self, message: Query) -> None:
        assert self.session is not None
        self.skip_to_sync = False
        query = message.query_string
        prefix = 0
        if self.pending_block is not None:
            # psql splits at every ';' and knows nothing of a job's AS BEGIN ... END: the
            # pieces are joined until the block's END arrives.
            prefix = len(self.pending_block) + 1
            query = self.pending_block + "\n" + query
            self.pending_block = None
        self.activity.running(query)
        if in_job_block(query):
            if not prefix:
                self.wire.notice(Notice("the job's BEGIN ... END block continues: send the rest, up to END;"))
            self.pending_block = query
            self.wire.send(EmptyQueryResponse())
            self._ready()
            return
        statements = split(query)
        if not statements:
            self.wire.send(EmptyQueryResponse())
        for stmt in statements:
            if self.wire.going_away:
                raise ClientGone  # terminated: :meth:`_close` says 57P01
            try:
                outcome = self.session.run(stmt, query)
                send_outcome(self.wire, outcome, None, 0, describe=True)
            except WireError as err:
                position = err.position
                if position is not None and prefix:
                    position = position - prefix if position > prefix else None
                self.wire.error(WireError(err.code, err.message, position, err.hint, err.severity))
                break
        self._close_unnamed()
        self._ready()
