"""A job run: one Spark streaming query per branch, each with its own checkpoint in the run folder.

Run folder layout::

    <home>/runs/<run_id>/branches/<i>/checkpoint    Spark checkpoint of branch i
    <home>/runs/<run_id>/sources/<source>/          discovery log and fence (connectors.positions)
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.catalog.rows import LateCount, LateRecord, Mapping, Run
from pitstop.catalog.store import Catalog
from pitstop.connectors import positions, registry, tables
from pitstop.connectors.base import Positions, Sink
from pitstop.connectors.upsert import KEEP, finishing_keys, window_rows
from pitstop.engine import checkpoint, late
from pitstop.engine.frames import StageSeed, branch_frame
from pitstop.errors import (
    FINAL_SOURCE_ERRORS,
    AwaitTimeoutError,
    CancelledError,
    JobFailedError,
    PitstopError,
)
from pitstop.faults import crash_point
from pitstop.plan.model import Branch, JobPlan, end_column
from pitstop.stages import registry as kinds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)
POLL_S = 0.05
MAX_RESTARTS = 3
HEALTHY_S = 600.0
"""A branch that failed after running well this long since its last restart, committing a batch,
has its restarts counted from 0 again (Flink's exponential-delay strategy resets its backoff after
a stable hour, ``reset-backoff-threshold``): a long-lived job survives a transient failure now and
then, and a job failing again and again right after each restart still fails for good."""


class StopRequested(Exception):
    """Raised by a sink before it writes anything, once the run is stopping."""


class Gate:
    """Lets batches through to the sink until the run stops; counts batches being written."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.refusing = False
        self.inflight = 0

    def enter(self, batch_id: int) -> None:
        with self._cond:
            if self.refusing:
                raise StopRequested(f"batch {batch_id} refused: the job is stopping")
            self.inflight += 1

    def leave(self) -> None:
        with self._cond:
            self.inflight -= 1
            self._cond.notify_all()

    def refuse(self, timeout: float = 60.0) -> None:
        with self._cond:
            self.refusing = True
            self._cond.wait_for(lambda: self.inflight == 0, timeout)


# Spark's failures of a query that a checkpoint it was started on can cause: its offsets, commits,
# operators or state do not fit the query.
_CHECKPOINT_FAILURE = re.compile(
    r"checkpoint|state ?store|state schema|StateSchema|STATEFUL_OPERATOR|operator ?id|metadata",
    re.IGNORECASE,
)


@dataclass
class BranchQuery:
    branch: Branch
    checkpoint: Path
    gate: Gate
    sink: Sink
    query: StreamingQuery | None = None
    restarts: int = 0  # restarts from the checkpoint after a failure, counted toward MAX_RESTARTS
    failures: int = 0  # every failure in this process (each one's whole trace is logged once)
    restarted_at: float = 0.0  # time.monotonic() of the last restart
    restarted_batch: int | None = None  # the last committed batch when it was last restarted
    last_reason: str | None = None  # why it last failed (Spark may stop a query before it says why)
    final: bool = False  # it failed for a reason a restart cannot change ('onError'='fail')
    kept_seen: set[str] = field(default_factory=set)  # files of kept late rows already recorded


@dataclass(frozen=True)
class Cut:
    """Where a stopped run stands: the same positions in every branch, one committed batch each."""

    positions: dict[str, Any]  # per source, as its connector defines
    batches: dict[int, int | None]  # branch index -> last committed batch id
    watermarks_ms: dict[int, int]  # branch index -> watermark after that batch


@dataclass
class ActiveRun:
    job: str
    run: Run
    plan: JobPlan
    mappings: dict[str, Mapping]
    folder: Path
    start_positions: dict[str, Any]
    seeds: dict[str, StageSeed] = field(default_factory=dict)
    branches: list[BranchQuery] = field(default_factory=list)
    bounds: dict[str, Any] = field(default_factory=dict)
    """Sources read no further than these positions (a fence from the start: a replay's span, or
    where a suspended job stands when it is woken to be stopped with a snapshot)."""
    sinks: Callable[[Branch, Mapping, tuple[str, ...]], Sink] | None = None
    """Where the branches write instead of their sinks' connectors (a replay's capture)."""
    fail_fast: bool = False
    """A branch that stops has failed the run (no supervisor restarts it: a replay)."""
    _spark: Any = field(default=None, init=False, repr=False)
    _trigger_ms: int = field(default=500, init=False, repr=False)
    _catalog: Any = field(default=None, init=False, repr=False)
    _parallelism: int = field(default=2, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopping: bool = field(default=False, init=False, repr=False)
    _logged: set[tuple[int, int]] = field(default_factory=set, init=False, repr=False)

    # -- starting --------------------------------------------------------------------------------
    def start(self, spark: SparkSession, catalog: Catalog, trigger_ms: int, parallelism: int) -> None:
        self._spark, self._trigger_ms, self._parallelism = spark, trigger_ms, parallelism
        self._catalog = catalog
        if any(self._static_duckdb(b) for b in self.plan.branches):
            catalog.add_commit_hook(self._publish_all)
        for src in self.plan.sources:
            positions.clear_fence(positions.source_dir(self.folder, src))
            if src in self.bounds:
                positions.write_fence(positions.source_dir(self.folder, src), self.bounds[src])
        for branch in self.plan.branches:
            ckpt = self.folder / "branches" / str(branch.index) / "checkpoint"
            mapping = self.mappings[branch.sink]
            keys = branch.upsert_keys or finishing_keys(
                catalog, mapping, registry.connector(mapping.type), branch, self.run.restore is not None
            )
            sink = (
                self.sinks(branch, mapping, keys)
                if self.sinks is not None
                else registry.connector(mapping.type).make_sink(
                    catalog, mapping, self.job, self.run.run_id, branch.index, keys
                )
            )
            if keys and branch.stage is not None and branch.stage.window is not None:
                window_rows(sink, end_column(branch), partial(batch_watermark, ckpt))
            bq = BranchQuery(branch, ckpt, Gate(), sink)
            self._publish(branch)
            df = self._frame(branch)
            sink.prepare([(f.name, f.dataType.simpleString()) for f in df.schema.fields if f.name != KEEP])
            self.branches.append(bq)
            bq.query = self._start_query(df, bq, trigger_ms)

    def planned_positions(self) -> dict[str, Any]:
        """Per source, the furthest position any branch's checkpoint has planned (where this run
        started reading it, if none has): where the run stands. Read before the queries start too
        (a suspended job woken for ``DROP JOB ... WITH SNAPSHOT`` reads no further: :attr:`bounds`)."""
        fence: dict[str, Any] = {src: self.start_of(src) for src in self.plan.sources}
        for branch in self.plan.branches:
            ckpt = self.folder / "branches" / str(branch.index) / "checkpoint"
            planned = checkpoint.latest_planned(ckpt)
            offsets = checkpoint.read_offsets(ckpt, planned) if planned is not None else None
            if offsets is not None:
                for src, pos in offsets.positions.items():
                    fence[src] = self._positions(src).furthest(fence.get(src, self.start_of(src)), pos)
        return fence

    def start_of(self, source: str) -> Any:
        """Where this run started reading ``source`` (a snapshot's position, else the start)."""
        if source in self.start_positions:
            return self.start_positions[source]
        return self._positions(source).zero

    def _positions(self, source: str) -> Positions:
        return registry.connector(self.mappings[source].type).positions

    def _query_key(self, branch: Branch) -> str:
        return f"{self.run.run_id}_{branch.index}"

    def _static_duckdb(self, branch: Branch) -> bool:
        join = branch.join
        return (
            join is not None
            and join.kind == "table"
            and registry.connector(self.mappings[join.right].type).whole == "catalog"
        )

    def _publish(self, branch: Branch) -> None:
        """A static join's DuckDB table, as it is now, where the branch's query reads it
        (:mod:`pitstop.connectors.tables`)."""
        if branch.join is not None and self._static_duckdb(branch):
            mapping = self.mappings[branch.join.right]
            tables.publish(self._catalog, mapping, str(self.folder), self._query_key(branch))

    def _publish_all(self) -> None:
        """After each commit to the catalog: every static DuckDB table again (one may have changed)."""
        for branch in self.plan.branches:
            self._publish(branch)

    def _frame(self, branch: Branch) -> DataFrame:
        seeds = {s.name: self.seeds[s.name] for s in branch.stages if s.name in self.seeds}
        right = self.mappings[branch.join.right] if branch.join is not None else None
        ckpt = self.folder / "branches" / str(branch.index) / "checkpoint"
        keep = late.Keep(str(self.folder), branch.index) if self.plan.keep_late else None
        return branch_frame(
            self._spark,
            branch,
            self.mappings[branch.source],
            str(self.folder),
            self.start_of(branch.source),
            self._parallelism,
            seeds,
            self._query_key(branch),
            right,
            self.start_of(right.name) if right is not None and right.name in branch.sources else None,
            str(ckpt),
            keep,
        )

    def _start_query(self, df: DataFrame, bq: BranchQuery, trigger_ms: int) -> StreamingQuery:
        # The callback holds its gate and sink and nothing else. Py4J keeps it (in its proxy pool)
        # until the JVM's query that calls it is collected, and the JVM's query lives while a Python
        # object refers to it: had the callback held this run (and so its StreamingQuery objects),
        # neither side could ever free the other, and every query a process ever ran would stay in
        # its JVM with its last plan, broadcast tables included (measured: ~30 MB per update chain
        # with a static join, until the heap ran out after some 80 chains).
        gate, sink, restored = bq.gate, bq.sink, self.run.restore is not None
        name = f"{self.job}#{bq.branch.index}@{self.run.run_id}"
        # Its late counts, recorded before its rows (pitstop.engine.late, step 4): the JVM session
        # that starts the query finds it by name (the callback's own session is the query's clone).
        # A branch none of whose stages has a watermark drops nothing as late: no read (it costs a
        # few JVM calls per batch).
        stages = len(bq.branch.stages) if late_possible(bq.branch) else 0
        record = (
            partial(
                late.record_batch,
                self._spark._jsparkSession,
                str(self.folder),
                bq.branch.index,
                stages > 1,
                name,
            )
            if stages
            else None
        )

        def write_batch(batch: DataFrame, batch_id: int) -> None:
            if restored:
                crash_point("restore.batch")
            gate.enter(batch_id)
            try:
                rows = batch.toArrow()
                if record is not None:
                    record(batch_id)
                sink.write(rows, batch_id)
            finally:
                gate.leave()

        return (
            df.writeStream.queryName(name)
            .foreachBatch(write_batch)
            .option("checkpointLocation", str(bq.checkpoint))
            .outputMode(output_mode(bq.branch))
            .trigger(processingTime=f"{max(trigger_ms, bq.branch.early_results_ms)} milliseconds")
            .start()
        )

    # -- watching ---------------------------------------------------------------------------------
    def failure(self) -> str | None:
        """Why the job has failed for good, or None. A read: it restarts nothing and changes
        nothing (AWAIT JOB and the drain of DROP JOB ... WITH SNAPSHOT poll it)."""
        for bq in list(self.branches):
            reason = self._dead(bq)
            if reason is not None and (
                self.fail_fast or bq.final or (bq.restarts >= MAX_RESTARTS and not self._ran_well(bq))
            ):
                return self._failed_text(bq, reason)
        return None

    def recover(self) -> tuple[list[str], str | None]:
        """Restart each failed branch from its checkpoint, up to ``MAX_RESTARTS`` times, as a
        cluster restarts a failed job: its sink skips the batches it already holds, so nothing is
        read twice or lost. Returns what was restarted (one sentence each) and, when a branch
        keeps failing, why the job has failed for good. A branch that failed on a malformed
        record under ``'onError'='fail'`` fails the job at once: reading the same file again
        meets the same record.

        Only the manager's supervisor calls this, under the manager's lock; :meth:`stop` takes
        this run's lock too and marks the run stopping, so a restart can never start a query
        for a run that is being stopped or dropped (no orphan query)."""
        restarted: list[str] = []
        with self._lock:
            if self._stopping:
                return restarted, None
            for bq in self.branches:
                reason = self._dead(bq)
                if reason is None:
                    continue
                if bq.restarts and self._ran_well(bq):
                    log.info(
                        "job '%s': INSERT INTO %s ran well for %.0f s after its last restart; its restarts "
                        "are counted from 0 again",
                        self.job,
                        bq.branch.sink,
                        time.monotonic() - bq.restarted_at,
                    )
                    bq.restarts = 0
                if bq.final or bq.restarts >= MAX_RESTARTS:
                    return restarted, self._failed_text(bq, reason)
                bq.restarts += 1
                bq.failures += 1
                bq.restarted_at, bq.restarted_batch = (
                    time.monotonic(),
                    checkpoint.latest_commit(bq.checkpoint),
                )
                log.warning(
                    "job '%s': INSERT INTO %s failed (%s); restarting it from its checkpoint (%d of %d)",
                    self.job,
                    bq.branch.sink,
                    reason,
                    bq.restarts,
                    MAX_RESTARTS,
                )
                try:
                    bq.query = self._start_query(self._frame(bq.branch), bq, self._trigger_ms)
                except Exception as again:  # noqa: BLE001 - any failure to restart is reported
                    log.error(
                        "job '%s': restarting INSERT INTO %s failed", self.job, bq.branch.sink, exc_info=True
                    )
                    bq.restarts = MAX_RESTARTS
                    return restarted, self._failed_text(
                        bq, f"{reason}; restarting failed: {spark_reason(again)}"
                    )
                restarted.append(
                    f"INSERT INTO {bq.branch.sink} failed ({reason}); restarted from its checkpoint "
                    f"({bq.restarts} of {MAX_RESTARTS})"
                )
        return restarted, None

    @staticmethod
    def _ran_well(bq: BranchQuery) -> bool:
        """Whether the branch ran :data:`HEALTHY_S` since its last restart and committed a batch."""
        if time.monotonic() - bq.restarted_at < HEALTHY_S:
            return False
        last = checkpoint.latest_commit(bq.checkpoint)
        return last is not None and (bq.restarted_batch is None or last > bq.restarted_batch)

    def _dead(self, bq: BranchQuery) -> str | None:
        """Spark's reason if the branch's query has stopped by itself (not by pitstop's stop)."""
        q = bq.query
        if q is None or bq.gate.refusing or self._stopping:
            return None
        exc = q.exception()
        if exc is None and q.isActive:
            return None
        if exc is None:
            return bq.last_reason or "stopped unexpectedly"
        if (bq.branch.index, bq.failures) not in self._logged:  # each failure's whole trace once
            self._logged.add((bq.branch.index, bq.failures))  # in the log; one sentence elsewhere
            log.error("job '%s': INSERT INTO %s failed:\n%s", self.job, bq.branch.sink, full_text(exc))
        bq.last_reason = spark_reason(exc)
        bq.final = rejected_record(exc)
        return bq.last_reason

    def _failed_text(self, bq: BranchQuery, reason: str) -> str:
        """The one sentence a failed branch is reported with. A branch that started on a
        snapshot's native copy and failed on what that copy holds (before committing a batch past
        it, or Spark names its checkpoint or state) is told how to restore it from the rows
        instead; any other failure (a malformed record, a later batch's) is not its copy's."""
        restore = self.run.restore or {}
        native = restore.get("native") or []
        batches = restore.get("native_batches") or {}
        committed = checkpoint.latest_commit(bq.checkpoint) if batches else None
        on_copy = any(  # nothing committed past the copy: it failed on what the copy holds
            batches.get(s.name) is not None and committed == batches[s.name] for s in bq.branch.stages
        )
        if (on_copy and not bq.final) or _CHECKPOINT_FAILURE.search(reason):
            for stage in (s for s in bq.branch.stages if s.name in native):
                reason += (
                    f" (stage '{stage.name}' started on the snapshot's native state files, which Spark "
                    "refused; OPTIONS ('restoreFormat'='canonical') restores it from the snapshot's rows "
                    "instead)"
                )
        return f"INSERT INTO {bq.branch.sink} failed: {reason}"

    def available(self) -> dict[str, Any]:
        """Each source's position once all input available now is read."""
        out: dict[str, Any] = {}
        for src in self.plan.sources:
            mapping = self.mappings[src]
            directory = positions.source_dir(self.folder, src)
            out[src] = registry.connector(mapping.type).available(self.folder, mapping, self.start_of(src))
            fence = positions.read_fence(directory)
            if fence is not None:
                out[src] = self._positions(src).least(out[src], fence)
        return out

    def caught_up(self, targets: dict[str, Any]) -> bool:
        for bq in self.branches:
            if not self._has_run(bq):
                return False
            p = checkpoint.progress(bq.checkpoint, self.start_positions)
            seeded = (s.name in self.seeds and not self.seeds[s.name].clock_only for s in bq.branch.stages)
            if p.committed is None and any(seeded):
                return False  # the seeds' batch has not run yet
            for src in bq.branch.sources:
                if src in targets and not self._positions(src).covers(
                    p.positions.get(src, self.start_of(src)), targets[src]
                ):
                    return False
            if not p.settled:
                return False
        return True

    def _has_run(self, bq: BranchQuery) -> bool:
        """Whether the branch's query is running and has run a trigger in this process. Its
        checkpoint alone can say "caught up" (one copied from a snapshot, or a resumed one, holds
        the positions already) while the query is still starting, restarting after a failure, or
        about to fail on its first trigger, where Spark checks the checkpoint against the query."""
        q = bq.query
        return q is not None and q.isActive and q.lastProgress is not None

    def wait(
        self,
        predicate: Callable[[], bool],
        timeout_s: float,
        what: str,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            failure = self.failure()
            if failure is not None:
                raise JobFailedError(f"job '{self.job}' failed: {failure}")
            if predicate():
                return
            if cancelled is not None and cancelled():
                raise CancelledError(
                    f"cancelled: job '{self.job}' did not {what}; it keeps running, unchanged"
                )
            if time.monotonic() > deadline:
                raise AwaitTimeoutError(
                    f"job '{self.job}' did not {what} within {timeout_s:g} s; it is still running. "
                    "Wait longer with AWAIT JOB ... TIMEOUT INTERVAL 'n' SECOND, or look at SHOW JOBS."
                )
            time.sleep(POLL_S)

    def await_input(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
        targets = self.available()
        self.wait(lambda: self.caught_up(targets), timeout_s, "catch up with its input", cancelled)
        return targets

    # -- late rows (pitstop.engine.late, step 5) -------------------------------------------------
    def late_rows(self) -> tuple[list[LateCount], list[LateRecord], list[Path]]:
        """The late counts of the branches' committed batches not recorded yet, the kept rows of
        committed batches not yet read, and the counts files they came from (step 5). A read:
        nothing is marked recorded until the catalog has them (:meth:`late_recorded`)."""
        found: list[LateCount] = []
        records: list[LateRecord] = []
        files: list[Path] = []
        for bq in list(self.branches):
            if not bq.branch.stages:
                continue
            committed = checkpoint.latest_commit(bq.checkpoint)
            reports, read = late.collect_reports(self.folder, bq.branch.index, committed)
            found += late.counts(reports, bq.branch, self.job)
            files += read
            if self.plan.keep_late:
                records += late.collect_kept(self.folder, bq.branch.index, committed, bq.kept_seen)
        return found, records, files

    def late_recorded(self, files: list[Path]) -> None:
        """The catalog holds what :meth:`late_rows` returned: its counts files go."""
        for path in files:
            path.unlink(missing_ok=True)

    def late_unrecorded(self) -> None:
        """The catalog could not take what :meth:`late_rows` returned: the kept rows' files are
        read again next time (recording one twice changes nothing)."""
        for bq in self.branches:
            bq.kept_seen.clear()

    # -- stopping --------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every branch at a batch boundary: no sink write is cut in half. From here on
        nothing restarts a branch of this run (:meth:`recover`)."""
        with self._lock:  # a restart in flight finishes first; its query is stopped below
            self._stopping = True
        if self._catalog is not None:
            self._catalog.remove_commit_hook(self._publish_all)
        for bq in self.branches:
            interrupt = getattr(bq.sink, "interrupt", None)
            if interrupt is not None:  # a batch waiting for its sink's server stops waiting
                interrupt()
            bq.gate.refuse()
        for bq in self.branches:
            if bq.query is not None and bq.query.isActive:
                bq.query.stop()
            close = getattr(bq.sink, "close", None)
            if close is not None:  # a sink holding a client (Kafka's producer) lets it go
                close()

    def drain_to_cut(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> Cut:
        """Bring every branch to the same source positions and hold it there (the job keeps
        running, idle, until :meth:`release` or :meth:`stop`).

        1. Fence each source at the furthest position any branch has planned.
        2. Wait until every branch has committed up to the fence and has no batch pending
           (windows that the input closes are emitted). If a branch planned a batch past the
           fence while it was being set, raise the fence to that position and wait again.
        3. Read the cut from the checkpoints.
        """
        # Step 1. Fence every source.
        fence = self.planned_positions()
        # Step 2. Drain to the fence; raise it if a branch went past it.
        while True:
            try:
                for src, pos in fence.items():
                    positions.write_fence(positions.source_dir(self.folder, src), pos)
                    crash_point("drain.fenced", positions.source_dir(self.folder, src))
            except OSError as exc:  # a full disk, most often: no cut, and nothing lost
                self.release()
                raise PitstopError(
                    f"job '{self.job}' could not hold its sources at a cut: {exc}. Nothing is lost: "
                    f"the job reads on; free space in {self.folder} (or make it writable) and try again"
                ) from exc
            try:
                self.wait(partial(self.caught_up, dict(fence)), timeout_s, "reach a clean cut", cancelled)
            except PitstopError:
                self.release()  # nothing is lost: the job reads on from where it stood
                raise
            # A trigger that listed its sources before the fence was written plans past it, and
            # its batch may appear only now: read the planned offsets as well as the committed.
            beyond = dict(fence)
            settled = True
            for bq in self.branches:
                p = checkpoint.progress(bq.checkpoint, self.start_positions)
                settled = settled and p.settled
                planned = checkpoint.latest_planned(bq.checkpoint)
                offsets = checkpoint.read_offsets(bq.checkpoint, planned) if planned is not None else None
                for src, pos in (*p.positions.items(), *(offsets.positions.items() if offsets else ())):
                    beyond[src] = self._positions(src).furthest(beyond.get(src, self.start_of(src)), pos)
            if not all(
                self._positions(src).same(beyond[src], fence.get(src, self.start_of(src))) for src in beyond
            ):
                fence = beyond
            elif settled:
                break
        # Step 3. The cut.
        try:
            return self._cut(fence)
        except PitstopError:
            self.release()
            raise

    def _cut(self, fence: dict[str, Any]) -> Cut:
        batches: dict[int, int | None] = {}
        watermarks: dict[int, int] = {}
        for bq in self.branches:
            p = checkpoint.progress(bq.checkpoint, self.start_positions)
            if not p.settled or not all(
                self._positions(src).same(
                    p.positions.get(src, self.start_of(src)), fence.get(src, self.start_of(src))
                )
                for src in bq.branch.sources
            ):
                raise PitstopError(
                    f"job '{self.job}': INSERT INTO {bq.branch.sink} is at {p.positions}, not at the cut "
                    f"{fence}; no snapshot was written"
                )
            self._refuse_sink_past(bq, p.committed, "the checkpoint's last commit")
            batches[bq.branch.index] = p.committed
            watermarks[bq.branch.index] = p.watermark_ms
        return Cut(dict(fence), batches, watermarks)

    def release(self) -> None:
        """Lift the fences set by :meth:`drain_to_cut`: the job reads new input again."""
        for src in self.plan.sources:
            positions.clear_fence(positions.source_dir(self.folder, src))

    def stop_at_cut(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> Cut:
        """Stop with every branch at the same source positions, nothing processed after the cut:
        drain to a cut, refuse further batches at the sinks, stop the queries, and check that the
        checkpoints and the sinks still stand at the cut."""
        cut = self.drain_to_cut(timeout_s, cancelled)
        self.stop()
        self.check_stopped_at(cut)
        return cut

    @property
    def stopped(self) -> bool:
        return self._stopping

    def check_stopped_at(self, cut: Cut) -> None:
        """Check, the queries stopped, that no branch committed a batch after the cut and no sink
        holds one.

        A batch planned but never committed is harmless, and it happens: a trigger that listed its
        source before the fence was written plans past it, and stopping the query interrupts it.
        Its sink refused it, and a snapshot copies the checkpoint only up to the cut's batch.
        """
        for bq in self.branches:
            at_cut = cut.batches.get(bq.branch.index)
            committed = checkpoint.latest_commit(bq.checkpoint)
            if committed != at_cut:
                raise PitstopError(
                    f"job '{self.job}': INSERT INTO {bq.branch.sink} has committed batch {committed} "
                    f"once stopped, not the cut's batch {at_cut}; no snapshot was written"
                )
            self._refuse_sink_past(bq, at_cut, "the cut's batch")

    def _refuse_sink_past(self, bq: BranchQuery, batch: int | None, what: str) -> None:
        """PitstopError if the branch's sink holds a batch after ``batch`` (None: any batch)."""
        written = bq.sink.last_batch() if hasattr(bq.sink, "last_batch") else None
        if written is not None and (batch is None or written > batch):
            raise PitstopError(
                f"job '{self.job}': sink '{bq.branch.sink}' holds batch {written}, beyond {what} "
                f"{batch}; no snapshot was written"
            )


def late_possible(branch: Branch) -> bool:
    """Whether a stage of the branch can drop a row as late (one with a watermark)."""
    for stage in branch.stages:
        kind = kinds.kind_of(stage)
        if kind.lateness(stage, None, "0") is not None or kind.join_lateness(stage, None, "0") is not None:
            return True
    return False


def output_mode(branch: Branch) -> str:
    """Spark's output mode of a branch. ``update`` where its stage's rows change as input arrives
    (a running aggregate): each batch hands the sink the groups it changed, which the sink
    replaces by key. Spark refuses ``append`` for an aggregation without a watermark, and
    ``complete`` would hand every group to every batch (see :mod:`pitstop.stages.running`); and
    a window branch with early results (:mod:`pitstop.planner.early`): each batch hands the sink
    the windows it changed. Otherwise ``append``: a window's row once, when it closes."""
    return "update" if branch.upsert_keys else "append"


def batch_watermark(checkpoint_dir: Path, batch_id: int) -> int:
    """The event-time watermark (ms) that batch ``batch_id`` runs with: Spark writes the batch's
    offsets, with it, before it runs the batch."""
    offsets = checkpoint.read_offsets(checkpoint_dir, batch_id)
    return 0 if offsets is None else offsets.watermark_ms


def full_text(exc: Any) -> str:
    """Everything a Spark error says, the JVM's stack trace included, for the log."""
    parts = [str(getattr(exc, "desc", None) or exc)]
    trace = getattr(exc, "_stackTrace", None)
    if isinstance(trace, str) and trace:
        parts.append(trace)
    return "\n".join(parts)


def rejected_record(exc: Any) -> bool:
    """Whether a query failed because a source met what it must fail on (a malformed record
    under ``'onError'='fail'``, data loss under ``'onDataLoss'='fail'``): no restart changes it."""
    text = str(getattr(exc, "desc", None) or exc)
    return any(f"{kind.__name__}: " in text for kind in FINAL_SOURCE_ERRORS)


_PYTHON_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$")


def spark_reason(exc: Any) -> str:
    """What went wrong, in one sentence a person reads: a source's own words about a malformed
    record; the exception a Python worker raised (not Spark's "An exception was thrown from the
    Python worker"); otherwise Spark's error class and message, with the SQL it points at."""
    text = str(getattr(exc, "desc", None) or exc).split("=== Streaming Query ===")[0]
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:  # a source's own words ('onError'='fail', 'onDataLoss'='fail')
        for final in FINAL_SOURCE_ERRORS:
            _, marker, words = ln.partition(f"{final.__name__}: ")
            if marker:
                return words.strip()
    first = lines[0].strip() if lines else "unknown error"
    if any("Traceback (most recent call last)" in ln for ln in lines):
        raised = [m for m in (_PYTHON_RAISED.match(ln.strip()) for ln in lines) if m]
        if raised:
            kind, said = raised[-1].group(1), raised[-1].group(2) or ""
            if kind.startswith("pyspark.") and said.startswith("["):
                first = said  # Spark's own error, passed through Python (a sink's foreachBatch)
            else:
                first = f"the Python worker raised {kind.rsplit('.', 1)[-1]}: {said}".rstrip(": ")
    first = re.sub(r"\s*SQLSTATE: \w+$", "", first)
    if first.startswith("[") and "== SQL" in text:  # the expression Spark points at
        after = text.split("== SQL", 1)[1].splitlines()
        if len(after) > 1 and after[1].strip():
            first += f" (in: {after[1].strip()})"
    return first[:500]
