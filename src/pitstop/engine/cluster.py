"""Running on a Spark cluster: what pitstop checks when it connects, and where jobs run.

On a cluster (``--master spark://host:7077``), Spark's executors are other processes on other
machines, and some of pitstop's code runs in them. Where each part of pitstop runs decides what a
cluster needs:

- **the driver** (the pitstop process, on one machine): the catalog, the sinks (every sink gets
  its micro-batches in ``foreachBatch``, on the driver), the sources' planning (``latestOffset``,
  ``partitions`` and ``commit`` of pitstop's Python sources run in a Python process the driver
  starts), so the discovery logs, fences and their file locks (``<run>/sources/``), the checkpoint
  and commit logs pitstop reads, the snapshot files it writes (state read by Spark is collected to
  the driver and written there), and the native copy's hard links. None of these needs more than
  the driver's own disk;
- **the executors**: the sources' ``read`` (File sources read their files there, and write the
  rejects of malformed records into the run folder), the state stores (Spark writes every
  stateful operator's checkpoint from the executors), the state reader of a snapshot and the seeds
  of a restore (read from the snapshot folder). So the home (checkpoints, runs, snapshots) and
  every File source folder must be the same folder, at the same path, on the driver and every
  worker: a shared mount. The executors run pitstop's Python code, so pitstop and its
  dependencies must be installed on every worker, at the same interpreter path as the driver's.

What can be checked is checked when Spark starts, before any job runs (:func:`connect`):

1. Before Spark starts: the master answers at its address (:func:`reach_master`), within
   :data:`MASTER_WAIT_S`; Spark itself would try for a minute and more, then fail with a trace.
2. Wait for the first executor to register (``PITSTOP_EXECUTOR_WAIT_S``); none means no worker
   can give ``spark.executor.memory`` and a core, or the master gave up on the application.
3. Wait until the number of executors holds still, then size shuffle partitions to their cores
   (unless ``PITSTOP_SHUFFLE_PARTITIONS`` says otherwise).
4. Run the probe on every executor (:mod:`pitstop.engine.probe`: one task pinned to each, a
   failed attempt names its executor): it imports pitstop (the task fails if the workers lack it),
   reports its versions, reads a token the driver wrote into the home, and writes one back, which
   the driver reads: a home the workers cannot see, see elsewhere, or may not write, is refused
   here, with what to change, instead of half-way through a snapshot.

When a job starts, the File folders it reads (its sources, and a join's static tables) are probed
the same way, by content (:func:`check_folders`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pitstop
from pitstop.engine.probe import SHOWN, ClusterError, run_probe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pitstop.settings import Settings

log = logging.getLogger(__name__)
PROBE_DIR = ".cluster-probe"
SETTLE_S = 3.0  # executors of one application register within a few seconds of each other
SETTLE_MAX_S = 20.0
MASTER_WAIT_S = 10.0  # to open a connection to the master; refused is at once
FILES_COMPARED = 2000  # of a File folder's files, by name and size


@dataclass(frozen=True)
class Executor:
    id: str
    host_port: str
    cores: int


@dataclass(frozen=True)
class Placement:
    """Where this process's jobs run: the master, the executors and Spark's web UI."""

    master: str
    executors: tuple[Executor, ...]  # empty in local mode: tasks run in the driver
    ui: str | None
    local_cores: int = 0

    def where(self) -> str:
        """One line for SHOW JOBS."""
        if not self.executors and self.local_cores:
            return f"{self.master} (in the pitstop process, {_cores(self.local_cores)})"
        cores = sum(e.cores for e in self.executors)
        return f"{self.master} ({len(self.executors)} executor(s), {_cores(cores)})"

    def executor_text(self) -> str:
        if not self.executors:
            return "none: tasks run in the pitstop process" if self.local_cores else "none registered"
        return ", ".join(f"{e.id} at {e.host_port} ({_cores(e.cores)})" for e in self.executors)

    def ui_text(self) -> str:
        return self.ui or "off (PITSTOP_SPARK_UI=on starts it in local mode)"


def placement(spark: SparkSession, settings: Settings) -> Placement:
    """Where jobs run now (executors as Spark's UI lists them; a lost one is gone from the list)."""
    sc = spark.sparkContext
    ui = sc.uiWebUrl
    if settings.local:
        return Placement(settings.master, (), ui, sc.defaultParallelism)
    return Placement(settings.master, executors(spark), ui)


def executors(spark: SparkSession) -> tuple[Executor, ...]:
    """The active executors, from the driver's monitoring API (the web UI is on for a cluster);
    without it, their ids from the scheduler."""
    sc = spark.sparkContext
    if sc.uiWebUrl:
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/executors"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                listed = json.load(resp)
            return tuple(
                Executor(str(e["id"]), str(e["hostPort"]), int(e.get("totalCores", 0)))
                for e in listed
                if e.get("id") != "driver" and e.get("isActive", True)
            )
        except (OSError, ValueError, KeyError):
            log.debug("Spark's monitoring API did not answer at %s", url, exc_info=True)
    ids = sc._jsc.sc().getExecutorIds()  # noqa: SLF001 - no public list of executor ids
    return tuple(Executor(str(ids.apply(i)), "?", 0) for i in range(ids.size()))


# -- connecting --------------------------------------------------------------------------------------
def reach_master(master: str, wait_s: float = MASTER_WAIT_S) -> None:
    """Step 1: ClusterError unless a standalone master (``spark://h1:7077[,h2:7077]``) accepts a
    connection at one of its addresses within ``wait_s``. Other masters (YARN, Kubernetes) are
    left to Spark."""
    if not master.startswith("spark://"):
        return
    tried = []
    for address in master[len("spark://") :].split(","):
        try:
            parts = urlsplit(f"//{address.strip()}")
            host, port = parts.hostname, parts.port or 7077
        except ValueError as exc:
            raise ClusterError(
                f"the Spark master URL {master} is not spark://host:port ({exc}); correct --master "
                "or PITSTOP_SPARK_MASTER"
            ) from exc
        if not host:
            raise ClusterError(
                f"the Spark master URL {master} names no host: write spark://host:7077 in --master "
                "or PITSTOP_SPARK_MASTER"
            )
        try:
            with socket.create_connection((host, port), timeout=wait_s):
                return
        except OSError as exc:
            tried.append(f"{host}:{port}: {_reason(exc)}")
    raise ClusterError(
        f"cannot reach the Spark master {master} ({'; '.join(tried)}): start the master "
        "($SPARK_HOME/sbin/start-master.sh) or correct --master / PITSTOP_SPARK_MASTER, then try again"
    )


def _reason(exc: OSError) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "no answer"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror})"
    return str(exc.strerror or exc).lower()


def gave_up(settings: Settings) -> ClusterError:
    """Spark stopped its context: the master (which took a connection) never registered the
    application, or stopped answering."""
    return ClusterError(
        f"the Spark master {settings.master} did not register pitstop's application (Spark gave up "
        "on it and stopped): check that a Spark master of the same release as pitstop's pyspark "
        f"listens there and that its log shows no error; Spark's log: {_spark_log(settings)}"
    )


def connect(spark: SparkSession, settings: Settings) -> int:
    """Steps 2-4 of the module's protocol; the cluster's cores. ClusterError if it cannot work."""
    # Step 2. The first executor.
    deadline = time.monotonic() + settings.executor_wait_s
    while True:
        if spark.sparkContext._jsc.sc().isStopped():  # noqa: SLF001 - Spark gave up on the master
            raise gave_up(settings)
        if executors(spark):
            break
        if time.monotonic() > deadline:
            raise ClusterError(
                f"no executor registered with {settings.master} within {settings.executor_wait_s:g} s: "
                f"check that the master runs and has ALIVE workers, and that a worker has "
                f"{settings.executor_memory} of memory (PITSTOP_EXECUTOR_MEMORY) and a core free; "
                f"the master's web UI (port 8080 by default) shows both. Spark's log: "
                f"{settings.home / 'logs' / 'spark.log'}"
            )
        time.sleep(0.5)  # registration raises no event pitstop can wait on
    # Step 3. Executors that hold still; their cores.
    found, since, start = executors(spark), time.monotonic(), time.monotonic()
    while time.monotonic() - since < SETTLE_S and time.monotonic() - start < SETTLE_MAX_S:
        time.sleep(0.5)
        now = executors(spark)
        if now != found:
            found, since = now, time.monotonic()
    cores = sum(e.cores for e in found) or spark.sparkContext.defaultParallelism
    if settings.shuffle_partitions is None:
        spark.conf.set("spark.sql.shuffle.partitions", str(cores))
    log.info(
        "on %s: %d executor(s), %d cores: %s",
        settings.master,
        len(found),
        cores,
        ", ".join(e.host_port for e in found),
    )
    # Step 4. The probe, on every executor.
    check_home(spark, settings)
    return cores


def check_home(spark: SparkSession, settings: Settings) -> None:
    """Step 4: every executor reads the token the driver wrote into the home and writes one back."""
    home = settings.home
    folder = home / PROBE_DIR / uuid.uuid4().hex
    folder.mkdir(parents=True)
    try:
        token = uuid.uuid4().hex
        (folder / "driver").write_text(token)
        reports = run_probe(spark, {"home": str(folder), "token": token}, _spark_log(settings))
        for r in reports:
            seen = r.seen
            if seen["pitstop"] != pitstop.__version__:
                raise ClusterError(
                    f"{r.place} runs pitstop {seen['pitstop']} from {seen['python']}, the driver "
                    f"{pitstop.__version__}: install the same pitstop on every worker"
                )
            if seen["missing"]:
                raise ClusterError(
                    f"{r.place} cannot import {', '.join(seen['missing'])} with {seen['python']}: "
                    "install pitstop with its dependencies on every worker, at the driver's "
                    f"interpreter path ({sys.executable})"
                )
            state, detail = seen["home"]["state"], seen["home"]["detail"]
            if state == "denied":
                raise ClusterError(
                    f"{r.place} runs as user '{seen['user']}', who may not read and write the "
                    f"home {home} ({detail}): checkpoints, runs and snapshots are written there by "
                    "the executors; give that user read and write access to the home (the same uid "
                    "on every machine, or a group they share)"
                )
            if state != "same":
                raise ClusterError(
                    f"the home {home} is not the same folder on {r.place} ({_said(state, detail)}): "
                    "checkpoints, runs and snapshots are written there by the executors; put the "
                    "home on a mount every worker sees at the same path (NFS or another shared "
                    "file system), or run in local mode"
                )
        written = {p.name for p in folder.iterdir() if p.name != "driver"}
        lost = [r for r in reports if r.seen["wrote"] not in written]
        if lost:
            raise ClusterError(
                f"files that {', '.join(str(r.place) for r in lost)} wrote into the home {home} do "
                "not reach the driver: the home must be one shared folder, not a copy on each machine"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _said(state: str, detail: str) -> str:
    return {
        "absent": f"not found there: {detail}",
        "other": detail,
        "unwritable": f"not writable there: {detail}",
    }.get(state, detail)


@dataclass(frozen=True)
class Folder:
    """A File folder a job reads: as a stream (``source``) or whole, as a join's static table."""

    mapping: str
    path: Path
    source: bool = True

    def what(self) -> str:
        how = "" if self.source else ", which the job joins as a table,"
        return f"mapping '{self.mapping}'{how} reads {self.path}"


def check_folders(spark: SparkSession, settings: Settings, job: str, folders: list[Folder]) -> None:
    """Refuse to start ``job`` when an executor does not see a File folder it reads as the driver
    does: absent there, not readable by the executor's user, or holding other files (a copy, or
    another folder at the same path). Compared: the names and sizes of the files the driver lists
    (up to :data:`FILES_COMPARED` of them, spread over the listing), not a token written into the
    folder, since pitstop only reads a source folder (it may be read-only, and a token would be a
    file its other readers see). An empty folder has no file to compare: it is only checked to
    exist there."""
    if not folders:
        return
    listed = {f.mapping: _files(f.path) for f in folders}
    args = {"folders": {f.mapping: {"path": str(f.path), "files": listed[f.mapping]} for f in folders}}
    for r in run_probe(spark, args, _spark_log(settings)):
        for f in folders:
            seen = r.seen["folders"][f.mapping]
            if seen["state"] == "other":
                seen = _still_differs(f.path, seen)
            if seen["state"] == "same":
                continue
            where = f"job '{job}': {f.what()}"
            if seen["state"] == "denied":
                raise ClusterError(
                    f"{where}, which {r.place} may not read as user '{r.seen['user']}' ({seen['detail']}): "
                    "let that user read the folder and its files (the same uid on every machine, or a "
                    "group they share)"
                )
            shared = (
                "File folders a job reads must be on a mount every worker sees at the same path (the "
                "executors read the files)"
            )
            if seen["state"] == "absent":
                raise ClusterError(f"{where}, which {r.place} cannot see ({seen['detail']}); {shared}")
            raise ClusterError(
                f"{where}, where {r.place} sees other files than the driver: {_diff(seen)}; "
                f"{shared}, not a copy on each machine"
            )


def _files(folder: Path) -> list[list[Any]]:
    """The data files the driver sees in ``folder`` (as a File mapping reads them: not hidden,
    not ``_``-prefixed), as [name, size], at most FILES_COMPARED spread over the sorted names."""
    try:
        with os.scandir(folder) as entries:
            files = sorted(
                [e.name, e.stat().st_size] for e in entries if e.is_file() and e.name[0] not in "._"
            )
    except OSError:
        return []  # the driver's own start reports it
    if len(files) > FILES_COMPARED:
        step = len(files) / FILES_COMPARED
        files = [files[int(i * step)] for i in range(FILES_COMPARED)]
    return files


def _still_differs(folder: Path, seen: dict[str, Any]) -> dict[str, Any]:
    """The differences the probe found, less those gone on the driver meanwhile (a file moved
    away or written to between the driver's listing and the executor's)."""
    now = {name: size for name, size in _files(folder)}
    missing = [n for n in seen["missing"] if n in now]
    sizes = [s for s in seen["sizes"] if now.get(s[0]) == s[1]]
    return {**seen, "missing": missing, "sizes": sizes} if missing or sizes else {"state": "same"}


def _diff(seen: dict[str, Any]) -> str:
    parts = []
    if seen["missing"]:
        names = ", ".join(seen["missing"][:SHOWN]) + (", ..." if len(seen["missing"]) > SHOWN else "")
        verb = "is" if len(seen["missing"]) == 1 else "are"
        parts.append(
            f"{len(seen['missing'])} of the driver's {seen['count']} files {verb} not there ({names})"
        )
    if seen["sizes"]:
        shown = ", ".join(f"{n}: {a:,} bytes on the driver, {b:,} there" for n, a, b in seen["sizes"][:SHOWN])
        verb = "has" if len(seen["sizes"]) == 1 else "have"
        parts.append(f"{len(seen['sizes'])} {verb} another size ({shown})")
    return "; ".join(parts)


def _spark_log(settings: Settings) -> Path:
    return settings.home / "logs" / "spark.log"


def _cores(n: int) -> str:
    return f"{n} core" if n == 1 else f"{n} cores"
