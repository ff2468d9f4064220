"""Script mode as a user runs it: files and pipes, both error policies, exit codes, variables,
--echo. A real home, the command in this process, and statements piped into a real `pitstop`
process; no Spark needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from command_helpers import pitstop
from pitstop.driver import parse_variables, substitute
from pitstop.errors import SqlError

MIXED = """CREATE MAPPING first_sink TYPE Console;
DROP JOB nosuch;
CREATE MAPPING second_sink TYPE Console;
SHOW MAPPINGS;
"""


def mapping_names(home: Path) -> list[str]:
    shown = pitstop("run", "--format", "json", "-c", "SHOW MAPPINGS", home=home)
    return [json.loads(line)["name"] for line in shown.stdout.splitlines() if line]


def test_piped_statements_run_without_prompts_or_colours(tmp_path: Path) -> None:
    done = pitstop(
        home=tmp_path / "home", stdin="CREATE MAPPING s TYPE Console;\nSELECT 6 * 7 AS n;\n", process=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "mapping 's' created"
    assert "| 42 |" in done.stdout
    assert "\x1b[" not in done.stdout + done.stderr  # no escape sequences when not a terminal
    assert "pitstop>" not in done.stdout


def test_on_error_stop_ends_at_the_first_error_with_exit_1(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = pitstop("run", "-", home=home, stdin=MIXED)
    assert done.returncode == 1
    assert done.stderr.startswith("ERROR at line 2, col 10: unknown job 'nosuch'")
    assert mapping_names(home) == ["first_sink"]


def test_on_error_continue_runs_later_statements_but_still_exits_1(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = pitstop("run", "-", "--on-error", "continue", home=home, stdin=MIXED)
    assert done.returncode == 1
    assert "ERROR at line 2, col 10: unknown job 'nosuch'" in done.stderr
    assert "mapping 'second_sink' created" in done.stdout and "(2 rows)" in done.stdout
    assert mapping_names(home) == ["first_sink", "second_sink"]


def test_on_error_continue_in_a_file_skips_a_malformed_statement_and_names_the_file(tmp_path: Path) -> None:
    script = tmp_path / "jobs.sql"
    script.write_text(
        "CREATE MAPPING a TYPE Console;\n\n-- a comment\nCREATE MAPPING b TYPE Nowhere;\n"
        "CREATE MAPPING c TYPE Console;\n"
    )
    home = tmp_path / "home"
    done = pitstop("run", str(script), "--on-error", "continue", home=home)
    assert done.returncode == 1
    assert done.stderr.startswith(f"ERROR in {script} at line 4, col ")
    assert mapping_names(home) == ["a", "c"]
    # The default policy parses the whole file first: a malformed file changes nothing.
    other = tmp_path / "other"
    done = pitstop("run", str(script), home=other)
    assert done.returncode == 1 and "line 4" in done.stderr
    assert mapping_names(other) == []


def test_every_error_of_a_file_names_the_file_in_a_script_and_its_check(tmp_path: Path) -> None:
    """The name rule's refusal of a DROP comes from the executor, not the parser: `pitstop run
    FILE` used to name the file for parse errors only ("ERROR at line 2" here). `pitstop check`
    and the shell's `\\i` (test_shell.py) run it through the same driver."""
    script = tmp_path / "drop.sql"
    script.write_text('SHOW JOBS;\nDROP JOB "a/b";\n')
    home = tmp_path / "home"
    done = pitstop("run", str(script), home=home)
    assert done.returncode == 1
    assert done.stderr.startswith(f"ERROR in {script} at line 2, col 10: job name 'a/b' is not allowed")
    checked = pitstop("check", str(script), home=home)
    assert f"{script}: ERROR at line 2, col 10: job name 'a/b'" in checked.stderr


def test_every_statement_succeeding_exits_0_even_with_continue(tmp_path: Path) -> None:
    done = pitstop(
        "run", "-", "--on-error", "continue", home=tmp_path / "home", stdin="SELECT 1 AS a;\nSELECT 2 AS b;\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_variables_are_substituted_and_an_undefined_one_is_an_error(tmp_path: Path) -> None:
    script = tmp_path / "vars.sql"
    script.write_text("CREATE MAPPING ${name} TYPE Console;\nSELECT '${greeting}' AS g;\n")
    home = tmp_path / "home"
    done = pitstop("run", str(script), "-v", "name=out", "-v", "greeting=hi=there", home=home)
    assert done.returncode == 0, done.stderr
    assert "mapping 'out' created" in done.stdout and "| hi=there |" in done.stdout
    done = pitstop("run", str(script), "-v", "name=out2", home=home)
    assert done.returncode == 1
    assert done.stderr.startswith(f"ERROR in {script} at line 2, col 9: undefined variable ${{greeting}}")
    assert mapping_names(home) == ["out"]  # parsed whole first: nothing of the file ran
    done = pitstop("run", "-c", "SELECT 1", "-v", "novalue", home=home)
    assert done.returncode == 2 and "expected name=value" in done.stderr


def test_echo_prints_each_statement_before_its_result(tmp_path: Path) -> None:
    done = pitstop(
        "run", "-", "--echo", home=tmp_path / "home", stdin="SELECT 1 AS a;\nCREATE MAPPING s TYPE Console;\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "SELECT 1 AS a;"
    assert lines.index("CREATE MAPPING s TYPE Console;") == lines.index("mapping 's' created") - 1


def test_errors_suggest_a_close_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = pitstop(
        "run", "-", home=home, stdin="CREATE MAPPING daily_revenue TYPE DuckDB;\nDROP MAPPING daily_revenu;\n"
    )
    assert done.returncode == 1
    assert re.search(r"unknown mapping 'daily_revenu'\W+did you mean 'daily_revenue'\?", done.stderr)


def test_substitute_keeps_positions_and_names_the_variable() -> None:
    assert substitute("SELECT ${a}, ${a}", {"a": "1"}) == "SELECT 1, 1"
    with pytest.raises(SqlError) as caught:
        substitute("SELECT 1;\n  SELECT ${missing};", {}, "x.sql")
    err = caught.value
    assert (err.line, err.col, err.file) == (2, 10, "x.sql")
    assert parse_variables(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ValueError):
        parse_variables(["1bad=2"])
