"""What a stateful stage kind declares, in one place (DESIGN.md section 6).

A kind is one module of :mod:`pitstop.stages` holding one :class:`StageKind`; its docstring
writes the kind's **state contract**: the rows a snapshot stores for a stage of the kind, and what
a restored stage receives. The planner, export, restore, compatibility check and EXPLAIN /
DESCRIBE ask the stage's kind (:mod:`pitstop.stages.registry`) and know nothing of any kind:

=====================  ==========================================================================
planning               :meth:`StageKind.plan`: the stage, its output layer and first projection,
                       from the SELECT that reads the source
state contract         :attr:`StageKind.format_version` and :meth:`StageKind.state_schema`: the
                       row schema a snapshot stores, as Spark DDL
reading state          :meth:`StageKind.read_state`: the stage's operator state at a committed
                       batch, checked against the plan, as rows of the state schema
restore, from rows     :meth:`StageKind.seed` (what a restored stage receives) and
                       :meth:`StageKind.frame` (the running stage, fed its seed rows)
one clock per job      :meth:`StageKind.clock`: what a stage new in a restored job receives so
                       that events late for the old job are late for it too;
                       :meth:`StageKind.output_watermark`: the clock of the stage after it
late rows              :meth:`StageKind.lateness` (:meth:`StageKind.join_lateness` for two
                       inputs): which input rows the stage drops as late, row by row, so that
                       pitstop counts (and may keep) them (:mod:`pitstop.engine.late`)
restore, native        :meth:`StageKind.same_state`: the stateful part is unchanged, so Spark may
                       go on from the snapshot's copy of the old checkpoint
compatibility          :meth:`StageKind.compare`: restored, with warnings, or refused, and why
EXPLAIN / DESCRIBE     :meth:`StageKind.describe`: the stage's shape, keys and state as text
=====================  ==========================================================================

A snapshot's manifest records each stage's ``kind`` and ``format_version``. A kind reads every
format version it has ever written (:attr:`StageKind.reads_formats`); a manifest without them was
written before kinds had modules, and its stages are window aggregates in format 1.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pitstop.errors import PitstopError
from pitstop.plan.types import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

    from pitstop.plan.model import AggregateStage, Projection
    from pitstop.plan.scope import Input, Layer


@dataclass(frozen=True)
class StageSeed:
    """What a restored stage receives: its snapshot rows and the old job's window and watermark
    (kept in the run's catalog row, so a resumed run seeds the same way)."""

    path: str  # folder of Parquet files in the kind's state schema
    old_size_micros: int
    old_watermark_ms: int
    old_gap_micros: int | None = None  # session windows
    schema: str | None = None  # the rows' schema (DDL) when not the new stage's own
    columns: dict[str, str] | None = None  # the new stage's accumulators as SQL over the old rows
    clock_only: bool = False
    """A stage new in the restored job (:meth:`StageKind.clock`): no rows to take in (``path`` is
    empty), only the job's clock, so that what was late for the old job is late for it too; its
    ``old_size_micros`` / ``old_gap_micros`` are the new stage's own window."""


@dataclass(frozen=True)
class Lateness:
    """Which input rows a stage drops because they are behind the watermark, as Spark SQL over the
    stage's input columns, given the watermark (milliseconds, as SQL) that Spark drops late rows
    by in the micro-batch: a stage may drop a row from several windows (HOP), so it says how many,
    and which. Rows that a restored stage drops itself because the old job would have dropped them
    (its ``seed``) are late too, and counted alike. Nothing is dropped by this: it describes
    what the stage (Spark's operator, or the kind's own filter) drops."""

    count_sql: str  # how many of the row's windows drop it (0: the row is not late); a BIGINT
    windows_sql: str  # ARRAY<STRUCT<start TIMESTAMP, end TIMESTAMP>>: those windows (NULL bounds
    # for a stage without windows), evaluated only for a row that is late
    time_sql: str  # the row's event time
    watermark_sql: str  # the watermark (ms) the row is late by


def no_windows() -> str:
    """:attr:`Lateness.windows_sql` of a stage without windows: one entry, the row itself."""
    return "array(named_struct('start', CAST(NULL AS TIMESTAMP), 'end', CAST(NULL AS TIMESTAMP)))"


def behind(time_sql: str, watermark_ms: str, seed: StageSeed | None) -> Lateness:
    """The :class:`Lateness` of a stage without windows that drops a row whose event time is at
    or below the watermark (Spark's deduplication and stream-stream join), and, restored, one at
    or below the old job's watermark (its own filter: what the old job would have dropped)."""
    t = f"unix_micros({time_sql})"
    late = f"{t} <= ({watermark_ms}) * 1000"
    wm = watermark_ms
    if seed is not None and seed.old_watermark_ms > 0:
        old = seed.old_watermark_ms * 1000
        late = f"({late}) OR {t} <= {old}"
        wm = f"greatest({watermark_ms}, {seed.old_watermark_ms})"
    return Lateness(f"CASE WHEN {late} THEN 1 ELSE 0 END", no_windows(), time_sql, wm)


def aggregates(select: exp.Select) -> bool:
    """Whether ``select`` itself aggregates: an aggregate call of its own (those in its WITH
    clause belong to the CTEs) or a GROUP BY."""
    from sqlglot import exp

    if select.args.get("group") is not None:
        return True
    return any(call.find_ancestor(exp.Select) is select for call in select.find_all(exp.AggFunc))


@dataclass(frozen=True)
class Change:
    """A kind's verdict on one stage from a snapshot to a new job: restored (with warnings) or
    refused; ``reason`` says which change was found, in a sentence for EXPLAIN."""

    refused: bool
    reason: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageText:
    """What EXPLAIN's columns and DESCRIBE's lines say about a stage."""

    shape: str  # e.g. TUMBLE(ts, 1 hour)
    keys: str  # e.g. region STRING
    state: str  # e.g. sum DECIMAL(22,2), count BIGINT for SUM(amount), COUNT(*)

    def line(self) -> str:
        return f"{self.shape} by {self.keys}: {self.state}"


class StageKind(ABC):
    """One kind of stateful stage. Subclasses are stateless singletons (``KIND`` in their module)."""

    name: ClassVar[str]  # the plan's and the manifest's ``kind``, e.g. "tumble"
    title: ClassVar[str]  # as SQL writes it, e.g. "TUMBLE"
    family: ClassVar[str]  # kinds of one family name each other in messages, e.g. "window"
    tvf: ClassVar[str | None] = None  # the table-valued function that plans it, e.g. "TUMBLE"
    # (None: the kind an aggregation plans when its FROM is no window function)
    updates: ClassVar[bool] = False
    """Its output rows change as input arrives (a running aggregate): the branch runs in Spark's
    update mode and its sink replaces rows by the stage's keys; otherwise each row is emitted
    once, final (a window, when it closes), and appended."""
    format_version: ClassVar[int] = 1  # of the rows and manifest entry this pitstop writes
    reads_formats: ClassVar[frozenset[int]] = frozenset({1})  # every version it can restore
    operators: ClassVar[int] = 1  # Spark stateful operators the stage runs as
    suffix: ClassVar[str] = "aggregate"  # a stage's name without a CTE alias or hint: <sink>.<suffix>
    early_results: ClassVar[bool] = False
    """A row of it can be written before it is final and replaced as it changes (TUMBLE, HOP:
    a window's bounds are fixed; 'earlyResultsMillis')."""

    # -- planning --------------------------------------------------------------------------------
    def recognize(self, select: exp.Select, tvf: exp.Expression | None) -> bool:
        """Whether ``select`` (``tvf``: the window function of its FROM, if any) runs a stage of
        this kind: the planner plans the one kind of the registry that recognises a SELECT
        (:func:`pitstop.stages.registry.recognize`). A kind planned otherwise (an interval join,
        from a JOIN's ON) recognises none."""
        return False

    def passes_input(self, stage: AggregateStage) -> bool:
        """Whether the stage's output rows are its input rows, every column passed on (a
        ROW_NUMBER deduplication): what comes after it may read any input column."""
        return False

    @abstractmethod
    def plan(
        self, select: exp.Select, tvf: exp.Expression | None, input_: Input, stage_name: str
    ) -> tuple[AggregateStage, Layer, Projection]:
        """The stage planned from ``select``, the layer of columns it outputs, and the projection
        over that layer that the SELECT asks for."""

    # -- state contract --------------------------------------------------------------------------
    @abstractmethod
    def state_schema(self, stage: AggregateStage) -> str:
        """The rows a snapshot stores for ``stage``, as Spark DDL (the module docstring says
        what each column holds)."""

    @abstractmethod
    def read_state(
        self,
        spark: SparkSession,
        checkpoint: Path,
        batch: int,
        operator: int,
        stage: AggregateStage,
        job: str,
    ) -> pa.Table:
        """The stage's state at ``batch`` as rows of :meth:`state_schema`; PitstopError when the
        operator's state does not have the shape the plan expects."""

    # -- restore ---------------------------------------------------------------------------------
    @abstractmethod
    def seed(self, old: AggregateStage, new: AggregateStage, path: str, watermark_ms: int) -> StageSeed:
        """What ``new`` receives when restored from rows: ``old`` is the stage as the snapshot's
        job planned it, ``watermark_ms`` the snapshot's watermark."""

    def clock(self, stage: AggregateStage, watermark_ms: int) -> StageSeed | None:
        """What ``stage``, new in a job restored from a snapshot whose watermark was
        ``watermark_ms``, receives so that it runs on the job's clock (one clock per job: an event
        the old job found late is late for the new stage too, e.g. one whose window had closed);
        None for a kind that has no watermark (nothing is ever late for it)."""
        return None

    def output_watermark(self, stage: AggregateStage, watermark_ms: int) -> int:
        """The watermark of the stage's output rows when its input's is ``watermark_ms``: what the
        next stage of a chain runs on (Spark propagates it so; most kinds pass it on as it is)."""
        return watermark_ms

    def lateness(self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str) -> Lateness | None:
        """Which of its input rows the stage drops as late (:class:`Lateness`), given the
        watermark Spark drops them by (``watermark_ms``, SQL; ``0`` where pitstop cannot know it,
        so that only the restored stage's own filter counts); None for a kind that has no
        watermark (nothing is ever late for it) or reads two inputs."""
        return None

    def join_lateness(
        self, stage: AggregateStage, seed: StageSeed | None, watermark_ms: str
    ) -> tuple[Lateness, Lateness] | None:
        """:meth:`lateness` of each input of a stage of two (an interval join): left, right."""
        return None

    @abstractmethod
    def frame(
        self,
        spark: SparkSession,
        live: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
        *,
        watermarked: bool = False,
    ) -> DataFrame:
        """The running stage over ``live`` rows (its input layer), fed ``seed`` when restored (or,
        for a stage new in a restored job, given the job's clock: ``seed.clock_only``).
        ``watermarked``: ``live`` is the output of a stage before it in the branch that set the
        watermark, which this stage goes on with (Spark refuses to define a second one)."""

    def join_frame(
        self,
        spark: SparkSession,
        left: DataFrame,
        right: DataFrame,
        stage: AggregateStage,
        seed: StageSeed | None,
    ) -> DataFrame:
        """A stage of two inputs (an interval join): the running stage over ``left`` and
        ``right`` (both in the branch's joined column names), fed ``seed`` when restored."""
        raise PitstopError(f"stage '{stage.name}' of kind '{self.name}' reads one input, not two")

    @abstractmethod
    def same_state(self, old: AggregateStage, new: AggregateStage) -> bool:
        """Whether the stateful part is unchanged, so that Spark may go on from a copy of the old
        checkpoint (stateless parts around it may differ)."""

    # -- compatibility ---------------------------------------------------------------------------
    @abstractmethod
    def compare(self, old: AggregateStage, new: AggregateStage) -> Change:
        """The verdict on restoring ``old``'s state into ``new``, both of this kind."""

    # -- EXPLAIN / DESCRIBE ----------------------------------------------------------------------
    @abstractmethod
    def describe(self, stage: AggregateStage) -> StageText:
        """The stage as EXPLAIN and DESCRIBE show it."""


def state_arrow(kind: StageKind, stage: AggregateStage) -> pa.Schema:
    """The kind's state schema as Arrow: what a snapshot's Parquet files of the stage hold."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    target = _parse_datatype_string(kind.state_schema(stage))
    assert isinstance(target, StructType)
    return arrow_schema(target)


def load_state(
    spark: SparkSession, checkpoint: Path, batch: int, operator: int
) -> tuple[DataFrame, Any, Any]:
    """One stateful operator's state at one batch, through Spark's state data source, with the
    types of its key and value (both structs)."""
    from pyspark.sql.types import StructType

    state: DataFrame = (
        spark.read.format("statestore")
        .option("batchId", batch)
        .option("operatorId", operator)
        .load(str(checkpoint))
    )
    key_t, value_t = state.schema["key"].dataType, state.schema["value"].dataType
    assert isinstance(key_t, StructType) and isinstance(value_t, StructType)
    return state, key_t, value_t
