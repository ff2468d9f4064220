"""The one way statements reach the executor, whoever sends them.

``pitstop run`` (a file, a pipe, ``-c``), the shell (typed, ``\\i``), ``pitstop check`` and the
server's pitstop statements all take the same path: **split** the text into statements and
**parse** them (with ``${name}`` variables substituted), **authorise** each (the server's roles;
everyone else may run everything), **execute** it, and **position** an error at the statement, or
at the name it is about, in its script. What each front end does with a result (print a table,
send rows and notices) is its own.

The executor may be the local one or a server's (``pitstop run --connect``): anything with
``execute(stmt) -> Result``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from pitstop.errors import PitstopError, SqlError
from pitstop.executor import Result, positioned
from pitstop.sql.parser import ParsedStatement, parse_script, parse_script_all, split_statements

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}")


class Executes(Protocol):
    def execute(self, stmt: ParsedStatement) -> Result: ...


class Driver:
    """Statements of a text, run one by one through ``executor``.

    ``may_run(stmt)`` raises :class:`~pitstop.errors.PermissionDeniedError` for a statement the
    sender may not run (None: every statement may run); ``variables`` are substituted for
    ``${name}`` before parsing."""

    def __init__(
        self,
        executor: Executes,
        may_run: Callable[[ParsedStatement], None] | None = None,
        variables: Mapping[str, str] | None = None,
    ) -> None:
        self.executor = executor
        self.may_run = may_run
        self.variables = dict(variables or {})

    # -- split and parse -----------------------------------------------------------------------------
    def parse(self, text: str, file: str | None = None) -> list[ParsedStatement]:
        """Every statement of ``text``, parsed before any runs: a malformed text runs nothing."""
        return parse_script(substitute(text, self.variables, file), file)

    def parse_each(
        self, text: str, file: str | None = None
    ) -> Iterator[list[ParsedStatement] | PitstopError]:
        """Each statement of ``text`` split off and parsed on its own (the statements that parse
        still run when another does not), kept at its place in the text: errors name the text's
        line and column."""
        for piece, line, col in split_statements(text):
            padded = "\n" * (line - 1) + " " * (col - 1) + piece
            try:
                yield parse_script(substitute(padded, self.variables, file), file)
            except PitstopError as error:
                yield error

    # -- authorise, execute, position ----------------------------------------------------------------
    def run(self, stmt: ParsedStatement) -> Result:
        """Run one parsed statement; a PitstopError is positioned in the statement's script."""
        try:
            if self.may_run is not None:
                self.may_run(stmt)
            return self.executor.execute(stmt)
        except PitstopError as err:
            raise positioned(err, stmt) from None

    def run_script(self, text: str, file: str | None = None) -> Iterator[tuple[ParsedStatement, Result]]:
        """Parse the whole text first (a malformed text changes nothing), then run in order; the
        first error ends it."""
        for stmt in self.parse(text, file):
            yield stmt, self.run(stmt)

    def check(self, text: str, file: str | None = None) -> tuple[int, list[PitstopError]]:
        """Every error of a text, not only the first (``pitstop check``: an executor without a
        manager changes nothing). Returns how many statements passed and the errors in text
        order."""
        parsed, errors = parse_script_all(text, file)
        found: list[PitstopError] = list(errors)
        ok = 0
        for stmt in parsed:
            try:
                self.run(stmt)
                ok += 1
            except PitstopError as err:
                found.append(err)
        found.sort(key=lambda e: (e.line or 0, e.col or 0))
        return ok, found


def substitute(text: str, variables: Mapping[str, str], file: str | None = None) -> str:
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
