"""The fork server (engine/forkserver.py): a streaming query's Python source starts from a warm
process forked by it; anything else, or no server, starts cold as before; the server ends with the
process that started it. Real processes, real Unix and TCP sockets on loopback."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import run
from pitstop.engine import forkserver
from pitstop.engine.session import running_forkserver
from pitstop.manager import Manager

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

CLIENT = Path(forkserver.__file__).with_name("forkclient.py")
RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if parent_of(int(entry.name)) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError):
                pass  # gone meanwhile
    return found


def until(check: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    with open(tmp_path / "log", "ab") as log:
        started = forkserver.start(log)
    until(lambda: Path(started.path).is_socket(), "the fork server listens")
    yield started.path, started.process.pid
    started.stop()
    assert not alive(started.process.pid) and not Path(started.path).parent.exists()


def client(
    path: str, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, "PITSTOP_FORKSERVER": path, "PITSTOP_PYTHON": sys.executable, **(env or {})}
    return subprocess.run(
        [sys.executable, "-I", "-S", str(CLIENT), *args],
        input=stdin,
        capture_output=True,
        env=environ,
        timeout=60,
    )


def test_without_a_server_the_client_starts_the_module_cold(tmp_path: Path) -> None:
    done = client(str(tmp_path / "no.sock"), "-m", "json.tool", stdin=b'{"a": 1}')
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["{", '"a":', "1", "}"]


def test_the_server_runs_only_the_source_runner_and_another_module_starts_cold(
    server: tuple[str, int],
) -> None:
    path, pid = server
    done = client(path, "-m", "json.tool", stdin=b'{"b": 2}')
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["{", '"b":', "2", "}"]
    assert alive(pid) and children_of(pid) == []


def test_the_source_runner_is_forked_warm_and_speaks_to_the_jvm_side_itself(server: tuple[str, int]) -> None:
    """The JVM's side of Spark's handshake (PythonWorkerFactory.createSimpleWorker): a loopback
    listener, the secret, then the worker's pid, which Spark uses to stop it."""
    path, pid = server
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    env = {"PYTHON_WORKER_FACTORY_PORT": str(port), "PYTHON_WORKER_FACTORY_SECRET": "s3cret"}
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(CLIENT), "-m", RUNNER],
        env={**os.environ, "PITSTOP_FORKSERVER": path, "PITSTOP_PYTHON": sys.executable, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    listener.settimeout(30)
    conn, _ = listener.accept()
    with conn, conn.makefile("rwb") as stream:
        (length,) = struct.unpack("!i", stream.read(4))
        assert stream.read(length) == b"s3cret"
        stream.write(struct.pack("!i", 2) + b"ok")
        stream.flush()
        (worker,) = struct.unpack("!i", stream.read(4))
        assert parent_of(worker) == pid  # forked by the server, not started by the client
        assert worker != proc.pid and children_of(pid) == [worker]
    # The JVM closing the connection ends the runner, and the client with it.
    assert proc.wait(timeout=30) != 0
    until(lambda: children_of(pid) == [], "the runner ended")
    listener.close()


def test_the_server_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    code = (
        "import os, sys, time; from pitstop.engine import forkserver; "
        "s = forkserver.start(open(os.devnull, 'wb')); "
        "print(s.path, s.process.pid, flush=True); time.sleep(600)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert owner.stdout is not None
    path, pid = owner.stdout.readline().decode().split()
    until(lambda: Path(path).is_socket(), "the fork server listens")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    until(lambda: not alive(int(pid)), "the fork server ended")
    assert not Path(path).parent.exists()


@pytest.mark.spark
def test_a_jobs_source_starts_from_the_fork_server_and_ends_with_the_job(manager: Manager) -> None:
    run(
        manager,
        "CREATE MAPPING clicks (id BIGINT, page VARCHAR, ts TIMESTAMP) TYPE Generator "
        "OPTIONS ('rate'='1000000000000', 'limit'='50'); CREATE MAPPING seen TYPE DuckDB; "
        "CREATE JOB fk AS INSERT INTO seen SELECT id, page FROM clicks; AWAIT JOB fk;",
    )
    server = running_forkserver()
    assert server is not None and os.environ[forkserver.ENV] == server.path
    pid = server.process.pid
    assert manager.catalog.query("SELECT count(*) FROM seen")[1] == [(50,)]
    assert len(children_of(pid)) == 1  # the job's one query's source runner, forked warm
    run(manager, "DROP JOB fk;")
    until(lambda: children_of(pid) == [], "the runner ended with its query")


# -- the JVM's class archive (engine/jvm.py, `pitstop prepare`) ----------------------------------
def test_the_class_archive_is_named_after_the_java_and_the_jars_it_was_made_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pitstop.engine import jvm

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(jvm.ENV, raising=False)
    path = jvm.archive_path()
    assert path is not None and path.parent == tmp_path / "cache" / "pitstop" / "jvm"
    assert jvm.options() == "" and jvm.submit_opts() is None  # not made yet: Spark starts as before
    path.parent.mkdir(parents=True)
    path.write_bytes(b"made")
    assert jvm.submit_opts() == f"-XX:SharedArchiveFile={path}"
    monkeypatch.setenv(jvm.ENV, "-Dx=1")  # the user's own options are kept
    assert jvm.submit_opts() == f"-Dx=1 -XX:SharedArchiveFile={path}"
    monkeypatch.setenv(jvm.ENV, f"-XX:ArchiveClassesAtExit={tmp_path}/new.jsa")  # being made: not mapped
    assert jvm.submit_opts() is None
    java = tmp_path / "jdk" / "bin" / "java"  # another Java: another archive
    java.parent.mkdir(parents=True)
    java.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    other = jvm.archive_path()
    assert other is not None and other != path


def test_prepare_without_java_says_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pitstop.prepare import prepare

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(RuntimeError, match=r"no `java` found \(JAVA_HOME or the PATH\): Spark needs Java 17"):
        prepare()


@pytest.mark.spark
def test_spark_s_jvm_maps_the_class_archive_when_one_was_made(manager: Manager) -> None:
    """`make test` runs `pitstop prepare` before the suite: this process's JVM maps its archive.
    (Run without it, no archive exists and the JVM must map none.)"""
    from pitstop.engine import jvm

    path = jvm.archive_path()
    made = path is not None and path.is_file()
    spark = manager.spark()
    pid = spark.sparkContext._gateway.proc.pid  # noqa: SLF001 - the JVM spark-submit exec'd
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert (str(path) in maps) == made, (path, made)


def test_archives_made_for_a_pyspark_that_is_gone_are_removed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each virtual environment's archive is ~190 MB: `pitstop prepare` removes those whose jars'
    folder no longer exists, and keeps this one's, another live one's, and any without a record."""
    import json

    from pitstop.engine import jvm

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = jvm.cache_folder()
    folder.mkdir(parents=True)
    live_jars = tmp_path / "other-venv" / "jars"
    live_jars.mkdir(parents=True)
    made = {
        "gone": tmp_path / "removed-venv" / "jars",
        "other": live_jars,
        "ours": jvm.jars_folder(),
    }
    for name, jars in made.items():
        (folder / f"{name}.jsa").write_bytes(b"archive")
        (folder / f"{name}.json").write_text(json.dumps({"jars": str(jars)}))
    (folder / "unrecorded.jsa").write_bytes(b"archive")
    assert jvm.remove_stale() == [folder / "gone.jsa"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "other.jsa", "other.json", "ours.jsa", "ours.json", "unrecorded.jsa",
    ]  # fmt: skip
    path = folder / "new.jsa"
    path.write_bytes(b"archive")
    jvm.record_origin(path)
    assert json.loads((folder / "new.json").read_text()) == {"jars": str(jvm.jars_folder())}
