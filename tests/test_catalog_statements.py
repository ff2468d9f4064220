"""Catalog statements through the executor, on a real DuckDB catalog in a tmp home.

None of these statements may start Spark: every test runs with Spark's start replaced by a
failure, and checks ``manager.spark_started`` afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import orders_mapping, revenue_select, run
from pitstop.driver import Driver
from pitstop.errors import (
    CatalogError,
    CompatibilityError,
    PitstopError,
    PlanError,
    SqlError,
    UnknownObjectError,
)
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.manager import base as manager_base
from pitstop.settings import Settings

SINK = "CREATE MAPPING daily_revenue TYPE DuckDB;"


@pytest.fixture(autouse=True)
def _spark_never_starts(manager: Manager, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a catalog statement tried to start Spark")

    monkeypatch.setattr(manager_base, "spark_session", refuse)
    yield
    assert manager.spark_started is False


def error_of(manager: Manager, script: str, kind: type[PitstopError] = PitstopError) -> PitstopError:
    with pytest.raises(kind) as caught:
        run(manager, script)
    return caught.value


def mapping_names(manager: Manager) -> list[str]:
    return [row[0] for row in run(manager, "SHOW MAPPINGS;")[-1].rows]


def job_names(manager: Manager) -> list[str]:
    return [row[0] for row in run(manager, "SHOW JOBS;")[-1].rows]


def revenue_job(name: str = "revenue", header: str = "") -> str:
    return f"CREATE JOB {name} {header} AS INSERT INTO daily_revenue {revenue_select(repr('1') + ' HOUR')};"


# -- mappings --------------------------------------------------------------------------------------
def test_created_mapping_is_listed_with_its_columns_and_options(manager: Manager, tmp_path: Path) -> None:
    results = run(manager, orders_mapping(tmp_path / "orders") + "SHOW MAPPINGS;")
    assert results[0].message == (
        f"mapping 'orders' created; its folder {tmp_path / 'orders'} did not exist and was made, empty "
        "(check the path if you meant another)"
    )
    assert (tmp_path / "orders").is_dir()
    again = run(
        manager, orders_mapping(tmp_path / "orders").replace("CREATE MAPPING", "CREATE OR REPLACE MAPPING")
    )
    assert again[0].message == "mapping 'orders' replaced"  # the folder is there now: nothing to say
    listing = results[1]
    assert listing.columns == ("name", "type", "columns", "options")
    assert len(listing.rows) == 1
    name, kind, columns, options = listing.rows[0]
    assert (name, kind) == ("orders", "File")
    assert columns == "order_id BIGINT, region STRING, amount DECIMAL(12, 2), ts TIMESTAMP"
    assert f"path={tmp_path / 'orders'}" in options
    assert "format=json" in options
    assert (tmp_path / "orders").is_dir()


def test_creating_a_mapping_twice_points_to_create_or_replace(manager: Manager, tmp_path: Path) -> None:
    run(manager, orders_mapping(tmp_path / "orders"))
    err = error_of(manager, orders_mapping(tmp_path / "orders"), CatalogError)
    assert "mapping 'orders' already exists" in err.message
    assert "CREATE OR REPLACE MAPPING" in err.message


def test_if_not_exists_keeps_the_mapping_and_or_replace_changes_it(manager: Manager, tmp_path: Path) -> None:
    run(manager, "CREATE MAPPING clicks (n BIGINT) TYPE Generator;")
    kept = run(manager, "CREATE MAPPING IF NOT EXISTS clicks (n INT, m INT) TYPE Generator;")
    assert "already exists; left as it is" in kept[0].message
    assert manager.catalog.get_mapping("clicks").columns[0].type == "BIGINT"

    replaced = run(manager, "CREATE OR REPLACE MAPPING clicks (n INT, m INT) TYPE Generator;")
    assert replaced[0].message == "mapping 'clicks' replaced"
    assert [c.name for c in manager.catalog.get_mapping("clicks").columns] == ["n", "m"]
    assert mapping_names(manager) == ["clicks"]


def test_drop_mapping_removes_it(manager: Manager) -> None:
    run(manager, SINK)
    assert run(manager, "DROP MAPPING daily_revenue;")[0].message == "mapping 'daily_revenue' dropped"
    assert mapping_names(manager) == []


def test_dropping_an_unknown_mapping_names_it(manager: Manager) -> None:
    err = error_of(manager, "DROP MAPPING nowhere;", CatalogError)
    assert "unknown mapping 'nowhere'" in err.message


def test_drop_mapping_if_exists_accepts_an_unknown_mapping(manager: Manager) -> None:
    assert "nothing dropped" in run(manager, "DROP MAPPING IF EXISTS nowhere;")[0].message


def test_unknown_mapping_type_is_refused_listing_the_known_types(manager: Manager) -> None:
    err = error_of(manager, "CREATE MAPPING k (n INT) TYPE Pulsar;", SqlError)
    assert "unknown mapping type 'Pulsar'" in err.message
    assert "File, DuckDB, Generator, Console, Kafka or Postgres" in err.message
    assert (err.line, err.col) == (1, 31)
    assert mapping_names(manager) == []


def test_file_mapping_without_a_path_is_refused(manager: Manager) -> None:
    err = error_of(manager, "CREATE MAPPING orders (n INT) TYPE File OPTIONS ('format'='json');", PlanError)
    assert "mapping 'orders': TYPE File needs OPTIONS ('path'=" in err.message
    assert mapping_names(manager) == []


# -- jobs: refused before anything starts ----------------------------------------------------------
def _assert_no_job_started(manager: Manager) -> None:
    assert job_names(manager) == []
    assert not (manager.home / "runs").exists()


def test_create_job_with_an_unknown_mapping_names_it_and_starts_nothing(
    manager: Manager, tmp_path: Path
) -> None:
    run(manager, orders_mapping(tmp_path / "orders"))
    err = error_of(manager, revenue_job(), PlanError)
    assert "unknown mapping 'daily_revenue' (used as a sink)" in err.message
    _assert_no_job_started(manager)


def test_create_job_from_an_unknown_snapshot_names_it_and_starts_nothing(
    manager: Manager, tmp_path: Path
) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + SINK)
    err = error_of(manager, revenue_job(header="FROM SNAPSHOT revenue_v1"), CatalogError)
    assert "unknown snapshot 'revenue_v1'" in err.message
    err = error_of(manager, revenue_job(header="OPTIONS ('initialSnapshotName'='revenue_v2')"), CatalogError)
    assert "unknown snapshot 'revenue_v2'" in err.message
    _assert_no_job_started(manager)


def test_create_job_with_an_unknown_option_names_it_and_starts_nothing(
    manager: Manager, tmp_path: Path
) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + SINK)
    err = error_of(manager, revenue_job(header="OPTIONS ('snapshotInterval'='10')"), PlanError)
    assert "unknown job option 'snapshotInterval'" in err.message
    assert "snapshotIntervalMillis" in err.message
    _assert_no_job_started(manager)


def test_dropping_an_unknown_job_names_it(manager: Manager) -> None:
    err = error_of(manager, "DROP JOB revenue;", CatalogError)
    assert "unknown job 'revenue'" in err.message
    err = error_of(manager, "DROP JOB revenue WITH SNAPSHOT revenue_v1;", CatalogError)
    assert "unknown job 'revenue'" in err.message


def test_drop_job_if_exists_accepts_an_unknown_job(manager: Manager) -> None:
    assert "nothing dropped" in run(manager, "DROP JOB IF EXISTS revenue;")[0].message


def test_dropping_an_unknown_snapshot_names_it(manager: Manager) -> None:
    err = error_of(manager, "DROP SNAPSHOT revenue_v1;", CatalogError)
    assert "unknown snapshot 'revenue_v1'" in err.message
    assert "nothing dropped" in run(manager, "DROP SNAPSHOT IF EXISTS revenue_v1;")[0].message


def test_awaiting_an_unknown_job_names_it(manager: Manager) -> None:
    err = error_of(manager, "AWAIT JOB revenue TIMEOUT INTERVAL '1' SECOND;", CatalogError)
    assert "unknown job 'revenue'" in err.message


def test_show_jobs_and_snapshots_are_empty_on_a_new_home(manager: Manager) -> None:
    jobs, snapshots = run(manager, "SHOW JOBS; SHOW SNAPSHOTS;")
    assert (jobs.message, jobs.rows) == ("0 job(s)", ())
    assert (snapshots.message, snapshots.rows) == ("0 snapshot(s)", ())


# -- scripts ---------------------------------------------------------------------------------------
def test_a_malformed_statement_stops_the_script_before_anything_runs(
    manager: Manager, tmp_path: Path
) -> None:
    script = (
        "CREATE MAPPING clicks (n BIGINT) TYPE Generator;\n"
        "CREATE MAPPING daily_revenue TYPE DuckDB;\n"
        "CREATE MAPING broken TYPE DuckDB;\n"
    )
    err = error_of(manager, script, SqlError)
    assert (err.line, err.col) == (3, 8)
    assert err.source_line == "CREATE MAPING broken TYPE DuckDB;"
    assert mapping_names(manager) == []


def test_an_execution_error_carries_the_statement_line_and_keeps_its_class(
    manager: Manager, tmp_path: Path
) -> None:
    script = "CREATE MAPPING daily_revenue TYPE DuckDB;\n\n  DROP MAPPING nowhere;\nSHOW MAPPINGS;\n"
    err = error_of(manager, script)
    assert type(err) is UnknownObjectError  # a CatalogError
    assert (err.line, err.col) == (3, 16)  # under the name it is about (was: the statement's start)
    assert str(err).startswith("ERROR at line 3, col 16: unknown mapping 'nowhere'")
    assert str(err).endswith("\n    DROP MAPPING nowhere\n" + " " * 17 + "^")
    assert mapping_names(manager) == ["daily_revenue"]  # statements before the error ran

    plan_err = error_of(
        manager, "SHOW JOBS;\nCREATE JOB j AS INSERT INTO daily_revenue SELECT x FROM nowhere;"
    )
    assert type(plan_err) is PlanError
    assert plan_err.line == 2
    assert "unknown mapping 'nowhere'" in plan_err.message


def test_check_mode_plans_against_mappings_of_the_same_script_and_writes_nothing(
    manager: Manager, tmp_path: Path
) -> None:
    script = orders_mapping(tmp_path / "orders") + SINK + revenue_job() + "AWAIT JOB revenue;"
    checker = Driver(Executor(None, manager.catalog))
    results = [result for _, result in checker.run_script(script)]
    assert [r.message for r in results] == ["OK"] * 4
    assert manager.catalog.mappings() == []
    assert manager.catalog.jobs() == []
    assert not (tmp_path / "orders").exists()
    assert not (manager.home / "runs").exists()


def test_check_mode_refuses_dropping_a_mapping_a_checked_job_uses(manager: Manager, tmp_path: Path) -> None:
    script = orders_mapping(tmp_path / "orders") + SINK + revenue_job() + "DROP MAPPING daily_revenue;"
    with pytest.raises(CatalogError) as caught:
        list(Driver(Executor(None, manager.catalog)).run_script(script))
    assert "mapping 'daily_revenue' is used by job 'revenue'" in caught.value.message


def test_check_mode_refuses_a_job_that_would_fail(manager: Manager, tmp_path: Path) -> None:
    script = orders_mapping(tmp_path / "orders") + SINK + "DROP MAPPING orders;\n" + revenue_job()
    with pytest.raises(PlanError) as caught:
        list(Driver(Executor(None, manager.catalog)).run_script(script))
    assert "unknown mapping 'orders' (used as a source)" in caught.value.message
    assert manager.catalog.mappings() == []


def test_select_over_the_catalog_answers_through_duckdb(manager: Manager, tmp_path: Path) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + SINK)
    jobs = run(manager, "SELECT count(*) AS n FROM pitstop.jobs;")[0]
    assert (jobs.columns, jobs.rows) == (("n",), ((0,),))
    names = run(manager, "SELECT name, type FROM pitstop.mappings ORDER BY name;")[0]
    assert names.rows == (("daily_revenue", "duckdb"), ("orders", "file"))


def test_a_select_that_duckdb_rejects_is_a_plan_error(manager: Manager) -> None:
    err = error_of(manager, "SELECT * FROM no_such_table;", PlanError)
    assert "query failed in DuckDB" in err.message
    assert "no_such_table" in err.message


def check(manager: Manager, script: str) -> list[str]:
    return [result.message for _, result in Driver(Executor(None, manager.catalog)).run_script(script)]


def test_check_mode_follows_a_pit_stop_through_the_script(manager: Manager, tmp_path: Path) -> None:
    setup = orders_mapping(tmp_path / "orders") + SINK + revenue_job()
    stop = "DROP JOB revenue WITH SNAPSHOT revenue_v1;\n"
    resized = revenue_job(header="FROM SNAPSHOT revenue_v1").replace("'1' HOUR", "'2' HOUR")
    assert check(manager, setup + stop + resized + "AWAIT JOB revenue;") == ["OK"] * 6

    refused = revenue_job(header="FROM SNAPSHOT revenue_v1").replace("'1' HOUR", "'90' MINUTE")
    with pytest.raises(CompatibilityError) as caught:
        check(manager, setup + stop + refused)
    assert "cannot start job 'revenue' from snapshot 'revenue_v1'" in caught.value.message
    assert "INTERVAL '1' HOUR" in caught.value.message
    assert "INTERVAL '90' MINUTE" in caught.value.message
    assert caught.value.line == setup.count("\n") + 2

    assert manager.catalog.jobs() == [] and manager.catalog.snapshots() == []
    assert manager.catalog.mappings() == []


def test_check_mode_refuses_to_await_a_job_the_script_dropped(manager: Manager, tmp_path: Path) -> None:
    script = (
        orders_mapping(tmp_path / "orders") + SINK + revenue_job() + "DROP JOB revenue;\nAWAIT JOB revenue;"
    )
    with pytest.raises(CatalogError) as caught:
        check(manager, script)
    assert "unknown job 'revenue'" in caught.value.message


# -- EXPLAIN, views, SET, suggestions (still no Spark) -----------------------------------------------
def test_explain_shows_each_branch_and_starts_nothing(manager: Manager, tmp_path: Path) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + SINK + "CREATE MAPPING copies TYPE DuckDB;")
    explained = run(
        manager,
        f"""EXPLAIN CREATE JOB revenue AS BEGIN
            INSERT INTO daily_revenue {revenue_select("'1' HOUR")};
            INSERT INTO copies SELECT order_id, region FROM orders WHERE amount > 5;
        END;""",
    )[0]
    assert "nothing was started" in explained.message
    first, second = explained.rows
    assert first[3] == "daily_revenue.aggregate" and first[7] == "starts empty"
    assert first[4] == "TUMBLE(ts, INTERVAL '1' HOUR)" and first[5] == "region STRING"
    assert second[3] is None and second[7] == "stateless"
    assert job_names(manager) == []
    assert not (manager.home / "runs").exists()


def test_unknown_names_get_a_did_you_mean(manager: Manager, tmp_path: Path) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + SINK)
    err = error_of(manager, "DROP MAPPING ordrs;", CatalogError)
    assert "unknown mapping 'ordrs' (did you mean 'orders'?)" in err.message
    err = error_of(manager, revenue_job().replace("TABLE orders", "TABLE order"), PlanError)
    assert "unknown mapping 'order' (did you mean 'orders'?)" in err.message
    err = error_of(manager, "SET 'trigger_mz' = '100';", PlanError)
    assert "did you mean 'trigger_ms'?" in err.message
    err = error_of(manager, revenue_job(header="OPTIONS ('processingGuarante'='exactlyOnce')"), PlanError)
    assert "did you mean 'processingGuarantee'?" in err.message


def test_views_are_checked_when_created_and_listed(manager: Manager, tmp_path: Path) -> None:
    run(manager, orders_mapping(tmp_path / "orders") + SINK)
    made = run(manager, "CREATE VIEW big AS SELECT region, amount, ts FROM orders WHERE amount > 10;")[0]
    assert made.message == "view 'big' created"
    err = error_of(manager, "CREATE VIEW bad AS SELECT region FROM nosuch;", PlanError)
    assert "unknown mapping 'nosuch'" in err.message
    err = error_of(manager, "CREATE VIEW agg AS SELECT region, COUNT(*) AS n FROM orders GROUP BY region;")
    assert "aggregates" in err.message
    err = error_of(manager, "CREATE VIEW big AS SELECT * FROM orders;", CatalogError)
    assert "CREATE OR REPLACE VIEW" in err.message
    # A job reads the view; the filter and projection run before its window.
    explained = run(
        manager,
        f"EXPLAIN CREATE JOB r AS INSERT INTO daily_revenue {revenue_select(repr('1') + ' HOUR')};".replace(
            "TABLE orders", "TABLE big"
        ),
    )[0]
    assert explained.rows[0][1] == "orders"
    assert [r[0] for r in run(manager, "SHOW VIEWS;")[0].rows] == ["big"]
    run(manager, "DROP VIEW big;")
    assert run(manager, "SHOW VIEWS;")[0].rows == ()


def test_set_changes_session_settings(manager: Manager) -> None:
    assert run(manager, "SET 'trigger_ms' = '250';")[0].message == "trigger_ms = 250"
    assert manager.settings.trigger_ms == 250
    err = error_of(manager, "SET 'execution.savepoint.path' = '/tmp/sp';", PlanError)
    assert "CREATE JOB ... FROM SNAPSHOT" in err.message
    err = error_of(manager, "SET 'trigger_ms' = 'soon';", PlanError)
    assert "it takes a whole number > 0" in err.message


def test_listings_read_from_the_catalog_change_with_every_commit(tmp_path: Path) -> None:
    # SHOW JOBS / SHOW SNAPSHOTS listings are kept between commits (a server's many clients ask
    # for them over and over): each write must be seen by the very next read.
    from datetime import datetime

    from pitstop.catalog.rows import Job, Mapping, Reject, Run
    from pitstop.catalog.store import Catalog

    catalog = Catalog(tmp_path / "catalog.duckdb")
    try:
        assert catalog.jobs() == [] and catalog.reject_counts() == {}
        at = datetime(2026, 1, 1)
        catalog.create_job(
            Job("j", "sql", "RUNNING", "", "r1", None, at, at), Run("r1", "j", "f", {}, None, at)
        )
        assert [(j.name, j.status) for j in catalog.jobs()] == [("j", "RUNNING")]
        catalog.jobs().clear()  # a caller's copy: the kept listing is not touched
        catalog.set_job_status("j", "FAILED", "why")
        assert [(j.name, j.status, j.detail) for j in catalog.jobs()] == [("j", "FAILED", "why")]
        catalog.add_rejects("j", "orders", "r1", [Reject("a.json", 3, "x", 1, "bad")])
        assert catalog.reject_counts() == {"j": 1}
        with pytest.raises(RuntimeError), catalog.transaction() as tx:  # rolled back: nothing changes
            tx.execute("DELETE FROM pitstop.jobs")
            raise RuntimeError("no")
        assert [j.name for j in catalog.jobs()] == ["j"]
        catalog.delete_job("j")
        assert catalog.jobs() == []
        catalog.put_mapping(Mapping("m", "file", (), None, {"path": "/in"}))
        assert [(m.name, m.options) for m in catalog.mappings()] == [("m", {"path": "/in"})]
        catalog.put_mapping(Mapping("m", "file", (), None, {"path": "/other"}), replace=True)
        assert [(m.name, m.options) for m in catalog.mappings()] == [("m", {"path": "/other"})]
        catalog.drop_mapping("m")
        assert catalog.mappings() == []
    finally:
        catalog.close()


@pytest.mark.parametrize("value", ["abc", "0", "-5", "0.5"])
def test_a_trigger_interval_is_a_whole_number_of_milliseconds_from_the_environment_and_set_alike(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    """PITSTOP_TRIGGER_MS=abc raised a bare ValueError (a traceback), =0 was taken, and
    SET 'trigger_ms' = '0.5' was taken and became 0: one parser, declared with the setting, now."""
    monkeypatch.setenv("PITSTOP_TRIGGER_MS", value)
    with pytest.raises(PitstopError, match=f"PITSTOP_TRIGGER_MS is '{value}'; it takes a whole number > 0"):
        Settings.resolve(tmp_path)
    monkeypatch.setenv("PITSTOP_TRIGGER_MS", "300")
    assert Settings.resolve(tmp_path).trigger_ms == 300
    executor = Driver(Executor(None))
    with pytest.raises(PlanError, match=f"setting 'trigger_ms' is '{value}'; it takes a whole number > 0"):
        list(executor.run_script(f"SET 'trigger_ms' = '{value}'"))
    assert [r.message for _, r in executor.run_script("SET 'trigger_ms' = '250'")] == ["trigger_ms = 250"]
