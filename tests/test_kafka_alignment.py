"""Watermark alignment of Kafka partitions (issue 26): a paused partition's rows are not left
behind Spark's one watermark. The scenario on a real broker (Tansu) and real Spark: three
partitions, partition 1 pauses while 0 and 2 run hours of event time ahead, then resumes. With
alignment (the default) 0 and 2 wait, and the sink equals a batch computation; without it the
resumed rows are late, and every one the sink misses is counted in pitstop.late_rows.

The planning rule itself (``alignment.align``) is checked without a broker, on event times held
in lists: a second implementation of its ``Times`` protocol, not a stand-in for the broker."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import EPOCH, batch_windows, closed, make_orders, run, sink_windows
from kafka_helpers import Broker, broker  # noqa: F401 - the fixture
from pitstop.connectors.kafka.alignment import Aligned, IdleClock, Partition, align
from pitstop.errors import PlanError
from pitstop.manager import Manager

STEP = 90  # seconds of event time between orders
HOUR = timedelta(hours=1)
MINUTE = 60_000_000  # microseconds


class ListTimes:
    """Event times by offset, per partition (microseconds; None: a record without one)."""

    def __init__(self, times: dict[int, list[int | None]]) -> None:
        self.times = times
        self.fetches = 0

    def before(self, wanted: dict[int, int]) -> dict[int, int | None]:
        self.fetches += 1
        return {
            p: next((t for t in reversed(self.times[p][:o]) if t is not None), None)
            for p, o in wanted.items()
        }

    def at(self, wanted: dict[int, tuple[int, int]]) -> dict[int, int | None]:
        self.fetches += 1
        return {
            p: next((t for t in self.times[p][o:s] if t is not None), None) for p, (o, s) in wanted.items()
        }


def minutes(*values: int | None) -> list[int | None]:
    return [None if v is None else v * MINUTE for v in values]


# -- the rule (no Spark, no broker) ------------------------------------------------------------------
def test_a_partition_ahead_of_the_slowest_is_read_up_to_the_drift() -> None:
    times = ListTimes({0: minutes(*range(0, 100, 2)), 1: minutes(0, 2, 4), 2: minutes(*range(1, 100, 2))})
    parts = {0: Partition(0, 50), 1: Partition(0, 3), 2: Partition(0, 50)}
    got = align(parts, 5 * MINUTE, times)
    # Partition 1 ends at minute 4: the others read records up to minute 9, no further.
    assert got == Aligned({0: 5, 1: 3, 2: 5}, {0: 5, 2: 5}, (1,), 9 * MINUTE)
    # The next batch, partition 1 caught up and still waiting: nothing more for the others.
    again = align({0: Partition(5, 50), 1: Partition(3, 3), 2: Partition(5, 50)}, 5 * MINUTE, times)
    assert again.ends == {0: 5, 1: 3, 2: 5}


def test_partitions_within_the_drift_are_read_to_their_ends_with_one_lookup() -> None:
    times = ListTimes({p: minutes(*range(p, 300, 3)) for p in range(3)})
    got = align({p: Partition(0, 100) for p in range(3)}, 5 * MINUTE, times)
    assert got.ends == {0: 100, 1: 100, 2: 100} and got.held == {}
    assert times.fetches == 1  # the last record of each partition, in one lookup


def test_an_idle_or_empty_or_finished_partition_holds_no_other_back() -> None:
    times = ListTimes({0: minutes(*range(100)), 1: minutes(0, 1), 2: []})
    far = {0: Partition(0, 100), 2: Partition(0, 0)}
    assert align({**far, 1: Partition(2, 2, idle=True)}, 5 * MINUTE, times).ends[0] == 100
    # At a fence it has reached, partition 1 reads nothing more in this run.
    assert align({**far, 1: Partition(2, 2, capped=True)}, 5 * MINUTE, times).ends[0] == 100
    # Not idle: it holds partition 0 at minute 6; the empty partition 2 has no time to hold by.
    assert align({**far, 1: Partition(2, 2)}, 5 * MINUTE, times) == Aligned(
        {0: 7, 1: 2, 2: 0}, {0: 7}, (1,), 6 * MINUTE
    )


def test_records_without_an_event_time_do_not_stop_the_search() -> None:
    times = ListTimes({0: minutes(0, None, 2, None, 20, None), 1: minutes(0, 1)})
    got = align({0: Partition(0, 6), 1: Partition(2, 2)}, 5 * MINUTE, times)
    # Up to the record at minute 20, and the timeless one just before it, not including them.
    assert got.ends == {0: 3, 1: 2}


def test_a_partition_is_idle_once_read_to_its_end_with_no_new_record_for_the_timeout() -> None:
    now = [0.0]
    clock = IdleClock(30.0, now=lambda: now[0])
    clock.saw({0: 10, 1: 5})
    now[0] = 31.0
    assert clock.idle(1, 5) and not clock.idle(1, 4)  # partition 1 unread below its end: active
    clock.saw({0: 11, 1: 5})  # partition 0 got a record
    assert not clock.idle(0, 11) and clock.idle(1, 5)
    clock.broker_back()  # the broker was away: its silence is no partition's
    assert not clock.idle(1, 5)


def test_alignment_options_are_checked_by_name(manager: Manager) -> None:
    base = "'bootstrap.servers'='127.0.0.1:1', 'topic'='t'"

    def create(options: str) -> None:
        run(
            manager,
            "CREATE OR REPLACE MAPPING m (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE) "
            f"TYPE Kafka OPTIONS ({base}, {options});",
        )

    create("'alignmentMaxDrift'='90 seconds', 'idleTimeout'='1 minute'")
    create("'alignmentMaxDrift'='OFF'")
    stored = manager.catalog.get_mapping("m")
    assert stored is not None and stored.options["alignmentMaxDrift"] == "off"
    takes = "it takes an interval \\('30 seconds', '5 minutes'\\)"
    with pytest.raises(PlanError, match=f"option 'alignmentMaxDrift' is 'soon'; {takes} \\| off"):
        create("'alignmentMaxDrift'='soon'")
    with pytest.raises(PlanError, match=f"option 'idleTimeout' is '0 seconds'; {takes}\\n"):
        create("'idleTimeout'='0 seconds'")
    with pytest.raises(
        PlanError, match=r"unknown option 'alignmentMaxDrfit' \(did you mean 'alignmentMaxDrift'\?\)"
    ):
        create("'alignmentMaxDrfit'='1 minute'")


def test_the_lag_says_which_partitions_alignment_holds_back_not_that_they_are_lost(tmp_path: Path) -> None:
    """Without Spark: what a running source keeps in its folder (its start, the broker's ends, and
    the partitions its last plan held back)."""
    from pitstop.catalog.rows import Mapping
    from pitstop.connectors.kafka.connector import CONNECTOR
    from pitstop.connectors.kafka.names import BROKER, INITIAL

    mapping = Mapping("orders", "kafka", (), None, {"bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    (tmp_path / INITIAL).write_text(json.dumps({"0": 0, "1": 0, "2": 0}))
    status = {"ends": {"0": 200, "1": 100, "2": 200}, "checked": time.time()}
    held = {"held": {"0": 101, "2": 100}, "behind": [1], "drift_us": 5 * MINUTE}
    (tmp_path / BROKER).write_text(json.dumps({**status, **held}))
    position = {"0": 101, "1": 100, "2": 100}
    assert CONNECTOR.lag(tmp_path, mapping, position) == (
        "199 records behind (3 partitions); partition(s) 0, 2 held back by watermark alignment, "
        "more than 5 minutes ahead of partition(s) 1"
    )
    # Caught up since: the last plan held nothing back.
    (tmp_path / BROKER).write_text(json.dumps(status))
    assert (
        CONNECTOR.lag(tmp_path, mapping, {"0": 200, "1": 100, "2": 200}) == "0 records behind (3 partitions)"
    )


# -- the paused partition, on a real broker and real Spark -----------------------------------------
def mapping(b: Broker, options: str = "", job_options: str = "") -> str:
    return f"""
    CREATE MAPPING orders (
        order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
        WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
    ) TYPE Kafka OPTIONS ('bootstrap.servers'='{b.bootstrap}', 'topic'='orders'{options});
    CREATE MAPPING revenue TYPE DuckDB;
    CREATE JOB j {job_options} AS {HOURLY};
    """


HOURLY = """INSERT INTO revenue
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
    GROUP BY window_start, window_end, region"""


def orders(ids: range, keep=lambda i: True) -> list[dict[str, object]]:  # noqa: ANN001 - a predicate
    return [make_orders.order(i, STEP) for i in ids if keep(i)]


def produce(b: Broker, ids: range, keep=lambda i: True) -> None:  # noqa: ANN001 - a predicate
    """Order ``i`` to partition ``i % 3``: each partition in event-time order."""
    b.produce("orders", [(i % 3, make_orders.order(i, STEP)) for i in ids if keep(i)])


def paused(i: int) -> bool:
    return i % 3 == 1


def lag(manager: Manager) -> str:
    shown = run(manager, "SHOW JOBS;")[0]
    (row,) = shown.rows
    return str(row[shown.columns.index("lag")])


def until(what: str, check, timeout_s: float = 90.0) -> None:  # noqa: ANN001 - a predicate
    """Poll ``check`` (every 0.2 s) until it is true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.2)


def late_rows(manager: Manager) -> int:
    _, rows = manager.catalog.query("SELECT coalesce(sum(rows), 0) FROM pitstop.late_rows WHERE job = 'j'")
    return int(rows[0][0])


def late_by_partition(manager: Manager) -> dict[int, int]:
    _, rows = manager.catalog.query(
        "SELECT partition, CAST(sum(rows) AS BIGINT) FROM pitstop.late_rows WHERE job = 'j' GROUP BY 1"
    )
    return {int(p): int(n) for p, n in rows}


def watermark_after(last_id: int):  # noqa: ANN201 - a datetime
    return EPOCH + timedelta(seconds=(last_id - 1) * STEP) - timedelta(minutes=5)


@pytest.mark.spark
def test_with_alignment_a_paused_partition_loses_no_window(manager: Manager, broker: Broker) -> None:  # noqa: F811
    """Alignment is on by default (the drift is the WATERMARK's 5 minutes); the idle timeout is
    long, so that partition 1 counts as paused, not idle, however slow the machine. A pit stop
    while partitions are held back neither waits for them nor lets them run ahead."""
    broker.create_topic("orders", 3)
    produce(broker, range(0, 300))  # 7.5 hours of event time, 100 orders per partition
    run(manager, mapping(broker, ", 'idleTimeout'='1 hour'") + "AWAIT JOB j;")
    # Partition 1 pauses at order 298 (07:27); 0 and 2 run on to order 599 (14:58).
    produce(broker, range(300, 600), keep=lambda i: not paused(i))
    # 0 and 2 are read up to 5 minutes past 07:27, no further: to order 300 (07:30) and 299.
    held = (
        "orders: 199 records behind (3 partitions); partition(s) 0, 2 held back by watermark "
        "alignment, more than 5 minutes ahead of partition(s) 1"
    )
    until("partitions 0 and 2 held back", lambda: lag(manager) == held)
    # A pit stop meanwhile: the cut is where the job stands; the restored job holds them too.
    run(manager, f"DROP JOB j WITH SNAPSHOT s; CREATE JOB j FROM SNAPSHOT s AS {HOURLY};")
    until("partitions 0 and 2 held back after the pit stop", lambda: lag(manager) == held)
    produce(broker, range(300, 600), keep=paused)  # partition 1 resumes
    run(manager, "AWAIT JOB j;")
    expected = closed(batch_windows(orders(range(600)), HOUR), HOUR, watermark_after(600))
    assert sink_windows(manager, "revenue") == expected
    assert len(expected) == 14 * 3  # every hour closed by 14:53, three regions each
    assert late_rows(manager) == 0
    assert lag(manager) == "orders: 0 records behind (3 partitions)"
    run(manager, "DROP JOB j;")


@pytest.mark.spark
def test_without_alignment_every_row_a_paused_partition_loses_is_counted_late(
    manager: Manager,
    broker: Broker,  # noqa: F811
) -> None:
    broker.create_topic("orders", 3)
    produce(broker, range(0, 300))
    # The late rows kept too, each with its partition.
    keep = "OPTIONS ('lateRows'='keep')"
    run(manager, mapping(broker, ", 'alignmentMaxDrift'='off'", keep) + "AWAIT JOB j;")
    produce(broker, range(300, 600), keep=lambda i: not paused(i))
    run(manager, "AWAIT JOB j;")  # 0 and 2 read to 14:58: the watermark is 14:53
    produce(broker, range(300, 600), keep=paused)
    # Meanwhile partitions 0 and 2 get a few orders sent again from 00:04 to 00:13, long closed:
    # late too, theirs (a count per partition that mixed them up would show it).
    again = [3, 6, 9, 5, 8]
    broker.produce("orders", [(i % 3, make_orders.order(i, STEP)) for i in again])
    run(manager, "AWAIT JOB j;")
    # Partition 1's orders 301 to 559 (before 14:00) are in windows that closed: lost, and late.
    lost = orders(range(300, 600), keep=lambda i: paused(i) and i < 560)
    assert len(lost) == 87
    got = sink_windows(manager, "revenue")
    everything = closed(batch_windows(orders(range(600)), HOUR), HOUR, watermark_after(600))
    assert got != everything
    kept = [o for o in orders(range(600)) if o not in lost]
    assert got == closed(batch_windows(kept, HOUR), HOUR, watermark_after(600))
    assert late_rows(manager) == len(lost) + len(again)
    # Each under the partition it was read from (order i is in partition i % 3).
    truth = Counter([*(int(str(o["order_id"])) % 3 for o in lost), *(i % 3 for i in again)])
    assert late_by_partition(manager) == dict(truth) == {0: 3, 1: 87, 2: 2}
    _, kept = manager.catalog.query(
        "SELECT partition, count(*), count(*) FILTER (CAST(record->>'order_id' AS BIGINT) % 3 = partition) "
        "FROM pitstop.late_records WHERE job = 'j' GROUP BY 1 ORDER BY 1"
    )
    assert kept == [(0, 3, 3), (1, 87, 87), (2, 2, 2)]
    [(_, text)] = [r for r in run(manager, "DESCRIBE JOB j;")[0].rows if r[0].startswith("late rows")]
    assert text.startswith(
        "92 row(s) dropped behind the watermark (kept in pitstop.late_records): 92 from orders "
        "(partition 0: 3, partition 1: 87, partition 2: 2), first seen"
    )
    run(manager, "DROP JOB j;")


@pytest.mark.spark
def test_an_idle_partition_does_not_hold_the_others_back(manager: Manager, broker: Broker) -> None:  # noqa: F811
    broker.create_topic("orders", 3)
    produce(broker, range(0, 300))
    run(manager, mapping(broker, ", 'idleTimeout'='1 second'") + "AWAIT JOB j;")
    produce(broker, range(300, 600), keep=lambda i: not paused(i))  # partition 1 stops for good
    run(manager, "AWAIT JOB j;")  # returns once partition 1 is idle and 0 and 2 are read
    written = orders(range(600), keep=lambda i: i < 300 or not paused(i))
    assert sink_windows(manager, "revenue") == closed(
        batch_windows(written, HOUR), HOUR, watermark_after(600)
    )
    assert lag(manager) == "orders: 0 records behind (3 partitions)"
    run(manager, "DROP JOB j;")
