"""``pitstop test``'s statement: a file's CREATE JOB as EXPLAIN ANALYZE, from a snapshot."""

from __future__ import annotations

from sqlglot import exp

from pitstop.errors import PlanError
from pitstop.sql import nodes
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.parser import parse_script


def analyze_statement(script: str, file: str | None, snapshot: str | None, until: str | None) -> str:
    """``EXPLAIN ANALYZE CREATE JOB ... FROM SNAPSHOT snapshot [UNTIL SNAPSHOT until] AS ...`` for
    the one CREATE JOB of ``script`` (its own FROM SNAPSHOT where ``snapshot`` is None). PlanError
    if the script holds no CREATE JOB, or several, or names no snapshot."""
    jobs = [s for s in parse_script(script, file) if isinstance(s.node, nodes.CreateJob)]
    where = f" {file}" if file else ""
    if len(jobs) != 1:
        raise PlanError(
            f"the file{where} holds {len(jobs)} CREATE JOB statements; pitstop test replays one: "
            "keep the job's statement alone in its file"
        )
    node = jobs[0].node.copy()
    if snapshot is not None:
        node.set("snapshot", exp.to_identifier(snapshot))
    if node.args.get("snapshot") is None:
        raise PlanError(
            f"the job of{where or ' the file'} starts from no snapshot: give --snapshot s (the "
            "snapshot whose cut the replay starts from), or write FROM SNAPSHOT s in the file"
        )
    if until is not None:
        node.set("until", exp.to_identifier(until))
    return nodes.ExplainAnalyze(this=node).sql(dialect=PitstopDialect)
