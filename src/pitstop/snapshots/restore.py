"""Restore: check a snapshot against a new plan, and prepare a fresh run to start from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pitstop.catalog.rows import Snapshot
from pitstop.connectors import positions
from pitstop.engine.frames import StageSeed
from pitstop.errors import CompatibilityError
from pitstop.planner import compat
from pitstop.planner.plan import AggregateStage, JobPlan, stage_from_json


@dataclass(frozen=True)
class Restore:
    snapshot: str
    verdicts: tuple[compat.StageVerdict, ...]
    start_positions: dict[str, int]
    seeds: dict[str, StageSeed]
    files: dict[str, list[str]]  # file sources: files already read

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "verdicts": [v.text() for v in self.verdicts],
            "start_positions": self.start_positions,
            "seeds": {
                k: {
                    "path": s.path,
                    "old_size_micros": s.old_size_micros,
                    "old_watermark_ms": s.old_watermark_ms,
                    "old_gap_micros": s.old_gap_micros,
                }
                for k, s in self.seeds.items()
            },
        }


def seeds_from_json(d: dict[str, Any] | None) -> tuple[dict[str, int], dict[str, StageSeed]]:
    if not d:
        return {}, {}
    seeds = {k: StageSeed(**v) for k, v in d.get("seeds", {}).items()}
    return {k: int(v) for k, v in d.get("start_positions", {}).items()}, seeds


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


def plan_restore(snapshot: Snapshot, plan: JobPlan, strict: bool) -> Restore:
    """Check compatibility (refusing with every refused stage named) and gather what to seed."""
    manifest = snapshot.manifest
    old = {name: stage_from_json(s["plan"]) for name, s in manifest["stages"].items()}
    verdicts = check_compatible(snapshot.name, old, plan, strict)
    root = Path(snapshot.path)
    seeds: dict[str, StageSeed] = {}
    for v in verdicts:
        if v.outcome == compat.RESTORED:
            entry = manifest["stages"][v.stage]
            seeds[v.stage] = StageSeed(
                path=str(root / "stages" / v.stage),
                old_size_micros=old[v.stage].window.size_micros,
                old_watermark_ms=int(entry["watermark_ms"]),
                old_gap_micros=old[v.stage].window.gap_micros,
            )
    start: dict[str, int] = {}
    files: dict[str, list[str]] = {}
    for src, entry in manifest["sources"].items():
        start[src] = int(entry["pos"])
        if entry.get("files"):
            text = (root / entry["files"]).read_text()
            files[src] = [n for n in text.split("\n") if n]
    return Restore(snapshot.name, tuple(verdicts), start, seeds, files)


def prepare_run_folder(folder: Path, restore: Restore) -> None:
    """Give each file source the snapshot's list of files already read."""
    for src, names in restore.files.items():
        positions.write_log(positions.source_dir(folder, src), names)
