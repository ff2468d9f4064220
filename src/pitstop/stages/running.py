"""``SELECT k, COUNT(*), SUM(x) FROM t GROUP BY k [HAVING ...]`` with no window: a running
aggregate (Flink's running ``reduce``; Hazelcast's rolling aggregation), whose result per group
changes as input arrives and is never final.

State contract, format 1: one row per group seen so far::

    keys..., acc0..accN

named and typed as the stage's plan says (:class:`pitstop.plan.model.KeyColumn`,
:class:`~pitstop.plan.model.Accumulator`), in the accumulator form windows have
(:mod:`pitstop.stages.accumulators`): ``COUNT`` a BIGINT summed, ``AVG`` a sum and a count,
``MIN`` / ``MAX`` themselves, ``MIN_BY`` / ``MAX_BY`` a STRUCT<ord, val>, ``COUNT(DISTINCT x)``
an ARRAY of the distinct values, ``APPROX_COUNT_DISTINCT`` a BINARY HLL sketch. Spark keeps it as
key = (keys...), value = the accumulators' buffers (a DECIMAL sum with an "empty" flag; a set's
serialized ``collect_set`` buffer; a sketch as two, the live values' and the seeds'), read
positionally (:mod:`pitstop.stages.buffers`). A restored stage receives these
rows as seeds in its first micro-batch, merged into the groups with the live rows, so the first
batch of a restored run writes every group again (the same values, and any added column).

Running: Spark's **update** output mode. Each micro-batch hands ``foreachBatch`` exactly the
groups its input changed (checked on pyspark 4.3.0: a batch with rows for ``a`` and ``c`` hands
over ``a`` and ``c`` only); *append* is refused by Spark for an aggregation without a watermark
(``STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION``), and *complete* would hand over every group in
every batch. There is no watermark and no late event: a group's state lives as long as the job (a running
stage new in a restored job takes no clock: :meth:`pitstop.stages.base.StageKind.clock`).
The sink replaces each changed group's row by the group keys (an upsert: DuckDB and PostgreSQL
sinks, :mod:`pitstop.connectors.upsert`); a group that HAVING (or a filter after the stage)
no longer keeps is removed from the sink. File and Kafka sinks, which append, are refused when
the job is planned.

Compatibility: the keys must stay (state is kept per group). Aggregates evolve as in every
aggregating kind (:class:`pitstop.stages.accumulators.Evolution`): matched by the call as
written; a state column may widen, not narrow; an added aggregate starts empty for every group
seen before the cut (in their rows it holds only the events after the cut: EXPLAIN says so); a
removed one's state is dropped. A stage of another kind (a window) cannot seed it, nor it one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa

from pitstop.plan.model import AggregateStage, Projection, RunningSpec
from pitstop.plan.scope import Input, Layer
from pitstop.plan.types import named
from pitstop.stages.accumulators import evolve, plan_aggregate
from pitstop.stages.base import Change, StageKind, StageSeed, StageText, aggregates
from pitstop.stages.buffers import (
    expected_buffer,
    live_inputs,
    merges,
    row_columns,
    seed_inputs,
)
from pitstop.stages.windowed import SAME, evolved, key_columns, keys_changed, read_buffers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp


class Running(StageKind):
    name: ClassVar[str] = "running"
    title: ClassVar[str] = "GROUP BY without a window"
    family: ClassVar[str] = "running aggregate"
    tvf: ClassVar[str | None] = None  # planned from GROUP BY over a FROM that is no window function
    updates: ClassVar[bool] = True

    # -- planning --------------------------------------------------------------------------------
    def recognize(self, select: exp.Select, tvf: exp.Expression | None) -> bool:
        return tvf is None and aggregates(select)

    def plan(
        self, select: exp.Select, tvf: exp.Expression | None, input_: Input, stage_name: str
    ) -> tuple[AggregateStage, Layer, Projection]:
        return plan_aggregate(select, RunningSpec(), input_, stage_name)

    # -- state contract --------------------------------------------------------------------------
    def state_schema(self, stage: AggregateStage) -> str:
        cols = [f"`{k.name}` {k.type}" for k in stage.keys]
        cols += [f"{a.name} {a.type}" for a in stage.accumulators]
        return ", ".join(cols)

    def read_state(
        self,
        spark: SparkSession,
        checkpoint: Path,
        batch: int,
        operator: int,
        stage: AggregateStage,
        job: str,
    ) -> pa.Table:
        # Spark's key holds the group keys, its value the buffers.
        keys = [f"__k{i}" for i in range(len(stage.keys))]
        accs = [n for n, _ in expected_buffer(stage)]
        return read_buffers(
            self, spark, checkpoint, batch, operator, stage, job, keys, accs, slice(0, None), None
        )

    # -- restore ---------------------------------------------------------------------------------
    def seed(self, old: AggregateStage, new: AggregateStage, path: str, watermark_ms: int) -> StageSeed:
        evolution = evolve(old, new)
        changed = not evolution.identity
        return StageSeed(
            path=path,
            old_size_micros=0,
            old_watermark_ms=watermark_ms,
            schema=self.state_schema(old) if changed else None,
            columns=evolution.seed_columns if changed else None,
        )

    def same_state(self, old: AggregateStage, new: AggregateStage) -> bool:
        return (old.keys, old.accumulators, old.functions) == (new.keys, new.accumulators, new.functions)

    def frame(
        self,
        spark: SparkSession,
        live: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
        *,
        watermarked: bool = False,
    ) -> DataFrame:
        """live rows -> (keys, acc inputs) --+
        seeds (keys, accs)                --+--> union -> GROUP BY keys: merge accumulators"""
        from pyspark.sql import functions as F

        keys = key_columns(stage)
        rows = live.selectExpr(
            *[named(f"CAST(({k.sql}) AS {k.type})", k.name) for k in stage.keys], *live_inputs(stage)
        )
        if seed is not None:
            seeds = spark.readStream.schema(seed.schema or self.state_schema(stage)).parquet(seed.path)
            if seed.columns is not None:
                seeds = seeds.select(*keys, *[F.expr(sql).alias(name) for name, sql in seed.columns.items()])
            seeds = seeds.select(
                *keys, *[F.col(a.name).cast(a.type).alias(a.name) for a in stage.accumulators]
            )
            rows = rows.unionByName(seed_inputs(seeds, stage).select(*keys, *row_columns(stage)))
        return rows.groupBy(*keys).agg(*merges(stage))

    # -- compatibility ---------------------------------------------------------------------------
    def compare(self, old: AggregateStage, new: AggregateStage) -> Change:
        keys = keys_changed(old, new)
        if keys is not None:
            return keys
        evolution = evolve(old, new)
        if evolution.refused is not None:
            return Change(True, evolution.refused)
        return evolved(
            Change(False, SAME),
            evolution,
            old,
            new,
            "same keys",
            "the groups seen before the cut",
            "same keys and accumulators",
        )

    # -- EXPLAIN / DESCRIBE ----------------------------------------------------------------------
    def describe(self, stage: AggregateStage) -> StageText:
        accs = ", ".join(f"{a.kind} {a.type}" for a in stage.accumulators)
        return StageText(
            "running (no window)",
            ", ".join(f"{k.name} {k.type}" for k in stage.keys),
            f"{accs} for {', '.join(stage.functions)}",
        )


KIND = Running()
