"""Users and authentication of pitstop serve: SCRAM-SHA-256 checked against PostgreSQL's own
verifiers and RFC 7677, the user commands (real processes where several add at once), and real
clients (psql, psycopg, asyncpg) let in or refused over real sockets; a reader may look, never
change."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import stat
import subprocess
from pathlib import Path

import asyncpg
import psycopg
import pytest

from command_helpers import pitstop, start
from conftest import settings
from pitstop.server.auth import (
    AuthError,
    ScramExchange,
    User,
    UserStore,
    md5_check,
    scram_keys,
    scram_verifier,
)
from server_helpers import Served, psql, serving

# Written by PostgreSQL 15.18 for `CREATE ROLE u LOGIN PASSWORD 'pencil'` (password_encryption
# scram-sha-256, then md5 for 'olduser'), read from pg_authid.
POSTGRES_SCRAM = (
    "SCRAM-SHA-256$4096:1V9d1bOZL+gIyu1r2nvdgg==$XyT+46dLDpYaoTqMAVOJnn6QFLfLl/Nl0VcpibL7mt0="
    ":kuFcQNuzFJnMXsoMKpNWeN1eDNJ8/UKwnsmAe4mgnco="
)
POSTGRES_MD5 = "md5ffae39cf7beaaec5c17ae0a0f9485a5b"


def test_verifier_matches_what_postgres_stores() -> None:
    salt = base64.b64decode("1V9d1bOZL+gIyu1r2nvdgg==")
    assert scram_verifier("pencil", salt) == POSTGRES_SCRAM


def _client_proof(password: str, salt: bytes, iterations: int, auth_message: bytes) -> bytes:
    """RFC 5802's client side, written out here independently of pitstop's server side."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    signature = hmac.new(stored, auth_message, hashlib.sha256).digest()
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def test_rfc7677_example_exchange() -> None:
    """RFC 7677, section 3: user 'user', password 'pencil'. The server nonce is random in
    pitstop, so the client proof is computed for the nonce the server chose; the server
    signature is then checked with the RFC's keys."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    user = User("user", "admin", scram_verifier("pencil", salt))
    exchange = ScramExchange(user, b"secret", "user")
    first = exchange.server_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").decode()
    nonce = first.split(",")[0][2:]
    assert nonce.startswith("rOprNGfwEbeRWgbNEkqO") and ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" in first
    final_bare = f"c=biws,r={nonce}"
    auth = f"n=user,r=rOprNGfwEbeRWgbNEkqO,{first},{final_bare}".encode()
    proof = base64.b64encode(_client_proof("pencil", salt, 4096, auth)).decode()
    answer = exchange.server_final(f"{final_bare},p={proof}".encode())
    server_key = hmac.new(
        hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096), b"Server Key", hashlib.sha256
    ).digest()
    assert answer == b"v=" + base64.b64encode(hmac.new(server_key, auth, hashlib.sha256).digest())
    # With the RFC's own server nonce, the RFC's server signature comes out of the same keys.
    rfc_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    rfc_auth = (
        "n=user,r=rOprNGfwEbeRWgbNEkqO,"
        + rfc_first
        + ",c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    _, server = scram_keys("pencil", salt)
    signature = hmac.new(server, rfc_auth.encode(), hashlib.sha256).digest()
    assert base64.b64encode(signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_a_wrong_proof_and_an_unknown_user_fail_alike() -> None:
    user = User("ana", "admin", scram_verifier("right"))
    for who, name in ((user, "ana"), (None, "nobody")):
        exchange = ScramExchange(who, b"secret", name)
        first = exchange.server_first(b"n,,n=,r=abc").decode()
        assert first.startswith("r=abc") and ",i=4096" in first
        nonce = first.split(",")[0][2:]
        with pytest.raises(AuthError):
            exchange.server_final(f"c=biws,r={nonce},p={base64.b64encode(b'x' * 32).decode()}".encode())
    with pytest.raises(AuthError, match="channel binding"):
        ScramExchange(user, b"s", "ana").server_first(b"p=tls-server-end-point,,n=,r=abc")


def test_the_scram_user_name_is_ignored_as_postgres_does() -> None:
    """libpq sends no SCRAM user name, pgjdbc '*', asyncpg the name unescaped: PostgreSQL ignores
    it (the startup packet names the user), so the exchange succeeds with each."""
    salt = b"0123456789abcdef"
    user = User("a=b", "admin", scram_verifier("pencil", salt))
    for sent in ("", "*", "a=b", "someone-else"):
        exchange = ScramExchange(user, b"secret", "a=b")
        first = exchange.server_first(f"n,,n={sent},r=abc".encode()).decode()
        nonce = first.split(",")[0][2:]
        auth = f"n={sent},r=abc,{first},c=biws,r={nonce}".encode()
        proof = base64.b64encode(_client_proof("pencil", salt, 4096, auth)).decode()
        assert exchange.server_final(f"c=biws,r={nonce},p={proof}".encode()).startswith(b"v=")
    with pytest.raises(AuthError, match="malformed SCRAM message"):
        ScramExchange(user, b"secret", "a=b").server_first(b"n,,r=abc")


def test_md5_check_uses_postgres_md5_verifier() -> None:
    user = User("olduser", "reader", scram_verifier("pencil"), POSTGRES_MD5)
    salt = b"\x01\x02\x03\x04"
    response = "md5" + hashlib.md5(POSTGRES_MD5[3:].encode() + salt).hexdigest()
    assert md5_check(user, salt, response)
    assert not md5_check(user, salt, "md5" + "0" * 32)


def test_user_commands_keep_verifiers_only_in_a_private_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = pitstop("user", "add", "ana", "--role", "admin", home=home, stdin="pencil\n")
    assert done.returncode == 0 and "user 'ana' added (admin)" in done.stdout, done.stderr
    assert pitstop("user", "add", "rita", "--md5", home=home, stdin="other\n").returncode == 0
    path = home / "users.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "pencil" not in text and "other" not in text
    listing = pitstop("user", "list", home=home).stdout.splitlines()
    assert listing == ["ana\tadmin\tscram-sha-256", "rita\treader\tscram-sha-256, md5"]
    again = pitstop("user", "add", "ana", home=home, stdin="x\n")
    assert again.returncode == 1 and "user 'ana' already exists" in again.stderr
    bad_role = pitstop("user", "add", "bob", "--role", "root", home=home, stdin="x\n")
    assert bad_role.returncode == 2 and "root" in bad_role.stderr
    for hostile in ("", "a\x01b", "x" * 64):
        with pytest.raises(AuthError):
            UserStore(home).add(hostile, "pw")
    assert pitstop("user", "drop", "rita", home=home).returncode == 0
    assert [u.name for u in UserStore(home).users()] == ["ana"]
    assert not (home / "catalog.duckdb").exists()  # the user commands never open the catalog


def test_concurrent_adds_from_two_processes_both_land(tmp_path: Path) -> None:
    home = tmp_path / "home"
    procs = [start("user", "add", f"u{i}", home=home, stdin=subprocess.PIPE) for i in range(6)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("pw\n")
        proc.stdin.close()
    assert [p.wait(60) for p in procs] == [0] * 6
    assert [u.name for u in UserStore(home).users()] == [f"u{i}" for i in range(6)]


def three_users(home: Path) -> None:
    store = UserStore(home)
    store.add("ana", "adminpw", "admin")
    store.add("rita", "readerpw", "reader")
    store.add("old", "oldpw", "reader", md5=True)


guarded = pytest.mark.served(home=three_users)


@guarded
def test_real_clients_authenticate_with_scram(served: Served) -> None:
    with psycopg.connect(served.url("ana", "adminpw"), autocommit=True) as conn:
        conn.execute("CREATE MAPPING kept TYPE DuckDB")
        assert conn.execute("SHOW is_superuser").fetchone() == ("on",)

    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(served.url("rita", "readerpw"))
        try:
            return await conn.fetch("SHOW MAPPINGS")
        finally:
            await conn.close()

    assert [r["name"] for r in asyncio.run(go())] == ["kept"]
    done = psql(served, "-c", "SELECT 1 AS one", user="rita", password="readerpw")
    assert done.returncode == 0 and " 1" in done.stdout, done.stderr
    done = psql(served, "-c", "SELECT 2 AS two", user="old", password="oldpw")  # md5 for old clients
    assert done.returncode == 0 and " 2" in done.stdout, done.stderr


@guarded
def test_wrong_password_unknown_user_and_no_password_are_refused(served: Served) -> None:
    for user, password in (("ana", "wrong"), ("nobody", "adminpw"), ("old", "wrong")):
        with pytest.raises(
            psycopg.OperationalError, match=f'password authentication failed for user "{user}"'
        ):
            psycopg.connect(served.url(user, password))
    done = psql(served, "-w", "-c", "SELECT 1", user="ana")  # -w: never prompt
    assert done.returncode != 0
    assert [m.name for m in served.manager.catalog.mappings()] == []
    log = (served.manager.home / "logs").glob("*.log")
    assert all("adminpw" not in p.read_text() for p in log)


@guarded
def test_a_reader_may_look_but_never_change(served: Served) -> None:
    with psycopg.connect(served.url("ana", "adminpw"), autocommit=True) as admin:
        admin.execute("CREATE MAPPING daily TYPE DuckDB")
    with psycopg.connect(served.url("rita", "readerpw"), autocommit=True) as reader:
        assert reader.execute("SHOW is_superuser").fetchone() == ("off",)
        for sql in (
            "SHOW JOBS",
            "SHOW SNAPSHOTS",
            "SHOW MAPPINGS",
            "SELECT 1",
            "SET 'await_timeout_s' = '9'",
        ):
            reader.execute(sql)
        refused = [
            "DROP MAPPING daily",
            "CREATE MAPPING other TYPE DuckDB",
            "DROP JOB IF EXISTS revenue WITH SNAPSHOT s",
            "CREATE SNAPSHOT s FOR JOB revenue",
            "DROP SNAPSHOT IF EXISTS s",
            "ALTER JOB revenue SUSPEND",
            "CREATE VIEW v AS SELECT * FROM daily",
        ]
        for sql in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="role 'reader'"):
                reader.execute(sql)
    assert [m.name for m in served.manager.catalog.mappings()] == ["daily"]


def test_with_no_users_only_loopback_clients_are_let_in(served: Served) -> None:
    server = served.server
    assert server.is_loopback(("127.0.0.1", 1)) and server.is_loopback(("::1", 1, 0, 0))
    assert not server.is_loopback(("192.0.2.7", 1))
    with psycopg.connect(served.url("anyone")) as conn:  # loopback, no users: an admin, no password
        assert conn.execute("SHOW is_superuser").fetchone() == ("on",)


def test_users_added_while_the_server_runs_apply_at_once(served: Served) -> None:
    psycopg.connect(served.url("first")).close()  # no users yet: let in
    done = pitstop("user", "add", "ana", "--role", "admin", home=served.manager.home, stdin="pw\n")
    assert done.returncode == 0, done.stderr
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(served.url("first"))  # now asked for a password
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(served.url("first", "guess"))
    psycopg.connect(served.url("ana", "pw")).close()


def test_a_users_file_is_private_even_under_a_loose_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        UserStore(tmp_path / "home").add("ana", "pw")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "home" / "users.json").stat().st_mode) == 0o600


# Passwords that SASLprep (RFC 4013) changes or refuses, as libpq and PostgreSQL prepare them:
# mapped to nothing (U+00AD soft hyphen), to a space (U+00A0, U+3000), NFKC-normalised (U+FB01,
# fullwidth letters, a combining accent); and ones SASLprep refuses, for which PostgreSQL and libpq
# use the password's own bytes (an emoji newer than Unicode 3.2, a tab, a bad bidi mix, a password
# that maps to nothing at all).
SASLPREP_PASSWORDS = (
    "soft\u00adhyphen",
    "no\u00a0break\u3000space",
    "\ufb01sh \uff30\uff41\uff53\uff53 cafe\u0301",
    "emoji \U0001f600",
    "tab\there",
    "\u0627\u0644 latin",
    "\u00ad",
)


def test_verifiers_are_the_ones_libpq_derives(tmp_path: Path) -> None:
    """libpq's own PQencryptPasswordConn (psycopg's ``encrypt_password``) is the reference: the
    client side of a login prepares the password the same way."""
    with serving(settings(tmp_path / "home")) as s, psycopg.connect(s.url()) as conn:
        for password in ("pencil", *SASLPREP_PASSWORDS):
            libpq = conn.pgconn.encrypt_password(password.encode(), b"ana", b"scram-sha-256").decode()
            salt = base64.b64decode(libpq.split("$")[1].split(":")[1])
            assert scram_verifier(password, salt) == libpq, repr(password)


def test_passwords_that_saslprep_changes_log_in_with_psql_and_psycopg(tmp_path: Path) -> None:
    store = UserStore(tmp_path / "home")
    names = [f"u{i}" for i in range(len(SASLPREP_PASSWORDS))]
    for name, password in zip(names, SASLPREP_PASSWORDS, strict=True):
        store.add(name, password, "reader")
    with serving(settings(tmp_path / "home")) as s:
        for name, password in zip(names, SASLPREP_PASSWORDS, strict=True):
            with psycopg.connect(
                host=s.host, port=s.port, user=name, password=password, dbname="pitstop"
            ) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,), repr(password)
            done = psql(s, "-w", "-c", "SELECT 3 AS three", user=name, password=password)
            assert done.returncode == 0 and " 3" in done.stdout, (repr(password), done.stderr)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(host=s.host, port=s.port, user="u0", password="softhyphen\u00ad!", dbname="x")


def test_a_verifier_written_before_scramp_still_logs_in(tmp_path: Path) -> None:
    """A users file as pitstop wrote it with its own SCRAM code (before scramp): its users keep
    logging in, with an ASCII password and with one that NFKC and SASLprep prepare alike."""
    home = tmp_path / "home"
    home.mkdir()
    old = {
        "users": [
            {
                "name": "ana",
                "role": "admin",
                "scram": "SCRAM-SHA-256$4096:AAECAwQFBgcICQoLDA0ODw=="
                "$kuI6zSxuoofwpF7IwU/yI/IO/FWPl3jiKptYHSmTE4Y=:HH7n3CSxjnIhq7Lwu5EXq3/2PeSQljMJ5w53ORY4Ryg=",
                "md5": None,
            },
            {
                "name": "rita",
                "role": "reader",
                "scram": "SCRAM-SHA-256$4096:AAECAwQFBgcICQoLDA0ODw=="
                "$oFAZgdo38AktbJnyq9m5wmlhsMc8A03PAxiGlidYMk4=:jL1u6uG6dWNpFec852Rs+7cYBBfRkSOzrF01mSmUDEc=",
                "md5": None,
            },
        ]
    }
    (home / "users.json").write_text(json.dumps(old, indent=1))
    with serving(settings(home)) as s:
        for name, password in (("ana", "old-pencil"), ("rita", "\ufb01sh and \uff30\uff41\uff53\uff53")):
            with psycopg.connect(
                host=s.host, port=s.port, user=name, password=password, dbname="pitstop"
            ) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            done = psql(s, "-w", "-c", "SELECT 4 AS four", user=name, password=password)
            assert done.returncode == 0 and " 4" in done.stdout, done.stderr
