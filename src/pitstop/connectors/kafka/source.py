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
partition's end is asked again, uncommitted records counted, before anything is called lost. A
replay's reader (``EXPLAIN ANALYZE``, :meth:`~pitstop.connectors.kafka.connector.KafkaConnector.for_replay`)
skips instead (``skip``, not a mapping's choice): past offsets deleted by retention it reads on
from the partition's earliest one, and of a partition that ends below its position it reads
nothing; never records other than those between the job's positions (the replay has said what it
could not read).

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

This module holds the driver's part (steps 1 and 2); ``read`` is :mod:`.worker`'s, the reader's
state :mod:`.reader`'s, and the requests to the broker :mod:`.broker`'s.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pitstop.connectors import positions
from pitstop.connectors.kafka import alignment
from pitstop.connectors.kafka.broker import BrokerUnavailable, new_consumer, watermarks
from pitstop.connectors.kafka.names import BROKER, INITIAL
from pitstop.connectors.kafka.reader import as_json, offsets
from pitstop.connectors.kafka.worker import KafkaPartition, KafkaWorkerRead
from pitstop.errors import DataLossError

log = logging.getLogger(__name__)

REPORT_EVERY_S = 2.0  # broker.json is rewritten when it changes, else at most this often


def _ends(marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """What ``broker.json`` says of the broker's answer: each partition's end offset."""
    return {"ends": as_json({p: high for p, (_low, high) in marks.items()})}


class KafkaStreamReader(KafkaWorkerRead):
    """The driver's part of the reader: offsets, partitions, the broker's state in ``broker.json``."""

    def _broker(self, report: bool = True) -> dict[int, tuple[int, int]]:
        if self._driver_consumer is None:
            self._driver_consumer = new_consumer(self.client, self.source)
        marks = watermarks(self._driver_consumer, self.topic)
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
            return positions.offset(self.source, as_json(start))
        for p, (low, high) in marks.items():
            if p not in start:
                start[p] = high if (self.reset == "latest" and not restored) else low
        pos = as_json(start)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_dir / f".{INITIAL}.tmp"
        tmp.write_text(json.dumps(pos))
        tmp.replace(saved)
        return positions.offset(self.source, pos)

    def _floor(self) -> dict[int, int]:
        """The run's start per partition (``initial.json``): where a partition that a position
        does not name is read from; {} while the start is not known (the broker was down)."""
        if self._start_known is None and (self.state_dir / INITIAL).exists():
            self._start_known = offsets(json.loads((self.state_dir / INITIAL).read_text()))
        return self._start_known or {}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        at = offsets(start["pos"]) if start is not None else offsets(self.initialOffset()["pos"])
        if not (self.state_dir / INITIAL).exists():
            # The run started while the broker was down: learn its start first.
            known = offsets(self.initialOffset()["pos"])
            if not (self.state_dir / INITIAL).exists():
                return positions.offset(self.source, as_json(at))  # still down: wait, read nothing
            at = {**known, **at}
        floor = self._floor()
        try:
            marks = self._broker(report=False)
        except BrokerUnavailable as exc:
            self._unavailable(exc)
            return positions.offset(self.source, as_json(at))
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
        held = offsets(fence) if fence is not None else None
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
            # Capped: a fence (or target) stops it, even one right at its end: a partition that
            # has reached it reads nothing more in this run and holds no other back.
            capped = end[p] < high or (held is not None and held.get(p, high + 1) <= high)
            parts[p] = alignment.Partition(here, end[p], capped, self.idle.idle(p, here))
        status = _ends(marks)
        if self.max_drift_us is not None and not lost:
            try:
                end.update(self._align(parts, status))
            except BrokerUnavailable as exc:  # between two requests: as if it had not answered
                self._unavailable(exc)
                return positions.offset(self.source, as_json(at))
        for p, (low, high) in lost.items():
            if self.on_data_loss == "skip":  # a replay: past what is gone, and nothing else
                if at[p] > high:
                    end[p] = at[p]
                else:
                    self._skip_below[p] = low
                continue
            # 'continue': on from what the broker holds.
            # Past its end: an end below the start, which partitions() reads from the start.
            end[p] = high if at[p] > high else max(end[p], low)
        if lost and self._times is not None:
            self._times.forget()  # the topic is not what it was: its records' times neither
        self._report(status)
        return positions.offset(self.source, as_json(end))

    def _align(self, parts: dict[int, alignment.Partition], status: dict[str, Any]) -> dict[int, int]:
        """Watermark alignment: the batch's end offsets (:func:`alignment.align`); the partitions
        held back, behind which, go into ``status`` (``broker.json``: the lag says so)."""
        if self._times is None:
            assert self._event_time is not None
            consumer = new_consumer(self.client, self.source, **alignment.PROBE_CONSUMER)
            self._times = alignment.BrokerTimes(consumer, self.topic, self._event_time, BrokerUnavailable)
        self._times.drop_below({p: x.here for p, x in parts.items()})
        assert self.max_drift_us is not None
        aligned = alignment.align(parts, self.max_drift_us, self._times)
        if aligned.held:
            status.update(
                held=as_json(aligned.held), behind=list(aligned.slowest), drift_us=self.max_drift_us
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
            self._uncommitted_consumer = new_consumer(
                self.client, self.source, **{"isolation.level": "read_uncommitted"}
            )
        raw = watermarks(self._uncommitted_consumer, self.topic)
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
            if self.on_data_loss == "skip":
                log.info("%s; a replay: what it no longer holds is skipped", text)
            else:
                log.warning("%s; reading on from what the broker holds ('onDataLoss'='continue')", text)
        return lost

    def prepareForTriggerAvailableNow(self) -> None:
        try:
            self.available_now = {p: high for p, (_low, high) in self._broker().items()}
        except BrokerUnavailable as exc:
            self._unavailable(exc)
            self.available_now = {}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        lo, hi, floor = offsets(start["pos"]), offsets(end["pos"]), self._floor()
        out: list[InputPartition] = []
        for p, e in sorted(hi.items()):
            s = lo.get(p, floor.get(p, 0))
            if e < s:  # past the partition's end ('onDataLoss'='continue'): its records from the start
                if self.on_data_loss == "skip":
                    continue
                s = 0
            s = max(s, self._skip_below.get(p, s))  # deleted by retention: a replay reads on from there
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
