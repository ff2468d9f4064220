"""Asking a Kafka broker: a consumer of pitstop's (no consumer group commits), each partition's
low and high watermarks, and :class:`BrokerUnavailable` when the broker does not answer in time."""

from __future__ import annotations

from typing import Any

METADATA_TIMEOUT_S = 5.0


class BrokerUnavailable(Exception):
    """The broker did not answer a metadata or offsets request in time."""


def new_consumer(client: dict[str, str], source: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {"group.id": f"pitstop-{source}", "log_level": 3}
    conf.update(client)
    conf.update({"enable.auto.commit": False, "enable.auto.offset.store": False}, **extra)
    return Consumer(conf)


def watermarks(consumer: Any, topic: str) -> dict[int, tuple[int, int]]:
    """``{partition: (low, high)}`` now; BrokerUnavailable if the broker does not answer."""
    from confluent_kafka import KafkaException, TopicPartition

    try:
        meta = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None:
            raise BrokerUnavailable(f"topic '{topic}': {meta.error if meta is not None else 'not found'}")
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=METADATA_TIMEOUT_S)
            for p in sorted(meta.partitions)
        }
    except KafkaException as exc:
        raise BrokerUnavailable(exc.args[0].str() if exc.args else str(exc)) from None


def high_watermarks(client: dict[str, str], topic: str) -> dict[int, int]:
    """Each partition's end offset now (what ``AWAIT JOB`` waits for)."""
    consumer = new_consumer(client, "await")
    try:
        return {p: high for p, (_low, high) in watermarks(consumer, topic).items()}
    finally:
        consumer.close()
