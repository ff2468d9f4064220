"""Late rows are data, not silence: every row a stateful stage drops because it is behind the
watermark is counted, per stage, source and (a source with partitions: Kafka) partition, and with
``OPTIONS ('lateRows'='keep')`` kept in ``pitstop.late_records`` with the window it missed.

Spark drops a late row inside its stateful operator, and its progress's
``numRowsDroppedByWatermark`` does not count rows: an aggregation's operator counts the groups
left after each partition's partial aggregation (checked on pyspark 4.3.0: five late rows of two
windows and keys count 2). So pitstop tells late rows itself, row by row, before the stage, by the
same rule as Spark (checked against it, including the first batch after a restart):

1. The branch's sources are read through :mod:`pitstop.engine.stamped`, which appends to every row
   its micro-batch and the watermark Spark drops late rows by in that batch: the previous batch's
   (``offsets/<n-1>`` of the checkpoint; Spark's ``PropagateWatermarkSimulator`` judges the late
   events of batch n by the watermark of batch n - 1), and, from a source with partitions
   (:attr:`pitstop.connectors.base.Connector.partitioned`), the partition the row was read from.
   The columns go through the projections, WHERE and a static join to the branch's first stateful
   stage, and no further.
2. Before each stateful stage, its kind's :class:`~pitstop.stages.base.Lateness` says, in Spark
   SQL, how many windows drop the row (a HOP row may miss several); an observed metric (Spark's
   ``Dataset.observe``) sums it per micro-batch, per stage and source, in the batch's execution,
   and, where the rows carry their partition, counts its late rows per partition and windows
   missed in a bounded, exact histogram (observed metrics take aggregates only; a batch without
   late rows adds an empty one: :func:`watched`).
   Nothing is dropped here: Spark (and a restored stage's own filter) drops the rows as before, so
   the job's results never depend on this count. A stage later in a chain has no such columns:
   only its own restore filter is counted this way, and Spark's ``numRowsDroppedByWatermark`` of
   its operators is added (for an aggregation that counts late windows and keys, not rows).
3. ``'keep'``: the first stage's input goes through a Python step (``mapInArrow``) that passes
   every row on unchanged and writes the late ones, one line per window missed, to
   ``<run>/branches/<i>/late/<batch>-<partition>-<input>.jsonl`` (temp file + rename; a batch run
   again writes the same file). This costs a trip through Python for every row of the stage's
   input, which counting alone does not.
4. The batch's counts are recorded where the batch is: the branch's sink callback, once the
   batch is computed and before its rows are written, reads them from the query's execution of
   that batch (the observed metrics and the stateful operators' figures its progress report will
   show, :func:`batch_report`; the partitions' histogram, only where there are late rows, is read
   as one JSON text and summed per partition, :func:`partition_rows`) and writes them to
   ``<run>/branches/<i>/late_counts/<batch>.json``
   (temp file + rename; a batch run again writes the same). Spark commits a batch only after the
   callback returns, so every committed batch has its counts on disk, whatever becomes of the
   process: a process killed right after a commit loses none (its progress reports, which
   Spark posts after the commit, would have gone with it).
5. The manager, the only writer of the catalog, reads the counts and the kept rows of committed
   batches from those files every second while the job runs, at ``AWAIT JOB`` and when a run
   stops, fails, is suspended or dropped (a run left by a process that was killed: when the job
   resumes, or is dropped), into ``pitstop.late_counts`` and ``pitstop.late_records``, keyed so
   that reading a batch twice changes nothing; a counts file goes once the catalog has it.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.catalog.rows import LateCount, LateRecord
from pitstop.engine.clocks import batch_execution
from pitstop.engine.jvm import spark_class
from pitstop.plan.model import Branch
from pitstop.stages import registry as kinds
from pitstop.stages.base import Lateness

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

BATCH = "__pitstop_batch"  # the same names as pitstop.engine.stamped, which imports pyspark
WATERMARK = "__pitstop_wm"
PART = "__pitstop_part"  # only from a source with partitions
HIDDEN = (BATCH, WATERMARK, PART)
LATE = "__pitstop_late"
METRIC = "pitstop_late "
"""Observed metrics of late rows are named this, then ``[stage, source]`` as JSON."""
PAIR = 1_000_000
"""A late row's partition and the windows it missed, as one number of the partitions' histogram:
``partition * PAIR + windows`` (partition -1: not told; exact as a double below 2**53)."""
BINS = 10_000
"""The histogram's bins: one per partition and number of windows missed, each task's apart until
the driver merges them. Fewer than this in the merged result: no two values were ever merged, so
the counts are exact; as many: some may have been (a batch whose late rows span thousands of
partitions), and that batch's rows are counted without their partitions."""
_WINDOWS = "__pitstop_late_windows"  # columns of the metric by partition only (_watched_by_partition)
_PAIR = "__pitstop_late_pair"
LATE_DIR = "late"
COUNTS_DIR = "late_counts"
_WRITER = (  # Spark's stateful operators that write state: what its progress lists, in this order
    "org.apache.spark.sql.execution.streaming.operators.stateful.StateStoreWriter",  # pyspark 4.1 on
    "org.apache.spark.sql.execution.streaming.StateStoreWriter",
)


def metric_name(stage: str, source: str) -> str:
    return METRIC + json.dumps([stage, source])


# -- step 2 (and 3): before a stage ------------------------------------------------------------------
@dataclass(frozen=True)
class Keep:
    """Where a branch keeps its late rows (``'lateRows'='keep'``)."""

    run_dir: str
    branch: int


def watched(
    df: DataFrame, lateness: Lateness, stage: str, source: str, keep: Keep | None, slot: int
) -> DataFrame:
    """``df`` (a stage's input) with its late rows counted in an observed metric, and, with
    ``keep``, written where :func:`collect_kept` finds them (only where ``df`` has :data:`HIDDEN`:
    the batch names the file). ``slot`` tells apart the files of the inputs of one branch.

    Where ``df`` has :data:`PART` (a source with partitions), the metric also counts the late
    rows per partition and windows missed (``parts``, Spark's ``histogram_numeric`` of
    :data:`PAIR` values; :func:`partition_rows` sums it at step 4). Spark's observed metrics take
    aggregates only; a list of the late rows (``collect_list``) ran the driver out of memory with
    2M late rows in a batch, where the histogram holds a bin per partition and windows missed
    (each task reads one Kafka partition); a batch without late rows keeps it empty."""
    from pyspark.sql import functions as F

    name = metric_name(stage, source)
    if PART in df.columns:
        counted = _watched_by_partition(df, lateness, name)
    else:
        counted = df.observe(name, F.coalesce(F.sum(F.expr(lateness.count_sql)), F.lit(0)).alias("rows"))
    if keep is None or BATCH not in df.columns:
        return counted
    late = F.expr(
        f"CASE WHEN ({lateness.count_sql}) > 0 THEN named_struct('windows', {lateness.windows_sql}, "
        f"'time', {lateness.time_sql}, 'watermark', timestamp_millis({lateness.watermark_sql})) END"
    )
    marked = counted.withColumn(LATE, late)
    columns = [c for c in df.columns if c not in HIDDEN]
    write = partial(_keep_late, keep.run_dir, keep.branch, stage, source, slot, columns, PART in df.columns)
    return marked.mapInArrow(write, marked.schema).drop(LATE)


def _watched_by_partition(df: DataFrame, lateness: Lateness, name: str) -> DataFrame:
    """The metric of a source with partitions: its late rows, and their :data:`PAIR` values'
    histogram. Both read columns computed first (and dropped after): Spark evaluates an imperative
    aggregate's input row by row, interpreted, where a projection is compiled; the histogram then
    only finds a NULL in a row that is not late. Measured on 2 loaded cores, 4M cached rows, a
    TUMBLE stage's rule, minimum of 8 runs: the metric alone (sum) 1.9 s without late rows, 1.2 s
    all late; this one 2.3 s and 1.7 s; the histogram over the rule itself 3.0 s and 4.0 s."""
    from pyspark.sql import functions as F

    windows = F.col(_WINDOWS)
    pair = F.coalesce(F.col(PART), F.lit(-1)) * PAIR + F.least(windows, F.lit(PAIR - 1))  # more: no partition
    return (
        df.withColumn(_WINDOWS, F.expr(lateness.count_sql))
        .withColumn(_PAIR, F.when(windows > 0, pair))
        .observe(
            name,
            F.coalesce(F.sum(windows), F.lit(0)).alias("rows"),
            F.histogram_numeric(F.col(_PAIR), F.lit(BINS)).alias("parts"),
        )
        .drop(_WINDOWS, _PAIR)
    )


def _keep_late(
    run_dir: str,
    branch: int,
    stage: str,
    source: str,
    slot: int,
    columns: list[str],
    partitioned: bool,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Step 3, in a Python worker: the partition's rows go on unchanged; its late ones are written,
    one line per window missed, once the partition is read (none: no file)."""
    import pyarrow.compute as pc
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    lines: list[str] = []
    batch_id: int | None = None
    for rb in batches:
        if rb.num_rows and batch_id is None:
            batch_id = int(rb.column(BATCH)[0].as_py())
        late = rb.column(LATE)
        if late.null_count < rb.num_rows:
            rows = rb.filter(pc.is_valid(late))
            parts = rows.column(PART).to_pylist() if partitioned else [None] * rows.num_rows
            for mark, record, source_part in zip(
                rows.column(LATE).to_pylist(), rows.select(columns).to_pylist(), parts, strict=True
            ):
                for window in mark["windows"]:
                    lines.append(
                        json.dumps(
                            {
                                "stage": stage,
                                "source": source,
                                "partition": source_part,
                                "window_start": _iso(window["start"]),
                                "window_end": _iso(window["end"]),
                                "event_time": _iso(mark["time"]),
                                "watermark": _iso(mark["watermark"]),
                                "record": record,
                            },
                            default=_json_value,
                            ensure_ascii=False,
                        )
                    )
        yield rb
    if lines and batch_id is not None:
        folder = Path(run_dir) / "branches" / str(branch) / LATE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{batch_id:012d}-{part:05d}-{slot}.jsonl"
        tmp = folder / f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / name)


def _json_value(value: Any) -> Any:
    """A value of a kept row in JSON: times as the catalog keeps them, decimals as their text."""
    if isinstance(value, datetime):
        return _iso(value)
    return str(value)


def _iso(value: datetime | None) -> str | None:
    """A time as the catalog keeps it: naive UTC (Spark hands UTC times to Python workers)."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat()


# -- step 4: the sink's callback records a batch's counts ------------------------------------------
@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch's progress says of late rows: pitstop's observed counts (metric name ->
    rows) and each stateful operator's ``numRowsDroppedByWatermark``, in Spark's order (the
    progress's ``stateOperators``: from the sink back to the source); ``parts``: for a metric
    whose source has partitions, its rows per partition (None: the row's partition was not told)."""

    batch_id: int
    observed: dict[str, int]
    dropped: tuple[int, ...]
    parts: dict[str, dict[int | None, int]] = field(default_factory=dict)

    def to_json(self) -> str:
        parts = {name: [[p, n] for p, n in by.items()] for name, by in self.parts.items()}
        return json.dumps(
            {"batch": self.batch_id, "observed": self.observed, "dropped": list(self.dropped), "parts": parts}
        )

    @staticmethod
    def from_json(text: str) -> BatchReport:
        d = json.loads(text)
        parts = {  # absent from a file an earlier pitstop wrote
            str(name): {None if p is None else int(p): int(n) for p, n in pairs}
            for name, pairs in d.get("parts", {}).items()
        }
        return BatchReport(
            int(d["batch"]), {str(k): int(v) for k, v in d["observed"].items()}, tuple(d["dropped"]), parts
        )


def partition_rows(bins: Sequence[dict[str, Any]]) -> dict[int | None, int] | None:
    """Step 4's sum of a metric's ``parts`` per partition: each bin ``{"x": value, "y": rows}``
    counts the late rows of one :data:`PAIR` value (its partition and the windows each missed: a
    HOP row late for two windows counts 2; one value may have several bins, Spark's merge keeps
    them apart). None if the histogram is full: its bins may have been merged (:data:`BINS`)."""
    if len(bins) >= BINS:
        return None
    out: dict[int | None, int] = {}
    for b in bins:
        part, windows = divmod(int(b["x"]), PAIR)
        key = None if part < 0 else part
        out[key] = out.get(key, 0) + windows * int(b["y"])
    return out


def batch_report(session: Any, query_name: str, batch_id: int, operators: bool) -> BatchReport | None:
    """Read in the sink's callback of batch ``batch_id``, once the batch is computed: its late
    counts, from the JVM's execution of the batch (``session``: the JVM SparkSession that started
    the query named ``query_name``), as Spark's progress report of it will give them; with
    ``operators``, the stateful operators' figures too (a walk of the plan, some hundred JVM calls:
    only for a branch with a stage later in a chain, whose count is Spark's figure). None if the
    query or that execution is not found (nothing to record)."""
    execution = batch_execution(session, query_name, batch_id)
    if execution is None:
        return None
    observed: dict[str, int] = {}
    parts: dict[str, dict[int | None, int]] = {}
    metrics = execution.observedMetrics().iterator()
    while metrics.hasNext():
        pair = metrics.next()
        name = str(pair._1())
        if name.startswith(METRIC):
            row = pair._2()
            observed[name] = 0 if row.isNullAt(0) else int(row.getLong(0))
            if observed[name] and row.size() > 1:  # late rows of a source with partitions
                by_part = partition_rows(json.loads(str(row.json()))["parts"])
                if by_part is None:
                    log.warning(
                        "query '%s', batch %d: late rows of more partitions than pitstop tells apart "
                        "(%d); its %d late row(s) are counted without their partitions",
                        query_name,
                        batch_id,
                        BINS,
                        observed[name],
                    )
                else:
                    parts[name] = by_part
    writer = spark_class(session, _WRITER) if operators else None  # Spark's StateStoreWriter
    dropped: list[int] = []
    nodes = [execution.executedPlan()] if writer is not None else []
    while writer is not None and nodes:  # pre-order, as Spark's plan.collect lists them
        node = nodes.pop()
        if writer.isInstance(node):
            dropped.append(int(node.getProgress().numRowsDroppedByWatermark()))
        children = node.children()
        nodes.extend(children.apply(i) for i in reversed(range(children.size())))
    return BatchReport(batch_id, observed, tuple(dropped), parts)


def record_batch(
    session: Any, run_dir: str, branch: int, operators: bool, query_name: str, batch_id: int
) -> None:
    """Step 4 in the sink's callback: the batch's counts to disk. A failure to read them from the
    JVM is logged, not raised: results never depend on the count (a failure to write the file,
    as a full disk, fails the batch as the sink's own write would)."""
    try:
        report = batch_report(session, query_name, batch_id, operators)
    except Exception:  # noqa: BLE001 - Spark's internals differ: the count is short, the job goes on
        log.warning(
            "query '%s', batch %d: its late rows could not be read", query_name, batch_id, exc_info=True
        )
        return
    if report is None:
        log.warning(
            "query '%s', batch %d: its execution was not found; late rows not counted", query_name, batch_id
        )
        return
    write_report(run_dir, branch, report)


def counts_dir(run_dir: str | os.PathLike[str], branch: int) -> Path:
    return Path(run_dir) / "branches" / str(branch) / COUNTS_DIR


def write_report(run_dir: str, branch: int, report: BatchReport) -> None:
    """The batch's counts, on disk before its rows are written (nothing when there are none)."""
    if not any(report.observed.values()) and not any(report.dropped):
        return
    folder = counts_dir(run_dir, branch)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{report.batch_id:012d}.json"
    tmp = folder / f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(report.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, folder / name)


# -- step 5: the manager reads them ------------------------------------------------------------------
def collect_reports(
    run_dir: str | os.PathLike[str], branch: int, committed: int | None
) -> tuple[list[BatchReport], list[Path]]:
    """The counts files of a branch's batches up to ``committed`` (a batch not committed may be
    run again, or never count: it is left for later), and the files read."""
    if committed is None:
        return [], []
    folder = counts_dir(run_dir, branch)
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_file() and not e.name.startswith("."))
    except FileNotFoundError:
        return [], []
    reports, files = [], []
    for name in names:
        if int(name.removesuffix(".json")) > committed:
            continue
        reports.append(BatchReport.from_json((folder / name).read_text(encoding="utf-8")))
        files.append(folder / name)
    return reports, files


def counts(reports: Sequence[BatchReport], branch: Branch, job: str) -> list[LateCount]:
    """The late counts of a branch's batch reports (zero counts left out), per partition where the
    source has partitions (what the metric's ``parts`` do not account for has none). Spark's own
    figure is taken for a stage later in a chain (step 2) and, for the first stage of such a branch
    (the only ones whose reports carry it), only checked: it can never exceed pitstop's, which
    counts each row where Spark counts each group."""
    out: dict[tuple[int, str, str, int | None], int] = {}
    first = branch.stages[0].name if branch.stages else None
    operators = kinds.operator_ids(branch)
    for report in reports:
        batch = report.batch_id
        ours: dict[str, int] = {}
        for name, rows in report.observed.items():
            stage, source = json.loads(name[len(METRIC) :])
            ours[stage] = ours.get(stage, 0) + rows
            by_part = dict(report.parts.get(name, {}))
            rest = rows - sum(by_part.values())
            if rest:
                by_part[None] = by_part.get(None, 0) + rest
            for part, n in by_part.items():
                if n:
                    out[(batch, stage, source, part)] = out.get((batch, stage, source, part), 0) + n
        spark = report.dropped
        for stage in branch.stages:
            ids = operators.get(stage.name, [])
            if not ids or max(ids) >= len(spark):
                continue
            dropped = sum(spark[i] for i in ids)
            if stage.name != first:
                if dropped:
                    key = (batch, stage.name, branch.source, None)
                    out[key] = out.get(key, 0) + dropped
            elif dropped > ours.get(stage.name, 0):
                log.warning(
                    "job '%s', stage '%s', batch %d: Spark dropped %d late row(s) or group(s), more than the "
                    "%d late row(s) pitstop counted; the count of that batch may be short",
                    job,
                    stage.name,
                    batch,
                    dropped,
                    ours.get(stage.name, 0),
                )
    return [
        LateCount(branch.index, b, stage, source, n, part)
        for (b, stage, source, part), n in sorted(out.items(), key=_count_order)
    ]


def _count_order(item: tuple[tuple[int, str, str, int | None], int]) -> tuple[int, str, str, int]:
    (batch, stage, source, part), _ = item
    return batch, stage, source, -1 if part is None else part


def late_dir(run_dir: str | os.PathLike[str], branch: int) -> Path:
    return Path(run_dir) / "branches" / str(branch) / LATE_DIR


def collect_kept(
    run_dir: str | os.PathLike[str], branch: int, committed: int | None, seen: set[str]
) -> list[LateRecord]:
    """The kept late rows in a branch's files of batches up to ``committed`` (a batch not
    committed may be run again, or never count: it is left for later) not in ``seen`` (updated)."""
    out: list[LateRecord] = []
    if committed is None:
        return out
    folder = late_dir(run_dir, branch)
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_file() and not e.name.startswith("."))
    except FileNotFoundError:
        return out
    for name in names:
        if name in seen:
            continue
        batch, part, _slot = name.removesuffix(".jsonl").split("-")
        if int(batch) > committed:
            continue
        text = (folder / name).read_text(encoding="utf-8")
        for line, raw in enumerate(text.splitlines(), 1):
            d = json.loads(raw)
            out.append(
                LateRecord(
                    branch,
                    int(batch),
                    int(part),
                    line,
                    d["stage"],
                    d["source"],
                    _time(d["window_start"]),
                    _time(d["window_end"]),
                    _time(d["event_time"]),
                    _time(d["watermark"]) or datetime(1970, 1, 1),
                    d["record"],
                    d.get("partition"),  # absent from a file an earlier pitstop wrote
                )
            )
        seen.add(name)
    return out


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)
