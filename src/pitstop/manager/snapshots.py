"""Stopping a job at a clean cut and keeping its state: DROP JOB [WITH SNAPSHOT], CREATE SNAPSHOT,
DROP SNAPSHOT, and the catalog rows and folders they write and remove."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import duckdb

from pitstop.catalog.rows import SUSPENDED, Run, Snapshot
from pitstop.engine.checkpoint import latest_commit
from pitstop.errors import DuplicateObjectError, JobFailedError, PitstopError, UnknownObjectError
from pitstop.faults import crash_point
from pitstop.manager.jobs import JobControl
from pitstop.names import within
from pitstop.plan.model import JobPlan
from pitstop.snapshots import export as snapshot_export

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 600.0


class SnapshotControl(JobControl):
    """DROP JOB, CREATE SNAPSHOT and DROP SNAPSHOT."""

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
