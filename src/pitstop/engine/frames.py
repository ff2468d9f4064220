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
also where a restored stage's seed rows go in and where late live events are dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pitstop.catalog.rows import Mapping
from pitstop.connectors import registry, tables
from pitstop.connectors.upsert import KEEP
from pitstop.names import quote_ident
from pitstop.plan.model import Branch, Projection, Step
from pitstop.plan.types import SPARK, ddl, named
from pitstop.stages import registry as kinds
from pitstop.stages.base import StageSeed

__all__ = ["StageSeed", "branch_frame", "source_format", "source_frame"]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def source_format(spark: SparkSession, mapping: Mapping, query_key: str) -> str:
    """Register the mapping's streaming source under a name of this query's own, and return it.

    A registered Python data source is one Spark ``PythonFunction`` whose environment map Spark
    mutates whenever it starts a Python process for it on the driver
    (``PythonStreamingSourceRunner.init`` puts ``SPARK_LOCAL_DIRS`` and others into the map
    itself). Queries sharing one registration then race: another query's task can be serialized
    while the map changes, and Spark fails it with ``java.io.OptionalDataException`` (seen when
    two branches start together). One registration per query gives each query its own map.
    """
    base = registry.connector(mapping.type).stream_source()
    name = f"{base.name()}_{re.sub(r'[^A-Za-z0-9]', '_', query_key)}"
    own = type(f"{base.__name__}_{len(name)}", (base,), {"name": classmethod(lambda cls, n=name: n)})
    spark.dataSource.register(own)
    return name


def source_frame(
    spark: SparkSession, mapping: Mapping, run_dir: str, start: Any, parallelism: int, query_key: str
) -> DataFrame:
    reader = (
        spark.readStream.schema(ddl(mapping))
        .option("source", mapping.name)
        .option("run_dir", run_dir)
        .option("parallelism", str(parallelism))
        # The mapping's WATERMARK column: a record without it is a reject (connectors.rejects).
        .option("event_time", mapping.watermark.column if mapping.watermark is not None else "")
        .format(source_format(spark, mapping, query_key))
    )
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
) -> DataFrame:
    """``seeds``: the seed of each restored stage of the branch, by stage name; ``right``: a
    join's right mapping (``right_start``: where an interval join starts reading it)."""
    from pyspark.sql import functions as F

    df = _project(source_frame(spark, source, run_dir, start, parallelism, query_key), branch.pre_layers)
    steps = [*branch.before]
    if branch.stage is not None:
        steps.append(Step(branch.where_sql, branch.stage, ()))
    joined = False  # an interval join: the first step's stage, run on both streams here
    join = branch.join
    if join is not None:
        assert right is not None, branch.sink
        df = df.selectExpr(*[named(c.sql, c.name) for c in join.left_columns])
        if join.kind == "table":
            table = tables.table_frame(spark, right, registry.connector(right.type), run_dir, query_key)
            table = table.selectExpr(*[named(c.sql, c.name) for c in join.right_columns])
            df = _project(df.join(table, F.expr(join.on_sql), join.how), branch.join_layers)
        else:
            other = source_frame(spark, right, run_dir, right_start, parallelism, f"{query_key}_{right.name}")
            other = other.selectExpr(*[named(c.sql, c.name) for c in join.right_columns])
            first = steps[0].stage
            df = kinds.kind_of(first).join_frame(spark, df, other, first, seeds.get(first.name))
            joined = True
    if branch.stage is None and branch.where_sql:
        df = df.filter(branch.where_sql)
    # Spark refuses a second watermark on one stream: a stage after one that set the watermark
    # (a ROW_NUMBER deduplication, an interval join, a window) goes on with its rows' own.
    watermarked = joined
    for i, step in enumerate(steps):
        stage = step.stage
        kind = kinds.kind_of(stage)
        if not (joined and i == 0):
            if step.where_sql:
                df = df.filter(step.where_sql)
            df = kind.frame(spark, df, stage, seeds.get(stage.name), watermarked=watermarked)
        watermarked = watermarked or kind.clock(stage, 0) is not None
        if i < len(steps) - 1:
            df = _project(df, step.layers)
    if branch.upsert_keys:
        return _updated_rows(df, branch)
    return _project(df, branch.layers)


def _project(df: DataFrame, layers: tuple[Projection, ...]) -> DataFrame:
    """Each layer's filter and projection, from SQL text (one JVM call each: ``named``)."""
    for layer in layers:
        if layer.where_sql:
            df = df.filter(layer.where_sql)
        df = df.selectExpr(*[named(c.sql, c.name) for c in layer.columns])
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
