"""The `pitstop` command as a user runs it, on a real home: in this process, and as a real process
for one run and one check that end 0 and 1 (the real front end). Spark only where marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from command_helpers import pitstop
from conftest import ROOT

MAPPINGS = """CREATE MAPPING orders (
    order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) TYPE File OPTIONS ('path'='{path}', 'format'='json');
CREATE MAPPING daily_revenue TYPE DuckDB;
"""


def test_run_file_prints_results_and_keeps_the_catalog(tmp_path: Path) -> None:
    script = tmp_path / "setup.sql"
    script.write_text(MAPPINGS.format(path=tmp_path / "orders") + "SHOW MAPPINGS;\n")
    done = pitstop("run", str(script), home=tmp_path / "home", process=True)
    assert done.returncode == 0, done.stderr
    assert "mapping 'orders' created" in done.stdout
    assert "daily_revenue" in done.stdout and "(2 rows)" in done.stdout
    again = pitstop("run", "--format", "json", "-c", "SHOW MAPPINGS", home=tmp_path / "home")
    rows = [json.loads(line) for line in again.stdout.splitlines()]
    assert [r["name"] for r in rows] == ["daily_revenue", "orders"]
    assert rows[1]["type"] == "File"


def test_first_error_stops_the_script_with_its_line_and_column(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text(
        "CREATE MAPPING daily_revenue TYPE DuckDB;\nSHOW MAPPINGS;\n\nDROP JOB nosuch;\nSHOW JOBS;\n"
    )
    done = pitstop("run", str(script), home=tmp_path / "home", process=True)
    assert done.returncode == 1
    assert done.stderr.startswith(f"ERROR in {script} at line 4, col 10: unknown job 'nosuch'")
    assert "SHOW JOBS" not in done.stdout and "0 job(s)" not in done.stdout


def test_malformed_script_changes_nothing(tmp_path: Path) -> None:
    bad = "CREATE MAPPING daily_revenue TYPE DuckDB;\nCREATE MAPPING x TYPE DuckDB OPTIONS ('a'=);\n"
    done = pitstop("run", "-", stdin=bad, home=tmp_path / "home")
    assert done.returncode == 1
    assert done.stderr.startswith("ERROR at line 2, col ")
    # stdin runs statements as they arrive, so the first one ran; a file is parsed whole first.
    script = tmp_path / "bad.sql"
    script.write_text(bad)
    other = tmp_path / "other-home"
    done = pitstop("run", str(script), home=other)
    assert done.returncode == 1 and "line 2" in done.stderr
    shown = pitstop("run", "--format", "csv", "-c", "SHOW MAPPINGS", home=other)
    assert shown.stdout.strip() == "name,type,columns,options"


def test_pitstop_home_comes_from_the_environment(tmp_path: Path) -> None:
    home = tmp_path / "env-home"
    done = pitstop("run", "-c", "CREATE MAPPING s TYPE Console", env={"PITSTOP_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert (home / "catalog.duckdb").is_file()


def test_check_plans_without_running(tmp_path: Path) -> None:
    good = tmp_path / "good.sql"
    good.write_text(
        MAPPINGS.format(path=tmp_path / "orders")
        + """CREATE JOB revenue AS INSERT INTO daily_revenue
        SELECT window_start, window_end, region, SUM(amount) AS revenue
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
        GROUP BY window_start, window_end, region;
        AWAIT JOB revenue;
        """
    )
    bad = tmp_path / "bad.sql"
    # Files are checked in order: bad.sql uses the mappings good.sql creates.
    bad.write_text(
        "SHOW JOBS;\n\nCREATE JOB r AS INSERT INTO orders\n"
        "SELECT region, COUNT(*) AS n FROM orders GROUP BY region;\n"
    )
    home = tmp_path / "home"
    done = pitstop("check", str(good), home=home, process=True)
    assert done.returncode == 0, done.stderr
    assert "4 statement(s) OK" in done.stdout
    assert not home.exists()  # nothing was created
    done = pitstop("check", str(good), str(bad), home=home, process=True)
    assert done.returncode == 1
    assert "is a running aggregate" in done.stderr and "line 3, col 1" in done.stderr
    assert "mapping 'orders' is of type File, which only appends" in done.stderr


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_an_explain_s_verdict_follows_its_rows_in_a_script(tmp_path: Path, fmt: str) -> None:
    """A result with rows printed its rows alone: EXPLAIN's verdict (and EXPLAIN ANALYZE's summary,
    which names the diff's tables) was never shown by `pitstop run` or the shell, only sent to a
    server's clients as a notice. After the rows in a table; on stderr beside csv or json rows."""
    explain = (
        "EXPLAIN CREATE JOB revenue AS INSERT INTO daily_revenue SELECT window_start, window_end, region, "
        "SUM(amount) AS revenue FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, region;"
    )
    script = tmp_path / "explain.sql"
    script.write_text(MAPPINGS.format(path=tmp_path / "orders") + explain)
    done = pitstop("run", "--format", fmt, str(script), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    verdict = "CREATE JOB revenue would start 1 branch(es); nothing was started"
    said = done.stdout if fmt == "table" else done.stderr
    assert "daily_revenue.aggregate" in done.stdout
    assert said.strip().endswith(verdict), said
    if fmt != "table":
        assert verdict not in done.stdout  # the csv or json stays what it says it is


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_select_over_the_catalog_in_each_format(tmp_path: Path, fmt: str) -> None:
    done = pitstop("run", "--format", fmt, "-c", "SELECT 41 + 1 AS answer", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "42" in done.stdout and "answer" in done.stdout


def test_check_passes_on_every_example_in_order(tmp_path: Path) -> None:
    examples = sorted(str(p) for p in (ROOT / "examples" / "sql").glob("*.sql"))
    assert len(examples) >= 2
    done = pitstop("check", *examples, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("statement(s) OK") == len(examples)


def test_check_refuses_an_incompatible_update_in_a_later_file(tmp_path: Path) -> None:
    start = ROOT / "examples" / "sql" / "01_start.sql"
    update = (ROOT / "examples" / "sql" / "02_update.sql").read_text()
    bad = tmp_path / "02_bad.sql"
    bad.write_text(update.replace("INTERVAL '24' HOUR", "INTERVAL '7' HOUR"))
    done = pitstop("check", str(start), str(bad), home=tmp_path / "home")
    assert done.returncode == 1
    assert "stage 'daily_revenue.aggregate': refused" in done.stderr


def test_check_reports_every_error_in_a_file(tmp_path: Path) -> None:
    script = tmp_path / "many.sql"
    script.write_text(
        MAPPINGS.format(path=tmp_path / "orders")
        + "CREATE JOBS foo AS INSERT INTO x SELECT 1;\n"
        + "CREATE JOB j AS INSERT INTO daily_revenue SELECT order_id FROM ordrs;\n"
        + "DORP JOB j;\n"
    )
    done = pitstop("check", str(script), home=tmp_path / "home")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if ": ERROR at line" in line]
    assert [e.split("ERROR at ")[1].split(":")[0] for e in errors] == [
        "line 6, col 8",
        "line 7, col 1",
        "line 8, col 1",
    ]
    assert "did you mean JOB?" in errors[0] and "did you mean 'orders'?" in errors[1]
    assert "did you mean DROP?" in errors[2]
    assert "2 statement(s) OK, 3 error(s)" in done.stdout


@pytest.mark.spark
def test_a_failed_job_is_one_sentence_on_the_terminal_and_whole_in_the_homes_log(tmp_path: Path) -> None:
    """`pitstop run` printed ~100 lines of py4j trace per failed job, and `<home>/logs/pitstop.log`,
    which the README promises for the whole error, existed only under `pitstop serve`."""
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.json").write_text('{"id": 1, "ts": "2024-01-01 00:00:00"}\n{"id": oops\n')
    script = tmp_path / "fail.sql"
    script.write_text(
        f"CREATE MAPPING src (id BIGINT, ts TIMESTAMP) TYPE File OPTIONS ('path'='{data}', 'format'='json', "
        "'onError'='fail');\nCREATE MAPPING out TYPE DuckDB;\n"
        "CREATE JOB j AS INSERT INTO out SELECT id, ts FROM src;\nAWAIT JOB j;\n"
    )
    home = tmp_path / "home"
    done = pitstop("run", str(script), home=home)
    assert done.returncode == 1
    log = home / "logs" / "pitstop.log"
    lines = done.stderr.strip().split("\n")
    assert len(lines) <= 6, done.stderr
    assert f"INSERT INTO out failed (more; the whole text is in {log.resolve()})" in done.stderr
    assert "met a malformed record in file" in done.stderr and "line 2" in done.stderr
    whole = log.read_text()
    assert "Traceback" in whole and "RejectedRecordError: mapping 'src' met a malformed record" in whole
