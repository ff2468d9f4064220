"""State that evolves (issue 11, section 3; DESIGN.md section 4): an aggregate added to or removed
from a restored stage, a state column widened; narrowing and key changes refused, each saying why.
Checked on planned stages (no Spark) and, at the end, through a restore on real Spark."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pytest

from conftest import run
from pitstop.catalog.rows import Mapping
from pitstop.connectors.generator.source import generate
from pitstop.errors import CompatibilityError
from pitstop.executor import mapping_from_node
from pitstop.manager import Manager
from pitstop.plan.model import AggregateStage, JobPlan, stage_from_json
from pitstop.plan.types import widens
from pitstop.planner import compat
from pitstop.planner.build import plan_job
from pitstop.planner.compat import REFUSED, RESTORED, StageVerdict
from pitstop.snapshots.restore import ROWS
from pitstop.sql.parser import parse_statement
from pitstop.stages import registry

ORDERS = """CREATE MAPPING orders (
    region VARCHAR, amount DECIMAL({precision},2), qty {qty}, price {price}, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/orders')"""


def plan(
    aggregates: str, keys: str = "region", precision: int = 12, qty: str = "INT", price: str = "FLOAT"
) -> JobPlan:
    mappings: dict[str, Mapping] = {}
    for sql in [
        ORDERS.format(precision=precision, qty=qty, price=price),
        "CREATE MAPPING daily_revenue (window_start TIMESTAMP) TYPE DuckDB",
    ]:
        m = mapping_from_node(parse_statement(sql), sql)
        mappings[m.name.lower()] = m
    body = (
        "INSERT INTO daily_revenue SELECT /*+ STAGE(daily) */ window_start, window_end, "
        f"{keys}, {aggregates} FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        f"GROUP BY window_start, window_end, {keys}"
    )
    node = parse_statement(f"CREATE JOB revenue AS {body}")
    return plan_job("revenue", list(node.args["body"]), lambda name: mappings.get(name.lower()))


def stage(job: JobPlan) -> AggregateStage:
    """The stage as a snapshot's manifest keeps it (through its JSON form)."""
    (b,) = job.to_json()["branches"]
    return stage_from_json(b["stage"])


def verdict(old: JobPlan, new: JobPlan) -> StageVerdict:
    (v,) = compat.check({"daily": stage(old)}, new)
    return v


def seed_columns(old: JobPlan, new: JobPlan) -> dict[str, str] | None:
    kind = registry.kind_named("tumble")
    return kind.seed(stage(old), new.stages[0], "/nowhere", 0).columns


def test_an_added_aggregate_is_restored_and_named_partial_for_windows_in_flight() -> None:
    old = plan("SUM(amount) AS revenue")
    new = plan("SUM(amount) AS revenue, COUNT(*) AS orders, MAX(amount) AS top")
    v = verdict(old, new)
    assert v.outcome == RESTORED
    assert v.reason == "same window and keys; added: COUNT(*), MAX(amount)"
    assert v.warnings == (
        "COUNT(*), MAX(amount) start empty for the windows in flight at the cut: in their rows, it "
        "holds only the events after the cut",
    )
    assert seed_columns(old, new) == {
        "acc0": "acc0",
        "acc1": "CAST(NULL AS BIGINT)",
        "acc2": "CAST(NULL AS DECIMAL(12,2))",
    }


def test_a_removed_aggregate_is_restored_and_its_state_dropped_by_name() -> None:
    old = plan("SUM(amount) AS revenue, AVG(amount) AS mean, COUNT(*) AS orders")
    new = plan("SUM(amount) AS revenue, COUNT(*) AS orders")
    v = verdict(old, new)
    assert (v.outcome, v.warnings) == (RESTORED, ())
    assert v.reason == "same window and keys; removed, their state dropped: AVG(amount)"
    # AVG kept a sum (acc1) and a count (acc2); COUNT(*) was acc3 and is acc1 now.
    assert seed_columns(old, new) == {"acc0": "acc0", "acc1": "acc3"}


def test_reordered_aggregates_keep_their_own_state() -> None:
    old = plan("SUM(amount) AS revenue, COUNT(*) AS orders")
    new = plan("COUNT(*) AS orders, SUM(amount) AS revenue")
    v = verdict(old, new)
    assert (v.outcome, v.warnings) == (RESTORED, ())
    assert seed_columns(old, new) == {"acc0": "acc1", "acc1": "acc0"}


@pytest.mark.parametrize(
    ("aggregate", "before", "after", "old_type", "new_type"),
    [
        ("MAX(qty)", {"qty": "INT"}, {"qty": "BIGINT"}, "INT", "BIGINT"),
        ("SUM(amount)", {"precision": 12}, {"precision": 16}, "DECIMAL(22,2)", "DECIMAL(26,2)"),
        ("MIN(price)", {"price": "FLOAT"}, {"price": "DOUBLE"}, "FLOAT", "DOUBLE"),
        # a pair and a set of the widened column: "not a widening (INT -> BIGINT, ...)" before
        (
            "MIN_BY(qty, ts)",
            {"qty": "INT"},
            {"qty": "BIGINT"},
            "STRUCT<ord: TIMESTAMP, val: INT>",
            "STRUCT<ord: TIMESTAMP, val: BIGINT>",
        ),
        ("COUNT(DISTINCT price)", {"price": "FLOAT"}, {"price": "DOUBLE"}, "ARRAY<FLOAT>", "ARRAY<DOUBLE>"),
    ],
)
def test_a_widened_state_column_is_restored_with_a_cast(
    aggregate: str, before: dict[str, Any], after: dict[str, Any], old_type: str, new_type: str
) -> None:
    old, new = plan(f"{aggregate} AS x", **before), plan(f"{aggregate} AS x", **after)
    v = verdict(old, new)
    assert v.outcome == RESTORED
    assert (
        v.reason
        == f"same window and keys; widened, cast on restore: {aggregate} ({old_type}) -> ({new_type})"
    )
    assert seed_columns(old, new) == {"acc0": f"CAST(acc0 AS {new_type})"}


@pytest.mark.parametrize(
    ("aggregate", "before", "after", "types"),
    [
        ("MAX(qty)", {"qty": "BIGINT"}, {"qty": "INT"}, "(BIGINT) to (INT)"),
        ("SUM(amount)", {"precision": 16}, {"precision": 12}, "(DECIMAL(26,2)) to (DECIMAL(22,2))"),
        ("MAX(qty)", {"qty": "INT"}, {"qty": "DOUBLE"}, "(INT) to (DOUBLE)"),
    ],
)
def test_a_narrowed_or_otherwise_changed_state_column_is_refused_naming_both_types(
    aggregate: str, before: dict[str, Any], after: dict[str, Any], types: str
) -> None:
    v = verdict(plan(f"{aggregate} AS x", **before), plan(f"{aggregate} AS x", **after))
    assert v.outcome == REFUSED
    assert v.text().startswith(
        f"stage 'daily': refused: the state of {aggregate} changed type from {types}, "
    )
    assert "not a widening" in v.reason


def test_a_changed_function_in_place_keeps_its_state_with_a_warning_beside_an_added_one() -> None:
    v = verdict(plan("MIN(amount) AS m"), plan("MAX(amount) AS m, COUNT(*) AS n"))
    assert v.outcome == RESTORED
    assert v.reason == "same window and keys; added: COUNT(*)"
    assert v.warnings[0].startswith("aggregates changed from MIN(amount) to MAX(amount), COUNT(*)")


def test_a_new_call_of_other_types_in_place_of_a_removed_one_starts_empty() -> None:
    old = plan("SUM(amount) AS revenue, COUNT(*) AS n", precision=12)
    new = plan("SUM(amount) AS revenue, MAX(amount) AS top", precision=16)
    v = verdict(old, new)
    assert v.outcome == RESTORED
    assert v.reason == (
        "same window and keys; widened, cast on restore: SUM(amount) (DECIMAL(22,2)) -> (DECIMAL(26,2)); "
        "removed, their state dropped: COUNT(*); added: MAX(amount)"
    )
    assert seed_columns(old, new) == {
        "acc0": "CAST(acc0 AS DECIMAL(26,2))",
        "acc1": "CAST(NULL AS DECIMAL(16,2))",
    }


@pytest.mark.parametrize(("old_keys", "new_keys"), [("region", "region, qty"), ("region, qty", "region")])
def test_an_added_or_removed_group_key_stays_refused_saying_why(old_keys: str, new_keys: str) -> None:
    v = verdict(plan("COUNT(*) AS n", keys=old_keys), plan("COUNT(*) AS n", keys=new_keys))
    assert v.outcome == REFUSED
    assert (
        "state is kept per group, and a group of other keys cannot be split or merged out of it" in v.reason
    )


def test_widening_is_only_lossless_casts() -> None:
    assert widens("SMALLINT", "BIGINT") and widens("DECIMAL(12,2)", "DECIMAL(18,2)")
    assert widens("STRUCT<ord: TIMESTAMP, val: DECIMAL(8,2)>", "STRUCT<ord: TIMESTAMP, val: DECIMAL(10,2)>")
    assert not widens("STRUCT<ord: TIMESTAMP, val: INT>", "STRUCT<o: TIMESTAMP, val: BIGINT>")  # renamed
    assert not widens("ARRAY<BIGINT>", "ARRAY<INT>") and not widens("ARRAY<INT>", "STRUCT<val: INT>")
    assert not widens("DECIMAL(12,2)", "DECIMAL(18,4)")  # another scale: digits before the point may shrink
    assert not widens("BIGINT", "DOUBLE") and not widens("DOUBLE", "FLOAT") and not widens("INT", "STRING")


# -- through a restore, on real Spark -----------------------------------------------------------------
START = datetime(2024, 1, 1)
EVENTS = """
CREATE OR REPLACE MAPPING events (
    id BIGINT, region VARCHAR, amount DECIMAL({precision},2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) TYPE Generator OPTIONS ('rate'='1000000000000', 'limit'='{limit}', 'keys'='3', 'step_ms'='1000');
"""
SELECT = """INSERT INTO per_2min
    SELECT /*+ STAGE(sums) */ window_start, window_end, region, {aggregates}
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '2' MINUTE))
    GROUP BY window_start, window_end, region"""


def truth(first: int, last: int) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """(window_start, region) -> (SUM, COUNT, MAX) of amount over events first..last-1, in DuckDB."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("region", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("ts", pa.timestamp("us")),
        ]
    )
    options = {"keys": "3", "step_ms": "1000", "rate": "1000000000000"}
    con = duckdb.connect()
    con.register("events", pa.Table.from_batches([generate(schema, first, last, options)]))
    rows = con.execute(
        "SELECT time_bucket(INTERVAL 2 MINUTE, ts), region, SUM(amount), COUNT(*), MAX(amount) "
        "FROM events GROUP BY ALL"
    ).fetchall()
    return {(r[0], r[1]): tuple(r[2:]) for r in rows}


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["auto", "canonical"])
def test_a_restored_stage_gains_a_column_drops_one_and_widens_one(manager: Manager, fmt: str) -> None:
    cut, last = 300, 600
    run(
        manager,
        EVENTS.format(precision=12, limit=cut)
        + "CREATE MAPPING per_2min TYPE DuckDB;\n"
        + f"CREATE JOB sums AS {SELECT.format(aggregates='SUM(amount) AS revenue, COUNT(*) AS n')};"
        + "AWAIT JOB sums; DROP JOB sums WITH SNAPSHOT sums_v1;",
    )
    # The mapping's amount is wider now; the job drops COUNT(*) and adds MAX(amount), writing the
    # same DuckDB table, which gains the column (and the wider type of revenue).
    run(manager, EVENTS.format(precision=16, limit=last))
    updated = (
        f"sums OPTIONS ('restoreFormat'='{fmt}') FROM SNAPSHOT sums_v1 AS "
        + SELECT.format(aggregates="SUM(amount) AS revenue, MAX(amount) AS top")
        + ";"
    )
    explained = run(manager, f"EXPLAIN CREATE JOB {updated}")[0]
    (row,) = [r for r in explained.rows if r[3] == "sums"]
    assert row[7] == "restored"
    assert row[8].startswith(
        "same window and keys; widened, cast on restore: SUM(amount) (DECIMAL(22,2)) -> (DECIMAL(26,2)); "
        "removed, their state dropped: COUNT(*); added: MAX(amount); " + ROWS
    )
    assert "MAX(amount) starts empty for the windows in flight at the cut" in row[8]

    run(manager, f"CREATE JOB {updated} AWAIT JOB sums;")

    old_watermark = START + timedelta(seconds=cut - 1 - 5)
    new_watermark = START + timedelta(seconds=last - 1 - 5)
    every, after_cut = truth(0, last), truth(cut, last)
    size = timedelta(minutes=2)
    _, rows = manager.catalog.query("SELECT window_start, region, revenue, n, top FROM per_2min")
    # The rows the old job wrote keep their values, and hold NULL in the added column.
    before = {(r[0], r[1]): r[2:] for r in rows if r[0] + size <= old_watermark}
    assert before and all(v[1] is not None and v[2] is None for v in before.values())
    assert {k: Decimal(v[0]) for k, v in before.items()} == {k: truth(0, cut)[k][0] for k in before}
    _, types = manager.catalog.query(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'per_2min' "
        "ORDER BY ordinal_position"
    )
    assert [t for t in types if t[0] in ("revenue", "top")] == [
        ("revenue", "DECIMAL(26,2)"),
        ("top", "DECIMAL(16,2)"),
    ]
    written = {(r[0], r[1]): (r[2], r[4]) for r in rows if r[0] + size > old_watermark}
    # The windows the restored job closed: the whole revenue (old state, cast, and new events);
    # the new MAX only from the cut on for the windows that were in flight at the cut (partial, as
    # EXPLAIN said), and whole for later ones.
    restored = {k for k in every if old_watermark < k[0] + size <= new_watermark}
    assert restored and sorted(written) == sorted(restored)
    in_flight = {k for k in restored if k[0] < START + timedelta(seconds=cut)}
    assert in_flight
    for key in restored:
        revenue, top = written[key]
        assert Decimal(revenue) == every[key][0], key
        assert Decimal(top) == (after_cut[key][2] if key in in_flight else every[key][2]), key
    assert any(after_cut[k][2] != every[k][2] for k in in_flight)  # partial really differs somewhere


def test_a_refused_evolution_stops_create_job_naming_the_stage() -> None:
    old, new = plan("SUM(amount) AS r", precision=16), plan("SUM(amount) AS r", precision=12)
    with pytest.raises(CompatibilityError) as caught:
        from pitstop.snapshots.restore import check_compatible

        check_compatible("s", {"daily": stage(old)}, new, strict=False)
    assert "stage 'daily': refused: the state of SUM(amount) changed type" in caught.value.message


def test_an_evolved_seed_survives_the_runs_record_of_its_restore() -> None:
    """A restored run keeps its seeds in its catalog row (Restore.to_json), and a run resumed after
    a crash seeds from that record: the old rows' schema and the evolved columns must be in it."""
    import json

    from pitstop.snapshots.restore import Restore, seeds_from_json

    old = plan("SUM(amount) AS revenue, COUNT(*) AS n", precision=12)
    new = plan("SUM(amount) AS revenue, MAX(amount) AS top", precision=16)
    seed = registry.kind_named("tumble").seed(stage(old), new.stages[0], "/snapshots/s/stages/daily", 5000)
    record = json.loads(
        json.dumps(Restore("s", (), {"orders": 3}, {"daily": seed}, {}, "/snapshots/s").to_json())
    )
    positions, seeds = seeds_from_json(record)
    assert positions == {"orders": 3}
    assert seeds == {"daily": seed}
    assert seeds["daily"].schema is not None and "acc1 BIGINT" in seeds["daily"].schema
