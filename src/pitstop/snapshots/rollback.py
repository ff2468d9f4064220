"""Roll a job's sinks back to a snapshot's cut: ``CREATE JOB j FROM SNAPSHOT s OPTIONS
('sinkRollback'='true')``.

Flink and Hazelcast restore a job's state from an older savepoint, but "cannot revert writes to
external systems": the restored job emits again what the old one had emitted after the savepoint,
and the sink holds both. pitstop's sinks keep per-``(run, branch, batch)`` bookkeeping in the same
transaction as their data, so what the job wrote after a snapshot's cut can be found and removed.

**The cut.** A snapshot records, per branch of the run it was taken of, the last batch that run
had committed (manifest ``cut``; an older snapshot: its stages' ``batch_id``). What the job wrote
after the cut is a list of :class:`Span`: in the snapshot's run, each branch's batches after its
cut; and every batch of every later run of the job (runs of the same job name started after it:
restored from this or a later snapshot, or the job created again). Rows that other jobs wrote to
the same sink are in none of them and are never touched.

**Per sink**, its connector (:class:`pitstop.connectors.base.Connector`) says what the spans hold
(:meth:`~pitstop.connectors.base.Connector.rollback_plan`) and removes it: a DuckDB sink inside
the catalog transaction that creates the job, a File sink (files to the trash) and a PostgreSQL
sink outside it, before the restored run's queries start.

The protocol (:meth:`pitstop.manager.Manager.create_job`):

1. Plan: per sink the job's runs wrote after the cut, its :class:`SinkRollback`; a sink that
   holds rows after the cut and cannot be rolled back refuses the statement (nothing done).
2. One catalog transaction: the new job and its run (whose restore record lists what is left to
   do outside the catalog), and each DuckDB sink's rows and bookkeeping of the spans, checked
   against the plan's counts. A process killed before the commit leaves nothing done and no job.
3. Outside the catalog (:func:`finish`): files moved to the home's trash, PostgreSQL rows deleted
   in one PostgreSQL transaction per sink; each step idempotent. Done before the run's queries
   start, and again by the next process to open the home if this one died after step 2 (a marker
   ``rollback.done`` in the run folder says it is done), so the job never runs on a half
   rolled-back sink.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.catalog.rows import Run, Snapshot
from pitstop.connectors import registry
from pitstop.connectors.rollback import SinkRollback, Span
from pitstop.engine.checkpoint import latest_commit
from pitstop.engine.tidy import TRASH
from pitstop.errors import CatalogError, PitstopError
from pitstop.plan.model import JobPlan

if TYPE_CHECKING:
    from pitstop.catalog.store import Catalog

log = logging.getLogger(__name__)
DONE = "rollback.done"
OPTION = "sinkRollback"
GAP_OPTION = "acceptSinkGap"


@dataclass(frozen=True)
class CutInfo:
    """A snapshot's cut, and the job's runs after it."""

    job: str
    run_id: str | None
    batches: dict[int, int | None]  # branch -> last committed batch of the snapshot's run
    unknown: tuple[int, ...] = ()  # branches whose cut an older snapshot did not record
    later: tuple[Run, ...] = field(default_factory=tuple)
    plan: dict[str, Any] = field(default_factory=dict)  # the snapshot's run's plan (its manifest's)


def cut_batches(manifest: dict[str, Any]) -> tuple[dict[int, int | None], tuple[int, ...]]:
    """Per branch of the snapshot's run, the last batch it had committed; and the branches whose
    cut the snapshot does not record (an older pitstop recorded only its stages' batches)."""
    recorded = (manifest.get("cut") or {}).get("batches")
    if recorded is not None:
        return {int(k): (None if v is None else int(v)) for k, v in recorded.items()}, ()
    plan = JobPlan.from_json(manifest["plan"])
    known: dict[int, int | None] = {}
    unknown = []
    for b in plan.branches:
        entries = [manifest.get("stages", {}).get(s.name) for s in b.stages]
        found = [e for e in entries if e is not None]
        if entries and len(found) == len(entries):
            batch = found[0].get("batch_id")
            known[b.index] = None if batch is None else int(batch)
        else:
            unknown.append(b.index)
    return known, tuple(unknown)


def cut_of(catalog: Catalog, snap: Snapshot, reads: RunReads | None = None) -> CutInfo:
    """The snapshot's cut, and the runs of its job started after the snapshot's run."""
    batches, unknown = cut_batches(snap.manifest)
    run_id = snap.manifest.get("run_id")
    later: tuple[Run, ...] = ()
    if run_id:
        later = tuple((reads or RunReads(catalog)).runs_after(snap.job, str(run_id)))
    return CutInfo(
        snap.job, None if run_id is None else str(run_id), batches, unknown, later, snap.manifest["plan"]
    )


def spans_by_sink(catalog: Catalog, cut: CutInfo) -> dict[str, tuple[list[Span], bool, list[int]]]:
    """Per sink mapping (lower-case name) the job wrote after the cut: its spans, whether a
    branch writing it emits windows, and the branches of the snapshot's run whose cut is unknown."""
    out: dict[str, tuple[list[Span], bool, list[int]]] = {}

    def add(name: str, span: Span | None, windowed: bool, unknown: int | None = None) -> None:
        spans, was, blind = out.setdefault(name.lower(), ([], False, []))
        if span is not None:
            spans.append(span)
        if unknown is not None:
            blind.append(unknown)
        out[name.lower()] = (spans, was or windowed, blind)

    if cut.run_id is not None:
        # The manifest's plan: a snapshot brought from another home has no run in this catalog.
        for b in JobPlan.from_json(cut.plan).branches:
            if b.index in cut.unknown:
                add(b.sink, None, bool(b.stages), b.index)
                continue
            last = cut.batches.get(b.index)
            add(b.sink, Span(cut.run_id, b.index, -1 if last is None else last), bool(b.stages))
    for run in cut.later:
        for b in JobPlan.from_json(run.plan).branches:
            add(b.sink, Span(run.run_id, b.index, -1), bool(b.stages))
    return out


def plan_rollback(catalog: Catalog, home: Path, snap: Snapshot) -> tuple[SinkRollback, ...]:
    """Step 1. Per sink that the snapshot's job wrote, what rolling it back to the cut takes."""
    # Step 1. The spans after the cut, per sink; each sink's connector counts what they hold.
    cut = cut_of(catalog, snap)
    out = []
    for key, (spans, windowed, blind) in sorted(spans_by_sink(catalog, cut).items()):
        mapping = catalog.get_mapping(key)
        if mapping is None:
            gone = "its mapping no longer exists"
            out.append(SinkRollback(key, "?", tuple(spans), windowed, possible=False, note=gone))
            continue
        connector = registry.connector(mapping.type)
        found = connector.rollback_plan(catalog, home, mapping, tuple(spans), snap.job)
        found = replace(found, windowed=windowed)
        if blind:
            found = replace(
                found,
                possible=False,
                unknown=True,  # what those branches wrote after the cut cannot be told apart
                note=(
                    f"snapshot '{snap.name}' was written by an older pitstop that did not record the cut of "
                    f"branch(es) {', '.join(str(b + 1) for b in blind)}, which write(s) it"
                ),
            )
        out.append(found)
    return tuple(out)


def refuse_if_blocked(snapshot: str, plans: tuple[SinkRollback, ...], running: str | None) -> None:
    """Step 1's check: refuse (nothing done) when a sink that holds something after the cut cannot
    be rolled back, or when the snapshot's job still runs (it would write on beside the rollback)."""
    if running is not None:
        raise PitstopError(
            f"'{OPTION}'='true': job '{running}', which snapshot '{snapshot}' was taken of, still runs and "
            f"writes its sinks; DROP JOB {running} first. Nothing was started"
        )
    blocked = [p for p in plans if not p.possible and (p.anything or p.unknown)]
    if blocked:
        said = "; ".join(f"sink '{p.mapping}': {p.note}" for p in blocked)
        raise PitstopError(
            f"'{OPTION}'='true' cannot roll back every sink to snapshot '{snapshot}': {said}. Nothing was "
            f"started; without '{OPTION}' the restored job writes again what was written after the cut"
        )


def finish(catalog: Catalog, home: Path, run: Run) -> None:
    """Step 3. What a run's sink rollback does outside the catalog, if it is not done yet (a
    marker in the run folder says it is). Idempotent: each connector skips what is already done."""
    restore = run.restore or {}
    pending = restore.get("rollback")
    folder = Path(run.folder)
    if not pending or (folder / DONE).exists():
        return
    trash = trash_folder(home, run)
    # Step 3. Outside the catalog, each sink's connector; then the marker.
    for entry in pending:
        plan = SinkRollback.from_json(entry)
        mapping = catalog.get_mapping(plan.mapping)
        if mapping is None:
            continue
        registry.connector(mapping.type).rollback_outside(catalog, home, mapping, plan, trash)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DONE).write_text("the sink rollback of this run is done\n")
    log.info("job '%s': the sinks are rolled back to snapshot '%s'", run.job, restore.get("snapshot"))


def trash_folder(home: Path, run: Run) -> Path:
    """Where a run's rollback moves files: one folder per run, named from the run (the same
    folder when a rollback that was interrupted is finished by the next process)."""
    return home / TRASH / f"{run.started:%Y%m%dT%H%M%S}-rollback-{run.run_id}"


class RunReads:
    """The catalog reads of :func:`batches_past`, each made once. For one snapshot they are the
    run's own queries; for many (:func:`cut_texts`: SHOW SNAPSHOTS asks for every snapshot's cut,
    and one query after another, five per snapshot, 1,000 snapshots took 3.3 s in
    bench/latency.py) every run and every recorded run end are read at once instead."""

    def __init__(self, catalog: Catalog, every: bool = False) -> None:
        self.catalog = catalog
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._plans: dict[str, JobPlan] = {}
        self._runs: dict[str, Run] | None = None
        self._by_job: dict[str, list[Run]] = {}
        self._ends: dict[str, dict[int, int | None]] | None = None
        if every:
            self._runs = {r.run_id: r for r in catalog.all_runs()}  # oldest first
            for r in self._runs.values():
                self._by_job.setdefault(r.job.lower(), []).append(r)
            self._ends = catalog.run_ends()

    def _once(self, key: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = read()
        return self._memo[key]

    def get_run(self, run_id: str) -> Run:
        if self._runs is None:
            run: Run = self._once(("run", run_id), lambda: self.catalog.get_run(run_id))
            return run
        if run_id not in self._runs:
            raise CatalogError(f"run '{run_id}' is missing from the catalog {self.catalog.path}")
        return self._runs[run_id]

    def runs_after(self, job: str, run_id: str) -> list[Run]:
        """The runs of ``job`` (any case) started after run ``run_id``, oldest first."""
        if self._runs is None:
            runs: list[Run] = self._once(
                ("after", job.lower(), run_id), lambda: self.catalog.runs_after(job, run_id)
            )
            return runs
        if run_id not in self._runs:
            return []
        after = self._runs[run_id].started
        return [r for r in self._by_job.get(job.lower(), []) if r.run_id != run_id and r.started > after]

    def plan(self, run: Run) -> JobPlan:
        if run.run_id not in self._plans:
            self._plans[run.run_id] = JobPlan.from_json(run.plan)
        return self._plans[run.run_id]

    def last(self, run: Run, branch: int) -> int | None:
        """The last batch a branch of a run committed: from its checkpoint while the run's folder
        exists, else as recorded when the folder went (DROP JOB), else from the DuckDB sinks'
        bookkeeping."""

        def read() -> int | None:
            ckpt = Path(run.folder) / "branches" / str(branch) / "checkpoint"
            if ckpt.is_dir():
                return latest_commit(ckpt)
            if self._ends is None:
                ended = self._once(("end", run.run_id), lambda: self.catalog.run_end(run.run_id))
            else:
                ended = self._ends.get(run.run_id)
            if ended is not None:
                return ended.get(branch)
            return self.catalog.last_sink_batch(run.run_id, branch)

        last: int | None = self._once(("last", run.run_id, branch), read)
        return last


def cut_texts(catalog: Catalog, snaps: list[Snapshot]) -> dict[str, str]:
    """:func:`cut_text` of each snapshot (by lower-case name), the runs read once for all."""
    reads = RunReads(catalog, every=True)
    return {s.name.lower(): cut_text(catalog, s, reads) for s in snaps}


def batches_past(catalog: Catalog, snap: Snapshot, reads: RunReads | None = None) -> int | None:
    """How many batches the snapshot's job ran past its cut: in the snapshot's run, the most any
    branch committed after its cut, plus, for each later run of the job, the most any of its
    branches committed. Read from the runs' checkpoints while their folders exist, else from the
    last batches recorded when a folder went (DROP JOB), else from the DuckDB sinks' bookkeeping.
    None: the snapshot does not say which run it was taken of."""
    if not snap.manifest.get("run_id") or "plan" not in snap.manifest:
        return None
    reads = reads or RunReads(catalog)
    cut = cut_of(catalog, snap, reads)
    if cut.run_id is None:
        return None
    last = reads.last
    try:
        first = reads.get_run(cut.run_id)
    except PitstopError:
        return None
    past = 0
    for b in reads.plan(first).branches:
        if b.index in cut.unknown:
            continue
        done, at = last(first, b.index), cut.batches.get(b.index)
        if done is not None:
            past = max(past, done - (-1 if at is None else at))
    for run in cut.later:
        most = [last(run, b.index) for b in reads.plan(run).branches]
        past += max((n + 1 for n in most if n is not None), default=0)
    return past


def rolled_back_past(catalog: Catalog, snap: Snapshot) -> str | None:
    """Why restoring ``snap`` would leave its sinks with a gap, or None.

    A later restore of the same job with ``'sinkRollback'`` removed what the job wrote after an
    earlier cut; a snapshot whose cut lies past that one (taken later in the same run, or in a run
    that was rolled back whole) holds state for events whose output is no longer in the sinks,
    and a job restored from it would never write that output again."""
    cut = cut_of(catalog, snap)
    if cut.run_id is None:
        return None
    for run in cut.later:
        restore = run.restore or {}
        for entry in restore.get("rollback", []):
            plan = SinkRollback.from_json(entry)
            for span in plan.spans:
                last = cut.batches.get(span.branch)
                if span.run_id != cut.run_id or last is None or last <= span.after:
                    continue
                to = restore.get("snapshot", "?")
                return (
                    f"snapshot '{snap.name}' was taken past the cut of snapshot '{to}', to which job "
                    f"'{snap.job}' rolled sink '{plan.mapping}' back on {run.started:%Y-%m-%d %H:%M:%S} "
                    f"(run {run.run_id}): what the job wrote between the two cuts is no longer in the "
                    f"sink, and a job restored from '{snap.name}' would not write it again. Restore from "
                    f"'{to}' or an older snapshot; to restore from '{snap.name}' all the same, add "
                    f"'{GAP_OPTION}'='true'"
                )
    return None


def cut_text(catalog: Catalog, snap: Snapshot, reads: RunReads | None = None) -> str:
    """SHOW SNAPSHOTS's ``cut`` cell: the job's latest cut, or how far the job ran past it."""
    past = batches_past(catalog, snap, reads)
    if past is None:
        return "unknown: the run it was taken of is not in this home's catalog"
    if past == 0:
        return f"latest: job '{snap.job}' ran no batch past it"
    return f"older: job '{snap.job}' ran {past:,} batch(es) past it"
