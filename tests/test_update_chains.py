"""Update after update (issue 23): chains of pit stops played on real Spark and real DuckDB files,
every sink checked against the model (tests/chains/) after every step.

The fixed chains are bugs found on the way, each kept as the chain that showed it. The generated
ones run ``PITSTOP_CHAINS`` seeded chains (default 1 in ``make test``; ``make chains N=200``)
from ``PITSTOP_CHAIN_SEED`` on; a failure prints its seed, the shrunk chain (paste it here as a
test) and the SQL it ran."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from chains import (
    Analyze,
    Branch,
    ChainFailure,
    Input,
    Kill,
    Player,
    Restore,
    Resume,
    Serve,
    Snapshot,
    Start,
    Step,
    Suspend,
    Update,
    generate,
    job_sql,
    shrink,
)
from conftest import DELAY, EPOCH, ROOT, batch_windows, closed, make_orders, run, settings, sink_windows
from kafka_helpers import Broker, broker  # noqa: F401 - the fixture
from pg_helpers import Postgres, postgres  # noqa: F401 - the fixture
from pitstop.engine.runs import ActiveRun
from pitstop.errors import JobFailedError
from pitstop.manager import Manager

pytestmark = pytest.mark.spark

DAY, HOUR_SIZE = timedelta(hours=24), timedelta(hours=1)


def player(
    tmp_path: Path, via: str = "process", pg_url: str | None = None, kafka: str | None = None
) -> Player:
    home = tmp_path / "home"
    return Player(lambda: Manager(settings(home)), tmp_path / "ev", home, via, pg_url, kafka)


def play(
    tmp_path: Path,
    chain: list[Step],
    via: str = "process",
    pg_url: str | None = None,
    kafka: str | None = None,
) -> Player:
    """Play ``chain`` (the player's manager is closed at the end; ``player.sql`` opens it again)."""
    p = player(tmp_path, via, pg_url, kafka)
    p.play(chain)
    return p


HOUR = Branch("w1", "ck_1h", 60, ("n", "total"))
TEN = Branch("w2", "ck_10min", 10, ("n", "total"))
FIVE = Branch("w3", "ck_5min", 5, ("n", "total"))


def inputs(seed: int) -> Input:
    return Input(seed, 20, 30, 0.1)


def issue_chain(*formats: str) -> list[Step]:
    """The issue's chain: 1 h, then + 10 min, + 5 min, and the same again, in these formats."""
    first, second, third = formats
    return [
        inputs(1),
        Start((HOUR,)),
        inputs(2),
        Update((HOUR, TEN), first),
        inputs(3),
        Update((HOUR, TEN, FIVE), second),
        inputs(4),
        Update((HOUR, TEN, FIVE), third),
        inputs(5),
    ]


def test_a_stage_added_at_one_pit_stop_goes_on_natively_from_the_next(tmp_path: Path) -> None:
    """The 10-minute stage was new in the second run, where it started on the job's clock (a
    clock-only seed, no seed source); the snapshot recorded it as seeded, so the third run gave its
    branch an empty seed source its checkpoint never had ("There are [1] sources in the checkpoint
    offsets and now there are [2] sources")."""
    play(tmp_path, issue_chain("auto", "auto", "auto"))


SLOW = pytest.mark.skipif(
    os.environ.get("PITSTOP_SLOW_CHAINS") != "1",
    reason="a JVM per statement (about 2-4 minutes): make chains runs it (PITSTOP_SLOW_CHAINS=1)",
)


@pytest.mark.parametrize("via", ["server", pytest.param("cli", marks=SLOW)])
def test_the_issues_chain_through_the_server_and_the_cli(tmp_path: Path, via: str) -> None:
    """The issue's chain, mixing formats: every statement through one ``pitstop serve`` and
    psycopg, or a ``pitstop run -c`` process each (which resumes the job and stops it at exit)."""
    play(tmp_path, issue_chain("auto", "canonical", "auto"), via)


def chain_count() -> int:
    return int(os.environ.get("PITSTOP_CHAINS", "1"))


def first_seed() -> int:
    return int(os.environ.get("PITSTOP_CHAIN_SEED", "1000"))


@pytest.mark.parametrize("seed", range(first_seed(), first_seed() + chain_count()))
def test_generated_chain(tmp_path: Path, seed: int) -> None:
    chain = generate(seed, steps=int(os.environ.get("PITSTOP_CHAIN_STEPS", "4")))
    try:
        play(tmp_path / "full", chain)
    except ChainFailure:
        if os.environ.get("PITSTOP_CHAIN_SHRINK", "1") == "0":
            raise
        tries = iter(range(10_000))

        def fails(candidate: list[Step]) -> bool:
            try:
                play(tmp_path / f"try{next(tries)}", candidate)
            except ChainFailure:
                return True
            return False

        small = shrink(chain, fails)
        try:
            play(tmp_path / "small", small)
        except ChainFailure as again:
            failure = again
        pytest.fail(
            f"chain seed {seed} fails at {failure}\nshrunk chain ({len(small)} of {len(chain)} steps):\n  "
            + ",\n  ".join(repr(s) for s in small)
            + f"\nits SQL:\n{failure.script}",
            pytrace=False,
        )


__all__ = ["Resume", "Restore", "Snapshot", "Suspend"]


def test_await_never_reports_ok_for_a_branch_that_fails_on_its_first_trigger(tmp_path: Path) -> None:
    """A copied checkpoint says "caught up" before its query has run: AWAIT must wait for the
    query's first trigger, where Spark checks the checkpoint, and report its failure. The copy is
    damaged (its last offsets file's version line): Spark refuses it on the first trigger, whatever
    the input."""
    p = play(tmp_path, [inputs(1), Start((HOUR,)), inputs(2)])
    try:
        p.sql("DROP JOB c WITH SNAPSHOT damaged")
        offsets = tmp_path / "home" / "snapshots" / "damaged" / "native" / "ck_1h" / "offsets"
        last = offsets / str(max(int(p.name) for p in offsets.iterdir() if p.name.isdigit()))
        lines = last.read_text().split("\n")
        last.unlink()  # a hard link the old run shares: a new file instead
        last.write_text("\n".join(["v99", *lines[1:]]))
        created = p.sql(f"CREATE JOB c FROM SNAPSHOT damaged AS {job_sql((HOUR,))}")[0].message
        assert "(native)" in created
        with pytest.raises(JobFailedError) as failed:
            p.sql("AWAIT JOB c TIMEOUT INTERVAL '120' SECOND")
        text = failed.value.message
        assert "v99" in text, text
        assert "restoreFormat'='canonical'" in text  # a failure of the copy: how to avoid it
        assert [r[:2] for r in p.sql("SHOW JOBS")[0].rows] == [("c", "FAILED")]
    finally:
        p.close()


def test_a_failure_that_is_not_the_native_copys_does_not_blame_it(tmp_path: Path) -> None:
    """A natively restored branch failing on a malformed record under 'onError'='fail' is told
    about the record, not advised to restore from the rows."""
    p = play(tmp_path, [inputs(1), Start((HOUR,)), inputs(2)])
    try:
        p.sql("DROP JOB c WITH SNAPSHOT s")
        p.sql(
            "CREATE OR REPLACE MAPPING ev (id BIGINT, k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts "
            f"AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{tmp_path / 'ev'}', 'format'='json', "
            "'onError'='fail')",
        )
        created = p.sql(f"CREATE JOB c FROM SNAPSHOT s AS {job_sql((HOUR,))}")[0].message
        assert "(native)" in created
        (tmp_path / "ev" / "bad.json").write_text('{"id": 1, "k": "a", "v": "not a number", "ts": 7\n')
        with pytest.raises(JobFailedError) as failed:
            p.sql("AWAIT JOB c TIMEOUT INTERVAL '120' SECOND")
        assert "bad.json" in failed.value.message
        assert "restoreFormat" not in failed.value.message
    finally:
        p.close()


def test_an_aggregate_removed_at_a_pit_stop_is_null_in_every_row_the_job_writes_after_it(
    tmp_path: Path,
) -> None:
    """A running aggregate's upsert sink: the rows the restored job rewrites are whole rows, so
    the removed aggregate's column is NULL there (before the fix they kept the value at the cut
    beside a count that moved on). The stage changed, so it is seeded from the rows, and the seeds'
    batch writes every group again. EXPLAIN and CREATE JOB say so."""
    folder = tmp_path / "ev"
    folder.mkdir()
    manager = Manager(settings(tmp_path / "home"))

    def write(name: str, rows: list[tuple[str, int]]) -> None:
        lines = [
            json.dumps({"id": i, "k": k, "v": v, "ts": "2024-01-01 00:00:00"})
            for i, (k, v) in enumerate(rows)
        ]
        (folder / f".{name}").write_text("\n".join(lines) + "\n")
        (folder / f".{name}").rename(folder / name)

    running = "INSERT INTO totals SELECT k, COUNT(*) AS n{} FROM ev GROUP BY k"
    try:
        run(
            manager,
            f"""CREATE MAPPING ev (id BIGINT, k VARCHAR, v BIGINT, ts TIMESTAMP) TYPE File
                OPTIONS ('path'='{folder}', 'format'='json');
            CREATE MAPPING totals TYPE DuckDB;
            CREATE JOB r AS {running.format(", SUM(v) AS total")};""",
        )
        write("1.json", [("a", 1), ("a", 2), ("b", 10)])
        run(manager, "AWAIT JOB r; DROP JOB r WITH SNAPSHOT r1")
        explained = run(manager, f"EXPLAIN CREATE JOB r FROM SNAPSHOT r1 AS {running.format('')}")[0]
        warned = [row[8] for row in explained.rows if row[2] == "totals" and row[7] == "warning"]
        assert warned == [
            "column(s) 'total' of totals no longer written: NULL in every row the job writes from now on "
            "(a running aggregate's rewritten groups too); rows it does not write keep their values"
        ]
        created = run(manager, f"CREATE JOB r FROM SNAPSHOT r1 AS {running.format('')}")[0].message
        assert "sink 'totals': column(s) 'total' of totals no longer written" in created
        write("2.json", [("a", 100)])
        run(manager, "AWAIT JOB r")
        _, rows = manager.catalog.query("SELECT k, n, total FROM totals ORDER BY k")
        assert rows == [("a", 3, None), ("b", 1, None)]
    finally:
        manager.close()


def test_the_quickstart_job_pit_stopped_twice_more_stays_exact(tmp_path: Path) -> None:
    """examples/sql/01..03 as the quickstart runs them (after `make quickstart`, the second pit
    stop of the same SQL failed on the next input: the hourly stage, new in the second run, was
    recorded as seeded), then a third pit stop with changed SQL: a stricter filter, and the hourly
    window widened to 2 hours (its windows in flight fold into the 2-hour ones)."""
    data = tmp_path / "orders"
    examples = ROOT / "examples" / "sql"
    manager = Manager(settings(tmp_path / "home"))
    changed = (examples / "03_update_again.sql").read_text().split("CREATE JOB", 1)[1].split("AWAIT", 1)[0]
    changed = "CREATE JOB" + changed.replace("revenue_v2", "revenue_v3").replace("amount >= 1", "amount >= 2")
    changed = changed.replace("INTERVAL '1' HOUR", "INTERVAL '2' HOUR")

    def script(name: str) -> str:
        return (examples / name).read_text().replace("examples/work/orders", str(data))

    try:
        make_orders.write_orders(data, 0, 2000, files=4)
        run(manager, script("01_start.sql"))
        make_orders.write_orders(data, 2000, 4000, files=4)
        run(manager, script("02_update.sql"))
        make_orders.write_orders(data, 4000, 6000, files=4)
        created = run(manager, script("03_update_again.sql"))[1].message
        assert "stage 'daily_revenue.aggregate': restored" in created and "(native)" in created
        assert "stage 'hourly_revenue.aggregate': restored: same window, keys and accumulators; " in created
        make_orders.write_orders(data, 6000, 6500, files=1)  # the input after the restore
        run(manager, "AWAIT JOB revenue; DROP JOB revenue WITH SNAPSHOT revenue_v3")
        created = run(manager, changed)[0].message
        assert (
            "window size INTERVAL '1' HOUR -> INTERVAL '2' HOUR: old windows fold into the new ones"
            in created
        )
        make_orders.write_orders(data, 6500, 8000, files=2)
        run(manager, "AWAIT JOB revenue")
        assert [r[:2] for r in run(manager, "SHOW JOBS")[0].rows] == [("revenue", "RUNNING")]
        _, rows = manager.catalog.query(
            "SELECT window_start, window_end, region, revenue, orders FROM hourly_revenue"
        )
        daily = sink_windows(manager, "daily_revenue")
    finally:
        manager.close()

    def at(i: int) -> datetime:
        return EPOCH + timedelta(seconds=i * 90)

    def amount(i: int) -> Decimal:
        return Decimal(str(make_orders.order(i)["amount"])).quantize(Decimal("0.01"))

    cut, wm = at(6499) - DELAY, at(7999) - DELAY
    read = [i for i in range(0, 8000) if i < 2000 or amount(i) >= (1 if i < 6500 else 2)]
    expected_daily = closed(batch_windows([make_orders.order(i) for i in read], DAY), DAY, wm)
    assert daily == expected_daily
    # The hourly sink: 1-hour rows closed before the third cut, then 2-hour rows closing after it,
    # each holding the hours still open at the cut (folded) and every order after it.
    hours: dict[tuple[datetime, datetime, str], list[Decimal]] = {}
    for i in read:
        if i < 2000:
            continue
        ts, region = at(i), str(make_orders.order(i)["region"])
        hour = EPOCH + (ts - EPOCH) // HOUR_SIZE * HOUR_SIZE
        if i < 6500 and hour + HOUR_SIZE <= cut:
            key = (hour, hour + HOUR_SIZE, region)
        else:
            two = EPOCH + (ts - EPOCH) // (2 * HOUR_SIZE) * (2 * HOUR_SIZE)
            key = (two, two + 2 * HOUR_SIZE, region)
        hours.setdefault(key, []).append(amount(i))
    expected = {k: (sum(v), len(v)) for k, v in hours.items() if k[1] <= wm}
    got = {(s, e, r): (Decimal(rev), int(n)) for s, e, r, rev, n in rows}
    assert len(got) == len(rows)  # each window once
    assert got == expected
    assert sum(1 for k in got if k[1] - k[0] == 2 * HOUR_SIZE) > 10


def test_a_chain_through_a_killed_process_and_a_server_restart_stays_exact(tmp_path: Path) -> None:
    """Between pit stops, a ``pitstop run`` process that resumed the job is killed with SIGKILL
    while its input arrives, and a ``pitstop serve`` resumes it and stops on SIGTERM."""
    play(
        tmp_path,
        [
            inputs(1),
            Start((HOUR, Branch("r1", "totals", 0, ("n", "last")))),
            inputs(2),
            Kill(inputs(3), 700),
            Update((HOUR, TEN, Branch("r1", "totals", 0, ("n", "last", "total")))),
            Serve(inputs(4)),
            Update((HOUR, TEN, Branch("r1", "totals", 0, ("n", "last", "total")))),
            Kill(inputs(5), 2500),
            inputs(6),
        ],
    )


@pytest.mark.parametrize("fmt", ["canonical", "auto"])
def test_the_jobs_clock_survives_a_run_that_read_no_input(tmp_path: Path, fmt: str) -> None:
    """Two pit stops with no input between them: the second run's query read only seeds (or
    nothing), so Spark's own watermark in it is below the job's clock; the snapshot taken of it
    must still carry the job's clock, or an event whose window had closed is counted again."""
    TEN_ = Branch("w1", "w1_s0", 10, ("n", "total"))
    play(
        tmp_path,
        [
            Input(1, 30, 60, 0.0),
            Start((TEN_,)),
            Update((TEN_,), "canonical"),
            Update((TEN_,), fmt),
            Input(2, 30, 5, 0.6),  # most of it late, by up to 90 minutes
            Update((TEN_,), fmt),
            Input(3, 30, 5, 0.6),
        ],
    )


def test_sessions_hops_and_a_file_sink_through_a_chain_with_a_rollback(tmp_path: Path) -> None:
    sessions = Branch("f1", "visits", 10, ("n", "last"), session=True)
    hop = Branch("w2", "sliding", 30, ("n", "hi"), slide=10)
    play(
        tmp_path,
        [
            inputs(1),
            Start((sessions, hop)),
            inputs(2),
            Snapshot(),
            inputs(3),
            Update((Branch("f1", "visits", 20, ("n", "last"), session=True), hop), "auto"),
            inputs(4),
            Restore(0, (sessions, Branch("w2", "sliding", 40, ("n", "hi"), slide=10)), rollback=True),
            inputs(5),
            Update((sessions, hop), "canonical"),
            inputs(6),
        ],
    )


def test_static_joins_through_a_chain_with_a_kill_and_a_rollback(tmp_path: Path) -> None:
    """A window and a running aggregate grouped by a static table's column (``ev JOIN grp``), and
    the join's rows appended as they are (no stage): the grouping turned off and on at pit stops
    (the state keeps its keys), a kill, and a restore from an older snapshot with sinkRollback."""
    window = Branch("w1", "w1_s0", 30, ("n", "total"), joined=True)
    totals = Branch("r1", "r1_s0", 0, ("n", "hi"), joined=True)
    rows = Branch("j1", "j1_s0", 0, (), 10, enrich=True)
    play(
        tmp_path,
        [
            inputs(1),
            Start((window, totals, rows)),
            inputs(2),
            Update((replace(window, joined=False), totals, rows)),
            inputs(3),
            Kill(inputs(4), 1500),
            Update((window, replace(totals, joined=False), replace(rows, where=25)), "canonical"),
            inputs(5),
            Restore(0, (window, totals), rollback=True),
            Input(6, 20, 30, 0.2, dup=0.3),
        ],
    )


def test_every_aggregate_and_both_deduplications_through_a_chain_with_a_suspended_pit_stop(
    tmp_path: Path,
) -> None:
    """AVG and COUNT(DISTINCT) added and removed, DISTINCT and ROW_NUMBER over input delivered
    again, and a suspended job stopped with a snapshot: its cut is where it was suspended, so the
    input that arrived since is read by the updated job, under its new filter."""
    window = Branch("w1", "w1_s0", 30, ("n", "mean"))
    totals = Branch("r1", "r1_s0", 0, ("kinds",))
    distinct = Branch("d1", "uniq", 0, (), dedup="distinct")
    first = Branch("d2", "firsts", 0, (), 10, dedup="first")
    again = Input(7, 20, 30, 0.2, dup=0.4)
    play(
        tmp_path,
        [
            inputs(1),
            Start((window, totals, distinct, first)),
            again,
            Update(
                (replace(window, aggs=("n", "mean", "kinds")), replace(totals, aggs=("kinds", "mean")), first)
            ),
            replace(again, seed=8),
            Suspend(),
            replace(again, seed=9),
            Update(
                (
                    replace(window, aggs=("mean", "kinds"), size=60, where=20),
                    replace(totals, aggs=("mean",)),
                    first,
                ),
                "canonical",
            ),
            replace(again, seed=10),
            Suspend(),
            replace(again, seed=11),
            Restore(
                0, (window, totals, replace(distinct, stage="uniq2"), first), rollback=True, fmt="canonical"
            ),
            replace(again, seed=12),
            # What the second job read from its snapshot on, replayed through its own SQL (issue 27):
            # the same rows in every sink, the same state in every stage; nothing changed.
            Analyze(1),
        ],
    )


def test_early_results_turned_on_and_off_through_a_chain(tmp_path: Path) -> None:
    hop = Branch("w2", "sliding", 30, ("n", "total"), slide=10)
    totals = Branch("r1", "totals", 0, ("n",))
    play(
        tmp_path,
        [
            inputs(1),
            Start((HOUR, totals), early=True),
            inputs(2),
            Snapshot(),
            inputs(3),
            Update((HOUR, hop, totals), "auto", early=False),
            inputs(4),
            Update((HOUR, hop, totals), "auto", early=True),
            inputs(5),
            Restore(0, (replace(HOUR, aggs=("n",)), totals), rollback=True, early=True),
            inputs(6),
            Update((HOUR, totals), "canonical", early=False),
            inputs(7),
        ],
    )


def test_postgresql_sinks_through_a_chain_with_a_rollback(
    tmp_path: Path,
    postgres: Postgres,  # noqa: F811
) -> None:
    """A sliding window appended to a PostgreSQL table and a running aggregate upserted into
    another: an aggregate removed (NULL in every row the job writes after it: SET col = DEFAULT),
    a window resized, a snapshot while running, and a restore from it with sinkRollback."""
    hop = Branch("p1", "p1_s0", 30, ("n", "total"), slide=10)
    totals = Branch("p2", "p2_s0", 0, ("n", "total", "last"))
    play(
        tmp_path,
        [
            inputs(1),
            Start((hop, totals)),
            inputs(2),
            Update((hop, replace(totals, aggs=("n", "last"))), "auto"),
            inputs(3),
            Snapshot(),
            inputs(4),
            Update((replace(hop, size=20), replace(totals, aggs=("n", "last"))), "auto"),
            inputs(5),
            Restore(1, (hop, totals), rollback=True, fmt="canonical"),
            inputs(6),
        ],
        pg_url=postgres.url(postgres.database()),
    )


def test_a_deduplication_feeding_a_window_through_a_chain(tmp_path: Path) -> None:
    """Two stages in one branch (each id's first event, then a window) across pit stops: the
    window resized (the branch from the rows), the deduplication renamed (it starts empty on the
    job's clock) and then removed, over input delivered again."""
    chained = Branch("w1", "w1_s0", 10, ("n", "total"), firsts="w1_f0")
    again = Input(3, 25, 30, 0.2, dup=0.4)
    play(
        tmp_path,
        [
            inputs(1),
            Start((chained,)),
            again,
            Update((chained,), "auto"),
            replace(again, seed=4),
            Update((replace(chained, size=20),), "auto"),
            replace(again, seed=5),
            Update((replace(chained, size=20, firsts="w1_f1"),), "canonical"),
            replace(again, seed=6),
            Update((replace(chained, size=20, firsts=""),), "auto"),
            replace(again, seed=7),
        ],
    )


def test_a_kafka_sink_through_a_chain_whose_rollback_leaves_the_topic(
    tmp_path: Path,
    broker: Broker,  # noqa: F811
) -> None:
    """A window written to a Kafka topic (exactly once per run) across pit stops; a restore from an
    older snapshot with sinkRollback rolls the DuckDB sink back and writes the topic's windows
    after the cut again (a topic's records cannot be deleted: EXPLAIN says so)."""
    topic = Branch("k1", "k1_s0", 30, ("n", "total"))
    play(
        tmp_path,
        [
            inputs(1),
            Start((topic, HOUR)),
            inputs(2),
            Snapshot(),
            inputs(3),
            Update((replace(topic, size=60), HOUR), "auto"),
            inputs(4),
            Restore(0, (topic, HOUR), rollback=True),
            inputs(5),
        ],
        kafka=broker.bootstrap,
    )


def test_a_suspended_job_pit_stopped_leaves_what_arrived_since_to_the_updated_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cut of a suspended job is where it was suspended (README): the input that arrived while
    it was suspended is read by the updated job, under its new filter. Found by the chains' count
    of late rows (the chain above counted the old job's late rows of that input): DROP JOB ...
    WITH SNAPSHOT woke the queries unfenced, and a trigger that listed the source before the drain
    wrote its fence read that input into the old job's cut. Here the drain starts 3 s after the
    queries (as when a job's many branches start one after another), so the race is always lost."""
    drain = ActiveRun.drain_to_cut

    def slow_drain(self: ActiveRun, *args: Any, **kwargs: Any) -> Any:
        time.sleep(3)
        return drain(self, *args, **kwargs)

    monkeypatch.setattr(ActiveRun, "drain_to_cut", slow_drain)
    window = Branch("w1", "w1_s0", 10, ("n", "total"))
    first = Branch("d2", "firsts", 0, (), dedup="first")
    play(
        tmp_path,
        [
            inputs(1),
            Start((window, first)),
            inputs(2),
            Suspend(),
            Input(3, 30, 60, 0.3),
            Update((replace(window, where=25), replace(first, where=25))),
            inputs(4),
        ],
    )


FIRST = Branch("d2", "firsts", 0, (), dedup="first")


def test_a_row_number_drops_an_event_at_the_watermark_itself(tmp_path: Path) -> None:
    """Spark's deduplication drops a row whose time is at or below the watermark (checked on
    pyspark 4.3.0: dropDuplicatesWithinWatermark drops 00:05:00 at a watermark of 00:05:00 and
    keeps 00:05:01), as pitstop counts it. The third input holds an event (id 51) whose time is the
    clock exactly; the model kept it (late only below the clock) until the count of late rows
    differed."""
    play(tmp_path, [Input(1, 30, 60, 0.0), Start((FIRST,)), Input(78, 30, 5, 0.6)])


def test_a_row_number_new_at_a_pit_stop_drops_an_event_at_the_jobs_clock(tmp_path: Path) -> None:
    """A ROW_NUMBER stage new in a restored job starts on the job's clock: an event late for it is
    dropped, as Spark drops one at or below its watermark. Its query starts with no watermark of
    its own, so its filter alone decides, and it kept an event at the clock itself (it dropped
    only a time below). The last input holds an event (id 51) at the job's clock exactly."""
    window = Branch("w1", "w1_s0", 10, ("n", "total"))
    play(
        tmp_path,
        [Input(1, 30, 60, 0.0), Start((window,)), Update((window, FIRST)), Input(78, 30, 5, 0.6)],
    )


def test_a_row_number_put_before_a_restored_window_starts_on_the_jobs_clock(tmp_path: Path) -> None:
    """A ROW_NUMBER new at a pit stop in front of a window that is restored: the new stage starts
    on the job's clock (the least of the snapshot's: w1's, behind its filter), the window keeps its
    own, which is ahead. An event between the two clocks (id 40, 00:51:57, in a window still open
    at the cut) passes the new ROW_NUMBER and counts in its window; the model had the ROW_NUMBER
    drop it by the window's clock (its late count was three rows too many, and the window's row,
    once closed, one event short)."""
    filtered = Branch("w1", "w1_s0", 10, ("n",), where=40)
    window = Branch("w2", "w2_s0", 10, ("n",))
    play(
        tmp_path,
        [
            Input(1, 30, 60, 0.0),
            Start((filtered, window)),
            Update((filtered, replace(window, firsts="w2_f0"))),
            Input(4, 30, 5, 0.6),
            Input(5, 10, 120, 0.0),
        ],
    )


def test_a_row_number_restored_from_rows_under_a_shorter_delay_goes_on_from_the_snapshots_clock(
    tmp_path: Path,
) -> None:
    """ev's WATERMARK delay 5 -> 10 -> 2 minutes at two pit stops, the second from the rows. The
    seeds (each key's first time) went through the watermark with the new delay, so the restored
    stage's clock jumped from the snapshot's (01:12:34: the greatest event, 01:22:34, less 10
    minutes) to 01:20:34, and an event after the snapshot's clock (id 70, 01:16:40) was dropped
    as late (a native restore, or the same delay, keeps the snapshot's clock). Found by a chain
    written to try the generator's new delay change; failed before the seeds joined the live rows
    after the watermark (pitstop.stages.dedup)."""
    play(
        tmp_path,
        [
            Input(1, 20, 30, 0.1),
            Start((FIRST,)),
            Input(2, 20, 30, 0.2),
            Update((FIRST,), delay=10),
            Input(3, 20, 30, 0.3),
            Update((FIRST,), "canonical", delay=2),
            Input(4, 20, 30, 0.3),
        ],
    )


def test_interval_joins_through_a_chain_of_bounds_narrowed_widened_and_renamed(tmp_path: Path) -> None:
    """An interval join of ev and cl (its pairs appended) and a window over another one's pairs
    (two stages in one INSERT): the bounds narrowed and widened (pairs straddling the cut further
    apart than the old bound missed), the window resized, the join renamed (a new stage on the
    job's clock), a kill, and a restore from an older snapshot with sinkRollback."""
    pairs = Branch("i1", "i1_s0", 0, (), interval=(10, 30))
    windowed = Branch("i2", "i2_s0", 10, ("n", "total"), interval=(0, 10), pairs="i2_j0")
    play(
        tmp_path,
        [
            inputs(1),
            Start((HOUR, windowed)),
            inputs(2),
            Update((HOUR, replace(windowed, interval=(10, 30)), pairs)),
            inputs(3),
            Snapshot(),
            Update((HOUR, replace(windowed, size=30), replace(pairs, interval=(0, 10))), "canonical"),
            Kill(inputs(4), 1500),
            Update((HOUR, replace(windowed, size=30, pairs="i2_j1"), replace(pairs, interval=(30, 60)))),
            Input(5, 20, 60, 0.3, dup=0.2),
            Restore(1, (HOUR, replace(windowed, interval=(0, 10)), pairs), rollback=True),
            inputs(6),
        ],
    )


def test_a_widened_type_having_and_a_changed_watermark_delay_through_a_chain(tmp_path: Path) -> None:
    """A window over v cast to INT widened to BIGINT, a HAVING put in (a running aggregate's
    COUNT(*) of its own, empty for the groups seen before) and taken out, ev's WATERMARK delay
    changed twice (CREATE OR REPLACE MAPPING between the DROP and the CREATE)."""
    typed = Branch("t1", "t1_s0", 10, ("lo", "total", "n"), vtype="INT")
    totals = Branch("r1", "r1_s0", 0, ("total",))
    first = Branch("d2", "d2_s0", 0, (), dedup="first")
    play(
        tmp_path,
        [
            inputs(1),
            Start((typed, totals, first)),
            inputs(2),
            Update((replace(typed, vtype="", having=2), replace(totals, having=2), first), delay=10),
            inputs(3),
            Update((replace(typed, vtype="", having=2), totals, first), "canonical", delay=2),
            Input(4, 20, 30, 0.3, dup=0.2),
        ],
    )


def test_a_min_by_pair_and_a_distinct_set_widen_with_their_column(tmp_path: Path) -> None:
    """v cast to INT, FLOAT and DECIMAL(8,0) under MIN_BY / MAX_BY (a pair holding v) and
    COUNT(DISTINCT v % 5) (a set of them), then widened to BIGINT, DOUBLE and DECIMAL(12,0): the
    state types widen field by field and element by element, restored with a cast. They were
    refused ("not a widening (INT -> BIGINT, ...)"), while the column was widened INT -> BIGINT."""
    ints = Branch("t1", "t1_s0", 10, ("first", "kinds", "last"), vtype="INT")
    floats = Branch("w1", "w1_s0", 30, ("first", "kinds"), vtype="FLOAT")
    decimals = Branch("w2", "w2_s0", 10, ("last", "kinds", "total"), vtype="DECIMAL(8,0)")
    wider = (
        replace(ints, vtype=""),
        replace(floats, vtype="DOUBLE"),
        replace(decimals, vtype="DECIMAL(12,0)"),
    )
    play(tmp_path, [inputs(1), Start((ints, floats, decimals)), inputs(2), Update(wider), inputs(3)])


def test_early_results_turned_off_under_a_having_leave_no_row_the_job_does_not_write(tmp_path: Path) -> None:
    """Chain seed 7004, shrunk (7106 failed the same way): early results turned on, a snapshot,
    then the job restored from it without early results and with a HAVING. Windows open at the
    cut had early rows; closed, the HAVING keeps none of them, and the sink marked their early
    rows final: rows the job never writes (`sink t1: 0 row(s) missing, 2 unexpected`)."""
    t1 = Branch("t1", "t1_s0", 60, ("lo", "mean", "hi"), vtype="INT")
    play(
        tmp_path,
        [
            Input(seed=749448157, n=7, advance=60, late=0, dup=0.2),
            Start((t1,), early=False),
            Update((t1,), "auto", early=True, delay=5),
            Snapshot(),
            Input(seed=540285282, n=9, advance=120, late=0.3, dup=0.2),
            Restore(
                1,
                (replace(t1, aggs=("lo", "mean", "hi", "last"), vtype="", having=2),),
                rollback=True,
                fmt="canonical",
                early=False,
                delay=5,
            ),
        ],
    )


def test_early_rows_of_a_stage_renamed_with_early_results_off_are_final_when_their_windows_close(
    tmp_path: Path,
) -> None:
    """Chain seed 1000, shrunk: the same turn (early results off) with the stage renamed, so the
    new stage holds none of the windows open at the cut. Their early rows are the old query's
    output up to the cut and are marked final when the clock passes their end; the first fix of
    7004's bug deleted them (`sink w1: 6 row(s) missing`)."""
    hop = Branch("w1", "w1_s0", 30, ("last", "n"), where=25, slide=10, joined=True)
    play(
        tmp_path,
        [
            Input(seed=1049766685, n=11, advance=60, late=0, dup=0),
            Start((hop,), early=True),
            Update((replace(hop, stage="w1_s1"),), "canonical", early=False, delay=5),
            Suspend(),
            Resume(),
            Input(seed=233765861, n=13, advance=30, late=0.1, dup=0),
        ],
    )


def test_a_session_restored_from_rows_on_a_shorter_gap_and_delay_closes_on_its_own_clock(
    tmp_path: Path,
) -> None:
    """Chain seed 20000, shrunk: a SESSION stage beside an interval join, its gap 10 -> 5 minutes
    and ev's delay 5 -> 2 at a canonical pit stop. A session open at the cut whose re-formed end
    (last event + new gap) is at or below the stage's clock must be written at once
    (`sink w3: 1 row(s) missing`)."""
    w3 = Branch("w3", "w3_s0", 10, ("mean", "total", "first"), session=True)
    i1 = Branch("i1", "i1_s0", 0, (), interval=(30, 60))
    play(
        tmp_path,
        [
            Start((w3, i1), early=False),
            Input(seed=1018219184, n=7, advance=30, late=0.1, dup=0),
            Update((replace(w3, size=5), i1), "canonical", early=False, delay=2),
        ],
    )
