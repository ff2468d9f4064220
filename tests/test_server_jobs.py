"""The pit stop end to end through each real PostgreSQL client a BI user has — psql, psycopg 3,
asyncpg, SQLAlchemy + pandas, the JDBC driver — against ``pitstop serve`` on real Spark; results
checked against a batch computation. And the server restarted (SIGTERM, then SIGKILL) while a job
runs: the job resumes, no sink row lost or written twice."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import DELAY, EPOCH, ROOT, batch_windows, closed, make_orders, sink_windows
from pitstop.engine import checkpoint
from server_helpers import Served, cancelling, psql, race, serve_process

pytestmark = pytest.mark.spark

DAY = timedelta(hours=24)
STEP = 90
JDBC_JAR = Path("/usr/share/java/postgresql.jar")


def orders(first: int, last: int) -> list[dict[str, object]]:
    return [make_orders.order(i, STEP) for i in range(first, last)]


def expected(last: int) -> dict[Any, tuple[Decimal, int]]:
    watermark = EPOCH + timedelta(seconds=(last - 1) * STEP) - DELAY
    return closed(batch_windows(orders(0, last), DAY), DAY, watermark)


def start_script(folder: Path) -> list[str]:
    return [
        f"""CREATE MAPPING orders (order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
            WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE)
            TYPE File OPTIONS ('path'='{folder}', 'format'='json')""",
        "CREATE MAPPING daily TYPE DuckDB",
        """CREATE JOB revenue AS INSERT INTO daily
            SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
            FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
            GROUP BY window_start, window_end, region""",
        "AWAIT JOB revenue",
    ]


UPDATE = [
    "DROP JOB revenue WITH SNAPSHOT revenue_v1",
    None,  # more orders arrive here
    """CREATE JOB revenue FROM SNAPSHOT revenue_v1 AS INSERT INTO daily
        SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
        WHERE amount > 0
        GROUP BY window_start, window_end, region""",
    "AWAIT JOB revenue",
]
RESULT = "SELECT window_start, region, revenue, orders FROM daily ORDER BY window_start, region"


def as_windows(rows: list[tuple[Any, ...]]) -> dict[Any, tuple[Decimal, int]]:
    out = {}
    for start, region, revenue, count in rows:
        start = start if isinstance(start, datetime) else datetime.fromisoformat(str(start))
        assert (start, region) not in out, f"window {start} {region} twice"
        out[(start, str(region))] = (Decimal(str(revenue)).quantize(Decimal("0.01")), int(count))
    return out


def pit_stop(served: Served, tmp_path: Path, run: Callable[[list[str]], list[tuple[Any, ...]]]) -> None:
    """Run the pit stop through one client's ``run`` (statements in, the last one's rows out) and
    check the sink, as that client reads it, against a batch computation."""
    folder = tmp_path / "orders"
    make_orders.write_orders(folder, 0, 1000, files=2)
    run(start_script(folder))
    first = as_windows(run([RESULT]))
    assert first == expected(1000)
    run(UPDATE[:1])
    make_orders.write_orders(folder, 1000, 2000, files=2, prefix="a-later")
    run([s for s in UPDATE[2:] if s])
    final = as_windows(run([RESULT]))
    assert final == expected(2000)
    assert sink_windows(served.manager, "daily") == final  # no window written twice


def test_pit_stop_through_psycopg(served: Served, tmp_path: Path) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:

        def run(statements: list[str]) -> list[tuple[Any, ...]]:
            cur = None
            for sql in statements:
                cur = conn.execute(sql)
            return cur.fetchall() if cur is not None and cur.description else []

        pit_stop(served, tmp_path, run)
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
        assert ("daily",) in tables


def test_pit_stop_through_asyncpg(served: Served, tmp_path: Path) -> None:
    import asyncpg

    async def run_async(statements: list[str]) -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(served.url())
        try:
            rows: list[Any] = []
            for sql in statements:
                rows = await conn.fetch(sql)
            return [tuple(r) for r in rows]
        finally:
            await conn.close()

    pit_stop(served, tmp_path, lambda statements: asyncio.run(run_async(statements)))

    async def columns() -> list[tuple[str, str]]:
        conn = await asyncpg.connect(served.url())
        try:
            stmt = await conn.prepare("SELECT * FROM daily")
            return [(a.name, a.type.name) for a in stmt.get_attributes()]
        finally:
            await conn.close()

    assert asyncio.run(columns()) == [
        ("window_start", "timestamp"),
        ("window_end", "timestamp"),
        ("region", "text"),
        ("revenue", "numeric"),
        ("orders", "int8"),
    ]


def test_pit_stop_through_sqlalchemy_and_pandas(served: Served, tmp_path: Path) -> None:
    import pandas as pd
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(served.url().replace("postgresql://", "postgresql+psycopg://"))

    def run(statements: list[str]) -> list[tuple[Any, ...]]:
        last = statements[-1]
        with engine.connect() as conn:
            for sql in statements[:-1]:
                conn.execute(text(sql))
            if last.startswith("SELECT"):
                frame = pd.read_sql(last, conn)
                return list(frame.itertuples(index=False, name=None))
            conn.execute(text(last))
            conn.commit()
        return []

    pit_stop(served, tmp_path, run)
    inspector = inspect(engine)
    assert "daily" in inspector.get_table_names()
    assert inspector.has_table("daily")
    columns = {c["name"]: str(c["type"]) for c in inspector.get_columns("daily")}
    assert columns == {
        "window_start": "TIMESTAMP",
        "window_end": "TIMESTAMP",
        "region": "TEXT",
        "revenue": "NUMERIC(22, 2)",
        "orders": "BIGINT",
    }
    frame = pd.read_sql("daily", engine)  # pandas' has_table, then SELECT * through the inspector
    assert len(frame) == len(expected(2000))
    engine.dispose()


def test_pit_stop_through_psql(served: Served, tmp_path: Path) -> None:
    def run(statements: list[str]) -> list[tuple[Any, ...]]:
        done = psql(
            served, "-v", "ON_ERROR_STOP=1", "-A", "-t", "-F", "\t", stdin=";\n".join(statements) + ";\n"
        )
        assert done.returncode == 0, done.stderr
        rows = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
        return [tuple(r) for r in rows]

    pit_stop(served, tmp_path, run)
    listing = psql(served, "-c", "\\dt")
    assert listing.returncode == 0, listing.stderr
    assert any(line.split("|")[1].strip() == "daily" for line in listing.stdout.splitlines() if "|" in line)
    described = psql(served, "-c", "\\d daily")
    assert described.returncode == 0, described.stderr
    assert "numeric(22,2)" in described.stdout and "bigint" in described.stdout


def test_pit_stop_through_jdbc(served: Served, tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java and JDBC_JAR.exists(), "java and the JDBC driver come from tests/tools/install.sh"
    url = f"jdbc:postgresql://{served.host}:{served.port}/pitstop"
    program = ROOT / "tests" / "clients" / "JdbcClient.java"
    outputs: list[str] = []

    def run(statements: list[str]) -> list[tuple[Any, ...]]:
        script = tmp_path / "jdbc.sql"
        script.write_text("".join(s + ";\n" for s in statements))
        done = subprocess.run(
            [java, "-cp", str(JDBC_JAR), str(program), url, "tester", "public", str(script)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append(done.stdout)
        return [tuple(line.split("\t")[1:]) for line in done.stdout.splitlines() if line.startswith("#row")]

    pit_stop(served, tmp_path, run)
    last = outputs[-1].splitlines()
    assert "#table\tpublic\tdaily" in last
    columns = {tuple(line.split("\t")[2:4]) for line in last if line.startswith("#column\tdaily")}
    assert columns == {
        ("window_start", "timestamp"),
        ("window_end", "timestamp"),
        ("region", "text"),
        ("revenue", "numeric"),
        ("orders", "int8"),
    }


def _serve(home: Path, port: int) -> subprocess.Popen[str]:
    return serve_process(home, port, cwd=ROOT)[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_restarts_resume_jobs_with_every_row_once(tmp_path: Path) -> None:
    home, folder, port = tmp_path / "home", tmp_path / "orders", _free_port()
    url = f"postgresql://ops@127.0.0.1:{port}/pitstop"
    make_orders.write_orders(folder, 0, 600, files=2)
    proc = _serve(home, port)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for sql in start_script(folder):
                conn.execute(sql)
        # 1. SIGTERM while the job runs: it stops at a batch boundary and resumes at the next start.
        make_orders.write_orders(folder, 600, 1200, files=3, prefix="b")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
        proc = _serve(home, port)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("AWAIT JOB revenue")
            assert conn.execute("SELECT name, status FROM pitstop.jobs").fetchall() == [
                ("revenue", "RUNNING")
            ]
            # 2. SIGKILL in the middle of new input: the next server resumes from the checkpoints.
            make_orders.write_orders(folder, 1200, 2000, files=4, prefix="c")
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        proc = _serve(home, port)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("AWAIT JOB revenue")
            rows = conn.execute(RESULT).fetchall()
            assert as_windows(rows) == expected(2000)
            assert conn.execute("SELECT count(*) FROM daily").fetchone() == (len(rows),)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_cancel_stops_waiting_for_a_job_and_the_job_goes_on(served: Served, tmp_path: Path) -> None:
    folder = tmp_path / "orders"
    make_orders.write_orders(folder, 0, 200, files=1)
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute("SET 'trigger_ms' = '120000'")  # the job looks for new input every 2 minutes
        for sql in start_script(folder)[:3]:  # the windows closed by the input wait for a trigger
            conn.execute(sql)
        with (
            cancelling(conn),
            pytest.raises(psycopg.errors.QueryCanceled, match="cancelled: job 'revenue' did not catch up"),
        ):
            conn.execute("AWAIT JOB revenue")
        # The wait ended on the cancel, not when the job caught up: its next trigger, two minutes
        # on, has not come (no batch after the first one was even planned).
        branch = served.manager.runs["revenue"].branches[0]
        assert checkpoint.latest_planned(branch.checkpoint) in (None, 0)
        assert conn.execute("SELECT name, status FROM pitstop.jobs").fetchall() == [("revenue", "RUNNING")]
        assert branch.query.isActive


def test_clients_racing_for_one_job_or_snapshot_name_end_with_one_winner(
    served: Served, tmp_path: Path
) -> None:
    folder = tmp_path / "orders"
    make_orders.write_orders(folder, 0, 200, files=1)
    with psycopg.connect(served.url(), autocommit=True) as conn:
        for sql in start_script(folder)[:2]:
            conn.execute(sql)
    assert race(served, start_script(folder)[2], 3) == ["created", "refused", "refused"]
    assert list(served.manager.runs) == ["revenue"]
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute("AWAIT JOB revenue")
        assert as_windows(conn.execute(RESULT).fetchall()) == expected(200)
    runs = list((served.manager.home / "runs").iterdir())
    assert len(runs) == 1, runs  # the refused ones left no run folder behind
    # Snapshotting one job at the same moment: one snapshot, the others refused by name.
    assert race(served, "CREATE SNAPSHOT s1 FOR JOB revenue", 3) == ["created", "refused", "refused"]
    snapshots = served.manager.home / "snapshots"
    with psycopg.connect(served.url(), autocommit=True) as conn:
        assert conn.execute("SELECT name FROM pitstop.snapshots").fetchall() == [("s1",)]
    assert sorted(p.name for p in snapshots.iterdir()) == ["s1"]  # no half snapshot beside it
    # Dropping one snapshot at the same moment: one drops it, the others are told it is gone.
    outcomes: list[str] = []
    barrier = threading.Barrier(3)

    def drop() -> None:
        with psycopg.connect(served.url(), autocommit=True) as conn:
            barrier.wait()
            try:
                conn.execute("DROP SNAPSHOT s1")
                outcomes.append("dropped")
            except psycopg.errors.UndefinedObject as exc:
                assert "unknown snapshot 's1'" in str(exc)
                outcomes.append("unknown")

    threads = [threading.Thread(target=drop) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(outcomes) == ["dropped", "unknown", "unknown"]
    with psycopg.connect(served.url(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pitstop.snapshots").fetchall() == [(0,)]
        assert conn.execute("SELECT status FROM pitstop.jobs").fetchall() == [("RUNNING",)]
    assert list(snapshots.iterdir()) == []
