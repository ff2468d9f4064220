"""Export a stopped run's state as a logical, open snapshot.

Layout of ``<home>/snapshots/<name>/``::

    manifest.json                  positions, watermarks, plan, versions, rows, bytes
    stages/<stage>/part-<i>.parquet  keys..., window_start, window_end, acc0..accN (one file per core)
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
from pitstop.catalog.rows import Snapshot
from pitstop.catalog.store import now
from pitstop.connectors import registry
from pitstop.engine.checkpoint import copy_checkpoint
from pitstop.engine.frames import seed_schema
from pitstop.engine.runs import ActiveRun, Cut
from pitstop.errors import PitstopError
from pitstop.faults import crash_point
from pitstop.planner.plan import AggregateStage
from pitstop.sql.names import safe_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


def snapshot_dir(home: Path, name: str) -> Path:
    return safe_path(home / "snapshots", "snapshot", name)


def export(spark: SparkSession, home: Path, name: str, run: ActiveRun, cut: Cut) -> Snapshot:
    """Write the snapshot's files; the caller records it in the catalog.

    1. Write everything into a hidden temp folder next to the final one.
    2. For each stateful stage, read its operator's state at the cut and write it as Parquet with
       pitstop's column names, after checking the state has the shape the plan expects.
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
            stage = bq.branch.stage
            if stage is None:
                continue
            batch = cut.batches[bq.branch.index]
            table = _read_state(spark, bq.checkpoint, batch, stage, run.job)
            out = safe_path(tmp / "stages", "stage", stage.name)
            out.mkdir(parents=True)
            write_stage(table, out, spark.sparkContext.defaultParallelism)
            crash_point("export.stage_written", out)
            stages[stage.name] = {
                "plan": _stage_json(run, stage.name),
                "rows": table.num_rows,
                "watermark_ms": cut.watermarks_ms[bq.branch.index],
                "batch_id": batch,
            }
            if batch is not None:
                native = safe_path(tmp / "native", "stage", stage.name)
                stages[stage.name]["native"] = {
                    "path": f"native/{stage.name}",
                    "source": bq.branch.source,
                    "partitions": copy_checkpoint(bq.checkpoint, batch, native),
                    "seeded": stage.name in run.seeds,
                    "spark": spark.version,
                    "bytes": _size(native),
                }
            total_rows += table.num_rows
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
        if branch["stage"] is not None and branch["stage"]["name"] == name:
            return dict(branch["stage"])
    raise AssertionError(name)


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            with open(p, "rb") as handle:
                os.fsync(handle.fileno())


def expected_buffer(stage: AggregateStage) -> list[tuple[str, str]]:
    """The state value fields Spark keeps for the stage's accumulators: (our name, Spark type)."""
    from pitstop.planner.types import decimal_parts

    fields: list[tuple[str, str]] = []
    for a in stage.accumulators:
        parts = decimal_parts(a.type)
        if a.kind in ("sum", "count") and parts is not None:
            fields.append((a.name, f"decimal({min(38, parts[0] + 10)},{parts[1]})"))
            fields.append((f"{a.name}__empty", "boolean"))
        else:
            fields.append((a.name, _spark_simple(a.type)))
    return fields


def _spark_simple(type_text: str) -> str:
    return {"INT": "int", "STRING": "string"}.get(type_text, type_text.lower())


def _read_state(
    spark: SparkSession, ckpt: Path, batch: int | None, stage: AggregateStage, job: str
) -> pa.Table:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType, _parse_datatype_string

    target = _parse_datatype_string(seed_schema(stage))
    assert isinstance(target, StructType)
    if batch is None:
        return pa.Table.from_batches([], schema=_arrow(target))
    # Stateful operators are the checkpoint's state/<operatorId> folders: listing them is what
    # Spark's state-metadata source reports, without a Spark job (~0.4 s in a fresh session).
    operators = _operator_ids(ckpt)
    if operators != [0]:
        raise PitstopError(
            f"job '{job}', stage '{stage.name}': expected one stateful operator in the checkpoint, "
            f"found {len(operators)}; the snapshot was not written"
        )
    state: DataFrame = (
        spark.read.format("statestore").option("batchId", batch).option("operatorId", 0).load(str(ckpt))
    )
    key_t = state.schema["key"].dataType
    value_t = state.schema["value"].dataType
    assert isinstance(key_t, StructType) and isinstance(value_t, StructType)
    # Check the shape. Tumbling and sliding: key = (window, keys...), value = the accumulators'
    # buffers. Sessions: key = (keys..., session start), value = (window, keys..., buffers).
    expected = expected_buffer(stage)
    nkeys = len(stage.keys)
    session = stage.window.kind == "session"
    buffers = value_t.fields[1 + nkeys :] if session else value_t.fields
    got = [f.dataType.simpleString() for f in buffers]
    if len(key_t.fields) != 1 + nkeys or got != [t for _, t in expected]:
        raise PitstopError(
            f"job '{job}', stage '{stage.name}': the state in the checkpoint has key {key_t.simpleString()} "
            f"and value {value_t.simpleString()}, not the shape the plan expects "
            f"({', '.join(t for _, t in expected)}); the snapshot was not written"
        )
    keys = [f"__k{i}" for i in range(nkeys)]
    accs = [n for n, _ in expected]
    if session:
        key_cast = _renamed(key_t, [*keys, "__start"])
        value_cast = _renamed(value_t, ["__window", *[f"__v{i}" for i in range(nkeys)], *accs])
        window = "v.__window"
    else:
        key_cast = _renamed(key_t, ["__window", *keys])
        value_cast = _renamed(value_t, accs)
        window = "k.__window"
    flat = state.select(F.col("key").cast(key_cast).alias("k"), F.col("value").cast(value_cast).alias("v"))
    columns = [F.col(f"k.__k{i}").cast(k.type).alias(k.name) for i, k in enumerate(stage.keys)]
    columns += [F.col(f"{window}.start").alias("window_start"), F.col(f"{window}.end").alias("window_end")]
    columns += [F.col(f"v.{a.name}").cast(a.type).alias(a.name) for a in stage.accumulators]
    table = flat.select(*columns).toArrow()
    return table.cast(_arrow(target))


def _renamed(struct: Any, names: list[str]) -> Any:
    """``struct`` with its fields renamed positionally (a struct cast in Spark is positional)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(n, f.dataType, True) for n, f in zip(names, struct.fields, strict=True)])


def _operator_ids(ckpt: Path) -> list[int]:
    try:
        return sorted(int(e.name) for e in os.scandir(ckpt / "state") if e.is_dir() and e.name.isdigit())
    except FileNotFoundError:
        return []


def _arrow(schema: Any) -> pa.Schema:
    from pitstop.connectors.files import arrow_schema

    return arrow_schema(schema)
