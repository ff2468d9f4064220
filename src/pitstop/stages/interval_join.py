"""Interval join of two streams::

    SELECT ... FROM clicks a JOIN views b
    ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR

A left row (``a``, the FROM) and a right row (``b``, the JOIN) of equal keys make one output row
when the right row's time lies within ``[left time + lower, left time + upper]`` (inclusive).
It runs as Spark's stream-stream inner join, with a watermark on each side (each mapping's own
WATERMARK clause); the pair is emitted in the micro-batch where its second row arrives, once.
Spark buffers each side's rows until the watermark (the lesser of the two sides') shows that no
row still to come can match them, and drops an arriving row at or below the watermark as late.
Each side's own watermark lives in Spark's memory only; :mod:`pitstop.engine.clocks` keeps it
across a restart of the query.

State contract, format 1: the rows each side has buffered at the cut, one row each::

    side STRING,              -- 'left' or 'right'
    <left columns...>,        -- a left row's columns (NULL in a right row)
    <right columns...>        -- a right row's columns (NULL in a left row)

Columns carry the branch's joined (flat) names (:class:`pitstop.plan.model.JoinSpec`): of each
side the columns the branch uses (keys, time, and what the SELECT and WHERE read), in the
mapping's order; Spark prunes the others before the join, so its state holds exactly these.
(Spark keeps four stores per join; the state data source reads each side with ``joinSide`` =
``left`` / ``right`` as key = the join keys, value = the side's input row, read positionally.
pitstop adds a boolean seed flag to each side's row, always, so that a job's plan is the same
whether it was seeded or not.)

Restore from rows: the buffered rows go back in with the first micro-batch, each into its own side,
with its side's seed flag set; the join condition holds ``NOT (left seed AND right seed)``, so
**two seeds are never joined with each other**: every pair of two rows buffered at the cut was
emitted by the old job already (a pair is emitted when its second row arrives). A seed joins a live
row of the other side, so a pair that straddles the cut (one row before it, one after) is emitted
once, by the restored job; a pair of two live rows as always. Batch 0 runs with watermark 0
(nothing is dropped or evicted in it), so a live row that the old job would have dropped as late
(time at or below the snapshot's watermark) is dropped on the way in (so is it by an interval join
new in a restored job: one clock per job, on both sides, as Spark's join applies one watermark to
both). The seeds are unioned in before each side's watermark, so the restored job's watermark after
its first batch is computed over them too and picks up where the old one stood.

Restore native: an unchanged stage (same keys, times, bound, delays, columns and right mapping)
goes on from the snapshot's copy of the old checkpoint.

Compatibility: the keys and the time columns must stay (the buffered rows are matched by those
keys within that bound), and so must the right mapping. A side's buffered columns may change as
the SELECT does: a column no longer used is dropped from the seeds; a column newly used is NULL in
the rows buffered before the cut (restored with a warning naming it: a pair made with such a row
holds NULL there); a column whose type changed is refused. The bound may change, and the rows
buffered at the cut are joined under the new bound:

- **narrowed** (the new interval within the old): restored, exact: the old job kept every row
  that could still match under the old bound, so every row that can match under the narrower one.
- **widened**: restored with a warning: the old job evicted a row once the *old* bound said it
  could match nothing more, so a pair of a row before the cut and one after it that is further
  apart than the old bound allows (and within the new one) is missed if that row was evicted.
  Refusing would be the alternative; the loss is bounded (only pairs straddling the cut, only
  beyond the old bound) and EXPLAIN says so before anything starts.
- watermark delays may change: rows keep their place; the new delays hold from the cut on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa

from pitstop.errors import PitstopError
from pitstop.intervals import format_interval
from pitstop.plan.model import AggregateStage, IntervalSpec, Projection
from pitstop.plan.scope import Input, Layer
from pitstop.stages.base import Change, Lateness, StageKind, StageSeed, StageText, behind, state_arrow
from pitstop.stages.windowed import duration, renamed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

LEFT_SEED = "__pitstop_lseed"
RIGHT_SEED = "__pitstop_rseed"


def spec(stage: AggregateStage) -> IntervalSpec:
    assert isinstance(stage.params, IntervalSpec), stage.name
    return stage.params


def offset_sql(column: str, micros: int) -> str:
    """``column`` plus a signed offset, as Spark SQL that its join planner reads as a bound."""
    if micros == 0:
        return f"`{column}`"
    sign = "+" if micros > 0 else "-"
    return f"`{column}` {sign} INTERVAL {duration(abs(micros))}"


def offset_text(micros: int) -> str:
    if micros == 0:
        return ""
    return f" {'+' if micros > 0 else '-'} {format_interval(abs(micros))}"


class IntervalJoin(StageKind):
    name: ClassVar[str] = "interval_join"
    title: ClassVar[str] = "interval join"
    family: ClassVar[str] = "join"
    tvf: ClassVar[str | None] = None  # planned from FROM a JOIN b ON ... a time bound (pitstop.planner.joins)
    suffix: ClassVar[str] = "join"

    # -- planning --------------------------------------------------------------------------------
    def plan(
        self, select: exp.Select, tvf: exp.Expression | None, input_: Input, stage_name: str
    ) -> tuple[AggregateStage, Layer, Projection]:
        raise PitstopError(
            f"stage '{stage_name}': an interval join is planned from the JOIN's ON (pitstop.planner.joins)"
        )

    # -- state contract --------------------------------------------------------------------------
    def state_schema(self, stage: AggregateStage) -> str:
        iv = spec(stage)
        cols = ["side STRING"] + [f"`{c.name}` {c.type}" for c in (*iv.left_columns, *iv.right_columns)]
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
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        iv = spec(stage)
        parts = []
        for side, columns, other in (
            ("left", iv.left_columns, iv.right_columns),
            ("right", iv.right_columns, iv.left_columns),
        ):
            state = (
                spark.read.format("statestore")
                .option("batchId", batch)
                .option("operatorId", operator)
                .option("joinSide", side)
                .load(str(checkpoint))
            )
            value_t = state.schema["value"].dataType
            assert isinstance(value_t, StructType)
            got = [f.dataType.simpleString() for f in value_t.fields]
            if len(got) != len(columns) + 1 or got[-1] != "boolean":
                raise PitstopError(
                    f"job '{job}', stage '{stage.name}': the {side} side's state in the checkpoint holds "
                    f"rows {value_t.simpleString()}, not the shape the plan expects ({len(columns)} "
                    "column(s) and a seed flag); the snapshot was not written"
                )
            names = [f"__c{i}" for i in range(len(columns))] + ["__seed"]
            flat = state.select(F.col("value").cast(renamed(value_t, names)).alias("v"))
            parts.append(
                flat.select(
                    F.lit(side).alias("side"),
                    *[F.col(f"v.__c{i}").cast(c.type).alias(c.name) for i, c in enumerate(columns)],
                    *[F.lit(None).cast(c.type).alias(c.name) for c in other],
                )
            )
        order = ["side", *[c.name for c in (*iv.left_columns, *iv.right_columns)]]
        rows = parts[0].select(*order).unionByName(parts[1].select(*order))
        return rows.toArrow().cast(state_arrow(self, stage))

    # -- restore ---------------------------------------------------------------------------------
    def seed(self, old: AggregateStage, new: AggregateStage, path: str, watermark_ms: int) -> StageSeed:
        schema = self.state_schema(old)
        return StageSeed(
            path=path,
            old_size_micros=0,
            old_watermark_ms=watermark_ms,
            schema=None if schema == self.state_schema(new) else schema,
        )

    def clock(self, stage: AggregateStage, watermark_ms: int) -> StageSeed | None:
        # New in a restored job: a row at or below the job's watermark is late on either side.
        return StageSeed(path="", old_size_micros=0, old_watermark_ms=watermark_ms, clock_only=True)

    def output_watermark(self, stage: AggregateStage, watermark_ms: int) -> int:
        """Spark's (``StreamingSymmetricHashJoinExec.produceOutputWatermark``): the least of the
        input watermark and each side's state watermark, the oldest time a buffered row of that
        side can still be paired at: ``right time BETWEEN left time + lower AND left time + upper``
        keeps a left row until the watermark passes its time + upper, a right row until it passes
        its time - lower; one millisecond less for the inclusive bounds."""
        iv = stage.interval
        assert iv is not None, stage.name
        left = watermark_ms - iv.upper_micros // 1000 - 1
        right = watermark_ms + iv.lower_micros // 1000 - 1
        return min(watermark_ms, left, right)

    def same_state(self, old: AggregateStage, new: AggregateStage) -> bool:
        def part(s: AggregateStage) -> tuple[object, ...]:
            return (s.keys, s.watermark_delay_micros, s.params)

        return part(old) == part(new)

    def frame(
        self,
        spark: SparkSession,
        live: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
        *,
        watermarked: bool = False,
    ) -> DataFrame:
        raise PitstopError(f"stage '{stage.name}': an interval join reads two streams (join_frame)")

    def join_lateness(
        self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str
    ) -> tuple[Lateness, Lateness]:
        """Spark drops an arriving row of either side whose time is at or below the watermark
        (restored, :meth:`join_frame` drops one at or below the old watermark)."""
        lt = stage.time_column
        assert lt is not None
        return (
            behind(f"`{lt}`", watermark_ms, seed),
            behind(f"`{spec(stage).right_time}`", watermark_ms, seed),
        )

    def join_frame(
        self,
        spark: SparkSession,
        left: DataFrame,
        right: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
    ) -> DataFrame:
        """left live rows [late ones dropped]  + left seeds  -> watermark --+
        right live rows [late ones dropped] + right seeds -> watermark --+--> join, seeds not with seeds"""
        from pyspark.sql import functions as F

        iv = spec(stage)
        lt, rt = stage.time_column, iv.right_time
        assert lt is not None
        left = left.withColumn(LEFT_SEED, F.lit(False))
        right = right.withColumn(RIGHT_SEED, F.lit(False))
        if seed is not None:
            # Step 1. Late for the old job: late for this one (one clock per job).
            wm_us = seed.old_watermark_ms * 1000
            if wm_us > 0:
                left = left.filter(F.unix_micros(F.col(f"`{lt}`")) > F.lit(wm_us))
                right = right.filter(F.unix_micros(F.col(f"`{rt}`")) > F.lit(wm_us))
        if seed is not None and not seed.clock_only:
            # Step 2. Each side's buffered rows back into it, flagged as seeds.
            for side, columns, flag in (
                ("left", iv.left_columns, LEFT_SEED),
                ("right", iv.right_columns, RIGHT_SEED),
            ):
                rows = spark.readStream.schema(seed.schema or self.state_schema(stage)).parquet(seed.path)
                kept = set(rows.columns)  # a column the old stage did not buffer is NULL
                rows = rows.filter(F.col("side") == F.lit(side)).select(
                    *[
                        (F.col(f"`{c.name}`") if c.name in kept else F.lit(None)).cast(c.type).alias(c.name)
                        for c in columns
                    ],
                    F.lit(True).alias(flag),
                )
                if side == "left":
                    left = left.unionByName(rows)
                else:
                    right = right.unionByName(rows)
        # Step 3. The watermarks, over seeds and live rows alike, and the join.
        left = left.withWatermark(lt, _delay(stage.watermark_delay_micros))
        right = right.withWatermark(rt, _delay(iv.right_delay_micros))
        cond = [f"`{k.name}` = `{rk}`" for k, rk in zip(stage.keys, iv.right_keys, strict=True)]
        cond.append(f"`{rt}` BETWEEN {offset_sql(lt, iv.lower_micros)} AND {offset_sql(lt, iv.upper_micros)}")
        cond.append(f"NOT ({LEFT_SEED} AND {RIGHT_SEED})")
        return left.join(right, F.expr(" AND ".join(cond)), "inner").drop(LEFT_SEED, RIGHT_SEED)

    # -- compatibility ---------------------------------------------------------------------------
    def compare(self, old: AggregateStage, new: AggregateStage) -> Change:
        o, n = spec(old), spec(new)
        keys = lambda s, iv: [  # noqa: E731
            f"{k.name} = {rk} ({k.type})" for k, rk in zip(s.keys, iv.right_keys, strict=True)
        ]
        if keys(old, o) != keys(new, n):
            return Change(
                True,
                f"join keys changed from ({', '.join(keys(old, o))}) to ({', '.join(keys(new, n))}); keep "
                "them or give the stage a new name (the buffered rows are found by their keys)",
            )
        if (old.time_column, o.right_time) != (new.time_column, n.right_time):
            return Change(
                True,
                f"the join's time columns changed from ({old.time_column}, {o.right_time}) to "
                f"({new.time_column}, {n.right_time}); keep them or give the stage a new name",
            )
        if o.right != n.right:
            return Change(
                True,
                f"the joined stream changed from '{o.right}' to '{n.right}'; its buffered rows are rows of "
                f"'{o.right}': keep it or give the stage a new name",
            )
        notes: list[str] = []
        warnings: list[str] = []
        pairs = (("left", o.left_columns, n.left_columns), ("right", o.right_columns, n.right_columns))
        for side, a, b in pairs:
            was = {c.name: c.type for c in a}
            for c in b:
                if c.name in was and was[c.name] != c.type:
                    return Change(
                        True,
                        f"column {c.name} of the {side} side changed type from {was[c.name]} to {c.type}; "
                        "the buffered rows hold the old type: keep it or give the stage a new name",
                    )
            added = [c.name for c in b if c.name not in was]
            dropped = sorted(set(was) - {c.name for c in b})
            if added:
                warnings.append(
                    f"column(s) {', '.join(added)} of the {side} side were not buffered before the cut: a "
                    "pair made with a row buffered then holds NULL in them"
                )
            if dropped:
                notes.append(f"column(s) {', '.join(dropped)} of the {side} side no longer buffered")
        if (o.lower_micros, o.upper_micros) != (n.lower_micros, n.upper_micros):
            before, after = _bound(old), _bound(new)
            if n.lower_micros >= o.lower_micros and n.upper_micros <= o.upper_micros:
                notes.append(
                    f"bound narrowed from {before} to {after}: the rows buffered at the cut are joined under "
                    "the new bound (exact: every row that can still match was kept)"
                )
            else:
                notes.append(f"bound widened from {before} to {after}")
                warnings.append(
                    "the old job evicted rows once the old bound said they could match nothing more, so "
                    "a pair straddling the cut whose rows are further apart than the old bound allows "
                    "may be missed"
                )
        if (old.watermark_delay_micros, o.right_delay_micros) != (
            new.watermark_delay_micros,
            n.right_delay_micros,
        ):
            notes.append("watermark delays changed: they hold from the cut on")
        reason = "same keys, sides and columns"
        return Change(False, "; ".join([reason, *notes]), tuple(warnings))

    # -- EXPLAIN / DESCRIBE ----------------------------------------------------------------------
    def describe(self, stage: AggregateStage) -> StageText:
        iv = spec(stage)
        keys = ", ".join(f"{k.name} = {rk} {k.type}" for k, rk in zip(stage.keys, iv.right_keys, strict=True))
        return StageText(
            f"INTERVAL JOIN {iv.right} ON {_bound(stage)}",
            keys,
            f"buffered rows of both sides ({len(iv.left_columns)} + {len(iv.right_columns)} columns), each "
            "until the watermark shows it can match no more",
        )


def _delay(micros: int) -> str:
    return duration(micros) if micros else "0 seconds"


def _bound(stage: AggregateStage) -> str:
    iv = spec(stage)
    lt = stage.time_column
    return (
        f"{iv.right_time} BETWEEN {lt}{offset_text(iv.lower_micros)} AND {lt}{offset_text(iv.upper_micros)}"
    )


KIND = IntervalJoin()
