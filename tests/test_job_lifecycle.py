"""Snapshots of running jobs, ALTER JOB, DESCRIBE and EXPLAIN on real Spark and DuckDB."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from conftest import batch_windows, closed, make_orders, orders_mapping, revenue_select, run, sink_windows
from pitstop.errors import CatalogError
from pitstop.manager import Manager

pytestmark = pytest.mark.spark  # every test here runs jobs on real Spark

DAY = timedelta(hours=24)


def daily(sink: str) -> str:
    select = revenue_select("'24' HOUR").replace("SELECT", "SELECT /*+ STAGE(daily) */", 1)
    return f"INSERT INTO {sink} {select}"


def test_snapshot_of_a_running_job_restores_while_the_job_goes_on(manager: Manager, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 1500, files=2)
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING daily_revenue TYPE DuckDB;
        CREATE MAPPING daily_copy TYPE DuckDB;
        CREATE JOB revenue AS {daily("daily_revenue")};
        AWAIT JOB revenue;
    """,
    )
    made = run(manager, "CREATE SNAPSHOT mid FOR JOB revenue;")[0]
    assert "the job goes on" in made.message
    assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("revenue", "RUNNING")]
    with pytest.raises(CatalogError, match="use CREATE OR REPLACE SNAPSHOT"):
        run(manager, "CREATE SNAPSHOT mid FOR JOB revenue;")
    described = dict(run(manager, "DESCRIBE SNAPSHOT mid;")[0].rows)
    assert described["job"] == "revenue"
    assert described["source orders"] == "2 files read"
    assert "TUMBLE(ts, INTERVAL '1' DAY)" in described["stage daily"]
    assert "2 partitions" in described["stage daily (native)"]

    make_orders.write_orders(data, 1500, 3000, files=2)
    run(manager, "AWAIT JOB revenue;")  # the original job went on after the snapshot
    # A second job starts from the snapshot of the running one and emits the days still open then.
    # It starts on a copy of the running job's checkpoint at the cut, beside the original.
    started = run(manager, f"CREATE JOB replay FROM SNAPSHOT mid AS {daily('daily_copy')}; AWAIT JOB replay;")
    assert "from Spark's state files (native)" in started[0].message
    original = sink_windows(manager, "daily_revenue")
    replayed = sink_windows(manager, "daily_copy")
    mid_watermark = make_orders.EPOCH + timedelta(seconds=1499 * 90) - timedelta(minutes=5)
    assert replayed == {k: v for k, v in original.items() if k[0] + DAY > mid_watermark}
    everything = [make_orders.order(i) for i in range(3000)]
    last = make_orders.EPOCH + timedelta(seconds=2999 * 90) - timedelta(minutes=5)
    assert original == closed(batch_windows(everything, DAY), DAY, last)

    replaced = run(manager, "CREATE OR REPLACE SNAPSHOT mid FOR JOB revenue;")[0]
    assert "snapshot 'mid'" in replaced.message
    assert dict(run(manager, "DESCRIBE SNAPSHOT mid;")[0].rows)["source orders"] == "4 files read"
    assert len(list((tmp_path / "home" / "snapshots").iterdir())) == 1


def test_suspend_resume_and_restart_keep_the_job_exact(manager: Manager, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 1000, files=1)
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING daily_revenue TYPE DuckDB;
        CREATE JOB revenue OPTIONS ('processingGuarantee'='exactlyOnce') AS {daily("daily_revenue")};
        AWAIT JOB revenue;
        ALTER JOB revenue SUSPEND;
    """,
    )
    [job] = run(manager, "SHOW JOBS;")[0].rows
    assert job[1] == "SUSPENDED"
    with pytest.raises(CatalogError, match="suspended; ALTER JOB revenue RESUME first"):
        run(manager, "AWAIT JOB revenue;")
    run(manager, "ALTER JOB revenue OPTIONS ('metricsEnabled'='true');")
    make_orders.write_orders(data, 1000, 2000, files=1)
    # Hazelcast's form: change options and resume in one statement.
    assert "resumed" in run(manager, "ALTER JOB revenue OPTIONS ('strictRestore'='true') RESUME;")[0].message
    run(manager, "AWAIT JOB revenue;")
    make_orders.write_orders(data, 2000, 3000, files=1)
    assert "restarted" in run(manager, "ALTER JOB revenue RESTART;")[0].message
    run(manager, "AWAIT JOB revenue;")

    everything = [make_orders.order(i) for i in range(3000)]
    last = make_orders.EPOCH + timedelta(seconds=2999 * 90) - timedelta(minutes=5)
    assert sink_windows(manager, "daily_revenue") == closed(batch_windows(everything, DAY), DAY, last)
    described = dict(run(manager, "DESCRIBE JOB revenue;")[0].rows)
    assert described["status"] == "RUNNING"
    assert (
        "strictRestore=true" in described["options"]
        and "processingGuarantee=exactlyOnce" in described["options"]
    )
    assert described["branch 1"].startswith("orders -> stage 'daily' TUMBLE(ts, INTERVAL '1' DAY) by region")
    # Where it runs: in local mode, inside this process, without Spark's web UI.
    assert described["runs on"] == "local[2]"
    assert described["executors"] == "none: tasks run in the pitstop process"
    assert described["Spark UI"].startswith("off")
    shown = run(manager, "SHOW JOBS;")[0]
    [job] = [dict(zip(shown.columns, row, strict=True)) for row in shown.rows]
    assert (job["runs_on"], job["spark_ui"]) == ("local[2] (in the pitstop process, 2 cores)", None)

    # EXPLAIN an update against a real snapshot: per stage, what would happen; nothing starts.
    run(manager, "DROP JOB revenue WITH SNAPSHOT v1;")
    explained = run(
        manager,
        f"""EXPLAIN CREATE JOB revenue FROM SNAPSHOT v1 AS BEGIN
            {daily("daily_revenue")};
            INSERT INTO daily_revenue2 {revenue_select("'7' HOUR")};
        END;""".replace("daily_revenue2", "daily_revenue"),
    )[0]
    assert "nothing was started" in explained.message
    outcomes = {row[3]: row[7] for row in explained.rows if row[7] != "source"}
    assert outcomes == {"daily": "restored", "daily_revenue.aggregate": "starts empty"}
    sources = [row[1:] for row in explained.rows if row[7] == "source"]
    assert [(s[0], s[-1].split(";")[0]) for s in sources] == [
        ("orders", "goes on after the 3 files read up to the snapshot")
    ]
    assert run(manager, "SHOW JOBS;")[0].rows == ()


def test_a_failed_snapshot_of_a_suspended_job_leaves_it_suspended(
    manager: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DROP JOB ... WITH SNAPSHOT wakes a suspended job's queries to reach its cut. When the
    export failed (a full disk), the job was resumed as if it had been running: its queries read
    the input that arrived while it was suspended, while the catalog still said SUSPENDED. Now it
    stays suspended, reads nothing, and ALTER JOB ... RESUME goes on exactly from where it was."""
    from pitstop import faults
    from pitstop.errors import PitstopError

    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 1000, files=1)
    run(
        manager,
        orders_mapping(data)
        + f"""CREATE MAPPING daily_revenue TYPE DuckDB; CREATE JOB revenue AS {daily("daily_revenue")};
        AWAIT JOB revenue; ALTER JOB revenue SUSPEND;""",
    )
    make_orders.write_orders(data, 1000, 2000, files=1)  # arrives while it is suspended
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv(faults.FAULT_ENV, "export.stage_written:ENOSPC")
    with pytest.raises(
        PitstopError, match=r"No space left on device.*Job 'revenue' was not dropped; it stays suspended"
    ):
        run(manager, "DROP JOB revenue WITH SNAPSHOT s;")
    monkeypatch.delenv(faults.FAULT_ENV)
    assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("revenue", "SUSPENDED")]
    assert "revenue" not in manager.runs  # no query of it runs
    assert not [q for q in manager.spark().streams.active if (q.name or "").startswith("revenue#")]
    run(manager, "ALTER JOB revenue RESUME; AWAIT JOB revenue;")
    everything = [make_orders.order(i) for i in range(2000)]
    last = make_orders.EPOCH + timedelta(seconds=1999 * 90) - timedelta(minutes=5)
    assert sink_windows(manager, "daily_revenue") == closed(batch_windows(everything, DAY), DAY, last)
