"""The Kafka source: a Python streaming data source over confluent-kafka (``TYPE Kafka``; its
mapping, columns and positions are described in :mod:`pitstop.connectors.kafka.connector`).

How a micro-batch is read:

1. ``latestOffset`` (driver) asks the broker for each partition's end offset (the high
   watermark; the last stable offset under the default ``read_committed``), holds it at the
   fence of ``DROP JOB ... WITH SNAPSHOT`` per partition, and never goes below where the job
   stands. A partition that appears while the job runs is read from its start.
2. ``partitions`` makes one input partition per Kafka partition with records in ``[start, end)``.
3. ``read`` (a Python worker) assigns the partition at ``start`` (no consumer group, no commits)
   and consumes up to ``end``, converting values in chunks: the whole chunk at pyarrow's speed,
   and only if that fails record by record (:func:`pitstop.connectors.rejects.json_values`);
   malformed values follow the mapping's ``'onError'`` (kept in ``pitstop.rejects`` keyed by
   topic, partition and offset; skipped; or failing the job).

Data loss is never read past in silence: a position past a partition's end (the topic deleted and
created again, or truncated, or a broker that lost its storage), a partition that is gone, or a
position below a partition's start (records deleted by retention before the job read them) fails
the job with a sentence naming them (``'onDataLoss'='fail'``, the default, as Spark's
``failOnDataLoss``), or is logged and read on from what the broker holds (``'continue'``). Under
``read_committed`` an open transaction may show an end below the position (Tansu answers 0): such a
partition's end is asked again, uncommitted records counted, before anything is called lost.

Watermark alignment (``'alignmentMaxDrift'``, on by default for a mapping with a WATERMARK):
``latestOffset`` holds back a partition whose event time runs ahead of the slowest active
partition's by more than the drift, so that a paused or slow partition's rows are not left behind
Spark's one watermark (:mod:`pitstop.connectors.kafka.alignment` says how, and why it holds). The
partitions held back, and behind which, are kept in ``broker.json`` too: the lag says so.

A broker that does not answer does not fail the job: ``latestOffset`` logs a warning and offers
no new data, and the job reads on once the broker is back. What the driver last learnt of the
broker (each partition's end offset, or since when it does not answer) is kept in the source's
folder (``broker.json``): ``SHOW JOBS`` and ``DESCRIBE JOB`` show the consumer lag from it without
asking the broker themselves. ``read`` waits up to
``READ_TIMEOUT_S`` for records it was promised, then fails the task (Spark retries it).
"""

from __future__ import annotations

import io
import json
import logging
import struct
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pitstop.catalog.rows import Reject
from pitstop.connectors import positions, rejects
from pitstop.connectors.kafka import alignment
from pitstop.connectors.kafka.names import BROKER, INITIAL, KEY, OFFSET, PARTITION, TIMESTAMP
from pitstop.errors import DataLossError
from pitstop.plan.types import arrow_schema

log = logging.getLogger(__name__)

METADATA_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 120.0
CHUNK = 20_000  # records converted at once
REPORT_EVERY_S = 2.0  # broker.json is rewritten when it changes, else at most this often


class BrokerUnavailable(Exception):
    """The broker did not answer a metadata or offsets request in time."""


def _consumer(client: dict[str, str], source: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {"group.id": f"pitstop-{source}", "log_level": 3}
    conf.update(client)
    conf.update({"enable.auto.commit": False, "enable.auto.offset.store": False}, **extra)
    return Consumer(conf)


def _watermarks(consumer: Any, topic: str) -> dict[int, tuple[int, int]]:
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
    consumer = _consumer(client, "await")
    try:
        return {p: high for p, (_low, high) in _watermarks(consumer, topic).items()}
    finally:
        consumer.close()


def _of(pos: Any) -> dict[int, int]:
    return {int(p): int(o) for p, o in (pos or {}).items()}


def _as_json(pos: dict[int, int]) -> dict[str, int]:
    return {str(p): o for p, o in sorted(pos.items())}


def _ends(marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """What ``broker.json`` says of the broker's answer: each partition's end offset."""
    return {"ends": _as_json({p: high for p, (_low, high) in marks.items()})}


class KafkaPartition(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        self.partition = partition
        self.start = start
        self.end = end


class KafkaStreamReader(DataSourceStreamReader):
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
        self.event_time = options.get("event_time") or None
        self.start = _of(json.loads(options.get("start", "{}")))
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

    # -- the driver --------------------------------------------------------------------------------
    def _broker(self, report: bool = True) -> dict[int, tuple[int, int]]:
        if self._driver_consumer is None:
            self._driver_consumer = _consumer(self.client, self.source)
        marks = _watermarks(self._driver_consumer, self.topic)
        if report:
            self._report(_ends(marks))
        return marks

    def _unavailable(self, exc: BrokerUnavailable) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            self._down_at = time.time()
            log.warning(
                "mapping '%s': the Kafka broker does not answer (%s); the job waits for it", self.source, exc
            )
        self._report({"down_since": self._down_at, "error": str(exc)})

    def _report(self, status: dict[str, Any]) -> None:
        """Keep what the broker said last in ``broker.json`` (read by :func:`broker_status`)."""
        now = time.time()
        if status == self._reported and now - self._reported_at < REPORT_EVERY_S:
            return
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.state_dir / f".{BROKER}.tmp"
            tmp.write_text(json.dumps({**status, "checked": now}))
            tmp.replace(self.state_dir / BROKER)
        except OSError as exc:  # the lag shown is older; reading goes on
            log.debug("mapping '%s': cannot write %s: %s", self.source, BROKER, exc)
            return
        self._reported, self._reported_at = status, now

    def initialOffset(self) -> dict[str, Any]:
        """The run's start position: a snapshot's offsets; partitions it lacks from their start
        (a restore) or from ``auto.offset.reset`` (a job started without a snapshot). Kept in the
        run's folder, so a query restarted before its first batch starts at the same offsets."""
        saved = self.state_dir / INITIAL
        if saved.exists():
            return positions.offset(self.source, json.loads(saved.read_text()))
        start = dict(self.start)
        restored = bool(self.start)
        try:
            marks = self._broker()
        except BrokerUnavailable as exc:
            # Not known yet: the first latestOffset that reaches the broker learns the start
            # (for 'latest', its end offsets then) and keeps it; nothing is read before that.
            self._unavailable(exc)
            return positions.offset(self.source, _as_json(start))
        for p, (low, high) in marks.items():
            if p not in start:
                start[p] = high if (self.reset == "latest" and not restored) else low
        pos = _as_json(start)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_dir / f".{INITIAL}.tmp"
        tmp.write_text(json.dumps(pos))
        tmp.replace(saved)
        return positions.offset(self.source, pos)

    def _floor(self) -> dict[int, int]:
        """The run's start per partition (``initial.json``): where a partition that a position
        does not name is read from; {} while the start is not known (the broker was down)."""
        if self._start_known is None and (self.state_dir / INITIAL).exists():
            self._start_known = _of(json.loads((self.state_dir / INITIAL).read_text()))
        return self._start_known or {}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        at = _of(start["pos"]) if start is not None else _of(self.initialOffset()["pos"])
        if not (self.state_dir / INITIAL).exists():
            # The run started while the broker was down: learn its start first.
            known = _of(self.initialOffset()["pos"])
            if not (self.state_dir / INITIAL).exists():
                return positions.offset(self.source, _as_json(at))  # still down: wait, read nothing
            at = {**known, **at}
        floor = self._floor()
        try:
            marks = self._broker(report=False)
        except BrokerUnavailable as exc:
            self._unavailable(exc)
            return positions.offset(self.source, _as_json(at))
        if self._down_since is not None:
            log.warning(
                "mapping '%s': the Kafka broker answers again after %.0f s",
                self.source,
                time.monotonic() - self._down_since,
            )
            self._down_since = None
            self.idle.broker_back()
        self.idle.saw({p: high for p, (_low, high) in marks.items()})
        try:
            lost = self._lost(at, marks)
        except DataLossError:
            self._report(_ends(marks))
            raise
        fence = positions.read_fence(self.state_dir)
        held = _of(fence) if fence is not None else None
        end = dict(at)
        parts: dict[int, alignment.Partition] = {}
        for p, (_low, high) in marks.items():
            here = at.get(p, floor.get(p, 0))  # a partition new since the start: from its start
            reach = high
            if self.available_now is not None:
                reach = min(reach, self.available_now.get(p, here))
            if held is not None:
                reach = min(reach, held.get(p, here))
            end[p] = max(here, reach)
            parts[p] = alignment.Partition(here, end[p], end[p] < high, self.idle.idle(p, here))
        status = _ends(marks)
        if self.max_drift_us is not None and not lost:
            try:
                end.update(self._align(parts, status))
            except BrokerUnavailable as exc:  # between two requests: as if it had not answered
                self._unavailable(exc)
                return positions.offset(self.source, _as_json(at))
        for p, (low, high) in lost.items():  # 'continue': on from what the broker holds
            # Past its end: an end below the start, which partitions() reads from the start.
            end[p] = high if at[p] > high else max(end[p], low)
        if lost and self._times is not None:
            self._times.forget()  # the topic is not what it was: its records' times neither
        self._report(status)
        return positions.offset(self.source, _as_json(end))

    def _align(self, parts: dict[int, alignment.Partition], status: dict[str, Any]) -> dict[int, int]:
        """Watermark alignment: the batch's end offsets (:func:`alignment.align`); the partitions
        held back, behind which, go into ``status`` (``broker.json``: the lag says so)."""
        if self._times is None:
            assert self._event_time is not None
            consumer = _consumer(self.client, self.source, **alignment.PROBE_CONSUMER)
            self._times = alignment.BrokerTimes(consumer, self.topic, self._event_time, BrokerUnavailable)
        self._times.drop_below({p: x.here for p, x in parts.items()})
        assert self.max_drift_us is not None
        aligned = alignment.align(parts, self.max_drift_us, self._times)
        if aligned.held:
            status.update(
                held=_as_json(aligned.held), behind=list(aligned.slowest), drift_us=self.max_drift_us
            )
        said = (tuple(sorted(aligned.held)), aligned.slowest if aligned.held else ())
        if said != self._said_held:
            log.info(
                "mapping '%s': partition(s) %s held back by watermark alignment: more than %g s ahead "
                "of partition(s) %s",
                self.source,
                ", ".join(map(str, said[0])) or "none now",
                self.max_drift_us / 1e6,
                ", ".join(map(str, said[1])) or "-",
            )
            self._said_held = said
        return aligned.ends

    def _lost(self, at: dict[int, int], marks: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """The partitions whose position ``at`` lies outside what the broker holds, with their
        ``(low, high)`` as read uncommitted. DataLossError under ``'onDataLoss'='fail'``."""
        odd = [p for p, here in at.items() if p not in marks or not marks[p][0] <= here <= marks[p][1]]
        if not odd:
            return {}
        if self._uncommitted_consumer is None:
            self._uncommitted_consumer = _consumer(
                self.client, self.source, **{"isolation.level": "read_uncommitted"}
            )
        raw = _watermarks(self._uncommitted_consumer, self.topic)
        said, lost = [], {}
        for p in sorted(odd):
            here = at[p]
            if p not in raw:
                said.append(f"partition {p} is gone (the job had read it to offset {here})")
                continue
            low, high = raw[p]
            if here > high:
                said.append(
                    f"partition {p} ends at offset {high}, before offset {here} that the job had read to "
                    "(was the topic deleted and created again, or truncated?)"
                )
            elif here < low:
                said.append(
                    f"partition {p} starts at offset {low}: offsets {here} to {low - 1} were deleted "
                    "before the job read them (retention)"
                )
            else:
                continue
            lost[p] = (low, high)
        if not said:
            return {}
        text = (
            f"mapping '{self.source}': topic '{self.topic}' does not hold what the job expects: "
            + "; ".join(said)
        )
        if self.on_data_loss == "fail":
            raise DataLossError(
                f"{text}. The job stops rather than skip records in silence: restore it from a "
                "snapshot, or read on from what the broker holds with the mapping's OPTIONS "
                "('onDataLoss'='continue')"
            )
        if tuple(said) != self._said_lost:
            self._said_lost = tuple(said)
            log.warning("%s; reading on from what the broker holds ('onDataLoss'='continue')", text)
        return lost

    def prepareForTriggerAvailableNow(self) -> None:
        try:
            self.available_now = {p: high for p, (_low, high) in self._broker().items()}
        except BrokerUnavailable as exc:
            self._unavailable(exc)
            self.available_now = {}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        lo, hi, floor = _of(start["pos"]), _of(end["pos"]), self._floor()
        out: list[InputPartition] = []
        for p, e in sorted(hi.items()):
            s = lo.get(p, floor.get(p, 0))
            if e < s:  # past the partition's end ('onDataLoss'='continue'): its records from the start
                s = 0
            if e > s:
                out.append(KafkaPartition(p, s, e))
        return out

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        probe = self._times.consumer if self._times is not None else None
        for consumer in (self._driver_consumer, self._uncommitted_consumer, probe):
            if consumer is not None:
                consumer.close()
        self._driver_consumer = self._uncommitted_consumer = None
        self._times = None

    # -- the workers ------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaPartition)
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        schema = arrow_schema(self.schema)
        consumer = _consumer(
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


class KafkaSource(DataSource):
    """``spark.readStream.format("pitstop_kafka")``: options source, run_dir, topic, client
    (the consumer's properties, JSON), key_format, reset, on_error, on_data_loss, start (a
    position, JSON), event_time (the WATERMARK column), max_drift_us (watermark alignment's
    drift; empty: off) and idle_timeout_us."""

    @classmethod
    def name(cls) -> str:
        return "pitstop_kafka"

    def schema(self) -> str:
        raise ValueError("pitstop_kafka needs the mapping's schema: pass it with .schema(...)")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(schema, dict(self.options))
