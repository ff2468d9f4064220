"""Deduplication (issue 11, section 2.3): ``SELECT DISTINCT`` and Flink's ``ROW_NUMBER() ... = 1``
pattern as a stage kind whose state, the keys seen, survives an update: a duplicate of an event
seen before the cut is still dropped after it, restored from the rows and from Spark's own files
(also of a run that was itself restored from rows). Planner and rules without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run
from pitstop.manager import Manager
from pitstop.plan.model import JobPlan, stage_from_json
from pitstop.planner import compat
from pitstop.snapshots.restore import NATIVE, ROWS
from pitstop.stages import registry
from test_planner import plan, refusal

FIRSTS = (
    "INSERT INTO daily_revenue SELECT order_id, amount, ts FROM (SELECT order_id, region, amount, ts, "
    "ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY ts) AS rn FROM orders WHERE amount > 0) "
    "WHERE rn = 1 AND region <> 'x'"
)


# -- planning and rules, no Spark ----------------------------------------------------------------------
def test_distinct_and_row_number_plan_a_dedup_stage_with_its_keys_and_bound() -> None:
    distinct = plan(
        "INSERT INTO daily_revenue SELECT DISTINCT region, upper(region) AS up FROM orders WHERE qty > 1"
    )
    (b,) = distinct.branches
    assert b.stage is not None and b.stage.kind == "dedup" and b.stage.name == "daily_revenue.dedup"
    assert [(k.name, k.sql) for k in b.stage.keys] == [("region", "region"), ("up", "UPPER(region)")]
    assert (b.stage.time_column, b.stage.watermark_delay_micros, b.where_sql) == (None, 0, "qty > 1")
    assert [c.name for c in b.output] == ["region", "up"]

    firsts = plan(FIRSTS.format(keys="order_id"))
    (b,) = firsts.branches
    assert b.stage is not None and b.stage.kind == "dedup"
    assert [k.name for k in b.stage.keys] == ["order_id"]
    assert (b.stage.time_column, b.stage.watermark_delay_micros) == ("ts", 5 * 60 * 1_000_000)
    assert [p.where_sql for p in b.pre_layers] == ["amount > 0"]  # the numbered SELECT's filter
    assert [c.name for c in b.pre_layers[0].columns] == ["order_id", "region", "amount", "ts"]  # no rn
    assert b.layers[-1].where_sql == "region <> 'x'"  # the rest of WHERE rn = 1 AND ...
    assert [c.name for c in b.output] == ["order_id", "amount", "ts"]
    assert b.upsert_keys == ()  # each key's first row is final: appended, File sinks too
    for job in (distinct, firsts):
        assert JobPlan.from_json(job.to_json()) == job
    kind = registry.kind_named("dedup")
    assert kind.state_schema(firsts.stages[0]) == "`order_id` BIGINT, expires_at TIMESTAMP"
    text = kind.describe(firsts.stages[0])
    assert (text.shape, text.keys) == ("ROW_NUMBER() = 1 by ts", "order_id BIGINT")
    assert kind.describe(distinct.stages[0]).state == "keys seen, for ever"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (FIRSTS.format(keys="order_id").replace("ORDER BY ts", "ORDER BY ts DESC"), "ORDER BY the input's"),
        (FIRSTS.format(keys="order_id").replace("ORDER BY ts", "ORDER BY amount"), "ORDER BY ts"),
        (FIRSTS.format(keys="order_id").replace("rn = 1", "rn = 2"), "keep the first row of each key with"),
        (
            FIRSTS.format(keys="order_id").replace("SELECT order_id,", "SELECT rn, order_id,", 1),
            "leave it out",
        ),
        (FIRSTS.format(keys="upper(region)"), "PARTITION BY UPPER(region) must name a column"),
        ("INSERT INTO daily_revenue SELECT RANK() OVER (ORDER BY ts) AS r FROM orders", "except Flink's"),
        (
            "INSERT INTO daily_revenue SELECT DISTINCT region, RANK() OVER (ORDER BY ts) AS r FROM orders",
            "OVER",
        ),
        (
            "INSERT INTO daily_revenue SELECT DISTINCT region, COUNT(*) AS n FROM orders GROUP BY region",
            "GROUP BY",
        ),
    ],
)
def test_deduplication_outside_its_two_forms_is_refused_saying_what_to_write(body: str, said: str) -> None:
    assert said in refusal(body)


def test_dedup_rules_across_an_update() -> None:
    def stage(body: str) -> Any:
        return stage_from_json(plan(body).to_json()["branches"][0]["stage"])

    def verdict(old: str, new: str) -> compat.StageVerdict:
        before = stage(old)
        (v,) = compat.check({before.name: before}, plan(new))
        return v

    firsts = FIRSTS.format(keys="order_id")
    same = verdict(firsts, firsts.replace("region <> 'x'", "amount > 5"))  # stateless changes
    assert (same.outcome, same.reason) == (compat.RESTORED, "same keys")
    rekeyed = verdict(firsts, FIRSTS.format(keys="order_id, region"))
    assert rekeyed.outcome == compat.REFUSED and "group-by keys changed" in rekeyed.reason
    upper = "INSERT INTO daily_revenue SELECT DISTINCT upper(region) AS r FROM orders"
    recomputed = verdict(upper, upper.replace("upper", "lower"))
    assert recomputed.outcome == compat.REFUSED
    assert recomputed.reason.startswith(
        "the deduplicated columns changed from (UPPER(region)) to (LOWER(region))"
    )
    distinct = "INSERT INTO daily_revenue SELECT /*+ STAGE(s) */ DISTINCT order_id FROM orders"
    numbered = firsts.replace("SELECT order_id, amount, ts FROM", "SELECT /*+ STAGE(s) */ order_id FROM")
    form = verdict(distinct, numbered)
    assert form.outcome == compat.REFUSED
    assert form.reason.startswith("deduplication changed from DISTINCT to ROW_NUMBER() ... = 1")
    running = "INSERT INTO daily_revenue SELECT /*+ STAGE(s) */ order_id, COUNT(*) AS n FROM orders "
    running += "GROUP BY order_id"
    across = verdict(distinct, running)
    assert across.outcome == compat.REFUSED and "stage kind changed from deduplication" in across.reason


# -- across two pit stops, on real Spark ---------------------------------------------------------------
def write(folder: Path, name: str, rows: list[tuple[str, int, str]]) -> None:
    text = "".join(json.dumps({"k": k, "x": x, "ts": f"2024-01-01 {t}"}) + "\n" for k, x, t in rows)
    (folder / f".{name}.tmp").write_text(text)
    (folder / f".{name}.tmp").rename(folder / name)


JOB = """d {options} AS BEGIN
    INSERT INTO firsts SELECT k, x, ts
        FROM (SELECT k, x, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev) WHERE rn = 1;
    INSERT INTO seen SELECT DISTINCT k FROM ev;
END"""


@pytest.mark.spark
def test_keys_seen_before_a_pit_stop_stay_seen_in_both_restore_formats(
    manager: Manager, tmp_path: Path
) -> None:
    data = tmp_path / "ev"
    data.mkdir()
    run(
        manager,
        f"""CREATE MAPPING ev (k VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' HOUR)
        TYPE File OPTIONS ('path'='{data}', 'format'='json');
        CREATE MAPPING firsts TYPE File OPTIONS ('path'='{tmp_path / "firsts"}', 'format'='json');
        CREATE MAPPING seen TYPE DuckDB;""",
    )

    def firsts() -> list[tuple[str, int]]:
        rows = [json.loads(line) for f in sorted((tmp_path / "firsts").glob("*.json")) for line in f.open()]
        return sorted((r["k"], r["x"]) for r in rows)

    def seen() -> list[str]:
        return sorted(r[0] for r in manager.catalog.query("SELECT k FROM seen")[1])

    # Run 1: a and b seen (b twice: the first row goes on).
    write(data, "1.json", [("a", 1, "00:00:00"), ("b", 2, "00:00:01")])
    run(manager, f"CREATE JOB {JOB.format(options='')}; AWAIT JOB d;")
    write(data, "2.json", [("b", 3, "00:00:02"), ("c", 4, "00:00:03")])
    run(manager, "AWAIT JOB d; DROP JOB d WITH SNAPSHOT d1;")
    assert (firsts(), seen()) == ([("a", 1), ("b", 2), ("c", 4)], ["a", "b", "c"])

    # Run 2, from the rows: duplicates of a and c (seen before the cut) are dropped; d is new.
    write(data, "3.json", [("a", 5, "00:00:04"), ("d", 6, "00:00:05"), ("c", 7, "00:00:06")])
    explained = run(manager, f"EXPLAIN CREATE JOB {JOB.format(options='FROM SNAPSHOT d1')}")[0]
    assert {r[3]: r[7] for r in explained.rows if r[3]} == {
        "firsts.dedup": "restored",
        "seen.dedup": "restored",
    }
    canonical = "OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT d1"
    started = run(manager, f"CREATE JOB {JOB.format(options=canonical)}; AWAIT JOB d;")[0].message
    assert started.count(ROWS) == 2
    assert (firsts(), seen()) == ([("a", 1), ("b", 2), ("c", 4), ("d", 6)], ["a", "b", "c", "d"])
    run(manager, "DROP JOB d WITH SNAPSHOT d2;")
    shown = dict(run(manager, "DESCRIBE SNAPSHOT d2")[0].rows)
    assert shown["stage seen.dedup"].startswith("4 rows (dedup, format 1); DISTINCT by k STRING")

    # Run 3, natively from a run that was itself seeded from rows: the keys are still seen. An event
    # at 02:30 moves the watermark past a's first event + 1 hour, so a is forgotten by the
    # ROW_NUMBER stage (bounded by the watermark) and its next row goes on; DISTINCT remembers it.
    write(data, "4.json", [("b", 8, "00:00:07"), ("e", 9, "00:00:08"), ("z", 10, "02:30:00")])
    started = run(manager, f"CREATE JOB {JOB.format(options='FROM SNAPSHOT d2')}; AWAIT JOB d;")[0].message
    assert started.count(NATIVE) == 2
    assert firsts() == [("a", 1), ("b", 2), ("c", 4), ("d", 6), ("e", 9), ("z", 10)]
    write(data, "5.json", [("a", 11, "03:00:00")])
    run(manager, "AWAIT JOB d;")
    assert firsts() == [("a", 1), ("a", 11), ("b", 2), ("c", 4), ("d", 6), ("e", 9), ("z", 10)]
    assert seen() == ["a", "b", "c", "d", "e", "z"]
    run(manager, "DROP JOB d;")
