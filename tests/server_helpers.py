"""A pitstop server in the test process (real sockets, real clients), and what tests do with it.

Tests take the ``served`` fixture (tests/conftest.py): a server on a home of their own, started as
``@pytest.mark.served(...)`` on the test, its class or its module says (:class:`ServedWith`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pitstop.manager import Manager
from pitstop.server.app import Server
from pitstop.settings import Settings


@dataclass(frozen=True)
class Served:
    server: Server
    manager: Manager
    host: str
    port: int

    def url(self, user: str = "tester", password: str | None = None, **params: str) -> str:
        secret = f":{password}" if password is not None else ""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://{user}{secret}@{self.host}:{self.port}/pitstop" + (f"?{query}" if query else "")


@contextmanager
def serving(settings: Settings, **kwargs: object) -> Iterator[Served]:
    manager = Manager(settings)
    server = Server(manager, "127.0.0.1", 0, **kwargs)  # type: ignore[arg-type]
    address = server.listen()
    try:
        yield Served(server, manager, address.host, address.port)
    finally:
        server.shutdown()
        manager.close()


@dataclass(frozen=True)
class ServedWith:
    """How the ``served`` fixture starts its server: ``@pytest.mark.served(option=...)`` on a test,
    its class or its module; for each option the closest marker that names it wins."""

    home: Callable[[Path], object] | None = None
    """Called with the home folder before the server opens it (users.json, say)."""
    catalog: Callable[[Manager], object] | None = None
    """Called with the server's manager once it listens, before the test connects (tables,
    snapshots)."""
    tls: bool = False
    """A self-signed certificate for 127.0.0.1 (openssl): clients may ask for TLS."""
    require_tls: bool = False
    """With ``tls``: clients must ask for TLS (``pitstop serve --require-tls``)."""

    @classmethod
    def of(cls, node: pytest.Item) -> ServedWith:
        options: dict[str, object] = {}
        for marker in node.iter_markers("served"):  # the closest first
            if marker.args:
                raise TypeError(f"@pytest.mark.served takes options by name: {marker.args}")
            for name, value in marker.kwargs.items():
                options.setdefault(name, value)
        return cls(**options)  # type: ignore[arg-type]


@contextmanager
def served_for(node: pytest.Item, tmp_path: Path) -> Iterator[Served]:
    """The ``served`` fixture's server: on ``tmp_path/home``, with the test run's settings."""
    from conftest import settings

    with_ = ServedWith.of(node)
    home = tmp_path / "home"
    if with_.home is not None:
        with_.home(home)
    context = None
    if with_.tls:
        from pitstop.server.app import tls_context

        cert, key = make_certificate(tmp_path)
        context = tls_context(str(cert), str(key))
    with serving(settings(home), ssl_context=context, require_tls=with_.require_tls) as s:
        if with_.catalog is not None:
            with_.catalog(s.manager)
        yield s


def psql(
    served: Served, *args: str, user: str = "tester", password: str | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run the real psql against the server (installed by tests/tools/install.sh)."""
    binary = shutil.which("psql")
    assert binary, "psql is missing: run `bash tests/tools/install.sh` (make test does)"
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10", "PAGER": "", "PSQL_PAGER": "", "PGOPTIONS": ""}
    env.pop("PGPASSWORD", None)
    if password is not None:
        env["PGPASSWORD"] = password
    cmd = [binary, "-X", "-h", served.host, "-p", str(served.port), "-U", user, "-d", "pitstop", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=300)


@contextmanager
def cancelling(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Cancel ``conn``'s statement until the block ends. A cancel that reaches the server before
    the statement starts is dropped, as PostgreSQL drops it; so one is sent every 0.2 s, each
    answered before the next (cancel_safe: cancel() would hold the GIL in libpq), and none is
    left in flight for the statements after the block."""
    done = threading.Event()

    def cancel() -> None:
        while not done.wait(0.2):
            conn.cancel_safe()

    thread = threading.Thread(target=cancel)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the openssl command."""
    cert, key = folder / "server.crt", folder / "server.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def race(served: Served, sql: str, clients: int) -> list[str]:
    """``clients`` connections send ``sql`` at the same moment; "created" or "refused" for each
    (refused: a DuplicateObject error naming what already exists)."""
    import psycopg

    barrier = threading.Barrier(clients)
    outcomes: list[str] = []

    def one() -> None:
        with psycopg.connect(served.url(), autocommit=True) as conn:
            barrier.wait()
            try:
                conn.execute(sql)
                outcomes.append("created")
            except psycopg.errors.DuplicateObject as exc:
                assert "already exists" in str(exc)
                outcomes.append("refused")

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return sorted(outcomes)


def serve_process(home: Path, port: int = 0, cwd: Path | None = None) -> tuple[subprocess.Popen[str], int]:
    """``pitstop serve`` as a real process; returns it and the port from its one line."""
    from command_helpers import start

    proc = start(
        "serve", "--port", str(port), home=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("pitstop serve: listening on postgresql://127.0.0.1:"), line
    return proc, int(line.split("127.0.0.1:")[1].split("/")[0])
