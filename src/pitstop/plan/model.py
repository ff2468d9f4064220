"""The job plan: named stages, accumulator form, windows. Frozen, and serialisable to JSON.

A job is a list of branches, one per ``INSERT``. A branch reads one source mapping (optionally
joined to a second mapping: :class:`JoinSpec`), filters and projects it, optionally runs it
through a chain of **stateful stages** (most often one; deduplication then a window is two), and
writes one sink mapping. Each
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


# -- each stage kind's own plan record (AggregateStage.params) ----------------------------------
@dataclass(frozen=True)
class WindowSpec:
    """A window kind's: its time column and sizes."""

    kind: str  # tumble | hop | session: the stage's kind (pitstop.stages)
    time_column: str
    size_micros: int
    slide_micros: int | None = None
    gap_micros: int | None = None


@dataclass(frozen=True)
class RunningSpec:
    """A running aggregate's: nothing more than every stage has (keys, accumulators)."""

    kind: str = "running"


@dataclass(frozen=True)
class DedupSpec:
    """A deduplication's: ``DISTINCT`` (no time column: a key is remembered for ever) or
    ``ROW_NUMBER() ... = 1`` (its event-time column, whose watermark bounds how long a key is
    remembered; the stage keeps that watermark itself)."""

    time_column: str | None = None
    kind: str = "dedup"


@dataclass(frozen=True)
class IntervalSpec:
    """An interval join's second side and bound (:mod:`pitstop.stages.interval_join`): a right
    row joins a left row of the same keys when ``right_time`` lies within
    ``[left_time + lower, left_time + upper]``. Column names are the branch's joined (flat)
    names (:class:`JoinSpec`)."""

    left_time: str  # the left side's event-time column (its watermark's)
    right: str  # the right stream's mapping
    right_keys: tuple[str, ...]  # the right side's key columns, in the order of the stage's keys
    right_time: str
    lower_micros: int
    upper_micros: int
    right_delay_micros: int  # the right mapping's watermark delay
    left_columns: tuple[KeyColumn, ...]  # each side's buffered row (the state contract)
    right_columns: tuple[KeyColumn, ...]
    kind: str = "interval_join"


StageParams = WindowSpec | RunningSpec | DedupSpec | IntervalSpec


@dataclass(frozen=True)
class AggregateStage:
    """A stateful stage: its name, its kind's own plan record (``params``: a window's, a
    deduplication's, an interval join's...), and what every kind has: keys, accumulators (none
    for a kind that keeps rows rather than aggregates), and the watermark delay it runs with."""

    name: str
    params: StageParams
    keys: tuple[KeyColumn, ...]
    accumulators: tuple[Accumulator, ...]
    functions: tuple[str, ...]  # the aggregate calls as written, e.g. ("SUM(amount)", "COUNT(*)")
    watermark_delay_micros: int

    @property
    def kind(self) -> str:
        """The stage's kind: the name of its module in :mod:`pitstop.stages`."""
        return self.params.kind

    @property
    def window(self) -> WindowSpec | None:
        """A window kind's window; None for the other kinds."""
        return self.params if isinstance(self.params, WindowSpec) else None

    @property
    def spec(self) -> WindowSpec:
        """The stage's window (a window kind's stages always have one)."""
        assert isinstance(self.params, WindowSpec), f"stage '{self.name}' has no window"
        return self.params

    @property
    def interval(self) -> IntervalSpec | None:
        return self.params if isinstance(self.params, IntervalSpec) else None

    @property
    def time_column(self) -> str | None:
        """The event-time column of a stage that keeps its own watermark on it (``ROW_NUMBER``
        deduplication, an interval join's left side); None for the others (a window's time
        column is its window's)."""
        if isinstance(self.params, DedupSpec):
            return self.params.time_column
        if isinstance(self.params, IntervalSpec):
            return self.params.left_time
        return None

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
class JoinSpec:
    """A second mapping joined to the branch's source, before its WHERE and stages.

    The joined rows have flat column names: the left (source) side's as they are, the right
    side's as they are unless a left column has the name (then ``<alias>_<name>``); the SELECT's
    qualified columns (``c.user_id``, ``u.name``) are planned over them.

    - ``kind`` ``table``: the right mapping is a **static table** read whole, again for every
      micro-batch (a DuckDB table or a File mapping's folder: :mod:`pitstop.connectors.tables`),
      so a changed table is seen by the batches after the change. Stateless: nothing of it is in
      a snapshot.
    - ``kind`` ``interval``: the right mapping is a second stream, and the join is the branch's
      first stateful stage (:mod:`pitstop.stages.interval_join`).
    """

    kind: str  # table | interval
    how: str  # inner | left
    right: str  # the right mapping's name
    left_columns: tuple[OutputColumn, ...]  # flat name <- the source's column (sql)
    right_columns: tuple[OutputColumn, ...]  # flat name <- the right mapping's column (sql)
    on_sql: str  # the join condition over flat names (a static join's; an interval join's stage has its own)


@dataclass(frozen=True)
class Step:
    """A stateful stage that feeds another stage of its branch (a chain: deduplication, then a
    window): its input filtered by ``where_sql``, its output through ``layers`` to the next."""

    where_sql: str | None
    stage: AggregateStage
    layers: tuple[Projection, ...]


@dataclass(frozen=True)
class Branch:
    """One ``INSERT``::

        source -> pre_layers -> [join -> join_layers] -> before[0] -> ... -> [where_sql] -> [stage]
               -> layers -> sink

    where each of ``before`` is a :class:`Step` (a stateful stage and the layers after it) whose
    output is the next one's input. An interval join's stage is the first stage of the chain."""

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
    early_results_ms: int = 0
    """A window branch with early results (``'earlyResultsMillis'``, :mod:`pitstop.planner.early`):
    its micro-batches start at most this often, and ``upsert_keys`` are the window's bounds and
    keys. 0: none."""
    join: JoinSpec | None = None
    before: tuple[Step, ...] = ()
    join_layers: tuple[Projection, ...] = ()
    """Stateless layers right after a static join that stands in a CTE, view or subquery which a
    stateful stage reads (enrichment, then a window)."""

    @property
    def sources(self) -> tuple[str, ...]:
        """The streams the branch reads: its source, and an interval join's right side."""
        if self.join is not None and self.join.kind == "interval":
            return (self.source, self.join.right)
        return (self.source,)

    @property
    def mappings(self) -> tuple[str, ...]:
        """Every mapping the branch uses: its streams, a static join's table, its sink."""
        right = (self.join.right,) if self.join is not None else ()
        return tuple(dict.fromkeys((self.source, *right, self.sink)))

    @property
    def stages(self) -> tuple[AggregateStage, ...]:
        """The branch's stateful stages from source to sink."""
        last = () if self.stage is None else (self.stage,)
        return (*(s.stage for s in self.before), *last)

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self.layers[-1].columns


@dataclass(frozen=True)
class JobPlan:
    job: str
    branches: tuple[Branch, ...]
    keep_late: bool = False
    """``'lateRows'='keep'`` (:mod:`pitstop.planner.late`): the rows a branch's first stateful stage
    drops as late are kept in ``pitstop.late_records``, not only counted."""

    @property
    def stages(self) -> tuple[AggregateStage, ...]:
        return tuple(s for b in self.branches for s in b.stages)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for b in self.branches for s in b.sources))

    def stage(self, name: str) -> AggregateStage | None:
        for s in self.stages:
            if s.name == name:
                return s
        return None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobPlan:
        return cls(
            job=d["job"],
            branches=tuple(_branch(b) for b in d["branches"]),
            keep_late=bool(d.get("keep_late", False)),
        )


def stage_from_json(s: dict[str, Any]) -> AggregateStage:
    """A stage from its JSON: this version's (``params``), or a plan or manifest written before
    each kind had its own record (``window``, ``stage_kind``, ``time_column``, ``interval``)."""
    params = _params(s["params"]) if "params" in s else _params_before_records(s)
    return AggregateStage(
        name=s["name"],
        params=params,
        keys=tuple(KeyColumn(**k) for k in s["keys"]),
        accumulators=tuple(Accumulator(**a) for a in s["accumulators"]),
        functions=tuple(s["functions"]),
        watermark_delay_micros=int(s["watermark_delay_micros"]),
    )


def _params(d: dict[str, Any]) -> StageParams:
    kind = d["kind"]
    if kind == RunningSpec.kind:
        return RunningSpec()
    if kind == DedupSpec.kind:
        return DedupSpec(d.get("time_column"))
    if kind == IntervalSpec.kind:
        return _interval(d)
    return WindowSpec(**d)


def _params_before_records(s: dict[str, Any]) -> StageParams:
    if s.get("window") is not None:
        return WindowSpec(**s["window"])
    kind = s.get("stage_kind")
    if kind == IntervalSpec.kind:
        return _interval({**s["interval"], "left_time": s["time_column"]})
    if kind == DedupSpec.kind:
        return DedupSpec(s.get("time_column"))
    if kind == RunningSpec.kind:
        return RunningSpec()
    raise ValueError(f"stage '{s.get('name')}': a plan of no kind pitstop knows ({kind!r})")


def _interval(d: dict[str, Any]) -> IntervalSpec:
    return IntervalSpec(
        **{
            **d,
            "right_keys": tuple(d["right_keys"]),
            "left_columns": tuple(KeyColumn(**k) for k in d["left_columns"]),
            "right_columns": tuple(KeyColumn(**k) for k in d["right_columns"]),
        }
    )


def _join(d: dict[str, Any] | None) -> JoinSpec | None:
    if d is None:
        return None
    return JoinSpec(
        kind=d["kind"],
        how=d["how"],
        right=d["right"],
        left_columns=tuple(OutputColumn(**c) for c in d["left_columns"]),
        right_columns=tuple(OutputColumn(**c) for c in d["right_columns"]),
        on_sql=d["on_sql"],
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
        early_results_ms=int(b.get("early_results_ms", 0)),
        join=_join(b.get("join")),
        join_layers=tuple(_projection(p) for p in b.get("join_layers", ())),
        before=tuple(
            Step(s["where_sql"], stage_from_json(s["stage"]), tuple(_projection(p) for p in s["layers"]))
            for s in b.get("before", ())
        ),
    )


# -- early results --------------------------------------------------------------------------------
EARLY = "early"  # the column an early result's row is marked in, until its window closes


def window_keys(branch: Branch) -> tuple[str, ...] | None:
    """The sink columns that hold a window branch's ``window_start``, ``window_end`` and group
    keys, followed through the projections after the stage; None when one is not written as it
    is."""
    stage = branch.stage
    if stage is None or stage.window is None:
        return None
    out: list[str] = []
    for name in ("window_start", "window_end", *(k.name for k in stage.keys)):
        found = _follow(name, branch.layers)
        if found is None:
            return None
        out.append(found)
    return tuple(out)


def _follow(name: str, layers: tuple[Projection, ...]) -> str | None:
    for layer in layers:
        ref = f"`{name}`".lower()
        found = next((c.name for c in layer.columns if c.sql.lower() in (ref, name.lower())), None)
        if found is None:
            return None
        name = found
    return name


def end_column(branch: Branch) -> str:
    """The sink column holding the window's end (the second of :func:`window_keys`)."""
    keys = window_keys(branch)
    assert keys is not None
    return keys[1]
