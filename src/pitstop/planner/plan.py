"""The job plan: named stages, accumulator form, windows. Frozen, and serialisable to JSON.

A job is a list of branches, one per ``INSERT``. A branch reads one source mapping, filters and
projects it, optionally runs it through a **stateful stage**, and writes one sink mapping. Each
stateful stage is of a kind (:attr:`AggregateStage.kind`), and its kind's module in
:mod:`pitstop.stages` declares how it is planned, run, snapshotted, restored, compared and shown,
and its state contract: the rows a snapshot stores.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Accumulator kinds and how Spark merges them (a ``set``, ``collect_set`` of its elements, and an
# ``hll`` sketch, a union of sketches, have input columns of their own: pitstop.stages.buffers).
MERGE_FUNCTION = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}


@dataclass(frozen=True)
class Accumulator:
    """One typed accumulator: its contribution per input row, merged with ``MERGE_FUNCTION``."""

    name: str  # acc0, acc1, ...: positional, stable for a given SELECT
    kind: str  # count | sum | min | max | set | hll
    type: str  # Spark SQL type of the state column, e.g. BIGINT, DECIMAL(22,2), ARRAY<STRING>
    input_sql: str  # Spark SQL over a source row: this row's contribution


@dataclass(frozen=True)
class KeyColumn:
    name: str  # column name in the stage's output and in snapshots
    sql: str  # Spark SQL over a source row
    type: str


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # tumble | hop | session: the stage's kind (pitstop.stages)
    time_column: str
    size_micros: int
    slide_micros: int | None = None
    gap_micros: int | None = None


@dataclass(frozen=True)
class AggregateStage:
    """A stateful aggregating stage: per window and key (a window kind), or per key with no
    window (``window`` None: a running aggregate, whose kind is ``stage_kind``)."""

    name: str
    window: WindowSpec | None
    keys: tuple[KeyColumn, ...]
    accumulators: tuple[Accumulator, ...]
    functions: tuple[str, ...]  # the aggregate calls as written, e.g. ("SUM(amount)", "COUNT(*)")
    watermark_delay_micros: int
    stage_kind: str | None = None  # the kind of a stage without a window (e.g. "running")
    time_column: str | None = None  # dedup: the event-time column whose watermark bounds the state

    @property
    def kind(self) -> str:
        """The stage's kind: the name of its module in :mod:`pitstop.stages`."""
        if self.window is not None:
            return self.window.kind
        assert self.stage_kind is not None, self.name
        return self.stage_kind

    @property
    def spec(self) -> WindowSpec:
        """The stage's window (a window kind's stages always have one)."""
        assert self.window is not None, f"stage '{self.name}' has no window"
        return self.window

    @property
    def accumulator_schema(self) -> tuple[str, ...]:
        return tuple(a.type for a in self.accumulators)


@dataclass(frozen=True)
class OutputColumn:
    name: str
    sql: str  # Spark SQL over the previous layer's columns
    type: str


@dataclass(frozen=True)
class Projection:
    """A stateless layer: optional filter, then projection, over the previous layer's columns."""

    where_sql: str | None
    columns: tuple[OutputColumn, ...]


@dataclass(frozen=True)
class Branch:
    index: int
    sink: str  # sink mapping name
    source: str  # source mapping name
    where_sql: str | None  # filter over source rows (before any aggregation)
    stage: AggregateStage | None
    layers: tuple[Projection, ...]  # over the stage's output (or the filtered source rows)
    sql: str  # the INSERT as written
    pre_layers: tuple[Projection, ...] = ()  # views and subqueries between the source and the rest
    upsert_keys: tuple[str, ...] = ()
    """The sink's columns that identify a row when the branch's stage updates its rows (a running
    aggregate's group keys, as the SELECT names them): Spark's update output mode, and a sink that
    replaces rows by these columns. Empty: rows are appended (windows are emitted once)."""

    @property
    def stages(self) -> tuple[AggregateStage, ...]:
        """The branch's stateful stages from source to sink (today at most one)."""
        return () if self.stage is None else (self.stage,)

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self.layers[-1].columns


@dataclass(frozen=True)
class JobPlan:
    job: str
    branches: tuple[Branch, ...]

    @property
    def stages(self) -> tuple[AggregateStage, ...]:
        return tuple(s for b in self.branches for s in b.stages)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.source for b in self.branches))

    def stage(self, name: str) -> AggregateStage | None:
        for s in self.stages:
            if s.name == name:
                return s
        return None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobPlan:
        return cls(job=d["job"], branches=tuple(_branch(b) for b in d["branches"]))


def stage_from_json(s: dict[str, Any]) -> AggregateStage:
    return AggregateStage(
        name=s["name"],
        window=None if s["window"] is None else WindowSpec(**s["window"]),
        keys=tuple(KeyColumn(**k) for k in s["keys"]),
        accumulators=tuple(Accumulator(**a) for a in s["accumulators"]),
        functions=tuple(s["functions"]),
        watermark_delay_micros=int(s["watermark_delay_micros"]),
        stage_kind=s.get("stage_kind"),
        time_column=s.get("time_column"),
    )


def _projection(p: dict[str, Any]) -> Projection:
    return Projection(where_sql=p["where_sql"], columns=tuple(OutputColumn(**c) for c in p["columns"]))


def _branch(b: dict[str, Any]) -> Branch:
    return Branch(
        index=b["index"],
        sink=b["sink"],
        source=b["source"],
        where_sql=b["where_sql"],
        stage=None if b["stage"] is None else stage_from_json(b["stage"]),
        layers=tuple(_projection(p) for p in b["layers"]),
        sql=b["sql"],
        pre_layers=tuple(_projection(p) for p in b.get("pre_layers", [])),
        upsert_keys=tuple(b.get("upsert_keys", ())),
    )
