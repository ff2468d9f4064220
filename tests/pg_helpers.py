"""A real PostgreSQL server for tests: Debian's ``postgresql`` package, one cluster per test run.

``tests/tools/install.sh`` installs the package when ``/usr/lib/postgresql/*/bin/initdb`` is
missing. The session fixture :func:`postgres` runs ``initdb`` (as the ``postgres`` user when the
tests run as root: PostgreSQL refuses to run as root) into a temporary folder, starts the server
with ``pg_ctl`` on a free 127.0.0.1 port (trust authentication; its socket in the same folder), and
stops it by ``pg_ctl`` at the end (by the PID in ``postmaster.pid`` if that fails). Each test makes
a database of its own (:meth:`Postgres.database`).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    """A throwaway PostgreSQL cluster on a free loopback port."""

    def __init__(self, folder: Path) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise FileNotFoundError("PostgreSQL is not installed (run tests/tools/install.sh)")
        self.bin = Path(found[-1]).parent
        self.folder = folder
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        folder.mkdir(parents=True, exist_ok=True)
        if self.as_postgres:
            folder.chmod(0o755)
            shutil.chown(folder, "postgres")
        self._run(f"{self.bin}/initdb -D {folder}/data -A trust -U tester --no-sync")
        self.start()

    def _run(self, command: str) -> None:
        cmd = ["su", "postgres", "-c", command] if self.as_postgres else ["sh", "-c", command]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            log = self.folder / "log"
            raise RuntimeError(
                f"{command} failed: {done.stderr.strip()}\n{log.read_text() if log.exists() else ''}"
            )

    def start(self) -> None:
        self._run(
            f"{self.bin}/pg_ctl -D {self.folder}/data -l {self.folder}/log -w -o "
            f"'-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off' start"
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected); kill it if that fails."""
        try:
            self._run(f"{self.bin}/pg_ctl -D {self.folder}/data -m fast -w stop")
        except RuntimeError:
            pid_file = self.folder / "data" / "postmaster.pid"
            if pid_file.exists():
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://tester{secret}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new, empty database; returns its name."""
        name = f"t_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def query(self, database: str, sql: str, params: list[object] | None = None) -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    folder = Path(tempfile.mkdtemp(prefix="pitstop-pg-"))
    folder.chmod(0o755)  # the postgres user goes through it when the tests run as root
    server = Postgres(folder / "cluster")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
