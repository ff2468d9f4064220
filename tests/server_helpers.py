"""A pitstop server in the test process (real sockets, real clients), and what tests do with it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pitstop.engine.manager import Manager
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
