"""Starting a run: one streaming query per branch, its sink prepared and its static DuckDB tables
published, and the positions a run starts from and has planned."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from pitstop.catalog.store import Catalog
from pitstop.connectors import positions, registry, tables
from pitstop.connectors.base import Positions
from pitstop.connectors.upsert import KEEP, finishing_keys, window_rows
from pitstop.engine import checkpoint, late
from pitstop.engine.clocks import StreamClocks, restored_clock
from pitstop.engine.frames import branch_frame
from pitstop.engine.runs.branch import (
    BranchQuery,
    Gate,
    batch_watermark,
    late_possible,
    output_mode,
    two_streams,
)
from pitstop.engine.runs.state import RunState
from pitstop.faults import crash_point
from pitstop.plan.model import Branch, end_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


class RunStarting(RunState):
    """Starting the branches' queries."""

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
            if keys:
                self._keyed.add(branch.index)
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
            keyed=branch.index in self._keyed,
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
        # Its streams' own watermarks, kept across a restart (pitstop.engine.clocks): a branch
        # that reads two watermarked streams (an interval join); or, one stream, the clock of the
        # stages a restore seeded (step 5). A new one for each start.
        two = two_streams(bq.branch)
        initial = None if two else restored_clock(bq.branch.stages, self.seeds)
        clocks = (
            StreamClocks(self._spark._jsparkSession, str(bq.checkpoint), name, initial)
            if two or initial is not None
            else None
        )

        def write_batch(batch: DataFrame, batch_id: int) -> None:
            if restored:
                crash_point("restore.batch")
            gate.enter(batch_id)
            try:
                rows = batch.toArrow()
                if clocks is not None:
                    clocks(batch_id)
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
