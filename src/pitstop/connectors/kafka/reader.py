"""What a Kafka stream reader is made of: the mapping's options (topic, client, key format,
``'onError'``, ``'onDataLoss'``, watermark alignment), the run's folders and the driver's state
(its consumers, what it last reported of the broker); and a position as ``{partition: offset}``.
The driver's part of the reader is :class:`~pitstop.connectors.kafka.source.KafkaStreamReader`,
the workers' part :class:`~pitstop.connectors.kafka.worker.KafkaWorkerRead`."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.types import StructType

from pitstop.connectors import positions, rejects
from pitstop.connectors.kafka import alignment
from pitstop.plan.types import arrow_schema


def offsets(pos: Any) -> dict[int, int]:
    return {int(p): int(o) for p, o in (pos or {}).items()}


def as_json(pos: dict[int, int]) -> dict[str, int]:
    return {str(p): o for p, o in sorted(pos.items())}


class KafkaReaderBase(DataSourceStreamReader):
    """The state of a :class:`~pitstop.connectors.kafka.source.KafkaStreamReader`."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.source = options["source"]
        self.topic = options["topic"]
        self.client: dict[str, str] = json.loads(options["client"])
        self.key_format = options.get("key_format", "varchar")
        self.reset = options.get("reset", "earliest")
        self.on_error = options.get("on_error", "keep")
        self.on_data_loss = options.get("on_data_loss", "fail")
        self._said_lost: tuple[str, ...] = ()
        self._skip_below: dict[int, int] = {}  # 'skip' (a replay): a partition's earliest offset
        self.event_time = options.get("event_time") or None
        self.start = offsets(json.loads(options.get("start", "{}")))
        self.state_dir = positions.source_dir(options["run_dir"], self.source)
        self.rejects_dir = rejects.rejects_dir(options["run_dir"], self.source)
        self.available_now: dict[int, int] | None = None
        self._driver_consumer: Any = None
        self._uncommitted_consumer: Any = None  # asks the ends again when one looks lost
        self._down_since: float | None = None
        self._down_at = 0.0
        self._start_known: dict[int, int] | None = None
        self._reported: dict[str, Any] = {}
        self._reported_at = 0.0
        # Watermark alignment: the drift (None: off) and the idle timeout, in microseconds.
        drift = options.get("max_drift_us") or ""
        fields = {f.name: f for f in arrow_schema(schema)}
        # No WATERMARK column: nothing is late, nothing to align.
        self.max_drift_us = int(drift) if drift and self.event_time in fields else None
        self._event_time = (
            alignment.EventTime(str(self.event_time), fields[str(self.event_time)])
            if self.max_drift_us is not None
            else None
        )
        self.idle = alignment.IdleClock(int(options.get("idle_timeout_us") or 30_000_000) / 1e6)
        self._times: alignment.BrokerTimes | None = None
        self._said_held: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
