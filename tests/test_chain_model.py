"""The update-chain model and its checker (tests/chains/), without Spark: the model's windows,
late events and restores on small hand-worked cases, the checker against a real DuckDB file, and
the shrinker."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from chains import (
    Branch,
    ChainFailure,
    Crash,
    Cut,
    Event,
    Input,
    Model,
    Player,
    Restore,
    Resume,
    Snapshot,
    Start,
    Suspend,
    Update,
    evolve,
    generate,
    shrink,
    valid,
)

TEN = Branch("w1", "w1_s0", 10, ("n", "total", "last"))


def at(minute: int, second: int = 0) -> int:
    return minute * 60 + second


def feed(model: Model, events: list[tuple[str, int, int]]) -> None:
    """One file of (k, v, ts seconds) events, read in one micro-batch."""
    model.events.append([Event(i, k, v, ts) for i, (k, v, ts) in enumerate(events)])
    model.batch()


def test_a_window_is_written_once_the_clock_passes_its_end_and_late_events_are_dropped() -> None:
    m = Model()
    m.start((TEN,))
    feed(m, [("a", 1, at(1)), ("a", 2, at(9)), ("a", 3, at(9))])  # clock 00:04
    assert m.sinks["w1"] == []
    feed(m, [("a", 5, at(16))])  # clock 00:11: [00:00, 00:10) closes
    assert m.sinks["w1"] == [
        {
            "window_start": datetime(2024, 1, 1, 0, 0),
            "window_end": datetime(2024, 1, 1, 0, 10),
            "k": "a",
            "n": 3,
            "total": 6,
            "last": 3,  # MAX_BY(v, ts): of equal ts (00:09), the greatest v
        }
    ]
    feed(m, [("a", 100, at(5)), ("a", 7, at(12))])  # 00:05 is late: its window ended at 00:10
    assert m.stages["w1_s0"].windows == {(at(10), "a"): {"n": 2, "total": 12, "last": (at(16), 5)}}


def test_a_restored_stage_keeps_its_windows_and_a_new_one_starts_on_the_jobs_clock() -> None:
    m = Model()
    m.start((TEN,))
    feed(m, [("a", 1, at(12)), ("b", 2, at(30))])  # clock 00:25; b's [00:30, 00:40) is open
    cut = m.cut("s0")
    hour = Branch("w2", "w2_s0", 60, ("n",))
    m.events.append([Event(9, "a", 4, at(21)), Event(10, "a", 4, at(24)), Event(11, "b", 1, at(33))])
    m.restore(cut, (TEN, hour), rollback=False)
    # The restored stage: b's open window goes on; a's events at 00:21 and 00:24 are not late
    # ([00:20, 00:30) ends after the clock).
    assert m.stages["w1_s0"].windows[(at(20), "a")]["n"] == 2
    assert m.stages["w1_s0"].windows[(at(30), "b")]["n"] == 2
    # The new hourly stage starts on the job's clock (00:25): the hour [00:00, 01:00) is open.
    assert m.stages["w2_s0"].clock == at(28)
    assert m.stages["w2_s0"].windows[(0, "a")]["n"] == 2


def test_a_resize_folds_old_windows_into_new_ones() -> None:
    m = Model()
    m.start((TEN,))
    feed(m, [("a", 1, at(21)), ("a", 2, at(31)), ("a", 4, at(36))])  # clock 00:31: 00:20 closes
    cut = m.cut("s0")
    m.restore(cut, (Branch("w1", "w1_s0", 30, ("n", "total", "last")),), rollback=False)
    assert m.stages["w1_s0"].windows == {(at(30), "a"): {"n": 2, "total": 6, "last": (at(36), 4)}}


def test_aggregates_are_matched_by_call_then_by_place_and_state_type() -> None:
    assert evolve(("n", "total"), ("total", "hi")) == {"total": "total", "hi": None}
    assert evolve(("n", "lo"), ("n", "hi")) == {"n": "n", "hi": "lo"}  # a changed function
    assert evolve(("n", "first"), ("n", "hi")) == {"n": "n", "hi": None}  # another state type


def test_a_rollback_removes_what_was_written_after_the_cut_and_gaps_later_snapshots() -> None:
    m = Model()
    m.start((TEN,))
    feed(m, [("a", 1, at(1)), ("a", 2, at(16))])
    first = m.cut("s0")
    feed(m, [("a", 3, at(40))])
    later = m.cut("s1")
    assert len(m.sinks["w1"]) == 2
    m.restore(first, (TEN,), rollback=True)
    assert later.gapped and not first.gapped
    # Re-reading the file after the cut writes the window [00:10, 00:20) again, once.
    assert [r["window_start"].minute for r in m.sinks["w1"]] == [0, 10]


def test_the_checker_finds_a_missing_and_an_unexpected_row_in_a_real_duckdb_file(tmp_path: Path) -> None:
    db = tmp_path / "sinks.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE w1 (window_start TIMESTAMP, window_end TIMESTAMP, k VARCHAR, n BIGINT)")
    con.execute("INSERT INTO w1 VALUES ('2024-01-01 00:00', '2024-01-01 00:10', 'a', 3)")
    con.execute("CREATE SCHEMA pitstop")  # the view of late rows, as a table of the same columns
    con.execute("CREATE TABLE pitstop.late_rows (job VARCHAR, stage VARCHAR, source VARCHAR, rows BIGINT)")
    con.execute("INSERT INTO pitstop.late_rows VALUES ('c', 'w1_s0', 'ev', 2), ('other', 'w1_s0', 'ev', 5)")

    def query(sql: str) -> tuple[list[str], list[tuple[object, ...]]]:
        cur = con.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()

    player = Player(lambda: pytest.fail("no manager needed"), tmp_path / "ev", tmp_path / "home")
    player.query = query  # type: ignore[method-assign]  # the sinks of the real DuckDB file above
    branch = Branch("w1", "w1_s0", 10, ("n",))
    player.model.start((branch,))
    player.model.late = {"w1_s0": 2}
    row = {"window_start": datetime(2024, 1, 1), "window_end": datetime(2024, 1, 1, 0, 10), "k": "a", "n": 3}
    player.model.sinks["w1"] = [row]
    player.check()  # equal: nothing raised
    player.model.sinks["w1"] = [{**row, "n": 4}]
    with pytest.raises(ChainFailure, match=r"sink w1: 1 row\(s\) missing, 1 unexpected"):
        player.check()
    player.model.sinks["w1"] = [row, row]  # a window written twice is a difference too
    with pytest.raises(ChainFailure, match=r"1 row\(s\) missing, 0 unexpected"):
        player.check()
    player.model.sinks["w1"] = [row]
    player.model.late = {"w1_s0": 3}  # the job's late rows per stage are checked too
    with pytest.raises(ChainFailure, match="stage w1_s0: 2 counted, 3 expected"):
        player.check()


def test_a_failing_chain_shrinks_to_the_steps_that_make_it_fail() -> None:
    chain = [
        Input(1, 5, 10, 0),
        Start((TEN,)),
        Input(2, 5, 10, 0),
        Snapshot(),
        Suspend(),
        Resume(),
        Update((TEN,)),
        Input(3, 5, 10, 0),
        Restore(0, (TEN,), rollback=True),
    ]
    assert valid(chain)

    def fails(c: list[object]) -> bool:  # "fails" whenever a restore follows a suspension
        return any(isinstance(s, Suspend) for s in c) and any(isinstance(s, Restore) for s in c)

    small = shrink(chain, fails)
    assert small == [Start((TEN,)), Snapshot(), Suspend(), Restore(0, (TEN,), rollback=True)]
    assert not valid([Start((TEN,)), Restore(0, (TEN,), rollback=True)])  # no snapshot yet


def test_generated_chains_are_valid_and_reproducible() -> None:
    for seed in range(200):
        chain = generate(seed, 8)
        assert valid(chain), seed
        assert chain == generate(seed, 8)
    kinds = {type(s).__name__ for seed in range(200) for s in generate(seed, 8)}
    assert kinds == {
        "Input",
        "Start",
        "Update",
        "Snapshot",
        "Restore",
        "Suspend",
        "Resume",
        "Kill",
        "Serve",
        "Analyze",
        "Crash",
    }


__all__ = ["Cut"]


def test_a_crashed_pit_stop_is_valid_where_its_pit_stop_is_and_at_its_own_protocols_steps() -> None:
    start = [Input(1, 5, 10, 0), Start((TEN,)), Input(2, 5, 10, 0)]
    update = Update((TEN,))
    assert valid([*start, Crash(update, "export.renamed")])
    assert valid([*start, Crash(Snapshot(), "snapshot.recorded")])
    assert not valid([*start, Crash(Snapshot(), "drop.recorded")])  # CREATE SNAPSHOT drops nothing
    assert not valid([*start, Crash(update, "rollback.deleted")])  # an update rolls nothing back
    assert not valid([*start, Snapshot(), Crash(Restore(0, (TEN,), False), "rollback.committed")])
    assert valid([*start, Snapshot(), Crash(Restore(0, (TEN,), True), "rollback.committed")])
    assert not valid([*start, Crash(Restore(0, (TEN,), True), "restore.prepared")])  # no snapshot yet
    assert not valid([*start, Suspend(), Crash(Snapshot(), "export.renamed")])  # a suspended job's


def test_a_crash_at_a_stage_s_export_is_drawn_only_for_a_job_that_has_a_stage() -> None:
    """Seed 7223 killed the pit stop of a job of joined rows alone (no stage) at
    export.stage_written, a step such a job never reaches: the process ended well, and the chain
    failed on the generator's mistake ("the process was to die at export.stage_written: exit 0")."""
    joined = Branch("j1", "j1_s0", 0, (), enrich=True)
    start = [Input(1, 5, 10, 0), Start((joined,)), Input(2, 5, 10, 0)]
    assert not valid([*start, Crash(Update((joined, TEN)), "export.stage_written")])
    assert valid([*start, Crash(Update((joined, TEN)), "export.renamed")])
    assert valid([*start, Update((joined, TEN)), Crash(Snapshot(), "export.stage_written")])
    crash = generate(7223, 8, pg=True, kafka=True)[3]
    assert isinstance(crash, Crash) and crash.at == "export.renamed"  # drawn again, from the others
    for seed in range(500):
        assert valid(generate(seed, 8, pg=True, kafka=True)), seed


def test_a_running_aggregate_replaces_its_groups_and_a_restore_from_rows_writes_every_group() -> None:
    totals = Branch("r1", "r1_s0", 0, ("n", "total"))
    m = Model()
    m.start((totals,))
    feed(m, [("a", 1, at(1)), ("b", 2, at(2)), ("a", 3, at(3))])
    assert m.rows("r1") == [{"k": "a", "n": 2, "total": 4}, {"k": "b", "n": 1, "total": 2}]
    cut = m.cut("s0")
    # Same aggregates, 'auto': native; nothing is written until input arrives.
    m.restore(cut, (totals,), rollback=False)
    assert not m.stages["r1_s0"].reseed
    # An aggregate removed: from the rows, whose batch writes every group, without it.
    m.restore(cut, (replace(totals, aggs=("n",)),), rollback=False)
    assert m.rows("r1") == [{"k": "a", "n": 2}, {"k": "b", "n": 1}]
    feed(m, [("b", 5, at(9))])
    assert m.rows("r1") == [{"k": "a", "n": 2}, {"k": "b", "n": 2}]


def test_a_sliding_window_takes_each_event_in_every_window_it_is_in_and_resizes_by_end() -> None:
    hop = Branch("w1", "w1_s0", 20, ("n",), slide=10)
    m = Model()
    m.start((hop,))
    feed(m, [("a", 1, at(15))])  # in [00:00, 00:20) and [00:10, 00:30)
    assert sorted(m.stages["w1_s0"].windows) == [(0, "a"), (at(10), "a")]
    feed(m, [("a", 1, at(26)), ("a", 1, at(3))])  # clock 00:21; 00:03 was in [00:00, 00:20) only
    assert [(r["window_start"].minute, r["n"]) for r in m.sinks["w1"]] == [(0, 2)]
    cut = m.cut("s0")
    m.restore(cut, (replace(hop, size=30),), rollback=False)
    # [00:10, 00:30) goes to [00:00, 00:30), [00:20, 00:40) to [00:10, 00:40): the same ends.
    assert m.stages["w1_s0"].windows == {(0, "a"): {"n": 2}, (at(10), "a"): {"n": 1}}


def test_sessions_merge_where_they_touch_close_at_their_end_and_regrow_on_a_new_gap() -> None:
    sessions = Branch("w1", "w1_s0", 10, ("n",), session=True)
    m = Model()
    m.start((sessions,))
    feed(m, [("a", 1, at(0)), ("a", 1, at(10))])  # they touch: one session, [00:00, 00:20)
    assert m.stages["w1_s0"].windows == {(0, "a"): {"n": 2, "__end": at(20)}}
    feed(m, [("a", 1, at(30))])  # clock 00:25: [00:00, 00:20) closes
    assert [(r["window_start"].minute, r["window_end"].minute, r["n"]) for r in m.sinks["w1"]] == [(0, 20, 2)]
    feed(m, [("a", 1, at(21)), ("a", 1, at(2))])
    # 00:02 (+10 min = 00:12 <= 00:25) is late; 00:21 joins the session at 00:30
    assert m.stages["w1_s0"].windows == {(at(21), "a"): {"n": 2, "__end": at(40)}}
    cut = m.cut("s0")
    m.restore(cut, (replace(sessions, size=20),), rollback=False)
    assert m.stages["w1_s0"].windows == {(at(21), "a"): {"n": 2, "__end": at(50)}}


def test_deduplication_writes_each_id_once_and_row_number_drops_late_ones() -> None:
    distinct = Branch("d1", "d1_s0", 0, (), dedup="distinct")
    first = Branch("d2", "d2_s0", 0, (), dedup="first")
    m = Model()
    m.start((distinct, first))
    m.events.append([Event(1, "a", 1, at(30)), Event(2, "b", 1, at(31)), Event(1, "a", 1, at(30))])
    m.batch()  # clock 00:26
    assert [r["id"] for r in m.sinks["d1"]] == [1, 2] and [r["id"] for r in m.sinks["d2"]] == [1, 2]
    m.events.append([Event(3, "a", 1, at(20)), Event(2, "b", 1, at(31))])
    m.batch()  # 00:20 is below the clock: late for ROW_NUMBER, not for DISTINCT; 2 was seen
    assert [r["id"] for r in m.sinks["d1"]] == [1, 2, 3] and [r["id"] for r in m.sinks["d2"]] == [1, 2]
    cut = m.cut("s0")
    m.restore(cut, (distinct, replace(first, stage="d2_s1")), rollback=False)
    m.events.append([Event(2, "b", 1, at(31)), Event(4, "c", 1, at(25))])
    m.batch()  # the renamed ROW_NUMBER stage starts empty on the job's clock: 2 again, 4 is late
    assert [r["id"] for r in m.sinks["d1"]] == [1, 2, 3, 4] and [r["id"] for r in m.sinks["d2"]] == [1, 2, 2]


def test_a_static_join_groups_a_stage_by_the_tables_column_and_enriches_every_event_once() -> None:
    joined = Branch("w1", "w1_s0", 10, ("n",), joined=True)
    rows = Branch("j1", "j1_s0", 0, (), 10, enrich=True)
    assert "JOIN grp g ON e.k = g.k" in joined.sql() and "TABLE grouped_w1" in joined.sql()
    assert (
        rows.sql()
        == "INSERT INTO j1 SELECT e.id, e.k, e.v, g.g FROM ev e JOIN grp g ON e.k = g.k WHERE e.v >= 10"
    )
    m = Model()
    m.start((joined, rows))
    feed(m, [("a", 5, at(0)), ("b", 20, at(1)), ("c", 30, at(2)), ("b", 20, at(30))])
    assert [(r["k"], r["n"]) for r in m.sinks["w1"]] == [("x", 2), ("y", 1)]  # a and b are group x
    assert [(r["k"], r["g"]) for r in m.sinks["j1"]] == [("b", "x"), ("c", "y"), ("b", "x")]  # v >= 10
    cut = m.cut("s0")
    m.restore(cut, (replace(joined, joined=False), rows), rollback=False)  # by k again, state kept
    feed(m, [("a", 1, at(31))])
    assert m.stages["w1_s0"].windows == {(at(30), "x"): {"n": 1}, (at(30), "a"): {"n": 1}}


def test_late_rows_are_counted_per_stage_and_a_restore_counts_from_the_cuts() -> None:
    """What pitstop.late_rows shows: per stage, each row it dropped behind the clock (a HOP row
    once per window missed; a ROW_NUMBER's at the clock itself too), and for a restored job the
    counts at the snapshot's cut (stages dropped since included) plus its own."""
    hop = Branch("w2", "w2_s0", 20, ("n",), slide=10)
    first = Branch("d2", "d2_s0", 0, (), dedup="first")
    m = Model()
    m.start((TEN, hop, first))
    feed(m, [("a", 1, at(30))])  # clock 00:25
    feed(m, [("a", 1, at(3)), ("a", 1, at(15)), ("a", 1, at(25))])
    # TEN: [00:00, 00:10) and [00:10, 00:20) had closed. HOP: 00:03 missed [23:50, 00:10) and
    # [00:00, 00:20), 00:15 missed [00:00, 00:20). ROW_NUMBER: all three, 00:25 at the clock.
    assert m.late == {"w1_s0": 2, "w2_s0": 3, "d2_s0": 3}
    cut = m.cut("s0")
    feed(m, [("b", 1, at(1))])
    assert m.late == {"w1_s0": 3, "w2_s0": 5, "d2_s0": 4}
    m.restore(cut, (TEN,), rollback=False)  # reads 00:01 again: late for the old job, so for it
    assert m.late == {"w1_s0": 3, "w2_s0": 3, "d2_s0": 3}


JOIN = Branch("i1", "i1_s0", 0, (), interval=(10, 30))  # cl's ts BETWEEN ev's ts - 10 min AND + 30 min


def feed_both(model: Model, events: list[tuple[str, int]], others: list[tuple[str, int]]) -> None:
    """One file of each stream, (k, ts seconds) rows, read in one micro-batch."""
    model.events.append([Event(100 + i, k, 1, ts) for i, (k, ts) in enumerate(events)])
    model.others.append([Event(200 + i, k, 1, ts) for i, (k, ts) in enumerate(others)])
    model.batch()


def pairs(model: Model) -> list[tuple[str, int, int]]:
    """The join's pairs: key, ev's and cl's minute."""
    day = datetime(2024, 1, 1)
    return [
        (r["k"], int((r["ts"] - day).total_seconds()) // 60, int((r["cts"] - day).total_seconds()) // 60)
        for r in model.sinks["i1"]
    ]


def test_an_interval_join_pairs_each_row_once_drops_late_ones_and_lets_go_of_unmatchable_ones() -> None:
    assert JOIN.sql() == (
        "INSERT INTO i1 SELECT /*+ STAGE(i1_s0) */ e.id, e.k, e.ts, c.id AS cid, c.ts AS cts FROM ev e "
        "JOIN cl c ON e.k = c.k AND c.ts BETWEEN e.ts - INTERVAL '10' MINUTE AND e.ts + INTERVAL '30' MINUTE"
    )
    m = Model()
    m.start((JOIN,))
    feed_both(m, [("a", at(60))], [("a", at(55)), ("a", at(95)), ("b", at(70))])
    st = m.stages["i1_s0"]
    assert pairs(m) == [("a", 60, 55)] and st.clock == at(55)  # the lesser side's: ev's 01:00 - 5 min
    feed_both(m, [("a", at(85)), ("a", at(54))], [("a", at(50))])
    # 00:54 and 00:50 are at or below the clock (00:55): late, counted; 01:25 pairs with 01:35.
    assert pairs(m) == [("a", 60, 55), ("a", 85, 95)] and m.late == {"i1_s0": 2}
    # Clock 01:20: cl's 00:55 can pair with no ev row still to come (those are after 01:20, and
    # 00:55 + 10 min is before it); cl's b 01:10 can, at 01:20 exactly (inclusive), and stays.
    assert st.clock == at(80)
    assert [(e.k, e.ts // 60) for e in st.right] == [("a", 95), ("b", 70)]
    assert [e.ts // 60 for e in st.left] == [60, 85]


def test_a_widened_join_bound_misses_the_straddling_pairs_of_rows_let_go_under_the_old_one() -> None:
    m = Model()
    m.start((JOIN,))
    feed_both(m, [("a", at(60))], [("a", at(55)), ("a", at(95)), ("b", at(70))])
    feed_both(m, [("a", at(85))], [])  # clock 01:20: cl's a 00:55 is let go, b 01:10 is held
    cut = m.cut("s0")
    m.restore(cut, (replace(JOIN, interval=(30, 30)),), rollback=False)
    st = m.stages["i1_s0"]
    assert not st.committed or st.clock == at(80)  # from the rows (the bound changed), its clock
    feed_both(m, [("a", at(82)), ("b", at(95))], [])
    # b 01:35 pairs with the held b 01:10 under the new bound (25 min apart); a 01:22 with a 01:35,
    # but not with a 00:55 (27 min apart, within the new bound): the old job had let it go.
    assert pairs(m)[-2:] == [("a", 82, 95), ("b", 95, 70)] and len(pairs(m)) == 4
    # Held rows restored are never paired with each other: ev's a 01:00 and 01:25 and cl's a 01:35
    # were paired before the cut, where they could be.
    assert ("a", 60, 95) not in pairs(m)


def test_a_narrowed_join_bound_is_exact_and_a_new_join_starts_on_the_jobs_clock() -> None:
    m = Model()
    m.start((TEN, JOIN))
    feed_both(m, [("a", at(60))], [("a", at(70))])  # clock 00:55
    cut = m.cut("s0")
    m.restore(cut, (TEN, replace(JOIN, interval=(0, 10))), rollback=False)
    feed_both(m, [("a", at(62)), ("a", at(40))], [("a", at(64))])
    # 01:02 pairs with the held 01:10 and with 01:04; 01:04 with the held 01:00; 00:40 is late.
    assert pairs(m) == [("a", 60, 70), ("a", 62, 70), ("a", 62, 64), ("a", 60, 64)]
    # Renamed: a new stage, empty, on the job's clock (00:55); the rollback removed the pairs
    # written after the cut, and it reads the file after the cut again: 00:40 is late.
    m.restore(cut, (TEN, replace(JOIN, stage="i1_s1")), rollback=True)
    assert pairs(m) == [("a", 60, 70), ("a", 62, 64)]
    assert m.late == {"w1_s0": 1, "i1_s1": 1} and m.stages["i1_s1"].clock == at(57)


def test_a_widened_type_keeps_each_aggregates_state_and_a_changed_call_needs_the_same_state_type() -> None:
    assert evolve(("lo", "total", "mean"), ("lo", "total", "mean"), "INT", "") == {
        "lo": "lo",
        "total": "total",
        "mean": "mean",
    }
    assert evolve(("lo",), ("total",), "INT", "INT") == {"total": None}  # INT and BIGINT (SUM's)
    assert evolve(("lo",), ("total",), "", "") == {"total": "lo"}  # both BIGINT
    assert evolve(("total",), ("hi",), "DECIMAL(8,0)", "DECIMAL(12,0)") == {"hi": None}
    typed = Branch("t1", "t1_s0", 10, ("lo", "n"), vtype="FLOAT")
    assert "WITH typed_t1 AS (SELECT id, k, CAST(v AS FLOAT) AS v, ts FROM ev)" in typed.sql()
    m = Model()
    m.start((typed,))
    feed(m, [("a", 7, at(1)), ("a", 3, at(2))])
    cut = m.cut("s0")
    m.restore(cut, (replace(typed, vtype="DOUBLE"),), rollback=False)
    assert m.stages["t1_s0"].windows == {(0, "a"): {"lo": 3, "n": 2}}  # carried, cast
    feed(m, [("a", 1, at(9)), ("a", 5, at(16))])  # clock 00:11: the window closes
    assert [(r["lo"], r["n"]) for r in m.sinks["t1"]] == [(1, 3)]


def test_a_join_new_where_the_snapshots_job_read_no_second_stream_reads_that_stream_from_its_start() -> None:
    m = Model()
    m.start((TEN,))
    feed_both(m, [("a", at(60))], [("a", at(50)), ("a", at(62))])  # clock 00:55; cl is read by none
    cut = m.cut("s0")
    assert cut.others is None
    m.restore(cut, (TEN, JOIN), rollback=False)
    # cl's files from the first: 00:50 is late on the job's clock, 01:02 is held.
    assert m.late == {"i1_s0": 1} and [e.ts for e in m.stages["i1_s0"].right] == [at(62)]
    feed_both(m, [("a", at(61))], [])
    assert pairs(m) == [("a", 61, 62)]
    assert m.cut("s1").others == 2


def test_having_keeps_the_windows_and_groups_it_holds_for_and_counts_from_its_own_accumulator() -> None:
    windows = Branch("w1", "w1_s0", 10, ("total",), having=2)
    totals = Branch("r1", "r1_s0", 0, ("total",))
    assert windows.state_aggs == ("total", "n") and windows.sql().endswith(
        "GROUP BY window_start, window_end, k HAVING COUNT(*) >= 2"
    )
    m = Model()
    m.start((windows, totals))
    feed(m, [("a", 1, at(1)), ("a", 2, at(2)), ("b", 4, at(3)), ("a", 1, at(20))])  # clock 00:15
    assert [(r["k"], r["total"]) for r in m.sinks["w1"]] == [("a", 3)]  # b's window had one event
    cut = m.cut("s0")
    # HAVING put in the running aggregate: its COUNT(*) is an aggregate added, empty for every
    # group seen before; the rows' batch writes every group, and HAVING keeps none of them yet.
    m.restore(cut, (windows, replace(totals, having=2)), rollback=False)
    assert m.rows("r1") == []
    feed(m, [("a", 1, at(21)), ("a", 1, at(22)), ("b", 1, at(23))])
    assert m.rows("r1") == [{"k": "a", "total": 6}]


def test_a_changed_watermark_delay_holds_from_the_cut_on_and_the_clock_never_goes_back() -> None:
    first = Branch("d2", "d2_s0", 0, (), dedup="first")
    m = Model()
    m.start((TEN, first))
    feed(m, [("a", 1, at(30))])  # clock 00:25; key 0 expires at 00:35 (first event + 5 min)
    cut = m.cut("s0")
    m.delay = 10 * 60  # CREATE OR REPLACE MAPPING ev ... ts - INTERVAL '10' MINUTE
    m.restore(cut, (TEN, first), rollback=False)
    m.events.append([Event(1, "a", 1, at(32))])
    m.batch()  # 00:32 - 10 min is before the clock: it stays at 00:25
    assert m.stages["w1_s0"].clock == at(25) and m.stages["d2_s0"].clock == at(25)
    assert m.stages["d2_s0"].seen == {0: at(35), 1: at(42)}  # the old key keeps its expiry
    feed(m, [("a", 1, at(50))])  # key 0 again, before it expires; then clock 00:40: it has
    assert m.stages["w1_s0"].clock == at(40) and m.stages["d2_s0"].seen == {1: at(42)}


def test_a_window_over_an_interval_joins_pairs_runs_on_the_clock_the_join_passes_on() -> None:
    chain = Branch("i2", "i2_s0", 10, ("n",), interval=(0, 10), pairs="i2_j0")
    assert chain.sql().startswith(
        "WITH pairs_i2 AS (SELECT /*+ STAGE(i2_j0) */ e.id, e.k, e.v, e.ts FROM ev e JOIN cl c ON e.k = c.k "
        "AND c.ts BETWEEN e.ts AND e.ts + INTERVAL '10' MINUTE) INSERT INTO i2 SELECT /*+ STAGE(i2_s0) */"
    )
    m = Model()
    m.start((chain,))
    feed_both(m, [("a", at(60)), ("a", at(62))], [("a", at(65)), ("a", at(80))])
    # Two pairs in [01:00, 01:10); the join's clock 00:57 passes on 00:57 - 10 min - 1 s.
    assert m.stages["i2_s0"].clock == at(46, 59) and m.stages["i2_s0"].windows == {(at(60), "a"): {"n": 2}}
    feed_both(m, [("a", at(90))], [("a", at(95))])  # join's clock 01:25: the window closes
    assert [(r["window_start"].minute, r["n"]) for r in m.sinks["i2"]] == [(0, 2)] and not m.late
    cut = m.cut("s0")
    # The job's clock is the join's (01:25), not the window's: a new stage starts on it.
    m.restore(cut, (replace(chain, size=30), TEN), rollback=False)
    assert m.stages["w1_s0"].clock == at(85) and m.stages["i2_s0"].windows == {(at(90), "a"): {"n": 1}}
