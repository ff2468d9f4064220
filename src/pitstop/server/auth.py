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
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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


# -- SCRAM-SHA-256 --------------------------------------------------------------------------------
def _saslprep(password: str) -> bytes:
    """PostgreSQL's SASLprep: NFKC; a password that does not normalise is used as its bytes."""
    try:
        return unicodedata.normalize("NFKC", password).encode()
    except UnicodeError:
        return password.encode(errors="surrogateescape")


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def scram_keys(password: str, salt: bytes, iterations: int = ITERATIONS) -> tuple[bytes, bytes]:
    """``(StoredKey, ServerKey)`` of a password (RFC 5802)."""
    salted = hashlib.pbkdf2_hmac("sha256", _saslprep(password), salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    return hashlib.sha256(client_key).digest(), _hmac(salted, b"Server Key")


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


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) >= 2 and part[1] == "=":
            out.setdefault(part[0], part[2:])
    return out


class ScramExchange:
    """The server side of one SCRAM-SHA-256 exchange (sans I/O).

    An unknown user goes through the same steps with a verifier made up from the server's secret
    (as PostgreSQL's mock authentication does), so neither the answers nor their timing tell
    whether the user exists; the exchange then fails at the proof.
    """

    def __init__(self, user: User | None, secret: bytes, name: str = "") -> None:
        self.user = user
        if user is not None:
            self.iterations, self.salt, self.stored, self.server_key = parse_verifier(user.scram)
        else:
            salt = hashlib.sha256(secret + b"mock-salt" + name.encode()).digest()[:16]
            self.iterations, self.salt = ITERATIONS, salt
            self.stored = hashlib.sha256(secret + b"mock-stored" + name.encode()).digest()
            self.server_key = hashlib.sha256(secret + b"mock-server" + name.encode()).digest()
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def server_first(self, client_first: bytes) -> bytes:
        try:
            text = client_first.decode()
        except UnicodeDecodeError:
            raise AuthError("malformed SCRAM message") from None
        gs2, _, bare = text.partition(",")
        authzid, _, bare = bare.partition(",")
        if gs2 not in ("n", "y") or authzid:
            # 'p=...' asks for channel binding: pitstop offers SCRAM-SHA-256 only, not -PLUS.
            raise AuthError("SCRAM channel binding is not offered; connect with channel_binding=disable")
        attributes = _attributes(bare)
        client_nonce = attributes.get("r", "")
        if not client_nonce or "m" in attributes:
            raise AuthError("malformed SCRAM message: no client nonce")
        self._client_first_bare = bare
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self.iterations}"
        return self._server_first.encode()

    def server_final(self, client_final: bytes) -> bytes:
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            raise AuthError("malformed SCRAM message") from None
        without_proof, _, proof_part = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce or not proof_part:
            raise AuthError("SCRAM nonce mismatch")
        if attributes.get("c") not in ("biws", "eSws"):  # base64 of "n,," / "y,,"
            raise AuthError("SCRAM channel binding mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthError("malformed SCRAM proof") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.stored, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        if (
            self.user is None
            or len(proof) != 32
            or not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.stored)
        ):
            raise AuthError("password authentication failed")
        server_signature = _hmac(self.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


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
