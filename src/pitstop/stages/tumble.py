"""``TUMBLE(TABLE t, DESCRIPTOR(ts), size)``: fixed windows that do not overlap.

State contract, format 1 (:mod:`pitstop.stages.windowed`): one row per open window and key,
``keys..., window_start, window_end, acc0..accN``.

Restore from rows: a seed is stamped at its old window's start, so it lands in the new window
that holds that start; a size changed to a multiple of the old one folds old windows into the new
ones. A live event is late, as Spark would have found it in the old job, when its *old* window had
closed at the snapshot's watermark (not when its own time is below the watermark). A tumbling
stage new in a restored job drops an event whose window (its own size) had closed by then (one
clock per job, :meth:`pitstop.stages.base.StageKind.clock`).

Compatibility: the size may change to a multiple of the old size; any other size is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pitstop.intervals import format_interval, interval_micros
from pitstop.plan.model import WindowSpec
from pitstop.stages.base import Change, Lateness, StageSeed
from pitstop.stages.windowed import SAME, WindowKind, duration

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from sqlglot import exp

    from pitstop.plan.model import AggregateStage
    from pitstop.plan.scope import Input


class Tumble(WindowKind):
    name: ClassVar[str] = "tumble"
    title: ClassVar[str] = "TUMBLE"
    tvf: ClassVar[str | None] = "TUMBLE"
    early_results: ClassVar[bool] = True

    def window_spec(self, tvf: exp.Expression, column: str, input_: Input) -> WindowSpec:
        return WindowSpec(self.name, column, interval_micros(tvf.args["size"]))

    def drop_late(self, pre: DataFrame, seed: StageSeed) -> DataFrame:
        from pyspark.sql import functions as F

        wm_us = seed.old_watermark_ms * 1000
        if wm_us <= 0:
            return pre
        size = seed.old_size_micros
        return pre.filter(F.expr(f"unix_micros(__ts) - pmod(unix_micros(__ts), {size}) + {size} > {wm_us}"))

    def lateness(self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str) -> Lateness:
        """Spark drops a row when its window had closed by the watermark (end <= watermark);
        restored, :meth:`drop_late` drops it when its *old* window had closed by the old one."""
        t = f"unix_micros(`{stage.spec.time_column}`)"
        size = stage.spec.size_micros
        end = f"({t} - pmod({t}, {size}) + {size})"
        late = f"{end} <= ({watermark_ms}) * 1000"
        wm = watermark_ms
        if seed is not None and seed.old_watermark_ms > 0:
            old = seed.old_size_micros
            late = f"({late}) OR {t} - pmod({t}, {old}) + {old} <= {seed.old_watermark_ms * 1000}"
            wm = f"greatest({watermark_ms}, {seed.old_watermark_ms})"
        return Lateness(
            f"CASE WHEN {late} THEN 1 ELSE 0 END",
            f"array(named_struct('start', timestamp_micros({end} - {size}), 'end', timestamp_micros({end})))",
            f"`{stage.spec.time_column}`",
            wm,
        )

    def seed_stamp(self, stage: AggregateStage) -> Column:
        from pyspark.sql import functions as F

        return F.col("window_start")

    def assign(self, stage: AggregateStage) -> Column:
        from pyspark.sql import functions as F

        return F.window("__ts", duration(stage.spec.size_micros))

    def compare_window(self, old: WindowSpec, new: WindowSpec) -> Change:
        old_size, new_size = old.size_micros, new.size_micros
        if old_size == new_size:
            return Change(False, SAME)
        if new_size % old_size != 0:
            return Change(
                True,
                f"tumbling window size changed from {format_interval(old_size)} to "
                f"{format_interval(new_size)}, which is not a multiple of the old size; "
                "use a multiple, or give the stage a new name to start it empty",
            )
        return Change(
            False,
            f"window size {format_interval(old_size)} -> {format_interval(new_size)}: "
            "old windows fold into the new ones",
        )


KIND = Tumble()
