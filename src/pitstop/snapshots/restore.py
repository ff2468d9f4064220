"""Restore: check a snapshot against a new plan, and prepare a fresh run to start from it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pitstop.catalog.rows import Mapping, Snapshot
from pitstop.connectors import registry
from pitstop.engine.checkpoint import copy_checkpoint, read_offsets
from pitstop.errors import CompatibilityError
from pitstop.names import inside, safe_path
from pitstop.plan.model import AggregateStage, Branch, JobPlan
from pitstop.planner import compat, early
from pitstop.stages import registry as kinds
from pitstop.stages.base import StageSeed

NATIVE = "from Spark's state files (native)"
ROWS = "from the snapshot's rows"
RESTORE_FORMATS = ("auto", "canonical")


@dataclass(frozen=True)
class NativeCopy:
    """A stage restored natively: the snapshot's copy of the old branch's checkpoint."""

    path: str
    batch: int  # the cut: the last batch the copy holds
    branch: int  # index of the new job's branch that starts on it
    seeded: bool  # the old branch read seeds too: its checkpoint has a second (seed) source


@dataclass(frozen=True)
class Restore:
    snapshot: str
    verdicts: tuple[compat.StageVerdict, ...]
    start_positions: dict[str, Any]  # per source, as its connector defines
    seeds: dict[str, StageSeed]
    sources: dict[str, dict[str, Any]]  # per source: the snapshot's entry, as its connector resumes it
    root: str  # the snapshot's folder
    native: dict[str, NativeCopy] = field(default_factory=dict)
    source_notes: tuple[tuple[str, str], ...] = ()  # (source, what the restored job reads) for EXPLAIN

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "verdicts": [v.text() for v in self.verdicts],
            "native": sorted(self.native),
            "native_batches": {k: c.batch for k, c in sorted(self.native.items())},
            "start_positions": self.start_positions,
            "seeds": {
                k: {
                    "path": s.path,
                    "old_size_micros": s.old_size_micros,
                    "old_watermark_ms": s.old_watermark_ms,
                    "old_gap_micros": s.old_gap_micros,
                    "schema": s.schema,
                    "columns": s.columns,
                    "clock_only": s.clock_only,
                }
                for k, s in self.seeds.items()
            },
        }


def seeds_from_json(d: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, StageSeed]]:
    if not d:
        return {}, {}
    seeds = {k: StageSeed(**v) for k, v in d.get("seeds", {}).items()}
    return dict(d.get("start_positions", {})), seeds


def check_compatible(
    snapshot: str, old: dict[str, AggregateStage], plan: JobPlan, strict: bool
) -> list[compat.StageVerdict]:
    """The verdict per stage; CompatibilityError naming every refused stage."""
    verdicts = compat.check(old, plan, strict)
    bad = compat.refused(verdicts)
    if bad:
        raise CompatibilityError(
            f"cannot start job '{plan.job}' from snapshot '{snapshot}':\n"
            + "\n".join("  " + v.text() for v in bad)
            + "\nNothing was started."
        )
    return verdicts


def plan_restore(
    snapshot: Snapshot,
    plan: JobPlan,
    strict: bool,
    partitions: int | None = None,
    fmt: str = "auto",
    mappings: Callable[[str], Mapping | None] | None = None,
) -> Restore:
    """Check compatibility (refusing with every refused stage named) and gather what to seed.

    A restored stage starts on the snapshot's native copy of its checkpoint when
    :func:`native_reason` finds nothing against it (``fmt`` ``auto``); otherwise, or with ``fmt``
    ``canonical``, it is seeded from the snapshot's rows. Each verdict says which."""
    manifest = snapshot.manifest
    old = kinds.manifest_stages(snapshot.name, manifest)
    verdicts = check_compatible(snapshot.name, old, plan, strict)
    root = Path(snapshot.path)
    sources, notes = resume_sources(manifest["sources"], plan, mappings)
    # A source that does not go on from the snapshot's own position (its folder moved, its type
    # changed) cannot go on from a copy of the old checkpoint, whose offset log holds that position.
    elsewhere = {s for s in plan.sources if sources.get(s) is not manifest["sources"].get(s)}
    seeds: dict[str, StageSeed] = {}
    native: dict[str, NativeCopy] = {}
    branches = {s.name: b for b in plan.branches for s in b.stages}
    againsts = {
        v.stage: _why_not_native(v.stage, manifest, old, plan, branches[v.stage], partitions, fmt, elsewhere)
        for v in verdicts
        if v.outcome == compat.RESTORED
    }
    # One checkpoint per branch: its stages go on from the native copy together, or none does.
    for name, against in list(againsts.items()):
        others = [s.name for s in branches[name].stages if s.name != name]
        seeded = next((o for o in others if againsts.get(o, "new") is not None), None)
        if against is None and seeded is not None:
            againsts[name] = (
                f"stage '{seeded}' of its branch is not restored from the native copy, and a branch's "
                "checkpoint holds all its stages"
            )
    annotated: list[compat.StageVerdict] = []
    for v in verdicts:
        if v.outcome == compat.RESTORED:
            entry = manifest["stages"][v.stage]
            branch = branches[v.stage]
            new = plan.stage(v.stage)
            assert new is not None
            against = againsts[v.stage]
            toggled = early.toggled(manifest.get("plan"), v.stage, branch)
            if against is None:
                copy = entry["native"]
                path = str(inside(root, copy["path"]))
                batch = int(entry["batch_id"])
                native[v.stage] = NativeCopy(path, batch, branch.index, _seeded(copy, Path(path), batch))
                # The copy's own watermark may be below the job's clock (its run started from a
                # snapshot and read little since): the stage drops what the clock makes late.
                clock = kinds.kind_of(new).clock(new, int(entry["watermark_ms"]))
                if clock is not None and int(entry["watermark_ms"]) > 0:
                    seeds[v.stage] = clock
                v = replace(v, how=NATIVE)
            else:
                seeds[v.stage] = kinds.kind_of(new).seed(
                    old[v.stage],
                    new,
                    str(safe_path(root / "stages", "stage", v.stage)),
                    int(entry["watermark_ms"]),
                )
                v = replace(v, how=f"{ROWS} ({int(entry['rows']):,}); {against}")
            if toggled == "off":
                v = replace(
                    v,
                    how=f"{v.how}; early results turned off: each window in flight at the cut gets its "
                    "final row in place of its early one when it closes",
                )
        elif v.outcome == compat.EMPTY:
            v = _on_the_jobs_clock(v, plan, branches[v.stage], manifest, old, sources, seeds)
        annotated.append(v)
    start = {src: entry["pos"] for src, entry in sources.items()}
    return Restore(snapshot.name, tuple(annotated), start, seeds, sources, str(root), native, notes)


def _why_not_native(
    name: str,
    manifest: dict[str, Any],
    old: dict[str, AggregateStage],
    plan: JobPlan,
    branch: Branch,
    partitions: int | None,
    fmt: str,
    elsewhere: set[str],
) -> str | None:
    """Why restored stage ``name`` cannot go on from the snapshot's native copy on its own (its
    branch's other stages are weighed by the caller), or None."""
    new = plan.stage(name)
    assert new is not None
    against = native_reason(manifest["stages"][name], old[name], new, branch, partitions, fmt)
    moved = [src for src in branch.sources if src in elsewhere]
    if against is None and moved:
        against = f"source '{moved[0]}' does not go on from the snapshot's position"
    if against is None and early.toggled(manifest.get("plan"), name, branch) == "on":
        against = (
            "early results turned on: from Spark's state files, update mode would never write a "
            "window in flight at the cut that gets no new event; the rows' first batch writes "
            "every one of them"
        )
    was, now = _old_chains(manifest).get(name, (name,)), tuple(s.name for s in branch.stages)
    if against is None and was != now:
        against = (
            f"the stages of its branch changed ({', '.join(was)} -> {', '.join(now)}), and a "
            "branch's checkpoint holds all of them"
        )
    return against


def _seeded(copy: dict[str, Any], path: Path, batch: int) -> bool:
    """Whether the stage's old query read a seed source, which the restored query must keep (Spark
    refuses a checkpoint whose number of sources differs). The manifest says so, but snapshots
    written before issue 23's fix also said so of a stage that was new in its run, which read no
    seeds: the copy's offsets, which list every source, decide."""
    if not copy.get("seeded"):
        return False
    offsets = read_offsets(path, batch)
    return offsets is None or offsets.others > 0


def _old_chains(manifest: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each snapshot stage's branch's stages, in order (a manifest without a plan was written
    when a branch held one stage)."""
    if not manifest.get("plan"):
        return {}
    return {
        s.name: tuple(t.name for t in b.stages)
        for b in JobPlan.from_json(manifest["plan"]).branches
        for s in b.stages
    }


def job_clock(manifest: dict[str, Any], old: dict[str, AggregateStage], source: str) -> int | None:
    """The snapshot's watermark (ms) over ``source``: the least of its stages' that read it and
    have a watermark (Spark's own rule for several watermarks), or None if none did."""
    # The first stage of a branch that has a watermark runs on the branch's (a stage after it in
    # a chain, on what the stages before it pass on: an interval join's is earlier).
    read_by: dict[str, str] = {}
    for b in JobPlan.from_json(manifest["plan"]).branches:
        timed = [
            s.name for s in b.stages if s.name in old and kinds.kind_of(old[s.name]).clock(old[s.name], 0)
        ]
        if timed:
            read_by[timed[0]] = b.source
    marks = [
        int(entry["watermark_ms"])
        for name, entry in manifest["stages"].items()
        if read_by.get(name) == source
    ]
    return min(marks) if marks else None


def _on_the_jobs_clock(
    v: compat.StageVerdict,
    plan: JobPlan,
    branch: Branch,
    manifest: dict[str, Any],
    old: dict[str, AggregateStage],
    sources: dict[str, dict[str, Any]],
    seeds: dict[str, StageSeed],
) -> compat.StageVerdict:
    """A stage new in the restored job starts on the job's clock, not a fresh one: an event the
    old job found late (its window had closed at the snapshot's watermark) is late for it too, as
    for the restored stages beside it. Its clock goes into ``seeds`` (kept in the run's catalog
    row, so a resumed run keeps it); the verdict says where it starts. A stage whose source starts
    from its beginning, or that the snapshot's stages did not time, starts on a clock of its own."""
    new = plan.stage(v.stage)
    assert new is not None
    wm = job_clock(manifest, old, branch.source) if branch.source in sources else None
    if wm is None:
        return v
    for before in branch.stages[: branch.stages.index(new)]:
        wm = kinds.kind_of(before).output_watermark(before, wm)  # a chain passes the clock on
    clock = kinds.kind_of(new).clock(new, wm)
    if clock is None or wm is None:
        return v
    seeds[v.stage] = clock
    at = datetime.fromtimestamp(wm / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return replace(
        v,
        how=f"starts at the snapshot's watermark {at} UTC (one clock per job): an event the old job "
        "found late is late for it too",
    )


def resume_sources(
    saved: dict[str, dict[str, Any]], plan: JobPlan, mappings: Callable[[str], Mapping | None] | None
) -> tuple[dict[str, dict[str, Any]], tuple[tuple[str, str], ...]]:
    """Each source of the new job as its connector resumes it from the snapshot's entry, and
    what EXPLAIN says about it. A source the snapshot does not know, or one whose type changed,
    starts from the beginning."""
    sources: dict[str, dict[str, Any]] = {}
    notes: list[tuple[str, str]] = []
    for src in plan.sources:
        entry = saved.get(src)
        mapping = mappings(src) if mappings is not None else None
        if entry is None:
            notes.append((src, "not in the snapshot: reads from its start"))
            continue
        if mapping is None:  # no mapping to compare with (check mode): as the snapshot says
            sources[src] = entry
            continue
        if mapping.type != entry.get("type"):
            was, now = registry.display_name(str(entry.get("type"))), registry.display_name(mapping.type)
            notes.append((src, f"was TYPE {was} in the snapshot, is TYPE {now} now: reads from its start"))
            continue
        sources[src], note = registry.connector(mapping.type).resume_from(entry, mapping)
        notes.append((src, note))
    for src in sorted(set(saved) - set(plan.sources)):
        notes.append((src, "read by the snapshot's job, not by the new one: its position is not used"))
    return sources, tuple(notes)


def native_reason(
    entry: dict[str, Any],
    old: AggregateStage,
    new: AggregateStage,
    branch: Branch,
    partitions: int | None,
    fmt: str,
) -> str | None:
    """Why a restored stage cannot start on the snapshot's native copy, or None if it can.

    Spark goes on from a copied checkpoint exactly as from its own after a restart, so the copy is
    used only where that is the same as seeding the rows: the stage's stateful part unchanged, as
    its kind judges (only stateless parts of the job may differ), the same source, the same
    number of state partitions and the same Spark version. Anything else is seeded from the rows,
    which handle resizes, new gaps and a new number of partitions."""
    copy = entry.get("native")
    if fmt == "canonical":
        return "'restoreFormat' is 'canonical'"
    if not copy:
        return "the snapshot has no native copy of this stage"
    if not kinds.kind_of(new).same_state(old, new):
        return "the stage changed"
    if copy["source"] != branch.source:
        return f"the stage read '{copy['source']}', it now reads '{branch.source}'"
    if partitions is not None and int(copy["partitions"]) != partitions:
        return f"state partitions {copy['partitions']} -> {partitions}"
    if copy["spark"] != version("pyspark"):
        return f"Spark {copy['spark']} -> {version('pyspark')}"
    return None


def prepare_run_folder(folder: Path, restore: Restore) -> Restore:
    """Give each source what it needs to go on from the snapshot's position (a file source: the
    files already read), and each natively
    restored branch its copy of the old checkpoint. Returns the restore as the run records it.

    A natively restored branch whose old branch read seeds keeps an (empty) seed source, so that
    its plan has the sources its checkpoint records; its old late-event filter is not needed,
    since Spark goes on with the checkpoint's own watermark."""
    for src, entry in restore.sources.items():
        registry.connector(entry["type"]).resume(entry, Path(restore.root), folder, src)
    seeds = dict(restore.seeds)
    copied: set[int] = set()  # branches (the stages of a chain share their branch's copy)
    for stage, copy in restore.native.items():
        checkpoint = folder / "branches" / str(copy.branch) / "checkpoint"
        if copy.branch not in copied:
            copied.add(copy.branch)
            copy_checkpoint(Path(copy.path), copy.batch, checkpoint)
            # A query id of its own: Spark refuses two active queries with one id.
            # (A new file, not a write into the hard link, which the snapshot shares.)
            (checkpoint / "metadata").unlink(missing_ok=True)
            (checkpoint / ".metadata.crc").unlink(missing_ok=True)
            (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
        if copy.seeded:
            _forget_seed_files(checkpoint)
            empty = safe_path(folder / "seeds", "stage", stage)
            empty.mkdir(parents=True, exist_ok=True)
            # An empty seed source, with the stage's clock as its late-event filter (none for a
            # stage without one: Spark applies the checkpoint's watermark).
            clock = seeds.get(stage)
            seeds[stage] = (
                replace(clock, path=str(empty), clock_only=False)
                if clock is not None
                else StageSeed(path=str(empty), old_size_micros=1, old_watermark_ms=0)
            )
    return replace(restore, seeds=seeds)


def _forget_seed_files(checkpoint: Path) -> None:
    """Empty the file log of a copied checkpoint's seed source (``sources/<n>/``: pitstop's own
    sources are Python data sources, which keep no such log; only the seed stream of a seeded
    run does). On a restart Spark asks each such source for the files of the last committed
    batch; when that batch is the old run's seed batch, they lie in a folder other than the new
    run's (empty) seed folder, and Spark refuses them ("Wrong basePath"). Their rows are in the
    state already. New files replace the hard links, which the snapshot shares."""
    sources = checkpoint / "sources"
    if not sources.is_dir():
        return
    for log in sources.glob("*/*"):
        if log.name.startswith("."):  # a checksum: without one, the file is read unchecked
            log.unlink()
        else:
            log.unlink()
            log.write_text("v1")
