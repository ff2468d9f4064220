"""Watermark alignment of a Kafka source's partitions (Flink's ``scan.watermark.alignment.max-drift``
and ``scan.watermark.idle-timeout``): how far each micro-batch reads each partition.

Why: Spark keeps one watermark per query: the greatest event time read, over every partition,
minus the WATERMARK's delay. A partition that stalls (its producer, or its leader) while the others
run on finds, once it resumes, the watermark past its rows: their windows have closed, and the rows
are dropped as late (counted in ``pitstop.late_rows``, but lost to the sink). So the driver plans
each micro-batch so that no partition's event time runs more than ``'alignmentMaxDrift'`` ahead of
the slowest active partition's, and a partition further ahead waits in the topic.

The rule, for each micro-batch (:func:`align`, called by the source's ``latestOffset``):

1. A partition's *reach* is where the batch could read it to without alignment (its end offset, or
   less at the fence of ``DROP JOB ... WITH SNAPSHOT``); its *time* is the event time of its last
   record before the reach.
2. A partition is *active* unless it is **idle** (read to its end, and no new record came for
   ``'idleTimeout'`` while the broker answered), **done** (held at a fence it has reached: it reads
   nothing more in this run), or **timeless** (no record with an event time: an empty partition).
3. The *bound* is the least time of the active partitions plus the drift. A partition whose time
   is within the bound is read to its reach; one past it is read up to, not including, its first
   record later than the bound, found by bisecting its offsets. A partition's records are taken to
   be in event-time order: disorder within one partition is the WATERMARK delay's to absorb, as it
   is without alignment.

Why that is enough: every record a batch reads is at most the bound, so Spark's watermark stays at
most the bound minus the delay; an active partition's next record is no earlier than its time,
which is at least the least time. With a drift no greater than the delay (the default drift *is*
the delay) no active partition's next record is behind the watermark, and no row is late because
another partition ran ahead. A partition that was idle and comes back may be behind (Flink's rule
too): its rows that are late are counted as every late row is. The slowest partition always reads
its whole reach, so the job always moves on.

How the driver learns event times without reading everything twice: it reads single records (a
:class:`Times`): the record before each partition's reach, for the partitions with new records,
one fetch for all of them per trigger; and for a partition held back, the record at each offset
the bisection tries (about log2 of its backlog; the held partitions share one fetch per step).
Times are kept by (partition, offset), so the time at a partition's position is known from the
trigger that planned it, and a restarted driver reads it once. Rejected: the workers reporting the
times of what they read (exact, but known only after the batch that let a partition run ahead: the
watermark has moved by then); a driver consumer tailing every partition (reads everything twice);
Kafka's offsets-for-times lookup (one request, but for the record's timestamp only, not a column of
its value). On a Kafka broker a one-record fetch takes a millisecond or so; Tansu, the tests'
broker, takes longer the longer the partition (bench/RESULTS.md, section 6).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from pitstop.connectors.kafka.names import TIMESTAMP

LOOK = 16  # records a probe reads at most per partition, looking for one that has an event time
PROBE_TIMEOUT_S = 30.0  # a probe the broker does not answer in this long: the broker is down
PROBE_CONSUMER = {
    # A record or a few per partition is wanted: no backoff between fetches (librdkafka's default
    # waits up to 1 s), and 1 MB queued ahead at most (its default: 64 MB). Smaller fetches
    # (max.partition.fetch.bytes, queued.min.messages) made Tansu answer nothing within seconds at
    # offsets past the first few thousand of a partition (checked with confluent-kafka 2.16).
    "fetch.queue.backoff.ms": 0,
    "queued.max.messages.kbytes": 1024,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",  # a record asked for that retention deleted: the next one
}


class Times(Protocol):
    """Event times (microseconds) of a topic's records, looked up by offset, many partitions at
    once; None where no record with an event time is found."""

    def before(self, wanted: dict[int, int]) -> dict[int, int | None]:
        """Per partition, the time of the last record before the offset given."""
        ...

    def at(self, wanted: dict[int, tuple[int, int]]) -> dict[int, int | None]:
        """Per partition, the time of the first record at or after ``offset`` and before
        ``stop``, of ``{partition: (offset, stop)}``."""
        ...


@dataclass(frozen=True)
class Partition:
    """What a batch could read of one partition: from ``here`` to ``reach``; ``capped``: the reach
    is a fence (or an availableNow target), not the partition's end; ``idle``: read to its end
    with no new record for the idle timeout."""

    here: int
    reach: int
    capped: bool = False
    idle: bool = False


@dataclass(frozen=True)
class Aligned:
    """The batch's end offsets; ``held``: the partitions read short of their reach (their end);
    ``slowest``: the active partitions whose time set the bound; ``bound``: the greatest event
    time the batch reads (microseconds), None when no partition is active."""

    ends: dict[int, int]
    held: dict[int, int]
    slowest: tuple[int, ...]
    bound: int | None


def align(parts: dict[int, Partition], drift_us: int, times: Times) -> Aligned:
    """The end offsets of a micro-batch under watermark alignment (the module's steps 1-3)."""
    ends = {p: x.reach for p, x in parts.items()}
    # Step 1. Each partition's time: its last record before the reach.
    at_reach = times.before({p: x.reach for p, x in parts.items() if x.reach > 0})
    # Step 2. The active partitions.
    active = {
        p: t
        for p, x in parts.items()
        if (t := at_reach.get(p)) is not None and not x.idle and not (x.capped and x.here >= x.reach)
    }
    if not active:
        return Aligned(ends, {}, (), None)
    least = min(active.values())
    bound = least + drift_us
    slowest = tuple(sorted(p for p, t in active.items() if t == least))
    # Step 3. A partition past the bound: the first offset whose record is later than it.
    lo = {p: x.here for p, x in parts.items() if x.here < x.reach and (at_reach.get(p) or 0) > bound}
    hi = {p: parts[p].reach for p in lo}  # a record later than the bound lies below it
    while any(lo[p] < hi[p] for p in lo):
        middle = {p: (lo[p] + hi[p]) // 2 for p in lo if lo[p] < hi[p]}
        found = times.at({p: (m, parts[p].reach) for p, m in middle.items()})
        for p, m in middle.items():
            t = found.get(p)
            if t is not None and t > bound:
                hi[p] = m
            else:
                lo[p] = m + 1
    held = {p: lo[p] for p in lo if lo[p] < parts[p].reach}
    ends.update(held)
    return Aligned(ends, held, slowest, bound)


class IdleClock:
    """When each partition's end offset last moved, on the driver's clock (seconds). Time while
    the broker does not answer does not count: a broker that was away is no reason to call every
    partition idle, the first to come back taking the lead."""

    def __init__(self, timeout_s: float, now: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self._now = now
        self._moved: dict[int, tuple[int, float]] = {}

    def saw(self, ends: dict[int, int]) -> None:
        now = self._now()
        for p, end in ends.items():
            if self._moved.get(p, (None, 0.0))[0] != end:
                self._moved[p] = (end, now)

    def broker_back(self) -> None:
        now = self._now()
        self._moved = {p: (end, now) for p, (end, _since) in self._moved.items()}

    def idle(self, partition: int, here: int) -> bool:
        """Read to its end (``here``) and no new record for the timeout."""
        end, since = self._moved.get(partition, (None, 0.0))
        return end is not None and here >= end and self._now() - since >= self.timeout_s


class EventTime:
    """A record's event time in microseconds: the mapping's WATERMARK column, read from the JSON
    value as the reader reads it (pyarrow, the mapping's type), or the record's own timestamp
    (``__timestamp``). None for a record without one (a reject, for the reader)."""

    def __init__(self, column: str, field: pa.Field) -> None:
        self.column = column
        self.schema = pa.schema([field])

    def of(self, message: Any) -> int | None:
        if self.column.lower() == TIMESTAMP:
            kind, millis = message.timestamp()
            return None if kind == 0 or millis < 0 else millis * 1000
        from pitstop.connectors.file.source import read_file

        raw = message.value()
        if not raw or b"\n" in raw:
            return None
        try:
            value = read_file(io.BytesIO(raw), "json", self.schema).column(0)[0].as_py()
        except Exception:  # noqa: BLE001 - a malformed value has no time; the reader rejects it
            return None
        if not isinstance(value, datetime):
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class BrokerTimes:
    """:class:`Times` read from the broker by a consumer of the driver's own, kept by
    (partition, offset): a record's time at an offset never changes (a topic made again is data
    loss, which the source handles before it aligns; it then calls :meth:`forget`)."""

    def __init__(
        self, consumer: Any, topic: str, event_time: EventTime, unavailable: type[Exception]
    ) -> None:
        self.consumer = consumer
        self.topic = topic
        self.event_time = event_time
        self.unavailable = unavailable
        self._before: dict[tuple[int, int], int | None] = {}  # (p, offset) -> time before it
        self._at: dict[tuple[int, int], int] = {}  # (p, offset) -> time at or after it
        self.fetches = 0  # probes sent (each one fetch for its partitions): for the bench and tests

    def forget(self) -> None:
        self._before.clear()
        self._at.clear()

    def before(self, wanted: dict[int, int]) -> dict[int, int | None]:
        out = {p: self._before[(p, o)] for p, o in wanted.items() if (p, o) in self._before}
        ask = {p: (max(0, o - LOOK), o) for p, o in wanted.items() if p not in out}
        for p, records in self._read(ask).items():
            timed = [t for _o, t in records if t is not None]
            out[p] = self._before[(p, ask[p][1])] = timed[-1] if timed else None
        return out

    def at(self, wanted: dict[int, tuple[int, int]]) -> dict[int, int | None]:
        out: dict[int, int | None] = {
            p: self._at[(p, o)] for p, (o, _s) in wanted.items() if (p, o) in self._at
        }
        ask = {p: (o, min(stop, o + LOOK)) for p, (o, stop) in wanted.items() if p not in out}
        for p, records in self._read(ask, first=True).items():
            timed = [t for _o, t in records if t is not None]
            out[p] = timed[0] if timed else None  # None is not kept: a later stop may find one
            if timed:
                self._at[(p, ask[p][0])] = timed[0]
        return out

    def drop_below(self, positions: dict[int, int]) -> None:
        """Forget what lies below each partition's position (never asked again)."""
        self._before = {k: v for k, v in self._before.items() if k[1] >= positions.get(k[0], 0)}
        self._at = {k: v for k, v in self._at.items() if k[1] >= positions.get(k[0], 0)}

    def _read(
        self, ask: dict[int, tuple[int, int]], first: bool = False
    ) -> dict[int, list[tuple[int, int | None]]]:
        """The records of each partition in ``[start, stop)`` of ``ask``, with their times;
        ``first``: a partition stops at its first record that has a time."""
        from confluent_kafka import KafkaError, TopicPartition

        ask = {p: (start, stop) for p, (start, stop) in ask.items() if start < stop}
        if not ask:
            return {}
        self.fetches += 1
        self.consumer.assign([TopicPartition(self.topic, p, start) for p, (start, _stop) in ask.items()])
        got: dict[int, list[tuple[int, int | None]]] = {p: [] for p in ask}
        left = set(ask)
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        try:
            while left:
                if time.monotonic() > deadline:
                    raise self.unavailable(
                        f"no answer in {PROBE_TIMEOUT_S:g} s to a read of partition(s) "
                        f"{', '.join(map(str, sorted(left)))} (watermark alignment)"
                    )
                m = self.consumer.poll(0.5)
                if m is None or m.partition() not in left:
                    continue
                p = m.partition()
                start, stop = ask[p]
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        left.discard(p)
                        continue
                    raise self.unavailable(error.str())
                if m.offset() < start:
                    continue
                t = self.event_time.of(m) if m.offset() < stop else None
                if m.offset() < stop:
                    got[p].append((m.offset(), t))
                if m.offset() >= stop - 1 or len(got[p]) >= LOOK or (first and t is not None):
                    left.discard(p)
        finally:
            self.consumer.assign([])
        return got
