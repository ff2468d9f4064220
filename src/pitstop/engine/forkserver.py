"""A warm Python for the driver side of every streaming query's Python source.

For a Python data source, Spark starts one new Python process per streaming query on the driver
(``python -m pyspark.sql.streaming.python_streaming_source_runner``: ``initialOffset``,
``latestOffset``, ``partitions`` and ``commit`` run there). That process spends ~0.2 s importing
pyspark, numpy and pyarrow before the query's first offset (``python -X importtime``), and the
query waits: measured on pyspark 4.3.0, 1M events, a warm session, the first micro-batch of a query
over pitstop's File source began 0.63–0.76 s after ``start()``, over Spark's JSON source
0.30–0.44 s. Every job start and every restore paid it.

Spark's executors avoid the same cost with ``pyspark.daemon``, which forks workers from a warm
parent; the source runner is not started through it (``PythonWorkerFactory.createSimpleWorker``:
a plain ``ProcessBuilder`` of ``pythonExec -m module``). So pitstop does the same fork for that one
module, and nothing else:

- :func:`start` runs this module as a **fork server** beside the Spark driver: it imports the
  runner's modules and pitstop's sources once, then listens on a Unix socket in a private temp
  folder (created 0700; the socket appears only once it is ready, by rename).
- Spark's ``pythonExec`` is pitstop's worker script (``engine/session.py``), which hands
  ``-m pyspark.sql.streaming.python_streaming_source_runner`` to :mod:`pitstop.engine.forkclient`
  while ``PITSTOP_FORKSERVER`` names a live socket, and execs the interpreter for every other
  module (executors' daemon, planners) as before.
- The client sends its environment, folder, arguments and stdin/stdout/stderr (``SCM_RIGHTS``);
  the server forks a child that takes them over and runs the module as ``__main__``, as
  ``python -m`` would; the client relays SIGTERM to it and exits with its exit code. The runner
  connects back to the JVM itself and reports its own pid, which Spark uses to stop it.
- If the server is not there (not started yet, gone), the client execs the interpreter: a query
  then starts as it did before, only slower.

The server ends with the process that started it (it watches its parent) or with
:func:`stop`. Written here because no library does this: it is ``pyspark.daemon``'s fork, for a
module Spark does not route through the daemon.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MODULES = frozenset({"pyspark.sql.streaming.python_streaming_source_runner"})
"""What the fork server runs: the driver-side runner of Python streaming sources."""
ENV = "PITSTOP_FORKSERVER"
SOCKET = "fork.sock"
MAX_REQUEST = 1 << 20


@dataclass
class Server:
    """A running fork server: its process, and the socket the worker script is to use (it appears
    once the server is ready, ~0.3 s after the start; until then queries start without it)."""

    process: subprocess.Popen[bytes]
    path: str

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(Path(self.path).parent, ignore_errors=True)


# -- in the process that runs Spark ------------------------------------------------------------------
def start(log_file: IO[bytes]) -> Server:
    folder = Path(tempfile.mkdtemp(prefix="pitstop-fork-"))  # short: a socket path is ≤ 107 bytes
    path = folder / SOCKET
    process = subprocess.Popen(
        [sys.executable, "-m", "pitstop.engine.forkserver", str(path), str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=log_file,
        start_new_session=True,  # a ^C in the shell is for pitstop, which stops it
    )
    return Server(process, str(path))


# -- the fork server ---------------------------------------------------------------------------------
def serve(path: str, parent: int) -> None:
    for name in MODULES:
        __import__(name)
    import pitstop.connectors.registry  # noqa: F401  (the sources' modules, unpickled in the child)

    threading.Thread(target=_watch_parent, args=(parent, Path(path).parent), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{path}.{os.getpid()}"
    listener.bind(tmp)
    listener.listen(64)
    os.replace(tmp, path)  # ready
    while True:
        conn, _ = listener.accept()
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError) as exc:
            print(f"pitstop fork server: refused a request: {exc}", file=sys.stderr, flush=True)
            conn.close()
            continue
        if request.get("module") not in MODULES:  # the client starts it cold
            for fd in fds:  # the client's streams: held here, its reader would never see EOF
                os.close(fd)
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            _child(request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(struct.pack("!i", pid))
        except OSError:
            pass
        threading.Thread(target=_report_exit, args=(conn, pid), daemon=True).start()


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """One request: a JSON line, and the client's stdin, stdout and stderr."""
    data = b""
    fds: list[int] = []
    try:
        while not data.endswith(b"\n"):
            chunk, got, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
            fds += got
            if not chunk or len(data) > MAX_REQUEST:
                raise ValueError("an incomplete request")
            data += chunk
        if len(fds) != 3:
            raise ValueError(f"{len(fds)} file descriptors, not stdin, stdout and stderr")
        request = json.loads(data)
        if not isinstance(request, dict):
            raise ValueError("a request that is not an object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, fds


def _child(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become ``python -m <module> <args>`` with the client's environment,
    folder and standard streams, then exit with the module's exit code."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        sys.stdin = open(0, closefd=False)  # noqa: SIM115  (the process's own streams)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        module, args = str(request["module"]), request["args"]
        assert isinstance(args, list)
        sys.argv = [module, *map(str, args)]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _report_exit(conn: socket.socket, pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
    except OSError:
        pass
    finally:
        conn.close()


def _watch_parent(parent: int, folder: Path) -> None:
    """End with the process that started the server (killed, it could not stop it)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
