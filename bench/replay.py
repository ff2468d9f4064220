"""What ``EXPLAIN ANALYZE CREATE JOB`` costs: ``python bench/replay.py [--events N] [--reps R]``.

One pitstop home, one Spark session (pitstop's settings), a 1 h tumbling COUNT/SUM over 10k keys
from JSON files (the throughput input of ``bench/run.py``, one day of events) into DuckDB:

1. The job reads the first file, ``CREATE SNAPSHOT s``; the other files of N events arrive, and the
   job's own time for them is measured (the files dropped in → ``AWAIT JOB`` returns): ``live_s``.
2. ``EXPLAIN ANALYZE CREATE JOB ... FROM SNAPSHOT s`` with a filter more, over exactly that span:
   ``replay_s`` (both replays, the job's SQL and the new one, and the diff). The issue's target:
   about what the job's own processing of the span costs (two replays: about 2x).
3. The live job's lag during a replay: another file arrives while no replay runs and the job's
   time to catch up is measured (``alone_s``), then the same while a replay runs (``during_s``).
   On 2 cores a replay takes its share of them; the ratio says how much the job slows.

Prints a table and ``replay_ratio=X`` (replay_s / live_s) ``lag_ratio=X`` (during_s / alone_s).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import log, say, spread, table  # noqa: E402

import data  # noqa: E402
from pitstop.driver import Driver  # noqa: E402
from pitstop.executor import Executor  # noqa: E402
from pitstop.manager import Manager  # noqa: E402
from pitstop.settings import Settings  # noqa: E402

SELECT = """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) {where}
    GROUP BY window_start, window_end, k"""


def run(executor: Executor, sql: str) -> list[object]:
    return [r for _, r in Driver(executor).run_script(sql)]


def timed(executor: Executor, sql: str) -> float:
    began = time.monotonic()
    run(executor, sql)
    return time.monotonic() - began


def drop(files: list[Path], folder: Path) -> None:
    for f in files:
        shutil.copy(f, folder / f".{f.name}.tmp")
        (folder / f".{f.name}.tmp").rename(folder / f.name)


def one(source: Path, events: int, work: Path) -> dict[str, float]:
    files = sorted(source.glob("part-*.json"))
    first, span, extra = files[:1], files[1:-2], files[-2:]
    folder = work / "events"
    folder.mkdir(parents=True)
    manager = Manager(Settings(home=work / "home"))
    executor = Executor(manager)
    try:
        drop(first, folder)
        run(
            executor,
            f"""CREATE MAPPING events (k BIGINT, v BIGINT, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE)
                TYPE File OPTIONS ('path'='{folder}', 'format'='json');
            CREATE MAPPING out TYPE DuckDB;
            CREATE JOB j AS INSERT INTO out {SELECT.format(where="")};
            AWAIT JOB j; CREATE SNAPSHOT s FOR JOB j;""",
        )
        began = time.monotonic()
        drop(span, folder)
        run(executor, "AWAIT JOB j;")
        live = time.monotonic() - began
        changed = SELECT.format(where="WHERE v >= 10")
        analyze = f"EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s AS INSERT INTO out {changed};"
        replay = timed(executor, analyze)
        # The job's lag for one more file, alone and beside a replay.
        began = time.monotonic()
        drop(extra[:1], folder)
        run(executor, "AWAIT JOB j;")
        alone = time.monotonic() - began
        beside = threading.Thread(target=run, args=(Executor(manager), analyze))
        beside.start()
        time.sleep(2.0)  # the replay's runs have started (the bench may sleep; the tests may not)
        began = time.monotonic()
        drop(extra[1:], folder)
        run(executor, "AWAIT JOB j;")
        during = time.monotonic() - began
        beside.join()
        return {"live_s": live, "replay_s": replay, "alone_s": alone, "during_s": during}
    finally:
        manager.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    source = data.events(args.events)
    results: list[dict[str, float]] = []
    # One folder for every run: the process's one Spark session keeps the first home's Python
    # worker script, which must outlive that run.
    tmp = tempfile.TemporaryDirectory(prefix="pitstop-bench-replay-")
    for rep in range(args.reps):
        r = one(source, args.events, Path(tmp.name) / f"rep{rep}")
        log(
            f"replay n={args.events:,} rep {rep + 1}: live {r['live_s']:.1f} s, "
            f"replay {r['replay_s']:.1f} s, lag alone {r['alone_s']:.1f} s, "
            f"during a replay {r['during_s']:.1f} s"
        )
        results.append(r)
    tmp.cleanup()
    col = {k: [r[k] for r in results] for k in results[0]}
    span = args.events - data.FILE_EVENTS * 3
    say(
        table(
            ["case", "seconds, median (min-max)"],
            [
                [f"the live job over the span ({span:,} events)", spread(col["live_s"], "{:.1f}")],
                ["EXPLAIN ANALYZE over that span (two replays + diff)", spread(col["replay_s"], "{:.1f}")],
                ["the job catching up one file, alone", spread(col["alone_s"], "{:.1f}")],
                ["the same, while a replay runs", spread(col["during_s"], "{:.1f}")],
            ],
        )
    )
    ratio = statistics.median(col["replay_s"]) / statistics.median(col["live_s"])
    lag = statistics.median(col["during_s"]) / statistics.median(col["alone_s"])
    say(f"replay_ratio={ratio:.2f} lag_ratio={lag:.2f}")


if __name__ == "__main__":
    main()
