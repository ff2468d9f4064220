"""Script mode: statements from a file or a pipe, run in order, with no prompts and no colours.

Shared by ``pitstop run`` and the shell's ``\\i file.sql``. With ``on_error='stop'`` a chunk (a
whole file, or what a pipe delivered up to a ';') is parsed whole before any of it runs, so a
malformed file changes nothing; with ``on_error='continue'`` each statement is parsed and run on
its own, so later good statements still run. Positions stay those of the script either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pitstop.errors import PitstopError, SqlError
from pitstop.executor import Executor, positioned
from pitstop.shell.formatting import OutputOptions, render
from pitstop.shell.suggest import error_text
from pitstop.sql.parser import ParsedStatement, parse_script, split_statements

ON_ERROR = ("stop", "continue")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}")


def substitute(text: str, variables: dict[str, str], file: str | None = None) -> str:
    """Replace every ``${name}`` with its value; an undefined name is a positioned SqlError."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return variables[name]
        line = text.count("\n", 0, match.start()) + 1
        col = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
        source = text.split("\n")[line - 1]
        raise SqlError(
            f"undefined variable ${{{name}}}; pass it with -v {name}=value", line, col, source, file
        )

    return _VARIABLE.sub(value, text)


def parse_variables(pairs: Iterable[str]) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; ValueError names a malformed pair."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _VARIABLE.fullmatch("${" + name + "}"):
            raise ValueError(f"-v {pair}: expected name=value, with a name of letters, digits and _")
        out[name] = value
    return out


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
            statements = parse_script(substitute(chunk, self.options.variables, file), file)
            for stmt in statements:
                self._execute(stmt, file)
        except PitstopError as error:
            self._report(error)
            return False
        return True

    def _run_each(self, chunk: str, file: str | None) -> None:
        for text, line, col in split_statements(chunk):
            # Padding keeps the statement at its place in the script: errors name the script's
            # line and column.
            padded = "\n" * (line - 1) + " " * (col - 1) + text
            try:
                for stmt in parse_script(substitute(padded, self.options.variables, file), file):
                    self._execute(stmt, file)
            except PitstopError as error:
                self._report(error)

    def _execute(self, stmt: ParsedStatement, file: str | None) -> None:
        if self.options.echo:
            self.out(stmt.text + ";")
        try:
            result = self.executor.execute(stmt)
        except PitstopError as error:
            raise positioned(error, stmt, file) from None
        self.out(render(result, self.options.output))

    def _report(self, error: PitstopError) -> None:
        self.failed = True
        self.err(error_text(error, self.executor.catalog))
