"""Each stream's own watermark, kept across a restart of its query (issue 23).

A query with two watermarked streams (an interval join: one ``withWatermark`` per side) has one
watermark per stream and the query's, the lesser of them (Spark's default ``min`` policy). Spark
writes only the query's to its offset log; each stream's lives in the driver's memory (pyspark
4.3: ``WatermarkTracker.operatorToWatermarkMap``). A restarted query (``ALTER JOB ... RESUME``, a
new process, a run resumed after a kill, a native restore from a snapshot's copy of the
checkpoint) knows none of them, counts a stream that has had no row since as not seen, and so
keeps the query's watermark where it was until *both* streams have had rows again: a row that is
late for the lesser of the two is then paired instead of dropped.

pitstop keeps each stream's clock itself, in the sink's callback of each micro-batch (once the
batch is computed, before Spark moves the watermark and commits the batch; the callback runs in
the query's own thread, so nothing races it):

1. Each watermark operator's event-time statistics of the batch (Spark's
   ``EventTimeWatermarkExec.eventTimeStats``: what that stream's watermark is computed from, its
   greatest event time less the delay) are read, operators in the plan's order, each with its
   event-time column.
2. Where a stream's greatest event time grew, every stream's greatest (the running maxima) is
   written to ``<checkpoint>/pitstop_clocks/<batch>`` (temp file + rename). Recorded before the
   batch commits: a batch run again after a kill reads the same input, so counting it early
   changes nothing. The newest file at or below a batch is the clocks as of that batch; older
   files go once :data:`RETAIN` batches have passed (Spark keeps as many of its own logs).
3. In the first callback of a query (each start, each restart after a failure), each stream
   whose batch saw nothing later than its recorded greatest gets that time added to its
   statistics. Spark's own update after the batch then sets that stream's watermark to the
   recorded time less the delay, as if its rows had come again: a clock row that is no row
   (nothing reaches a stage, a sink, a late count or the query's plan, so a checkpoint's sources,
   snapshots and replays are unchanged). A stream whose clock ran on meanwhile is left alone, so
   is one of a run that kept its memory: a time no later than what a stream has seen never moves
   its watermark.
4. The files live in the checkpoint, so a snapshot's native copy takes those up to its cut
   (:func:`pitstop.engine.checkpoint.copy_checkpoint`) and a natively restored stage goes on on
   its streams' clocks. A stage restored from rows gets its seeds through each side's watermark in
   its first batch, which counts them like this.
5. A query of one stream whose stages were restored from rows (or started on the job's clock)
   starts with no watermark: Spark's comes from the rows it reads, so a window the stage's clock
   had already closed -- a session re-formed on a shorter gap -- would stay open until live rows
   moved it. Such a query's first batch gets its stages' clock the same way (``initial``: the
   least of its stages' old watermarks plus the delay now), so Spark's watermark after it is the
   snapshot's and closes those windows at once, as the job would have.

A failure to read or set the JVM's figures is logged, not raised (the job goes on as Spark alone
would run it); a failure to write the file (a full disk) fails the batch, as the sink's would.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pitstop.engine.checkpoint import CLOCKS_DIR
from pitstop.engine.jvm import spark_class

log = logging.getLogger(__name__)

RETAIN = 100
"""Batches after which an older clocks file goes (Spark's ``minBatchesToRetain`` default): a
snapshot's cut is a recent committed batch, whose newest file at or below it is kept."""
_WATERMARK_EXEC = (  # Spark's physical operator of withWatermark (its package moved in pyspark 4.1)
    "org.apache.spark.sql.execution.streaming.operators.stateful.EventTimeWatermarkExec",
    "org.apache.spark.sql.execution.streaming.EventTimeWatermarkExec",
)


@dataclass(frozen=True)
class Clock:
    """One stream's clock: its watermark's event-time column and the greatest event time (ms since
    the epoch) its watermark operator has seen."""

    column: str
    max_ms: int


@dataclass(frozen=True)
class Seen:
    """What one watermark operator saw in a batch: its column, and its greatest time (None: no row)."""

    column: str
    max_ms: int | None


def clocks_dir(checkpoint: str | os.PathLike[str]) -> Path:
    return Path(checkpoint) / CLOCKS_DIR


def _batches(checkpoint: str | os.PathLike[str]) -> list[int]:
    try:
        return sorted(int(e.name) for e in os.scandir(clocks_dir(checkpoint)) if e.name.isdigit())
    except FileNotFoundError:
        return []


def read_clocks(checkpoint: str | os.PathLike[str], upto: int | None = None) -> tuple[Clock | None, ...]:
    """The clocks as of batch ``upto`` (None: the newest), one per watermark operator in the plan's
    order (None: a stream that had no row yet); empty if none were recorded."""
    batches = [b for b in _batches(checkpoint) if upto is None or b <= upto]
    if not batches:
        return ()
    d = json.loads((clocks_dir(checkpoint) / str(batches[-1])).read_text(encoding="utf-8"))
    return tuple(None if c is None else Clock(str(c["column"]), int(c["max_ms"])) for c in d["clocks"])


def write_clocks(checkpoint: str | os.PathLike[str], batch: int, clocks: tuple[Clock | None, ...]) -> None:
    """Step 2: the clocks as of ``batch``, on disk before the batch commits; older files beyond
    :data:`RETAIN` batches go (the newest of them stays: the clocks as of any later batch)."""
    folder = clocks_dir(checkpoint)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(
        {
            "batch": batch,
            "clocks": [None if c is None else {"column": c.column, "max_ms": c.max_ms} for c in clocks],
        }
    )
    tmp = folder / f".{batch}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, folder / str(batch))
    old = [b for b in _batches(checkpoint) if b <= batch - RETAIN]
    for b in old[:-1]:
        (folder / str(b)).unlink(missing_ok=True)


def batch_execution(session: Any, query_name: str, batch_id: int) -> Any:
    """The JVM's execution of batch ``batch_id`` of the active query named ``query_name``
    (``session``: the JVM SparkSession that started it); None if it is not found."""
    query = next((q for q in session.streams().active() if q.name() == query_name), None)
    execution = query.streamingQuery().lastExecution() if query is not None else None
    if execution is None or int(execution.currentBatchId()) != batch_id:
        return None
    return execution


def watermark_operators(session: Any, execution: Any) -> list[Any]:
    """Step 1: the execution's watermark operators, in the plan's order (pre-order, as Spark's
    ``plan.collect`` lists them; the same for every run of one plan)."""
    cls = spark_class(session, _WATERMARK_EXEC)
    if cls is None:
        return []
    found, nodes = [], [execution.executedPlan()]
    while nodes:
        node = nodes.pop()
        if cls.isInstance(node):
            found.append(node)
        children = node.children()
        nodes.extend(children.apply(i) for i in reversed(range(children.size())))
    return found


class StreamClocks:
    """One query's clocks, called in its sink's callback with each batch id once the batch is
    computed (a new one for each start of the query: step 3 runs in its first call). Holds the JVM
    session and plain values only (see :meth:`pitstop.engine.runs.starting.RunStarting._start_query`)."""

    def __init__(self, session: Any, checkpoint: str, query_name: str, initial: int | None = None) -> None:
        self._session = session
        self._checkpoint = checkpoint
        self._query_name = query_name
        self._initial = initial  # step 5: a one-stream query's clock when its checkpoint has none
        self._clocks: tuple[Clock | None, ...] | None = None  # read at the first call

    def __call__(self, batch_id: int) -> None:
        # Step 1. What each stream's watermark operator saw in this batch.
        try:
            execution = batch_execution(self._session, self._query_name, batch_id)
            operators = watermark_operators(self._session, execution) if execution is not None else []
            seen = [_seen(op) for op in operators]
        except Exception:  # noqa: BLE001 - Spark's internals differ: the job goes on as Spark runs it
            log.warning(
                "query '%s', batch %d: its streams' watermarks could not be read; after a restart its "
                "watermark may lag until every stream has rows again",
                self._query_name,
                batch_id,
                exc_info=True,
            )
            return
        if execution is None:
            log.warning(
                "query '%s', batch %d: its execution was not found; its streams' watermarks not recorded",
                self._query_name,
                batch_id,
            )
            return
        if not operators:
            return
        first = self._clocks is None
        recorded = read_clocks(self._checkpoint) if self._clocks is None else self._clocks
        if first and not recorded and self._initial is not None and len(seen) == 1:
            recorded = (Clock(seen[0].column, self._initial),)  # step 5
        if len(recorded) != len(seen) or any(
            r is not None and r.column != s.column for r, s in zip(recorded, seen, strict=False)
        ):
            if recorded:
                log.warning(
                    "query '%s': the clocks recorded in its checkpoint are of other streams (%s, now %s); "
                    "not used",
                    self._query_name,
                    [r.column if r else None for r in recorded],
                    [s.column for s in seen],
                )
            recorded = (None,) * len(seen)
        if first:  # Step 3. A query's first batch: each stream's clock given back to Spark.
            self._give_back(batch_id, operators, seen, recorded)
        # Step 2. The running maxima, on disk where one grew.
        clocks = tuple(_later(r, s) for r, s in zip(recorded, seen, strict=True))
        self._clocks = clocks
        if clocks != recorded:
            write_clocks(self._checkpoint, batch_id, clocks)

    def _give_back(
        self, batch_id: int, operators: list[Any], seen: list[Seen], recorded: tuple[Clock | None, ...]
    ) -> None:
        """Step 3: each stream's recorded clock into its operator's statistics of this batch, where
        the batch saw nothing later."""
        for op, now, was in zip(operators, seen, recorded, strict=True):
            if was is None or (now.max_ms is not None and now.max_ms >= was.max_ms):
                continue
            try:
                op.eventTimeStats().add(was.max_ms)
            except Exception:  # noqa: BLE001 - as at step 1
                log.warning(
                    "query '%s', batch %d: the watermark of its stream on '%s' could not be restored",
                    self._query_name,
                    batch_id,
                    was.column,
                    exc_info=True,
                )
                continue
            log.info(
                "query '%s', batch %d: the watermark of its stream on '%s' goes on from its greatest "
                "event time seen before the restart (%d ms)",
                self._query_name,
                batch_id,
                was.column,
                was.max_ms,
            )


def restored_clock(stages: Iterable[Any], seeds: Mapping[str, Any]) -> int | None:
    """Step 5: the greatest event time a one-stream query whose stages were restored from a
    snapshot goes on from, in ms: the least over those stages of the snapshot's watermark plus the
    stage's watermark delay now (so that the new watermark is the snapshot's, whatever the delay);
    None when no stage had one."""
    found = [
        seeds[s.name].old_watermark_ms + s.watermark_delay_micros // 1000
        for s in stages
        if s.name in seeds and seeds[s.name].old_watermark_ms > 0
    ]
    return min(found) if found else None


def _seen(op: Any) -> Seen:
    stats = op.eventTimeStats().value()
    return Seen(str(op.eventTime().name()), int(stats.max()) if int(stats.count()) > 0 else None)


def _later(was: Clock | None, now: Seen) -> Clock | None:
    if now.max_ms is None:
        return was
    if was is None or now.max_ms > was.max_ms:
        return Clock(now.column, now.max_ms)
    return was
