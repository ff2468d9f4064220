"""The manager: one per process. It owns the catalog, the Spark session (started lazily) and the
runs of the jobs this process is running.

Jobs outlive the process: at exit, running jobs stop at a batch boundary and are marked STOPPED;
the next process that starts Spark on the same home resumes them from their checkpoints. A job
found RUNNING when a process opens the home was running in a process that died; the open marks it
STOPPED (:mod:`pitstop.engine.tidy`) and it is resumed the same way (its sinks skip the batches
they already hold).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from pyspark.errors import PySparkException

from pitstop.catalog import diffs
from pitstop.catalog.clock import now
from pitstop.catalog.rows import (
    FAILED,
    RUNNING,
    STOPPED,
    SUSPENDED,
    Job,
    Mapping,
    MetricSample,
    Run,
    Snapshot,
)
from pitstop.catalog.store import Catalog
from pitstop.connectors import registry, rejects
from pitstop.connectors.rollback import SinkRollback
from pitstop.engine import cluster, metrics
from pitstop.engine.checkpoint import latest_commit
from pitstop.engine.cluster import Placement
from pitstop.engine.locks import NameLocks
from pitstop.engine.runs import ActiveRun
from pitstop.engine.runs.failures import spark_reason
from pitstop.engine.session import spark_session
from pitstop.engine.tidy import empty_trash, tidy_home
from pitstop.errors import (
    BadNameError,
    CatalogError,
    DuplicateObjectError,
    JobFailedError,
    PitstopError,
    PlanError,
    UnknownObjectError,
)
from pitstop.faults import crash_point
from pitstop.names import check_name, safe_path, within
from pitstop.plan.model import JobPlan
from pitstop.settings import Settings
from pitstop.snapshots import export as snapshot_export
from pitstop.snapshots import rollback as sink_rollback
from pitstop.snapshots.restore import Restore, prepare_run_folder, seeds_from_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 600.0
SUPERVISE_S = 1.0
PLACEMENT_S = 2.0


class Manager:
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

    def _supervise(self) -> None:
        """Restart failed branches (and record jobs that keep failing) even when nobody waits."""
        while not self._closed.wait(SUPERVISE_S):
            try:
                self.refresh_failures()
                self.collect_all_rejects()
                self.collect_all_late()
                self.sample_metrics()
                self.supervisor_problem = None
            except Exception as exc:
                if self._closed.is_set():
                    return  # the catalog is closing under it: nothing to report
                # Its own failure is not a job's: logged as a warning and shown by SHOW JOBS
                # until a round succeeds again.
                log.warning(
                    "the job supervisor's round failed; it tries again in %g s", SUPERVISE_S, exc_info=True
                )
                self.supervisor_problem = f"the job supervisor's last round failed: {exc}"

    def sample_metrics(self, force: bool = False) -> tuple[MetricSample, ...]:
        """Sample the jobs running here into ``pitstop.metrics`` (:mod:`pitstop.engine.metrics`),
        every ``metrics_s`` seconds (the supervisor calls this every round; ``force``: now), and
        keep the sample for the metrics endpoint. Returns the last sample."""
        clock = time.monotonic()
        if not force and self._sampled_at is not None and clock - self._sampled_at < self.settings.metrics_s:
            return self.last_sample
        self._sampled_at = clock
        runs = list(self.runs.values())
        late = self.catalog.late_by_stage() if runs else {}  # no job running: no catalog read
        sampled = now()
        rows = tuple(row for run in runs for row in metrics.sample(run, sampled, late))
        self.last_sample = rows
        if rows:  # a round with no job running writes nothing (and leaves the history as it is)
            self.catalog.add_metrics(list(rows), self.settings.metrics_keep)
        return rows

    def _resume_jobs(self) -> None:
        for job in self.catalog.jobs():
            if job.status in (RUNNING, STOPPED) and job.name.lower() not in self.runs:
                log.info("resuming job '%s' from its checkpoints", job.name)
                try:
                    self._start(job.name, self.catalog.get_run(job.run_id))
                    self.catalog.set_job_status(job.name, RUNNING, "")
                except Exception as exc:  # a job that cannot resume must not block the others
                    log.error("job '%s' could not resume: %s", job.name, exc)
                    self.catalog.set_job_status(job.name, FAILED, f"could not resume: {exc}")

    # -- jobs --------------------------------------------------------------------------------------
    def mappings_of(self, plan: JobPlan) -> dict[str, Mapping]:
        out: dict[str, Mapping] = {}
        for b in plan.branches:
            for name in b.mappings:
                m = self.catalog.get_mapping(name)
                if m is None:
                    raise CatalogError(f"mapping '{name}' used by job '{plan.job}' no longer exists")
                out[name] = m
        return out

    def _start(self, job: str, run: Run, hold: bool = False) -> ActiveRun:
        """Start (or resume) ``run``'s queries; with ``hold``, reading no further than its
        checkpoints have planned."""
        plan = JobPlan.from_json(run.plan)
        start, seeds = seeds_from_json(run.restore)
        active = ActiveRun(job, run, plan, self.mappings_of(plan), Path(run.folder), start, seeds)
        if hold:
            active.bounds = active.planned_positions()
        sink_rollback.finish(self.catalog, self.home, run)  # before any query writes
        spark = self.spark()
        if not self.settings.local:
            folders = {
                m.name: folder
                for name in plan.sources
                if (folder := registry.connector((m := active.mappings[name]).type).cluster_folder(m))
                is not None
            }
            cluster.check_folders(spark, self.settings, job, folders)
        try:
            active.start(spark, self.catalog, self.settings.trigger_ms, self.shuffle_partitions)
        except BaseException:
            active.stop()
            raise
        self.runs[job.lower()] = active
        return active

    def create_job(
        self,
        name: str,
        sql: str,
        plan: JobPlan,
        restore: Restore | None,
        options: dict[str, str] | None = None,
        rollback: tuple[SinkRollback, ...] = (),
    ) -> ActiveRun:
        """Start a job; from a snapshot with ``rollback``, its sinks are first rolled back to the
        snapshot's cut (:mod:`pitstop.connectors.rollback`: the DuckDB sinks in the transaction
        that adds the job, the others before its queries start)."""
        # The run folder holds the branches' checkpoints, and pyspark 4.3's state reader finds no
        # committed batch in a checkpoint whose path holds a space (STDS_COMMITTED_BATCH_UNAVAILABLE):
        # spell a job's spaces as '_' there. The random suffix keeps run ids unique.
        spelt = check_name("job", name).replace(" ", "_")
        suffix = f"-{uuid.uuid4().hex[:8]}"
        run_id = f"{spelt}{suffix}"
        folder = safe_path(self.home / "runs", "job", spelt, suffix=suffix)
        folder.mkdir(parents=True)
        if restore is not None:
            restore = prepare_run_folder(folder, restore)
            crash_point("restore.prepared")
        restored = self._restore_json(restore)
        rolled = [r for r in rollback if r.anything and r.possible]
        if restored is not None and rolled:
            restored["rollback"] = [r.to_json() for r in rolled]
        run = Run(run_id, name, str(folder), plan.to_json(), restored, now())
        try:
            self.spark()  # on a cluster, its checks may refuse it (engine/cluster.py)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        with self._lock:
            # The job's row first, then its queries: a process killed once a first batch has
            # written leaves a job that resumes from its checkpoint (its sink knows the run's
            # batches), never windows without a job, written again by a second CREATE JOB.
            from_snapshot = None if restore is None else restore.snapshot
            job = Job(name, sql, RUNNING, "", run_id, from_snapshot, now(), now(), dict(options or {}))
            try:
                self.catalog.create_job(job, run, partial(self._roll_back, rolled) if rolled else None)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            if rolled:
                crash_point("rollback.committed")
            # Step 3 of a sink rollback (files, PostgreSQL) runs in _start, before any query.
            try:
                return self._start(name, run)
            except BaseException as exc:
                if rolled:  # the sinks are rolled back: the job stays, to be resumed (nothing lost)
                    self.catalog.set_job_status(
                        name,
                        FAILED,
                        f"its sinks were rolled back to snapshot '{from_snapshot}', then it could not start: "
                        f"{exc}; ALTER JOB {name} RESUME tries again",
                    )
                    raise
                self.catalog.delete_job(name)
                shutil.rmtree(folder, ignore_errors=True)
                if isinstance(exc, PySparkException):
                    raise PlanError(f"Spark refused job '{name}': {spark_reason(exc)}") from exc
                raise

    def _roll_back(self, plans: list[SinkRollback], tx: duckdb.DuckDBPyConnection) -> None:
        """Step 2 of the sink rollback (:mod:`pitstop.connectors.rollback`), in the transaction
        that adds the job."""
        # Step 2. Each sink's rows and bookkeeping after the cut, checked against the plan.
        for plan in plans:
            mapping = self.catalog.get_mapping(plan.mapping)
            if mapping is None:
                raise CatalogError(f"mapping '{plan.mapping}' no longer exists; nothing was rolled back")
            registry.connector(mapping.type).rollback_in_catalog(self.catalog, mapping, plan, tx)
        crash_point("rollback.deleted")

    def _restore_json(self, restore: Restore | None) -> dict[str, Any] | None:
        """What a run restored, with the run the snapshot was taken of (``from_run``) and the
        snapshot's cut in it (``from_cut``): the job's reject and late counts include that run's
        (:data:`pitstop.catalog.lineage.LINEAGE`), even once the snapshot is dropped."""
        if restore is None:
            return None
        out = restore.to_json()
        snap = self.catalog.get_snapshot(restore.snapshot)
        if snap is not None and snap.manifest.get("run_id"):
            out["from_run"] = snap.manifest["run_id"]
            # The job's late rows include that run's up to the cut: after it, this run reads again
            # what the old one read (pitstop.catalog.lineage.LATE_LINEAGE).
            out["from_cut"] = snap.manifest.get("cut", {}).get("batches")
        return out

    def active(self, name: str, wake: bool = False) -> ActiveRun:
        """The job's run in this process, resuming it if it was stopped (and, with ``wake``,
        if it was suspended: a snapshot of a suspended job needs its queries at the cut)."""
        job = self.catalog.get_job(name)
        if job is None:
            raise UnknownObjectError(f"unknown job '{name}'; SHOW JOBS lists the jobs")
        if job.status == FAILED:
            raise JobFailedError(f"job '{job.name}' has failed: {job.detail}")
        if job.status == SUSPENDED and not wake:
            raise CatalogError(f"job '{job.name}' is suspended; ALTER JOB {job.name} RESUME first")
        self.spark()  # resumes the job if it was stopped
        with self._lock:
            if job.status == SUSPENDED and job.name.lower() not in self.runs:
                # Its cut is where it was suspended: what arrived since is the next job's to read.
                # Fenced before its queries start (a first trigger would list the source before
                # the drain to the cut fences it).
                self._start(job.name, self.catalog.get_run(job.run_id), hold=True)
        run = self.runs.get(name.lower())
        if run is None:
            job = self.catalog.get_job(name) or job  # the supervisor may have failed it meanwhile
            if job.status == FAILED:
                raise JobFailedError(f"job '{job.name}' has failed: {job.detail}")
            raise PitstopError(f"job '{job.name}' is {job.status} and could not be resumed: {job.detail}")
        return run

    def await_job(self, name: str, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> None:
        run = self.active(name)
        try:
            run.await_input(timeout_s, cancelled)
        except JobFailedError as exc:
            self._fail(run, str(exc))
            raise
        self.collect_rejects(run.job, run.run)
        self.collect_late(run)

    def _fail(self, run: ActiveRun, reason: str) -> None:
        with self._lock:
            run.stop()
            if self.runs.get(run.job.lower()) is not run:
                return  # already recorded (the supervisor and AWAIT JOB can both see it fail)
            self.runs.pop(run.job.lower(), None)
            reason = reason.removeprefix(f"job '{run.job}' failed: ")  # the status says "failed"
            self.catalog.set_job_status(run.job, FAILED, reason)
        try:
            self.collect_rejects(run.job, run.run)
            self.collect_late(run)
        except Exception:  # the failure is recorded; the rejects files wait in the run folder
            log.exception(
                "job '%s': rejects or late rows not recorded yet (next: when it resumes or is dropped)",
                run.job,
            )

    # -- rejects -----------------------------------------------------------------------------------
    def collect_rejects(self, job: str, run: Run) -> None:
        """Ingest the rejects files that ``run``'s sources wrote into ``pitstop.rejects``. Files
        already ingested by this process are skipped; ingesting one again changes nothing."""
        with self._rejects_lock:
            for src in JobPlan.from_json(run.plan).sources:
                try:
                    directory = rejects.rejects_dir(run.folder, src)
                except BadNameError:
                    continue  # a source named before the name rule: it never had rejects files
                seen = self._rejects_seen.setdefault((run.run_id, src), {})
                before = dict(seen)
                found = rejects.collect(directory, seen)
                try:
                    self.catalog.add_rejects(job, src, run.run_id, found)
                except BaseException:
                    self._rejects_seen[(run.run_id, src)] = before  # try again next time
                    raise

    def collect_all_rejects(self) -> None:
        for run in list(self.runs.values()):
            self.collect_rejects(run.job, run.run)

    # -- late rows (pitstop.engine.late, step 5) ---------------------------------------------------
    def collect_late(self, run: ActiveRun) -> None:
        """Record the late counts (and, with 'lateRows'='keep', the kept rows) that ``run``'s
        committed batches left in its folder since last time."""
        with self._late_lock:
            counts, records, files = run.late_rows()
            try:
                self.catalog.add_late(run.job, run.run.run_id, counts, records)
            except BaseException:
                run.late_unrecorded()
                raise
            run.late_recorded(files)

    def collect_all_late(self) -> None:
        for run in list(self.runs.values()):
            self.collect_late(run)

    def _collect_left(self, job: str, run: Run) -> None:
        """Late counts and kept late rows of committed batches that a run not running here left in
        its folder (a process killed before it recorded them), before the folder goes."""
        from pitstop.engine import late

        plan = JobPlan.from_json(run.plan)
        counts, records = [], []
        for b in plan.branches:
            committed = latest_commit(Path(run.folder) / "branches" / str(b.index) / "checkpoint")
            reports, _ = late.collect_reports(run.folder, b.index, committed)
            counts += late.counts(reports, b, job)
            if plan.keep_late:
                records += late.collect_kept(run.folder, b.index, committed, set())
        self.catalog.add_late(job, run.run_id, counts, records)

    def drop_job(
        self, name: str, snapshot: str | None, cancelled: Callable[[], bool] | None = None
    ) -> Snapshot | None:
        job = self.catalog.get_job(name)
        if job is None:
            raise UnknownObjectError(f"unknown job '{name}'; SHOW JOBS lists the jobs")
        if snapshot is None:
            with self._lock:  # not while the supervisor restarts one of its branches
                run = self.runs.pop(job.name.lower(), None)
                if run is not None:
                    run.stop()
            old = self.catalog.get_run(job.run_id)
            self.collect_rejects(job.name, old)  # they outlive the job, as its sinks' rows do
            if run is not None:
                self.collect_late(run)  # so do its late rows
            else:
                self._collect_left(job.name, old)
            with self.catalog.transaction() as tx:
                self.catalog.end_run(old.run_id, _last_batches(old), tx)
                self.catalog.delete_job(job.name, tx)
            self._remove(old.folder, "runs", f"job '{job.name}'")
            return None
        if self.catalog.get_snapshot(snapshot) is not None:
            raise DuplicateObjectError(
                f"snapshot '{snapshot}' already exists; choose another name or DROP SNAPSHOT {snapshot} "
                f"first. Job '{job.name}' is still running."
            )
        # A suspended job's queries are woken to reach its cut; whatever fails, it stays suspended
        # (its queries stopped again), as the catalog says, and reads nothing meanwhile.
        suspended = job.status == SUSPENDED
        run = self.active(job.name, wake=True)
        try:
            cut = run.stop_at_cut(STOP_TIMEOUT_S, cancelled)
        except JobFailedError as exc:
            self._fail(run, str(exc))
            raise
        except PitstopError as exc:
            if suspended:
                with self._lock:
                    self.runs.pop(job.name.lower(), None)
                run.stop()
                raise PitstopError(f"{exc}. Job '{job.name}' was not dropped; it stays suspended") from exc
            if not run.stopped:
                raise  # it did not reach a cut and reads on
            # Nothing is lost: the job resumes from its checkpoints.
            self.runs.pop(job.name.lower(), None)
            self._start(job.name, run.run)
            raise PitstopError(f"{exc}. Job '{job.name}' was not dropped; it goes on") from exc
        self.runs.pop(job.name.lower(), None)
        self.collect_rejects(job.name, run.run)  # before the run folder goes
        self.collect_late(run)
        try:
            snap = snapshot_export.export(self.spark(), self.home, snapshot, run, cut)

            def record(tx: duckdb.DuckDBPyConnection) -> None:
                self.catalog.add_snapshot(snap, tx)
                self.catalog.end_run(run.run.run_id, dict(cut.batches), tx)
                self.catalog.delete_job(job.name, tx)

            self._record_snapshot(snap, record)
            crash_point("drop.recorded")
            shutil.rmtree(run.folder, ignore_errors=True)  # the snapshot holds all that is kept
        except BaseException as exc:
            # Nothing is lost: the job resumes from its checkpoints, which hold the cut (a
            # suspended one stays suspended: its queries are stopped, as they were before).
            log.exception("snapshot '%s' of job '%s' failed; the job goes on as it was", snapshot, job.name)
            if not suspended:
                self._start(job.name, run.run)
            if isinstance(exc, PitstopError | OSError):  # say so: the statement failed, the job did not
                goes_on = "it stays suspended" if suspended else "it goes on"
                raise PitstopError(
                    f"{_said(exc, snapshot, job.name)}. Job '{job.name}' was not dropped; {goes_on}"
                ) from exc
            raise
        return snap

    def create_snapshot(
        self, job_name: str, snapshot: str, replace: bool, cancelled: Callable[[], bool] | None = None
    ) -> Snapshot:
        """Export a running job's state at a clean cut; the job goes on afterwards."""
        job = self.catalog.get_job(job_name)
        if job is None:
            raise UnknownObjectError(f"unknown job '{job_name}'; SHOW JOBS lists the jobs")
        existing = self.catalog.get_snapshot(snapshot)
        if existing is not None and not replace:
            raise DuplicateObjectError(
                f"snapshot '{existing.name}' already exists; use CREATE OR REPLACE SNAPSHOT to replace it"
            )
        run = self.active(job.name)
        try:
            cut = run.drain_to_cut(STOP_TIMEOUT_S, cancelled)
        except JobFailedError as exc:
            self._fail(run, str(exc))
            raise
        moved: Path | None = None
        try:
            if existing is not None and Path(existing.path).exists():
                moved = Path(existing.path).with_name(
                    f".{Path(existing.path).name}.replaced-{uuid.uuid4().hex[:8]}"
                )
                Path(existing.path).rename(moved)
            snap = snapshot_export.export(self.spark(), self.home, snapshot, run, cut)

            def record(tx: duckdb.DuckDBPyConnection) -> None:
                if existing is not None:
                    self.catalog.drop_snapshot(existing.name, tx)
                self.catalog.add_snapshot(snap, tx)

            self._record_snapshot(snap, record)
            crash_point("snapshot.recorded")
        except BaseException as exc:
            if moved is not None and existing is not None:
                shutil.rmtree(existing.path, ignore_errors=True)
                moved.rename(existing.path)
            if isinstance(exc, PitstopError | OSError):  # say so: the statement failed, the job did not
                raise PitstopError(f"{_said(exc, snapshot, job.name)}. Job '{job.name}' goes on") from exc
            raise
        finally:
            run.release()
        if moved is not None:
            shutil.rmtree(moved, ignore_errors=True)
        return snap

    def _record_snapshot(self, snap: Snapshot, record: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
        """Commit a written snapshot's catalog row(s), last. If that fails (a full disk stops DuckDB
        too), the snapshot's folder goes: files without a row are no snapshot, and were left
        behind until the next open before (crash matrix, issue 10 points 6 and 8)."""
        try:
            crash_point("export.renamed", snap.path)
            with self.catalog.transaction() as tx:
                record(tx)
        except BaseException as exc:
            shutil.rmtree(snap.path, ignore_errors=True)
            if isinstance(exc, OSError | duckdb.Error):
                raise PitstopError(
                    f"snapshot '{snap.name}' of job '{snap.job}' could not be recorded in the catalog: "
                    f"{exc}. Its files were removed"
                ) from exc
            raise

    def alter_job(self, name: str, action: str, options: dict[str, str] | None) -> str:
        """SUSPEND, RESUME, RESTART or OPTIONS (options only while suspended); returns what was done."""
        job = self.catalog.get_job(name)
        if job is None:
            raise UnknownObjectError(f"unknown job '{name}'; SHOW JOBS lists the jobs")
        if options:
            if job.status not in (SUSPENDED, STOPPED, FAILED):
                raise CatalogError(
                    f"job '{job.name}' is {job.status}; suspend it first (ALTER JOB {job.name} SUSPEND), "
                    "then change its options"
                )
            self.catalog.set_job_options(job.name, {**job.options, **options})
        if action == "OPTIONS":
            return f"job '{job.name}': options set"
        if action == "SUSPEND":
            if job.status == SUSPENDED:
                return f"job '{job.name}' is already suspended"
            if job.status == FAILED:
                raise CatalogError(f"job '{job.name}' has failed; DROP JOB it or ALTER JOB {job.name} RESUME")
            # The catalog says SUSPENDED before the queries stop: a process killed meanwhile
            # leaves the job suspended, as asked (its queries died with it), not one that the
            # next process resumes as if nothing had been said (crash matrix, issue 10.6).
            self.catalog.set_job_status(
                job.name, SUSPENDED, f"suspended; ALTER JOB {job.name} RESUME continues from its checkpoints"
            )
            crash_point("suspend.recorded")
            with self._lock:  # not while the supervisor restarts one of its branches
                run = self.runs.pop(job.name.lower(), None)
            if run is not None:
                run.stop()
                self.collect_rejects(run.job, run.run)
                self.collect_late(run)
            return f"job '{job.name}' suspended"
        if action == "RESTART":
            run = self.runs.pop(job.name.lower(), None)
            if run is not None:
                run.stop()
                self.collect_late(run)
        elif job.status == RUNNING and job.name.lower() in self.runs:
            return f"job '{job.name}' is already running"
        self.spark()  # resumes STOPPED jobs, this one included
        with self._lock:
            if job.name.lower() not in self.runs:
                try:
                    self._start(job.name, self.catalog.get_run(job.run_id))
                except PySparkException as exc:
                    raise PlanError(f"job '{job.name}' could not start: {spark_reason(exc)}") from exc
            self.catalog.set_job_status(job.name, RUNNING, "")
        return f"job '{job.name}' {'restarted' if action == 'RESTART' else 'resumed'} from its checkpoints"

    def drop_snapshot(self, name: str) -> None:
        snap = self.catalog.get_snapshot(name)
        if snap is None:
            raise UnknownObjectError(f"unknown snapshot '{name}'; SHOW SNAPSHOTS lists the snapshots")
        self.catalog.drop_snapshot(snap.name)
        self._remove(snap.path, "snapshots", f"snapshot '{snap.name}'")

    def _remove(self, folder: str, root: str, what: str) -> None:
        """Delete a dropped object's folder, only if it lies inside ``<home>/<root>`` (an older
        pitstop built folders from names the rule now refuses, which may lead elsewhere)."""
        if within(self.home / root, folder):
            shutil.rmtree(folder, ignore_errors=True)
        elif Path(folder).exists():
            log.warning("%s: its folder %s is outside %s; left in place", what, folder, self.home / root)

    def refresh_failures(self) -> None:
        """Restart failed branches; record jobs whose Spark query keeps failing. The run table
        and the queries change only here and in the statements, under the manager's lock."""
        with self._lock:
            for run in list(self.runs.values()):
                restarted, reason = run.recover()
                if reason is not None:
                    self._fail(run, reason)
                elif restarted:
                    self.catalog.set_job_status(run.job, RUNNING, "; ".join(restarted))

    def sinks_waiting(self) -> dict[str, str]:
        """Per job (lower-case name), what its sinks wait for now (``waiting for PostgreSQL at
        host:port: ...``), for SHOW JOBS and DESCRIBE JOB. Reads what the sinks already hold: no
        lock, no Spark call (many clients list jobs at once)."""
        out: dict[str, str] = {}
        for key, run in list(self.runs.items()):
            said = [
                f"sink '{bq.branch.sink}' {waiting}"
                for bq in list(run.branches)
                if (waiting := getattr(bq.sink, "waiting", None))
            ]
            if said:
                out[key] = "; ".join(said)
        return out

    def live_status(self) -> list[tuple[str, str, float]]:
        """``(job, status, input rows per second)`` of every job in the catalog, for toolbars.

        Rates come from the running queries' last progress (0.0 for jobs not running here).
        Reads no Spark state beyond what the queries already hold; never starts Spark.
        """
        out = []
        for job in self.catalog.jobs():
            rate = 0.0
            run = self.runs.get(job.name.lower())
            if run is not None:
                for bq in run.branches:
                    progress = bq.query.lastProgress if bq.query is not None else None
                    if progress:
                        rate += float(progress.get("inputRowsPerSecond") or 0.0)
            out.append((job.name, job.status, rate))
        return out

    # -- shutdown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop running jobs at a batch boundary and mark them STOPPED; they resume next time.
        The jobs stop side by side: each waits for its batch in flight, not for the others."""
        from concurrent.futures import ThreadPoolExecutor

        def stop(run: ActiveRun) -> None:
            try:
                run.stop()
                self.collect_rejects(run.job, run.run)
                self.collect_late(run)
                self.catalog.set_job_status(
                    run.job,
                    STOPPED,
                    f"stopped when pitstop exited at {now():%Y-%m-%d %H:%M:%S} UTC; resumes from its "
                    "checkpoints when pitstop next starts Spark on this home",
                )
            except Exception:
                log.exception("stopping job '%s'", run.job)

        self._closed.set()
        with self._lock:
            runs = list(self.runs.values())
            if runs:
                with ThreadPoolExecutor(max_workers=min(8, len(runs))) as pool:
                    list(pool.map(stop, runs))
            self.runs.clear()
            self.catalog.close()


def _last_batches(run: Run) -> dict[int, int | None]:
    """The last batch each branch of a run committed, from its checkpoints."""
    return {
        b.index: latest_commit(Path(run.folder) / "branches" / str(b.index) / "checkpoint")
        for b in JobPlan.from_json(run.plan).branches
    }


def _said(exc: BaseException, snapshot: str, job: str) -> str:
    """What a failed snapshot statement tells: pitstop's own message, or the file system's reason
    (an unwritable or full snapshots folder, met before the export's own handling)."""
    if isinstance(exc, PitstopError):
        return exc.message
    return f"snapshot '{snapshot}' of job '{job}' could not be written: {exc}"
