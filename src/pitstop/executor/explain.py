"""EXPLAIN CREATE JOB (the plan and how each stage would restore), EXPLAIN ANALYZE (a replay of
the job's input through the new SQL, :mod:`pitstop.replay`) and DROP DIFF (the rows a replay
kept)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from pitstop import describe
from pitstop.catalog import diffs
from pitstop.catalog.rows import Snapshot
from pitstop.errors import PlanError, UnknownObjectError
from pitstop.executor.base import CheckedSnapshot
from pitstop.executor.planning import UNTIL_ONLY, JobPlanning, flag
from pitstop.executor.results import Result
from pitstop.plan.model import JobPlan
from pitstop.planner import compat
from pitstop.replay import sandbox as replay_sandbox
from pitstop.replay import span as replay_span
from pitstop.snapshots.restore import Restore
from pitstop.snapshots.rollback import batches_past, rolled_back_past
from pitstop.spelling import close_name
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, name_of

REPLAY_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class _Explained:
    """An EXPLAIN's result, with the plan it explains and, from a snapshot it may restore, the
    snapshot and how each stage is restored (what EXPLAIN ANALYZE replays)."""

    result: Result
    plan: JobPlan
    snapshot: Snapshot | None
    restore: Restore | None


class ExplainStatements(JobPlanning):
    """EXPLAIN, EXPLAIN ANALYZE, DROP DIFF."""

    def _explain(self, node: nodes.Explain, stmt: ParsedStatement) -> Result:
        inner = node.this
        if not isinstance(inner, nodes.CreateJob):
            raise PlanError(
                "EXPLAIN explains CREATE JOB statements: "
                "EXPLAIN [ANALYZE] CREATE JOB j [FROM SNAPSHOT s] AS ..."
            )
        if inner.args.get("until"):
            raise PlanError(UNTIL_ONLY)
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
        until_name = name_of(inner.args["until"]) if inner.args.get("until") else None
        if until_name is not None and self._find_snapshot(until_name) is None:
            raise self._unknown("snapshot", until_name)
        # Planned once: the verdicts shown are those of the plan and restore replayed.
        planned = self._explained(inner)
        explained = planned.result
        # A stage refused stops the replay; a sink gap does not (a replay writes no sink).
        if any(r[7] == compat.REFUSED and r[3] is not None for r in explained.rows):
            return replace(explained, message=explained.message + "; nothing was replayed")
        snap, plan, restore = planned.snapshot, planned.plan, planned.restore
        if self.manager is None or self.catalog is None or snap is None or restore is None:
            return explained  # check mode: the statement is valid; nothing to replay yet
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
        rows += [
            (None, m.source, None, None, None, None, None, "not replayed", m.text) for m in analysis.missing
        ]

        def partly(name: str) -> str:
            srcs = analysis.partial.get(name)
            if not srcs:
                return ""
            named = ", ".join(f"'{s}'" for s in srcs)
            return f"; partial: what source {named} no longer holds was not replayed (the rest is compared)"

        rows += [
            (
                None,
                None,
                f.sink,
                None,
                None,
                None,
                None,
                "reproduced" if f.same else "not reproduced",
                f.text(),
            )
            for f in analysis.fidelity
        ]
        for d in analysis.diffs:
            where = partly(d.sink) + (f"; rows in {kept[d.sink]}" if d.sink in kept else "")
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
            where = partly(st.diff.sink) + (f"; rows in {kept[st.diff.sink]}" if st.diff.sink in kept else "")
            outcome = "state same" if st.diff.same else "state differs"
            rows.append((None, None, None, st.diff.sink, None, None, None, outcome, st.text() + where))
        differ = [d.sink for d in analysis.diffs if not d.same]
        verdict = (
            f"{len(differ)} of {len(analysis.diffs)} sink(s) differ ({', '.join(differ)})"
            if differ
            else f"every sink ({len(analysis.diffs)}) the same"
        )
        old = JobPlan.from_json(snap.manifest["plan"])
        if differ and replace(plan, job=old.job).to_json() == old.to_json():
            verdict = (
                f"the new SQL is the job's own, yet {len(differ)} of {len(analysis.diffs)} sink(s) differ "
                f"between two replays of it ({', '.join(differ)}): a non-deterministic expression, not an "
                "update's effect"
            )
        unfaithful = [f.sink for f in analysis.fidelity if not f.same]
        if unfaithful:
            verdict += (
                f"; the job's own SQL, replayed, does not write what the job wrote over the span to sink(s) "
                f"{', '.join(unfaithful)} (see 'not reproduced'): their differences are not the update's "
                "effect alone"
            )
        if analysis.missing:
            lacking = sorted({m.source for m in analysis.missing})
            hit = [d.sink for d in analysis.diffs if d.sink in analysis.partial]
            verdict += (
                f"; partial: {len(analysis.missing)} part(s) of the input of source(s) {', '.join(lacking)} "
                f"are no longer held and were not replayed (see 'not replayed'), so sink(s) "
                f"{', '.join(hit) or 'none'} are compared over the rest of their input only"
            )
        message = (
            f"EXPLAIN ANALYZE CREATE JOB {name} from snapshot '{snap.name}' up to {analysis.until}: "
            f"{verdict}; nothing was started, no sink written. The rows that differ are kept as diff "
            f"'{diff_name}' (tables diff.{diff_name}_<sink>; DROP DIFF {diff_name} drops them)"
        )
        return Result(message, describe.EXPLAIN_COLUMNS, tuple(rows))

    def _explain_plan(self, inner: nodes.CreateJob) -> Result:
        return self._explained(inner).result

    def _explained(self, inner: nodes.CreateJob) -> _Explained:
        name = name_of(inner.this)
        plan, snapshot_name, options = self._plan_create(inner)
        restore: Restore | None = None
        snap: Snapshot | CheckedSnapshot | None = None
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
                rolls = flag(options, "sinkRollback")
                running = self._still_running(snap) if rolls else None
                past = batches_past(self.catalog, snap) if self.catalog is not None else None
                sinks = describe.rollback_rows(
                    snap.name, self._rollback_plan(snap), rolls, plan, running, past
                )
                if self.catalog is not None and not flag(options, "acceptSinkGap"):
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
        snapshot = snap if isinstance(snap, Snapshot) else None
        return _Explained(Result(message, describe.EXPLAIN_COLUMNS, rows), plan, snapshot, restore)

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
