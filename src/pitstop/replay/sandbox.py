"""A replay: the changed SQL and the job's own SQL, each restored from the snapshot as ``CREATE
JOB ... FROM SNAPSHOT`` restores it, each over exactly the input the job read from the snapshot's
cut to a later cut, each writing into scratch tables; then their diff, sink by sink.

Comparing against a replay of the job's own SQL rather than against its sinks compares the SQL
alone: both replays read the same input in the same batches from the same state, so a row differs
only because the SQL does (the job's own batches fell otherwise, and its sinks hold what it wrote
after the span too; :mod:`.fidelity` checks the replay of its own SQL against those sinks).
Nothing is written where the job or the catalog would see it:

1. The replay's folder is ``<home>/replays/<id>/``: its runs' checkpoints, source lists and fences,
   and the scratch database. It is removed at the end, whatever happens; one left by a killed
   process is moved to the trash when the next process opens the home (:mod:`pitstop.engine.tidy`).
2. For each side (``old``: the snapshot's job; ``new``: the changed SQL), a run restored from the
   snapshot starts with its sources fenced at the cut (:mod:`.span`) and its branches writing to
   the scratch tables (:mod:`.capture`); it runs until every branch has read up to the fence and
   emitted what that input closes, then stops. It is not a job: no catalog row, no rejects kept,
   no supervisor restarts (a failure fails the replay).
3. The captures are compared (:mod:`.diff`); the caller keeps the diff as tables.

What a source no longer holds of the span is not replayed by either side (:func:`.span.retained`):
the sinks and stages fed by such a source are compared over the rest of the input, and marked
partial (:attr:`Analysis.partial`).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from pitstop.catalog.clock import now
from pitstop.catalog.rows import Mapping, Run, Snapshot
from pitstop.connectors import registry
from pitstop.engine import checkpoint
from pitstop.engine.runs import ActiveRun
from pitstop.engine.session import REPLAY_POOL
from pitstop.errors import AwaitTimeoutError, CancelledError, JobFailedError, PitstopError
from pitstop.faults import crash_point
from pitstop.names import safe_path
from pitstop.plan.model import AggregateStage, Branch, JobPlan, window_keys
from pitstop.replay import fidelity, span
from pitstop.replay.capture import Capture, CaptureSink
from pitstop.replay.diff import SinkDiff, compare
from pitstop.replay.fidelity import Fidelity
from pitstop.snapshots.restore import Restore, plan_restore, prepare_run_folder, seeds_from_json
from pitstop.stages import registry as kinds
from pitstop.stages.base import state_arrow

if TYPE_CHECKING:
    from pitstop.manager import Manager

REPLAYS = "replays"


@dataclass(frozen=True)
class Analysis:
    until: str  # where the span ends, in words
    sources: tuple[tuple[str, str], ...]  # (source, what was replayed of it)
    diffs: tuple[SinkDiff, ...]
    states: tuple[StageDiff, ...] = ()
    missing: tuple[span.Missing, ...] = ()  # what the sources no longer hold: not replayed
    # Per sink and stage fed by such a source: those sources (its diff covers the rest only).
    partial: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fidelity: tuple[Fidelity, ...] = ()  # the job's own SQL replayed against what the job wrote

    @property
    def same(self) -> bool:
        return all(d.same for d in self.diffs)


def analyze(
    manager: Manager,
    plan: JobPlan,
    restore: Restore,
    snap: Snapshot,
    until: span.Until | Callable[[Path], span.Until],
    timeout_s: float,
    cancelled: Callable[[], bool] | None = None,
) -> Analysis:
    """Replay ``snap``'s job and ``plan`` (restored by ``restore``) up to ``until`` (or what it
    gives for a scratch folder) and diff them."""
    root = safe_path(
        manager.home / REPLAYS, "job", plan.job.replace(" ", "_"), suffix=f"-{uuid.uuid4().hex[:8]}"
    )
    root.mkdir(parents=True)
    capture: Capture | None = None
    try:
        cut = until(root / "until") if callable(until) else until
        capture = Capture(root / "capture.duckdb")
        old_plan = JobPlan.from_json(snap.manifest["plan"])
        partitions = manager.shuffle_partitions
        old_restore = plan_restore(snap, old_plan, False, partitions, "auto", manager.catalog.get_mapping)
        sources = {
            src: m for p in (plan, old_plan) for src, m in manager.mappings_of(p).items() if src in p.sources
        }
        cut, missing = span.retained(cut, sources, {**restore.start_positions, **old_restore.start_positions})

        def mappings(p: JobPlan) -> dict[str, Mapping]:
            """The plan's mappings, its sources as a replay reads them (past what is missing)."""
            return {
                name: registry.connector(m.type).for_replay(m) if name in p.sources else m
                for name, m in manager.mappings_of(p).items()
            }

        sinks = list(dict.fromkeys([*(b.sink for b in plan.branches), *(b.sink for b in old_plan.branches)]))
        tables = {s: i for i, s in enumerate(sinks)}
        _run(
            manager,
            "old",
            old_plan,
            old_restore,
            snap,
            cut,
            mappings(old_plan),
            capture,
            tables,
            root,
            timeout_s,
            cancelled,
        )
        crash_point("replay.captured")
        notes = _run(
            manager,
            "new",
            plan,
            restore,
            snap,
            cut,
            mappings(plan),
            capture,
            tables,
            root,
            timeout_s,
            cancelled,
        )
        diffs = tuple(
            compare(capture, s, f"old_{i}", f"new_{i}", _keys(plan, old_plan, s)) for s, i in tables.items()
        )
        states = _state_diffs(capture, plan, old_plan)
        partial = _partial(missing, plan, old_plan)
        checked = fidelity.check(
            manager.catalog,
            capture,
            old_plan,
            manager.mappings_of(old_plan),
            {s: f"old_{i}" for s, i in tables.items()},
            span.cut_run(snap),
            (cut.run_id, cut.batches),
            set(partial),
        )
        return Analysis(cut.what, notes, diffs, states, missing, partial, checked)
    finally:
        if capture is not None:
            capture.close()
        shutil.rmtree(root, ignore_errors=True)


def _partial(missing: tuple[span.Missing, ...], *plans: JobPlan) -> dict[str, tuple[str, ...]]:
    """The sinks and stages a source with missing input feeds, with those sources."""
    lacking = {m.source for m in missing}
    out: dict[str, set[str]] = {}
    for plan in plans:
        for b in plan.branches:
            hit = lacking.intersection(b.sources)
            for name in (b.sink, *(s.name for s in b.stages)) if hit else ():
                out.setdefault(name, set()).update(hit)
    return {name: tuple(sorted(srcs)) for name, srcs in out.items()}


def _run(
    manager: Manager,
    side: str,
    plan: JobPlan,
    restore: Restore,
    snap: Snapshot,
    cut: span.Until,
    mappings: dict[str, Mapping],
    capture: Capture,
    tables: dict[str, int],
    root: Path,
    timeout_s: float,
    cancelled: Callable[[], bool] | None,
) -> tuple[tuple[str, str], ...]:
    """Step 2 for one side; returns what it replayed of each source."""
    folder = root / side
    folder.mkdir()
    restore = prepare_run_folder(folder, restore)
    bounds = {}
    notes: list[tuple[str, str]] = []
    for src in plan.sources:
        mapping = mappings[src]
        start = restore.start_positions.get(src, span.zero(mapping))
        bounds[src], note = span.bound(cut, mapping, start, folder, snap.name)
        notes.append((src, note))
    run = Run(
        f"replay-{side}-{uuid.uuid4().hex[:8]}",
        plan.job,
        str(folder),
        plan.to_json(),
        restore.to_json(),
        now(),
    )
    start, seeds = seeds_from_json(run.restore)

    def sink(branch: Branch, mapping: Mapping, keys: tuple[str, ...]) -> CaptureSink:
        return capture.sink(f"{side}_{tables[branch.sink]}", branch.upsert_keys)

    active = ActiveRun(
        plan.job, run, plan, mappings, folder, start, seeds, bounds=bounds, sinks=sink, fail_fast=True
    )
    spark = manager.spark()
    try:
        # The replay's queries run in the replays' pool (engine/session.py): the jobs keep most
        # of the cores. Its streaming threads take the pool from the thread that starts them.
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", REPLAY_POOL)
        try:
            active.start(spark, manager.catalog, manager.settings.trigger_ms, manager.shuffle_partitions)
        finally:
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
        try:
            active.wait(partial(active.caught_up, dict(bounds)), timeout_s, "replay its input", cancelled)
        except (JobFailedError, AwaitTimeoutError, CancelledError) as err:
            # The wait speaks of a job (that keeps running, that AWAIT could wait on longer): a
            # replay is none, and it stops here.
            raise _replay_error(err, plan.job, side, timeout_s) from None
    finally:
        active.stop()
    _keep_state(manager, active, side, capture)
    return tuple(notes)


def _replay_error(
    err: JobFailedError | AwaitTimeoutError | CancelledError,
    job: str,
    side: str,
    timeout_s: float,
) -> PitstopError:
    which = "the changed SQL" if side == "new" else "the job's own SQL"
    what = f"EXPLAIN ANALYZE's replay of {which} (job '{job}')"
    untouched = "it was stopped; the job, its sinks and the catalog are untouched"
    if isinstance(err, JobFailedError):
        reason = str(err).removeprefix(f"job '{job}' failed: ")
        return JobFailedError(f"{what} failed: {reason}; {untouched}")
    if isinstance(err, AwaitTimeoutError):
        return AwaitTimeoutError(f"{what} did not read its input within {timeout_s:g} s; {untouched}")
    return CancelledError(f"cancelled: {what}; {untouched}")


def _keep_state(manager: Manager, active: ActiveRun, side: str, capture: Capture) -> None:
    """Step 3's input: each stage's state at the end of the replay, read as a snapshot reads it
    (:mod:`pitstop.snapshots.export`), into capture table ``<side>_state_<stage>``."""
    for bq in active.branches:
        operators = kinds.operator_ids(bq.branch)
        batch = checkpoint.latest_commit(bq.checkpoint)
        for stage in bq.branch.stages:
            kind = kinds.kind_of(stage)
            if batch is None or len(operators[stage.name]) != 1:
                table = pa.Table.from_batches([], schema=state_arrow(kind, stage))
            else:
                (operator,) = operators[stage.name]
                table = kind.read_state(manager.spark(), bq.checkpoint, batch, operator, stage, active.job)
            labels = accumulator_labels(stage)
            table = table.rename_columns([labels.get(n, n) for n in table.column_names])
            capture.put(f"{side}_state_{stage.name}", table)


def accumulator_labels(stage: AggregateStage) -> dict[str, str]:
    """Each accumulator's state column as a diff names it: ``SUM(amount)`` rather than ``acc0``
    (``acc0`` where two would read the same)."""
    if len(stage.functions) == len(stage.accumulators):  # one each, in the SELECT's order
        labels = {a.name: f for a, f in zip(stage.accumulators, stage.functions, strict=True)}
    else:  # AVG keeps two (a sum and a count): say what each holds
        labels = {a.name: f"{a.kind}({a.input_sql})" for a in stage.accumulators}
    if len(set(labels.values())) < len(labels):
        return {a.name: a.name for a in stage.accumulators}
    return labels


def state_keys(stage: AggregateStage) -> tuple[str, ...]:
    """The columns of a stage's state that say whose state a row is (all but the accumulators)."""
    accumulators = {a.name for a in stage.accumulators}
    kind = kinds.kind_of(stage)
    return tuple(n for n in state_arrow(kind, stage).names if n not in accumulators)  # before labels


def _state_diffs(capture: Capture, plan: JobPlan, old_plan: JobPlan) -> tuple[StageDiff, ...]:
    """Each stage of both jobs (by name): its state at the end of the old replay against the new.
    Accumulators are compared where both hold the same ones (same kinds, types and inputs, in the
    same order); otherwise only which keys and windows each holds."""
    old_stages = {s.name: s for b in old_plan.branches for s in b.stages}
    out: list[StageDiff] = []
    for b in plan.branches:
        for stage in b.stages:
            was = old_stages.get(stage.name)
            if was is None:
                continue  # new: its rows are the sinks' story (only new)
            same_accs = was.accumulators == stage.accumulators
            keys = state_keys(stage)
            old, new = f"old_state_{stage.name}", f"new_state_{stage.name}"
            if not same_accs:
                capture.keep_only(old, keys)
                capture.keep_only(new, keys)
            d = compare(capture, stage.name, old, new, keys)
            out.append(StageDiff(d, same_accs))
    return tuple(out)


@dataclass(frozen=True)
class StageDiff:
    diff: SinkDiff
    accumulators: bool  # accumulators compared (else keys and windows only)

    def text(self) -> str:
        what = "" if self.accumulators else "; accumulators changed: which keys and windows it holds only"
        return f"state at the end of the span: {self.diff.text()}{what}"


def _keys(plan: JobPlan, old_plan: JobPlan, sink: str) -> tuple[str, ...]:
    """What a sink's rows are matched on: the key its branches write it by (the same in every
    branch into it, old and new), else none."""
    found: set[tuple[str, ...]] = set()
    for b in (*plan.branches, *old_plan.branches):
        if b.sink == sink:
            found.add(b.upsert_keys or window_keys(b) or ())
    return found.pop() if len(found) == 1 else ()
