"""The executor: a statement's handler found in the statement table (:mod:`pitstop.sql.statements`)
and run under the names it changes. Texts reach it statement by statement through
:mod:`pitstop.driver`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from pitstop.errors import BadNameError, NotSupportedError
from pitstop.executor.explain import ExplainStatements
from pitstop.executor.jobs import JobStatements
from pitstop.executor.mappings import MappingStatements
from pitstop.executor.queries import QueryStatements
from pitstop.executor.results import Result
from pitstop.executor.session import SessionStatements
from pitstop.executor.snapshots import SnapshotStatements
from pitstop.sql import nodes, statements
from pitstop.sql.parser import REFUSED_NAME, ParsedStatement, name_of

log = logging.getLogger(__name__)


class Executor(
    MappingStatements,
    QueryStatements,
    SessionStatements,
    JobStatements,
    SnapshotStatements,
    ExplainStatements,
):
    """Runs statements against a manager (``manager=None``: plan and check only, change nothing).

    A statement's handler is the method its row in :data:`pitstop.sql.statements.STATEMENTS`
    names; the handlers of each kind of object are a mixin of their own module."""

    def execute(self, stmt: ParsedStatement) -> Result:
        kind = statements.kind_of(stmt.node)
        if kind is None:
            raise NotSupportedError(f"statement {type(stmt.node).__name__} is not supported yet")
        handler: Callable[[Any, ParsedStatement], Result] = getattr(self, kind.handler)
        self._refuse_unknown_bad_name(stmt)
        if self.manager is None:
            return handler(stmt.node, stmt)
        with self.manager.names.hold(changed_names(stmt.node)):
            return handler(stmt.node, stmt)

    def _refuse_unknown_bad_name(self, stmt: ParsedStatement) -> None:
        """A DROP or DESCRIBE whose name the name rule refuses goes on only if the catalog holds
        an object of exactly that name (one an older pitstop created); otherwise the parser's
        refusal stands, positioned in the script (:data:`pitstop.sql.parser.EXISTING_NAME_ARGS`)."""
        refused = stmt.node.meta.get(REFUSED_NAME)
        if not isinstance(refused, BadNameError):
            return
        node, name = stmt.node, name_of(stmt.node.this)
        if isinstance(node, nodes.DropJob | nodes.DescribeJob):
            found = self._job_plan(name) is not None
        elif isinstance(node, nodes.DropSnapshot | nodes.DescribeSnapshot):
            found = self._find_snapshot(name) is not None
        elif isinstance(node, nodes.DropView):
            found = self._view_exists(name)
        else:
            found = self._lookup(name) is not None
        if found:
            log.info("%s: an existing object whose name the name rule refuses", stmt.text)
            return
        inner_line, inner_col = refused.line or 1, refused.col or 1
        line = stmt.line + inner_line - 1
        col = stmt.col + inner_col - 1 if inner_line == 1 else inner_col
        shown = stmt.text.split("\n")[inner_line - 1]
        source_line = " " * (stmt.col - 1) + shown if inner_line == 1 else shown
        raise BadNameError(refused.message).at(line, col, source_line, stmt.file)


def changed_names(node: exp.Expression) -> list[tuple[str, str]]:
    """``(kind, name)`` of the jobs, snapshots and mappings a statement changes or depends on
    while it runs (views share the mappings' names: one namespace)."""
    out: list[tuple[str, str]] = []
    declared = statements.kind_of(node)
    for kind, arg in declared.changes if declared is not None else ():
        value: Any = node
        for part in arg.split("."):  # "this.snapshot": an argument of the statement's statement
            value = value.args.get(part) if isinstance(value, exp.Expression) else None
        if value is not None:
            out.append((kind, name_of(value)))
    return out
