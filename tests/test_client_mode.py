"""pitstop's own front ends as clients of a server: `pitstop run --connect`, `pitstop run/check
--home H` while a server holds H (in this process, over a real socket to a real server), and
`pitstop shell --connect` as a real process on a real pseudo-terminal."""

from __future__ import annotations

from pathlib import Path

import pexpect
import psycopg

from command_helpers import pitstop
from server_helpers import Served
from test_shell import Terminal

SCRIPT = """CREATE MAPPING daily TYPE DuckDB;
CREATE MAPPING orders (order_id BIGINT, region VARCHAR, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
    TYPE File OPTIONS ('path'='{path}', 'format'='json');
SHOW MAPPINGS;
"""


def test_a_script_through_a_server_prints_what_it_prints_locally(served: Served, tmp_path: Path) -> None:
    script = tmp_path / "setup.sql"
    script.write_text(SCRIPT.format(path=tmp_path / "orders"))
    (tmp_path / "orders").mkdir()  # else the first run says it made it, and the second does not
    remote = pitstop("run", "--connect", served.url(), str(script), home=tmp_path / "elsewhere")
    local = pitstop("run", str(script), home=tmp_path / "local")
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr + local.stderr
    assert remote.stdout == local.stdout
    assert "mapping 'daily' created" in remote.stdout
    assert [m.name for m in served.manager.catalog.mappings()] == ["daily", "orders"]
    for fmt in ("json", "csv"):
        remote = pitstop(
            "run", "--connect", served.url(), "-c", "SHOW MAPPINGS", "--format", fmt, home=tmp_path
        )
        local = pitstop("run", "-c", "SHOW MAPPINGS", "--format", fmt, home=tmp_path / "local")
        assert remote.stdout == local.stdout


def test_errors_name_the_line_and_column_of_the_script(served: Served, tmp_path: Path) -> None:
    script = tmp_path / "broken.sql"
    script.write_text(
        "SHOW JOBS;\n\nCREATE MAPPING m (\n    a BIGINT,\n    b VARCHR\n) TYPE DuckDB;\nSHOW JOBS;\n"
    )
    done = pitstop("run", "--connect", served.url(), str(script), home=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"ERROR in {script} at line 5, col 7: "), done.stderr
    assert lines[1].strip() == "b VARCHR" and lines[2].index("^") == lines[1].index("VARCHR")
    went_on = pitstop("run", "--connect", served.url(), "--on-error", "continue", str(script), home=tmp_path)
    assert (
        went_on.returncode == 1 and went_on.stdout.count("0 job(s)") + went_on.stdout.count("(0 rows)") == 2
    )


def test_run_and_check_go_through_the_server_that_holds_the_home(served: Served, tmp_path: Path) -> None:
    home = served.manager.home
    done = pitstop("run", "-c", "CREATE MAPPING daily TYPE DuckDB", home=home)
    assert done.returncode == 0 and "mapping 'daily' created" in done.stdout, done.stderr
    assert [m.name for m in served.manager.catalog.mappings()] == ["daily"]
    plan = tmp_path / "plan.sql"
    plan.write_text("DROP MAPPING daily;\nCREATE MAPPING daily TYPE DuckDB;\nDROP MAPPING nosuch;\n")
    checked = pitstop("check", str(plan), home=home)
    assert checked.returncode == 1
    assert "2 statement(s) OK, 1 error(s)" in checked.stdout
    assert "unknown mapping 'nosuch'" in checked.stderr
    assert [m.name for m in served.manager.catalog.mappings()] == ["daily"]  # check changed nothing


def test_the_shell_over_the_wire_completes_names_made_by_others(served: Served, tmp_path: Path) -> None:
    with psycopg.connect(served.url(), autocommit=True) as conn:
        conn.execute("CREATE MAPPING revenue_by_region TYPE DuckDB")
    term = Terminal(tmp_path / "client-home", "shell", "--connect", served.url())
    term.line("SHOW MAPPINGS;")
    term.expect("revenue_by_region")
    term.expect("pitstop>")
    term.complete("DROP MAPPING reve", "revenue_by_region")
    term.line(";")
    term.expect("mapping 'revenue_by_region' dropped")
    term.line("\\q")
    term.child.expect(pexpect.EOF)
    assert served.manager.catalog.mappings() == []
