"""Statement latency without Spark: a home with 100 jobs and 1,000 snapshots, statements timed
through the executor (parse + execute), as ``pitstop run`` and the shell run them.

``python bench/latency.py HOME CALLS`` prints one line ``@@BENCH {json}``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

JOBS = 100
SNAPSHOTS = 1000


def populate(home: Path) -> None:
    """Catalog rows as real statements would leave them (plans and manifests of a real job)."""
    from pitstop.catalog.clock import now
    from pitstop.catalog.rows import RUNNING, STOPPED, Job, Run
    from pitstop.driver import Driver
    from pitstop.executor import Executor
    from pitstop.manager import Manager
    from pitstop.planner.build import plan_job
    from pitstop.settings import Settings
    from pitstop.sql.parser import parse_script

    manager = Manager(Settings.resolve(home=home))
    for _ in Driver(Executor(manager)).run_script(
        "CREATE MAPPING events (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
        "'1' MINUTE) TYPE File OPTIONS ('path'='" + str(home / "events") + "', 'format'='json');"
        "CREATE MAPPING agg TYPE DuckDB;"
    ):
        pass
    catalog = manager.catalog
    created = now()
    for j in range(JOBS):
        sql = (
            f"CREATE JOB job_{j:03d} AS INSERT INTO agg SELECT window_start, window_end, k, "
            "COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top "
            "FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
            "GROUP BY window_start, window_end, k;"
        )
        node = parse_script(sql)[0].node
        plan = plan_job(f"job_{j:03d}", list(node.args["body"]), catalog.get_mapping)
        run_id = f"job_{j:03d}-0000"
        run = Run(run_id, f"job_{j:03d}", str(home / "runs" / run_id), plan.to_json(), None, created)
        status = RUNNING if j % 2 else STOPPED
        catalog.create_job(Job(f"job_{j:03d}", sql, status, "", run_id, None, created, created), run)
    with catalog.transaction() as tx:  # one transaction: 1,000 commits would take a minute
        for s in range(SNAPSHOTS):
            _add_snapshot(catalog, tx, home, created, s)
    manager.close()


def _add_snapshot(catalog: Any, tx: Any, home: Path, created: Any, s: int) -> None:
    from pitstop.catalog.rows import Snapshot

    job = f"job_{s % JOBS:03d}"
    plan = catalog.get_run(f"{job}-0000").plan
    stage = plan["branches"][0]["stage"]
    manifest: dict[str, Any] = {
        "snapshot": f"snap_{s:04d}",
        "job": job,
        "run_id": f"{job}-0000",
        "created": (created + timedelta(seconds=s)).isoformat(),
        "sources": {"events": {"type": "file", "pos": 40, "files": "sources/events.files"}},
        "stages": {stage["name"]: {"plan": stage, "rows": 10_000, "watermark_ms": 1, "batch_id": 7}},
        "plan": plan,
        "versions": {"pitstop": "0", "spark": "4.3.0"},
        "rows": 10_000,
        "bytes": 96_000,
    }
    snap = Snapshot(
        f"snap_{s:04d}",
        job,
        created + timedelta(seconds=s),
        str(home / "snapshots" / f"snap_{s:04d}"),
        96_000,
        10_000,
        manifest,
    )
    catalog.add_snapshot(snap, tx)


def measure(home: Path, calls: int) -> dict[str, Any]:
    from pitstop.driver import Driver
    from pitstop.engine.session import running_session
    from pitstop.errors import PitstopError
    from pitstop.executor import Executor
    from pitstop.manager import Manager
    from pitstop.settings import Settings

    manager = Manager(Settings.resolve(home=home))
    driver = Driver(Executor(manager))
    statements = {
        "SHOW JOBS": "SHOW JOBS;",
        "SHOW SNAPSHOTS": "SHOW SNAPSHOTS;",
        "DESCRIBE SNAPSHOT": "DESCRIBE SNAPSHOT snap_{i:04d};",
        "DESCRIBE JOB": "DESCRIBE JOB job_{j:03d};",
    }
    out: dict[str, Any] = {}
    for label, template in statements.items():
        times: list[float] = []
        error = None
        rows = 0
        for i in range(calls):
            text = template.format(i=i % SNAPSHOTS, j=i % JOBS)
            t = time.perf_counter()
            try:
                for _stmt, result in driver.run_script(text):
                    rows = len(result.rows)
            except PitstopError as err:
                error = str(err).splitlines()[0]
                break
            times.append(time.perf_counter() - t)
        if error is not None:
            out[label] = {"error": error}
            continue
        times.sort()
        out[label] = {
            "calls": len(times),
            "rows": rows,
            "p50_ms": 1000 * statistics.median(times),
            "p99_ms": 1000 * times[max(0, int(len(times) * 0.99) - 1)],
            "max_ms": 1000 * times[-1],
        }
    out["spark_started"] = running_session() is not None or manager.spark_started
    manager.close()
    return out


def main() -> None:
    home, calls = Path(sys.argv[1]), int(sys.argv[2])
    if not (home / "catalog.duckdb").exists():
        populate(home)
    print("@@BENCH " + json.dumps(measure(home, calls)), flush=True)


if __name__ == "__main__":
    main()
