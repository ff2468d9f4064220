"""The dialect's words and statements, as data: for highlighting, completion and ``\\help``."""

from __future__ import annotations

from dataclasses import replace

from pitstop.sql import statements
from pitstop.sql.dialect import MAPPING_KINDS, WINDOW_TVF_PARAMS, PitstopDialect
from pitstop.sql.statements import TYPES, StatementKind


def _filled(stmt: StatementKind) -> StatementKind:
    return replace(stmt, syntax=stmt.syntax.replace(TYPES, "|".join(MAPPING_KINDS)))


# The statements, as pitstop.sql.statements declares them, with the connectors' names filled in.
STATEMENTS: tuple[StatementKind, ...] = tuple(_filled(s) for s in statements.STATEMENTS)


def find_statement(words: str) -> StatementKind | None:
    """The statement whose name ``words`` names (case-insensitive, prefix of words allowed)."""
    found = statements.find(words)
    return _filled(found) if found is not None else None


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
