"""What EXPLAIN and DESCRIBE show: plans, stages and snapshots as rows a person can read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pitstop.catalog.rows import Job, LateSummary, RejectSummary, Run, Snapshot
from pitstop.connectors import registry
from pitstop.connectors.rollback import SinkRollback
from pitstop.engine.cluster import Placement
from pitstop.plan.model import EARLY, AggregateStage, Branch, JobPlan, stage_from_json
from pitstop.planner import compat
from pitstop.snapshots.rollback import OPTION
from pitstop.stages import registry as kinds
from pitstop.stages.base import StageText

EXPLAIN_COLUMNS = ("branch", "source", "sink", "stage", "window", "keys", "accumulators", "outcome", "reason")


def stage_text(stage: AggregateStage) -> StageText:
    """What EXPLAIN and DESCRIBE say about a stage: its kind says it."""
    return kinds.kind_of(stage).describe(stage)


def source_cell(b: Branch) -> str:
    """What a branch reads, as EXPLAIN's source column and DESCRIBE JOB's flow say it: its source,
    and a join's other side (a static table is stateless: re-read for every micro-batch)."""
    if b.join is None:
        return b.source
    if b.join.kind == "table":
        how = "LEFT JOIN" if b.join.how == "left" else "JOIN"
        return f"{b.source} {how} table {b.join.right} (static: stateless, read again every micro-batch)"
    return f"{b.source} JOIN stream {b.join.right}"


def source_rows(notes: tuple[tuple[str, str], ...]) -> tuple[tuple[Any, ...], ...]:
    """EXPLAIN's rows for what a restored job reads of each source (outcome ``source``)."""
    return tuple((None, src, None, None, None, None, None, "source", note) for src, note in notes)


def _sink_row(sink: str, outcome: str, reason: str) -> tuple[Any, ...]:
    return (None, None, sink, None, None, None, None, outcome, reason)


def gap_row(reason: str) -> tuple[Any, ...]:
    """EXPLAIN's row refusing a snapshot taken past a cut that the job's sinks were rolled back to
    (:func:`pitstop.connectors.rollback.rolled_back_past`)."""
    return _sink_row("", "refused", reason)


def rollback_rows(
    snapshot: str,
    plans: tuple[SinkRollback, ...],
    enabled: bool,
    new: JobPlan,
    running: str | None,
    past: int | None = None,
) -> tuple[tuple[Any, ...], ...]:
    """EXPLAIN's rows about each sink the snapshot's job wrote after the cut: what
    ``'sinkRollback'='true'`` removes (outcome ``rollback``), or, without it, that the restored job
    writes it again (outcome ``warning``); sinks that cannot be rolled back, and other jobs'
    rows, which are never touched."""
    rows: list[tuple[Any, ...]] = []
    writes = {b.sink.lower() for b in new.branches}
    if enabled and running is not None:
        still = (
            f"job '{running}', which snapshot '{snapshot}' was taken of, still runs; DROP JOB {running} first"
        )
        rows.append(_sink_row("", "refused", still))
    for p in plans:
        again = p.mapping.lower() in writes
        what = p.what()
        if p.unknown:  # what it holds after the cut cannot be told: said when it would block
            if enabled:
                rows.append(_sink_row(p.mapping, "refused", p.note))
            continue
        if not p.possible and not p.anything:
            # A sink that cannot tell what it holds (Kafka): said when it matters, i.e. with the
            # option, or when the job ran past the snapshot (``past`` batches).
            if p.note and p.type_name != "Console" and (enabled or (past or 0) > 0):
                ran = f"job ran {past:,} batch(es) past snapshot '{snapshot}'; " if past else ""
                rows.append(_sink_row(p.mapping, "no rollback" if enabled else "warning", ran + p.note))
            continue
        if not p.possible:
            rows.append(
                _sink_row(
                    p.mapping,
                    "refused" if enabled else "warning",
                    f"{what} of {p.mapping} were written after snapshot '{snapshot}' and cannot be rolled "
                    f"back: {p.note}",
                )
            )
        elif enabled and p.restores:
            rows.append(
                _sink_row(
                    p.mapping,
                    "rollback",
                    f"restores {what} written after snapshot '{snapshot}' to their value at the cut, "
                    f"from the table's before-images ({p.from_runs()})",
                )
            )
        elif enabled and p.anything:
            verb = "moves to the trash" if p.files else "removes"
            tail = "" if again else "; the new job does not write this sink, so they are not written again"
            rows.append(
                _sink_row(
                    p.mapping,
                    "rollback",
                    f"{verb} {what} written after snapshot '{snapshot}' ({p.from_runs()}){tail}",
                )
            )
        elif enabled:
            rows.append(_sink_row(p.mapping, "rollback", f"nothing written after snapshot '{snapshot}'"))
        elif p.anything and again:
            rows.append(
                _sink_row(
                    p.mapping,
                    "warning",
                    f"{what} of {p.mapping} were written after snapshot '{snapshot}'; they will be written "
                    f"again: add '{OPTION}'='true' to replace them ({p.from_runs()})",
                )
            )
        elif p.anything:
            rows.append(
                _sink_row(
                    p.mapping,
                    "warning",
                    f"{what} of {p.mapping} were written after snapshot '{snapshot}'; the new job does not "
                    f"write {p.mapping}, so they stay (add '{OPTION}'='true' to remove them)",
                )
            )
        for job, count in p.others:
            rows.append(
                _sink_row(
                    p.mapping,
                    "shared",
                    f"job '{job}' also writes {p.mapping} ({count:,} row(s)): a rollback touches only the "
                    "rows of this job's runs, never these",
                )
            )
    return tuple(rows)


def rollback_done(p: SinkRollback) -> str:
    """What CREATE JOB says it rolled back in one sink."""
    verb = "moved to the trash" if p.files else "removed"
    if p.restores and not p.rows:
        verb = "restored to their value at the cut"
    elif p.restores:
        verb = "restored to their value at the cut and removed"
    return f"{p.what()} {verb} ({p.from_runs()})"


def early_text(branch: Branch) -> str:
    """What EXPLAIN and DESCRIBE say of a branch's early results (:mod:`pitstop.planner.early`)."""
    if not branch.early_results_ms:
        return ""
    return (
        f" with early results (at most every {branch.early_results_ms} ms; column '{EARLY}' true "
        "until the window closes)"
    )


def explain_rows(plan: JobPlan, verdicts: list[compat.StageVerdict] | None) -> tuple[tuple[Any, ...], ...]:
    """One row per branch (and per snapshot stage the new job drops), with the restore verdict."""
    by_stage = {v.stage: v for v in verdicts or []}
    rows: list[tuple[Any, ...]] = []
    for b in plan.branches:
        if not b.stages:
            rows.append(
                (
                    b.index + 1,
                    source_cell(b),
                    b.sink,
                    None,
                    None,
                    None,
                    None,
                    "stateless",
                    "no state to restore",
                )
            )
            continue
        for st in b.stages:  # a chain of stages: one row each, from source to sink
            v = by_stage.get(st.name)
            outcome = v.outcome if v is not None else compat.EMPTY
            reason = v.detail() if v is not None else "no snapshot: starts empty"
            text = stage_text(st)
            shape = text.shape + (early_text(b) if st is b.stage else "")
            rows.append(
                (b.index + 1, source_cell(b), b.sink, st.name, shape, text.keys, text.state)
                + (outcome, reason)
            )
    names = {s.name for s in plan.stages}
    for v in verdicts or []:
        if v.stage not in names:
            rows.append((None, None, None, v.stage, None, None, None, v.outcome, v.reason))
    return tuple(rows)


def unwritten_columns(old_plan: dict[str, Any] | None, plan: JobPlan) -> list[tuple[str, tuple[str, ...]]]:
    """Per sink the new job writes: the columns the snapshot's job wrote there and the new one
    does not (an aggregate removed at the pit stop). Every row the new job writes has them NULL
    (their default), as an INSERT of its columns would; rows it does not write keep theirs."""
    if not old_plan:
        return []
    old = JobPlan.from_json(old_plan)
    out: list[tuple[str, tuple[str, ...]]] = []
    for sink in dict.fromkeys(b.sink for b in plan.branches):
        now = {c.name.lower() for b in plan.branches if b.sink == sink for c in b.output}
        was = [c.name for b in old.branches if b.sink.lower() == sink.lower() for c in b.output]
        gone = tuple(dict.fromkeys(c for c in was if c.lower() not in now))
        if gone:
            out.append((sink, gone))
    return out


def unwritten_text(sink: str, columns: tuple[str, ...]) -> str:
    names = ", ".join(f"'{c}'" for c in columns)
    return (
        f"column(s) {names} of {sink} no longer written: NULL in every row the job writes from now on "
        "(a running aggregate's rewritten groups too); rows it does not write keep their values"
    )


def unwritten_rows(old_plan: dict[str, Any] | None, plan: JobPlan) -> tuple[tuple[Any, ...], ...]:
    return tuple(
        _sink_row(sink, "warning", unwritten_text(sink, cols))
        for sink, cols in unwritten_columns(old_plan, plan)
    )


def lag_text(lags: list[tuple[str, str]]) -> str | None:
    """SHOW JOBS's ``lag`` cell: ``orders: 12 records behind (3 partitions)``; None if no source tells."""
    return "; ".join(f"{src}: {text}" for src, text in lags) or None


def detail_text(detail: str | None, waiting: str | None) -> str | None:
    """SHOW JOBS's ``detail`` cell: what a running job's sinks wait for first, then the job's
    own detail (why it failed, how it was resumed)."""
    return "; ".join(t for t in (waiting, detail) if t) or None


def describe_job(
    job: Job,
    run: Run,
    plan: JobPlan,
    rejects: list[RejectSummary] | None = None,
    lags: list[tuple[str, str]] | None = None,
    waiting: str | None = None,
    placement: Placement | None = None,
    late: list[LateSummary] | None = None,
) -> tuple[tuple[str, str], ...]:
    """``placement``: where the job runs, when it runs in this process; ``late``: its late rows
    per stage and source."""
    detail = detail_text(job.detail, waiting)
    rows: list[tuple[str, str]] = [
        ("name", job.name),
        ("status", job.status + (f" ({detail})" if detail else "")),
        ("created", f"{job.created:%Y-%m-%d %H:%M:%S} UTC"),
        ("from snapshot", job.snapshot or "-"),
        ("run", f"{run.run_id} in {run.folder}"),
        ("options", ", ".join(f"{k}={v}" for k, v in sorted(job.options.items())) or "-"),
    ]
    if placement is not None:
        rows += [
            ("runs on", placement.master),
            ("executors", placement.executor_text()),
            ("Spark UI", placement.ui_text()),
        ]
    else:
        rows.append(("runs on", "- (not running in this process)"))
    for b in plan.branches:
        flow = f"{source_cell(b)} -> "
        for stage in b.stages:
            flow += f"stage '{stage.name}' {stage_text(stage).line()} -> "
        upsert = f" (rows replaced by {', '.join(b.upsert_keys)})" if b.upsert_keys else ""
        upsert += early_text(b)
        rows.append((f"branch {b.index + 1}", flow + b.sink + upsert))
    for src, text in lags or []:
        rows.append((f"lag of {src}", text))
    for summary in rejects or []:
        latest = summary.latest
        rows.append(
            (
                f"rejects from {summary.source}",
                f"{summary.count:,} malformed record(s) in pitstop.rejects; latest: {latest.where()}: "
                f"{latest.reason}",
            )
        )
    rows += late_rows(plan, late or [])
    return tuple(rows)


def late_rows(plan: JobPlan, late: list[LateSummary]) -> list[tuple[str, str]]:
    """DESCRIBE JOB's line per stage that can drop rows as late (it has a watermark), and per
    stage of an earlier run that did: how many it dropped, from which source, and when."""
    by_stage: dict[str, list[LateSummary]] = {}
    for summary in late:
        by_stage.setdefault(summary.stage, []).append(summary)
    names = [s.name for s in plan.stages if kinds.kind_of(s).clock(s, 0) is not None]
    names += [n for n in by_stage if n not in names]
    kept = " (kept in pitstop.late_records)" if plan.keep_late else ""
    out: list[tuple[str, str]] = []
    for name in names:
        found = by_stage.get(name, [])
        if not found:
            out.append((f"late rows of stage '{name}'", "none dropped behind the watermark"))
            continue
        total = sum(s.rows for s in found)
        sources = "; ".join(
            f"{s.rows:,} from {s.source}{partitions_text(s)}, first seen {s.first_seen:%Y-%m-%d %H:%M:%S} "
            f"UTC, last seen {s.last_seen:%Y-%m-%d %H:%M:%S} UTC"
            for s in found
        )
        out.append(
            (
                f"late rows of stage '{name}'",
                f"{total:,} row(s) dropped behind the watermark{kept}: {sources}",
            )
        )
    return out


def partitions_text(summary: LateSummary) -> str:
    """`` (partition 0: 12, partition 1: 5,042)`` for a source with partitions; rows counted
    without one (before pitstop counted partitions) are said apart; nothing for other sources."""
    if not summary.partitions:
        return ""
    told = [f"partition {p}: {n:,}" for p, n in summary.partitions]
    untold = summary.rows - sum(n for _p, n in summary.partitions)
    if untold:
        told.append(f"partition not recorded: {untold:,}")
    return f" ({', '.join(told)})"


def describe_snapshot(snap: Snapshot) -> tuple[tuple[str, str], ...]:
    m = snap.manifest
    rows: list[tuple[str, str]] = [
        ("name", snap.name),
        ("job", snap.job),
        ("created", f"{snap.created:%Y-%m-%d %H:%M:%S} UTC"),
        ("size", f"{snap.size_bytes:,} bytes, {snap.rows:,} state rows"),
        ("path", snap.path),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(m.get("versions", {}).items()))),
    ]
    for src, entry in sorted(m.get("sources", {}).items()):
        connector = registry.connector(entry.get("type", "file"))
        read = connector.positions.text(entry["pos"], connector.position_unit)
        rows.append((f"source {src}", f"{read} read"))
    for name, entry in sorted(m.get("stages", {}).items()):
        stage = stage_from_json(entry["plan"])
        wm = datetime.fromtimestamp(int(entry["watermark_ms"]) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        kind, version = kinds.entry_format(entry)
        rows.append(
            (
                f"stage {name}",
                f"{entry['rows']:,} rows ({kind}, format {version}); {stage_text(stage).line()}"
                + (f"; watermark {wm} UTC" if stage.window or stage.time_column else ""),  # if it has one
            )
        )
        native = entry.get("native")
        if native and native["path"] != f"native/{name}":  # a chain's stages share one copy
            rows.append(
                (f"stage {name} (native)", f"the copy of its branch's checkpoint, under {native['path']}")
            )
        elif native:
            rows.append(
                (
                    f"stage {name} (native)",
                    f"Spark {native['spark']} state files of batch {entry['batch_id']}, "
                    f"{native['partitions']} partitions, {native['bytes']:,} bytes (hard links while the "
                    "old run's files exist)",
                )
            )
    return tuple(rows)
