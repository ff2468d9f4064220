"""INSERT INTO a Kafka mapping on a real broker (Tansu, tests/kafka_helpers.py) and real Spark: the
windows a consumer reads (``isolation.level=read_committed``) equal a batch computation, once each,
after a kill -9 of a real ``pitstop run`` in the middle of a batch, and across DROP JOB ... WITH
SNAPSHOT and CREATE JOB ... FROM SNAPSHOT into the same topic.

What the broker does with transactions is in tests/kafka_helpers.py: commits, fencing and hidden
open transactions work; an aborted transaction's records become visible. So on it the sink's
exactly once rests on its read-back per (run, batch) (:mod:`pitstop.connectors.kafka_sink`), which
the kill -9 test reaches: the killed batch's transaction is ended by the next producer, its
records show, and only the rest of the batch is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from conftest import DELAY, batch_windows, closed, make_orders, orders_mapping, revenue_select, run
from kafka_helpers import Broker, broker  # noqa: F401 - the fixture
from pitstop import faults
from pitstop.connectors.kafka_sink import HEADERS, Ledger, transactional_id
from pitstop.engine.manager import Manager

HOUR = timedelta(hours=1)
STEP = 90  # seconds between orders (make_orders' default)


def read_topic(b: Broker, topic: str) -> list[tuple[bytes | None, dict[str, Any], dict[str, str]]]:
    """Every record a read_committed consumer sees, as (key, value, headers), partition by partition."""
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
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
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
