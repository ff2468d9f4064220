"""A corpus of statements in the forms Hazelcast's and Flink's SQL documentation use for jobs,
snapshots, mappings and windows. Each is either accepted (and round-trips) or refused with a
message that says what to write instead, positioned at the offending word.

The statements follow the shapes of those documents (names such as ``trades``, ``Bid`` and
``myJob``); they are not copies of them.
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from pitstop.errors import SqlError
from pitstop.executor import mapping_from_node
from pitstop.intervals import interval_micros
from pitstop.sql import nodes
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.parser import option_dict, parse_script

MINUTE = 60_000_000


def parse_one(text: str) -> exp.Expression:
    (parsed,) = parse_script(text)
    return parsed.node


def round_trips(node: exp.Expression) -> str:
    canonical = node.sql(dialect=PitstopDialect)
    assert parse_one(canonical).sql(dialect=PitstopDialect) == canonical
    return canonical


# Accepted: (where the form comes from, statement, node class). -------------------------------

HAZELCAST_KAFKA = """CREATE OR REPLACE MAPPING orders (
  order_amount BIGINT,
  order_id BIGINT,
  unit_price DECIMAL,
  order_time TIMESTAMP)
TYPE Kafka
OPTIONS (
  'valueFormat' = 'json-flat',
  'topic' = 'orders',
  'bootstrap.servers' = 'kafka:9092');"""

ACCEPTED = [
    (
        "Hazelcast CREATE JOB with job options and SINK INTO",
        """CREATE JOB myJob
  OPTIONS (
    'processingGuarantee' = 'exactlyOnce',
    'snapshotIntervalMillis' = '5000')
AS
SINK INTO trades_sink
SELECT symbol, price FROM trades;""",
        nodes.CreateJob,
    ),
    (
        "Hazelcast CREATE JOB IF NOT EXISTS ... AS INSERT INTO",
        "CREATE JOB IF NOT EXISTS myJob AS INSERT INTO trades_sink SELECT * FROM trades;",
        nodes.CreateJob,
    ),
    (
        "Hazelcast DROP JOB with a final snapshot",
        "DROP JOB IF EXISTS myJob WITH SNAPSHOT mySnapshot;",
        nodes.DropJob,
    ),
    ("Hazelcast CREATE SNAPSHOT", "CREATE SNAPSHOT snap FOR JOB myJob;", nodes.CreateSnapshot),
    (
        "Hazelcast CREATE OR REPLACE SNAPSHOT",
        "CREATE OR REPLACE SNAPSHOT snap FOR JOB myJob;",
        nodes.CreateSnapshot,
    ),
    ("Hazelcast DROP SNAPSHOT", "DROP SNAPSHOT IF EXISTS snap;", nodes.DropSnapshot),
    ("Hazelcast ALTER JOB SUSPEND", "ALTER JOB myJob SUSPEND;", nodes.AlterJob),
    ("Hazelcast ALTER JOB RESUME", "ALTER JOB myJob RESUME;", nodes.AlterJob),
    ("Hazelcast ALTER JOB RESTART", "ALTER JOB myJob RESTART;", nodes.AlterJob),
    (
        "Hazelcast ALTER JOB OPTIONS ... RESUME",
        "ALTER JOB myJob OPTIONS ('snapshotIntervalMillis' = '1000') RESUME;",
        nodes.AlterJob,
    ),
    ("Hazelcast SHOW JOBS", "SHOW JOBS;", nodes.ShowJobs),
    ("Hazelcast SHOW MAPPINGS", "SHOW MAPPINGS;", nodes.ShowMappings),
    ("Hazelcast SHOW VIEWS", "SHOW VIEWS;", nodes.ShowViews),
    (
        "Hazelcast CREATE VIEW around IMPOSE_ORDER",
        """CREATE VIEW trades_ordered AS
  SELECT *
  FROM TABLE(IMPOSE_ORDER(
    TABLE trades,
    DESCRIPTOR(trade_ts),
    INTERVAL '0.5' SECONDS));""",
        nodes.CreateView,
    ),
    ("Hazelcast DROP VIEW", "DROP VIEW IF EXISTS trades_ordered;", nodes.DropView),
    (
        "Hazelcast TUMBLE over an ordered view",
        """SELECT window_start, window_end, COUNT(*) AS total_trades
FROM TABLE(TUMBLE(
  TABLE trades_ordered,
  DESCRIPTOR(trade_ts),
  INTERVAL '5' SECONDS))
GROUP BY 1, 2;""",
        exp.Select,
    ),
    (
        "Hazelcast HOP: size, then slide",
        """SELECT window_start, window_end, AVG(price) AS avg_price
FROM TABLE(HOP(
  TABLE trades_ordered,
  DESCRIPTOR(trade_ts),
  INTERVAL '5' SECONDS,
  INTERVAL '1' SECONDS))
GROUP BY 1, 2;""",
        exp.Select,
    ),
    (
        "Hazelcast TUMBLE over an IMPOSE_ORDER subquery",
        """SELECT window_start, window_end, COUNT(*) AS total_trades
FROM TABLE(TUMBLE(
  (SELECT * FROM TABLE(IMPOSE_ORDER(TABLE trades, DESCRIPTOR(trade_ts), INTERVAL '0.5' SECONDS))),
  DESCRIPTOR(trade_ts),
  INTERVAL '5' SECONDS))
GROUP BY 1, 2;""",
        exp.Select,
    ),
    (
        "HOP with named SIZE and SLIDE (DESIGN.md)",
        "SELECT window_start FROM TABLE(HOP(TABLE trades_ordered, DESCRIPTOR(trade_ts), "
        "SLIDE => INTERVAL '1' SECONDS, SIZE => INTERVAL '5' SECONDS)) GROUP BY window_start;",
        exp.Select,
    ),
    (
        "Flink's schema with a WATERMARK, declared as a pitstop mapping",
        """CREATE MAPPING Bid (
  bidtime TIMESTAMP(3),
  price DECIMAL(10, 2),
  item STRING,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE
) TYPE File OPTIONS ('path' = 'data/bid', 'format' = 'json');""",
        nodes.CreateMapping,
    ),
    (
        "Flink TUMBLE with MINUTES",
        """SELECT window_start, window_end, SUM(price) AS total_price
  FROM TABLE(
    TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
  GROUP BY window_start, window_end;""",
        exp.Select,
    ),
    (
        "Flink TUMBLE with named arguments",
        """SELECT window_start, window_end, SUM(price) AS total_price
  FROM TABLE(
    TUMBLE(
      DATA => TABLE Bid,
      TIMECOL => DESCRIPTOR(bidtime),
      SIZE => INTERVAL '10' MINUTES))
  GROUP BY window_start, window_end;""",
        exp.Select,
    ),
    (
        "Flink HOP with named arguments (slide first is fine when named)",
        """SELECT window_start, window_end, SUM(price) AS total_price
  FROM TABLE(
    HOP(DATA => TABLE Bid, TIMECOL => DESCRIPTOR(bidtime),
        SLIDE => INTERVAL '5' MINUTES, SIZE => INTERVAL '10' MINUTES))
  GROUP BY window_start, window_end;""",
        exp.Select,
    ),
    (
        "Flink SESSION without PARTITION BY",
        """SELECT window_start, window_end, item, SUM(price) AS total_price
  FROM TABLE(
    SESSION(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
  GROUP BY item, window_start, window_end;""",
        exp.Select,
    ),
    (
        "Flink INSERT INTO ... SELECT, wrapped in a job",
        """CREATE JOB bid_totals AS
INSERT INTO bid_totals
SELECT window_start, window_end, SUM(price) AS total_price
FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end;""",
        nodes.CreateJob,
    ),
    (
        "Flink SET of a savepoint path (the executor says whether it knows the key)",
        "SET 'execution.savepoint.path' = '/tmp/flink-savepoints/savepoint-cca7bc-bb1e257f0dab';",
        nodes.SetOption,
    ),
    ("Flink SET with a dash in the key", "SET 'table.local-time-zone' = 'Europe/Berlin';", nodes.SetOption),
    ("Flink SHOW JOBS", "SHOW JOBS;", nodes.ShowJobs),
    (
        "Flink CREATE VIEW",
        "CREATE VIEW big_bids AS SELECT item, price FROM Bid WHERE price > 10;",
        nodes.CreateView,
    ),
    ("Hazelcast Kafka mapping", HAZELCAST_KAFKA, nodes.CreateMapping),
]


@pytest.mark.parametrize(("source", "text", "node_class"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_documented_form_is_accepted_and_round_trips(source: str, text: str, node_class: type) -> None:
    node = parse_one(text)
    assert isinstance(node, node_class), source
    round_trips(node)


def test_hazelcast_kafka_mapping_is_a_kafka_mapping_with_its_options() -> None:
    (parsed,) = parse_script(HAZELCAST_KAFKA)
    mapping = mapping_from_node(parsed.node, parsed.text)
    assert mapping.type == "kafka"
    assert mapping.options == {
        "valueFormat": "json-flat",
        "topic": "orders",
        "bootstrap.servers": "kafka:9092",
    }


def test_hazelcast_job_options_are_kept_as_written() -> None:
    job = parse_one(ACCEPTED[0][1])
    assert option_dict(job.args["options"]) == {
        "processingGuarantee": "exactlyOnce",
        "snapshotIntervalMillis": "5000",
    }
    assert [insert.this.name for insert in job.args["body"]] == ["trades_sink"]


def test_hazelcast_alter_job_options_resume_sets_options_and_resumes() -> None:
    alter = parse_one("ALTER JOB myJob OPTIONS ('snapshotIntervalMillis' = '1000') RESUME;")
    assert alter.args["action"] == "RESUME"
    assert option_dict(alter.args["options"]) == {"snapshotIntervalMillis": "1000"}


def test_flink_named_hop_reads_size_and_slide_by_name() -> None:
    select = parse_one(next(text for source, text, _ in ACCEPTED if source.startswith("Flink HOP")))
    tvf = select.find(nodes.WindowTvf)
    assert interval_micros(tvf.args["size"]) == 10 * MINUTE
    assert interval_micros(tvf.args["slide"]) == 5 * MINUTE


def test_hazelcast_subquery_source_is_a_subquery_around_impose_order() -> None:
    select = parse_one(next(text for source, text, _ in ACCEPTED if "IMPOSE_ORDER subquery" in source))
    tvf = select.args["from_"].this
    assert isinstance(tvf, nodes.WindowTvf) and isinstance(tvf.this, exp.Subquery)
    impose = tvf.this.this.args["from_"].this
    assert isinstance(impose, nodes.ImposeOrder)
    assert impose.this.name == "trades" and impose.args["descriptor"].name == "trade_ts"
    assert interval_micros(impose.args["lag"]) == 500_000


def test_flink_set_keeps_key_and_value_as_strings() -> None:
    node = parse_one("SET 'execution.savepoint.path' = '/tmp/sp';")
    assert node.this.is_string and node.this.name == "execution.savepoint.path"
    assert node.expression.is_string and node.expression.name == "/tmp/sp"


# Refused: (where the form comes from, statement, (line, col), what the message must say). ----

REFUSED = [
    (
        "Hazelcast IMap mapping",
        "CREATE MAPPING myMap TYPE IMap OPTIONS ('keyFormat' = 'int', 'valueFormat' = 'varchar');",
        (1, 27),
        "unknown mapping type 'IMap': use File, DuckDB, Generator, Console, Kafka or Postgres",
    ),
    (
        "Hazelcast EXTERNAL NAME on a column",
        'CREATE MAPPING myMap (id INT EXTERNAL NAME "__key", name VARCHAR) TYPE File;',
        (1, 30),
        "remove EXTERNAL NAME",
    ),
    (
        "Hazelcast TIMESTAMP WITH TIME ZONE column",
        "CREATE MAPPING trades (trade_ts TIMESTAMP WITH TIME ZONE) TYPE File;",
        (1, 33),
        "use BIGINT, BOOLEAN, DATE, DECIMAL(p, s), DOUBLE, FLOAT, INT, SMALLINT, STRING, TIMESTAMP",
    ),
    (
        "Hazelcast SINK INTO as a statement of its own",
        "SINK INTO trades_sink SELECT * FROM trades;",
        (1, 1),
        "CREATE JOB <name> AS SINK INTO <sink> SELECT ...",
    ),
    (
        "Hazelcast generate_stream table function",
        "CREATE JOB gen AS SINK INTO out_map SELECT v FROM TABLE(generate_stream(100));",
        (1, 57),
        "use TUMBLE, HOP, SESSION or IMPOSE_ORDER",
    ),
    (
        "Flink CREATE TABLE with a Kafka connector",
        """CREATE TABLE Orders (
  order_id BIGINT,
  price DECIMAL(32, 2),
  order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders'
);""",
        (1, 8),
        "CREATE MAPPING <name> (<column> <type>, ...) TYPE File",
    ),
    (
        "Flink CREATE TEMPORARY VIEW",
        "CREATE TEMPORARY VIEW big_bids AS SELECT * FROM Bid WHERE price > 10;",
        (1, 8),
        "CREATE VIEW for a query",
    ),
    (
        "Flink PRIMARY KEY in a table's schema",
        "CREATE MAPPING users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) TYPE File;",
        (1, 47),
        "remove the PRIMARY KEY",
    ),
    (
        "Flink HOP with the slide before the size",
        """SELECT window_start, window_end, SUM(price) AS total_price
  FROM TABLE(
    HOP(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
  GROUP BY window_start, window_end;""",
        (3, 63),
        "HOP takes the window size first, then the slide",
    ),
    (
        "Flink CUMULATE",
        """SELECT window_start, window_end, SUM(price) AS total_price
  FROM TABLE(
    CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))
  GROUP BY window_start, window_end;""",
        (3, 5),
        "use TUMBLE, HOP or SESSION",
    ),
    (
        "Flink SESSION with PARTITION BY",
        """SELECT window_start, window_end, item, SUM(price) AS total_price
  FROM TABLE(
    SESSION(TABLE Bid PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
  GROUP BY item, window_start, window_end;""",
        (3, 23),
        "GROUP BY the key with window_start, window_end",
    ),
    (
        "Flink TUMBLE with an offset",
        "SELECT window_start FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), "
        "INTERVAL '10' MINUTES, INTERVAL '1' MINUTES)) GROUP BY window_start;",
        (1, 94),
        "write TUMBLE(TABLE t, DESCRIPTOR(ts), size)",
    ),
    (
        "Flink legacy group window in GROUP BY",
        """SELECT item, SUM(price) AS total
FROM Bid
GROUP BY TUMBLE(bidtime, INTERVAL '1' DAY), item;""",
        (3, 10),
        "call it in FROM as TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))",
    ),
    (
        "Flink legacy TUMBLE_START",
        "SELECT TUMBLE_START(bidtime, INTERVAL '1' DAY) AS wStart FROM Bid;",
        (1, 8),
        "select window_start and window_end of FROM TABLE(TUMBLE(",
    ),
    (
        "Flink INSERT INTO at the top level",
        "INSERT INTO bid_totals SELECT item, price FROM Bid;",
        (1, 1),
        "CREATE JOB <name> AS INSERT INTO <sink> SELECT ...",
    ),
    (
        "Flink EXECUTE STATEMENT SET",
        """EXECUTE STATEMENT SET
BEGIN
  INSERT INTO a SELECT item FROM Bid;
  INSERT INTO b SELECT price FROM Bid;
END;""",
        (1, 1),
        "CREATE JOB <name> AS BEGIN INSERT INTO a SELECT ...; INSERT INTO b SELECT ...; END",
    ),
    (
        "Flink STOP JOB WITH SAVEPOINT",
        "STOP JOB '228d70913eab60dda85c5e7f78b5782c' WITH SAVEPOINT;",
        (1, 1),
        "use DROP JOB <name> WITH SNAPSHOT <snapshot>",
    ),
    ("Flink RESET", "RESET 'table.planner';", (1, 1), "SET 'key' = 'value'"),
    ("Flink SET without quotes", "SET execution.runtime-mode = streaming;", (1, 22), "SET 'key' = 'value'"),
    ("Flink SHOW TABLES", "SHOW TABLES;", (1, 6), "SHOW MAPPINGS"),
    ("Flink DROP TABLE", "DROP TABLE Orders;", (1, 6), "DROP MAPPING <name>"),
    ("Flink USE CATALOG", "USE CATALOG my_catalog;", (1, 1), "name mappings, views and jobs directly"),
    ("Flink EXPLAIN PLAN FOR", "EXPLAIN PLAN FOR SELECT * FROM Bid;", (1, 9), "write EXPLAIN <statement>"),
    (
        "Flink backtick names",
        "SELECT `user`, price FROM Bid;",
        (1, 8),
        'quote names with double quotes ("name")',
    ),
]


@pytest.mark.parametrize(("source", "text", "position", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_documented_form_is_refused_with_what_to_write_instead(
    source: str, text: str, position: tuple[int, int], says: str
) -> None:
    with pytest.raises(SqlError) as caught:
        parse_script(text)
    err = caught.value
    assert says in err.message, (source, err.message)
    assert (err.line, err.col) == position, str(err)
    assert err.source_line == text.split("\n")[position[0] - 1]
