"""``pitstop serve``: the manager as a long-lived process with a PostgreSQL door.

The server is the process that owns the home: it runs the jobs, and every client statement goes
through the one executor. Each client connection is served on a thread of its own (statements
such as ``AWAIT JOB`` block for as long as they wait; a client that stops reading blocks only its
own thread). The listening address and the process id are written to ``<home>/server.json`` so
that ``pitstop shell/run/check --home H`` find the server instead of failing on the home's lock.

Shutdown (SIGTERM, SIGINT):
1. stop accepting; 2. tell every client the server is going away (57P01) and cancel what they
wait for; 3. stop every job at a batch boundary (they resume at the next start); 4. remove
``server.json``; 5. exit 0.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any

from pitstop.errors import PitstopError
from pitstop.server import sqlstate
from pitstop.server.activity import Backends
from pitstop.server.address import SERVER_FILE, ServerAddress
from pitstop.server.connection import Connection
from pitstop.server.params import SessionParameters
from pitstop.server.session import Session
from pitstop.server.sqlstate import WireError
from pitstop.server.throttle import LoginThrottle

if TYPE_CHECKING:
    from pitstop.manager import Manager

log = logging.getLogger(__name__)
MAX_CONNECTIONS = 200
SHUTDOWN_WAIT_S = 15.0


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if not cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as exc:
        raise PitstopError(f"cannot load the TLS certificate {cert} (key {key or cert}): {exc}") from exc
    return context


class Server:
    """Listens on one address and serves clients until :meth:`shutdown`."""

    def __init__(
        self,
        manager: Manager,
        host: str = "127.0.0.1",
        port: int = 5433,
        ssl_context: ssl.SSLContext | None = None,
        require_tls: bool = False,
        throttle: LoginThrottle | None = None,
    ) -> None:
        from pitstop.server.auth import UserStore, allowed
        from pitstop.server.pgcatalog import PgCatalog
        from pitstop.server.results import SharedResults

        if require_tls and ssl_context is None:
            raise PitstopError(
                "--require-tls needs a certificate to offer: give --tls-cert (and --tls-key when the "
                "key is in a file of its own)"
            )
        self.manager = manager
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.require_tls = require_tls
        """As PostgreSQL's ``hostssl``: a client that does not ask for TLS is refused (28000)."""
        self.users = UserStore(manager.home)
        self.allowed = allowed
        self.auth_secret = secrets.token_bytes(32)
        self.throttle = throttle or LoginThrottle()
        self.backends = Backends(self, self.auth_secret)
        self.pgcatalog = PgCatalog(self.backends.key)
        self.results = SharedResults()
        # Queries from clients may read the home's tables, never the server's files: DuckDB's
        # file functions (read_csv, read_parquet, ATTACH...) are switched off for good in this
        # process (a client cannot switch them on again; the sinks' registered Arrow batches
        # are not files and still work).
        cursor = manager.catalog.cursor()
        cursor.execute("SET enable_external_access = false")
        self.backends.install(cursor)  # pg_stat_activity, pg_cancel_backend, pg_terminate_backend
        self._listener: socket.socket | None = None
        self._connections: dict[int, Connection] = {}
        self._lock = threading.Lock()
        self._next_pid = os.getpid() * 1000 % 2_000_000_000
        self._stopping = threading.Event()

    # -- listening ---------------------------------------------------------------------------------
    def listen(self) -> ServerAddress:
        """Bind and start accepting on a background thread; returns the address (port 0 picks
        a free one). Writes ``<home>/server.json``."""
        infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(address)
        except OSError as exc:
            listener.close()
            raise PitstopError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}; choose another port with --port"
            ) from exc
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        served = ServerAddress(self.host, self.port, os.getpid())
        path = self.manager.home / SERVER_FILE
        tmp = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
        tmp.write_text(json.dumps({"host": served.host, "port": served.port, "pid": served.pid}))
        os.replace(tmp, path)
        threading.Thread(target=self._accept, name="pitstop-accept", daemon=True).start()
        return served

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("accept failed")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock, peer)
            with self._lock:
                crowded = len(self._connections) >= MAX_CONNECTIONS
            if crowded:
                threading.Thread(target=self._refuse, args=(conn,), daemon=True).start()
                continue
            threading.Thread(
                target=conn.serve, name=f"pitstop-client-{peer[0]}:{peer[1]}", daemon=True
            ).start()

    def _refuse(self, conn: Connection) -> None:
        conn._fatal(WireError(sqlstate.TOO_MANY_CONNECTIONS, "sorry, too many clients already"))
        conn.sock.close()

    # -- connections ---------------------------------------------------------------------------------
    def is_loopback(self, peer: tuple[Any, ...]) -> bool:
        try:
            return ipaddress.ip_address(str(peer[0]).split("%")[0]).is_loopback
        except ValueError:
            return False

    def new_session(self, user: str, role: str, parameters: SessionParameters) -> Session:
        return Session(self.manager, self.pgcatalog, user, role, parameters, self.allowed, self.results)

    def register(self, conn: Connection) -> int:
        with self._lock:
            self._next_pid = self._next_pid % 2_000_000_000 + 1
            self._connections[self._next_pid] = conn
            return self._next_pid

    def forget(self, conn: Connection) -> None:
        with self._lock:
            self._connections.pop(conn.process_id, None)

    def cancel(self, process_id: int, secret: bytes) -> None:
        """A CancelRequest: cancel the statement in progress of the connection it names (when the
        secret matches; a wrong secret is ignored silently, as PostgreSQL does)."""
        with self._lock:
            conn = self._connections.get(process_id)
        if conn is None or not hmac.compare_digest(conn.secret, secret):
            log.info("cancel request for unknown connection %s ignored", process_id)
            return
        log.info("cancelling the statement of connection %s", process_id)
        conn.cancel_statement()

    def backend(self, process_id: int) -> Connection | None:
        """The connection whose backend id is ``process_id`` (pg_cancel_backend's argument)."""
        with self._lock:
            return self._connections.get(process_id)

    def connected(self) -> list[Connection]:
        """Every connection that has logged in."""
        with self._lock:
            return list(self._connections.values())

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._connections)

    # -- shutdown --------------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Steps 1, 2 and 4 of the module's shutdown; the caller closes the manager (step 3)."""
        self._stopping.set()
        if self._listener is not None:
            try:
                self._listener.close()
            except OSError:
                pass
        with self._lock:
            connections = list(self._connections.values())
        for conn in connections:
            conn.terminate()  # its thread stops waiting for the client, says 57P01 and closes
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        while self.connections and time.monotonic() < deadline - SHUTDOWN_WAIT_S / 2:
            time.sleep(0.05)  # each connection's thread ends its statement and closes its cursor
        with self._lock:
            connections = list(self._connections.values())
        for conn in connections:  # a send blocked on a client that does not read ends too
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        while self.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.connections:
            log.warning("%d client connection(s) still busy at shutdown", self.connections)
        path = self.manager.home / SERVER_FILE
        try:
            data = json.loads(path.read_text())
            if int(data.get("pid", -1)) == os.getpid():
                path.unlink(missing_ok=True)
        except (OSError, ValueError):
            pass
