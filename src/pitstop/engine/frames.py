"""Build the streaming DataFrame of one branch from its plan (and, on restore, its seeds).

    source -> pre-layers (views, subqueries) -> [JOIN]
           -> { [WHERE] -> stateful stage -> projections } ... -> sink

A branch's stateful stages form a chain (:class:`pitstop.plan.model.Step`): each stage's rows,
through the projections after it, are the next stage's input, in one Spark query (Spark runs
several stateful operators in append mode, the watermark flowing through them).

A JOIN (:class:`pitstop.plan.model.JoinSpec`) renames both sides' columns to the branch's flat
names, then joins a static table (:mod:`pitstop.connectors.tables`) or, for an interval join,
hands both streams to the join's stage kind, which is the branch's first stateful stage.

After a stage whose rows are updated (a running aggregate), the projections' filters mark rows
(``__pitstop_keep``) rather than drop them, so that the sink removes a group no longer kept.

Each stateful stage is run by its kind (:meth:`pitstop.stages.base.StageKind.frame`), which is
also where a restored stage's seed rows go in and where late live events are dropped. Before it,
the rows it will drop as late are counted (:mod:`pitstop.engine.late`): the sources of a branch
whose first stage can drop late rows are read stamped with their batch and its watermark
(:mod:`pitstop.engine.stamped`), columns that go as far as that stage.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pitstop.catalog.rows import Mapping
from pitstop.connectors import registry, tables
from pitstop.connectors.upsert import KEEP
from pitstop.engine import late
from pitstop.names import quote_ident
from pitstop.plan.model import AggregateStage, Branch, Projection, Step
from pitstop.plan.types import SPARK, ddl, named
from pitstop.stages import registry as kinds
from pitstop.stages.base import StageSeed

__all__ = ["StageSeed", "branch_frame", "source_format", "source_frame"]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def source_format(spark: SparkSession, mapping: Mapping, query_key: str, stamped: bool = False) -> str:
    """Register the mapping's streaming source under a name of this query's own, and return it.

    A registered Python data source is one Spark ``PythonFunction`` whose environment map Spark
    mutates whenever it starts a Python process for it on the driver
    (``PythonStreamingSourceRunner.init`` puts ``SPARK_LOCAL_DIRS`` and others into the map
    itself). Queries sharing one registration then race: another query's task can be serialized
    while the map changes, and Spark fails it with ``java.io.OptionalDataException`` (seen when
    two branches start together). One registration per query gives each query its own map.
    """
    connector = registry.connector(mapping.type)
    base = connector.stream_source()
    name = f"{base.name()}_{re.sub(r'[^A-Za-z0-9]', '_', query_key)}"
    if stamped:  # its rows with their batch, watermark and partition (pitstop.engine.late, step 1)
        from pitstop.engine.stamped import stamped as stamping

        own = stamping(base, name, connector.partitioned)
    else:
        own = type(f"{base.__name__}_{len(name)}", (base,), {"name": classmethod(lambda cls, n=name: n)})
    spark.dataSource.register(own)
    return name


def source_frame(
    spark: SparkSession,
    mapping: Mapping,
    run_dir: str,
    start: Any,
    parallelism: int,
    query_key: str,
    checkpoint: str | None = None,
) -> DataFrame:
    """The mapping's stream; with ``checkpoint`` (the query's), stamped with each row's batch and
    watermark and, for a source with partitions, its partition (:data:`pitstop.engine.late.HIDDEN`)."""
    schema = ddl(mapping)
    if checkpoint is not None:
        stamps = late.HIDDEN if registry.connector(mapping.type).partitioned else late.HIDDEN[:2]
        schema += "".join(f", {c} BIGINT" for c in stamps)
    reader = (
        spark.readStream.schema(schema)
        .option("source", mapping.name)
        .option("run_dir", run_dir)
        .option("parallelism", str(parallelism))
        # The mapping's WATERMARK column: a record without it is a reject (connectors.rejects).
        .option("event_time", mapping.watermark.column if mapping.watermark is not None else "")
        .format(source_format(spark, mapping, query_key, stamped=checkpoint is not None))
    )
    if checkpoint is not None:
        reader = reader.option("late_checkpoint", checkpoint)
    options = registry.connector(mapping.type).reader_options(mapping, start)
    return reader.options(**options).load()


def branch_frame(
    spark: SparkSession,
    branch: Branch,
    source: Mapping,
    run_dir: str,
    start: Any,
    parallelism: int,
    seeds: dict[str, StageSeed],
    query_key: str,
    right: Mapping | None = None,
    right_start: Any = None,
    checkpoint: str | None = None,
    keep: late.Keep | None = None,
    keyed: bool = False,
) -> DataFrame:
    """``seeds``: the seed of each restored stage of the branch, by stage name; ``right``: a
    join's right mapping (``right_start``: where an interval join starts reading it);
    ``checkpoint``: the query's, where its sources learn each batch's watermark to count late rows
    by (None: the sources are not stamped, and only the rows a restored stage drops itself are
    counted); ``keep``: where late rows are kept; ``keyed``: the sink replaces rows by key
    (:func:`_updated_rows`), also where the branch has no upsert keys of its own (a window table
    an early-results job keyed: a window closed by a HAVING it no longer passes loses its row)."""
    from pyspark.sql import functions as F

    steps = [*branch.before]
    if branch.stage is not None:
        steps.append(Step(branch.where_sql, branch.stage, ()))
    stamped = checkpoint if steps and _tells_late(steps[0].stage, seeds.get(steps[0].stage.name)) else None
    df = _project(
        source_frame(spark, source, run_dir, start, parallelism, query_key, stamped), branch.pre_layers
    )
    joined = False  # an interval join: the first step's stage, run on both streams here
    join = branch.join
    if join is not None:
        assert right is not None, branch.sink
        df = df.selectExpr(*[named(c.sql, c.name) for c in join.left_columns], *_hidden(df))
        if join.kind == "table":
            table = tables.table_frame(spark, right, registry.connector(right.type), run_dir, query_key)
            table = table.selectExpr(*[named(c.sql, c.name) for c in join.right_columns])
            df = _project(df.join(table, F.expr(join.on_sql), join.how), branch.join_layers)
        else:
            other = source_frame(
                spark, right, run_dir, right_start, parallelism, f"{query_key}_{right.name}", stamped
            )
            other = other.selectExpr(*[named(c.sql, c.name) for c in join.right_columns], *_hidden(other))
            first = steps[0].stage
            seed = seeds.get(first.name)
            sides = kinds.kind_of(first).join_lateness(first, seed, late.WATERMARK if stamped else "0")
            if sides is not None and stamped:
                df = late.watched(df, sides[0], first.name, branch.source, keep, 0)
                other = late.watched(other, sides[1], first.name, right.name, keep, 1)
            df = kinds.kind_of(first).join_frame(
                spark, df.drop(*late.HIDDEN), other.drop(*late.HIDDEN), first, seed
            )
            joined = True
    if branch.stage is None and branch.where_sql:
        df = df.filter(branch.where_sql)
    # Spark refuses a second watermark on one stream: a stage after one that set the watermark
    # (a ROW_NUMBER deduplication, an interval join, a window) goes on with its rows' own.
    watermarked = joined
    for i, step in enumerate(steps):
        stage = step.stage
        kind = kinds.kind_of(stage)
        seed = seeds.get(stage.name)
        if not (joined and i == 0):
            if step.where_sql:
                df = df.filter(step.where_sql)
            # The rows it drops as late, counted: by the batch's watermark where the rows carry it
            # (the first stage), else only those a restored stage drops itself.
            counts_all = i == 0 and stamped is not None
            lateness = kind.lateness(stage, seed, late.WATERMARK if counts_all else "0")
            if lateness is not None and (counts_all or seed is not None):
                df = late.watched(df, lateness, stage.name, branch.source, keep, 0)
            df = kind.frame(spark, df.drop(*late.HIDDEN), stage, seed, watermarked=watermarked)
        watermarked = watermarked or kind.clock(stage, 0) is not None
        if i < len(steps) - 1:
            df = _project(df, step.layers)
    if branch.upsert_keys or keyed:
        return _updated_rows(df, branch)
    return _project(df, branch.layers)


def _tells_late(stage: AggregateStage, seed: StageSeed | None) -> bool:
    """Whether a branch's first stage can drop rows as late, so its sources are read stamped."""
    kind = kinds.kind_of(stage)
    return kind.lateness(stage, seed, "0") is not None or kind.join_lateness(stage, seed, "0") is not None


def _hidden(df: DataFrame) -> list[str]:
    """The stamp columns ``df`` carries (pitstop.engine.late, step 1), to pass on through a projection."""
    return [c for c in late.HIDDEN if c in df.columns]


def _project(df: DataFrame, layers: tuple[Projection, ...]) -> DataFrame:
    """Each layer's filter and projection, from SQL text (one JVM call each: ``named``); the stamp
    columns go through."""
    for layer in layers:
        if layer.where_sql:
            df = df.filter(layer.where_sql)
        df = df.selectExpr(*[named(c.sql, c.name) for c in layer.columns], *_hidden(df))
    return df


def _updated_rows(df: DataFrame, branch: Branch) -> DataFrame:
    """The layers after an updating stage, whose filters mark rows instead of dropping them: a
    group that a filter (HAVING) no longer keeps must be removed from the sink, so its row goes
    on with ``__pitstop_keep`` false (:mod:`pitstop.connectors.upsert`)."""
    keep = "true"
    for layer in branch.layers:
        if layer.where_sql:
            keep = f"{keep} AND coalesce(({layer.where_sql}), false)"
        df = df.selectExpr(*[named(c.sql, c.name) for c in layer.columns], named(keep, KEEP))
        keep = quote_ident(KEEP, SPARK)
    return df
