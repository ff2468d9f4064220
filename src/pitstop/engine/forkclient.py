"""The client of :mod:`pitstop.engine.forkserver`: what Spark runs, through pitstop's worker script,
as ``pythonExec -m pyspark.sql.streaming.python_streaming_source_runner``.

It runs as ``python -I -S forkclient.py -m <module> [args]`` (a bare interpreter starts in ~10 ms;
this file uses the standard library only). It asks the fork server named by
``PITSTOP_FORKSERVER`` for a warm child that takes over this process's environment, folder and
standard streams, relays SIGTERM to it, and exits with its exit code. Without a server to answer,
it execs ``PITSTOP_PYTHON`` (the interpreter) with the same arguments: the module starts cold.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys


def _cold(args: list[str]) -> None:
    python = os.environ["PITSTOP_PYTHON"]
    os.execv(python, [python, *args])


def _int(conn: socket.socket) -> int | None:
    data = b""
    while len(data) < 4:
        chunk = conn.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    value: int = struct.unpack("!i", data)[0]
    return value


def main(args: list[str]) -> None:
    if len(args) < 2 or args[0] != "-m":
        _cold(args)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.environ["PITSTOP_FORKSERVER"])
        request = {"module": args[1], "args": args[2:], "env": dict(os.environ), "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        pid = _int(conn)
    except (OSError, KeyError):
        pid = None
    if pid is None:  # no server, or it refused: start cold (nothing has run yet)
        conn.close()
        _cold(args)
        return
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGTERM))
    signal.signal(signal.SIGINT, lambda *_: os.kill(pid, signal.SIGINT))
    code = _int(conn)
    sys.exit(1 if code is None else code & 0xFF if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv[1:])
