"""SQL cursors: ``DECLARE``, ``FETCH``, ``MOVE`` and ``CLOSE``, as psycopg's server-side cursors
(``conn.cursor(name="x")``) and psql send them.

A cursor reads one read-only query a few rows at a time. Each cursor runs its query on a DuckDB
connection of its own, in a ``READ ONLY`` transaction, so the session's other statements (queries,
other cursors) go on beside it and the cursor reads the data as they were when it was declared.

1. ``DECLARE name [NO SCROLL] CURSOR [WITH HOLD | WITHOUT HOLD] FOR query``: only inside a
   transaction block, unless ``WITH HOLD`` (as PostgreSQL); only a query (``SELECT``, ``WITH``,
   ``VALUES``, ``TABLE``). ``SCROLL`` and ``BINARY`` are refused: pitstop's cursors read forward
   only, and in the format each FETCH asks for.
2. ``FETCH [NEXT | FORWARD [n | ALL] | n | ALL] [FROM | IN] name``: the next rows (tag ``FETCH
   n``); ``MOVE`` skips them (tag ``MOVE n``). Backward and absolute moves are refused. The rows
   of one FETCH are read before they are sent, so an error in them fails the FETCH itself.
3. ``CLOSE name`` / ``CLOSE ALL``; a Describe of the portal ``name`` describes the cursor's rows
   (psycopg asks after DECLARE).
4. When the transaction block ends, a cursor ``WITHOUT HOLD`` is closed; at COMMIT a cursor ``WITH
   HOLD`` reads its remaining rows into memory and its DuckDB transaction ends (one declared
   ``WITH HOLD`` outside a block does so at once); at ROLLBACK the cursors declared in the block
   are closed.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pitstop.server import sqlstate
from pitstop.server.pgtypes import Column
from pitstop.server.sqlstate import WireError

__all__ = ["Declare", "Fetch", "SqlCursor", "SqlCursors", "close_target", "parse_declare", "parse_fetch"]

log = logging.getLogger(__name__)

_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_NAME = r'"(?:[^"]|"")+"|[A-Za-z_][A-Za-z_0-9$]*'
_DECLARE = re.compile(
    rf"DECLARE\s+(?P<name>{_NAME})\s+(?P<options>(?:[A-Za-z]+\s+)*?)CURSOR\b\s*"
    r"(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\b\s*",
    re.I | re.S,
)
_FETCH = re.compile(
    rf"(?P<verb>FETCH|MOVE)\b\s*(?P<direction>.*?)\s*(?:\b(?:FROM|IN)\s+)?(?P<name>{_NAME})\s*;?\s*$",
    re.I | re.S,
)
_CLOSE = re.compile(rf"CLOSE\s+(?P<name>{_NAME})\s*;?\s*$", re.I | re.S)
FORWARD_ONLY_HINT = "pitstop's cursors read forward only: FETCH n, FETCH FORWARD n or FETCH ALL"


def _name(text: str) -> str:
    """A cursor's name as PostgreSQL reads it: quoted as written, else in lower case."""
    return text[1:-1].replace('""', '"') if text.startswith('"') else text.lower()


def _body(text: str) -> tuple[str, int]:
    """The statement without its leading comments, and where that starts in ``text``."""
    lead = _LEADING.match(text)
    start = lead.end() if lead else 0
    return text[start:], start


# -- statements ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Declare:
    name: str
    hold: bool
    query_start: int
    """Where the cursor's query starts in the statement's text."""


def parse_declare(text: str) -> Declare:
    """``DECLARE name ... CURSOR ... FOR query``; WireError for what pitstop does not declare."""
    body, start = _body(text)
    found = _DECLARE.match(body)
    if found is None:
        raise WireError(
            sqlstate.SYNTAX_ERROR,
            "syntax error in DECLARE: write DECLARE name CURSOR [WITH HOLD] FOR SELECT ...",
            start + 1,
        )
    name = _name(found.group("name"))
    options = found.group("options").upper().split()
    for option in options:
        if option not in ("NO", "SCROLL", "BINARY", "ASENSITIVE", "INSENSITIVE"):
            raise WireError(
                sqlstate.SYNTAX_ERROR, f'syntax error in DECLARE of cursor "{name}" at or near "{option}"'
            )
    if "SCROLL" in options and "NO" not in options:
        raise WireError(
            sqlstate.FEATURE_NOT_SUPPORTED,
            f'cursor "{name}" cannot be declared SCROLL: pitstop\'s cursors read forward only',
            hint="declare it without SCROLL (or NO SCROLL)",
        )
    if "BINARY" in options:
        raise WireError(
            sqlstate.FEATURE_NOT_SUPPORTED,
            f'cursor "{name}" cannot be declared BINARY',
            hint="declare it without BINARY; a client asks for binary rows when it fetches (Bind's formats)",
        )
    hold = (found.group("hold") or "").upper() == "WITH"
    return Declare(name, hold, start + found.end())


@dataclass(frozen=True)
class Fetch:
    verb: str  # FETCH | MOVE
    name: str
    count: int | None
    """Rows to fetch or skip; None: all the rest."""


def parse_fetch(text: str) -> Fetch:
    """``FETCH``/``MOVE`` forward; WireError (55000) for a backward or absolute move."""
    body, start = _body(text)
    found = _FETCH.match(body)
    verb = found.group("verb").upper() if found else "FETCH"
    if found is None:
        raise WireError(
            sqlstate.SYNTAX_ERROR, f"syntax error in {verb}: write {verb} [n | ALL] FROM name", start + 1
        )
    name = _name(found.group("name"))
    words = found.group("direction").upper().split()
    if words[:1] == ["FORWARD"]:
        words = words[1:] or ["1"]
    if words in ([], ["NEXT"]):
        count: int | None = 1
    elif words == ["ALL"]:
        count = None
    elif len(words) == 1 and re.fullmatch(r"[+-]?\d+", words[0]):
        count = int(words[0])
    elif words and words[0] in ("PRIOR", "FIRST", "LAST", "ABSOLUTE", "RELATIVE", "BACKWARD"):
        raise WireError(
            sqlstate.PREREQUISITE_STATE,
            f'{verb} {" ".join(words)} of cursor "{name}": the cursor can only scan forward',
            hint=FORWARD_ONLY_HINT,
        )
    else:
        raise WireError(
            sqlstate.SYNTAX_ERROR, f'syntax error in {verb} of cursor "{name}": "{found.group("direction")}"'
        )
    if count is not None and count <= 0:
        raise WireError(
            sqlstate.PREREQUISITE_STATE,
            f'{verb} {count} of cursor "{name}": the cursor can only scan forward'
            + (" (0 is the current row again)" if count == 0 else ""),
            hint=FORWARD_ONLY_HINT,
        )
    return Fetch(verb, name, count)


def close_target(text: str) -> str | None:
    """The name ``CLOSE`` closes; None for ``CLOSE ALL``."""
    body, start = _body(text)
    found = _CLOSE.match(body)
    if found is None:
        raise WireError(
            sqlstate.SYNTAX_ERROR, "syntax error in CLOSE: write CLOSE name or CLOSE ALL", start + 1
        )
    word = found.group("name")
    return None if word.upper() == "ALL" else _name(word)


# -- cursors ---------------------------------------------------------------------------------------
@dataclass
class SqlCursor:
    """One declared cursor: its query runs on ``connection`` until it is read to its end, held
    (its rows then wait in ``held``) or closed."""

    name: str
    columns: tuple[Column, ...]
    hold: bool
    in_block: bool
    """Declared inside the transaction block now open (a ROLLBACK closes it)."""
    connection: duckdb.DuckDBPyConnection | None
    release: Callable[[duckdb.DuckDBPyConnection], None]
    """Ends the connection's transaction and gives it back (the session's catalog)."""
    held: deque[tuple[Any, ...]] | None = None
    statement: str = ""  # the DECLARE as the client wrote it (pg_cursors shows it)
    created: float = field(default_factory=time.time)

    def read(self, count: int | None) -> list[tuple[Any, ...]]:
        """The next ``count`` rows (None: all the rest)."""
        if self.held is not None:
            n = len(self.held) if count is None else min(count, len(self.held))
            return [self.held.popleft() for _ in range(n)]
        if self.connection is None:
            return []
        rows = self.connection.fetchall() if count is None else self.connection.fetchmany(count)
        if count is None or len(rows) < count:  # read to the end: its transaction is done
            self._release()
        return rows

    def hold_rows(self) -> None:
        """Read the rest into memory and end the DuckDB transaction (WITH HOLD at COMMIT)."""
        if self.connection is not None and self.held is None:
            self.held = deque(self.connection.fetchall())
            self._release()

    def close(self) -> None:
        self.held = None
        self._release()

    def _release(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            self.release(connection)


@dataclass
class SqlCursors:
    """A session's cursors, by name. ``interrupt()`` may be called from another thread."""

    open: dict[str, SqlCursor] = field(default_factory=dict)
    busy: duckdb.DuckDBPyConnection | None = None
    """The connection a DECLARE, FETCH or MOVE runs on now (a cancel interrupts it)."""

    @contextmanager
    def running(self, connection: duckdb.DuckDBPyConnection | None) -> Iterator[None]:
        """While a statement runs ``connection``'s query: a cancel interrupts it."""
        self.busy = connection
        try:
            yield
        finally:
            self.busy = None

    def check_new(self, name: str) -> None:
        if name in self.open:
            raise WireError(
                sqlstate.DUPLICATE_CURSOR,
                f'cursor "{name}" already exists',
                hint=f'CLOSE "{name}" first, or declare the cursor under another name',
            )

    def get(self, name: str) -> SqlCursor:
        cursor = self.open.get(name)
        if cursor is None:
            raise WireError(
                sqlstate.INVALID_CURSOR_NAME,
                f'cursor "{name}" does not exist',
                hint="DECLARE it first (a cursor without WITH HOLD is closed when its transaction ends)",
            )
        return cursor

    def add(self, cursor: SqlCursor) -> None:
        self.check_new(cursor.name)
        self.open[cursor.name] = cursor

    def read(self, fetch: Fetch) -> list[tuple[Any, ...]]:
        cursor = self.get(fetch.name)
        with self.running(cursor.connection):
            return cursor.read(fetch.count)

    def close(self, name: str | None) -> None:
        """CLOSE name (34000 when there is none) or, with None, every cursor."""
        if name is not None:
            self.get(name).close()
            del self.open[name]
            return
        for cursor in self.open.values():
            cursor.close()
        self.open.clear()

    def end_transaction(self, committed: bool) -> None:
        """The transaction block ended (step 4): cursors close, or hold their rows. Every cursor
        is dealt with; the first error holding one is raised after (that cursor is closed)."""
        failure: duckdb.Error | None = None
        for name, cursor in list(self.open.items()):
            keep = cursor.hold and (committed or not cursor.in_block)
            if keep and committed:
                try:
                    cursor.hold_rows()
                except duckdb.Error as exc:
                    failure, keep = failure or exc, False
            if keep:
                cursor.in_block = False
            else:
                cursor.close()
                del self.open[name]
        if failure is not None:
            raise failure

    def interrupt(self) -> None:
        busy = self.busy
        if busy is not None:
            try:
                busy.interrupt()
            except duckdb.Error:
                log.debug("interrupting a cursor's query", exc_info=True)
