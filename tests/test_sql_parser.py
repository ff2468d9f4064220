"""pitstop's SQL dialect: round trips, node shapes, statement splitting and exact error positions."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from pitstop.errors import SqlError
from pitstop.intervals import format_interval, interval_micros
from pitstop.sql import nodes
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.parser import (
    ParsedStatement,
    is_complete,
    name_of,
    option_dict,
    parse_script,
    parse_script_all,
    parse_statement,
    split_statements,
    stage_hint,
)

HOUR = 3_600_000_000
MINUTE = 60_000_000
SECOND = 1_000_000

WINDOW_QUERY = (
    "SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders "
    "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR)) "
    "GROUP BY window_start, window_end, region"
)


def sql(node: exp.Expression) -> str:
    return node.sql(dialect=PitstopDialect)


def error_of(text: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse_script(text)
    return caught.value


# Round trips: (input, canonical text). The canonical text parses back to itself.
ROUND_TRIPS = [
    (
        "create mapping orders (order_id bigint, region varchar, amount decimal(12,2), "
        "ts timestamp, watermark for ts as ts - interval '5' second) type File "
        "options ('path'='data/orders', 'format'='json')",
        "CREATE MAPPING orders (order_id BIGINT, region VARCHAR, amount DECIMAL(12, 2), "
        "ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) TYPE File "
        "OPTIONS ('path'='data/orders', 'format'='json')",
    ),
    (
        'CREATE OR REPLACE MAPPING IF NOT EXISTS "Clicks" (n INT, ok BOOLEAN, d DATE, x DOUBLE) '
        "TYPE Generator",
        'CREATE OR REPLACE MAPPING IF NOT EXISTS "Clicks" (n INT, ok BOOLEAN, d DATE, x DOUBLE) '
        "TYPE Generator",
    ),
    ("CREATE MAPPING out TYPE Console", "CREATE MAPPING out TYPE Console"),
    (
        "CREATE MAPPING s (a SMALLINT, b TINYINT, c REAL, e STRING) TYPE DuckDB",
        "CREATE MAPPING s (a SMALLINT, b TINYINT, c FLOAT, e TEXT) TYPE DuckDB",
    ),
    ("drop mapping if exists orders", "DROP MAPPING IF EXISTS orders"),
    ("DROP MAPPING orders", "DROP MAPPING orders"),
    ("show mappings", "SHOW MAPPINGS"),
    (
        f"CREATE JOB revenue AS INSERT INTO daily_revenue {WINDOW_QUERY}",
        f"CREATE JOB revenue AS INSERT INTO daily_revenue {WINDOW_QUERY}",
    ),
    (
        "CREATE JOB IF NOT EXISTS revenue FROM SNAPSHOT revenue_v1 "
        "OPTIONS ('processingGuarantee'='exactlyOnce') AS SINK INTO d SELECT a FROM t",
        "CREATE JOB IF NOT EXISTS revenue OPTIONS ('processingGuarantee'='exactlyOnce') "
        "FROM SNAPSHOT revenue_v1 AS INSERT INTO d SELECT a FROM t",
    ),
    (
        "CREATE JOB j AS BEGIN INSERT INTO a SELECT x FROM t; INSERT INTO b SELECT y FROM t END",
        "CREATE JOB j AS BEGIN INSERT INTO a SELECT x FROM t; INSERT INTO b SELECT y FROM t; END",
    ),
    (
        "CREATE JOB j AS WITH daily AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k) "
        "INSERT INTO a SELECT * FROM daily",
        "CREATE JOB j AS WITH daily AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k) "
        "INSERT INTO a SELECT * FROM daily",
    ),
    (
        "DROP JOB IF EXISTS revenue WITH SNAPSHOT revenue_v1",
        "DROP JOB IF EXISTS revenue WITH SNAPSHOT revenue_v1",
    ),
    ("drop job revenue", "DROP JOB revenue"),
    ("SHOW JOBS", "SHOW JOBS"),
    ("show snapshots", "SHOW SNAPSHOTS"),
    ("DROP SNAPSHOT IF EXISTS revenue_v1", "DROP SNAPSHOT IF EXISTS revenue_v1"),
    ("DROP SNAPSHOT revenue_v1", "DROP SNAPSHOT revenue_v1"),
    ("AWAIT JOB revenue", "AWAIT JOB revenue"),
    ("await job revenue timeout interval '60' seconds", "AWAIT JOB revenue TIMEOUT INTERVAL '60' SECONDS"),
    (
        "SELECT * FROM daily_revenue WHERE revenue > 10 ORDER BY 1 LIMIT 5",
        "SELECT * FROM daily_revenue WHERE revenue > 10 ORDER BY 1 LIMIT 5",
    ),
    (
        "WITH c AS (SELECT 1 AS x) SELECT x FROM c UNION ALL SELECT 2",
        "WITH c AS (SELECT 1 AS x) SELECT x FROM c UNION ALL SELECT 2",
    ),
    ("(SELECT 1) UNION (SELECT 2)", "(SELECT 1) UNION (SELECT 2)"),
    (
        "SELECT /*+ STAGE(daily) */ k FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), "
        "SLIDE => INTERVAL '10' MINUTE, SIZE => INTERVAL '1' HOUR)) w",
        "SELECT /*+ STAGE(daily) */ k FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), "
        "INTERVAL '1' HOUR, INTERVAL '10' MINUTE)) AS w",
    ),
    (
        "SELECT * FROM TABLE(SESSION(TABLE db.clicks, DESCRIPTOR(ts), INTERVAL '5' MINUTE)) AS s "
        "JOIN users AS u ON u.id = s.user_id",
        "SELECT * FROM TABLE(SESSION(TABLE db.clicks, DESCRIPTOR(ts), INTERVAL '5' MINUTE)) AS s "
        "JOIN users AS u ON u.id = s.user_id",
    ),
    (
        "EXPLAIN CREATE JOB j FROM SNAPSHOT s AS INSERT INTO a SELECT x FROM t",
        "EXPLAIN CREATE JOB j FROM SNAPSHOT s AS INSERT INTO a SELECT x FROM t",
    ),
    ("describe job revenue", "DESCRIBE JOB revenue"),
    ("DESCRIBE SNAPSHOT revenue_v1", "DESCRIBE SNAPSHOT revenue_v1"),
    (
        "create or replace snapshot revenue_v1 for job revenue",
        "CREATE OR REPLACE SNAPSHOT revenue_v1 FOR JOB revenue",
    ),
    ("CREATE SNAPSHOT s FOR JOB j", "CREATE SNAPSHOT s FOR JOB j"),
    ("alter job revenue suspend", "ALTER JOB revenue SUSPEND"),
    ("ALTER JOB revenue RESUME", "ALTER JOB revenue RESUME"),
    ("ALTER JOB revenue RESTART", "ALTER JOB revenue RESTART"),
    ("ALTER JOB revenue OPTIONS ('a'='1', 'b'='2')", "ALTER JOB revenue OPTIONS ('a'='1', 'b'='2')"),
    ("alter job revenue options ('a'='1') resume", "ALTER JOB revenue OPTIONS ('a'='1') RESUME"),
    # Views
    (
        "create view trades_ordered as select * from table(impose_order(table trades, "
        "descriptor(trade_ts), interval '0.5' seconds))",
        "CREATE VIEW trades_ordered AS SELECT * FROM TABLE(IMPOSE_ORDER(TABLE trades, "
        "DESCRIPTOR(trade_ts), INTERVAL '0.5' SECONDS))",
    ),
    (
        "CREATE OR REPLACE VIEW IF NOT EXISTS v AS WITH c AS (SELECT 1 AS x) SELECT x FROM c",
        "CREATE OR REPLACE VIEW IF NOT EXISTS v AS WITH c AS (SELECT 1 AS x) SELECT x FROM c",
    ),
    (
        "CREATE VIEW v AS (SELECT a FROM t) UNION ALL (SELECT a FROM u)",
        "CREATE VIEW v AS (SELECT a FROM t) UNION ALL (SELECT a FROM u)",
    ),
    ("CREATE VIEW v AS (SELECT a FROM t)", "CREATE VIEW v AS SELECT a FROM t"),
    ("drop view if exists v", "DROP VIEW IF EXISTS v"),
    ("DROP VIEW v", "DROP VIEW v"),
    ("show views", "SHOW VIEWS"),
    # Session settings
    ("SET 'execution.savepoint.path' = '/tmp/sp'", "SET 'execution.savepoint.path' = '/tmp/sp'"),
    ("set pitstop.trigger_ms='200'", "SET 'pitstop.trigger_ms' = '200'"),
    ("SET 'it''s' = 'a;b'", "SET 'it''s' = 'a;b'"),
    # Table functions
    (
        "SELECT * FROM TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts), LAG => INTERVAL '1' SECOND)) o "
        "JOIN u ON o.k = u.k",
        "SELECT * FROM TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) AS o "
        "JOIN u ON o.k = u.k",
    ),
    (
        "SELECT window_start FROM TABLE(TUMBLE((SELECT * FROM TABLE(IMPOSE_ORDER(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '1' SECOND))), DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY 1",
        "SELECT window_start FROM TABLE(TUMBLE((SELECT * FROM TABLE(IMPOSE_ORDER(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '1' SECOND))), DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY 1",
    ),
    (
        "SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1 hour'))",
        "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
    ),
    (
        "SELECT * FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), GAP => INTERVAL '90' MINUTES))",
        "SELECT * FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '90' MINUTES))",
    ),
    (
        "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, "
        "SLIDE => INTERVAL '0.5' SECONDS))",
        "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '0.5' SECONDS))",
    ),
    # Jobs: column lists, EXPLAIN of a job restored from a snapshot with a BEGIN ... END body
    (
        "CREATE JOB j AS INSERT INTO a (x, y) SELECT x, y FROM t",
        "CREATE JOB j AS INSERT INTO a (x, y) SELECT x, y FROM t",
    ),
    (
        "EXPLAIN CREATE JOB j OPTIONS ('a'='1') FROM SNAPSHOT s AS BEGIN INSERT INTO a SELECT x FROM t; "
        "SINK INTO b SELECT y FROM t; END",
        "EXPLAIN CREATE JOB j OPTIONS ('a'='1') FROM SNAPSHOT s AS BEGIN INSERT INTO a SELECT x FROM t; "
        "INSERT INTO b SELECT y FROM t; END",
    ),
]


@pytest.mark.parametrize(("text", "canonical"), ROUND_TRIPS)
def test_statement_round_trips_to_canonical_text(text: str, canonical: str) -> None:
    assert sql(parse_statement(text)) == canonical
    assert sql(parse_statement(canonical)) == canonical


def test_sqlglot_entry_points_accept_the_dialect() -> None:
    node = sqlglot.parse_one("SHOW JOBS", read=PitstopDialect)
    assert isinstance(node, nodes.ShowJobs)
    assert sqlglot.transpile("drop job j", read=PitstopDialect, write=PitstopDialect) == ["DROP JOB j"]


# Node shapes ---------------------------------------------------------------------------


def test_create_mapping_node_has_columns_watermark_kind_and_options() -> None:
    node = parse_statement(
        "CREATE MAPPING orders (id BIGINT, amount DECIMAL(12,2), ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) TYPE File OPTIONS ('path'='p')"
    )
    assert isinstance(node, nodes.CreateMapping)
    assert name_of(node.this) == "orders"
    columns = node.args["columns"]
    assert [name_of(c.this) for c in columns] == ["id", "amount", "ts"]
    assert all(isinstance(c, exp.ColumnDef) for c in columns)
    assert columns[1].args["kind"].is_type(exp.DataType.Type.DECIMAL)
    assert columns[1].args["kind"].sql() == "DECIMAL(12, 2)"
    watermark = node.args["watermark"]
    assert isinstance(watermark, nodes.Watermark)
    assert name_of(watermark.this) == "ts"
    assert interval_micros(watermark.expression) == 5 * SECOND
    assert isinstance(node.args["kind"], exp.Identifier) and node.args["kind"].name == "File"
    assert option_dict(node.args["options"]) == {"path": "p"}
    assert node.args["replace"] is False and node.args["exists"] is False


def test_create_job_node_has_options_snapshot_and_one_insert() -> None:
    node = parse_statement(
        "CREATE JOB revenue OPTIONS ('processingGuarantee'='exactlyOnce', "
        "'snapshotIntervalMillis'='10000') FROM SNAPSHOT revenue_v1 "
        f"AS INSERT INTO daily_revenue {WINDOW_QUERY}"
    )
    assert isinstance(node, nodes.CreateJob)
    assert name_of(node.this) == "revenue"
    assert option_dict(node.args["options"]) == {
        "processingGuarantee": "exactlyOnce",
        "snapshotIntervalMillis": "10000",
    }
    assert name_of(node.args["snapshot"]) == "revenue_v1"
    (insert,) = node.args["body"]
    assert isinstance(insert, exp.Insert)
    assert name_of(insert.this) == "daily_revenue"
    assert isinstance(insert.expression, exp.Select)


def test_create_job_without_clauses_has_no_options_or_snapshot() -> None:
    node = parse_statement("CREATE JOB IF NOT EXISTS j AS INSERT INTO a SELECT 1 FROM t")
    assert node.args["exists"] is True
    assert node.args.get("options") is None
    assert node.args.get("snapshot") is None
    assert option_dict(node.args.get("options")) == {}


def test_begin_end_body_gives_one_insert_per_sink_and_sink_into_is_an_insert() -> None:
    node = parse_statement(
        "CREATE JOB j AS BEGIN\n"
        "  INSERT INTO a SELECT CASE WHEN x > 1 THEN 'big;' ELSE 'small' END AS size FROM t;\n"
        "  SINK INTO b SELECT y FROM t;\n"
        "END"
    )
    body = node.args["body"]
    assert [type(i) for i in body] == [exp.Insert, exp.Insert]
    assert [name_of(i.this) for i in body] == ["a", "b"]


def test_leading_with_is_kept_on_the_insert() -> None:
    node = parse_statement(
        "CREATE JOB j AS WITH daily AS (SELECT k FROM t) INSERT INTO a SELECT * FROM daily"
    )
    (insert,) = node.args["body"]
    assert isinstance(insert, exp.Insert)
    assert [cte.alias for cte in insert.args["with_"].expressions] == ["daily"]


def test_drop_job_await_and_drop_snapshot_nodes() -> None:
    drop = parse_statement("DROP JOB IF EXISTS revenue WITH SNAPSHOT v1")
    assert isinstance(drop, nodes.DropJob)
    assert drop.args["exists"] is True and name_of(drop.args["snapshot"]) == "v1"
    plain = parse_statement("DROP JOB revenue")
    assert plain.args["exists"] is False and plain.args.get("snapshot") is None

    wait = parse_statement("AWAIT JOB revenue TIMEOUT INTERVAL '2' MINUTES")
    assert isinstance(wait, nodes.AwaitJob)
    assert interval_micros(wait.args["timeout"]) == 2 * MINUTE
    assert parse_statement("AWAIT JOB revenue").args.get("timeout") is None

    snap = parse_statement("DROP SNAPSHOT IF EXISTS v1")
    assert isinstance(snap, nodes.DropSnapshot) and snap.args["exists"] is True
    assert isinstance(parse_statement("SHOW SNAPSHOTS"), nodes.ShowSnapshots)
    assert isinstance(parse_statement("SHOW MAPPINGS"), nodes.ShowMappings)
    assert isinstance(parse_statement("DROP MAPPING m"), nodes.DropMapping)


def test_lower_priority_statement_nodes() -> None:
    explain = parse_statement("EXPLAIN CREATE JOB j AS INSERT INTO a SELECT x FROM t")
    assert isinstance(explain, nodes.Explain) and isinstance(explain.this, nodes.CreateJob)
    alter = parse_statement("ALTER JOB j OPTIONS ('a'='1')")
    assert isinstance(alter, nodes.AlterJob) and alter.args["action"] == "OPTIONS"
    assert option_dict(alter.args["options"]) == {"a": "1"}
    assert parse_statement("ALTER JOB j resume").args["action"] == "RESUME"
    snapshot = parse_statement("CREATE SNAPSHOT s FOR JOB j")
    assert isinstance(snapshot, nodes.CreateSnapshot) and name_of(snapshot.args["job"]) == "j"
    assert isinstance(parse_statement("DESCRIBE JOB j"), nodes.DescribeJob)
    assert isinstance(parse_statement("DESCRIBE SNAPSHOT s"), nodes.DescribeSnapshot)


def test_view_nodes() -> None:
    view = parse_statement("CREATE OR REPLACE VIEW v AS SELECT a FROM t")
    assert isinstance(view, nodes.CreateView)
    assert name_of(view.this) == "v" and isinstance(view.this, exp.Identifier)
    assert isinstance(view.expression, exp.Select)
    assert view.args["replace"] is True and view.args["exists"] is False
    union = parse_statement("CREATE VIEW v AS SELECT a FROM t UNION SELECT a FROM u")
    assert isinstance(union.expression, exp.Union) and union.args["replace"] is False
    drop = parse_statement("DROP VIEW IF EXISTS v")
    assert isinstance(drop, nodes.DropView) and drop.args["exists"] is True and name_of(drop.this) == "v"
    assert parse_statement("DROP VIEW v").args["exists"] is False
    assert isinstance(parse_statement("SHOW VIEWS"), nodes.ShowViews)


def test_set_option_holds_key_and_value_as_string_literals() -> None:
    for text in ("SET 'pitstop.trigger_ms' = '200'", "SET pitstop.trigger_ms = '200'"):
        node = parse_statement(text)
        assert isinstance(node, nodes.SetOption)
        assert isinstance(node.this, exp.Literal) and node.this.is_string
        assert node.this.name == "pitstop.trigger_ms"
        assert isinstance(node.expression, exp.Literal) and node.expression.is_string
        assert node.expression.name == "200"


def test_alter_job_options_then_resume_keeps_both() -> None:
    node = parse_statement("ALTER JOB j OPTIONS ('snapshotIntervalMillis'='5000') RESUME")
    assert node.args["action"] == "RESUME"
    assert option_dict(node.args["options"]) == {"snapshotIntervalMillis": "5000"}
    assert parse_statement("ALTER JOB j OPTIONS ('a'='1')").args["action"] == "OPTIONS"
    assert parse_statement("ALTER JOB j RESUME").args.get("options") is None


def test_explain_wraps_any_statement_node() -> None:
    explain = parse_statement(
        "EXPLAIN CREATE JOB j FROM SNAPSHOT s AS BEGIN INSERT INTO a SELECT 1 FROM t; END"
    )
    assert isinstance(explain.this, nodes.CreateJob)
    assert name_of(explain.this.args["snapshot"]) == "s"
    assert isinstance(parse_statement("EXPLAIN SELECT 1").this, exp.Select)


def test_ad_hoc_queries_are_plain_sqlglot_nodes() -> None:
    assert isinstance(parse_statement("SELECT * FROM daily_revenue"), exp.Select)
    assert isinstance(parse_statement("SELECT 1 UNION SELECT 2"), exp.Union)
    assert isinstance(parse_statement("WITH c AS (SELECT 1) SELECT * FROM c"), exp.Select)


def test_names_keep_case_and_quotes() -> None:
    node = parse_statement('DROP JOB "Revenue Daily"')
    assert name_of(node.this) == "Revenue Daily" and node.this.quoted
    assert name_of(parse_statement("DROP JOB RevenueDaily").this) == "RevenueDaily"
    assert sql(parse_statement('DROP JOB "Revenue Daily"')) == 'DROP JOB "Revenue Daily"'


# Window table-valued functions ------------------------------------------------------------


def test_tumble_sits_directly_in_from_with_its_fields() -> None:
    select = parse_statement(WINDOW_QUERY)
    tvf = select.args["from_"].this
    assert isinstance(tvf, nodes.WindowTvf)
    assert select.find(nodes.WindowTvf) is tvf
    assert tvf.args["kind"] == "TUMBLE"
    assert isinstance(tvf.this, exp.Table) and name_of(tvf.this) == "orders"
    assert isinstance(tvf.args["descriptor"], exp.Identifier)
    assert name_of(tvf.args["descriptor"]) == "ts"
    assert interval_micros(tvf.args["size"]) == 24 * HOUR
    assert tvf.args.get("slide") is None and tvf.args.get("gap") is None
    assert tvf.args.get("alias") is None


def test_hop_takes_size_then_slide_positionally_or_by_name() -> None:
    positional = parse_statement(
        "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '10' MINUTE)) AS w"
    )
    named = parse_statement(
        "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), SLIDE => INTERVAL '10' MINUTES, "
        "SIZE => INTERVAL '1 hour')) w"
    )
    for select in (positional, named):
        tvf = select.find(nodes.WindowTvf)
        assert tvf.args["kind"] == "HOP"
        assert interval_micros(tvf.args["size"]) == HOUR
        assert interval_micros(tvf.args["slide"]) == 10 * MINUTE
        assert tvf.alias == "w"
        assert isinstance(tvf.args["alias"], exp.TableAlias)


def test_session_puts_the_gap_in_gap() -> None:
    tvf = parse_statement(
        "SELECT * FROM TABLE(SESSION(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' MINUTE))"
    ).find(nodes.WindowTvf)
    assert tvf.args["kind"] == "SESSION"
    assert interval_micros(tvf.args["gap"]) == 5 * MINUTE
    assert tvf.args.get("size") is None


def test_window_inside_a_job_cte_and_stage_hint() -> None:
    job = parse_statement(
        "CREATE JOB j AS INSERT INTO a SELECT /*+ STAGE(daily) */ k, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' DAY)) GROUP BY k"
    )
    select = job.args["body"][0].expression
    assert stage_hint(select) == "daily"
    assert interval_micros(select.find(nodes.WindowTvf).args["size"]) == 24 * HOUR
    assert stage_hint(parse_statement("SELECT k FROM t")) is None


def test_impose_order_sits_directly_in_from_with_its_fields() -> None:
    select = parse_statement(
        "SELECT * FROM TABLE(IMPOSE_ORDER(TABLE db.trades, DESCRIPTOR(trade_ts), "
        "INTERVAL '0.5' SECONDS)) AS o"
    )
    node = select.args["from_"].this
    assert isinstance(node, nodes.ImposeOrder)
    assert isinstance(node.this, exp.Table) and node.this.name == "trades" and node.this.db == "db"
    assert isinstance(node.args["descriptor"], exp.Identifier) and node.args["descriptor"].name == "trade_ts"
    assert interval_micros(node.args["lag"]) == SECOND // 2
    assert isinstance(node.args["alias"], exp.TableAlias) and node.alias == "o"


def test_window_over_a_subquery_keeps_the_subquery_as_its_source() -> None:
    select = parse_statement(
        "SELECT * FROM TABLE(HOP((SELECT * FROM TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts), "
        "INTERVAL '1' SECOND))), DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '5' SECOND))"
    )
    tvf = select.args["from_"].this
    assert isinstance(tvf, nodes.WindowTvf) and isinstance(tvf.this, exp.Subquery)
    assert isinstance(tvf.this.this, exp.Select)
    assert isinstance(tvf.this.this.args["from_"].this, nodes.ImposeOrder)
    assert interval_micros(tvf.args["size"]) == 10 * SECOND
    assert interval_micros(tvf.args["slide"]) == 5 * SECOND


def test_two_stage_hints_are_refused() -> None:
    with pytest.raises(SqlError, match="one STAGE hint"):
        stage_hint(parse_statement("SELECT /*+ STAGE(a), STAGE(b) */ k FROM t"))


# Intervals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("INTERVAL '24' HOUR", 24 * HOUR),
        ("INTERVAL '90' MINUTES", 90 * MINUTE),
        ("INTERVAL '0.5' SECONDS", SECOND // 2),
        ("INTERVAL '1 hour'", HOUR),
        ("INTERVAL '1 hour 30 minutes'", 90 * MINUTE),
        ("INTERVAL '2' DAYS", 48 * HOUR),
        ("INTERVAL '250' MILLISECONDS", 250_000),
        ("INTERVAL '1' MILLISECOND", 1_000),
        ("INTERVAL 5 SECOND", 5 * SECOND),
    ],
)
def test_interval_micros(text: str, micros: int) -> None:
    assert interval_micros(sqlglot.parse_one(text)) == micros


@pytest.mark.parametrize(
    "text",
    [
        "INTERVAL '0' SECOND",
        "INTERVAL '-3' HOUR",
        "INTERVAL 'abc' HOUR",
        "INTERVAL '1' WEEK",
        "INTERVAL '1 fortnight'",
        "INTERVAL '0.0000001' SECOND",
        "'5'",
    ],
)
def test_bad_intervals_are_sql_errors(text: str) -> None:
    with pytest.raises(SqlError):
        interval_micros(sqlglot.parse_one(text))


@pytest.mark.parametrize(
    ("micros", "text"),
    [
        (24 * HOUR, "INTERVAL '1' DAY"),
        (25 * HOUR, "INTERVAL '25' HOUR"),
        (90 * MINUTE, "INTERVAL '90' MINUTE"),
        (SECOND // 2, "INTERVAL '500' MILLISECOND"),
        (5 * SECOND, "INTERVAL '5' SECOND"),
        (7, "INTERVAL '7' MICROSECOND"),
    ],
)
def test_format_interval_uses_the_largest_exact_unit(micros: int, text: str) -> None:
    assert format_interval(micros) == text
    assert interval_micros(sqlglot.parse_one(text)) == micros


# Helpers ---------------------------------------------------------------------------------


def test_option_dict_refuses_a_duplicate_key() -> None:
    options = [
        nodes.Option(this=exp.Literal.string("a"), expression=exp.Literal.string("1")),
        nodes.Option(this=exp.Literal.string("a"), expression=exp.Literal.string("2")),
    ]
    with pytest.raises(SqlError, match="'a' is given twice"):
        option_dict(options)


# Splitting -------------------------------------------------------------------------------


def test_split_ignores_semicolons_in_strings_identifiers_comments_and_job_blocks() -> None:
    script = (
        "-- leading comment; not a statement\n"
        "SELECT 'a;b' AS \"x;y\" FROM t; /* c; d */ SHOW JOBS;\n"
        "CREATE JOB j AS BEGIN\n"
        "  INSERT INTO a SELECT CASE WHEN k = ';' THEN 1 END AS c FROM t;\n"
        "  INSERT INTO b SELECT 'it''s;' AS q FROM t;\n"
        "END;\n"
        ";  -- empty\n"
        "  SHOW MAPPINGS"
    )
    assert split_statements(script) == [
        ("SELECT 'a;b' AS \"x;y\" FROM t", 2, 1),
        ("SHOW JOBS", 2, 42),
        (
            "CREATE JOB j AS BEGIN\n"
            "  INSERT INTO a SELECT CASE WHEN k = ';' THEN 1 END AS c FROM t;\n"
            "  INSERT INTO b SELECT 'it''s;' AS q FROM t;\n"
            "END",
            3,
            1,
        ),
        ("SHOW MAPPINGS", 8, 3),
    ]


def test_split_skips_scripts_of_only_comments() -> None:
    assert split_statements("-- nothing\n/* at ; all */ ;\n  ;") == []


def test_is_complete_needs_a_closing_semicolon_outside_quotes_and_blocks() -> None:
    assert is_complete("SHOW JOBS;")
    assert is_complete("SHOW JOBS; -- done")
    assert not is_complete("SHOW JOBS")
    assert not is_complete("SELECT ';")
    assert not is_complete("CREATE JOB j AS BEGIN INSERT INTO a SELECT 1 FROM t;")
    assert is_complete("CREATE JOB j AS BEGIN INSERT INTO a SELECT 1 FROM t; END;")


def test_parse_script_records_text_and_position_of_each_statement() -> None:
    parsed = parse_script("SHOW JOBS;\n  DROP JOB j;")
    assert parsed == [
        ParsedStatement(node=parsed[0].node, text="SHOW JOBS", line=1, col=1),
        ParsedStatement(node=parsed[1].node, text="DROP JOB j", line=2, col=3),
    ]
    assert isinstance(parsed[1].node, nodes.DropJob)


# Error positions -------------------------------------------------------------------------

SCRIPT_WITH_BAD_THIRD_STATEMENT = """CREATE MAPPING orders (id BIGINT, ts TIMESTAMP) TYPE File
  OPTIONS ('path'='data/orders', 'format'='json');

SHOW MAPPINGS;

-- the job
CREATE JOBS revenue AS INSERT INTO x SELECT * FROM orders;
"""


def test_error_in_the_middle_of_a_script_is_positioned_in_the_script() -> None:
    with pytest.raises(SqlError) as caught:
        parse_script(SCRIPT_WITH_BAD_THIRD_STATEMENT, file="jobs.sql")
    err = caught.value
    assert (err.line, err.col) == (7, 8)
    assert err.file == "jobs.sql"
    assert err.source_line == "CREATE JOBS revenue AS INSERT INTO x SELECT * FROM orders;"
    assert (
        err.message == "expected JOB, MAPPING, SNAPSHOT or VIEW after CREATE, got 'JOBS'; did you mean JOB?"
    )
    # The message reads as the issue asks; front ends that handle several files prefix the file.
    assert str(err).startswith("ERROR at line 7, col 8: expected JOB, MAPPING, SNAPSHOT or VIEW")


@pytest.mark.parametrize(
    ("script", "line", "col", "message"),
    [
        # statement starting mid-line: the statement's column offset is added on its first line
        ("SHOW JOBS;   DROP JOB IF EXISTS;", 1, 32, "expected a job name"),
        # an error on a later line of a statement keeps that line's own column
        (
            "SHOW JOBS;\n  CREATE JOB j\n    OPTIONS ('a'='1', 'a'='2')\n  AS INSERT INTO x SELECT 1",
            3,
            23,
            "option 'a' is given twice",
        ),
        ("UPDATE t SET a = 1", 1, 1, "unknown statement 'UPDATE'"),
        ("SHOW JOBS;\nDELETE FROM t", 2, 1, "unknown statement 'DELETE'"),
        (
            "CREATE TABLE t (a INT)",
            1,
            8,
            "CREATE TABLE is not a pitstop statement: declare a source or sink with CREATE MAPPING",
        ),
        ("frobnicate the jobs", 1, 1, "unknown statement 'frobnicate'"),
        ("INSERT INTO t SELECT 1", 1, 1, "INSERT runs inside a job"),
        ("CREATE JOB j AS\n  SELECT 1 FROM t", 2, 3, "a job's body is INSERT INTO <sink> SELECT"),
        (
            "CREATE JOB j AS BEGIN\n  INSERT INTO a SELECT 1 FROM t;\n  DELETE FROM b;\nEND",
            3,
            3,
            "a job's body is INSERT INTO <sink> SELECT",
        ),
        ("CREATE JOB j AS INSERT INTO a VALUES (1)", 1, 17, "a job's INSERT reads from a SELECT"),
        (
            "SELECT *\nFROM TABLE(SLIDING(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
            2,
            12,
            "unknown table function 'SLIDING' in TABLE(...): use TUMBLE, HOP, SESSION or IMPOSE_ORDER",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0' HOUR))",
            1,
            53,
            "an interval must be positive",
        ),
        ("SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))", 1, 67, "HOP needs SLIDE"),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), GAP => INTERVAL '1' HOUR))",
            1,
            53,
            "TUMBLE has no argument GAP",
        ),
        (
            "CREATE MAPPING m (ts TIMESTAMP,\n  WATERMARK FOR ts AS other - INTERVAL '1' SECOND) TYPE File",
            2,
            23,
            "the watermark of column 'ts'",
        ),
        ("CREATE MAPPING m (a BIGINT, b BLOB) TYPE File", 1, 31, "unsupported type 'BLOB'"),
        ("CREATE MAPPING m (a BIGINT) TYPE Pulsar", 1, 34, "unknown mapping type 'Pulsar'"),
        ("CREATE MAPPING m TYPE File OPTIONS ('path'=3)", 1, 44, "option values are quoted"),
        ("SHOW JOBS now", 1, 11, "unexpected 'now'"),
        ("SHOW TABLES", 1, 6, "pitstop's tables are mappings: SHOW MAPPINGS"),
        (
            "SHOW JOB",
            1,
            6,
            "expected JOBS, MAPPINGS, SNAPSHOTS or VIEWS after SHOW, got 'JOB'; did you mean JOBS?",
        ),
        ("AWAIT JOB j TIMEOUT 5", 1, 21, "expected an interval"),
        ("SELECT a FROM (x", 1, 17, "Expecting )"),
        ("SHOW JOBS;\nSELECT 'unterminated FROM t", 2, 8, "unterminated string"),
        (
            "CREATE OR REPLACE JOB j AS INSERT INTO a SELECT 1",
            1,
            19,
            "CREATE OR REPLACE JOB is not supported",
        ),
    ],
)
def test_malformed_statements_report_exact_positions(script: str, line: int, col: int, message: str) -> None:
    err = error_of(script)
    assert (err.line, err.col) == (line, col), str(err)
    assert message in err.message
    assert err.source_line == script.split("\n")[line - 1]
    assert str(err).startswith(f"ERROR at line {line}, col {col}: ")


SCRIPT_WITH_MULTILINE_ERRORS = """SHOW JOBS;
CREATE MAPPING orders (
    id BIGINT,
    ts TIMESTAMP
) TYPE File OPTIONS ('path'='p');
CREATE JOB revenue AS
INSERT INTO daily
SELECT window_start, COUNT(id) AS n
FROM TABLE(TUMBEL(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' DAY))
GROUP BY window_start;
SHOW MAPPINGS;
CREATE VIEW v AS
  SELECT * FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts),
    INTERVAL '5' MINUTES, INTERVAL '10' MINUTES));
DORP JOB revenue;
SHOW JOBS
"""


@pytest.mark.parametrize(
    ("script", "line", "col", "message"),
    [
        # misspelt keywords: the caret stays on the misspelt word
        (
            "DORP JOB x",
            1,
            1,
            "unknown statement 'DORP': pitstop accepts",
        ),
        ("SHOW JOBS;\nSHOW JOB", 2, 6, "got 'JOB'; did you mean JOBS?"),
        ("AWAIT JOBB x", 1, 7, "expected JOB after AWAIT, got 'JOBB'; did you mean JOB?"),
        ("AWAIT JOB x TIMOUT INTERVAL '1' SECOND", 1, 13, "did you mean TIMEOUT?"),
        ("ALTER JOB j SUPSEND", 1, 13, "got 'SUPSEND'; did you mean SUSPEND?"),
        ("CREATE JOB j OPTION ('a'='1') AS INSERT INTO a SELECT 1", 1, 14, "did you mean OPTIONS?"),
        ("DROP JOB j WITH SNAPSHTO s", 1, 17, "did you mean SNAPSHOT?"),
        ("CREATE VEIW v AS SELECT 1", 1, 8, "did you mean VIEW?"),
        ("CREATE MAPPING m TYPE Flie", 1, 23, "did you mean File?"),
        (
            "SELECT *\n  FROM TABLE(TUMBEL(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
            2,
            14,
            "did you mean TUMBLE?",
        ),
        # views
        ("CREATE VIEW v SELECT 1", 1, 15, "expected AS after view 'v'"),
        ("CREATE VIEW v AS INSERT INTO a SELECT 1", 1, 18, "a view's body is a query"),
        ("CREATE VIEW v AS SELECT 1 EXCEPT SELECT 2", 1, 18, "a SELECT or a UNION of SELECTs"),
        ("DROP VIEW IF EXISTS", 1, 20, "expected a view name"),
        # SET
        ("SET 'k' 'v'", 1, 9, "expected = after setting 'k'"),
        ("SET 'k' = 5", 1, 11, "the value of setting 'k' is a quoted string"),
        ("SET = 'v'", 1, 5, "expected a setting name after SET"),
        # ALTER JOB ... OPTIONS (...) RESUME
        ("ALTER JOB j OPTIONS ('a'='1') SUSPEND", 1, 31, "only RESUME may follow ALTER JOB j OPTIONS"),
        # table functions
        (
            "SELECT * FROM TABLE(IMPOSE_ORDER((SELECT 1), DESCRIPTOR(ts), INTERVAL '1' SECOND))",
            1,
            34,
            "IMPOSE_ORDER expects TABLE <name> as its first argument",
        ),
        ("SELECT * FROM TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts)))", 1, 57, "IMPOSE_ORDER needs LAG"),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(a, b), INTERVAL '1' HOUR))",
            1,
            49,
            "names one time column",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)),"
            " DESCRIPTOR(ts), INTERVAL '1' HOUR))",
            1,
            33,
            "write TUMBLE((SELECT * FROM TABLE(...)), ...)",
        ),
        (
            "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts),\n  INTERVAL '1' MINUTE,\n  INTERVAL '1' HOUR))",
            3,
            3,
            "HOP takes the window size first, then the slide",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(SIZE => INTERVAL '1' HOUR, TABLE t, DESCRIPTOR(ts)))",
            1,
            28,
            "TUMBLE's first argument is its input",
        ),
        ("SELECT * FROM TABLE(TUMBLE TABLE t)", 1, 28, "expected ( after TUMBLE"),
        ("SELECT HOP(ts, INTERVAL '1' HOUR, INTERVAL '1' DAY) FROM t", 1, 8, "HOP is a table function"),
        # unknown syntax inside a job's INSERT is refused, not dropped
        ("CREATE JOB j AS INSERT INTO a SELECT 1 ON CONFLICT DO NOTHING", 1, 17, "ON CONFLICT"),
        ("SHOW JOBS;\n  SELECT `a` FROM t", 2, 10, "quote names with double quotes"),
    ],
)
def test_new_statement_errors_report_exact_positions(script: str, line: int, col: int, message: str) -> None:
    err = error_of(script)
    assert (err.line, err.col) == (line, col), str(err)
    assert message in err.message
    assert err.source_line == script.split("\n")[line - 1]
    caret = str(err).split("\n")[-1]
    assert caret == "  " + " " * (col - 1) + "^"


def test_first_error_of_a_multiline_script_is_positioned_in_the_script() -> None:
    err = error_of(SCRIPT_WITH_MULTILINE_ERRORS)
    assert (err.line, err.col) == (9, 12)
    assert err.message.endswith("did you mean TUMBLE?")
    assert str(err).split("\n")[1:] == [
        "  FROM TABLE(TUMBEL(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' DAY))",
        "             ^",
    ]


def test_parse_script_all_reports_every_bad_statement_and_keeps_the_good_ones() -> None:
    parsed, errors = parse_script_all(SCRIPT_WITH_MULTILINE_ERRORS, file="jobs.sql")
    assert [type(p.node) for p in parsed] == [
        nodes.ShowJobs,
        nodes.CreateMapping,
        nodes.ShowMappings,
        nodes.ShowJobs,
    ]
    assert [(e.line, e.col) for e in errors] == [(9, 12), (14, 27), (15, 1)]
    assert [e.file for e in errors] == ["jobs.sql"] * 3
    assert "HOP takes the window size first" in errors[1].message
    assert errors[2].message.endswith("did you mean DROP?")
    assert errors[1].source_line == "    INTERVAL '5' MINUTES, INTERVAL '10' MINUTES));"


def test_parse_script_all_of_a_good_script_has_no_errors() -> None:
    parsed, errors = parse_script_all("SHOW JOBS; SHOW VIEWS;")
    assert errors == [] and [type(p.node) for p in parsed] == [nodes.ShowJobs, nodes.ShowViews]


def test_parse_script_all_reports_an_unclosed_comment_after_the_statements() -> None:
    parsed, errors = parse_script_all("SHOW JOBZ;\nSHOW JOBS; /* open")
    assert [type(p.node) for p in parsed] == [nodes.ShowJobs]
    assert [(e.line, e.col, e.message.split(":")[0]) for e in errors] == [
        (1, 6, "expected JOBS, MAPPINGS, SNAPSHOTS or VIEWS after SHOW, got 'JOBZ'; did you mean JOBS?"),
        (2, 12, "unterminated comment"),
    ]


def test_a_keyword_of_other_sql_gets_no_suggestion() -> None:
    assert "did you mean" not in error_of("UPDATE t SET a = 1").message
    assert "did you mean" not in error_of("frobnicate the jobs").message


def test_explain_of_a_job_from_a_snapshot_with_a_block_splits_as_one_statement() -> None:
    script = (
        "EXPLAIN CREATE JOB j FROM SNAPSHOT s AS BEGIN\n"
        "  INSERT INTO a SELECT x FROM t;\n"
        "  INSERT INTO b SELECT ';' AS y FROM t;\n"
        "END;\n"
        "SHOW JOBS;"
    )
    assert [line for _, line, _ in split_statements(script)] == [1, 5]
    assert not is_complete(script.split("END;")[0])
    explained = parse_script(script)[0].node
    assert isinstance(explained, nodes.Explain)
    assert [name_of(i.this) for i in explained.this.args["body"]] == ["a", "b"]


def test_parse_statement_positions_are_relative_to_the_statement() -> None:
    with pytest.raises(SqlError) as caught:
        parse_statement("DROP\n  JOBS j")
    assert (caught.value.line, caught.value.col) == (2, 3)


def test_parse_statement_takes_exactly_one_statement() -> None:
    with pytest.raises(SqlError, match="one statement") as caught:
        parse_statement("SHOW JOBS; SHOW MAPPINGS")
    assert (caught.value.line, caught.value.col) == (1, 12)
    with pytest.raises(SqlError, match="empty statement"):
        parse_statement("  -- nothing")


def test_nothing_becomes_a_command() -> None:
    for text in [
        "EXECUTE x",
        "RENAME TABLE a TO b",
        "CALL p()",
        "BEGIN",
        "COMMIT",
        "SET x = 1",
        "SET",
        "GRANT SELECT ON t TO u",
        "CREATE INDEX i ON t (a)",
    ]:
        with pytest.raises(SqlError):
            parse_statement(text)


def test_only_a_job_header_opens_a_begin_block() -> None:
    script = (
        "SELECT x AS begin FROM t; SHOW JOBS;\n"
        "CREATE JOB j AS INSERT INTO a SELECT x AS begin FROM t; SHOW JOBS"
    )
    assert [text for text, _, _ in split_statements(script)] == [
        "SELECT x AS begin FROM t",
        "SHOW JOBS",
        "CREATE JOB j AS INSERT INTO a SELECT x AS begin FROM t",
        "SHOW JOBS",
    ]
    explained = "EXPLAIN CREATE JOB j AS BEGIN INSERT INTO a SELECT 1 FROM t; END; SHOW JOBS"
    assert len(split_statements(explained)) == 2
    assert isinstance(parse_script(explained)[0].node.this, nodes.CreateJob)


def test_a_comment_left_open_at_the_end_of_a_script_is_an_error() -> None:
    err = error_of("SHOW JOBS;\nSELECT 1 /* never closed")
    assert (err.line, err.col) == (2, 10)
    assert "unterminated comment" in err.message


def test_quoted_window_name_is_not_a_window_function() -> None:
    err = error_of("SELECT * FROM TABLE(\"TUMBLE\"(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))")
    assert (err.line, err.col) == (1, 21)
    assert err.message.startswith("unknown table function 'TUMBLE' in TABLE(...)")
    assert "did you mean" not in err.message
