"""Export a stopped run's state as a logical, open snapshot.

Layout of ``<home>/snapshots/<name>/``::

    manifest.json                  positions, watermarks, plan, versions, rows, bytes; per stage its
                                   kind and the format_version of its rows
    stages/<stage>/part-<i>.parquet  the stage's state, as its kind's state contract says (one file
                                   per core; windows: keys..., window_start, window_end, acc0..accN)
    sources/<source>.files         file sources: the files read up to the cut, in order
    native/<stage>/                Spark's own checkpoint of the stage's branch at the cut (offsets,
                                   commits and state files, hard links where the disk allows)

The Parquet rows are the snapshot: portable, readable, and what every restore can use. The native
copy is a shortcut, like Flink's native savepoint format: a job created from the snapshot whose
stage and source are unchanged (only stateless parts may differ) starts on a copy of it, so Spark
loads its state files instead of taking every key in again through the aggregation.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

import pitstop
from pitstop.catalog.clock import now
from pitstop.catalog.rows import Snapshot
from pitstop.connectors import registry
from pitstop.engine.checkpoint import copy_checkpoint
from pitstop.engine.runs import ActiveRun, Cut
from pitstop.errors import PitstopError
from pitstop.faults import crash_point
from pitstop.names import safe_path
from pitstop.stages import registry as kinds
from pitstop.stages.base import state_arrow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


def snapshot_dir(home: Path, name: str) -> Path:
    return safe_path(home / "snapshots", "snapshot", name)


def export(spark: SparkSession, home: Path, name: str, run: ActiveRun, cut: Cut) -> Snapshot:
    """Write the snapshot's files; the caller records it in the catalog.

    1. Write everything into a hidden temp folder next to the final one.
    2. For each stateful stage, read its operator's state at the cut and write it as Parquet with
       pitstop's column names, after checking the state has the shape the plan expects (the
       stage's kind reads and checks it).
    3. Record source positions (file sources: the list of files read).
    4. Write the manifest, then rename the folder into place.
    """
    # Step 1. A temp folder.
    final = snapshot_dir(home, name)
    tmp = safe_path(final.parent, "snapshot", name, prefix=".", suffix=f".{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.mkdir(parents=True)  # in the try: an unwritable snapshots folder is reported below
        stages: dict[str, Any] = {}
        total_rows = 0
        # Step 2. State of each stage.
        for bq in run.branches:
            operators = kinds.operator_ids(bq.branch)
            batch = cut.batches[bq.branch.index]
            if batch is not None and operators:
                _check_operators(bq.checkpoint, operators, run.job)
            # Each stage's clock: the branch's watermark, as each stage of a chain passes it on.
            watermark = cut.watermarks_ms[bq.branch.index]
            for stage in bq.branch.stages:
                kind = kinds.kind_of(stage)
                # The job's clock never goes back: a run that started from a snapshot (its stages
                # seeded, natively restored or new) has Spark's own watermark only from what it
                # read itself, which may be below the snapshot's (no input yet, or seeds alone).
                seed = run.seeds.get(stage.name)
                if seed is not None and kind.clock(stage, 0) is not None:
                    watermark = max(watermark, seed.old_watermark_ms)
                if batch is None:  # nothing committed yet: no state
                    table = pa.Table.from_batches([], schema=state_arrow(kind, stage))
                else:
                    (operator,) = operators[stage.name]
                    table = kind.read_state(spark, bq.checkpoint, batch, operator, stage, run.job)
                out = safe_path(tmp / "stages", "stage", stage.name)
                out.mkdir(parents=True)
                write_stage(table, out, spark.sparkContext.defaultParallelism)
                crash_point("export.stage_written", out)
                stages[stage.name] = {
                    **kinds.manifest_entry(stage),
                    "plan": _stage_json(run, stage.name),
                    "rows": table.num_rows,
                    "watermark_ms": watermark,
                    "batch_id": batch,
                }
                watermark = kind.output_watermark(stage, watermark)
                total_rows += table.num_rows
            if batch is not None and bq.branch.stages:
                # One copy of the branch's checkpoint, under the name of its last stage; each
                # stage of a chain names it (they go on from it together or not at all).
                last = bq.branch.stages[-1]
                native = safe_path(tmp / "native", "stage", last.name)
                copy = {
                    "path": f"native/{last.name}",
                    "source": bq.branch.source,
                    "partitions": copy_checkpoint(bq.checkpoint, batch, native),
                    "spark": spark.version,
                    "bytes": _size(native),
                }
                for stage in bq.branch.stages:
                    # Seeded: the stage read a seed source (its rows, or the empty one a native
                    # restore keeps); a new stage's clock alone adds no source to the query.
                    seed = run.seeds.get(stage.name)
                    stages[stage.name]["native"] = {
                        **copy,
                        "seeded": seed is not None and not seed.clock_only,
                    }
        # Step 3. Source positions.
        sources: dict[str, Any] = {}
        for src, pos in cut.positions.items():
            mapping = run.mappings[src]
            saved = registry.connector(mapping.type).save_position(run.folder, mapping, pos, tmp)
            sources[src] = {"type": mapping.type, "pos": pos, **saved}
        # Step 4. Manifest, then rename.
        manifest = {
            "snapshot": name,
            "job": run.job,
            "run_id": run.run.run_id,
            # The cut per branch: the last batch the run had committed (None: none yet). A restore
            # with 'sinkRollback' removes what the job's runs wrote after it.
            "cut": {"batches": {str(i): b for i, b in sorted(cut.batches.items())}},
            "created": now().isoformat(),
            "sources": sources,
            "stages": stages,
            "plan": run.plan.to_json(),
            "versions": {"pitstop": pitstop.__version__, "spark": spark.version},
            "rows": total_rows,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        size = _size(tmp)
        manifest["bytes"] = size
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        _fsync_tree(tmp)
        if final.exists():
            shutil.rmtree(final)  # leftover of a snapshot that never reached the catalog
        os.replace(tmp, final)
    except OSError as exc:
        # A full disk or an unwritable home (issue 10, point 8): the reason, naming the file or
        # folder, instead of a traceback; the temp folder goes, so nothing half-written is left.
        shutil.rmtree(tmp, ignore_errors=True)
        raise PitstopError(
            f"snapshot '{name}' of job '{run.job}' could not be written: {exc}. Nothing of it was "
            f"kept; free space in {final.parent} (or make it writable) and try again"
        ) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Snapshot(name, run.job, now(), str(final), size, total_rows, manifest)


def write_stage(table: pa.Table, folder: Path, parts: int) -> None:
    """Write a stage's rows as ``parts`` Parquet files (at least one, even when empty).

    A restore reads the files as the seeds of its first micro-batch; Spark reads one file (one row
    group) per task, so one file per core lets every core read seeds, rather than one core all.
    """
    parts = max(1, min(parts, table.num_rows // 10_000))
    size = -(-table.num_rows // parts)
    for i in range(parts):
        pq.write_table(table.slice(i * size, size), folder / f"part-{i}.parquet")


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _stage_json(run: ActiveRun, name: str) -> dict[str, Any]:
    for branch in run.plan.to_json()["branches"]:
        for stage in [step["stage"] for step in branch.get("before", ())] + [branch["stage"]]:
            if stage is not None and stage["name"] == name:
                return dict(stage)
    raise AssertionError(name)


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            with open(p, "rb") as handle:
                os.fsync(handle.fileno())


def _check_operators(ckpt: Path, operators: dict[str, list[int]], job: str) -> None:
    """Refuse to export when the checkpoint does not hold the stateful operators the plan expects
    (a snapshot that would restore wrong numbers is worse than none)."""
    expected = sorted(i for ids in operators.values() for i in ids)
    found = _operator_ids(ckpt)
    if found != expected:
        names = ", ".join(f"'{n}'" for n in operators)
        raise PitstopError(
            f"job '{job}', stage {names}: expected {len(expected)} stateful operator(s) in the "
            f"checkpoint, found {len(found)}; the snapshot was not written"
        )


def _operator_ids(ckpt: Path) -> list[int]:
    try:
        return sorted(int(e.name) for e in os.scandir(ckpt / "state") if e.is_dir() and e.name.isdigit())
    except FileNotFoundError:
        return []
