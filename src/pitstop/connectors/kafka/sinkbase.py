"""What the Kafka sink is made of: its mapping, client and branch, its producer and its state, and
the broker's answers it acts on (a broker that does not answer is :class:`BrokerAway`: the batch
waits for it). Reading a batch back is :mod:`.readback`'s; writing one, :mod:`.sink`'s."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pitstop.catalog.rows import Mapping
from pitstop.connectors.kafka.ledger import LEDGER

TIMEOUT_S = 60.0  # a transaction call, a flush, a read-back that gets no answer


class BrokerAway(RuntimeError):
    """The broker does not answer: the batch waits for it (not a failure of the job)."""


def _unreachable_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})


def _msg_timed_out() -> int:
    from confluent_kafka import KafkaError

    return int(KafkaError._MSG_TIMED_OUT)


UNREACHABLE = _unreachable_codes()
"""librdkafka's codes for a broker that does not answer (not for one that refuses)."""
MSG_TIMED_OUT = _msg_timed_out()
"""librdkafka's code for a record it gave up delivering (``message.timeout.ms`` passed)."""

CONSUMER_ONLY = frozenset(
    {
        "isolation.level",
        "auto.offset.reset",
        "group.id",
        "enable.auto.commit",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "session.timeout.ms",
    }
)
"""Client properties that only a consumer takes (not handed to the sink's producer)."""


class KafkaSinkBase:
    """The state of a :class:`~pitstop.connectors.kafka.sink.KafkaSink`."""

    def __init__(
        self,
        mapping: Mapping,
        client: dict[str, str],
        job: str,
        run_id: str,
        run_dir: Path,
        branch: int,
        key_column: str | None,
        key_format: str,
        transactions: bool,
    ) -> None:
        self.mapping = mapping
        self.topic = mapping.options["topic"]
        self.client = client
        self.job = job
        self.run_id = run_id
        self.branch = branch
        self.key_column = key_column
        self.key_format = key_format
        self.transactions = transactions
        self.ledger_path = run_dir / "branches" / str(branch) / LEDGER
        self._producer: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.waiting: str | None = None
        """Why the batch in flight waits for the broker, while it does (SHOW JOBS shows it)."""
