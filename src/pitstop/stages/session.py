"""``SESSION(TABLE t, DESCRIPTOR(ts), gap)``: a key's session lasts while its events come less
than a gap apart.

State contract, format 1 (:mod:`pitstop.stages.windowed`): one row per open session and key,
``keys..., window_start, window_end, acc0..accN``, where ``window_end`` is the last event plus the
old gap. (Spark keeps the whole row in the state's value: key = (keys..., session start), value =
(window, keys..., buffers).)

Restore from rows: one seed row per open session with a gap of its own re-forms the session as
``[start, last event + new gap)``; a live event is late when ``ts + old gap`` had passed the
snapshot's watermark. A session stage new in a restored job drops the same events, on its own
gap (one clock per job).

Compatibility: the gap may change; open sessions are re-merged on the new gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pitstop.intervals import format_interval, interval_micros
from pitstop.plan.model import WindowSpec
from pitstop.stages.base import Change, Lateness, StageSeed
from pitstop.stages.buffers import row_columns, seed_inputs
from pitstop.stages.windowed import SAME, WindowKind, delay, key_columns, live_rows, merged, seed_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

    from pitstop.plan.model import AggregateStage
    from pitstop.plan.scope import Input


class Session(WindowKind):
    name: ClassVar[str] = "session"
    title: ClassVar[str] = "SESSION"
    tvf: ClassVar[str | None] = "SESSION"

    def window_spec(self, tvf: exp.Expression, column: str, input_: Input) -> WindowSpec:
        gap = interval_micros(tvf.args["gap"])
        return WindowSpec(self.name, column, gap, gap_micros=gap)

    def state_layout(self, nkeys: int, accs: list[str]) -> tuple[list[str], list[str], str, slice]:
        keys = [f"__k{i}" for i in range(nkeys)]
        return (
            [*keys, "__start"],
            ["__window", *[f"__v{i}" for i in range(nkeys)], *accs],
            "v.__window",
            slice(1 + nkeys, None),
        )

    def lateness(self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str) -> Lateness:
        """Spark drops a row whose own session ``[ts, ts + gap)`` had ended by the watermark,
        before merging it into an open one (pitstop leaves Spark's merging of sessions within a
        partition before the shuffle off, so each row comes to that check as itself); restored,
        :meth:`frame` drops a row whose ``ts + old gap`` had passed the old watermark."""
        window = stage.spec
        gap = window.gap_micros or window.size_micros
        t = f"unix_micros(`{window.time_column}`)"
        late = f"{t} + {gap} <= ({watermark_ms}) * 1000"
        wm = watermark_ms
        if seed is not None and seed.old_watermark_ms > 0:
            late = f"({late}) OR {t} + {seed.old_gap_micros or gap} <= {seed.old_watermark_ms * 1000}"
            wm = f"greatest({watermark_ms}, {seed.old_watermark_ms})"
        return Lateness(
            f"CASE WHEN {late} THEN 1 ELSE 0 END",
            f"array(named_struct('start', timestamp_micros({t}), 'end', timestamp_micros({t} + {gap})))",
            f"`{window.time_column}`",
            wm,
        )

    def frame(
        self,
        spark: SparkSession,
        live: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
        *,
        watermarked: bool = False,
    ) -> DataFrame:
        from pyspark.sql import functions as F

        keys = key_columns(stage)
        gap = stage.spec.gap_micros or stage.spec.size_micros
        pre = live_rows(live, stage).withColumn("__gap", F.lit(gap).cast("bigint"))
        if seed is not None:
            old_gap = seed.old_gap_micros or gap
            wm_us = seed.old_watermark_ms * 1000
            if wm_us > 0:
                pre = pre.filter(F.expr(f"unix_micros(__ts) + {old_gap} > {wm_us}"))
        if seed is not None and not seed.clock_only:
            old_gap = seed.old_gap_micros or gap
            seeds = seed_inputs(seed_rows(spark, self, stage, seed), stage).select(
                *keys,
                F.col("window_start").alias("__ts"),
                *row_columns(stage),
                F.lit(True).alias("__seed"),
                F.expr(f"unix_micros(window_end) - {old_gap} + {gap} - unix_micros(window_start)").alias(
                    "__gap"
                ),
            )
            pre = pre.unionByName(seeds)
        if not watermarked:
            pre = pre.withWatermark("__ts", delay(stage))
        gap_column = F.concat(F.col("__gap").cast("string"), F.lit(" microseconds"))
        return merged(pre.groupBy(F.session_window("__ts", gap_column).alias("window"), *keys), stage)

    def compare_window(self, old: WindowSpec, new: WindowSpec) -> Change:
        old_gap, new_gap = old.gap_micros or 0, new.gap_micros or 0
        if old_gap == new_gap:
            return Change(False, SAME)
        return Change(
            False,
            f"session gap {format_interval(old_gap)} -> {format_interval(new_gap)}: open sessions "
            "are re-merged on the new gap",
        )

    def window_text(self, window: WindowSpec) -> str:
        size, gap = format_interval(window.size_micros), format_interval(window.gap_micros or 0)
        return f"{self.title}({window.time_column}, {size}, gap {gap})"


KIND = Session()
