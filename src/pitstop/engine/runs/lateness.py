"""A run's late rows (:mod:`pitstop.engine.late`, step 5): the counts and kept rows its committed
batches left in the run folder, handed to the catalog and then forgotten."""

from __future__ import annotations

from pathlib import Path

from pitstop.catalog.rows import LateCount, LateRecord
from pitstop.engine import checkpoint, late
from pitstop.engine.runs.state import RunState


class RunLateRows(RunState):
    """Reading and forgetting the late rows of committed batches."""

    def late_rows(self) -> tuple[list[LateCount], list[LateRecord], list[Path]]:
        """The late counts of the branches' committed batches not recorded yet, the kept rows of
        committed batches not yet read, and the counts files they came from (step 5). A read:
        nothing is marked recorded until the catalog has them (:meth:`late_recorded`)."""
        found: list[LateCount] = []
        records: list[LateRecord] = []
        files: list[Path] = []
        for bq in list(self.branches):
            if not bq.branch.stages:
                continue
            committed = checkpoint.latest_commit(bq.checkpoint)
            reports, read = late.collect_reports(self.folder, bq.branch.index, committed)
            found += late.counts(reports, bq.branch, self.job)
            files += read
            if self.plan.keep_late:
                records += late.collect_kept(self.folder, bq.branch.index, committed, bq.kept_seen)
        return found, records, files

    def late_recorded(self, files: list[Path]) -> None:
        """The catalog holds what :meth:`late_rows` returned: its counts files go."""
        for path in files:
            path.unlink(missing_ok=True)

    def late_unrecorded(self) -> None:
        """The catalog could not take what :meth:`late_rows` returned: the kept rows' files are
        read again next time (recording one twice changes nothing)."""
        for bq in self.branches:
            bq.kept_seen.clear()
