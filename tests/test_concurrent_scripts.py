"""Two scripts (real ``pitstop run`` processes, no server) creating the same job at the same
moment on one home: exactly one creates it, the other is told why, and catalog and disk agree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import make_orders

SCRIPT = """CREATE MAPPING IF NOT EXISTS orders (
    order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) TYPE File OPTIONS ('path'='{path}', 'format'='json');
CREATE MAPPING IF NOT EXISTS daily_revenue TYPE DuckDB;
CREATE JOB revenue AS INSERT INTO daily_revenue
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
    GROUP BY window_start, window_end, region;
AWAIT JOB revenue;
"""


@pytest.mark.spark
def test_two_scripts_creating_one_job_end_with_one_winner(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "orders"
    make_orders.write_orders(data, 0, 100, files=1)
    script = tmp_path / "create.sql"
    script.write_text(SCRIPT.format(path=data))
    env = dict(os.environ, PITSTOP_SHUFFLE_PARTITIONS="2", PITSTOP_TRIGGER_MS="200")
    command = [
        sys.executable,
        "-m",
        "pitstop.cli",
        "--home",
        str(home),
        "--master",
        "local[1]",
        "run",
        str(script),
    ]
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    done = [(p.wait(300), *p.communicate()) for p in procs]
    winners = [out for code, out, _ in done if code == 0]
    losers = [err for code, _, err in done if code != 0]
    assert len(winners) == 1 and len(losers) == 1, done
    assert "job 'revenue' started" in winners[0]
    # The other either found the home taken by the first process, or, started after it, the job.
    assert (
        "Another pitstop process may be using it" in losers[0] or "job 'revenue' already exists" in losers[0]
    )
    db = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        jobs = db.execute("SELECT name FROM pitstop.jobs").fetchall()
        runs = db.execute("SELECT count(*) FROM pitstop.runs").fetchall()
    finally:
        db.close()
    assert jobs == [("revenue",)] and runs == [(1,)]
    assert len(list((home / "runs").iterdir())) == 1  # the loser left no run folder
