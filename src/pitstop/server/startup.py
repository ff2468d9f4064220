"""A client's way in: the startup messages, TLS and authentication, as PostgreSQL's ``postgres.c``
and ``auth.c`` answer them.

1. Startup: SSLRequest (TLS when a certificate is configured, else ``N``), GSSENCRequest (``N``),
   CancelRequest (handed to the server, then the connection closes), StartupMessage (protocol
   3.0; a newer minor version or ``_pq_.`` options get NegotiateProtocolVersion).
2. Authentication: SCRAM-SHA-256 (or md5 for a user stored with one) against pitstop's users;
   with no users defined, only loopback clients are let in, without a password. A failed attempt
   is logged, counted by the server's :class:`~pitstop.server.throttle.LoginThrottle` and answered
   after a short pause.

What follows (the session, BackendKeyData, ParameterStatus, ReadyForQuery) is the connection's
(:mod:`pitstop.server.connection`).
"""

from __future__ import annotations

import logging
import secrets
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from pygwire import ConnectionPhase
from pygwire.messages import (
    AuthenticationMD5Password,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    CancelRequest,
    GSSEncRequest,
    NegotiateProtocolVersion,
    PasswordMessage,
    SASLInitialResponse,
    SASLResponse,
    SSLRequest,
    StartupMessage,
)

from pitstop.server import sqlstate
from pitstop.server.auth import AuthError, ScramExchange, UserStore, md5_check
from pitstop.server.sqlstate import WireError
from pitstop.server.throttle import LoginThrottle
from pitstop.server.wire import Wire

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 60.0  # PostgreSQL's authentication_timeout


class Doorway(Protocol):
    """What the way in uses of the server that accepted the connection
    (:class:`pitstop.server.app.Server`)."""

    ssl_context: ssl.SSLContext | None
    require_tls: bool
    users: UserStore
    auth_secret: bytes
    throttle: LoginThrottle

    def is_loopback(self, peer: tuple[Any, ...]) -> bool: ...

    def cancel(self, process_id: int, secret: bytes) -> None: ...


@dataclass(frozen=True)
class Admitted:
    """A client let in: its user, the user's role and the startup message's parameters."""

    user: str
    role: str
    params: dict[str, str]
    settings: dict[str, str] = field(default_factory=dict)
    """The user's session defaults (``pitstop user set``)."""


def admit(wire: Wire, server: Doorway, peer: tuple[Any, ...]) -> Admitted | None:
    """Step 1 and 2: the client authenticated (the decoder is past startup), or None for a cancel
    request (the connection then closes); WireError (FATAL) when refused."""
    while True:
        message = wire.next()
        if isinstance(message, SSLRequest):
            _ssl(wire, server)
        elif isinstance(message, GSSEncRequest):
            wire.sock.sendall(b"N")
        elif isinstance(message, CancelRequest):
            server.cancel(message.process_id, bytes(message.secret_key))
            return None
        elif isinstance(message, StartupMessage):
            return _start(wire, server, peer, message)
        else:
            raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a startup message")


def _ssl(wire: Wire, server: Doorway) -> None:
    context = server.ssl_context
    if context is None or wire.tls:
        wire.sock.sendall(b"N")
        return
    if wire.decoder.buffered:
        raise WireError(sqlstate.PROTOCOL_VIOLATION, "received unencrypted data after SSL request")
    wire.sock.sendall(b"S")
    wire.start_tls(context)


def _start(wire: Wire, server: Doorway, peer: tuple[Any, ...], message: StartupMessage) -> Admitted:
    params = dict(message.params)
    major, minor = message.protocol_version >> 16, message.protocol_version & 0xFFFF
    if major != 3:
        raise WireError(
            sqlstate.FEATURE_NOT_SUPPORTED,
            f"unsupported frontend protocol {major}.{minor}: server supports 3.0",
        )
    if server.require_tls and not wire.tls:
        raise WireError(sqlstate.INVALID_AUTHORIZATION, "pitstop requires TLS: connect with sslmode=require")
    unknown = [k for k in params if k.startswith("_pq_.")]
    if minor > 0 or unknown:
        wire.send(NegotiateProtocolVersion(newest_minor=0, unrecognized=unknown))
    user = params.get("user", "")
    if not user:
        raise WireError(sqlstate.INVALID_AUTHORIZATION, "no PostgreSQL user name specified in startup packet")
    role = _authenticate(wire, server, peer, user)
    wire.decoder.phase = ConnectionPhase.READY
    known = server.users.get(user)
    return Admitted(user, role, params, dict(known.settings) if known is not None else {})


def _authenticate(wire: Wire, server: Doorway, peer: tuple[Any, ...], name: str) -> str:
    """Step 2: the role of the authenticated user; WireError (FATAL) when refused."""
    store = server.users
    if not store.any():
        if server.is_loopback(peer):
            return "admin"
        raise WireError(
            sqlstate.INVALID_AUTHORIZATION,
            f"no pitstop users are defined, so only connections from this machine are accepted "
            f"(this one came from {peer[0]}); add a user with: pitstop user add NAME",
        )
    refusal = server.throttle.refusal(str(peer[0]))
    if refusal is not None:
        raise WireError(sqlstate.INVALID_PASSWORD, refusal)
    user = store.get(name)
    refused = WireError(sqlstate.INVALID_PASSWORD, f'password authentication failed for user "{name}"')
    if user is not None and user.md5:
        salt = secrets.token_bytes(4)
        wire.send(AuthenticationMD5Password(salt=salt))
        wire.flush()
        wire.decoder.phase = ConnectionPhase.AUTHENTICATING
        answer = wire.next()
        if not isinstance(answer, PasswordMessage):
            raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a password response")
        password = answer.password
        text = password.decode(errors="replace") if isinstance(password, bytes) else password
        if not md5_check(user, salt, text.rstrip("\x00")):
            _slow_refusal(server, peer, name, "wrong md5 password")
            raise refused
        return user.role
    exchange = ScramExchange(user, server.auth_secret, name)
    wire.send(AuthenticationSASL(mechanisms=["SCRAM-SHA-256"]))
    wire.flush()
    wire.decoder.phase = ConnectionPhase.AUTHENTICATING_SASL_INITIAL
    first = wire.next()
    if not isinstance(first, SASLInitialResponse):
        raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a SASL initial response")
    if first.mechanism != "SCRAM-SHA-256":
        raise WireError(
            sqlstate.PROTOCOL_VIOLATION,
            f"client selected an invalid SASL authentication mechanism: {first.mechanism}",
        )
    try:
        wire.send(AuthenticationSASLContinue(data=exchange.server_first(bytes(first.data))))
        wire.flush()
        wire.decoder.phase = ConnectionPhase.AUTHENTICATING_SASL_CONTINUE
        final = wire.next()
        if not isinstance(final, SASLResponse):
            raise WireError(sqlstate.PROTOCOL_VIOLATION, "expected a SASL response")
        wire.send(AuthenticationSASLFinal(data=exchange.server_final(bytes(final.data))))
    except AuthError as exc:
        _slow_refusal(server, peer, name, str(exc))
        raise refused from None
    assert user is not None
    return user.role


def _slow_refusal(server: Doorway, peer: tuple[Any, ...], name: str, reason: str) -> None:
    log.warning("authentication failed for user '%s' from %s: %s", name, peer[0], reason)
    server.throttle.failed(str(peer[0]))
    time.sleep(0.2)  # a little friction for guessing; the socket thread is the client's own
