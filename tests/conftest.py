"""Shared fixtures: a pitstop home per test, one Spark session per test run, a pitstop server in
this process (``served``), the order stream. The ``pitstop`` command: tests/command_helpers.py."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from pitstop.connectors.base import Sink
from pitstop.driver import Driver
from pitstop.executor import Executor, Result
from pitstop.manager import Manager
from pitstop.settings import Settings

if TYPE_CHECKING:
    from server_helpers import Served

ROOT = Path(__file__).resolve().parent.parent

# The Spark drivers of a test run (this process's one session, and the pitstop processes tests
# start) live for seconds to minutes over tiny data: the JVM's C1 compiler alone starts Spark on
# about half the CPU of the default C1 + C2 (a first query after 8.8 s of JVM CPU against 15-17 s,
# local[2]), which also halves the wall time on a busy 2-core machine; the serial collector, for
# their small heaps, another ~13 % (test_pit_stop.py and a kill test in one process: 185 CPU-s
# with G1, 160 with it; 141 with `pitstop prepare`'s class archive too). pyspark hands
# PYSPARK_SUBMIT_ARGS to spark-submit; subprocesses inherit it. Set it yourself to run otherwise.
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS", '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'
)

_spec = importlib.util.spec_from_file_location("make_orders", ROOT / "examples" / "make_orders.py")
assert _spec is not None and _spec.loader is not None
make_orders = importlib.util.module_from_spec(_spec)
sys.modules["make_orders"] = make_orders
_spec.loader.exec_module(make_orders)

EPOCH = make_orders.EPOCH
DELAY = timedelta(minutes=5)  # the WATERMARK delay of the orders mapping in these tests


def settings(home: Path) -> Settings:
    return Settings(home=home, master="local[2]", shuffle_partitions=2, trigger_ms=200)


@pytest.fixture
def manager(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Manager]:
    m = Manager(settings(tmp_path / "home"))
    yield m
    started = m.spark_started
    m.close()
    if started and request.node.get_closest_marker("spark") is None:
        # `pytest -m "not spark"` must run no Spark: a test that starts it says so.
        pytest.fail(f"{request.node.nodeid} started Spark but is not marked @pytest.mark.spark")


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    """A pitstop server in this process on ``tmp_path/home`` (real sockets, no Spark until a
    statement needs it), started as ``@pytest.mark.served(...)`` says (server_helpers.ServedWith)."""
    from server_helpers import served_for  # imports the server's wire layers: only when used

    with served_for(request.node, tmp_path) as s:
        yield s


@pytest.fixture(scope="session", autouse=True)
def _stop_spark_at_end() -> Iterator[None]:
    yield
    from pitstop.engine.session import stop_session

    stop_session()


def run(manager: Manager, script: str) -> list[Result]:
    return [r for _, r in Driver(Executor(manager)).run_script(script)]


def orders_mapping(folder: Path, name: str = "orders") -> str:
    return f"""
    CREATE MAPPING {name} (
        order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
        WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
    ) TYPE File OPTIONS ('path'='{folder}', 'format'='json');
    """


def revenue_select(size: str, where: str = "") -> str:
    return f"""
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL {size}))
    {where}
    GROUP BY window_start, window_end, region
    """


Window = tuple[datetime, str]


def batch_windows(orders: list[dict[str, object]], size: timedelta) -> dict[Window, tuple[Decimal, int]]:
    """A batch computation of windowed revenue per region: the reference for every test."""
    out: dict[Window, list] = defaultdict(lambda: [Decimal("0"), 0])
    for o in orders:
        ts = datetime.fromisoformat(str(o["ts"]))
        start = EPOCH + ((ts - EPOCH) // size) * size
        acc = out[(start, str(o["region"]))]
        acc[0] += Decimal(str(o["amount"])).quantize(Decimal("0.01"))
        acc[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def sink_windows(manager: Manager, table: str) -> dict[Window, tuple[Decimal, int]]:
    """The rows of a DuckDB sink, keyed by window; fails on a duplicated window row."""
    _, rows = manager.catalog.query(f"SELECT window_start, region, revenue, orders FROM {table}")
    out: dict[Window, tuple[Decimal, int]] = {}
    for start, region, revenue, count in rows:
        assert (start, region) not in out, f"window {start} {region} written twice to {table}"
        out[(start, region)] = (Decimal(revenue), int(count))
    return out


def closed(windows: dict[Window, tuple[Decimal, int]], size: timedelta, watermark: datetime) -> dict:
    return {k: v for k, v in windows.items() if k[0] + size <= watermark}


def until(what: str, check: Callable[[], Any], timeout_s: float = 120.0) -> Any:
    """Poll ``check()`` every 0.2 s until it returns something true, and return that (an
    observable condition, not a sleep standing in for an event); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.2)


def process_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def wait_until_gone(pgid: int, timeout_s: float = 60) -> None:
    """Wait until every process of the group ``pgid`` has exited. A killed pitstop's JVM notices
    its parent is gone (its stdin closes) and exits; a JVM that went on writing checkpoints after
    its driver died would be a bug worth knowing about."""
    deadline = time.monotonic() + timeout_s
    while process_group(pgid):
        if time.monotonic() > deadline:
            left = process_group(pgid)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes {left} outlived their pitstop process by {timeout_s} s")
        time.sleep(0.2)


def write_outcome(sink: Sink, table: pa.Table, batch_id: int) -> BaseException | None:
    """``sink.write(table, batch_id)``'s exception, or None: what a writer thread hands its test."""
    try:
        sink.write(table, batch_id)
    except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
        return exc
    return None
