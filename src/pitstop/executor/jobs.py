"""CREATE, DROP, ALTER, AWAIT, SHOW and DESCRIBE JOB."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlglot import exp

from pitstop import describe
from pitstop.catalog.rows import RUNNING, Job, Run, Snapshot
from pitstop.connectors.rollback import SinkRollback
from pitstop.engine import lag
from pitstop.errors import DuplicateObjectError, PlanError, UnknownOptionError
from pitstop.executor.base import CheckedSnapshot
from pitstop.executor.planning import ACTED_ON_OPTIONS, JOB_OPTIONS, UNTIL_ONLY, JobPlanning, flag
from pitstop.executor.results import Result
from pitstop.executor.session import DEFAULT_AWAIT_S
from pitstop.intervals import interval_micros
from pitstop.plan.model import JobPlan
from pitstop.planner import early
from pitstop.planner import late as late_rows
from pitstop.snapshots.restore import check_compatible
from pitstop.snapshots.rollback import refuse_if_blocked, rolled_back_past
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, name_of, option_dict

if TYPE_CHECKING:
    from pitstop.engine.cluster import Placement

log = logging.getLogger(__name__)


class JobStatements(JobPlanning):
    """CREATE JOB, DROP JOB, ALTER JOB, AWAIT JOB, SHOW JOBS, DESCRIBE JOB."""

    def _create_job(self, node: nodes.CreateJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if node.args.get("until"):
            raise PlanError(UNTIL_ONLY)
        if self._job_plan(name) is not None:
            if node.args.get("exists"):
                return Result(f"job '{name}' already exists; left as it is")
            raise DuplicateObjectError(
                f"job '{name}' already exists; DROP JOB {name} first (WITH SNAPSHOT s to keep its state)"
            )
        plan, snapshot_name, options = self._plan_create(node)
        restore = None
        strict = options.get("strictRestore", "false").lower() == "true"
        if snapshot_name is not None:
            snap = self._find_snapshot(snapshot_name)
            if snap is None:
                raise self._unknown("snapshot", snapshot_name)
            if isinstance(snap, CheckedSnapshot):
                check_compatible(snapshot_name, self._snapshot_stages(snapshot_name), plan, strict)
            else:
                restore = self._plan_restore(snap, plan, options)
        if self.manager is None:
            self._overlay_jobs[name.lower()] = plan
            self._dropped.pop(("job", name.lower()), None)
            return Result("OK")
        rollback: tuple[SinkRollback, ...] = ()
        if restore is not None:
            snap = self._find_snapshot(restore.snapshot)
            assert isinstance(snap, Snapshot) and self.catalog is not None
            gap = None if flag(options, "acceptSinkGap") else rolled_back_past(self.catalog, snap)
            if gap is not None:
                raise PlanError(f"job '{name}' was not created: {gap}")
            if flag(options, "sinkRollback"):
                rollback = self._rollback_plan(snap)
                refuse_if_blocked(snap.name, rollback, self._still_running(snap))
        self.manager.create_job(name, stmt.text, plan, restore, options, rollback)
        lines = [f"job '{name}' started"]
        warnings: list[str] = []
        if restore is not None:
            lines[0] += f" from snapshot '{restore.snapshot}'"
            for v in restore.verdicts:
                lines.append("  " + v.text())
                if v.warnings:
                    warnings.append(lines[-1])
        if restore is not None and isinstance(snap, Snapshot):
            for sink, cols in describe.unwritten_columns(snap.manifest.get("plan"), plan):
                lines.append(f"  sink '{sink}': {describe.unwritten_text(sink, cols)}")
        for r in rollback:
            if r.anything:
                lines.append(f"  sink '{r.mapping}' rolled back to the cut: {describe.rollback_done(r)}")
            elif not r.possible and r.note and r.type_name != "Console":
                lines.append(f"  sink '{r.mapping}' not rolled back: {r.note}")
        for key in options:
            if key not in ACTED_ON_OPTIONS:
                lines.append(f"  option '{key}': {JOB_OPTIONS[key]}")
        return Result("\n".join(lines), warnings=tuple(warnings))

    def _drop_job(self, node: nodes.DropJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        snapshot = name_of(node.args["snapshot"]) if node.args.get("snapshot") else None
        plan = self._job_plan(name)
        if plan is None:
            if node.args.get("exists"):
                return Result(f"job '{name}' does not exist; nothing dropped")
            raise self._unknown("job", name)
        if self.manager is None:
            if snapshot is not None:
                taken = self._find_snapshot(snapshot)
                if taken is not None:
                    raise DuplicateObjectError(
                        f"snapshot '{taken.name}' already exists; choose another name or "
                        f"DROP SNAPSHOT {taken.name} first"
                    )
                self._overlay_snapshots[snapshot.lower()] = CheckedSnapshot(snapshot, name, plan)
                self._dropped.pop(("snapshot", snapshot.lower()), None)
            self._overlay_jobs[name.lower()] = None
            self._dropped[("job", name.lower())] = self._where(stmt)
            return Result("OK")
        assert self.catalog is not None
        job = self.catalog.get_job(name)
        assert job is not None
        folder = self.catalog.get_run(job.run_id).folder
        snap = self.manager.drop_job(job.name, snapshot, self.cancelled)
        if snap is None:
            return Result(f"job '{job.name}' dropped" + self._left_outside(folder, "runs"))
        return Result(
            f"job '{job.name}' dropped with snapshot '{snap.name}' ({snap.rows} state rows, "
            f"{snap.size_bytes:,} bytes)"
        )

    def _alter_job(self, node: nodes.AlterJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        action = str(node.args["action"]).upper()
        options = option_dict(node.args.get("options")) if node.args.get("options") else None
        for key in options or {}:
            if key not in JOB_OPTIONS:
                raise UnknownOptionError(
                    f"unknown job option '{key}'; known options: {', '.join(sorted(JOB_OPTIONS))}"
                )
            if key in (early.OPTION, late_rows.OPTION):
                raise PlanError(
                    f"'{key}' changes how job '{name}' runs, which ALTER JOB does not: DROP JOB {name} "
                    f"WITH SNAPSHOT s, then CREATE JOB {name} OPTIONS ('{key}'=...) FROM SNAPSHOT s AS ... "
                    "(the windows' state is kept)"
                )
        if self._job_plan(name) is None:
            raise self._unknown("job", name)
        if self.manager is None:
            return Result("OK")
        return Result(self.manager.alter_job(name, action, options))

    def _await_job(self, node: nodes.AwaitJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        timeout = node.args.get("timeout")
        default = float(self.session.get("await_timeout_s", DEFAULT_AWAIT_S))
        seconds = interval_micros(timeout) / 1e6 if timeout is not None else default
        if self._job_plan(name) is None:
            raise self._unknown("job", name)
        if self.manager is None:
            return Result("OK")
        self.manager.await_job(name, seconds, self.cancelled)
        return Result(f"job '{name}' has caught up with its input")

    def _show_jobs(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        # No refresh of failures here: the manager's supervisor records them every second, and
        # asking each running query (a JVM call per branch, under the manager's lock) made
        # SHOW JOBS from many clients at once queue behind each other.
        counts = self.catalog.reject_counts() if self.catalog is not None else {}
        lates = self.catalog.late_counts() if self.catalog is not None else {}
        # A run's lag is read from its folder; only when some mapping's type tells one (SHOW JOBS
        # over a hundred jobs stays a few milliseconds without Kafka).
        lags = self.catalog is not None and any(lag.tells_lag(m.type) for m in self.catalog.mappings())
        jobs = self.catalog.jobs() if self.catalog is not None else []
        waiting = self.manager.sinks_waiting() if self.manager is not None else {}
        # Where jobs run: asked of Spark (on a cluster, its monitoring API) only when one runs here.
        place = self._placement() if any(self._runs_here(j) for j in jobs) else None
        rows = tuple(
            (j.name, j.status, j.snapshot, j.created.replace(microsecond=0), counts.get(j.name.lower(), 0))
            + (lates.get(j.name.lower(), 0),)
            + (
                describe.detail_text(j.detail, waiting.get(j.name.lower())),
                describe.lag_text(self._lags(j)) if lags else None,
            )
            + ((place.where(), place.ui) if place is not None and self._runs_here(j) else (None, None))
            for j in jobs
        )
        columns: tuple[str, ...] = ("name", "status", "from_snapshot", "created", "rejects", "late", "detail")
        columns += ("lag", "runs_on", "spark_ui")
        message = f"{len(rows)} job(s)"
        problem = self.manager.supervisor_problem if self.manager is not None else None
        warnings: tuple[str, ...] = ()
        if problem:
            warnings = (f"WARNING: {problem}; see the log in <home>/logs",)
            message += "\n" + warnings[0]
        return Result(message, columns, rows, warnings)

    def _describe_job(self, node: nodes.DescribeJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if self.manager is None and name.lower() in self._overlay_jobs:
            if self._overlay_jobs[name.lower()] is None:
                raise self._unknown("job", name)
            return Result(f"job '{name}'")  # created earlier in the checked files: no run to show
        job = self.catalog.listed_job(name) if self.catalog is not None else None
        if job is None or self.catalog is None:
            raise self._unknown("job", name)
        # As SHOW JOBS: no refresh of failures, rejects or late rows here. The supervisor records
        # them every second (AWAIT JOB, SUSPEND and DROP too); doing it here, under the manager's
        # locks, queued DESCRIBE JOB from many clients behind each other (bench/server.py).
        run, plan = self._run_and_plan(job)
        place = self._placement() if self._runs_here(job) else None
        waiting = self.manager.sinks_waiting().get(job.name.lower()) if self.manager is not None else None
        rows = describe.describe_job(
            job,
            run,
            plan,
            self.catalog.reject_summary(job.name),
            self._lags(job, (run, plan)),
            waiting,
            place,
            self.catalog.late_summary(job.name),
        )
        return Result(f"job '{job.name}'", ("property", "value"), rows)

    def _placement(self) -> Placement | None:
        """Where this process's jobs run (None before Spark starts, or with no manager)."""
        if self.manager is None:
            return None
        try:
            return self.manager.placement()
        except Exception:  # noqa: BLE001 - a listing shows what it can
            log.warning("cannot tell where jobs run", exc_info=True)
            return None

    def _run_and_plan(self, job: Job) -> tuple[Run, JobPlan]:
        assert self.catalog is not None
        run = self.catalog.listed_run(job.run_id)
        return run, JobPlan.from_json(run.plan)

    def _runs_here(self, job: Job) -> bool:
        return self.manager is not None and job.status == RUNNING and job.name.lower() in self.manager.runs

    def _lags(self, job: Job, read: tuple[Run, JobPlan] | None = None) -> list[tuple[str, str]]:
        """Each source's lag, for SHOW JOBS and DESCRIBE JOB (from the run's folder; a run that
        cannot be read shows none, it does not fail the listing). ``read``: the job's run and
        plan, when the caller has them."""
        assert self.catalog is not None
        try:
            run, plan = read if read is not None else self._run_and_plan(job)
            mappings = {m.name: m for m in (self.catalog.listed_mapping(src) for src in plan.sources) if m}
            return lag.source_lags(run, plan, mappings)
        except Exception:  # noqa: BLE001 - a listing shows what it can
            log.warning("job '%s': cannot tell its sources' lag", job.name, exc_info=True)
            return []
