"""The pit stop, end to end on real Spark and real DuckDB files: stop a windowed job with a
snapshot, start an updated job from it, and compare with a batch computation over all orders."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    DELAY,
    EPOCH,
    batch_windows,
    closed,
    make_orders,
    orders_mapping,
    revenue_select,
    run,
    sink_windows,
)
from pitstop.connectors import positions
from pitstop.errors import CatalogError, CompatibilityError, JobFailedError, PitstopError, PlanError
from pitstop.manager import Manager
from pitstop.snapshots.restore import NATIVE, ROWS

pytestmark = pytest.mark.spark  # every test here runs jobs on real Spark

DAY = timedelta(hours=24)
HOUR = timedelta(hours=1)
STEP = 90  # seconds between orders


def orders(first: int, last: int) -> list[dict[str, object]]:
    return [make_orders.order(i, STEP) for i in range(first, last)]


def last_watermark(last_id: int) -> datetime:
    return EPOCH + timedelta(seconds=(last_id - 1) * STEP) - DELAY


def test_updated_job_keeps_daily_state_and_adds_hourly_window(manager: Manager, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 2000, files=4)
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING daily_revenue TYPE DuckDB;
        CREATE MAPPING hourly_revenue TYPE DuckDB;
        CREATE JOB revenue AS INSERT INTO daily_revenue {revenue_select("'24' HOUR")};
        AWAIT JOB revenue;
    """,
    )
    dropped = run(manager, "DROP JOB revenue WITH SNAPSHOT revenue_v1;")
    assert "snapshot 'revenue_v1'" in dropped[0].message

    # The snapshot is listed, and its manifest names stage, positions and watermark.
    snaps = run(manager, "SHOW SNAPSHOTS;")[0]
    assert [r[2:4] for r in snaps.rows] == [("revenue", "revenue_v1")]
    manifest = json.loads((tmp_path / "home" / "snapshots" / "revenue_v1" / "manifest.json").read_text())
    assert manifest["sources"]["orders"]["pos"] == 4
    assert list(manifest["stages"]) == ["daily_revenue.aggregate"]
    assert manifest["stages"]["daily_revenue.aggregate"]["rows"] == 3  # day 3 is open, 3 regions
    assert run(manager, "SHOW JOBS;")[0].rows == ()

    # More orders arrive, in files whose names sort before the ones already read.
    make_orders.write_orders(data, 2000, 4000, files=4, prefix="a-later")

    # EXPLAIN says how each stage would be restored, and starts nothing.
    updated = f"""FROM SNAPSHOT revenue_v1 AS BEGIN
            INSERT INTO daily_revenue {revenue_select("'24' HOUR", "WHERE amount > 10")};
            INSERT INTO hourly_revenue {revenue_select("'1' HOUR", "WHERE amount > 10")};
        END;"""
    explained = run(manager, f"EXPLAIN CREATE JOB revenue {updated}")[0]
    reasons = {r[3]: (r[7], r[8]) for r in explained.rows}
    assert reasons["daily_revenue.aggregate"][0] == "restored"
    assert reasons["daily_revenue.aggregate"][1].endswith(NATIVE)
    assert reasons["hourly_revenue.aggregate"][0] == "starts empty"
    canonical = run(manager, f"EXPLAIN CREATE JOB revenue OPTIONS ('restoreFormat'='canonical') {updated}")[0]
    assert f"{ROWS} (3); 'restoreFormat' is 'canonical'" in canonical.rows[0][8]
    with pytest.raises(
        PlanError, match="'restoreFormat'='fast' is not a restore format; use one of: auto, canonical"
    ):
        run(manager, f"CREATE JOB revenue OPTIONS ('restoreFormat'='fast') {updated}")
    assert run(manager, "SHOW JOBS;")[0].rows == ()

    result = run(
        manager,
        f"""
        CREATE JOB revenue FROM SNAPSHOT revenue_v1 AS BEGIN
            INSERT INTO daily_revenue {revenue_select("'24' HOUR", "WHERE amount > 10")};
            INSERT INTO hourly_revenue {revenue_select("'1' HOUR", "WHERE amount > 10")};
        END;
        AWAIT JOB revenue;
    """,
    )
    # The daily stage is unchanged (the filter is stateless): it starts on Spark's state files.
    assert f"stage 'daily_revenue.aggregate': restored: same window, keys and accumulators; {NATIVE}" in (
        result[0].message
    )
    assert "stage 'hourly_revenue.aggregate': starts empty" in result[0].message

    # A snapshot name that is taken is refused, and the job keeps running.
    with pytest.raises(CatalogError, match="snapshot 'revenue_v1' already exists"):
        run(manager, "DROP JOB revenue WITH SNAPSHOT revenue_v1;")
    assert [r[:2] for r in run(manager, "SHOW JOBS;")[0].rows] == [("revenue", "RUNNING")]

    wm = last_watermark(4000)
    after_cut = [o for o in orders(2000, 4000) if float(o["amount"]) > 10]
    expected_daily = closed(batch_windows(orders(0, 2000) + after_cut, DAY), DAY, wm)
    expected_hourly = closed(batch_windows(after_cut, HOUR), HOUR, wm)
    assert sink_windows(manager, "daily_revenue") == expected_daily
    assert sink_windows(manager, "hourly_revenue") == expected_hourly
    assert len(expected_daily) == 12 and len(expected_hourly) > 100


def test_a_source_folder_that_moved_is_read_from_its_start(manager: Manager, tmp_path: Path) -> None:
    """The new folder's files are not matched by name against the files the snapshot read in the
    old one (issue 14.5): here every new file has the name of an old one."""
    old, new = tmp_path / "orders", tmp_path / "moved"
    read = make_orders.write_orders(old, 0, 2000, files=4)
    run(
        manager,
        orders_mapping(old)
        + f"""
        CREATE MAPPING daily_revenue TYPE DuckDB;
        CREATE JOB revenue AS INSERT INTO daily_revenue {revenue_select("'24' HOUR")};
        AWAIT JOB revenue;
        DROP JOB revenue WITH SNAPSHOT before_move;
    """,
    )
    for written, taken in zip(make_orders.write_orders(new, 2000, 4000, files=4), read, strict=True):
        written.rename(new / taken.name)  # same names, other orders
    run(manager, orders_mapping(new).replace("CREATE MAPPING", "CREATE OR REPLACE MAPPING"))
    daily = revenue_select("'24' HOUR")
    job = f"CREATE JOB revenue FROM SNAPSHOT before_move AS INSERT INTO daily_revenue {daily}"
    explained = run(manager, f"EXPLAIN {job};")[0]
    [source] = [r for r in explained.rows if r[7] == "source"]
    assert source[1] == "orders"
    assert source[8] == (
        f"'path' changed from {old} to {new}: reads every file in {new} from the start "
        f"(the 4 files the snapshot read in {old} are not matched by name)"
    )
    [stage] = [r for r in explained.rows if r[3] == "daily_revenue.aggregate"]
    assert stage[7] == "restored"  # from the rows: a copy of the old checkpoint would skip the files
    assert stage[8].endswith(f"{ROWS} (3); source 'orders' does not go on from the snapshot's position")
    run(manager, f"{job}; AWAIT JOB revenue;")
    wm = last_watermark(4000)
    assert sink_windows(manager, "daily_revenue") == closed(batch_windows(orders(0, 4000), DAY), DAY, wm)


def _late_orders(cut_wm: datetime) -> list[dict[str, object]]:
    """Orders that arrive after the cut but happened before it."""
    return [
        {"order_id": 90001, "region": "eu", "amount": 11.0, "ts": "2024-01-01 10:00:00"},  # day 1: closed
        {"order_id": 90002, "region": "us", "amount": 12.0, "ts": "2024-01-02 23:59:00"},  # day 2: closed
        {
            "order_id": 90003,
            "region": "eu",
            "amount": 13.0,
            "ts": (cut_wm - timedelta(minutes=2)).isoformat(sep=" "),
        },  # day 3: still open at the cut
    ]


def _write_late(folder: Path, cut_wm: datetime) -> None:
    lines = "".join(json.dumps(o) + "\n" for o in _late_orders(cut_wm))
    (folder / ".late.tmp").write_text(lines)
    (folder / ".late.tmp").rename(folder / "0-late.json")


def _all_rows(manager: Manager, table: str) -> list[tuple]:
    return sorted(manager.catalog.query(f"SELECT * FROM {table}")[1])


def _halves(data: Path, part: int, last: int) -> None:
    half = last // 2
    if part == 0:
        make_orders.write_orders(data, 0, half, files=2)
    else:
        make_orders.write_orders(data, half, last, files=2)
        _write_late(data, last_watermark(half))


def _uninterrupted_and_restored(
    tmp_path: Path,
    select: str,
    last: int,
    write=_halves,
    new_select: str | None = None,
    fmt: str = "auto",
    expect: str | None = None,
) -> tuple[list[tuple], list[tuple]]:
    """Sink rows of one run over two parts of the orders (by default halves, the second with late
    orders), and of a run stopped with a snapshot between the parts and restored with the same SQL
    (or ``new_select``, which the uninterrupted run then uses throughout), with ``'restoreFormat'``
    ``fmt``. ``expect``: how CREATE JOB must say the stage was restored (native or from rows)."""
    from conftest import settings

    job = "CREATE JOB revenue AS INSERT INTO revenue {};"
    setup = "CREATE MAPPING revenue TYPE DuckDB;"
    results = []
    for name, pit_stop in (("plain", False), ("restored", True)):
        data = tmp_path / name
        write(data, 0, last)
        manager = Manager(settings(tmp_path / f"{name}-home"))
        first = select if pit_stop else (new_select or select)
        try:
            run(manager, orders_mapping(data) + setup + job.format(first) + "AWAIT JOB revenue;")
            if pit_stop:
                run(manager, "DROP JOB revenue WITH SNAPSHOT s1;")
            write(data, 1, last)
            if pit_stop:
                again = job.format(new_select or select).replace(
                    "CREATE JOB revenue",
                    f"CREATE JOB revenue OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT s1",
                )
                message = run(manager, again)[0].message
                if expect is not None:
                    assert expect in message, message
            run(manager, "AWAIT JOB revenue;")
            results.append(_all_rows(manager, "revenue"))
        finally:
            manager.close()
    return results[0], results[1]


HOW = {"auto": NATIVE, "canonical": ROWS}


def test_a_chain_of_pit_stops_in_both_formats_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    """Rows, then native from a run that was seeded (its checkpoint has a seed source), then
    native from a natively restored run: every window exactly as one uninterrupted run has it."""
    from conftest import settings

    select = revenue_select("'24' HOUR")
    setup = "CREATE MAPPING revenue TYPE DuckDB;"
    formats = ["canonical", "auto", "auto"]
    results = []
    for name, pit_stop in (("plain", False), ("chain", True)):
        data = tmp_path / name
        manager = Manager(settings(tmp_path / f"{name}-home"))
        try:
            make_orders.write_orders(data, 0, 1000, files=2)
            run(
                manager, orders_mapping(data) + setup + f"CREATE JOB revenue AS INSERT INTO revenue {select};"
            )
            run(manager, "AWAIT JOB revenue;")
            for i, fmt in enumerate(formats, start=1):
                if pit_stop:
                    run(manager, f"DROP JOB revenue WITH SNAPSHOT s{i};")
                make_orders.write_orders(data, 1000 * i, 1000 * (i + 1), files=2, prefix=f"p{i}")
                if pit_stop:
                    message = run(
                        manager,
                        f"CREATE JOB revenue OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT s{i} "
                        f"AS INSERT INTO revenue {select};",
                    )[0].message
                    assert HOW[fmt] in message, message
                run(manager, "AWAIT JOB revenue;")
            results.append(sink_windows(manager, "revenue"))
        finally:
            manager.close()
    assert results[1] == results[0]
    assert results[0] == closed(batch_windows(orders(0, 4000), DAY), DAY, last_watermark(4000))


@pytest.mark.parametrize("fmt", ["auto", "canonical"])
def test_restoring_same_sql_matches_an_uninterrupted_run(tmp_path: Path, fmt: str) -> None:
    expected, got = _uninterrupted_and_restored(
        tmp_path, revenue_select("'24' HOUR"), 4000, fmt=fmt, expect=HOW[fmt]
    )
    assert got == expected
    # The late orders were judged like the old job would have: day 1 and 2 had closed, day 3 had not.
    day3 = [r for r in got if r[0] == datetime(2024, 1, 3) and r[2] == "eu"]
    assert len(day3) == 1
    assert len(got) == 12


@pytest.mark.parametrize("fmt", ["auto", "canonical"])
def test_restoring_a_sliding_window_matches_an_uninterrupted_run(tmp_path: Path, fmt: str) -> None:
    hop = revenue_select("'24' HOUR").replace(
        "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR)",
        "HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '3' HOUR, INTERVAL '1' HOUR)",
    )
    expected, got = _uninterrupted_and_restored(tmp_path, hop, 1200, fmt=fmt, expect=HOW[fmt])
    assert got == expected
    everything = orders(0, 1200)
    three = timedelta(hours=3)
    by_window = {(r[0], r[2]): r[4] for r in got}
    checked = 0
    for (start, region), count in by_window.items():
        hours = (start - EPOCH) / timedelta(hours=1)
        if not (hours + 3 <= 14 or 15 <= hours <= 26):  # away from the late orders
            continue
        inside = [
            o
            for o in everything
            if o["region"] == region and start <= datetime.fromisoformat(str(o["ts"])) < start + three
        ]
        assert count == len(inside), (start, region)
        checked += 1
    assert checked >= 3 * 20


def test_tumbling_window_resized_to_a_multiple_folds_old_windows(manager: Manager, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    # 1960 orders end at 48h58m30s: at the cut, the open hourly window is [48h, 49h).
    make_orders.write_orders(data, 0, 1960, files=2)
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING revenue_1h TYPE DuckDB;
        CREATE MAPPING revenue_2h TYPE DuckDB;
        CREATE MAPPING revenue_90m TYPE DuckDB;
        CREATE JOB revenue AS INSERT INTO revenue_1h
            {revenue_select("'1' HOUR").replace("SELECT", "SELECT /*+ STAGE(revenue) */", 1)};
        AWAIT JOB revenue;
        DROP JOB revenue WITH SNAPSHOT hourly;
    """,
    )
    make_orders.write_orders(data, 1960, 3000, files=2)
    runs_before = sorted((tmp_path / "home" / "runs").iterdir())

    # A size that is not a multiple is refused, naming the stage and both sizes; nothing starts.
    with pytest.raises(CompatibilityError) as refused:
        run(
            manager,
            f"""CREATE JOB revenue FROM SNAPSHOT hourly AS INSERT INTO revenue_90m
            {revenue_select("'90' MINUTE").replace("SELECT", "SELECT /*+ STAGE(revenue) */", 1)};""",
        )
    message = str(refused.value)
    assert "stage 'revenue'" in message
    assert "INTERVAL '1' HOUR" in message and "INTERVAL '90' MINUTE" in message
    assert run(manager, "SHOW JOBS;")[0].rows == ()
    assert sorted((tmp_path / "home" / "runs").iterdir()) == runs_before

    result = run(
        manager,
        f"""
        CREATE JOB revenue FROM SNAPSHOT hourly AS INSERT INTO revenue_2h
            {revenue_select("'2' HOUR").replace("SELECT", "SELECT /*+ STAGE(revenue) */", 1)};
        AWAIT JOB revenue;
    """,
    )
    assert "stage 'revenue': restored" in result[0].message

    two_hours = timedelta(hours=2)
    fold_from = EPOCH + timedelta(hours=48)
    expected = {
        k: v
        for k, v in closed(batch_windows(orders(0, 3000), two_hours), two_hours, last_watermark(3000)).items()
        if k[0] >= fold_from
    }
    got = sink_windows(manager, "revenue_2h")
    assert got == expected
    assert min(k[0] for k in got) == fold_from  # the [48h, 50h) window holds the folded [48h, 49h)


def test_a_broken_native_copy_fails_the_job_with_a_way_out_and_loses_nothing(
    manager: Manager, tmp_path: Path
) -> None:
    """Spark refuses a native copy whose state files are gone: the job fails and says how to
    restore from the rows instead; the snapshot is still whole, and the rows restore it exactly."""
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 2000, files=2)
    daily = "INSERT INTO daily_revenue " + revenue_select("'24' HOUR") + ";"
    run(
        manager,
        orders_mapping(data) + f"CREATE MAPPING daily_revenue TYPE DuckDB; CREATE JOB revenue AS {daily}",
    )
    run(manager, "AWAIT JOB revenue; DROP JOB revenue WITH SNAPSHOT s1;")
    native = tmp_path / "home" / "snapshots" / "s1" / "native" / "daily_revenue.aggregate"
    zips = list(native.glob("state/0/*/*.zip"))
    assert zips
    for z in zips:
        z.unlink()
    make_orders.write_orders(data, 2000, 4000, files=2, prefix="later")
    assert NATIVE in run(manager, f"CREATE JOB revenue FROM SNAPSHOT s1 AS {daily}")[0].message
    with pytest.raises(
        JobFailedError, match=r"'restoreFormat'='canonical'\) restores it from the snapshot's rows"
    ):
        run(manager, "AWAIT JOB revenue;")
    run(manager, "DROP JOB revenue;")
    run(manager, f"CREATE JOB revenue OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT s1 AS {daily}")
    run(manager, "AWAIT JOB revenue;")
    everything = orders(0, 4000)
    assert sink_windows(manager, "daily_revenue") == closed(
        batch_windows(everything, DAY), DAY, last_watermark(4000)
    )


def test_two_branches_stop_at_one_cut_and_both_restore(manager: Manager, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    make_orders.write_orders(data, 0, 1500, files=3)
    both = f"""AS BEGIN
        INSERT INTO daily_revenue {revenue_select("'24' HOUR")};
        INSERT INTO hourly_revenue {revenue_select("'1' HOUR")};
    END;"""
    run(
        manager,
        orders_mapping(data)
        + f"""
        CREATE MAPPING daily_revenue TYPE DuckDB;
        CREATE MAPPING hourly_revenue TYPE DuckDB;
        CREATE JOB revenue {both}
    """,
    )
    # More files arrive while the job runs; the snapshot is taken without waiting for them.
    make_orders.write_orders(data, 1500, 2500, files=2)
    run(manager, "DROP JOB revenue WITH SNAPSHOT both_v1;")
    manifest = json.loads((tmp_path / "home" / "snapshots" / "both_v1" / "manifest.json").read_text())
    assert set(manifest["stages"]) == {"daily_revenue.aggregate", "hourly_revenue.aggregate"}
    make_orders.write_orders(data, 2500, 3500, files=2)
    result = run(manager, f"CREATE JOB revenue FROM SNAPSHOT both_v1 {both} AWAIT JOB revenue;")
    assert result[0].message.count(": restored:") == 2

    wm = last_watermark(3500)
    everything = orders(0, 3500)
    assert sink_windows(manager, "daily_revenue") == closed(batch_windows(everything, DAY), DAY, wm)
    assert sink_windows(manager, "hourly_revenue") == closed(batch_windows(everything, HOUR), HOUR, wm)


DAILY = "AS INSERT INTO daily_revenue " + revenue_select("'24' HOUR") + ";"


def _running_daily(manager: Manager, data: Path) -> tuple[Any, Callable[[], None]]:
    """Job 'revenue' (DAILY) running over 1,500 orders, caught up; its run and the run's stop."""
    make_orders.write_orders(data, 0, 1500, files=3)
    run(
        manager,
        orders_mapping(data)
        + f"CREATE MAPPING daily_revenue TYPE DuckDB; CREATE JOB revenue {DAILY} AWAIT JOB revenue;",
    )
    active = manager.runs["revenue"]
    return active, active.stop


def test_a_batch_planned_past_the_fence_and_interrupted_by_the_stop_loses_nothing(
    manager: Manager, tmp_path: Path
) -> None:
    """A trigger that lists the source just before DROP writes the fence plans a batch past it;
    stopping the query interrupts it before its commit. The run's offsets then hold a batch the
    commits do not. That is not a failed cut (in CI, after the quickstart's 03 script dropped the
    job as its input arrived: "is at {'orders': 8}, not at the cut {'orders': 8}"): the snapshot
    holds the cut, and the restored job reads the rest exactly once. (Spark's leftover offsets file
    is written here after the real stop, as Spark leaves it, to make the race happen every time.)"""
    data, job = tmp_path / "orders", DAILY
    active, stop = _running_daily(manager, data)

    def stop_interrupting_a_planned_batch() -> None:
        stop()
        for bq in active.branches:
            offsets = bq.checkpoint / "offsets"
            last = max(int(f.name) for f in offsets.iterdir() if f.name.isdigit())
            lines = (offsets / str(last)).read_text().split("\n")
            at = [i for i, line in enumerate(lines) if (positions.parse_offset(line) or ("",))[0] == "orders"]
            assert len(at) == 1
            planned = int(json.loads(lines[at[0]])["pos"]) + 1
            lines[at[0]] = json.dumps({"source": "orders", "pos": planned})
            (offsets / str(last + 1)).write_text("\n".join(lines))

    active.stop = stop_interrupting_a_planned_batch  # type: ignore[method-assign]
    make_orders.write_orders(data, 1500, 2500, files=2)
    run(manager, "DROP JOB revenue WITH SNAPSHOT v1;")
    make_orders.write_orders(data, 2500, 3500, files=2)
    run(manager, f"CREATE JOB revenue FROM SNAPSHOT v1 {job} AWAIT JOB revenue;")
    everything = orders(0, 3500)
    assert sink_windows(manager, "daily_revenue") == closed(
        batch_windows(everything, DAY), DAY, last_watermark(3500)
    )


def test_a_checkpoint_moved_from_the_cut_fails_the_drop_and_the_job_goes_on(
    manager: Manager, tmp_path: Path
) -> None:
    """If the checkpoint no longer stands at the cut once the queries are stopped (here its last
    commit is gone, removed after the real stop), DROP ... WITH SNAPSHOT writes no snapshot, says
    why, and the job goes on from its checkpoints (Spark runs the uncommitted batch again, the sink
    skips what it holds). It was left stopped and still listed as RUNNING before."""
    data = tmp_path / "orders"
    active, stop = _running_daily(manager, data)

    def stop_and_lose_the_last_commit() -> None:
        stop()
        for bq in active.branches:
            last = max(int(f.name) for f in (bq.checkpoint / "commits").iterdir() if f.name.isdigit())
            (bq.checkpoint / "commits" / str(last)).unlink()
            (bq.checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)

    active.stop = stop_and_lose_the_last_commit  # type: ignore[method-assign]
    with pytest.raises(
        PitstopError,
        match=r"has committed batch \d+ once stopped, not the cut's batch \d+; no "
        r"snapshot was written\. Job 'revenue' was not dropped; it goes on",
    ):
        run(manager, "DROP JOB revenue WITH SNAPSHOT v1;")
    assert run(manager, "SHOW SNAPSHOTS;")[0].rows == ()
    make_orders.write_orders(data, 1500, 2500, files=2)
    run(manager, "AWAIT JOB revenue;")
    assert [r[:2] for r in run(manager, "SHOW JOBS")[0].rows] == [("revenue", "RUNNING")]
    assert sink_windows(manager, "daily_revenue") == closed(
        batch_windows(orders(0, 2500), DAY), DAY, last_watermark(2500)
    )


def test_a_full_disk_at_the_fence_fails_the_statements_and_the_job_goes_on(
    manager: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: with no space left, writing a source's fence raised a bare OSError out of DROP
    JOB ... WITH SNAPSHOT and CREATE SNAPSHOT (a traceback in `pitstop run`, "internal error" from
    the server). Now each fails with a sentence naming the path, no fence is left, the job reads
    on, and once there is space again the same statements work."""
    from pitstop import faults

    data = tmp_path / "orders"
    _running_daily(manager, data)
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv(faults.FAULT_ENV, "drain.fenced:1:ENOSPC,drain.fenced:2:ENOSPC")  # both statements
    said = r"job 'revenue' could not hold its sources at a cut: \[Errno 28\] No space left on device: '.*'\. "
    said += r"Nothing is lost: the job reads on; free space in .* \(or make it writable\) and try again"
    with pytest.raises(PitstopError, match=said):
        run(manager, "CREATE SNAPSHOT v0 FOR JOB revenue;")
    with pytest.raises(PitstopError, match=said):
        run(manager, "DROP JOB revenue WITH SNAPSHOT v1;")
    assert not list(tmp_path.rglob("fence*")), "a fence was left: the job would read no more"
    monkeypatch.delenv(faults.FAULT_ENV)
    make_orders.write_orders(data, 1500, 2500, files=2)
    run(manager, "AWAIT JOB revenue;")
    assert run(manager, "SHOW SNAPSHOTS;")[0].rows == ()
    assert sink_windows(manager, "daily_revenue") == closed(
        batch_windows(orders(0, 2500), DAY), DAY, last_watermark(2500)
    )
    run(manager, "DROP JOB revenue WITH SNAPSHOT v1;")
    assert "v1" in run(manager, "SHOW SNAPSHOTS;")[0].rows[0]


def test_a_dropped_job_s_queries_are_freed(manager: Manager, tmp_path: Path) -> None:
    """Once a job is dropped nothing in the process holds its queries. Each query's foreachBatch
    callback is kept by Py4J until the JVM's query is collected; the callback held its run, the run
    its StreamingQuery objects, and they the JVM's query: every query a process ran stayed, with its
    last plan (a static join's broadcast table too), and ~80 update chains ran the heap out."""
    active, _ = _running_daily(manager, tmp_path / "orders")
    run_ref, query_ref = weakref.ref(active), weakref.ref(active.branches[0].query)
    del active, _
    run(manager, "DROP JOB revenue WITH SNAPSHOT v1;")
    gc.collect()
    assert run_ref() is None
    assert query_ref() is None


def _bursts(data: Path, part: int, last: int) -> None:
    """Bursts of 120 orders (3 hours) every 240 orders; the cut falls inside the third burst."""
    for lo in range(0, last, 240):
        if part == 0 and lo < 480:
            make_orders.write_orders(data, lo, lo + 120, files=1)
        elif part == 0 and lo == 480:
            make_orders.write_orders(data, lo, lo + 60, files=1)
        elif part == 1 and lo == 480:
            make_orders.write_orders(data, lo + 60, lo + 120, files=1)
        elif part == 1 and lo > 480:
            make_orders.write_orders(data, lo, lo + 120, files=1)


def _session(gap: str) -> str:
    return revenue_select("'1' HOUR").replace(
        "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)",
        f"SESSION(TABLE orders, DESCRIPTOR(ts), INTERVAL {gap})",
    )


@pytest.mark.parametrize("fmt", ["auto", "canonical"])
def test_restoring_session_windows_matches_an_uninterrupted_run(tmp_path: Path, fmt: str) -> None:
    expected, got = _uninterrupted_and_restored(
        tmp_path, _session("'30' MINUTE"), 1200, write=_bursts, fmt=fmt, expect=HOW[fmt]
    )
    assert got == expected
    assert len(got) == 4 * 3  # five bursts, the last still open; three regions: one session each


def test_session_gap_change_re_merges_open_sessions_on_the_new_gap(tmp_path: Path) -> None:
    expected, got = _uninterrupted_and_restored(
        tmp_path,
        _session("'30' MINUTE"),
        1200,
        write=_bursts,
        new_select=_session("'40' MINUTE"),
        expect=f"{ROWS} (",  # a changed stage is always seeded from the rows
    )
    # Sessions closed before the cut keep the old gap; the one open at the cut and later ones
    # are exactly those of a job that always had the new gap.
    cut_burst = EPOCH + timedelta(seconds=480 * STEP)
    assert [r for r in got if r[0] >= cut_burst] == [r for r in expected if r[0] >= cut_burst]
    assert len([r for r in got if r[0] >= cut_burst]) == 2 * 3  # the last burst is still open
    assert all(r[1] - r[0] > timedelta(minutes=40) for r in got if r[0] >= cut_burst)
