"""Users of a pitstop server, how they prove who they are, and what their role lets them run.

Users are kept in ``<home>/users.json`` (mode 0600), not in ``catalog.duckdb``, for two reasons:

1. clients' queries read the catalog database, and DuckDB has no per-table privileges: password
   verifiers there would be readable by any reader;
2. a running server holds ``catalog.duckdb`` open for itself, and ``pitstop user add`` must work
   while it runs (the server reads the file again whenever it has changed).

Passwords are never stored nor logged: a user has PostgreSQL's SCRAM-SHA-256 verifier
(``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``, RFC 5802/7677, the format
PostgreSQL keeps in ``pg_authid``), and an md5 verifier (``md5`` + md5(password + name)) only when
asked for, for old clients that cannot do SCRAM.

Roles: an ``admin`` may run everything; a ``reader`` may query, SHOW, DESCRIBE, EXPLAIN, AWAIT
and SET its own session settings, never create, drop or alter (:data:`READER_MAY_RUN`).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from scramp import ScramException, ScramMechanism
from scramp.utils import ServerError, saslprep

from pitstop.errors import PitstopError
from pitstop.sql.statements import STATEMENTS

log = logging.getLogger(__name__)

ROLES = ("admin", "reader")
ITERATIONS = 4096
USERS_FILE = "users.json"
_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,63}")

# What a reader may run: queries and pitstop's statements that change nothing (declared with each
# statement, pitstop.sql.statements).
READER_MAY_RUN: tuple[type, ...] = tuple(n for s in STATEMENTS if s.reader for n in s.nodes)


class AuthError(PitstopError):
    """A user that cannot be added or found, or a proof that does not match."""


def allowed(role: str, node: Any) -> bool:
    """Whether a user of ``role`` may run a statement (a node of :mod:`pitstop.sql.nodes`)."""
    return role == "admin" or isinstance(node, READER_MAY_RUN)


@dataclass(frozen=True)
class User:
    name: str
    role: str
    scram: str
    md5: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """Session parameters every session of the user starts with (PostgreSQL's ``ALTER ROLE ...
    SET``): ``statement_timeout``, ``TimeZone``... A client's startup options and SET still win."""


# -- SCRAM-SHA-256 --------------------------------------------------------------------------------
# scramp does SASLprep (RFC 4013), the key derivation and the server's side of the exchange. What
# PostgreSQL does differently from the RFCs is adapted here, in two places:
#
# 1. a password that SASLprep refuses (a control character, a private-use or unassigned code point
#    such as an emoji newer than Unicode 3.2, a bad bidi mix) or maps to nothing is used as its own
#    UTF-8 bytes by PostgreSQL and libpq (``pg_saslprep`` answers SASLPREP_PROHIBITED); scramp
#    refuses such a password, so :func:`scram_keys` derives its keys with RFC 5802's steps;
# 2. the SCRAM user name is ignored, the startup packet's is used: libpq sends none (``n=``) and
#    asyncpg sends it unescaped, which scramp refuses (:meth:`ScramExchange.server_first`).
_SCRAM = ScramMechanism("SCRAM-SHA-256")


def _prohibited(password: str) -> bool:
    """Whether PostgreSQL skips SASLprep for ``password`` and uses the password's own bytes."""
    try:
        return not saslprep(password)
    except ScramException:
        return True


def scram_keys(password: str, salt: bytes, iterations: int = ITERATIONS) -> tuple[bytes, bytes]:
    """``(StoredKey, ServerKey)`` of a password, as PostgreSQL and libpq derive them."""
    if not _prohibited(password):
        _, stored, server, _ = _SCRAM.make_auth_info(password, iterations, salt)
        return stored, server
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(errors="surrogateescape"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return hashlib.sha256(client_key).digest(), server_key


def scram_verifier(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    salt = salt if salt is not None else secrets.token_bytes(16)
    stored, server = scram_keys(password, salt, iterations)
    b64 = base64.b64encode
    return f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}${b64(stored).decode()}:{b64(server).decode()}"


def parse_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    """``(iterations, salt, StoredKey, ServerKey)`` of a stored verifier."""
    match = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)", verifier)
    if match is None:
        raise AuthError("a stored SCRAM verifier is malformed; set the password again (pitstop user passwd)")
    b64 = base64.b64decode
    return int(match.group(1)), b64(match.group(2)), b64(match.group(3)), b64(match.group(4))


_CHANNEL_BINDING = {ServerError.CHANNEL_BINDING_NOT_SUPPORTED, ServerError.UNSUPPORTED_CHANNEL_BINDING_TYPE}


def _refusal(exc: ScramException) -> AuthError:
    """What a failed step of the exchange is called in pitstop's log."""
    if exc.server_error == ServerError.INVALID_PROOF:
        return AuthError("password authentication failed")
    if exc.server_error in _CHANNEL_BINDING:
        # 'p=...' asks for channel binding: pitstop offers SCRAM-SHA-256 only, not -PLUS.
        return AuthError("SCRAM channel binding is not offered; connect with channel_binding=disable")
    return AuthError(f"malformed SCRAM message: {exc}")


class ScramExchange:
    """The server side of one SCRAM-SHA-256 exchange (sans I/O), by scramp.

    An unknown user goes through the same steps with a verifier made up from the server's secret
    (as PostgreSQL's mock authentication does), so neither the answers nor their timing tell
    whether the user exists; the exchange then fails at the proof.
    """

    def __init__(self, user: User | None, secret: bytes, name: str = "") -> None:
        self.user = user
        if user is not None:
            iterations, salt, stored, server_key = parse_verifier(user.scram)
        else:
            salt = hashlib.sha256(secret + b"mock-salt" + name.encode()).digest()[:16]
            iterations = ITERATIONS
            stored = hashlib.sha256(secret + b"mock-stored" + name.encode()).digest()
            server_key = hashlib.sha256(secret + b"mock-server" + name.encode()).digest()
        keys = (salt, stored, server_key, iterations)
        self._server = _SCRAM.make_server(lambda _scram_name: keys)

    def server_first(self, client_first: bytes) -> bytes:
        text = _decoded(client_first)
        # The SCRAM user name is ignored, as PostgreSQL does. scramp reads pgjdbc's placeholder
        # "n=*" in its place, and checks the proof over the message the client signed.
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        name, comma, after_name = bare.partition(",")
        signed = None
        if name.startswith("n=") and comma:
            text, signed = f"{flag},{authzid},n=*,{after_name}", bare
        try:
            self._server.set_client_first(text)
            if signed is not None:
                self._server.client_first_bare = signed  # what scramp's AuthMessage begins with
            return self._server.get_server_first().encode()
        except ScramException as exc:
            raise _refusal(exc) from None

    def server_final(self, client_final: bytes) -> bytes:
        try:
            self._server.set_client_final(_decoded(client_final))
            answer = self._server.get_server_final()
        except ScramException as exc:
            raise _refusal(exc) from None
        if self.user is None:
            raise AuthError("password authentication failed")
        return answer.encode()


def _decoded(message: bytes) -> str:
    try:
        return message.decode()
    except UnicodeDecodeError:
        raise AuthError("malformed SCRAM message: not UTF-8") from None


def md5_verifier(name: str, password: str) -> str:
    return "md5" + hashlib.md5((password + name).encode()).hexdigest()


def md5_check(user: User, salt: bytes, response: str) -> bool:
    """PostgreSQL's md5 method: the client sends ``md5`` + md5(md5(password + user) + salt)."""
    if not user.md5:
        return False
    expected = "md5" + hashlib.md5(user.md5[3:].encode() + salt).hexdigest()
    return hmac.compare_digest(expected, response)


# -- the store ------------------------------------------------------------------------------------
class UserStore:
    """``<home>/users.json``: read when it changed, written atomically under a lock file."""

    def __init__(self, home: Path) -> None:
        self.path = home / USERS_FILE
        self._seen: tuple[float, int] | None = None
        self._users: dict[str, User] = {}

    def _load(self) -> dict[str, User]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._users = None, {}
            return self._users
        key = (stat.st_mtime, stat.st_size)
        if key != self._seen:
            data = json.loads(self.path.read_text())
            self._users = {u["name"]: User(**u) for u in data.get("users", [])}
            self._seen = key
        return self._users

    @contextmanager
    def _locked(self) -> Iterator[dict[str, User]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(f".{USERS_FILE}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._seen = None
            users = dict(self._load())
            yield users
            tmp = self.path.with_name(f".{USERS_FILE}.{os.getpid()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump({"users": [asdict(u) for u in users.values()]}, out, indent=1)
            os.replace(tmp, self.path)
            self._seen = None

    def get(self, name: str) -> User | None:
        return self._load().get(name)

    def users(self) -> list[User]:
        return sorted(self._load().values(), key=lambda u: u.name)

    def any(self) -> bool:
        return bool(self._load())

    def add(self, name: str, password: str, role: str = "reader", md5: bool = False) -> User:
        check_name(name)
        check_role(role)
        check_password(name, password)
        with self._locked() as users:
            if name in users:
                raise AuthError(
                    f"user '{name}' already exists; change its password with pitstop user passwd {name}"
                )
            user = User(name, role, scram_verifier(password), md5_verifier(name, password) if md5 else None)
            users[name] = user
        log.info("user '%s' added with role %s", name, role)
        return user

    def set_password(self, name: str, password: str) -> None:
        check_password(name, password)
        with self._locked() as users:
            user = users.get(name)
            if user is None:
                raise AuthError(f"unknown user '{name}'; pitstop user list lists the users")
            md5 = md5_verifier(name, password) if user.md5 else None
            users[name] = User(name, user.role, scram_verifier(password), md5)

    def set_settings(self, name: str, changes: dict[str, str | None]) -> User:
        """Change a user's session defaults (None: remove one); the values are checked first."""
        with self._locked() as users:
            user = users.get(name)
            if user is None:
                raise AuthError(f"unknown user '{name}'; pitstop user list lists the users")
            settings = dict(user.settings)
            for key, value in changes.items():
                if value is None:
                    settings.pop(key, None)
                else:
                    settings[key] = value
            users[name] = replace(user, settings=settings)
        log.info("user '%s': session settings %s", name, settings)
        return users[name]

    def drop(self, name: str) -> None:
        with self._locked() as users:
            if users.pop(name, None) is None:
                raise AuthError(f"unknown user '{name}'; pitstop user list lists the users")
        log.info("user '%s' dropped", name)


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise AuthError(
            f"invalid user name {name!r}: 1 to 63 characters, no control characters (as PostgreSQL's names)"
        )


def check_role(role: str) -> None:
    if role not in ROLES:
        raise AuthError(f"unknown role '{role}'; a user is one of: {', '.join(ROLES)}")


def check_password(name: str, password: str) -> None:
    if not password:
        raise AuthError(f"user '{name}': an empty password is not allowed")
    if "\x00" in password:
        raise AuthError(f"user '{name}': a password cannot hold a NUL character")
