"""pitstop's own statements as the server runs them: parsed (the listings that BI tools and
dashboards send over and over are kept by text), named by their command tag, and the executor's
:class:`~pitstop.executor.Result` turned into an :class:`~pitstop.server.outcome.Outcome`: its
rows, or its message as notices.
"""

from __future__ import annotations

from pitstop.executor import Result
from pitstop.server.outcome import Notice, Outcome
from pitstop.server.pgtypes import Column, pg_type_of_value
from pitstop.server.routing import Statement, leading_words
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement, parse_script

CACHED_NODES = (
    nodes.ShowJobs,
    nodes.ShowSnapshots,
    nodes.ShowMappings,
    nodes.ShowViews,
    nodes.DescribeJob,
    nodes.DescribeSnapshot,
)
"""Statements whose parse is kept by text: BI tools and dashboards send the same few listings over
and over, and sqlglot's parse (~0.5 ms) was a third of such a statement's time in the server. Only
these: their nodes are read, never changed, by the executor."""
READ_ONLY_NODES = (*CACHED_NODES, nodes.Explain, nodes.ExplainAnalyze)
MAX_PARSED = 1000
"""Parses kept at most; a full store is emptied and fills again."""
_PARSED: dict[str, ParsedStatement] = {}
NOT_TRANSACTIONAL = "{what} is not transactional: it took effect now; COMMIT or ROLLBACK will not undo it"


def parse(stmt: Statement) -> ParsedStatement:
    """``stmt`` parsed; one of :data:`CACHED_NODES` is kept by its text."""
    # Padding keeps positions those of the client's query string (psql's caret).
    padded = "\n" * (stmt.line - 1) + " " * (stmt.col - 1) + stmt.text
    parsed = _PARSED.get(padded)
    if parsed is None:
        [parsed] = parse_script(padded)
        if isinstance(parsed.node, CACHED_NODES):
            if len(_PARSED) >= MAX_PARSED:
                _PARSED.clear()
            _PARSED[padded] = parsed
    return parsed


def executor_outcome(parsed: ParsedStatement, result: Result) -> Outcome:
    """What the executor returned, as the client is sent it: rows, or its message as notices."""
    if result.has_rows:
        columns = tuple(
            Column(name, pg_type_of_value([row[i] for row in result.rows]))
            for i, name in enumerate(result.columns)
        )
        notices = [
            Notice(text, "WARNING" if text in result.warnings else "NOTICE")
            for text in result.said_beside_rows(parsed)
        ]
        return Outcome("SELECT", columns, iter(result.rows), notices)
    notices = []
    for line in result.message.split("\n"):
        text = line.rstrip()  # indentation kept: stage verdicts print under their job
        if text.strip():
            severity = "WARNING" if line in result.warnings else "NOTICE"
            notices.append(Notice(text, severity))
    return Outcome(statement_name(parsed), None, iter(()), notices)


def statement_name(parsed: ParsedStatement) -> str:
    """``CREATE JOB``, ``DROP SNAPSHOT``...: the command tag of a pitstop statement."""
    words = leading_words(parsed.text, 4)
    if len(words) >= 2 and words[0] == "CREATE" and words[1] == "OR":
        words = (words[0],) + words[3:]
    if words and words[0] == "SET":
        return "SET"
    return " ".join(words[:2])
