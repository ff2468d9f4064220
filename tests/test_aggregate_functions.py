"""COUNT(DISTINCT x), APPROX_COUNT_DISTINCT(x), MIN_BY(x, y) and MAX_BY(x, y) in accumulator form
(issue 11, section 2.5): their state columns, finishes and rules across an update, on planned
stages (no Spark; tests/test_state_evolution.py restores them on real Spark)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from conftest import run
from pitstop.errors import PlanError
from pitstop.manager import Manager
from pitstop.plan.model import Accumulator
from pitstop.planner.compat import REFUSED, RESTORED
from pitstop.snapshots.restore import NATIVE, ROWS
from pitstop.stages import registry
from pitstop.stages.buffers import decode_set, expected_buffer
from test_state_evolution import plan, seed_columns, stage, verdict

NEW = (
    "COUNT(DISTINCT qty) AS kinds, APPROX_COUNT_DISTINCT(region) AS about, "
    "MIN_BY(qty, amount) AS cheapest, MAX_BY(qty, amount) AS dearest"
)


def test_each_new_function_has_a_typed_state_column_and_a_finish() -> None:
    job = plan(NEW)
    (s,) = job.stages
    assert s.functions == (
        "COUNT(DISTINCT qty)",
        "APPROX_COUNT_DISTINCT(region)",
        "MIN_BY(qty, amount)",
        "MAX_BY(qty, amount)",
    )
    assert s.accumulators == (
        Accumulator("acc0", "set", "ARRAY<INT>", "CAST(qty AS INT)"),
        Accumulator("acc1", "hll", "BINARY", "CAST(region AS STRING)"),
        Accumulator(
            "acc2",
            "min",
            "STRUCT<ord: DECIMAL(12,2), val: INT>",
            "CASE WHEN amount IS NULL THEN NULL ELSE "
            "named_struct('ord', CAST(amount AS DECIMAL(12,2)), 'val', CAST(qty AS INT)) END",
        ),
        Accumulator(
            "acc3",
            "max",
            "STRUCT<ord: DECIMAL(12,2), val: INT>",
            "CASE WHEN amount IS NULL THEN NULL ELSE "
            "named_struct('ord', CAST(amount AS DECIMAL(12,2)), 'val', CAST(qty AS INT)) END",
        ),
    )
    output = {c.name: (c.sql, c.type) for c in job.branches[0].output}
    assert output["kinds"] == ("CAST(COALESCE(SIZE(acc0), 0) AS BIGINT)", "BIGINT")
    assert output["about"] == ("CAST(COALESCE(HLL_SKETCH_ESTIMATE(acc1), 0) AS BIGINT)", "BIGINT")
    assert output["cheapest"] == ("CAST(acc2['val'] AS INT)", "INT")
    # The state contract of the stage's kind types them (snapshots' Parquet columns).
    kind = registry.kind_named("tumble")
    assert kind.state_schema(s).endswith(
        "acc0 ARRAY<INT>, acc1 BINARY, acc2 STRUCT<ord: DECIMAL(12,2), val: INT>, "
        "acc3 STRUCT<ord: DECIMAL(12,2), val: INT>"
    )
    # What Spark keeps in the operator's state for them, as measured on pyspark 4.3.0.
    assert expected_buffer(s) == [
        ("acc0", "binary"),
        ("acc1", "binary"),
        ("acc1__seeds", "binary"),
        ("acc2", "struct<ord:decimal(12,2),val:int>"),
        ("acc3", "struct<ord:decimal(12,2),val:int>"),
    ]


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [
        ("COUNT(DISTINCT qty, region)", "COUNT(DISTINCT ...) counts one expression"),
        ("APPROX_COUNT_DISTINCT(region, 0.01)", "write APPROX_COUNT_DISTINCT(x) with one argument"),
        ("COUNT(DISTINCT CAST(amount AS DECIMAL(30,2)))", "CAST the value to STRING"),
    ],
)
def test_forms_the_state_cannot_hold_are_refused_saying_what_to_write(aggregate: str, expected: str) -> None:
    with pytest.raises(PlanError) as caught:
        plan(f"{aggregate} AS x")
    assert expected in caught.value.message


def test_min_by_changed_to_max_by_keeps_the_state_and_warns_what_the_kept_value_is() -> None:
    old, new = plan("MIN_BY(qty, amount) AS pick"), plan("MAX_BY(qty, amount) AS pick")
    v = verdict(old, new)
    assert v.outcome == RESTORED
    assert v.reason.startswith("same window, keys and accumulators")
    assert any("MIN_BY(qty, amount) to MAX_BY(qty, amount)" in w for w in v.warnings)
    (comparator,) = [w for w in v.warnings if "comparator" in w]
    assert comparator.startswith(
        "MIN_BY(qty, amount) -> MAX_BY(qty, amount) changes the comparator and keeps the state: for "
        "the windows in flight at the cut, MAX_BY(qty, amount) starts from the value MIN_BY(qty, amount) "
        "kept (the old comparator's best)"
    )
    # The state goes over as it is: the same accumulator, positionally.
    assert seed_columns(old, new) is None
    # Beside an added aggregate it still does, and still says so.
    v = verdict(old, plan("MAX_BY(qty, amount) AS pick, COUNT(DISTINCT region) AS regions"))
    assert v.outcome == RESTORED and "added: COUNT(DISTINCT region)" in v.reason
    assert any("changes the comparator" in w for w in v.warnings)


def test_a_new_function_added_or_removed_evolves_like_any_aggregate() -> None:
    old, new = plan("SUM(amount) AS revenue"), plan(f"SUM(amount) AS revenue, {NEW}")
    v = verdict(old, new)
    assert v.outcome == RESTORED
    assert v.reason.startswith(
        "same window and keys; added: COUNT(DISTINCT qty), APPROX_COUNT_DISTINCT(region), "
        "MIN_BY(qty, amount), MAX_BY(qty, amount)"
    )
    assert seed_columns(old, new) == {
        "acc0": "acc0",
        "acc1": "CAST(NULL AS ARRAY<INT>)",
        "acc2": "CAST(NULL AS BINARY)",
        "acc3": "CAST(NULL AS STRUCT<ord: DECIMAL(12,2), val: INT>)",
        "acc4": "CAST(NULL AS STRUCT<ord: DECIMAL(12,2), val: INT>)",
    }
    back = verdict(new, old)
    assert back.outcome == RESTORED and back.reason.startswith(
        "same window and keys; removed, their state dropped: COUNT(DISTINCT qty), "
        "APPROX_COUNT_DISTINCT(region), MIN_BY(qty, amount), MAX_BY(qty, amount)"
    )


def test_a_distinct_set_of_another_element_type_is_refused_naming_both_types() -> None:
    """A narrowed element type is refused; a widened one (INT -> BIGINT) is restored with a cast,
    as the README's table says of every widened state type (until issue 23's chains it was refused
    for a set: test_state_evolution.py)."""
    old, new = plan("COUNT(DISTINCT qty) AS kinds", qty="BIGINT"), plan("COUNT(DISTINCT qty) AS kinds")
    v = verdict(old, new)
    assert v.outcome == REFUSED
    assert "the state of COUNT(DISTINCT qty) changed type from (ARRAY<BIGINT>) to (ARRAY<INT>)" in v.reason
    assert stage(new).accumulators[0].type == "ARRAY<INT>"
    assert verdict(new, old).outcome == RESTORED


def test_a_distinct_set_buffer_written_by_spark_decodes_to_its_values() -> None:
    # collect_set's state buffers for the sets {q, p} and {r} and {7, 3}, as pyspark 4.3.0 wrote
    # them to the state store (an UnsafeRow holding an UnsafeArrayData).
    strings = bytes.fromhex(
        "0000000000000000"
        "3000000010000000"
        "0200000000000000"
        "0000000000000000"
        "0100000020000000"
        "0100000028000000"
        "7100000000000000"
        "7000000000000000"
    )
    assert decode_set(strings, "STRING") == ["q", "p"]
    one = bytes.fromhex(
        "000000000000000020000000100000000100000000000000000000000000000001000000180000007200000000000000"
    )
    assert decode_set(one, "STRING") == ["r"]
    ints = bytes.fromhex("00000000000000001800000010000000020000000000000000000000000000000700000003000000")
    assert decode_set(ints, "INT") == [7, 3]


# -- through pit stops, on real Spark -------------------------------------------------------------
EVENTS = """
CREATE OR REPLACE MAPPING events (
    id BIGINT, region VARCHAR, qty INT, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) TYPE Generator OPTIONS ('rate'='1000000000000', 'limit'='{limit}', 'keys'='3', 'step_ms'='1000');
"""
FUNCTIONS = (
    "COUNT(DISTINCT qty % 100) AS kinds, APPROX_COUNT_DISTINCT(qty % 100) AS about, "
    "MIN_BY(qty, id) AS first_qty, MAX_BY(qty, id) AS last_qty"
)
JOB = f"""AS BEGIN
    INSERT INTO picks SELECT window_start, window_end, region, {FUNCTIONS}
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '2' MINUTE))
        GROUP BY window_start, window_end, region;
    INSERT INTO hops SELECT window_start, window_end, region, {FUNCTIONS}
        FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '2' MINUTE, INTERVAL '1' MINUTE))
        GROUP BY window_start, window_end, region;
    INSERT INTO sessions SELECT window_start, window_end, region, {FUNCTIONS}
        FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND))
        GROUP BY window_start, window_end, region;
    INSERT INTO totals SELECT region, {FUNCTIONS} FROM events GROUP BY region;
END;"""
TRUTH = (
    "count(DISTINCT qty % 100), count(DISTINCT qty % 100), arg_min(qty, id), arg_max(qty, id) "
    "FROM events GROUP BY ALL"
)


Truth = dict[tuple[Any, ...], tuple[Any, ...]]


def events_truth(last: int) -> tuple[Truth, Truth, Truth, dict[str, tuple[Any, ...]]]:
    """Per (2-minute window, region), per (2-minute window sliding by 1, region), per (5-second
    session, region) and per region, the four functions over events 0..last-1, in
    DuckDB (the exact distinct count stands for the sketch's estimate: at these few values an HLL
    sketch counts exactly)."""
    import duckdb
    import pyarrow as pa

    from pitstop.connectors.generator.source import generate

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("region", pa.string()),
            ("qty", pa.int32()),
            ("amount", pa.decimal128(12, 2)),
            ("ts", pa.timestamp("us")),
        ]
    )
    options = {"keys": "3", "step_ms": "1000", "rate": "1000000000000"}
    con = duckdb.connect()
    con.register("events", pa.Table.from_batches([generate(schema, 0, last, options)]))
    windows = con.execute(f"SELECT time_bucket(INTERVAL 2 MINUTE, ts), region, {TRUTH}").fetchall()
    con.execute(
        "CREATE VIEW hopped AS SELECT unnest([time_bucket(INTERVAL 1 MINUTE, ts), "
        "time_bucket(INTERVAL 1 MINUTE, ts) - INTERVAL 1 MINUTE]) AS ws, * FROM events"
    )
    hops = con.execute(f"SELECT ws, region, {TRUTH.replace('FROM events', 'FROM hopped')}").fetchall()
    # A session goes on while the next event of its region comes at most the gap after the last
    # (Spark merges [t, t + gap) with an event at t + gap): numbered by gaps and islands.
    con.execute(
        "CREATE VIEW marked AS SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY region ORDER BY ts) "
        "<= INTERVAL 5 SECOND THEN 0 ELSE 1 END AS first FROM events"
    )
    con.execute(
        "CREATE VIEW numbered AS SELECT *, sum(first) OVER (PARTITION BY region ORDER BY ts) AS n FROM marked"
    )
    con.execute(
        "CREATE VIEW sessioned AS SELECT min(ts) OVER (PARTITION BY region, n) AS ws, "
        "max(ts) OVER (PARTITION BY region, n) + INTERVAL 5 SECOND AS we, * FROM numbered"
    )
    sessions = con.execute(
        f"SELECT ws, region, we, {TRUTH.replace('FROM events', 'FROM sessioned')}"
    ).fetchall()
    regions = con.execute(f"SELECT region, {TRUTH}").fetchall()
    return (
        {(r[0], r[1]): tuple(r[2:]) for r in windows},
        {(r[0], r[1]): tuple(r[2:]) for r in hops},
        {(r[0], r[1]): tuple(r[2:]) for r in sessions},
        {r[0]: tuple(r[1:]) for r in regions},
    )


@pytest.mark.spark
def test_new_functions_through_pit_stops_in_both_formats_equal_a_batch_computation(manager: Manager) -> None:
    """COUNT(DISTINCT), APPROX_COUNT_DISTINCT, MIN_BY and MAX_BY in a tumbling, a sliding and
    a session window and in a running aggregate: stopped with a snapshot mid-stream twice, restored
    from the snapshot's rows, then natively; every window and every group's total equals one computation
    over all events (values seen on both sides of a cut counted once; MIN_BY kept from before a
    cut, MAX_BY from after)."""
    run(
        manager,
        EVENTS.format(limit=300)
        + "CREATE MAPPING picks TYPE DuckDB; CREATE MAPPING hops TYPE DuckDB;"
        + "CREATE MAPPING sessions TYPE DuckDB; CREATE MAPPING totals TYPE DuckDB;"
        + f"CREATE JOB fns {JOB} AWAIT JOB fns; DROP JOB fns WITH SNAPSHOT s1;",
    )
    # The running aggregate's rows at the cut are its state finished: snapshot_state finishes the
    # sketch's estimate without Spark (datasketches) as Spark did into the sink, for every group.
    finished = run(manager, "SELECT region, kinds, about FROM snapshot_state('s1', 'totals.aggregate')")[0]
    at_cut = manager.catalog.query("SELECT region, kinds, about FROM totals")[1]
    assert sorted(finished.rows) == sorted(at_cut) and len(at_cut) == 3
    for i, (fmt, how, limit) in enumerate([("canonical", ROWS, 600), ("auto", NATIVE, 900)], start=1):
        run(manager, EVENTS.format(limit=limit))
        message = run(manager, f"CREATE JOB fns OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT s{i} {JOB}")[
            0
        ].message
        assert message.count(how) == 4, message
        run(manager, "AWAIT JOB fns;" + ("DROP JOB fns WITH SNAPSHOT s2;" if i == 1 else ""))
    windows, hops, sessions, regions = events_truth(900)
    closed = datetime(2024, 1, 1) + timedelta(seconds=899 - 5)
    _, rows = manager.catalog.query(
        "SELECT window_start, region, kinds, about, first_qty, last_qty FROM picks ORDER BY ALL"
    )
    written = [(r[0], r[1]) for r in rows]
    assert written == sorted(k for k in windows if k[0] + timedelta(minutes=2) <= closed)  # each once
    assert {(r[0], r[1]): tuple(r[2:]) for r in rows} == {k: windows[k] for k in written}
    _, rows = manager.catalog.query(
        "SELECT window_start, region, kinds, about, first_qty, last_qty FROM hops ORDER BY ALL"
    )
    written = [(r[0], r[1]) for r in rows]
    assert written == sorted(k for k in hops if k[0] + timedelta(minutes=2) <= closed)  # each once
    assert {(r[0], r[1]): tuple(r[2:]) for r in rows} == {k: hops[k] for k in written}
    # Sessions close when the watermark passes their end; the cuts' watermarks closed some, the
    # events after each cut went on others (a session open at a cut is finished by the next job).
    _, rows = manager.catalog.query(
        "SELECT window_start, region, window_end, kinds, about, first_qty, last_qty "
        "FROM sessions ORDER BY ALL"
    )
    closed_sessions = [(r[0], r[1]) for r in rows]
    assert closed_sessions == sorted(k for k in sessions if sessions[k][0] <= closed)  # each once
    assert {(r[0], r[1]): tuple(r[2:]) for r in rows} == {k: sessions[k] for k in closed_sessions}
    assert len(closed_sessions) > 30
    cuts = [datetime(2024, 1, 1) + timedelta(seconds=s) for s in (300, 600)]
    assert any(k[0] < cut <= sessions[k][0] - timedelta(seconds=5) for k in closed_sessions for cut in cuts)
    _, totals = manager.catalog.query("SELECT region, kinds, about, first_qty, last_qty FROM totals")
    assert {r[0]: tuple(r[1:]) for r in totals} == regions
    # The cuts fell inside windows (300 s and 600 s are inside [4, 6) and [10, 12) minutes), whose
    # first and last event sit on either side of them.
    assert any(k[0] == datetime(2024, 1, 1, 0, 4) for k in written)
