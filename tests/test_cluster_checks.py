"""What pitstop checks for a cluster, without one: the settings, and what the probe task reports
from the folders it is given (the probe runs on executors; here in this process, on real files).
The checks on a real standalone cluster are in test_cluster.py (make cluster-test)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pitstop
from pitstop.connectors.tables import TableReader
from pitstop.engine.cluster import (
    FILES_COMPARED,
    Executor,
    Placement,
    _diff,
    _files,
    _still_differs,
    reach_master,
)
from pitstop.engine.probe import ClusterError, Place, failure_text, probe
from pitstop.errors import PitstopError
from pitstop.settings import Settings, is_local


@pytest.mark.parametrize(
    ("master", "local"),
    [("local", True), ("local[2]", True), ("local[*]", True), ("local[2,4]", True)]
    + [("spark://h:7077", False), ("yarn", False), ("localhost", False)],
)
def test_local_masters_are_told_from_cluster_ones(master: str, local: bool) -> None:
    assert is_local(master) is local


def test_cluster_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PITSTOP_EXECUTOR_MEMORY", "512M")
    monkeypatch.setenv("PITSTOP_EXECUTOR_WAIT_S", "30")
    monkeypatch.setenv("PITSTOP_SPARK_UI", "on")
    monkeypatch.delenv("PITSTOP_SHUFFLE_PARTITIONS", raising=False)
    s = Settings.resolve(tmp_path, " spark://h:7077 ")
    assert (s.master, s.local, s.executor_memory, s.executor_wait_s, s.ui) == (
        "spark://h:7077",
        False,
        "512m",
        30,
        True,
    )
    assert s.shuffle_partitions is None  # the executors' cores, once they register
    monkeypatch.setenv("PITSTOP_SPARK_UI", "auto")
    assert Settings.resolve(tmp_path, "spark://h:7077").ui is True
    assert Settings.resolve(tmp_path, "local[2]").ui is False


@pytest.mark.parametrize(
    ("env", "value", "says"),
    [
        ("PITSTOP_EXECUTOR_MEMORY", "lots", "e.g. 512m or 2g"),
        ("PITSTOP_DRIVER_MEMORY", "2 GB", "e.g. 512m or 2g"),
        ("PITSTOP_EXECUTOR_WAIT_S", "0", "a whole number > 0"),
        ("PITSTOP_SPARK_UI", "maybe", "on, off or auto"),
        ("PITSTOP_SHUFFLE_PARTITIONS", "-1", "a whole number > 0"),
    ],
)
def test_a_wrong_cluster_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str, value: str, says: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(PitstopError, match=f"{env} is '{value}'; .*{says}"):
        Settings.resolve(tmp_path)


def _probe(args: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(probe(json.dumps(args))))


def test_the_probe_sees_the_drivers_token_and_writes_one_back(tmp_path: Path) -> None:
    (tmp_path / "driver").write_text("t0k3n")
    report = _probe({"home": str(tmp_path), "token": "t0k3n"})
    assert report["home"] == {"state": "same", "detail": ""}
    assert report["pitstop"] == pitstop.__version__
    assert report["missing"] == []
    assert report["user"] == pwd.getpwuid(os.geteuid()).pw_name
    assert (tmp_path / str(report["wrote"])).read_text() == "seen"


def test_the_probe_tells_a_home_that_is_missing_or_another_folder(tmp_path: Path) -> None:
    assert _probe({"home": str(tmp_path / "absent"), "token": "t"})["home"]["state"] == "absent"
    (tmp_path / "driver").write_text("another machine's token")
    report = _probe({"home": str(tmp_path), "token": "t"})
    assert report["home"] == {"state": "other", "detail": "a different folder of the same name"}
    assert report["wrote"] == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["driver"]


def _folders(**folders: Path) -> dict[str, Any]:
    """The probe's arguments for these folders, with the files the driver lists in each."""
    return {"folders": {name: {"path": str(path), "files": _files(path)} for name, path in folders.items()}}


def test_the_probe_compares_a_folder_by_the_files_the_driver_lists(tmp_path: Path) -> None:
    driver, worker = tmp_path / "driver", tmp_path / "worker"
    for folder in (driver, worker):
        folder.mkdir()
        (folder / "a.json").write_text('{"x": 1}\n')
        (folder / ".hidden").write_text("not data")
    (worker / "extra.json").write_text("{}\n")  # only on the worker: the driver plans its own files
    args = _folders(orders=driver)
    args["folders"]["orders"]["path"] = str(worker)  # the "worker" sees another folder there
    assert _probe(args)["folders"] == {"orders": {"state": "same"}}
    (driver / "b.json").write_text("{}\n")
    (driver / "a.json").write_text('{"x": 100}\n')
    args = _folders(orders=driver)
    args["folders"]["orders"]["path"] = str(worker)
    assert _probe(args)["folders"]["orders"] == {
        "state": "other",
        "missing": ["b.json"],
        "sizes": [["a.json", 11, 9]],
        "count": 2,
    }
    absent = _probe(_folders(clicks=tmp_path / "clicks"))["folders"]["clicks"]
    assert absent == {"state": "absent", "detail": "No such file or directory"}


def test_an_empty_folder_has_no_file_to_compare_and_a_large_one_is_sampled(tmp_path: Path) -> None:
    assert _files(tmp_path) == []
    assert _probe(_folders(empty=tmp_path))["folders"]["empty"] == {"state": "same"}
    for i in range(FILES_COMPARED * 2 + 1):
        (tmp_path / f"f{i:05d}.json").write_text("{}")
    sample = _files(tmp_path)
    assert len(sample) == FILES_COMPARED
    assert sample[0] == ["f00000.json", 2] and sample[1] == ["f00002.json", 2]


def test_a_file_moved_away_on_the_driver_meanwhile_is_no_difference(tmp_path: Path) -> None:
    """The driver lists, the executors list later: a file the driver no longer has (moved away
    once read, or written to since) is not held against the folder; one it still has is."""
    for name in ("a.json", "b.json", "c.json"):
        (tmp_path / name).write_text("{}\n")
    seen = {"state": "other", "missing": ["a.json", "b.json"], "sizes": [["c.json", 3, 1]], "count": 3}
    (tmp_path / "a.json").unlink()
    (tmp_path / "c.json").write_text('{"x": 1}\n')
    left = _still_differs(tmp_path, seen)
    assert left == {"state": "other", "missing": ["b.json"], "sizes": [], "count": 3}
    assert _diff(left) == "1 of the driver's 3 files is not there (b.json)"
    assert _diff(seen) == (
        "2 of the driver's 3 files are not there (a.json, b.json); "
        "1 has another size (c.json: 3 bytes on the driver, 1 there)"
    )
    (tmp_path / "b.json").unlink()
    assert _still_differs(tmp_path, seen) == {"state": "same"}


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may reach (pytest's own are 0700): for the probe as another user."""
    folder = Path(tempfile.mkdtemp(prefix="pitstop-perm-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _probe_as_nobody(args: dict[str, Any]) -> dict[str, Any]:
    """The probe in a process of its own, as the user 'nobody' (what an executor started by a
    worker of another user is); as this user when it is not root (then file modes bind it)."""
    cmd = [
        sys.executable,
        "-c",
        "import sys; from pitstop.engine.probe import probe; print(probe(sys.argv[1]))",
    ]
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = {**os.environ, "PYTHONPATH": str(Path(pitstop.__file__).parents[1])}
    done = subprocess.run([*cmd, json.dumps(args)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_probe_tells_a_permission_error_as_one_with_its_user_and_path(shared: Path) -> None:
    home, data = shared / "home", shared / "orders"
    home.mkdir(mode=0o700)
    (home / "driver").write_text("t")
    data.mkdir()
    (data / "a.json").write_text("{}\n")
    (data / "a.json").chmod(0o600)
    report = _probe_as_nobody({"home": str(home), "token": "t", **_folders(orders=data, locked=home)})
    assert report["user"] == ("nobody" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name)
    assert report["home"] == {"state": "denied", "detail": f"{home / 'driver'}: Permission denied"}
    assert report["folders"] == {
        "orders": {"state": "denied", "detail": f"{data / 'a.json'}: Permission denied"},
        "locked": {"state": "denied", "detail": f"{home}: Permission denied"},
    }
    home.chmod(0o755)  # readable, not writable by others
    report = _probe_as_nobody({"home": str(home), "token": "t"})
    assert report["home"]["state"] == "denied", report
    assert report["home"]["detail"].startswith(f"{home}/") and report["home"]["detail"].endswith(
        ": Permission denied"
    )
    assert report["wrote"] == ""


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            'java.io.IOException: Cannot run program "/opt/venv/bin/python": error=13, Permission denied',
            "executor 1 on 10.0.0.3 may not run /opt/venv/bin/python: permission denied to the user "
            "its Spark worker runs as (errno 13); make the interpreter, and every folder above it",
        ),
        (
            'java.io.IOException: Cannot run program "/opt/venv/bin/python": error=2, No such file',
            "executor 1 on 10.0.0.3 cannot start Python as /opt/venv/bin/python: install the same Python",
        ),
        (
            'PythonException: Traceback (most recent call last):\n  File "x.py", line 1\n'
            "ModuleNotFoundError: No module named 'pitstop'\n",
            "executor 1 on 10.0.0.3 cannot import 'pitstop': install pitstop (the same version",
        ),
        (
            'PythonException: Traceback (most recent call last):\n  File "x.py", line 1\n'
            "PermissionError: [Errno 13] Permission denied: '/opt/venv/lib/site.py'\n",
            "executor 1 on 10.0.0.3 may not read /opt/venv/lib/site.py: permission denied to the user "
            "its Spark worker runs as (errno 13)",
        ),
        (
            "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown "
            'from the Python worker: Traceback (most recent call last):\n  File "x.py", line 1\n'
            "    raise OSError(5, 'Input/output error')\nOSError: [Errno 5] Input/output error\n",
            "a probe task on executor 1 on 10.0.0.3 failed: OSError: [Errno 5] Input/output error; "
            "Spark's log: /h/logs/spark.log",
        ),
    ],
)
def test_a_failed_probe_attempt_is_told_as_what_it_is_naming_its_executor(error: str, says: str) -> None:
    assert failure_text(Place("1", "10.0.0.3"), error, Path("/h/logs/spark.log")).startswith(says)


def test_a_master_that_does_not_answer_is_one_sentence_before_spark_starts(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    with pytest.raises(ClusterError) as refused:
        reach_master(master)
    assert str(refused.value) == (
        f"cannot reach the Spark master {master} (127.0.0.1:{port}: connection refused): start the "
        "master ($SPARK_HOME/sbin/start-master.sh) or correct --master / PITSTOP_SPARK_MASTER, then try again"
    )
    with pytest.raises(ClusterError, match="names no host"):
        reach_master("spark://:7077")
    reach_master("yarn")  # left to Spark
    # As a user meets it: pitstop run against it says the sentence, and no traceback.
    env = {
        **os.environ,
        "PITSTOP_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(Path(pitstop.__file__).parents[1]),
    }
    env.pop("PITSTOP_SPARK_MASTER", None)
    script = """
        CREATE MAPPING n TYPE DuckDB;
        CREATE MAPPING g (id BIGINT) TYPE Generator;
        CREATE JOB j AS INSERT INTO n SELECT id FROM g;
        """
    done = subprocess.run(
        [sys.executable, "-m", "pitstop.cli", "--master", master, "run", "-"],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"cannot reach the Spark master {master}" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "py4j" not in (done.stdout + done.stderr).lower()


@pytest.fixture
def silent_master() -> Iterator[str]:
    """A spark:// address whose port takes connections and never answers (not a Spark master)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:  # closed: the test is over
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"spark://127.0.0.1:{listener.getsockname()[1]}"
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    thread.join(10)
    for conn in held:
        conn.close()


@pytest.mark.spark
def test_a_master_that_never_registers_the_application_is_one_sentence(
    silent_master: str, tmp_path: Path
) -> None:
    """Spark gives up on it after a minute and stops its context under the session being built:
    a Py4J trace of 100 lines before."""
    env = {
        **os.environ,
        "PITSTOP_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(Path(pitstop.__file__).parents[1]),
    }
    env.pop("PITSTOP_SPARK_MASTER", None)
    env["PYSPARK_SUBMIT_ARGS"] = "--conf spark.ui.enabled=false pyspark-shell"
    done = subprocess.run(
        [sys.executable, "-m", "pitstop.cli", "--master", silent_master, "run", "-"],
        input="CREATE MAPPING g (id BIGINT) TYPE Generator;\nCREATE MAPPING n TYPE DuckDB;\n"
        "CREATE JOB j AS INSERT INTO n SELECT id FROM g;\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the Spark master {silent_master} did not register pitstop's application" in done.stderr
    assert "Traceback" not in done.stderr and "py4j" not in done.stderr.lower(), done.stderr


def test_spark_giving_up_on_the_master_is_read_from_what_this_start_wrote_to_its_log(tmp_path: Path) -> None:
    """When Spark stops the context while PySpark still sets it up, PySpark raises a
    NullPointerException (SparkFiles with no SparkEnv) and stops what is left: no context to ask,
    so the reason is Spark's own line in spark.log (1 start in 4 under load gave the Py4J trace)."""
    from pitstop.engine.session import GAVE_UP, _gave_up_said

    killed = "ERROR StandaloneSchedulerBackend: Application has been killed. Reason:"
    log = tmp_path / "spark.log"
    log.write_text(f"26/11/27 19:53:58 {killed} {GAVE_UP}\n")
    start = log.stat().st_size  # an earlier start gave up; this one has said nothing yet
    assert not _gave_up_said(log, start)
    with log.open("a") as handle:
        handle.write("26/11/27 20:01:02 INFO StandaloneAppClient$ClientEndpoint: Connecting to master\n")
    assert not _gave_up_said(log, start)
    with log.open("a") as handle:
        handle.write(f"26/11/27 20:02:02 {killed} {GAVE_UP}\n")
    assert _gave_up_said(log, start)
    assert not _gave_up_said(tmp_path / "no-such.log", 0)


def test_a_static_tables_folder_that_is_gone_is_an_error_not_an_empty_table(tmp_path: Path) -> None:
    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("id", LongType())])
    reader = TableReader(schema, {"path": str(tmp_path), "format": "json", "mapping": "users"})
    assert list(reader.read(InputPartition(str(tmp_path)))) == []  # empty folder: an empty table
    (tmp_path / "u.json").write_text('{"id": 7}\n')
    (batch,) = reader.read(InputPartition(str(tmp_path)))
    assert batch.to_pylist() == [{"id": 7}]
    gone = tmp_path / "gone"
    with pytest.raises(PitstopError) as failed:
        list(reader.read(InputPartition(str(gone))))
    assert str(failed.value) == (
        f"mapping 'users', read as a table: its folder {gone} cannot be listed on {socket.gethostname()} "
        "(No such file or directory); create it (an empty folder is an empty table) or point the "
        "mapping's 'path' at the folder that holds its files, on storage every machine that runs the job sees"
    )


def test_placement_says_master_executors_and_ui() -> None:
    two = Placement(
        "spark://h:7077",
        (Executor("0", "10.0.0.2:4711", 1), Executor("1", "10.0.0.3:4712", 2)),
        "http://d:4040",
    )
    assert two.where() == "spark://h:7077 (2 executor(s), 3 cores)"
    assert two.executor_text() == "0 at 10.0.0.2:4711 (1 core), 1 at 10.0.0.3:4712 (2 cores)"
    assert two.ui_text() == "http://d:4040"
    local = Placement("local[2]", (), None, local_cores=2)
    assert local.where() == "local[2] (in the pitstop process, 2 cores)"
    assert local.executor_text() == "none: tasks run in the pitstop process"
    assert local.ui_text().startswith("off (PITSTOP_SPARK_UI=on")
