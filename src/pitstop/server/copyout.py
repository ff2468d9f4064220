"""``COPY ... TO STDOUT``: a query's rows in PostgreSQL's text or CSV format, as psql's ``\\copy
... TO 'file'``, psycopg's ``cursor.copy()`` and asyncpg's ``copy_from_query`` ask for them.

1. What is copied: ``COPY (query) TO STDOUT`` or ``COPY table [(column, ...)] TO STDOUT``, which
   is ``SELECT column, ... FROM table``; the query runs as any client query does (read-only).
2. How (:func:`parse`): PostgreSQL's options, ``WITH (FORMAT csv, HEADER, DELIMITER ';', NULL '',
   QUOTE '"', ESCAPE '"', FORCE_QUOTE (a, b) | *, ENCODING 'UTF8')``, or the older words
   ``[WITH] [DELIMITER [AS] 'c'] [NULL [AS] 'n'] [CSV [HEADER] [QUOTE [AS] 'q'] [ESCAPE [AS] 'e']
   [FORCE QUOTE a, b | *]]`` that psql passes on from ``\\copy``. ``FORMAT binary`` is refused.
3. Each row is one CopyData message (the header first), written as PostgreSQL's ``CopyOneRowTo``
   writes it (:class:`Lines`): values in their text output form (:func:`pgtypes.encode`); in text
   format a NULL is ``\\N`` and backslashes, control characters and the delimiter are escaped; in
   CSV a NULL is unquoted and empty, and a value is quoted when it holds the delimiter, the quote,
   a line break, equals the NULL text, or is ``\\.`` alone.

``COPY ... FROM`` is refused: pitstop's tables are written by jobs. ``COPY ... TO 'file'`` and ``TO
PROGRAM`` are refused too: the server writes no files for its clients.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pitstop.server import sqlstate
from pitstop.server.pgtypes import Column, PgType, encode
from pitstop.server.sqlstate import WireError

__all__ = ["CopyOut", "Lines", "parse"]

_TOKEN = re.compile(
    r"""\s*(?:(?P<string>[Ee]?'(?:[^']|'')*')|(?P<quoted>"(?:[^"]|"")+")|(?P<word>[A-Za-z_][A-Za-z_0-9$]*)"""
    r"""|(?P<number>-?\d+)|(?P<symbol>[(),.*;]))""",
    re.S,
)
_SKIP = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_OPEN_QUOTES = {"'": "'", '"': '"'}
WRITTEN_BY_JOBS_HINT = (
    "to fill a table, create a job: CREATE JOB j AS INSERT INTO sink SELECT ... FROM source"
)


@dataclass(frozen=True)
class CopyOut:
    """A ``COPY ... TO STDOUT``: what it copies and how."""

    query: str
    """The PostgreSQL query whose rows are copied."""
    query_start: int | None
    """Where ``query`` starts in the statement's text; None when it is made from a table's name."""
    csv: bool = False
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'
    force_quote: frozenset[str] | None = None
    """Columns whose values are always quoted (CSV); ``*``: all of them."""


# -- the statement --------------------------------------------------------------------------------
class _Tokens:
    """The words, strings and symbols of a statement, from a position on."""

    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def _match(self) -> re.Match[str] | None:
        skipped = _SKIP.match(self.text, self.pos)
        found = _TOKEN.match(self.text, skipped.end() if skipped else self.pos)
        return found if found is not None and found.lastgroup is not None else None

    def peek(self) -> tuple[str, str] | None:
        found = self._match()
        return None if found is None else (str(found.lastgroup), found.group(str(found.lastgroup)))

    def next(self) -> tuple[str, str] | None:
        found = self._match()
        if found is None:
            rest = self.text[self.pos :].strip()
            if rest and rest != ";":
                raise _syntax(f'syntax error in COPY at or near "{rest[:20]}"')
            return None
        self.pos = found.end()
        return str(found.lastgroup), found.group(str(found.lastgroup))

    def word(self) -> str:
        """The next token, upper case if a keyword ('' at the end)."""
        token = self.next()
        if token is None:
            return ""
        return token[1].upper() if token[0] == "word" else token[1]

    def at(self, *words: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "word" and token[1].upper() in words


def _syntax(message: str) -> WireError:
    return WireError(
        sqlstate.SYNTAX_ERROR,
        message,
        hint="write COPY (SELECT ...) TO STDOUT [WITH (FORMAT csv, HEADER)] or COPY table TO STDOUT",
    )


def _closing_paren(text: str, start: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``start`` (strings, quoted names, comments
    and dollar quotes skipped); -1 if there is none."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in _OPEN_QUOTES:
            i = text.find(c, i + 1)
            while i != -1 and text[i + 1 : i + 2] == c:  # '' or "" inside
                i = text.find(c, i + 2)
            if i == -1:
                return -1
        elif text.startswith("--", i):
            i = text.find("\n", i)
            if i == -1:
                return -1
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2) + 1
            if i == 0:
                return -1
        elif c == "$" and (tag := re.match(r"\$[A-Za-z_0-9]*\$", text[i:])):
            i = text.find(tag.group(0), i + len(tag.group(0))) + len(tag.group(0)) - 1
            if i < len(tag.group(0)) - 1:
                return -1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _string(token: tuple[str, str] | None, option: str) -> str:
    if token is None or token[0] != "string":
        raise _syntax(f"COPY option {option} takes a quoted value, such as {option} ','")
    text = token[1]
    escaped = text[0] in "Ee"
    value = text[2:-1] if escaped else text[1:-1]
    value = value.replace("''", "'")
    if escaped:
        value = value.encode("latin-1", "backslashreplace").decode("unicode_escape")
    return value


def _source(text: str, tokens: _Tokens) -> tuple[str, int | None]:
    """The query a COPY copies, and where it starts in ``text`` (None: made from a table name)."""
    token = tokens.next()
    if token == ("symbol", "("):
        start = tokens.pos - 1
        end = _closing_paren(text, start)
        if end == -1:
            raise _syntax("COPY (query: the parenthesis is not closed")
        tokens.pos = end + 1
        return text[start + 1 : end], start + 1
    if token is None or token[0] not in ("word", "quoted"):
        raise _syntax("COPY takes (a query) or a table's name")
    table = token[1]
    while tokens.peek() == ("symbol", "."):
        tokens.next()
        part = tokens.next()
        if part is None or part[0] not in ("word", "quoted"):
            raise _syntax(f"COPY: a name is missing after {table}.")
        table += "." + part[1]
    columns = "*"
    if tokens.peek() == ("symbol", "("):
        tokens.next()
        names = []
        while True:
            name = tokens.next()
            if name is None or name[0] not in ("word", "quoted"):
                raise _syntax(f"COPY {table} (...): write the columns' names, separated by commas")
            names.append(name[1])
            separator = tokens.next()
            if separator == ("symbol", ")"):
                break
            if separator != ("symbol", ","):
                raise _syntax(f"COPY {table} (...): write the columns' names, separated by commas")
        columns = ", ".join(names)
    return f"SELECT {columns} FROM {table}", None


def parse(text: str) -> CopyOut:
    """A ``COPY ... TO STDOUT`` statement; WireError for COPY FROM, TO a file, and bad options."""
    lead = _SKIP.match(text)
    tokens = _Tokens(text, lead.end() if lead else 0)
    tokens.word()  # COPY
    query, query_start = _source(text, tokens)
    direction = tokens.word()
    if direction == "FROM":
        raise WireError(
            sqlstate.READ_ONLY_TRANSACTION,
            "COPY ... FROM is not accepted: pitstop's tables are written by jobs, not by clients",
            hint=WRITTEN_BY_JOBS_HINT,
        )
    if direction != "TO":
        raise _syntax("COPY ... TO STDOUT: TO is missing")
    target = tokens.word()
    if target != "STDOUT":
        raise WireError(
            sqlstate.INSUFFICIENT_PRIVILEGE,
            f"COPY ... TO {target or 'nothing'} is not accepted: "
            "pitstop's server writes no files for its clients",
            hint="copy to the client instead: COPY ... TO STDOUT (psql: \\copy ... TO 'file')",
        )
    return _options(tokens, CopyOut(query, query_start))


_OPTIONS = frozenset({"FORMAT", "HEADER", "DELIMITER", "NULL", "QUOTE", "ESCAPE", "FORCE_QUOTE", "ENCODING"})


def _options(tokens: _Tokens, copy: CopyOut) -> CopyOut:
    """The options after ``TO STDOUT``, in either syntax (step 2), checked as PostgreSQL does."""
    given: dict[str, Any] = {}
    if tokens.at("WITH"):
        tokens.next()
    if tokens.peek() == ("symbol", "("):
        tokens.next()
        while True:
            name = tokens.word()
            if name not in _OPTIONS:
                raise _syntax(f'COPY option "{name.lower()}" is not recognized')
            if name in given:
                raise _syntax(f"COPY option {name} is given twice")
            given[name] = _new_value(tokens, name)
            separator = tokens.word()
            if separator == ")":
                break
            if separator != ",":
                raise _syntax("COPY (options): separate them with commas and close the parenthesis")
    else:
        given = _old_options(tokens)
    if tokens.next() not in (None, ("symbol", ";")):
        raise _syntax("COPY ... TO STDOUT: unexpected words after the options")
    return _checked(copy, given)


def _new_value(tokens: _Tokens, name: str) -> Any:
    token = tokens.peek()
    if name == "FORCE_QUOTE":
        if token == ("symbol", "*"):
            tokens.next()
            return "*"
        return _column_list(tokens, name)
    if name == "HEADER":
        if token is not None and token[0] in ("word", "string", "number") and token[1].upper() != "MATCH":
            value = tokens.next()[1].strip("'").lower()  # type: ignore[index]
            if value not in ("true", "on", "1", "false", "off", "0"):
                raise _syntax(f'COPY option HEADER takes a Boolean value, not "{value}"')
            return value in ("true", "on", "1")
        return True
    if name == "FORMAT":
        word = tokens.next()
        if word is None or word[0] not in ("word", "string"):
            raise _syntax("COPY option FORMAT takes text or csv")
        return word[1].strip("'").lower()
    return _string(tokens.next(), name)


def _column_list(tokens: _Tokens, name: str) -> frozenset[str]:
    if tokens.next() != ("symbol", "("):
        raise _syntax(f"COPY option {name} takes * or a list of columns in parentheses")
    names = set()
    while True:
        token = tokens.next()
        if token is None or token[0] not in ("word", "quoted"):
            raise _syntax(f"COPY option {name}: write the columns' names, separated by commas")
        names.add(token[1][1:-1].replace('""', '"') if token[0] == "quoted" else token[1].lower())
        separator = tokens.word()
        if separator == ")":
            return frozenset(names)
        if separator != ",":
            raise _syntax(f"COPY option {name}: write the columns' names, separated by commas")


def _old_options(tokens: _Tokens) -> dict[str, Any]:
    """``[BINARY] [DELIMITER [AS] 'c'] [NULL [AS] 'n'] [CSV [HEADER] [QUOTE ...] [ESCAPE ...]
    [FORCE QUOTE ...]]``, in any order, as PostgreSQL's grammar takes them."""
    given: dict[str, Any] = {}
    while tokens.peek() not in (None, ("symbol", ";")):
        word = tokens.word()
        if word in ("DELIMITER", "NULL", "QUOTE", "ESCAPE"):
            if tokens.at("AS"):
                tokens.next()
            given[word] = _string(tokens.next(), word)
        elif word == "BINARY":
            given["FORMAT"] = "binary"
        elif word == "CSV":
            given["FORMAT"] = "csv"
        elif word == "HEADER":
            given["HEADER"] = True
        elif word == "FORCE" and tokens.at("QUOTE"):
            tokens.next()
            if tokens.peek() == ("symbol", "*"):
                tokens.next()
                given["FORCE_QUOTE"] = "*"
                continue
            names = set()
            while True:
                token = tokens.next()
                if token is None or token[0] not in ("word", "quoted"):
                    raise _syntax("COPY ... FORCE QUOTE: write the columns' names, separated by commas")
                names.add(token[1][1:-1].replace('""', '"') if token[0] == "quoted" else token[1].lower())
                if tokens.peek() != ("symbol", ","):
                    break
                tokens.next()
            given["FORCE_QUOTE"] = frozenset(names)
        else:
            raise _syntax(f'COPY option "{word.lower()}" is not recognized')
    return given


def _checked(copy: CopyOut, given: dict[str, Any]) -> CopyOut:
    form = given.get("FORMAT", "text")
    if form == "binary":
        raise WireError(
            sqlstate.FEATURE_NOT_SUPPORTED,
            "COPY ... TO STDOUT in FORMAT binary is not supported by pitstop",
            hint="use FORMAT text or FORMAT csv",
        )
    if form not in ("text", "csv"):
        raise _syntax(f'COPY format "{form}" is not recognized: use text or csv')
    csv = form == "csv"
    for option in ("QUOTE", "ESCAPE", "FORCE_QUOTE"):
        if option in given and not csv:
            raise WireError(
                sqlstate.FEATURE_NOT_SUPPORTED,
                f"COPY {option.replace('_', ' ')} is available only in CSV mode",
                hint="add FORMAT csv (or CSV) to the options",
            )
    encoding = str(given.get("ENCODING", "UTF8")).upper().replace("-", "")
    if encoding != "UTF8":
        raise WireError(
            sqlstate.FEATURE_NOT_SUPPORTED,
            f"COPY ... ENCODING '{given['ENCODING']}' is not supported: pitstop speaks UTF8 only",
            hint="leave ENCODING out, or write ENCODING 'UTF8'",
        )
    delimiter = given.get("DELIMITER", "," if csv else "\t")
    quote, escape = given.get("QUOTE", '"'), given.get("ESCAPE", given.get("QUOTE", '"'))
    for option, value in (("DELIMITER", delimiter), ("QUOTE", quote), ("ESCAPE", escape)):
        if len(value) != 1 or len(value.encode()) != 1 or value in "\r\n":
            raise WireError(
                sqlstate.INVALID_PARAMETER_VALUE,
                f"COPY {option.lower()} must be a single one-byte character other than a line break",
            )
    if not csv and delimiter in "\\.abcdefghijklmnopqrstuvwxyz0123456789":  # as PostgreSQL
        raise WireError(sqlstate.INVALID_PARAMETER_VALUE, f'COPY delimiter cannot be "{delimiter}"')
    if csv and delimiter == quote:
        raise WireError(sqlstate.INVALID_PARAMETER_VALUE, "COPY delimiter and quote must be different")
    null = given.get("NULL", "" if csv else "\\N")
    if "\n" in null or "\r" in null:
        raise WireError(
            sqlstate.INVALID_PARAMETER_VALUE, "COPY null representation cannot use newline or carriage return"
        )
    if delimiter in null:
        raise WireError(
            sqlstate.INVALID_PARAMETER_VALUE, "COPY delimiter must not appear in the NULL specification"
        )
    force = given.get("FORCE_QUOTE")
    return CopyOut(
        copy.query,
        copy.query_start,
        csv=csv,
        header=bool(given.get("HEADER", False)),
        delimiter=delimiter,
        null=null,
        quote=quote,
        escape=escape,
        force_quote=None if force is None else frozenset({"*"}) if force == "*" else force,
    )


# -- the lines ------------------------------------------------------------------------------------
def _text(value: Any, pgtype: PgType, zone: str) -> str:
    """A value in PostgreSQL's text output form (a time with a zone in the session's)."""
    return (encode(value, pgtype, zone=zone) or b"").decode()


_TEXT_ESCAPES = {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


class Lines:
    """The CopyData payloads of a COPY of ``rows``: the header, then one line per row (step 3)."""

    def __init__(
        self, copy: CopyOut, columns: tuple[Column, ...], rows: Iterable[tuple[Any, ...]], zone: str = "UTC"
    ) -> None:
        self.copy = copy
        self.zone = zone
        self.columns = columns
        self.width = len(columns)
        self._source = rows
        self.rows = 0
        """Rows written so far (COPY's tag)."""
        force = copy.force_quote or frozenset()
        self._forced = [("*" in force or c.name in force) for c in columns]
        # Control characters first: a tab delimiter is written \t, as PostgreSQL does.
        self._text = str.maketrans({copy.delimiter: "\\" + copy.delimiter} | _TEXT_ESCAPES)

    def __iter__(self) -> Iterator[bytes]:
        if self.copy.header:
            yield self._line([c.name for c in self.columns], [False] * len(self.columns))
        types = [c.type for c in self.columns]
        for row in self._source:
            values = [None if v is None else _text(v, t, self.zone) for v, t in zip(row, types, strict=True)]
            self.rows += 1
            yield self._line(values, self._forced)

    def _line(self, values: list[str | None], forced: list[bool]) -> bytes:
        copy = self.copy
        if copy.csv:
            single = len(values) == 1
            fields = [
                copy.null if v is None else self._csv(v, force, single)
                for v, force in zip(values, forced, strict=True)
            ]
        else:
            fields = [copy.null if v is None else v.translate(self._text) for v in values]
        return (copy.delimiter.join(fields) + "\n").encode()

    def _csv(self, value: str, force: bool, single: bool) -> str:
        copy = self.copy
        quoted = (
            force
            or value == copy.null
            or (single and value == "\\.")
            or any(c in value for c in (copy.delimiter, copy.quote, "\n", "\r"))
        )
        if not quoted:
            return value
        escaped = "".join(copy.escape + c if c in (copy.quote, copy.escape) else c for c in value)
        return copy.quote + escaped + copy.quote
