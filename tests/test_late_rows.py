"""Late rows are data, not silence (issue 26): every row a stateful stage drops because it is
behind the watermark is counted per stage and source (SHOW JOBS, DESCRIBE JOB, pitstop.late_rows),
kept with 'lateRows'='keep' (pitstop.late_records), and the count survives a pit stop and a
restart. Spark's own numRowsDroppedByWatermark would not do: it counts late windows and keys
after partial aggregation, not rows."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from command_helpers import pitstop
from conftest import batch_windows, closed, orders_mapping, revenue_select, run, settings, sink_windows
from pitstop import describe
from pitstop.catalog.rows import Job, LateCount, LateSummary, Run
from pitstop.catalog.schema import MIGRATIONS, SCHEMA_VERSION
from pitstop.catalog.store import Catalog
from pitstop.engine import late
from pitstop.errors import PlanError
from pitstop.manager import Manager
from pitstop.plan.model import AggregateStage, Branch, DedupSpec, JobPlan, Step, WindowSpec
from pitstop.stages import hop, session, tumble
from pitstop.stages.base import StageSeed

HOUR = timedelta(hours=1)
T0 = datetime(2024, 1, 1)
STAGE = "revenue.aggregate"


def order(i: int, minutes: float, region: str = "eu") -> dict[str, object]:
    return {
        "order_id": i,
        "region": region,
        "amount": 1.5,
        "ts": (T0 + timedelta(minutes=minutes)).isoformat(),
    }


def write(folder: Path, name: str, orders: list[dict[str, object]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(o) + "\n" for o in orders))
    os.replace(tmp, folder / name)


def job_row(manager: Manager, job: str) -> dict[str, object]:
    shown = run(manager, "SHOW JOBS;")[0]
    [row] = [dict(zip(shown.columns, r, strict=True)) for r in shown.rows if r[0] == job]
    return row


def described(manager: Manager, job: str) -> dict[str, str]:
    return dict(run(manager, f"DESCRIBE JOB {job};")[0].rows)


def late_records(manager: Manager) -> list[tuple[object, ...]]:
    _, rows = manager.catalog.query(
        "SELECT CAST(record->>'order_id' AS BIGINT), stage, source, window_start, window_end, watermark "
        "FROM pitstop.late_records WHERE job = 'j' ORDER BY 1"
    )
    return rows


def late_view(manager: Manager) -> list[tuple[object, ...]]:
    return list(run(manager, "SELECT job, stage, source, rows FROM pitstop.late_rows ORDER BY ALL;")[0].rows)


HOURLY = revenue_select("'1' HOUR")
JOB = f"CREATE JOB j OPTIONS ('lateRows'='keep') AS INSERT INTO revenue {HOURLY};"


@pytest.mark.spark
def test_late_rows_are_counted_kept_and_outlive_a_pit_stop_and_a_restart(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "orders"
    # In order: 00:00 to 03:00, the watermark (5 minutes behind) reaches 02:55.
    in_order = [order(i, 10 * i, ("eu", "us")[i % 2]) for i in range(19)]
    write(data, "a.json", in_order)
    manager = Manager(settings(home))
    try:
        run(manager, orders_mapping(data) + "CREATE MAPPING revenue TYPE DuckDB;" + JOB + "AWAIT JOB j;")
        # Late: five rows whose hour had closed at 02:55. Not late: 02:50 is below the watermark,
        # but its window [02:00, 03:00) is open (Spark drops by window, not by time). On time:
        # 03:20, which moves the watermark to 03:15 and closes [02:00, 03:00).
        dropped = [order(100 + i, 30) for i in range(3)] + [order(103 + i, 75, "us") for i in range(2)]
        kept = [order(200, 170), order(201, 200)]
        write(data, "b.json", dropped + kept)
        run(manager, "AWAIT JOB j;")

        assert sink_windows(manager, "revenue") == closed(
            batch_windows(in_order + kept, HOUR), HOUR, T0 + timedelta(minutes=195)
        )
        assert job_row(manager, "j")["late"] == 5
        assert described(manager, "j")[f"late rows of stage '{STAGE}'"].startswith(
            "5 row(s) dropped behind the watermark (kept in pitstop.late_records): 5 from orders, first seen "
        )
        assert late_view(manager) == [("j", STAGE, "orders", 5)]
        watermark = T0 + timedelta(minutes=175)
        first, second = (T0, T0 + HOUR), (T0 + HOUR, T0 + 2 * HOUR)
        assert late_records(manager) == [
            *[(100 + i, STAGE, "orders", *first, watermark) for i in range(3)],
            *[(103 + i, STAGE, "orders", *second, watermark) for i in range(2)],
        ]

        # A pit stop: the count is the job's, across its runs.
        run(
            manager,
            "DROP JOB j WITH SNAPSHOT s;"
            + JOB.replace("AS INSERT", "FROM SNAPSHOT s AS INSERT")
            + "AWAIT JOB j;",
        )
        assert job_row(manager, "j")["late"] == 5
        assert late_view(manager) == [("j", STAGE, "orders", 5)]
        write(data, "c.json", [order(300, 100), order(301, 110)])  # [01:00, 02:00) closed at 03:15
        run(manager, "AWAIT JOB j;")
        assert job_row(manager, "j")["late"] == 7
        assert [r[0] for r in late_records(manager)] == [100, 101, 102, 103, 104, 300, 301]
    finally:
        manager.close()

    # A restart: the next process finds the counts in the catalog (no Spark needed to list them),
    # and goes on counting.
    again = Manager(settings(home))
    try:
        assert job_row(again, "j")["late"] == 7
        assert not again.spark_started
        write(data, "d.json", [order(400, 150)])  # [02:00, 03:00) closed at 03:15
        run(again, "AWAIT JOB j;")
        assert job_row(again, "j")["late"] == 8
        assert described(again, "j")[f"late rows of stage '{STAGE}'"].startswith("8 row(s) dropped")
        assert late_view(again) == [("j", STAGE, "orders", 8)]
        assert [r[0] for r in late_records(again)] == [100, 101, 102, 103, 104, 300, 301, 400]
    finally:
        again.close()


@pytest.mark.spark
@pytest.mark.parametrize("then", ["resumed", "dropped"])
def test_late_rows_a_process_never_recorded_are_recorded_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """A process killed right after a batch's commit has not recorded its late rows (Spark reports
    a batch only once it is committed, and the report goes with the process). The batch's counts
    are on disk before its rows are written, so the next process records them, whether it runs
    the job on or drops it (no Spark needed then). Here the first process records none at all, as
    if it were killed after every commit."""
    home, data = tmp_path / "home", tmp_path / "orders"
    write(data, "a.json", [order(i, 10 * i, ("eu", "us")[i % 2]) for i in range(19)])  # to 02:55
    monkeypatch.setattr(Manager, "collect_late", lambda *args, **kwargs: None)
    first = Manager(settings(home))
    try:
        run(first, orders_mapping(data) + "CREATE MAPPING revenue TYPE DuckDB;" + JOB + "AWAIT JOB j;")
        write(data, "b.json", [order(100 + i, 30) for i in range(3)] + [order(200, 170)])
        run(first, "AWAIT JOB j;")
        assert job_row(first, "j")["late"] == 0
    finally:
        first.close()
    monkeypatch.undo()
    again = Manager(settings(home))
    try:
        if then == "resumed":
            run(again, "AWAIT JOB j;")
            assert job_row(again, "j")["late"] == 3
            assert late_view(again) == [("j", STAGE, "orders", 3)]
        else:
            run(again, "DROP JOB j;")
            assert not again.spark_started
            _, rows = again.catalog.query("SELECT stage, sum(rows) FROM pitstop.late_counts GROUP BY ALL")
            assert rows == [(STAGE, 3)]
        assert [r[0] for r in late_records(again)] == [100, 101, 102]
    finally:
        again.close()


# -- without Spark ---------------------------------------------------------------------------------
def test_late_rows_takes_count_or_keep_and_alter_job_leaves_it_to_a_pit_stop(
    manager: Manager, tmp_path: Path
) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + "CREATE MAPPING revenue TYPE DuckDB;")
    with pytest.raises(PlanError, match="'lateRows'='drop': write 'count'"):
        run(manager, JOB.replace("'keep'", "'drop'"))
    with pytest.raises(PlanError, match="'lateRows' changes how job 'j' runs"):
        run(manager, "ALTER JOB j OPTIONS ('lateRows'='keep');")
    [explained] = run(manager, "EXPLAIN " + JOB)
    assert explained.rows and not manager.spark_started


def test_an_older_home_gains_the_late_tables_and_view(tmp_path: Path) -> None:
    path = tmp_path / "home" / "catalog.duckdb"
    path.parent.mkdir()
    db = duckdb.connect(str(path))  # a home as version 5 left it
    for version in range(1, 6):
        for statement in MIGRATIONS[version]:
            db.execute(statement)
    db.execute("INSERT INTO pitstop.meta VALUES ('schema_version', '5')")
    db.close()
    catalog = Catalog(path)
    try:
        assert catalog.schema_version() == SCHEMA_VERSION
        assert catalog.late_counts() == {}
        assert catalog.query("SELECT * FROM pitstop.late_rows")[1] == []
    finally:
        catalog.close()


def test_a_restored_job_counts_the_late_rows_of_the_old_run_up_to_the_snapshot_cut(tmp_path: Path) -> None:
    """The old run's batches after the cut are not the restored job's: it reads that input again
    (and counts its late rows itself). The old job, still there, counts all of its own."""
    catalog = Catalog(tmp_path / "home" / "catalog.duckdb")
    try:
        now = datetime(2024, 1, 1)
        plan = {"job": "j", "branches": []}
        restore = {"snapshot": "s", "from_run": "j-1", "from_cut": {"0": 3, "1": None}}
        catalog.create_job(
            Job("j", "", "RUNNING", "", "j-1", None, now, now), Run("j-1", "j", "/x", plan, None, now)
        )
        catalog.create_job(
            Job("k", "", "RUNNING", "", "k-1", "s", now, now), Run("k-1", "k", "/y", plan, restore, now)
        )
        old = [LateCount(0, b, "st", "orders", 1) for b in range(1, 7)] + [
            LateCount(1, 2, "st2", "orders", 5)
        ]
        catalog.add_late("j", "j-1", old, [])
        catalog.add_late("k", "k-1", [LateCount(0, 0, "st", "orders", 10)], [])
        catalog.add_late("k", "k-1", [LateCount(0, 0, "st", "orders", 10)], [])  # counted again: the same
        assert catalog.late_counts() == {"j": 11, "k": 13}
        assert [(s.stage, s.source, s.rows) for s in catalog.late_summary("K")] == [("st", "orders", 13)]
        _, rows = catalog.query("SELECT job, stage, rows FROM pitstop.late_rows ORDER BY ALL")
        assert rows == [("j", "st", 6), ("j", "st2", 5), ("k", "st", 13)]
    finally:
        catalog.close()


def _stage(name: str, window: WindowSpec | None, kind: str | None = None) -> AggregateStage:
    assert window is not None or kind == "dedup"
    return AggregateStage(name, window or DedupSpec("ts"), (), (), (), 0)


def test_counts_come_from_batch_reports_and_spark_s_figure_for_a_later_stage(tmp_path: Path) -> None:
    first = _stage("firsts", None, "dedup")
    hourly = _stage("hourly", WindowSpec("tumble", "ts", 3_600_000_000))
    branch = Branch(0, "out", "orders", None, hourly, (), "", before=(Step(None, first, ()),))

    def report(batch: int, ours: int, spark: list[int]) -> late.BatchReport:
        # Top down, as Spark lists its operators: the window (operator 0), then the deduplication.
        return late.BatchReport(batch, {late.metric_name("firsts", "orders"): ours}, tuple(spark))

    reports = [report(3, 2, [0, 2]), report(4, 0, [4, 0]), report(5, 0, [0, 0]), report(6, 1, [0, 1])]
    assert late.counts(reports, branch, "j") == [
        LateCount(0, 3, "firsts", "orders", 2),
        LateCount(0, 4, "hourly", "orders", 4),  # Spark's own: a stage later in the chain
        LateCount(0, 6, "firsts", "orders", 1),
    ]
    # On disk: a batch with nothing late writes no file; only committed batches are read.
    for r in reports:
        late.write_report(str(tmp_path), 0, r)
    assert sorted(p.name for p in late.counts_dir(tmp_path, 0).iterdir()) == [
        "000000000003.json",
        "000000000004.json",
        "000000000006.json",
    ]
    read, files = late.collect_reports(tmp_path, 0, 4)
    assert read == reports[:2] and [f.name for f in files] == ["000000000003.json", "000000000004.json"]
    assert late.collect_reports(tmp_path, 0, None) == ([], [])


def test_step_4_sums_each_metric_s_late_rows_per_partition(tmp_path: Path) -> None:
    """A source with partitions (Kafka) counts its late rows per partition and windows missed in
    a histogram; step 4 sums it per partition. A HOP row late for two windows counts 2, as it does
    in the metric's total; one value may come in several bins (Spark's merge keeps them apart);
    what the histogram does not account for has no partition, nor has a full histogram's."""
    name = late.metric_name("hourly", "orders")
    pair = late.PAIR
    bins = [
        {"x": 1 * pair + 1, "y": 2.0},  # partition 1: two rows late for one window
        {"x": 0 * pair + 2, "y": 1.0},  # partition 0: one row late for two
        {"x": 1 * pair + 1, "y": 1.0},  # partition 1 again, from another task
        {"x": -1 * pair + 1, "y": 1.0},  # a row whose partition was not told
        {"x": 1 * pair + 2, "y": 1.0},
    ]
    assert late.partition_rows(bins) == {1: 5, 0: 2, None: 1}
    assert late.partition_rows([]) == {}
    assert late.partition_rows([{"x": pair + 1, "y": 1.0}] * late.BINS) is None

    hourly = _stage("hourly", WindowSpec("hop", "ts", 3_600_000_000, 1_800_000_000))
    branch = Branch(0, "out", "orders", None, hourly, (), "")
    other = late.metric_name("hourly", "clicks")  # a source without partitions: one count
    reports = [
        late.BatchReport(2, {name: 8, other: 3}, (), {name: {1: 5, 0: 2, None: 1}}),
        late.BatchReport(3, {name: 4}, (), {name: {2: 3}}),  # 1 not accounted for
        late.BatchReport(4, {name: 0}, ()),
    ]
    assert late.counts(reports, branch, "j") == [
        LateCount(0, 2, "hourly", "clicks", 3),
        LateCount(0, 2, "hourly", "orders", 1, None),
        LateCount(0, 2, "hourly", "orders", 2, 0),
        LateCount(0, 2, "hourly", "orders", 5, 1),
        LateCount(0, 3, "hourly", "orders", 1, None),
        LateCount(0, 3, "hourly", "orders", 3, 2),
    ]
    # On disk and back, partitions and all; a file an earlier pitstop wrote has none.
    late.write_report(str(tmp_path), 0, reports[0])
    read, _ = late.collect_reports(tmp_path, 0, 2)
    assert read == reports[:1]
    assert late.BatchReport.from_json('{"batch": 5, "observed": {"x": 1}, "dropped": []}').parts == {}


def test_late_rows_are_listed_per_partition_and_totals_stay_per_stage_and_source(tmp_path: Path) -> None:
    """The catalog keeps each count's partition; a batch counted again replaces its partitions'
    counts; SHOW JOBS's total and the per stage and source sums are what they were."""
    catalog = Catalog(tmp_path / "home" / "catalog.duckdb")
    try:
        now = datetime(2024, 1, 1)
        catalog.create_job(
            Job("j", "", "SUSPENDED", "", "j-1", None, now, now),
            Run("j-1", "j", "/x", {"job": "j", "branches": []}, None, now),
        )
        batch = [LateCount(0, 4, "st", "orders", 5_042, 1), LateCount(0, 4, "st", "orders", 7, 0)]
        catalog.add_late("j", "j-1", batch, [])
        catalog.add_late("j", "j-1", batch, [])  # counted again: the same
        catalog.add_late(
            "j", "j-1", [LateCount(0, 5, "st", "orders", 3, 1), LateCount(0, 5, "st", "files", 2)], []
        )
        assert catalog.late_counts() == {"j": 5_054}
        assert catalog.late_by_stage() == {("j", "st"): 5_054}
        assert [(s.source, s.rows, s.partitions) for s in catalog.late_summary("j")] == [
            ("files", 2, ()),
            ("orders", 5_052, ((0, 7), (1, 5_045))),
        ]
        _, rows = catalog.query(
            "SELECT job, stage, source, partition, rows FROM pitstop.late_rows ORDER BY ALL"
        )
        assert rows == [
            ("j", "st", "files", None, 2),
            ("j", "st", "orders", 0, 7),
            ("j", "st", "orders", 1, 5_045),
        ]
    finally:
        catalog.close()


def test_a_version_7_home_keeps_its_late_counts_without_a_partition(tmp_path: Path) -> None:
    path = tmp_path / "home" / "catalog.duckdb"
    path.parent.mkdir()
    db = duckdb.connect(str(path))  # a home as version 7 left it, with a late count
    for version in range(1, 8):
        for statement in MIGRATIONS[version]:
            db.execute(statement)
    db.execute("INSERT INTO pitstop.meta VALUES ('schema_version', '7')")
    db.execute("INSERT INTO pitstop.late_counts VALUES ('j', 'j-1', 0, 3, 'st', 'orders', 12, '2024-01-01')")
    db.close()
    catalog = Catalog(path)
    try:
        now = datetime(2024, 1, 1)
        catalog.create_job(
            Job("j", "", "SUSPENDED", "", "j-1", None, now, now),
            Run("j-1", "j", "/x", {"job": "j", "branches": []}, None, now),
        )
        assert catalog.schema_version() == SCHEMA_VERSION == 8
        assert catalog.late_counts() == {"j": 12}
        _, rows = catalog.query("SELECT source, partition, rows FROM pitstop.late_rows")
        assert rows == [("orders", None, 12)]
        catalog.add_late("j", "j-1", [LateCount(0, 4, "st", "orders", 1, 2)], [])
        assert [(s.rows, s.partitions) for s in catalog.late_summary("j")] == [(13, ((2, 1),))]
        assert late_text(catalog.late_summary("j")).startswith(
            "13 row(s) dropped behind the watermark: 13 from orders "
            "(partition 2: 1, partition not recorded: 12), first seen "
        )
    finally:
        catalog.close()


def late_text(summary: list[LateSummary]) -> str:
    [(_, text)] = describe.late_rows(JobPlan("j", ()), summary)
    return text


def test_describe_job_and_pitstop_late_rows_show_the_partitions_through_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = Catalog(home / "catalog.duckdb")
    try:
        now = datetime(2024, 1, 1)
        catalog.create_job(  # suspended: the command starts nothing
            Job("j", "", "SUSPENDED", "", "j-1", None, now, now),
            Run("j-1", "j", str(tmp_path / "run"), {"job": "j", "branches": []}, None, now),
        )
        catalog.add_late(
            "j",
            "j-1",
            [LateCount(0, 4, "st", "orders", 5_042, 1), LateCount(0, 4, "st", "orders", 7, 0)]
            + [LateCount(0, 4, "st", "files", 2)],
            [],
        )
    finally:
        catalog.close()
    done = pitstop(
        "run",
        "--format",
        "json",
        "-c",
        "DESCRIBE JOB j; SELECT job, stage, source, partition, rows FROM pitstop.late_rows ORDER BY ALL;",
        home=home,
    )
    assert done.returncode == 0, done.stderr
    assert "5,049 from orders (partition 0: 7, partition 1: 5,042), first seen" in done.stdout
    assert "2 from files, first seen" in done.stdout
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    listed = [line for line in lines if "partition" in line]
    assert listed == [
        {"job": "j", "stage": "st", "source": "files", "partition": None, "rows": 2},
        {"job": "j", "stage": "st", "source": "orders", "partition": 0, "rows": 7},
        {"job": "j", "stage": "st", "source": "orders", "partition": 1, "rows": 5_042},
    ]


# -- each kind's rule against Spark's own window assignment ------------------------------------------
@pytest.mark.spark
def test_each_window_kind_drops_a_row_from_exactly_the_windows_spark_closes(manager: Manager) -> None:
    """Batch Spark, no stream: per row and watermark, the windows Spark assigns the row to and the
    watermark has closed (end <= watermark) are the ones the kind's Lateness names, and counts."""
    from pyspark.sql import functions as F

    spark = manager.spark()
    minute = 60_000_000
    times = [T0 + timedelta(seconds=37 * i) for i in range(200)]
    marks = [int((T0 + timedelta(minutes=m)).timestamp() * 1000) for m in (0, 17, 60, 95)]
    rows = spark.createDataFrame(
        [(t, w) for t in times for w in marks], f"ts TIMESTAMP, {late.WATERMARK} BIGINT"
    )
    cases = {
        "tumble": (tumble.KIND, WindowSpec("tumble", "ts", 20 * minute), F.window("ts", "20 minutes")),
        "hop": (
            hop.KIND,
            WindowSpec("hop", "ts", 30 * minute, 10 * minute),
            F.window("ts", "30 minutes", "10 minutes"),
        ),
        "session": (
            session.KIND,
            WindowSpec("session", "ts", 7 * minute, gap_micros=7 * minute),
            F.session_window("ts", "7 minutes"),
        ),
    }
    for name, (kind, spec, window) in cases.items():
        lateness = kind.lateness(_stage("s", spec), None, late.WATERMARK)
        ours = rows.select(
            "ts",
            late.WATERMARK,
            F.expr(lateness.count_sql).alias("n"),
            F.expr(f"CASE WHEN {lateness.count_sql} > 0 THEN {lateness.windows_sql} END").alias("w"),
        ).collect()
        # A session: each row alone (one per row and watermark here), as Spark's late check sees
        # it before merging, [ts, ts + gap).
        assigned = rows.select("ts", late.WATERMARK, window.alias("win")).collect()
        closed_by: dict[tuple[object, int], list[tuple[object, object]]] = {}
        for r in assigned:
            closed_by.setdefault((r.ts, r[late.WATERMARK]), [])
            if r.win.end.timestamp() * 1000 <= r[late.WATERMARK]:
                closed_by[(r.ts, r[late.WATERMARK])].append((r.win.start, r.win.end))
        assert sum(len(v) for v in closed_by.values()) > 0, name
        for r in ours:
            missed = closed_by[(r.ts, r[late.WATERMARK])]
            assert r.n == len(missed), (name, r)
            assert sorted((w.start, w.end) for w in r.w or []) == sorted(missed), (name, r)

    # Restored: what the old job (20-minute windows, watermark at 00:40) would have dropped too.
    seed = StageSeed("", 20 * minute, int((T0 + timedelta(minutes=40)).timestamp() * 1000))
    lateness = tumble.KIND.lateness(
        _stage("s", WindowSpec("tumble", "ts", 60 * minute)), seed, late.WATERMARK
    )
    at_start = rows.where(f"{late.WATERMARK} = {marks[0]}")  # Spark itself closes nothing then
    got = at_start.select("ts", F.expr(lateness.count_sql).alias("n")).collect()
    assert {r.ts for r in got if r.n} == {t for t in times if t < T0 + timedelta(minutes=40)}
