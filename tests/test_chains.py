"""Two stateful stages in one branch (issue 11, section 1): a deduplication or an interval join
whose rows feed a window, written as a CTE, view or subquery that the window reads. Each stage is
planned, snapshotted and restored on its own, in one Spark query; the branch goes on from its
native checkpoint only when all its stages can. Planner and rules without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import run
from pitstop.catalog.rows import Mapping
from pitstop.errors import PlanError
from pitstop.executor import mapping_from_node
from pitstop.manager import Manager
from pitstop.plan.model import JobPlan
from pitstop.planner.build import plan_job
from pitstop.snapshots.restore import NATIVE, ROWS
from pitstop.sql.parser import parse_statement
from pitstop.stages import registry

MAPPINGS_SQL = [
    """CREATE MAPPING orders (k VARCHAR, region VARCHAR, amount BIGINT, ts TIMESTAMP,
        WATERMARK FOR ts AS ts - INTERVAL '1' HOUR) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/o')""",
    """CREATE MAPPING pays (k VARCHAR, paid BIGINT, pts TIMESTAMP,
        WATERMARK FOR pts AS pts - INTERVAL '1' HOUR) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/p')""",
    "CREATE MAPPING hourly TYPE DuckDB",
    "CREATE MAPPING paid_hourly TYPE DuckDB",
    "CREATE MAPPING totals TYPE DuckDB",
    "CREATE MAPPING out (k VARCHAR) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/out')",
    "CREATE MAPPING regions (region VARCHAR, zone VARCHAR) TYPE DuckDB",
]
MAPPINGS: dict[str, Mapping] = {}
for _sql in MAPPINGS_SQL:
    _m = mapping_from_node(parse_statement(_sql), _sql)
    MAPPINGS[_m.name.lower()] = _m

FIRSTS = (
    "firsts AS (SELECT k, region, amount, ts FROM (SELECT k, region, amount, ts, "
    "ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM orders) WHERE rn = 1)"
)
PAID = (
    "paid AS (SELECT o.k, o.region, p.paid, o.ts FROM orders o JOIN pays p "
    "ON o.k = p.k AND p.pts BETWEEN o.ts AND o.ts + INTERVAL '30' MINUTE)"
)
DEDUP_THEN_WINDOW = (
    f"WITH {FIRSTS} INSERT INTO hourly SELECT window_start, window_end, region, COUNT(*) AS n, "
    "SUM(amount) AS total FROM TABLE(TUMBLE(TABLE firsts, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
    "GROUP BY window_start, window_end, region"
)
JOIN_THEN_WINDOW = (
    f"WITH {PAID} INSERT INTO paid_hourly SELECT window_start, window_end, COUNT(*) AS pairs, "
    "SUM(paid) AS paid FROM TABLE(TUMBLE(TABLE paid, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
    "GROUP BY window_start, window_end"
)


def plan(body: str) -> JobPlan:
    node = parse_statement(f"CREATE JOB c AS {body}")
    return plan_job("c", list(node.args["body"]), lambda name: MAPPINGS.get(name.lower()))


def refusal(body: str) -> str:
    with pytest.raises(PlanError) as caught:
        plan(body)
    return caught.value.message


# -- planning, no Spark --------------------------------------------------------------------------------
def test_a_deduplication_read_by_a_window_is_a_chain_of_two_stages() -> None:
    (branch,) = plan(DEDUP_THEN_WINDOW).branches
    assert [(s.name, s.kind) for s in branch.stages] == [
        ("hourly.dedup", "dedup"),
        ("hourly.aggregate", "tumble"),
    ]
    (step,) = branch.before
    assert [c.name for c in step.layers[-1].columns] == ["k", "region", "amount", "ts"]
    window = branch.stages[-1]
    # The window runs on the deduplication's watermark: the orders' hour.
    assert window.watermark_delay_micros == 3_600_000_000 and window.spec.time_column == "ts"
    assert registry.operator_ids(branch) == {"hourly.dedup": [1], "hourly.aggregate": [0]}
    assert JobPlan.from_json(json.loads(json.dumps(plan(DEDUP_THEN_WINDOW).to_json()))) == plan(
        DEDUP_THEN_WINDOW
    )


def test_an_interval_join_read_by_a_window_is_a_chain_whose_first_stage_is_the_join() -> None:
    (branch,) = plan(JOIN_THEN_WINDOW).branches
    assert [(s.name, s.kind) for s in branch.stages] == [
        ("paid", "interval_join"),
        ("paid_hourly.aggregate", "tumble"),
    ]
    assert branch.join is not None and branch.join.kind == "interval" and branch.sources == ("orders", "pays")
    # Spark's output watermark of the join: a left row waits for right rows up to 30 minutes later.
    join = branch.stages[0]
    assert registry.kind_of(join).output_watermark(join, 10_000_000) == 10_000_000 - 30 * 60_000 - 1


@pytest.mark.parametrize(
    "body",
    [
        # a view-like subquery instead of a CTE, and stateless layers between the stages
        "INSERT INTO totals SELECT region, COUNT(*) AS n FROM (SELECT DISTINCT k, region FROM orders) "
        "GROUP BY region",
        f"WITH {FIRSTS}, big AS (SELECT k, region, amount, ts FROM firsts WHERE amount > 10) "
        "INSERT INTO totals SELECT region, SUM(amount) AS total FROM big GROUP BY region",
        f"WITH {PAID}, numbered AS (SELECT k, paid, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn "
        "FROM paid) INSERT INTO out SELECT k, paid, ts FROM numbered WHERE rn = 1",
    ],
)
def test_stateless_layers_and_other_stage_pairs_chain_too(body: str) -> None:
    (branch,) = plan(body).branches
    assert len(branch.stages) == 2


def test_a_static_join_in_a_cte_enriches_the_rows_a_window_reads() -> None:
    body = (
        "WITH enriched AS (SELECT o.k, o.amount, o.ts, r.zone FROM orders o JOIN regions r "
        "ON o.region = r.region WHERE o.amount > 0), big AS (SELECT * FROM enriched WHERE amount > 5) "
        "INSERT INTO hourly SELECT window_start, window_end, zone, SUM(amount) AS total "
        "FROM TABLE(TUMBLE(TABLE big, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, zone"
    )
    (branch,) = plan(body).branches
    assert branch.join is not None and branch.join.kind == "table" and branch.join.right == "regions"
    assert [s.kind for s in branch.stages] == ["tumble"] and branch.before == ()
    # The join's WHERE, then the outer CTE's, both after the join and before the window.
    assert [p.where_sql for p in branch.join_layers] == ["`amount` > 0", "amount > 5"]
    assert [c.name for c in branch.join_layers[-1].columns] == ["k", "amount", "ts", "zone"]
    assert branch.stages[0].watermark_delay_micros == 3_600_000_000
    assert JobPlan.from_json(json.loads(json.dumps(plan(body).to_json()))) == plan(body)


def test_a_stateless_select_over_a_chain_ends_with_its_last_stage() -> None:
    (branch,) = plan(f"WITH {FIRSTS} INSERT INTO out SELECT k, amount FROM firsts WHERE amount > 1").branches
    assert [s.kind for s in branch.stages] == ["dedup"] and branch.before == ()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            "WITH w AS (SELECT window_start, window_end, region, COUNT(*) AS n FROM "
            "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
            "GROUP BY window_start, window_end, region) "
            "INSERT INTO totals SELECT region, SUM(n) AS n FROM w GROUP BY region",
            "CTE 'w' aggregates, and only one aggregation per INSERT is supported",
        ),
        (
            "WITH d AS (SELECT DISTINCT k, region FROM orders) INSERT INTO out SELECT k FROM "
            "TABLE(IMPOSE_ORDER(TABLE d, DESCRIPTOR(ts), INTERVAL '1' SECOND))",
            "IMPOSE_ORDER reads a source mapping or a stateless view",
        ),
        (
            "INSERT INTO hourly SELECT window_start, window_end, COUNT(*) AS n FROM "
            "TABLE(TUMBLE((SELECT DISTINCT k, region FROM orders), DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
            "GROUP BY window_start, window_end",
            "DESCRIPTOR(ts): a subquery (over mapping 'orders') has no column 'ts'",
        ),
        (
            "WITH d AS (SELECT k, region, amount FROM orders) INSERT INTO hourly SELECT window_start, "
            "window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE d, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
            "GROUP BY window_start, window_end",
            "DESCRIPTOR(ts): CTE 'd' (over mapping 'orders') has no column 'ts'; known columns: k, region",
        ),
    ],
)
def test_chains_pitstop_cannot_run_are_refused_saying_why(body: str, said: str) -> None:
    assert said in refusal(body)


# -- across two pit stops, on real Spark ---------------------------------------------------------------
def write(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (folder / f".{name}.tmp").write_text(text)
    (folder / f".{name}.tmp").rename(folder / name)


ENRICHED_THEN_WINDOW = (
    "WITH enriched AS (SELECT o.amount, o.ts, z.zone FROM orders o JOIN zones z ON o.region = z.region) "
    "INSERT INTO by_zone SELECT window_start, window_end, zone, SUM(amount) AS total "
    "FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
    "GROUP BY window_start, window_end, zone"
)
JOB = f"c {{options}} AS BEGIN {DEDUP_THEN_WINDOW}; {JOIN_THEN_WINDOW}; {ENRICHED_THEN_WINDOW}; END"


@pytest.mark.spark
def test_chained_stages_across_pit_stops_equal_duckdbs_batch_truth(manager: Manager, tmp_path: Path) -> None:
    """dedup -> window, interval join -> window and static join -> window, stopped twice
    mid-stream and restored from the rows, then natively: the windows equal DuckDB's over all the
    input. A duplicate of an order seen before the cut is dropped after it; a pair straddling the
    cut is counted once, in a window that had closed for the job's input but not for the join's
    output (the join passes on an earlier clock, which the restored window must keep)."""
    odir, pdir, zdir = tmp_path / "orders", tmp_path / "pays", tmp_path / "zones"
    run(
        manager,
        "\n".join(
            sql.replace("/tmp/pitstop-tests/o'", f"{odir}'").replace("/tmp/pitstop-tests/p'", f"{pdir}'")
            + ";"
            for sql in MAPPINGS_SQL[:4]
        )
        + f"CREATE MAPPING zones (region VARCHAR, zone VARCHAR) TYPE File OPTIONS ('path'='{zdir}');"
        + "CREATE MAPPING by_zone TYPE DuckDB;",
    )
    write(zdir, "z.json", [{"region": "eu", "zone": "emea"}, {"region": "us", "zone": "amer"}])

    def orders(name: str, *rows: tuple[str, str, int, str]) -> None:
        write(
            odir, name, [{"k": k, "region": r, "amount": a, "ts": f"2024-01-01 {t}"} for k, r, a, t in rows]
        )

    def pays(name: str, *rows: tuple[str, int, str]) -> None:
        write(pdir, name, [{"k": k, "paid": p, "pts": f"2024-01-01 {t}"} for k, p, t in rows])

    # Run 1. a's second order and b's are duplicates. At the cut the watermark is 01:15 (both
    # inputs'), so hourly's 00:00 window is out; the join's output clock is 30 minutes behind.
    orders("1.json", ("a", "eu", 10, "00:05"), ("b", "us", 20, "00:10"), ("c", "eu", 30, "00:40"))
    orders("2.json", ("a", "eu", 99, "00:50"))
    pays("1.json", ("a", 1, "00:20"), ("b", 2, "00:30"))
    run(manager, f"CREATE JOB {JOB.format(options='')}; AWAIT JOB c;")
    orders("3.json", ("d", "us", 40, "01:30"), ("b", "us", 77, "01:35"), ("g", "us", 70, "02:15"))
    pays("2.json", ("c", 3, "01:05"), ("y", 0, "02:20"))
    run(manager, "AWAIT JOB c; DROP JOB c WITH SNAPSHOT c1;")
    assert manager.catalog.query("SELECT region, n, total FROM hourly ORDER BY region")[1] == [
        ("eu", 2, 40),
        ("us", 1, 20),
    ]
    assert manager.catalog.query("SELECT count(*) FROM paid_hourly")[1] == [(0,)]

    # Run 2, from the rows: c's second order is a duplicate of one before the cut; a's and d's
    # payments pair with orders buffered before it (a's in the 00:00 window).
    orders("4.json", ("e", "eu", 50, "02:40"), ("c", "eu", 88, "01:20"))
    pays("3.json", ("a", 5, "01:18"), ("d", 4, "01:45"), ("g", 7, "02:30"))
    explained = run(manager, f"EXPLAIN CREATE JOB {JOB.format(options='FROM SNAPSHOT c1')}")[0].rows
    assert [(r[0], r[3], r[7]) for r in explained if r[3]] == [
        (1, "hourly.dedup", "restored"),
        (1, "hourly.aggregate", "restored"),
        (2, "paid", "restored"),
        (2, "paid_hourly.aggregate", "restored"),
        (3, "by_zone.aggregate", "restored"),
    ]
    canonical = "OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT c1"
    started = run(manager, f"CREATE JOB {JOB.format(options=canonical)}; AWAIT JOB c;")[0].message
    assert started.count(ROWS) == 5
    run(manager, "DROP JOB c WITH SNAPSHOT c2;")
    shown = dict(run(manager, "DESCRIBE SNAPSHOT c2")[0].rows)
    assert (
        shown["stage paid (native)"]
        == "the copy of its branch's checkpoint, under native/paid_hourly.aggregate"
    )

    # Run 3, natively from a run that was itself seeded from rows: all four stages go on.
    orders("5.json", ("f", "us", 60, "04:45"))
    pays("4.json", ("e", 6, "02:50"), ("z", 0, "05:00"))
    started = run(manager, f"CREATE JOB {JOB.format(options='FROM SNAPSHOT c2')}; AWAIT JOB c;")[0].message
    assert started.count(NATIVE) == 5
    run(manager, "DROP JOB c;")

    # The truth, in DuckDB over every file: first order per key; every pair in the bound; the
    # windows each clock has closed (the job's watermark 03:45, the join's 03:15).
    db = duckdb.connect()
    db.execute(
        f"CREATE VIEW o AS SELECT * FROM read_json('{odir}/*.json', columns={{k:'VARCHAR',"
        "region:'VARCHAR',amount:'BIGINT',ts:'TIMESTAMP'})"
    )
    db.execute(
        f"CREATE VIEW p AS SELECT * FROM read_json('{pdir}/*.json', columns={{k:'VARCHAR',"
        "paid:'BIGINT',pts:'TIMESTAMP'})"
    )
    wm = db.execute(
        "SELECT least((SELECT max(ts) FROM o), (SELECT max(pts) FROM p)) - INTERVAL 1 HOUR"
    ).fetchone()
    assert wm is not None
    firsts = db.execute(
        "SELECT time_bucket(INTERVAL 1 HOUR, ts) AS ws, region, count(*), sum(amount) FROM "
        "(SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM o) WHERE rn = 1 "
        "AND time_bucket(INTERVAL 1 HOUR, ts) + INTERVAL 1 HOUR <= ? GROUP BY ALL ORDER BY ALL",
        [wm[0]],
    ).fetchall()
    pairs = db.execute(
        "SELECT time_bucket(INTERVAL 1 HOUR, o.ts) AS ws, count(*), sum(paid) FROM o JOIN p ON o.k = p.k "
        "AND p.pts BETWEEN o.ts AND o.ts + INTERVAL 30 MINUTE "
        "WHERE time_bucket(INTERVAL 1 HOUR, o.ts) + INTERVAL 1 HOUR <= ? - INTERVAL 30 MINUTE "
        "GROUP BY ALL ORDER BY ALL",
        [wm[0]],
    ).fetchall()
    db.execute(f"CREATE VIEW z AS SELECT * FROM read_json('{zdir}/*.json')")
    zoned = db.execute(
        "SELECT time_bucket(INTERVAL 1 HOUR, ts) AS ws, zone, sum(amount) FROM o JOIN z USING (region) "
        "WHERE time_bucket(INTERVAL 1 HOUR, ts) + INTERVAL 1 HOUR <= ? GROUP BY ALL ORDER BY ALL",
        [wm[0]],
    ).fetchall()
    assert len(firsts) == 5 and len(pairs) == 3 and len(zoned) == 6  # the data closes what it should
    assert manager.catalog.query("SELECT window_start, zone, total FROM by_zone ORDER BY ALL")[1] == zoned
    assert (
        manager.catalog.query("SELECT window_start, region, n, total FROM hourly ORDER BY ALL")[1] == firsts
    )
    assert manager.catalog.query("SELECT window_start, pairs, paid FROM paid_hourly ORDER BY ALL")[1] == pairs


def test_a_group_by_without_an_aggregate_function_is_refused_with_what_to_write() -> None:
    """Found by a generated update chain: a window or running aggregate without an aggregate
    function failed inside Spark's groupBy().agg() at CREATE JOB ("exprs should not be empty")."""
    for body in (
        "INSERT INTO hourly SELECT window_start, window_end, region FROM TABLE(TUMBLE(TABLE orders, "
        "DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY window_start, window_end, region",
        "INSERT INTO totals SELECT region FROM orders GROUP BY region",
    ):
        assert "a GROUP BY without an aggregate function is not supported; add one (e.g. COUNT(*) AS n)" in (
            refusal(body)
        )
