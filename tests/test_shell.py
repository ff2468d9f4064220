"""The interactive shell, driven through a real pseudo-terminal: typing, Enter on complete
statements only, Tab completion, Ctrl-C, special commands. No Spark is needed here."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pitstop.errors import PitstopError
from pitstop.executor import Result
from pitstop.shell.completion import CatalogNames, PitstopCompleter
from pitstop.shell.keys import ready_to_submit
from pitstop.shell.suggest import with_suggestion

pexpect = pytest.importorskip("pexpect")

CPR_REQUEST = "\x1b\\[6n"  # prompt_toolkit asks where the cursor is; a terminal answers
ORDERS = (
    "CREATE MAPPING orders (order_id BIGINT, region VARCHAR, ts TIMESTAMP) "
    "TYPE File OPTIONS ('path'='{path}', 'format'='json');"
)


class Terminal:
    """A pitstop shell on a pseudo-terminal, answering prompt_toolkit's cursor position requests
    like a real terminal (so that the bottom toolbar is drawn)."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = dict(os.environ, TERM="xterm", PITSTOP_HISTORY=str(home.parent / "history"))
        full_env.update(env or {})
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "pitstop.cli", "--home", str(home), *args],
            env=full_env,
            dimensions=(40, 160),
            encoding="utf-8",
            timeout=15,
        )
        self.expect("pitstop>")

    def expect(self, pattern: str) -> str:
        """Wait for ``pattern`` (a regular expression); returns what came before it."""
        seen = ""
        while True:
            index = self.child.expect([pattern, CPR_REQUEST])
            seen += self.child.before
            if index == 0:
                return seen
            self.child.send("\x1b[1;1R")

    def complete(self, text: str, menu: str) -> None:
        """Type ``text``, wait for the completion menu to offer ``menu``, press Tab."""
        self.child.send(text)
        self.expect(menu)
        self.child.send("\t")

    def type(self, text: str) -> None:
        self.child.send(text)

    def line(self, text: str) -> None:
        self.child.send(text + "\r")

    def run(self, statement: str, until: str) -> str:
        """Type a line, press Enter, wait for ``until`` and the next prompt."""
        self.line(statement)
        out = self.expect(until)
        self.expect("pitstop>")
        return out

    def quit(self) -> int:
        self.line("\\q")
        self.child.expect(pexpect.EOF)
        self.child.close()
        return int(self.child.exitstatus)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path / "home")
    yield term
    if term.child.isalive():
        term.child.terminate(force=True)


def test_enter_continues_an_incomplete_statement_and_runs_it_at_its_semicolon(terminal: Terminal) -> None:
    terminal.line("SELECT 1 AS a,")
    before = terminal.expect("->")  # the continuation prompt: nothing ran yet
    assert "row" not in before
    terminal.line("2 AS b;")
    out = terminal.expect(r"\(1 row\)")
    assert "| 1 | 2 |" in out
    assert terminal.quit() == 0


def test_a_semicolon_inside_a_string_does_not_end_the_statement(terminal: Terminal) -> None:
    terminal.line("SELECT 'x;y' AS s")
    terminal.expect("->")
    terminal.line("-- a ; in a comment")
    terminal.expect("->")
    terminal.line(";")
    out = terminal.expect(r"\(1 row\)")
    assert "| x;y |" in out


def test_tab_completes_keywords_and_names_from_the_catalog(terminal: Terminal, tmp_path: Path) -> None:
    terminal.run(ORDERS.format(path=tmp_path / "orders"), "mapping 'orders' created")
    terminal.complete("show mapp", "mappings")
    terminal.line(";")
    terminal.expect(r"\(1 row\)")
    terminal.complete("\\d ord", "orders")
    terminal.line("")  # Enter on the selected completion accepts it
    terminal.line("")
    out = terminal.expect(r"region +\| STRING")
    assert "mapping 'orders': TYPE File" in out


def test_ctrl_c_at_the_prompt_drops_the_line_and_keeps_the_shell(terminal: Terminal) -> None:
    terminal.line("SELECT nonsense FROM")
    terminal.expect("->")
    terminal.type("\x03")
    terminal.expect("pitstop>")
    out = terminal.run("SELECT 7 AS seven;", r"\(1 row\)")
    assert "| 7 " in out and "ERROR" not in out
    assert terminal.quit() == 0


def test_errors_show_a_caret_and_a_close_name(terminal: Terminal, tmp_path: Path) -> None:
    terminal.run(ORDERS.format(path=tmp_path / "orders"), "mapping 'orders' created")
    terminal.line("DROP MAPPING ordrs;")
    terminal.expect(r"unknown mapping 'ordrs'\W+did you mean 'orders'\?")
    terminal.expect(r"\r\n  DROP MAPPING ordrs\r\n {15}\^")  # under the name
    terminal.line("SHOW JOBZ;")
    terminal.expect(r"ERROR at line 1, col 6: .*\r\n  SHOW JOBZ;?\r\n       \^")


def test_output_switches_expanded_csv_json_and_timing(terminal: Terminal) -> None:
    terminal.run("\\x", "Expanded display is on")
    out = terminal.run("SELECT 1 AS a, 'b' AS word;", r"\(1 row\)")
    assert "***************************[ 1. row ]" in out and "word | b" in out
    terminal.run("\\x off", "Expanded display is off")
    terminal.run("\\format csv", "Output format is csv")
    out = terminal.run("SELECT 1 AS a, 'b' AS word;", r'1,b|1,"b"')
    assert "a,word" in out
    terminal.run("\\format json", "Output format is json")
    terminal.run("SELECT 1 AS a;", r'\{"a": 1\}')
    terminal.run("\\timing", "Timing is on")
    terminal.run("SELECT 1 AS a;", r"Time: \d+\.\d{3} s")


def test_special_commands_list_describe_and_explain(terminal: Terminal, tmp_path: Path) -> None:
    terminal.run(ORDERS.format(path=tmp_path / "orders"), "mapping 'orders' created")
    terminal.run("\\mappings", r"\(1 row\)")
    terminal.run("\\jobs", r"0 job\(s\)|\(0 rows\)")
    terminal.run("\\snapshots", r"0 snapshot\(s\)|\(0 rows\)")
    out = terminal.run("\\d", r"\(1 row\)")
    assert "| mapping | orders |" in out
    terminal.run("\\d ordrs", "no mapping, job or snapshot named 'ordrs'; did you mean 'orders'")
    terminal.run("\\help AWAIT", r"AWAIT JOB name \[TIMEOUT INTERVAL 'n' SECOND\]")
    out = terminal.run("\\help", "Keys:")
    assert "\\watch" in out and "CREATE SNAPSHOT" in out
    terminal.run("\\jbos", r"unknown command \\jbos; did you mean \\jobs\?")


def test_an_explain_s_verdict_follows_its_rows(terminal: Terminal, tmp_path: Path) -> None:
    """The shell printed a result's rows alone: EXPLAIN's verdict (EXPLAIN ANALYZE's summary and
    the diff's name) was never shown."""
    terminal.run(
        "CREATE MAPPING clicks (region VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) "
        f"TYPE File OPTIONS ('path'='{tmp_path / 'clicks'}', 'format'='json');",
        "mapping 'clicks' created",
    )
    terminal.run("CREATE MAPPING hourly TYPE DuckDB;", "mapping 'hourly' created")
    out = terminal.run(
        "EXPLAIN CREATE JOB j AS INSERT INTO hourly SELECT window_start, window_end, region, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, region;",
        r"CREATE JOB j would start 1 branch\(es\); nothing was started",
    )
    assert "hourly.aggregate" in out and "(1 row)" in out


def test_include_runs_a_file_and_its_errors_name_the_file(terminal: Terminal, tmp_path: Path) -> None:
    script = tmp_path / "setup.sql"
    script.write_text("CREATE MAPPING s TYPE Console;\n\nDROP JOB gone;\n")
    terminal.line(f"\\i {script}")
    out = terminal.expect(r"ERROR in \S*setup.sql at line 3, col 10: unknown job 'gone'")
    assert "mapping 's' created" in out
    script.write_text('SHOW JOBS;\nDROP JOB "a/b";\n')  # refused by the executor, not the parser
    terminal.line(f"\\i {script}")
    terminal.expect(r"ERROR in \S*setup.sql at line 2, col 10: job name 'a/b' is not allowed")


def test_watch_repeats_the_last_statement_until_ctrl_c(terminal: Terminal) -> None:
    terminal.run("SELECT 42 AS answer;", r"\(1 row\)")
    terminal.line("\\watch 0.2")
    for _ in range(3):
        terminal.expect("every 0.2 s: SELECT 42 AS answer;")
        terminal.expect(r"\(1 row\)")
    terminal.type("\x03")
    terminal.expect("pitstop>")
    terminal.run("SELECT 'still here' AS s;", "still here")
    assert terminal.quit() == 0


def test_long_results_go_through_the_pager(tmp_path: Path) -> None:
    term = Terminal(tmp_path / "home", "shell", env={"PAGER": "sed s/^/paged:/"})
    out = term.run("SELECT range AS n FROM range(100);", r"paged:\(100 rows\)")
    assert "paged:| 99 " in out
    term.run("SELECT 1 AS short;", r"\(1 row\)")  # short results are printed directly
    assert term.quit() == 0


def test_bottom_toolbar_shows_spark_and_jobs(terminal: Terminal) -> None:
    terminal.expect("Spark: not started")
    terminal.expect("no jobs")


def test_vi_keys_edit_the_line(tmp_path: Path) -> None:
    term = Terminal(tmp_path / "home", "shell", "--vi")
    term.type("SELECT 1234 AS n;")
    term.type("\x1b")  # normal mode
    term.type("0wx")  # to the start, one word right, delete the '1'
    term.type("A")  # append at the end: insert mode again
    out = term.run("", r"\(1 row\)")
    assert "| 234 |" in out
    assert term.quit() == 0


def test_plain_pitstop_on_a_terminal_opens_the_shell_and_keeps_history(tmp_path: Path) -> None:
    term = Terminal(tmp_path / "home")  # no command at all
    term.run("SELECT 'remembered' AS h;", r"\(1 row\)")
    term.line("quit")
    term.child.expect(pexpect.EOF)
    term.child.close()
    assert term.child.exitstatus == 0
    assert "SELECT 'remembered' AS h;" in (tmp_path / "history").read_text()


# -- the pieces, in-process ----------------------------------------------------------------------
def test_enter_submits_only_complete_statements_and_commands() -> None:
    assert ready_to_submit("SELECT 1;")
    assert ready_to_submit("\\d orders")
    assert ready_to_submit("quit")
    assert ready_to_submit("")
    assert not ready_to_submit("SELECT 1")
    assert not ready_to_submit("SELECT ';")
    assert not ready_to_submit('SELECT 1 AS "a;"')
    assert not ready_to_submit("SELECT 1 -- ;")
    assert not ready_to_submit("CREATE JOB j AS BEGIN INSERT INTO a SELECT * FROM b;")


def _completions(completer: PitstopCompleter, text: str) -> list[str]:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]


def test_completion_offers_names_by_context() -> None:
    completer = PitstopCompleter(special_commands=["\\d", "\\jobs"], job_options=["strictRestore"])
    completer.names = CatalogNames(
        mappings=("orders", "daily_revenue"),
        columns={"orders": ("order_id", "region")},
        jobs=("revenue",),
        snapshots=("revenue_v1",),
        stages=("daily_revenue.aggregate",),
        snapshot_stages={"revenue_v1": ("daily_revenue.aggregate", "hourly")},
    )
    assert _completions(completer, "AWAIT JOB re") == ["revenue"]
    assert _completions(completer, "SELECT * FROM snap")[0] == "snapshot_state('"
    assert _completions(completer, "SELECT * FROM snapshot_state('rev") == ["'revenue_v1'"]
    assert _completions(completer, "SELECT * FROM snapshot_state('revenue_v1', '") == [
        "'daily_revenue.aggregate'",
        "'hourly'",
    ]
    assert _completions(completer, "CREATE JOB j FROM SNAPSHOT ") == ["revenue_v1"]
    assert "orders" in _completions(completer, "SELECT * FROM or")
    assert _completions(completer, "SELECT orders.reg") == ["orders.region"]
    assert _completions(completer, "CREATE JOB j OPTIONS ('str") == ["'strictRestore'"]
    assert "'path'" in _completions(completer, "CREATE MAPPING m TYPE File OPTIONS (")
    assert _completions(completer, "SELECT /*+ STAGE(da") == ["daily_revenue.aggregate"]
    assert _completions(completer, "\\j") == ["\\jobs"]
    assert "await" in _completions(completer, "await")
    assert {"jobs", "mappings", "snapshots"} <= set(_completions(completer, "show "))
    assert "select" not in _completions(completer, "show ")
    assert _completions(completer, "SHOW MAPP") == ["MAPPINGS"]
    assert any(c.startswith("CREATE JOB name AS INSERT INTO") for c in _completions(completer, "CREATE J"))


def test_did_you_mean_names_the_closest_catalog_name(tmp_path: Path) -> None:
    from pitstop.catalog.store import Catalog
    from pitstop.executor import Executor
    from pitstop.sql.parser import parse_script

    catalog = Catalog(tmp_path / "catalog.duckdb")
    try:
        executor = Executor(None, catalog)
        for stmt in parse_script("CREATE MAPPING daily_revenue TYPE DuckDB;"):
            catalog.put_mapping(__import__("pitstop.executor").executor.mapping_from_node(stmt.node, ""))
        assert executor.catalog is catalog
        message = "unknown mapping 'daly_revenue'; SHOW MAPPINGS lists the mappings"
        assert with_suggestion(message, catalog) == (
            "unknown mapping 'daly_revenue'; did you mean 'daily_revenue'?; SHOW MAPPINGS lists the mappings"
        )
        assert with_suggestion("unknown mapping 'zzz'", catalog) == "unknown mapping 'zzz'"
    finally:
        catalog.close()


def test_ctrl_c_cancels_the_wait_not_the_shell(tmp_path: Path) -> None:
    """Ctrl-C while a statement waits sets the executor's ``cancelled``; the statement stops
    waiting and the shell goes on (what AWAIT JOB does, without needing Spark here)."""
    from pitstop.manager import Manager
    from pitstop.settings import Settings
    from pitstop.shell.app import Shell
    from pitstop.sql.parser import parse_script

    manager = Manager(Settings.resolve(tmp_path / "home"))
    shell = Shell(manager)
    waiting = threading.Event()

    def execute(stmt: object) -> Result:
        waiting.set()
        while not (shell.executor.cancelled and shell.executor.cancelled()):
            threading.Event().wait(0.01)
        raise PitstopError("catch up with its input cancelled")

    shell.executor.execute = execute  # type: ignore[method-assign]
    main = threading.get_ident()
    threading.Thread(target=lambda: waiting.wait(10) and signal.pthread_kill(main, signal.SIGINT)).start()
    try:
        ok = shell.run_statement(parse_script("AWAIT JOB revenue;")[0])
        assert not ok and shell.interrupted and shell.cancel.is_set()
        shell.executor.execute = lambda stmt: Result("done")  # type: ignore[method-assign]
        assert shell.run_statement(parse_script("SHOW JOBS;")[0])  # the next statement runs
    finally:
        manager.close()
