"""One client connection: the PostgreSQL v3 messages in and out, on the connection's own thread.

Messages are decoded by pygwire (a complete, dependency-free codec of the v3 messages; it does no
I/O, so the socket and the protocol's order of things are ours). The sequence follows
PostgreSQL's ``postgres.c``:

1. Startup: SSLRequest (TLS when a certificate is configured, else ``N``), GSSENCRequest (``N``),
   CancelRequest (handed to the server, then the connection closes), StartupMessage.
2. Authentication: SCRAM-SHA-256 (or md5 for a user stored with one) against pitstop's users;
   with no users defined, only loopback clients are let in, without a password.
3. BackendKeyData, ParameterStatus of every reported parameter, ReadyForQuery.
4. Simple query (Query: each statement's RowDescription, DataRows, CommandComplete; one
   ReadyForQuery at the end) and extended query (Parse, Bind, Describe, Execute, Close, Flush,
   Sync; after an error every message up to Sync is discarded).
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pygwire import ConnectionPhase, FrontendMessageDecoder, PygwireError, TransactionStatus
from pygwire.messages import (
    AuthenticationMD5Password,
    AuthenticationOk,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    BackendKeyData,
    Bind,
    BindComplete,
    CancelRequest,
    Close,
    CloseComplete,
    CommandComplete,
    CopyDone,
    CopyOutResponse,
    Describe,
    EmptyQueryResponse,
    ErrorResponse,
    Execute,
    FieldDescription,
    Flush,
    GSSEncRequest,
    NegotiateProtocolVersion,
    NoData,
    NoticeResponse,
    ParameterDescription,
    ParameterStatus,
    Parse,
    ParseComplete,
    PasswordMessage,
    PortalSuspended,
    Query,
    ReadyForQuery,
    RowDescription,
    SASLInitialResponse,
    SASLResponse,
    SSLRequest,
    StartupMessage,
    Sync,
    Terminate,
)
from pygwire.messages import (
    FunctionCall as FunctionCallMessage,
)

from pitstop.server import sqlstate
from pitstop.server.activity import ACTIVE, Activity
from pitstop.server.auth import AuthError, ScramExchange, UserStore, md5_check
from pitstop.server.bindvalues import decode_params
from pitstop.server.bulk import RowEncoder
from pitstop.server.outcome import Notice, Outcome
from pitstop.server.params import SessionParameters
from pitstop.server.pgtypes import TEXT, Column, encode
from pitstop.server.routing import Statement, split
from pitstop.server.session import Session
from pitstop.server.sqlstate import WireError
from pitstop.server.throttle import LoginThrottle
from pitstop.sql.parser import in_job_block


class Server(Protocol):
    """What a connection uses of the server that accepted it (:class:`pitstop.server.app.Server`)."""

    ssl_context: ssl.SSLContext | None
    require_tls: bool
    users: UserStore
    auth_secret: bytes
    throttle: LoginThrottle

    def is_loopback(self, peer: tuple[Any, ...]) -> bool: ...

    def new_session(self, user: str, role: str, parameters: SessionParameters) -> Session: ...

    def register(self, conn: Connection) -> int: ...

    def forget(self, conn: Connection) -> None: ...

    def cancel(self, process_id: int, secret: bytes) -> None: ...


log = logging.getLogger(__name__)

MAX_STARTUP = 10_000  # bytes, as PostgreSQL's MAX_STARTUP_PACKET_LENGTH
MAX_MESSAGE = 64 * 1024 * 1024
STARTUP_TIMEOUT_S = 60.0  # PostgreSQL's authentication_timeout
SEND_CHUNK = 256 * 1024
TERMINATE_WAIT_S = 10.0


class ClientGone(Exception):
    """The client closed the connection (or sent Terminate)."""


@dataclass
class Prepared:
    statement: Statement | None
    query: str
    param_types: list[int]
    described: tuple[Column, ...] | None = None
    was_described: bool = False


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    result_formats: list[int]
    outcome: Outcome | None = None
    done: bool = False
    columns: tuple[Column, ...] | None = None
    binary: list[bool] = field(default_factory=list)


def _data_row(values: list[bytes | None]) -> bytes:
    parts = [struct.pack(">h", len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(struct.pack(">i", len(v)))
            parts.append(v)
    body = b"".join(parts)
    return b"D" + struct.pack(">i", len(body) + 4) + body


class Connection:
    """Serves one client socket until it leaves; ``serve()`` never raises."""

    def __init__(self, server: Server, sock: socket.socket, peer: tuple[Any, ...]) -> None:
        self.server = server
        self.sock: socket.socket = sock
        self.peer = peer
        self.decoder = FrontendMessageDecoder()
        self.out = bytearray()
        self.session: Session | None = None
        self.process_id = 0
        self.secret = secrets.token_bytes(4)
        self.user = ""
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.skip_to_sync = False
        self.tls = False
        self.pending_block: str | None = None
        self.going_away = False
        """The server is shutting down, or an admin ended the session: the client is told so
        (57P01) if it can still hear."""
        self.activity = Activity(peer)
        """What ``pg_stat_activity`` shows of this session (:mod:`pitstop.server.activity`)."""
        self._wake_r, self._wake_w = os.pipe()  # :meth:`go_away` ends a wait for the client
        self._ending = threading.Event()  # the connection's thread is closing it
        self._wake_lock = threading.Lock()  # the pipe is never written once closed (fds are reused)
        self._poller: tuple[int, select.poll] | None = None  # (the socket's fd, its poller)

    # -- I/O --------------------------------------------------------------------------------------------
    def _next(self) -> Any:
        while True:
            try:
                return next(self.decoder)
            except StopIteration:
                pass
            limit = MAX_STARTUP if self.decoder.phase == ConnectionPhase.STARTUP else MAX_MESSAGE
            if self.decoder.buffered > limit:
                raise WireError(sqlstate.PROTOCOL_VIOLATION, "invalid message length: message too large")
            self._wait_for_client()
            try:
                data = self.sock.recv(65536)
            except (ConnectionError, OSError) as exc:
                raise ClientGone from exc
            if not data:
                raise ClientGone
            self.decoder.feed(data)

    def _wait_for_client(self) -> None:
        """Until the client has sent something, or the server goes away (:meth:`go_away`). Its
        thread then says 57P01 itself, on the socket as it is: shutting the socket from another
        thread would lose the message (and, under TLS, the session's state)."""
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return  # decrypted bytes wait in the TLS layer already
        timeout = self.sock.gettimeout()
        fd = self.sock.fileno()
        if self._poller is None or self._poller[0] != fd:  # (a new one once TLS wraps the socket)
            poller = select.poll()  # (not select(): a process with Spark in it may hold > 1024 files)
            poller.register(fd, select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
            self._poller = (fd, poller)
        ready = {f for f, _ in self._poller[1].poll(None if timeout is None else timeout * 1000)}
        if self._wake_r in ready:
            raise ClientGone
        if not ready:
            raise TimeoutError

    def go_away(self) -> None:
        """The server is shutting down, or the session is terminated: wake the connection's thread,
        which tells the client (57P01) and closes."""
        self.going_away = True
        with self._wake_lock:
            if self._ending.is_set():
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

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
        while not self._ending.wait(0.1) and running():
            session = self.session
            if session is not None:
                session.cancel()
            if time.monotonic() > deadline:
                with self._wake_lock:
                    if not self._ending.is_set():
                        try:  # the raw socket's: TLS's state belongs to the connection's thread
                            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
                        except OSError:
                            pass
                deadline = math.inf

    def client_gone(self) -> bool:
        """Whether the client closed its end (polled while a statement waits: AWAIT JOB, the drain
        of DROP JOB ... WITH SNAPSHOT). Peeks at the raw socket, under TLS too; data the client
        sent ahead (pipelined messages) is left where it is."""
        try:
            data = socket.socket.recv(self.sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return data == b""

    def send(self, message: Any) -> None:
        self.out += message.to_wire()
        if len(self.out) >= SEND_CHUNK:
            self.flush()

    def send_raw(self, data: bytes | memoryview) -> None:
        self.out += data
        if len(self.out) >= SEND_CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self.out:
            return
        data, self.out = bytes(self.out), bytearray()
        try:
            self.sock.sendall(data)
        except (ConnectionError, OSError) as exc:
            raise ClientGone from exc

    def error(self, err: WireError) -> None:
        if self.going_away and err.code == sqlstate.QUERY_CANCELED:
            raise ClientGone  # stopped because the session ends: :meth:`_close` says 57P01 instead
        fields = {"S": err.severity, "V": err.severity, "C": err.code, "M": err.message}
        if err.position is not None:
            fields["P"] = str(err.position)
        if err.hint:
            fields["H"] = err.hint
        self.send(ErrorResponse(fields=fields))
        # PostgreSQL flushes an error at once: a client that sent Flush rather than Sync (asyncpg
        # prepares with Parse, Describe, Flush) waits for it and would hang otherwise.
        self.flush()

    def notice(self, notice: Notice) -> None:
        fields = {"S": notice.severity, "V": notice.severity, "C": notice.code, "M": notice.message}
        self.send(NoticeResponse(fields=fields))

    # -- the connection's life ---------------------------------------------------------------------------
    def serve(self) -> None:
        try:
            self.sock.settimeout(STARTUP_TIMEOUT_S)
            if not self._startup():
                return
            self.sock.settimeout(None)
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
            self.error(WireError(err.code, err.message, err.position, err.hint, "FATAL"))
            self.flush()
        except (ClientGone, OSError):
            pass

    def _close(self) -> None:
        self._ending.set()
        if self.going_away:
            self._fatal(
                WireError(sqlstate.ADMIN_SHUTDOWN, "terminating connection due to administrator command")
            )
        if self.session is not None:
            self.session.close()
        self.server.forget(self)
        try:
            self.sock.close()
        except OSError:
            pass
        with self._wake_lock:
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass

    # -- 1. startup -----------------------------------------------------------------------------------
    def _startup(self) -> bool:
        while True:
            message = self._next()
            if isinstance(message, SSLRequest):
                self._ssl()
            elif isinstance(message, GSSEncRequest):
                self.sock.sendall(b"N")
            elif isinstance(message, CancelRequest):
                self.server.cancel(message.process_id, bytes(message.secret_key))
                return False
            elif isinstance(message, StartupMessage):
                return self._start(message)
            else:
                raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a startup message")

    def _ssl(self) -> None:
        context = self.server.ssl_context
        if context is None or self.tls:
            self.sock.sendall(b"N")
            return
        if self.decoder.buffered:
            raise WireError(sqlstate.PROTOCOL_VIOLATION, "received unencrypted data after SSL request")
        self.sock.sendall(b"S")
        self.sock = context.wrap_socket(self.sock, server_side=True)
        self.tls = True

    def _start(self, message: StartupMessage) -> bool:
        params = dict(message.params)
        major, minor = message.protocol_version >> 16, message.protocol_version & 0xFFFF
        if major != 3:
            raise WireError(
                sqlstate.FEATURE_NOT_SUPPORTED,
                f"unsupported frontend protocol {major}.{minor}: server supports 3.0",
            )
        if self.server.require_tls and not self.tls:
            raise WireError(
                sqlstate.INVALID_AUTHORIZATION, "pitstop requires TLS: connect with sslmode=require"
            )
        unknown = [k for k in params if k.startswith("_pq_.")]
        if minor > 0 or unknown:
            self.send(NegotiateProtocolVersion(newest_minor=0, unrecognized=unknown))
        self.user = params.get("user", "")
        if not self.user:
            raise WireError(
                sqlstate.INVALID_AUTHORIZATION, "no PostgreSQL user name specified in startup packet"
            )
        role = self._authenticate()
        self.decoder.phase = ConnectionPhase.READY
        parameters = SessionParameters(self.user, role == "admin", self.tls, params)
        self.session = self.server.new_session(self.user, role, parameters)
        self.session.client_gone = self.client_gone
        self.session.deallocate = self._deallocate
        self.process_id = self.server.register(self)
        self.session.backend_pid = self.process_id
        self.activity.started(self.user, role, parameters.values)
        self.send(AuthenticationOk())
        self.send(BackendKeyData(process_id=self.process_id, secret_key=self.secret))
        for name, value in parameters.reported():
            self.send(ParameterStatus(name=name, value=value))
        log.info("client %s connected as '%s' (%s)", self.peer[0], self.user, role)
        self._ready()
        return True

    # -- 2. authentication ---------------------------------------------------------------------------
    def _authenticate(self) -> str:
        """The role of the authenticated user; WireError (FATAL) when refused."""
        store = self.server.users
        if not store.any():
            if self.server.is_loopback(self.peer):
                return "admin"
            raise WireError(
                sqlstate.INVALID_AUTHORIZATION,
                f"no pitstop users are defined, so only connections from this machine are accepted "
                f"(this one came from {self.peer[0]}); add a user with: pitstop user add NAME",
            )
        refusal = self.server.throttle.refusal(str(self.peer[0]))
        if refusal is not None:
            raise WireError(sqlstate.INVALID_PASSWORD, refusal)
        user = store.get(self.user)
        refused = WireError(
            sqlstate.INVALID_PASSWORD, f'password authentication failed for user "{self.user}"'
        )
        if user is not None and user.md5:
            salt = secrets.token_bytes(4)
            self.send(AuthenticationMD5Password(salt=salt))
            self.flush()
            self.decoder.phase = ConnectionPhase.AUTHENTICATING
            answer = self._next()
            if not isinstance(answer, PasswordMessage):
                raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a password response")
            password = answer.password
            text = password.decode(errors="replace") if isinstance(password, bytes) else password
            if not md5_check(user, salt, text.rstrip("\x00")):
                self._slow_refusal("wrong md5 password")
                raise refused
            return user.role
        exchange = ScramExchange(user, self.server.auth_secret, self.user)
        self.send(AuthenticationSASL(mechanisms=["SCRAM-SHA-256"]))
        self.flush()
        self.decoder.phase = ConnectionPhase.AUTHENTICATING_SASL_INITIAL
        first = self._next()
        if not isinstance(first, SASLInitialResponse):
            raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a SASL initial response")
        if first.mechanism != "SCRAM-SHA-256":
            raise WireError(
                sqlstate.PROTOCOL_VIOLATION,
                f"client selected an invalid SASL authentication mechanism: {first.mechanism}",
            )
        try:
            self.send(AuthenticationSASLContinue(data=exchange.server_first(bytes(first.data))))
            self.flush()
            self.decoder.phase = ConnectionPhase.AUTHENTICATING_SASL_CONTINUE
            final = self._next()
            if not isinstance(final, SASLResponse):
                raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a SASL response")
            self.send(AuthenticationSASLFinal(data=exchange.server_final(bytes(final.data))))
        except AuthError as exc:
            self._slow_refusal(str(exc))
            raise refused from None
        assert user is not None
        return user.role

    def _slow_refusal(self, reason: str) -> None:
        log.warning("authentication failed for user '%s' from %s: %s", self.user, self.peer[0], reason)
        self.server.throttle.failed(str(self.peer[0]))
        time.sleep(0.2)  # a little friction for guessing; the socket thread is the client's own

    # -- 3. statements ---------------------------------------------------------------------------------
    def _ready(self) -> None:
        assert self.session is not None
        self.activity.ready(self.session.transaction)
        self.send(ReadyForQuery(status=TransactionStatus(self.session.transaction)))
        self.flush()

    def _loop(self) -> None:
        handlers: dict[type, Callable[[Any], None]] = {
            Query: self._simple,
            Parse: self._parse,
            Bind: self._bind,
            Describe: self._describe,
            Execute: self._execute,
            Close: self._close_object,
            Sync: self._sync,
            Flush: lambda m: self.flush(),
            FunctionCallMessage: self._function_call,
        }
        while True:
            message = self._next()
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
                self.error(err)
                self.skip_to_sync = True

    def _function_call(self, message: Any) -> None:
        raise WireError(sqlstate.FEATURE_NOT_SUPPORTED, "the function call protocol is not supported")

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
                self.notice(Notice("the job's BEGIN ... END block continues: send the rest, up to END;"))
            self.pending_block = query
            self.send(EmptyQueryResponse())
            self._ready()
            return
        statements = split(query)
        if not statements:
            self.send(EmptyQueryResponse())
        for stmt in statements:
            if self.going_away:
                raise ClientGone  # terminated: :meth:`_close` says 57P01
            try:
                outcome = self.session.run(stmt, query)
                self._send_outcome(outcome, None, 0, describe=True)
            except WireError as err:
                position = err.position
                if position is not None and prefix:
                    position = position - prefix if position > prefix else None
                self.error(WireError(err.code, err.message, position, err.hint, err.severity))
                break
        self._close_unnamed()
        self._ready()

    def _send_outcome(
        self, outcome: Outcome, binary: list[bool] | None, max_rows: int, describe: bool
    ) -> bool:
        """Notices, rows (up to ``max_rows`` when > 0) and the command tag; False when the portal
        is suspended with rows left."""
        for notice in outcome.notices:
            self.notice(notice)
        outcome.notices = []
        for name, value in outcome.parameter_changes:
            self.send(ParameterStatus(name=name, value=value))
        outcome.parameter_changes = []
        if outcome.tag == "EMPTY":
            self.send(EmptyQueryResponse())
            return True
        if outcome.copy is not None:
            return self._send_copy(outcome)
        columns = outcome.columns
        if columns is not None:
            if describe:
                self.send(_row_description(columns, binary))
            flags = binary or [False] * len(columns)
            types = [c.type for c in columns]
            sent = 0
            while True:
                if outcome.batches is not None:
                    return self._send_batches(outcome, max_rows, sent)
                for row in outcome.rows:
                    self.send_raw(
                        _data_row([encode(v, t, b) for v, t, b in zip(row, types, flags, strict=False)])
                    )
                    outcome.count += 1
                    sent += 1
                    if max_rows and sent >= max_rows:
                        self.send(PortalSuspended())
                        return False
                if outcome.more is None:
                    break
                encoder = RowEncoder.of(outcome.duckdb_types, types, flags) if outcome.arrow else None
                outcome.read_more(encoder)
        self.send(CommandComplete(tag=outcome.final_tag()))
        return True

    def _send_copy(self, outcome: Outcome) -> bool:
        """COPY ... TO STDOUT: CopyOutResponse (text, every column), a CopyData per line, CopyDone
        and the tag. A row limit does not apply to COPY (as in PostgreSQL)."""
        assert outcome.copy is not None
        self.send(CopyOutResponse(overall_format=0, col_formats=[0] * outcome.copy.width))
        for line in outcome.copy:
            self.send_raw(b"d" + struct.pack(">i", len(line) + 4) + line)
        self.send(CopyDone())
        self.send(CommandComplete(tag=outcome.final_tag()))
        return True

    def _send_batches(self, outcome: Outcome, max_rows: int, sent: int) -> bool:
        """The rows of an outcome switched to Arrow batches (``_send_outcome``); ``sent`` rows of
        this Execute already went value by value."""
        assert outcome.batches is not None and outcome.encoder is not None
        while True:
            batch = outcome.pending if outcome.pending is not None else next(outcome.batches, None)
            outcome.pending = None
            if batch is None:
                break
            if max_rows and batch.num_rows > max_rows - sent:
                room = max_rows - sent
                outcome.pending = batch.slice(room)
                batch = batch.slice(0, room)
            self.send_raw(outcome.encoder.encode(batch))
            outcome.count += batch.num_rows
            sent += batch.num_rows
            if max_rows and sent >= max_rows:
                self.send(PortalSuspended())
                return False
        self.send(CommandComplete(tag=outcome.final_tag()))
        return True

    # extended query -----------------------------------------------------------------------------
    def _parse(self, message: Parse) -> None:
        assert self.session is not None
        statements = split(message.query)
        if len(statements) > 1:
            raise WireError(
                sqlstate.SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"
            )
        stmt = statements[0] if statements else None
        name = message.statement
        if name and name in self.prepared:
            raise WireError("42P05", f'prepared statement "{name}" already exists')
        count = stmt.param_count if stmt else 0
        types = list(message.param_types) + [0] * max(0, count - len(message.param_types))
        self.prepared[name] = Prepared(stmt, message.query, types)
        self.send(ParseComplete())

    def _bind(self, message: Bind) -> None:
        assert self.session is not None
        prepared = self.prepared.get(message.statement)
        if prepared is None:
            raise WireError(
                sqlstate.INVALID_PREPARED_STATEMENT,
                f'prepared statement "{message.statement}" does not exist',
            )
        values = list(message.param_values)
        if len(values) != len(prepared.param_types):
            raise WireError(
                sqlstate.PROTOCOL_VIOLATION,
                f"bind message supplies {len(values)} parameters, but prepared statement "
                f'"{message.statement}" requires {len(prepared.param_types)}',
            )
        params = decode_params(
            values, prepared.param_types, _formats(list(message.param_formats), len(values))
        )
        if message.portal and message.portal in self.portals:
            raise WireError("42P03", f'cursor "{message.portal}" already exists')
        self.portals[message.portal] = Portal(prepared, params, list(message.result_formats))
        self.send(BindComplete())

    def _describe(self, message: Describe) -> None:
        assert self.session is not None
        if message.kind == "S":
            prepared = self.prepared.get(message.name)
            if prepared is None:
                raise WireError(
                    sqlstate.INVALID_PREPARED_STATEMENT, f'prepared statement "{message.name}" does not exist'
                )
            columns = self._describe_statement(prepared)
            self.send(ParameterDescription(type_oids=prepared.param_types))
            self.send(_row_description(columns, None) if columns is not None else NoData())
            return
        if message.name and message.name not in self.portals:  # a cursor DECLAREd in SQL is a portal
            declared = self.session.cursor_columns(message.name)
            if declared is not None:
                self.send(_row_description(declared, None))
                return
        portal = self._portal(message.name)
        columns = self._portal_columns(portal)
        self.send(_row_description(columns, portal.binary) if columns is not None else NoData())

    def _describe_statement(self, prepared: Prepared) -> tuple[Column, ...] | None:
        assert self.session is not None
        if not prepared.was_described:
            stmt = prepared.statement
            if stmt is None:
                prepared.param_types = [t or TEXT.oid for t in prepared.param_types]
            else:
                types, prepared.described = self.session.describe(stmt, prepared.query, prepared.param_types)
                prepared.param_types = types  # Bind decodes by what the client was told
            prepared.was_described = True
        return prepared.described

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise WireError(sqlstate.INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        return portal

    def _portal_columns(self, portal: Portal) -> tuple[Column, ...] | None:
        """Run the portal's statement (once) and fix its columns and their formats."""
        assert self.session is not None
        if portal.outcome is None:
            stmt = portal.prepared.statement
            if self.going_away:
                raise ClientGone
            self.activity.running(portal.prepared.query)
            if stmt is None:
                portal.outcome = Outcome("EMPTY")
            else:
                portal.outcome = self.session.run(stmt, portal.prepared.query, portal.params)
            columns = portal.outcome.columns
            described = portal.prepared.described if portal.prepared.was_described else None
            if columns is not None and described is not None and len(described) == len(columns):
                # The statement was described before: keep the types the client was told.
                columns = described
                portal.outcome.columns = described
            portal.columns = columns
            count = len(columns) if columns is not None else 0
            portal.binary = [f == 1 for f in _formats(portal.result_formats, count)]
        return portal.columns

    def _execute(self, message: Execute) -> None:
        portal = self._portal(message.portal)
        if portal.done:
            self.send(CommandComplete(tag=portal.outcome.final_tag() if portal.outcome else "SELECT 0"))
            return
        self._portal_columns(portal)
        assert portal.outcome is not None
        self.activity.running(portal.prepared.query)
        finished = self._send_outcome(portal.outcome, portal.binary, message.max_rows, describe=False)
        portal.done = finished

    def _deallocate(self, name: str | None) -> bool:
        """SQL's DEALLOCATE (and DISCARD ALL): a prepared statement goes, or all of them."""
        if name is None:
            self.prepared.clear()
            return True
        return self.prepared.pop(name, None) is not None

    def _close_object(self, message: Close) -> None:
        if message.kind == "S":
            self.prepared.pop(message.name, None)
        else:
            portal = self.portals.pop(message.name, None)
            if portal is not None and self.session is not None:
                self.session.end_query()
        self.send(CloseComplete())

    def _close_unnamed(self) -> None:
        """End of a query cycle: the unnamed portal goes; outside a transaction block every
        portal goes (inside one, named portals live on until COMMIT, as JDBC's fetch size needs)."""
        self.portals.pop("", None)
        if self.session is not None and self.session.transaction == "I":
            self.portals.clear()
            self.session.end_query()

    def _sync(self, message: Sync) -> None:
        self.skip_to_sync = False
        self._close_unnamed()
        self._ready()


def _formats(codes: list[int], count: int) -> list[bool]:
    """PostgreSQL's format code rules: none = all text, one = for all, else one per column."""
    if not codes:
        return [False] * count
    if len(codes) == 1:
        return [codes[0] == 1] * count
    if len(codes) != count:
        raise WireError(sqlstate.PROTOCOL_VIOLATION, f"expected {count} format codes, got {len(codes)}")
    return [c == 1 for c in codes]


def _row_description(columns: tuple[Column, ...], binary: list[bool] | None) -> RowDescription:
    flags = binary or [False] * len(columns)
    return RowDescription(
        fields=[
            FieldDescription(
                name=c.name,
                table_oid=0,
                column_attr=0,
                type_oid=c.type.oid,
                type_size=c.type.size,
                type_modifier=c.type.modifier,
                format_code=1 if b else 0,
            )
            for c, b in zip(columns, flags, strict=False)
        ]
    )
