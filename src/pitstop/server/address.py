"""Where a running server of a home listens (``<home>/server.json``): what ``pitstop run``,
``shell`` and ``check`` read to go through the server. Kept apart from :mod:`pitstop.server.app`
so that reading it imports nothing of the server (app pulls in the wire and bulk layers: ~0.45 s
of imports, pandas among them, on every ``pitstop run``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

SERVER_FILE = "server.json"


@dataclass(frozen=True)
class ServerAddress:
    """Where a running server listens (what ``<home>/server.json`` holds)."""

    host: str
    port: int
    pid: int

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql://{host}:{self.port}/pitstop"


def running_server(home: Path) -> ServerAddress | None:
    """The server that holds ``home``, if one is running (its process is alive)."""
    path = home / SERVER_FILE
    try:
        data = json.loads(path.read_text())
        address = ServerAddress(str(data["host"]), int(data["port"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(address.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return address
