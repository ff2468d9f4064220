"""TYPE Kafka on a real broker (tests/kafka_helpers.py: Tansu, or noida-db where the test depends on
the broker's offsets) and real Spark: windowed jobs, the pit stop with producers writing, a
partition added after a snapshot, malformed values, and the mapping's options."""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import DELAY, EPOCH, batch_windows, closed, make_orders, run, sink_windows, until
from kafka_helpers import Broker, broker  # noqa: F401 - the fixture
from pitstop.connectors.kafka.connector import KAFKA_POSITIONS
from pitstop.errors import PitstopError, PlanError
from pitstop.manager import Manager

STEP = 90  # seconds between orders
SIX_HOURS = timedelta(hours=6)
HOUR = timedelta(hours=1)


def orders(first: int, last: int) -> list[dict[str, object]]:
    return [make_orders.order(i, STEP) for i in range(first, last)]


def spread(first: int, last: int, partitions: int = 3) -> list[tuple[int, object]]:
    """Order ``i`` to partition ``i % partitions``: each partition in event-time order."""
    return [(i % partitions, make_orders.order(i, STEP)) for i in range(first, last)]


def watermark_after(last_id: int):  # noqa: ANN201 - a datetime
    return EPOCH + timedelta(seconds=(last_id - 1) * STEP) - DELAY


def kafka_orders(b: Broker, topic: str = "orders", extra: str = "") -> str:
    return f"""
    CREATE MAPPING orders (
        order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP, {extra}
        WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
    ) TYPE Kafka OPTIONS ('bootstrap.servers'='{b.bootstrap}', 'topic'='{topic}', 'valueFormat'='json');
    """


def revenue(size: str, more: str = "") -> str:
    return f"""
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders{more}
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL {size}))
    GROUP BY window_start, window_end, region
    """


# -- options (no Spark) ---------------------------------------------------------------------------
def test_checking_a_kafka_mapping_s_client_properties_neither_connects_nor_prints(tmp_path: Path) -> None:
    """`pitstop check` (and CREATE MAPPING) ask librdkafka whether it knows each passed-through
    property: a client built only for that connected to the broker in the background and
    librdkafka wrote its own log lines (`%3|...|FAIL|rdkafka#producer-1| ... Connection refused`)
    over the command's output. A real process (librdkafka writes to its file descriptor 2) and a
    real listening socket as the broker, which must see no connection."""
    import socket

    from command_helpers import pitstop

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    sql = tmp_path / "kafka.sql"
    sql.write_text(
        "CREATE MAPPING clicks (user_id BIGINT) TYPE Kafka OPTIONS ("
        f"'bootstrap.servers'='127.0.0.1:{port}', 'topic'='clicks', 'security.protocol'='PLAINTEXT',"
        " 'client.id'='checked');\n"
    )
    try:
        done = pitstop("check", str(sql), home=tmp_path / "home", process=True)
        assert done.returncode == 0, done.stderr
        assert "rdkafka" not in done.stderr + done.stdout, done.stderr
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


def test_kafka_mapping_checks_options_and_passes_client_properties_through(manager: Manager) -> None:
    good = """CREATE MAPPING clicks (user_id BIGINT, __key VARCHAR, __partition INT, __offset BIGINT,
        __timestamp TIMESTAMP) TYPE Kafka OPTIONS ('bootstrap.servers'='127.0.0.1:1', 'topic'='clicks',
        'security.protocol'='PLAINTEXT', 'fetch.min.bytes'='1', 'auto.offset.reset'='LATEST');"""
    run(manager, good)
    stored = manager.catalog.get_mapping("clicks")
    assert stored is not None
    assert stored.options == {
        "bootstrap.servers": "127.0.0.1:1",
        "topic": "clicks",
        "security.protocol": "PLAINTEXT",
        "fetch.min.bytes": "1",
        "auto.offset.reset": "latest",
    }
    from pitstop.connectors.registry import connector

    assert connector("kafka").client(stored) == {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "PLAINTEXT",
        "fetch.min.bytes": "1",
    }

    def create(options: str, columns: str = "user_id BIGINT") -> None:
        run(manager, f"CREATE OR REPLACE MAPPING m ({columns}) TYPE Kafka OPTIONS ({options});")

    base = "'bootstrap.servers'='127.0.0.1:1', 'topic'='t'"
    with pytest.raises(PlanError, match=r"unknown option 'valueFormats' \(did you mean 'valueFormat'\?\)"):
        create(base + ", 'valueFormats'='json'")
    with pytest.raises(
        PlanError, match=r"unknown option 'bootstrap.server' \(did you mean 'bootstrap.servers'\?\)"
    ):
        create("'bootstrap.server'='127.0.0.1:1', 'topic'='t'")
    with pytest.raises(PlanError, match="option 'security.protocl'='SSL' is refused by the Kafka client: .*"):
        create(base + ", 'security.protocl'='SSL'")
    with pytest.raises(PlanError, match=r"TYPE Kafka needs OPTIONS \('topic'='...'\)"):
        create("'bootstrap.servers'='127.0.0.1:1'")
    with pytest.raises(PlanError, match="option 'auto.offset.reset' is 'middle'; it takes earliest | latest"):
        create(base + ", 'auto.offset.reset'='middle'")
    with pytest.raises(PlanError, match="column '__offset' is STRING; it must be BIGINT"):
        create(base, "user_id BIGINT, __offset VARCHAR")
    with pytest.raises(PlanError, match="names starting with '__' are kept for the record's metadata"):
        create(base, "user_id BIGINT, __topic VARCHAR")


def test_kafka_positions_compare_per_partition() -> None:
    p = KAFKA_POSITIONS
    assert p.furthest({"0": 5, "1": 2}, {"1": 4, "2": 1}) == {"0": 5, "1": 4, "2": 1}
    assert p.least({"0": 5, "1": 2}, {"1": 4}) == {"0": 0, "1": 2}
    assert p.covers({"0": 5, "1": 4}, {"0": 5, "1": 4, "2": 0})
    assert not p.covers({"0": 5}, {"0": 5, "1": 1})  # a missing partition has read nothing
    assert p.same({"0": 3, "1": 0}, {"0": 3})
    assert (
        p.text({"0": 3, "1": 4, "2": 5}, "records") == "3 partitions, 12 records (next offsets 0:3, 1:4, 2:5)"
    )


# -- real broker, real Spark ----------------------------------------------------------------------
@pytest.mark.spark
def test_windowed_job_on_three_partitions_equals_batch_computation(manager: Manager, broker: Broker) -> None:  # noqa: F811
    broker.create_topic("orders", 3)
    broker.produce("orders", spread(0, 900))
    bad = [
        (1, b'{"order_id": 5000, "region": "eu", "amount": "lots", "ts": "2024-01-01 00:00:00"}'),
        (2, b"{oops"),
    ]
    broker.produce("orders", bad)
    broker.produce("orders", spread(900, 1200))
    run(
        manager,
        kafka_orders(broker, extra="__partition INT, __offset BIGINT,")
        + f"""
        CREATE MAPPING revenue TYPE DuckDB;
        CREATE JOB j AS INSERT INTO revenue {revenue("'6' HOUR")};
        AWAIT JOB j;
        """,
    )
    expected = closed(batch_windows(orders(0, 1200), SIX_HOURS), SIX_HOURS, watermark_after(1200))
    assert sink_windows(manager, "revenue") == expected
    assert len(expected) > 10
    # The two malformed values are kept out, named by partition and offset.
    _, rows = manager.catalog.query(
        "SELECT file, line, reason FROM pitstop.rejects WHERE job = 'j' ORDER BY file"
    )
    assert [(f, n) for f, n, _ in rows] == [
        ("topic 'orders' partition 1", 300),
        ("topic 'orders' partition 2", 300),
    ]
    assert "column 'amount' is DECIMAL(12,2) but the value is \"lots\"" in rows[0][2]
    assert "not valid JSON" in rows[1][2]
    run(manager, "DROP JOB j;")


def _producer(b: Broker, first: int, last: int, stop: threading.Event) -> threading.Thread:
    def write() -> None:
        producer = b.producer()
        for i in range(first, last):
            producer.produce("orders", value=json.dumps(make_orders.order(i, STEP)).encode(), partition=i % 3)
            producer.poll(0)
            if i % 50 == 0:
                producer.flush(10)
                time.sleep(0.2)
        producer.flush(30)
        stop.set()

    thread = threading.Thread(target=write, name="orders-producer", daemon=True)
    thread.start()
    return thread


@pytest.mark.spark
def test_pit_stop_on_kafka_while_producers_write(manager: Manager, broker: Broker) -> None:  # noqa: F811
    start_revenue(manager, broker)
    done = threading.Event()
    writer = _producer(broker, 600, 1400, done)
    time.sleep(1.0)  # the job reads while the producer writes
    assert not done.is_set(), "the producer finished before the snapshot: make it slower"
    run(manager, "DROP JOB j WITH SNAPSHOT s;")
    writer.join(120)
    assert done.is_set()
    manifest = json.loads((Path(manager.settings.home) / "snapshots" / "s" / "manifest.json").read_text())
    cut = manifest["sources"]["orders"]["pos"]
    assert sorted(cut) == ["0", "1", "2"]
    assert 600 <= sum(cut.values()) < 1400  # cut while records were arriving
    described = dict(run(manager, "DESCRIBE SNAPSHOT s;")[0].rows)
    assert described["source orders"].startswith(f"3 partitions, {sum(cut.values()):,} records")

    broker.produce("orders", spread(1400, 1800))
    hourly = revenue("'1' HOUR")
    run(
        manager,
        f"""CREATE MAPPING hourly TYPE DuckDB;
        CREATE JOB j FROM SNAPSHOT s AS BEGIN
            INSERT INTO revenue {revenue("'6' HOUR")};
            INSERT INTO hourly {hourly};
        END;
        AWAIT JOB j;""",
    )
    wm = watermark_after(1800)
    expected = closed(batch_windows(orders(0, 1800), SIX_HOURS), SIX_HOURS, wm)
    assert sink_windows(manager, "revenue") == expected  # no record twice, none skipped
    # The new stage starts empty at the cut: order i is offset i // 3 of partition i % 3.
    after_cut = [o for o in orders(0, 1800) if int(o["order_id"]) // 3 >= cut[str(int(o["order_id"]) % 3)]]
    assert len(after_cut) == 1800 - sum(cut.values())
    expected_hourly = closed(batch_windows(after_cut, HOUR), HOUR, wm)
    assert sink_windows(manager, "hourly") == expected_hourly
    assert len(expected_hourly) > 20
    run(manager, "DROP JOB j;")


@pytest.mark.spark
def test_partition_added_after_snapshot_is_read_from_its_start(manager: Manager, broker: Broker) -> None:  # noqa: F811
    start_revenue(manager, broker)
    run(manager, "DROP JOB j WITH SNAPSHOT s;")
    # The broker cannot add a partition (no CreatePartitions): make the topic again with four,
    # holding the same records at the same offsets in partitions 0-2 (see kafka_helpers).
    broker.delete_topic("orders")
    broker.create_topic("orders", 4)
    broker.produce("orders", spread(0, 600))
    broker.produce("orders", spread(600, 1000, partitions=4))
    assert broker.high_watermarks("orders")[3] == 100
    again = revenue("'6' HOUR")
    run(manager, f"CREATE JOB j FROM SNAPSHOT s AS INSERT INTO revenue {again}; AWAIT JOB j;")
    expected = closed(batch_windows(orders(0, 1000), SIX_HOURS), SIX_HOURS, watermark_after(1000))
    assert sink_windows(manager, "revenue") == expected
    run(manager, "DROP JOB j;")


@pytest.mark.spark
def test_job_waits_while_the_broker_is_down_and_fails_when_it_comes_back_with_less(
    manager: Manager,
    broker: Broker,  # noqa: F811
) -> None:
    """The broker stops: the job waits for it (SHOW JOBS says so; AWAIT says it cannot learn the
    end offsets). It comes back empty (Tansu keeps topics in memory; noida-db's data folder is
    deleted, as a broker that lost its disk), its topic made again with
    fewer records than the job had read: the job fails naming each partition, where it went on
    before ("0 records behind") and would have skipped what is written below its positions. (A
    broker that comes back answering, with its records: the test of a hung broker, below.)"""
    start_revenue(manager, broker)
    broker.stop()
    until("SHOW JOBS says the broker does not answer", lambda: "does not answer" in (_lag_of(manager) or ""))
    assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("j", "RUNNING")]
    with pytest.raises(PitstopError, match="cannot learn the end offsets of topic 'orders'"):
        run(manager, "AWAIT JOB j;")
    back = broker.start_again(empty=True)
    try:
        back.create_topic("orders", 3)
        back.produce("orders", spread(0, 300))  # 100 per partition: the job had read 200 of each

        def failed() -> str | None:
            shown = run(manager, "SHOW JOBS;")[0]
            [row] = shown.rows
            return str(row[shown.columns.index("detail")]) if row[1] == "FAILED" else None

        detail = until("the job fails on the lost records", failed)
        # (The job may see a partition while it is being written: at an end below 100.)
        assert re.search(
            r"partition 0 ends at offset \d+, before offset 200 that the job had read to", detail
        )
        run(manager, "DROP JOB j;")
    finally:
        back.stop()


@pytest.mark.kafka_broker("noida")
@pytest.mark.spark
def test_job_reads_on_exactly_when_the_broker_comes_back_with_its_records(
    manager: Manager,
    broker: Broker,  # noqa: F811
) -> None:
    """The broker stops (SIGTERM) and starts again on its data (noida-db; Tansu keeps none): the
    job waits meanwhile, then reads what was written since from where it was, nothing twice."""
    if broker.kind != "noida":
        pytest.skip("Tansu keeps no records across a restart (tests/kafka_helpers.py)")
    start_revenue(manager, broker)
    broker.stop(graceful=True)
    until("SHOW JOBS says the broker does not answer", lambda: "does not answer" in (_lag_of(manager) or ""))
    back = broker.start_again()
    try:
        assert back.high_watermarks("orders") == {0: 200, 1: 200, 2: 200}
        back.produce("orders", spread(600, 1200))
        run(manager, "AWAIT JOB j;")
        expected = closed(batch_windows(orders(0, 1200), SIX_HOURS), SIX_HOURS, watermark_after(1200))
        assert sink_windows(manager, "revenue") == expected
        assert _lag_of(manager) == "orders: 0 records behind (3 partitions)"
        run(manager, "DROP JOB j;")
    finally:
        back.stop()


def _lag_of(manager: Manager) -> str | None:
    shown = run(manager, "SHOW JOBS;")[0]
    (row,) = shown.rows
    return row[shown.columns.index("lag")]


def start_revenue(manager: Manager, broker: Broker) -> None:  # noqa: F811
    """Topic ``orders`` (3 partitions, orders 0-599), and job ``j``: 6 h windows into ``revenue``,
    caught up."""
    broker.create_topic("orders", 3)
    broker.produce("orders", spread(0, 600))
    run(
        manager,
        kafka_orders(broker)
        + f"""
        CREATE MAPPING revenue TYPE DuckDB;
        CREATE JOB j AS INSERT INTO revenue {revenue("'6' HOUR")};
        AWAIT JOB j;
        """,
    )


@pytest.mark.spark
def test_latest_job_started_while_the_broker_is_down_waits_then_reads_from_the_end(
    manager: Manager,
    broker: Broker,  # noqa: F811
) -> None:
    broker.create_topic("orders", 3)
    broker.produce("orders", spread(0, 300))  # before the job: 'latest' does not read them
    broker.pause()  # hung: keeps its records, answers nothing
    try:
        run(
            manager,
            kafka_orders(broker).replace("'json')", "'json', 'auto.offset.reset'='latest')")
            + f"""
            CREATE MAPPING revenue TYPE DuckDB;
            CREATE JOB j AS INSERT INTO revenue {revenue("'6' HOUR")};
            """,
        )
        until("the lag says the broker is down", lambda: "does not answer" in (_lag_of(manager) or ""))
        assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("j", "RUNNING")]
        described = dict(run(manager, "DESCRIBE JOB j;")[0].rows)
        assert described["lag of orders"].startswith("broker does not answer since ")
        assert described["lag of orders"].endswith("the job waits for it")
        # pitstop.metrics does not know the lag while the broker is down: NULL, not 0.
        assert [(s.lag_records, s.lag) for s in manager.sample_metrics(force=True)] == [(None, None)]
    finally:
        broker.resume()
    # Back: the job learns the end offsets now, and reads from there.
    until("the job learns its start", lambda: _lag_of(manager) == "orders: 0 records behind (3 partitions)")
    broker.produce("orders", spread(300, 900))
    run(manager, "AWAIT JOB j;")
    expected = closed(batch_windows(orders(300, 900), SIX_HOURS), SIX_HOURS, watermark_after(900))
    assert sink_windows(manager, "revenue") == expected
    assert _lag_of(manager) == "orders: 0 records behind (3 partitions)"
    [sample] = manager.sample_metrics(force=True)  # per partition in pitstop.metrics
    assert (sample.lag_records, sample.lag) == (0, {"orders": {"0": 0, "1": 0, "2": 0}})
    run(manager, "DROP JOB j;")


def test_lag_is_the_end_offsets_minus_the_position(tmp_path: Path) -> None:
    """Without Spark: the files a running source keeps (its start and what the broker said)."""
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.kafka.connector import CONNECTOR
    from pitstop.connectors.kafka.names import BROKER, INITIAL

    mapping = Mapping("orders", "kafka", (), None, {"bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    assert CONNECTOR.lag(tmp_path, mapping, {}) == "end offsets not known yet"
    (tmp_path / INITIAL).write_text(json.dumps({"0": 2, "1": 0, "2": 40}))
    (tmp_path / BROKER).write_text(json.dumps({"ends": {"0": 10, "1": 7, "2": 40}, "checked": time.time()}))
    # Partition 0 at 5 (5 behind), 1 not read since the start at 0 (7 behind), 2 at its end.
    assert CONNECTOR.lag(tmp_path, mapping, {"0": 5}) == "12 records behind (3 partitions)"
    old = time.time() - 3600
    (tmp_path / BROKER).write_text(json.dumps({"ends": {"0": 10, "1": 7, "2": 41}, "checked": old}))
    assert CONNECTOR.lag(tmp_path, mapping, {"0": 10, "1": 7, "2": 40}).startswith(
        "1 records behind (3 partitions) as of "
    )
    (tmp_path / BROKER).write_text(json.dumps({"down_since": old, "error": "timed out", "checked": old}))
    assert "broker does not answer since" in CONNECTOR.lag(tmp_path, mapping, {"0": 5})


@pytest.mark.kafka_broker("noida")
@pytest.mark.spark
def test_a_topic_made_again_with_less_data_fails_the_job_or_is_read_from_its_start(
    manager: Manager,
    broker: Broker,  # noqa: F811
) -> None:
    """The broker comes back with less (the topic deleted and created again): the positions lie
    past the partition's end. SHOW JOBS said "0 records behind" and records written below the old
    positions were skipped; now the job fails naming what is lost, or with 'onDataLoss'='continue'
    reads the new partition from its start and says so in the log."""
    one = [(0, o) for o in orders(0, 50)]
    for topic in ("strict", "lenient"):
        broker.create_topic(topic, 1)
        broker.produce(topic, one)
    run(
        manager,
        kafka_orders(broker, "strict")
        + kafka_orders(broker, "lenient")
        .replace("orders (", "lenient (")
        .replace("'valueFormat'='json'", "'valueFormat'='json', 'onDataLoss'='continue'")
        + """
        CREATE MAPPING strict_copy TYPE DuckDB;
        CREATE MAPPING lenient_copy TYPE DuckDB;
        CREATE JOB strict AS INSERT INTO strict_copy SELECT order_id FROM orders;
        CREATE JOB lenient AS INSERT INTO lenient_copy SELECT order_id FROM lenient;
        AWAIT JOB strict;
        AWAIT JOB lenient;
        """,
    )
    for topic in ("strict", "lenient"):
        broker.delete_topic(topic)
        broker.create_topic(topic, 1)
        broker.produce(topic, [(0, o) for o in orders(50, 60)])  # offsets 0-9: below the job's 50
    said = (
        "mapping 'orders': topic 'strict' does not hold what the job expects: partition 0 ends at "
        "offset 10, before offset 50 that the job had read to"
    )

    def failed() -> str | None:
        shown = run(manager, "SHOW JOBS;")[0]
        row = {r[0]: r for r in shown.rows}["strict"]
        return str(row[shown.columns.index("detail")]) if row[1] == "FAILED" else None

    detail = until("job 'strict' failed", failed)
    assert said in detail and "'onDataLoss'='continue'" in detail
    with pytest.raises(PitstopError, match="topic 'strict' does not hold what the job expects"):
        run(manager, "AWAIT JOB strict;")

    def copied() -> tuple[int, int] | None:
        [(n, distinct)] = manager.catalog.query(
            "SELECT count(*), count(DISTINCT order_id) FROM lenient_copy"
        )[1]
        return (n, distinct) if n >= 60 else None

    assert until("the new partition's records, from its start", copied) == (60, 60)
    assert {r[0]: r[1] for r in run(manager, "SHOW JOBS;")[0].rows}["lenient"] == "RUNNING"


def test_the_kafka_sink_s_client_logs_to_the_log_file_not_over_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """librdkafka wrote its own lines to file descriptor 2 when the sink's broker went away
    (`%3|...|FAIL|rdkafka#producer-85| ... Connect to ipv4#127.0.0.1:35429 failed: Connection
    refused`), over `pitstop run`'s output; they go to pitstop's log now, for the file only. A
    real producer against a real loopback port nobody listens on."""
    import logging
    import socket

    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.kafka.sink import KafkaSink

    closed_port = socket.create_server(("127.0.0.1", 0))
    port = closed_port.getsockname()[1]
    closed_port.close()
    client = {"bootstrap.servers": f"127.0.0.1:{port}"}
    mapping = Mapping("out", "kafka", (), None, {**client, "topic": "t"})
    sink = KafkaSink(mapping, client, "j", "r", tmp_path, 0, None, "json", False)
    caplog.set_level(logging.INFO, logger="pitstop.kafka.client")
    producer = sink._open()
    deadline = time.monotonic() + 30
    while not any(r.name == "pitstop.kafka.client" for r in caplog.records):
        assert time.monotonic() < deadline, "librdkafka logged nothing about the refused connection"
        producer.poll(0.2)
    assert "rdkafka" not in capfd.readouterr().err
    record = next(r for r in caplog.records if r.name == "pitstop.kafka.client")
    assert "Connection refused" in record.getMessage() and getattr(record, "file_only", False)
