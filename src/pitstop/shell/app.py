"""The interactive shell: read a statement, run it on the statement thread, show the result.

Statements run on one worker thread while the main thread waits, draws progress and catches
Ctrl-C: Ctrl-C cancels the wait of the statement being waited for (``AWAIT JOB``), never the
shell and never a job. Spark starts in the background when the home has jobs to resume;
catalog statements answer without waiting for it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.enums import EditingMode
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from pitstop import logs
from pitstop.catalog.rows import RUNNING, STOPPED
from pitstop.driver import Driver
from pitstop.errors import PitstopError
from pitstop.executor import JOB_OPTIONS, Executor, Result
from pitstop.shell import highlight, special
from pitstop.shell.completion import PitstopCompleter
from pitstop.shell.formatting import OutputOptions, render
from pitstop.shell.keys import EXIT_WORDS, key_bindings
from pitstop.shell.progress import Progress
from pitstop.shell.suggest import error_text
from pitstop.shell.toolbar import LiveStatus
from pitstop.sql.parser import ParsedStatement

if TYPE_CHECKING:
    from pitstop.manager import Manager

log = logging.getLogger(__name__)
PROMPT = "pitstop> "
CONTINUATION = "      -> "


def default_history_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("pitstop")) / "history"


class Shell:
    """One interactive session on one manager. ``loop()`` returns the exit status."""

    def __init__(
        self,
        manager: Manager,
        vi: bool = False,
        history: str | None = None,
        out: TextIO | None = None,
        executor: Any = None,
    ) -> None:
        self.manager = manager
        self.executor = executor if executor is not None else Executor(manager)
        """The local executor, or a server's (``pitstop shell --connect``): the same ``execute``."""
        self.cancel = threading.Event()
        self.executor.cancelled = self.cancel.is_set
        self.driver = Driver(self.executor)
        self.out = out or sys.stdout
        self.output = OutputOptions()
        self.timing = False
        self.pager = True
        self.last_sql: str | None = None
        self.interrupted = False
        """Whether Ctrl-C was pressed while the last statement ran (``\\watch`` stops on it)."""
        self.completer = PitstopCompleter(manager.catalog, special.command_names(), JOB_OPTIONS)
        self.session: PromptSession[str] | None = None
        self._vi = vi
        self._history = history
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pitstop-statement")
        self._spark_thread: threading.Thread | None = None
        self._spark_error: str | None = None
        self.status = LiveStatus(manager.live_status, self.spark_state, self.editing_mode)

    # -- the loop --------------------------------------------------------------------------------
    def loop(self) -> int:
        self.session = PromptSession(
            PROMPT,
            multiline=True,
            prompt_continuation=CONTINUATION,
            key_bindings=key_bindings(),
            lexer=highlight.lexer(),
            style=highlight.style(),
            completer=self.completer,
            complete_while_typing=True,
            auto_suggest=AutoSuggestFromHistory(),
            history=self._open_history(),
            editing_mode=EditingMode.VI if self._vi else EditingMode.EMACS,
            bottom_toolbar=self.status.fragments,
            refresh_interval=1.0,
            enable_history_search=False,
        )
        self._start_spark_if_jobs_wait()
        self.completer.refresh()
        self.status.start()
        self.echo(
            f"pitstop shell on {self.manager.home}. Statements end with ';'. "
            "\\help lists statements and commands; \\q quits."
        )
        try:
            while True:
                try:
                    text = self.session.prompt()
                except KeyboardInterrupt:
                    continue  # Ctrl-C at the prompt clears the line, as in every shell
                except EOFError:
                    break
                try:
                    self.handle(text)
                except special.ExitShell:
                    break
        finally:
            self.completer.stop()
            self.status.stop()
            self._worker.shutdown(wait=False)
        return 0

    def _open_history(self) -> History:
        chosen = self._history or os.environ.get("PITSTOP_HISTORY")
        path = Path(chosen) if chosen else default_history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(exist_ok=True)
            return FileHistory(str(path))
        except OSError as exc:
            self.warn(f"history is not kept: cannot write {path}: {exc}")
            return InMemoryHistory()

    def handle(self, text: str) -> None:
        """One submitted buffer: a backslash command, a quit word, or SQL statements."""
        stripped = text.strip()
        if not stripped:
            return
        if stripped.rstrip(";").strip().lower() in EXIT_WORDS:
            raise special.ExitShell
        if stripped.startswith("\\"):
            special.run(self, stripped)
            return
        self.last_sql = text
        self.run_sql(text)

    # -- running statements ----------------------------------------------------------------------
    def run_sql(self, text: str, file: str | None = None) -> bool:
        """Parse ``text`` whole, then run its statements in order; stop at the first error."""
        self.interrupted = False
        try:
            statements = self.driver.parse(text, file)
        except PitstopError as err:
            self.error(err)
            return False
        for stmt in statements:
            if not self.run_statement(stmt) or self.interrupted:
                return False
        if statements:
            self.completer.refresh()
        return True

    def run_statement(self, stmt: ParsedStatement) -> bool:
        started = time.monotonic()
        self.cancel.clear()
        previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
        try:
            future = self._worker.submit(self.driver.run, stmt)
            self._wait(future, stmt.text)
        finally:
            signal.signal(signal.SIGINT, previous)
        elapsed = time.monotonic() - started
        try:
            result = future.result()
        except PitstopError as err:
            if self.cancel.is_set():
                self.warn(f"cancelled: stopped waiting for `{_first_line(stmt.text)}`; jobs keep running")
            else:
                self.error(err)
            return False
        except Exception as exc:  # noqa: BLE001 - a bug must not end the session
            log.error("internal error while running %s", stmt.text, exc_info=True, extra=logs.FILE_ONLY)
            where = f" (the traceback is in {logs.log_file()})" if logs.log_file() is not None else ""
            self.warn(f"ERROR: internal error while running `{_first_line(stmt.text)}`: {exc}{where}")
            return False
        self.show(result, stmt)
        if self.timing:
            self.echo(f"Time: {elapsed:.3f} s")
        return True

    def _on_ctrl_c(self, signum: int, frame: object) -> None:
        """Ctrl-C while a statement runs: ask it to stop waiting (``Executor.cancelled``)."""
        self.interrupted = True
        self.cancel.set()

    def _wait(self, future: Future[Result], label: str) -> None:
        """Wait for the statement thread, drawing progress. Statements that cannot be cancelled
        run to their end; the others stop at their next check of ``cancelled``."""
        progress = Progress(label, self.out)
        try:
            while not future.done():
                wait_for([future], timeout=0.1)
                if self.cancel.is_set() and progress.delay_s:
                    progress.hint = "cancelling: the statement stops at its next check; jobs keep running"
                    progress.delay_s = 0.0
                progress.tick()
        finally:
            progress.clear()

    # -- Spark in the background -----------------------------------------------------------------
    def _start_spark_if_jobs_wait(self) -> None:
        """Jobs that were running when pitstop last exited resume as soon as Spark is up: start
        it now, in the background, so the prompt is there at once."""
        waiting = [j.name for j in self.manager.catalog.jobs() if j.status in (RUNNING, STOPPED)]
        if not waiting:
            return
        self.echo(f"starting Spark in the background to resume {', '.join(waiting)}")
        self._spark_thread = threading.Thread(target=self._start_spark, name="pitstop-spark", daemon=True)
        self._spark_thread.start()

    def _start_spark(self) -> None:
        try:
            self.manager.spark()
        except Exception as exc:  # noqa: BLE001 - shown in the toolbar; statements will retry
            self._spark_error = str(exc).split("\n", 1)[0]
            log.error("Spark did not start", exc_info=True, extra=logs.FILE_ONLY)

    def spark_state(self) -> str:
        if self._spark_error is not None and not self.manager.spark_started:
            return f"failed ({self._spark_error[:40]})"
        if self._spark_thread is not None and self._spark_thread.is_alive():
            return "starting…"
        return "up" if self.manager.spark_started else "not started"

    def editing_mode(self) -> str:
        app = self.session.app if self.session is not None else None
        if app is None:
            return "vi" if self._vi else "emacs"
        return "vi" if app.editing_mode == EditingMode.VI else "emacs"

    def set_editing_mode(self, mode: str) -> None:
        self._vi = mode == "vi"
        if self.session is not None:
            self.session.editing_mode = EditingMode.VI if self._vi else EditingMode.EMACS

    # -- output ----------------------------------------------------------------------------------
    def show(self, result: Result, stmt: ParsedStatement | None = None) -> None:
        self.echo(render(result, self.output), page=True)
        for line in result.said_beside_rows(stmt) if stmt is not None else ():
            self.echo(line)  # after the rows: an EXPLAIN's verdict, SHOW JOBS's warnings

    def echo(self, text: str, page: bool = False) -> None:
        rows = shutil.get_terminal_size().lines
        if page and self.pager and self.out.isatty() and text.count("\n") + 1 > rows - 2:
            click.echo_via_pager(text)
        else:
            click.echo(text, file=self.out)

    def warn(self, text: str) -> None:
        click.echo(text, file=sys.stderr)

    def error(self, err: PitstopError) -> None:
        self.warn(error_text(err, self.manager.catalog))


def _first_line(text: str) -> str:
    first = text.strip().split("\n", 1)[0]
    return first if len(first) <= 60 else first[:59] + "…"
