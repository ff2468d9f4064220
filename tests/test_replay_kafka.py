"""EXPLAIN ANALYZE CREATE JOB over a Kafka source whose broker no longer holds part of the span
(issue 27, "says plainly what it cannot replay ... and replays the rest"): the partitions' missing
offsets are named and skipped, the rest is replayed and compared, the sinks it feeds are marked
partial. On Tansu (the tests' broker: a topic created again with fewer records) through Spark; on
noida-db (which deletes records as retention does) the reader's part without Spark."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from command_helpers import pitstop
from conftest import DELAY, batch_windows, make_orders, revenue_select, run, settings
from kafka_helpers import Broker, broker, start_broker  # noqa: F401 - the fixture
from pitstop.catalog.rows import Mapping
from pitstop.connectors import positions
from pitstop.connectors.kafka.connector import CONNECTOR
from pitstop.connectors.kafka.source import KafkaStreamReader
from pitstop.manager import Manager

STEP = 90  # seconds between orders
SIX = timedelta(hours=6)


def order(i: int) -> dict[str, object]:
    return make_orders.order(i, STEP)


def closed_between(windows: dict[Any, Any], after: Any, upto: Any) -> dict[Any, Any]:
    return {k: v for k, v in windows.items() if after < k[0] + SIX <= upto}


def end_watermark(read: list[dict[str, object]]) -> Any:
    return max(make_orders.EPOCH + timedelta(seconds=int(str(o["order_id"])) * STEP) for o in read) - DELAY


def start_job(manager: Manager, bootstrap: str, produce: Callable[[list[int]], None]) -> None:
    """Job k on topic 'orders' (3 partitions, order i in partition i % 3): orders 0-599 read at
    snapshot s1, 600-1499 at s2 (offsets 200 and 500 in each partition)."""
    produce(list(range(0, 600)))
    run(
        manager,
        f"""CREATE MAPPING orders (
            order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
            WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
        ) TYPE Kafka OPTIONS ('bootstrap.servers'='{bootstrap}', 'topic'='orders', 'valueFormat'='json');
        CREATE MAPPING out TYPE DuckDB;
        CREATE JOB k AS INSERT INTO out {revenue_select("'6' HOUR")};
        AWAIT JOB k; CREATE SNAPSHOT s1 FOR JOB k;""",
    )
    produce(list(range(600, 1500)))
    run(manager, "AWAIT JOB k; CREATE SNAPSHOT s2 FOR JOB k;")


def replay_what_is_held(
    manager: Manager, kept: Callable[[int], bool]
) -> tuple[dict[tuple[str, str], list[str]], str]:
    """EXPLAIN ANALYZE of k with a filter from s1 to s2, its diff checked against a batch
    computation over s1's orders and the span's orders that ``kept`` says the broker still holds
    (the windows the span closes); returns its rows' notes by (outcome, name) and its message."""
    filtered = revenue_select("'6' HOUR", "WHERE amount >= 50")
    result = run(
        manager,
        f"EXPLAIN ANALYZE CREATE JOB k FROM SNAPSHOT s1 UNTIL SNAPSHOT s2 AS INSERT INTO out {filtered};",
    )[0]
    by: dict[tuple[str, str], list[str]] = {}
    for r in result.rows:
        by.setdefault((r[7], r[2] or r[1]), []).append(r[8])
    # Not checked against what the job wrote: the job read what the replay could not.
    assert not [r for r in result.rows if r[7] in ("reproduced", "not reproduced")]
    assert "sink(s) out are compared over the rest of their input only" in result.message
    [note] = by[("differs", "out")]
    assert "partial: what source 'orders' no longer holds was not replayed" in note

    before = [order(i) for i in range(0, 600)]
    span = [order(i) for i in range(600, 1500) if kept(i)]
    cut, end = end_watermark(before), end_watermark(span)
    old = closed_between(batch_windows(before + span, SIX), cut, end)
    cheap = [o for o in span if float(str(o["amount"])) >= 50]
    new = closed_between(batch_windows(before + cheap, SIX), cut, end)
    columns, rows = manager.catalog.query("SELECT * FROM diff.k_1_out")
    got = {
        (r["window_start"], r["region"]): (
            (r["old_revenue"], r["old_orders"]),
            (r["new_revenue"], r["new_orders"]),
        )
        for r in (dict(zip(columns, row, strict=True)) for row in rows)
    }
    assert len(old) >= 6 and set(new) == set(old)
    changed = {k: (old[k], new[k]) for k in old if old[k] != new[k]}
    assert got == changed and changed
    identical = len(old) - len(changed)
    assert note.startswith(
        f"{identical} row(s) identical, {len(changed)} changed (orders, revenue), 0 only old, 0 only new"
    )
    return by, result.message


@pytest.mark.spark
def test_a_partition_the_broker_no_longer_holds_is_skipped_and_the_rest_replayed(
    tmp_path: Path,
    broker: Broker,  # noqa: F811
) -> None:
    """The topic was created again with less after s2: partition 1 holds offsets up to 349 of the
    job's 500, partition 2 none of the span (150 records, the job had read 200 at s1). Before,
    the replay failed on the second (data loss); now it replays partition 0 whole and partition 1
    up to its end, says which offsets it did not replay, and diffs the rest."""
    broker.create_topic("orders", 3)
    manager = Manager(settings(tmp_path / "home"))
    try:
        start_job(
            manager, broker.bootstrap, lambda ids: broker.produce("orders", [(i % 3, order(i)) for i in ids])
        )
        run(manager, "ALTER JOB k SUSPEND;")

        # The topic again, with the same records at the same offsets, but fewer of them.
        broker.delete_topic("orders")
        broker.create_topic("orders", 3)
        held = {0: 500, 1: 350, 2: 150}  # records per partition now

        def kept(i: int) -> bool:
            return i // 3 < held[i % 3]

        broker.produce("orders", [(i % 3, order(i)) for i in range(0, 1500) if kept(i)])
        assert broker.high_watermarks("orders") == held

        by, message = replay_what_is_held(manager, kept)
        assert by[("not replayed", "orders")] == [
            "topic 'orders' partition 1: offsets 200 to 499 wanted, the partition ends at offset 350 (the "
            "topic deleted and created again, or truncated?): offsets 350 to 499 (150 records) not replayed",
            "topic 'orders' partition 2: offsets 200 to 499 wanted, the partition ends at offset 150 (the "
            "topic deleted and created again, or truncated?): offsets 200 to 499 (300 records) not replayed",
        ]
        assert by[("replayed", "orders")][0].startswith(
            "replays 3 partitions, 600 records (next offsets 0:200, 1:200, 2:200) -> "
            "3 partitions, 1,050 records (next offsets 0:500, 1:350, 2:200)"
        )
        assert "partial: 2 part(s) of the input of source(s) orders are no longer held" in message
    finally:
        manager.close()

    # `pitstop test` with the filter: the change it expects, over part of the span: inconclusive
    # (exit 3; it was 0 before), named.
    job = tmp_path / "k.sql"
    filtered = revenue_select("'6' HOUR", "WHERE amount >= 50")
    job.write_text(f"CREATE JOB k AS INSERT INTO out {filtered};")
    done = pitstop(
        "test", str(job), "--snapshot", "s1", "--until", "s2", "--expect", "changes", home=tmp_path / "home"
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().endswith(
        "inconclusive: the outcome is the one expected (changes), but part of the input is no longer "
        "held (see 'not replayed')"
    )


# -- noida-db: records deleted as retention deletes them (no Spark) -----------------------------------
@pytest.fixture
def noida(tmp_path: Path) -> Iterator[Broker]:
    """noida-db whatever ``PITSTOP_KAFKA_BROKER`` says: unlike Tansu it answers DeleteRecords
    (``AdminClient.delete_records``), as retention would."""
    started = start_broker(tmp_path / "noida", kind="noida")
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.spark
def test_offsets_deleted_by_retention_after_the_snapshot_are_skipped_and_the_rest_replayed(
    tmp_path: Path, noida: Broker
) -> None:
    """Retention deleted partition 1's offsets below 350 and all of partition 2's (to 500) while
    the job ran on: the replay from s1 (offsets 200) reads partition 0 whole and partition 1 from
    350, and names what retention took. Before, it failed on the source's data-loss sentence."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": noida.bootstrap})
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(10)

    def produce(ids: list[int]) -> None:
        producer = Producer({"bootstrap.servers": noida.bootstrap})
        for i in ids:
            producer.produce("orders", value=json.dumps(order(i)).encode(), partition=i % 3)
        assert producer.flush(30) == 0

    manager = Manager(settings(tmp_path / "home"))
    try:
        start_job(manager, noida.bootstrap, produce)
        gone = {1: 350, 2: 500}  # each partition's earliest offset now
        for f in admin.delete_records([TopicPartition("orders", p, o) for p, o in gone.items()]).values():
            f.result(10)

        by, message = replay_what_is_held(manager, lambda i: i // 3 >= gone.get(i % 3, 0))
        assert by[("not replayed", "orders")] == [
            "topic 'orders' partition 1: offsets 200 to 499 wanted, earliest retained 350: offsets 200 to "
            "349 (150 records) not replayed (deleted by retention)",
            "topic 'orders' partition 2: offsets 200 to 499 wanted, earliest retained 500: offsets 200 to "
            "499 (300 records) not replayed (deleted by retention)",
        ]
        assert "partial: 2 part(s) of the input of source(s) orders are no longer held" in message
        assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("k", "RUNNING")]
    finally:
        manager.close()


def test_offsets_deleted_by_retention_are_named_and_a_replay_s_reader_reads_on_past_them(
    tmp_path: Path, noida: Broker
) -> None:
    """Partition 0 lost offsets 0-5 to retention, partition 1 nothing: a replay of offsets 2-9
    of each says partition 0's offsets 2-5 are gone and reads 6-9 of it; the replay's reader,
    which starts at offset 2 as the snapshot says, neither fails nor reads anything else."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql.types import StructType

    admin = AdminClient({"bootstrap.servers": noida.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(10)
    producer = Producer({"bootstrap.servers": noida.bootstrap})
    for i in range(20):
        producer.produce("orders", value=json.dumps(order(i)).encode(), partition=i % 2)
    assert producer.flush(10) == 0
    for f in admin.delete_records([TopicPartition("orders", 0, 6)]).values():
        f.result(10)
    mapping = Mapping("orders", "kafka", (), None, {"bootstrap.servers": noida.bootstrap, "topic": "orders"})
    start, end = {"0": 2, "1": 2}, {"0": 10, "1": 10}
    held = CONNECTOR.replayable(mapping, start, end)
    assert held.end == end
    assert held.missing == (
        "topic 'orders' partition 0: offsets 2 to 9 wanted, earliest retained 6: offsets 2 to 5 "
        "(4 records) not replayed (deleted by retention)",
    )

    # The replay's reader: started at the snapshot's offsets, fenced at the span's end.
    replay = CONNECTOR.for_replay(mapping)
    options = {
        **CONNECTOR.reader_options(replay, start),
        "source": "orders",
        "run_dir": str(tmp_path / "run"),
    }
    assert options["on_data_loss"] == "skip"
    schema = StructType.fromJson(
        {"type": "struct", "fields": [{"name": "order_id", "type": "long", "nullable": True, "metadata": {}}]}
    )
    reader = KafkaStreamReader(schema, options)
    try:
        first = reader.initialOffset()
        latest = reader.latestOffset(first)
        assert latest["pos"] == {"0": 10, "1": 10}
        parts = reader.partitions(first, latest)
        assert [(p.partition, p.start, p.end) for p in parts] == [(0, 6, 10), (1, 2, 10)]
        read = {
            p.partition: [r for batch in reader.read(p) for r in batch.column("order_id").to_pylist()]
            for p in parts
        }
    finally:
        reader.stop()
    assert read == {0: [12, 14, 16, 18], 1: [5, 7, 9, 11, 13, 15, 17, 19]}

    # A job's reader (not a replay's) still fails on it, naming what is lost.
    strict = KafkaStreamReader(
        schema,
        {**CONNECTOR.reader_options(mapping, start), "source": "orders", "run_dir": str(tmp_path / "job")},
    )
    try:
        with pytest.raises(Exception, match="offsets 2 to 5 were deleted before the job read them"):
            strict.latestOffset(strict.initialOffset())
    finally:
        strict.stop()


def test_a_partition_at_a_fence_right_at_its_end_holds_no_other_back(tmp_path: Path, broker: Broker) -> None:  # noqa: F811
    """A replay fences each partition at the span's end, which is often the partition's end (all a
    topic created again with less still holds): such a partition, read to its fence, is done, not
    the slowest active partition. It held the others back to its time plus the drift, until the
    idle timeout (30 s by default) made it idle, in each side of the replay."""
    from pyspark.sql.types import StructType

    broker.create_topic("orders", 2)
    broker.produce("orders", [(0, order(i)) for i in range(4)] + [(1, order(i)) for i in range(10)])
    mapping = Mapping("orders", "kafka", (), None, {"bootstrap.servers": broker.bootstrap, "topic": "orders"})
    run_dir = tmp_path / "run"
    positions.write_fence(positions.source_dir(run_dir, "orders"), {"0": 4, "1": 10})
    options = {
        **CONNECTOR.reader_options(CONNECTOR.for_replay(mapping), {"0": 4, "1": 0}),
        "source": "orders",
        "run_dir": str(run_dir),
        "event_time": "ts",
        "max_drift_us": str(5 * 60 * 10**6),  # 5 minutes: 3.3 orders
    }
    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": "order_id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
            ],
        }
    )
    reader = KafkaStreamReader(schema, options)
    try:
        first = reader.initialOffset()
        assert first["pos"] == {"0": 4, "1": 0}
        # Partition 0 is at its fence (and end), at 4.5 minutes: partition 1 reads to its fence,
        # not to its first record past 4.5 + 5 minutes (offset 7).
        assert reader.latestOffset(first)["pos"] == {"0": 4, "1": 10}
    finally:
        reader.stop()
