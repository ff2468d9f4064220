"""``HOP(TABLE t, DESCRIPTOR(ts), size, slide)``: sliding windows (Hazelcast's argument order).

State contract, format 1 (:mod:`pitstop.stages.windowed`): one row per open window and key,
``keys..., window_start, window_end, acc0..accN``; an event is in ``size / slide`` windows.

Restore from rows: a seed goes to the new window with the same *end* (Hazelcast's rule), so it is
stamped at that window's start and kept only in the window that starts there (a stamp falls into
several windows). A live event is late for each window that had closed at the snapshot's
watermark, per assigned window, as Spark drops it; for a sliding stage new in a restored job, the
same rule on its own windows (one clock per job).

Compatibility: the slide must stay; the size may change, with a warning that windows in flight at
the cut may be incomplete until they close.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pitstop.errors import PlanError
from pitstop.intervals import format_interval, interval_micros
from pitstop.plan.model import WindowSpec
from pitstop.stages.base import Change, Lateness, StageSeed
from pitstop.stages.windowed import SAME, WindowKind, duration

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from sqlglot import exp

    from pitstop.plan.model import AggregateStage
    from pitstop.plan.scope import Input


class Hop(WindowKind):
    name: ClassVar[str] = "hop"
    title: ClassVar[str] = "HOP"
    tvf: ClassVar[str | None] = "HOP"
    early_results: ClassVar[bool] = True

    def window_spec(self, tvf: exp.Expression, column: str, input_: Input) -> WindowSpec:
        size, slide = interval_micros(tvf.args["size"]), interval_micros(tvf.args["slide"])
        if size % slide != 0:
            raise PlanError(
                f"HOP(TABLE {input_.source.name}, ...): the size must be a multiple of the slide; got size "
                f"{format_interval(size)} and slide {format_interval(slide)}"
            )
        return WindowSpec(self.name, column, size, slide_micros=slide)

    def seed_stamp(self, stage: AggregateStage) -> Column:
        from pyspark.sql import functions as F

        return F.expr(f"timestamp_micros(unix_micros(window_end) - {stage.spec.size_micros})")

    def assign(self, stage: AggregateStage) -> Column:
        from pyspark.sql import functions as F

        window = stage.spec
        return F.window("__ts", duration(window.size_micros), duration(window.slide_micros or 0))

    def lateness(self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str) -> Lateness:
        """A row is in ``size / slide`` windows, ending ``slide`` apart after its time; Spark drops
        it from each one that had closed by the watermark (restored, :meth:`keep_assigned` from
        each one closed by the old watermark): counted once per window missed."""
        window = stage.spec
        size, slide = window.size_micros, window.slide_micros or window.size_micros
        t = f"unix_micros(`{window.time_column}`)"
        last_start = f"({t} - pmod({t}, {slide}))"  # the latest window start at or before the row
        wm = watermark_ms
        if seed is not None and seed.old_watermark_ms > 0:
            wm = f"greatest({watermark_ms}, {seed.old_watermark_ms})"
        by = f"(({wm}) * 1000)"
        return Lateness(
            f"least(greatest(({by} - {last_start}) div {slide}, 0), {size // slide})",
            f"filter(transform(sequence(1, {size // slide}), j -> named_struct("
            f"'start', timestamp_micros({last_start} + {slide} * j - {size}), "
            f"'end', timestamp_micros({last_start} + {slide} * j))), w -> unix_micros(w.end) <= {by})",
            f"`{window.time_column}`",
            wm,
        )

    def keep_assigned(self, rows: DataFrame, seed: StageSeed) -> DataFrame:
        from pyspark.sql import functions as F

        wm_us = seed.old_watermark_ms * 1000
        return rows.filter(
            F.expr(f"(__seed AND window.start = __ts) OR (NOT __seed AND unix_micros(window.end) > {wm_us})")
        )

    def compare_window(self, old: WindowSpec, new: WindowSpec) -> Change:
        old_slide, new_slide = old.slide_micros or 0, new.slide_micros or 0
        if old_slide != new_slide:
            return Change(
                True,
                f"sliding window slide changed from {format_interval(old_slide)} to "
                f"{format_interval(new_slide)}; keep the slide (the size may change), or give the stage "
                "a new name to start it empty",
            )
        old_size, new_size = old.size_micros, new.size_micros
        if old_size == new_size:
            return Change(False, SAME)
        return Change(
            False,
            f"window size {format_interval(old_size)} -> {format_interval(new_size)}, slide kept: each "
            "old window's accumulators go to the new window with the same end",
            ("windows in flight at the cut may be incomplete until they close",),
        )

    def window_text(self, window: WindowSpec) -> str:
        size, slide = format_interval(window.size_micros), format_interval(window.slide_micros or 0)
        return f"{self.title}({window.time_column}, {size}, {slide})"


KIND = Hop()
