"""Compatibility of a snapshot's stages with a new job (DESIGN.md section 4), on planned stages."""

from __future__ import annotations

import pytest

from pitstop.catalog.rows import Mapping
from pitstop.executor import mapping_from_node
from pitstop.plan.model import AggregateStage, JobPlan, stage_from_json
from pitstop.planner import compat
from pitstop.planner.build import plan_job
from pitstop.planner.compat import DROPPED, EMPTY, REFUSED, RESTORED, StageVerdict
from pitstop.sql.parser import parse_statement

ORDERS = """CREATE MAPPING orders (
    region VARCHAR, country VARCHAR, amount DECIMAL(12,2), qty INT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/orders')"""
SINKS = ["daily_revenue", "hourly"]


def _mappings() -> dict[str, Mapping]:
    out = {}
    for sql in [ORDERS, *(f"CREATE MAPPING {s} (window_start TIMESTAMP) TYPE DuckDB" for s in SINKS)]:
        m = mapping_from_node(parse_statement(sql), sql)
        out[m.name.lower()] = m
    return out


MAPPINGS = _mappings()


def branch(
    aggregates: str = "SUM(amount) AS revenue, COUNT(*) AS orders",
    size: str = "'1' HOUR",
    keys: str = "region",
    stage: str = "daily",
    sink: str = "daily_revenue",
) -> str:
    return (
        f"INSERT INTO {sink} SELECT /*+ STAGE({stage}) */ window_start, window_end, {keys}, {aggregates} "
        f"FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL {size})) "
        f"GROUP BY window_start, window_end, {keys}"
    )


def plan(*branches: str) -> JobPlan:
    body = branches[0] if len(branches) == 1 else "BEGIN " + "; ".join(branches) + "; END"
    node = parse_statement(f"CREATE JOB revenue AS {body}")
    return plan_job("revenue", list(node.args["body"]), lambda name: MAPPINGS.get(name.lower()))


def snapshot_of(job: JobPlan) -> dict[str, AggregateStage]:
    """The stages as a snapshot's manifest keeps them (through their JSON form)."""
    stages = [b["stage"] for b in job.to_json()["branches"] if b["stage"] is not None]
    return {s["name"]: stage_from_json(s) for s in stages}


def verdicts(old: JobPlan, new: JobPlan, strict: bool = False) -> dict[str, StageVerdict]:
    return {v.stage: v for v in compat.check(snapshot_of(old), new, strict)}


def test_same_stage_is_restored_without_warnings() -> None:
    v = verdicts(plan(branch()), plan(branch()))["daily"]
    assert v.outcome == RESTORED
    assert v.warnings == ()
    assert compat.refused(list(verdicts(plan(branch()), plan(branch())).values())) == []


def test_stateless_edits_keep_the_stage_restored() -> None:
    edited = plan(
        branch(
            aggregates="SUM(amount) AS revenue, COUNT(*) AS orders, SUM(amount) / COUNT(*) AS mean"
        ).replace("GROUP BY", "WHERE qty > 0 GROUP BY")
    )
    v = verdicts(plan(branch()), edited)["daily"]
    assert (v.outcome, v.warnings) == (RESTORED, ())


def test_a_new_stage_starts_empty() -> None:
    old = plan(branch())
    new = plan(branch(), branch(stage="hourly_counts", sink="hourly", aggregates="COUNT(*) AS n"))
    result = verdicts(old, new)
    assert result["daily"].outcome == RESTORED
    assert result["hourly_counts"].outcome == EMPTY
    assert "source positions" in result["hourly_counts"].reason


def test_a_removed_stage_is_dropped_and_named() -> None:
    old = plan(branch(), branch(stage="hourly_counts", sink="hourly", aggregates="COUNT(*) AS n"))
    v = verdicts(old, plan(branch()))["hourly_counts"]
    assert v.outcome == DROPPED
    assert v.text().startswith("stage 'hourly_counts': dropped: ")


def test_a_removed_stage_is_refused_with_strict_restore() -> None:
    old = plan(branch(), branch(stage="hourly_counts", sink="hourly", aggregates="COUNT(*) AS n"))
    result = verdicts(old, plan(branch()), strict=True)
    assert result["hourly_counts"].outcome == REFUSED
    assert "strictRestore" in result["hourly_counts"].reason
    assert result["daily"].outcome == RESTORED


def test_a_renamed_stage_starts_empty_and_the_old_name_is_dropped() -> None:
    result = verdicts(plan(branch(stage="daily")), plan(branch(stage="by_day")))
    assert (result["daily"].outcome, result["by_day"].outcome) == (DROPPED, EMPTY)


def test_min_to_max_is_restored_with_a_warning() -> None:
    old = plan(branch(aggregates="MIN(amount) AS extreme"))
    new = plan(branch(aggregates="MAX(amount) AS extreme"))
    v = verdicts(old, new)["daily"]
    assert v.outcome == RESTORED
    assert len(v.warnings) == 1
    assert "MIN(amount) to MAX(amount)" in v.warnings[0]
    assert "(warning: " in v.text()


def test_another_aggregate_of_another_type_is_a_removed_and_an_added_one() -> None:
    """Refused before issue 11 section 3; a narrowed type is still refused (test_state_evolution)."""
    old = plan(branch(aggregates="SUM(amount) AS revenue"))
    new = plan(branch(aggregates="SUM(qty) AS revenue"))
    v = verdicts(old, new)["daily"]
    assert v.outcome == RESTORED
    assert v.reason == "same window and keys; removed, their state dropped: SUM(amount); added: SUM(qty)"
    assert "SUM(qty) starts empty" in v.warnings[0]


def test_an_extra_accumulator_is_restored_and_starts_empty() -> None:
    """Refused before issue 11 section 3; tests/test_state_evolution.py has the rules."""
    old = plan(branch(aggregates="SUM(amount) AS revenue"))
    new = plan(branch(aggregates="SUM(amount) AS revenue, COUNT(*) AS orders"))
    v = verdicts(old, new)["daily"]
    assert v.outcome == RESTORED
    assert v.reason == "same window and keys; added: COUNT(*)"


def test_reordered_accumulators_are_restored() -> None:
    old = plan(branch(aggregates="SUM(amount) AS revenue, COUNT(*) AS orders"))
    new = plan(branch(aggregates="COUNT(*) AS orders, SUM(amount) AS revenue"))
    assert verdicts(old, new)["daily"].outcome == RESTORED


@pytest.mark.parametrize(
    ("old_keys", "new_keys"),
    [
        ("region", "country"),
        ("region", "region, country"),
        ("UPPER(region)", "LOWER(region)"),
    ],
)
def test_a_group_by_key_change_is_refused(old_keys: str, new_keys: str) -> None:
    v = verdicts(plan(branch(keys=old_keys)), plan(branch(keys=new_keys)))["daily"]
    assert v.outcome == REFUSED
    assert "group-by keys changed" in v.reason
    assert v.stage == "daily"


def test_tumbling_window_doubled_is_restored_naming_both_sizes() -> None:
    v = verdicts(plan(branch(size="'1' HOUR")), plan(branch(size="'2' HOUR")))["daily"]
    assert v.outcome == RESTORED
    assert "INTERVAL '1' HOUR" in v.reason
    assert "INTERVAL '2' HOUR" in v.reason


def test_tumbling_window_resized_to_a_non_multiple_is_refused_naming_both_sizes() -> None:
    v = verdicts(plan(branch(size="'1' HOUR")), plan(branch(size="'90' MINUTE")))["daily"]
    assert v.outcome == REFUSED
    assert v.text().startswith("stage 'daily': refused: ")
    assert "INTERVAL '1' HOUR" in v.reason
    assert "INTERVAL '90' MINUTE" in v.reason
    assert "not a multiple" in v.reason


def test_tumbling_window_shrunk_is_refused() -> None:
    v = verdicts(plan(branch(size="'2' HOUR")), plan(branch(size="'1' HOUR")))["daily"]
    assert v.outcome == REFUSED
    assert "INTERVAL '2' HOUR" in v.reason and "INTERVAL '1' HOUR" in v.reason


def test_a_same_size_written_differently_is_the_same_window() -> None:
    v = verdicts(plan(branch(size="'1' HOUR")), plan(branch(size="'60' MINUTE")))["daily"]
    assert (v.outcome, v.warnings) == (RESTORED, ())


def test_every_refused_stage_is_reported() -> None:
    old = plan(branch(), branch(stage="hourly_counts", sink="hourly", aggregates="COUNT(*) AS n"))
    new = plan(
        branch(keys="country"),
        branch(stage="hourly_counts", sink="hourly", aggregates="COUNT(*) AS n", size="'90' MINUTE"),
    )
    refused = compat.refused(compat.check(snapshot_of(old), new))
    assert sorted(v.stage for v in refused) == ["daily", "hourly_counts"]


def hop(size: str, slide: str) -> str:
    return branch().replace(
        "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)",
        f"HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL {size}, INTERVAL {slide})",
    )


def test_sliding_window_size_change_with_the_same_slide_is_restored_with_a_warning() -> None:
    v = verdicts(plan(hop("'2' HOUR", "'30' MINUTE")), plan(hop("'3' HOUR", "'30' MINUTE")))["daily"]
    assert v.outcome == RESTORED
    assert "INTERVAL '2' HOUR -> INTERVAL '3' HOUR" in v.reason and "same end" in v.reason
    assert v.warnings and "incomplete" in v.warnings[0]


def test_sliding_window_slide_change_is_refused() -> None:
    v = verdicts(plan(hop("'2' HOUR", "'30' MINUTE")), plan(hop("'2' HOUR", "'1' HOUR")))["daily"]
    assert v.outcome == REFUSED
    assert "slide changed from INTERVAL '30' MINUTE to INTERVAL '1' HOUR" in v.reason


def test_tumbling_to_sliding_is_refused() -> None:
    v = verdicts(plan(branch()), plan(hop("'2' HOUR", "'1' HOUR")))["daily"]
    assert v.outcome == REFUSED and "from TUMBLE to HOP" in v.reason


def session(gap: str) -> str:
    return branch().replace(
        "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)",
        f"SESSION(TABLE orders, DESCRIPTOR(ts), INTERVAL {gap})",
    )


def test_session_gap_change_is_restored() -> None:
    v = verdicts(plan(session("'10' MINUTE")), plan(session("'15' MINUTE")))["daily"]
    assert v.outcome == RESTORED
    assert "session gap INTERVAL '10' MINUTE -> INTERVAL '15' MINUTE" in v.reason


def test_session_to_sliding_is_refused() -> None:
    v = verdicts(plan(session("'10' MINUTE")), plan(hop("'2' HOUR", "'1' HOUR")))["daily"]
    assert v.outcome == REFUSED and "from SESSION to HOP" in v.reason
