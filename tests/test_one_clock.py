"""One clock per job (issue 11, section 4): a stage that is new in a restored job starts at the
snapshot's watermark, so an event whose window had closed by then is late for it too, as for the
restored stage beside it. Real Spark, both restore formats, and a restored run that resumes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import EPOCH, orders_mapping, run, settings
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.snapshots.restore import plan_restore, seeds_from_json
from pitstop.sql.parser import parse_script
from test_old_snapshots import MAPPING, install

CUT_WATERMARK = EPOCH + timedelta(hours=2, minutes=55)  # last order before the cut at 03:00, less 5 min
LATE = 900  # an order at 01:10: its 1-hour and its 30-minute window had both closed at 02:55


def at(minutes: int) -> str:
    return (EPOCH + timedelta(minutes=minutes)).isoformat(sep=" ")


def write(folder: Path, name: str, orders: list[tuple[int, int, float]]) -> None:
    """Orders (id, minutes after the epoch, amount), all in region 'eu'."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"order_id": i, "region": "eu", "amount": a, "ts": at(m)}) + "\n" for i, m, a in orders
    ]
    (folder / f".{name}.tmp").write_text("".join(lines))
    (folder / f".{name}.tmp").rename(folder / name)


def tumble(size: str, stage: str = "hourly") -> str:
    return f"""SELECT /*+ STAGE({stage}) */ window_start, window_end, COUNT(*) AS orders,
            SUM(amount) AS revenue FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL {size}))
        GROUP BY window_start, window_end"""


FIRST_ROWS = (
    "SELECT order_id, ts FROM (SELECT order_id, ts, "
    "ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY ts) AS rn FROM orders) WHERE rn = 1"
)


def windows(manager: Manager, table: str) -> dict[datetime, int]:
    _, rows = manager.catalog.query(f"SELECT window_start, orders FROM {table} ORDER BY 1")
    return {start: int(n) for start, n in rows}


def ids(manager: Manager, table: str) -> set[int]:
    return {int(r[0]) for r in manager.catalog.query(f"SELECT order_id FROM {table}")[1]}


def expected(size: timedelta, minutes: list[int], watermark: datetime) -> dict[datetime, int]:
    """Windows of ``size`` over orders at ``minutes``, closed by ``watermark`` (batch truth)."""
    out: dict[datetime, int] = {}
    for m in minutes:
        ts = EPOCH + timedelta(minutes=m)
        start = EPOCH + ((ts - EPOCH) // size) * size
        if start + size <= watermark:
            out[start] = out.get(start, 0) + 1
    return out


def open_windows(
    size: timedelta, orders: list[tuple[int, int, float]], watermark: datetime
) -> list[tuple[datetime, datetime, int, Decimal]]:
    """(start, end, count, revenue) of the windows still open at ``watermark`` (batch truth)."""
    out: dict[datetime, tuple[int, Decimal]] = {}
    for _, m, amount in orders:
        ts = EPOCH + timedelta(minutes=m)
        start = EPOCH + ((ts - EPOCH) // size) * size
        if start + size > watermark:
            n, total = out.get(start, (0, Decimal(0)))
            out[start] = (n + 1, total + Decimal(str(amount)))
    return [(k, k + size, n, total) for k, (n, total) in sorted(out.items())]


@pytest.mark.spark
def test_a_new_stage_starts_on_the_jobs_clock_in_both_formats_and_after_a_resume(tmp_path: Path) -> None:
    data, home = tmp_path / "orders", tmp_path / "home"
    before = [(i, i * 20, 10.0) for i in range(10)]  # 00:00 .. 03:00, every 20 minutes
    write(data, "a-0.json", before)
    manager = Manager(settings(home))
    try:
        run(
            manager,
            orders_mapping(data)
            + f"""
            CREATE MAPPING hourly TYPE DuckDB;
            CREATE MAPPING hourly_r TYPE DuckDB; CREATE MAPPING half_r TYPE DuckDB;
            CREATE MAPPING first_r TYPE DuckDB;
            CREATE JOB revenue AS INSERT INTO hourly {tumble("'1' HOUR")};
            AWAIT JOB revenue;
            DROP JOB revenue WITH SNAPSHOT cut;
            """,
        )
        manifest = json.loads((home / "snapshots" / "cut" / "manifest.json").read_text())
        assert manifest["stages"]["hourly"]["watermark_ms"] == int(
            (CUT_WATERMARK - datetime(1970, 1, 1)).total_seconds() * 1000
        )

        # EXPLAIN says where the new stages' clock starts, in both formats.
        body = f"""FROM SNAPSHOT cut AS BEGIN
            INSERT INTO hourly_r {tumble("'1' HOUR")};
            INSERT INTO half_r {tumble("'30' MINUTE", "half")};
            INSERT INTO first_r {FIRST_ROWS};
        END;"""
        for options in ("", "OPTIONS ('restoreFormat'='canonical')"):
            rows = run(manager, f"EXPLAIN CREATE JOB again {options} {body}")[0].rows
            verdicts = {r[3]: (r[7], r[8]) for r in rows}
            clock = "starts at the snapshot's watermark 2024-01-01 02:55:00"
            assert verdicts["half"][0] == "starts empty"
            assert clock in verdicts["half"][1]
            assert clock in verdicts["first_r.dedup"][1]
            assert verdicts["hourly"][0] == "restored"

        # A restored job from the rows, with a new 30-minute window and a new deduplication; it
        # stops (pitstop exits) before the late order arrives, and resumes from the catalog.
        run(
            manager,
            """CREATE JOB again OPTIONS ('restoreFormat'='canonical') """ + body + "AWAIT JOB again;",
        )
    finally:
        manager.close()
    after = [(LATE, 70, 99.0), (20, 190, 10.0), (21, 260, 10.0)]  # 01:10 (late), 03:10, 04:20
    write(data, "b-0.json", after)
    manager = Manager(settings(home))
    try:
        run(manager, "AWAIT JOB again;")
        final_wm = EPOCH + timedelta(minutes=260 - 5)
        on_time = [m for _, m, _ in before] + [190, 260]
        # The restored hourly stage drops the late order; so does the new 30-minute one, which
        # would otherwise emit a window [01:00, 01:30) holding only that order.
        assert windows(manager, "hourly_r") == {
            k: v
            for k, v in expected(timedelta(hours=1), on_time, final_wm).items()
            if k >= CUT_WATERMARK - timedelta(minutes=55)
        }
        assert windows(manager, "half_r") == {
            k: v for k, v in expected(timedelta(minutes=30), [190, 260], final_wm).items()
        }
        assert ids(manager, "first_r") == {20, 21}

        # The natively restored job: the hourly stage goes on from Spark's own state files; the
        # late order is already in the folder when it starts.
        result = run(
            manager,
            """DROP JOB again;
            CREATE MAPPING hourly_n TYPE DuckDB; CREATE MAPPING half_n TYPE DuckDB;
            CREATE JOB native FROM SNAPSHOT cut AS BEGIN
                INSERT INTO hourly_n """
            + tumble("'1' HOUR")
            + """;
                INSERT INTO half_n """
            + tumble("'30' MINUTE", "half")
            + """;
            END;
            AWAIT JOB native;""",
        )
        assert "from Spark's state files (native)" in result[3].message
        assert windows(manager, "hourly_n") == windows(manager, "hourly_r")
        assert windows(manager, "half_n") == windows(manager, "half_r")

        # The two snapshots of the job's state, read and compared in plain SQL (no Spark).
        run(manager, "DROP JOB native WITH SNAPSHOT later;")
        [at_cut] = run(
            manager,
            "SELECT window_start, window_end, orders, revenue, acc0, acc1 "
            "FROM snapshot_state('cut', 'hourly') ORDER BY window_start;",
        )
        assert at_cut.columns == ("window_start", "window_end", "orders", "revenue", "acc0", "acc1")
        open_at_cut = open_windows(timedelta(hours=1), before, CUT_WATERMARK)
        assert [r[:4] for r in at_cut.rows] == open_at_cut
        assert [(r[2], r[3]) for r in at_cut.rows] == [(r[4], r[5]) for r in at_cut.rows]  # finished
        [compared] = run(
            manager,
            """SELECT window_start, coalesce(b.orders, 0) - coalesce(a.orders, 0) AS more
            FROM snapshot_state('cut', 'hourly') a
            FULL JOIN snapshot_state('later', 'hourly') b USING (window_start) ORDER BY window_start;""",
        )
        at_later = open_windows(timedelta(hours=1), before + after[1:], final_wm)
        counts_cut, counts_later = ({w[0]: w[2] for w in ws} for ws in (open_at_cut, at_later))
        assert compared.rows == tuple(
            (start, counts_later.get(start, 0) - counts_cut.get(start, 0))
            for start in sorted(counts_cut.keys() | counts_later.keys())
        )
        [half] = run(
            manager, "SELECT window_start, window_end, orders, revenue FROM snapshot_state('later', 'half');"
        )
        assert list(half.rows) == open_windows(timedelta(minutes=30), after[1:], final_wm)
    finally:
        manager.close()


NEW_STAGES = """FROM SNAPSHOT windows_v1 AS BEGIN
    INSERT INTO per_minute SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, region;
    INSERT INTO sliding SELECT /*+ STAGE(hop) */ window_start, window_end, region, COUNT(*) AS n
    FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '30' SECOND))
    GROUP BY window_start, window_end, region;
    INSERT INTO sessions SELECT /*+ STAGE(session) */ window_start, window_end, region, COUNT(*) AS n
    FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, region;
    INSERT INTO totals SELECT region, COUNT(*) AS n FROM events GROUP BY region;
    INSERT INTO regions SELECT DISTINCT region FROM events;
    INSERT INTO firsts SELECT id, ts
    FROM (SELECT id, ts, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) AS rn FROM events) WHERE rn = 1;
    INSERT INTO elsewhere SELECT /*+ STAGE(other) */ window_start, window_end, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE other, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
END;"""


def test_every_kind_with_a_watermark_says_where_its_clock_starts_and_the_run_keeps_it(
    manager: Manager,
) -> None:
    """No Spark: EXPLAIN over the committed snapshot, and the restore a run records (what a
    resumed run reads back from its catalog row)."""
    run(
        manager,
        MAPPING.format(limit=600)
        + """CREATE MAPPING totals TYPE DuckDB; CREATE MAPPING regions TYPE DuckDB;
        CREATE MAPPING firsts TYPE DuckDB; CREATE MAPPING elsewhere TYPE DuckDB;
        CREATE MAPPING other (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) TYPE Generator
            OPTIONS ('limit'='10');""",
    )
    install(manager)
    rows = run(manager, f"EXPLAIN CREATE JOB windows {NEW_STAGES}")[0].rows
    verdicts = {r[3]: (r[7], r[8]) for r in rows if r[3] is not None}
    clock = "starts at the snapshot's watermark 2024-01-01 00:04:54 UTC (one clock per job)"
    for stage in ("hop", "session", "firsts.dedup"):
        assert verdicts[stage][0] == "starts empty"
        assert clock in verdicts[stage][1], stage
    # No watermark, nothing late: a running aggregate and DISTINCT; nor for a stage whose
    # source the snapshot did not read (it reads from its start, on a clock of its own).
    for stage in ("totals.aggregate", "regions.dedup", "other"):
        assert verdicts[stage] == ("starts empty", "new stage; reads from the snapshot's source positions"), (
            stage
        )
    assert verdicts["per_minute.aggregate"][0] == "restored"

    [stmt] = parse_script(f"CREATE JOB windows {NEW_STAGES}")
    plan, _, _ = Executor(manager)._plan_create(stmt.node)
    snapshot = manager.catalog.get_snapshot("windows_v1")
    assert snapshot is not None
    restore = plan_restore(snapshot, plan, strict=False)
    _, seeds = seeds_from_json(json.loads(json.dumps(restore.to_json())))  # as the run's row keeps it
    clocks = {
        name: (s.old_watermark_ms, s.old_size_micros, s.old_gap_micros)
        for name, s in seeds.items()
        if s.clock_only
    }
    wm = 1704067494000
    assert clocks == {
        "hop": (wm, 60_000_000, None),
        "session": (wm, 10_000_000, 10_000_000),
        "firsts.dedup": (wm, 5_000_000, None),
        # Natively restored: Spark's clock in the copy, and the snapshot's below which nothing
        # goes (the copy's own may be lower: issue 23).
        "per_minute.aggregate": (wm, 60_000_000, None),
    }
    assert list(restore.native) == ["per_minute.aggregate"]
