"""INSERT INTO a Kafka mapping on a real broker (tests/kafka_helpers.py) and real Spark: the windows
a consumer reads (``isolation.level=read_committed``) equal a batch computation, once each, after a
kill -9 of a real ``pitstop run`` in the middle of a batch, and across DROP JOB ... WITH SNAPSHOT
and CREATE JOB ... FROM SNAPSHOT into the same topic.

These tests depend on the broker's transactions, so they run on noida-db by default, whose aborted
transactions stay hidden as on Apache Kafka: a batch cut short is all or nothing. On Tansu
(``PITSTOP_KAFKA_BROKER=tansu``) an aborted transaction's records become visible, and the sink's
exactly once rests on its read-back per (run, batch) (:mod:`pitstop.connectors.kafka.sink`): the
killed batch's transaction is ended by the next producer, its records show, and only the rest of
the batch is written. What each broker does with transactions: the last test, and kafka_helpers."""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from command_helpers import pitstop
from conftest import (
    DELAY,
    batch_windows,
    closed,
    make_orders,
    orders_mapping,
    revenue_select,
    run,
    write_outcome,
)
from kafka_helpers import KINDS, Broker, broker, start_broker  # noqa: F401 - the fixture
from pitstop import faults
from pitstop.connectors.kafka.ledger import HEADERS, Ledger, transactional_id
from pitstop.manager import Manager

HOUR = timedelta(hours=1)
STEP = 90  # seconds between orders (make_orders' default)


def read_topic(
    b: Broker, topic: str, start: int = 0
) -> list[tuple[bytes | None, dict[str, Any], dict[str, str]]]:
    """Every record a read_committed consumer sees from offset ``start`` of each partition, as
    (key, value, headers), partition by partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "pitstop-tests",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    out = []
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, start) for p in partitions])
        left = set(partitions)
        while left:
            m = consumer.poll(30)
            assert m is not None, f"no end of partitions {left} of topic '{topic}' within 30 s"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                left.discard(m.partition())
                continue
            headers = {k: v.decode() for k, v in (m.headers() or [])}
            out.append((m.key(), json.loads(m.value()), headers))
    finally:
        consumer.close()
    return out


noida = pytest.mark.kafka_broker("noida")  # transactions as Apache Kafka's (kafka_helpers)


def topic_windows(b: Broker, topic: str) -> dict[tuple[datetime, str], tuple[Decimal, int]]:
    """The windows in a topic, keyed like conftest.sink_windows; fails on a window seen twice."""
    out: dict[tuple[datetime, str], tuple[Decimal, int]] = {}
    for _key, value, _headers in read_topic(b, topic):
        window = (datetime.fromisoformat(value["window_start"]), value["region"])
        assert window not in out, f"window {window} read twice from topic '{topic}'"
        out[window] = (Decimal(str(value["revenue"])).quantize(Decimal("0.01")), int(value["orders"]))
    return out


def expected(count: int) -> dict[tuple[datetime, str], tuple[Decimal, int]]:
    orders = [make_orders.order(i, STEP) for i in range(count)]
    watermark = make_orders.EPOCH + timedelta(seconds=(count - 1) * STEP) - DELAY
    return closed(batch_windows(orders, HOUR), HOUR, watermark)


def kafka_sink(b: Broker, topic: str = "revenue", options: str = "") -> str:
    return (
        f"CREATE MAPPING {topic} TYPE Kafka OPTIONS ('bootstrap.servers'='{b.bootstrap}', "
        f"'topic'='{topic}', 'keyColumn'='region'{options});\n"
    )


# -- real broker, real Spark ----------------------------------------------------------------------
@noida
@pytest.mark.spark
def test_windowed_job_into_kafka_equals_batch_computation(
    manager: Manager,
    broker: Broker,  # noqa: F811
    tmp_path: Path,
) -> None:
    broker.create_topic("orders", 3)
    broker.create_topic("revenue", 2)
    broker.produce("orders", [(i % 3, make_orders.order(i, STEP)) for i in range(600)])
    run(
        manager,
        f"""
        CREATE MAPPING orders (
            order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
            WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
        ) TYPE Kafka OPTIONS ('bootstrap.servers'='{broker.bootstrap}', 'topic'='orders');
        {kafka_sink(broker)}
        CREATE JOB j AS INSERT INTO revenue {revenue_select("'1' HOUR")};
        AWAIT JOB j;
        """,
    )
    want = expected(600)
    assert topic_windows(broker, "revenue") == want
    assert len(want) > 20
    records = read_topic(broker, "revenue")
    # Keyed by region; each record names its job, run, branch and batch, and its place in it.
    assert {k for k, _, _ in records} == {v["region"].encode() for _, v, _ in records}
    assert all(set(h) == set(HEADERS) and h["pitstop.job"] == "j" for _, _, h in records)
    per_batch = Counter((h["pitstop.run"], h["pitstop.batch"]) for _, _, h in records)
    for _, _, h in records:
        assert per_batch[(h["pitstop.run"], h["pitstop.batch"])] == int(h["pitstop.count"])
    run_id = manager.catalog.get_job("j").run_id  # type: ignore[union-attr]
    ledger = Ledger.load(Path(manager.catalog.get_run(run_id).folder) / "branches" / "0" / "kafka-sink.json")
    assert ledger.writing is None and ledger.written == max(int(b) for _, b in per_batch)
    run(manager, "DROP JOB j;")


@noida
@pytest.mark.spark
def test_kill_9_in_the_middle_of_a_batch_then_every_window_once(broker: Broker, tmp_path: Path) -> None:  # noqa: F811
    """A real ``pitstop run`` dies of SIGKILL with half a batch delivered; the next one resumes the
    job and completes the batch. Two branches: one with transactions, one without."""
    home, folder = tmp_path / "home", tmp_path / "orders"
    broker.create_topic("revenue", 2)
    broker.create_topic("plain", 2)
    make_orders.write_orders(folder, 0, 240, files=1, prefix="o00000")
    select = revenue_select("'1' HOUR")
    setup = (
        orders_mapping(folder)
        + kafka_sink(broker)
        + kafka_sink(broker, "plain", ", 'transactions'='false'")
        + f"CREATE JOB j AS BEGIN INSERT INTO revenue {select}; INSERT INTO plain {select}; END;\n"
    )
    wait = "AWAIT JOB j TIMEOUT INTERVAL '240' SECOND;"
    crash = {"PITSTOP_CRASH_AT": "sink.half_written"}
    died = pitstop("run", "-c", setup + wait, home=home, env=crash, process=True)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert "crash point sink.half_written" in died.stderr
    everything = expected(240)
    for topic in ("revenue", "plain"):  # what shows is right, and nothing twice
        shown = topic_windows(broker, topic)
        assert {k: everything.get(k) for k in shown} == shown
    make_orders.write_orders(folder, 240, 300, files=1, prefix="o00240")
    done = pitstop("run", "-c", wait + "SHOW JOBS;", home=home)  # in this process
    assert done.returncode == 0, done.stderr[-3000:]
    assert "was cut short" in done.stderr  # the resumed run read the cut batch back
    print("\n".join(line for line in done.stderr.splitlines() if "cut short" in line))  # pytest -s
    assert topic_windows(broker, "revenue") == expected(300)
    assert topic_windows(broker, "plain") == expected(300)


@noida
@pytest.mark.spark
def test_snapshot_and_restore_into_the_same_topic_write_no_window_twice(
    manager: Manager,
    broker: Broker,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "orders"
    broker.create_topic("revenue", 2)
    make_orders.write_orders(folder, 0, 240, files=2, prefix="a")
    select = revenue_select("'1' HOUR")
    run(
        manager,
        orders_mapping(folder)
        + kafka_sink(broker)
        + f"""CREATE JOB j AS INSERT INTO revenue {select};
        AWAIT JOB j;
        DROP JOB j WITH SNAPSHOT s;""",
    )
    before = topic_windows(broker, "revenue")
    assert before == expected(240)
    make_orders.write_orders(folder, 240, 400, files=2, prefix="b")
    run(manager, f"CREATE JOB j FROM SNAPSHOT s AS INSERT INTO revenue {select}; AWAIT JOB j;")
    assert topic_windows(broker, "revenue") == expected(400)  # the window open at the cut: once
    runs = {h["pitstop.run"] for _, _, h in read_topic(broker, "revenue")}
    assert len(runs) == 2  # both runs wrote; the restored one only windows closed after the cut
    run(manager, "DROP JOB j;")


# -- the sink on a real broker, without Spark -------------------------------------------------------
def _sink(b: Broker, run_dir: Path, transactions: bool = True, run_id: str = "j-run1") -> Any:
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.kafka.sink import KafkaSink

    mapping = Mapping("out", "kafka", (), None, {"bootstrap.servers": b.bootstrap, "topic": "out"})
    sink = KafkaSink(
        mapping, {"bootstrap.servers": b.bootstrap}, "j", run_id, run_dir, 0, "k", "varchar", transactions
    )
    sink.prepare([("k", "string"), ("n", "bigint")])
    return sink


def _batch(first: int, last: int) -> Any:
    import pyarrow as pa

    return pa.table({"k": [f"key{i % 5}" for i in range(first, last)], "n": list(range(first, last))})


def _numbers(b: Broker) -> list[int]:
    return sorted(v["n"] for _, v, _ in read_topic(b, "out"))


@noida
@pytest.mark.parametrize("transactions", [True, False], ids=["transactions", "idempotent"])
def test_a_batch_cut_half_way_is_completed_not_doubled(
    broker: Broker,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    transactions: bool,
) -> None:
    """Each record once, as read_committed sees it, after a write cut short at either of the
    sink's two fragile points. (After its transaction committed first: a read-back that starts
    past an aborted transaction's end misses records on noida-db, a broker limit: kafka_helpers.)"""
    broker.create_topic("out", 3)
    ledger_path = tmp_path / "branches" / "0" / "kafka-sink.json"
    first = _sink(broker, tmp_path, transactions)
    first.write(_batch(0, 40), 0)
    assert _numbers(broker) == list(range(40))
    # Batch 1 fails once its transaction committed, before the ledger says so: the next attempt
    # reads it back whole and writes nothing.
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv(faults.FAULT_ENV, "sink.after_commit:EIO")
    with pytest.raises(OSError):
        first.write(_batch(40, 50), 1)
    monkeypatch.delenv(faults.FAULT_ENV)
    assert Ledger.load(ledger_path).writing == 1
    with caplog.at_level("WARNING", logger="pitstop.connectors.kafka.sink"):
        _sink(broker, tmp_path, transactions).write(_batch(40, 50), 1)
    assert "10 of its 10 records are in the topic" in caplog.text
    assert _numbers(broker) == list(range(50))
    # Batch 2 fails once half its records are delivered (a process killed there leaves the same).
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv(faults.FAULT_ENV, "sink.half_written:EIO")
    again = _sink(broker, tmp_path, transactions)
    with pytest.raises(OSError):
        again.write(_batch(50, 110), 2)
    monkeypatch.delenv(faults.FAULT_ENV)
    ledger = Ledger.load(ledger_path)
    assert (ledger.written, ledger.writing) == (1, 2)
    seen = _numbers(broker)
    # The failed write aborted its transaction: hidden on noida-db (as on Apache Kafka), shown on
    # Tansu 0.6; without transactions the delivered half shows. Nothing twice either way.
    assert len(seen) == len(set(seen)) and set(range(50)) <= set(seen) <= set(range(110)), seen
    assert len(seen) == (50 if transactions and broker.hides_aborted else 80), seen
    # What a restarted process does: a new sink on the same ledger gets batch 2 again.
    caplog.clear()
    resumed = _sink(broker, tmp_path, transactions)
    with caplog.at_level("WARNING", logger="pitstop.connectors.kafka.sink"):
        resumed.write(_batch(50, 110), 2)
    assert _numbers(broker) == list(range(110))  # each record once, as read_committed sees it
    # The read-back found the delivered half: always without transactions; with them only on a
    # broker that shows an aborted transaction's records (Tansu 0.6; noida-db finds none).
    found = "0 of its 60 records" if transactions and broker.hides_aborted else "30 of its 60 records"
    assert f"{found} are in the topic" in caplog.text, caplog.text
    resumed.write(_batch(50, 110), 2)  # Spark replays a batch written but not committed: skipped
    assert _numbers(broker) == list(range(110))
    assert Ledger.load(ledger_path).written == 2


def test_a_batch_waits_while_the_broker_hangs_and_is_written_once_when_it_answers(
    broker: Broker,  # noqa: F811
    tmp_path: Path,
) -> None:
    broker.create_topic("out", 3)
    sink = _sink(broker, tmp_path)
    sink.write(_batch(0, 40), 0)
    broker.pause()  # SIGSTOP: connections stay open, nothing is answered
    done: list[BaseException | None] = []
    writer = threading.Thread(target=lambda: done.append(write_outcome(sink, _batch(40, 100), 1)))
    try:
        writer.start()
        said = threading.Event()
        while not said.wait(0.1):  # the sink says it waits (an event, not a sleep)
            if sink.waiting is not None:
                said.set()
        assert writer.is_alive() and f"waiting for Kafka at {broker.bootstrap}" in (sink.waiting or "")
    finally:
        broker.resume()
    writer.join(120)
    assert done == [None] and sink.waiting is None
    assert _numbers(broker) == list(range(100))
    # A run that stops while a batch waits: the batch gives up, unwritten; the resumed run's
    # sink (same ledger) writes it once.
    broker.pause()
    try:
        writer = threading.Thread(target=lambda: done.append(write_outcome(sink, _batch(100, 120), 2)))
        writer.start()
        while sink.waiting is None and writer.is_alive():
            writer.join(0.1)
        sink.interrupt()
        writer.join(60)
        assert len(done) == 2 and "written when the job resumes" in str(done[-1])
    finally:
        broker.resume()
    sink.close()
    _sink(broker, tmp_path).write(_batch(100, 120), 2)
    assert _numbers(broker) == list(range(120))


@noida
def test_a_second_producer_of_a_branch_fences_the_first(broker: Broker, tmp_path: Path) -> None:  # noqa: F811
    from confluent_kafka import KafkaException

    broker.create_topic("out", 2)
    zombie = _sink(broker, tmp_path / "a")
    zombie.write(_batch(0, 10), 0)
    successor = _sink(broker, tmp_path / "b", run_id="j-run2")  # same job, sink and branch
    successor.write(_batch(10, 20), 0)
    assert zombie._producer is not None
    with pytest.raises(KafkaException, match="PRODUCER_FENCED|fenced"):
        zombie.write(_batch(100, 110), 1)
    assert _numbers(broker) == list(range(20))
    assert transactional_id("j", "out", 0) == "pitstop.j.out.0"


def test_the_sink_checks_the_jobs_columns_against_the_mapping(tmp_path: Path) -> None:
    from pitstop.catalog.rows import ColumnDef, Mapping
    from pitstop.connectors.kafka.sink import KafkaSink
    from pitstop.errors import PlanError

    def sink(columns: tuple[ColumnDef, ...], key: str | None, key_format: str = "varchar") -> KafkaSink:
        mapping = Mapping("out", "kafka", columns, None, {"bootstrap.servers": "127.0.0.1:1", "topic": "out"})
        return KafkaSink(mapping, {}, "j", "r", tmp_path, 0, key, key_format, True)

    schema = [("window_start", "timestamp"), ("region", "string"), ("orders", "bigint")]
    sink((), "region").prepare(schema)  # no columns declared: every column the job writes
    sink((ColumnDef("region", "VARCHAR"), ColumnDef("__key", "VARCHAR")), "REGION").prepare(schema)
    sink((), "orders", "bigint").prepare(schema)
    with pytest.raises(PlanError, match=r"declares column\(s\) revenue that the job does not write"):
        sink((ColumnDef("revenue", "DOUBLE"),), None).prepare(schema)
    with pytest.raises(PlanError, match="'keyColumn'='user' is not a column the job writes"):
        sink((), "user").prepare(schema)
    with pytest.raises(PlanError, match="'keyFormat'='bigint' needs a whole-number 'keyColumn'; 'region'"):
        sink((), "region", "bigint").prepare(schema)


@pytest.mark.parametrize("kind", KINDS)
def test_the_brokers_transactions_are_as_kafka_helpers_says(tmp_path: Path, kind: str) -> None:
    """The experiment behind the sink's design, kept, on each broker the tests know (whatever
    PITSTOP_KAFKA_BROKER says): what it does with transactions. If a broker changes, this fails:
    say so in the README and kafka_helpers."""
    from confluent_kafka import KafkaException, Producer

    broker = start_broker(tmp_path / kind, kind=kind)  # noqa: F811 - both kinds, not the fixture's

    def producer(tid: str) -> Any:
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})
        p.init_transactions(10)
        return p

    def values(topic: str, start: int = 0) -> list[str]:
        return [v["v"] for _, v, _ in read_topic(broker, topic, start)]

    def send(p: Any, topic: str, *vs: str) -> None:
        for v in vs:
            p.produce(topic, value=json.dumps({"v": v}).encode(), partition=0)
        p.flush(10)

    hidden = broker.hides_aborted
    try:
        broker.create_topic("t", 1)
        a = producer("tx")
        a.begin_transaction()
        send(a, "t", "c0", "c1")
        assert values("t") == []  # an open transaction is hidden from read_committed
        a.commit_transaction(10)
        assert values("t") == ["c0", "c1"]  # offsets 0, 1; the commit marker 2
        a.begin_transaction()
        send(a, "t", "a0")  # offset 3
        a.abort_transaction(10)  # the abort marker: 4
        assert values("t") == ["c0", "c1"] + ([] if hidden else ["a0"])  # Tansu's bug: shown
        a.begin_transaction()
        send(a, "t", "z0")  # offset 5: a producer that dies with its transaction open ...
        b = producer("tx")  # ... is fenced by the next one, which ends its transaction (marker 6)
        with pytest.raises(KafkaException, match="PRODUCER_FENCED|fenced"):
            send(a, "t", "z1")
            a.commit_transaction(10)
        assert values("t") == ["c0", "c1"] + ([] if hidden else ["a0", "z0"])  # ended, and shown
        b.begin_transaction()
        send(b, "t", "b0")  # offset 7
        b.commit_transaction(10)
        assert values("t") == ["c0", "c1"] + ([] if hidden else ["a0", "z0"]) + ["b0"]
        # A reader that starts past the aborted transactions' markers: noida-db still names them
        # as aborted in its fetch (Apache Kafka names only those that end after the fetch's
        # start), so librdkafka hides the committed b0 of the same producer id: noida-db's bug.
        assert values("t", start=7) == ([] if hidden else ["b0"])
    finally:
        broker.stop()
