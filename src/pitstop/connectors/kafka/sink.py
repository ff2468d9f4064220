"""The Kafka sink: every micro-batch once, as a ``read_committed`` consumer sees it.

Records: one per row. The value is a JSON object of the row's columns (times as
``YYYY-MM-DD HH:MM:SS``, UTC); the key is the ``'keyColumn'``'s value (UTF-8 text, or 8 bytes
big-endian with ``'keyFormat'='bigint'``), else none. Headers name the batch each record belongs
to: ``pitstop.job``, ``pitstop.run``, ``pitstop.branch``, ``pitstop.batch``, ``pitstop.seq`` (the
record's place in its batch) and ``pitstop.count`` (the batch's records). A batch's rows are
sorted by value and key before they are numbered, so a batch that Spark replays numbers its
records the same way.

Two guarantees, one code path:

- **Transactions** (``'transactions'='true'``, the default): a batch is one Kafka transaction of a
  producer whose ``transactional.id`` is derived from the job, the sink and the branch
  (:func:`transactional_id`); the commit of batch ``n``'s transaction is what makes batch ``n``
  visible, and a new producer of the same branch fences an older one (a zombie) and ends the
  transaction it left open. On a broker whose aborted transactions stay hidden (Apache Kafka),
  that alone is exactly once for ``read_committed`` consumers.
- **Idempotence per (run, batch)**, always: a ledger in the run's folder
  (``branches/<i>/kafka-sink.json``) says which batch the sink wrote last and, for the batch in
  flight, from which offset of each partition it was written. A batch replayed after it was
  written is skipped; the batch that was in flight when the process died is read back from those
  offsets, and only its records that are not there are written. This is what keeps a batch from
  being doubled on a broker that shows an aborted transaction's records (Tansu 0.6 does:
  ``tests/kafka_helpers.py``), and on any broker with ``'transactions'='false'``.

How a batch is written (:meth:`KafkaSink.write`):

1. Open the producer once per sink: with transactions, ``init_transactions`` fences any older
   producer of the branch and ends its open transaction (so that, on any broker, what the
   read-back of step 3 sees no longer changes).
2. Read the ledger. A batch at or below the last one written is skipped (Spark replays a batch
   whose sink write finished but whose checkpoint commit did not).
3. If the ledger says this batch was in flight, read each partition back from the ledger's
   offsets to its end (``read_committed``), and keep the numbers of this batch's records found.
4. Write the ledger (batch in flight, and the offsets it is written from), produce the records
   not found, commit the transaction (or flush the idempotent producer), and write the ledger
   again (batch written; the next batch's offsets are after the last record delivered).

A failed write closes the producer: the next attempt begins again at step 1, where the fenced or
failed transaction is ended, and step 3 finds what was written. A broker that does not answer
(:class:`BrokerAway`) makes the batch wait and try again, as the Postgres sink does: every 0.5 s,
doubling up to 5 s, with ``waiting`` saying why (SHOW JOBS shows it), until the broker is back or
the run stops (the batch is then written when the job resumes). Any other failure goes to Spark,
which restarts the branch.

This module writes a batch (steps 1, 2 and 4); step 3's read-back is :mod:`.readback`'s, the
ledger, headers and transactional id :mod:`.ledger`'s, the sink's state and the broker's codes
:mod:`.sinkbase`'s.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pitstop.connectors.kafka import clientlog
from pitstop.connectors.kafka.ledger import HEADERS, Ledger, transactional_id
from pitstop.connectors.kafka.readback import ReadBack
from pitstop.connectors.kafka.sinkbase import CONSUMER_ONLY, MSG_TIMED_OUT, TIMEOUT_S, UNREACHABLE, BrokerAway
from pitstop.errors import PitstopError, PlanError
from pitstop.faults import crash_point
from pitstop.retry import Backoff, retry

log = logging.getLogger(__name__)

RETRY = Backoff(first_s=0.5, max_s=5.0)  # a batch waiting for the broker tries again this often
SAY_WAITING_S = 5.0  # records undelivered this long: the sink says it waits (while librdkafka retries)


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes


class KafkaSink(ReadBack):
    # -- the sink protocol ---------------------------------------------------------------------------
    def prepare(self, schema: list[tuple[str, str]]) -> None:
        """Check the job's columns against the mapping's (if it declares any) and ``keyColumn``."""
        names = {n.lower() for n, _ in schema}
        declared = [c.name for c in self.mapping.columns if not c.name.startswith("__")]
        missing = [c for c in declared if c.lower() not in names]
        if missing:
            raise PlanError(
                f"Kafka mapping '{self.mapping.name}' declares column(s) {', '.join(missing)} that the "
                "job does not write; alias the job's columns to the mapping's, or write to another mapping"
            )
        if self.key_column is not None and self.key_column.lower() not in names:
            raise PlanError(
                f"Kafka mapping '{self.mapping.name}': 'keyColumn'='{self.key_column}' is not a column the "
                f"job writes ({', '.join(n for n, _ in schema)})"
            )
        if self.key_column is not None and self.key_format == "bigint":
            kind = next(t for n, t in schema if n.lower() == self.key_column.lower())
            if kind.lower() not in ("bigint", "int", "smallint", "tinyint"):
                raise PlanError(
                    f"Kafka mapping '{self.mapping.name}': 'keyFormat'='bigint' needs a whole-number "
                    f"'keyColumn'; '{self.key_column}' is {kind}. Cast it in the job, or use "
                    "'keyFormat'='varchar'"
                )

    def last_batch(self) -> int | None:
        """The last batch wholly written by this run's branch (from the ledger)."""
        return Ledger.load(self.ledger_path).written

    def write(self, table: pa.Table, batch_id: int) -> None:
        """Write one micro-batch once; wait for the broker while it does not answer."""
        warned = False

        def attempt() -> None:
            if self._stop.is_set():
                raise PitstopError(
                    f"Kafka mapping '{self.mapping.name}': the job stopped before batch {batch_id} was "
                    "written; it is written when the job resumes"
                )
            with self._lock:
                try:
                    self._write(table, batch_id)
                except BaseException:
                    self._close(wait=False)  # Step 1 again on the next attempt: the open transaction is ended
                    raise
                if self.waiting is not None:
                    log.warning("%s: the broker answers again; batch %d written", self.topic, batch_id)
                    self.waiting = None

        def waits(exc: BrokerAway) -> None:
            nonlocal warned
            if not warned:  # once per batch; ``waiting`` says the rest
                log.warning(
                    "%s: batch %d waits for the broker (%s); the job waits", self.topic, batch_id, exc
                )
                warned = True
            self.waiting = f"waiting for Kafka at {self._where()}: {exc}"

        retry(attempt, transient=BrokerAway, backoff=RETRY, on_transient=waits, sleep=self._stop.wait)

    def interrupt(self) -> None:
        """The run is stopping: a batch waiting for the broker stops waiting (it is written when
        the job resumes)."""
        self._stop.set()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _where(self) -> str:
        return self.client.get("bootstrap.servers", "?")

    # -- the protocol ----------------------------------------------------------------------------------
    def _write(self, table: pa.Table, batch_id: int) -> None:
        # Step 1. The producer (with transactions: fences older producers of this branch).
        producer = self._open()
        # Step 2. The ledger: a batch already written is skipped.
        ledger = Ledger.load(self.ledger_path)
        if ledger.written is not None and batch_id <= ledger.written:
            log.info("%s: batch %s of run %s already written; skipped", self.topic, batch_id, self.run_id)
            return
        records = self._records(table)
        if not records:
            return
        # Step 3. The batch that was in flight: which of its records are there already.
        found: set[int] = set()
        if ledger.writing == batch_id:
            found = self._read_back(ledger.start, batch_id)
            log.warning(
                "%s: batch %s of run %s was cut short; %d of its %d records are in the topic; "
                "writing the rest",
                self.topic,
                batch_id,
                self.run_id,
                len(found),
                len(records),
            )
        else:
            ledger = Ledger(ledger.written, batch_id, ledger.start or self._ends())
            ledger.save(self.ledger_path)
        # Step 4. Produce what is missing, in one transaction; then the ledger says written.
        delivered: dict[str, int] = {}
        errors: list[Any] = []

        def done(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                p = str(msg.partition())
                delivered[p] = max(delivered.get(p, -1), msg.offset())

        todo = [i for i in range(len(records)) if i not in found]
        if self.transactions:
            producer.begin_transaction()
        half = len(todo) // 2
        for n, seq in enumerate(todo):
            if n == half and half:
                self._flush(producer, errors)
                crash_point("sink.half_written")
            record = records[seq]
            headers = self._headers(batch_id, seq, len(records))
            while True:
                try:
                    producer.produce(
                        self.topic, value=record.value, key=record.key, headers=headers, on_delivery=done
                    )
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.1)
            producer.poll(0)
        self._flush(producer, errors)
        crash_point("sink.before_commit")
        if self.transactions:
            self._commit(producer)
        crash_point("sink.after_commit")
        start = dict(ledger.start)
        for p, offset in delivered.items():
            start[p] = max(start.get(p, 0), offset + 1)
        Ledger(batch_id, None, start).save(self.ledger_path)

    def _open(self) -> Any:
        if self._producer is not None:
            return self._producer
        from confluent_kafka import Producer

        conf: dict[str, Any] = {"log_level": 3, "linger.ms": 5, "logger": clientlog.LOGGER}
        conf.update({k: v for k, v in self.client.items() if k not in CONSUMER_ONLY})
        conf.update({"enable.idempotence": True, "acks": "all"})
        if self.transactions:
            conf["transactional.id"] = transactional_id(self.job, self.mapping.name, self.branch)
        producer = Producer(conf)
        if self.transactions:
            from confluent_kafka import KafkaException

            try:
                producer.init_transactions(TIMEOUT_S)
            except KafkaException as exc:
                err: Any = exc.args[0] if exc.args else exc
                said = err.str() if hasattr(err, "str") else str(exc)
                if hasattr(err, "retriable") and (err.retriable() or err.code() in UNREACHABLE):
                    raise BrokerAway(f"the broker does not answer ({said})") from None
                raise RuntimeError(
                    f"Kafka mapping '{self.mapping.name}': the broker does not start a transaction "
                    f"for '{conf['transactional.id']}' ({said}); if it has no transactions, "
                    "OPTIONS ('transactions'='false') writes without them, still once per batch"
                ) from None
        self._producer = producer
        return producer

    def _close(self, wait: bool = True) -> None:
        """Let the producer go. After a failed batch (``wait`` False) it is closed on a thread of
        its own: librdkafka's close aborts the open transaction, which waits for a broker that
        does not answer, and the batch must be free to wait and try again, or to stop. The next
        producer of the branch fences it either way (step 1)."""
        producer, self._producer = self._producer, None
        if producer is None:
            return

        def close() -> None:
            try:
                producer.purge()  # what a failed batch left unsent goes nowhere
                with warnings.catch_warnings():  # e.g. a fenced producer cannot abort: said below
                    warnings.simplefilter("ignore")
                    producer.close()
            except Exception:  # noqa: BLE001 - a producer in any state is let go
                log.debug("closing the producer of %s", self.topic, exc_info=True)

        if wait:
            close()
        else:
            threading.Thread(target=close, name=f"pitstop-kafka-close-{self.topic}", daemon=True).start()

    def _flush(self, producer: Any, errors: list[Any]) -> None:
        """Wait for every record produced to be delivered, a second at a time: after
        SAY_WAITING_S the sink says it waits (librdkafka keeps trying meanwhile); after TIMEOUT_S,
        or a delivery error saying the broker is away, the batch is tried again (BrokerAway)."""
        started = time.monotonic()
        while True:
            left = producer.flush(1.0)
            if errors:
                first = errors[0]
                code = first.code() if hasattr(first, "code") else None
                if code in UNREACHABLE or code == MSG_TIMED_OUT:
                    raise BrokerAway(f"records to topic '{self.topic}' not delivered ({first})")
                raise RuntimeError(f"Kafka mapping '{self.mapping.name}': topic '{self.topic}': {first}")
            if not left:
                return
            waited = time.monotonic() - started
            if self._stop.is_set():
                raise PitstopError(
                    f"Kafka mapping '{self.mapping.name}': the job stopped with {left} record(s) not yet "
                    "delivered; the batch is written when the job resumes"
                )
            if waited >= TIMEOUT_S:
                raise BrokerAway(
                    f"{left} record(s) to topic '{self.topic}' not delivered within {TIMEOUT_S:g} s"
                )
            if waited >= SAY_WAITING_S:
                self.waiting = (
                    f"waiting for Kafka at {self._where()}: {left} record(s) to topic '{self.topic}' not "
                    f"delivered for {waited:.0f} s"
                )

    def _commit(self, producer: Any) -> None:
        from confluent_kafka import KafkaException

        try:
            producer.commit_transaction(TIMEOUT_S)
        except KafkaException as exc:
            err: Any = exc.args[0] if exc.args else exc
            if hasattr(err, "retriable") and (err.retriable() or err.code() in UNREACHABLE):
                raise BrokerAway(
                    f"the commit of the batch's transaction got no answer ({err.str()})"
                ) from None
            raise

    def _records(self, table: pa.Table) -> list[Record]:
        from pitstop.connectors.values import json_value, naive_utc

        rows = naive_utc(table).to_pylist()
        key_name = None
        if self.key_column is not None:
            key_name = next(n for n in table.column_names if n.lower() == self.key_column.lower())
        out = []
        for row in rows:
            value = json.dumps(row, default=json_value, separators=(",", ":")).encode()
            key = self._key(row[key_name]) if key_name is not None else None
            out.append(Record(key, value))
        out.sort(key=lambda r: (r.value, r.key or b""))
        return out

    def _key(self, value: Any) -> bytes | None:
        if value is None:
            return None
        if self.key_format == "bigint":
            return struct.pack(">q", int(value))
        from pitstop.connectors.values import json_value

        return (value if isinstance(value, str) else str(json_value(value))).encode()

    def _headers(self, batch_id: int, seq: int, count: int) -> list[tuple[str, bytes]]:
        values = (self.job, self.run_id, str(self.branch), str(batch_id), str(seq), str(count))
        return [(h, v.encode()) for h, v in zip(HEADERS, values, strict=True)]
