"""The bytes of one client connection: v3 messages read from its socket, messages sent through a
buffer, and the wait for the client that another thread may end.

Messages are decoded by pygwire (a complete, dependency-free codec of the v3 messages; it does no
I/O, so the socket and the protocol's order of things are the connection's). A :class:`Wire` is
used by the connection's own thread only, except :meth:`Wire.go_away`, :meth:`Wire.shut` and
:meth:`Wire.client_gone`, which are safe from any thread.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
from typing import Any

from pygwire import ConnectionPhase, FrontendMessageDecoder
from pygwire.messages import ErrorResponse, NoticeResponse

from pitstop.server import sqlstate
from pitstop.server.outcome import Notice
from pitstop.server.sqlstate import WireError

MAX_STARTUP = 10_000  # bytes, as PostgreSQL's MAX_STARTUP_PACKET_LENGTH
MAX_MESSAGE = 64 * 1024 * 1024
SEND_CHUNK = 256 * 1024


class ClientGone(Exception):
    """The client closed the connection (or sent Terminate)."""


class Wire:
    """One client socket (TLS once :meth:`start_tls` wrapped it), its decoder and its output buffer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket = sock
        self.decoder = FrontendMessageDecoder()
        self.out = bytearray()
        self.tls = False
        self.going_away = False
        """The server is shutting down, or an admin ended the session: the client is told so
        (57P01) if it can still hear."""
        self.ending = threading.Event()  # the connection's thread is closing it
        self._wake_r, self._wake_w = os.pipe()  # :meth:`go_away` ends a wait for the client
        self._wake_lock = threading.Lock()  # the pipe is never written once closed (fds are reused)
        self._poller: tuple[int, select.poll] | None = None  # (the socket's fd, its poller)

    # -- reading -----------------------------------------------------------------------------------
    def next(self) -> Any:
        """The client's next message, read as far as it takes."""
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

    def start_tls(self, context: ssl.SSLContext) -> None:
        """The socket from here on is TLS's (the client was told ``S``)."""
        self.sock = context.wrap_socket(self.sock, server_side=True)
        self.tls = True

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

    # -- sending -----------------------------------------------------------------------------------
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
            raise ClientGone  # stopped because the session ends: the connection says 57P01 instead
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

    # -- going away (from any thread) and closing ----------------------------------------------------
    def go_away(self) -> None:
        """End a wait for the client (:meth:`next` raises ClientGone) and mark the wire going away."""
        self.going_away = True
        with self._wake_lock:
            if self.ending.is_set():
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

    def shut(self) -> None:
        """Shut the socket (a send blocked on a client that does not read returns), unless the
        connection's thread is closing it already."""
        with self._wake_lock:
            if not self.ending.is_set():
                try:  # the raw socket's: TLS's state belongs to the connection's thread
                    socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Close the socket and the wake pipe (after :attr:`ending` is set)."""
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
