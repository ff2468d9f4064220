"""The throughput case on a Spark standalone cluster beside ``local[*]``:
``python bench/cluster.py [--events 1000000] [--reps 3]``.

A master and two workers (1 core, 1 GB each) start on 127.0.0.1 from the installed pyspark
(``tests/tools/spark_cluster.py``, ports 17077-17118; ``--port`` moves them). Two benchmark
workers (``bench/worker.py pitstop``) build pitstop's Spark session, one with
``PITSTOP_SPARK_MASTER=local[*]``, one with the cluster's master; each runs bench/run.py's
throughput case (a 1 h tumbling COUNT/SUM/MAX over 10k keys from JSON files) as a pitstop job
and as the hand-written Structured Streaming job in the same session. Reps are interleaved; every
run must emit the same rows. Session start (and, on the cluster, the executors' registration and
pitstop's checks) is excluded: it is timed once, separately.

On one machine the cluster can only cost: the same 2 cores run the driver, two executor JVMs and
their Python workers, and every shuffle goes through the network stack. The point is that it works
and what the overhead is; on real machines the executors add cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests" / "tools"))

from run import Worker, log, machine, med, say, spread, table  # noqa: E402
from spark_cluster import SparkCluster  # noqa: E402

import data  # noqa: E402


def worker(master: str, port: int) -> tuple[Worker, float]:
    """A benchmark worker whose pitstop session runs on ``master``; its start-up seconds."""
    saved = dict(os.environ)
    os.environ.update(
        PITSTOP_SPARK_MASTER=master,
        SPARK_LOCAL_IP="127.0.0.1",
        PITSTOP_EXECUTOR_MEMORY="768m",
        PYSPARK_SUBMIT_ARGS=f"--conf spark.ui.port={port + 40} pyspark-shell",
    )
    try:
        t0 = time.perf_counter()
        w = Worker("pitstop")
        return w, time.perf_counter() - t0
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--port", type=int, default=17077)
    args = parser.parse_args()
    lines = machine()
    folder = str(data.events(args.events))
    with SparkCluster(Path(tempfile.mkdtemp(prefix="pitstop-bench-cluster-")), args.port) as cluster:
        log(f"cluster up: {cluster.master_url}")
        sessions: dict[str, tuple[Worker, float]] = {}
        try:
            sessions["local[*]"] = worker("local[*]", args.port)
            sessions["cluster"] = worker(cluster.master_url, args.port)
            for name, (w, started) in sessions.items():
                log(f"{name}: session up in {started:.1f} s; warm-up")
                w.call("throughput_pitstop", folder=str(data.events(data.FILE_EVENTS)))
            seconds: dict[str, list[float]] = defaultdict(list)
            rows: set[int] = set()
            cases = [(where, how) for where in sessions for how in ("pitstop", "handwritten")]
            for rep in range(args.reps):
                for where, how in cases[rep % len(cases) :] + cases[: rep % len(cases)]:
                    r = sessions[where][0].call(f"throughput_{how}", folder=folder)
                    seconds[f"{how} on {where}"].append(r["seconds"])
                    rows.add(r["rows_out"])
                    log(f"rep {rep + 1}: {how} on {where}: {r['seconds']:.2f} s")
            if len(rows) != 1:
                raise RuntimeError(f"the runs emitted different row counts: {sorted(rows)}")
        finally:
            for w, _ in sessions.values():
                w.close()
    lines.append(f"- load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    say("\n".join(lines))
    say()
    say(
        f"### {args.events:,} JSON events, 1 h tumbling COUNT/SUM/MAX per 10k keys "
        f"(median of {args.reps}; {rows.pop():,} rows out in every run)"
    )
    say()
    base = med(seconds["pitstop on local[*]"])
    out = []
    for case, values in seconds.items():
        eps = [args.events / s for s in values]
        out.append([case, spread(values, "{:.1f}"), spread(eps), f"{base / med(values):.2f}x"])
    say(table(["case", "seconds", "events/s", "vs pitstop on local[*]"], out))
    say()
    say("Session start (excluded above): " + ", ".join(f"{k} {v[1]:.1f} s" for k, v in sessions.items()))


if __name__ == "__main__":
    main()
