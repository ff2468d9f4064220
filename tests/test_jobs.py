"""Jobs on real Spark: file sinks, failures, and what AWAIT JOB reports."""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import pytest

from conftest import make_orders, orders_mapping, run, until
from pitstop.errors import JobFailedError
from pitstop.manager import Manager


@pytest.mark.spark
def test_file_sink_writes_each_row_once_in_whole_files(manager: Manager, tmp_path: Path) -> None:
    data, out = tmp_path / "orders", tmp_path / "big"
    make_orders.write_orders(data, 0, 300, files=3)
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING big_orders TYPE File OPTIONS ('path'='{out}', 'format'='json');
        CREATE JOB copy AS INSERT INTO big_orders
            SELECT order_id, upper(region) AS region, amount * 2 AS doubled FROM orders WHERE amount > 50;
        AWAIT JOB copy;
    """,
    )
    make_orders.write_orders(data, 300, 400, files=1)
    run(manager, "AWAIT JOB copy;")
    files = sorted(p.name for p in out.iterdir())
    assert files and all(n.startswith("part-copy-") and n.endswith(".json") for n in files)
    rows = [json.loads(line) for n in files for line in (out / n).read_text().splitlines()]
    expected = {
        (o["order_id"], str(o["region"]).upper(), round(float(o["amount"]) * 2, 2))
        for o in (make_orders.order(i) for i in range(400))
        if float(o["amount"]) > 50
    }
    assert len(rows) == len(expected)
    assert {(r["order_id"], r["region"], r["doubled"]) for r in rows} == expected


@pytest.mark.spark
def test_await_reports_a_failed_job_and_show_jobs_says_failed(
    manager: Manager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1)
    (data / "broken.json").write_text('{"order_id": "not a number", "region": "eu"}\n')
    run(
        manager,
        orders_mapping(data).replace("'format'='json'", "'format'='json', 'onError'='fail'")
        + """
        CREATE MAPPING copies TYPE DuckDB;
        CREATE JOB copy AS INSERT INTO copies SELECT order_id, region FROM orders;
    """,
    )
    with pytest.raises(JobFailedError, match="job 'copy' failed"):
        run(manager, "AWAIT JOB copy TIMEOUT INTERVAL '120' SECOND;")
    # A malformed record under 'onError'='fail' fails it at once: a restart would meet it again.
    restarts = [
        r.getMessage() for r in caplog.records if "restarting it from its checkpoint" in r.getMessage()
    ]
    assert restarts == []
    shown = run(manager, "SHOW JOBS;")[0]
    [job] = [dict(zip(shown.columns, r, strict=True)) for r in shown.rows]
    assert job["name"] == "copy" and job["status"] == "FAILED"
    assert "failed" in job["detail"] and "line 1: column 'order_id' is BIGINT" in job["detail"]
    # A failed job can be dropped, and its name used again.
    run(manager, "DROP JOB copy;")
    assert run(manager, "SHOW JOBS;")[0].rows == ()


def waiting_in(thread: threading.Thread, function: str) -> bool:
    """Whether ``thread`` is inside pitstop's ``function`` now (its stack, as Python has it)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == function and "pitstop" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


@pytest.mark.spark
def test_await_says_a_failure_the_supervisor_recorded_while_it_waited(
    manager: Manager, tmp_path: Path
) -> None:
    """The supervisor records a job that keeps failing (FAILED) and stops its run while an AWAIT
    JOB waits on that run: the AWAIT says the job failed, at once. It waited until its timeout
    before (the stopped run's queries tell nothing, and its input was never read): a race that
    AWAIT won most of the time, lost now and then."""
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1)
    run(
        manager,
        "SET 'trigger_ms' = '120000';"  # after its first batch the job looks for input every 2 min
        + orders_mapping(data)
        + """
        CREATE MAPPING copies TYPE DuckDB;
        CREATE JOB copy AS INSERT INTO copies SELECT order_id, region FROM orders;
        AWAIT JOB copy;
    """,
    )
    make_orders.write_orders(data, 10, 20, files=1, prefix="later")  # read at the next trigger
    outcome: list[BaseException] = []
    waiting = threading.Thread(
        target=lambda: outcome.append(
            pytest.raises(JobFailedError, run, manager, "AWAIT JOB copy TIMEOUT INTERVAL '60' SECOND;").value
        )
    )
    waiting.start()
    active = manager.runs["copy"]
    until("AWAIT JOB is waiting on the run", lambda: waiting_in(waiting, "wait"))
    manager._fail(active, "INSERT INTO copies failed: the supervisor gave up on it")  # as its round does
    waiting.join(30)
    assert not waiting.is_alive(), "AWAIT JOB went on waiting on a run the supervisor failed"
    (error,) = outcome
    assert "the supervisor gave up on it" in str(error)
    shown = run(manager, "SHOW JOBS;")[0]
    assert [r[shown.columns.index("status")] for r in shown.rows] == ["FAILED"]


@pytest.mark.spark
def test_a_failed_job_says_why_in_one_sentence_and_logs_the_whole_error(
    manager: Manager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's error class and message, and the SQL it points at, in SHOW JOBS and AWAIT JOB's
    error; Spark's whole text (the query's plan, the JVM's stack) only in the log."""
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1)
    run(
        manager,
        orders_mapping(data)
        + """
        CREATE MAPPING ratios TYPE DuckDB;
        CREATE JOB ratio AS INSERT INTO ratios SELECT order_id div (order_id - order_id) AS r FROM orders;
    """,
    )
    with pytest.raises(JobFailedError) as failed:
        run(manager, "AWAIT JOB ratio TIMEOUT INTERVAL '300' SECOND;")
    sentence = (
        "INSERT INTO ratios failed: [DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate "
        'divisor being 0 and return NULL instead. If necessary set "spark.sql.ansi.enabled" to "false" '
        "to bypass this error. (in: order_id DIV (order_id - order_id) AS `r`)"
    )
    assert failed.value.message == f"job 'ratio' failed: {sentence}"
    # It was restarted from its checkpoint before it was given up on.
    restarts = [
        r.getMessage() for r in caplog.records if "restarting it from its checkpoint" in r.getMessage()
    ]
    assert len(restarts) == 3 and restarts[-1].endswith("(3 of 3)")
    shown = run(manager, "SHOW JOBS;")[0]
    [job] = [dict(zip(shown.columns, r, strict=True)) for r in shown.rows]
    assert (job["status"], job["detail"]) == ("FAILED", sentence)
    logged = [
        r for r in caplog.records if r.levelname == "ERROR" and "INSERT INTO ratios failed:" in r.getMessage()
    ]
    assert logged and "=== Streaming Query ===" in logged[0].getMessage()
    assert "StreamExecution" in logged[0].getMessage()  # the JVM's stack trace


@pytest.mark.spark
def test_a_branch_that_ran_well_since_its_restart_has_its_restarts_counted_again(
    manager: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A long-lived job meets a transient failure now and then: each one restarts the branch, and
    one that ran well (here: any time at all, and a committed batch) since its last restart starts
    the count over. Four failures, each after a good batch, used to fail the job for good."""
    from pitstop import faults
    from pitstop.engine.runs import watching

    monkeypatch.setattr(watching, "HEALTHY_S", 0.0)
    monkeypatch.setattr(faults, "_hits", {})
    # The sink's write fails at the 2nd, 4th, 6th and 8th batch written (each once; the retry of
    # the batch after the restart is the next hit and succeeds).
    monkeypatch.setenv(faults.FAULT_ENV, ",".join(f"sink.before_commit:{n}:EIO" for n in (2, 4, 6, 8)))
    caplog.set_level(logging.INFO, logger="pitstop")
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1)
    run(
        manager,
        orders_mapping(data)
        + """
        CREATE MAPPING copies TYPE DuckDB;
        CREATE JOB copy AS INSERT INTO copies SELECT order_id, region FROM orders;
        AWAIT JOB copy;
        """,
    )
    for part in range(1, 5):
        make_orders.write_orders(data, part * 10, part * 10 + 10, files=1)
        run(manager, "AWAIT JOB copy;")
    [job] = run(manager, "SHOW JOBS;")[0].rows
    assert job[:2] == ("copy", "RUNNING")
    [(count, distinct)] = manager.catalog.query("SELECT count(*), count(DISTINCT order_id) FROM copies")[1]
    assert (count, distinct) == (50, 50)
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "restarting it from its checkpoint (1 of 3)" in m]) == 4
    assert len([m for m in said if "its restarts are counted from 0 again" in m]) == 3
    # pitstop.metrics counts every restart, not the count toward giving up (a branch without a stage).
    [sample] = manager.sample_metrics(force=True)
    assert (sample.sink, sample.stage, sample.restarts) == ("copies", None, 4)


# Spark 4.3's text for an exception raised in a Python data source's read() (captured from a real
# streaming query whose reader opened a file that was gone).
PYTHON_WORKER_ERROR = """[PYTHON_EXCEPTION] An exception was thrown from the Python worker: \
Traceback (most recent call last):
  File "/tmp/lead-err/probe.py", line 11, in read
    open("/nonexistent/orders/part-1.json").read()
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/orders/part-1.json'
 SQLSTATE: 38000
=== Streaming Query ===
Identifier: [id = e47526c8-3d39-4a2a-81e8-59ccd884205f, runId = 24aa8784-5209-422b-b9a1-109b820f92a2]
Current State: ACTIVE
"""


def test_a_python_worker_failure_is_told_by_the_exception_it_raised() -> None:
    from pitstop.engine.runs.failures import spark_reason

    assert spark_reason(PYTHON_WORKER_ERROR) == (
        "the Python worker raised FileNotFoundError: [Errno 2] No such file or directory: "
        "'/nonexistent/orders/part-1.json'"
    )


@pytest.mark.spark
def test_a_view_with_impose_order_feeds_a_window_like_hazelcast(manager: Manager, tmp_path: Path) -> None:
    from datetime import timedelta
    from decimal import Decimal

    from conftest import EPOCH, closed

    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 400, files=2)
    run(
        manager,
        f"""
        CREATE MAPPING raw_orders (order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP)
            TYPE File OPTIONS ('path'='{data}', 'format'='json');
        CREATE VIEW ordered AS
            SELECT * FROM TABLE(IMPOSE_ORDER(TABLE raw_orders, DESCRIPTOR(ts), INTERVAL '5' MINUTE));
        CREATE VIEW big_orders AS SELECT region, amount * 2 AS doubled, ts FROM ordered WHERE amount > 10;
        CREATE MAPPING hourly TYPE DuckDB;
        CREATE JOB hourly_big AS INSERT INTO hourly
            SELECT window_start, region, SUM(doubled) AS revenue, COUNT(*) AS orders
            FROM TABLE(TUMBLE(TABLE big_orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
            GROUP BY window_start, window_end, region;
        AWAIT JOB hourly_big;
    """,
    )
    assert [r[0] for r in run(manager, "SHOW VIEWS;")[0].rows] == ["big_orders", "ordered"]
    got = {
        (start, region): (Decimal(revenue), count)
        for start, region, revenue, count in manager.catalog.query("SELECT * FROM hourly")[1]
    }
    hour = timedelta(hours=1)
    big = [
        dict(o, amount=float(o["amount"]) * 2)
        for o in (make_orders.order(i) for i in range(400))
        if float(o["amount"]) > 10
    ]
    from conftest import batch_windows

    watermark = EPOCH + timedelta(seconds=399 * 90) - timedelta(minutes=5)
    assert got == closed(batch_windows(big, hour), hour, watermark)
    assert len(got) > 20


@pytest.mark.spark
def test_python_workers_import_the_installed_pyspark_not_sparks_zip(manager: Manager) -> None:
    """Spark puts its zipped pyspark first on the workers' path, where Python cannot cache compiled
    modules; pitstop's worker script drops it, so workers use the installed, compiled pyspark."""
    import pyspark
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    spark = manager.spark()
    where = F.udf(lambda _: __import__("pyspark").__file__, StringType())
    seen = spark.range(1).select(where("id")).first()[0]
    assert ".zip" not in seen
    assert seen == pyspark.__file__


@pytest.mark.spark
def test_a_job_that_cannot_start_leaves_no_job_and_no_run_folder(manager: Manager, tmp_path: Path) -> None:
    """The job's row is written before its queries start (so a kill after a first batch leaves a
    job that resumes); a job whose queries cannot start takes its row and folder away again."""
    from pitstop.errors import PlanError

    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 10, files=1)
    run(
        manager,
        orders_mapping(data)
        + """
        CREATE MAPPING copies TYPE DuckDB;
        CREATE JOB first AS INSERT INTO copies SELECT order_id, region FROM orders;
        AWAIT JOB first;
    """,
    )
    with pytest.raises(
        PlanError, match=r"sink table 'copies' \(mapping 'copies'\) has no column\(s\) amount"
    ):
        run(manager, "CREATE JOB second AS INSERT INTO copies SELECT order_id, amount FROM orders;")
    assert [r[0] for r in run(manager, "SHOW JOBS;")[0].rows] == ["first"]
    assert [p.name.split("-")[0] for p in (tmp_path / "home" / "runs").iterdir()] == ["first"]
    run(
        manager,
        "CREATE JOB second AS INSERT INTO copies SELECT order_id, region FROM orders; AWAIT JOB second;",
    )
    assert sorted(r[0] for r in run(manager, "SHOW JOBS;")[0].rows) == ["first", "second"]
