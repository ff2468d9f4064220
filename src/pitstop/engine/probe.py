"""The probe: a task pitstop runs on every executor of a cluster, and how the driver runs it.

:func:`probe` runs on an executor and reports what it sees: its user, Python and versions, the
dependencies it cannot import, the home's token (the driver wrote it; the probe writes one back),
and for each File folder a job reads, whether the folder holds the files the driver lists there.
It catches what it can (a missing folder, a permission error) and reports it as data; what it
cannot catch (pitstop missing, Python that does not start) fails its task.

:func:`run_probe` runs it once on each executor (protocol):

1. List the executors, with their hosts, from Spark's status store.
2. One task per executor, pinned to it by locality (``executor_<host>_<id>``, where Spark keeps a
   task for ``spark.locality.wait``, 3 s by default, and its retries too): a task that fails on
   one executor is not passed on to a good one, as it would be with tasks that go anywhere (one
   result per task: one good executor answered for all).
3. Read every attempt of the probe's tasks from the status store: an attempt that failed names
   its executor and why, even when a retry succeeded.
4. An executor that ran none of the tasks (its task went elsewhere after the locality wait: it
   was busy) is probed again, in up to :data:`ROUNDS` rounds; after them, it is named.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import socket
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pitstop
from pitstop.errors import PitstopError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
ROUNDS = 3
EXECUTOR_DEPENDENCIES = ("pyarrow", "confluent_kafka")
SHOWN = 3  # names of files shown in a message


class ClusterError(PitstopError):
    """The cluster cannot run pitstop's jobs as it is; the message says what to change."""


@dataclass(frozen=True)
class Place:
    """An executor as the scheduler knows it: the probe's task is pinned to ``executor_<host>_<id>``."""

    id: str
    host: str

    def __str__(self) -> str:
        return f"executor {self.id} on {self.host}"


@dataclass(frozen=True)
class Report:
    """What the probe saw on one executor."""

    place: Place
    seen: dict[str, Any]


@dataclass(frozen=True)
class Attempt:
    """One attempt of a probe task, as Spark's status store keeps it."""

    index: int
    place: Place
    status: str  # SUCCESS, FAILED, KILLED, RUNNING
    error: str


# -- on the driver -----------------------------------------------------------------------------------
def places(sc: SparkContext) -> tuple[Place, ...]:
    """The active executors (step 1), from the status store (the web UI need not run)."""
    listed = sc._jsc.sc().statusStore().executorList(True)  # noqa: SLF001 - no public listing
    out = []
    for i in range(listed.size()):
        e = listed.apply(i)
        if e.id() != "driver":
            host = str(e.hostPort())
            out.append(Place(str(e.id()), host.rsplit(":", 1)[0] if ":" in host else host))
    return tuple(out)


def run_probe(spark: SparkSession, args: dict[str, Any], log_file: Path) -> list[Report]:
    """Steps 1-4: one report per executor. ClusterError naming the executor that failed."""
    sc = spark.sparkContext
    done: dict[str, Report] = {}
    for _ in range(ROUNDS):
        todo = [p for p in places(sc) if p.id not in done]  # Step 1.
        if not todo:
            break
        for report in _round(spark, todo, args, log_file):
            done.setdefault(report.place.id, report)
    left = [p for p in places(sc) if p.id not in done]
    if left:
        raise ClusterError(
            f"{', '.join(map(str, left))} ran none of the probe tasks pinned to it in {ROUNDS} rounds "
            f"(its cores stayed busy): pitstop cannot tell whether it can run the jobs; try again "
            f"when it is less busy. Spark's log: {log_file}"
        )
    return list(done.values())


def _round(spark: SparkSession, todo: list[Place], args: dict[str, Any], log_file: Path) -> list[Report]:
    """Steps 2-3 for the executors ``todo``."""
    sc = spark.sparkContext
    group = f"pitstop-probe-{uuid.uuid4().hex[:12]}"
    before = sc.getLocalProperty("spark.jobGroup.id")
    sc.setLocalProperty("spark.jobGroup.id", group)
    text = json.dumps(args)
    failure: Exception | None = None
    results: list[str] = []
    try:
        # Step 2. A task per executor, pinned to it.
        results = _pinned(sc, todo).map(lambda _p: probe(text)).collect()
    except Exception as exc:  # Py4JJavaError: the failed attempts below say where and why
        failure = exc
    finally:
        sc.setLocalProperty("spark.jobGroup.id", before)  # type: ignore[arg-type] # None removes it
    # Step 3. Every attempt, failed ones first.
    attempts = _attempts(sc, group, todo)
    failed = [a for a in attempts if a.status == "FAILED"]
    if failed:
        raise ClusterError(failure_text(failed[0].place, failed[0].error, log_file)) from failure
    if failure is not None:  # no attempt recorded (the status store did not answer)
        raise ClusterError(failure_text(None, str(failure), log_file)) from failure
    ran = {a.index: a.place for a in attempts if a.status == "SUCCESS"}
    pairs = enumerate(zip(todo, results, strict=True))  # collect keeps the partitions' order
    return [Report(ran.get(i, place), json.loads(r)) for i, (place, r) in pairs]


def _pinned(sc: SparkContext, todo: list[Place]) -> Any:
    """An RDD with one partition per executor, each preferring that executor (makeRDD with
    locations, which pyspark does not offer: built through the JVM)."""
    import pickle

    from pyspark.rdd import RDD
    from pyspark.serializers import CPickleSerializer

    jvm = sc._jvm  # noqa: SLF001
    assert jvm is not None
    pairs = [
        jvm.scala.Tuple2(bytearray(pickle.dumps(p.id)), jvm.PythonUtils.toSeq([f"executor_{p.host}_{p.id}"]))
        for p in todo
    ]
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
    jrdd = sc._jsc.sc().makeRDD(jvm.PythonUtils.toSeq(pairs), tag)  # noqa: SLF001
    return RDD(jrdd.toJavaRDD(), sc, CPickleSerializer())


def _attempts(sc: SparkContext, group: str, todo: list[Place]) -> list[Attempt]:
    """The probe's task attempts from the status store, once its listener has caught up."""
    jsc = sc._jsc.sc()  # noqa: SLF001
    try:
        jsc.listenerBus().waitUntilEmpty(10_000)
        store = jsc.statusStore()
        out = []
        tracker = sc.statusTracker()
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                tasks = store.taskList(stage, 0, 10 * len(todo) + 10)
                for i in range(tasks.size()):
                    t = tasks.apply(i)
                    error = t.errorMessage()
                    place = Place(str(t.executorId()), str(t.host()))
                    text = str(error.get()) if error.isDefined() else ""
                    out.append(Attempt(int(t.index()), place, str(t.status()), text))
        return out
    except Exception:  # a Spark without these (private) APIs: the job's own failure tells
        log.warning("the probe's task attempts could not be read from Spark", exc_info=True)
        return []


def failure_text(place: Place | None, error: str, log_file: Path) -> str:
    """One sentence for a probe task that failed on ``place`` (None: somewhere) with ``error``."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    where = str(place) if place is not None else "an executor"
    if "No module named" in error:
        missing = error.split("No module named", 1)[1].split("\n", 1)[0].strip(" '\"")
        return (
            f"{where} cannot import '{missing}': install pitstop (the same version, with its "
            f"dependencies) on every worker, reachable as {python} (or set PYSPARK_PYTHON to the "
            "workers' interpreter that has it)"
        )
    program = re.search(r'Cannot run program "([^"]*)"', error)
    if program is not None:
        if "error=13" in error or "Permission denied" in error:
            return (
                f"{where} may not run {program.group(1)}: permission denied to the user its Spark "
                "worker runs as (errno 13); make the interpreter, and every folder above it, "
                "readable and executable by that user, or set PYSPARK_PYTHON to an interpreter it "
                "may run"
            )
        return (
            f"{where} cannot start Python as {program.group(1)}: install the same Python with "
            "pitstop at that path on every worker, or set PYSPARK_PYTHON to the workers' interpreter"
        )
    denied = re.search(r"PermissionError: \[Errno 13\] [^:\n]*: '([^'\n]*)'", error)
    if denied is not None:
        return (
            f"{where} may not read {denied.group(1)}: permission denied to the user its Spark worker "
            "runs as (errno 13); let that user read it (the same uid on every machine, or a group "
            "they share)"
        )
    return f"a probe task on {where} failed: {_last_line(error)}; Spark's log: {log_file}"


def _last_line(error: str) -> str:
    """The Python exception's own line (a traceback's last), else the first line."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    python = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    if python:
        after = [line for line in lines[python[-1] + 1 :] if not line.startswith(("File ", "at ", "^"))]
        errors = [line for line in after if re.match(r"^[A-Za-z_.]+(Error|Exception)\b", line)]
        if errors:
            return errors[-1]
    return lines[0]


# -- on an executor ----------------------------------------------------------------------------------
def probe(args_json: str) -> str:
    """Runs on an executor: what it sees (user, versions, dependencies, the home's token, folders).

    ``args``: ``token`` and ``home`` (a folder of the home holding the driver's token), or
    ``folders``: mapping -> {"path", "files": [[name, size], ...] as the driver lists them}."""
    args = json.loads(args_json)
    report: dict[str, Any] = {
        "host": socket.gethostname(),
        "user": _user(),
        "python": sys.executable,
        "pitstop": pitstop.__version__,
        "missing": [m for m in EXECUTOR_DEPENDENCIES if importlib.util.find_spec(m) is None],
        "folders": {},
        "home": {"state": "same", "detail": ""},
        "wrote": "",
    }
    if args.get("token") is not None:
        report["home"], report["wrote"] = _home(Path(args["home"]), args["token"])
    for name, folder in args.get("folders", {}).items():
        report["folders"][name] = compare_folder(folder["path"], folder["files"])
    return json.dumps(report)


def _home(folder: Path, token: str) -> tuple[dict[str, str], str]:
    try:
        seen = (folder / "driver").read_text()
    except PermissionError as exc:
        return {"state": "denied", "detail": f"{exc.filename}: {exc.strerror}"}, ""
    except OSError as exc:
        return {"state": "absent", "detail": str(exc.strerror or exc)}, ""
    if seen != token:
        return {"state": "other", "detail": "a different folder of the same name"}, ""
    name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        (folder / name).write_text("seen")
    except PermissionError as exc:
        return {"state": "denied", "detail": f"{exc.filename}: {exc.strerror}"}, ""
    except OSError as exc:
        return {"state": "unwritable", "detail": str(exc.strerror or exc)}, ""
    return {"state": "same", "detail": ""}, name


def compare_folder(path: str, files: list[list[Any]]) -> dict[str, Any]:
    """What this machine sees in ``path`` against the driver's ``files`` ([name, size]): ``same``,
    ``absent``, ``denied`` (a permission error: the folder or one of the files), or ``other``
    (names missing here, or of another size). Files only here do no harm: the driver plans the
    files it lists."""
    try:
        with os.scandir(path) as entries:
            here = {e.name: e.stat().st_size for e in entries if e.is_file() and e.name[0] not in "._"}
    except PermissionError as exc:
        return {"state": "denied", "detail": f"{exc.filename or path}: {exc.strerror}"}
    except OSError as exc:
        return {"state": "absent", "detail": str(exc.strerror or exc)}
    missing = [str(n) for n, _ in files if n not in here]
    sizes = [[str(n), int(s), here[n]] for n, s in files if n in here and here[n] != s]
    if missing or sizes:
        return {"state": "other", "missing": missing, "sizes": sizes, "count": len(files)}
    unreadable = [str(n) for n, _ in files if not os.access(os.path.join(path, n), os.R_OK)]
    if unreadable:
        return {"state": "denied", "detail": f"{os.path.join(path, unreadable[0])}: Permission denied"}
    return {"state": "same"}


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid()) if hasattr(os, "getuid") else "?"
