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

1. Wait for the first executor to register (``PITSTOP_EXECUTOR_WAIT_S``); none means no worker
   can give ``spark.executor.memory`` and a core, or the master is unreachable.
2. Wait until the number of executors holds still, then size shuffle partitions to their cores
   (unless ``PITSTOP_SHUFFLE_PARTITIONS`` says otherwise).
3. Run a probe task per core: it imports pitstop (the task fails if the workers lack it), reports
   its versions, reads a token the driver wrote into the home, and writes one back, which the
   driver reads: a home the workers cannot see, or see elsewhere, is refused here, with what to
   change, instead of half-way through a snapshot.

A job's File source folders are probed the same way when the job starts (:func:`check_folders`).
"""

from __future__ import annotations

import importlib.util
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

import pitstop
from pitstop.errors import PitstopError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pitstop.settings import Settings

log = logging.getLogger(__name__)
PROBE_DIR = ".cluster-probe"
SETTLE_S = 3.0  # executors of one application register within a few seconds of each other
SETTLE_MAX_S = 20.0
EXECUTOR_DEPENDENCIES = ("pyarrow", "confluent_kafka")


class ClusterError(PitstopError):
    """The cluster cannot run pitstop's jobs as it is; the message says what to change."""


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
def connect(spark: SparkSession, settings: Settings) -> int:
    """Steps 1-3 of the module's protocol; the cluster's cores. ClusterError if it cannot work."""
    # Step 1. The first executor.
    deadline = time.monotonic() + settings.executor_wait_s
    while not executors(spark):
        if time.monotonic() > deadline:
            raise ClusterError(
                f"no executor registered with {settings.master} within {settings.executor_wait_s:g} s: "
                f"check that the master runs and has ALIVE workers, and that a worker has "
                f"{settings.executor_memory} of memory (PITSTOP_EXECUTOR_MEMORY) and a core free; "
                f"the master's web UI (port 8080 by default) shows both. Spark's log: "
                f"{settings.home / 'logs' / 'spark.log'}"
            )
        time.sleep(0.5)  # registration raises no event pitstop can wait on
    # Step 2. Executors that hold still; their cores.
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
    # Step 3. The probe.
    check_home(spark, settings, max(cores, len(found)))
    return cores


def check_home(spark: SparkSession, settings: Settings, tasks: int) -> None:
    home = settings.home
    probe = home / PROBE_DIR / uuid.uuid4().hex
    probe.mkdir(parents=True)
    try:
        token = uuid.uuid4().hex
        (probe / "driver").write_text(token)
        reports = _run_probe(spark, settings, tasks, {"home": str(probe)}, token)
        for r in reports:
            if r["pitstop"] != pitstop.__version__:
                raise ClusterError(
                    f"the executor on {r['host']} runs pitstop {r['pitstop']} from {r['python']}, the "
                    f"driver {pitstop.__version__}: install the same pitstop on every worker"
                )
            if r["missing"]:
                raise ClusterError(
                    f"the executor on {r['host']} cannot import {', '.join(r['missing'])} with "
                    f"{r['python']}: install pitstop with its dependencies on every worker, at the "
                    f"driver's interpreter path ({sys.executable})"
                )
            if r["home"] != "same":
                raise ClusterError(
                    f"the home {home} is not the same folder on the executor on {r['host']} "
                    f"({r['home']}): checkpoints, runs and snapshots are written there by the "
                    "executors; put the home on a mount every worker sees at the same path "
                    "(NFS or another shared file system), or run in local mode"
                )
        written = {p.name for p in probe.iterdir() if p.name != "driver"}
        wanted = {r["wrote"] for r in reports}
        if not wanted <= written:
            hosts = sorted({r["host"] for r in reports if r["wrote"] not in written})
            raise ClusterError(
                f"files the executors on {', '.join(hosts)} wrote into the home {home} do not reach "
                "the driver: the home must be one shared folder, not a copy on each machine"
            )
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def check_folders(spark: SparkSession, settings: Settings, job: str, folders: dict[str, Path]) -> None:
    """Refuse to start ``job`` when a File source folder (mapping -> folder) is not visible to
    the executors, which read its files."""
    if not folders:
        return
    paths = {name: str(folder) for name, folder in folders.items()}
    tasks = max(1, spark.sparkContext.defaultParallelism)
    for r in _run_probe(spark, settings, tasks, paths, None):
        for name, seen in r["folders"].items():
            if not seen:
                raise ClusterError(
                    f"job '{job}': mapping '{name}' reads {folders[name]}, which the executor on "
                    f"{r['host']} cannot see; File source folders must be on a mount every worker "
                    "sees at the same path (the executors read the files)"
                )


def _run_probe(
    spark: SparkSession, settings: Settings, tasks: int, paths: dict[str, str], token: str | None
) -> list[dict[str, Any]]:
    args = json.dumps({"paths": paths, "token": token})
    rdd = spark.sparkContext.parallelize(range(tasks), tasks)
    try:
        return [json.loads(r) for r in rdd.map(lambda _i: probe(args)).collect()]
    except Exception as exc:  # Py4JJavaError carries the executor's Python error as text
        text = str(exc)
        if "No module named" in text:
            missing = text.split("No module named", 1)[1].split("\n", 1)[0].strip(" '\"")
            raise ClusterError(
                f"the executors cannot import '{missing}': install pitstop (the same version, "
                f"with its dependencies) on every worker, reachable as {sys.executable} "
                "(or set PYSPARK_PYTHON to the workers' interpreter that has it)"
            ) from exc
        if "Cannot run program" in text or "error=2" in text:
            raise ClusterError(
                f"the executors cannot start Python as {os.environ.get('PYSPARK_PYTHON', sys.executable)}: "
                "install the same Python with pitstop at that path on every worker, or set "
                "PYSPARK_PYTHON to the workers' interpreter"
            ) from exc
        first = text.strip().split("\n", 1)[0]
        raise ClusterError(
            f"a probe task on {settings.master} failed: {first}; Spark's log: "
            f"{settings.home / 'logs' / 'spark.log'}"
        ) from exc


def probe(args_json: str) -> str:
    """Runs on an executor: what it sees (versions, dependencies, the home's token, folders)."""
    args = json.loads(args_json)
    report: dict[str, Any] = {
        "host": socket.gethostname(),
        "python": sys.executable,
        "pitstop": pitstop.__version__,
        "missing": [m for m in EXECUTOR_DEPENDENCIES if importlib.util.find_spec(m) is None],
        "folders": {},
        "home": "same",
        "wrote": "",
    }
    paths: dict[str, str] = args["paths"]
    if args["token"] is not None:
        folder = Path(paths["home"])
        try:
            seen = (folder / "driver").read_text()
        except OSError as exc:
            seen = ""
            report["home"] = f"not found there: {exc.strerror or exc}"
        else:
            if seen != args["token"]:
                report["home"] = "a different folder of the same name"
        if report["home"] == "same":
            name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            try:
                (folder / name).write_text("seen")
                report["wrote"] = name
            except OSError as exc:
                report["home"] = f"not writable there: {exc.strerror or exc}"
    else:
        report["folders"] = {name: os.path.isdir(p) for name, p in paths.items()}
    return json.dumps(report)


def _cores(n: int) -> str:
    return f"{n} core" if n == 1 else f"{n} cores"
