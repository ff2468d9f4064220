"""A CREATE JOB planned without starting anything: its options checked, its stages named, its
sinks checked, and how it would restore a snapshot and roll its sinks back. CREATE JOB and
EXPLAIN share it."""

from __future__ import annotations

import re

from pitstop.catalog.rows import Snapshot
from pitstop.connectors.rollback import SinkRollback
from pitstop.errors import PlanError, UnknownOptionError
from pitstop.executor.base import ExecutorBase
from pitstop.plan.model import JobPlan
from pitstop.planner import early
from pitstop.planner import late as late_rows
from pitstop.planner.build import plan_job
from pitstop.snapshots.restore import RESTORE_FORMATS, Restore, plan_restore
from pitstop.snapshots.rollback import cut_of, plan_rollback
from pitstop.spelling import close_name
from pitstop.sql import nodes
from pitstop.sql.parser import name_of, option_dict

JOB_OPTIONS = {
    "initialSnapshotName": "start from this snapshot (same as FROM SNAPSHOT)",
    "strictRestore": "refuse to start if a snapshot stage has no stage in the new job",
    "restoreFormat": "'auto' (default): an unchanged stage starts on Spark's own state files from the "
    "snapshot, others from its rows; 'canonical': every stage from the rows",
    "sinkRollback": "'true' with FROM SNAPSHOT: before the job starts, remove what the job's earlier runs "
    "wrote to its sinks after the snapshot's cut (DuckDB and PostgreSQL rows, File sink files moved to "
    "the trash), so that the restored job's output replaces it instead of doubling it",
    "acceptSinkGap": "'true' with FROM SNAPSHOT: restore a snapshot taken past a cut that a later "
    "'sinkRollback' rolled the job's sinks back to (refused otherwise: what the job wrote between the two "
    "cuts is gone from the sinks and would not be written again)",
    "earlyResultsMillis": "n: a TUMBLE or HOP window's row is written to the sink as it changes (at most "
    "every n ms: micro-batches start no more often), replaced by window and keys, with a column 'early' "
    "that is true while the window is open and false once it is final (the watermark passed its end); "
    "DuckDB and PostgreSQL sinks only",
    "lateRows": "'count' (default): the rows a stateful stage drops because they are behind the watermark "
    "are counted (SHOW JOBS, DESCRIBE JOB, pitstop.late_rows); 'keep': each is also kept in "
    "pitstop.late_records with the window it missed (every row of the stage's input goes through Python)",
    "processingGuarantee": "accepted; pitstop is always exactly-once for DuckDB and File sinks",
    "snapshotIntervalMillis": "accepted; Spark checkpoints every micro-batch",
    "suspendOnFailure": "accepted; a failed job is marked FAILED",
    "autoScaling": "accepted and ignored",
    "metricsEnabled": "accepted and ignored",
    "storeMetricsAfterJobCompletion": "accepted and ignored",
    "maxProcessorAccumulatedRecords": "accepted and ignored",
    "splitBrainProtectionEnabled": "accepted and ignored",
}
ACTED_ON_OPTIONS = (
    "initialSnapshotName",
    "strictRestore",
    "restoreFormat",
    "sinkRollback",
    "acceptSinkGap",
    "earlyResultsMillis",
    "lateRows",
)
UNTIL_ONLY = (
    "UNTIL SNAPSHOT ends the replay of EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s UNTIL SNAPSHOT t "
    "AS ...; a job itself runs on: leave UNTIL out"
)


def flag(options: dict[str, str], key: str) -> bool:
    """A job option that is 'true' or 'false' (checked when the statement is planned)."""
    return options.get(key, "false").lower() == "true"


class JobPlanning(ExecutorBase):
    """Plans CREATE JOB for the job statements and EXPLAIN."""

    def _plan_create(self, node: nodes.CreateJob) -> tuple[JobPlan, str | None, dict[str, str]]:
        """Plan a CREATE JOB: options checked, stages named, sinks checked; starts nothing."""
        name = name_of(node.this)
        options = option_dict(node.args.get("options"))
        for key in options:
            if key not in JOB_OPTIONS:
                raise UnknownOptionError(
                    f"unknown job option '{key}'{close_name(key, list(JOB_OPTIONS))}; "
                    f"known options: {', '.join(sorted(JOB_OPTIONS))}"
                )
        fmt = options.get("restoreFormat", "auto").lower()
        if fmt not in RESTORE_FORMATS:
            raise PlanError(
                f"'restoreFormat'='{options['restoreFormat']}' is not a restore format; "
                f"use one of: {', '.join(RESTORE_FORMATS)}"
            )
        snapshot_name = name_of(node.args["snapshot"]) if node.args.get("snapshot") else None
        for flag in ("sinkRollback", "acceptSinkGap"):
            if options.get(flag, "false").lower() not in ("true", "false"):
                raise PlanError(f"'{flag}'='{options[flag]}': write 'true' or 'false'")
        rolls = options.get("sinkRollback", "false").lower()
        initial = options.get("initialSnapshotName")
        if rolls == "true" and not (snapshot_name or initial):
            raise PlanError(
                "'sinkRollback'='true' rolls the sinks back to a snapshot's cut: add FROM SNAPSHOT name"
            )
        if initial and snapshot_name and initial.lower() != snapshot_name.lower():
            raise PlanError(
                f"FROM SNAPSHOT {snapshot_name} and 'initialSnapshotName'='{initial}' disagree; give one"
            )
        try:
            plan = plan_job(name, list(node.args["body"]), self._lookup, self._view)
            plan = early.with_early_results(plan, early.early_millis(options), self._lookup)
            plan = late_rows.with_late_rows(plan, options)
        except PlanError as err:
            match = re.match(r"unknown mapping '([^']+)'", err.message)
            if match:
                names = [m.name for m in self.catalog.mappings()] if self.catalog is not None else []
                names += [k for k, v in self._overlay.items() if v is not None]
                hint = close_name(match.group(1), names)
                raise PlanError(err.message.replace(match.group(0), match.group(0) + hint, 1)) from None
            raise
        self._check_sinks(plan)
        return plan, snapshot_name or initial, options

    def _check_sinks(self, plan: JobPlan) -> None:
        for b in plan.branches:
            sink = self._lookup(b.sink)
            if sink is None or not sink.columns:
                continue
            declared = {c.name.lower() for c in sink.columns}
            missing = [c.name for c in b.output if c.name.lower() not in declared]
            if missing:
                raise PlanError(
                    f"INSERT INTO {sink.name}: the mapping has no column(s) {', '.join(missing)}; its "
                    f"columns are {', '.join(c.name for c in sink.columns)}"
                )

    def _plan_restore(self, snap: Snapshot, plan: JobPlan, options: dict[str, str]) -> Restore:
        strict = options.get("strictRestore", "false").lower() == "true"
        partitions = self.manager.shuffle_partitions if self.manager is not None else None
        fmt = options.get("restoreFormat", "auto").lower()
        return plan_restore(snap, plan, strict, partitions, fmt, self._lookup)

    def _rollback_plan(self, snap: Snapshot) -> tuple[SinkRollback, ...]:
        assert self.catalog is not None and self.manager is not None
        return plan_rollback(self.catalog, self.manager.home, snap)

    def _still_running(self, snap: Snapshot) -> str | None:
        """The snapshot's job, if it still exists and runs the snapshot's run or a later one."""
        assert self.catalog is not None
        job = self.catalog.get_job(snap.job)
        if job is None:
            return None
        cut = cut_of(self.catalog, snap)
        if job.run_id == cut.run_id or job.run_id in {r.run_id for r in cut.later}:
            return job.name
        return None
