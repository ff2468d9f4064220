"""What a statement gives back: its :class:`Result`, or its error placed where it stands in the
script."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pitstop.errors import PitstopError, subject_offset
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement


@dataclass(frozen=True)
class Result:
    message: str = "OK"
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    warnings: tuple[str, ...] = ()
    """The lines of ``message`` that warn (a client of the server gets them as WARNING notices,
    the others as NOTICE)."""

    @property
    def has_rows(self) -> bool:
        return bool(self.columns)

    def said_beside_rows(self, stmt: ParsedStatement) -> tuple[str, ...]:
        """What a result with rows says besides them, each front end in its way (the server as
        notices, the shell and scripts after the rows): an EXPLAIN's message (its verdict; EXPLAIN
        ANALYZE's summary and the diff's name), else its warnings (SHOW JOBS: the supervisor's
        trouble). Nothing for a result without rows, whose message is all it says."""
        if not self.has_rows:
            return ()
        if isinstance(stmt.node, nodes.Explain | nodes.ExplainAnalyze):
            return (self.message,) if self.message else ()
        return self.warnings


def positioned(err: PitstopError, stmt: ParsedStatement) -> PitstopError:
    """Give an error the statement's position in its script (syntax errors keep their own, finer
    one)."""
    file = stmt.file
    if err.line is not None:
        return err
    lines = stmt.text.split("\n")
    shown = "\n" not in err.message  # a message of several lines shows no source line
    offset = subject_offset(stmt.text, err.subject)
    if offset is None:  # at the statement's start
        return err.at(stmt.line, stmt.col, lines[0] if shown else None, file)
    before = stmt.text[:offset]
    n = before.count("\n")
    if n == 0:  # under the name the error is about
        return err.at(stmt.line, stmt.col + offset, " " * (stmt.col - 1) + lines[0] if shown else None, file)
    return err.at(stmt.line + n, offset - before.rfind("\n"), lines[n] if shown else None, file)
