"""Deduplication: ``SELECT DISTINCT a, b FROM t``, and Flink's pattern
``SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t)
WHERE rn = 1``: each key's first row goes on, later rows of the key are dropped.

- ``DISTINCT``: the key is the whole selected row; every key seen is kept for as long as the job
  runs (Spark's ``dropDuplicates``), so a duplicate is dropped however late it comes.
- ``ROW_NUMBER() ... = 1``: the key is the ``PARTITION BY`` columns; the ``ORDER BY`` column must
  be the input's watermarked event time (ascending), and a key is kept until its first event plus
  the watermark delay passes the watermark (Spark's ``dropDuplicatesWithinWatermark``): state
  bounded by the watermark, as in Hazelcast's and Flink's deduplication with a state TTL. A row is
  the first of its key *to arrive* (within one micro-batch, the first Spark reads); rows later
  than the watermark are dropped.

State contract, format 1: one row per key seen and not yet expired::

    keys..., expires_at TIMESTAMP     -- NULL: never (DISTINCT)

(Spark keeps key = (keys...), value = ``__dummy__`` for ``dropDuplicates`` or
``expiresAtMicros`` for ``dropDuplicatesWithinWatermark``; read positionally.)

Restore from rows: the keys seen go back into the operator's state with the first micro-batch (a
seed row per key, stamped at ``expires_at`` minus the stage's delay, so that it expires when it
would have whatever the delay is now; seeds are never emitted, and join the live rows after the
watermark: the live rows alone set it, so that the stage goes on from the snapshot's clock, not
from the seeds' stamps less a shortened delay), and every live row whose key is among them and
whose event time is before its ``expires_at`` is dropped on the way in (a left anti join with the snapshot's
rows), so that a duplicate of an event seen before the cut is dropped after it whatever order
Spark reads the first batch in. A live row the old job would have dropped as late (event time
at or below the snapshot's watermark, as Spark drops it) is dropped too, and so is it by a
``ROW_NUMBER`` stage new in a restored job (one clock per job); ``DISTINCT`` has no watermark, so
nothing is late for it.

Compatibility: the keys must stay (the state is the keys seen); the form (DISTINCT or
ROW_NUMBER) must stay; the watermark delay may change (keys keep their old expiry). The columns a
ROW_NUMBER query writes may change freely (no state holds them).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa
from sqlglot import exp

from pitstop.errors import PitstopError, PlanError
from pitstop.intervals import format_interval
from pitstop.plan.model import AggregateStage, DedupSpec, KeyColumn, OutputColumn, Projection
from pitstop.plan.scope import Input, Layer, check_columns, output_name, unique_names
from pitstop.plan.types import SPARK, infer
from pitstop.stages.base import (
    Change,
    Lateness,
    StageKind,
    StageSeed,
    StageText,
    behind,
    load_state,
    state_arrow,
)
from pitstop.stages.windowed import duration, keys_changed, renamed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SEED = "__pitstop_seed"


def row_number_of(select: exp.Select) -> exp.Alias | None:
    """The ``ROW_NUMBER() OVER (...) AS rn`` projection of a SELECT, if it has one."""
    for proj in select.expressions:
        if isinstance(proj, exp.Alias) and isinstance(proj.this, exp.Window):
            if isinstance(proj.this.this, exp.RowNumber):
                return proj
    return None


class Dedup(StageKind):
    name: ClassVar[str] = "dedup"
    title: ClassVar[str] = "deduplication"
    family: ClassVar[str] = "deduplication"
    tvf: ClassVar[str | None] = None
    suffix: ClassVar[str] = "dedup"

    # -- planning --------------------------------------------------------------------------------
    def recognize(self, select: exp.Select, tvf: exp.Expression | None) -> bool:
        """SELECT DISTINCT. (Flink's ROW_NUMBER pattern spans two SELECTs, the numbered one and
        the one that keeps ``rn = 1``: the planner finds it with :func:`row_number_of`.)"""
        return bool(select.args.get("distinct"))

    def passes_input(self, stage: AggregateStage) -> bool:
        return stage.time_column is not None  # ROW_NUMBER: the first row of each key, as it came

    def plan(
        self, select: exp.Select, tvf: exp.Expression | None, input_: Input, stage_name: str
    ) -> tuple[AggregateStage, Layer, Projection]:
        """``select`` is the DISTINCT select over ``input_``, or the ROW_NUMBER select whose other
        columns ``input_`` already holds (the planner projects them before the stage)."""
        src = input_.layer
        numbered = row_number_of(select)
        if numbered is None:
            return self._plan_distinct(select, src, stage_name)
        window = numbered.this
        partition = window.args.get("partition_by") or []
        order = window.args.get("order")
        what = f"stage '{stage_name}': ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)"
        if not partition:
            raise PlanError(f"{what} needs PARTITION BY the columns whose first row is kept")
        keys: list[KeyColumn] = []
        for p in partition:
            if not isinstance(p, exp.Column) or p.name not in src.columns:
                raise PlanError(
                    f"{what}: PARTITION BY {p.sql(SPARK)} must name a column the inner SELECT writes "
                    f"(it writes {', '.join(src.columns)})"
                )
            keys.append(KeyColumn(p.name, f"`{p.name}`", src.columns[p.name]))
        ordered = order.expressions if order is not None else []
        watermark = input_.watermark
        if (
            len(ordered) != 1
            or ordered[0].args.get("desc")
            or not isinstance(ordered[0].this, exp.Column)
            or watermark is None
            or ordered[0].this.name.lower() != watermark.column.lower()
        ):
            column = watermark.column if watermark is not None else "ts"
            raise PlanError(
                f"{what} keeps a key's first row by event time: ORDER BY the input's watermarked "
                f"time column, ascending (ORDER BY {column}); the mapping needs a WATERMARK on it "
                "(the watermark bounds how long a key is remembered)"
            )
        stage = AggregateStage(
            name=stage_name,
            params=DedupSpec(watermark.column),
            keys=tuple(keys),
            accumulators=(),
            functions=(),
            watermark_delay_micros=watermark.delay_micros,
        )
        layer = Layer(src.table, dict(src.columns))
        first = Projection(None, tuple(OutputColumn(n, f"`{n}`", t) for n, t in src.columns.items()))
        return stage, layer, first

    def _plan_distinct(
        self, select: exp.Select, src: Layer, stage_name: str
    ) -> tuple[AggregateStage, Layer, Projection]:
        columns: list[OutputColumn] = []
        for i, proj in enumerate(select.expressions):
            if isinstance(proj, exp.Star):
                columns += [OutputColumn(n, f"`{n}`", t) for n, t in src.columns.items()]
                continue
            body = proj.this if isinstance(proj, exp.Alias) else proj
            check_columns(body, src)
            columns.append(
                OutputColumn(output_name(proj, i), body.sql(SPARK), infer(body, src.table, src.columns))
            )
        unique_names(columns)
        stage = AggregateStage(
            name=stage_name,
            params=DedupSpec(),
            keys=tuple(KeyColumn(c.name, c.sql, c.type) for c in columns),
            accumulators=(),
            functions=(),
            watermark_delay_micros=0,
        )
        layer = Layer(stage_name.replace(".", "_"), {c.name: c.type for c in columns})
        first = Projection(None, tuple(OutputColumn(c.name, f"`{c.name}`", c.type) for c in columns))
        return stage, layer, first

    # -- state contract --------------------------------------------------------------------------
    def state_schema(self, stage: AggregateStage) -> str:
        return ", ".join([*[f"`{k.name}` {k.type}" for k in stage.keys], "expires_at TIMESTAMP"])

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

        state, key_t, value_t = load_state(spark, checkpoint, batch, operator)
        expected = ["bigint"] if stage.time_column else ["void"]
        got = [f.dataType.simpleString() for f in value_t.fields]
        if len(key_t.fields) != len(stage.keys) or got != expected:
            raise PitstopError(
                f"job '{job}', stage '{stage.name}': the state in the checkpoint has key "
                f"{key_t.simpleString()} and value {value_t.simpleString()}, not the shape the plan expects "
                f"({len(stage.keys)} key(s), value {', '.join(expected)}); the snapshot was not written"
            )
        flat = state.select(
            F.col("key").cast(renamed(key_t, [f"__k{i}" for i in range(len(stage.keys))])).alias("k"), "value"
        )
        columns = [F.col(f"k.__k{i}").cast(k.type).alias(k.name) for i, k in enumerate(stage.keys)]
        expires = F.expr("timestamp_micros(value.expiresAtMicros)") if stage.time_column else F.lit(None)
        columns.append(expires.cast("timestamp").alias("expires_at"))
        return flat.select(*columns).toArrow().cast(state_arrow(self, stage))

    # -- restore ---------------------------------------------------------------------------------
    def seed(self, old: AggregateStage, new: AggregateStage, path: str, watermark_ms: int) -> StageSeed:
        # old_size_micros: the old watermark delay (a seed is stamped at expires_at minus the
        # new one: :meth:`frame`).
        return StageSeed(path=path, old_size_micros=old.watermark_delay_micros, old_watermark_ms=watermark_ms)

    def clock(self, stage: AggregateStage, watermark_ms: int) -> StageSeed | None:
        # ROW_NUMBER: rows below the watermark are late. DISTINCT keeps no watermark.
        if stage.time_column is None:
            return None
        return StageSeed(
            path="",
            old_size_micros=stage.watermark_delay_micros,
            old_watermark_ms=watermark_ms,
            clock_only=True,
        )

    def same_state(self, old: AggregateStage, new: AggregateStage) -> bool:
        return (old.keys, old.time_column, old.watermark_delay_micros) == (
            new.keys,
            new.time_column,
            new.watermark_delay_micros,
        )

    def lateness(self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str) -> Lateness | None:
        """ROW_NUMBER: Spark drops a row whose time is at or below the watermark (restored,
        :meth:`frame` one at or below the old watermark); DISTINCT keeps no watermark."""
        if stage.time_column is None:
            return None
        return behind(f"`{stage.time_column}`", watermark_ms, seed)

    def frame(
        self,
        spark: SparkSession,
        live: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
        *,
        watermarked: bool = False,
    ) -> DataFrame:
        """live rows [anti join the snapshot's keys] --+
        seeds (keys, stamped time, never emitted)   --+--> union -> [watermark] -> drop duplicates"""
        from pyspark.sql import functions as F

        names = [k.name for k in stage.keys]
        ts = stage.time_column
        if ts is None:
            rows = live.select(*[F.expr(k.sql).cast(k.type).alias(k.name) for k in stage.keys])
        else:
            rows = live
        if seed is not None and ts is not None:
            wm_us = seed.old_watermark_ms * 1000
            if wm_us > 0:  # late for the old job (at or below its watermark): late for this one
                rows = rows.filter(F.unix_micros(F.col(f"`{ts}`")) > F.lit(wm_us))  # (one clock per job)
        if ts is not None and not watermarked:
            # The live rows alone set the watermark (as a window's do): the seeds, stamped for
            # their expiry under the new delay, would put it past the snapshot's clock when the
            # delay was shortened. The union keeps the live side's event-time column.
            wait = duration(stage.watermark_delay_micros) if stage.watermark_delay_micros else "0 seconds"
            rows = rows.withWatermark(ts, wait)
        if seed is not None and not seed.clock_only:
            schema = self.state_schema(stage)
            seen = spark.read.schema(schema).parquet(seed.path).withColumnRenamed("expires_at", "__expires")
            on = [rows[f"`{n}`"].eqNullSafe(seen[f"`{n}`"]) for n in names]
            if ts is not None:
                on.append(F.unix_micros(rows[f"`{ts}`"]) < F.unix_micros(seen["__expires"]))
            cond = on[0]
            for c in on[1:]:
                cond = cond & c
            rows = rows.join(seen, cond, "left_anti")
            seeds = spark.readStream.schema(schema).parquet(seed.path)
            stamped = [F.col(f"`{n}`") for n in names]
            if ts is not None:  # Spark's expiry, the stamp + the (new) delay, is the old one
                stamped.append(
                    F.expr(
                        f"timestamp_micros(unix_micros(expires_at) - {stage.watermark_delay_micros})"
                    ).alias(ts)
                )
            seeds = seeds.select(*stamped)
            for name, typ in zip(rows.columns, rows.schema.fields, strict=True):
                if name not in seeds.columns:
                    seeds = seeds.withColumn(name, F.lit(None).cast(typ.dataType))
            rows = rows.withColumn(SEED, F.lit(False)).unionByName(seeds.withColumn(SEED, F.lit(True)))
        if ts is None:
            out = rows.dropDuplicates(names)
        else:
            out = rows.dropDuplicatesWithinWatermark(names)
        if seed is not None and not seed.clock_only:
            out = out.filter(~F.col(SEED)).drop(SEED)
        return out

    # -- compatibility ---------------------------------------------------------------------------
    def compare(self, old: AggregateStage, new: AggregateStage) -> Change:
        keys = keys_changed(old, new)
        if keys is not None:
            return keys
        if (old.time_column is None) != (new.time_column is None):
            forms = ("DISTINCT", "ROW_NUMBER() ... = 1")
            was, now = forms[old.time_column is not None], forms[new.time_column is not None]
            return Change(
                True,
                f"deduplication changed from {was} to {now}: the keys seen are kept for another time "
                "(for ever, or until the watermark passes); keep the form or give the stage a new name",
            )
        old_sql, new_sql = [k.sql for k in old.keys], [k.sql for k in new.keys]
        if old_sql != new_sql:  # a DISTINCT column of the same name computed otherwise
            return Change(
                True,
                f"the deduplicated columns changed from ({', '.join(old_sql)}) to ({', '.join(new_sql)}); "
                "keep them or give the stage a new name (the keys seen are values of the old ones)",
            )
        if old.watermark_delay_micros != new.watermark_delay_micros:
            return Change(
                False,
                f"same keys; watermark delay {format_interval(old.watermark_delay_micros)} -> "
                f"{format_interval(new.watermark_delay_micros)}: the keys seen before the cut keep their "
                "old expiry",
            )
        return Change(False, "same keys")

    # -- EXPLAIN / DESCRIBE ----------------------------------------------------------------------
    def describe(self, stage: AggregateStage) -> StageText:
        keys = ", ".join(f"{k.name} {k.type}" for k in stage.keys)
        if stage.time_column is None:
            return StageText("DISTINCT", keys, "keys seen, for ever")
        delay = format_interval(stage.watermark_delay_micros)
        return StageText(
            f"ROW_NUMBER() = 1 by {stage.time_column}",
            keys,
            f"keys seen, each until its first event + {delay} passes the watermark",
        )


KIND = Dedup()
