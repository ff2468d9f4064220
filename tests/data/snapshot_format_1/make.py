"""Write the snapshot committed beside this file: ``windows_v1/``, in the format of the pitstop
that runs this script (run it from the repository root with that pitstop's ``.venv``)::

    .venv/bin/python tests/data/snapshot_format_1/make.py /tmp/some-empty-folder

One job reads a Generator mapping (events are a pure function of their index, so nothing but a
count is needed to go on from the snapshot, on any machine) into three stages, one per window
kind, and is stopped with a snapshot after the first 300 events. The test that restores it,
``tests/test_old_snapshots.py``, declares the same mapping, SQL and settings.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from pitstop.driver import Driver
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.settings import Settings

HERE = Path(__file__).resolve().parent

MAPPING = """
CREATE OR REPLACE MAPPING events (
    id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) TYPE Generator OPTIONS ('rate'='1000000000000', 'limit'='{limit}', 'keys'='3', 'step_ms'='1000',
                          'start'='2024-01-01 00:00:00');
"""
JOB = """
CREATE JOB windows {options} AS BEGIN
    INSERT INTO per_minute
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, region;
    INSERT INTO sliding
    SELECT window_start, window_end, region, MAX(amount) AS top, COUNT(*) AS n
    FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '2' MINUTE, INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, region;
    INSERT INTO sessions
    SELECT window_start, window_end, region, AVG(amount) AS mean, COUNT(*) AS n
    FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND))
    GROUP BY window_start, window_end, region;
END;
"""
SINKS = """
CREATE MAPPING per_minute TYPE DuckDB;
CREATE MAPPING sliding TYPE DuckDB;
CREATE MAPPING sessions TYPE DuckDB;
"""


def settings(home: Path) -> Settings:
    """The settings of the tests (tests/conftest.py): a native copy restores only with the same
    number of state partitions."""
    return Settings(home=home, master="local[2]", shuffle_partitions=2, trigger_ms=200)


def main(work: Path) -> None:
    manager = Manager(settings(work / "home"))
    try:
        script = MAPPING.format(limit=300) + SINKS + JOB.format(options="")
        script += "AWAIT JOB windows; DROP JOB windows WITH SNAPSHOT windows_v1;"
        for _, result in Driver(Executor(manager)).run_script(script):
            print(result.message)
    finally:
        manager.close()
    out = HERE / "windows_v1"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(work / "home" / "snapshots" / "windows_v1", out)
    print(f"written {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
