"""Build the streaming DataFrame of one branch from its plan (and, on restore, its seeds).

A window-aggregate stage runs in accumulator form::

    live rows -> [WHERE] -> (keys, __ts, acc0..accN)  --+
    snapshot seeds (keys, window_start as __ts, accs) --+--> union -> watermark(__ts)
        -> GROUP BY window(__ts), keys: merge accumulators -> finish -> projections -> sink

On restore, live rows are kept only if the window they fall into *in the old job* had not closed
at the snapshot's watermark (Spark drops an event when its window has closed, not when its own
time is below the watermark); seeds are stamped at their old window's start, so that a window
resized to a multiple folds old windows into the new ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pitstop.catalog.rows import Mapping
from pitstop.connectors import rejects
from pitstop.planner.plan import MERGE_FUNCTION, AggregateStage, Branch
from pitstop.planner.types import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class StageSeed:
    """What a restored stage receives: its snapshot rows and the old job's window and watermark."""

    path: str  # folder of Parquet files with keys, window_start, window_end, acc0..accN
    old_size_micros: int
    old_watermark_ms: int
    old_gap_micros: int | None = None  # session windows


def ddl(mapping: Mapping) -> str:
    return ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in mapping.columns)


def source_format(spark: SparkSession, mapping: Mapping, query_key: str) -> str:
    """Register the mapping's streaming source under a name of this query's own, and return it.

    A registered Python data source is one Spark ``PythonFunction`` whose environment map Spark
    mutates whenever it starts a Python process for it on the driver
    (``PythonStreamingSourceRunner.init`` puts ``SPARK_LOCAL_DIRS`` and others into the map
    itself). Queries sharing one registration then race: another query's task can be serialized
    while the map changes, and Spark fails it with ``java.io.OptionalDataException`` (seen when
    two branches start together). One registration per query gives each query its own map.
    """
    from pitstop.connectors.files import FileSource
    from pitstop.connectors.generator import GeneratorSource

    base: type[FileSource] | type[GeneratorSource] = FileSource if mapping.type == "file" else GeneratorSource
    name = f"{base.name()}_{re.sub(r'[^A-Za-z0-9]', '_', query_key)}"
    own = type(f"{base.__name__}_{len(name)}", (base,), {"name": classmethod(lambda cls, n=name: n)})
    spark.dataSource.register(own)
    return name


def source_frame(
    spark: SparkSession, mapping: Mapping, run_dir: str, start: int, parallelism: int, query_key: str
) -> DataFrame:
    reader = (
        spark.readStream.schema(ddl(mapping))
        .option("source", mapping.name)
        .option("run_dir", run_dir)
        .option("parallelism", str(parallelism))
        .format(source_format(spark, mapping, query_key))
    )
    if mapping.type == "file":
        return (
            reader.option("path", mapping.options["path"])
            .option("format", mapping.options.get("format", "json"))
            .option("header", mapping.options.get("header", "true"))
            .option("on_error", rejects.policy(mapping.options))
            .option("start", str(start))
            .load()
        )
    return reader.options(**mapping.options).option("start_pos", str(start)).load()


def _duration(micros: int) -> str:
    if micros % 1_000_000 == 0:
        return f"{micros // 1_000_000} seconds"
    if micros % 1000 == 0:
        return f"{micros // 1000} milliseconds"
    return f"{micros} microseconds"


def seed_schema(stage: AggregateStage) -> str:
    cols = [f"`{k.name}` {k.type}" for k in stage.keys]
    cols += ["window_start TIMESTAMP", "window_end TIMESTAMP"]
    cols += [f"{a.name} {a.type}" for a in stage.accumulators]
    return ", ".join(cols)


def branch_frame(
    spark: SparkSession,
    branch: Branch,
    source: Mapping,
    run_dir: str,
    start: int,
    parallelism: int,
    seed: StageSeed | None,
    query_key: str,
) -> DataFrame:
    from pyspark.sql import functions as F

    df = source_frame(spark, source, run_dir, start, parallelism, query_key)
    for layer in branch.pre_layers:
        if layer.where_sql:
            df = df.filter(F.expr(layer.where_sql))
        df = df.select(*[F.expr(c.sql).alias(c.name) for c in layer.columns])
    if branch.where_sql:
        df = df.filter(F.expr(branch.where_sql))
    stage = branch.stage
    if stage is not None:
        df = _aggregate(spark, df, stage, seed)
    for layer in branch.layers:
        if layer.where_sql:
            df = df.filter(F.expr(layer.where_sql))
        df = df.select(*[F.expr(c.sql).alias(c.name) for c in layer.columns])
    return df


def _aggregate(
    spark: SparkSession, live: DataFrame, stage: AggregateStage, seed: StageSeed | None
) -> DataFrame:
    from pyspark.sql import functions as F

    keys = [F.col(f"`{k.name}`") for k in stage.keys]
    window = stage.window
    pre = live.select(
        *[F.expr(k.sql).cast(k.type).alias(k.name) for k in stage.keys],
        F.col(f"`{window.time_column}`").alias("__ts"),
        *[F.expr(a.input_sql).cast(a.type).alias(a.name) for a in stage.accumulators],
        F.lit(False).alias("__seed"),
    )
    if window.kind == "session":
        return _sessions(spark, pre, stage, seed)
    if seed is not None:
        wm_us = seed.old_watermark_ms * 1000
        if window.kind == "tumble" and wm_us > 0:
            # Drop exactly the live events whose old window had closed at the cut.
            size = seed.old_size_micros
            pre = pre.filter(
                F.expr(f"unix_micros(__ts) - pmod(unix_micros(__ts), {size}) + {size} > {wm_us}")
            )
        # Tumbling: a seed stamped at its old window's start folds into the new window holding it.
        # Sliding: it goes to the new window with the same end, so stamp it at that window's start.
        stamp = (
            F.col("window_start")
            if window.kind == "tumble"
            else F.expr(f"timestamp_micros(unix_micros(window_end) - {window.size_micros})")
        )
        seeds = (
            spark.readStream.schema(seed_schema(stage))
            .parquet(seed.path)
            .select(
                *keys,
                stamp.alias("__ts"),
                *[F.col(a.name).cast(a.type) for a in stage.accumulators],
                F.lit(True).alias("__seed"),
            )
        )
        pre = pre.unionByName(seeds)
    delay = _duration(stage.watermark_delay_micros) if stage.watermark_delay_micros else "0 seconds"
    pre = pre.withWatermark("__ts", delay)
    if window.kind == "tumble":
        assigned = F.window("__ts", _duration(window.size_micros))
    else:
        assigned = F.window("__ts", _duration(window.size_micros), _duration(window.slide_micros or 0))
    rows = pre.select(
        assigned.alias("window"), *keys, *[F.col(a.name) for a in stage.accumulators], "__seed", "__ts"
    )
    if seed is not None and window.kind == "hop":
        # An event is late for each window that had closed at the cut (Spark's rule, per window);
        # a seed belongs to exactly one of the windows it is assigned to.
        wm_us = seed.old_watermark_ms * 1000
        rows = rows.filter(
            F.expr(f"(__seed AND window.start = __ts) OR (NOT __seed AND unix_micros(window.end) > {wm_us})")
        )
    merged = rows.groupBy("window", *keys).agg(
        *[F.expr(f"{MERGE_FUNCTION[a.kind]}({a.name})").alias(a.name) for a in stage.accumulators]
    )
    return merged.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *keys,
        *[F.col(a.name) for a in stage.accumulators],
    )


def _sessions(
    spark: SparkSession, pre: DataFrame, stage: AggregateStage, seed: StageSeed | None
) -> DataFrame:
    """Session windows: one seed row per open session, with its own gap, re-forms the session as
    ``[start, last event + new gap)``; live events are late when ``ts + old gap`` had passed the
    old watermark."""
    from pyspark.sql import functions as F

    keys = [F.col(f"`{k.name}`") for k in stage.keys]
    gap = stage.window.gap_micros or stage.window.size_micros
    pre = pre.withColumn("__gap", F.lit(gap).cast("bigint"))
    if seed is not None:
        old_gap = seed.old_gap_micros or gap
        wm_us = seed.old_watermark_ms * 1000
        if wm_us > 0:
            pre = pre.filter(F.expr(f"unix_micros(__ts) + {old_gap} > {wm_us}"))
        seeds = (
            spark.readStream.schema(seed_schema(stage))
            .parquet(seed.path)
            .select(
                *keys,
                F.col("window_start").alias("__ts"),
                *[F.col(a.name).cast(a.type) for a in stage.accumulators],
                F.lit(True).alias("__seed"),
                F.expr(f"unix_micros(window_end) - {old_gap} + {gap} - unix_micros(window_start)").alias(
                    "__gap"
                ),
            )
        )
        pre = pre.unionByName(seeds)
    delay = _duration(stage.watermark_delay_micros) if stage.watermark_delay_micros else "0 seconds"
    pre = pre.withWatermark("__ts", delay)
    gap_column = F.concat(F.col("__gap").cast("string"), F.lit(" microseconds"))
    merged = pre.groupBy(F.session_window("__ts", gap_column).alias("window"), *keys).agg(
        *[F.expr(f"{MERGE_FUNCTION[a.kind]}({a.name})").alias(a.name) for a in stage.accumulators]
    )
    return merged.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *keys,
        *[F.col(a.name) for a in stage.accumulators],
    )
