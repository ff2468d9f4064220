"""The dialect's words and statements, as data: for highlighting, completion and ``\\help``."""

from __future__ import annotations

from dataclasses import dataclass

from pitstop.sql.dialect import MAPPING_KINDS, WINDOW_TVF_PARAMS, PitstopDialect


@dataclass(frozen=True)
class StatementHelp:
    name: str
    """What ``\\help NAME`` matches, e.g. ``CREATE JOB``."""
    syntax: str
    summary: str
    template: str
    """What completion inserts at the start of a statement."""


STATEMENTS: tuple[StatementHelp, ...] = (
    StatementHelp(
        "CREATE MAPPING",
        "CREATE [OR REPLACE] MAPPING [IF NOT EXISTS] name (col type, ... "
        "[, WATERMARK FOR ts AS ts - INTERVAL 'n' SECOND])\n  TYPE " + "|".join(MAPPING_KINDS) + " "
        "[OPTIONS ('key'='value', ...)]",
        "declare a source or sink: a folder of files, a DuckDB table, a generator, the console",
        "CREATE MAPPING name (id BIGINT, ts TIMESTAMP) TYPE File OPTIONS ('path'='data', 'format'='json');",
    ),
    StatementHelp("DROP MAPPING", "DROP MAPPING [IF EXISTS] name", "forget a mapping", "DROP MAPPING "),
    StatementHelp("SHOW MAPPINGS", "SHOW MAPPINGS", "list the mappings", "SHOW MAPPINGS;"),
    StatementHelp(
        "CREATE JOB",
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
    ),
    StatementHelp(
        "DROP JOB",
        "DROP JOB [IF EXISTS] name [WITH SNAPSHOT s]",
        "stop a job at a batch boundary; WITH SNAPSHOT keeps its state",
        "DROP JOB ",
    ),
    StatementHelp(
        "ALTER JOB",
        "ALTER JOB name SUSPEND | RESUME | RESTART | OPTIONS ('key'='value', ...) [RESUME]",
        "suspend, resume or restart a job, or change its options",
        "ALTER JOB ",
    ),
    StatementHelp("SHOW JOBS", "SHOW JOBS", "list the jobs and their state", "SHOW JOBS;"),
    StatementHelp("DESCRIBE JOB", "DESCRIBE JOB name", "a job's stages, sources and sinks", "DESCRIBE JOB "),
    StatementHelp(
        "AWAIT JOB",
        "AWAIT JOB name [TIMEOUT INTERVAL 'n' SECOND]",
        "wait until a job has processed the input available now (Ctrl-C stops waiting)",
        "AWAIT JOB ",
    ),
    StatementHelp(
        "CREATE SNAPSHOT",
        "CREATE [OR REPLACE] SNAPSHOT name FOR JOB job",
        "export a job's state while it keeps running",
        "CREATE SNAPSHOT name FOR JOB ",
    ),
    StatementHelp("DROP SNAPSHOT", "DROP SNAPSHOT [IF EXISTS] name", "delete a snapshot", "DROP SNAPSHOT "),
    StatementHelp("SHOW SNAPSHOTS", "SHOW SNAPSHOTS", "list the snapshots", "SHOW SNAPSHOTS;"),
    StatementHelp(
        "DESCRIBE SNAPSHOT",
        "DESCRIBE SNAPSHOT name",
        "a snapshot's stages, positions and watermark",
        "DESCRIBE SNAPSHOT ",
    ),
    StatementHelp(
        "EXPLAIN",
        "EXPLAIN CREATE JOB ...",
        "dry run: per stage, restored / starts empty / dropped / refused, and why",
        "EXPLAIN CREATE JOB ",
    ),
    StatementHelp(
        "SELECT",
        "SELECT ... FROM sink_table | snapshot_state('snapshot', 'stage')",
        "ad-hoc query over DuckDB sink tables (and the catalog, schema pitstop); "
        "snapshot_state(...) reads a snapshot's state: keys, windows, finished columns, accumulators",
        "SELECT * FROM ",
    ),
)


def find_statement(words: str) -> StatementHelp | None:
    """The statement whose name ``words`` names (case-insensitive, prefix of words allowed)."""
    wanted = " ".join(words.upper().rstrip(";").split())
    for stmt in STATEMENTS:
        if stmt.name == wanted:
            return stmt
    matches = [s for s in STATEMENTS if s.name.startswith(wanted)]
    return matches[0] if len(matches) == 1 else None


def _dialect_words() -> set[str]:
    parser = PitstopDialect.Parser
    words: set[str] = set()
    for table in ("CREATE_PARSERS", "DROP_PARSERS", "SHOW_PARSERS", "DESCRIBE_PARSERS"):
        words.update(getattr(parser, table, {}))
    for table in ("WORD_STATEMENT_PARSERS", "ALTER_JOB_ACTIONS", "JOB_CLAUSE_PARSERS"):
        words.update(k for k in getattr(parser, table, {}) if isinstance(k, str))
    words.update(w for s in STATEMENTS for w in s.name.split())
    words.update(k.upper() for k in MAPPING_KINDS)
    words.update(WINDOW_TVF_PARAMS)
    return words


# Words of pitstop's statements that plain SQL lexers do not know.
DIALECT_KEYWORDS: tuple[str, ...] = tuple(
    sorted(
        _dialect_words()
        | {
            "AWAIT",
            "DESCRIPTOR",
            "IMPOSE_ORDER",
            "INTERVAL",
            "JOB",
            "JOBS",
            "MAPPING",
            "MAPPINGS",
            "OPTIONS",
            "REPLACE",
            "RESTART",
            "RESUME",
            "SINK",
            "SNAPSHOT",
            "SNAPSHOTS",
            "STAGE",
            "SUSPEND",
            "TIMEOUT",
            "TYPE",
            "WATERMARK",
            "SIZE",
            "SLIDE",
        }
    )
)

# SQL words completion offers besides the dialect's.
SQL_KEYWORDS: tuple[str, ...] = (
    "AND",
    "APPROX_COUNT_DISTINCT",
    "AS",
    "ASC",
    "AVG",
    "BEGIN",
    "BETWEEN",
    "BIGINT",
    "BOOLEAN",
    "BY",
    "CASE",
    "CAST",
    "COUNT",
    "CREATE",
    "DATE",
    "DECIMAL",
    "DESC",
    "DESCRIBE",
    "DISTINCT",
    "DOUBLE",
    "DROP",
    "ELSE",
    "END",
    "EXISTS",
    "EXPLAIN",
    "FALSE",
    "FLOAT",
    "FOR",
    "FROM",
    "GROUP",
    "HAVING",
    "HOUR",
    "IF",
    "IN",
    "INSERT",
    "INT",
    "INTO",
    "IS",
    "JOIN",
    "LIKE",
    "LIMIT",
    "MAX",
    "MAX_BY",
    "MIN",
    "MIN_BY",
    "MINUTE",
    "NOT",
    "NULL",
    "OR",
    "ORDER",
    "SECOND",
    "SELECT",
    "SHOW",
    "STRING",
    "SUM",
    "TABLE",
    "THEN",
    "TIMESTAMP",
    "TRUE",
    "UNION",
    "VARCHAR",
    "WHEN",
    "WHERE",
    "WITH",
    "DAY",
)

ALL_KEYWORDS: tuple[str, ...] = tuple(sorted(set(DIALECT_KEYWORDS) | set(SQL_KEYWORDS)))


def _next_words() -> dict[str, tuple[str, ...]]:
    parser = PitstopDialect.Parser
    tables = {"SHOW": "SHOW_PARSERS", "CREATE": "CREATE_PARSERS", "DROP": "DROP_PARSERS"}
    tables.update(DESCRIBE="DESCRIBE_PARSERS", ALTER="ALTER_PARSERS", AWAIT="AWAIT_PARSERS")
    out = {first: tuple(sorted(getattr(parser, table, {}))) for first, table in tables.items()}
    out["CREATE"] += ("OR REPLACE",)
    out["REPLACE"] = tuple(w for w in out["CREATE"] if w not in ("JOB", "OR REPLACE"))
    out["EXPLAIN"] = ("CREATE JOB",)
    return out


# The words that may follow a statement's first word, from the dialect's dispatch tables.
NEXT_WORDS: dict[str, tuple[str, ...]] = _next_words()
