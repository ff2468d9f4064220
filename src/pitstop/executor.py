"""One statement in, one result out: the single execution path of the CLI, shell and server."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from pitstop import describe, dsn, settings
from pitstop.catalog import diffs
from pitstop.catalog.rows import RUNNING, ColumnDef, Job, Mapping, Snapshot, View, WatermarkDef
from pitstop.catalog.store import now
from pitstop.connectors import registry
from pitstop.connectors.rollback import SinkRollback
from pitstop.engine import lag
from pitstop.errors import (
    BadNameError,
    CatalogError,
    DuplicateObjectError,
    NotSupportedError,
    PitstopError,
    PlanError,
    UnknownObjectError,
    UnknownOptionError,
    subject_offset,
)
from pitstop.intervals import interval_micros
from pitstop.names import within
from pitstop.plan.model import AggregateStage, JobPlan
from pitstop.plan.types import spark_type
from pitstop.planner import compat, early
from pitstop.planner import late as late_rows
from pitstop.planner.build import plan_job
from pitstop.replay import sandbox as replay_sandbox
from pitstop.replay import span as replay_span
from pitstop.snapshots import state
from pitstop.snapshots.restore import RESTORE_FORMATS, Restore, check_compatible, plan_restore
from pitstop.snapshots.rollback import (
    batches_past,
    cut_of,
    cut_text,
    cut_texts,
    plan_rollback,
    refuse_if_blocked,
    rolled_back_past,
)
from pitstop.spelling import close_name
from pitstop.sql import nodes, statements
from pitstop.sql.parser import (
    REFUSED_NAME,
    ParsedStatement,
    name_of,
    option_dict,
    parse_script,
    parse_script_all,
    parse_statement,
)
from pitstop.stages import registry as kinds

if TYPE_CHECKING:
    from pitstop.catalog.store import Catalog
    from pitstop.engine.cluster import Placement
    from pitstop.manager import Manager

log = logging.getLogger(__name__)

# Hazelcast's job options; pitstop acts on the ones with a meaning here and accepts the others.
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
DEFAULT_AWAIT_S = 600.0
REPLAY_TIMEOUT_S = 3600.0
_UNTIL_ONLY = (
    "UNTIL SNAPSHOT ends the replay of EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s UNTIL SNAPSHOT t "
    "AS ...; a job itself runs on: leave UNTIL out"
)
SESSION_SETTINGS = {
    "trigger_ms": "how often jobs started from now on look for new input, in milliseconds",
    "await_timeout_s": "how long AWAIT JOB waits when it names no TIMEOUT, in seconds",
}


@dataclass(frozen=True)
class CheckedSnapshot:
    """Check mode: a snapshot that an earlier statement of the checked files takes (CREATE
    SNAPSHOT, DROP JOB ... WITH SNAPSHOT). It has no state yet; its stages are the plan of the
    job it belongs to, as that job stands at that statement."""

    name: str
    job: str
    plan: JobPlan


@dataclass(frozen=True)
class Result:
    message: str = "OK"
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    warnings: tuple[str, ...] = ()
    """The lines of ``message`` that warn (a client of the server gets them as WARNING notices,
    the others as NOTICE)."""

    @property
    def has_rows(self) -> bool:
        return bool(self.columns)


def positioned(err: PitstopError, stmt: ParsedStatement, file: str | None = None) -> PitstopError:
    """Give an error the statement's position (syntax errors keep their own, finer one)."""
    if err.line is not None:
        return err
    lines = stmt.text.split("\n")
    shown = "\n" not in err.message  # a message of several lines shows no source line
    offset = subject_offset(stmt.text, err.subject)
    if offset is None:  # at the statement's start
        return err.at(stmt.line, stmt.col, lines[0] if shown else None, file)
    before = stmt.text[:offset]
    n = before.count("\n")
    if n == 0:  # under the name the error is about
        return err.at(stmt.line, stmt.col + offset, " " * (stmt.col - 1) + lines[0] if shown else None, file)
    return err.at(stmt.line + n, offset - before.rfind("\n"), lines[n] if shown else None, file)


class Executor:
    """Runs statements against a manager (``manager=None``: plan and check only, change nothing)."""

    def __init__(self, manager: Manager | None, catalog: Catalog | None = None) -> None:
        self.manager = manager
        self.catalog = manager.catalog if manager is not None else catalog
        # Check mode: what the statements checked so far would have created (None: dropped),
        # keyed by lower-case name; it hides the catalog's entry of the same name.
        self._overlay: dict[str, Mapping | None] = {}
        self._overlay_jobs: dict[str, JobPlan | None] = {}
        self._overlay_snapshots: dict[str, CheckedSnapshot | None] = {}
        self._overlay_views: dict[str, exp.Query | None] = {}
        self._dropped: dict[tuple[str, str], str] = {}  # (kind, name) -> "line 7 of a.sql"
        self._file: str | None = None  # the file being checked
        self.session: dict[str, str] = {}  # SET 'key' = 'value'
        self.cancelled: Callable[[], bool] | None = None

    # -- scripts -----------------------------------------------------------------------------------
    def run_script(self, text: str, file: str | None = None) -> Iterator[tuple[ParsedStatement, Result]]:
        """Parse the whole script first (a malformed script changes nothing), then run in order."""
        self._file = file
        for stmt in parse_script(text, file):
            try:
                yield stmt, self.execute(stmt)
            except PitstopError as err:
                raise positioned(err, stmt, file) from None

    def check_script(self, text: str, file: str | None = None) -> tuple[int, list[PitstopError]]:
        """Check mode over a whole script: every error, not only the first. Returns the number of
        statements that passed and the errors in script order."""
        parsed, errors = parse_script_all(text, file)
        self._file = file
        found: list[PitstopError] = list(errors)
        ok = 0
        for stmt in parsed:
            try:
                self.execute(stmt)
                ok += 1
            except PitstopError as err:
                found.append(positioned(err, stmt, file))
        found.sort(key=lambda e: (e.line or 0, e.col or 0))
        return ok, found

    def execute(self, stmt: ParsedStatement) -> Result:
        kind = statements.kind_of(stmt.node)
        if kind is None:
            raise NotSupportedError(f"statement {type(stmt.node).__name__} is not supported yet")
        handler: Callable[[Any, ParsedStatement], Result] = getattr(self, kind.handler)
        self._refuse_unknown_bad_name(stmt)
        if self.manager is None:
            return handler(stmt.node, stmt)
        with self.manager.names.hold(changed_names(stmt.node)):
            return handler(stmt.node, stmt)

    def _refuse_unknown_bad_name(self, stmt: ParsedStatement) -> None:
        """A DROP or DESCRIBE whose name the name rule refuses goes on only if the catalog holds
        an object of exactly that name (one an older pitstop created); otherwise the parser's
        refusal stands, positioned in the script (:data:`pitstop.sql.parser.EXISTING_NAME_ARGS`)."""
        refused = stmt.node.meta.get(REFUSED_NAME)
        if not isinstance(refused, BadNameError):
            return
        node, name = stmt.node, name_of(stmt.node.this)
        if isinstance(node, nodes.DropJob | nodes.DescribeJob):
            found = self._job_plan(name) is not None
        elif isinstance(node, nodes.DropSnapshot | nodes.DescribeSnapshot):
            found = self._find_snapshot(name) is not None
        elif isinstance(node, nodes.DropView):
            found = self._view_exists(name)
        else:
            found = self._lookup(name) is not None
        if found:
            log.info("%s: an existing object whose name the name rule refuses", stmt.text)
            return
        inner_line, inner_col = refused.line or 1, refused.col or 1
        line = stmt.line + inner_line - 1
        col = stmt.col + inner_col - 1 if inner_line == 1 else inner_col
        shown = stmt.text.split("\n")[inner_line - 1]
        source_line = " " * (stmt.col - 1) + shown if inner_line == 1 else shown
        raise BadNameError(refused.message).at(line, col, source_line, self._file)

    # -- mappings ----------------------------------------------------------------------------------
    def _lookup(self, name: str) -> Mapping | None:
        key = name.lower()
        if key in self._overlay:
            return self._overlay[key]
        return None if self.catalog is None else self.catalog.get_mapping(name)

    def _create_mapping(self, node: nodes.CreateMapping, stmt: ParsedStatement) -> Result:
        mapping = mapping_from_node(node, stmt.text)
        exists = self._lookup(mapping.name) is not None
        if exists and node.args.get("exists"):
            return Result(f"mapping '{mapping.name}' already exists; left as it is")
        if exists and not node.args.get("replace"):
            raise DuplicateObjectError(
                f"mapping '{mapping.name}' already exists; use CREATE OR REPLACE MAPPING to change it"
            )
        if self.manager is None:
            self._overlay[mapping.name.lower()] = mapping
            return Result("OK")
        assert self.catalog is not None
        self.catalog.put_mapping(mapping, replace=exists)
        registry.connector(mapping.type).created(mapping)
        return Result(f"mapping '{mapping.name}' {'replaced' if exists else 'created'}")

    def _drop_mapping(self, node: nodes.DropMapping, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        mapping = self._lookup(name)
        if mapping is None:
            if node.args.get("exists"):
                return Result(f"mapping '{name}' does not exist; nothing dropped")
            raise self._unknown("mapping", name)
        jobs = {j.name.lower(): j.name for j in (self.catalog.jobs() if self.catalog is not None else [])}
        jobs.update({k: k for k in self._overlay_jobs})
        for job_name in jobs.values():
            plan = self._job_plan(job_name)
            if plan is None:
                continue
            used = {m.lower() for b in plan.branches for m in b.mappings}
            if name.lower() in used:
                raise CatalogError(
                    f"mapping '{mapping.name}' is used by job '{job_name}'; drop the job first"
                )
        if self.manager is None:
            self._overlay[name.lower()] = None
            return Result("OK")
        assert self.catalog is not None
        self.catalog.drop_mapping(mapping.name)
        return Result(f"mapping '{mapping.name}' dropped")

    def _show_mappings(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        rows = []
        for m in self.catalog.mappings() if self.catalog is not None else []:
            cols = ", ".join(f"{c.name} {c.type}" for c in m.columns)
            shown = (
                registry.connector(m.type).shown_options(m.options) if registry.find(m.type) else m.options
            )
            opts = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
            rows.append((m.name, registry.display_name(m.type), cols, opts))
        return Result(f"{len(rows)} mapping(s)", ("name", "type", "columns", "options"), tuple(rows))

    # -- views -------------------------------------------------------------------------------------
    def _view(self, name: str) -> exp.Query | None:
        key = name.lower()
        if key in self._overlay_views:
            return self._overlay_views[key]
        view = self.catalog.get_view(name) if self.catalog is not None else None
        if view is None:
            return None
        node = parse_statement(view.sql)
        assert isinstance(node, nodes.CreateView)
        query = node.expression
        assert isinstance(query, exp.Query)
        return query

    def _create_view(self, node: nodes.CreateView, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        exists = self._view(name) is not None
        if exists and node.args.get("exists"):
            return Result(f"view '{name}' already exists; left as it is")
        if exists and not node.args.get("replace"):
            raise DuplicateObjectError(
                f"view '{name}' already exists; use CREATE OR REPLACE VIEW to change it"
            )
        if self._lookup(name) is not None:
            raise CatalogError(f"'{name}' is a mapping; give the view another name")
        # A view must be readable by a job: plan it as the input of a stateless job now.
        quoted = exp.to_identifier(name, quoted=True).sql()  # "Daily Revenue" is a view name too
        probe = parse_statement(f"CREATE JOB __probe AS INSERT INTO __probe_sink SELECT * FROM {quoted}")
        sink = Mapping("__probe_sink", "console", (), None)
        query = node.expression

        def views(view_name: str) -> exp.Query | None:
            return query if view_name.lower() == name.lower() else self._view(view_name)

        def mappings(mapping_name: str) -> Mapping | None:
            return sink if mapping_name.lower() == "__probe_sink" else self._lookup(mapping_name)

        assert isinstance(probe, nodes.CreateJob)
        plan_job(name, list(probe.args["body"]), mappings, views)
        if self.manager is None:
            self._overlay_views[name.lower()] = query
            return Result("OK")
        assert self.catalog is not None
        self.catalog.put_view(View(name, stmt.text, now()), replace=exists)
        return Result(f"view '{name}' {'replaced' if exists else 'created'}")

    def _view_exists(self, name: str) -> bool:
        """Without parsing the view's SQL (a view an older pitstop named outside the rule)."""
        if name.lower() in self._overlay_views:
            return self._overlay_views[name.lower()] is not None
        return self.catalog is not None and self.catalog.get_view(name) is not None

    def _drop_view(self, node: nodes.DropView, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if not self._view_exists(name):
            if node.args.get("exists"):
                return Result(f"view '{name}' does not exist; nothing dropped")
            names = [v.name for v in self.catalog.views()] if self.catalog is not None else []
            raise UnknownObjectError(
                f"unknown view '{name}'{close_name(name, names)}; SHOW VIEWS lists the views"
            )
        if self.manager is None:
            self._overlay_views[name.lower()] = None
            return Result("OK")
        assert self.catalog is not None
        self.catalog.drop_view(name)
        return Result(f"view '{name}' dropped")

    def _show_views(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        rows = tuple((v.name, v.sql) for v in (self.catalog.views() if self.catalog is not None else []))
        return Result(f"{len(rows)} view(s)", ("name", "definition"), rows)

    # -- session settings ----------------------------------------------------------------------------
    def _set(self, node: nodes.SetOption, stmt: ParsedStatement) -> Result:
        key, value = node.this.name, node.expression.name
        if key not in SESSION_SETTINGS:
            if key.startswith("execution.savepoint"):
                raise PlanError(
                    f"'{key}' is Flink's; pitstop starts jobs from snapshots with "
                    "CREATE JOB ... FROM SNAPSHOT name"
                )
            raise UnknownOptionError(
                f"unknown setting '{key}'{close_name(key, list(SESSION_SETTINGS))}; known settings: "
                + ", ".join(f"{k} ({v})" for k, v in SESSION_SETTINGS.items())
            )
        if key == "trigger_ms":  # as PITSTOP_TRIGGER_MS takes it (pitstop.settings)
            try:
                trigger_ms = settings.parse(key, value, f"setting '{key}'")
            except PitstopError as err:
                raise PlanError(err.message) from None
            if self.manager is not None:
                self.manager.settings = replace(self.manager.settings, trigger_ms=trigger_ms)
        else:
            try:
                number = float(value)
            except ValueError:
                number = -1
            if not 0 < number < float("inf"):
                raise PlanError(f"setting '{key}' takes a positive number, got '{value}'")
        self.session[key] = value
        return Result(f"{key} = {value}")

    # -- jobs --------------------------------------------------------------------------------------
    def _job_plan(self, name: str) -> JobPlan | None:
        """The plan of an existing job (check mode: as created earlier in the checked script)."""
        key = name.lower()
        if key in self._overlay_jobs:
            return self._overlay_jobs[key]
        if self.catalog is None:
            return None
        job = self.catalog.get_job(name)
        return None if job is None else JobPlan.from_json(self.catalog.get_run(job.run_id).plan)

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

    def _create_job(self, node: nodes.CreateJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if node.args.get("until"):
            raise PlanError(_UNTIL_ONLY)
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
            gap = None if _flag(options, "acceptSinkGap") else rolled_back_past(self.catalog, snap)
            if gap is not None:
                raise PlanError(f"job '{name}' was not created: {gap}")
            if _flag(options, "sinkRollback"):
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

    def _plan_restore(self, snap: Snapshot, plan: JobPlan, options: dict[str, str]) -> Restore:
        strict = options.get("strictRestore", "false").lower() == "true"
        partitions = self.manager.shuffle_partitions if self.manager is not None else None
        fmt = options.get("restoreFormat", "auto").lower()
        return plan_restore(snap, plan, strict, partitions, fmt, self._lookup)

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

    def _placement(self) -> Placement | None:
        """Where this process's jobs run (None before Spark starts, or with no manager)."""
        if self.manager is None:
            return None
        try:
            return self.manager.placement()
        except Exception:  # noqa: BLE001 - a listing shows what it can
            log.warning("cannot tell where jobs run", exc_info=True)
            return None

    def _runs_here(self, job: Job) -> bool:
        return self.manager is not None and job.status == RUNNING and job.name.lower() in self.manager.runs

    def _lags(self, job: Job) -> list[tuple[str, str]]:
        """Each source's lag, for SHOW JOBS and DESCRIBE JOB (from the run's folder; a run that
        cannot be read shows none, it does not fail the listing)."""
        assert self.catalog is not None
        try:
            run = self.catalog.get_run(job.run_id)
            plan = JobPlan.from_json(run.plan)
            mappings = {m.name: m for m in (self.catalog.get_mapping(src) for src in plan.sources) if m}
            return lag.source_lags(run, plan, mappings)
        except Exception:  # noqa: BLE001 - a listing shows what it can
            log.warning("job '%s': cannot tell its sources' lag", job.name, exc_info=True)
            return []

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

    # -- snapshots ---------------------------------------------------------------------------------
    def _show_snapshots(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        listing = self.catalog.snapshot_listing() if self.catalog is not None else []
        cuts = self._cut_texts() if listing else {}
        rows = tuple(
            (created.replace(microsecond=0), size, job, name, count, cuts.get(name.lower()))
            for created, size, job, name, count in listing
        )
        return Result(
            f"{len(rows)} snapshot(s)",
            ("time", "size_bytes", "job_name", "snapshot_name", "state_rows", "cut"),
            rows,
        )

    def _cut_text(self, name: str) -> str | None:
        """Whether a snapshot is its job's latest cut (read where a manager owns the home)."""
        if self.manager is None or self.catalog is None:
            return None
        catalog = self.catalog

        def read() -> str | None:
            snap = catalog.get_snapshot(name)
            return None if snap is None else cut_text(catalog, snap)

        # Many clients may list the snapshots at once (a server): read once a second at most.
        return str(catalog.cached_for(f"cut:{name.lower()}", read, 1.0) or "") or None

    def _cut_texts(self) -> dict[str, str]:
        """:meth:`_cut_text` of every snapshot (by lower-case name), read together."""
        if self.manager is None or self.catalog is None:
            return {}
        catalog = self.catalog
        texts: dict[str, str] = catalog.cached_for(
            "cut:*", lambda: cut_texts(catalog, catalog.snapshots()), 1.0
        )
        return texts

    def _drop_snapshot(self, node: nodes.DropSnapshot, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        snap = self._find_snapshot(name)
        if snap is None:
            if node.args.get("exists"):
                return Result(f"snapshot '{name}' does not exist; nothing dropped")
            raise self._unknown("snapshot", name)
        if self.manager is None:
            self._overlay_snapshots[name.lower()] = None
            self._dropped[("snapshot", name.lower())] = self._where(stmt)
            return Result("OK")
        assert isinstance(snap, Snapshot)
        self.manager.drop_snapshot(snap.name)
        return Result(f"snapshot '{snap.name}' dropped" + self._left_outside(snap.path, "snapshots"))

    def _left_outside(self, folder: str, root: str) -> str:
        """What a DROP says of a folder it did not delete: one outside ``<home>/<root>``, which an
        older pitstop made from a name the rule now refuses (:meth:`Manager._remove`)."""
        assert self.manager is not None
        if within(self.manager.home / root, folder) or not Path(folder).exists():
            return ""
        return (
            f"; its folder {folder} lies outside {self.manager.home / root}, so pitstop left it in "
            "place: delete it yourself once nothing else uses it"
        )

    def _create_snapshot(self, node: nodes.CreateSnapshot, stmt: ParsedStatement) -> Result:
        name, job = name_of(node.this), name_of(node.args["job"])
        plan = self._job_plan(job)
        if plan is None:
            raise self._unknown("job", job)
        if self.manager is None:
            existing = self._find_snapshot(name)
            if existing is not None and not node.args.get("replace"):
                raise DuplicateObjectError(
                    f"snapshot '{existing.name}' already exists; use CREATE OR REPLACE SNAPSHOT to replace it"
                )
            self._overlay_snapshots[name.lower()] = CheckedSnapshot(name, job, plan)
            self._dropped.pop(("snapshot", name.lower()), None)
            return Result("OK")
        snap = self.manager.create_snapshot(job, name, bool(node.args.get("replace")), self.cancelled)
        return Result(
            f"snapshot '{snap.name}' of job '{snap.job}' created ({snap.rows} state rows, "
            f"{snap.size_bytes:,} bytes); the job goes on"
        )

    def _describe_snapshot(self, node: nodes.DescribeSnapshot, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        snap = self._find_snapshot(name)
        if snap is None:
            raise self._unknown("snapshot", name)
        if isinstance(snap, CheckedSnapshot):
            rows = (("name", snap.name), ("job", snap.job), ("state", "taken earlier in the checked files"))
            return Result(f"snapshot '{snap.name}'", ("property", "value"), rows)
        described = describe.describe_snapshot(snap)
        cut = self._cut_text(snap.name)
        if cut is not None:
            described += (("cut", cut),)
        return Result(f"snapshot '{snap.name}'", ("property", "value"), described)

    def _describe_job(self, node: nodes.DescribeJob, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if self.manager is None and name.lower() in self._overlay_jobs:
            if self._overlay_jobs[name.lower()] is None:
                raise self._unknown("job", name)
            return Result(f"job '{name}'")  # created earlier in the checked files: no run to show
        job = self.catalog.get_job(name) if self.catalog is not None else None
        if job is None or self.catalog is None:
            raise self._unknown("job", name)
        if self.manager is not None and self.manager.spark_started:
            self.manager.refresh_failures()
            self.manager.collect_all_rejects()
            self.manager.collect_all_late()
            job = self.catalog.get_job(name) or job
        run = self.catalog.get_run(job.run_id)
        plan = JobPlan.from_json(run.plan)
        place = self._placement() if self._runs_here(job) else None
        waiting = self.manager.sinks_waiting().get(job.name.lower()) if self.manager is not None else None
        rows = describe.describe_job(
            job,
            run,
            plan,
            self.catalog.reject_summary(job.name),
            self._lags(job),
            waiting,
            place,
            self.catalog.late_summary(job.name),
        )
        return Result(f"job '{job.name}'", ("property", "value"), rows)

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

    def _explain(self, node: nodes.Explain, stmt: ParsedStatement) -> Result:
        inner = node.this
        if not isinstance(inner, nodes.CreateJob):
            raise PlanError(
                "EXPLAIN explains CREATE JOB statements: "
                "EXPLAIN [ANALYZE] CREATE JOB j [FROM SNAPSHOT s] AS ..."
            )
        if inner.args.get("until"):
            raise PlanError(_UNTIL_ONLY)
        return self._explain_plan(inner)

    def _explain_analyze(self, node: nodes.ExplainAnalyze, stmt: ParsedStatement) -> Result:
        """EXPLAIN ANALYZE: the plain EXPLAIN's verdicts, then the replay of the job's input since
        the snapshot through the new SQL and the job's own, and their diff (:mod:`pitstop.replay`)."""
        inner = node.this
        if not isinstance(inner, nodes.CreateJob):
            raise PlanError(
                "EXPLAIN ANALYZE replays a job's input through a changed job: "
                "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s [UNTIL SNAPSHOT t] AS ..."
            )
        name = name_of(inner.this)
        if not inner.args.get("snapshot"):
            raise PlanError(
                "EXPLAIN ANALYZE replays what a job read after a snapshot through the new SQL: "
                "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s [UNTIL SNAPSHOT t] AS ..."
            )
        snapshot_name = name_of(inner.args["snapshot"])
        until_name = name_of(inner.args["until"]) if inner.args.get("until") else None
        if until_name is not None and self._find_snapshot(until_name) is None:
            raise self._unknown("snapshot", until_name)
        explained = self._explain_plan(inner)
        # A stage refused stops the replay; a sink gap does not (a replay writes no sink).
        if any(r[7] == compat.REFUSED and r[3] is not None for r in explained.rows):
            return replace(explained, message=explained.message + "; nothing was replayed")
        snap = self._find_snapshot(snapshot_name)
        if self.manager is None or self.catalog is None or not isinstance(snap, Snapshot):
            return explained  # check mode: the statement is valid; nothing to replay yet
        plan, _, options = self._plan_create(inner)
        restore = self._plan_restore(snap, plan, options)
        catalog, manager = self.catalog, self.manager
        until: replay_span.Until | Callable[[Path], replay_span.Until]
        if until_name is not None:
            later = catalog.get_snapshot(until_name)
            assert later is not None
            until = replay_span.of_snapshot(later)
        else:
            job = catalog.get_job(name) or catalog.get_job(snap.job)
            if job is None:
                raise PlanError(
                    f"no job '{name}' (nor '{snap.job}', whose snapshot '{snap.name}' is) to replay the "
                    f"input of up to where it stands: add UNTIL SNAPSHOT t, a later snapshot of it"
                )
            live = JobPlan.from_json(catalog.get_run(job.run_id).plan)
            until = partial(replay_span.of_job, catalog, job, manager.mappings_of(live))
        analysis = replay_sandbox.analyze(
            manager, plan, restore, snap, until, REPLAY_TIMEOUT_S, self.cancelled
        )
        tables = {d.sink: d.table for d in analysis.diffs}
        tables |= {s.diff.sink: s.diff.table for s in analysis.states}
        kept, diff_name = diffs.keep(catalog, plan.job, tables)
        rows = list(explained.rows)
        rows += [
            (None, src, None, None, None, None, None, "replayed", note) for src, note in analysis.sources
        ]
        for d in analysis.diffs:
            where = f"; rows in {kept[d.sink]}" if d.sink in kept else ""
            rows.append(
                (
                    None,
                    None,
                    d.sink,
                    None,
                    None,
                    None,
                    None,
                    "same" if d.same else "differs",
                    d.text() + where,
                )
            )
        for st in analysis.states:
            where = f"; rows in {kept[st.diff.sink]}" if st.diff.sink in kept else ""
            outcome = "state same" if st.diff.same else "state differs"
            rows.append((None, None, None, st.diff.sink, None, None, None, outcome, st.text() + where))
        differ = [d.sink for d in analysis.diffs if not d.same]
        verdict = (
            f"{len(differ)} of {len(analysis.diffs)} sink(s) differ ({', '.join(differ)})"
            if differ
            else f"every sink ({len(analysis.diffs)}) the same"
        )
        message = (
            f"EXPLAIN ANALYZE CREATE JOB {name} from snapshot '{snap.name}' up to {analysis.until}: "
            f"{verdict}; nothing was started, no sink written. The rows that differ are kept as diff "
            f"'{diff_name}' (tables diff.{diff_name}_<sink>; DROP DIFF {diff_name} drops them)"
        )
        return Result(message, describe.EXPLAIN_COLUMNS, tuple(rows))

    def _drop_diff(self, node: nodes.DropDiff, stmt: ParsedStatement) -> Result:
        name = name_of(node.this)
        if self.manager is None or self.catalog is None:
            return Result("OK")
        dropped = diffs.drop(self.catalog, name)
        if not dropped:
            if node.args.get("exists"):
                return Result(f"diff '{name}' does not exist; nothing dropped")
            known = diffs.names(self.catalog)
            kept = ", ".join(known) or "none"
            raise UnknownObjectError(
                f"unknown diff '{name}'{close_name(name, known)}; the diffs kept: {kept}"
            )
        return Result(f"diff '{name}' dropped ({len(dropped)} table(s))")

    def _explain_plan(self, inner: nodes.CreateJob) -> Result:
        name = name_of(inner.this)
        plan, snapshot_name, options = self._plan_create(inner)
        verdicts = None
        notes: tuple[tuple[str, str], ...] = ()
        sinks: tuple[tuple[Any, ...], ...] = ()
        gap: str | None = None
        if snapshot_name is not None:
            strict = options.get("strictRestore", "false").lower() == "true"
            old = self._snapshot_stages(snapshot_name)
            verdicts = compat.check(old, plan, strict)
            snap = self._find_snapshot(snapshot_name)
            if isinstance(snap, Snapshot) and not compat.refused(verdicts):
                restore = self._plan_restore(snap, plan, options)
                verdicts, notes = list(restore.verdicts), restore.source_notes  # how each is restored
            if isinstance(snap, Snapshot) and self.manager is not None:
                rolls = _flag(options, "sinkRollback")
                running = self._still_running(snap) if rolls else None
                past = batches_past(self.catalog, snap) if self.catalog is not None else None
                sinks = describe.rollback_rows(
                    snap.name, self._rollback_plan(snap), rolls, plan, running, past
                )
                if self.catalog is not None and not _flag(options, "acceptSinkGap"):
                    gap = rolled_back_past(self.catalog, snap)
                if gap is not None:
                    sinks = (describe.gap_row(gap), *sinks)
            if isinstance(snap, Snapshot):
                sinks = (*sinks, *describe.unwritten_rows(snap.manifest.get("plan"), plan))
        rows = describe.explain_rows(plan, verdicts) + describe.source_rows(notes) + sinks
        refused = [v for v in verdicts or [] if v.outcome == compat.REFUSED]
        source = f" from snapshot '{snapshot_name}'" if snapshot_name else ""
        if gap is not None:
            message = f"CREATE JOB {name}{source} would be refused (its sinks); nothing was started"
        elif refused:
            message = (
                f"CREATE JOB {name}{source} would be refused ({len(refused)} stage(s)); nothing was started"
            )
        else:
            message = (
                f"CREATE JOB {name}{source} would start {len(plan.branches)} branch(es); nothing was started"
            )
        return Result(message, describe.EXPLAIN_COLUMNS, rows)

    def _find_snapshot(self, name: str) -> Snapshot | CheckedSnapshot | None:
        """The snapshot of that name (check mode: as the statements checked so far leave it)."""
        key = name.lower()
        if key in self._overlay_snapshots:
            return self._overlay_snapshots[key]
        return None if self.catalog is None else self.catalog.get_snapshot(name)

    def _snapshot_stages(self, snapshot_name: str) -> dict[str, AggregateStage]:
        snap = self._find_snapshot(snapshot_name)
        if snap is None:
            raise self._unknown("snapshot", snapshot_name)
        if isinstance(snap, CheckedSnapshot):
            return {s.name: s for s in snap.plan.stages}
        return kinds.manifest_stages(snap.name, snap.manifest)

    def _where(self, stmt: ParsedStatement) -> str:
        return f"line {stmt.line}" + (f" of {self._file}" if self._file else "")

    def _unknown(self, kind: str, name: str) -> CatalogError:
        """``unknown job 'x'`` with a "did you mean" from the catalog's names."""
        names: list[str] = []
        overlay: dict[str, Any]
        if kind == "job":
            names = [j.name for j in self.catalog.jobs()] if self.catalog is not None else []
            overlay = self._overlay_jobs
        elif kind == "snapshot":
            names = self.catalog.snapshot_names() if self.catalog is not None else []
            overlay = self._overlay_snapshots
        else:
            names = [m.name for m in self.catalog.mappings()] if self.catalog is not None else []
            overlay = self._overlay
        names = [n for n in names if overlay.get(n.lower(), n) is not None]  # not dropped earlier
        names += [k for k, v in overlay.items() if v is not None]
        where = self._dropped.get((kind, name.lower()))
        if where is not None:
            return UnknownObjectError(
                f"unknown {kind} '{name}': it is dropped at {where}, earlier in the checked files; "
                "use it before that statement or create it again"
            )
        listing = {"job": "SHOW JOBS", "snapshot": "SHOW SNAPSHOTS", "mapping": "SHOW MAPPINGS"}[kind]
        return UnknownObjectError(
            f"unknown {kind} '{name}'{close_name(name, names)}; {listing} lists the {kind}s"
        )

    # -- ad-hoc queries ----------------------------------------------------------------------------
    def _select(self, node: exp.Expression, stmt: ParsedStatement) -> Result:
        if self.manager is None:  # check mode: the snapshots and stages snapshot_state names exist
            for call in state.calls(stmt.text) if state.mentions(stmt.text) else []:
                stages = self._snapshot_stages(call.snapshot)
                if call.stage.lower() not in {s.lower() for s in stages}:
                    known = ", ".join(f"'{s}'" for s in sorted(stages)) or "none"
                    raise CatalogError(
                        f"snapshot '{call.snapshot}' has no stage '{call.stage}'; its stages: {known}"
                    )
            return Result("OK")
        import duckdb

        assert self.catalog is not None
        # snapshot_state('s', 'stage'): tables pitstop reads for the query (pitstop.snapshots.state).
        sql, tables = state.resolve(stmt.text, self.catalog)
        try:
            columns, rows = self.catalog.query(sql, tables)
        except duckdb.Error as exc:
            raise PlanError(f"query failed in DuckDB: {exc}") from exc
        return Result(f"{len(rows)} row(s)", tuple(columns), tuple(tuple(r) for r in rows))


def changed_names(node: exp.Expression) -> list[tuple[str, str]]:
    """``(kind, name)`` of the jobs, snapshots and mappings a statement changes or depends on
    while it runs (views share the mappings' names: one namespace)."""
    out: list[tuple[str, str]] = []
    declared = statements.kind_of(node)
    for kind, arg in declared.changes if declared is not None else ():
        value: Any = node
        for part in arg.split("."):  # "this.snapshot": an argument of the statement's statement
            value = value.args.get(part) if isinstance(value, exp.Expression) else None
        if value is not None:
            out.append((kind, name_of(value)))
    return out


def mapping_from_node(node: nodes.CreateMapping, sql: str) -> Mapping:
    """The mapping a ``CREATE MAPPING`` declares, checked against its type's declaration
    (:mod:`pitstop.connectors.base`): columns, watermark and every option."""
    name = name_of(node.this)
    kind_text = name_of(node.args["kind"])
    connector = registry.find(kind_text)
    if connector is None:
        close = close_name(kind_text, list(registry.TYPE_NAMES))
        raise PlanError(
            f"mapping '{name}': unknown TYPE {kind_text}{close}; "
            f"known types: {', '.join(registry.TYPE_NAMES)}"
        )
    options = connector.check_options(name, option_dict(node.args.get("options")))
    columns: list[ColumnDef] = []
    for cd in node.args.get("columns") or []:
        type_sql = cd.args["kind"].sql("spark")
        try:
            spark_type(type_sql)
        except Exception as exc:  # noqa: BLE001 - sqlglot raises several types
            raise PlanError(f"mapping '{name}': unknown type {type_sql} for column '{cd.name}'") from exc
        if any(c.name.lower() == cd.name.lower() for c in columns):
            raise PlanError(f"mapping '{name}': column '{cd.name}' is declared twice")
        columns.append(ColumnDef(cd.name, type_sql))
    watermark = None
    wm = node.args.get("watermark")
    if wm is not None:
        col = name_of(wm.this)
        declared = next((c for c in columns if c.name.lower() == col.lower()), None)
        if declared is None:
            raise PlanError(f"mapping '{name}': WATERMARK FOR {col}: there is no column '{col}'")
        if spark_type(declared.type) != "TIMESTAMP":
            raise PlanError(
                f"mapping '{name}': WATERMARK FOR {col}: the column is {declared.type}, not TIMESTAMP"
            )
        watermark = WatermarkDef(declared.name, interval_micros(wm.expression))
    connector.check_mapping(name, tuple(columns), options)
    kind = connector.key
    return Mapping(name, kind, tuple(columns), watermark, options, dsn.mask(sql))  # kept without passwords


def _flag(options: dict[str, str], key: str) -> bool:
    """A job option that is 'true' or 'false' (checked when the statement is planned)."""
    return options.get(key, "false").lower() == "true"
