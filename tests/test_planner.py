"""The planner: CREATE JOB body -> named stages in accumulator form, and every refusal's message.

Pure Python: mappings are built from parsed CREATE MAPPING statements, nothing starts Spark.
"""

from __future__ import annotations

import pytest

from pitstop.catalog.rows import Mapping
from pitstop.errors import PlanError
from pitstop.executor import mapping_from_node
from pitstop.plan.model import AggregateStage, JobPlan
from pitstop.planner.build import plan_job
from pitstop.sql.parser import parse_statement

HOUR = 3_600_000_000

MAPPINGS_SQL = [
    """CREATE MAPPING orders (
        order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), qty INT, price DOUBLE,
        ts TIMESTAMP, day DATE, WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
    ) TYPE File OPTIONS ('path'='/tmp/pitstop-tests/orders', 'format'='json')""",
    """CREATE MAPPING clicks (user_id BIGINT, ts TIMESTAMP)
       TYPE File OPTIONS ('path'='/tmp/pitstop-tests/clicks')""",
    "CREATE MAPPING daily_revenue (window_start TIMESTAMP) TYPE DuckDB",
    "CREATE MAPPING hourly (window_start TIMESTAMP) TYPE DuckDB",
]


def _mappings() -> dict[str, Mapping]:
    out = {}
    for sql in MAPPINGS_SQL:
        mapping = mapping_from_node(parse_statement(sql), sql)
        out[mapping.name.lower()] = mapping
    return out


MAPPINGS = _mappings()

TUMBLE_1H = "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))"
BY_REGION = "GROUP BY window_start, window_end, region"


def plan(body: str, job: str = "revenue") -> JobPlan:
    node = parse_statement(f"CREATE JOB {job} AS {body}")
    return plan_job(job, list(node.args["body"]), lambda name: MAPPINGS.get(name.lower()))


def only_stage(body: str) -> AggregateStage:
    stages = plan(body).stages
    assert len(stages) == 1
    return stages[0]


def refusal(body: str) -> str:
    with pytest.raises(PlanError) as caught:
        plan(body)
    return caught.value.message


def windowed(aggregates: str, where: str = "", sink: str = "daily_revenue") -> str:
    return (
        f"INSERT INTO {sink} SELECT window_start, window_end, region, {aggregates} "
        f"{TUMBLE_1H} {where} {BY_REGION}"
    )


# -- stage names ---------------------------------------------------------------------------------
def test_default_stage_name_is_the_sink_and_aggregate() -> None:
    stage = only_stage(windowed("COUNT(*) AS orders"))
    assert stage.name == "daily_revenue.aggregate"
    assert stage.window.kind == "tumble"
    assert stage.window.size_micros == HOUR
    assert stage.window.time_column == "ts"
    assert [(k.name, k.type) for k in stage.keys] == [("region", "STRING")]
    assert stage.watermark_delay_micros == 5 * 60 * 1_000_000


def test_cte_alias_names_the_stage() -> None:
    body = (
        f"WITH daily AS (SELECT window_start, window_end, region, COUNT(*) AS orders {TUMBLE_1H} "
        f"{BY_REGION}) INSERT INTO daily_revenue SELECT * FROM daily"
    )
    assert only_stage(body).name == "daily"


def test_cte_written_after_insert_into_names_the_stage() -> None:
    body = (
        f"INSERT INTO daily_revenue WITH daily AS (SELECT window_start, window_end, region, "
        f"COUNT(*) AS orders {TUMBLE_1H} {BY_REGION}) SELECT * FROM daily"
    )
    assert only_stage(body).name == "daily"


def test_stage_hint_wins_over_the_cte_alias_and_the_default() -> None:
    in_cte = (
        f"WITH daily AS (SELECT /*+ STAGE(revenue_by_day) */ window_start, window_end, region, "
        f"COUNT(*) AS orders {TUMBLE_1H} {BY_REGION}) INSERT INTO daily_revenue SELECT * FROM daily"
    )
    direct = (
        f"INSERT INTO daily_revenue SELECT /*+ STAGE(revenue_by_day) */ window_start, window_end, "
        f"region, COUNT(*) AS orders {TUMBLE_1H} {BY_REGION}"
    )
    assert only_stage(in_cte).name == "revenue_by_day"
    assert only_stage(direct).name == "revenue_by_day"


def test_two_branches_with_the_same_stage_name_are_refused_naming_it() -> None:
    hinted = (
        f"INSERT INTO {{sink}} SELECT /*+ STAGE(daily) */ window_start, window_end, region, "
        f"COUNT(*) AS orders {TUMBLE_1H} {BY_REGION}"
    )
    body = f"BEGIN {hinted.format(sink='daily_revenue')}; {hinted.format(sink='hourly')}; END"
    message = refusal(body)
    assert "stage 'daily' already exists in job 'revenue'" in message
    assert "STAGE(name)" in message


def test_stage_names_differing_only_in_case_are_the_same_name() -> None:
    hinted = (
        f"INSERT INTO {{sink}} SELECT /*+ STAGE({{stage}}) */ window_start, window_end, region, "
        f"COUNT(*) AS orders {TUMBLE_1H} {BY_REGION}"
    )
    body = (
        f"BEGIN {hinted.format(sink='daily_revenue', stage='daily')}; "
        f"{hinted.format(sink='hourly', stage='Daily')}; END"
    )
    assert "stage 'Daily' already exists in job 'revenue'" in refusal(body)


def test_default_stage_name_does_not_depend_on_how_the_sink_is_spelled() -> None:
    stage = only_stage(windowed("COUNT(*) AS orders", sink="DAILY_Revenue"))
    assert stage.name == "daily_revenue.aggregate"


def test_cte_stage_name_is_the_alias_as_declared_not_as_referenced() -> None:
    body = (
        f"WITH Daily AS (SELECT window_start, window_end, region, COUNT(*) AS orders {TUMBLE_1H} "
        f"{BY_REGION}) INSERT INTO daily_revenue SELECT * FROM DAILY"
    )
    assert only_stage(body).name == "Daily"


def test_ctes_that_refer_to_each_other_are_refused() -> None:
    message = refusal(
        "WITH A AS (SELECT * FROM b), b AS (SELECT * FROM A) INSERT INTO daily_revenue SELECT * FROM A"
    )
    assert "CTE 'a' refers to itself" in message


def test_two_branches_into_the_same_sink_are_refused_with_the_default_name() -> None:
    branch = windowed("COUNT(*) AS orders")
    message = refusal(f"BEGIN {branch}; {branch}; END")
    assert "'daily_revenue.aggregate'" in message


def test_two_branches_into_different_sinks_get_distinct_default_names() -> None:
    body = f"BEGIN {windowed('COUNT(*) AS orders')}; {windowed('COUNT(*) AS orders', sink='hourly')}; END"
    assert [s.name for s in plan(body).stages] == ["daily_revenue.aggregate", "hourly.aggregate"]


def test_stage_name_and_state_are_stable_when_a_filter_or_projection_is_added() -> None:
    base = only_stage(windowed("SUM(amount) AS revenue, COUNT(*) AS orders"))
    filtered = only_stage(
        windowed("SUM(amount) AS revenue, COUNT(*) AS orders", where="WHERE amount > 10 AND region <> 'x'")
    )
    projected = only_stage(
        windowed("SUM(amount) AS revenue, COUNT(*) AS orders, SUM(amount) / COUNT(*) AS mean")
    )
    for changed in (filtered, projected):
        assert changed.name == base.name == "daily_revenue.aggregate"
        assert changed.accumulator_schema == base.accumulator_schema == ("DECIMAL(22,2)", "BIGINT")
        assert changed.keys == base.keys
    assert plan(windowed("COUNT(*) AS orders", where="WHERE amount > 10")).branches[0].where_sql == (
        "amount > 10"
    )


def test_cte_stage_name_is_stable_when_the_outer_select_filters_and_projects() -> None:
    cte = (
        f"WITH daily AS (SELECT window_start, window_end, region, SUM(amount) AS revenue "
        f"{TUMBLE_1H} {BY_REGION})"
    )
    plain = plan(f"{cte} INSERT INTO daily_revenue SELECT * FROM daily")
    edited = plan(
        f"{cte} INSERT INTO daily_revenue SELECT window_start, revenue * 2 AS doubled FROM daily "
        "WHERE revenue > 1"
    )
    assert plain.stages == edited.stages
    outer = edited.branches[0].layers[-1]
    assert outer.where_sql == "revenue > 1"
    assert [c.name for c in outer.columns] == ["window_start", "doubled"]


# -- accumulator form ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("aggregate", "accumulators"),
    [
        ("COUNT(*)", [("count", "BIGINT")]),
        ("COUNT(amount)", [("count", "BIGINT")]),
        ("SUM(amount)", [("sum", "DECIMAL(22,2)")]),
        ("SUM(qty)", [("sum", "BIGINT")]),
        ("SUM(price)", [("sum", "DOUBLE")]),
        ("AVG(amount)", [("sum", "DECIMAL(22,2)"), ("count", "BIGINT")]),
        ("AVG(price)", [("sum", "DOUBLE"), ("count", "BIGINT")]),
        ("MIN(amount)", [("min", "DECIMAL(12,2)")]),
        ("MAX(qty)", [("max", "INT")]),
        ("MIN(ts)", [("min", "TIMESTAMP")]),
        ("MAX(day)", [("max", "DATE")]),
        ("MAX(region)", [("max", "STRING")]),
    ],
)
def test_aggregate_is_planned_as_typed_accumulators(
    aggregate: str, accumulators: list[tuple[str, str]]
) -> None:
    stage = only_stage(windowed(f"{aggregate} AS x"))
    assert [(a.kind, a.type) for a in stage.accumulators] == accumulators
    assert stage.functions == (aggregate,)


def test_accumulators_are_positional_and_a_repeated_call_is_accumulated_once() -> None:
    stage = only_stage(windowed("SUM(amount) AS revenue, COUNT(*) AS orders, SUM(amount) AS again"))
    assert [a.name for a in stage.accumulators] == ["acc0", "acc1"]
    assert stage.accumulator_schema == ("DECIMAL(22,2)", "BIGINT")


def test_output_columns_finish_the_accumulators() -> None:
    output = plan(windowed("SUM(amount) AS revenue, AVG(price) AS mean")).branches[0].output
    types = {c.name: c.type for c in output}
    assert types["revenue"] == "DECIMAL(22,2)"
    assert types["mean"] == "DOUBLE"
    assert types["window_start"] == "TIMESTAMP"
    assert types["region"] == "STRING"


def test_plan_survives_a_json_round_trip() -> None:
    job = plan(windowed("SUM(amount) AS revenue, AVG(amount) AS mean", where="WHERE qty > 0"))
    assert JobPlan.from_json(job.to_json()) == job


# -- refusals --------------------------------------------------------------------------------------
def test_group_by_without_a_window_into_an_appending_sink_is_refused_with_a_tumble_example() -> None:
    message = refusal("INSERT INTO clicks SELECT region, COUNT(*) AS n FROM orders GROUP BY region")
    assert "GROUP BY on a stream without a window is a running aggregate" in message
    assert "mapping 'clicks' is of type File, which only appends" in message
    assert "a TYPE DuckDB or TYPE Postgres mapping" in message
    assert "TUMBLE(TABLE orders, DESCRIPTOR(ts)" in message


@pytest.mark.parametrize(
    ("clause", "named"),
    [
        ("ORDER BY region", "ORDER BY is not supported"),
        ("LIMIT 10", "LIMIT is not supported"),
    ],
)
def test_order_by_and_limit_are_refused(clause: str, named: str) -> None:
    message = refusal(f"INSERT INTO daily_revenue SELECT region, amount FROM orders {clause}")
    assert named in message
    assert "query the sink table afterwards" in message


def test_a_join_in_a_cte_that_a_window_reads_is_planned_below_it_and_checked_as_its_input() -> None:
    # (tests/test_chains.py plans such joins; here the CTE leaves out the window's time column)
    message = refusal(
        "INSERT INTO daily_revenue WITH j AS (SELECT o.region FROM orders o JOIN clicks c "
        "ON o.order_id = c.user_id) SELECT region, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE j, DESCRIPTOR(ts), "
        "INTERVAL '1' HOUR)) GROUP BY window_start, window_end, region"
    )
    assert "has no column 'ts'; known columns: region" in message


def test_select_distinct_above_the_select_that_reads_the_source_is_refused_pointing_to_it() -> None:
    message = refusal(
        "INSERT INTO daily_revenue WITH a AS (SELECT region FROM orders) SELECT DISTINCT region FROM a"
    )
    assert "SELECT DISTINCT deduplicates only in the SELECT that reads the source" in message
    assert "GROUP BY window_start, window_end" in message


def test_a_window_over_a_mapping_without_watermark_is_refused_naming_it() -> None:
    message = refusal(
        "INSERT INTO daily_revenue SELECT window_start, window_end, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    assert "mapping 'clicks' has no watermark on 'ts'" in message
    assert "WATERMARK FOR ts AS ts - INTERVAL" in message


def test_a_descriptor_column_that_is_not_a_timestamp_is_refused() -> None:
    message = refusal(
        "INSERT INTO daily_revenue SELECT window_start, window_end, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(day), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    assert "column 'day' of mapping 'orders' is DATE" in message
    assert "TIMESTAMP" in message


def test_a_descriptor_column_that_does_not_exist_is_refused() -> None:
    message = refusal(
        "INSERT INTO daily_revenue SELECT window_start, window_end, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    assert "mapping 'orders' has no column 'event_time'" in message


@pytest.mark.parametrize(
    "body",
    [
        "INSERT INTO daily_revenue SELECT region, discount FROM orders",
        "INSERT INTO daily_revenue SELECT region FROM orders WHERE discount > 1",
        windowed("SUM(discount) AS d"),
        "INSERT INTO daily_revenue SELECT window_start, window_end, COUNT(*) AS n "
        f"{TUMBLE_1H} GROUP BY window_start, window_end, discount",
    ],
    ids=["select", "where", "aggregate", "group-by"],
)
def test_an_unknown_column_is_refused_listing_the_known_ones(body: str) -> None:
    message = refusal(body)
    assert "unknown column 'discount' in orders" in message
    assert "known columns: order_id, region, amount" in message


def test_a_column_neither_grouped_nor_aggregated_is_refused() -> None:
    message = refusal(
        f"INSERT INTO daily_revenue SELECT window_start, window_end, amount, COUNT(*) AS n "
        f"{TUMBLE_1H} {BY_REGION}"
    )
    assert "column 'amount' must be in GROUP BY or inside an aggregate" in message


def test_an_unknown_source_mapping_is_refused_naming_it() -> None:
    message = refusal("INSERT INTO daily_revenue SELECT region FROM payments")
    assert "unknown mapping 'payments' (used as a source)" in message
    assert "CREATE MAPPING payments" in message


def test_an_unknown_sink_mapping_is_refused_naming_it() -> None:
    message = refusal("INSERT INTO weekly SELECT region FROM orders")
    assert "unknown mapping 'weekly' (used as a sink)" in message
    assert "CREATE MAPPING weekly" in message


def test_a_sink_mapping_cannot_be_read_as_a_source() -> None:
    message = refusal("INSERT INTO hourly SELECT window_start FROM daily_revenue")
    assert "mapping 'daily_revenue' is of type DuckDB, which cannot be read as a stream" in message


def test_count_distinct_of_two_columns_is_refused_saying_what_to_write() -> None:
    message = refusal(windowed("COUNT(DISTINCT order_id, region) AS buyers"))
    assert "COUNT(DISTINCT order_id, region): COUNT(DISTINCT ...) counts one expression" in message


def test_an_unsupported_aggregate_is_refused_listing_what_is_supported() -> None:
    message = refusal(windowed("STDDEV(amount) AS spread"))
    assert "aggregate STDDEV(amount) is not supported" in message
    assert "COUNT(*), COUNT(x), COUNT(DISTINCT x), APPROX_COUNT_DISTINCT(x), SUM, MIN, MAX, AVG" in message
    assert "MIN_BY(x, y), MAX_BY(x, y)" in message


def test_session_window_is_planned_with_its_gap() -> None:
    window = only_stage(
        "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS n "
        f"FROM TABLE(SESSION(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' MINUTE)) {BY_REGION}"
    ).window
    assert (window.kind, window.gap_micros) == ("session", 600_000_000)


def test_hop_window_is_planned_with_size_and_slide() -> None:
    window = only_stage(
        "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS n "
        f"FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '10' MINUTE)) {BY_REGION}"
    ).window
    assert (window.kind, window.size_micros, window.slide_micros) == ("hop", 3_600_000_000, 600_000_000)


def test_hop_size_that_is_not_a_multiple_of_the_slide_is_refused() -> None:
    message = refusal(
        "INSERT INTO daily_revenue SELECT window_start, window_end, region, COUNT(*) AS n "
        f"FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '7' MINUTE)) {BY_REGION}"
    )
    assert "size must be a multiple of the slide" in message and "INTERVAL '7' MINUTE" in message


def test_a_second_aggregation_in_one_insert_is_refused() -> None:
    message = refusal(
        f"WITH daily AS (SELECT window_start, window_end, region, COUNT(*) AS n {TUMBLE_1H} {BY_REGION}) "
        "INSERT INTO daily_revenue SELECT window_start, window_end, SUM(n) AS total FROM daily "
        "GROUP BY window_start, window_end"
    )
    assert "only one aggregation per INSERT" in message


def test_group_by_without_both_window_bounds_is_refused() -> None:
    message = refusal(
        f"INSERT INTO daily_revenue SELECT window_start, region, COUNT(*) AS n {TUMBLE_1H} "
        "GROUP BY window_start, region"
    )
    assert "stage 'daily_revenue.aggregate'" in message
    assert "GROUP BY must include both window_start and window_end" in message


def test_a_window_without_aggregation_is_refused() -> None:
    message = refusal(f"INSERT INTO daily_revenue SELECT window_start, region {TUMBLE_1H}")
    assert "a window function needs GROUP BY window_start, window_end" in message


def test_only_branches_with_a_watermark_read_their_late_counts() -> None:
    """Reading a batch's late counts costs JVM calls in every batch: a branch whose stages have no
    watermark (a running aggregate, DISTINCT, no stage) drops nothing as late and skips it."""
    from pitstop.engine.runs.branch import late_possible

    assert late_possible(plan(windowed("SUM(amount) AS revenue")).branches[0])
    running = plan("INSERT INTO hourly SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region")
    assert not late_possible(running.branches[0])
    distinct = plan("INSERT INTO hourly SELECT DISTINCT region FROM orders")
    assert not late_possible(distinct.branches[0])
    stateless = plan("INSERT INTO hourly SELECT order_id, amount FROM orders WHERE amount > 10")
    assert not late_possible(stateless.branches[0])
