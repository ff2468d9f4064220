"""Which way each statement of a client's query string goes, read from its first words (a regex
router), and where each statement stands in the string, for the positions errors point to.

The ways (:attr:`Statement.route`): ``query`` (SELECT, WITH, VALUES, TABLE), ``pitstop``
(pitstop's own statements, among them the ``SHOW`` of its listings), ``tx`` (BEGIN, COMMIT...),
``set`` and ``show`` (parameters), ``session`` (DISCARD, DEALLOCATE, LISTEN...), ``cursor``
(DECLARE, FETCH, MOVE, CLOSE), ``copy``, ``write`` (refused) and ``empty``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import TokenType

from pitstop.errors import PitstopError, subject_offset
from pitstop.sql.parser import split_statements
from pitstop.sql.statements import STATEMENTS

Tokenizer = Postgres.Tokenizer
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_WORDS = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\(")
_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|\$(\d+)", re.S)

QUERY_WORDS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "("})
TABLE_WRITES = frozenset(
    {"INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE", "GRANT", "REVOKE", "VACUUM", "ANALYZE"}
)
PITSTOP_SHOWS = frozenset(s.name.split()[1] for s in STATEMENTS if s.name.startswith("SHOW "))


@dataclass(frozen=True)
class Statement:
    """One statement of a query string: its text, where it starts there, and which way it goes."""

    text: str
    offset: int
    """0-based offset of the statement's first character in the query string the client sent."""
    line: int
    col: int
    route: str  # query | pitstop | set | show | tx | session | cursor | copy | write | empty
    words: tuple[str, ...]

    @property
    def param_count(self) -> int:
        found = [int(m.group(1)) for m in _PLACEHOLDER.finditer(self.text) if m.group(1)]
        return max(found, default=0)


def leading_words(text: str, n: int = 3) -> tuple[str, ...]:
    """The first ``n`` words of a statement, upper case, comments skipped."""
    start = _LEADING.match(text)
    rest = text[start.end() if start else 0 :]
    return tuple(w.upper() for w in _WORDS.findall(rest[:200])[:n])


def route_of(words: tuple[str, ...]) -> str:
    first = words[0] if words else ""
    second = words[1] if len(words) > 1 else ""
    if not first:
        return "empty"
    if first in QUERY_WORDS:
        return "query"
    if first in ("BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"):
        return "tx"
    if first == "SHOW":
        return "pitstop" if second in PITSTOP_SHOWS else "show"
    if first in ("SET", "RESET"):
        return "set"
    if first in ("DISCARD", "DEALLOCATE", "LISTEN", "UNLISTEN", "NOTIFY"):
        return "session"
    if first in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
        return "cursor"
    if first == "COPY":
        return "copy"
    if first in TABLE_WRITES:
        return "write"
    return "pitstop"


def split(query: str) -> list[Statement]:
    """The statements of a query string, with their positions (psql sends one at a time; other
    clients may send several separated by ';')."""
    out = []
    line_starts = [0] + [i + 1 for i, c in enumerate(query) if c == "\n"]
    for text, line, col in split_statements(query):
        offset = line_starts[line - 1] + col - 1
        words = leading_words(text)
        out.append(Statement(text, offset, line, col, route_of(words), words))
    return out


def inner_statement(stmt: Statement, start: int, end: int | None = None) -> Statement:
    """The statement from ``start`` to ``end`` in ``stmt`` (a cursor's query, a COPY's), where
    it is in the client's string."""
    text, before = stmt.text[start:end], stmt.text[:start]
    line = stmt.line + before.count("\n")
    col = len(before) - before.rfind("\n") if "\n" in before else stmt.col + len(before)
    words = leading_words(text)
    return Statement(text, stmt.offset + start, line, col, route_of(words), words)


def error_position(err: PitstopError, stmt: Statement, query: str) -> int | None:
    """1-based character position of a positioned pitstop error in the client's query string."""
    if err.line is None or err.col is None:  # under the name it is about, else the statement's start
        return stmt.offset + 1 + (subject_offset(stmt.text, err.subject) or 0)
    line_starts = [0] + [i + 1 for i, c in enumerate(query) if c == "\n"]
    if err.line - 1 >= len(line_starts):
        return None
    return line_starts[err.line - 1] + err.col


def name_position(subject: str, stmt: Statement) -> int | None:
    """1-based position in the client's query string of the first use of a name in ``stmt`` (an
    identifier token, case-insensitive unless quoted; ``name(``: a function's call), or None
    when the statement does not name it (it came from pitstop's rewriting)."""
    call = subject.endswith("(")
    parts = (subject[:-1] if call else subject).split(".")  # table.column: at the table's name
    try:
        tokens = Tokenizer().tokenize(stmt.text)
    except Exception:  # noqa: BLE001 - a statement sqlglot cannot tokenize: no position
        return None

    def named(i: int, name: str) -> bool:
        if i >= len(tokens) or tokens[i].token_type == TokenType.STRING:
            return False
        token = tokens[i]
        if token.token_type == TokenType.IDENTIFIER:
            return token.text == name
        return token.text.lower() == name.lower()

    for i in range(len(tokens)):
        if not all(named(i + 2 * k, part) for k, part in enumerate(parts)):
            continue
        if any(tokens[i + 2 * k - 1].token_type != TokenType.DOT for k in range(1, len(parts))):
            continue
        after = i + 2 * len(parts) - 1
        if call and (after >= len(tokens) or tokens[after].token_type != TokenType.L_PAREN):
            continue
        return stmt.offset + tokens[i].start + 1  # (a quoted name's token starts at its quote)
    return None


def strip_comments(text: str) -> str:
    match = _LEADING.match(text)
    return text[match.end() if match else 0 :]
