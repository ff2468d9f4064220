"""Results kept between catalog commits (server/results.py): only queries whose answer depends on
the database alone, and never an answer older than the last commit.

No Spark: a sink's write is a catalog transaction (what connectors/duckdb/sink.py does each batch), made
here in the test process on the server's own catalog.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from pitstop.manager import Manager
from pitstop.server.results import SharedResults
from server_helpers import Served

KEPT = [
    "SELECT name, status FROM pitstop.jobs",
    "SELECT region, sum(revenue) AS revenue, sum(orders) AS orders FROM daily GROUP BY region",
    "SELECT * FROM daily WHERE region = ? ORDER BY ts LIMIT 10",
    "WITH x AS (SELECT region FROM daily) SELECT count(*) FROM x JOIN daily USING (region)",
    "SELECT pgc_user(), upper(region), region || 'x', CAST(ts AS DATE), row_number() OVER (ORDER BY ts) "
    "FROM daily",
    "SELECT (SELECT max(ts) FROM daily), 1 + 2, [1, 2][1], {'a': 1}",
    # DuckDB 2.0.1 calls these CONSISTENT_WITHIN_QUERY (they read the session's TimeZone, which is
    # part of a kept result's key)
    "SELECT CAST(ts AS TIMESTAMPTZ) + INTERVAL 1 HOUR, hour(CAST(ts AS TIMESTAMPTZ)) FROM daily",
]
RUN_EVERY_TIME = [
    "SELECT * FROM v",  # a view: what it reads is not looked into
    "SELECT now()",
    "SELECT current_date",
    "SELECT current_user",
    "SELECT random() FROM daily",
    "SELECT nextval('s')",
    "SELECT * FROM range(3)",
    "SELECT * FROM daily USING SAMPLE 10%",
    "SELECT * FROM duckdb_tables()",
    "SELECT pgc_backend_pid()",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM memory.main.daily",
    "SELECT current_setting('TimeZone')",
    "SELECT uuid()",
    "SELECT * FROM nosuch",
    "SELECT 1; SELECT 2",
    "SELECT * FROM (PIVOT daily ON region USING sum(orders))",
    "SELECT get_current_timestamp()",
    "SELECT age(ts) FROM daily",
    "SELECT current_localtimestamp()",
    "SELECT * FROM daily AS t1, LATERAL (SELECT * FROM range(t1.orders)) AS x",
]


@pytest.fixture(scope="module")
def database() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute(
        "CREATE SCHEMA pitstop; CREATE TABLE pitstop.jobs (name VARCHAR, status VARCHAR); "
        "CREATE TABLE daily (region VARCHAR, revenue DECIMAL(12,2), orders BIGINT, ts TIMESTAMP); "
        "CREATE VIEW v AS SELECT * FROM daily; CREATE SEQUENCE s; "
        "CREATE TEMP MACRO pgc_user() AS 'x'; CREATE TEMP MACRO pgc_backend_pid() AS 1"
    )
    yield con
    con.close()


@pytest.mark.parametrize("sql", KEPT)
def test_a_query_of_tables_and_consistent_functions_is_kept(
    database: duckdb.DuckDBPyConnection, sql: str
) -> None:
    assert SharedResults().cacheable(database, sql)


@pytest.mark.parametrize("sql", RUN_EVERY_TIME)
def test_a_query_that_reads_more_than_the_tables_is_run_every_time(
    database: duckdb.DuckDBPyConnection, sql: str
) -> None:
    assert not SharedResults().cacheable(database, sql)


def daily_table(manager: Manager) -> None:
    with manager.catalog.transaction() as tx:
        tx.execute("CREATE TABLE main.daily (region VARCHAR, orders BIGINT)")
        tx.execute("INSERT INTO main.daily VALUES ('eu', 1), ('us', 2)")


def sink_write(served: Served, region: str, orders: int) -> None:
    """What a DuckDB sink does each batch: rows in one catalog transaction."""
    with served.manager.catalog.transaction() as tx:
        tx.execute("INSERT INTO main.daily VALUES (?, ?)", [region, orders])


@pytest.mark.served(catalog=daily_table)
def test_a_kept_result_is_given_until_the_next_commit_and_never_after(served: Served) -> None:
    query = "SELECT region, sum(orders) FROM daily GROUP BY region ORDER BY region"
    results = served.server.results
    with (
        psycopg.connect(served.url(), autocommit=True) as conn,
        psycopg.connect(served.url(), autocommit=True) as other,
    ):
        first = conn.execute(query).fetchall()
        assert conn.execute(query).fetchall() == first  # a text is judged when it comes again
        hits = results.hits
        assert conn.execute(query).fetchall() == first == [("eu", 1), ("us", 2)]
        assert other.execute(query).fetchall() == first
        assert results.hits == hits + 2  # the same answer, twice, without running the query

        sink_write(served, "eu", 10)
        assert conn.execute(query).fetchall() == [("eu", 11), ("us", 2)]
        sink_write(served, "apac", 5)
        assert other.execute(query).fetchall() == [("apac", 5), ("eu", 11), ("us", 2)]

        # a change made through the server is seen by the next statement of any client
        conn.execute("CREATE MAPPING clicks (page VARCHAR) TYPE Generator OPTIONS ('rate'='1')")
        assert other.execute("SELECT name FROM pitstop.mappings").fetchall() == [("clicks",)]


@pytest.mark.served(catalog=daily_table)
def test_parameters_users_and_volatile_functions_are_never_mixed_up(served: Served) -> None:
    by_region = "SELECT sum(orders) FROM daily WHERE region = %s"
    with psycopg.connect(served.url("alice"), autocommit=True) as alice:
        with psycopg.connect(served.url("bob"), autocommit=True) as bob:
            for _ in range(2):
                assert alice.execute(by_region, ["eu"]).fetchone() == (1,)
                assert alice.execute(by_region, ["us"]).fetchone() == (2,)
                assert alice.execute("SELECT current_user").fetchone() == ("alice",)
                assert bob.execute("SELECT current_user").fetchone() == ("bob",)
            draws = {alice.execute("SELECT random()").fetchone() for _ in range(5)}
            assert len(draws) == 5
            ticks = [alice.execute("SELECT get_current_time()").fetchone() for _ in range(3)]
            assert len(set(ticks)) == 3
