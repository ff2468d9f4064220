"""What the manager's parts stand on: the catalog, the runs of the jobs this process runs, the locks,
and the Spark session, started lazily (starting it resumes the home's stopped jobs and starts the
supervisor). Each part is a mixin over :class:`ManagerBase` (:mod:`.collect`, :mod:`.jobs`,
:mod:`.snapshots`, :mod:`.supervisor`), and :class:`~pitstop.manager.core.Manager` is all of them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from pitstop.catalog import diffs
from pitstop.catalog.rows import MetricSample
from pitstop.catalog.store import Catalog
from pitstop.engine import cluster
from pitstop.engine.cluster import Placement
from pitstop.engine.locks import NameLocks
from pitstop.engine.runs import ActiveRun
from pitstop.engine.session import spark_session
from pitstop.engine.tidy import empty_trash, tidy_home
from pitstop.settings import Settings
from pitstop.snapshots import rollback as sink_rollback

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
PLACEMENT_S = 2.0


class ManagerBase:
    """The state of a :class:`~pitstop.manager.Manager` and its Spark session."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.home
        self.catalog = Catalog(self.home / "catalog.duckdb")
        self.runs: dict[str, ActiveRun] = {}
        self._spark: SparkSession | None = None
        self._lock = threading.RLock()
        self._placement: tuple[float, Placement] | None = None
        self._closed = threading.Event()
        self.supervisor_problem: str | None = None  # the supervisor's last failure, until it recovers
        self.names = NameLocks()
        """Statements that change a job, snapshot, mapping or view hold its name (executor)."""
        self._rejects_seen: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
        self._rejects_lock = threading.Lock()
        self._late_lock = threading.Lock()
        self._sampled_at: float | None = None  # time.monotonic() of the last metrics sample
        self.last_sample: tuple[MetricSample, ...] = ()
        """The last metrics sample of the jobs running here (the metrics endpoint serves it)."""
        # A process killed mid-protocol leaves folders the catalog does not list, and jobs marked
        # RUNNING that no process runs (crash matrix, issue 10): put the home right before use.
        try:
            tidy_home(self.home, self.catalog)
            empty_trash(self.home, settings.trash_days)
            diffs.expire(self.catalog, settings.trash_days)
        except Exception:  # noqa: BLE001 - an untidy home still opens; the log says what is left
            log.exception("could not tidy the home %s after an earlier process", self.home)
        # A sink rollback committed by a process that died before it moved the files: finish it
        # now, so that nobody sees the sinks half rolled back (connectors.rollback, step 3).
        for job in self.catalog.jobs():
            try:
                sink_rollback.finish(self.catalog, self.home, self.catalog.get_run(job.run_id))
            except Exception:  # noqa: BLE001 - tried again before the job's queries start
                log.exception("job '%s': its sink rollback could not be finished yet", job.name)

    # -- Spark -----------------------------------------------------------------------------------
    @property
    def spark_started(self) -> bool:
        return self._spark is not None

    def spark(self) -> SparkSession:
        """The Spark session; the first call starts it and resumes this home's stopped jobs."""
        with self._lock:
            if self._spark is None:
                self._spark = spark_session(self.settings)
                self._resume_jobs()
                threading.Thread(target=self._supervise, name="pitstop-supervisor", daemon=True).start()
            return self._spark

    @property
    def shuffle_partitions(self) -> int:
        """Spark's shuffle partitions for new runs (also the sources' read parallelism):
        ``PITSTOP_SHUFFLE_PARTITIONS``, else the cores; a cluster's are known once Spark has
        connected to it (this starts Spark)."""
        if self.settings.shuffle_partitions is not None:
            return self.settings.shuffle_partitions
        if self.settings.local:
            return os.cpu_count() or 2
        return int(self.spark().conf.get("spark.sql.shuffle.partitions") or 2)

    def placement(self) -> Placement | None:
        """Where this process's jobs run (master, executors, Spark's UI); None before Spark starts.

        Kept for PLACEMENT_S: SHOW JOBS shows it, and a server's clients may list jobs hundreds of
        times a second, while asking costs JVM calls (and, on a cluster, Spark's monitoring API)."""
        spark = self._spark
        if spark is None:
            return None
        kept = self._placement
        if kept is not None and time.monotonic() - kept[0] < PLACEMENT_S:
            return kept[1]
        place = cluster.placement(spark, self.settings)
        self._placement = (time.monotonic(), place)
        return place

    # Supplied by the manager's parts ---------------------------------------------------------------

    def _resume_jobs(self) -> None:
        """Resume the home's stopped jobs (:class:`~pitstop.manager.jobs.JobControl`)."""
        raise NotImplementedError

    def _supervise(self) -> None:
        """The supervisor's loop (:class:`~pitstop.manager.supervisor.Supervisor`)."""
        raise NotImplementedError
