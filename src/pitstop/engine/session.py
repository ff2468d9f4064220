"""The Spark session: built once per process, lazily, with defaults that suit a laptop."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pitstop.engine import forkserver, jvm
from pitstop.errors import PitstopError
from pitstop.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
STATE_ROWS_COUNTED = False
"""RocksDB otherwise reads every key before writing it, only to count the state's rows for a metric
(``numRowsTotal``); without that read, a restore seeds 1M keys ~1/3 faster (bench/RESULTS.md).
So Spark's progress says 0 state rows, and ``pitstop.metrics`` says it does not know (NULL)."""
_lock = threading.Lock()
_session: SparkSession | None = None
_forkserver: forkserver.Server | None = None


def spark_session(settings: Settings) -> SparkSession:
    """The process's Spark session, created on first use."""
    global _session, _forkserver
    with _lock:
        if _session is not None:
            return _session
        # Python workers must run the interpreter that has pitstop installed.
        os.environ.setdefault("PYSPARK_PYTHON", worker_python(settings))
        own_script = Path(os.environ["PYSPARK_PYTHON"]).name == "python-worker"  # WORKER_SCRIPT
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.logger import PySparkLogger
        from pyspark.sql import SparkSession

        from pitstop import logs as pitstop_logs

        for name in pitstop_logs.SPARK_ECHOES:
            pitstop_logs.adopt(PySparkLogger.getLogger(name))

        from pitstop.connectors import registry

        if not settings.local:
            from pitstop.engine import cluster

            cluster.reach_master(settings.master)  # before Spark, which tries for minutes
        log.info("starting Spark (%s)", settings.master)
        conf = SparkConf().setAppName("pitstop").setMaster(with_task_retries(settings.master))
        # On a cluster, shuffle partitions follow the executors' cores once they register
        # (cluster.connect); until then, and in local mode, this machine's.
        partitions = settings.shuffle_partitions or os.cpu_count() or 2
        conf.setAll(
            [
                ("spark.sql.shuffle.partitions", str(partitions)),
                ("spark.sql.session.timeZone", "UTC"),
                (
                    "spark.sql.streaming.stateStore.providerClass",
                    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                ),
                # See STATE_ROWS_COUNTED.
                (
                    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows",
                    str(STATE_ROWS_COUNTED).lower(),
                ),
                ("spark.ui.enabled", "true" if settings.ui else "false"),
                ("spark.ui.showConsoleProgress", "false"),
                ("spark.sql.streaming.metricsEnabled", "false"),
                ("spark.sql.warehouse.dir", str(settings.home / "spark-warehouse")),
                ("spark.driver.memory", settings.driver_memory),
                # Jobs share the cores with a replay (EXPLAIN ANALYZE) by pool: 3 to 1 while both
                # have tasks to run (within a pool, first come first served, as before).
                ("spark.scheduler.mode", "FAIR"),
                ("spark.scheduler.allocation.file", str(_pools(settings.home))),
            ]
        )
        if not settings.local:
            conf.set("spark.executor.memory", settings.executor_memory)
        # The JVM (and the Python workers it starts) write their logs to the home, not over the
        # shell's prompt or a script's output: <home>/logs/spark.log.
        logs = settings.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / "spark.log", "ab") as handle:
            said_from = handle.tell()  # where what this start's JVM says begins
            if own_script:  # the JVM, and the worker script it runs, inherit the variable
                if _forkserver is not None:  # from a start that failed
                    _forkserver.stop()
                _forkserver = forkserver.start(handle)
                os.environ[forkserver.ENV] = _forkserver.path
            opts = jvm.submit_opts()  # the class archive `pitstop prepare` made, if there is one
            if opts is not None:
                os.environ[jvm.ENV] = opts
            gateway = launch_gateway(conf, popen_kwargs={"stdout": handle, "stderr": handle})
        session: SparkSession | None = None
        try:
            SparkContext(conf=conf, gateway=gateway)
            # The builder adopts the running context and registers the session as the JVM's
            # default and active one, which streaming threads and foreachBatch rely on.
            session = SparkSession.builder.config(conf=conf).getOrCreate()
            session.sparkContext.setLogLevel("ERROR")
            for connector in registry.CONNECTORS:
                if connector.source:
                    session.dataSource.register(connector.stream_source())
            if not settings.local:
                cluster.connect(session, settings)
        except BaseException as exc:
            stopped = (
                not settings.local
                and isinstance(exc, Exception)
                and (_stopped(exc) or _gave_up_said(logs / "spark.log", said_from))
            )
            # The next statement that needs Spark tries again.
            if session is not None:
                session.stop()
            elif SparkContext._active_spark_context is not None:  # noqa: SLF001
                SparkContext._active_spark_context.stop()  # noqa: SLF001
            if stopped and not isinstance(exc, PitstopError):
                # A master that took the connection but never registered the application: Spark
                # stopped its context after a minute, under one of the calls above; its Py4J
                # trace of 100 lines would say only that.
                raise cluster.gave_up(settings) from exc
            raise
        _session = session
        return session


def _stopped(exc: Exception) -> bool:
    """Whether Spark stopped its context under the session being built (a cluster's master gave
    up on the application)."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context  # noqa: SLF001
    try:
        if active is not None and active._jsc is not None:  # noqa: SLF001
            return bool(active._jsc.sc().isStopped())  # noqa: SLF001
    except Exception:  # noqa: S110 - the JVM is gone too: the text tells
        pass
    return "stopped SparkContext" in str(exc)


GAVE_UP = "All masters are unresponsive! Giving up."  # StandaloneSchedulerBackend.dead's reason


def _gave_up_said(spark_log: Path, offset: int) -> bool:
    """Whether Spark's log says, since ``offset``, that it gave up on the master. When it stops the
    context while PySpark is still setting it up (SparkFiles' root directory, with the SparkEnv
    already gone), PySpark stops it again and raises a NullPointerException, and no context is
    left to ask; the log keeps the reason."""
    try:
        with open(spark_log, "rb") as handle:
            handle.seek(offset)
            return GAVE_UP.encode() in handle.read()
    except OSError:
        return False


REPLAY_POOL = "replay"
POOLS = """<?xml version="1.0"?>
<!-- Written by pitstop (engine/session.py): the jobs' pool and the replays' (EXPLAIN ANALYZE). -->
<allocations>
  <pool name="default"><schedulingMode>FIFO</schedulingMode><weight>3</weight><minShare>0</minShare></pool>
  <pool name="replay"><schedulingMode>FIFO</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
</allocations>
"""


def _pools(home: Path) -> Path:
    """Spark's fair-scheduler pools, written into the home (Spark reads them from a file)."""
    path = home / "spark-pools.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != POOLS:
        path.write_text(POOLS)
    return path


WORKER_SCRIPT = """#!/bin/sh
# Written by pitstop: Spark's Python workers, with this interpreter's own pyspark.
# Spark puts SPARK_HOME/python/lib/pyspark.zip first on every worker's PYTHONPATH, and Python
# cannot cache compiled modules of a zip: each new worker compiled pyspark again, ~0.4 s before
# every streaming query's first batch. The installed pyspark is the same release (SPARK_HOME is
# its folder), with its compiled modules cached.
new=
IFS=:
for p in $PYTHONPATH; do
  case "$p" in
    */pyspark.zip|*/py4j-*-src.zip) ;;
    *) new="${new:+$new:}$p" ;;
  esac
done
PYTHONPATH=$new
export PYTHONPATH
# A streaming query's Python source starts warm, forked by pitstop's fork server (forkserver.py).
if [ "$1" = -m ] && [ "$2" = pyspark.sql.streaming.python_streaming_source_runner ] \
    && [ -S "${PITSTOP_FORKSERVER:-}" ]; then
  PITSTOP_PYTHON={python}
  export PITSTOP_PYTHON
  exec {python} -I -S {client} "$@"
fi
exec {python} "$@"
"""


def worker_python(settings: Settings) -> str:
    """The interpreter Spark's Python workers run: this one, started through a script that drops
    Spark's zipped copy of pyspark from the path (:data:`WORKER_SCRIPT`) when the workers run on
    this machine and Spark is the installed pyspark's own; otherwise this interpreter as it is."""
    import shlex

    import pyspark

    own = Path(pyspark.__file__).resolve().parent
    spark_home = os.environ.get("SPARK_HOME")
    if os.name != "posix" or not settings.local or (spark_home and Path(spark_home).resolve() != own):
        return sys.executable
    script = settings.home / "bin" / "python-worker"
    script.parent.mkdir(parents=True, exist_ok=True)
    tmp = script.with_name(f".{script.name}.{os.getpid()}.tmp")
    client = Path(__file__).with_name("forkclient.py")
    text = WORKER_SCRIPT.replace("{python}", shlex.quote(sys.executable))
    tmp.write_text(text.replace("{client}", shlex.quote(str(client))))
    tmp.chmod(0o755)
    os.replace(tmp, script)
    try:  # a home on a file system mounted noexec cannot run it
        subprocess.run([str(script), "-S", "-c", "pass"], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("Python workers run %s directly (%s cannot run: %s)", sys.executable, script, exc)
        return sys.executable
    return str(script)


def with_task_retries(master: str) -> str:
    """``local[*]`` fails a query on the first task failure; a cluster retries a task (4 attempts
    by default). Give local mode the same retries, so that a transient task failure (seen: a rare
    task deserialization error under concurrent queries) is retried instead of failing the job."""
    m = re.fullmatch(r"local\[([^,\]]+)\]", master.strip())
    if m:
        return f"local[{m.group(1)},4]"
    if master.strip() == "local":
        return "local[1,4]"
    return master


def running_session() -> SparkSession | None:
    return _session


def running_forkserver() -> forkserver.Server | None:
    return _forkserver


def stop_session() -> None:
    global _session, _forkserver
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
        if _forkserver is not None:
            _forkserver.stop()
            _forkserver = None
