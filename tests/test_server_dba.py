"""What a DBA does to a pitstop server with PostgreSQL's tools (issue 25), with real clients over
real sockets: pg_stat_activity, pg_cancel_backend and pg_terminate_backend (an admin for any
session, another user for its own), TLS required, and failed logins throttled by address."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from pygwire import BackendMessageDecoder
from pygwire.messages import ErrorResponse, StartupMessage

from command_helpers import pitstop
from conftest import settings
from pitstop.server.auth import UserStore
from pitstop.server.throttle import LoginThrottle, ThrottleSettings
from server_helpers import Served, psql, serving

T = TypeVar("T")
SLOW = "SELECT count(*) FROM range(100000000000) AS t(x) WHERE x % 7 = 3"
ACTIVITY = "SELECT pid, usename, state, query FROM pg_stat_activity WHERE state <> 'idle'"


def until(check: Callable[[], T | None], what: str, timeout_s: float = 120) -> T:
    """``check()``'s first true answer; the test fails if none comes within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: still not so after {timeout_s} s")
        time.sleep(0.05)


def local_port(conn: psycopg.Connection[Any]) -> int:
    with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        return int(sock.getsockname()[1])


@contextmanager
def running(conn: psycopg.Connection[Any], sql: str) -> Iterator[list[BaseException | None]]:
    """``sql`` runs on ``conn`` in a thread during the block (cancelled if still running at its
    end); the list holds what it raised (None: it returned)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            conn.execute(sql)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield outcome
    finally:
        while thread.is_alive():  # a test that failed first leaves no query running
            thread.join(0.5)
            if thread.is_alive() and not conn.closed:
                conn.cancel_safe()


def state_of(admin: psycopg.Connection[Any], pid: int) -> tuple[str, str] | None:
    row = admin.execute("SELECT state, query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return (row[0], row[1]) if row else None


# -- pg_stat_activity -------------------------------------------------------------------------------
def test_pg_stat_activity_has_a_row_per_session_as_postgres_shows_it(served: Served) -> None:
    url = served.url()
    with (
        psycopg.connect(url, autocommit=True, application_name="grafana") as me,
        psycopg.connect(url) as in_block,
        psycopg.connect(url, autocommit=True) as idle,
    ):
        idle.execute("SELECT 2")
        in_block.execute("SELECT 1")  # psycopg began a transaction: it now waits inside it
        rows = me.execute(
            "SELECT pid, datname, usename, application_name, client_addr, client_port, backend_start,"
            " xact_start, query_start, state, query, wait_event, backend_type FROM pg_stat_activity"
        ).fetchall()
        by_pid = {r[0]: r for r in rows}
        assert set(by_pid) == {me.info.backend_pid, in_block.info.backend_pid, idle.info.backend_pid}
        mine = by_pid[me.info.backend_pid]
        assert mine[1:6] == ("pitstop", "tester", "grafana", "127.0.0.1", local_port(me))
        assert mine[6] is not None and mine[6].tzinfo is not None and mine[6] <= mine[8]
        assert mine[9:] == ("active", mine[10], None, "client backend") and "pg_stat_activity" in mine[10]
        assert by_pid[in_block.info.backend_pid][9:11] == ("idle in transaction", "SELECT 1")
        assert by_pid[in_block.info.backend_pid][7] is not None  # xact_start
        xact_start, _, state, query = by_pid[idle.info.backend_pid][7:11]
        assert (xact_start, state, query) == (None, "idle", "SELECT 2")

        # As pgAdmin and Grafana ask: filtered, grouped, joined with pg_database; read afresh each
        # time (never a kept result: the rows change without any commit).
        busy = {r[0]: r[2] for r in me.execute(ACTIVITY).fetchall()}
        assert busy == {me.info.backend_pid: "active", in_block.info.backend_pid: "idle in transaction"}
        counts = me.execute(
            "SELECT state, count(*) FROM pg_stat_activity GROUP BY state ORDER BY state"
        ).fetchall()
        assert counts == [("active", 1), ("idle", 1), ("idle in transaction", 1)]
        joined = me.execute(
            "SELECT d.datname, count(*) FROM pg_catalog.pg_stat_activity AS a "
            "JOIN pg_catalog.pg_database AS d ON d.oid = a.datid GROUP BY d.datname"
        ).fetchall()
        assert joined == [("pitstop", 3)]
        pgadmin = me.execute(
            "SELECT pid, datname, usename, application_name, client_addr, "
            "pg_catalog.to_char(backend_start, 'YYYY-MM-DD HH24:MI:SS') AS backend_start, state, "
            "wait_event_type || ': ' || wait_event AS wait_event, "
            "array_to_string(pg_catalog.pg_blocking_pids(pid), ', ') AS blocking_pids, query, "
            "CASE WHEN state = 'active' THEN "
            "ROUND((extract(epoch from now() - query_start) / 60)::numeric, 2) ELSE 0 END AS active_since "
            "FROM pg_catalog.pg_stat_activity WHERE datname = "
            "(SELECT datname FROM pg_catalog.pg_database LIMIT 1) ORDER BY pid"
        ).fetchall()
        assert [r[0] for r in pgadmin] == sorted(by_pid) and all(r[8] == "" for r in pgadmin)
        for _ in range(3):  # a text the results cache would keep by the third time
            assert state_of(me, in_block.info.backend_pid) == ("idle in transaction", "SELECT 1")
        in_block.commit()
        assert state_of(me, in_block.info.backend_pid) == ("idle", "COMMIT")
    with psycopg.connect(url, autocommit=True) as after:
        until(
            lambda: (
                after.execute("SELECT pid FROM pg_stat_activity").fetchall() == [(after.info.backend_pid,)]
            ),
            "the closed sessions leave pg_stat_activity",
        )


def test_a_running_statement_is_active_with_its_text(served: Served) -> None:
    with (
        psycopg.connect(served.url(), autocommit=True) as admin,
        psycopg.connect(served.url(), autocommit=True) as busy,
    ):
        busy.execute("SET statement_timeout = '300s'")  # a cancel that never came fails, not hangs
        with running(busy, SLOW) as outcome:
            until(lambda: state_of(admin, busy.info.backend_pid) == ("active", SLOW), "the query is active")
            assert admin.execute(ACTIVITY).fetchall() == [
                (admin.info.backend_pid, "tester", "active", ACTIVITY),
                (busy.info.backend_pid, "tester", "active", SLOW),
            ]
            admin.execute("SELECT pg_cancel_backend(%s)", [busy.info.backend_pid])
            until(lambda: outcome, "the query is cancelled", 60)
        assert isinstance(outcome[0], psycopg.errors.QueryCanceled)


# -- pg_cancel_backend, pg_terminate_backend ----------------------------------------------------------
def test_pg_cancel_backend_cancels_the_statement_of_another_session(served: Served) -> None:
    with (
        psycopg.connect(served.url(), autocommit=True) as admin,
        psycopg.connect(served.url(), autocommit=True) as busy,
    ):
        busy.execute("SET statement_timeout = '300s'")
        pid = busy.info.backend_pid
        with running(busy, SLOW) as outcome:
            until(lambda: state_of(admin, pid) == ("active", SLOW), "the query is active")
            # Once: from the moment it is active, a statement is cancelled even before its query
            # has begun in DuckDB (a single cancel there was dropped).
            assert admin.execute("SELECT pg_cancel_backend(%s)", [pid]).fetchone() == (True,)
            until(lambda: outcome, "the other session's statement is cancelled", 60)
        assert isinstance(outcome[0], psycopg.errors.QueryCanceled), outcome
        assert "canceling statement due to user request" in str(outcome[0])
        assert busy.execute("SELECT 41 + 1").fetchone() == (42,)  # the session goes on
        assert admin.execute("SELECT pg_cancel_backend(123456789)").fetchone() == (False,)
        assert admin.execute("SELECT pg_cancel_backend(NULL)").fetchone() == (None,)


def test_pg_terminate_backend_ends_another_session_with_57p01(served: Served) -> None:
    with psycopg.connect(served.url(), autocommit=True) as admin:
        idle = psycopg.connect(served.url(), autocommit=True)
        busy = psycopg.connect(served.url(), autocommit=True)
        busy.execute("SET statement_timeout = '300s'")
        assert admin.execute("SELECT pg_terminate_backend(%s)", [idle.info.backend_pid]).fetchone() == (True,)
        with pytest.raises(psycopg.errors.AdminShutdown, match="terminating connection due to administrator"):
            idle.execute("SELECT 1")
        assert idle.closed
        with running(busy, SLOW) as outcome:
            until(lambda: state_of(admin, busy.info.backend_pid) == ("active", SLOW), "the query is active")
            terminated = admin.execute("SELECT pg_terminate_backend(%s, 5000)", [busy.info.backend_pid])
            assert terminated.fetchone() == (True,)
            until(lambda: outcome, "the terminated session's statement stops", 60)  # not at its timeout
        assert isinstance(outcome[0], psycopg.errors.AdminShutdown), outcome  # not 57014 first
        assert busy.closed
        gone = {idle.info.backend_pid, busy.info.backend_pid}
        until(
            lambda: not gone & {r[0] for r in admin.execute("SELECT pid FROM pg_stat_activity").fetchall()},
            "the ended sessions leave pg_stat_activity",
        )
        assert admin.execute("SELECT pg_terminate_backend(%s)", [busy.info.backend_pid]).fetchone() == (
            False,
        )
        with pytest.raises(psycopg.errors.AdminShutdown):  # its own, as PostgreSQL does it
            admin.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def two_users(home: Path) -> None:
    store = UserStore(home)
    store.add("ana", "adminpw", "admin")
    store.add("rita", "readerpw", "reader")


@pytest.mark.served(home=two_users)
def test_only_an_admin_may_signal_another_users_session(served: Served) -> None:
    with (
        psycopg.connect(served.url("ana", "adminpw"), autocommit=True) as ana,
        psycopg.connect(served.url("rita", "readerpw"), autocommit=True) as rita,
        psycopg.connect(served.url("rita", "readerpw"), autocommit=True) as rita2,
    ):
        ana.execute("SELECT 'secret' AS s")
        for function in ("pg_cancel_backend", "pg_terminate_backend"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                rita.execute(f"SELECT {function}(%s)", [ana.info.backend_pid])
            text = str(refused.value)
            assert f"session {ana.info.backend_pid}" in text and "belongs to user 'ana'" in text, text
            assert "role 'reader'" in text and "ask an admin" in text, text
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not known by this key"):
            rita.execute("SELECT pgc_signal_backend('1:forged', %s, true)", [ana.info.backend_pid])
        assert ana.execute("SELECT 1").fetchone() == (1,)  # untouched

        # A reader sees who is connected, and what only its own sessions run.
        seen = dict(rita.execute("SELECT pid, query FROM pg_stat_activity").fetchall())
        assert seen[ana.info.backend_pid] == "<insufficient privilege>"
        assert seen[rita2.info.backend_pid] == ""  # connected, nothing run yet
        theirs = ana.execute("SELECT query FROM pg_stat_activity WHERE usename = 'rita' ORDER BY pid")
        assert theirs.fetchall() == [("SELECT pid, query FROM pg_stat_activity",), ("",)]  # an admin sees all

        assert rita.execute("SELECT pg_cancel_backend(%s)", [rita2.info.backend_pid]).fetchone() == (True,)
        assert rita.execute("SELECT pg_terminate_backend(%s)", [rita2.info.backend_pid]).fetchone() == (True,)
        with pytest.raises(psycopg.errors.AdminShutdown):
            rita2.execute("SELECT 1")
        assert ana.execute("SELECT pg_terminate_backend(%s)", [rita.info.backend_pid]).fetchone() == (True,)
        with pytest.raises(psycopg.errors.AdminShutdown):
            rita.execute("SELECT 1")


# -- --require-tls ----------------------------------------------------------------------------------
def startup_error(served: Served) -> dict[str, str]:
    """The ErrorResponse a plaintext StartupMessage gets, as its fields (SQLSTATE under 'C')."""
    with socket.create_connection((served.host, served.port), timeout=30) as sock:
        sock.sendall(StartupMessage(params={"user": "tester", "database": "pitstop"}).to_wire())
        decoder = BackendMessageDecoder()
        while True:
            data = sock.recv(65536)
            assert data, "the server closed without an error"
            decoder.feed(data)
            for message in decoder:
                if isinstance(message, ErrorResponse):
                    return dict(message.fields)


@pytest.mark.served(tls=True, require_tls=True)
def test_require_tls_refuses_a_plaintext_startup(served: Served) -> None:
    with pytest.raises(psycopg.OperationalError, match="pitstop requires TLS: connect with sslmode=require"):
        psycopg.connect(served.url(sslmode="disable"))
    fields = startup_error(served)
    assert (fields["S"], fields["C"]) == ("FATAL", "28000"), fields
    for mode in ("require", "prefer"):
        with psycopg.connect(served.url(sslmode=mode)) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SHOW ssl").fetchone() == ("on",)
    done = psql(served, "-c", "SELECT 41 + 1 AS answer")  # psql prefers TLS by default
    assert done.returncode == 0 and "42" in done.stdout, done.stderr


def test_require_tls_without_a_certificate_is_refused_at_start(tmp_path: Path) -> None:
    done = pitstop("serve", "--require-tls", "--port", "25541", home=tmp_path / "home")
    assert done.returncode == 1
    assert "--require-tls needs a certificate to offer: give --tls-cert" in done.stderr, done.stderr


# -- failed logins ------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def relay_from(source: str, served: Served) -> Iterator[str]:
    """A URL host:port that reaches ``served`` from the address ``source`` (127.0.0.2: another
    client address on this machine), through a relay in this process."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((served.host, served.port), source_address=(source, 0))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def test_failed_logins_from_one_address_are_refused_for_a_while(tmp_path: Path) -> None:
    UserStore(tmp_path / "home").add("ana", "adminpw", "admin")
    clock = Clock()
    throttle = LoginThrottle(ThrottleSettings(failures=3, window_s=60, lockout_s=120), clock)
    wrong = "password authentication failed for user"
    locked = "too many failed logins from 127.0.0.1: 3 wrong passwords within 60 s"
    with serving(settings(tmp_path / "home"), throttle=throttle) as s:
        for _ in range(5):  # successful logins are not counted
            psycopg.connect(s.url("ana", "adminpw")).close()
        for _ in range(2):
            with pytest.raises(psycopg.OperationalError, match=wrong):
                psycopg.connect(s.url("ana", "guess"))
        clock.now += 61  # those two are out of the window
        for user in ("ana", "nobody"):  # an unknown user fails alike
            with pytest.raises(psycopg.OperationalError, match=wrong):
                psycopg.connect(s.url(user, "guess"))
        psycopg.connect(s.url("ana", "adminpw")).close()  # two in the window: still let in
        with pytest.raises(psycopg.OperationalError, match=wrong):
            psycopg.connect(s.url("ana", "guess"))  # the third
        for password in ("guess", "adminpw"):  # refused before any password, a right one too
            with pytest.raises(psycopg.OperationalError, match=locked) as refused:
                psycopg.connect(s.url("ana", password))
            assert "refused for 120 s more; check the user name and password" in str(refused.value)
        with relay_from("127.0.0.2", s) as other:  # another address is not affected
            url = s.url("ana", "adminpw").replace(f"{s.host}:{s.port}", other)
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT client_addr FROM pg_stat_activity WHERE pid = pg_backend_pid()")\
                    .fetchone() == ("127.0.0.2",)  # fmt: skip
        done = psql(s, "-w", "-c", "SELECT 1", user="ana", password="adminpw")
        assert done.returncode != 0 and "too many failed logins" in done.stderr, done.stderr
        clock.now += 119
        with pytest.raises(psycopg.OperationalError, match="refused for 1 s more"):
            psycopg.connect(s.url("ana", "adminpw"))
        clock.now += 1
        psycopg.connect(s.url("ana", "adminpw")).close()  # the lockout is over


def rita_with_defaults(home: Path) -> None:
    two_users(home)
    done = pitstop("user", "set", "rita", "statement_timeout=300ms", "timezone=europe/paris", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "session settings of user 'rita': TimeZone=Europe/Paris, statement_timeout=300ms\n"


@pytest.mark.served(home=rita_with_defaults)
def test_a_users_session_defaults_apply_to_each_of_its_sessions(served: Served) -> None:
    """PostgreSQL's ALTER ROLE rita SET statement_timeout = ...: a statement_timeout per role (issue
    25) was not possible; `pitstop user set` gives it, the client's startup options and SET still
    win, and other users are not affected."""
    slow = "SELECT count(*) FROM range(100000000000) AS t(x) WHERE x % 7 = 3"
    with psycopg.connect(served.url("rita", "readerpw"), autocommit=True) as rita:
        assert rita.execute("SHOW statement_timeout").fetchone() == ("300ms",)
        assert rita.execute("SHOW TimeZone").fetchone() == ("Europe/Paris",)
        with pytest.raises(
            psycopg.errors.QueryCanceled, match="canceling statement due to statement timeout"
        ):
            rita.execute(slow)
        rita.execute("SET statement_timeout = 0")
        assert rita.execute("SHOW statement_timeout").fetchone() == ("0",)
    with psycopg.connect(served.url("rita", "readerpw"), options="-c statement_timeout=5s") as rita:
        assert rita.execute("SHOW statement_timeout").fetchone() == ("5s",)
    with psycopg.connect(served.url("ana", "adminpw"), autocommit=True) as ana:
        assert ana.execute("SHOW statement_timeout").fetchone() == ("0",)
        assert ana.execute("SHOW TimeZone").fetchone() == ("UTC",)
    listed = pitstop("user", "list", home=served.manager.home)
    assert "rita\treader\tscram-sha-256\tTimeZone=Europe/Paris statement_timeout=300ms" in listed.stdout
    refused = pitstop("user", "set", "rita", "statement_timeout=soon", home=served.manager.home)
    assert (
        refused.returncode == 2
        and 'invalid value for parameter "statement_timeout": "soon"' in refused.stderr
    )
