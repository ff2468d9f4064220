"""Every statement is declared once (pitstop.sql.statements), and what reads the declarations
agrees: the executor runs each, the parser's error lists each, a reader's role follows it, the
shell's \\help knows it. No Spark."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from sqlglot import exp

from conftest import run
from pitstop.driver import Driver
from pitstop.errors import SqlError
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.server import auth
from pitstop.shell.syntax import STATEMENTS as SHOWN
from pitstop.shell.syntax import find_statement
from pitstop.sql import nodes, statements
from pitstop.sql.parser import parse_script

NOT_STATEMENTS = {nodes.Option, nodes.Watermark, nodes.WindowTvf, nodes.ImposeOrder}


def test_every_statement_node_is_declared_once_with_a_handler_the_executor_has() -> None:
    declared = [n for s in statements.STATEMENTS for n in s.nodes]
    assert len(declared) == len(set(declared))
    defined = {c for _, c in inspect.getmembers(nodes, inspect.isclass) if issubclass(c, exp.Expression)} - {
        exp.Expression
    }
    assert defined - NOT_STATEMENTS <= set(declared)
    for stmt in statements.STATEMENTS:
        assert callable(getattr(Executor, stmt.handler, None)), stmt.name


def test_the_unknown_statement_error_lists_what_help_lists() -> None:
    with pytest.raises(SqlError) as err:
        parse_script("UPSERT INTO x VALUES (1)")
    said = str(err.value)
    for stmt in SHOWN:
        assert stmt.name in said
    assert "CREATE VIEW, DROP VIEW, SHOW VIEWS, SET, EXPLAIN, EXPLAIN ANALYZE, DROP DIFF and SELECT" in said


def test_help_knows_views_and_set_and_every_mapping_type() -> None:
    """\\help CREATE VIEW said "no statement named CREATE VIEW", \\help SET too; CREATE MAPPING's
    syntax left out Kafka and Postgres."""
    view = find_statement("create view")
    assert view is not None and view.syntax.startswith("CREATE [OR REPLACE] VIEW name AS SELECT")
    setting = find_statement("SET")
    assert setting is not None and "SET 'trigger_ms' = '200'" in setting.syntax
    mapping = find_statement("CREATE MAPPING")
    assert mapping is not None and "TYPE File|DuckDB|Generator|Console|Kafka|Postgres" in mapping.syntax


def test_a_reader_may_run_exactly_the_statements_that_change_nothing() -> None:
    def node(sql: str) -> exp.Expression:
        return parse_script(sql)[0].node

    for sql in (
        "SELECT 1",
        "SELECT 1 INTERSECT SELECT 1",
        "VALUES (1)",
        "SHOW VIEWS",
        "SET 'trigger_ms' = '300'",
    ):
        assert auth.allowed("reader", node(sql)), sql
    for sql in ("CREATE VIEW v AS SELECT 1 AS a", "DROP VIEW v", "DROP SNAPSHOT s", "ALTER JOB j SUSPEND"):
        assert not auth.allowed("reader", node(sql)) and auth.allowed("admin", node(sql)), sql


def test_every_query_form_runs_on_the_one_select_path(manager: Manager) -> None:
    """``SELECT 1 INTERSECT SELECT 1`` was "statement Intersect is not supported yet" and
    ``VALUES (1)`` an unknown statement, in pitstop run and the shell (both ran over the wire)."""
    results = run(
        manager, "SELECT 1 AS a INTERSECT SELECT 1; SELECT 1 AS a EXCEPT SELECT 2; VALUES (1), (2);"
    )
    assert [r.rows for r in results] == [((1,),), ((1,),), ((1,), (2,))]


def test_check_mode_accepts_every_query_form(tmp_path: Path) -> None:
    ex = Driver(Executor(None))
    ok, errors = ex.check("SELECT 1 INTERSECT SELECT 1; VALUES (1);")
    assert (ok, errors) == (2, [])
