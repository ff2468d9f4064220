"""A replay: the changed SQL and the job's own SQL, each restored from the snapshot as ``CREATE
JOB ... FROM SNAPSHOT`` restores it, each over exactly the input the job read from the snapshot's
cut to a later cut, each writing into scratch tables; then their diff, sink by sink.

Comparing against a replay of the job's own SQL rather than against its sinks compares the SQL
alone: both replays read the same input in the same batches from the same state, so a row differs
only because the SQL does (the job's own batches fell otherwise, and its sinks hold what it wrote
after the span too). Nothing is written where the job or the catalog would see it:

1. The replay's folder is ``<home>/replays/<id>/``: its runs' checkpoints, source lists and fences,
   and the scratch database. It is removed at the end, whatever happens; one left by a killed
   process is moved to the trash when the next process opens the home (:mod:`pitstop.engine.tidy`).
2. For each side (``old``: the snapshot's job; ``new``: the changed SQL), a run restored from the
   snapshot starts with its sources fenced at the cut (:mod:`.span`) and its branches writing to
   the scratch tables (:mod:`.capture`); it runs until every branch has read up to the fence and
   emitted what that input closes, then stops. It is not a job: no catalog row, no rejects kept,
   no supervisor restarts (a failure fails the replay).
3. The captures are compared (:mod:`.diff`); the caller keeps the diff as tables.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pitstop.catalog.rows import Mapping, Run, Snapshot
from pitstop.catalog.store import now
from pitstop.engine.runs import ActiveRun
from pitstop.faults import crash_point
from pitstop.names import safe_path
from pitstop.plan.model import Branch, JobPlan, window_keys
from pitstop.replay import span
from pitstop.replay.capture import Capture, CaptureSink
from pitstop.replay.diff import SinkDiff, compare
from pitstop.snapshots.restore import Restore, plan_restore, prepare_run_folder, seeds_from_json

if TYPE_CHECKING:
    from pitstop.manager import Manager

REPLAYS = "replays"


@dataclass(frozen=True)
class Analysis:
    until: str  # where the span ends, in words
    sources: tuple[tuple[str, str], ...]  # (source, what was replayed of it)
    diffs: tuple[SinkDiff, ...]

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
        mappings = manager.mappings_of
        partitions = manager.shuffle_partitions
        old_restore = plan_restore(snap, old_plan, False, partitions, "auto", manager.catalog.get_mapping)
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
        return Analysis(cut.what, notes, diffs)
    finally:
        if capture is not None:
            capture.close()
        shutil.rmtree(root, ignore_errors=True)


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
    try:
        active.start(
            manager.spark(), manager.catalog, manager.settings.trigger_ms, manager.shuffle_partitions
        )
        active.wait(
            partial(active.caught_up, dict(bounds)), timeout_s, f"replay its input ({side} SQL)", cancelled
        )
    finally:
        active.stop()
    return tuple(notes)


def _keys(plan: JobPlan, old_plan: JobPlan, sink: str) -> tuple[str, ...]:
    """What a sink's rows are matched on: the key its branches write it by (the same in every
    branch into it, old and new), else none."""
    found: set[tuple[str, ...]] = set()
    for b in (*plan.branches, *old_plan.branches):
        if b.sink == sink:
            found.add(b.upsert_keys or window_keys(b) or ())
    return found.pop() if len(found) == 1 else ()
