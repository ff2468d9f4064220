"""A job's life in the manager: starting (or resuming) its run, CREATE JOB with its sinks' rollback,
the run of a job by name, AWAIT JOB, a failure recorded, and ALTER JOB."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
from pyspark.errors import PySparkException

from pitstop.catalog.clock import now
from pitstop.catalog.rows import FAILED, RUNNING, STOPPED, SUSPENDED, Job, Mapping, Run
from pitstop.connectors import registry
from pitstop.connectors.rollback import SinkRollback
from pitstop.engine import cluster
from pitstop.engine.runs import ActiveRun
from pitstop.engine.runs.failures import spark_reason
from pitstop.errors import CatalogError, JobFailedError, PitstopError, PlanError, UnknownObjectError
from pitstop.faults import crash_point
from pitstop.manager.collect import RowCollection
from pitstop.names import check_name, safe_path
from pitstop.plan.model import JobPlan
from pitstop.snapshots import rollback as sink_rollback
from pitstop.snapshots.restore import Restore, prepare_run_folder, seeds_from_json

log = logging.getLogger(__name__)


class JobControl(RowCollection):
    """Starting, resuming, failing and altering jobs."""

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
            cluster.check_folders(spark, self.settings, job, self._folders(plan, active.mappings))
        try:
            active.start(spark, self.catalog, self.settings.trigger_ms, self.shuffle_partitions)
        except BaseException:
            active.stop()
            raise
        self.runs[job.lower()] = active
        return active

    @staticmethod
    def _folders(plan: JobPlan, mappings: dict[str, Mapping]) -> list[cluster.Folder]:
        """The folders the executors of a cluster read for a job: its sources', and its static
        joins' (a File table is read whole on the executors, for every micro-batch)."""
        tables = [b.join.right for b in plan.branches if b.join is not None and b.join.kind == "table"]
        out: dict[str, cluster.Folder] = {}
        for name, source in [*((s, True) for s in plan.sources), *((t, False) for t in tables)]:
            m = mappings[name]
            folder = registry.connector(m.type).cluster_folder(m)
            if folder is not None and m.name not in out:
                out[m.name] = cluster.Folder(m.name, folder, source)
        return list(out.values())

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
            # Said to whoever waits on the run (AWAIT JOB): its stopped queries no longer tell.
            run.failed_for_good = reason.removeprefix(f"job '{run.job}' failed: ")
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
