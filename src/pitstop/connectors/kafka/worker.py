"""Reading one input partition in a Python worker: the partition's records from ``start`` to ``end``
(no consumer group, no commits), converted in chunks, malformed values recorded as rejects
(step 3 of the module docstring of :mod:`pitstop.connectors.kafka.source`)."""

from __future__ import annotations

import io
import struct
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from pitstop.catalog.rows import Reject
from pitstop.connectors import rejects
from pitstop.connectors.kafka.broker import new_consumer
from pitstop.connectors.kafka.names import KEY, OFFSET, PARTITION, TIMESTAMP
from pitstop.connectors.kafka.reader import KafkaReaderBase
from pitstop.plan.types import arrow_schema

READ_TIMEOUT_S = 120.0
CHUNK = 20_000  # records converted at once


class KafkaPartition(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        self.partition = partition
        self.start = start
        self.end = end

    @property
    def source_partition(self) -> int:
        """The Kafka partition it reads (what late rows are counted by: pitstop.engine.stamped)."""
        return self.partition


class KafkaWorkerRead(KafkaReaderBase):
    """The workers' part of the reader."""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaPartition)
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        schema = arrow_schema(self.schema)
        consumer = new_consumer(
            self.client, self.source, **{"enable.partition.eof": True, "auto.offset.reset": "earliest"}
        )
        try:
            consumer.assign([TopicPartition(self.topic, partition.partition, partition.start)])
            chunk: list[Any] = []
            waited_since = time.monotonic()
            done = False
            while not done:
                messages = consumer.consume(num_messages=min(CHUNK, 5000), timeout=1.0)
                if messages:
                    waited_since = time.monotonic()
                for m in messages:
                    error = m.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            done = m.offset() >= partition.end  # control records may end the range
                            if done:
                                break
                            continue
                        raise KafkaException(error)
                    if m.offset() >= partition.end:
                        done = True
                        break
                    chunk.append(m)
                    if m.offset() == partition.end - 1:
                        done = True
                        break
                if len(chunk) >= CHUNK or (done and chunk):
                    yield from self._convert(schema, partition.partition, chunk).to_batches()
                    chunk = []
                if not done and time.monotonic() - waited_since > READ_TIMEOUT_S:
                    raise TimeoutError(
                        f"mapping '{self.source}': topic '{self.topic}' partition {partition.partition}: "
                        f"no record for {READ_TIMEOUT_S:g} s while reading offsets "
                        f"[{partition.start}, {partition.end})"
                    )
        finally:
            consumer.close()

    def _convert(self, schema: pa.Schema, partition: int, messages: list[Any]) -> pa.Table:
        """A chunk of one partition's records as a table in the mapping's schema; its malformed
        values are recorded as rejects (or fail the job, with ``'onError'='fail'``)."""
        reserved = {KEY, PARTITION, OFFSET, TIMESTAMP}
        value_schema = pa.schema([f for f in schema if f.name.lower() not in reserved])
        raws = [m.value() or b"{}" for m in messages]  # a tombstone: every value column null
        keep = list(range(len(messages)))
        values = None
        if len(value_schema):
            values, bad = self._values(raws, value_schema)
            if bad:
                label = f"topic '{self.topic}' partition {partition}"
                found = [
                    Reject(label, messages[i].offset(), *_raw(raws[i]), reason, unit="offset")
                    for i, reason in bad
                ]
                first, last = messages[0].offset(), messages[-1].offset()
                rejects.record(
                    self.rejects_dir,
                    self.source,
                    f"{self.topic}-{partition}-{first}-{last}",
                    found,
                    self.on_error,
                )
                dropped = {i for i, _ in bad}
                keep = [i for i in keep if i not in dropped]
        columns = []
        for field in schema:
            name = field.name.lower()
            if name == KEY:
                data: list[Any] = [self._key(messages[i].key()) for i in keep]
            elif name == PARTITION:
                data = [partition] * len(keep)
            elif name == OFFSET:
                data = [messages[i].offset() for i in keep]
            elif name == TIMESTAMP:
                data = [_timestamp(messages[i].timestamp()) for i in keep]
            else:
                assert values is not None
                columns.append(values.column(field.name).cast(field.type))
                continue
            columns.append(pa.array(data, field.type))
        return pa.Table.from_arrays(columns, schema=schema)

    def _values(self, raws: list[bytes], schema: pa.Schema) -> tuple[pa.Table, list[tuple[int, str]]]:
        from pitstop.connectors.file.source import read_file

        def strict(data: Any) -> pa.Table:
            return read_file(data, "json", schema)

        # The event time, when it is a column of the value (not the record's __timestamp).
        event_time = self.event_time if self.event_time in schema.names else None
        if not any(b"\n" in r for r in raws):
            try:  # Step 1. The fast path: the whole chunk at once.
                table = strict(io.BytesIO(b"\n".join(raws)))
                if event_time is None or table.column(event_time).null_count == 0:
                    return table, []
            except Exception:  # noqa: BLE001 - whatever pyarrow refused, look at the records one by one
                pass
        return rejects.json_values(raws, schema, strict, event_time)  # Step 2. Record by record.

    def _key(self, key: bytes | None) -> Any:
        if key is None:
            return None
        if self.key_format == "bigint":
            return struct.unpack(">q", key)[0] if len(key) == 8 else None
        return key.decode("utf-8", "replace")


def _raw(raw: bytes) -> tuple[str, int]:
    return raw[: rejects.RAW_LIMIT].decode("utf-8", "backslashreplace"), len(raw)


def _timestamp(stamp: tuple[int, int]) -> datetime | None:
    kind, millis = stamp
    if kind == 0 or millis < 0:  # TIMESTAMP_NOT_AVAILABLE
        return None
    return datetime.fromtimestamp(millis / 1000, UTC)
