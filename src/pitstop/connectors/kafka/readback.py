"""Step 3 of the Kafka sink's protocol: reading the batch that was in flight back from the ledger's
offsets (``read_committed``), and each partition's end offset, where a batch starts."""

from __future__ import annotations

import time
from typing import Any

from pitstop.connectors.kafka.sinkbase import TIMEOUT_S, UNREACHABLE, BrokerAway, KafkaSinkBase


class ReadBack(KafkaSinkBase):
    """What a ``read_committed`` consumer sees of the sink's topic."""

    def _consumer(self) -> Any:
        from pitstop.connectors.kafka.broker import new_consumer

        return new_consumer(
            self.client,
            f"sink-{self.job}",
            **{"isolation.level": "read_committed", "enable.partition.eof": True},
        )

    def _ends(self) -> dict[str, int]:
        """Each partition's end offset now (a lower bound of where the next records go; Tansu's
        high watermark may lag behind the true end, which only makes a read-back longer)."""
        from pitstop.connectors.kafka.broker import BrokerUnavailable, watermarks

        consumer = self._consumer()
        try:
            return {str(p): high for p, (_low, high) in watermarks(consumer, self.topic).items()}
        except BrokerUnavailable as exc:
            raise BrokerAway(f"{exc} (a sink writes to an existing topic)") from None
        finally:
            consumer.close()

    def _read_back(self, start: dict[str, int], batch_id: int) -> set[int]:
        """The numbers of this run's branch's records of ``batch_id`` that a ``read_committed``
        consumer sees from ``start`` (per partition; a partition not named: from its start) to
        each partition's end."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        from pitstop.connectors.kafka.broker import BrokerUnavailable, watermarks

        want = {
            "pitstop.run": self.run_id.encode(),
            "pitstop.branch": str(self.branch).encode(),
            "pitstop.batch": str(batch_id).encode(),
        }
        consumer = self._consumer()
        found: set[int] = set()
        try:
            try:
                partitions = sorted(watermarks(consumer, self.topic))
            except BrokerUnavailable as exc:
                raise BrokerAway(f"cannot read topic '{self.topic}' back: {exc}") from None
            open_ = {p for p in partitions}
            consumer.assign([TopicPartition(self.topic, p, start.get(str(p), 0)) for p in partitions])
            deadline = time.monotonic() + TIMEOUT_S
            while open_:
                if time.monotonic() > deadline:
                    raise BrokerAway(
                        f"reading topic '{self.topic}' back took over "
                        f"{TIMEOUT_S:g} s (partitions {sorted(open_)} not at their end)"
                    )
                for m in consumer.consume(num_messages=1000, timeout=1.0):
                    error = m.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            open_.discard(m.partition())
                            continue
                        if error.code() in UNREACHABLE:
                            raise BrokerAway(f"reading topic '{self.topic}' back: {error.str()}")
                        raise KafkaException(error)
                    headers = dict(m.headers() or [])
                    if all(headers.get(k) == v for k, v in want.items()):
                        found.add(int(headers["pitstop.seq"]))
        finally:
            consumer.close()
        return found
