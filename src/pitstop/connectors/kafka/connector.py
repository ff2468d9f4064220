"""``TYPE Kafka``: a Kafka topic, read as a stream and written by jobs (Hazelcast's Kafka mapping is
the model). The reader is :mod:`pitstop.connectors.kafka.source`, the writer
:mod:`pitstop.connectors.kafka.sink`, both over confluent-kafka.

Columns: each declared column is read by name from the record's JSON value, except four reserved
names that read the record's metadata: ``__key`` (VARCHAR: the key as UTF-8, or BIGINT with
``'keyFormat'='bigint'``: 8 bytes big-endian, Kafka's LongSerializer), ``__partition`` (INT or
BIGINT), ``__offset`` (BIGINT) and ``__timestamp`` (TIMESTAMP: the record's timestamp).

Options: ``bootstrap.servers`` and ``topic`` (required), ``valueFormat``, ``keyFormat``,
``auto.offset.reset``, ``onError``, ``onDataLoss``, ``alignmentMaxDrift`` and ``idleTimeout``
(reading; the last two: :mod:`pitstop.connectors.kafka.alignment`), ``keyColumn`` and
``transactions`` (writing) are declared; any other dotted name (``security.protocol``,
``sasl.username``, ...) is a Kafka client property handed to the consumer as it is (librdkafka
checks its name at ``CREATE MAPPING``).

Position: a map partition -> next offset to read, as a JSON object with string keys
(``{"0": 412, "1": 410, "2": 412}``); :class:`KafkaPositions` compares two per partition, a
partition missing from a position counting as offset 0 (nothing of it read). A job started
without a snapshot reads each partition from ``auto.offset.reset``; a job restored from a snapshot
reads each partition from the snapshot's offset, and partitions that are not in the snapshot
(added to the topic after it) from their start. The offsets are all a snapshot keeps.

Sink: each micro-batch once for ``read_committed`` consumers, JSON values, the key from
``'keyColumn'``; in one Kafka transaction per batch, and idempotent per (run, batch) on any broker
(see :mod:`pitstop.connectors.kafka.sink`). A mapping only written to may leave out its columns
(its records carry every column the job writes); one that declares columns is checked against
the job's.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.connectors.base import Connector, Option, Positions, Replayable
from pitstop.connectors.kafka.names import BROKER, INITIAL, KEY, METADATA_TYPES
from pitstop.errors import PitstopError, PlanError
from pitstop.intervals import interval_words, text_micros

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource

    from pitstop.catalog.rows import ColumnDef, Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.base import Sink
    from pitstop.connectors.rollback import SinkRollback, Span

STALE_S = 10.0  # a broker.json older than this is shown with its time


def broker_status(state_dir: Any) -> dict[str, Any] | None:
    """What a source's driver last learnt of the broker: ``{"ends": {partition: offset}}`` or
    ``{"down_since": epoch s, "error": text}``, with ``checked`` (epoch s); None if nothing yet."""
    try:
        status: dict[str, Any] = json.loads((Path(state_dir) / BROKER).read_text())
    except (OSError, ValueError):
        return None
    return status


def _behind(ends: dict[str, int], have: dict[str, int]) -> dict[str, int]:
    """Records behind each partition's end (0 for a position past it), in partition order."""
    return {p: max(0, end - have.get(p, 0)) for p, end in sorted(ends.items(), key=lambda e: int(e[0]))}


def run_start(state_dir: Any) -> dict[str, int]:
    """The offsets a run started from (its ``initial.json``), or {}."""
    try:
        return {str(p): int(o) for p, o in json.loads((Path(state_dir) / INITIAL).read_text()).items()}
    except (OSError, ValueError):
        return {}


class KafkaPositions(Positions):
    """A Kafka position: ``{"<partition>": next offset}``; a partition missing counts as 0."""

    zero: Any = {}

    @staticmethod
    def _of(position: Any) -> dict[str, int]:
        return {str(k): int(v) for k, v in (position or {}).items()}

    def furthest(self, a: Any, b: Any) -> Any:
        a, b = self._of(a), self._of(b)
        return {p: max(a.get(p, 0), b.get(p, 0)) for p in sorted(a.keys() | b.keys(), key=int)}

    def least(self, a: Any, b: Any) -> Any:
        a, b = self._of(a), self._of(b)
        return {p: min(a.get(p, 0), b.get(p, 0)) for p in sorted(a.keys() | b.keys(), key=int)}

    def covers(self, position: Any, target: Any) -> bool:
        have = self._of(position)
        return all(have.get(p, 0) >= offset for p, offset in self._of(target).items())

    def text(self, position: Any, unit: str) -> str:
        offsets = self._of(position)
        total = sum(offsets.values())
        shown = ", ".join(f"{p}:{o:,}" for p, o in sorted(offsets.items(), key=lambda i: int(i[0])))
        detail = f" (next offsets {shown})" if 0 < len(offsets) <= 8 else ""
        return f"{len(offsets)} partitions, {total:,} {unit}{detail}"


KAFKA_POSITIONS = KafkaPositions()


class KafkaConnector(Connector):
    type_name = "Kafka"
    summary = (
        "a Kafka topic: read as a stream (columns from the JSON value, __key/__partition/__offset/"
        "__timestamp), written once per batch"
    )
    source = True
    sink = True
    partitioned = True
    positions = KAFKA_POSITIONS
    position_unit = "records"
    passthrough = (
        "a Kafka client property (e.g. `security.protocol`, `sasl.username`), given to the consumer "
        "and the producer"
    )
    options = (
        Option("bootstrap.servers", "the brokers, host:port[,host:port...]", required=True),
        Option("topic", "the topic read or written", required=True),
        Option(
            "valueFormat",
            "JSON objects whose fields are the columns (json-flat: Hazelcast's name for it)",
            "choice",
            "json",
            ("json", "json-flat"),
        ),
        Option(
            "keyFormat",
            "how record keys are written (the `__key` column)",
            "choice",
            "varchar",
            ("varchar", "bigint"),
        ),
        Option(
            "auto.offset.reset",
            "where a job started without a snapshot reads each partition from",
            "choice",
            "earliest",
            ("earliest", "latest"),
        ),
        Option(
            "onError",
            "a malformed record: keep it in pitstop.rejects and go on, count it only (skip), or fail the job",
            "choice",
            "keep",
            ("keep", "skip", "fail"),
        ),
        Option(
            "onDataLoss",
            "reading: the job's position lies past a partition's end (the topic deleted and created "
            "again, or truncated) or below its start (records deleted before they were read): fail the "
            "job saying so, or log it and read on from what the broker holds (continue)",
            "choice",
            "fail",
            ("fail", "continue"),
        ),
        Option(
            "alignmentMaxDrift",
            "reading: watermark alignment (Flink's scan.watermark.alignment.max-drift): a partition whose "
            "event time runs further ahead of the slowest active partition's waits, so that a paused or "
            "slow partition's rows do not fall behind the watermark and get dropped as late; default: the "
            "WATERMARK's delay (no row is then late for it); off: each partition is read to its end. No "
            "effect without a WATERMARK",
            "interval",
            None,
            ("off",),
        ),
        Option(
            "idleTimeout",
            "reading, with alignment: a partition that gets no new record for this long is idle and holds "
            "no other back until it gets one (Flink's scan.watermark.idle-timeout); its rows that come "
            "later may be late",
            "interval",
            "30 seconds",
        ),
        Option("keyColumn", "writing: the column whose value is each record's key (default: no key)"),
        Option(
            "transactions",
            "writing: one Kafka transaction per batch (consumers set isolation.level=read_committed); "
            "false: the idempotent producer only. Either way a replayed batch is not written twice",
            "boolean",
            "true",
        ),
    )

    def check_mapping(self, mapping: str, columns: tuple[ColumnDef, ...], options: dict[str, str]) -> None:
        from pitstop.plan.types import spark_type

        key_format = options.get("keyFormat", "varchar")
        for column in columns:
            allowed = METADATA_TYPES.get(column.name.lower())
            if allowed is None:
                if column.name.startswith("__"):
                    raise PlanError(
                        f"mapping '{mapping}': column '{column.name}': names starting with '__' are kept for "
                        f"the record's metadata: {', '.join(METADATA_TYPES)}"
                    )
                continue
            kind = spark_type(column.type)
            if column.name.lower() == KEY:
                allowed = ("STRING",) if key_format == "varchar" else ("BIGINT",)
            if kind not in allowed:
                raise PlanError(
                    f"mapping '{mapping}': column '{column.name}' is {column.type}; it must be "
                    f"{' or '.join('VARCHAR' if a == 'STRING' else a for a in allowed)}"
                    + (f" with 'keyFormat'='{key_format}'" if column.name.lower() == KEY else "")
                )
        client_properties(options, {k: v for k, v in options.items() if "." in k}, check=True, where=mapping)

    def rollback_plan(
        self, catalog: Catalog, home: Path, mapping: Mapping, spans: tuple[Span, ...], job: str
    ) -> SinkRollback:
        """A topic is never rolled back: Kafka has no way to delete chosen records (only whole
        segments by age or offset, which would take other records with them). EXPLAIN says what
        a consumer then sees."""
        from pitstop.connectors.rollback import SinkRollback

        runs = ", ".join(dict.fromkeys(s.run_id for s in spans))
        return SinkRollback(
            mapping.name,
            self.type_name,
            spans,
            possible=False,
            note=(
                f"a Kafka topic cannot be rolled back (its records cannot be deleted): what run(s) {runs} "
                "wrote after the cut stays in the topic, and the restored job writes those windows again, "
                "so a consumer reads them twice; the headers pitstop.run and pitstop.batch tell the copies "
                "apart (keep the latest run's record per key)"
            ),
        )

    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        from pitstop.connectors.kafka.sink import KafkaSink

        return KafkaSink(
            mapping,
            self.client(mapping),
            job,
            run_id,
            Path(catalog.get_run(run_id).folder),
            branch,
            self.option(mapping, "keyColumn"),
            self.option(mapping, "keyFormat") or "varchar",
            self.option(mapping, "transactions") != "false",
        )

    def stream_source(self) -> type[DataSource]:
        from pitstop.connectors.kafka.source import KafkaSource

        return KafkaSource

    def reader_options(self, mapping: Mapping, start: Any) -> dict[str, str]:
        return {
            "topic": mapping.options["topic"],
            "key_format": self.option(mapping, "keyFormat") or "varchar",
            "reset": self.option(mapping, "auto.offset.reset") or "earliest",
            "on_error": self.option(mapping, "onError") or "keep",
            "on_data_loss": self.option(mapping, "onDataLoss") or "fail",
            "max_drift_us": "" if (drift := max_drift_us(mapping)) is None else str(drift),
            "idle_timeout_us": str(text_micros(self.option(mapping, "idleTimeout") or "30 seconds")),
            "start": json.dumps(KAFKA_POSITIONS._of(start)),
            "client": json.dumps(self.client(mapping)),
        }

    def client(self, mapping: Mapping) -> dict[str, str]:
        """The consumer's properties: bootstrap.servers and every passed-through property."""
        return client_properties(mapping.options, self.passed_options(mapping))

    def available(self, run_dir: Path, mapping: Mapping, start: Any) -> Any:
        from pitstop.connectors.kafka.broker import BrokerUnavailable, high_watermarks

        try:
            return {
                str(p): o for p, o in high_watermarks(self.client(mapping), mapping.options["topic"]).items()
            }
        except BrokerUnavailable as exc:
            topic = mapping.options["topic"]
            raise PitstopError(
                f"mapping '{mapping.name}': cannot learn the end offsets of topic '{topic}' ({exc}); "
                "the job keeps running and reads on once the broker answers"
            ) from None

    def lag(self, source_dir: Path, mapping: Mapping, position: Any) -> str | None:
        """Consumer lag: the end offsets the run's driver last learnt, minus ``position``, summed
        over partitions; or that the broker does not answer (the job waits)."""
        status = broker_status(source_dir)
        if status is None:
            return "end offsets not known yet"
        checked = datetime.fromtimestamp(float(status["checked"]), UTC)
        if "down_since" in status:
            since = datetime.fromtimestamp(float(status["down_since"]), UTC)
            return (
                f"broker does not answer since {since:%Y-%m-%d %H:%M:%S} UTC ({status.get('error')}); "
                "the job waits for it"
            )
        have = {**run_start(source_dir), **KAFKA_POSITIONS._of(position)}
        ends = KAFKA_POSITIONS._of(status.get("ends"))
        behind = sum(_behind(ends, have).values())
        text = f"{behind:,} records behind ({len(ends)} partitions)"
        held = KAFKA_POSITIONS._of(status.get("held"))
        if held and behind:  # held back on purpose: not lost, read once the slowest moves on
            slowest = ", ".join(str(p) for p in status.get("behind", []))
            text += (
                f"; partition(s) {', '.join(sorted(held, key=int))} held back by watermark alignment, "
                f"more than {interval_words(int(status.get('drift_us', 1)))} ahead of partition(s) {slowest}"
            )
        past = [str(p) for p, end in sorted(ends.items()) if have.get(p, 0) > end]
        if past:  # the source fails the job on it, or reads on ('onDataLoss')
            text += f"; partition(s) {', '.join(past)} end before the job's position"
        if time.time() - checked.timestamp() > STALE_S:
            text += f" as of {checked:%Y-%m-%d %H:%M:%S} UTC"
        return text

    def lag_records(self, source_dir: Path, mapping: Mapping, position: Any) -> dict[str, int] | None:
        """Per partition, the end offset the run's driver last learnt minus ``position`` (what
        :meth:`lag` sums); None while the ends are not known or the broker does not answer."""
        status = broker_status(source_dir)
        if status is None or "down_since" in status:
            return None
        have = {**run_start(source_dir), **KAFKA_POSITIONS._of(position)}
        return {str(p): n for p, n in _behind(KAFKA_POSITIONS._of(status.get("ends")), have).items()}

    def save_position(
        self, run_dir: Path, mapping: Mapping, position: Any, snapshot_dir: Path
    ) -> dict[str, Any]:
        return {"topic": mapping.options["topic"]}  # offsets mean something in this topic only

    def resume_from(self, entry: dict[str, Any], mapping: Mapping) -> tuple[dict[str, Any], str]:
        """Other connection parameters (bootstrap servers, credentials) keep the offsets; another
        topic is another source, read from ``auto.offset.reset``."""
        old, new = entry.get("topic"), mapping.options["topic"]
        if old is not None and old != new:
            reset = self.option(mapping, "auto.offset.reset") or "earliest"
            return {**entry, "pos": {}, "topic": new}, (
                f"topic changed from '{old}' to '{new}': another topic is another source; reads "
                f"from 'auto.offset.reset' ({reset})"
            )
        shown = self.positions.text(entry["pos"], self.position_unit)
        return entry, f"goes on from the snapshot's offsets ({shown}); new partitions from their start"

    def replayable(self, mapping: Mapping, start: Any, end: Any) -> Replayable:
        """Per partition, the offsets the broker still holds of ``[start, end)``: what retention
        deleted (below the partition's earliest offset) and what lies past its end (the topic
        deleted and created again with less, or truncated) are not replayed; the replay reads up
        to the end or to where the partition ends. Asked once, read uncommitted (an open
        transaction does not hide an end: the job read those records committed)."""
        from pitstop.connectors.kafka.broker import BrokerUnavailable, new_consumer, watermarks

        topic = mapping.options["topic"]
        first, last = KAFKA_POSITIONS._of(start), KAFKA_POSITIONS._of(end)
        consumer = new_consumer(self.client(mapping), mapping.name, **{"isolation.level": "read_uncommitted"})
        try:
            marks = watermarks(consumer, topic)
        except BrokerUnavailable as exc:
            raise PitstopError(
                f"mapping '{mapping.name}': cannot learn which offsets topic '{topic}' still holds ({exc}); "
                "replay again once the broker answers"
            ) from None
        finally:
            consumer.close()
        reach: dict[str, int] = {}
        missing: list[str] = []
        for p, e in sorted(last.items(), key=lambda i: int(i[0])):
            s = first.get(p, 0)
            reach[p] = e
            if e <= s:
                continue
            wanted = f"topic '{topic}' partition {p}: offsets {s} to {e - 1} wanted"
            if int(p) not in marks:
                reach[p] = s
                missing.append(f"{wanted}, the partition is gone: {e - s:,} records not replayed")
                continue
            low, high = marks[int(p)]
            reach[p] = max(s, min(e, high))
            said = []
            if low > s:
                gone = min(low, e)
                said.append(
                    f"earliest retained {low}: offsets {s} to {gone - 1} ({gone - s:,} records) not "
                    "replayed (deleted by retention)"
                )
            if high < e:
                gone = max(s, high)
                said.append(
                    f"the partition ends at offset {high} (the topic deleted and created again, or "
                    f"truncated?): offsets {gone} to {e - 1} ({e - gone:,} records) not replayed"
                )
            if said:
                missing.append(f"{wanted}, {'; '.join(said)}")
        return Replayable(reach, tuple(missing))

    def for_replay(self, mapping: Mapping) -> Mapping:
        """Read past what :meth:`replayable` found missing (``'onDataLoss'`` as the reader knows
        it, not a choice of the mapping's: ``skip``)."""
        from dataclasses import replace

        return replace(mapping, options={**mapping.options, "onDataLoss": "skip"})


def max_drift_us(mapping: Mapping) -> int | None:
    """The mapping's ``'alignmentMaxDrift'`` in microseconds: as given, else its WATERMARK's
    delay; None when alignment is off (``'off'``, or no WATERMARK: then nothing is late)."""
    if mapping.watermark is None:
        return None
    given = mapping.options.get("alignmentMaxDrift")
    if given is None:
        return mapping.watermark.delay_micros
    return None if given == "off" else text_micros(given)


def client_properties(
    options: dict[str, str], passed: dict[str, str], check: bool = False, where: str = ""
) -> dict[str, str]:
    """Consumer properties from a mapping's options; with ``check``, librdkafka is asked whether
    it knows each passed-through name (PlanError naming the property if not)."""
    props = {k: v for k, v in passed.items() if k != "auto.offset.reset"}
    props["bootstrap.servers"] = options["bootstrap.servers"]
    if check and passed:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        for name, value in passed.items():
            if name in ("bootstrap.servers", "auto.offset.reset"):
                continue
            try:  # no broker and no log: a client built only to check would connect in the
                # background and librdkafka would write its own lines over the command's output
                AdminClient({"log_level": 0, name: value})
            except (KafkaException, ValueError, TypeError) as exc:
                said = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
                raise PlanError(
                    f"mapping '{where}': option '{name}'='{value}' is refused by the Kafka client: {said}"
                ) from None
    return props


CONNECTOR = KafkaConnector()
