"""Every statement pitstop runs, declared once.

A row names the statement, the parse nodes it comes as, the :class:`~pitstop.executor.Executor`
method that runs it, whether a reader may run it (it changes nothing), which named objects it
changes while it runs, and its help. The parser's "unknown statement" list, the executor's
dispatch and name locks, the server's roles and the shell's ``\\help`` and completion all read
this table: adding a statement is a node, a parser, a handler and one row here.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from pitstop.sql import nodes

# Written in CREATE MAPPING's syntax where the connectors' names go; the shell fills it in (this
# layer knows no connector).
TYPES = "{types}"


@dataclass(frozen=True)
class StatementKind:
    name: str
    """What ``\\help NAME`` matches and the error lists, e.g. ``CREATE JOB``."""
    nodes: tuple[type, ...]
    handler: str
    """The name of the :class:`~pitstop.executor.Executor` method that runs it."""
    syntax: str
    summary: str
    template: str
    """What completion inserts at the start of a statement."""
    reader: bool = False
    """A reader may run it: it changes no job, snapshot or mapping (SET changes the session only)."""
    changes: tuple[tuple[str, str], ...] = ()
    """``(kind, argument)``: the job, snapshot or mapping names it changes or depends on while it
    runs, held against statements of other sessions that change them (``this.snapshot``: an
    argument of the statement it wraps)."""


STATEMENTS: tuple[StatementKind, ...] = (
    StatementKind(
        "CREATE MAPPING",
        (nodes.CreateMapping,),
        "_create_mapping",
        "CREATE [OR REPLACE] MAPPING [IF NOT EXISTS] name (col type, ... "
        "[, WATERMARK FOR ts AS ts - INTERVAL 'n' SECOND])\n  TYPE "
        + TYPES
        + " [OPTIONS ('key'='value', ...)]",
        "declare a source or sink: a folder of files, a DuckDB or PostgreSQL table, a Kafka topic, "
        "a generator, the console",
        "CREATE MAPPING name (id BIGINT, ts TIMESTAMP) TYPE File OPTIONS ('path'='data', 'format'='json');",
        changes=(("mapping", "this"),),
    ),
    StatementKind(
        "DROP MAPPING",
        (nodes.DropMapping,),
        "_drop_mapping",
        "DROP MAPPING [IF EXISTS] name",
        "forget a mapping",
        "DROP MAPPING ",
        changes=(("mapping", "this"),),
    ),
    StatementKind(
        "SHOW MAPPINGS",
        (nodes.ShowMappings,),
        "_show_mappings",
        "SHOW MAPPINGS",
        "list the mappings",
        "SHOW MAPPINGS;",
        reader=True,
    ),
    StatementKind(
        "CREATE JOB",
        (nodes.CreateJob,),
        "_create_job",
        "CREATE JOB [IF NOT EXISTS] name [OPTIONS (...)] [FROM SNAPSHOT s]\n"
        "  AS INSERT INTO sink SELECT ...\n"
        "  | AS BEGIN INSERT INTO a SELECT ...; INSERT INTO b SELECT ...; END\n"
        "joins, in the SELECT that reads the source:\n"
        "  FROM s [LEFT] JOIN t ON s.k = t.id   -- t a DuckDB or File mapping, read whole every\n"
        "                                       -- micro-batch: stateless enrichment\n"
        "  FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR\n"
        "                                       -- interval join of two streams: stage <sink>.join,\n"
        "                                       -- its waiting rows are state (kept by snapshots)",
        "start a streaming job (from a snapshot's state with FROM SNAPSHOT)",
        "CREATE JOB name AS INSERT INTO sink SELECT ",
        changes=(("job", "this"), ("snapshot", "snapshot")),
    ),
    StatementKind(
        "DROP JOB",
        (nodes.DropJob,),
        "_drop_job",
        "DROP JOB [IF EXISTS] name [WITH SNAPSHOT s]",
        "stop a job at a batch boundary; WITH SNAPSHOT keeps its state",
        "DROP JOB ",
        changes=(("job", "this"), ("snapshot", "snapshot")),
    ),
    StatementKind(
        "ALTER JOB",
        (nodes.AlterJob,),
        "_alter_job",
        "ALTER JOB name SUSPEND | RESUME | RESTART | OPTIONS ('key'='value', ...) [RESUME]",
        "suspend, resume or restart a job, or change its options",
        "ALTER JOB ",
        changes=(("job", "this"),),
    ),
    StatementKind(
        "SHOW JOBS",
        (nodes.ShowJobs,),
        "_show_jobs",
        "SHOW JOBS",
        "list the jobs and their state",
        "SHOW JOBS;",
        reader=True,
    ),
    StatementKind(
        "DESCRIBE JOB",
        (nodes.DescribeJob,),
        "_describe_job",
        "DESCRIBE JOB name",
        "a job's stages, sources and sinks",
        "DESCRIBE JOB ",
        reader=True,
    ),
    StatementKind(
        "AWAIT JOB",
        (nodes.AwaitJob,),
        "_await_job",
        "AWAIT JOB name [TIMEOUT INTERVAL 'n' SECOND]",
        "wait until a job has processed the input available now (Ctrl-C stops waiting)",
        "AWAIT JOB ",
        reader=True,
    ),
    StatementKind(
        "CREATE SNAPSHOT",
        (nodes.CreateSnapshot,),
        "_create_snapshot",
        "CREATE [OR REPLACE] SNAPSHOT name FOR JOB job",
        "export a job's state while it keeps running",
        "CREATE SNAPSHOT name FOR JOB ",
        changes=(("snapshot", "this"), ("job", "job")),
    ),
    StatementKind(
        "DROP SNAPSHOT",
        (nodes.DropSnapshot,),
        "_drop_snapshot",
        "DROP SNAPSHOT [IF EXISTS] name",
        "delete a snapshot",
        "DROP SNAPSHOT ",
        changes=(("snapshot", "this"),),
    ),
    StatementKind(
        "SHOW SNAPSHOTS",
        (nodes.ShowSnapshots,),
        "_show_snapshots",
        "SHOW SNAPSHOTS",
        "list the snapshots",
        "SHOW SNAPSHOTS;",
        reader=True,
    ),
    StatementKind(
        "DESCRIBE SNAPSHOT",
        (nodes.DescribeSnapshot,),
        "_describe_snapshot",
        "DESCRIBE SNAPSHOT name",
        "a snapshot's stages, positions and watermark",
        "DESCRIBE SNAPSHOT ",
        reader=True,
    ),
    StatementKind(
        "CREATE VIEW",
        (nodes.CreateView,),
        "_create_view",
        "CREATE [OR REPLACE] VIEW name AS SELECT ...",
        "a stateless view over a mapping, readable by jobs (also inside TUMBLE(TABLE v, ...))",
        "CREATE VIEW name AS SELECT ",
        changes=(("mapping", "this"),),
    ),
    StatementKind(
        "DROP VIEW",
        (nodes.DropView,),
        "_drop_view",
        "DROP VIEW [IF EXISTS] name",
        "forget a view",
        "DROP VIEW ",
        changes=(("mapping", "this"),),
    ),
    StatementKind(
        "SHOW VIEWS",
        (nodes.ShowViews,),
        "_show_views",
        "SHOW VIEWS",
        "list the views",
        "SHOW VIEWS;",
        reader=True,
    ),
    StatementKind(
        "SET",
        (nodes.SetOption,),
        "_set",
        "SET 'key' = 'value'   (e.g. SET 'trigger_ms' = '200', SET 'await_timeout_s' = '120')",
        "a setting of this session",
        "SET ",
        reader=True,
    ),
    StatementKind(
        "EXPLAIN",
        (nodes.Explain,),
        "_explain",
        "EXPLAIN CREATE JOB ...",
        "dry run: per stage, restored / starts empty / dropped / refused, and why",
        "EXPLAIN CREATE JOB ",
        reader=True,
    ),
    StatementKind(
        "EXPLAIN ANALYZE",
        (nodes.ExplainAnalyze,),
        "_explain_analyze",
        "EXPLAIN ANALYZE CREATE JOB j FROM SNAPSHOT s [UNTIL SNAPSHOT t] AS ...",
        "replay what the job read after snapshot s (up to t, or to where it stands) through the new SQL "
        "and through its own, in a sandbox, and diff each sink: nothing started, no sink written",
        "EXPLAIN ANALYZE CREATE JOB ",
        changes=(("snapshot", "this.snapshot"), ("snapshot", "this.until")),
    ),
    StatementKind(
        "DROP DIFF",
        (nodes.DropDiff,),
        "_drop_diff",
        "DROP DIFF [IF EXISTS] name",
        "drop the tables an EXPLAIN ANALYZE kept in schema diff (name: as its output says, e.g. revenue_1)",
        "DROP DIFF ",
    ),
    StatementKind(
        "SELECT",
        (exp.Select, exp.SetOperation, exp.Values),
        "_select",
        "SELECT ... FROM sink_table | snapshot_state('snapshot', 'stage')\n"
        "  [UNION | INTERSECT | EXCEPT SELECT ...]   (or VALUES (...), ...)",
        "ad-hoc query over DuckDB sink tables (and the catalog, schema pitstop); "
        "snapshot_state(...) reads a snapshot's state: keys, windows, finished columns, accumulators",
        "SELECT * FROM ",
        reader=True,
    ),
)

# "pitstop accepts ...": the statements an error lists.
ACCEPTED = ", ".join(s.name for s in STATEMENTS[:-1]) + " and " + STATEMENTS[-1].name


def kind_of(node: exp.Expr) -> StatementKind | None:
    """The statement a parsed node is, or None."""
    for stmt in STATEMENTS:
        if isinstance(node, stmt.nodes):
            return stmt
    return None


def find(words: str) -> StatementKind | None:
    """The statement ``words`` names (case-insensitive; a prefix naming one statement will do)."""
    wanted = " ".join(words.upper().rstrip(";").split())
    for stmt in STATEMENTS:
        if stmt.name == wanted:
            return stmt
    matches = [s for s in STATEMENTS if s.name.startswith(wanted)]
    return matches[0] if len(matches) == 1 else None
