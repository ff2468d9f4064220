"""Script mode: statements from a file or a pipe, run in order, with no prompts and no colours.

Shared by ``pitstop run`` and the shell's ``\\i file.sql``. With ``on_error='stop'`` a chunk (a
whole file, or what a pipe delivered up to a ';') is parsed whole before any of it runs, so a
malformed file changes nothing; with ``on_error='continue'`` each statement is parsed and run on
its own, so later good statements still run. Positions stay those of the script either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pitstop.driver import Driver
from pitstop.errors import PitstopError
from pitstop.executor import Executor
from pitstop.shell.formatting import OutputOptions, render
from pitstop.shell.suggest import error_text
from pitstop.sql.parser import ParsedStatement

ON_ERROR = ("stop", "continue")


@dataclass(frozen=True)
class ScriptOptions:
    output: OutputOptions = OutputOptions()
    echo: bool = False
    """Print each statement (with its ';') before its result."""
    on_error: str = "stop"
    variables: dict[str, str] = field(default_factory=dict)


class ScriptRunner:
    """Runs chunks of script text through one executor; prints results with ``out`` and errors
    with ``err``. ``failed`` tells whether any statement failed."""

    def __init__(
        self,
        executor: Executor,
        options: ScriptOptions,
        out: Callable[[str], None],
        err: Callable[[str], None],
    ) -> None:
        self.executor = executor
        self.driver = Driver(executor, variables=options.variables)
        self.options = options
        self.out = out
        self.err = err
        self.failed = False

    def run(self, chunks: Iterable[str], file: str | None = None) -> bool:
        """Run every chunk; True when every statement succeeded. With ``on_error='stop'`` the
        first error ends the run."""
        for chunk in chunks:
            if self.options.on_error == "stop":
                if not self._run_all_or_stop(chunk, file):
                    return False
            else:
                self._run_each(chunk, file)
        return not self.failed

    def _run_all_or_stop(self, chunk: str, file: str | None) -> bool:
        try:
            for stmt in self.driver.parse(chunk, file):
                self._execute(stmt)
        except PitstopError as error:
            self._report(error)
            return False
        return True

    def _run_each(self, chunk: str, file: str | None) -> None:
        for parsed in self.driver.parse_each(chunk, file):
            try:
                if isinstance(parsed, PitstopError):
                    raise parsed
                for stmt in parsed:
                    self._execute(stmt)
            except PitstopError as error:
                self._report(error)

    def _execute(self, stmt: ParsedStatement) -> None:
        if self.options.echo:
            self.out(stmt.text + ";")
        result = self.driver.run(stmt)
        self.out(render(result, self.options.output))
        # After the rows; beside csv or json rows on the error stream (psql's notices), so that
        # the output stays what its format says.
        for line in result.said_beside_rows(stmt):
            (self.out if self.options.output.fmt == "table" else self.err)(line)

    def _report(self, error: PitstopError) -> None:
        self.failed = True
        self.err(error_text(error, self.executor.catalog))
