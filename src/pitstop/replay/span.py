"""The input a replay reads: from a snapshot's cut to a later cut of the same job.

The later cut is another snapshot's (``UNTIL SNAPSHOT t``), or where the job's current run stands:
for each source, the least position its branches have committed (every branch has read at least
that far, so the job's own output over the span is complete). A cut is described as a snapshot
describes its sources (:meth:`pitstop.connectors.base.Connector.save_position`), so a replay's run
folder is given the span's input the way a restore gives it the snapshot's: a File source its list
of files (the files the job read, in the order it read them, up to the cut), a Kafka source nothing
but its offsets. A fence at the cut's positions keeps the replay from reading further.

What a source no longer holds of the span (a Kafka partition's offsets deleted by retention, or
past its end since the topic was created again) is not replayed: :func:`retained` asks each source
once, before either side runs, moves the cut back to what is still there, and says what is
missing; both sides then read exactly the same input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pitstop.catalog.rows import Job, Mapping, Snapshot
from pitstop.catalog.store import Catalog
from pitstop.connectors import positions, registry
from pitstop.engine import checkpoint
from pitstop.errors import PlanError
from pitstop.plan.model import JobPlan
from pitstop.snapshots.restore import seeds_from_json
from pitstop.snapshots.rollback import cut_batches


@dataclass(frozen=True)
class Until:
    """Where a replay stops: per source, a position and its entry as a snapshot saves it."""

    what: str  # "snapshot 't'" / "where job 'j' stands (its branches' last committed batch)"
    positions: dict[str, Any]
    entries: dict[str, dict[str, Any]]  # per source: {"type", "pos", ...} as in a manifest
    root: Path  # the folder the entries' relative paths are in
    # The job's run at the cut and, per branch of it, its last batch there (None: none yet); a
    # branch is left out when its batches do not end exactly at the cut (it read on, or has a
    # window to emit still): what the job wrote over the span (:mod:`.fidelity`).
    run_id: str | None = None
    batches: dict[int, int | None] = field(default_factory=dict)


def of_snapshot(snap: Snapshot) -> Until:
    sources = snap.manifest.get("sources") or {}
    run_id, batches = cut_run(snap)
    return Until(
        f"snapshot '{snap.name}'",
        {src: entry["pos"] for src, entry in sources.items()},
        dict(sources),
        Path(snap.path),
        run_id,
        batches,
    )


def cut_run(snap: Snapshot) -> tuple[str | None, dict[int, int | None]]:
    """A snapshot's run, and per branch of it the last batch committed at the cut (branches an
    older snapshot did not record are left out)."""
    run_id = snap.manifest.get("run_id")
    batches, _ = cut_batches(snap.manifest)
    return (None if run_id is None else str(run_id)), batches


def of_job(catalog: Catalog, job: Job, mappings: dict[str, Mapping], scratch: Path) -> Until:
    """Where ``job``'s current run stands, read from its checkpoints (the job is not touched); its
    File sources' lists of files are written into ``scratch``."""
    run = catalog.get_run(job.run_id)
    plan = JobPlan.from_json(run.plan)
    start, _ = seeds_from_json(run.restore)
    folder = Path(run.folder)
    at: dict[str, Any] = {}
    progress = {
        b.index: checkpoint.progress(folder / "branches" / str(b.index) / "checkpoint", start)
        for b in plan.branches
    }
    for branch in plan.branches:
        for src in branch.sources:
            kind = registry.connector(mappings[src].type).positions
            pos = progress[branch.index].positions.get(src, start.get(src, kind.zero))
            at[src] = kind.least(at[src], pos) if src in at else pos
    batches: dict[int, int | None] = {}
    for branch in plan.branches:
        done = progress[branch.index]
        if done.settled and all(
            registry.connector(mappings[src].type).positions.same(
                done.positions.get(src, start.get(src, at[src])), at[src]
            )
            for src in branch.sources
        ):
            batches[branch.index] = done.committed
    scratch.mkdir(parents=True, exist_ok=True)
    entries: dict[str, dict[str, Any]] = {}
    for src, pos in at.items():
        mapping = mappings[src]
        saved = registry.connector(mapping.type).save_position(folder, mapping, pos, scratch)
        entries[src] = {"type": mapping.type, "pos": pos, **saved}
    return Until(
        f"where job '{job.name}' stands (its branches' last committed batch)",
        at,
        entries,
        scratch,
        run.run_id,
        batches,
    )


@dataclass(frozen=True)
class Missing:
    """A part of a source's span that a replay cannot read: ``text`` says which and why."""

    source: str
    text: str


def retained(
    until: Until, mappings: dict[str, Mapping], starts: dict[str, Any]
) -> tuple[Until, tuple[Missing, ...]]:
    """``until`` moved back, per source, to what the source still holds of its span from
    ``starts`` (:meth:`pitstop.connectors.base.Connector.replayable`); and what it does not hold."""
    positions, entries = dict(until.positions), dict(until.entries)
    missing: list[Missing] = []
    for src, mapping in mappings.items():
        entry = until.entries.get(src)
        if entry is None or entry.get("type") != mapping.type:
            continue  # not read by the job over the span: nothing of it is replayed
        connector = registry.connector(mapping.type)
        start = starts.get(src, connector.positions.zero)
        end = until.positions[src]
        if not connector.positions.covers(end, start) or connector.positions.same(start, end):
            continue  # bound() says why, or there is nothing to replay
        held = connector.replayable(mapping, start, end)
        if held.missing:
            positions[src] = held.end
            entries[src] = {**entry, "pos": held.end}
            missing += [Missing(src, text) for text in held.missing]
    return replace(until, positions=positions, entries=entries), tuple(missing)


def bound(until: Until, mapping: Mapping, start: Any, run_dir: Path, snapshot: str) -> tuple[Any, str]:
    """Give a replay's run folder (restored from ``snapshot`` at ``start``) the input of ``mapping``
    up to the cut; return the position to fence it at and what is replayed, in words.

    A source the cut does not know (new in the changed job) is fenced where it starts: the job
    did not read it, so there is nothing of it to replay. PlanError if the cut is not after the
    snapshot on this source, or the job read other files after the snapshot than the snapshot's."""
    connector = registry.connector(mapping.type)
    kind, unit = connector.positions, connector.position_unit
    src = mapping.name
    entry = until.entries.get(src)
    if entry is None or entry.get("type") != mapping.type:
        return start, "not read by the job over the span: nothing of it is replayed"
    end = until.positions[src]
    if not kind.covers(end, start):
        raise PlanError(
            f"source '{src}': {until.what} stands at {kind.text(end, unit)}, before snapshot "
            f"'{snapshot}' ({kind.text(start, unit)}); replay from an earlier snapshot, or UNTIL a later one"
        )
    directory = positions.source_dir(run_dir, src)
    before = positions.read_log(directory)
    connector.resume(entry, until.root, run_dir, src)
    after = positions.read_log(directory)
    if after[: len(before)] != before:
        raise PlanError(
            f"source '{src}': the files read up to {until.what} do not begin with the {len(before):,} "
            f"files snapshot '{snapshot}' had read (the job was restored from another snapshot since, "
            "or its folder changed); replay UNTIL a snapshot taken after this one"
        )
    if kind.same(start, end):
        return end, f"nothing after the snapshot ({kind.text(end, unit)})"
    return end, f"replays {kind.text(start, unit)} -> {kind.text(end, unit)} (up to {until.what})"


def zero(mapping: Mapping) -> Any:
    """Where a source starts when nothing has been read of it."""
    return registry.connector(mapping.type).positions.zero
