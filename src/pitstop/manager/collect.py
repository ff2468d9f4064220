"""Recording what running jobs leave in their run folders: the rejects files of their sources
(``pitstop.rejects``) and the late rows of their stateful stages (``pitstop.late_counts``,
``pitstop.late_records``)."""

from __future__ import annotations

from pathlib import Path

from pitstop.catalog.rows import Run
from pitstop.connectors import rejects
from pitstop.engine.checkpoint import latest_commit
from pitstop.engine.runs import ActiveRun
from pitstop.errors import BadNameError
from pitstop.manager.base import ManagerBase
from pitstop.plan.model import JobPlan


class RowCollection(ManagerBase):
    """Rejects and late rows, collected from run folders into the catalog."""

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
