"""A Spark standalone cluster on 127.0.0.1 for tests and benchmarks: one master and N workers,
each a process of its own with its own work directory, started from the installed pyspark's
``bin/spark-class`` (the same release pitstop's driver runs), and torn down by PID.

    with SparkCluster(base=Path("/tmp/x"), port=17077, workers=2) as cluster:
        cluster.master_url        # spark://127.0.0.1:17077
        cluster.kill_worker(0)    # SIGKILL one worker's process group (its executor dies with it)

Ports: the master listens on ``port``, its web UI on ``port + 3``, worker ``i`` on ``port + 10 + i``
and its web UI on ``port + 20 + i`` (all on 127.0.0.1). ``python tests/tools/spark_cluster.py
BASE PORT`` starts one and waits for SIGTERM or Ctrl-C (for trying pitstop against it by hand).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

START_TIMEOUT_S = 120.0
HIDING = [
    "unshare", "--mount", "--propagation", "private",
    "sh", "-c", 'mount -t tmpfs pitstop-hidden "$0" && exec "$@"',
]  # fmt: skip


def can_hide() -> bool:
    """Whether this machine lets a process mount a tmpfs in a mount namespace of its own (root,
    or a container with CAP_SYS_ADMIN)."""
    try:
        done = subprocess.run([*HIDING, "/tmp", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkCluster:
    def __init__(
        self,
        base: Path,
        port: int = 17077,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        hide: Path | None = None,
    ) -> None:
        """``hide``: a folder the workers (and their executors) see empty: each worker runs in a
        mount namespace of its own with a tmpfs over it (:func:`can_hide` says whether this
        machine allows that), as on a machine where a folder is not shared."""
        self.hide = hide
        self.base = base
        self.port = port
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.procs: list[subprocess.Popen[bytes]] = []  # master first, then the workers
        self.master_url = f"spark://127.0.0.1:{port}"
        self.master_ui = f"http://127.0.0.1:{port + 3}"

    # -- processes ------------------------------------------------------------------------------
    def _env(self, name: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.base / name / "logs"),
            SPARK_DAEMON_MEMORY="256m",
            SPARK_NO_DAEMONIZE="1",
        )
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        return env

    def _spawn(self, name: str, args: list[str], hide: Path | None = None) -> subprocess.Popen[bytes]:
        folder = self.base / name
        folder.mkdir(parents=True, exist_ok=True)
        log = open(folder / "process.log", "ab")  # noqa: SIM115 - the child holds it
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        if hide is not None:
            hide.mkdir(parents=True, exist_ok=True)
            cmd = [*HIDING, str(hide), *cmd]
        proc = subprocess.Popen(
            cmd, env=self._env(name), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.procs.append(proc)
        return proc

    def start(self) -> SparkCluster:
        """Start the master, then the workers; return once every worker is ALIVE at the master."""
        try:
            self._spawn(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host", "127.0.0.1",
                    "--port", str(self.port),
                    "--webui-port", str(self.port + 3),
                ],
            )  # fmt: skip
            self._wait(lambda s: s is not None, "the master's web UI")
            for i in range(self.workers):
                self._spawn(
                    f"worker-{i}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1",
                        "--port", str(self.port + 10 + i),
                        "--webui-port", str(self.port + 20 + i),
                        "--cores", str(self.cores),
                        "--memory", self.memory,
                        "--work-dir", str(self.base / f"worker-{i}" / "work"),
                        self.master_url,
                    ],
                    self.hide,
                )  # fmt: skip
            self._wait(lambda s: s is not None and self.alive_workers(s) == self.workers, "the workers")
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> dict[str, Any] | None:
        """The master's JSON status page, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as resp:
                return dict(json.load(resp))
        except OSError:
            return None

    @staticmethod
    def alive_workers(status: dict[str, Any]) -> int:
        return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[1]} exited ({proc.returncode}); see {self.base}/*/")
            if ready(self.status()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not come up within {START_TIMEOUT_S:.0f} s; see {self.base}")
            time.sleep(0.5)  # the master offers no event to wait on: poll its status page

    def worker_pid(self, i: int) -> int:
        return self.procs[1 + i].pid

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` and its executor (its process group): a machine lost mid-stream."""
        proc = self.procs[1 + i]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def stop(self) -> None:
        """Kill every process this cluster started, by process group (workers take their
        executors with them), workers first."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        # An executor outlives its worker's SIGTERM for a moment; its process group is the
        # worker's, so make sure none is left.
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


if __name__ == "__main__":
    base, port = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 17077
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    with SparkCluster(base, port) as c:
        print(f"{c.master_url} (UI {c.master_ui}); pids {[p.pid for p in c.procs]}; SIGTERM stops it")
        sys.stdout.flush()
        while True:
            signal.pause()
