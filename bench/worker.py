"""A long-lived benchmark worker: one Spark session, commands on stdin, results on stdout.

``python bench/worker.py pitstop``  Spark session built by pitstop (its defaults for this machine);
                                    runs pitstop jobs and the hand-written job *with the same session*.
``python bench/worker.py default``  Spark session with Spark's defaults, as a user writes it first;
                                    runs the hand-written job only.

Each stdin line is a JSON command ``{"op": ..., ...}``; each answer is one stdout line
``@@BENCH {json}`` (Spark may print other lines). Spark session start is excluded from every
timing: the session is started once, before the first command is answered.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data  # noqa: E402

WATERMARK_DELAY = "1 minute"
SCHEMA = "k BIGINT, v BIGINT, ts TIMESTAMP"


def job_sql(name: str, sink: str, snapshot: str | None = None, fmt: str = "auto") -> str:
    """The benchmark's job. From a snapshot it is an *updated* job: a filter more (a stateless
    change that keeps every event here, so the results stay comparable)."""
    source = f" OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT {snapshot}" if snapshot else ""
    where = "WHERE v >= 0 " if snapshot else ""
    return (
        f"CREATE JOB {name}{source} AS INSERT INTO {sink} "
        "SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top "
        "FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        f"{where}GROUP BY window_start, window_end, k;"
    )


def mapping_sql(folder: Path) -> str:
    return (
        "CREATE MAPPING events (k BIGINT, v BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE) "
        f"TYPE File OPTIONS ('path'='{folder}', 'format'='json');\n"
        "CREATE MAPPING agg TYPE DuckDB;\n"
    )


class Worker:
    def __init__(self, mode: str, scratch: Path) -> None:
        self.mode = mode
        self.scratch = scratch
        self.count = 0
        if mode == "pitstop":
            from pitstop.engine.session import spark_session
            from pitstop.settings import Settings

            self.spark = spark_session(Settings.resolve(home=scratch / "session-home"))
        else:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            self.spark = SparkSession.builder.appName("handwritten").master("local[*]").getOrCreate()
            self.spark.sparkContext.setLogLevel("ERROR")

    def fresh(self, label: str) -> Path:
        self.count += 1
        path = self.scratch / f"{self.count:03d}-{label}"
        path.mkdir(parents=True)
        return path

    # -- throughput --------------------------------------------------------------------------------
    def throughput_handwritten(self, folder: str) -> dict[str, Any]:
        """The job as a user writes it: native JSON source, watermark, window aggregation, and a
        foreachBatch sink that inserts each micro-batch into a DuckDB table with a bookkeeping row."""
        import duckdb
        import pyarrow as pa
        from pyspark.sql import functions as F

        work = self.fresh("handwritten")
        con = duckdb.connect(str(work / "sink.duckdb"))
        con.execute(
            "CREATE TABLE agg (window_start TIMESTAMP, window_end TIMESTAMP, k BIGINT, n BIGINT, "
            "total BIGINT, top BIGINT); CREATE TABLE batches (batch_id BIGINT, rows BIGINT)"
        )

        def write(batch: Any, batch_id: int) -> None:
            table = batch.toArrow()
            cols = [
                c.cast(pa.timestamp(c.type.unit)) if pa.types.is_timestamp(c.type) and c.type.tz else c
                for c in table.columns
            ]
            table = pa.Table.from_arrays(cols, names=table.column_names)
            con.execute("BEGIN")
            if table.num_rows:
                con.register("b", table)
                con.execute("INSERT INTO agg BY NAME SELECT * FROM b")
                con.unregister("b")
            con.execute("INSERT INTO batches VALUES (?, ?)", [batch_id, table.num_rows])
            con.execute("COMMIT")

        t0 = time.perf_counter()
        events = self.spark.readStream.schema(SCHEMA).json(folder)
        agg = (
            events.withWatermark("ts", WATERMARK_DELAY)
            .groupBy(F.window("ts", "1 hour"), "k")
            .agg(F.count("*").alias("n"), F.sum("v").alias("total"), F.max("v").alias("top"))
            .select(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "k",
                "n",
                "total",
                "top",
            )
        )
        query = (
            agg.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(work / "checkpoint"))
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - t0
        row = con.execute("SELECT count(*), sum(n) FROM agg").fetchone()
        batches = con.execute("SELECT count(*) FROM batches").fetchone()
        con.close()
        shutil.rmtree(work, ignore_errors=True)
        assert row is not None and batches is not None
        return {"seconds": seconds, "rows_out": row[0], "events_in_windows": row[1], "batches": batches[0]}

    def throughput_pitstop(self, folder: str) -> dict[str, Any]:
        """``CREATE JOB`` then ``AWAIT JOB`` through the executor, as ``pitstop run`` does."""
        work = self.fresh("pitstop")
        manager, executor = self._pitstop(work / "home")
        try:
            self._run(executor, mapping_sql(Path(folder)))
            t0 = time.perf_counter()
            self._run(executor, job_sql("tp", "agg") + "\nAWAIT JOB tp;")
            seconds = time.perf_counter() - t0
            row = manager.catalog.query("SELECT count(*), sum(n) FROM agg")[1][0]
            batches = manager.catalog.query("SELECT count(*) FROM pitstop.sink_batches")[1][0][0]
            self._run(executor, "DROP JOB tp;")
        finally:
            manager.close()
        shutil.rmtree(work, ignore_errors=True)
        return {"seconds": seconds, "rows_out": row[0], "events_in_windows": row[1], "batches": batches}

    # -- running aggregate (bench/running.py) -------------------------------------------------------
    def running_handwritten(self, folder: str) -> dict[str, Any]:
        """A running COUNT/SUM/MAX per key as a user writes it: native JSON source, update output
        mode, and a foreachBatch sink that upserts each micro-batch's changed groups into a DuckDB
        table keyed by ``k`` (``INSERT OR REPLACE``) with a bookkeeping row, in one transaction."""
        import duckdb
        from pyspark.sql import functions as F

        work = self.fresh("running-handwritten")
        con = duckdb.connect(str(work / "sink.duckdb"))
        con.execute(
            "CREATE TABLE totals (k BIGINT PRIMARY KEY, n BIGINT, total BIGINT, top BIGINT); "
            "CREATE TABLE batches (batch_id BIGINT, rows BIGINT)"
        )

        def write(batch: Any, batch_id: int) -> None:
            table = batch.toArrow()
            con.execute("BEGIN")
            if table.num_rows:
                con.register("b", table)
                con.execute("INSERT OR REPLACE INTO totals BY NAME SELECT * FROM b")
                con.unregister("b")
            con.execute("INSERT INTO batches VALUES (?, ?)", [batch_id, table.num_rows])
            con.execute("COMMIT")

        t0 = time.perf_counter()
        events = self.spark.readStream.schema(SCHEMA).json(folder)
        totals = events.groupBy("k").agg(
            F.count("*").alias("n"), F.sum("v").alias("total"), F.max("v").alias("top")
        )
        query = (
            totals.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(work / "checkpoint"))
            .outputMode("update")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - t0
        row = con.execute("SELECT count(*), sum(n) FROM totals").fetchone()
        assert row is not None
        batch_seconds = self._batch_seconds(query, row[1])
        con.close()
        shutil.rmtree(work, ignore_errors=True)
        return {"seconds": seconds, "batch_seconds": batch_seconds, "rows_out": row[0], "events": row[1]}

    def running_pitstop(self, folder: str) -> dict[str, Any]:
        """The same running aggregate as a pitstop job (``CREATE JOB`` + ``AWAIT JOB``): its upsert
        sink also keeps the before-image of every row it changes."""
        work = self.fresh("running-pitstop")
        manager, executor = self._pitstop(work / "home")
        try:
            self._run(executor, mapping_sql(Path(folder)) + "CREATE MAPPING totals TYPE DuckDB;")
            t0 = time.perf_counter()
            self._run(
                executor,
                "CREATE JOB rt AS INSERT INTO totals SELECT k, COUNT(*) AS n, SUM(v) AS total, "
                "MAX(v) AS top FROM events GROUP BY k; AWAIT JOB rt;",
            )
            seconds = time.perf_counter() - t0
            row = manager.catalog.query("SELECT count(*), sum(n) FROM totals")[1][0]
            batch_seconds = self._batch_seconds(manager.runs["rt"].branches[0].query, row[1])
            self._run(executor, "DROP JOB rt;")
        finally:
            manager.close()
        shutil.rmtree(work, ignore_errors=True)
        return {"seconds": seconds, "batch_seconds": batch_seconds, "rows_out": row[0], "events": row[1]}

    # -- downtime ----------------------------------------------------------------------------------
    def downtime(self, keys: int, fmt: str = "auto") -> dict[str, Any]:
        """A job holding ``keys`` rows of state; time from ``DROP JOB ... WITH SNAPSHOT`` to the first
        micro-batch committed by the job created ``FROM SNAPSHOT`` (1,000 new events wait for it),
        with ``'restoreFormat'`` ``fmt``: ``auto`` (the unchanged stage starts on Spark's state
        files) or ``canonical`` (seeded from the snapshot's rows)."""
        import pitstop.engine.runs as runs_mod
        import pitstop.snapshots.export as export_mod

        work = self.fresh(f"downtime-{keys}")
        folder = work / "events"
        shutil.copytree(data.state_events(keys), folder, ignore=shutil.ignore_patterns(".done"))
        manager, executor = self._pitstop(work / "home")
        phases: dict[str, Any] = {}
        real_export, real_cut = export_mod.export, runs_mod.ActiveRun.stop_at_cut

        def timed_export(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return real_export(*args, **kwargs)
            finally:
                phases["export_s"] = time.perf_counter() - t

        def timed_cut(self_: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return real_cut(self_, *args, **kwargs)
            finally:
                phases["cut_s"] = time.perf_counter() - t

        export_mod.export = timed_export  # type: ignore[assignment]
        runs_mod.ActiveRun.stop_at_cut = timed_cut  # type: ignore[method-assign,assignment]
        try:
            self._run(executor, mapping_sql(folder) + job_sql("dt", "agg") + "\nAWAIT JOB dt;")
            t0 = time.perf_counter()
            self._run(executor, "DROP JOB dt WITH SNAPSHOT s1;")
            t_dropped = time.perf_counter()
            data.drop_in(folder, "after-cut.json", data.after_cut_lines())
            self._run(executor, job_sql("dt", "agg", snapshot="s1", fmt=fmt))
            t_created = time.perf_counter()
            # The new run's first batch: 0, or the one after the cut when it started on the
            # snapshot's native copy of the checkpoint (which holds the old run's commits).
            snap = manager.catalog.get_snapshot("s1")
            assert snap is not None
            restore = manager.runs["dt"].run.restore or {}
            native = bool(restore.get("native"))
            first = next(iter(snap.manifest["stages"].values()))["batch_id"] + 1 if native else 0
            t_first = self._first_commit(manager, "dt", first)
            phases["first_batch_ms"] = self._first_progress(manager, "dt", first)
            phases["native"] = native
            self._run(executor, "DROP JOB dt;")
        finally:
            export_mod.export = real_export  # type: ignore[assignment]
            runs_mod.ActiveRun.stop_at_cut = real_cut  # type: ignore[method-assign]
            manager.close()
        shutil.rmtree(work, ignore_errors=True)
        return {
            "keys": keys,
            "snapshot_rows": snap.rows,
            "snapshot_bytes": snap.size_bytes,
            "native_bytes": sum(
                s.get("native", {}).get("bytes", 0) for s in snap.manifest["stages"].values()
            ),
            "fmt": fmt,
            "downtime_s": t_first - t0,
            "drop_s": t_dropped - t0,
            "create_s": t_created - t_dropped,
            "first_batch_s": t_first - t_created,
            "restore_s": t_first - t_dropped,
            **phases,
        }

    def floor(self) -> dict[str, Any]:
        """The same query on a fresh checkpoint with no state: ``CREATE JOB`` to its first commit,
        over the same 1,000 new events."""
        work = self.fresh("floor")
        folder = work / "events"
        data.drop_in(folder, "after-cut.json", data.after_cut_lines())
        manager, executor = self._pitstop(work / "home")
        try:
            self._run(executor, mapping_sql(folder))
            t0 = time.perf_counter()
            self._run(executor, job_sql("fl", "agg"))
            t_first = self._first_commit(manager, "fl")
            self._run(executor, "DROP JOB fl;")
        finally:
            manager.close()
        shutil.rmtree(work, ignore_errors=True)
        return {"floor_s": t_first - t0}

    # -- helpers -----------------------------------------------------------------------------------
    def _pitstop(self, home: Path) -> tuple[Any, Any]:
        from pitstop.executor import Executor
        from pitstop.manager import Manager
        from pitstop.settings import Settings

        manager = Manager(Settings.resolve(home=home))
        return manager, Executor(manager)

    @staticmethod
    def _run(executor: Any, sql: str) -> None:
        from pitstop.driver import Driver

        for _ in Driver(executor).run_script(sql):
            pass

    @staticmethod
    def _batch_seconds(query: Any, events: int) -> float:
        """Spark's own time in the micro-batches that read input (``triggerExecution``: offsets,
        planning, the batch and its sink, the commit), summed: the job's processing time without
        its start (``CREATE JOB`` or ``start()``, the source's start, the wait for the first
        trigger). Spark reports a batch's progress just after its commit, so this waits until
        the reported batches hold all ``events``."""
        deadline = time.monotonic() + 10
        while True:
            batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
            if sum(p["numInputRows"] for p in batches) == events:
                return sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark reported {batches} for {events} events")
            time.sleep(0.05)

    @staticmethod
    def _first_progress(manager: Any, job: str, batch: int = 0) -> dict[str, Any]:
        """Spark's own timing of the job's first micro-batch (``durationMs``), for the report."""
        query = manager.runs[job].branches[0].query
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for p in query.recentProgress:
                if p["batchId"] == batch:
                    out = dict(p["durationMs"])
                    for op in p["stateOperators"]:
                        out.update(
                            {k: v for k, v in op["customMetrics"].items() if "Latency" in k or "Time" in k}
                        )
                        out["allUpdatesTimeMs"] = op["allUpdatesTimeMs"]
                        out["commitTimeMs"] = op["commitTimeMs"]
                    return out
            time.sleep(0.02)
        return {}

    @staticmethod
    def _first_commit(manager: Any, job: str, batch: int = 0, timeout_s: float = 600.0) -> float:
        commit = manager.runs[job].branches[0].checkpoint / "commits" / str(batch)
        deadline = time.monotonic() + timeout_s
        while not commit.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job}: no first commit within {timeout_s} s")
            time.sleep(0.005)
        return time.perf_counter()


def main() -> None:
    mode = sys.argv[1]
    scratch = Path(tempfile.mkdtemp(prefix=f"pitstop-bench-{mode}-"))
    out = sys.stdout
    try:
        worker = Worker(mode, scratch)
        out.write("@@BENCH " + json.dumps({"ready": True}) + "\n")
        out.flush()
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd.pop("op")
            if op == "quit":
                break
            try:
                result = getattr(worker, op)(**cmd)
            except Exception as exc:  # reported to the driver, which stops the benchmark
                result = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            out.write("@@BENCH " + json.dumps(result) + "\n")
            out.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        from pitstop.engine.session import stop_session

        stop_session()
        os._exit(0)


if __name__ == "__main__":
    main()
