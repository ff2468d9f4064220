"""What the window kinds (:mod:`~pitstop.stages.tumble`, :mod:`~pitstop.stages.hop`,
:mod:`~pitstop.stages.session`) share: a windowed aggregation in accumulator form.

State contract of every window kind, format 1: one row per open window and key::

    keys..., window_start TIMESTAMP, window_end TIMESTAMP, acc0..accN

named and typed as the stage's plan says (:class:`pitstop.plan.model.KeyColumn`,
:class:`~pitstop.plan.model.Accumulator`; :mod:`pitstop.stages.accumulators` lists each
aggregate's accumulators: e.g. ``COUNT(DISTINCT x)`` an ARRAY of the distinct values,
``APPROX_COUNT_DISTINCT(x)`` a BINARY HLL sketch, ``MIN_BY(x, y)`` a STRUCT<ord, val>). Spark's
state holds them as buffers of its own (:mod:`pitstop.stages.buffers`), read positionally and
turned into these columns. A restored stage receives these rows as seeds in its
first micro-batch, merged into the windows they land in; each kind says where a seed lands and
which live events are late (its own module).

Compatibility, for every window kind (its own module adds the window's rules): the keys must
stay (state is kept per group). Aggregates are matched by the call as written (``SUM(amount)``),
wherever they stand; a call new at a place whose old call is gone takes that call's state when
their state types are the same (``MIN`` -> ``MAX``, with a warning). A state column may widen
(cast on restore: :func:`pitstop.plan.types.widens`), not narrow; an added aggregate
starts empty for the windows in flight at the cut (their rows are partial until they close); a
removed one's state is dropped. Each is named in EXPLAIN.

Output: Spark's append mode, each window's row once, when the watermark passes its end; with
early results (a job option, :mod:`pitstop.planner.early`) TUMBLE and HOP run in update mode
instead, their rows replaced by window and keys as they change. The state is the same either
way, so the option may be turned on or off across an update.

A running stage in accumulator form::

    live rows -> (keys, __ts, acc0..accN)  --+
    seeds (keys, stamped __ts, accs)       --+--> union -> watermark(__ts)
        -> GROUP BY window(__ts), keys: merge accumulators -> window_start, window_end, keys, accs
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from pitstop.errors import PitstopError, PlanError
from pitstop.intervals import format_interval
from pitstop.plan.model import AggregateStage, KeyColumn, Projection, WindowSpec
from pitstop.plan.scope import Input, Layer
from pitstop.plan.types import named
from pitstop.stages.accumulators import Evolution, comparator_changes, evolve, plan_aggregate
from pitstop.stages.base import (
    Change,
    StageKind,
    StageSeed,
    StageText,
    aggregates,
    load_state,
    state_arrow,
)
from pitstop.stages.buffers import (
    decode_sets,
    expected_buffer,
    live_inputs,
    merges,
    row_columns,
    seed_inputs,
    state_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from sqlglot import exp


class WindowKind(StageKind):
    """A windowed aggregation; subclasses say how their windows are planned, assigned, seeded
    and compared."""

    family: ClassVar[str] = "window"

    # -- planning --------------------------------------------------------------------------------
    def recognize(self, select: exp.Select, tvf: exp.Expression | None) -> bool:
        return tvf is not None and str(tvf.args["kind"]).upper() == self.tvf and aggregates(select)

    def plan(
        self, select: exp.Select, tvf: exp.Expression | None, input_: Input, stage_name: str
    ) -> tuple[AggregateStage, Layer, Projection]:
        assert tvf is not None
        return plan_aggregate(
            select, self.window_spec(tvf, window_column(tvf, input_), input_), input_, stage_name
        )

    def window_spec(self, tvf: exp.Expression, column: str, input_: Input) -> WindowSpec:
        """The window the TVF asks for over ``column`` (checked: a TIMESTAMP with a watermark)."""
        raise NotImplementedError

    # -- state contract --------------------------------------------------------------------------
    def state_schema(self, stage: AggregateStage) -> str:
        cols = [f"`{k.name}` {k.type}" for k in stage.keys]
        cols += ["window_start TIMESTAMP", "window_end TIMESTAMP"]
        cols += [f"{a.name} {a.type}" for a in stage.accumulators]
        return ", ".join(cols)

    def state_layout(self, nkeys: int, accs: list[str]) -> tuple[list[str], list[str], str, slice]:
        """How Spark's state rows hold the stage: the names to cast the ``key`` and ``value``
        structs to (positionally), where the window struct is, and which value fields are the
        accumulators' buffers. Tumbling and sliding windows: key = (window, keys...), value = the
        buffers."""
        keys = [f"__k{i}" for i in range(nkeys)]
        return ["__window", *keys], accs, "k.__window", slice(0, None)

    def read_state(
        self,
        spark: SparkSession,
        checkpoint: Path,
        batch: int,
        operator: int,
        stage: AggregateStage,
        job: str,
    ) -> pa.Table:
        accs = [n for n, _ in expected_buffer(stage)]
        key_names, value_names, window, buffers = self.state_layout(len(stage.keys), accs)
        return read_buffers(
            self, spark, checkpoint, batch, operator, stage, job, key_names, value_names, buffers, window
        )

    # -- restore ---------------------------------------------------------------------------------
    def seed(self, old: AggregateStage, new: AggregateStage, path: str, watermark_ms: int) -> StageSeed:
        evolution = evolve(old, new)
        evolved = not evolution.identity
        return StageSeed(
            path=path,
            old_size_micros=old.spec.size_micros,
            old_watermark_ms=watermark_ms,
            old_gap_micros=old.spec.gap_micros,
            schema=self.state_schema(old) if evolved else None,
            columns=evolution.seed_columns if evolved else None,
        )

    def clock(self, stage: AggregateStage, watermark_ms: int) -> StageSeed | None:
        # The stage's own windows against the old watermark: had it run all along, Spark would
        # have closed them by then.
        spec = stage.spec
        return StageSeed(
            path="",
            old_size_micros=spec.size_micros,
            old_watermark_ms=watermark_ms,
            old_gap_micros=spec.gap_micros,
            clock_only=True,
        )

    def same_state(self, old: AggregateStage, new: AggregateStage) -> bool:
        return (old.window, old.keys, old.accumulators, old.functions) == (
            new.window,
            new.keys,
            new.accumulators,
            new.functions,
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
        pre = live_rows(live, stage)
        if seed is not None:
            pre = self.drop_late(pre, seed)
        if not watermarked:
            # The live rows alone set the watermark: a seed's stamp places it in its window,
            # which a resized HOP's may put past every event the old job read (its watermark
            # would then close windows before their time). The union keeps the live side's
            # event-time column (Spark's Union takes its first child's attributes).
            pre = pre.withWatermark("__ts", delay(stage))
        if seed is not None and not seed.clock_only:
            seeds = seed_inputs(seed_rows(spark, self, stage, seed), stage).select(
                *keys,
                self.seed_stamp(stage).alias("__ts"),
                *row_columns(stage),
                F.lit(True).alias("__seed"),
            )
            pre = pre.unionByName(seeds)
        rows = pre.select(
            self.assign(stage).alias("window"),
            *keys,
            *row_columns(stage),
            "__seed",
            "__ts",
        )
        if seed is not None:
            rows = self.keep_assigned(rows, seed)
        return merged(rows.groupBy("window", *keys), stage)

    def drop_late(self, pre: DataFrame, seed: StageSeed) -> DataFrame:
        """Live rows without those the old job would have dropped as late (before assignment)."""
        return pre

    def seed_stamp(self, stage: AggregateStage) -> Column:
        """The event time a seed row is stamped with, so that it lands in its window."""
        raise NotImplementedError

    def assign(self, stage: AggregateStage) -> Column:
        """The window column each row is assigned to."""
        raise NotImplementedError

    def keep_assigned(self, rows: DataFrame, seed: StageSeed) -> DataFrame:
        """Assigned rows without late ones and without a seed's copies in other windows."""
        return rows

    # -- compatibility ---------------------------------------------------------------------------
    def compare(self, old: AggregateStage, new: AggregateStage) -> Change:
        keys = keys_changed(old, new)
        if keys is not None:
            return keys
        evolution = evolve(old, new)
        if evolution.refused is not None:
            return Change(True, evolution.refused)
        change = self.compare_window(old.spec, new.spec)
        if change.refused:
            return change
        return evolved(change, evolution, old, new)

    def compare_window(self, old: WindowSpec, new: WindowSpec) -> Change:
        """The verdict on the window alone (keys and accumulators are the same)."""
        raise NotImplementedError

    # -- EXPLAIN / DESCRIBE ----------------------------------------------------------------------
    def describe(self, stage: AggregateStage) -> StageText:
        accs = ", ".join(f"{a.kind} {a.type}" for a in stage.accumulators)
        return StageText(
            self.window_text(stage.spec),
            ", ".join(f"{k.name} {k.type}" for k in stage.keys) or "(none)",
            f"{accs} for {', '.join(stage.functions)}",
        )

    def window_text(self, window: WindowSpec) -> str:
        return f"{self.title}({window.time_column}, {format_interval(window.size_micros)})"


SAME = "same window, keys and accumulators"


def window_column(tvf: exp.Expression, input_: Input) -> str:
    """The TVF's DESCRIPTOR column as the input spells it: a TIMESTAMP with a watermark."""
    time_col = tvf.args["descriptor"].name
    source, src = input_.source, input_.layer
    col = next((n for n in src.columns if n.lower() == time_col.lower()), None)
    if col is None:
        raise PlanError(
            f"DESCRIPTOR({time_col}): {input_.what()} has no column '{time_col}'; known "
            f"columns: {', '.join(src.columns)}"
        )
    if src.columns[col] != "TIMESTAMP":
        raise PlanError(
            f"DESCRIPTOR({time_col}): column '{col}' of {input_.what()} is "
            f"{src.columns[col]}; a window needs a TIMESTAMP column"
        )
    watermark = input_.watermark
    if watermark is None or watermark.column.lower() != col.lower():
        raise PlanError(
            f"mapping '{source.name}' has no watermark on '{col}', so its windows would never "
            f"close: declare it in the mapping, e.g. CREATE OR REPLACE MAPPING {source.name} "
            f"(..., WATERMARK FOR {col} AS {col} - INTERVAL '5' SECOND) ..., or read "
            f"TABLE(IMPOSE_ORDER(TABLE {source.name}, DESCRIPTOR({col}), INTERVAL '5' SECOND))"
        )
    return col


# -- running ---------------------------------------------------------------------------------------
def duration(micros: int) -> str:
    if micros % 1_000_000 == 0:
        return f"{micros // 1_000_000} seconds"
    if micros % 1000 == 0:
        return f"{micros // 1000} milliseconds"
    return f"{micros} microseconds"


def delay(stage: AggregateStage) -> str:
    return duration(stage.watermark_delay_micros) if stage.watermark_delay_micros else "0 seconds"


def key_columns(stage: AggregateStage) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.col(f"`{k.name}`") for k in stage.keys]


def live_rows(live: DataFrame, stage: AggregateStage) -> DataFrame:
    """Each live row as the stage's keys, its event time ``__ts`` and its accumulators' inputs."""
    return live.selectExpr(
        *[named(f"CAST(({k.sql}) AS {k.type})", k.name) for k in stage.keys],
        named(f"`{stage.spec.time_column}`", "__ts"),
        *live_inputs(stage),
        "false AS __seed",
    )


def seed_rows(spark: SparkSession, kind: StageKind, stage: AggregateStage, seed: StageSeed) -> DataFrame:
    """The snapshot's rows as a stream (all of them in the first micro-batch: no read limit), with
    the stage's accumulators: an evolved stage's come from the old ones (cast, or empty)."""
    from pyspark.sql import functions as F

    rows = spark.readStream.schema(seed.schema or kind.state_schema(stage)).parquet(seed.path)
    if seed.columns is None:
        return rows
    return rows.select(
        *key_columns(stage),
        "window_start",
        "window_end",
        *[F.expr(sql).alias(name) for name, sql in seed.columns.items()],
    )


def merged(grouped: Any, stage: AggregateStage) -> DataFrame:
    """Accumulators merged per window and key, as the stage's output layer."""
    from pyspark.sql import functions as F

    keys = key_columns(stage)
    out = grouped.agg(*merges(stage))
    return out.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *keys,
        *[F.col(a.name) for a in stage.accumulators],
    )


# -- reading state ---------------------------------------------------------------------------------
def renamed(struct: Any, names: list[str]) -> Any:
    """``struct`` with its fields renamed positionally (a struct cast in Spark is positional)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(n, f.dataType, True) for n, f in zip(names, struct.fields, strict=True)])


# -- compatibility ---------------------------------------------------------------------------------
def evolved(
    window: Change,
    evolution: Evolution,
    old: AggregateStage,
    new: AggregateStage,
    same: str = "same window and keys",
    in_flight: str = "the windows in flight at the cut",
    identical: str = SAME,
) -> Change:
    """The window's verdict (:data:`SAME` when nothing but the accumulators may differ: then
    ``identical`` or ``same`` stands for it) with what becomes of the accumulators (DESIGN.md
    section 4); an added accumulator starts empty for ``in_flight``."""
    changed = (
        f"aggregates changed from {', '.join(old.functions)} to {', '.join(new.functions)} with "
        "the same accumulator types; restored state was accumulated by the old functions"
    )
    if evolution.identity:  # the same accumulators, where a function may have changed in place
        reason = identical if window.reason == SAME else window.reason
        more = (changed, *comparator_changes(evolution.changed, in_flight)) if evolution.changed else ()
        return Change(False, reason, window.warnings + more)
    reason = same if window.reason == SAME else window.reason
    if evolution.widened:
        reason += f"; widened, cast on restore: {', '.join(evolution.widened)}"
    if evolution.removed:
        reason += f"; removed, their state dropped: {', '.join(evolution.removed)}"
    if evolution.added:
        reason += f"; added: {', '.join(evolution.added)}"
    warnings = list(window.warnings)
    if evolution.changed:
        warnings.append(changed)
        warnings += comparator_changes(evolution.changed, in_flight)
    if evolution.added:
        verb = "starts" if len(evolution.added) == 1 else "start"
        warnings.append(
            f"{', '.join(evolution.added)} {verb} empty for {in_flight}: in their rows, it holds "
            "only the events after the cut"
        )
    return Change(False, reason, tuple(warnings))


def keys_changed(old: AggregateStage, new: AggregateStage) -> Change | None:
    """The refusal when the group-by keys changed (state is kept per group), else None."""
    old_keys = [key_identity(k) for k in old.keys]
    new_keys = [key_identity(k) for k in new.keys]
    if old_keys == new_keys:
        return None
    return Change(
        True,
        f"group-by keys changed from {cols_text(old_keys)} to "
        f"{cols_text(new_keys)}; keep the keys or give the stage a new name (state is kept per "
        "group, and a group of other keys cannot be split or merged out of it)",
    )


def key_identity(key: KeyColumn) -> tuple[str, str]:
    """What identifies a group-by key: its column name, or for a computed key (``__k<i>``, named
    by position) its expression, so that ``upper(region)`` -> ``lower(region)`` is a change."""
    return (key.sql if key.name.startswith("__k") else key.name, key.type)


def cols_text(cols: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{n} {t}" for n, t in cols) + ")"


def read_buffers(
    kind: StageKind,
    spark: SparkSession,
    checkpoint: Path,
    batch: int,
    operator: int,
    stage: AggregateStage,
    job: str,
    key_names: list[str],
    value_names: list[str],
    buffers: slice,
    window: str | None,
) -> pa.Table:
    """An aggregating stage's state (a window kind's, or a running aggregate's: ``window`` None)
    as rows of the kind's state schema. Spark's ``key`` and ``value`` structs are cast
    positionally to ``key_names`` and ``value_names`` after checking their shape: the key holds
    the window (at ``window``) and the keys, the ``buffers`` slice of the value the accumulators'
    buffers (:func:`pitstop.stages.buffers.expected_buffer`)."""
    from pyspark.sql import functions as F

    state, key_t, value_t = load_state(spark, checkpoint, batch, operator)
    expected = expected_buffer(stage)
    got = [f.dataType.simpleString() for f in value_t.fields[buffers]]
    if len(key_t.fields) != len(key_names) or got != [t for _, t in expected]:
        keys = "" if window is not None else f"{len(stage.keys)} key(s); "
        raise PitstopError(
            f"job '{job}', stage '{stage.name}': the state in the checkpoint has key "
            f"{key_t.simpleString()} and value {value_t.simpleString()}, not the shape the plan expects "
            f"({keys}{', '.join(t for _, t in expected)}); the snapshot was not written"
        )
    flat = state.select(
        F.col("key").cast(renamed(key_t, key_names)).alias("k"),
        F.col("value").cast(renamed(value_t, value_names)).alias("v"),
    )
    columns = [F.col(f"k.__k{i}").cast(k.type).alias(k.name) for i, k in enumerate(stage.keys)]
    if window is not None:
        columns += [
            F.col(f"{window}.start").alias("window_start"),
            F.col(f"{window}.end").alias("window_end"),
        ]
    columns += state_columns(stage, "v")
    schema = state_arrow(kind, stage)
    return decode_sets(flat.select(*columns).toArrow(), stage, schema).cast(schema)
