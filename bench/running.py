"""A running aggregate (``GROUP BY k`` without a window, into a DuckDB table upserted by ``k``) as a
pitstop job beside the same job hand-written in PySpark (update output mode, a foreachBatch upsert
with a bookkeeping row), in one Spark session with pitstop's settings, runs interleaved:
``python bench/running.py [--events N] [--reps R]``. The issue's target: pitstop ≥ 0.95× the
hand-written throughput. Prints a table, ``running_ratio=X`` (hand-written s / pitstop s, end to
end, start included) and ``running_batch_ratio=X`` (the same over Spark's time in the batches that
read input: the rate once running).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import Worker, log, say, spread, table  # noqa: E402

import data  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    folder = str(data.events(args.events))
    warm = str(data.events(50_000))
    worker = Worker("pitstop")
    try:
        log("warm-up (JIT, class loading)")
        worker.call("running_pitstop", folder=warm)
        worker.call("running_handwritten", folder=warm)
        seconds: dict[str, list[float]] = {"pitstop": [], "handwritten": []}
        batch: dict[str, list[float]] = {"pitstop": [], "handwritten": []}
        answers: set[tuple[int, int]] = set()
        for rep in range(args.reps):
            order = ["pitstop", "handwritten"] if rep % 2 == 0 else ["handwritten", "pitstop"]
            for name in order:
                r = worker.call(f"running_{name}", folder=folder)
                seconds[name].append(r["seconds"])
                batch[name].append(r["batch_seconds"])
                answers.add((r["rows_out"], r["events"]))
                log(
                    f"running n={args.events:,} rep {rep + 1}: {name} {r['seconds']:.2f} s, "
                    f"batches {r['batch_seconds']:.2f} s"
                )
        if answers != {(data.THROUGHPUT_KEYS, args.events)}:
            raise RuntimeError(f"the cases disagree or miss events: {answers}")
    finally:
        worker.close()
    rate = {k: [args.events / s for s in v] for k, v in seconds.items()}
    batch_rate = {k: [args.events / s for s in v] for k, v in batch.items()}
    start = {k: [s - b for s, b in zip(seconds[k], batch[k], strict=True)] for k in seconds}
    ratio = statistics.median(seconds["handwritten"]) / statistics.median(seconds["pitstop"])
    batch_ratio = statistics.median(batch["handwritten"]) / statistics.median(batch["pitstop"])
    keys = data.THROUGHPUT_KEYS
    say(f"# running aggregate, {args.events:,} events over {keys:,} keys, {args.reps} runs each")
    say(
        "end to end: from CREATE JOB (or readStream) to the last commit; in batches: Spark's "
        "triggerExecution of the batches that read input; start: the difference"
    )
    say(
        table(
            [
                "case",
                "end to end, s",
                "events/s end to end",
                "in batches, s",
                "events/s in batches",
                "start, s",
            ],
            [
                [
                    name,
                    spread(seconds[name], "{:,.2f}"),
                    spread(rate[name]),
                    spread(batch[name], "{:,.2f}"),
                    spread(batch_rate[name]),
                    spread(start[name], "{:,.2f}"),
                ]
                for name in ("pitstop", "handwritten")
            ],
        )
    )
    say(f"running_ratio={ratio:.2f}")
    say(f"running_batch_ratio={batch_ratio:.2f}")


if __name__ == "__main__":
    main()
