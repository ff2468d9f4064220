"""What ``pitstop prepare``'s class archive saves: ``python bench/jvm.py [--reps R]``.

A ``pitstop run`` of a small windowed job (two JSON files of 250 orders, ``AWAIT JOB``) as a real
process, the way every test that kills a process and every user's script starts Spark: its wall
time, and the CPU of every process it started (the JVM, Python workers), counted by making this
process their subreaper and waiting for all of them. Two variants, interleaved, R runs each:

- ``archive``: the user's cache holds the archive (``pitstop prepare`` is run first if needed);
- ``none``: ``XDG_CACHE_HOME`` points at an empty folder, so no archive is found.

Both with the JVM options the test suite uses (C1 only, the serial collector) unless
``PYSPARK_SUBMIT_ARGS`` is set. Prints a table and ``cpu_ratio=X`` (archive / none).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PITSTOP = [sys.executable, "-m", "pitstop.cli"]
JOB = """CREATE MAPPING orders (order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{folder}', 'format'='json');
CREATE MAPPING revenue TYPE DuckDB;
CREATE JOB j AS INSERT INTO revenue SELECT window_start, window_end, region, SUM(amount) AS revenue,
    COUNT(*) AS orders FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
    GROUP BY window_start, window_end, region;
AWAIT JOB j;
"""


def orders(folder: Path) -> None:
    folder.mkdir(parents=True)
    for f in range(2):
        with open(folder / f"orders-{f}.json", "w") as handle:
            for i in range(f * 250, f * 250 + 250):
                ts = f"2024-01-01T{(i * 90 // 3600) % 24:02d}:{(i * 90 // 60) % 60:02d}:{i * 90 % 60:02d}"
                handle.write(json.dumps({"order_id": i, "region": "eu", "amount": i % 50, "ts": ts}) + "\n")


def one_run(scratch: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds of the ``pitstop run`` process, CPU seconds of it and every descendant."""
    home = scratch / f"home-{time.monotonic_ns()}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [*PITSTOP, "--home", str(home), "run", str(scratch / "job.sql")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    while True:  # the JVM and Python workers outlive the command briefly: wait for every one
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphaned descendants are ours
    base = dict(os.environ)
    options = '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'
    base.setdefault("PYSPARK_SUBMIT_ARGS", options)
    subprocess.run([*PITSTOP, "prepare"], env=base, check=True)
    results: dict[str, list[tuple[float, float]]] = {"archive": [], "none": []}
    with tempfile.TemporaryDirectory(prefix="pitstop-bench-jvm-") as tmp:
        scratch = Path(tmp)
        orders(scratch / "orders")
        (scratch / "job.sql").write_text(JOB.format(folder=scratch / "orders"))
        empty = scratch / "empty-cache"
        empty.mkdir()
        for _ in range(args.reps):
            results["archive"].append(one_run(scratch, base))
            results["none"].append(one_run(scratch, {**base, "XDG_CACHE_HOME": str(empty)}))
    print(f"{'variant':<8} {'wall s (median, runs)':<34} {'CPU s (median, runs)':<34}")
    for name, runs in results.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"{name:<8} {statistics.median(walls):5.1f} {[round(w, 1) for w in walls]!s:<28} "
            f"{statistics.median(cpus):5.1f} {[round(c, 1) for c in cpus]!s:<28}"
        )

    def median(variant: str, which: int) -> float:
        return statistics.median(run[which] for run in results[variant])

    cpu, wall = median("archive", 1) / median("none", 1), median("archive", 0) / median("none", 0)
    print(f"cpu_ratio={cpu:.2f} wall_ratio={wall:.2f}")


if __name__ == "__main__":
    main()
